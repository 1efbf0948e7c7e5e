//! # raftq-node
//!
//! A raftq cluster member: openraft over the RocksDB store of `raftq-store`, peer traffic over
//! gRPC (`proto/raft.proto`), client requests routed to the leader from any node, linearizable
//! reads, and the leader-only timer that proposes ticks when the state machine has something
//! due. The public API ([`Node::write`], [`Node::read`]) is what the REST and gRPC front ends
//! call.

mod admission;
mod batcher;
pub mod clock;
pub mod error;
mod formation;
mod gate;
pub mod membership;
pub mod network;
mod node;
pub mod query;
mod routing;
mod service;
mod shared;
mod snapshots;
mod timer;

/// Generated gRPC code for `proto/raft.proto`.
pub mod rpc {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("raftq.raft.v1");
}

pub use clock::{now_ms, WallClock};
pub use error::{NodeError, StartError};
pub use membership::{Change, ChangeError, ChangeResult};
pub use node::{Node, NodeConfig};
pub use query::{Query, QueryResult};
