//! Errors of a node: what a client request can meet besides the engine's own refusals, and why a
//! node could not start.

use serde::{Deserialize, Serialize};

/// Why a request got no answer from the state machine. Serializable, because a leader answers
/// forwarded requests with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum NodeError {
    /// No leader could take the request in time (election, partition, shutdown); retryable.
    /// The request may or may not have been committed when it was a write.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The request was proposed but not committed in time: it may still commit. Not retried.
    #[error("timed out: {0}")]
    Timeout(String),
    /// This node is not the leader (only between nodes: the forwarder retries elsewhere).
    #[error("not the leader")]
    NotLeader(Option<u64>),
    /// The node's storage failed.
    #[error("storage failure: {0}")]
    Storage(String),
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the database: {0}")]
    Database(#[from] rocksdb::Error),
    #[error("cannot open the state machine: {0}")]
    StateMachine(#[from] raftq_store::OpenError),
    #[error("cannot open the log: {0}")]
    Log(#[from] raftq_store::LogStoreError),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("raft: {0}")]
    Raft(String),
    #[error("peer listener: {0}")]
    Listener(#[from] std::io::Error),
}
