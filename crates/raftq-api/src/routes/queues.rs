//! Queue routes: `POST/GET /v1/queues`, `GET/PATCH/DELETE /v1/queues/{q}`,
//! `GET /v1/queues/{q}/dead_letter_sources` and `GET /v1/queues/{q}/stats`.
//!
//! Each handler reads its body into the types here (field types and unknown fields are checked
//! by reading it), which are also the request schemas of the OpenAPI document, hands their plain
//! values to `ops` and renders the answer; names, ranges and required settings are checked by
//! `ops`, rules that need state (the redrive target exists, is of the same type, allows the
//! source...) by the engine.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use raftq_engine::{AllowPolicyInput, QueueAttributes, RedrivePolicyInput, RetryBackoffInput};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use utoipa::openapi::schema::{ArrayBuilder, OneOfBuilder};
use utoipa::ToSchema;

use crate::auth::Account;
use crate::body::{self, sharing_fields, QueueReference};
use crate::error::ApiError;
use crate::input::{JsonBody, Params, QueuePath};
use crate::json;
use crate::openapi::{self, Replicated};
use crate::ops::NewQueue;
use crate::shared::AppState;

/// The fields of a create that a patch refuses.
const FIXED_FIELDS: &[&str] = &["name", "type"];

/// The query parameters of a list.
pub const LIST_PARAMS: &[&str] = &["prefix"];

sharing_fields! {
    shared SettingFields {
        /// FIFO queues: a send without `message_deduplication_id` is deduplicated by the hex
        /// SHA-256 of its body. Default `false`.
        content_based_deduplication: Option<bool>,
        /// The lease of a receive that asks for none, 0–43200 seconds. Default 30.
        #[schema(minimum = 0, maximum = 43200)]
        lease_seconds: Option<i64>,
        /// The delay of a send that asks for none, 0–900 seconds. Default 0.
        #[schema(minimum = 0, maximum = 900)]
        delay_seconds: Option<i64>,
        /// How long a message is kept, 60–1209600 seconds. Default 345600 (4 days).
        #[schema(minimum = 60, maximum = 1209600)]
        retention_seconds: Option<i64>,
        /// The largest message (body and attributes), 1–1048576 bytes. Default 262144.
        #[schema(minimum = 1, maximum = 1048576)]
        max_message_bytes: Option<i64>,
        /// Where messages go after `max_receive_count` receives without an ack. `null` detaches
        /// the policy; absent leaves it as it is.
        #[serde(default, deserialize_with = "clearable")]
        #[schema(value_type = Option<RedrivePolicyBody>)]
        redrive_policy: Option<Option<RedrivePolicyBody>>,
        /// Which queues may use this queue as their dead-letter queue. Default `allow_all`.
        redrive_allow_policy: Option<AllowPolicyBody>,
        /// How long a message whose lease expired waits before it is visible again. `null` (the
        /// default) makes it visible at once; absent leaves it as it is.
        #[serde(default, deserialize_with = "clearable")]
        #[schema(value_type = Option<RetryBackoffBody>)]
        retry_backoff: Option<Option<RetryBackoffBody>>,
        /// How long a receive that gives no `wait_seconds` waits for a message, 0–20 seconds
        /// (SQS ReceiveMessageWaitTimeSeconds). Default 0.
        #[schema(minimum = 0, maximum = 20)]
        receive_wait_seconds: Option<i64>,
        /// Tags to set, and with `null` to remove (a merge: tags not named stay). Keys 1–128
        /// characters, not starting with `aws:`; values 0–256 characters; at most 50 tags.
        tags: Option<BTreeMap<String, Option<String>>>,
        /// `queue` or `message_group` (FIFO queues; see the schema).
        #[schema(schema_with = openapi::deduplication_scope)]
        deduplication_scope: Option<String>,
        /// Standard queues: the priority of a message sent without one, 0–9 (higher first).
        /// Default 0.
        #[schema(minimum = 0, maximum = 9)]
        default_priority: Option<i64>,
        /// Standard queues: serve the priority levels in these weights instead of strictly the
        /// highest first. 1–10 weights of 1–1000: the first weighs priority 0, the next
        /// priority 1, and every priority past the list's end takes its last weight (`[1, 2,
        /// 4]`: priorities 2–9 weigh 4). `null` (the default) is strict order; absent leaves it
        /// as it is.
        #[serde(default, deserialize_with = "clearable")]
        #[schema(value_type = Option<Vec<i64>>, min_items = 1, max_items = 10)]
        priority_weights: Option<Option<Vec<i64>>>,
    }

    /// The body of `POST /v1/queues`: a name, an optional `type` (`standard` or `fifo`, which must
    /// match the name) and the settings.
    #[schema(example = json!({
        "name": "orders.fifo",
        "type": "fifo",
        "content_based_deduplication": true,
        "lease_seconds": 60,
        "delay_seconds": 0,
        "retention_seconds": 86400,
        "max_message_bytes": 65536,
        "redrive_policy": {"dead_letter_target": "orders-dlq.fifo", "max_receive_count": 5},
        "redrive_allow_policy": {"permission": "deny_all"},
        "retry_backoff": {"initial_seconds": 5, "max_seconds": 600, "multiplier": 2.0},
        "receive_wait_seconds": 20,
        "tags": {"team": "payments", "cost-center": "42"},
        "deduplication_scope": "message_group"
    }))]
    struct CreateQueue {
        /// 1–80 characters of `A-Z a-z 0-9 _ -`, unique in the account; a name ending in `.fifo`
        /// (counted in the 80) makes a FIFO queue.
        name: String,
        #[serde(rename = "type")]
        #[schema(schema_with = openapi::queue_type)]
        queue_type: Option<String>,
    }

    /// The settings of a queue: the body of `PATCH /v1/queues/{q}`, and of a create with its
    /// name. An absent (or `null`) setting keeps its default on a create, its value on a patch.
    #[schema(example = json!({"lease_seconds": 120, "redrive_policy": null, "tags": {"team": "billing", "old": null}}))]
    struct QueueSettings {}
}

/// A retry backoff in a request; all three fields are required. A message whose lease expired
/// waits `min(max_seconds, initial_seconds × multiplier^(receive_count − 1))` seconds.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryBackoffBody {
    /// The wait after the first receive, 0–900 seconds.
    #[schema(value_type = i64, minimum = 0, maximum = 900)]
    initial_seconds: Option<i64>,
    /// The longest wait, from `initial_seconds` to 43200 seconds.
    #[schema(value_type = i64, minimum = 0, maximum = 43200)]
    max_seconds: Option<i64>,
    /// The factor between two waits, 1.0–10.0, kept to three decimal places.
    #[schema(value_type = f64, minimum = 1.0, maximum = 10.0)]
    multiplier: Option<f64>,
}

/// A redrive policy in a request.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedrivePolicyBody {
    #[schema(schema_with = dead_letter_target, required = true)]
    dead_letter_target: Option<QueueReference>,
    /// Receives after which an unacknowledged message moves, 1–1000.
    #[schema(value_type = i64, minimum = 1, maximum = 1000)]
    max_receive_count: Option<i64>,
}

/// A redrive allow policy in a request.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AllowPolicyBody {
    #[schema(schema_with = openapi::permission, required = true)]
    permission: Option<String>,
    #[schema(schema_with = source_queues)]
    source_queues: Option<Vec<QueueReference>>,
}

/// A setting that `null` clears: absent is `None` (leave it as it is, by `default`), `null` is
/// `Some(None)` (clear it), a value is `Some(Some(..))`.
fn clearable<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Schema of a redrive policy's target.
fn dead_letter_target() -> OneOfBuilder {
    openapi::queue_reference().description(Some(
        "The dead-letter queue: in the same account and region, of the same type, not the queue \
         itself, and allowing the queue by its `redrive_allow_policy`",
    ))
}

/// Schema of the sources a `by_queue` allow policy names.
fn source_queues() -> ArrayBuilder {
    ArrayBuilder::new()
        .items(openapi::queue_reference())
        .min_items(Some(1))
        .max_items(Some(10))
        .description(Some("With `by_queue` only: the queues allowed, 1–10"))
}

impl From<SettingFields> for QueueAttributes {
    fn from(fields: SettingFields) -> QueueAttributes {
        QueueAttributes {
            content_based_deduplication: fields.content_based_deduplication,
            lease_seconds: fields.lease_seconds,
            delay_seconds: fields.delay_seconds,
            retention_seconds: fields.retention_seconds,
            max_message_bytes: fields.max_message_bytes,
            redrive_policy: fields
                .redrive_policy
                .map(|policy| policy.map(RedrivePolicyInput::from)),
            redrive_allow_policy: fields.redrive_allow_policy.map(AllowPolicyInput::from),
            retry_backoff: fields
                .retry_backoff
                .map(|backoff| backoff.map(RetryBackoffInput::from)),
            receive_wait_seconds: fields.receive_wait_seconds,
            tags: fields.tags,
            deduplication_scope: fields.deduplication_scope,
            // SQS's own settings, which the SQS endpoint alone sets.
            fifo_throughput_limit: None,
            policy: None,
            default_priority: fields.default_priority,
            priority_weights: fields.priority_weights,
        }
    }
}

impl From<RetryBackoffBody> for RetryBackoffInput {
    fn from(body: RetryBackoffBody) -> RetryBackoffInput {
        RetryBackoffInput {
            initial_seconds: body.initial_seconds,
            max_seconds: body.max_seconds,
            multiplier: body.multiplier,
        }
    }
}

impl From<RedrivePolicyBody> for RedrivePolicyInput {
    fn from(body: RedrivePolicyBody) -> RedrivePolicyInput {
        RedrivePolicyInput {
            dead_letter_target: body.dead_letter_target.map(|t| t.0),
            max_receive_count: body.max_receive_count,
        }
    }
}

impl From<AllowPolicyBody> for AllowPolicyInput {
    fn from(body: AllowPolicyBody) -> AllowPolicyInput {
        AllowPolicyInput {
            permission: body.permission,
            source_queues: body
                .source_queues
                .map(|queues| queues.into_iter().map(|q| q.0).collect()),
        }
    }
}

/// Create a queue
#[utoipa::path(
    post,
    path = "/v1/queues",
    operation_id = "CreateQueue",
    tag = "queues",
    request_body = CreateQueue,
    responses(
        (status = 201, description = "The queue", body = json::Queue),
        (status = 409, description = "`queue_exists`: the account has a queue of this name", body = openapi::ErrorBody),
        Account,
        JsonBody,
        Replicated,
    )
)]
pub async fn create(
    State(state): State<AppState>,
    Account(account): Account,
    JsonBody(body): JsonBody<CreateQueue>,
) -> Result<Response, ApiError> {
    let ((name, queue_type), settings) = body.split();
    let new = NewQueue {
        name,
        queue_type,
        attributes: settings.into(),
    };
    let view = state.create_queue(account, new).await?;
    Ok((StatusCode::CREATED, Json(json::Queue::new(&view))).into_response())
}

/// List the account's queues
#[utoipa::path(
    get,
    path = "/v1/queues",
    operation_id = "ListQueues",
    tag = "queues",
    params(("prefix" = Option<String>, Query, description = "Only queues whose name starts with this")),
    responses(
        (status = 200, description = "The queues, by name", body = json::QueueList),
        (status = 400, description = "`invalid_argument`: an unknown or repeated query parameter", body = openapi::ErrorBody),
        Account,
        Replicated,
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Account(account): Account,
    params: Params,
) -> Result<Response, ApiError> {
    params.only(LIST_PARAMS)?;
    let prefix = params.text("prefix").unwrap_or_default().to_string();
    let views = state.list_queues(account, prefix).await?;
    Ok(Json(json::QueueList::new(&views)).into_response())
}

/// Get a queue
#[utoipa::path(
    get,
    path = "/v1/queues/{q}",
    operation_id = "GetQueue",
    tag = "queues",
    params(QueuePath),
    responses(
        (status = 200, description = "The queue", body = json::Queue),
        Account,
        QueuePath,
        Replicated,
    )
)]
pub async fn get(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    let view = state.get_queue(account, queue).await?;
    Ok(Json(json::Queue::new(&view)).into_response())
}

/// Change a queue's settings
///
/// `name` and `type` cannot be changed.
#[utoipa::path(
    patch,
    path = "/v1/queues/{q}",
    operation_id = "PatchQueue",
    tag = "queues",
    params(QueuePath),
    request_body = QueueSettings,
    responses(
        (status = 200, description = "The queue as changed", body = json::Queue),
        Account,
        QueuePath,
        JsonBody,
        Replicated,
    )
)]
pub async fn patch(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody<Value>,
) -> Result<Response, ApiError> {
    if let Some(fixed) = FIXED_FIELDS.iter().find(|f| body.get(**f).is_some()) {
        return Err(ApiError::invalid(
            *fixed,
            "cannot be changed; create a new queue instead",
        ));
    }
    let ((), settings) = body::read::<QueueSettings>(&body)?.split();
    let view = state.patch_queue(account, queue, settings.into()).await?;
    Ok(Json(json::Queue::new(&view)).into_response())
}

/// Delete a queue and its messages
#[utoipa::path(
    delete,
    path = "/v1/queues/{q}",
    operation_id = "DeleteQueue",
    tag = "queues",
    params(QueuePath),
    responses(
        (status = 204, description = "Deleted"),
        (status = 409, description = "`queue_in_use`: the queue is the dead-letter queue of the queues in `sources`", body = openapi::ErrorBody),
        Account,
        QueuePath,
        Replicated,
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<StatusCode, ApiError> {
    state.delete_queue(account, queue).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List the queues whose redrive policy names this queue
#[utoipa::path(
    get,
    path = "/v1/queues/{q}/dead_letter_sources",
    operation_id = "ListDeadLetterSources",
    tag = "queues",
    params(QueuePath),
    responses(
        (status = 200, description = "The source queues", body = json::RefList),
        Account,
        QueuePath,
        Replicated,
    )
)]
pub async fn dead_letter_sources(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    let queues = state.dead_letter_sources(account, queue).await?;
    Ok(Json(json::RefList { queues }).into_response())
}

/// Count a queue's messages
#[utoipa::path(
    get,
    path = "/v1/queues/{q}/stats",
    operation_id = "GetQueueStats",
    tag = "queues",
    params(QueuePath),
    responses(
        (status = 200, description = "The counters", body = openapi::QueueStats),
        Account,
        QueuePath,
        Replicated,
    )
)]
pub async fn stats(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    Ok(Json(state.queue_stats(account, queue).await?).into_response())
}
