//! # raftq-proto
//!
//! The client gRPC API of `proto/raftq.proto` (package `raftq.v1`): the protobuf messages, the
//! `Queues` server that `raftq-api` serves and the client that tests and tools use. A crate of
//! its own so that a client links neither the server nor its storage.

/// Generated protobuf messages, server and client of package `raftq.v1`.
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("raftq.v1");
}
