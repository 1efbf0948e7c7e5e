//! raftq's Raft type configuration: engine entries go into the log, [`Response`]s come out of the
//! state machine.

use std::io::Cursor;

use raftq_engine::{EngineError, Outcome, Payload};
use serde::{Deserialize, Serialize};

openraft::declare_raft_types!(
    /// Log entries carry [`raftq_engine::Entry`]; node ids are `u64`; snapshots are byte buffers.
    pub TypeConfig:
        D = raftq_engine::Entry,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
);

/// A node's id in the cluster.
pub type NodeId = u64;

/// What applying one log entry answers to its proposer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Response {
    /// The command's outcome; `None` for Raft's own entries (blank, membership).
    pub result: Option<Result<Outcome, EngineError>>,
    /// Payloads of the messages the outcome delivers, by storage key.
    pub payloads: Vec<(u64, Payload)>,
}
