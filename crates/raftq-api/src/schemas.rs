//! Schemas of what the API returns as the engine shapes it: mirrors of engine types (the engine
//! does not depend on utoipa) and schemas of its string enumerations, held to the engine's JSON
//! by a test in `openapi`. The response types of `json` and the document of `openapi` use them.

use raftq_engine::QueueType;
use serde::Serialize;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
use utoipa::openapi::Ref;
use utoipa::ToSchema;
use uuid::Uuid;

/// The body of every error: `{"error": {...}}`.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    error: Error,
}

/// A refused or failed request (the API's `ApiError`). Batch and ack results carry the same
/// object per entry.
#[derive(Serialize, ToSchema)]
pub struct Error {
    /// `invalid_argument`, `unauthenticated`, `permission_denied`, `queue_not_found`,
    /// `move_task_not_found`, `not_found`, `method_not_allowed`, `queue_exists`, `queue_in_use`,
    /// `lease_expired`, `move_task_running`, `move_task_not_running`, `message_not_scheduled`,
    /// `membership_conflict`, `message_too_large`, `too_many_requests`, `storage_full`,
    /// `unavailable` or `internal`.
    code: String,
    /// What went wrong; for `invalid_argument`, `<field>: <rule>`.
    message: String,
    /// The field the error is about, JSON-path style (`entries[1].id`,
    /// `redrive_policy.max_receive_count`), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<String>,
    /// For `queue_in_use`: the queues whose redrive policy names the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    sources: Option<Vec<QueueRef>>,
}

/// A resource reference to a queue (the engine's `QueueRef`).
#[derive(Serialize, ToSchema)]
pub struct QueueRef {
    id: Uuid,
    name: String,
    crn: String,
}

/// A redrive policy as returned (the engine's `RedrivePolicyView`).
#[derive(Serialize, ToSchema)]
pub struct RedrivePolicy {
    dead_letter_target: QueueRef,
    max_receive_count: u32,
}

/// A queue's counters (the engine's `QueueStats`).
#[derive(Serialize, ToSchema)]
pub struct QueueStats {
    visible: u64,
    leased: u64,
    delayed: u64,
    /// Messages that wait to be moved to the dead-letter queue.
    pending_redrive: u64,
    oldest_message_age_seconds: u64,
    /// Standard queues: how many message group IDs (tenants) hold messages.
    active_tenants: u64,
    /// The most messages one tenant has leased now.
    largest_tenant_in_flight: u64,
    /// Messages sent with a `deliver_at` still ahead (counted in `delayed` too).
    scheduled: u64,
    /// The messages of each priority level, by state: ten entries, the first for priority 0
    /// (every message of a FIFO queue is there).
    #[schema(min_items = 10, max_items = 10)]
    by_priority: Vec<LevelStats>,
}

/// The messages of one priority level (the engine's `LevelStats`).
#[derive(Serialize, ToSchema)]
pub struct LevelStats {
    visible: u64,
    leased: u64,
    delayed: u64,
    pending_redrive: u64,
}

/// The states a peeked message can be in, as the engine's `MessageState` serializes them.
pub(crate) const MESSAGE_STATES: &[&str] = &["visible", "leased", "delayed", "pending_redrive"];

/// The states of a move task, as the engine's `MoveTaskStatus` serializes them.
pub(crate) const MOVE_TASK_STATUSES: &[&str] = &["running", "completed", "cancelled", "failed"];

/// The permissions of a redrive allow policy.
pub(crate) const PERMISSIONS: &[&str] = &["allow_all", "deny_all", "by_queue"];

/// A string that is one of `values`.
fn one_of_strings(values: &[&str]) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.iter().copied()))
}

/// Schema of a queue type.
pub fn queue_type() -> ObjectBuilder {
    one_of_strings(&[QueueType::Standard.as_str(), QueueType::Fifo.as_str()])
}

/// Schema of a peeked message's state.
pub fn message_state() -> ObjectBuilder {
    one_of_strings(MESSAGE_STATES)
}

/// Schema of a move task's status.
pub fn move_task_status() -> ObjectBuilder {
    one_of_strings(MOVE_TASK_STATUSES)
}

/// Schema of a FIFO queue's deduplication scope.
pub fn deduplication_scope() -> ObjectBuilder {
    use raftq_engine::model::DeduplicationScope;
    one_of_strings(&[
        DeduplicationScope::Queue.as_str(),
        DeduplicationScope::MessageGroup.as_str(),
    ])
    .description(Some(
        "FIFO queues: where a deduplication ID is looked for within its 5 minutes: in the whole \
         queue (`queue`, the default) or in the sent message's group only (`message_group`: the \
         same ID in two groups is two messages). SQS DeduplicationScope",
    ))
}

/// Schema of a redrive allow policy's permission.
pub fn permission() -> ObjectBuilder {
    one_of_strings(PERMISSIONS)
}

/// Schema of a queue named in a request body: a name, UUID or CRN, or a resource reference as
/// the API returns them (its `crn` is used, else `id`, else `name`).
pub fn queue_reference() -> OneOfBuilder {
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("The queue's name, UUID or CRN")),
        )
        .item(Ref::from_schema_name(QueueRef::name()))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::error::ApiError;

    /// The variants of `$kind` named, as an array; a variant not named fails to compile.
    macro_rules! every {
        ($kind:ident: $($variant:ident),*) => {{
            let _named = |value: $kind| match value {
                $($kind::$variant)|* => (),
            };
            [$($kind::$variant),*]
        }};
    }

    fn json(value: impl Serialize) -> Value {
        serde_json::to_value(value).expect("serializes")
    }

    /// The schema mirrors serialize exactly as the engine and API types they stand for.
    #[test]
    fn mirrors_serialize_as_the_engine_types() {
        use raftq_engine::model::RedrivePolicyView;
        use raftq_engine::QueueStats as EngineQueueStats;
        use raftq_engine::{EngineError, MessageState, MoveTaskStatus};

        let id = Uuid::from_u128(7);
        let crn = raftq_engine::model::crn("local", "dev", id);
        let engine_ref = raftq_engine::QueueRef {
            id,
            name: "dlq".into(),
            crn: crn.clone(),
        };
        let mirror_ref = || QueueRef {
            id,
            name: "dlq".into(),
            crn: crn.clone(),
        };
        assert_eq!(json(&engine_ref), json(mirror_ref()));
        assert_eq!(
            json(RedrivePolicyView {
                dead_letter_target: engine_ref.clone(),
                max_receive_count: 5,
            }),
            json(RedrivePolicy {
                dead_letter_target: mirror_ref(),
                max_receive_count: 5,
            }),
        );
        let mut by_priority = [raftq_engine::LevelStats::default(); 10];
        by_priority[9] = raftq_engine::LevelStats {
            visible: 1,
            leased: 2,
            delayed: 3,
            pending_redrive: 4,
        };
        let level = |n| LevelStats {
            visible: n,
            leased: 2 * n,
            delayed: 3 * n,
            pending_redrive: 4 * n,
        };
        // The same counters in the engine's stats and in their mirror here.
        macro_rules! stats {
            ($stats:ident, $by_priority:expr) => {
                $stats {
                    visible: 1,
                    leased: 2,
                    delayed: 3,
                    pending_redrive: 4,
                    oldest_message_age_seconds: 5,
                    active_tenants: 6,
                    largest_tenant_in_flight: 7,
                    scheduled: 8,
                    by_priority: $by_priority,
                }
            };
        }
        let mirror_levels = (0..10).map(|p| level(u64::from(p == 9))).collect();
        assert_eq!(
            json(stats!(EngineQueueStats, by_priority)),
            json(stats!(QueueStats, mirror_levels)),
        );
        for api in [
            ApiError::from(EngineError::QueueInUse {
                sources: vec![engine_ref.clone()],
            }),
            ApiError::invalid("entries[0].id", "is required"),
        ] {
            let mirror = Error {
                code: api.code.to_string(),
                message: api.message.clone(),
                field: api.field.clone(),
                sources: api.sources.as_ref().map(|_| vec![mirror_ref()]),
            };
            assert_eq!(json(&api), json(mirror));
        }
        // Naming every state here makes a new one fail to compile until it is listed.
        let states = every!(MessageState: Visible, Leased, Delayed, PendingRedrive).map(json);
        assert_eq!(states.as_slice(), MESSAGE_STATES);
        let statuses =
            every!(MoveTaskStatus: Running, Completed, Cancelled, Failed).map(|status| {
                assert_eq!(json(status), json(status.as_str()));
                json(status)
            });
        assert_eq!(statuses.as_slice(), MOVE_TASK_STATUSES);
    }
}
