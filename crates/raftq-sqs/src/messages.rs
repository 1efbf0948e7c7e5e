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
use crate::error::{is_receipt, Doing, Kind, SqsError};
use crate::message::{self, AttributeValue, Selection, Typed, TypedValue};

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
    digests: Digests,
}

/// The digests a send answers with: of the body, of the message attributes and of the message
/// system attributes (the last two left out when there are none).
pub struct Digests {
    body: String,
    attributes: Option<String>,
    system_attributes: Option<String>,
}

/// The one message system attribute a message is sent with.
const TRACE_HEADER: &str = "AWSTraceHeader";

/// The message attribute that gives a message its priority on a standard queue: `Number`, an
/// integer 0-9. Read as the message's priority, not kept as an attribute.
pub const PRIORITY_ATTRIBUTE: &str = "raftq.Priority";

/// The message attribute that schedules a message: `String`, an RFC 3339 time. Read as the
/// message's `deliver_at`, not kept as an attribute.
pub const DELIVER_AT_ATTRIBUTE: &str = "raftq.DeliverAt";

/// SQS's answer to raftq's refusal `e` of a message sent to `queue` (a queue is FIFO exactly
/// when its name ends in `.fifo`) with a group ID or not (`grouped`): raftq's rules, in SQS's
/// words where SQS has its own.
fn send_refused(e: ApiError, queue: &str, grouped: bool) -> SqsError {
    let fifo = queue.ends_with(limits::FIFO_SUFFIX);
    match e.field.as_deref() {
        Some("message_group_id") if !grouped => SqsError::missing("MessageGroupId"),
        Some("message_deduplication_id") if fifo => SqsError::new(
            Kind::InvalidParameterValue,
            "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
        ),
        Some("message_deduplication_id") => SqsError::invalid_parameter(
            "MessageDeduplicationId",
            "The request include parameter that is not valid for this queue type",
        ),
        _ => SqsError::from_api(e, Doing::Other),
    }
}

impl Outgoing {
    fn prepare(self) -> Result<Prepared, SqsError> {
        let body = self
            .message_body
            .filter(|body| !body.is_empty())
            .ok_or_else(|| SqsError::missing("MessageBody"))?;
        message::check_characters("MessageBody", &body)?;
        check_tag("MessageGroupId", self.message_group_id.as_deref())?;
        check_tag(
            "MessageDeduplicationId",
            self.message_deduplication_id.as_deref(),
        )?;
        let system = message::checked_attributes(
            "MessageSystemAttributes",
            &self.message_system_attributes,
        )?;
        let trace_header = trace_header(&system)?;
        let mut typed = message::checked_attributes("MessageAttributes", &self.message_attributes)?;
        // The digest is of every attribute sent, raftq's settings included, as the SDK checks.
        let digests = Digests {
            body: digest::of_body(&body),
            attributes: digest::of_attributes(&typed),
            system_attributes: digest::of_attributes(&system),
        };
        let priority = priority(typed.remove(PRIORITY_ATTRIBUTE))?;
        let deliver_at = deliver_at(typed.remove(DELIVER_AT_ATTRIBUTE))?;
        let attributes = message::to_stored("MessageAttributes", &typed)?;
        Ok(Prepared {
            digests,
            input: MessageInput {
                body,
                attributes,
                delay_seconds: self.delay_seconds,
                message_group_id: self.message_group_id,
                message_deduplication_id: self.message_deduplication_id,
                trace_header,
                priority,
                deliver_at,
            },
        })
    }
}

/// A `MessageGroupId` or `MessageDeduplicationId`, by SQS's rule: 1-128 characters, each a
/// letter, a digit or punctuation (printable ASCII without the space).
fn check_tag(parameter: &str, value: Option<&str>) -> Result<(), SqsError> {
    let Some(value) = value else {
        return Ok(());
    };
    let length = 1..=limits::GROUP_ID_MAX;
    if length.contains(&value.len()) && value.bytes().all(|b| b.is_ascii_graphic()) {
        return Ok(());
    }
    Err(SqsError::invalid_value(
        parameter,
        value,
        &format!(
            "{parameter} can only include alphanumeric and punctuation characters. 1 to {} in length",
            limits::GROUP_ID_MAX
        ),
    ))
}

/// The trace header among a send's message system attributes: `AWSTraceHeader`, of type
/// `String`, is the only one SQS takes.
fn trace_header(system: &BTreeMap<String, Typed>) -> Result<Option<String>, SqsError> {
    if let Some(name) = system.keys().find(|name| *name != TRACE_HEADER) {
        return Err(SqsError::invalid_parameter(
            &format!("MessageSystemAttributes.{name}"),
            format!("{TRACE_HEADER} is the only message system attribute a message is sent with"),
        ));
    }
    match system.get(TRACE_HEADER) {
        None => Ok(None),
        Some(Typed {
            data_type,
            value: TypedValue::Text(header),
        }) if data_type == "String" => Ok(Some(header.clone())),
        Some(_) => Err(SqsError::invalid_parameter(
            &format!("MessageSystemAttributes.{TRACE_HEADER}"),
            "its DataType must be String",
        )),
    }
}

/// The priority a send's `raftq.Priority` attribute gives: a `Number` that is an integer (its
/// range, 0-9, is raftq's rule).
fn priority(attribute: Option<Typed>) -> Result<Option<i64>, SqsError> {
    let Some(typed) = attribute else {
        return Ok(None);
    };
    let number = match (&typed.value, typed.data_type.split('.').next()) {
        (TypedValue::Text(text), Some("Number")) => text.trim().parse::<i64>().ok(),
        _ => None,
    };
    number.map(Some).ok_or_else(|| {
        SqsError::invalid_parameter(
            &format!("MessageAttributes.{PRIORITY_ATTRIBUTE}"),
            "must be a Number attribute holding an integer from 0 to 9",
        )
    })
}

/// The time a send's `raftq.DeliverAt` attribute schedules it for: a `String` (RFC 3339,
/// which raftq checks).
fn deliver_at(attribute: Option<Typed>) -> Result<Option<String>, SqsError> {
    match attribute {
        None => Ok(None),
        Some(Typed {
            data_type,
            value: TypedValue::Text(text),
        }) if data_type == "String" => Ok(Some(text)),
        Some(_) => Err(SqsError::invalid_parameter(
            &format!("MessageAttributes.{DELIVER_AT_ATTRIBUTE}"),
            "must be a String attribute holding an RFC 3339 time",
        )),
    }
}

/// The answer to one sent message, as `SendMessage` and a batch's `Successful` entry give it.
pub fn sent(result: &SendResult, digests: Digests) -> Map<String, Value> {
    let mut answer = Map::new();
    answer.insert("MD5OfMessageBody".into(), digests.body.into());
    if let Some(md5) = digests.attributes {
        answer.insert("MD5OfMessageAttributes".into(), md5.into());
    }
    if let Some(md5) = digests.system_attributes {
        answer.insert("MD5OfMessageSystemAttributes".into(), md5.into());
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
    let grouped = prepared.input.message_group_id.is_some();
    let result = call
        .ops
        .send(call.account(), queue.clone(), prepared.input)
        .await
        .map_err(|e| send_refused(e, &queue, grouped))?;
    Ok(Value::Object(sent(&result, prepared.digests)))
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

/// The entry IDs of a delete, visibility or send batch whose entries SQS calls `entry_type`
/// (`SendMessageBatchRequestEntry`): 1-10 entries, each ID of the form raftq takes for batch
/// entries, no two alike.
pub fn check_entry_ids(ids: &[Option<&str>], entry_type: &str) -> Result<(), SqsError> {
    if ids.is_empty() {
        return Err(SqsError::empty_batch(entry_type));
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
        if validate::batch_entry_id("Id", id).is_err() {
            return Err(SqsError::new(
                Kind::InvalidBatchEntryId,
                format!(
                    "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most {} letters long.",
                    limits::BATCH_ENTRY_ID_MAX
                ),
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
    check_entry_ids(&ids, "SendMessageBatchRequestEntry")?;
    let fifo = queue.ends_with(limits::FIFO_SUFFIX);
    if fifo && input.entries.iter().any(|e| e.message_group_id.is_none()) {
        // SQS refuses the whole batch, not the entry.
        return Err(SqsError::new(
            Kind::InvalidParameterValue,
            "The request must contain the parameter MessageGroupId.",
        ));
    }
    let mut failures = Vec::new();
    let mut to_send = Vec::new();
    let mut digests = Vec::new();
    for entry in input.entries {
        let id = entry.id.clone().unwrap_or_default();
        match entry.prepare() {
            Ok(prepared) => {
                digests.push(prepared.digests);
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
            call.ops
                .send_batch(call.account(), queue.clone(), to_send)
                .await,
            Doing::Other,
        )?;
        for (result, digests) in results.into_iter().zip(digests) {
            match result.result {
                Ok(sent_one) => {
                    let mut answer = sent(&sent_one, digests);
                    answer.insert("Id".into(), result.id.into());
                    successes.push(Value::Object(answer));
                }
                Err(EngineError::MessageTooLarge { max, .. }) => {
                    let e = SqsError::new(
                        Kind::InvalidParameterValue,
                        format!("One or more parameters cannot be validated. Reason: Message must be shorter than {max} bytes."),
                    );
                    failures.push(failed(&result.id, &e));
                }
                Err(e) => {
                    let e = send_refused(e.into(), &queue, true);
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
    if let Some(n) = input
        .max_number_of_messages
        .filter(|n| !(1..=limits::RECEIVE_MAX_MESSAGES).contains(n))
    {
        return Err(SqsError::invalid_value(
            "MaxNumberOfMessages",
            n,
            "Must be between 1 and 10, if provided",
        ));
    }
    if let Some(wait) = input
        .wait_time_seconds
        .filter(|w| !(0..=limits::RECEIVE_WAIT_SECONDS_MAX).contains(w))
    {
        return Err(SqsError::invalid_value(
            "WaitTimeSeconds",
            wait,
            "Must be >= 0 and <= 20, if provided",
        ));
    }
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

/// What a receipt handle was given for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReceiptUse {
    Delete,
    ChangeVisibility,
}

/// SQS's answer to raftq's refusal `e` of `receipt` on `queue`, used to `what`. raftq acts on a
/// receipt only under the lease it names; SQS answers some receipts of ended leases with
/// success, and so does this endpoint, changing nothing:
///
/// - a delete whose message is gone (deleted, expired, moved or purged) succeeds, as SQS's
///   does: an SDK retries a delete whose answer was lost, and the retry must not fail;
/// - on a standard queue, a delete or a visibility change under a lease that ended while the
///   message stayed succeeds and leaves the message as it is (SQS: the request succeeds, but
///   the message might not be deleted; a visibility change of an expired receipt does nothing);
/// - on a FIFO queue, such a delete is `InvalidParameterValue`, the receipt handle has expired;
/// - a visibility change of a message that is gone (or of an ended lease on a FIFO queue) is
///   `InvalidParameterValue`, the message does not exist or is not available.
fn receipt_refused(
    e: ApiError,
    receipt: &str,
    queue: &str,
    what: ReceiptUse,
) -> Result<(), SqsError> {
    let fifo = queue.ends_with(limits::FIFO_SUFFIX);
    match (what, e.engine.as_deref()) {
        (_, Some(EngineError::InvalidArgument { field, .. })) if is_receipt(Some(field)) => {
            Err(SqsError::invalid_receipt(receipt))
        }
        (ReceiptUse::Delete, Some(EngineError::MessageGone)) => Ok(()),
        (_, Some(EngineError::LeaseExpired)) if !fifo => Ok(()),
        (ReceiptUse::Delete, Some(EngineError::LeaseExpired)) => Err(SqsError::receipt_refused(
            receipt,
            "The receipt handle has expired",
        )),
        (
            ReceiptUse::ChangeVisibility,
            Some(EngineError::LeaseExpired | EngineError::MessageGone),
        ) => Err(SqsError::receipt_refused(
            receipt,
            "Message does not exist or is not available for visibility timeout change",
        )),
        _ => Err(SqsError::from_api(e, Doing::Other)),
    }
}

/// Deletes the messages of `receipts` on `queue`: each receipt's outcome, in order.
async fn delete(
    call: &Call<'_>,
    queue: &str,
    receipts: Vec<String>,
) -> Result<Vec<Result<(), SqsError>>, SqsError> {
    let results = sqs(
        call.ops
            .ack(call.account(), queue.to_string(), receipts)
            .await,
        Doing::Other,
    )?;
    Ok(results
        .into_iter()
        .map(|r| match r.result {
            Ok(()) => Ok(()),
            Err(e) => receipt_refused(e.into(), &r.receipt, queue, ReceiptUse::Delete),
        })
        .collect())
}

pub async fn delete_message(call: &Call<'_>, input: DeleteMessage) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    let receipt = required(&input.receipt_handle, "ReceiptHandle")?.to_string();
    let outcome = delete(call, &queue, vec![receipt])
        .await?
        .pop()
        .expect("an ack answers one result per receipt");
    outcome.map(|()| json!({}))
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
    /// The queue, after the batch's entry IDs (entries SQS calls `entry_type`) are checked.
    fn checked(&self, call: &Call<'_>, entry_type: &str) -> Result<String, SqsError> {
        let queue = call.queue(&self.queue_url)?;
        let ids: Vec<Option<&str>> = self.entries.iter().map(|e| e.id.as_deref()).collect();
        check_entry_ids(&ids, entry_type)?;
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
    let queue = input.checked(call, "DeleteMessageBatchRequestEntry")?;
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
    let mut deleted = delete(call, &queue, receipts).await?.into_iter();
    for (_, outcome) in outcomes.iter_mut().filter(|(_, o)| o.is_ok()) {
        if let Some(result) = deleted.next() {
            *outcome = result;
        }
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
    let changed = call
        .ops
        .change_lease(
            call.account(),
            queue.clone(),
            receipt.clone(),
            Some(timeout),
            None,
        )
        .await;
    match changed {
        Ok(_) => Ok(()),
        Err(e) => receipt_refused(e, &receipt, &queue, ReceiptUse::ChangeVisibility),
    }
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
    let queue = input.checked(call, "ChangeMessageVisibilityBatchRequestEntry")?;
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
        let kind = |ids: &[Option<&str>]| check_entry_ids(ids, "Entry").unwrap_err().kind;
        assert_eq!(kind(&[]), Kind::EmptyBatchRequest);
        assert_eq!(kind(&[Some("a"); 11]), Kind::TooManyEntriesInBatchRequest);
        assert_eq!(
            kind(&[Some("a"), Some("a")]),
            Kind::BatchEntryIdsNotDistinct
        );
        assert_eq!(kind(&[Some("a b")]), Kind::InvalidBatchEntryId);
        assert_eq!(kind(&[None]), Kind::MissingParameter);
        assert!(check_entry_ids(&[Some("a"), Some("b-2_c")], "Entry").is_ok());
        let empty = check_entry_ids(&[], "DeleteMessageBatchRequestEntry").unwrap_err();
        assert_eq!(
            empty.message,
            "There should be at least one DeleteMessageBatchRequestEntry in the request."
        );
    }

    #[test]
    fn receipts_of_ended_leases_are_answered_as_sqs_answers_them() {
        use ReceiptUse::{ChangeVisibility, Delete};
        let gone = || EngineError::MessageGone;
        let expired = || EngineError::LeaseExpired;
        let malformed = || EngineError::invalid("receipts[0]", "is not a receipt issued by raftq");
        // (use, refusal, queue, SQS's answer: None for success, else its code and reason).
        let cases = [
            (Delete, gone(), "q", None),
            (Delete, gone(), "q.fifo", None),
            (Delete, expired(), "q", None),
            (
                Delete,
                expired(),
                "q.fifo",
                Some(("InvalidParameterValue", "has expired")),
            ),
            (ChangeVisibility, expired(), "q", None),
            (
                ChangeVisibility,
                gone(),
                "q",
                Some(("InvalidParameterValue", "does not exist")),
            ),
            (
                ChangeVisibility,
                expired(),
                "q.fifo",
                Some(("InvalidParameterValue", "not available")),
            ),
            (
                Delete,
                malformed(),
                "q",
                Some(("ReceiptHandleIsInvalid", "\"r\" is not a valid")),
            ),
            (
                ChangeVisibility,
                malformed(),
                "q",
                Some(("ReceiptHandleIsInvalid", "not a valid")),
            ),
        ];
        for (what, refusal, queue, expected) in cases {
            let label = format!("{what:?} {refusal:?} on {queue}");
            let answer = receipt_refused(refusal.into(), "r", queue, what);
            match (answer, expected) {
                (Ok(()), None) => {}
                (Err(e), Some((code, reason))) => {
                    assert_eq!(e.code(), code, "{label}");
                    assert!(e.message.contains(reason), "{label}: {}", e.message);
                }
                (answer, _) => panic!("{label}: {answer:?}"),
            }
        }
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
