//! Queue attributes: SQS's names and string values, translated to raftq's queue settings for
//! `CreateQueue` and `SetQueueAttributes`, and rendered from raftq's queue object for
//! `GetQueueAttributes`. raftq's rules (ranges, the FIFO-only settings, redrive targets) are
//! checked by raftq itself; here only the SQS spelling is read and written.
//!
//! | SQS attribute | raftq |
//! |---|---|
//! | `VisibilityTimeout` | `lease_seconds` |
//! | `MessageRetentionPeriod` | `retention_seconds` |
//! | `DelaySeconds` | `delay_seconds` |
//! | `MaximumMessageSize` | `max_message_bytes`, 1,024 to 1,048,576 (SQS's range); a queue created here without it takes SQS's default, 1,048,576 (REST's default is SPEC.md's 256 KiB) |
//! | `ReceiveMessageWaitTimeSeconds` | `receive_wait_seconds` |
//! | `FifoQueue` | the queue's type (its name's `.fifo`), on create only |
//! | `ContentBasedDeduplication` | `content_based_deduplication` |
//! | `RedrivePolicy` | `redrive_policy`, with the target's ARN |
//! | `RedriveAllowPolicy` | `redrive_allow_policy`, with the sources' ARNs |
//! | `DeduplicationScope` | `deduplication_scope` (`queue`, `message_group`), FIFO queues only |
//! | `FifoThroughputLimit` | `fifo_throughput_limit`, kept: raftq has no throughput quota |
//! | `Policy` | `policy`, a JSON object kept and returned as given: raftq authorizes by its keys |
//! | `SqsManagedSseEnabled` | `false` only: raftq does not encrypt messages at rest |
//! | `QueueArn`, `CreatedTimestamp`, `LastModifiedTimestamp`, `ApproximateNumberOfMessages*` | read only |
//! | `KmsMasterKeyId`, `KmsDataKeyReusePeriodSeconds` | refused (`InvalidAttributeName`), saying what raftq does about data at rest |

use std::collections::BTreeMap;

use raftq_engine::model::limits;
use raftq_engine::{
    AllowPolicyInput, QueueAttributes, QueueStats, QueueType, QueueView, RedrivePolicyInput,
};
use serde_json::{json, Map, Value};

use crate::error::SqsError;
use crate::names::Names;

/// What a queue attribute is to this endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attribute {
    /// Read and written.
    Settable,
    /// Read only.
    ReadOnly,
    /// Taken with the one value that says what raftq does; refused with any other.
    Fixed,
    /// An SQS attribute raftq does not have.
    Unsupported(&'static str),
}

/// Every attribute name SQS has, and what it is here.
fn attribute(name: &str) -> Option<Attribute> {
    Some(match name {
        "VisibilityTimeout"
        | "MessageRetentionPeriod"
        | "DelaySeconds"
        | "MaximumMessageSize"
        | "ReceiveMessageWaitTimeSeconds"
        | "ContentBasedDeduplication"
        | "RedrivePolicy"
        | "RedriveAllowPolicy"
        | "DeduplicationScope"
        | "FifoThroughputLimit"
        | "Policy"
        | "FifoQueue" => Attribute::Settable,
        "QueueArn"
        | "CreatedTimestamp"
        | "LastModifiedTimestamp"
        | "ApproximateNumberOfMessages"
        | "ApproximateNumberOfMessagesNotVisible"
        | "ApproximateNumberOfMessagesDelayed" => Attribute::ReadOnly,
        "SqsManagedSseEnabled" => Attribute::Fixed,
        "KmsMasterKeyId" | "KmsDataKeyReusePeriodSeconds" => Attribute::Unsupported(AT_REST),
        _ => return None,
    })
}

/// What raftq does about data at rest, the reason it refuses the encryption attributes.
const AT_REST: &str = "raftq does not encrypt messages at rest, with KMS keys or its own: its data directory (RocksDB files, log segments, snapshots) is plain on disk, so keep it on an encrypted volume";

/// `DeduplicationScope`'s values, and raftq's spelling of each.
const DEDUPLICATION_SCOPES: &[(&str, &str)] =
    &[("queue", "queue"), ("messageGroup", "message_group")];

/// `FifoThroughputLimit`'s values, and raftq's spelling of each.
const THROUGHPUT_LIMITS: &[(&str, &str)] = &[
    ("perQueue", "per_queue"),
    ("perMessageGroupId", "per_message_group_id"),
];

/// The smallest `MaximumMessageSize` SQS takes; the largest is raftq's, 1 MiB, as SQS's.
const SQS_MESSAGE_BYTES_MIN: i64 = 1024;

/// The attributes `GetQueueAttributes` with `All` returns, in SQS's order.
const ALL: &[&str] = &[
    "QueueArn",
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "VisibilityTimeout",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "DelaySeconds",
    "ReceiveMessageWaitTimeSeconds",
    "Policy",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "SqsManagedSseEnabled",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
];

/// The attributes of a create or a set, in raftq's terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requested {
    pub attributes: QueueAttributes,
    /// `FifoQueue`, when given.
    pub fifo: Option<bool>,
}

/// What attributes are read for: a queue's creation or a change of its attributes, and whether
/// the queue is a FIFO queue (for a creation: whether its name makes it one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Create { fifo: bool },
    Set { fifo: bool },
}

/// Who the attributes are read for: the names, and the caller's account number (ARNs in
/// redrive policies must be its own).
pub struct Reader<'a> {
    pub names: &'a Names,
    pub account_number: &'a str,
}

fn integer(name: &str, value: &str) -> Result<i64, SqsError> {
    value
        .trim()
        .parse()
        .map_err(|_| SqsError::invalid_attribute_value(name, "must be an integer"))
}

fn boolean(name: &str, value: &str) -> Result<bool, SqsError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(SqsError::invalid_attribute_value(
            name,
            "must be true or false",
        )),
    }
}

impl Reader<'_> {
    /// Translates the attributes of a create or a set (`target`). Every name is checked:
    /// unknown ones, read-only ones and those raftq does not have are refused, never ignored.
    pub fn requested(
        &self,
        given: &BTreeMap<String, String>,
        target: Target,
    ) -> Result<Requested, SqsError> {
        let mut requested = Requested::default();
        let attrs = &mut requested.attributes;
        for (name, value) in given {
            let name = name.as_str();
            match attribute(name) {
                None => return Err(SqsError::unknown_attribute(name)),
                Some(Attribute::ReadOnly) => {
                    return Err(SqsError::invalid_attribute_name(name, "it is read only"))
                }
                Some(Attribute::Unsupported(why)) => {
                    return Err(SqsError::invalid_attribute_name(name, why))
                }
                _ => {}
            }
            match name {
                "VisibilityTimeout" => attrs.lease_seconds = Some(integer(name, value)?),
                "MessageRetentionPeriod" => attrs.retention_seconds = Some(integer(name, value)?),
                "DelaySeconds" => attrs.delay_seconds = Some(integer(name, value)?),
                "MaximumMessageSize" => {
                    let bytes = integer(name, value)?;
                    if !(SQS_MESSAGE_BYTES_MIN..=limits::MAX_MESSAGE_BYTES_MAX).contains(&bytes) {
                        return Err(SqsError::invalid_attribute_value(
                            name,
                            format!(
                                "must be between {SQS_MESSAGE_BYTES_MIN} and {} bytes",
                                limits::MAX_MESSAGE_BYTES_MAX
                            ),
                        ));
                    }
                    attrs.max_message_bytes = Some(bytes);
                }
                "ReceiveMessageWaitTimeSeconds" => {
                    attrs.receive_wait_seconds = Some(integer(name, value)?)
                }
                "FifoQueue" => requested.fifo = fifo_queue(boolean(name, value)?, target)?,
                "ContentBasedDeduplication" => {
                    attrs.content_based_deduplication = Some(boolean(name, value)?)
                }
                "RedrivePolicy" => attrs.redrive_policy = Some(self.redrive_policy(value)?),
                "RedriveAllowPolicy" => {
                    attrs.redrive_allow_policy = Some(self.allow_policy(value)?)
                }
                "DeduplicationScope" => {
                    attrs.deduplication_scope = Some(one_of(name, value, DEDUPLICATION_SCOPES)?)
                }
                "FifoThroughputLimit" => {
                    attrs.fifo_throughput_limit = Some(one_of(name, value, THROUGHPUT_LIMITS)?)
                }
                "Policy" => attrs.policy = Some(policy(value)?),
                "SqsManagedSseEnabled" => fixed(name, value, "false", AT_REST)?,
                _ => {}
            }
        }
        Ok(requested)
    }

    /// The queue a redrive policy's ARN names, as a raftq reference (its name). A bare name is
    /// no ARN: it is refused here, where a `QueueUrl` takes it.
    fn own_queue(&self, attribute: &str, arn: &str) -> Result<String, SqsError> {
        let refused = || {
            SqsError::invalid_attribute_value(
                attribute,
                format!("{arn} is not the ARN of a queue of this account in this region"),
            )
        };
        if self.names.queue_path(arn).is_none() {
            return Err(refused());
        }
        self.names
            .own_queue(arn, self.account_number)
            .map(str::to_string)
            .map_err(|_| refused())
    }

    /// `{"deadLetterTargetArn": ARN, "maxReceiveCount": N}`; an empty string detaches.
    fn redrive_policy(&self, text: &str) -> Result<Option<RedrivePolicyInput>, SqsError> {
        const NAME: &str = "RedrivePolicy";
        if text.trim().is_empty() {
            return Ok(None);
        }
        let policy = json_object(NAME, text)?;
        let mut input = RedrivePolicyInput::default();
        for (key, value) in &policy {
            match (key.as_str(), value) {
                ("deadLetterTargetArn", Value::String(arn)) => {
                    input.dead_letter_target = Some(self.own_queue(NAME, arn)?)
                }
                ("maxReceiveCount", Value::Number(n)) => input.max_receive_count = n.as_i64(),
                ("maxReceiveCount", Value::String(n)) => {
                    input.max_receive_count = Some(integer(NAME, n)?)
                }
                ("deadLetterTargetArn" | "maxReceiveCount", _) => {
                    return Err(SqsError::invalid_attribute_value(
                        NAME,
                        format!("{key} has the wrong type"),
                    ))
                }
                _ => {
                    return Err(SqsError::invalid_attribute_value(
                        NAME,
                        format!("unknown key {key}"),
                    ))
                }
            }
        }
        Ok(Some(input))
    }

    /// `{"redrivePermission": "allowAll"|"denyAll"|"byQueue", "sourceQueueArns": [ARN...]}`.
    fn allow_policy(&self, text: &str) -> Result<AllowPolicyInput, SqsError> {
        const NAME: &str = "RedriveAllowPolicy";
        let policy = json_object(NAME, text)?;
        let mut input = AllowPolicyInput::default();
        for (key, value) in &policy {
            match (key.as_str(), value) {
                ("redrivePermission", Value::String(permission)) => {
                    let permission = match permission.as_str() {
                        "allowAll" => "allow_all",
                        "denyAll" => "deny_all",
                        "byQueue" => "by_queue",
                        _ => {
                            return Err(SqsError::invalid_attribute_value(
                                NAME,
                                "redrivePermission must be allowAll, denyAll or byQueue",
                            ))
                        }
                    };
                    input.permission = Some(permission.to_string());
                }
                ("sourceQueueArns", Value::Array(arns)) => {
                    let names = arns
                        .iter()
                        .map(|arn| match arn {
                            Value::String(arn) => self.own_queue(NAME, arn),
                            _ => Err(SqsError::invalid_attribute_value(
                                NAME,
                                "sourceQueueArns must be strings",
                            )),
                        })
                        .collect::<Result<_, _>>()?;
                    input.source_queues = Some(names);
                }
                _ => {
                    return Err(SqsError::invalid_attribute_value(
                        NAME,
                        format!("unexpected key or value of {key}"),
                    ))
                }
            }
        }
        Ok(input)
    }

    /// The attributes of `view` that `wanted` names (`All` for every one); `stats` is given when
    /// a wanted attribute needs it ([`needs_stats`]).
    pub fn render(
        &self,
        view: &QueueView,
        stats: Option<&QueueStats>,
        wanted: &[String],
    ) -> Result<BTreeMap<String, String>, SqsError> {
        let every = wanted.iter().any(|w| w == "All");
        let mut names: Vec<&str> = if every { ALL.to_vec() } else { Vec::new() };
        for name in wanted.iter().filter(|w| *w != "All") {
            if attribute(name).is_none() {
                return Err(SqsError::unknown_attribute(name));
            }
            names.push(name.as_str());
        }
        let mut rendered = BTreeMap::new();
        for name in names {
            if let Some(value) = self.value(view, stats, name) {
                rendered.insert(name.to_string(), value);
            }
        }
        Ok(rendered)
    }

    /// One attribute of `view`; `None` when the queue has no such value (an attribute of the
    /// other queue type, an unset policy, an attribute raftq does not have).
    fn value(&self, view: &QueueView, stats: Option<&QueueStats>, name: &str) -> Option<String> {
        let fifo = view.queue_type == QueueType::Fifo;
        let arn = |name: &str| self.names.arn(self.account_number, name);
        Some(match name {
            "QueueArn" => arn(&view.name),
            "ApproximateNumberOfMessages" => stats?.visible.to_string(),
            "ApproximateNumberOfMessagesNotVisible" => {
                (stats?.leased + stats?.pending_redrive).to_string()
            }
            "ApproximateNumberOfMessagesDelayed" => stats?.delayed.to_string(),
            "CreatedTimestamp" => (view.created_at / 1000).to_string(),
            "LastModifiedTimestamp" => (view.modified_at / 1000).to_string(),
            "VisibilityTimeout" => view.lease_seconds.to_string(),
            "MaximumMessageSize" => view.max_message_bytes.to_string(),
            "MessageRetentionPeriod" => view.retention_seconds.to_string(),
            "DelaySeconds" => view.delay_seconds.to_string(),
            "ReceiveMessageWaitTimeSeconds" => view.receive_wait_seconds.to_string(),
            "RedrivePolicy" => {
                let policy = view.redrive_policy.as_ref()?;
                json!({
                    "deadLetterTargetArn": arn(&policy.dead_letter_target.name),
                    "maxReceiveCount": policy.max_receive_count,
                })
                .to_string()
            }
            "RedriveAllowPolicy" => {
                let allow = &view.redrive_allow_policy;
                let mut policy = Map::new();
                let permission = match allow.permission.as_str() {
                    "deny_all" => "denyAll",
                    "by_queue" => "byQueue",
                    _ => "allowAll",
                };
                policy.insert("redrivePermission".into(), permission.into());
                if let Some(sources) = &allow.source_queues {
                    let arns = sources.iter().map(|s| Value::from(arn(&s.name))).collect();
                    policy.insert("sourceQueueArns".into(), Value::Array(arns));
                }
                Value::Object(policy).to_string()
            }
            "SqsManagedSseEnabled" => "false".to_string(),
            "FifoQueue" if fifo => "true".to_string(),
            "ContentBasedDeduplication" if fifo => view.content_based_deduplication.to_string(),
            "DeduplicationScope" if fifo => {
                sqs_spelling(DEDUPLICATION_SCOPES, view.deduplication_scope.as_str())
            }
            "FifoThroughputLimit" if fifo => {
                sqs_spelling(THROUGHPUT_LIMITS, view.fifo_throughput_limit.as_str())
            }
            "Policy" => view.policy.clone()?,
            _ => return None,
        })
    }

    /// The first attribute of `requested` whose value differs from `view`'s, by SQS name: a
    /// `CreateQueue` of an existing queue succeeds only when there is none.
    pub fn differing(&self, view: &QueueView, requested: &Requested) -> Option<&'static str> {
        let given = &requested.attributes;
        let same = |asked: Option<i64>, has: u32| asked.is_none_or(|v| v == i64::from(has));
        let fifo = view.queue_type == QueueType::Fifo;
        if requested.fifo.is_some_and(|f| f != fifo) {
            return Some("FifoQueue");
        }
        if !same(given.lease_seconds, view.lease_seconds) {
            return Some("VisibilityTimeout");
        }
        if !same(given.retention_seconds, view.retention_seconds) {
            return Some("MessageRetentionPeriod");
        }
        if !same(given.delay_seconds, view.delay_seconds) {
            return Some("DelaySeconds");
        }
        if !same(given.max_message_bytes, view.max_message_bytes) {
            return Some("MaximumMessageSize");
        }
        if !same(given.receive_wait_seconds, view.receive_wait_seconds) {
            return Some("ReceiveMessageWaitTimeSeconds");
        }
        if given
            .content_based_deduplication
            .is_some_and(|c| c != view.content_based_deduplication)
        {
            return Some("ContentBasedDeduplication");
        }
        let differs =
            |asked: &Option<String>, has: &str| asked.as_deref().is_some_and(|a| a != has);
        if differs(
            &given.deduplication_scope,
            view.deduplication_scope.as_str(),
        ) {
            return Some("DeduplicationScope");
        }
        if differs(
            &given.fifo_throughput_limit,
            view.fifo_throughput_limit.as_str(),
        ) {
            return Some("FifoThroughputLimit");
        }
        if given.policy.as_ref().is_some_and(|p| *p != view.policy) {
            return Some("Policy");
        }
        if given
            .redrive_policy
            .as_ref()
            .is_some_and(|policy| redrive_differs(view, policy.as_ref()))
        {
            return Some("RedrivePolicy");
        }
        if given
            .redrive_allow_policy
            .as_ref()
            .is_some_and(|allow| redrive_allow_differs(view, allow))
        {
            return Some("RedriveAllowPolicy");
        }
        None
    }
}

/// Whether the redrive policy asked for (`None`: none) differs from `view`'s.
fn redrive_differs(view: &QueueView, asked: Option<&RedrivePolicyInput>) -> bool {
    let has = view.redrive_policy.as_ref().map(|p| {
        (
            p.dead_letter_target.name.as_str(),
            i64::from(p.max_receive_count),
        )
    });
    let asked = asked.map(|p| {
        (
            p.dead_letter_target.as_deref().unwrap_or_default(),
            p.max_receive_count.unwrap_or_default(),
        )
    });
    has != asked
}

/// Whether the redrive allow policy asked for differs from `view`'s: its permission, or its
/// source queues in any order.
fn redrive_allow_differs(view: &QueueView, allow: &AllowPolicyInput) -> bool {
    let has = &view.redrive_allow_policy;
    let mut has_sources: Vec<&str> = has
        .source_queues
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    let mut asked_sources: Vec<&str> = allow
        .source_queues
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    has_sources.sort_unstable();
    asked_sources.sort_unstable();
    allow.permission.as_deref() != Some(has.permission.as_str()) || has_sources != asked_sources
}

/// Whether rendering `wanted` needs the queue's message counts.
pub fn needs_stats(wanted: &[String]) -> bool {
    wanted
        .iter()
        .any(|w| w == "All" || w.starts_with("ApproximateNumberOfMessages"))
}

/// `FifoQueue`, as SQS takes it: on a standard queue it is no attribute at all; a FIFO queue's
/// stays `true`. On a create, `true` asks for a FIFO queue (the name decides, see CreateQueue).
fn fifo_queue(value: bool, target: Target) -> Result<Option<bool>, SqsError> {
    match (target, value) {
        (Target::Create { fifo: false }, false) | (Target::Set { fifo: false }, _) => {
            Err(SqsError::unknown_attribute("FifoQueue"))
        }
        (Target::Create { .. }, _) => Ok(Some(value)),
        (Target::Set { .. }, true) => Ok(None),
        (Target::Set { .. }, false) => Err(SqsError::invalid_attribute_value(
            "FifoQueue",
            "Modifying queue type is not supported",
        )),
    }
}

/// raftq's spelling of `value`, one of `values` (SQS's spelling first).
fn one_of(name: &str, value: &str, values: &[(&str, &str)]) -> Result<String, SqsError> {
    match values.iter().find(|(sqs, _)| *sqs == value) {
        Some((_, raftq)) => Ok(raftq.to_string()),
        None => {
            let names: Vec<&str> = values.iter().map(|(sqs, _)| *sqs).collect();
            Err(SqsError::invalid_attribute_value(
                name,
                format!("must be {}", names.join(" or ")),
            ))
        }
    }
}

/// SQS's spelling of raftq's `value`, one of `values`.
fn sqs_spelling(values: &[(&str, &str)], value: &str) -> String {
    let found = values.iter().find(|(_, raftq)| *raftq == value);
    found.map_or(value, |(sqs, _)| sqs).to_string()
}

/// A `Policy`: a JSON object, kept as given (its size is raftq's rule); an empty one removes the
/// queue's policy, as in SQS.
fn policy(text: &str) -> Result<Option<String>, SqsError> {
    if text.is_empty() {
        return Ok(None);
    }
    json_object("Policy", text)?;
    Ok(Some(text.to_string()))
}

/// Takes `value` for attribute `name` only when it is `what_raftq_does`.
fn fixed(name: &str, value: &str, what_raftq_does: &str, why: &str) -> Result<(), SqsError> {
    if value == what_raftq_does {
        Ok(())
    } else {
        Err(SqsError::invalid_attribute_value(
            name,
            format!("only {what_raftq_does} is supported: {why}"),
        ))
    }
}

fn json_object(name: &str, text: &str) -> Result<Map<String, Value>, SqsError> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(SqsError::invalid_attribute_value(
            name,
            "must be a JSON object",
        )),
    }
}

#[cfg(test)]
mod tests {
    use raftq_engine::model::{
        AllowPolicyView, DeduplicationScope, FifoThroughputLimit, RedrivePolicyView,
    };
    use raftq_engine::QueueRef;
    use uuid::Uuid;

    use super::*;
    use crate::error::Kind;

    const CREATE: Target = Target::Create { fifo: true };
    const SET: Target = Target::Set { fifo: true };

    const NUMBER: &str = "123456789012";

    fn names() -> Names {
        Names::new("http://h:1", "local", BTreeMap::new())
    }

    /// A reader of the account [`NUMBER`] with `names`.
    fn reader(names: &Names) -> Reader<'_> {
        Reader {
            names,
            account_number: NUMBER,
        }
    }

    fn given(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn queue_ref(name: &str) -> QueueRef {
        QueueRef {
            id: Uuid::nil(),
            name: name.into(),
            crn: String::new(),
        }
    }

    fn view(name: &str) -> QueueView {
        QueueView {
            id: Uuid::nil(),
            name: name.into(),
            crn: String::new(),
            arn: String::new(),
            group: 1,
            queue_type: QueueType::of_name(name),
            created_at: 1_700_000_000_123,
            content_based_deduplication: false,
            lease_seconds: 30,
            delay_seconds: 0,
            retention_seconds: 345_600,
            max_message_bytes: 262_144,
            redrive_policy: None,
            redrive_allow_policy: AllowPolicyView {
                permission: "allow_all".into(),
                source_queues: None,
            },
            retry_backoff: None,
            modified_at: 1_700_000_000_123,
            receive_wait_seconds: 0,
            tags: BTreeMap::new(),
            deduplication_scope: DeduplicationScope::Queue,
            fifo_throughput_limit: FifoThroughputLimit::PerQueue,
            policy: None,
            default_priority: 0,
            priority_weights: None,
        }
    }

    #[test]
    fn settable_attributes_translate_to_raftq_settings() {
        let names = names();
        let reader = reader(&names);
        let requested = reader
            .requested(
                &given(&[
                    ("VisibilityTimeout", "60"),
                    ("MessageRetentionPeriod", "120"),
                    ("DelaySeconds", "5"),
                    ("MaximumMessageSize", "1048576"),
                    ("FifoQueue", "true"),
                    ("ContentBasedDeduplication", "TRUE"),
                    ("DeduplicationScope", "messageGroup"),
                    ("FifoThroughputLimit", "perMessageGroupId"),
                    ("Policy", POLICY),
                    ("ReceiveMessageWaitTimeSeconds", "0"),
                    (
                        "RedrivePolicy",
                        r#"{"deadLetterTargetArn":"arn:aws:sqs:local:123456789012:dlq.fifo","maxReceiveCount":"3"}"#,
                    ),
                    (
                        "RedriveAllowPolicy",
                        r#"{"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:local:123456789012:a"]}"#,
                    ),
                ]),
                CREATE,
            )
            .unwrap();
        let a = &requested.attributes;
        assert_eq!(requested.fifo, Some(true));
        assert_eq!(
            (
                a.lease_seconds,
                a.retention_seconds,
                a.delay_seconds,
                a.max_message_bytes
            ),
            (Some(60), Some(120), Some(5), Some(1_048_576))
        );
        assert_eq!(a.content_based_deduplication, Some(true));
        assert_eq!(a.deduplication_scope.as_deref(), Some("message_group"));
        assert_eq!(
            a.fifo_throughput_limit.as_deref(),
            Some("per_message_group_id")
        );
        assert_eq!(a.policy, Some(Some(POLICY.to_string())));
        assert_eq!(
            a.redrive_policy,
            Some(Some(RedrivePolicyInput {
                dead_letter_target: Some("dlq.fifo".into()),
                max_receive_count: Some(3),
            }))
        );
        assert_eq!(
            a.redrive_allow_policy,
            Some(AllowPolicyInput {
                permission: Some("by_queue".into()),
                source_queues: Some(vec!["a".into()]),
            })
        );
        let detach = reader
            .requested(&given(&[("RedrivePolicy", "")]), SET)
            .unwrap();
        assert_eq!(detach.attributes.redrive_policy, Some(None));
        let no_policy = reader.requested(&given(&[("Policy", "")]), SET).unwrap();
        assert_eq!(no_policy.attributes.policy, Some(None));
    }

    /// A policy document as SQS takes it: any JSON object, kept as written.
    const POLICY: &str = r#"{"Version": "2012-10-17", "Statement": [{"Effect": "Allow"}]}"#;

    #[test]
    fn what_raftq_lacks_is_refused_by_name() {
        let names = names();
        let reader = reader(&names);
        let cases = [
            (("Bogus", "1"), CREATE, Kind::InvalidAttributeName),
            (("QueueArn", "x"), CREATE, Kind::InvalidAttributeName),
            (("Policy", "[1]"), CREATE, Kind::InvalidAttributeValue),
            (("Policy", "{"), SET, Kind::InvalidAttributeValue),
            (
                ("KmsMasterKeyId", "alias/aws/sqs"),
                CREATE,
                Kind::InvalidAttributeName,
            ),
            (
                ("FifoQueue", "true"),
                Target::Set { fifo: false },
                Kind::InvalidAttributeName,
            ),
            (
                ("FifoQueue", "false"),
                Target::Create { fifo: false },
                Kind::InvalidAttributeName,
            ),
            (("FifoQueue", "false"), SET, Kind::InvalidAttributeValue),
            (
                ("DeduplicationScope", "message_group"),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
            (
                ("FifoThroughputLimit", "perGroup"),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
            (
                ("SqsManagedSseEnabled", "true"),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
            (
                ("VisibilityTimeout", "ten"),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
            (("FifoQueue", "yes"), CREATE, Kind::InvalidAttributeValue),
            (
                ("MaximumMessageSize", "1023"),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
            (
                ("MaximumMessageSize", "1048577"),
                SET,
                Kind::InvalidAttributeValue,
            ),
            (
                ("RedrivePolicy", "[1]"),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
            (
                (
                    "RedrivePolicy",
                    r#"{"deadLetterTargetArn":"arn:aws:sqs:local:999999999999:d","maxReceiveCount":1}"#,
                ),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
            (
                (
                    "RedrivePolicy",
                    r#"{"deadLetterTargetArn":"dlq","maxReceiveCount":1}"#,
                ),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
            (
                ("RedrivePolicy", r#"{"other":1}"#),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
            (
                ("RedriveAllowPolicy", r#"{"redrivePermission":"some"}"#),
                CREATE,
                Kind::InvalidAttributeValue,
            ),
        ];
        for ((name, value), target, kind) in cases {
            let e = reader
                .requested(&given(&[(name, value)]), target)
                .unwrap_err();
            assert_eq!(e.kind, kind, "{name}={value}: {e}");
            assert!(e.message.contains(name), "{name}: {e}");
        }
    }

    #[test]
    fn attributes_render_as_sqs_returns_them() {
        let names = names();
        let reader = reader(&names);
        let mut fifo = view("jobs.fifo");
        fifo.redrive_policy = Some(RedrivePolicyView {
            dead_letter_target: queue_ref("dlq.fifo"),
            max_receive_count: 4,
        });
        let stats = QueueStats {
            visible: 3,
            leased: 1,
            delayed: 2,
            pending_redrive: 1,
            ..QueueStats::default()
        };
        let all = reader.render(&fifo, Some(&stats), &["All".into()]).unwrap();
        assert_eq!(all["QueueArn"], "arn:aws:sqs:local:123456789012:jobs.fifo");
        assert_eq!(all["CreatedTimestamp"], "1700000000");
        assert_eq!(all["ApproximateNumberOfMessages"], "3");
        assert_eq!(all["ApproximateNumberOfMessagesNotVisible"], "2");
        assert_eq!(all["ApproximateNumberOfMessagesDelayed"], "2");
        assert_eq!(all["FifoQueue"], "true");
        assert_eq!(all["DeduplicationScope"], "queue");
        assert_eq!(
            all["RedriveAllowPolicy"],
            r#"{"redrivePermission":"allowAll"}"#
        );
        let policy: Value = serde_json::from_str(&all["RedrivePolicy"]).unwrap();
        assert_eq!(
            policy,
            json!({"deadLetterTargetArn": "arn:aws:sqs:local:123456789012:dlq.fifo", "maxReceiveCount": 4})
        );
        let mut high = view("jobs.fifo");
        high.deduplication_scope = DeduplicationScope::MessageGroup;
        high.fifo_throughput_limit = FifoThroughputLimit::PerMessageGroupId;
        high.policy = Some(POLICY.into());
        let wanted = ["DeduplicationScope", "FifoThroughputLimit", "Policy"].map(String::from);
        let rendered = reader.render(&high, None, &wanted).unwrap();
        assert_eq!(rendered["DeduplicationScope"], "messageGroup");
        assert_eq!(rendered["FifoThroughputLimit"], "perMessageGroupId");
        assert_eq!(rendered["Policy"], POLICY);
        let standard = reader.render(&view("jobs"), None, &["All".into()]).unwrap();
        assert!(!standard.contains_key("FifoQueue"));
        assert!(!standard.contains_key("RedrivePolicy"));
        assert!(!standard.contains_key("ApproximateNumberOfMessages"));
        let some = reader
            .render(
                &view("jobs"),
                None,
                &["VisibilityTimeout".into(), "Policy".into()],
            )
            .unwrap();
        assert_eq!(some, given(&[("VisibilityTimeout", "30")]));
        let e = reader
            .render(&view("jobs"), None, &["Nope".into()])
            .unwrap_err();
        assert_eq!(e.kind, Kind::InvalidAttributeName);
        assert!(needs_stats(&["All".into()]));
        assert!(!needs_stats(&["QueueArn".into()]));
    }

    #[test]
    fn a_repeated_create_must_ask_for_what_the_queue_has() {
        let names = names();
        let reader = reader(&names);
        let has = view("jobs");
        let mut with_policy = view("jobs");
        with_policy.redrive_policy = Some(RedrivePolicyView {
            dead_letter_target: queue_ref("dlq"),
            max_receive_count: 2,
        });
        let fifo = view("jobs.fifo");
        let policy =
            r#"{"deadLetterTargetArn":"arn:aws:sqs:local:123456789012:dlq","maxReceiveCount":2}"#;
        let allow = r#"{"redrivePermission":"allowAll"}"#;
        // The queue, what a create asks for, and the attribute that differs, if any.
        type Case<'a> = (&'a QueueView, &'a [(&'a str, &'a str)], Option<&'a str>);
        #[rustfmt::skip]
        let cases: [Case; 10] = [
            (&has, &[], None),
            (&has, &[("VisibilityTimeout", "30")], None),
            (&has, &[("VisibilityTimeout", "31")], Some("VisibilityTimeout")),
            (&has, &[("FifoQueue", "true")], Some("FifoQueue")),
            (&has, &[("RedrivePolicy", policy)], Some("RedrivePolicy")),
            (&with_policy, &[("RedrivePolicy", policy)], None),
            (&has, &[("RedriveAllowPolicy", allow)], None),
            (&has, &[("Policy", POLICY)], Some("Policy")),
            (&fifo, &[("DeduplicationScope", "queue")], None),
            (&fifo, &[("DeduplicationScope", "messageGroup")], Some("DeduplicationScope")),
        ];
        for (queue, pairs, differing) in cases {
            let asked = reader.requested(&given(pairs), CREATE).unwrap();
            assert_eq!(reader.differing(queue, &asked), differing, "{pairs:?}");
        }
    }
}
