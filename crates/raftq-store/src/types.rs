//! raftq's Raft type configuration: engine entries go into the log, [`Response`]s come out of the
//! state machine.

use std::sync::Arc;

use raftq_engine::{Command, EngineError, Outcome, Payload};
use serde::{Deserialize, Serialize};

openraft::declare_raft_types!(
    /// Log entries carry a [`CommandGroup`] and answer one [`Response`] per command; node
    /// ids are `u64`; snapshots are files (see `crate::snapshot`).
    pub TypeConfig:
        D = CommandGroup,
        R = Vec<Response>,
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = tokio::fs::File,
);

/// A node's id in the cluster.
pub type NodeId = u64;

/// One Raft log entry: commands proposed together (group commit: one entry, one fsync per
/// node), applied in order at the leader's time `now`.
///
/// The commands are shared: openraft reads an entry back once per follower it replicates to,
/// and each read is a clone; only applying it needs commands of its own. Encoded as a plain
/// sequence, as a `Vec` is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandGroup {
    pub now: u64,
    pub commands: Arc<Vec<Command>>,
}

/// What applying one command answers to its proposer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Response {
    /// The command's outcome.
    pub result: Option<Result<Outcome, EngineError>>,
    /// Payloads of the messages the outcome delivers, by storage key.
    pub payloads: Vec<(u64, Payload)>,
}
