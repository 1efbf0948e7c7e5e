//! The queue actions: create, find, list, delete and purge queues, read and set their
//! attributes, and list the queues that name one as their dead-letter queue.

use std::collections::BTreeMap;

use raftq_api::ops::NewQueue;
use raftq_engine::model::limits;
use raftq_engine::validate;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::attributes::{needs_stats, Target};
use crate::call::{required, sqs, Call, QueueOnly};
use crate::error::{Doing, Kind, SqsError};
use crate::tags;

/// A page of `names` (sorted) after the one `token` names, at most `max_results` long, and the
/// token of the next page: given only with `MaxResults`, and only when more follow.
pub fn page(
    names: Vec<String>,
    token: Option<&str>,
    max_results: Option<i64>,
) -> Result<(Vec<String>, Option<String>), SqsError> {
    const MOST: i64 = 1000;
    let limit = match max_results {
        Some(n) if !(1..=MOST).contains(&n) => {
            return Err(SqsError::invalid_parameter(
                "MaxResults",
                format!("must be between 1 and {MOST}"),
            ))
        }
        Some(n) => n as usize,
        None => MOST as usize,
    };
    if let Some(token) = token {
        if validate::queue_name(token).is_err() {
            return Err(SqsError::invalid_parameter(
                "NextToken",
                "is not a token this server gave",
            ));
        }
    }
    let mut rest: Vec<String> = names
        .into_iter()
        .filter(|name| token.is_none_or(|t| name.as_str() > t))
        .collect();
    let more = rest.len() > limit;
    rest.truncate(limit);
    let next = (more && max_results.is_some())
        .then(|| rest.last().cloned())
        .flatten();
    Ok((rest, next))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateQueue {
    queue_name: Option<String>,
    #[serde(default)]
    attributes: BTreeMap<String, String>,
    #[serde(default, rename = "tags")]
    tags: BTreeMap<String, String>,
}

pub async fn create_queue(call: &Call<'_>, input: CreateQueue) -> Result<Value, SqsError> {
    let name = required(&input.queue_name, "QueueName")?;
    let fifo = name.ends_with(limits::FIFO_SUFFIX);
    let requested = call
        .reader()
        .requested(&input.attributes, Target::Create { fifo })?;
    let mut attributes = requested.attributes.clone();
    attributes.tags = tags::on_create(&input.tags);
    // SQS's default; a repeated create compares only the attributes it gives, so `requested`
    // keeps it unset.
    attributes.max_message_bytes = attributes
        .max_message_bytes
        .or(Some(limits::MAX_MESSAGE_BYTES_MAX));
    let new = NewQueue {
        name: name.to_string(),
        queue_type: requested
            .fifo
            .map(|fifo| if fifo { "fifo" } else { "standard" }.to_string()),
        attributes,
    };
    match call.ops.create_queue(call.account(), new).await {
        Ok(view) => Ok(json!({"QueueUrl": call.url(&view.name)})),
        Err(e) if e.code == "queue_exists" => {
            let view = sqs(
                call.ops.get_queue(call.account(), name.to_string()).await,
                Doing::Other,
            )?;
            match call.reader().differing(&view, &requested) {
                None => Ok(json!({"QueueUrl": call.url(&view.name)})),
                Some(attribute) => Err(SqsError::new(
                    Kind::QueueNameExists,
                    format!("A queue already exists with the same name and a different value for attribute {attribute}"),
                )),
            }
        }
        Err(e) if e.field.as_deref() == Some("type") => {
            // `FifoQueue` asked for the type the name does not have: SQS's rule of names.
            let rule = if requested.fifo == Some(true) {
                "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length."
            } else {
                "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
            };
            Err(SqsError::new(Kind::InvalidParameterValue, rule))
        }
        Err(e) => Err(SqsError::from_api(e, Doing::Attributes)),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetQueueUrl {
    queue_name: Option<String>,
    #[serde(rename = "QueueOwnerAWSAccountId")]
    owner: Option<String>,
}

pub async fn get_queue_url(call: &Call<'_>, input: GetQueueUrl) -> Result<Value, SqsError> {
    let name = required(&input.queue_name, "QueueName")?;
    if input
        .owner
        .as_deref()
        .is_some_and(|owner| owner != call.number)
    {
        return Err(SqsError::queue_does_not_exist());
    }
    let view = sqs(
        call.ops.get_queue(call.account(), name.to_string()).await,
        Doing::Other,
    )?;
    Ok(json!({"QueueUrl": call.url(&view.name)}))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListQueues {
    queue_name_prefix: Option<String>,
    next_token: Option<String>,
    max_results: Option<i64>,
}

pub async fn list_queues(call: &Call<'_>, input: ListQueues) -> Result<Value, SqsError> {
    let prefix = input.queue_name_prefix.unwrap_or_default();
    let views = sqs(
        call.ops.list_queues(call.account(), prefix).await,
        Doing::Other,
    )?;
    let names = views.into_iter().map(|v| v.name).collect();
    let (names, next) = page(names, input.next_token.as_deref(), input.max_results)?;
    let mut result = Map::new();
    if !names.is_empty() {
        let urls = names.iter().map(|n| Value::from(call.url(n))).collect();
        result.insert("QueueUrls".into(), Value::Array(urls));
    }
    if let Some(next) = next {
        result.insert("NextToken".into(), next.into());
    }
    Ok(Value::Object(result))
}

pub async fn delete_queue(call: &Call<'_>, input: QueueOnly) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    sqs(
        call.ops.delete_queue(call.account(), queue).await,
        Doing::Other,
    )?;
    Ok(json!({}))
}

pub async fn purge_queue(call: &Call<'_>, input: QueueOnly) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    sqs(call.ops.purge(call.account(), queue).await, Doing::Other)?;
    Ok(json!({}))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetQueueAttributes {
    queue_url: Option<String>,
    #[serde(default)]
    attribute_names: Vec<String>,
}

pub async fn get_queue_attributes(
    call: &Call<'_>,
    input: GetQueueAttributes,
) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    let view = sqs(
        call.ops.get_queue(call.account(), queue.clone()).await,
        Doing::Other,
    )?;
    let stats = if needs_stats(&input.attribute_names) {
        Some(sqs(
            call.ops.queue_stats(call.account(), queue).await,
            Doing::Other,
        )?)
    } else {
        None
    };
    let attributes = call
        .reader()
        .render(&view, stats.as_ref(), &input.attribute_names)?;
    if attributes.is_empty() {
        return Ok(json!({}));
    }
    Ok(json!({"Attributes": attributes}))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SetQueueAttributes {
    queue_url: Option<String>,
    #[serde(default)]
    attributes: BTreeMap<String, String>,
}

pub async fn set_queue_attributes(
    call: &Call<'_>,
    input: SetQueueAttributes,
) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    let fifo = queue.ends_with(limits::FIFO_SUFFIX);
    let requested = call
        .reader()
        .requested(&input.attributes, Target::Set { fifo })?;
    sqs(
        call.ops
            .patch_queue(call.account(), queue, requested.attributes)
            .await,
        Doing::Attributes,
    )?;
    Ok(json!({}))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListDeadLetterSourceQueues {
    queue_url: Option<String>,
    next_token: Option<String>,
    max_results: Option<i64>,
}

pub async fn list_dead_letter_source_queues(
    call: &Call<'_>,
    input: ListDeadLetterSourceQueues,
) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    let sources = sqs(
        call.ops.dead_letter_sources(call.account(), queue).await,
        Doing::Other,
    )?;
    let mut names: Vec<String> = sources.into_iter().map(|s| s.name).collect();
    names.sort();
    let (names, next) = page(names, input.next_token.as_deref(), input.max_results)?;
    let urls: Vec<String> = names.iter().map(|n| call.url(n)).collect();
    let mut result = json!({"queueUrls": urls});
    if let Some(next) = next {
        result["NextToken"] = next.into();
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pages_follow_their_tokens() {
        let all = names(&["a", "b", "c"]);
        assert_eq!(page(all.clone(), None, None).unwrap(), (all.clone(), None));
        let (first, next) = page(all.clone(), None, Some(2)).unwrap();
        assert_eq!((first, next.as_deref()), (names(&["a", "b"]), Some("b")));
        let (second, next) = page(all.clone(), Some("b"), Some(2)).unwrap();
        assert_eq!((second, next), (names(&["c"]), None));
        for bad in [Some(0), Some(1001)] {
            assert_eq!(
                page(all.clone(), None, bad).unwrap_err().kind,
                Kind::InvalidParameterValue
            );
        }
        let e = page(all, Some("not a name!"), None).unwrap_err();
        assert!(e.message.contains("NextToken"), "{e}");
    }
}
