//! The operations of SPEC.md §3 and the message move tasks (start, cancel and list, which the
//! SQS actions StartMessageMoveTask, CancelMessageMoveTask and ListMessageMoveTasks map to),
//! independent of the wire format. Both front ends decode a request into the plain values taken
//! here (REST from JSON in `routes`, gRPC from protobuf in `grpc`), and render the answer
//! through the shapes of `json`; everything in between is here, once: the checks that need no
//! state (run before anything is proposed), defaults, the command or query, and the reading of
//! its outcome. So REST and gRPC share every rule and every error.
//!
//! Field names in errors are the JSON/protobuf field names (they are the same), JSON-path style:
//! `redrive_policy.max_receive_count`, `entries[1].id`. Checks that need the queue (its own size
//! limit, FIFO IDs, redrive targets) are the engine's.
//!
//! This module is the crate's public face for other front ends (the SQS-compatible endpoint):
//! the operations are methods of [`Shared`], which [`crate::Front::serving`] hands to a further
//! [`crate::Protocol`]; they answer [`ApiError`]s, which such a front end maps to its own errors.

use std::collections::BTreeMap;

use raftq_engine::model::{limits, AccountSummary, QueueConfig};
use raftq_engine::placement::PlacementError;
use raftq_engine::{
    attempts, proposal, tags, validate, AckResult, Attribute, BatchEntry, BatchResult, EngineError,
    MessageMeta, Millis, MoveFilter, MoveTaskInput, MoveTaskView, NewMessage, Payload,
    QueueAttributes, QueueRef, QueueStats, QueueType, QueueView, SendResult,
};
use raftq_node::{question, Change, NodeError};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::longpoll::{self, ReceiveRequest};
use crate::status::{self, RaftStatus};
use crate::throttle::Caller;

pub use crate::error::ApiError;
pub use crate::longpoll::Received;
pub use crate::shared::Shared;
pub use raftq_engine::LeaseChange;

/// A queue to create, as a client asks for it.
pub struct NewQueue {
    pub name: String,
    /// `standard` or `fifo` when given; it must match the name.
    pub queue_type: Option<String>,
    pub attributes: QueueAttributes,
}

/// A message as a client sends it, before it gets its UUID.
pub struct MessageInput {
    pub body: String,
    pub attributes: BTreeMap<String, Attribute>,
    pub delay_seconds: Option<i64>,
    pub message_group_id: Option<String>,
    pub message_deduplication_id: Option<String>,
    /// SQS's `AWSTraceHeader`.
    pub trace_header: Option<String>,
    /// Standard queues: 0-9.
    pub priority: Option<i64>,
    /// An RFC 3339 time.
    pub deliver_at: Option<String>,
}

/// One entry of a batch send.
pub struct BatchEntryInput {
    pub id: String,
    pub message: MessageInput,
}

/// The options of a receive; absent ones take their defaults.
pub struct ReceiveOptions {
    pub max_messages: Option<i64>,
    pub lease_seconds: Option<i64>,
    /// Absent: the queue's `receive_wait_seconds`.
    pub wait_seconds: Option<i64>,
    /// FIFO queues: a retry with the same ID within 5 minutes gets the same answer.
    pub receive_attempt_id: Option<String>,
    /// Who asks, for the limits on long polls.
    pub caller: Caller,
}

/// Which of a queue's messages a page lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Every message, in every state (a peek).
    All,
    /// The messages sent with a `deliver_at` that is still ahead.
    Scheduled,
}

/// A message move task as a client asks for it (the SQS action StartMessageMoveTask, and more).
#[derive(Default)]
pub struct MoveTaskRequest {
    /// A queue of the same type; `None`: each message goes back to its dead-letter source.
    pub destination: Option<String>,
    /// 1–500, default 500.
    pub max_messages_per_second: Option<i64>,
    pub filter: Option<MoveFilterRequest>,
    /// Only count the messages that would move.
    pub dry_run: bool,
}

/// A move task's filter as a client writes it: message IDs, and RFC 3339 times bounding when
/// the messages were moved to the queue (`moved_since` inclusive, `moved_before` exclusive).
#[derive(Default)]
pub struct MoveFilterRequest {
    pub message_ids: Vec<String>,
    pub moved_since: Option<String>,
    pub moved_before: Option<String>,
}

impl MoveFilterRequest {
    /// The filter with its IDs and times read, or `None` when it names nothing.
    fn checked(self) -> Result<Option<MoveFilter>, ApiError> {
        let message_ids = self
            .message_ids
            .iter()
            .enumerate()
            .map(|(i, text)| {
                Uuid::parse_str(text).map_err(|_| {
                    ApiError::invalid(
                        format!("filter.message_ids[{i}]"),
                        "is not a message ID (a UUID)",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let moved_since = time_field("filter.moved_since", self.moved_since)?;
        let moved_before = time_field("filter.moved_before", self.moved_before)?;
        if message_ids.is_empty() && moved_since.is_none() && moved_before.is_none() {
            return Ok(None);
        }
        Ok(Some(MoveFilter {
            message_ids,
            storage_keys: Vec::new(),
            moved_since,
            moved_before,
        }))
    }
}

/// The rule of a time in a request.
const TIME_RULE: &str = "must be an RFC 3339 time after 1970 (2024-05-01T12:00:00Z)";

/// An RFC 3339 time as milliseconds since the Unix epoch; `None` when it is not one, or
/// before 1970.
pub fn rfc3339_millis(text: &str) -> Option<Millis> {
    OffsetDateTime::parse(text, &Rfc3339)
        .ok()
        .and_then(|t| Millis::try_from(t.unix_timestamp_nanos() / 1_000_000).ok())
}

/// An RFC 3339 time of a request, as milliseconds since the Unix epoch.
fn time_field(field: &str, text: Option<String>) -> Result<Option<Millis>, ApiError> {
    let Some(text) = text else {
        return Ok(None);
    };
    let millis = rfc3339_millis(&text).ok_or_else(|| ApiError::invalid(field, TIME_RULE))?;
    Ok(Some(millis))
}

impl MessageInput {
    /// The message with a new UUID, checked against the rules that need no state.
    fn checked(self) -> Result<NewMessage, EngineError> {
        let deliver_at = match self.deliver_at {
            Some(text) => Some(rfc3339_millis(&text).ok_or_else(|| {
                EngineError::invalid("deliver_at", format!("{TIME_RULE}; got {text:?}"))
            })?),
            None => None,
        };
        let message = NewMessage {
            message_id: Uuid::new_v4(),
            body: self.body,
            attributes: self.attributes,
            delay_seconds: self.delay_seconds,
            message_group_id: self.message_group_id,
            message_deduplication_id: self.message_deduplication_id,
            trace_header: self.trace_header,
            priority: self.priority,
            deliver_at: deliver_at.and_then(|ms| i64::try_from(ms).ok()),
        };
        precheck(&message)?;
        Ok(message)
    }
}

/// The rules of a message that need no state: [`validate::message_form`] for the largest queue
/// there may be.
fn precheck(msg: &NewMessage) -> Result<(), EngineError> {
    validate::message_form(msg, limits::MAX_MESSAGE_BYTES_MAX as u32).map(drop)
}

/// The rules of queue settings that need no state: required fields and ranges of the redrive
/// policy, a permission for the allow policy, the form of tags, and the scalar settings for a
/// queue of `queue_type` (`None`: not known, and the rules of one type only left to the engine).
fn precheck_attributes(
    attrs: &QueueAttributes,
    queue_type: Option<QueueType>,
) -> Result<(), ApiError> {
    if let Some(Some(policy)) = &attrs.redrive_policy {
        validate::redrive_policy(policy)?;
    }
    if let Some(change) = &attrs.tags {
        tags::check(change)?;
    }
    if let Some(allow) = &attrs.redrive_allow_policy {
        validate::allow_permission(allow)?;
    }
    validate::scalar_attributes(attrs, queue_type, &mut QueueConfig::default())?;
    Ok(())
}

impl Shared {
    pub async fn create_queue(
        &self,
        account: String,
        new: NewQueue,
    ) -> Result<Box<QueueView>, ApiError> {
        let queue_type = validate::queue_name(&new.name)?;
        if new
            .queue_type
            .as_deref()
            .is_some_and(|t| t != queue_type.as_str())
        {
            return Err(ApiError::invalid(
                "type",
                format!(
                    "must be {} for this name: a queue is fifo exactly when its name ends in .fifo",
                    queue_type.as_str()
                ),
            ));
        }
        precheck_attributes(&new.attributes, Some(queue_type))?;
        let queue_id = Uuid::new_v4();
        self.write(proposal::create_queue(
            account,
            queue_id,
            new.name,
            new.attributes,
        ))
        .await
    }

    pub async fn list_queues(
        &self,
        account: String,
        prefix: String,
    ) -> Result<Vec<QueueView>, ApiError> {
        self.read(question::list_queues(account, prefix)).await
    }

    pub async fn get_queue(
        &self,
        account: String,
        queue: String,
    ) -> Result<Box<QueueView>, ApiError> {
        self.read(question::get_queue(account, queue)).await
    }

    /// Changes the settings given; `redrive_policy: Some(None)` detaches the policy.
    pub async fn patch_queue(
        &self,
        account: String,
        queue: String,
        attributes: QueueAttributes,
    ) -> Result<Box<QueueView>, ApiError> {
        // Ranges only: the rules of FIFO-only and standard-only settings need the queue's type,
        // which the engine knows.
        precheck_attributes(&attributes, None)?;
        self.write(proposal::patch_queue(account, queue, attributes))
            .await
    }

    pub async fn delete_queue(&self, account: String, queue: String) -> Result<(), ApiError> {
        self.write(proposal::delete_queue(account, queue)).await
    }

    pub async fn dead_letter_sources(
        &self,
        account: String,
        queue: String,
    ) -> Result<Vec<QueueRef>, ApiError> {
        self.read(question::dead_letter_sources(account, queue))
            .await
    }

    pub async fn queue_stats(
        &self,
        account: String,
        queue: String,
    ) -> Result<QueueStats, ApiError> {
        self.read(question::stats(account, queue)).await
    }

    pub async fn send(
        &self,
        account: String,
        queue: String,
        message: MessageInput,
    ) -> Result<SendResult, ApiError> {
        let message = message.checked()?;
        self.write(proposal::send(account, queue, message)).await
    }

    /// Sends a batch. A request that is wrong as a whole (entry count, entry IDs) is refused; a
    /// message that breaks a rule gets its own error result, and the others are still sent.
    /// Results come in request order.
    pub async fn send_batch(
        &self,
        account: String,
        queue: String,
        entries: Vec<BatchEntryInput>,
    ) -> Result<Vec<BatchResult>, ApiError> {
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        validate::batch_entry_ids(&ids)?;
        // Refusals of the precheck now (an entry's own `Err`), the rest from the engine.
        let mut prechecked = Vec::with_capacity(entries.len());
        let mut to_send = Vec::with_capacity(entries.len());
        for BatchEntryInput { id, message } in entries {
            match message.checked() {
                Ok(message) => {
                    prechecked.push(Ok(()));
                    to_send.push(BatchEntry { id, message });
                }
                Err(refused) => prechecked.push(Err(BatchResult {
                    id,
                    result: Err(refused),
                })),
            }
        }
        let count = to_send.len();
        let sent = if to_send.is_empty() {
            // Nothing to propose; the queue must still exist for the batch to be answered.
            self.get_queue(account, queue).await?;
            Vec::new()
        } else {
            self.write(proposal::send_batch(account, queue, to_send))
                .await?
        };
        assert_eq!(
            sent.len(),
            count,
            "the engine answers a batch with one result per entry"
        );
        let mut sent = sent.into_iter();
        Ok(prechecked
            .into_iter()
            .filter_map(|entry| entry.err().or_else(|| sent.next()))
            .collect())
    }

    /// Receives, long polling for up to `wait_seconds` when nothing is deliverable.
    pub async fn receive(
        &self,
        account: String,
        queue: String,
        options: ReceiveOptions,
    ) -> Result<Received, ApiError> {
        validate::max_messages(options.max_messages)?;
        if let Some(v) = options.lease_seconds {
            validate::lease_seconds(v)?;
        }
        if let Some(id) = &options.receive_attempt_id {
            attempts::check_id(id)?;
        }
        let wait = match options.wait_seconds {
            Some(v) => validate::receive_wait_seconds("wait_seconds", v)?,
            None => self.default_wait(&account, &queue).await?,
        };
        // A receive that may wait holds a place under the long-poll limits until it ends.
        let _slot = match wait {
            0 => None,
            _ => Some(self.throttle.long_poll(&options.caller)?),
        };
        let request = ReceiveRequest {
            account,
            queue,
            max_messages: options.max_messages,
            lease_seconds: options.lease_seconds,
            attempt_id: options.receive_attempt_id,
            wait_seconds: wait,
        };
        longpoll::receive(self, request).await
    }

    /// The wait of a receive that names none: its queue's `receive_wait_seconds`, as this node
    /// applied it (a setting changed a moment ago may apply from the next receive on), or as
    /// the leader has it when this node does not know the queue yet.
    async fn default_wait(&self, account: &str, queue: &str) -> Result<u32, ApiError> {
        let local = self
            .api
            .node
            .with_engine(|e| e.receive_wait_seconds(account, queue).ok())
            .ok()
            .flatten();
        if let Some(wait) = local {
            return Ok(wait);
        }
        let view = self
            .get_queue(account.to_string(), queue.to_string())
            .await?;
        Ok(view.receive_wait_seconds)
    }

    /// Acknowledges 1-10 receipts, each with its own result.
    pub async fn ack(
        &self,
        account: String,
        queue: String,
        receipts: Vec<String>,
    ) -> Result<Vec<AckResult>, ApiError> {
        validate::count("receipts", receipts.len(), limits::BATCH_MAX)?;
        let count = receipts.len();
        let command = proposal::ack(account, queue, receipts);
        let results = self.write(command).await?;
        assert_eq!(
            results.len(),
            count,
            "the engine answers an ack with one result per receipt"
        );
        Ok(results)
    }

    /// Changes (or with 0 s releases, after `delay_seconds`) the lease of `receipt`;
    /// `lease_seconds` is required.
    pub async fn change_lease(
        &self,
        account: String,
        queue: String,
        receipt: String,
        lease_seconds: Option<i64>,
        delay_seconds: Option<i64>,
    ) -> Result<LeaseChange, ApiError> {
        let lease_seconds =
            lease_seconds.ok_or_else(|| ApiError::invalid("lease_seconds", "is required"))?;
        let secs = validate::lease_seconds(lease_seconds)?;
        validate::release_delay(secs, delay_seconds)?;
        let command = proposal::change_lease(account, queue, receipt, lease_seconds, delay_seconds);
        self.write(command).await
    }

    /// A page of the queue's messages that `which` lists: those after sequence number `after`,
    /// in queue order, without leasing them.
    pub async fn list_messages(
        &self,
        account: String,
        queue: String,
        which: Listing,
        (after, limit): (Option<u64>, Option<i64>),
    ) -> Result<Vec<(MessageMeta, Payload)>, ApiError> {
        let question = match which {
            Listing::All => question::peek(account, queue, after, limit),
            Listing::Scheduled => question::scheduled(account, queue, after, limit),
        };
        self.read(question).await
    }

    /// Cancels the scheduled message with ID `message_id` (text, from a path or a request)
    /// before its time: it is removed for good.
    pub async fn cancel_scheduled(
        &self,
        account: String,
        queue: String,
        message_id: &str,
    ) -> Result<(), ApiError> {
        let id = Uuid::parse_str(message_id)
            .map_err(|_| ApiError::invalid("message_id", "is not a message ID (a UUID)"))?;
        self.write(proposal::cancel_scheduled(account, queue, id))
            .await
    }

    pub async fn purge(&self, account: String, queue: String) -> Result<(), ApiError> {
        self.write(proposal::purge(account, queue)).await
    }

    /// Starts a message move task on `queue` (SQS StartMessageMoveTask): its messages go, paced,
    /// to `destination` or each back to its dead-letter source. A filter that names message IDs
    /// is resolved to the messages' storage keys first, by a read of the queue's payloads.
    pub async fn start_move_task(
        &self,
        account: String,
        queue: String,
        request: MoveTaskRequest,
    ) -> Result<Box<MoveTaskView>, ApiError> {
        let filter = match request.filter {
            Some(filter) => filter.checked()?,
            None => None,
        };
        let mut task = MoveTaskInput {
            destination: request.destination,
            max_messages_per_second: request.max_messages_per_second,
            filter,
            dry_run: request.dry_run,
        };
        validate::move_task(&task)?;
        if let Some(f) = task.filter.as_mut().filter(|f| !f.message_ids.is_empty()) {
            let query =
                question::storage_keys(account.clone(), queue.clone(), f.message_ids.clone());
            f.storage_keys = self.read(query).await?;
        }
        let task_handle = Uuid::new_v4();
        self.write(proposal::start_move_task(account, queue, task_handle, task))
            .await
    }

    /// Cancels a running move task (SQS CancelMessageMoveTask), found by its handle among the
    /// account's queues, or among those of `queue` when given; answers the task as cancelled.
    pub async fn cancel_move_task(
        &self,
        account: String,
        queue: Option<String>,
        task_handle: String,
    ) -> Result<Box<MoveTaskView>, ApiError> {
        self.write(proposal::cancel_move_task(account, queue, task_handle))
            .await
    }

    /// The last 10 move tasks of `queue`, the newest first (SQS ListMessageMoveTasks).
    pub async fn list_move_tasks(
        &self,
        account: String,
        queue: String,
    ) -> Result<Vec<MoveTaskView>, ApiError> {
        self.read(question::move_tasks(account, queue)).await
    }

    /// Every account that holds queues (the caller checked the admin role).
    pub async fn accounts(&self) -> Result<Vec<AccountSummary>, ApiError> {
        self.read(question::accounts()).await
    }

    /// Drains node `id` (`on`) or ends its drain (the caller checked the admin role); answers
    /// the cluster once the node leads no group, or at once when the drain ends.
    pub async fn drain(&self, id: u64, on: bool) -> Result<RaftStatus, ApiError> {
        match self.api.node.drain(id, on).await? {
            Ok(()) => Ok(status::of(&self.api.node, &self.api.region).await),
            Err(EngineError::Placement(PlacementError::UnknownNode(_))) => {
                Err(ApiError::invalid("id", "must be a node of the cluster"))
            }
            Err(EngineError::Placement(PlacementError::NotBootstrapped)) => {
                Err(ApiError::from(NodeError::Unsupported(
                    "draining a node of a cluster of one group: stop it with SIGTERM, which hands \
                     its leadership over first"
                        .into(),
                )))
            }
            Err(refused) => Err(refused.into()),
        }
    }

    /// Changes the cluster's membership (the caller checked the admin role); answers the
    /// cluster as it is once the change committed.
    pub async fn change_membership(&self, change: Change) -> Result<RaftStatus, ApiError> {
        self.api.node.change_membership(change).await??;
        Ok(status::of(&self.api.node, &self.api.region).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> NewMessage {
        NewMessage::new(Uuid::nil(), body)
    }

    #[test]
    fn precheck_applies_the_stateless_rules() {
        assert!(precheck(&message("x")).is_ok());
        assert!(precheck(&message("x").in_group("g").deduplicated_by("d")).is_ok());
        assert_eq!(precheck(&message("")).unwrap_err().field(), Some("body"));
        let big = "x".repeat(limits::MAX_MESSAGE_BYTES_MAX as usize + 1);
        assert_eq!(
            precheck(&message(&big)).unwrap_err().code(),
            "message_too_large"
        );
        let delayed = NewMessage {
            delay_seconds: Some(-1),
            ..message("x")
        };
        assert_eq!(
            precheck(&delayed).unwrap_err().field(),
            Some("delay_seconds")
        );
        let bad_dedup = NewMessage {
            message_deduplication_id: Some("\u{1}".into()),
            ..message("x")
        };
        assert_eq!(
            precheck(&bad_dedup).unwrap_err().field(),
            Some("message_deduplication_id")
        );
    }

    #[test]
    fn queue_settings_are_checked_before_proposing() {
        use raftq_engine::{AllowPolicyInput, RedrivePolicyInput};
        let field = |attrs: QueueAttributes| {
            precheck_attributes(&attrs, Some(QueueType::Standard))
                .unwrap_err()
                .field
        };
        let policy = |target: Option<&str>, max: Option<i64>| QueueAttributes {
            redrive_policy: Some(Some(RedrivePolicyInput {
                dead_letter_target: target.map(str::to_string),
                max_receive_count: max,
            })),
            ..QueueAttributes::default()
        };
        assert_eq!(
            field(policy(None, Some(1))).as_deref(),
            Some("redrive_policy.dead_letter_target")
        );
        for max in [None, Some(0), Some(1001)] {
            assert_eq!(
                field(policy(Some("d"), max)).as_deref(),
                Some("redrive_policy.max_receive_count")
            );
        }
        let allow = QueueAttributes {
            redrive_allow_policy: Some(AllowPolicyInput::default()),
            ..QueueAttributes::default()
        };
        assert_eq!(
            field(allow).as_deref(),
            Some("redrive_allow_policy.permission")
        );
        let detach = QueueAttributes {
            redrive_policy: Some(None),
            lease_seconds: Some(5),
            ..QueueAttributes::default()
        };
        assert!(precheck_attributes(&detach, Some(QueueType::Standard)).is_ok());
    }
}
