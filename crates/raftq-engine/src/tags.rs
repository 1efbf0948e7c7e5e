//! Queue tags (SQS TagQueue, UntagQueue, ListQueueTags and CreateQueue's tags): up to 50
//! key-value pairs per queue for the queue's owner (cost allocation, grouping); they change
//! nothing in how the queue works. A change is a merge: each key given a value is set (added
//! or overwritten), each key given none is removed.

use std::collections::BTreeMap;

use crate::error::{EngineError, Result};
use crate::model::limits;

/// A change of tags: a value sets the key, `None` removes it.
pub type TagChange = BTreeMap<String, Option<String>>;

/// Checks the keys and values of a change: keys 1-128 characters, not starting with `aws:` (in
/// any case), values 0-256 characters; at most 50 keys set.
pub fn check(change: &TagChange) -> Result<()> {
    for (key, value) in change {
        let chars = key.chars().count();
        if chars == 0 || chars > limits::TAG_KEY_MAX {
            return Err(EngineError::invalid(
                "tags",
                format!("tag keys must be 1-{} characters", limits::TAG_KEY_MAX),
            ));
        }
        if key.to_ascii_lowercase().starts_with("aws:") {
            return Err(EngineError::invalid(
                format!("tags.{key}"),
                "keys starting with aws: are reserved",
            ));
        }
        if value
            .as_ref()
            .is_some_and(|v| v.chars().count() > limits::TAG_VALUE_MAX)
        {
            return Err(EngineError::invalid(
                format!("tags.{key}"),
                format!("must be at most {} characters", limits::TAG_VALUE_MAX),
            ));
        }
    }
    let set = change.values().filter(|v| v.is_some()).count();
    if set > limits::TAGS_MAX {
        return Err(too_many());
    }
    Ok(())
}

fn too_many() -> EngineError {
    EngineError::invalid(
        "tags",
        format!("a queue has at most {} tags", limits::TAGS_MAX),
    )
}

/// `tags` with `change` applied (checked by [`check`]), refused when the queue would then have
/// more than 50 tags.
pub fn merged(
    tags: &BTreeMap<String, String>,
    change: &TagChange,
) -> Result<BTreeMap<String, String>> {
    let mut out = tags.clone();
    for (key, value) in change {
        match value {
            Some(value) => out.insert(key.clone(), value.clone()),
            None => out.remove(key),
        };
    }
    if out.len() > limits::TAGS_MAX {
        return Err(too_many());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::refused_field as field;

    fn change(pairs: &[(&str, Option<&str>)]) -> TagChange {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn keys_and_values_have_sqs_lengths() {
        let key = "k".repeat(128);
        let value = "é".repeat(256);
        assert!(check(&change(&[(&key, Some(&value)), ("empty", Some(""))])).is_ok());
        assert_eq!(field(check(&change(&[("", Some("v"))]))), "tags");
        assert_eq!(
            field(check(&change(&[(&"k".repeat(129), Some("v"))]))),
            "tags"
        );
        assert_eq!(
            field(check(&change(&[("k", Some(&"v".repeat(257)))]))),
            "tags.k"
        );
        assert_eq!(field(check(&change(&[("AWS:x", Some("v"))]))), "tags.AWS:x");
    }

    #[test]
    fn a_queue_holds_at_most_fifty_tags() {
        let fifty: TagChange = (0..50)
            .map(|i| (format!("k{i}"), Some("v".into())))
            .collect();
        assert!(check(&fifty).is_ok());
        let tags = merged(&BTreeMap::new(), &fifty).unwrap();
        assert_eq!(tags.len(), 50);
        assert_eq!(field(merged(&tags, &change(&[("new", Some("v"))]))), "tags");
        // Overwriting and removing keep within the limit.
        let swapped = merged(
            &tags,
            &change(&[("k0", None), ("new", Some("v")), ("k1", Some("w"))]),
        )
        .unwrap();
        assert_eq!(swapped.len(), 50);
        assert_eq!(swapped["k1"], "w");
        assert!(!swapped.contains_key("k0"));
        let mut too_many = fifty.clone();
        too_many.insert("k50".into(), Some("v".into()));
        assert_eq!(field(check(&too_many)), "tags");
    }
}
