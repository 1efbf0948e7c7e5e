//! Message routes: `POST /v1/queues/{q}/messages` (send), `POST .../messages/batch`,
//! `GET .../messages` (peek), `POST .../purge`, and the scheduled messages: `GET .../scheduled`
//! (list) and `DELETE .../scheduled/{message_id}` (cancel).
//!
//! Each handler reads its body into the types here, which are also the request schemas of the
//! OpenAPI document, and hands their plain values to `ops`, which checks every message against
//! the rules that need no state before it is proposed; in a batch, an entry that fails them gets
//! its own error result and the other entries are still sent. Rules of the queue (its size
//! limit, FIFO IDs, deduplication) are the engine's, which answers per entry too.

use std::collections::BTreeMap;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::attributes;
use crate::auth::Account;
use crate::body::sharing_fields;
use crate::error::ApiError;
use crate::input::{JsonBody, Params, QueuePath};
use crate::json;
use crate::openapi::{self, Replicated};
use crate::ops::{BatchEntryInput, Listing, MessageInput};
use crate::shared::AppState;

/// The query parameters of a peek.
pub const PEEK_PARAMS: &[&str] = &["limit", "after"];

sharing_fields! {
    shared MessageFields {
        /// UTF-8 text, at least 1 byte; with the attributes at most the queue's
        /// `max_message_bytes`.
        body: String,
        /// Up to 10 attributes, names 1–256 characters: each value as text, or base64 for a
        /// `Binary` type. Names, values and types other than `String` count toward the size.
        attributes: Option<BTreeMap<String, String>>,
        /// The data type of each attribute that is not a plain `String`: `String`, `Number` or
        /// `Binary`, optionally with a custom label (`Number.float`, `Binary.jpg`), at most 256
        /// characters. A `Number` value is an integer or decimal number (38 significant digits,
        /// magnitude 10^-128 to 10^126).
        attribute_types: Option<BTreeMap<String, String>>,
        /// Seconds before the message can be received, 0–900. Default: the queue's.
        #[schema(minimum = 0, maximum = 900)]
        delay_seconds: Option<i64>,
        /// FIFO queues (required there): the group, 1–128 bytes of printable ASCII. Stored and
        /// returned on a standard queue, where it orders nothing.
        message_group_id: Option<String>,
        /// FIFO queues: the deduplication ID, 1–128 bytes of printable ASCII; required unless the
        /// queue has `content_based_deduplication`. A standard queue refuses it.
        message_deduplication_id: Option<String>,
        /// Standard queues: 0–9, higher first. Default: the queue's `default_priority`. A FIFO
        /// queue refuses it.
        #[schema(minimum = 0, maximum = 9)]
        priority: Option<i64>,
        /// When the message becomes visible (RFC 3339), instead of `delay_seconds`: before the
        /// queue's retention ends, counted from the send. Until then it is scheduled: listed by
        /// `GET /v1/queues/{q}/scheduled` and cancellable. A time not ahead is due at once.
        #[schema(format = DateTime)]
        deliver_at: Option<String>,
    }

    /// A message to send: the body of `POST /v1/queues/{q}/messages`.
    #[schema(example = json!({
        "body": "order 42 paid",
        "attributes": {"kind": "payment", "amount": "12.50", "receipt": "JVBERi0xLjQ="},
        "attribute_types": {"amount": "Number", "receipt": "Binary.pdf"},
        "delay_seconds": 0,
        "message_group_id": "customer-7",
        "message_deduplication_id": "order-42-paid"
    }))]
    struct SendMessage {}

    /// One message of a batch send.
    struct BatchEntry {
        /// Names the entry in the results: 1–80 characters of `A-Z a-z 0-9 _ -`, unique in the
        /// batch.
        id: String,
    }
}

/// The body of `POST /v1/queues/{q}/messages/batch`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"entries": [
    {"id": "a", "body": "first", "attributes": {"kind": "test"}, "delay_seconds": 5,
     "message_group_id": "g", "message_deduplication_id": "d-1"},
    {"id": "b", "body": "second", "message_group_id": "g", "message_deduplication_id": "d-2"}
]}))]
pub struct SendBatch {
    /// 1–10 messages, each with an ID of its own.
    #[schema(min_items = 1, max_items = 10)]
    entries: Vec<BatchEntry>,
}

impl MessageFields {
    /// The message, its attributes typed; `prefix` leads the names of the fields in errors.
    fn message(self, prefix: &str) -> Result<MessageInput, ApiError> {
        let attributes = attributes::from_text(
            self.attributes.unwrap_or_default(),
            self.attribute_types.unwrap_or_default(),
            prefix,
        )?;
        Ok(MessageInput {
            body: self.body,
            attributes,
            delay_seconds: self.delay_seconds,
            message_group_id: self.message_group_id,
            message_deduplication_id: self.message_deduplication_id,
            trace_header: None,
            priority: self.priority,
            deliver_at: self.deliver_at,
        })
    }
}

/// Send a message
#[utoipa::path(
    post,
    path = "/v1/queues/{q}/messages",
    operation_id = "SendMessage",
    tag = "messages",
    params(QueuePath),
    request_body = SendMessage,
    responses(
        (status = 200, description = "Sent, or a duplicate of a message sent in the last 5 minutes", body = json::Sent),
        Account,
        QueuePath,
        JsonBody,
        Replicated,
    )
)]
pub async fn send(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody<SendMessage>,
) -> Result<Response, ApiError> {
    let ((), fields) = body.split();
    let sent = state.send(account, queue, fields.message("")?).await?;
    Ok(Json(json::Sent::new(&sent)).into_response())
}

/// Send up to 10 messages
///
/// A message that breaks a rule gets its own error result and the others are still sent; a
/// request that is itself wrong (no entries, more than 10, a bad or repeated entry ID, a field
/// of the wrong type) is refused whole. The body limit of this route is 16 MiB.
#[utoipa::path(
    post,
    path = "/v1/queues/{q}/messages/batch",
    operation_id = "SendMessageBatch",
    tag = "messages",
    params(QueuePath),
    request_body = SendBatch,
    responses(
        (status = 200, description = "One result per entry, in request order", body = json::Results<json::BatchEntryResult>),
        Account,
        QueuePath,
        JsonBody,
        Replicated,
    )
)]
pub async fn send_batch(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody<SendBatch>,
) -> Result<Response, ApiError> {
    let entries = body
        .entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            let ((id,), fields) = entry.split();
            let message = fields.message(&format!("entries[{i}]."))?;
            Ok(BatchEntryInput { id, message })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let results = state.send_batch(account, queue, entries).await?;
    let results = results
        .into_iter()
        .map(json::BatchEntryResult::new)
        .collect();
    Ok(Json(json::Results { results }).into_response())
}

/// Peek at messages
///
/// No lease, no change to `receive_count`: messages in queue order with their `state`, one page
/// at a time.
#[utoipa::path(
    get,
    path = "/v1/queues/{q}/messages",
    operation_id = "PeekMessages",
    tag = "messages",
    params(
        QueuePath,
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Messages per page, 1–100; default 10"),
        ("after" = Option<u64>, Query, description = "Show messages after this sequence number: the `next_after` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of messages", body = json::Peeked),
        Account,
        QueuePath,
        Replicated,
    )
)]
pub async fn peek(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    params: Params,
) -> Result<Response, ApiError> {
    let messages = state
        .list_messages(account, queue, Listing::All, page(&params)?)
        .await?;
    Ok(Json(json::Peeked::new(&messages)).into_response())
}

/// The page a peek or a list of scheduled messages asks for: the sequence number to show
/// messages after, and how many.
fn page(params: &Params) -> Result<(Option<u64>, Option<i64>), ApiError> {
    params.only(PEEK_PARAMS)?;
    let limit = params.number::<i64>("limit", "an integer")?;
    let after = params.number::<u64>("after", "a sequence number (an integer of at least 0)")?;
    Ok((after, limit))
}

/// List scheduled messages
///
/// The messages sent with a `deliver_at` that is still ahead, in queue order, one page at a
/// time, as a peek shows them (state `delayed`, `visible_at` their `deliver_at`).
#[utoipa::path(
    get,
    path = "/v1/queues/{q}/scheduled",
    operation_id = "ListScheduledMessages",
    tag = "messages",
    params(
        QueuePath,
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Messages per page, 1–100; default 10"),
        ("after" = Option<u64>, Query, description = "Show messages after this sequence number: the `next_after` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of scheduled messages", body = json::Peeked),
        Account,
        QueuePath,
        Replicated,
    )
)]
pub async fn scheduled(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    params: Params,
) -> Result<Response, ApiError> {
    let messages = state
        .list_messages(account, queue, Listing::Scheduled, page(&params)?)
        .await?;
    Ok(Json(json::Peeked::new(&messages)).into_response())
}

/// Cancel a scheduled message
///
/// Removes a message sent with a `deliver_at` before that time comes; it is never delivered.
#[utoipa::path(
    delete,
    path = "/v1/queues/{q}/scheduled/{message_id}",
    operation_id = "CancelScheduledMessage",
    tag = "messages",
    params(
        QueuePath,
        ("message_id" = String, Path, description = "The message's `message_id`, as its send returned it"),
    ),
    responses(
        (status = 204, description = "Cancelled: the message is gone"),
        (status = 409, description = "`message_not_scheduled`: no message of the queue with this ID waits for its `deliver_at` (it is due already, was cancelled, or was never scheduled); nothing changed", body = openapi::ErrorBody),
        Account,
        QueuePath,
        Replicated,
    )
)]
pub async fn cancel_scheduled(
    State(state): State<AppState>,
    Account(account): Account,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let Path((queue, message_id)) =
        path.map_err(|r| ApiError::invalid("message_id", format!("bad path: {}", r.body_text())))?;
    state.cancel_scheduled(account, queue, &message_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Delete every message of a queue
#[utoipa::path(
    post,
    path = "/v1/queues/{q}/purge",
    operation_id = "PurgeQueue",
    tag = "messages",
    params(QueuePath),
    responses(
        (status = 204, description = "Purged"),
        Account,
        QueuePath,
        Replicated,
    )
)]
pub async fn purge(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<StatusCode, ApiError> {
    state.purge(account, queue).await?;
    Ok(StatusCode::NO_CONTENT)
}
