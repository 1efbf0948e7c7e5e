//! The response shapes of SPEC.md §3: the queue object, delivered and peeked messages, send, batch
//! and ack results (stats serialize as the engine's `QueueStats`). Times are RFC 3339 UTC strings
//! with milliseconds (`2024-05-01T12:00:00.123Z`). Optional message fields are left out where
//! they do not apply.
//!
//! These shapes decide, once, what a client sees (which optional fields apply, how times read);
//! REST serializes them as JSON and `grpc` converts them field by field to protobuf.

use std::collections::BTreeMap;

use raftq_engine::{
    AckResult, BatchResult, Delivery, MessageMeta, MessageState, Millis, MoveTaskStatus,
    MoveTaskView, Payload, QueueRef, QueueView, SendResult,
};
use serde::Serialize;
use time::macros::format_description;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::attributes;
use crate::error::ApiError;
use crate::longpoll::Received;
use crate::ops::LeaseChange;
use crate::schemas;

/// Milliseconds since the Unix epoch as an RFC 3339 UTC string.
pub fn rfc3339(ms: Millis) -> String {
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_else(|| format!("invalid time {ms}"))
}

/// The full queue object.
#[derive(Serialize, ToSchema)]
pub struct Queue<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub crn: &'a str,
    /// `arn:aws:sqs:<region>:<account number>:<name>`, which names the queue wherever a
    /// name, UUID or CRN does.
    pub arn: &'a str,
    /// The Raft group that holds the queue (see `GET /v1/cluster`'s `groups`).
    pub group: u32,
    #[serde(rename = "type")]
    #[schema(schema_with = schemas::queue_type)]
    pub queue_type: &'static str,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// When a setting last changed (its creation until then); tags do not count.
    #[schema(format = DateTime)]
    pub modified_at: String,
    pub content_based_deduplication: bool,
    pub lease_seconds: u32,
    pub delay_seconds: u32,
    pub retention_seconds: u32,
    pub max_message_bytes: u32,
    #[schema(value_type = Option<schemas::RedrivePolicy>, required = true)]
    pub redrive_policy: Option<&'a raftq_engine::model::RedrivePolicyView>,
    pub redrive_allow_policy: AllowPolicy<'a>,
    #[schema(required = true)]
    pub retry_backoff: Option<RetryBackoff>,
    pub receive_wait_seconds: u32,
    pub tags: &'a BTreeMap<String, String>,
    /// `queue` on standard queues.
    #[schema(schema_with = schemas::deduplication_scope)]
    pub deduplication_scope: &'static str,
    /// The priority of a message sent without one (0 on FIFO queues, which take none).
    pub default_priority: u8,
    /// The weights of the priority levels (element `i` weighs priority `i`, the last one every
    /// priority after it); `null`: strictly the highest level first.
    #[schema(required = true)]
    pub priority_weights: Option<&'a [u32]>,
}

/// A queue's retry backoff: a message whose lease expired waits `min(max_seconds,
/// initial_seconds × multiplier^(receive_count − 1))` seconds before it is visible again.
#[derive(Serialize, ToSchema)]
pub struct RetryBackoff {
    pub initial_seconds: u32,
    pub max_seconds: u32,
    pub multiplier: f64,
}

#[derive(Serialize, ToSchema)]
pub struct AllowPolicy<'a> {
    #[schema(schema_with = schemas::permission)]
    pub permission: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<schemas::QueueRef>>)]
    pub source_queues: Option<&'a [QueueRef]>,
}

impl<'a> Queue<'a> {
    pub fn new(view: &'a QueueView) -> Queue<'a> {
        Queue {
            id: view.id,
            name: &view.name,
            crn: &view.crn,
            arn: &view.arn,
            group: view.group,
            queue_type: view.queue_type.as_str(),
            created_at: rfc3339(view.created_at),
            modified_at: rfc3339(view.modified_at),
            content_based_deduplication: view.content_based_deduplication,
            lease_seconds: view.lease_seconds,
            delay_seconds: view.delay_seconds,
            retention_seconds: view.retention_seconds,
            max_message_bytes: view.max_message_bytes,
            redrive_policy: view.redrive_policy.as_ref(),
            redrive_allow_policy: AllowPolicy {
                permission: &view.redrive_allow_policy.permission,
                source_queues: view.redrive_allow_policy.source_queues.as_deref(),
            },
            retry_backoff: view.retry_backoff.map(|b| RetryBackoff {
                initial_seconds: b.initial_seconds,
                max_seconds: b.max_seconds,
                multiplier: b.multiplier(),
            }),
            receive_wait_seconds: view.receive_wait_seconds,
            tags: &view.tags,
            deduplication_scope: view.deduplication_scope.as_str(),
            default_priority: view.default_priority,
            priority_weights: view.priority_weights.as_ref().map(|w| w.0.as_slice()),
        }
    }
}

/// `{"queues": [...]}` of full queue objects.
#[derive(Serialize, ToSchema)]
pub struct QueueList<'a> {
    pub queues: Vec<Queue<'a>>,
}

impl<'a> QueueList<'a> {
    pub fn new(views: &'a [QueueView]) -> QueueList<'a> {
        QueueList {
            queues: views.iter().map(Queue::new).collect(),
        }
    }
}

/// `{"queues": [...]}` of resource references.
#[derive(Serialize, ToSchema)]
pub struct RefList {
    #[schema(value_type = Vec<schemas::QueueRef>)]
    pub queues: Vec<QueueRef>,
}

/// A delivered (with receipt) or peeked (with state) message.
#[derive(Serialize, ToSchema)]
pub struct Message<'a> {
    pub message_id: Uuid,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub lease_expires_at: Option<String>,
    pub body: &'a str,
    /// The attributes' values: text, or base64 for a `Binary` type.
    pub attributes: BTreeMap<String, String>,
    /// The data type of each attribute whose type is not plain `String`; left out when none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attribute_types: BTreeMap<String, String>,
    pub receive_count: u32,
    #[schema(format = DateTime)]
    pub sent_at: String,
    #[schema(format = DateTime, required = true)]
    pub first_received_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_group_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_deduplication_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence_number: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<schemas::QueueRef>)]
    pub dead_letter_source: Option<&'a QueueRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub moved_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schemas::message_state)]
    pub state: Option<MessageState>,
    /// Peeked delayed messages: when the delay, retry backoff or schedule ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub visible_at: Option<String>,
    /// Standard queues: 0–9, higher first.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 9)]
    pub priority: Option<u8>,
    /// Peeked and listed messages sent with a `deliver_at` still ahead (their `visible_at`):
    /// they can be cancelled until then. Left out when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub scheduled: bool,
}

impl<'a> Message<'a> {
    fn new(meta: &'a MessageMeta, payload: &'a Payload) -> Message<'a> {
        let (attributes, attribute_types) = attributes::to_text(&payload.attributes);
        Message {
            message_id: payload.message_id,
            receipt: None,
            lease_expires_at: None,
            body: &payload.body,
            attributes,
            attribute_types,
            receive_count: meta.receive_count,
            sent_at: rfc3339(payload.sent_at),
            first_received_at: meta.first_received_at.map(rfc3339),
            message_group_id: payload.message_group_id.as_deref(),
            message_deduplication_id: payload.message_deduplication_id.as_deref(),
            sequence_number: meta.fifo.then_some(meta.seq),
            dead_letter_source: meta.dead_letter_source.as_ref(),
            moved_at: meta.moved_at.map(rfc3339),
            state: None,
            visible_at: None,
            priority: meta.priority,
            scheduled: meta.scheduled,
        }
    }

    /// A message handed out by a receive.
    pub fn delivered(delivery: &'a Delivery, payload: &'a Payload) -> Message<'a> {
        Message {
            receipt: Some(&delivery.receipt),
            lease_expires_at: Some(rfc3339(delivery.lease_expires_at)),
            ..Message::new(&delivery.meta, payload)
        }
    }

    /// A message shown by a peek.
    pub fn peeked(meta: &'a MessageMeta, payload: &'a Payload) -> Message<'a> {
        let until = |state| meta.until.filter(|_| meta.state == state).map(rfc3339);
        Message {
            state: Some(meta.state),
            lease_expires_at: until(MessageState::Leased),
            visible_at: until(MessageState::Delayed),
            ..Message::new(meta, payload)
        }
    }
}

/// `{"messages": [...]}` of a receive.
#[derive(Serialize, ToSchema)]
pub struct Delivered<'a> {
    pub messages: Vec<Message<'a>>,
}

impl<'a> Delivered<'a> {
    pub fn new(received: &'a Received) -> Result<Delivered<'a>, ApiError> {
        let messages = received
            .messages()?
            .into_iter()
            .map(|(delivery, payload)| Message::delivered(delivery, payload))
            .collect();
        Ok(Delivered { messages })
    }
}

/// `{"messages": [...], "next_after": seq}` of a peek; `next_after` is the `after` that reads on.
#[derive(Serialize, ToSchema)]
pub struct Peeked<'a> {
    pub messages: Vec<Message<'a>>,
    #[schema(required = true)]
    pub next_after: Option<u64>,
}

impl<'a> Peeked<'a> {
    pub fn new(messages: &'a [(MessageMeta, Payload)]) -> Peeked<'a> {
        Peeked {
            messages: messages
                .iter()
                .map(|(m, p)| Message::peeked(m, p))
                .collect(),
            next_after: messages.last().map(|(m, _)| m.seq),
        }
    }
}

/// The answer to one send.
#[derive(Serialize, ToSchema)]
pub struct Sent {
    pub message_id: Uuid,
    pub duplicate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence_number: Option<u64>,
}

impl Sent {
    pub fn new(result: &SendResult) -> Sent {
        Sent {
            message_id: result.message_id,
            duplicate: result.duplicate,
            sequence_number: result.sequence_number,
        }
    }
}

/// One entry of a batch send's results: `{id, message_id, duplicate}` or `{id, error}`.
#[derive(Serialize, ToSchema)]
pub struct BatchEntryResult {
    pub id: String,
    #[serde(flatten)]
    pub outcome: EntryOutcome<Sent>,
}

/// The success or error of one entry of a batch.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum EntryOutcome<T> {
    Ok(T),
    Err {
        #[schema(value_type = schemas::Error)]
        error: ApiError,
    },
}

impl<T> EntryOutcome<T> {
    fn new<U>(result: Result<U, raftq_engine::EngineError>, ok: impl FnOnce(U) -> T) -> Self {
        match result {
            Ok(value) => EntryOutcome::Ok(ok(value)),
            Err(e) => EntryOutcome::Err { error: e.into() },
        }
    }
}

impl BatchEntryResult {
    pub fn new(result: BatchResult) -> BatchEntryResult {
        BatchEntryResult {
            id: result.id,
            outcome: EntryOutcome::new(result.result, |r| Sent::new(&r)),
        }
    }
}

/// `{"results": [...]}` of a batch send or an ack.
#[derive(Serialize, ToSchema)]
pub struct Results<T> {
    pub results: Vec<T>,
}

#[derive(Serialize, ToSchema)]
pub struct Acked {
    pub ok: bool,
}

/// One receipt of an ack: `{receipt, ok: true}` or `{receipt, error}`.
#[derive(Serialize, ToSchema)]
pub struct AckEntryResult {
    pub receipt: String,
    #[serde(flatten)]
    pub outcome: EntryOutcome<Acked>,
}

impl AckEntryResult {
    pub fn new(result: AckResult) -> AckEntryResult {
        AckEntryResult {
            receipt: result.receipt,
            outcome: EntryOutcome::new(result.result, |()| Acked { ok: true }),
        }
    }
}

/// The answer to a lease change.
#[derive(Serialize, ToSchema)]
pub struct LeaseChanged {
    pub receipt: String,
    #[schema(format = DateTime)]
    pub lease_expires_at: String,
}

impl LeaseChanged {
    pub fn new(change: LeaseChange) -> LeaseChanged {
        LeaseChanged {
            receipt: change.receipt,
            lease_expires_at: rfc3339(change.lease_expires_at),
        }
    }
}

/// A message move task.
#[derive(Serialize, ToSchema)]
pub struct MoveTask<'a> {
    /// Names the task in a cancel.
    pub task_handle: Uuid,
    #[schema(schema_with = schemas::move_task_status)]
    pub status: MoveTaskStatus,
    /// The queue the messages leave.
    #[schema(value_type = schemas::QueueRef)]
    pub source: &'a QueueRef,
    /// Where the messages go; `null`: each back to its own `dead_letter_source`.
    #[schema(value_type = Option<schemas::QueueRef>, required = true)]
    pub destination: Option<&'a QueueRef>,
    pub max_messages_per_second: u32,
    #[schema(required = true)]
    pub filter: Option<MoveFilter>,
    /// A dry run only counts (`to_move`) and moves nothing.
    pub dry_run: bool,
    #[schema(format = DateTime)]
    pub started_at: String,
    /// When the task completed, was cancelled or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub ended_at: Option<String>,
    /// The messages that could move when the task started.
    pub to_move: u64,
    pub moved: u64,
    /// Messages the task reached but left in place: leased by a consumer, or without a
    /// `dead_letter_source` to go back to.
    pub skipped: u64,
    /// Why a failed task failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<&'a str>,
}

/// The messages a move task takes: those with one of `message_ids` (when any are given) and
/// moved to the queue from `moved_since` (inclusive) to `moved_before` (exclusive), when given.
#[derive(Serialize, ToSchema)]
pub struct MoveFilter {
    pub message_ids: Vec<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub moved_since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    pub moved_before: Option<String>,
}

impl<'a> MoveTask<'a> {
    pub fn new(task: &'a MoveTaskView) -> MoveTask<'a> {
        MoveTask {
            task_handle: task.task_handle,
            status: task.status,
            source: &task.source,
            destination: task.destination.as_ref(),
            max_messages_per_second: task.max_messages_per_second,
            filter: task.filter.as_ref().map(|f| MoveFilter {
                message_ids: f.message_ids.clone(),
                moved_since: f.moved_since.map(rfc3339),
                moved_before: f.moved_before.map(rfc3339),
            }),
            dry_run: task.dry_run,
            started_at: rfc3339(task.started_at),
            ended_at: task.ended_at.map(rfc3339),
            to_move: task.to_move,
            moved: task.moved,
            skipped: task.skipped,
            failure_reason: task.failure_reason.as_deref(),
        }
    }
}

/// `{"tasks": [...]}`: a queue's last move tasks, the newest first.
#[derive(Serialize, ToSchema)]
pub struct MoveTaskList<'a> {
    pub tasks: Vec<MoveTask<'a>>,
}

impl<'a> MoveTaskList<'a> {
    pub fn new(tasks: &'a [MoveTaskView]) -> MoveTaskList<'a> {
        MoveTaskList {
            tasks: tasks.iter().map(MoveTask::new).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_714_564_800_123), "2024-05-01T12:00:00.123Z");
    }

    #[test]
    fn entry_outcomes_flatten_into_their_entry() {
        let ok = AckEntryResult::new(AckResult {
            receipt: "r".into(),
            result: Ok(()),
        });
        assert_eq!(
            serde_json::to_value(ok).unwrap(),
            serde_json::json!({"receipt": "r", "ok": true})
        );
        let err = AckEntryResult::new(AckResult {
            receipt: "r".into(),
            result: Err(raftq_engine::EngineError::LeaseExpired),
        });
        let v = serde_json::to_value(err).unwrap();
        assert_eq!(v["receipt"], "r");
        assert_eq!(v["error"]["code"], "lease_expired");
        assert!(v.get("ok").is_none());
    }
}
