//! # raftq-node
//!
//! A raftq cluster member: openraft over the RocksDB store of `raftq-store`, peer traffic over
//! gRPC (`proto/raft.proto`), client requests routed to the leader from any node, linearizable
//! reads, and the leader-only timer that proposes ticks when the state machine has something
//! due. [`Node`] is the whole face the front ends see: writes, linearizable reads and membership
//! changes through the leader, this node's [`NodeStatus`], its applied state for reads that may
//! lag, and the answers to its clients' parked receives. Openraft and the store stay inside;
//! tests that look inside build with the `testing` feature.

mod admission;
mod backup;
mod clock;
mod config;
mod error;
mod formation;
mod gate;
mod group_commit;
mod groups;
mod member;
mod network;
mod node;
mod pace;
#[cfg(feature = "testing")]
mod probe;
mod protocol;
mod query;
mod receiving;
mod router;
mod sections;
mod service;
mod snapshots;
mod space;
mod timer;
pub mod tls;

/// Generated gRPC code for `proto/raft.proto`.
pub mod rpc {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("raftq.raft.v1");
}

pub use clock::{now_ms, WallClock};
pub use config::NodeConfig;
pub use error::{Halted, NodeError, StartError};
pub use member::longpoll::LongPoll;
pub use member::membership::{Change, ChangeError, ChangeResult, LONGEST as LONGEST_CHANGE};
pub use member::status::{GroupStatus, Member, NodeStatus, ReplicaStatus, Role};
pub use network::{refused, Answer, MemoryNetwork, Method as PeerMethod};
pub use node::{GroupDigest, Node, PeerTransport};
pub use protocol::PEER_PROTOCOL;
pub use query::{question, Query, QueryResult, Question};
pub use raftq_store::backup::BackupSummary;
pub use raftq_store::sync_times::{log_sync_times, SyncTimesReading};
pub use raftq_store::{Delivered, NodeId, Response, WaitSlot};
pub use sections::{ChunkWriter, CHUNKS_AHEAD};
pub use service::Delivery;
pub use space::{Filesystem, Refusing, SpaceReading};

#[cfg(feature = "testing")]
pub use network::{CallError, Partition};
#[cfg(feature = "testing")]
pub use probe::{call_peer, send_snapshot_chunk};
