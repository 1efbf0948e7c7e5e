//! Errors of a node: what a client request can meet besides the engine's own refusals, and why a
//! node could not start.

use serde::{Deserialize, Serialize};

/// Why a request got no answer from the state machine. Serializable, because a leader answers
/// forwarded requests with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum NodeError {
    /// No leader took the request (election, partition, shutdown): a write was not proposed,
    /// so trying again cannot apply it twice.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A write may have been proposed but its outcome is unknown (not committed in time, or the
    /// leader or the connection to it went away before it answered): it may still commit, so
    /// the node does not try it again.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The leader this node knows has not answered it for a while (a one-way cut: the leader's
    /// appends arrive, this node's calls do not): the request was not sent, and another node
    /// may reach the leader.
    #[error(
        "unavailable: node {0} leads but does not answer this node (another node may reach it)"
    )]
    LeaderUnreachable(u64),
    /// This node is not the leader (only between nodes: the forwarder retries elsewhere).
    #[error("not the leader")]
    NotLeader(Option<u64>),
    /// The node's storage failed.
    #[error("storage failure: {0}")]
    Storage(String),
    /// The leader's disk is short of space (see `space`): the write was not proposed, and may
    /// succeed once space is freed.
    #[error("storage full: {0}")]
    StorageFull(String),
    /// The leader runs another build than this node (a rolling upgrade is under way), whose
    /// requests this node cannot send it (see `protocol`): the request was not sent.
    #[error("unavailable: {0}")]
    OtherBuild(String),
    /// The operation is not supported by a cluster laid out as this one is (a backup of a
    /// cluster of more than one Raft group): nothing was done.
    #[error("not supported: {0}")]
    Unsupported(String),
}

/// Why a node's Raft core stopped while the node ran.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "this node's Raft core stopped ({0}): it can no longer vote, replicate or apply. Restart it; \
     if its data directory is damaged it will say so, and `raftq cluster replace --id N` repairs \
     the cluster (docs/operations.md)"
)]
pub struct Halted(pub String);

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "the data directory is damaged ({0}): this node refuses to start, since it can no longer \
         vouch for what it acknowledged. Delete its data directory, start it again with the same \
         flags, and repair the cluster from a healthy node with `raftq cluster replace --id N` \
         (docs/operations.md)"
    )]
    Damaged(String),
    #[error("{0}")]
    Storage(#[from] raftq_store::StorageError),
    #[error("cannot read this node's enrolment: {0}")]
    Enrolment(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("raft: {0}")]
    Raft(String),
    #[error("peer listener: {0}")]
    Listener(#[from] std::io::Error),
}

impl StartError {
    /// A store that could not open: a damaged one told apart from one that cannot be read.
    pub(crate) fn opening(e: raftq_store::StorageError) -> StartError {
        if e.is_damage() {
            StartError::Damaged(e.to_string())
        } else {
            StartError::Storage(e)
        }
    }
}
