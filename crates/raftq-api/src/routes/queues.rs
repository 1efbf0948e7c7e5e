//! Queue routes: `POST/GET /v1/queues`, `GET/PATCH/DELETE /v1/queues/{q}`,
//! `GET /v1/queues/{q}/dead_letter_sources` and `GET /v1/queues/{q}/stats`.
//!
//! Each handler reads its JSON into the plain values of `ops` (field types and unknown fields are
//! checked here) and renders the answer; names, ranges and required settings are checked by
//! `ops`, rules that need state (the redrive target exists, is of the same type, allows the
//! source...) by the engine.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use raftq_engine::{AllowPolicyInput, QueueAttributes, RedrivePolicyInput};

use crate::auth::Account;
use crate::error::ApiError;
use crate::input::{queue_reference, Fields, JsonBody, Params, QueuePath};
use crate::json;
use crate::ops::NewQueue;
use crate::AppState;

/// The optional settings of a queue, for create and patch.
const ATTRIBUTE_FIELDS: &[&str] = &[
    "content_based_deduplication",
    "lease_seconds",
    "delay_seconds",
    "retention_seconds",
    "max_message_bytes",
    "redrive_policy",
    "redrive_allow_policy",
];

/// Reads the optional settings; `"redrive_policy": null` clears the policy.
fn attributes(f: &Fields<'_>) -> Result<QueueAttributes, ApiError> {
    let redrive_policy = match f.raw("redrive_policy") {
        None => None,
        Some(v) if v.is_null() => Some(None),
        Some(v) => Some(Some(redrive_policy(Fields::nested(
            v,
            f.path("redrive_policy"),
        )?)?)),
    };
    let redrive_allow_policy = f
        .value("redrive_allow_policy")
        .map(|v| allow_policy(Fields::nested(v, f.path("redrive_allow_policy"))?))
        .transpose()?;
    Ok(QueueAttributes {
        content_based_deduplication: f.boolean("content_based_deduplication")?,
        lease_seconds: f.integer("lease_seconds")?,
        delay_seconds: f.integer("delay_seconds")?,
        retention_seconds: f.integer("retention_seconds")?,
        max_message_bytes: f.integer("max_message_bytes")?,
        redrive_policy,
        redrive_allow_policy,
    })
}

fn redrive_policy(f: Fields<'_>) -> Result<RedrivePolicyInput, ApiError> {
    f.only(&["dead_letter_target", "max_receive_count"])?;
    let dead_letter_target = f
        .value("dead_letter_target")
        .map(|v| queue_reference(v, f.path("dead_letter_target")))
        .transpose()?;
    Ok(RedrivePolicyInput {
        dead_letter_target,
        max_receive_count: f.integer("max_receive_count")?,
    })
}

fn allow_policy(f: Fields<'_>) -> Result<AllowPolicyInput, ApiError> {
    f.only(&["permission", "source_queues"])?;
    let source_queues = f
        .array("source_queues")?
        .map(|list| {
            list.iter()
                .enumerate()
                .map(|(i, v)| queue_reference(v, format!("{}[{i}]", f.path("source_queues"))))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    Ok(AllowPolicyInput {
        permission: f.string("permission")?.map(str::to_string),
        source_queues,
    })
}

pub async fn create(
    State(state): State<AppState>,
    Account(account): Account,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    let known: Vec<&str> = ["name", "type"]
        .iter()
        .chain(ATTRIBUTE_FIELDS)
        .copied()
        .collect();
    f.only(&known)?;
    let new = NewQueue {
        name: f.required_string("name")?.to_string(),
        queue_type: f.string("type")?.map(str::to_string),
        attributes: attributes(&f)?,
    };
    let view = state.create_queue(account, new).await?;
    Ok((StatusCode::CREATED, Json(json::Queue::new(&view))).into_response())
}

pub async fn list(
    State(state): State<AppState>,
    Account(account): Account,
    params: Params,
) -> Result<Response, ApiError> {
    params.only(&["prefix"])?;
    let prefix = params.text("prefix").unwrap_or_default().to_string();
    let views = state.list_queues(account, prefix).await?;
    Ok(Json(json::QueueList::new(&views)).into_response())
}

pub async fn get(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    let view = state.get_queue(account, queue).await?;
    Ok(Json(json::Queue::new(&view)).into_response())
}

pub async fn patch(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let f = Fields::root(&body)?;
    for fixed in ["name", "type"] {
        if f.raw(fixed).is_some() {
            return Err(ApiError::invalid(
                fixed,
                "cannot be changed; create a new queue instead",
            ));
        }
    }
    f.only(ATTRIBUTE_FIELDS)?;
    let view = state.patch_queue(account, queue, attributes(&f)?).await?;
    Ok(Json(json::Queue::new(&view)).into_response())
}

pub async fn delete(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<StatusCode, ApiError> {
    state.delete_queue(account, queue).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn dead_letter_sources(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    let queues = state.dead_letter_sources(account, queue).await?;
    Ok(Json(json::RefList { queues }).into_response())
}

pub async fn stats(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    Ok(Json(state.queue_stats(account, queue).await?).into_response())
}
