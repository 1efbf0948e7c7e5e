//! Lease routes: `POST /v1/queues/{q}/receive` (with long polling), `POST .../ack` (a batch of
//! receipts, each with its own result) and `POST .../lease` (change or release a lease).

use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use raftq_engine::model::limits;
use raftq_engine::{validate, Command, Outcome};

use crate::auth::Account;
use crate::error::ApiError;
use crate::input::{string_at, Fields, JsonBody, QueuePath};
use crate::json;
use crate::longpoll::{self, ReceiveRequest};
use crate::AppState;

/// Longest long poll, in seconds.
const WAIT_SECONDS_MAX: i64 = 20;

/// Checks an optional lease length.
fn lease_seconds(f: &Fields<'_>) -> Result<Option<i64>, ApiError> {
    let lease = f.integer("lease_seconds")?;
    if let Some(v) = lease {
        validate::in_range("lease_seconds", v, 0, limits::LEASE_SECONDS_MAX)?;
    }
    Ok(lease)
}

pub async fn receive(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    f.only(&["max_messages", "lease_seconds", "wait_seconds"])?;
    let max_messages = f.integer("max_messages")?;
    if let Some(v) = max_messages {
        validate::in_range("max_messages", v, 1, limits::RECEIVE_MAX_MESSAGES)?;
    }
    let lease_seconds = lease_seconds(&f)?;
    let wait = match f.integer("wait_seconds")? {
        Some(v) => validate::in_range("wait_seconds", v, 0, WAIT_SECONDS_MAX)?,
        None => 0,
    };
    let request = ReceiveRequest {
        account,
        queue,
        max_messages,
        lease_seconds,
        wait: Duration::from_secs(wait.into()),
    };
    let received = longpoll::receive(&state, request).await?;
    let delivered = json::Delivered::new(&received.deliveries, &received.payloads)?;
    Ok(Json(delivered).into_response())
}

pub async fn ack(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    f.only(&["receipts"])?;
    let list = f.required("receipts", f.array("receipts")?)?;
    validate::count("receipts", list.len(), limits::BATCH_MAX)?;
    let receipts = list
        .iter()
        .enumerate()
        .map(|(i, v)| string_at(v, format!("receipts[{i}]")).map(str::to_string))
        .collect::<Result<Vec<_>, _>>()?;
    let written = state
        .write(Command::Ack {
            account,
            queue,
            receipts,
        })
        .await?;
    match written.outcome {
        Outcome::Acked(results) => {
            let results = results.into_iter().map(json::AckEntryResult::new).collect();
            Ok(Json(json::Results { results }).into_response())
        }
        _ => Err(ApiError::unexpected_answer()),
    }
}

pub async fn change(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    f.only(&["receipt", "lease_seconds"])?;
    let receipt = f.required_string("receipt")?.to_string();
    let lease_seconds = f.required("lease_seconds", lease_seconds(&f)?)?;
    let written = state
        .write(Command::ChangeLease {
            account,
            queue,
            receipt,
            lease_seconds,
        })
        .await?;
    match written.outcome {
        Outcome::LeaseChanged {
            receipt,
            lease_expires_at,
        } => Ok(Json(json::LeaseChanged {
            receipt,
            lease_expires_at: json::rfc3339(lease_expires_at),
        })
        .into_response()),
        _ => Err(ApiError::unexpected_answer()),
    }
}
