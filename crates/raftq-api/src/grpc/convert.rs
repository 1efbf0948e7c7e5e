//! Conversions between protobuf and the rest of the crate: requests into the plain values of
//! `ops`, and the response shapes of `json` (which already decided which optional fields apply
//! and how times read) into protobuf messages, field by field.
//!
//! Protobuf has no `null`: an absent `optional` field is an absent JSON field, an empty
//! `source_queues` is no list, and a PATCH detaches its redrive policy with
//! `clear_redrive_policy: true` where JSON says `"redrive_policy": null` (and clears its retry
//! backoff with `clear_retry_backoff: true`); it sets tags with `set_tags` and removes them
//! with `remove_tags` where JSON gives a tag a value or `null`. A queue's `priority_weights`
//! are a `PriorityWeights` message, which a PATCH clears (back to strict order) with
//! `clear_priority_weights: true`; an empty list in a `Queue` is strict order.

use raftq_engine::{
    AllowPolicyInput, MessageState, MoveTaskStatus, QueueAttributes, QueueRef, QueueStats,
    RedrivePolicyInput, RetryBackoffInput, SendResult,
};

use std::collections::BTreeMap;

use raftq_engine::tags::TagChange;

use super::pb;
use crate::attributes;
use crate::error::ApiError;
use crate::json::{self, EntryOutcome};
use crate::ops::{BatchEntryInput, MessageInput, MoveFilterRequest, MoveTaskRequest, NewQueue};
use crate::status::RaftStatus;

/// The queue a request names; unlike a REST path, a protobuf field may be left empty.
pub fn queue(reference: String) -> Result<String, ApiError> {
    if reference.is_empty() {
        return Err(ApiError::invalid(
            "queue",
            "is required (a queue name, UUID or CRN)",
        ));
    }
    Ok(reference)
}

/// The settings of a create or patch request (same field names in both), with the given
/// redrive policy, retry backoff and tag changes.
macro_rules! queue_attributes {
    ($request:expr, $redrive_policy:expr, $retry_backoff:expr, $tags:expr, $weights:expr) => {
        QueueAttributes {
            content_based_deduplication: $request.content_based_deduplication,
            lease_seconds: $request.lease_seconds,
            delay_seconds: $request.delay_seconds,
            retention_seconds: $request.retention_seconds,
            max_message_bytes: $request.max_message_bytes,
            redrive_policy: $redrive_policy,
            redrive_allow_policy: $request.redrive_allow_policy.map(allow_policy),
            retry_backoff: $retry_backoff,
            receive_wait_seconds: $request.receive_wait_seconds,
            tags: $tags,
            deduplication_scope: $request.deduplication_scope,
            // SQS's own settings, which the SQS endpoint alone sets.
            fifo_throughput_limit: None,
            policy: None,
            default_priority: $request.default_priority,
            priority_weights: $weights,
        }
    };
}

/// The message of a send or batch entry request (same field names in both); `prefix` leads the
/// names of its fields in errors.
macro_rules! message_input {
    ($request:expr, $prefix:expr) => {
        MessageInput {
            attributes: attributes::from_text(
                $request.attributes,
                $request.attribute_types,
                $prefix,
            )?,
            body: $request.body,
            delay_seconds: $request.delay_seconds,
            message_group_id: $request.message_group_id,
            message_deduplication_id: $request.message_deduplication_id,
            trace_header: None,
            priority: $request.priority,
            deliver_at: $request.deliver_at,
        }
    };
}

fn redrive_policy(p: pb::RedrivePolicyInput) -> RedrivePolicyInput {
    RedrivePolicyInput {
        dead_letter_target: p.dead_letter_target,
        max_receive_count: p.max_receive_count,
    }
}

fn retry_backoff(b: pb::RetryBackoffInput) -> RetryBackoffInput {
    RetryBackoffInput {
        initial_seconds: b.initial_seconds,
        max_seconds: b.max_seconds,
        multiplier: b.multiplier,
    }
}

fn allow_policy(p: pb::RedriveAllowPolicyInput) -> AllowPolicyInput {
    AllowPolicyInput {
        permission: p.permission,
        source_queues: (!p.source_queues.is_empty()).then_some(p.source_queues),
    }
}

impl From<pb::CreateQueueRequest> for NewQueue {
    fn from(mut r: pb::CreateQueueRequest) -> Self {
        let redrive_policy = r.redrive_policy.map(|p| Some(redrive_policy(p)));
        let retry_backoff = r.retry_backoff.map(|b| Some(retry_backoff(b)));
        let tags = (!r.tags.is_empty()).then(|| {
            r.tags
                .into_iter()
                .map(|(key, value)| (key, Some(value)))
                .collect()
        });
        let weights = r.priority_weights.take().map(|w| Some(w.weights));
        NewQueue {
            attributes: queue_attributes!(r, redrive_policy, retry_backoff, tags, weights),
            name: r.name,
            queue_type: r.r#type,
        }
    }
}

/// The queue reference and the settings of a patch.
pub fn patch(r: pb::PatchQueueRequest) -> Result<(String, QueueAttributes), ApiError> {
    use pb::patch_queue_request::{Backoff, Redrive, Weights};
    let redrive_policy = match r.redrive {
        Some(Redrive::RedrivePolicy(p)) => Some(Some(redrive_policy(p))),
        Some(Redrive::ClearRedrivePolicy(true)) => Some(None),
        Some(Redrive::ClearRedrivePolicy(false)) | None => None,
    };
    let retry_backoff = match r.backoff {
        Some(Backoff::RetryBackoff(b)) => Some(Some(retry_backoff(b))),
        Some(Backoff::ClearRetryBackoff(true)) => Some(None),
        Some(Backoff::ClearRetryBackoff(false)) | None => None,
    };
    let weights = match r.weights {
        Some(Weights::PriorityWeights(w)) => Some(Some(w.weights)),
        Some(Weights::ClearPriorityWeights(true)) => Some(None),
        Some(Weights::ClearPriorityWeights(false)) | None => None,
    };
    let tags = tag_change(r.set_tags, r.remove_tags)?;
    let attributes = queue_attributes!(r, redrive_policy, retry_backoff, tags, weights);
    Ok((queue(r.queue)?, attributes))
}

/// The tag change of a patch: none when it sets and removes nothing; a key both set and
/// removed is refused.
fn tag_change(
    set: BTreeMap<String, String>,
    remove: Vec<String>,
) -> Result<Option<TagChange>, ApiError> {
    if set.is_empty() && remove.is_empty() {
        return Ok(None);
    }
    let mut change: TagChange = set
        .into_iter()
        .map(|(key, value)| (key, Some(value)))
        .collect();
    for (i, key) in remove.into_iter().enumerate() {
        if change.contains_key(&key) {
            return Err(ApiError::invalid(
                format!("remove_tags[{i}]"),
                "is also in set_tags",
            ));
        }
        change.insert(key, None);
    }
    Ok(Some(change))
}

/// The queue reference and the message of a send.
pub fn send(r: pb::SendMessageRequest) -> Result<(String, MessageInput), ApiError> {
    let queue = queue(r.queue)?;
    Ok((queue, message_input!(r, "")))
}

/// The queue reference and the entries of a batch send.
pub fn send_batch(
    r: pb::SendMessageBatchRequest,
) -> Result<(String, Vec<BatchEntryInput>), ApiError> {
    let entries = r
        .entries
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            Ok(BatchEntryInput {
                message: message_input!(e, &format!("entries[{i}].")),
                id: e.id,
            })
        })
        .collect::<Result<_, ApiError>>()?;
    Ok((queue(r.queue)?, entries))
}

/// The queue reference and the task of a move task start.
pub fn start_move_task(r: pb::StartMoveTaskRequest) -> Result<(String, MoveTaskRequest), ApiError> {
    let task = MoveTaskRequest {
        destination: r.destination,
        max_messages_per_second: r.max_messages_per_second,
        filter: r.filter.map(|f| MoveFilterRequest {
            message_ids: f.message_ids,
            moved_since: f.moved_since,
            moved_before: f.moved_before,
        }),
        dry_run: r.dry_run,
    };
    Ok((queue(r.queue)?, task))
}

fn queue_ref(r: &QueueRef) -> pb::QueueRef {
    pb::QueueRef {
        id: r.id.to_string(),
        name: r.name.clone(),
        crn: r.crn.clone(),
    }
}

fn refs(list: &[QueueRef]) -> Vec<pb::QueueRef> {
    list.iter().map(queue_ref).collect()
}

impl From<json::Queue<'_>> for pb::Queue {
    fn from(q: json::Queue<'_>) -> Self {
        pb::Queue {
            id: q.id.to_string(),
            name: q.name.to_string(),
            crn: q.crn.to_string(),
            arn: q.arn.to_string(),
            group: q.group,
            r#type: q.queue_type.to_string(),
            created_at: q.created_at,
            modified_at: q.modified_at,
            content_based_deduplication: q.content_based_deduplication,
            lease_seconds: q.lease_seconds,
            delay_seconds: q.delay_seconds,
            retention_seconds: q.retention_seconds,
            max_message_bytes: q.max_message_bytes,
            redrive_policy: q.redrive_policy.map(|p| pb::RedrivePolicy {
                dead_letter_target: Some(queue_ref(&p.dead_letter_target)),
                max_receive_count: p.max_receive_count,
            }),
            redrive_allow_policy: Some(pb::RedriveAllowPolicy {
                permission: q.redrive_allow_policy.permission.to_string(),
                source_queues: refs(q.redrive_allow_policy.source_queues.unwrap_or_default()),
            }),
            retry_backoff: q.retry_backoff.map(|b| pb::RetryBackoff {
                initial_seconds: b.initial_seconds,
                max_seconds: b.max_seconds,
                multiplier: b.multiplier,
            }),
            receive_wait_seconds: q.receive_wait_seconds,
            tags: q.tags.clone(),
            deduplication_scope: q.deduplication_scope.to_string(),
            default_priority: u32::from(q.default_priority),
            priority_weights: q.priority_weights.unwrap_or_default().to_vec(),
        }
    }
}

impl From<json::QueueList<'_>> for pb::ListQueuesResponse {
    fn from(list: json::QueueList<'_>) -> Self {
        pb::ListQueuesResponse {
            queues: list.queues.into_iter().map(pb::Queue::from).collect(),
        }
    }
}

impl From<json::RefList> for pb::ListDeadLetterSourcesResponse {
    fn from(list: json::RefList) -> Self {
        pb::ListDeadLetterSourcesResponse {
            queues: refs(&list.queues),
        }
    }
}

fn state(state: MessageState) -> pb::MessageState {
    match state {
        MessageState::Visible => pb::MessageState::Visible,
        MessageState::Leased => pb::MessageState::Leased,
        MessageState::Delayed => pb::MessageState::Delayed,
        MessageState::PendingRedrive => pb::MessageState::PendingRedrive,
    }
}

impl From<json::Message<'_>> for pb::Message {
    fn from(m: json::Message<'_>) -> Self {
        pb::Message {
            message_id: m.message_id.to_string(),
            receipt: m.receipt.map(str::to_string),
            lease_expires_at: m.lease_expires_at,
            body: m.body.to_string(),
            attributes: m.attributes,
            attribute_types: m.attribute_types,
            receive_count: m.receive_count,
            sent_at: m.sent_at,
            first_received_at: m.first_received_at,
            message_group_id: m.message_group_id.map(str::to_string),
            message_deduplication_id: m.message_deduplication_id.map(str::to_string),
            sequence_number: m.sequence_number,
            dead_letter_source: m.dead_letter_source.map(queue_ref),
            moved_at: m.moved_at,
            state: m.state.map(|s| state(s).into()),
            visible_at: m.visible_at,
            priority: m.priority.map(u32::from),
            scheduled: m.scheduled,
        }
    }
}

fn messages(list: Vec<json::Message<'_>>) -> Vec<pb::Message> {
    list.into_iter().map(pb::Message::from).collect()
}

impl From<json::Delivered<'_>> for pb::ReceiveMessagesResponse {
    fn from(d: json::Delivered<'_>) -> Self {
        pb::ReceiveMessagesResponse {
            messages: messages(d.messages),
        }
    }
}

impl From<json::Peeked<'_>> for pb::PeekMessagesResponse {
    fn from(p: json::Peeked<'_>) -> Self {
        pb::PeekMessagesResponse {
            messages: messages(p.messages),
            next_after: p.next_after,
        }
    }
}

impl From<json::Peeked<'_>> for pb::ListScheduledMessagesResponse {
    fn from(p: json::Peeked<'_>) -> Self {
        pb::ListScheduledMessagesResponse {
            messages: messages(p.messages),
            next_after: p.next_after,
        }
    }
}

impl From<json::Sent> for pb::SendMessageResponse {
    fn from(s: json::Sent) -> Self {
        pb::SendMessageResponse {
            message_id: s.message_id.to_string(),
            duplicate: s.duplicate,
            sequence_number: s.sequence_number,
        }
    }
}

/// The result of one send of a `SendMessageStream`.
pub fn stream_result(outcome: Result<SendResult, ApiError>) -> pb::SendMessageStreamResult {
    use pb::send_message_stream_result::Outcome;
    pb::SendMessageStreamResult {
        outcome: Some(match outcome {
            Ok(sent) => Outcome::Sent(json::Sent::new(&sent).into()),
            Err(error) => Outcome::Error((&error).into()),
        }),
    }
}

impl From<json::BatchEntryResult> for pb::SendMessageBatchResult {
    fn from(r: json::BatchEntryResult) -> Self {
        use pb::send_message_batch_result::Outcome;
        pb::SendMessageBatchResult {
            id: r.id,
            outcome: Some(match r.outcome {
                EntryOutcome::Ok(sent) => Outcome::Sent(sent.into()),
                EntryOutcome::Err { error } => Outcome::Error((&error).into()),
            }),
        }
    }
}

impl From<json::AckEntryResult> for pb::AckResult {
    fn from(r: json::AckEntryResult) -> Self {
        use pb::ack_result::Outcome;
        pb::AckResult {
            receipt: r.receipt,
            outcome: Some(match r.outcome {
                EntryOutcome::Ok(acked) => Outcome::Ok(acked.ok),
                EntryOutcome::Err { error } => Outcome::Error((&error).into()),
            }),
        }
    }
}

impl From<json::LeaseChanged> for pb::ChangeLeaseResponse {
    fn from(c: json::LeaseChanged) -> Self {
        pb::ChangeLeaseResponse {
            receipt: c.receipt,
            lease_expires_at: c.lease_expires_at,
        }
    }
}

fn move_task_status(status: MoveTaskStatus) -> pb::MoveTaskStatus {
    match status {
        MoveTaskStatus::Running => pb::MoveTaskStatus::Running,
        MoveTaskStatus::Completed => pb::MoveTaskStatus::Completed,
        MoveTaskStatus::Cancelled => pb::MoveTaskStatus::Cancelled,
        MoveTaskStatus::Failed => pb::MoveTaskStatus::Failed,
    }
}

impl From<json::MoveTask<'_>> for pb::MoveTask {
    fn from(t: json::MoveTask<'_>) -> Self {
        pb::MoveTask {
            task_handle: t.task_handle.to_string(),
            status: move_task_status(t.status).into(),
            source: Some(queue_ref(t.source)),
            destination: t.destination.map(queue_ref),
            max_messages_per_second: t.max_messages_per_second,
            filter: t.filter.map(|f| pb::MoveFilter {
                message_ids: f.message_ids.iter().map(ToString::to_string).collect(),
                moved_since: f.moved_since,
                moved_before: f.moved_before,
            }),
            dry_run: t.dry_run,
            started_at: t.started_at,
            ended_at: t.ended_at,
            to_move: t.to_move,
            moved: t.moved,
            skipped: t.skipped,
            failure_reason: t.failure_reason.map(str::to_string),
        }
    }
}

impl From<json::MoveTaskList<'_>> for pb::ListMoveTasksResponse {
    fn from(list: json::MoveTaskList<'_>) -> Self {
        pb::ListMoveTasksResponse {
            tasks: list.tasks.into_iter().map(pb::MoveTask::from).collect(),
        }
    }
}

pub(super) fn stats(s: QueueStats) -> pb::QueueStats {
    pb::QueueStats {
        visible: s.visible,
        leased: s.leased,
        delayed: s.delayed,
        pending_redrive: s.pending_redrive,
        oldest_message_age_seconds: s.oldest_message_age_seconds,
        active_tenants: s.active_tenants,
        largest_tenant_in_flight: s.largest_tenant_in_flight,
        scheduled: s.scheduled,
        by_priority: s
            .by_priority
            .iter()
            .map(|l| pb::LevelStats {
                visible: l.visible,
                leased: l.leased,
                delayed: l.delayed,
                pending_redrive: l.pending_redrive,
            })
            .collect(),
    }
}

impl From<RaftStatus> for pb::Cluster {
    fn from(s: RaftStatus) -> Self {
        pb::Cluster {
            leader: s.leader,
            nodes: s
                .nodes
                .into_iter()
                .map(|n| pb::ClusterNode {
                    id: n.id,
                    raft_addr: n.raft_addr,
                    role: n.role.to_string(),
                    answering: n.answering,
                    matched_index: n.matched_index,
                    last_log_index: n.last_log_index,
                    commit_index: n.commit_index,
                    applied_index: n.applied_index,
                })
                .collect(),
            term: s.term,
            commit_index: s.commit_index,
            node_id: s.node_id,
            region: s.region,
            clock_offset_ms: s.clock_offset_ms,
            clock_skewed: s.clock_skewed,
            cluster_id: s.cluster_id,
            clock_confirmed: s.clock_confirmed,
            state_time_ms: s.state_time_ms,
            groups: s
                .groups
                .into_iter()
                .map(|g| pb::ClusterGroup {
                    group: g.group,
                    members: g.members,
                    leader: g.leader,
                    formed: g.formed,
                    queues: g.queues,
                    role: g.role.map(str::to_string),
                    term: g.term,
                    commit_index: g.commit_index,
                    applied_index: g.applied_index,
                    last_log_index: g.last_log_index,
                    outbox: g.outbox,
                })
                .collect(),
        }
    }
}

impl From<&ApiError> for pb::Error {
    fn from(e: &ApiError) -> Self {
        pb::Error {
            code: e.code.to_string(),
            message: e.message.clone(),
            field: e.field.clone(),
            sources: e.sources.as_deref().map(refs).unwrap_or_default(),
        }
    }
}
