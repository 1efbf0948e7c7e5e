//! Which function serves each action. Each reads the JSON protocol's request object, calls
//! raftq's operations layer (`raftq_api::ops`) and answers the JSON protocol's result object (the
//! Query protocol's reply is written from it). No queue rule is checked in an action that raftq
//! checks itself: the actions hold SQS's spelling of requests and answers, and the checks of
//! what only SQS has.

use serde_json::Value;

use crate::call::{parse, Call};
use crate::error::{Kind, SqsError};
use crate::{messages, move_tasks, queues, tags};

/// Runs `action` with its request object `input`.
pub async fn run(call: &Call<'_>, action: &str, input: Value) -> Result<Value, SqsError> {
    match action {
        "CreateQueue" => queues::create_queue(call, parse(input)?).await,
        "GetQueueUrl" => queues::get_queue_url(call, parse(input)?).await,
        "ListQueues" => queues::list_queues(call, parse(input)?).await,
        "DeleteQueue" => queues::delete_queue(call, parse(input)?).await,
        "GetQueueAttributes" => queues::get_queue_attributes(call, parse(input)?).await,
        "SetQueueAttributes" => queues::set_queue_attributes(call, parse(input)?).await,
        "SendMessage" => messages::send_message(call, parse(input)?).await,
        "SendMessageBatch" => messages::send_message_batch(call, parse(input)?).await,
        "ReceiveMessage" => messages::receive_message(call, parse(input)?).await,
        "DeleteMessage" => messages::delete_message(call, parse(input)?).await,
        "DeleteMessageBatch" => messages::delete_message_batch(call, parse(input)?).await,
        "ChangeMessageVisibility" => messages::change_message_visibility(call, parse(input)?).await,
        "ChangeMessageVisibilityBatch" => {
            messages::change_message_visibility_batch(call, parse(input)?).await
        }
        "PurgeQueue" => queues::purge_queue(call, parse(input)?).await,
        "ListDeadLetterSourceQueues" => {
            queues::list_dead_letter_source_queues(call, parse(input)?).await
        }
        "TagQueue" => tags::tag_queue(call, parse(input)?).await,
        "UntagQueue" => tags::untag_queue(call, parse(input)?).await,
        "ListQueueTags" => tags::list_queue_tags(call, parse(input)?).await,
        "AddPermission" | "RemovePermission" => Err(SqsError::unsupported(
            "raftq has no queue access policies: an account's keys reach all of its queues",
        )),
        "StartMessageMoveTask" => move_tasks::start(call, parse(input)?).await,
        "CancelMessageMoveTask" => move_tasks::cancel(call, parse(input)?).await,
        "ListMessageMoveTasks" => move_tasks::list(call, parse(input)?).await,
        other => Err(SqsError::new(
            Kind::InvalidAction,
            format!("The action {other} is not valid for this endpoint."),
        )),
    }
}
