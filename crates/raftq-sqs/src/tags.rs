//! Queue tags: `TagQueue`, `UntagQueue`, `ListQueueTags` and the tags of `CreateQueue`, kept
//! by raftq as a queue setting (`tags`): a tag request is a change of the queue's settings, whose
//! rules (key and value lengths, the number of tags) are raftq's.

use std::collections::BTreeMap;

use raftq_engine::tags::TagChange;
use raftq_engine::QueueAttributes;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::call::{Call, QueueOnly};
use crate::error::{Doing, SqsError};

/// The tags of a `CreateQueue`, as a change of the new queue's (empty) tags.
pub fn on_create(tags: &BTreeMap<String, String>) -> Option<TagChange> {
    (!tags.is_empty()).then(|| {
        tags.iter()
            .map(|(key, value)| (key.clone(), Some(value.clone())))
            .collect()
    })
}

/// Applies `change` to the tags of the queue `url` names.
async fn change(
    call: &Call<'_>,
    url: &Option<String>,
    change: TagChange,
) -> Result<Value, SqsError> {
    let queue = call.queue(url)?;
    let attributes = QueueAttributes {
        tags: Some(change),
        ..QueueAttributes::default()
    };
    call.ops
        .patch_queue(call.account.clone(), queue, attributes)
        .await
        .map_err(|e| SqsError::from_api(e, Doing::Other))?;
    Ok(json!({}))
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TagQueue {
    queue_url: Option<String>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
}

pub async fn tag_queue(call: &Call<'_>, input: TagQueue) -> Result<Value, SqsError> {
    let set = on_create(&input.tags).ok_or_else(|| SqsError::missing("Tags"))?;
    change(call, &input.queue_url, set).await
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UntagQueue {
    queue_url: Option<String>,
    #[serde(default)]
    tag_keys: Vec<String>,
}

pub async fn untag_queue(call: &Call<'_>, input: UntagQueue) -> Result<Value, SqsError> {
    if input.tag_keys.is_empty() {
        return Err(SqsError::missing("TagKeys"));
    }
    let removed = input.tag_keys.into_iter().map(|key| (key, None)).collect();
    change(call, &input.queue_url, removed).await
}

pub async fn list_queue_tags(call: &Call<'_>, input: QueueOnly) -> Result<Value, SqsError> {
    let queue = call.queue(&input.queue_url)?;
    let view = call
        .ops
        .get_queue(call.account.clone(), queue)
        .await
        .map_err(|e| SqsError::from_api(e, Doing::Other))?;
    if view.tags.is_empty() {
        return Ok(json!({}));
    }
    Ok(json!({"Tags": view.tags}))
}
