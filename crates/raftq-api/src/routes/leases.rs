//! Lease routes: `POST /v1/queues/{q}/receive` (with long polling), `POST .../ack` (a batch of
//! receipts, each with its own result) and `POST .../lease` (change or release a lease). Ranges
//! and defaults are those of `ops`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::auth::Account;
use crate::error::ApiError;
use crate::input::{string_at, Fields, JsonBody, QueuePath};
use crate::json;
use crate::ops::ReceiveOptions;
use crate::AppState;

pub async fn receive(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    f.only(&["max_messages", "lease_seconds", "wait_seconds"])?;
    let options = ReceiveOptions {
        max_messages: f.integer("max_messages")?,
        lease_seconds: f.integer("lease_seconds")?,
        wait_seconds: f.integer("wait_seconds")?,
    };
    let received = state.receive(account, queue, options).await?;
    Ok(Json(json::Delivered::new(&received)?).into_response())
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
    let receipts = list
        .iter()
        .enumerate()
        .map(|(i, v)| string_at(v, format!("receipts[{i}]")).map(str::to_string))
        .collect::<Result<Vec<_>, _>>()?;
    let results = state.ack(account, queue, receipts).await?;
    let results = results.into_iter().map(json::AckEntryResult::new).collect();
    Ok(Json(json::Results { results }).into_response())
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
    let lease_seconds = f.integer("lease_seconds")?;
    let changed = state
        .change_lease(account, queue, receipt, lease_seconds)
        .await?;
    Ok(Json(json::LeaseChanged::new(changed)).into_response())
}
