//! Queue routes: `POST/GET /v1/queues`, `GET/PATCH/DELETE /v1/queues/{q}`,
//! `GET /v1/queues/{q}/dead_letter_sources` and `GET /v1/queues/{q}/stats`.
//!
//! Creates and patches are checked before they are proposed: field types here, names and ranges
//! with the engine's pure validators. Rules that need state (the redrive target exists, is of
//! the same type, allows the source...) are the engine's.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use raftq_engine::model::QueueConfig;
use raftq_engine::{
    validate, AllowPolicyInput, Command, Outcome, QueueAttributes, QueueType, QueueView,
    RedrivePolicyInput,
};
use raftq_node::{Query, QueryResult};
use uuid::Uuid;

use crate::auth::Account;
use crate::error::ApiError;
use crate::input::{queue_reference, Fields, JsonBody, Params, QueuePath};
use crate::json;
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
    let target = f.required("dead_letter_target", f.value("dead_letter_target"))?;
    let max = f.required_integer("max_receive_count")?;
    validate::in_range(
        &f.path("max_receive_count"),
        max,
        1,
        raftq_engine::model::limits::MAX_RECEIVE_COUNT_MAX,
    )?;
    Ok(RedrivePolicyInput {
        dead_letter_target: Some(queue_reference(target, f.path("dead_letter_target"))?),
        max_receive_count: Some(max),
    })
}

fn allow_policy(f: Fields<'_>) -> Result<AllowPolicyInput, ApiError> {
    f.only(&["permission", "source_queues"])?;
    let permission = f.required_string("permission")?;
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
        permission: Some(permission.to_string()),
        source_queues,
    })
}

/// The queue object of a create or patch outcome.
fn queue_outcome(outcome: Outcome) -> Result<Box<QueueView>, ApiError> {
    match outcome {
        Outcome::Queue(view) => Ok(view),
        _ => Err(ApiError::unexpected_answer()),
    }
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
    let name = f.required_string("name")?;
    let queue_type = validate::queue_name(name)?;
    if f.string("type")?.is_some_and(|t| t != queue_type.as_str()) {
        return Err(ApiError::invalid(
            "type",
            format!(
                "must be {} for this name: a queue is fifo exactly when its name ends in .fifo",
                queue_type.as_str()
            ),
        ));
    }
    let attributes = attributes(&f)?;
    validate::scalar_attributes(&attributes, queue_type, &mut QueueConfig::default())?;
    let written = state
        .write(Command::CreateQueue {
            account,
            queue_id: Uuid::new_v4(),
            name: name.to_string(),
            attributes,
        })
        .await?;
    let view = queue_outcome(written.outcome)?;
    Ok((StatusCode::CREATED, Json(json::Queue::new(&view))).into_response())
}

pub async fn list(
    State(state): State<AppState>,
    Account(account): Account,
    params: Params,
) -> Result<Response, ApiError> {
    params.only(&["prefix"])?;
    let prefix = params.text("prefix").unwrap_or_default().to_string();
    match state.read(Query::ListQueues { account, prefix }).await? {
        QueryResult::Queues(views) => Ok(Json(json::QueueList::new(&views)).into_response()),
        _ => Err(ApiError::unexpected_answer()),
    }
}

pub async fn get(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    match state.read(Query::GetQueue { account, queue }).await? {
        QueryResult::Queue(view) => Ok(Json(json::Queue::new(&view)).into_response()),
        _ => Err(ApiError::unexpected_answer()),
    }
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
    let attributes = attributes(&f)?;
    // Ranges only: the FIFO-only rule of content_based_deduplication needs the queue's type,
    // which the engine knows.
    validate::scalar_attributes(&attributes, QueueType::Fifo, &mut QueueConfig::default())?;
    let written = state
        .write(Command::PatchQueue {
            account,
            queue,
            attributes,
        })
        .await?;
    let view = queue_outcome(written.outcome)?;
    Ok(Json(json::Queue::new(&view)).into_response())
}

pub async fn delete(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<StatusCode, ApiError> {
    match state
        .write(Command::DeleteQueue { account, queue })
        .await?
        .outcome
    {
        Outcome::Deleted => Ok(StatusCode::NO_CONTENT),
        _ => Err(ApiError::unexpected_answer()),
    }
}

pub async fn dead_letter_sources(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    match state
        .read(Query::DeadLetterSources { account, queue })
        .await?
    {
        QueryResult::Refs(queues) => Ok(Json(json::RefList { queues }).into_response()),
        _ => Err(ApiError::unexpected_answer()),
    }
}

pub async fn stats(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    match state.read(Query::Stats { account, queue }).await? {
        QueryResult::Stats(stats) => Ok(Json(stats).into_response()),
        _ => Err(ApiError::unexpected_answer()),
    }
}
