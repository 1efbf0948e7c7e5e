//! What goes into the state machine (entries carrying a command and the leader's time) and what
//! comes out of it (outcomes). Inputs keep numbers signed and fields optional so that the engine,
//! not the transport, decides and reports every rule.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::placement::{PlacementCommand, PlacementOutcome};
use uuid::Uuid;

use crate::attributes::Attribute;
use crate::error::EngineError;
use crate::model::{
    AllowPolicy, MessageState, Millis, MoveFilter, MoveTaskView, QueueRef, QueueType, QueueView,
};
use crate::outbox::{MoveResult, Outgoing};
use crate::tags::TagChange;

/// One Raft log entry's payload: the leader's clock reading and the command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub now: Millis,
    pub command: Command,
}

/// Every state change the queue service knows.
pub type Command = CommandOf<QueueAttributes, NewMessage>;

/// The commands, over the shapes of queue settings (`A`) and messages (`M`): the two that grow
/// between log formats. Today's [`Command`] has today's shapes; the log entries of an earlier
/// format are read with that format's shapes and [`converted`](CommandOf::convert) (see
/// [`crate::legacy`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CommandOf<A, M> {
    CreateQueue {
        account: String,
        /// Stamped by the proposer; becomes the queue's UUID.
        queue_id: Uuid,
        name: String,
        attributes: A,
    },
    PatchQueue {
        account: String,
        queue: String,
        attributes: A,
    },
    DeleteQueue {
        account: String,
        queue: String,
    },
    Send {
        account: String,
        queue: String,
        message: M,
    },
    SendBatch {
        account: String,
        queue: String,
        entries: Vec<BatchEntry<M>>,
    },
    Receive {
        account: String,
        queue: String,
        max_messages: Option<i64>,
        lease_seconds: Option<i64>,
        /// FIFO queues: a retry with the same ID within 5 minutes replays the answer.
        attempt_id: Option<String>,
    },
    Ack {
        account: String,
        queue: String,
        receipts: Vec<String>,
    },
    ChangeLease {
        account: String,
        queue: String,
        receipt: String,
        lease_seconds: i64,
        /// With `lease_seconds` 0 (a release): how long the message stays invisible first.
        delay_seconds: Option<i64>,
    },
    Purge {
        account: String,
        queue: String,
    },
    /// Advances time only: expires leases and messages, moves messages to dead-letter queues,
    /// prunes deduplication records and takes the steps of move tasks that are due.
    Tick,
    /// Starts a task that moves the messages of a queue (a dead-letter queue, typically) back to
    /// their dead-letter sources or to a destination, paced, over the following ticks.
    StartMoveTask {
        account: String,
        queue: String,
        /// Stamped by the proposer; becomes the task's handle.
        task_handle: Uuid,
        task: MoveTaskInput,
    },
    /// Cancels a running move task, found by its handle among the account's queues (or among
    /// those of `queue` when given).
    CancelMoveTask {
        account: String,
        queue: Option<String>,
        task_handle: String,
    },
    /// A receive that, finding nothing, parks in the queue as `waiter` (an ID stamped by the
    /// proposer) for up to `wait_seconds`: later entries that make messages deliverable on the
    /// queue deliver them to the parked receives, oldest first, and answer each with a
    /// [`WaitAnswer`].
    ReceiveWait {
        account: String,
        queue: String,
        max_messages: Option<i64>,
        lease_seconds: Option<i64>,
        wait_seconds: i64,
        waiter: Uuid,
    },
    /// Ends the wait of `waiter` if it is still parked (its [`WaitAnswer`] then delivers nothing);
    /// of a wait that already ended, nothing.
    EndWait {
        waiter: Uuid,
    },
    /// Removes a message sent with a `deliver_at` that is still before its time; a message that
    /// is due (or gone) is refused with [`EngineError::NotScheduled`].
    CancelScheduled {
        account: String,
        queue: String,
        /// The message's ID.
        id: Uuid,
    },
    /// A change to the cluster's placement of queues in Raft groups (see
    /// [`crate::placement`]), applied in the metadata group.
    Place {
        change: PlacementCommand,
    },
    /// `command`, whose references to queues of other groups (a dead-letter target, the sources
    /// of an allow policy, a move task's destination) are the queues `elsewhere` describes, as
    /// the router read them in their groups.
    WithRemote {
        elsewhere: Elsewhere,
        command: Box<CommandOf<A, M>>,
    },
    /// Messages that left queues of group `from_group` for queues of this group, in the source's
    /// outbox order (see [`crate::outbox`]); the source has dropped every arrival numbered below
    /// `acked_below`, so their refusals need not be kept.
    InsertMoved {
        from_group: u32,
        acked_below: u64,
        arrivals: Vec<Arrival>,
    },
    /// The target groups took these outbox entries: they leave the outbox, and those refused go
    /// back where they came from.
    OutboxDone {
        results: Vec<MoveResult>,
    },
}

/// Queues of other groups that a command names, as the router read them there.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Elsewhere {
    pub queues: Vec<RemoteQueue>,
    /// Whether queues of other groups have the command's queue as their dead-letter target.
    pub has_sources: bool,
}

impl Elsewhere {
    /// The queue of another group that the command names by `reference`.
    pub fn queue(&self, reference: &str) -> Option<&RemoteQueue> {
        self.queues.iter().find(|q| q.reference == reference)
    }
}

/// A queue of another group, under the reference a command gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteQueue {
    pub reference: String,
    pub id: Uuid,
    pub name: String,
    pub queue_type: QueueType,
    pub redrive_allow_policy: AllowPolicy,
}

impl<A, M> CommandOf<A, M> {
    /// The account and the queue reference of a command on one queue that exists: where it is
    /// routed, and what the router replaces with the queue's id so that the command finds no
    /// queue in any other group. `None` for a creation (its queue has no group yet), a cancel
    /// that names no queue, and the commands on no queue.
    pub fn queue_mut(&mut self) -> Option<(&str, &mut String)> {
        match self {
            Self::PatchQueue { account, queue, .. }
            | Self::DeleteQueue { account, queue }
            | Self::Send { account, queue, .. }
            | Self::SendBatch { account, queue, .. }
            | Self::Receive { account, queue, .. }
            | Self::Ack { account, queue, .. }
            | Self::ChangeLease { account, queue, .. }
            | Self::Purge { account, queue }
            | Self::StartMoveTask { account, queue, .. }
            | Self::ReceiveWait { account, queue, .. }
            | Self::CancelScheduled { account, queue, .. }
            | Self::CancelMoveTask {
                account,
                queue: Some(queue),
                ..
            } => Some((account.as_str(), queue)),
            Self::WithRemote { command, .. } => command.queue_mut(),
            Self::CreateQueue { .. }
            | Self::CancelMoveTask { queue: None, .. }
            | Self::Tick
            | Self::EndWait { .. }
            | Self::Place { .. }
            | Self::InsertMoved { .. }
            | Self::OutboxDone { .. } => None,
        }
    }
}

/// A `match` on a command of enum `$from` that builds a command of enum `$to`: the arms given,
/// then, for each variant listed after `same`, the variant again with its fields unchanged.
macro_rules! reshape {
    ($value:expr, $from:ident => $to:ident, { $($arm:tt)* }
        same { $($variant:ident { $($field:ident),* })* }) => {
        match $value {
            $($arm)*
            $($from::$variant { $($field),* } => $to::$variant { $($field),* },)*
        }
    };
}
pub(crate) use reshape;

impl<A, M> CommandOf<A, M> {
    /// The same command with its queue settings and messages in the shapes `A2` and `M2`.
    pub fn convert<A2: From<A>, M2: From<M>>(self) -> CommandOf<A2, M2> {
        use CommandOf as C;
        reshape!(self, C => C, {
            C::CreateQueue { account, queue_id, name, attributes } => C::CreateQueue {
                account,
                queue_id,
                name,
                attributes: attributes.into(),
            },
            C::PatchQueue { account, queue, attributes } => C::PatchQueue {
                account,
                queue,
                attributes: attributes.into(),
            },
            C::Send { account, queue, message } => C::Send {
                account,
                queue,
                message: message.into(),
            },
            C::SendBatch { account, queue, entries } => C::SendBatch {
                account,
                queue,
                entries: entries
                    .into_iter()
                    .map(|e| BatchEntry { id: e.id, message: e.message.into() })
                    .collect(),
            },
            C::WithRemote { elsewhere, command } => C::WithRemote {
                elsewhere,
                command: Box::new(command.convert()),
            },
        } same {
            DeleteQueue { account, queue }
            Receive { account, queue, max_messages, lease_seconds, attempt_id }
            Ack { account, queue, receipts }
            ChangeLease { account, queue, receipt, lease_seconds, delay_seconds }
            Purge { account, queue }
            Tick {}
            StartMoveTask { account, queue, task_handle, task }
            CancelMoveTask { account, queue, task_handle }
            ReceiveWait { account, queue, max_messages, lease_seconds, wait_seconds, waiter }
            EndWait { waiter }
            CancelScheduled { account, queue, id }
            Place { change }
            InsertMoved { from_group, acked_below, arrivals }
            OutboxDone { results }
        })
    }
}

/// A move task as a client asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MoveTaskInput {
    /// A queue of the same type; `None`: each message back to its own dead-letter source.
    pub destination: Option<String>,
    /// 1–500; default 500.
    pub max_messages_per_second: Option<i64>,
    pub filter: Option<MoveFilter>,
    /// Only count the messages that would move.
    pub dry_run: bool,
}

/// Optional queue settings, for create and patch.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QueueAttributes {
    pub content_based_deduplication: Option<bool>,
    pub lease_seconds: Option<i64>,
    pub delay_seconds: Option<i64>,
    pub retention_seconds: Option<i64>,
    pub max_message_bytes: Option<i64>,
    /// `Some(None)` clears the policy (PATCH with `null`).
    pub redrive_policy: Option<Option<RedrivePolicyInput>>,
    pub redrive_allow_policy: Option<AllowPolicyInput>,
    /// `Some(None)` clears the backoff (PATCH with `null`).
    pub retry_backoff: Option<Option<RetryBackoffInput>>,
    pub receive_wait_seconds: Option<i64>,
    /// Tags to set (a value) or remove (`None`).
    pub tags: Option<TagChange>,
    /// `queue` or `message_group`.
    pub deduplication_scope: Option<String>,
    /// `per_queue` or `per_message_group_id`.
    pub fifo_throughput_limit: Option<String>,
    /// An access policy document; `Some(None)` removes the queue's.
    pub policy: Option<Option<String>>,
    /// Standard queues: the priority of messages sent without one, 0-9.
    pub default_priority: Option<i64>,
    /// Standard queues: the weights of the priority levels; `Some(None)` returns to strict
    /// order.
    pub priority_weights: Option<Option<Vec<i64>>>,
}

/// A retry backoff as a client writes it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RetryBackoffInput {
    pub initial_seconds: Option<i64>,
    pub max_seconds: Option<i64>,
    pub multiplier: Option<f64>,
}

/// A redrive policy as a client writes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RedrivePolicyInput {
    pub dead_letter_target: Option<String>,
    pub max_receive_count: Option<i64>,
}

/// A redrive allow policy as a client writes it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AllowPolicyInput {
    pub permission: Option<String>,
    pub source_queues: Option<Vec<String>>,
}

/// A message to send; `message_id` is stamped by the proposer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewMessage {
    pub message_id: Uuid,
    pub body: String,
    pub attributes: BTreeMap<String, Attribute>,
    pub delay_seconds: Option<i64>,
    pub message_group_id: Option<String>,
    pub message_deduplication_id: Option<String>,
    /// A tracing header (SQS's `AWSTraceHeader`), kept with the message; not part of its size.
    pub trace_header: Option<String>,
    /// Standard queues: 0-9, higher first; the queue's `default_priority` when `None`.
    pub priority: Option<i64>,
    /// When the message becomes visible, in the engine's time (milliseconds since the epoch);
    /// instead of `delay_seconds`.
    pub deliver_at: Option<i64>,
}

impl NewMessage {
    /// A message with `body` and no attributes, delay, group or deduplication id.
    pub fn new(message_id: Uuid, body: impl Into<String>) -> NewMessage {
        NewMessage {
            message_id,
            body: body.into(),
            attributes: BTreeMap::new(),
            delay_seconds: None,
            message_group_id: None,
            message_deduplication_id: None,
            trace_header: None,
            priority: None,
            deliver_at: None,
        }
    }

    /// The message in FIFO group `group`.
    pub fn in_group(mut self, group: impl Into<String>) -> NewMessage {
        self.message_group_id = Some(group.into());
        self
    }

    /// The message with deduplication id `id`.
    pub fn deduplicated_by(mut self, id: impl Into<String>) -> NewMessage {
        self.message_deduplication_id = Some(id.into());
        self
    }
}

/// One entry of a batch send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchEntry<M = NewMessage> {
    pub id: String,
    pub message: M,
}

/// The immutable part of a message, kept out of the engine's memory: the store persists it under
/// the message's storage key and joins it to deliveries and peeks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    pub message_id: Uuid,
    pub body: String,
    pub attributes: BTreeMap<String, Attribute>,
    pub message_group_id: Option<String>,
    pub message_deduplication_id: Option<String>,
    pub sent_at: Millis,
    pub trace_header: Option<String>,
}

/// One message delivered to its target's group, numbered in its source group's outbox (see
/// [`crate::outbox`]), with its payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arrival {
    pub seq: u64,
    pub outgoing: Outgoing,
    pub payload: Payload,
}

/// What a successful command returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Queue(Box<QueueView>),
    Deleted,
    Sent(SendResult),
    SentBatch(Vec<BatchResult>),
    Received(Vec<Delivery>),
    Acked(Vec<AckResult>),
    LeaseChanged {
        receipt: String,
        lease_expires_at: Millis,
    },
    Purged,
    Ticked,
    MoveTask(Box<MoveTaskView>),
    /// A [`Command::ReceiveWait`] found nothing and waits for a [`WaitAnswer`].
    Parked,
    WaitEnded,
    /// A scheduled message was cancelled (removed before its time).
    ScheduledCancelled,
    Placed(PlacementOutcome),
    /// How an [`Command::InsertMoved`] took each arrival, in order.
    Arrived(Vec<MoveResult>),
    OutboxDone,
}

/// How the wait of a parked receive ended: with the messages an entry delivered to it, or with
/// none (at its deadline, by [`Command::EndWait`], or when its queue was deleted). Every parked
/// receive gets exactly one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitAnswer {
    pub waiter: Uuid,
    pub deliveries: Vec<Delivery>,
}

/// The answer to one send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendResult {
    pub message_id: Uuid,
    pub duplicate: bool,
    /// FIFO queues only.
    pub sequence_number: Option<u64>,
}

/// The answer to one batch entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResult {
    pub id: String,
    pub result: Result<SendResult, EngineError>,
}

/// The answer to one receipt of an ack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckResult {
    pub receipt: String,
    pub result: Result<(), EngineError>,
}

/// A message's mutable metadata as the engine reports it; the store adds the [`Payload`] found
/// under `storage_key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageMeta {
    pub storage_key: u64,
    /// Position in the queue; the API shows it as `sequence_number` on FIFO queues.
    pub seq: u64,
    pub fifo: bool,
    pub receive_count: u32,
    pub first_received_at: Option<Millis>,
    /// When the message entered this queue (sent, or moved here).
    pub enqueued_at: Millis,
    pub dead_letter_source: Option<QueueRef>,
    pub moved_at: Option<Millis>,
    pub state: MessageState,
    /// End of the delay or the lease, for delayed and leased messages.
    pub until: Option<Millis>,
    /// Standard queues: the message's priority, 0-9.
    pub priority: Option<u8>,
    /// Whether it was sent with a `deliver_at` that is still ahead (`until` is that time).
    pub scheduled: bool,
}

/// A leased message handed to a receiver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub meta: MessageMeta,
    pub receipt: String,
    pub lease_expires_at: Millis,
}
