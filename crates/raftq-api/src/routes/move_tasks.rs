//! Move task routes: `POST/GET /v1/queues/{q}/move_tasks` and
//! `POST /v1/queues/{q}/move_tasks/{task}/cancel` — start a paced move of a queue's messages
//! (back to their dead-letter sources, or to a destination), list the queue's last tasks, cancel
//! a running one.
//!
//! A start's body is read into the types here, which are also its schema in the OpenAPI
//! document, and handed to `ops` as its plain values; the rate, the filter's IDs and times are
//! checked by `ops`, the destination and the one-running-task rule by the engine.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
use utoipa::openapi::{KnownFormat, SchemaFormat};
use utoipa::ToSchema;

use crate::auth::Account;
use crate::body::QueueReference;
use crate::error::ApiError;
use crate::input::{JsonBody, QueuePath};
use crate::json;
use crate::openapi::{self, Replicated};
use crate::ops::{MoveFilterRequest, MoveTaskRequest};
use crate::shared::AppState;

/// The body of `POST /v1/queues/{q}/move_tasks`; every field is optional.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "destination": "orders",
    "max_messages_per_second": 50,
    "filter": {"moved_since": "2024-05-01T00:00:00Z"},
    "dry_run": false
}))]
pub struct StartMoveTask {
    #[schema(schema_with = destination)]
    destination: Option<QueueReference>,
    /// The most messages moved per second, 1–500. Default 500.
    #[schema(minimum = 1, maximum = 500)]
    max_messages_per_second: Option<i64>,
    filter: Option<MoveFilterBody>,
    /// Only count the messages that would move (`to_move`); move nothing. Default `false`.
    dry_run: Option<bool>,
}

/// Which messages of the queue the task takes; absent fields take every message.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveFilterBody {
    #[schema(schema_with = message_ids)]
    message_ids: Option<Vec<String>>,
    /// Only messages moved to this queue at or after this time (RFC 3339); a message never
    /// moved (sent to the queue directly) does not match a time bound.
    #[schema(format = DateTime)]
    moved_since: Option<String>,
    /// Only messages moved to this queue before this time (RFC 3339), later than `moved_since`.
    #[schema(format = DateTime)]
    moved_before: Option<String>,
}

/// Schema of a task's destination.
fn destination() -> OneOfBuilder {
    openapi::queue_reference().description(Some(
        "Where the messages go: a queue of the account, of the same type, not the queue itself. \
         Absent or `null`: each message back to its own `dead_letter_source` (the queue must \
         then be some queue's dead-letter queue)",
    ))
}

/// Schema of the message IDs of a filter.
fn message_ids() -> ArrayBuilder {
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid))),
        )
        .max_items(Some(100))
        .description(Some("Only the messages with these IDs, at most 100"))
}

impl From<MoveFilterBody> for MoveFilterRequest {
    fn from(body: MoveFilterBody) -> MoveFilterRequest {
        MoveFilterRequest {
            message_ids: body.message_ids.unwrap_or_default(),
            moved_since: body.moved_since,
            moved_before: body.moved_before,
        }
    }
}

/// Start moving a queue's messages
///
/// Moves the queue's messages, oldest first and at most `max_messages_per_second`, each back to
/// its own `dead_letter_source` or to `destination`, as new messages (never received, retention
/// from the move). The task takes the messages the queue holds when it starts; one task runs
/// per queue at a time. It goes on across leader changes; list the queue's tasks to follow it.
#[utoipa::path(
    post,
    path = "/v1/queues/{q}/move_tasks",
    operation_id = "StartMoveTask",
    tag = "move_tasks",
    params(QueuePath),
    request_body = StartMoveTask,
    responses(
        (status = 201, description = "The task, running (or completed: a dry run, or nothing to move)", body = json::MoveTask),
        (status = 409, description = "`move_task_running`: the queue already has a running task; nothing changed", body = openapi::ErrorBody),
        Account,
        QueuePath,
        JsonBody,
        Replicated,
    )
)]
pub async fn start(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
    JsonBody(body): JsonBody<StartMoveTask>,
) -> Result<Response, ApiError> {
    let request = MoveTaskRequest {
        destination: body.destination.map(|d| d.0),
        max_messages_per_second: body.max_messages_per_second,
        filter: body.filter.map(MoveFilterRequest::from),
        dry_run: body.dry_run.unwrap_or(false),
    };
    let task = state.start_move_task(account, queue, request).await?;
    Ok((StatusCode::CREATED, Json(json::MoveTask::new(&task))).into_response())
}

/// List a queue's move tasks
///
/// The queue's last 10 move tasks, the newest first, with their status and counts.
#[utoipa::path(
    get,
    path = "/v1/queues/{q}/move_tasks",
    operation_id = "ListMoveTasks",
    tag = "move_tasks",
    params(QueuePath),
    responses(
        (status = 200, description = "The tasks", body = json::MoveTaskList),
        Account,
        QueuePath,
        Replicated,
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Account(account): Account,
    QueuePath(queue): QueuePath,
) -> Result<Response, ApiError> {
    let tasks = state.list_move_tasks(account, queue).await?;
    Ok(Json(json::MoveTaskList::new(&tasks)).into_response())
}

/// Cancel a running move task
///
/// The messages moved so far stay moved; the others stay in the queue.
#[utoipa::path(
    post,
    path = "/v1/queues/{q}/move_tasks/{task}/cancel",
    operation_id = "CancelMoveTask",
    tag = "move_tasks",
    params(
        QueuePath,
        ("task" = String, Path, description = "The task's `task_handle`"),
    ),
    responses(
        (status = 200, description = "The task, cancelled", body = json::MoveTask),
        (status = 409, description = "`move_task_not_running`: the task has ended already; nothing changed", body = openapi::ErrorBody),
        Account,
        QueuePath,
        Replicated,
        (status = 404, description = "`queue_not_found`: the account has no such queue; `move_task_not_found`: the queue has no task of this handle", body = openapi::ErrorBody),
    )
)]
pub async fn cancel(
    State(state): State<AppState>,
    Account(account): Account,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path((queue, task)) =
        path.map_err(|r| ApiError::invalid("task", format!("bad path: {}", r.body_text())))?;
    let task = state.cancel_move_task(account, Some(queue), task).await?;
    Ok(Json(json::MoveTask::new(&task)).into_response())
}
