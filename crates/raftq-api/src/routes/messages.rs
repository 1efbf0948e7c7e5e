//! Message routes: `POST /v1/queues/{q}/messages` (send), `POST .../messages/batch`,
//! `GET .../messages` (peek) and `POST .../purge`.
//!
//! Each handler reads its JSON into the plain values of `ops`, which checks every message
//! against the rules that need no state before it is proposed; in a batch, an entry that fails
//! them gets its own error result and the other entries are still sent. Rules of the queue (its
//! size limit, FIFO IDs, deduplication) are the engine's, which answers per entry too.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::auth::Account;
use crate::error::ApiError;
use crate::input::{Fields, JsonBody, Params, QueuePath};
use crate::json;
use crate::ops::{BatchEntryInput, MessageInput};
use crate::AppState;

/// The fields of one message, in a send or a batch entry.
const MESSAGE_FIELDS: &[&str] = &[
    "body",
    "attributes",
    "delay_seconds",
    "message_group_id",
    "message_deduplication_id",
];

/// Reads a message.
fn message(f: &Fields<'_>) -> Result<MessageInput, ApiError> {
    let attributes = match f.object("attributes")? {
        None => BTreeMap::new(),
        Some(map) => map
            .iter()
            .map(|(name, value)| {
                value
                    .as_str()
                    .map(|v| (name.clone(), v.to_string()))
                    .ok_or_else(|| {
                        ApiError::invalid(
                            format!("{}.{name}", f.path("attributes")),
                            "must be a string",
                        )
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(MessageInput {
        body: f.required_string("body")?.to_string(),
        attributes,
        delay_seconds: f.integer("delay_seconds")?,
        message_group_id: f.string("message_group_id")?.map(str::to_string),
        message_deduplication_id: f.string("message_deduplication_id")?.map(str::to_string),
    })
}

pub async fn send(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    f.only(MESSAGE_FIELDS)?;
    let sent = state.send(account, queue, message(&f)?).await?;
    Ok(Json(json::Sent::new(&sent)).into_response())
}

pub async fn send_batch(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    f.only(&["entries"])?;
    let list = f.required("entries", f.array("entries")?)?;
    let entry_fields: Vec<&str> = ["id"].iter().chain(MESSAGE_FIELDS).copied().collect();
    let entries = list
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let entry = Fields::nested(value, format!("entries[{i}]"))?;
            entry.only(&entry_fields)?;
            Ok(BatchEntryInput {
                id: entry.required_string("id")?.to_string(),
                message: message(&entry)?,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let results = state.send_batch(account, queue, entries).await?;
    let results = results
        .into_iter()
        .map(json::BatchEntryResult::new)
        .collect();
    Ok(Json(json::Results { results }).into_response())
}

pub async fn peek(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    params: Params,
) -> Result<Response, ApiError> {
    params.only(&["limit", "after"])?;
    let limit = params.number::<i64>("limit", "an integer")?;
    let after = params.number::<u64>("after", "a sequence number (an integer of at least 0)")?;
    let messages = state.peek(account, queue, after, limit).await?;
    Ok(Json(json::Peeked::new(&messages)).into_response())
}

pub async fn purge(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<StatusCode, ApiError> {
    state.purge(account, queue).await?;
    Ok(StatusCode::NO_CONTENT)
}
