//! Lease routes: `POST /v1/queues/{q}/receive` (with long polling), `POST .../ack` (a batch of
//! receipts, each with its own result) and `POST .../lease` (change or release a lease). Ranges
//! and defaults are those of `ops`. The request bodies are read into the types here, which are
//! also their schemas in the OpenAPI document.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::Account;
use crate::error::ApiError;
use crate::input::{JsonBody, QueuePath};
use crate::json;
use crate::openapi::{self, Replicated};
use crate::ops::ReceiveOptions;
use crate::shared::AppState;
use crate::throttle::Caller;

/// The body of `POST /v1/queues/{q}/receive`; an empty body takes every default.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"max_messages": 10, "lease_seconds": 60, "wait_seconds": 20, "receive_attempt_id": "poll-7f3a"}))]
pub struct Receive {
    /// At most this many messages, 1–10. Default 1.
    #[schema(minimum = 1, maximum = 10)]
    max_messages: Option<i64>,
    /// The lease of each message, 0–43200 seconds. Default: the queue's.
    #[schema(minimum = 0, maximum = 43200)]
    lease_seconds: Option<i64>,
    /// With nothing to deliver, wait up to this long for a message, 0–20 seconds (long
    /// polling). Default: the queue's `receive_wait_seconds`.
    #[schema(minimum = 0, maximum = 20)]
    wait_seconds: Option<i64>,
    /// FIFO queues only: 1–128 characters of `A-Z a-z 0-9` and punctuation. A retry with the
    /// same ID within 5 minutes of the first receive returns the same messages with the same
    /// receipts (their leases start again), as long as none of them was acknowledged,
    /// released, had its lease changed or expired; otherwise it is a new receive.
    #[schema(min_length = 1, max_length = 128)]
    receive_attempt_id: Option<String>,
}

/// The body of `POST /v1/queues/{q}/ack`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"receipts": ["AAEC...", "AAED..."]}))]
pub struct Ack {
    /// The receipts of the messages to acknowledge (delete), 1–10.
    #[schema(min_items = 1, max_items = 10)]
    receipts: Vec<String>,
}

/// The body of `POST /v1/queues/{q}/lease`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"receipt": "AAEC...", "lease_seconds": 0, "delay_seconds": 30}))]
pub struct ChangeLease {
    /// The receipt of the lease to change.
    receipt: String,
    /// The new lease, from now, 0–43200 seconds; 0 releases the message.
    #[schema(value_type = i64, minimum = 0, maximum = 43200)]
    lease_seconds: Option<i64>,
    /// With `lease_seconds` 0 only: the released message stays invisible this long, 0–900
    /// seconds (its peek state is `delayed`). Default 0: visible at once.
    #[schema(minimum = 0, maximum = 900)]
    delay_seconds: Option<i64>,
}

/// Receive messages
///
/// Each message is leased for `lease_seconds` and comes with a `receipt`. With `wait_seconds`
/// and nothing to deliver, the request waits until a message can be delivered or the wait ends.
#[utoipa::path(
    post,
    path = "/v1/queues/{q}/receive",
    operation_id = "ReceiveMessages",
    tag = "leases",
    params(QueuePath),
    request_body = Receive,
    responses(
        (status = 200, description = "The messages leased, possibly none", body = json::Delivered),
        Account,
        QueuePath,
        JsonBody,
        Replicated,
    )
)]
pub async fn receive(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody<Receive>,
) -> Result<Response, ApiError> {
    let options = ReceiveOptions {
        max_messages: body.max_messages,
        lease_seconds: body.lease_seconds,
        wait_seconds: body.wait_seconds,
        receive_attempt_id: body.receive_attempt_id,
        caller: caller.map(|c| c.0).unwrap_or_default(),
    };
    let received = state.receive(account, queue, options).await?;
    Ok(Json(json::Delivered::new(&received)?).into_response())
}

/// Acknowledge (delete) messages
///
/// Each receipt gets its own result: a lease that is no longer active is that receipt's
/// `lease_expired`, a receipt raftq never issued its `invalid_argument`.
#[utoipa::path(
    post,
    path = "/v1/queues/{q}/ack",
    operation_id = "Ack",
    tag = "leases",
    params(QueuePath),
    request_body = Ack,
    responses(
        (status = 200, description = "One result per receipt, in request order", body = json::Results<json::AckEntryResult>),
        Account,
        QueuePath,
        JsonBody,
        Replicated,
    )
)]
pub async fn ack(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody<Ack>,
) -> Result<Response, ApiError> {
    let results = state.ack(account, queue, body.receipts).await?;
    let results = results.into_iter().map(json::AckEntryResult::new).collect();
    Ok(Json(json::Results { results }).into_response())
}

/// Change or release a lease
#[utoipa::path(
    post,
    path = "/v1/queues/{q}/lease",
    operation_id = "ChangeLease",
    tag = "leases",
    params(QueuePath),
    request_body = ChangeLease,
    responses(
        (status = 200, description = "The lease as changed", body = json::LeaseChanged),
        (status = 409, description = "`lease_expired`: the lease is no longer active; nothing changed", body = openapi::ErrorBody),
        Account,
        QueuePath,
        JsonBody,
        Replicated,
    )
)]
pub async fn change(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody<ChangeLease>,
) -> Result<Response, ApiError> {
    let changed = state
        .change_lease(
            account,
            queue,
            body.receipt,
            body.lease_seconds,
            body.delay_seconds,
        )
        .await?;
    Ok(Json(json::LeaseChanged::new(changed)).into_response())
}
