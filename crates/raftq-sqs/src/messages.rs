//! The message actions: send (one or a batch), receive, delete (one or a batch) and change
//! visibility (one or a batch). What is checked here is what only SQS has: entry IDs of batches,
//! typed attributes, characters XML cannot carry.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use raftq_api::ops::{BatchEntryInput, MessageInput, ReceiveOptions};
use raftq_api::ApiError;
use raftq_engine::model::limits;
use raftq_engine::{validate, Delivery, EngineError, Payload, SendResult};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::call::{required, sqs, Call};
use crate::digest;
use crate::error::{Doing, Kind, SqsError};
use crate::message::{self, AttributeValue, Selection};

/// A message to send: a `SendMessage` request or an entry of a `SendMessageBatch`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Outgoing {
    #[serde(default)]
    id: Option<String>,
    message_body: Option<String>,
    delay_seconds: Option<i64>,
    #[serde(default)]
    message_attributes: BTreeMap<String, AttributeValue>,
    #[serde(default)]
    message_system_attributes: BTreeMap<String, AttributeValue>,
    message_deduplication_id: Option<String>,
    message_group_id: Option<String>,
}

/// A message checked and translated, with the digests of what was sent.
pub struct Prepared {
    input: MessageInput,
    md5_of_body: String,
    md5_of_attributes: Option<String>,
}

impl Outgoing {
    fn prepare(self) -> Result<Prepared, SqsError> {
        let body = self
            .message_body
            .ok_or_else(|| SqsError::missing("MessageBody"))?;
        message::check_characters("MessageBody", &body)?;
        if let Some(name) = self.message_system_attributes.keys().next() {
            return Err(SqsError::invalid_parameter(
                &format!("MessageSystemAttributes.{name}"),
                "raftq does not keep message system attributes such as AWSTraceHeader",
            ));
        }
        let typed = message::checked_attributes("MessageAttributes", &self.message_attributes)?;
        let attributes = message::to_stored("MessageAttributes", &typed)?;
        Ok(Prepared {
            md5_of_body: digest::of_body(&body),
            md5_of_attributes: digest::of_attributes(&typed),
            input: MessageInput {
                body,
                attributes,
                delay_seconds: self.delay_seconds,
                message_group_id: self.message_group_id,
                message_deduplication_id: self.message_deduplication_id,
            },
        })
    }
}

/// The answer to one sent message, as `SendMessage` and a batch's `Successful` entry give it.
pub fn sent(
    result: &SendResult,
    md5_of_body: String,
    md5_of_attributes: Option<String>,
) -> Map<String, Value> {
    let mut answer = Map::new();
    answer.insert("MD5OfMessageBody".into(), md5_of_body.into());
    if let Some(md5) = md5_of_attributes {
        answer.insert("MD5OfMessageAttributes".into(), md5.into());
    }
    answer.insert("MessageId".into(), result.message_id.to_string().into());
    if let Some(seq) = result.sequence_number {
        answer.insert("SequenceNumber".into(), seq.to_string().into());
    }
    answer
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendMessage {
    queue_url: Option<String>,
    #[serde(flatten)]
    message: Outgoing,
}

pub async fn send_message(call: &Call<'_>, input: SendMessage) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    let prepared = input.message.prepare()?;
    let result = sqs(
        call.ops.send(call.account(), queue, prepared.input).await,
        Doing::Other,
    )?;
    Ok(Value::Object(sent(
        &result,
        prepared.md5_of_body,
        prepared.md5_of_attributes,
    )))
}

/// A batch entry that failed, as a batch's `Failed` entry gives it.
pub fn failed(id: &str, error: &SqsError) -> Value {
    json!({
        "Id": id,
        "SenderFault": error.kind.sender_fault(),
        "Code": error.code(),
        "Message": error.message,
    })
}

/// The entry IDs of a delete, visibility or send batch: 1-10 entries, each ID of the form
/// raftq takes for batch entries, no two alike.
pub fn check_entry_ids(ids: &[Option<&str>]) -> Result<(), SqsError> {
    if ids.is_empty() {
        return Err(SqsError::new(
            Kind::EmptyBatchRequest,
            "There should be at least one entry in the request.",
        ));
    }
    if ids.len() > limits::BATCH_MAX {
        return Err(SqsError::new(
            Kind::TooManyEntriesInBatchRequest,
            format!(
                "Maximum number of entries per request are {}. You have sent {}.",
                limits::BATCH_MAX,
                ids.len()
            ),
        ));
    }
    for (i, id) in ids.iter().enumerate() {
        let id = id.ok_or_else(|| SqsError::missing(&format!("Entries.{}.Id", i + 1)))?;
        if let Err(e) = validate::batch_entry_id("Id", id) {
            let rule = match e {
                EngineError::InvalidArgument { rule, .. } => rule,
                other => other.to_string(),
            };
            return Err(SqsError::new(
                Kind::InvalidBatchEntryId,
                format!("A batch entry id {rule}: {id:?} is not."),
            ));
        }
        if ids[..i].contains(&Some(id)) {
            return Err(SqsError::new(
                Kind::BatchEntryIdsNotDistinct,
                format!("Id {id} repeated."),
            ));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendMessageBatch {
    queue_url: Option<String>,
    #[serde(default)]
    entries: Vec<Outgoing>,
}

pub async fn send_message_batch(
    call: &Call<'_>,
    input: SendMessageBatch,
) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    let ids: Vec<Option<&str>> = input.entries.iter().map(|e| e.id.as_deref()).collect();
    check_entry_ids(&ids)?;
    let mut failures = Vec::new();
    let mut to_send = Vec::new();
    let mut digests = Vec::new();
    for entry in input.entries {
        let id = entry.id.clone().unwrap_or_default();
        match entry.prepare() {
            Ok(prepared) => {
                digests.push((prepared.md5_of_body, prepared.md5_of_attributes));
                to_send.push(BatchEntryInput {
                    id,
                    message: prepared.input,
                });
            }
            Err(e) => failures.push(failed(&id, &e)),
        }
    }
    let mut successes = Vec::new();
    if to_send.is_empty() {
        // Nothing to send; the queue must still exist for the batch to be answered.
        sqs(
            call.ops.get_queue(call.account(), queue).await,
            Doing::Other,
        )?;
    } else {
        let results = sqs(
            call.ops.send_batch(call.account(), queue, to_send).await,
            Doing::Other,
        )?;
        for (result, (md5_of_body, md5_of_attributes)) in results.into_iter().zip(digests) {
            match result.result {
                Ok(sent_one) => {
                    let mut answer = sent(&sent_one, md5_of_body, md5_of_attributes);
                    answer.insert("Id".into(), result.id.into());
                    successes.push(Value::Object(answer));
                }
                Err(e) => {
                    let e = SqsError::from_api(e.into(), Doing::Other);
                    failures.push(failed(&result.id, &e));
                }
            }
        }
    }
    Ok(json!({"Successful": successes, "Failed": failures}))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReceiveMessage {
    queue_url: Option<String>,
    #[serde(default)]
    attribute_names: Vec<String>,
    #[serde(default)]
    message_system_attribute_names: Vec<String>,
    #[serde(default)]
    message_attribute_names: Vec<String>,
    max_number_of_messages: Option<i64>,
    visibility_timeout: Option<i64>,
    wait_time_seconds: Option<i64>,
    receive_request_attempt_id: Option<String>,
}

pub async fn receive_message(call: &Call<'_>, input: ReceiveMessage) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    let options = ReceiveOptions {
        max_messages: input.max_number_of_messages,
        lease_seconds: input.visibility_timeout,
        wait_seconds: input.wait_time_seconds,
        receive_attempt_id: attempt_id(&queue, input.receive_request_attempt_id),
        caller: call.caller,
    };
    let received = sqs(
        call.ops.receive(call.account(), queue, options).await,
        Doing::Other,
    )?;
    let mut system_names = input.attribute_names;
    system_names.extend(input.message_system_attribute_names);
    let system = Selection::of(&system_names);
    let wanted = Selection::of(&input.message_attribute_names);
    let messages: Vec<Value> = sqs(received.messages(), Doing::Other)?
        .into_iter()
        .map(|(delivery, payload)| call.delivered(delivery, payload, &system, &wanted))
        .collect();
    if messages.is_empty() {
        return Ok(json!({}));
    }
    Ok(json!({"Messages": messages}))
}

/// `ReceiveRequestAttemptId`, for a FIFO queue (a queue is FIFO exactly when its name ends in
/// `.fifo`); standard queues ignore it, as in SQS, where raftq would refuse it.
pub fn attempt_id(queue: &str, attempt: Option<String>) -> Option<String> {
    attempt.filter(|_| queue.ends_with(limits::FIFO_SUFFIX))
}

impl Call<'_> {
    /// A delivered message as `ReceiveMessage` returns it.
    fn delivered(
        &self,
        delivery: &Delivery,
        payload: &Payload,
        system: &Selection,
        wanted: &Selection,
    ) -> Value {
        let mut message = Map::new();
        message.insert("MessageId".into(), payload.message_id.to_string().into());
        message.insert("ReceiptHandle".into(), delivery.receipt.clone().into());
        message.insert("MD5OfBody".into(), digest::of_body(&payload.body).into());
        message.insert("Body".into(), payload.body.clone().into());
        let attributes =
            message::system_attributes(delivery, payload, system, &self.number, self.names);
        if !attributes.is_empty() {
            message.insert("Attributes".into(), json!(attributes));
        }
        let mut typed = message::from_stored(&payload.attributes);
        typed.retain(|name, _| wanted.wants(name));
        if let Some(md5) = digest::of_attributes(&typed) {
            message.insert("MD5OfMessageAttributes".into(), md5.into());
            let wire: BTreeMap<&String, AttributeValue> =
                typed.iter().map(|(name, t)| (name, t.wire())).collect();
            message.insert("MessageAttributes".into(), json!(wire));
        }
        Value::Object(message)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteMessage {
    queue_url: Option<String>,
    receipt_handle: Option<String>,
}

pub async fn delete_message(call: &Call<'_>, input: DeleteMessage) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    let receipt = required(&input.receipt_handle, "ReceiptHandle")?.to_string();
    let results = sqs(
        call.ops.ack(call.account(), queue, vec![receipt]).await,
        Doing::Deleting,
    )?;
    match results.into_iter().next().map(|r| r.result) {
        Some(Ok(())) => Ok(json!({})),
        Some(Err(e)) => Err(SqsError::from_api(e.into(), Doing::Deleting)),
        None => Err(SqsError::from_api(
            ApiError::unexpected_answer(),
            Doing::Deleting,
        )),
    }
}

/// An entry of a delete or visibility batch.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReceiptEntry {
    id: Option<String>,
    receipt_handle: Option<String>,
    visibility_timeout: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReceiptBatch {
    queue_url: Option<String>,
    #[serde(default)]
    entries: Vec<ReceiptEntry>,
}

impl ReceiptBatch {
    /// The queue, after the batch's entry IDs are checked.
    fn checked(&self, call: &Call<'_>) -> Result<String, SqsError> {
        let queue = call.queue(&self.queue_url)?;
        let ids: Vec<Option<&str>> = self.entries.iter().map(|e| e.id.as_deref()).collect();
        check_entry_ids(&ids)?;
        Ok(queue)
    }
}

/// A batch's answer from each entry's outcome, in request order.
pub fn batch_answer(outcomes: Vec<(String, Result<(), SqsError>)>) -> Value {
    let mut successes = Vec::new();
    let mut failures = Vec::new();
    for (id, outcome) in outcomes {
        match outcome {
            Ok(()) => successes.push(json!({"Id": id})),
            Err(e) => failures.push(failed(&id, &e)),
        }
    }
    json!({"Successful": successes, "Failed": failures})
}

pub async fn delete_message_batch(call: &Call<'_>, input: ReceiptBatch) -> Result<Value, SqsError> {
    let queue = input.checked(call)?;
    let mut outcomes = Vec::new();
    let mut receipts = Vec::new();
    for entry in input.entries {
        let id = entry.id.unwrap_or_default();
        match entry.receipt_handle {
            Some(receipt) => {
                receipts.push(receipt);
                outcomes.push((id, Ok(())));
            }
            None => outcomes.push((id, Err(SqsError::missing("ReceiptHandle")))),
        }
    }
    if receipts.is_empty() {
        sqs(
            call.ops.get_queue(call.account(), queue).await,
            Doing::Other,
        )?;
        return Ok(batch_answer(outcomes));
    }
    let results = sqs(
        call.ops.ack(call.account(), queue, receipts).await,
        Doing::Deleting,
    )?;
    let mut results = results.into_iter();
    for (_, outcome) in outcomes.iter_mut().filter(|(_, o)| o.is_ok()) {
        *outcome = match results.next().map(|r| r.result) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(SqsError::from_api(e.into(), Doing::Deleting)),
            None => Err(SqsError::from_api(
                ApiError::unexpected_answer(),
                Doing::Deleting,
            )),
        };
    }
    Ok(batch_answer(outcomes))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeMessageVisibility {
    queue_url: Option<String>,
    receipt_handle: Option<String>,
    visibility_timeout: Option<i64>,
}

/// Changes one lease: a visibility timeout of 0 releases the message at once.
pub async fn change_visibility(
    call: &Call<'_>,
    queue: String,
    receipt: Option<String>,
    timeout: Option<i64>,
) -> Result<(), SqsError> {
    let receipt = receipt.ok_or_else(|| SqsError::missing("ReceiptHandle"))?;
    let timeout = timeout.ok_or_else(|| SqsError::missing("VisibilityTimeout"))?;
    sqs(
        call.ops
            .change_lease(call.account(), queue, receipt, Some(timeout), None)
            .await,
        Doing::ChangingVisibility,
    )?;
    Ok(())
}

pub async fn change_message_visibility(
    call: &Call<'_>,
    input: ChangeMessageVisibility,
) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    change_visibility(call, queue, input.receipt_handle, input.visibility_timeout).await?;
    Ok(json!({}))
}

pub async fn change_message_visibility_batch(
    call: &Call<'_>,
    input: ReceiptBatch,
) -> Result<Value, SqsError> {
    let queue = input.checked(call)?;
    // The queue first, so that a missing queue fails the request rather than every entry.
    sqs(
        call.ops.get_queue(call.account(), queue.clone()).await,
        Doing::Other,
    )?;
    let changes = input.entries.into_iter().map(|entry| {
        let queue = queue.clone();
        async move {
            let id = entry.id.unwrap_or_default();
            let outcome =
                change_visibility(call, queue, entry.receipt_handle, entry.visibility_timeout)
                    .await;
            (id, outcome)
        }
    });
    Ok(batch_answer(join_all(changes).await))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_entry_ids_are_checked_as_sqs_does() {
        let kind = |ids: &[Option<&str>]| check_entry_ids(ids).unwrap_err().kind;
        assert_eq!(kind(&[]), Kind::EmptyBatchRequest);
        assert_eq!(kind(&[Some("a"); 11]), Kind::TooManyEntriesInBatchRequest);
        assert_eq!(
            kind(&[Some("a"), Some("a")]),
            Kind::BatchEntryIdsNotDistinct
        );
        assert_eq!(kind(&[Some("a b")]), Kind::InvalidBatchEntryId);
        assert_eq!(kind(&[None]), Kind::MissingParameter);
        assert!(check_entry_ids(&[Some("a"), Some("b-2_c")]).is_ok());
    }

    #[test]
    fn receive_attempts_go_to_fifo_queues_only() {
        assert_eq!(attempt_id("jobs", Some("x".into())), None);
        assert_eq!(attempt_id("jobs.fifo", None), None);
        assert_eq!(
            attempt_id("jobs.fifo", Some("x".into())).as_deref(),
            Some("x")
        );
    }
}
