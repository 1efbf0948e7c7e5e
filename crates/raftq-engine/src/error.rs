//! Typed errors of the engine. Each carries what the API edge needs to answer with the spec's
//! error shape: a stable snake_case `code`, a message, and for invalid input the offending field.

use serde::{Deserialize, Serialize};

use crate::model::QueueRef;
use crate::placement::PlacementError;

/// Why a command or query was refused. A refused command changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum EngineError {
    /// A field of the request breaks a rule; `field` names it (JSON path style) and `rule` says why.
    #[error("{field}: {rule}")]
    InvalidArgument { field: String, rule: String },
    /// The queue reference names no queue of this account.
    #[error("queue not found: {0}")]
    QueueNotFound(String),
    /// A queue with this name already exists in the account.
    #[error("a queue named {0} already exists")]
    QueueExists(String),
    /// The queue is the dead-letter target of other queues and cannot be deleted.
    #[error("the queue is the dead-letter target of {}", names(.sources))]
    QueueInUse { sources: Vec<QueueRef> },
    /// The receipt's lease is no longer active (released, expired or replaced by a later
    /// receive), while its message is still in the queue.
    #[error("the lease of this receipt is no longer active")]
    LeaseExpired,
    /// The receipt's message is no longer in the queue: acknowledged, expired, moved to a
    /// dead-letter queue or purged. A lease that is no longer active, as
    /// [`EngineError::LeaseExpired`] (its code is the same), told apart for front ends that
    /// answer the two differently (SQS takes a repeated delete as done).
    #[error(
        "the lease of this receipt is no longer active: its message is no longer in the queue"
    )]
    MessageGone,
    /// The message is larger than the queue's `max_message_bytes`.
    #[error(
        "{field}: the message is {size} bytes, more than the queue's max_message_bytes of {max}"
    )]
    MessageTooLarge { field: String, size: u64, max: u64 },
    /// No move task of the account (or of the queue named) has this handle.
    #[error("move task not found: {0}")]
    MoveTaskNotFound(String),
    /// The queue already has a running move task; one runs at a time.
    #[error("the queue already has a running move task, {0}; cancel it or wait for it to end")]
    MoveTaskRunning(String),
    /// The move task has ended (completed, cancelled or failed) and cannot be cancelled.
    #[error("the move task has ended ({0}); only a running task can be cancelled")]
    MoveTaskNotRunning(String),
    /// No message of the queue with this ID waits for its `deliver_at`: it is due already
    /// (visible, leased or gone since), was cancelled, or was never sent with a `deliver_at`.
    #[error(
        "message {0} is not scheduled in this queue: it is due already, was cancelled, or was \
         never sent with deliver_at"
    )]
    NotScheduled(String),
    /// A change to the cluster's placement was refused (commands of the metadata group, which
    /// no client sends).
    #[error("placement: {0}")]
    Placement(#[from] PlacementError),
}

fn names(sources: &[QueueRef]) -> String {
    sources
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl EngineError {
    /// A refusal of an input field.
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> Self {
        EngineError::InvalidArgument {
            field: field.into(),
            rule: rule.into(),
        }
    }

    /// The spec's error code.
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::InvalidArgument { .. } => "invalid_argument",
            EngineError::QueueNotFound(_) => "queue_not_found",
            EngineError::QueueExists(_) => "queue_exists",
            EngineError::QueueInUse { .. } => "queue_in_use",
            EngineError::LeaseExpired | EngineError::MessageGone => "lease_expired",
            EngineError::MessageTooLarge { .. } => "message_too_large",
            EngineError::MoveTaskNotFound(_) => "move_task_not_found",
            EngineError::MoveTaskRunning(_) => "move_task_running",
            EngineError::MoveTaskNotRunning(_) => "move_task_not_running",
            EngineError::NotScheduled(_) => "message_not_scheduled",
            EngineError::Placement(_) => "placement_refused",
        }
    }

    /// The field the error is about, where there is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            EngineError::InvalidArgument { field, .. }
            | EngineError::MessageTooLarge { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// Shorthand for engine results.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// The field named by the refusal `result` must be (empty when it names none); a test's check
/// of which field a rule refused.
#[cfg(test)]
pub(crate) fn refused_field(result: Result<impl std::fmt::Debug>) -> String {
    result
        .expect_err("refused")
        .field()
        .unwrap_or("")
        .to_string()
}
