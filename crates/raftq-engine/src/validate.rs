//! Pure input rules of SPEC.md: names, ranges, IDs, message sizes. Each failure names the field
//! and the rule. These checks need no state, so the API edge may run them before proposing.

use sha2::{Digest, Sha256};

use crate::attributes;
use crate::command::{
    AllowPolicyInput, MoveTaskInput, NewMessage, QueueAttributes, RedrivePolicyInput,
    RetryBackoffInput,
};
use crate::error::{EngineError, Result};
use crate::model::{
    limits, DeduplicationScope, FifoThroughputLimit, Millis, PriorityWeights, QueueConfig,
    QueueType, RetryBackoff,
};

/// The rule broken by a FIFO-only setting given to a standard queue.
pub const FIFO_ONLY: &str = "applies only to FIFO queues";

/// The rule broken by a priority setting given to a FIFO queue.
pub const STANDARD_ONLY: &str =
    "applies only to standard queues: a FIFO queue delivers each group in order";

/// The rule broken by a move task's destination that names no queue.
pub const NO_SUCH_DESTINATION: &str = "names no existing queue of this account";

/// The rule broken by a move task without a destination from a queue that is no dead-letter
/// queue.
pub const DESTINATION_REQUIRED: &str =
    "is required: the source queue is not the dead-letter queue of any queue";

/// Checks a queue name and tells its type.
pub fn queue_name(name: &str) -> Result<QueueType> {
    let base = name.strip_suffix(limits::FIFO_SUFFIX).unwrap_or(name);
    if base.is_empty() || base.len() > limits::QUEUE_NAME_MAX {
        return Err(EngineError::invalid(
            "name",
            format!(
                "must be 1-{} characters (not counting a .fifo suffix)",
                limits::QUEUE_NAME_MAX
            ),
        ));
    }
    if !base
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(EngineError::invalid(
            "name",
            "may contain only A-Z a-z 0-9 _ - and end in .fifo for a FIFO queue",
        ));
    }
    Ok(QueueType::of_name(name))
}

/// Checks that `value` lies in `min..=max`.
pub fn in_range(field: &str, value: i64, min: i64, max: i64) -> Result<u32> {
    if value < min || value > max {
        return Err(EngineError::invalid(
            field,
            format!("must be between {min} and {max}"),
        ));
    }
    u32::try_from(value).map_err(|_| EngineError::invalid(field, "is out of range"))
}

/// Applies the scalar attributes (not the redrive policies, which need state) to `config`, for
/// a queue of `queue_type`; when that is not known (`None`: a patch checked before it reaches
/// the queue), the rules of one type of queue only are left to the later check.
pub fn scalar_attributes(
    attrs: &QueueAttributes,
    queue_type: Option<QueueType>,
    config: &mut QueueConfig,
) -> Result<()> {
    if let Some(cbd) = attrs.content_based_deduplication {
        if cbd {
            only_on(QueueType::Fifo, queue_type, "content_based_deduplication")?;
        }
        config.content_based_deduplication = cbd;
    }
    if let Some(v) = attrs.lease_seconds {
        config.lease_seconds = lease_seconds(v)?;
    }
    if let Some(v) = attrs.delay_seconds {
        config.delay_seconds = in_range("delay_seconds", v, 0, limits::DELAY_SECONDS_MAX)?;
    }
    if let Some(v) = attrs.retention_seconds {
        config.retention_seconds = in_range(
            "retention_seconds",
            v,
            limits::RETENTION_SECONDS_MIN,
            limits::RETENTION_SECONDS_MAX,
        )?;
    }
    if let Some(v) = attrs.max_message_bytes {
        config.max_message_bytes =
            in_range("max_message_bytes", v, 1, limits::MAX_MESSAGE_BYTES_MAX)?;
    }
    match &attrs.retry_backoff {
        Some(Some(input)) => config.retry_backoff = Some(retry_backoff(input)?),
        Some(None) => config.retry_backoff = None,
        None => {}
    }
    if let Some(v) = attrs.receive_wait_seconds {
        config.receive_wait_seconds = receive_wait_seconds("receive_wait_seconds", v)?;
    }
    fifo_settings(attrs, queue_type, config)?;
    priority_settings(attrs, queue_type, config)?;
    match &attrs.policy {
        Some(Some(policy)) => config.policy = Some(self::policy(policy)?),
        Some(None) => config.policy = None,
        None => {}
    }
    Ok(())
}

/// Refuses `field` unless the queue, of `queue_type` (`None`: not known yet), is of `kind`.
fn only_on(kind: QueueType, queue_type: Option<QueueType>, field: &str) -> Result<()> {
    match queue_type {
        Some(t) if t != kind => Err(EngineError::invalid(
            field,
            match kind {
                QueueType::Fifo => FIFO_ONLY,
                QueueType::Standard => STANDARD_ONLY,
            },
        )),
        _ => Ok(()),
    }
}

/// The FIFO-only settings: the deduplication scope and the throughput limit, read from the
/// API's spelling.
fn fifo_settings(
    attrs: &QueueAttributes,
    queue_type: Option<QueueType>,
    config: &mut QueueConfig,
) -> Result<()> {
    let fifo_only = |field: &str| only_on(QueueType::Fifo, queue_type, field);
    if let Some(text) = &attrs.deduplication_scope {
        fifo_only("deduplication_scope")?;
        config.deduplication_scope = DeduplicationScope::parse(text).ok_or_else(|| {
            EngineError::invalid("deduplication_scope", "must be queue or message_group")
        })?;
    }
    if let Some(text) = &attrs.fifo_throughput_limit {
        fifo_only("fifo_throughput_limit")?;
        config.fifo_throughput_limit = FifoThroughputLimit::parse(text).ok_or_else(|| {
            EngineError::invalid(
                "fifo_throughput_limit",
                "must be per_queue or per_message_group_id",
            )
        })?;
    }
    Ok(())
}

/// The standard-only settings: the default priority and the weights of the priority levels.
fn priority_settings(
    attrs: &QueueAttributes,
    queue_type: Option<QueueType>,
    config: &mut QueueConfig,
) -> Result<()> {
    let standard_only = |field: &str| only_on(QueueType::Standard, queue_type, field);
    if let Some(v) = attrs.default_priority {
        standard_only("default_priority")?;
        config.default_priority = priority("default_priority", v)?;
    }
    match &attrs.priority_weights {
        Some(Some(weights)) => {
            standard_only("priority_weights")?;
            config.priority_weights = Some(priority_weights(weights)?);
        }
        Some(None) => config.priority_weights = None,
        None => {}
    }
    Ok(())
}

/// A priority: 0-9.
pub fn priority(field: &str, value: i64) -> Result<u8> {
    let checked = in_range(field, value, 0, limits::PRIORITY_MAX)?;
    Ok(u8::try_from(checked).unwrap_or(u8::MAX))
}

/// The weights of the priority levels: 1-10 of them (element `i` weighs priority `i`, the
/// last one every priority after it), each 1-1,000, so that no level is starved.
pub fn priority_weights(weights: &[i64]) -> Result<PriorityWeights> {
    if weights.is_empty() || weights.len() > limits::PRIORITY_LEVELS {
        return Err(EngineError::invalid(
            "priority_weights",
            format!(
                "must list 1-{} weights, the first for priority 0; priorities past the list's \
                 end take its last weight",
                limits::PRIORITY_LEVELS
            ),
        ));
    }
    let checked = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            in_range(
                &format!("priority_weights[{i}]"),
                w,
                1,
                limits::PRIORITY_WEIGHT_MAX,
            )
        })
        .collect::<Result<Vec<u32>>>()?;
    Ok(PriorityWeights(checked))
}

/// The rule between a queue's final deduplication scope and throughput limit (SQS's): the
/// per-message-group limit needs deduplication per message group. Checked once a create or
/// patch has set both; the field named is the one the request changed.
pub fn throughput_limit(attrs: &QueueAttributes, config: &QueueConfig) -> Result<()> {
    if config.fifo_throughput_limit == FifoThroughputLimit::PerMessageGroupId
        && config.deduplication_scope != DeduplicationScope::MessageGroup
    {
        let field = if attrs.fifo_throughput_limit.is_some() {
            "fifo_throughput_limit"
        } else {
            "deduplication_scope"
        };
        return Err(EngineError::invalid(
            field,
            "the per-message-group throughput limit needs deduplication per message group",
        ));
    }
    Ok(())
}

/// An access policy document: 1-8,192 bytes. Its syntax is the SQS endpoint's to check: raftq
/// keeps the document and does not enforce it.
pub fn policy(text: &str) -> Result<String> {
    if text.is_empty() || text.len() > limits::POLICY_BYTES_MAX {
        return Err(EngineError::invalid(
            "policy",
            format!("must be 1-{} bytes", limits::POLICY_BYTES_MAX),
        ));
    }
    Ok(text.to_string())
}

/// A retry backoff: `initial_seconds` 0-900, `max_seconds` from `initial_seconds` to 43,200 and
/// `multiplier` 1.0-10.0 (kept to three decimal places); all three are required.
pub fn retry_backoff(input: &RetryBackoffInput) -> Result<RetryBackoff> {
    const INITIAL: &str = "retry_backoff.initial_seconds";
    const MAX: &str = "retry_backoff.max_seconds";
    const MULTIPLIER: &str = "retry_backoff.multiplier";
    let required = |field: &str| EngineError::invalid(field, "is required");
    let initial = input.initial_seconds.ok_or_else(|| required(INITIAL))?;
    let initial = in_range(INITIAL, initial, 0, limits::BACKOFF_INITIAL_SECONDS_MAX)?;
    let max = input.max_seconds.ok_or_else(|| required(MAX))?;
    let max = in_range(
        MAX,
        max,
        i64::from(initial),
        limits::BACKOFF_MAX_SECONDS_MAX,
    )?;
    let multiplier = input.multiplier.ok_or_else(|| required(MULTIPLIER))?;
    // A NaN lies in no range.
    if !(limits::BACKOFF_MULTIPLIER_MIN..=limits::BACKOFF_MULTIPLIER_MAX).contains(&multiplier) {
        return Err(EngineError::invalid(
            MULTIPLIER,
            format!(
                "must be between {:.1} and {:.1}",
                limits::BACKOFF_MULTIPLIER_MIN,
                limits::BACKOFF_MULTIPLIER_MAX
            ),
        ));
    }
    Ok(RetryBackoff {
        initial_seconds: initial,
        max_seconds: max,
        multiplier_thousandths: (multiplier * 1000.0).round() as u32,
    })
}

/// The delay of a lease change: allowed only when it releases the message (`lease_seconds` 0),
/// 0-900 seconds; none is 0.
pub fn release_delay(lease_seconds: u32, delay_seconds: Option<i64>) -> Result<u32> {
    match delay_seconds {
        None => Ok(0),
        Some(_) if lease_seconds != 0 => Err(EngineError::invalid(
            "delay_seconds",
            "applies only when the lease is released (lease_seconds 0)",
        )),
        Some(v) => in_range("delay_seconds", v, 0, limits::DELAY_SECONDS_MAX),
    }
}

/// Message group and deduplication IDs: 1-128 bytes of printable ASCII.
pub fn message_tag(field: &str, value: &str) -> Result<()> {
    printable_ascii(field, value, limits::GROUP_ID_MAX)
}

/// 1-`max` bytes of printable ASCII.
fn printable_ascii(field: &str, value: &str, max: usize) -> Result<()> {
    if value.is_empty() || value.len() > max {
        return Err(EngineError::invalid(
            field,
            format!("must be 1-{max} bytes"),
        ));
    }
    if !value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(EngineError::invalid(field, "must be printable ASCII"));
    }
    Ok(())
}

/// A checked message: its size in bytes, its delay and its deduplication ID (derived from the
/// body for content-based deduplication).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedMessage {
    pub size: u32,
    pub delay_seconds: u32,
    pub dedup_id: Option<String>,
    /// 0 on a FIFO queue.
    pub priority: u8,
    /// A `deliver_at` still ahead of the send: the message is scheduled until then.
    pub deliver_at: Option<Millis>,
}

/// Checks a message against the rules of its queue, sent at `now`.
pub fn message(
    msg: &NewMessage,
    queue_type: QueueType,
    config: &QueueConfig,
    now: Millis,
) -> Result<CheckedMessage> {
    let form = message_form(msg, config.max_message_bytes)?;
    let deliver_at = match msg.deliver_at {
        Some(at) => scheduled_time(at, config, now)?,
        None => None,
    };
    // A message with a deliver_at takes no default delay: it is due at its time, or at once.
    let delay_seconds = match msg.deliver_at {
        Some(_) => 0,
        None => form.delay_seconds.unwrap_or(config.delay_seconds),
    };
    let priority = match (queue_type, form.priority) {
        (QueueType::Fifo, Some(_)) => return Err(EngineError::invalid("priority", STANDARD_ONLY)),
        (QueueType::Fifo, None) => 0,
        (QueueType::Standard, p) => p.unwrap_or(config.default_priority),
    };
    let size = form.size;
    let dedup_id = match queue_type {
        QueueType::Standard => {
            if msg.message_deduplication_id.is_some() {
                return Err(EngineError::invalid(
                    "message_deduplication_id",
                    "standard queues take no deduplication ID",
                ));
            }
            None
        }
        QueueType::Fifo => {
            if msg.message_group_id.is_none() {
                return Err(EngineError::invalid(
                    "message_group_id",
                    "is required on a FIFO queue",
                ));
            }
            match &msg.message_deduplication_id {
                Some(id) => Some(id.clone()),
                None if config.content_based_deduplication => Some(content_hash(&msg.body)),
                None => {
                    return Err(EngineError::invalid(
                        "message_deduplication_id",
                        "is required unless the queue has content_based_deduplication",
                    ))
                }
            }
        }
    };
    Ok(CheckedMessage {
        size: u32::try_from(size).unwrap_or(u32::MAX),
        delay_seconds,
        dedup_id,
        priority,
        deliver_at,
    })
}

/// A `deliver_at` of a message sent at `now`: before the message's retention ends (a message
/// due at or after its expiry would never be delivered). A time not after `now` is due at once
/// (`None`).
fn scheduled_time(at: i64, config: &QueueConfig, now: Millis) -> Result<Option<Millis>> {
    let expiry = now.saturating_add(u64::from(config.retention_seconds) * 1000);
    match u64::try_from(at) {
        Ok(at) if at >= expiry => Err(EngineError::invalid(
            "deliver_at",
            format!(
                "must be less than the queue's retention_seconds ({}) ahead of the send",
                config.retention_seconds
            ),
        )),
        Ok(at) if at > now => Ok(Some(at)),
        _ => Ok(None),
    }
}

/// What [`message_form`] found: the message's size, and the delay and priority it asks for.
pub struct MessageForm {
    /// The body's bytes and its attributes'.
    pub size: u64,
    pub delay_seconds: Option<u32>,
    pub priority: Option<u8>,
}

/// The rules of a message that hold on any queue whose largest message is `max_bytes`: a body,
/// well-formed attributes, a size within `max_bytes`, a delay in range, group and deduplication
/// IDs of the allowed form (whether the queue takes them is [`message`]'s to say).
pub fn message_form(msg: &NewMessage, max_bytes: u32) -> Result<MessageForm> {
    if msg.body.is_empty() {
        return Err(EngineError::invalid("body", "must be at least 1 byte"));
    }
    let size = msg.body.len() as u64 + attributes::check(&msg.attributes)?;
    if size > u64::from(max_bytes) {
        return Err(EngineError::MessageTooLarge {
            field: "body".into(),
            size,
            max: max_bytes.into(),
        });
    }
    let delay_seconds = msg
        .delay_seconds
        .map(|v| in_range("delay_seconds", v, 0, limits::DELAY_SECONDS_MAX))
        .transpose()?;
    if msg.deliver_at.is_some() && delay_seconds.is_some() {
        return Err(EngineError::invalid(
            "deliver_at",
            "cannot be combined with delay_seconds: give one or the other",
        ));
    }
    let priority = msg.priority.map(|v| priority("priority", v)).transpose()?;
    if let Some(group) = &msg.message_group_id {
        message_tag("message_group_id", group)?;
    }
    if let Some(dedup) = &msg.message_deduplication_id {
        message_tag("message_deduplication_id", dedup)?;
    }
    if let Some(header) = &msg.trace_header {
        trace_header(header)?;
    }
    Ok(MessageForm {
        size,
        delay_seconds,
        priority,
    })
}

/// A trace header: 1-1,024 bytes of printable ASCII. Its syntax (X-Ray's) is not checked.
pub fn trace_header(header: &str) -> Result<()> {
    printable_ascii("trace_header", header, limits::TRACE_HEADER_MAX)
}

/// The content-based deduplication ID: hex SHA-256 of the body, attributes excluded.
pub fn content_hash(body: &str) -> String {
    hex::encode(Sha256::digest(body.as_bytes()))
}

/// A batch entry ID: 1-80 characters of `A-Z a-z 0-9 _ -`.
pub fn batch_entry_id(field: &str, id: &str) -> Result<()> {
    if id.is_empty()
        || id.len() > limits::BATCH_ENTRY_ID_MAX
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(EngineError::invalid(
            field,
            format!(
                "must be 1-{} characters of A-Z a-z 0-9 _ -",
                limits::BATCH_ENTRY_ID_MAX
            ),
        ));
    }
    Ok(())
}

/// The entry IDs of a batch send: 1 to [`limits::BATCH_MAX`] entries, each ID of the form of
/// [`batch_entry_id`] and unique within the batch.
pub fn batch_entry_ids(ids: &[&str]) -> Result<()> {
    count("entries", ids.len(), limits::BATCH_MAX)?;
    for (i, id) in ids.iter().enumerate() {
        let field = format!("entries[{i}].id");
        batch_entry_id(&field, id)?;
        if ids[..i].contains(id) {
            return Err(EngineError::invalid(
                field,
                "must be unique within the batch",
            ));
        }
    }
    Ok(())
}

/// A receive's `max_messages` (1 when absent).
pub fn max_messages(value: Option<i64>) -> Result<u32> {
    in_range(
        "max_messages",
        value.unwrap_or(1),
        1,
        limits::RECEIVE_MAX_MESSAGES,
    )
}

/// A long poll's wait, or a queue's default one: 0-20 seconds.
pub fn receive_wait_seconds(field: &str, value: i64) -> Result<u32> {
    in_range(field, value, 0, limits::RECEIVE_WAIT_SECONDS_MAX)
}

/// How long a receive that parks may wait, in seconds (a receive that may not wait is a plain
/// receive, never parked).
pub fn wait_seconds(value: i64) -> Result<u32> {
    in_range("wait_seconds", value, 1, limits::RECEIVE_WAIT_SECONDS_MAX)
}

/// A lease length in seconds.
pub fn lease_seconds(value: i64) -> Result<u32> {
    in_range("lease_seconds", value, 0, limits::LEASE_SECONDS_MAX)
}

/// The fields every redrive policy needs: its dead-letter target (returned as given) and a
/// `max_receive_count` in range.
pub fn redrive_policy(input: &RedrivePolicyInput) -> Result<(&str, u32)> {
    const MAX: &str = "redrive_policy.max_receive_count";
    let target = input
        .dead_letter_target
        .as_deref()
        .ok_or_else(|| EngineError::invalid("redrive_policy.dead_letter_target", "is required"))?;
    let max = input
        .max_receive_count
        .ok_or_else(|| EngineError::invalid(MAX, "is required"))?;
    Ok((
        target,
        in_range(MAX, max, 1, limits::MAX_RECEIVE_COUNT_MAX)?,
    ))
}

/// The permission of a redrive allow policy: `allow_all`, `deny_all` or `by_queue`.
pub fn allow_permission(input: &AllowPolicyInput) -> Result<&str> {
    const PERMISSION: &str = "redrive_allow_policy.permission";
    let permission = input
        .permission
        .as_deref()
        .ok_or_else(|| EngineError::invalid(PERMISSION, "is required"))?;
    if !matches!(permission, "allow_all" | "deny_all" | "by_queue") {
        return Err(EngineError::invalid(
            PERMISSION,
            "must be allow_all, deny_all or by_queue",
        ));
    }
    Ok(permission)
}

/// The rules of a move task that need no state: the rate (returned, 500 when absent) and the
/// filter's size and time range.
pub fn move_task(input: &MoveTaskInput) -> Result<u32> {
    let rate = match input.max_messages_per_second {
        Some(v) => in_range("max_messages_per_second", v, 1, limits::MOVE_RATE_MAX)?,
        None => limits::MOVE_RATE_DEFAULT,
    };
    if let Some(f) = &input.filter {
        if f.message_ids.len() > limits::MOVE_FILTER_IDS_MAX {
            return Err(EngineError::invalid(
                "filter.message_ids",
                format!("must hold at most {} IDs", limits::MOVE_FILTER_IDS_MAX),
            ));
        }
        if let (Some(since), Some(before)) = (f.moved_since, f.moved_before) {
            if before <= since {
                return Err(EngineError::invalid(
                    "filter.moved_before",
                    "must be later than filter.moved_since",
                ));
            }
        }
    }
    Ok(rate)
}

/// A list of 1..=max items.
pub fn count(field: &str, len: usize, max: usize) -> Result<()> {
    if len == 0 || len > max {
        return Err(EngineError::invalid(
            field,
            format!("must hold 1-{max} items"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_follow_the_charset_and_length_rule() {
        assert_eq!(queue_name("orders").unwrap(), QueueType::Standard);
        assert_eq!(queue_name("orders.fifo").unwrap(), QueueType::Fifo);
        assert_eq!(queue_name(&"a".repeat(80)).unwrap(), QueueType::Standard);
        assert_eq!(
            queue_name(&format!("{}.fifo", "a".repeat(80))).unwrap(),
            QueueType::Fifo
        );
        for bad in ["", ".fifo", "a b", "a.b", "é", &"a".repeat(81)] {
            let err = queue_name(bad).unwrap_err();
            assert_eq!(err.field(), Some("name"), "{bad:?}");
        }
    }

    #[test]
    fn content_hash_is_hex_sha256_of_the_body() {
        assert_eq!(
            content_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn message_tags_are_printable_ascii_up_to_128_bytes() {
        assert!(message_tag("g", "order-1 ~!").is_ok());
        assert!(message_tag("g", &"x".repeat(128)).is_ok());
        assert!(message_tag("g", &"x".repeat(129)).is_err());
        assert!(message_tag("g", "").is_err());
        assert!(message_tag("g", "tab\there").is_err());
        assert!(message_tag("g", "ünï").is_err());
    }
}
