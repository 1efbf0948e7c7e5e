//! The message move task actions: `StartMessageMoveTask`, `CancelMessageMoveTask` and
//! `ListMessageMoveTasks`, over raftq's move tasks. A task names its queues by ARN; its handle
//! is raftq's task handle. raftq's tasks may also start on a queue that is no dead-letter queue
//! (with a destination), filter messages and dry-run (REST and gRPC): such tasks are listed
//! here like the others.

use raftq_api::ops::MoveTaskRequest;
use raftq_engine::{MoveTaskStatus, MoveTaskView};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::call::{required, sqs, Call};
use crate::error::{Doing, Kind, SqsError};

/// How many tasks `ListMessageMoveTasks` lists at most, and without `MaxResults`.
const LIST_MOST: i64 = 10;
const LIST_DEFAULT: i64 = 1;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StartMessageMoveTask {
    source_arn: Option<String>,
    destination_arn: Option<String>,
    max_number_of_messages_per_second: Option<i64>,
}

pub async fn start(call: &Call<'_>, input: StartMessageMoveTask) -> Result<Value, SqsError> {
    let source = call.queue_by_arn(required(&input.source_arn, "SourceArn")?)?;
    let destination = match input.destination_arn.as_deref() {
        Some(arn) => Some(call.queue_by_arn(arn)?),
        None => None,
    };
    let request = MoveTaskRequest {
        destination,
        max_messages_per_second: input.max_number_of_messages_per_second,
        ..MoveTaskRequest::default()
    };
    let task = sqs(
        call.ops
            .start_move_task(call.account(), source, request)
            .await,
        Doing::Moving,
    )?;
    Ok(json!({"TaskHandle": task.task_handle.to_string()}))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CancelMessageMoveTask {
    task_handle: Option<String>,
}

pub async fn cancel(call: &Call<'_>, input: CancelMessageMoveTask) -> Result<Value, SqsError> {
    let handle = required(&input.task_handle, "TaskHandle")?.to_string();
    if Uuid::parse_str(&handle).is_err() {
        return Err(SqsError::new(
            Kind::InvalidParameterValue,
            "Value for parameter TaskHandle is invalid.",
        ));
    }
    let task = sqs(
        call.ops
            .cancel_move_task(call.account(), None, handle)
            .await,
        Doing::Moving,
    )?;
    Ok(json!({"ApproximateNumberOfMessagesMoved": task.moved}))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListMessageMoveTasks {
    source_arn: Option<String>,
    max_results: Option<i64>,
}

pub async fn list(call: &Call<'_>, input: ListMessageMoveTasks) -> Result<Value, SqsError> {
    let source = call.queue_by_arn(required(&input.source_arn, "SourceArn")?)?;
    let most = match input.max_results {
        Some(n) if !(1..=LIST_MOST).contains(&n) => {
            return Err(SqsError::invalid_parameter(
                "MaxResults",
                format!("must be between 1 and {LIST_MOST}"),
            ))
        }
        Some(n) => n,
        None => LIST_DEFAULT,
    };
    let tasks = sqs(
        call.ops.list_move_tasks(call.account(), source).await,
        Doing::Moving,
    )?;
    let results: Vec<Value> = tasks
        .iter()
        .take(usize::try_from(most).unwrap_or(usize::MAX))
        .map(|task| call.listed(task))
        .collect();
    Ok(json!({"Results": results}))
}

impl Call<'_> {
    /// The name of the caller's queue an ARN names (a queue URL is taken too).
    fn queue_by_arn(&self, arn: &str) -> Result<String, SqsError> {
        self.queue(&Some(arn.to_string()))
    }

    /// A task as `ListMessageMoveTasks` lists it: its handle only while it runs, as in SQS,
    /// since only a running task can be cancelled.
    fn listed(&self, task: &MoveTaskView) -> Value {
        let mut entry = Map::new();
        if task.status == MoveTaskStatus::Running {
            entry.insert("TaskHandle".into(), task.task_handle.to_string().into());
        }
        entry.insert("Status".into(), task.status.as_str().to_uppercase().into());
        entry.insert(
            "SourceArn".into(),
            self.names.arn(&self.number, &task.source.name).into(),
        );
        if let Some(destination) = &task.destination {
            entry.insert(
                "DestinationArn".into(),
                self.names.arn(&self.number, &destination.name).into(),
            );
        }
        entry.insert(
            "MaxNumberOfMessagesPerSecond".into(),
            task.max_messages_per_second.into(),
        );
        entry.insert("ApproximateNumberOfMessagesMoved".into(), task.moved.into());
        entry.insert(
            "ApproximateNumberOfMessagesToMove".into(),
            task.to_move.into(),
        );
        if let Some(reason) = &task.failure_reason {
            entry.insert("FailureReason".into(), reason.clone().into());
        }
        entry.insert("StartedTimestamp".into(), task.started_at.into());
        Value::Object(entry)
    }
}
