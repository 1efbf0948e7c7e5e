//! The gRPC front's translation, by hand, between the JSON of the REST API and the protobuf
//! messages of `raftq.v1`: a request's JSON input into the rpc's request, the rpc's answer
//! and errors into JSON in the shape REST answers with.
//!
//! The translation is strict: an input field that protobuf has no place for, or a value of a
//! type its field cannot hold (a string for a number, `1.5` for an integer), panics, since such
//! a case can only be sent over REST and belongs to its tests. Absent and `null` fields are
//! both "not given", as in the API; a patch's `"redrive_policy": null`, `"retry_backoff":
//! null` and `"priority_weights": null` are `clear_redrive_policy`, `clear_retry_backoff` and
//! `clear_priority_weights`, and a patch's tags with a value
//! or `null` are `set_tags` and `remove_tags`. On the way back, fields protobuf
//! leaves out are left out of the JSON where REST leaves them out too, and are `null` where
//! REST always writes them (`redrive_policy`, `retry_backoff`, `first_received_at`,
//! `next_after`, `leader`, a move task's `destination` and `filter`).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};
use tonic::Status;

use raftq_api::grpc::pb;

use crate::front::{Client, Op};

/// Makes the rpc of `op` on `c` with `input` translated, and translates its answer.
pub async fn call(mut c: Client, op: Op<'_>, input: Value) -> Result<Value, Status> {
    Ok(match op {
        Op::CreateQueue => {
            let request = Input::read(input, create_request);
            queue(&c.create_queue(request).await?.into_inner())
        }
        Op::ListQueues => {
            let request = Input::read(input, |i| pb::ListQueuesRequest {
                prefix: i.string("prefix"),
            });
            let list = c.list_queues(request).await?.into_inner();
            json!({"queues": list.queues.iter().map(queue).collect::<Vec<_>>()})
        }
        Op::GetQueue(q) => {
            let request = Input::read(input, |_| pb::GetQueueRequest { queue: q.into() });
            queue(&c.get_queue(request).await?.into_inner())
        }
        Op::PatchQueue(q) => {
            let request = Input::read(input, |i| patch_request(q, i));
            queue(&c.patch_queue(request).await?.into_inner())
        }
        Op::DeleteQueue(q) => {
            let request = Input::read(input, |_| pb::DeleteQueueRequest { queue: q.into() });
            c.delete_queue(request).await?;
            Value::Null
        }
        Op::DeadLetterSources(q) => {
            let request = Input::read(input, |_| pb::ListDeadLetterSourcesRequest {
                queue: q.into(),
            });
            let list = c.list_dead_letter_sources(request).await?.into_inner();
            json!({"queues": refs(&list.queues)})
        }
        Op::Send(q) => {
            let request = Input::read(input, |i| send_request(q, i));
            sent(&c.send_message(request).await?.into_inner())
        }
        Op::SendBatch(q) => {
            let request = Input::read(input, |i| pb::SendMessageBatchRequest {
                queue: q.into(),
                entries: i
                    .opt("entries", |v| v.as_array().cloned())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|entry| Input::read(entry, batch_entry))
                    .collect(),
            });
            let answer = c.send_message_batch(request).await?.into_inner();
            json!({"results": answer.results.iter().map(batch_result).collect::<Vec<_>>()})
        }
        Op::Receive(q) => {
            let request = Input::read(input, |i| pb::ReceiveMessagesRequest {
                queue: q.into(),
                max_messages: i.int("max_messages"),
                lease_seconds: i.int("lease_seconds"),
                wait_seconds: i.int("wait_seconds"),
                receive_attempt_id: i.text("receive_attempt_id"),
            });
            let answer = c.receive_messages(request).await?.into_inner();
            json!({"messages": answer.messages.iter().map(message).collect::<Vec<_>>()})
        }
        Op::Ack(q) => {
            let request = Input::read(input, |i| pb::AckRequest {
                queue: q.into(),
                receipts: i.strings("receipts"),
            });
            let answer = c.ack(request).await?.into_inner();
            json!({"results": answer.results.iter().map(ack_result).collect::<Vec<_>>()})
        }
        Op::ChangeLease(q) => {
            let request = Input::read(input, |i| pb::ChangeLeaseRequest {
                queue: q.into(),
                receipt: i.string("receipt"),
                lease_seconds: i.int("lease_seconds"),
                delay_seconds: i.int("delay_seconds"),
            });
            let changed = c.change_lease(request).await?.into_inner();
            json!({"receipt": changed.receipt, "lease_expires_at": changed.lease_expires_at})
        }
        Op::Peek(q) => {
            let request = Input::read(input, |i| pb::PeekMessagesRequest {
                queue: q.into(),
                limit: i.int("limit"),
                after: i.opt("after", Value::as_u64),
            });
            let page = c.peek_messages(request).await?.into_inner();
            json!({
                "messages": page.messages.iter().map(message).collect::<Vec<_>>(),
                "next_after": page.next_after,
            })
        }
        Op::Purge(q) => {
            let request = Input::read(input, |_| pb::PurgeQueueRequest { queue: q.into() });
            c.purge_queue(request).await?;
            Value::Null
        }
        Op::Scheduled(q) => {
            let request = Input::read(input, |i| pb::ListScheduledMessagesRequest {
                queue: q.into(),
                limit: i.int("limit"),
                after: i.opt("after", Value::as_u64),
            });
            let page = c.list_scheduled_messages(request).await?.into_inner();
            json!({
                "messages": page.messages.iter().map(message).collect::<Vec<_>>(),
                "next_after": page.next_after,
            })
        }
        Op::CancelScheduled(q, id) => {
            let request = Input::read(input, |_| pb::CancelScheduledMessageRequest {
                queue: q.into(),
                message_id: id.into(),
            });
            c.cancel_scheduled_message(request).await?;
            Value::Null
        }
        Op::Stats(q) => {
            let request = Input::read(input, |_| pb::GetQueueStatsRequest { queue: q.into() });
            let s = c.get_queue_stats(request).await?.into_inner();
            json!({
                "visible": s.visible,
                "leased": s.leased,
                "delayed": s.delayed,
                "pending_redrive": s.pending_redrive,
                "oldest_message_age_seconds": s.oldest_message_age_seconds,
                "active_tenants": s.active_tenants,
                "largest_tenant_in_flight": s.largest_tenant_in_flight,
                "scheduled": s.scheduled,
                "by_priority": s.by_priority.iter().map(|l| json!({
                    "visible": l.visible,
                    "leased": l.leased,
                    "delayed": l.delayed,
                    "pending_redrive": l.pending_redrive,
                })).collect::<Vec<_>>(),
            })
        }
        Op::StartMoveTask(q) => {
            let request = Input::read(input, |i| pb::StartMoveTaskRequest {
                queue: q.into(),
                destination: i.text("destination"),
                max_messages_per_second: i.int("max_messages_per_second"),
                filter: i.take("filter").map(move_filter_input),
                dry_run: i.opt("dry_run", Value::as_bool).unwrap_or_default(),
            });
            move_task(&c.start_move_task(request).await?.into_inner())
        }
        Op::MoveTasks(q) => {
            let request = Input::read(input, |_| pb::ListMoveTasksRequest { queue: q.into() });
            let list = c.list_move_tasks(request).await?.into_inner();
            json!({"tasks": list.tasks.iter().map(move_task).collect::<Vec<_>>()})
        }
        Op::CancelMoveTask(q, task) => {
            let request = Input::read(input, |_| pb::CancelMoveTaskRequest {
                queue: q.into(),
                task_handle: task.into(),
            });
            move_task(&c.cancel_move_task(request).await?.into_inner())
        }
        Op::Cluster => {
            let request = Input::read(input, |_| pb::GetClusterRequest {});
            cluster(c.get_cluster(request).await?.into_inner())
        }
        Op::AddNode => {
            let request = Input::read(input, |i| pb::AddNodeRequest {
                id: i.opt("id", Value::as_u64).unwrap_or_default(),
                raft_addr: i.string("raft_addr"),
            });
            cluster(c.add_node(request).await?.into_inner())
        }
        Op::RemoveNode => {
            let request = Input::read(input, |i| pb::RemoveNodeRequest {
                id: i.opt("id", Value::as_u64).unwrap_or_default(),
            });
            cluster(c.remove_node(request).await?.into_inner())
        }
        Op::DrainNode | Op::UndrainNode => {
            let request = Input::read(input, |i| pb::DrainNodeRequest {
                id: i.opt("id", Value::as_u64).unwrap_or_default(),
            });
            let answer = match op {
                Op::DrainNode => c.drain_node(request).await,
                _ => c.undrain_node(request).await,
            };
            cluster(answer?.into_inner())
        }
        Op::Accounts => {
            let request = Input::read(input, |_| pb::ListAccountsRequest {});
            let list = c.list_accounts(request).await?.into_inner();
            let accounts: Vec<Value> = list
                .accounts
                .iter()
                .map(|a| json!({"account": a.account, "queues": a.queues}))
                .collect();
            json!({ "accounts": accounts })
        }
    })
}

/// The fields of a JSON object, read one by one into a protobuf message.
struct Input(Map<String, Value>);

impl Input {
    /// The message `build` reads from `input` (`null` has no fields); every field must be read.
    fn read<T>(input: Value, build: impl FnOnce(&mut Input) -> T) -> T {
        let fields = match input {
            Value::Null => Map::new(),
            Value::Object(fields) => fields,
            other => panic!("{other}: not a protobuf message, a REST-only case"),
        };
        let mut input = Input(fields);
        let message = build(&mut input);
        let unread: Vec<&String> = input.0.keys().collect();
        assert!(
            unread.is_empty(),
            "{unread:?}: no protobuf field, a REST-only case"
        );
        message
    }

    /// A field that is given (present and not `null`).
    fn take(&mut self, name: &str) -> Option<Value> {
        self.0.remove(name).filter(|value| !value.is_null())
    }

    /// A given field as `convert` reads it into its protobuf field's type.
    fn opt<T>(&mut self, name: &str, convert: impl FnOnce(&Value) -> Option<T>) -> Option<T> {
        self.take(name).map(|value| {
            convert(&value)
                .unwrap_or_else(|| panic!("{name}: {value} has no protobuf form, a REST-only case"))
        })
    }

    fn int(&mut self, name: &str) -> Option<i64> {
        self.opt(name, Value::as_i64)
    }

    fn text(&mut self, name: &str) -> Option<String> {
        self.opt(name, text)
    }

    /// A string field, empty when not given (as protobuf has it).
    fn string(&mut self, name: &str) -> String {
        self.text(name).unwrap_or_default()
    }

    /// A repeated string field, empty when not given.
    fn strings(&mut self, name: &str) -> Vec<String> {
        let strings =
            |value: &Value| -> Option<Vec<String>> { value.as_array()?.iter().map(text).collect() };
        self.opt(name, strings).unwrap_or_default()
    }
}

fn text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_string)
}

fn redrive_policy(policy: Value) -> pb::RedrivePolicyInput {
    Input::read(policy, |p| pb::RedrivePolicyInput {
        dead_letter_target: p.text("dead_letter_target"),
        max_receive_count: p.int("max_receive_count"),
    })
}

fn allow_policy(policy: Value) -> pb::RedriveAllowPolicyInput {
    Input::read(policy, |p| pb::RedriveAllowPolicyInput {
        permission: p.text("permission"),
        source_queues: p.strings("source_queues"),
    })
}

fn retry_backoff(backoff: Value) -> pb::RetryBackoffInput {
    Input::read(backoff, |b| pb::RetryBackoffInput {
        initial_seconds: b.int("initial_seconds"),
        max_seconds: b.int("max_seconds"),
        multiplier: b.opt("multiplier", Value::as_f64),
    })
}

fn move_filter_input(filter: Value) -> pb::MoveFilter {
    Input::read(filter, |f| pb::MoveFilter {
        message_ids: f.strings("message_ids"),
        moved_since: f.text("moved_since"),
        moved_before: f.text("moved_before"),
    })
}

fn create_request(i: &mut Input) -> pb::CreateQueueRequest {
    pb::CreateQueueRequest {
        name: i.string("name"),
        r#type: i.text("type"),
        content_based_deduplication: i.opt("content_based_deduplication", Value::as_bool),
        lease_seconds: i.int("lease_seconds"),
        delay_seconds: i.int("delay_seconds"),
        retention_seconds: i.int("retention_seconds"),
        max_message_bytes: i.int("max_message_bytes"),
        redrive_policy: i.take("redrive_policy").map(redrive_policy),
        redrive_allow_policy: i.take("redrive_allow_policy").map(allow_policy),
        retry_backoff: i.take("retry_backoff").map(retry_backoff),
        receive_wait_seconds: i.int("receive_wait_seconds"),
        tags: i.opt("tags", strings_map).unwrap_or_default(),
        deduplication_scope: i.text("deduplication_scope"),
        default_priority: i.int("default_priority"),
        priority_weights: i.opt("priority_weights", weights),
    }
}

/// Priority weights: an array of integers.
fn weights(value: &Value) -> Option<pb::PriorityWeights> {
    let weights: Option<Vec<i64>> = value.as_array()?.iter().map(Value::as_i64).collect();
    Some(pb::PriorityWeights { weights: weights? })
}

/// A patch: the settings of a create, with the redrive policy and the retry backoff each set,
/// cleared (`null`) or left (absent).
fn patch_request(queue: &str, i: &mut Input) -> pb::PatchQueueRequest {
    use pb::patch_queue_request::{Backoff, Redrive, Weights};
    let redrive = match i.0.remove("redrive_policy") {
        None => None,
        Some(Value::Null) => Some(Redrive::ClearRedrivePolicy(true)),
        Some(policy) => Some(Redrive::RedrivePolicy(redrive_policy(policy))),
    };
    let backoff = match i.0.remove("retry_backoff") {
        None => None,
        Some(Value::Null) => Some(Backoff::ClearRetryBackoff(true)),
        Some(backoff) => Some(Backoff::RetryBackoff(retry_backoff(backoff))),
    };
    let weights = match i.0.remove("priority_weights") {
        None => None,
        Some(Value::Null) => Some(Weights::ClearPriorityWeights(true)),
        Some(list) => Some(Weights::PriorityWeights(
            self::weights(&list).expect("priority weights are integers"),
        )),
    };
    let mut set_tags = BTreeMap::new();
    let mut remove_tags = Vec::new();
    let tags = i.0.remove("tags").unwrap_or(Value::Null);
    for (key, value) in tags.as_object().into_iter().flatten() {
        match value {
            Value::Null => remove_tags.push(key.clone()),
            other => {
                let text = text(other).expect("a tag value is a string or null");
                set_tags.insert(key.clone(), text);
            }
        }
    }
    let settings = create_request(i);
    assert!(
        settings.name.is_empty() && settings.r#type.is_none(),
        "a patch names no queue and no type: a REST-only case"
    );
    pb::PatchQueueRequest {
        queue: queue.into(),
        content_based_deduplication: settings.content_based_deduplication,
        lease_seconds: settings.lease_seconds,
        delay_seconds: settings.delay_seconds,
        retention_seconds: settings.retention_seconds,
        max_message_bytes: settings.max_message_bytes,
        redrive,
        redrive_allow_policy: settings.redrive_allow_policy,
        backoff,
        receive_wait_seconds: settings.receive_wait_seconds,
        set_tags,
        remove_tags,
        deduplication_scope: settings.deduplication_scope,
        default_priority: settings.default_priority,
        weights,
    }
}

fn send_request(queue: &str, i: &mut Input) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        queue: queue.into(),
        body: i.string("body"),
        attributes: i.opt("attributes", strings_map).unwrap_or_default(),
        delay_seconds: i.int("delay_seconds"),
        message_group_id: i.text("message_group_id"),
        message_deduplication_id: i.text("message_deduplication_id"),
        attribute_types: i.opt("attribute_types", strings_map).unwrap_or_default(),
        priority: i.int("priority"),
        deliver_at: i.text("deliver_at"),
    }
}

/// Attributes, their types or tags: an object of strings.
fn strings_map(value: &Value) -> Option<BTreeMap<String, String>> {
    let attributes = value.as_object()?;
    attributes
        .iter()
        .map(|(name, value)| Some((name.clone(), text(value)?)))
        .collect()
}

/// A batch entry: an `id` and the fields of a send.
fn batch_entry(i: &mut Input) -> pb::SendMessageBatchEntry {
    let id = i.string("id");
    let send = send_request("", i);
    pb::SendMessageBatchEntry {
        id,
        body: send.body,
        attributes: send.attributes,
        delay_seconds: send.delay_seconds,
        message_group_id: send.message_group_id,
        message_deduplication_id: send.message_deduplication_id,
        attribute_types: send.attribute_types,
        priority: send.priority,
        deliver_at: send.deliver_at,
    }
}

/// `object` with the `optional` fields that are given.
fn with_optional<const N: usize>(mut object: Value, optional: [(&str, Option<Value>); N]) -> Value {
    for (name, value) in optional {
        if let Some(value) = value {
            object[name] = value;
        }
    }
    object
}

/// An error object: `{"code", "message", "field"?, "sources"?}`.
pub fn error(e: &pb::Error) -> Value {
    with_optional(
        json!({"code": e.code, "message": e.message}),
        [
            ("field", e.field.clone().map(Value::from)),
            ("sources", (!e.sources.is_empty()).then(|| refs(&e.sources))),
        ],
    )
}

fn queue_ref(r: &pb::QueueRef) -> Value {
    json!({"id": r.id, "name": r.name, "crn": r.crn})
}

fn refs(list: &[pb::QueueRef]) -> Value {
    list.iter().map(queue_ref).collect()
}

fn queue(q: &pb::Queue) -> Value {
    let redrive_policy = q.redrive_policy.as_ref().map(|p| {
        json!({
            "dead_letter_target": p.dead_letter_target.as_ref().map(queue_ref),
            "max_receive_count": p.max_receive_count,
        })
    });
    let allow_policy = q.redrive_allow_policy.as_ref().map(|p| {
        with_optional(
            json!({"permission": p.permission}),
            [(
                "source_queues",
                (!p.source_queues.is_empty()).then(|| refs(&p.source_queues)),
            )],
        )
    });
    let retry_backoff = q.retry_backoff.as_ref().map(|b| {
        json!({
            "initial_seconds": b.initial_seconds,
            "max_seconds": b.max_seconds,
            "multiplier": b.multiplier,
        })
    });
    json!({
        "id": q.id,
        "name": q.name,
        "crn": q.crn,
        "arn": q.arn,
        "group": q.group,
        "type": q.r#type,
        "created_at": q.created_at,
        "modified_at": q.modified_at,
        "content_based_deduplication": q.content_based_deduplication,
        "lease_seconds": q.lease_seconds,
        "delay_seconds": q.delay_seconds,
        "retention_seconds": q.retention_seconds,
        "max_message_bytes": q.max_message_bytes,
        "redrive_policy": redrive_policy,
        "redrive_allow_policy": allow_policy,
        "retry_backoff": retry_backoff,
        "receive_wait_seconds": q.receive_wait_seconds,
        "tags": q.tags,
        "deduplication_scope": q.deduplication_scope,
        "default_priority": q.default_priority,
        "priority_weights": (!q.priority_weights.is_empty()).then_some(&q.priority_weights),
    })
}

/// A delivered or peeked message; a peeked message's state as REST writes it (`visible`...).
fn message(m: &pb::Message) -> Value {
    let state = m.state.map(|state| {
        let state = pb::MessageState::try_from(state).expect("a known state");
        let name = state.as_str_name().strip_prefix("MESSAGE_STATE_");
        Value::from(name.expect("a state name").to_lowercase())
    });
    let text = |value: &Option<String>| value.clone().map(Value::from);
    with_optional(
        json!({
            "message_id": m.message_id,
            "body": m.body,
            "attributes": m.attributes,
            "receive_count": m.receive_count,
            "sent_at": m.sent_at,
            "first_received_at": m.first_received_at,
        }),
        [
            ("receipt", text(&m.receipt)),
            ("lease_expires_at", text(&m.lease_expires_at)),
            ("message_group_id", text(&m.message_group_id)),
            (
                "message_deduplication_id",
                text(&m.message_deduplication_id),
            ),
            ("sequence_number", m.sequence_number.map(Value::from)),
            (
                "dead_letter_source",
                m.dead_letter_source.as_ref().map(queue_ref),
            ),
            ("moved_at", text(&m.moved_at)),
            ("state", state),
            ("visible_at", text(&m.visible_at)),
            (
                "attribute_types",
                (!m.attribute_types.is_empty()).then(|| json!(m.attribute_types)),
            ),
            ("priority", m.priority.map(Value::from)),
            ("scheduled", m.scheduled.then_some(Value::Bool(true))),
        ],
    )
}

/// A move task; its status as REST writes it (`running`...), its filter's times and the end
/// only where they are given.
fn move_task(t: &pb::MoveTask) -> Value {
    let status = pb::MoveTaskStatus::try_from(t.status).expect("a known status");
    let status = status.as_str_name().strip_prefix("MOVE_TASK_STATUS_");
    let text = |value: &Option<String>| value.clone().map(Value::from);
    let filter = t.filter.as_ref().map(|f| {
        with_optional(
            json!({"message_ids": f.message_ids}),
            [
                ("moved_since", text(&f.moved_since)),
                ("moved_before", text(&f.moved_before)),
            ],
        )
    });
    with_optional(
        json!({
            "task_handle": t.task_handle,
            "status": status.expect("a status name").to_lowercase(),
            "source": t.source.as_ref().map(queue_ref),
            "destination": t.destination.as_ref().map(queue_ref),
            "max_messages_per_second": t.max_messages_per_second,
            "filter": filter,
            "dry_run": t.dry_run,
            "started_at": t.started_at,
            "to_move": t.to_move,
            "moved": t.moved,
            "skipped": t.skipped,
        }),
        [
            ("ended_at", text(&t.ended_at)),
            ("failure_reason", text(&t.failure_reason)),
        ],
    )
}

fn sent(s: &pb::SendMessageResponse) -> Value {
    with_optional(
        json!({"message_id": s.message_id, "duplicate": s.duplicate}),
        [("sequence_number", s.sequence_number.map(Value::from))],
    )
}

/// `{"id", "message_id", "duplicate", ...}` or `{"id", "error"}`.
fn batch_result(r: &pb::SendMessageBatchResult) -> Value {
    use pb::send_message_batch_result::Outcome;
    let mut result = match r.outcome.as_ref().expect("an outcome") {
        Outcome::Sent(s) => sent(s),
        Outcome::Error(e) => json!({ "error": error(e) }),
    };
    result["id"] = r.id.clone().into();
    result
}

/// `{"receipt", "ok": true}` or `{"receipt", "error"}`.
fn ack_result(r: &pb::AckResult) -> Value {
    use pb::ack_result::Outcome;
    let mut result = match r.outcome.as_ref().expect("an outcome") {
        Outcome::Ok(ok) => json!({ "ok": ok }),
        Outcome::Error(e) => json!({ "error": error(e) }),
    };
    result["receipt"] = r.receipt.clone().into();
    result
}

fn cluster(c: pb::Cluster) -> Value {
    let nodes: Vec<Value> = c
        .nodes
        .iter()
        .map(|n| {
            json!({"id": n.id, "raft_addr": n.raft_addr, "role": n.role,
                "answering": n.answering, "matched_index": n.matched_index,
                "last_log_index": n.last_log_index, "commit_index": n.commit_index,
                "applied_index": n.applied_index})
        })
        .collect();
    let groups: Vec<Value> = c
        .groups
        .iter()
        .map(|g| {
            json!({"group": g.group, "members": g.members, "leader": g.leader,
                "formed": g.formed, "queues": g.queues, "role": g.role, "term": g.term,
                "commit_index": g.commit_index, "applied_index": g.applied_index,
                "last_log_index": g.last_log_index})
        })
        .collect();
    with_optional(
        json!({
            "leader": c.leader,
            "nodes": nodes,
            "groups": groups,
            "term": c.term,
            "commit_index": c.commit_index,
            "node_id": c.node_id,
            "region": c.region,
        }),
        [
            ("cluster_id", c.cluster_id.map(Value::from)),
            ("clock_offset_ms", c.clock_offset_ms.map(Value::from)),
            ("clock_skewed", c.clock_skewed.map(Value::from)),
            ("clock_confirmed", c.clock_confirmed.map(Value::from)),
            ("state_time_ms", c.state_time_ms.map(Value::from)),
        ],
    )
}
