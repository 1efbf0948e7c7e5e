//! Message routes: `POST /v1/queues/{q}/messages` (send), `POST .../messages/batch`,
//! `GET .../messages` (peek) and `POST .../purge`.
//!
//! Every message is checked against the rules that need no state before it is proposed (see
//! [`precheck`]); in a batch, an entry that fails them gets its own error result and the other
//! entries are still sent. Rules of the queue (its size limit, FIFO IDs, deduplication) are the
//! engine's, which answers per entry too.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use raftq_engine::model::{limits, QueueConfig};
use raftq_engine::{
    validate, BatchEntry, BatchResult, Command, EngineError, NewMessage, Outcome, QueueType,
};
use raftq_node::{Query, QueryResult};
use uuid::Uuid;

use crate::auth::Account;
use crate::error::ApiError;
use crate::input::{Fields, JsonBody, Params, QueuePath};
use crate::json;
use crate::AppState;

/// The fields of one message, in a send or a batch entry.
const MESSAGE_FIELDS: &[&str] = &[
    "body",
    "attributes",
    "delay_seconds",
    "message_group_id",
    "message_deduplication_id",
];

/// Reads a message and stamps it with a new UUID.
fn new_message(f: &Fields<'_>) -> Result<NewMessage, ApiError> {
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
    Ok(NewMessage {
        message_id: Uuid::new_v4(),
        body: f.required_string("body")?.to_string(),
        attributes,
        delay_seconds: f.integer("delay_seconds")?,
        message_group_id: f.string("message_group_id")?.map(str::to_string),
        message_deduplication_id: f.string("message_deduplication_id")?.map(str::to_string),
    })
}

/// The rules of a message that need no state: those of [`validate::message`] for the largest
/// standard queue (body, attributes, absolute size, delay, group ID), plus the form of the
/// deduplication ID, which a standard queue would refuse outright.
fn precheck(msg: &mut NewMessage) -> Result<(), EngineError> {
    let dedup = msg.message_deduplication_id.take();
    let largest = QueueConfig {
        max_message_bytes: limits::MAX_MESSAGE_BYTES_MAX as u32,
        ..QueueConfig::default()
    };
    let checked = validate::message(msg, QueueType::Standard, &largest);
    msg.message_deduplication_id = dedup;
    checked?;
    match &msg.message_deduplication_id {
        Some(id) => validate::message_tag("message_deduplication_id", id),
        None => Ok(()),
    }
}

pub async fn send(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    f.only(MESSAGE_FIELDS)?;
    let mut message = new_message(&f)?;
    precheck(&mut message)?;
    let written = state
        .write(Command::Send {
            account,
            queue,
            message,
        })
        .await?;
    match written.outcome {
        Outcome::Sent(result) => Ok(Json(json::Sent::new(&result)).into_response()),
        _ => Err(ApiError::unexpected_answer()),
    }
}

pub async fn send_batch(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    f.only(&["entries"])?;
    let entries = f.required("entries", f.array("entries")?)?;
    validate::count("entries", entries.len(), limits::BATCH_MAX)?;
    let entry_fields: Vec<&str> = ["id"].iter().chain(MESSAGE_FIELDS).copied().collect();
    // Results in request order: refusals of the precheck now, the rest from the engine.
    let mut results: Vec<Option<BatchResult>> = Vec::with_capacity(entries.len());
    let mut to_send = Vec::with_capacity(entries.len());
    let mut ids: Vec<&str> = Vec::with_capacity(entries.len());
    for (i, value) in entries.iter().enumerate() {
        let entry = Fields::nested(value, format!("entries[{i}]"))?;
        entry.only(&entry_fields)?;
        let id = entry.required_string("id")?;
        validate::batch_entry_id(&entry.path("id"), id)?;
        if ids.contains(&id) {
            return Err(ApiError::invalid(
                entry.path("id"),
                "must be unique within the batch",
            ));
        }
        ids.push(id);
        let mut message = new_message(&entry)?;
        match precheck(&mut message) {
            Ok(()) => {
                results.push(None);
                to_send.push(BatchEntry {
                    id: id.to_string(),
                    message,
                });
            }
            Err(refused) => results.push(Some(BatchResult {
                id: id.to_string(),
                result: Err(refused),
            })),
        }
    }
    if to_send.is_empty() {
        // Nothing to propose; the queue must still exist for the batch to be answered.
        state.read(Query::GetQueue { account, queue }).await?;
    } else {
        let written = state
            .write(Command::SendBatch {
                account,
                queue,
                entries: to_send,
            })
            .await?;
        let Outcome::SentBatch(sent) = written.outcome else {
            return Err(ApiError::unexpected_answer());
        };
        let mut sent = sent.into_iter();
        for slot in results.iter_mut().filter(|r| r.is_none()) {
            *slot = sent.next();
        }
    }
    let results = results
        .into_iter()
        .map(|r| r.map(json::BatchEntryResult::new))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(ApiError::unexpected_answer)?;
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
    let query = Query::Peek {
        account,
        queue,
        after,
        limit,
    };
    match state.read(query).await? {
        QueryResult::Messages(messages) => Ok(Json(json::Peeked::new(&messages)).into_response()),
        _ => Err(ApiError::unexpected_answer()),
    }
}

pub async fn purge(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<StatusCode, ApiError> {
    match state
        .write(Command::Purge { account, queue })
        .await?
        .outcome
    {
        Outcome::Purged => Ok(StatusCode::NO_CONTENT),
        _ => Err(ApiError::unexpected_answer()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> NewMessage {
        NewMessage {
            message_id: Uuid::nil(),
            body: body.into(),
            attributes: BTreeMap::new(),
            delay_seconds: None,
            message_group_id: None,
            message_deduplication_id: None,
        }
    }

    #[test]
    fn precheck_applies_the_stateless_rules() {
        assert!(precheck(&mut message("x")).is_ok());
        let mut with_ids = NewMessage {
            message_group_id: Some("g".into()),
            message_deduplication_id: Some("d".into()),
            ..message("x")
        };
        assert!(precheck(&mut with_ids).is_ok());
        assert_eq!(with_ids.message_deduplication_id.as_deref(), Some("d"));
        assert_eq!(
            precheck(&mut message("")).unwrap_err().field(),
            Some("body")
        );
        let big = "x".repeat(limits::MAX_MESSAGE_BYTES_MAX as usize + 1);
        assert_eq!(
            precheck(&mut message(&big)).unwrap_err().code(),
            "message_too_large"
        );
        let mut delayed = NewMessage {
            delay_seconds: Some(-1),
            ..message("x")
        };
        assert_eq!(
            precheck(&mut delayed).unwrap_err().field(),
            Some("delay_seconds")
        );
        let mut bad_dedup = NewMessage {
            message_deduplication_id: Some("\u{1}".into()),
            ..message("x")
        };
        assert_eq!(
            precheck(&mut bad_dedup).unwrap_err().field(),
            Some("message_deduplication_id")
        );
    }
}
