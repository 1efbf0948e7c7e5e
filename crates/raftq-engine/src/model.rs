//! The queue model: limits and defaults of SPEC.md, queue configuration, redrive policies,
//! resource references and CRNs, and the views the engine returns.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Milliseconds since the Unix epoch, as stamped into each entry by the leader.
pub type Millis = u64;

/// Limits and defaults of SPEC.md §1–§2.
pub mod limits {
    /// Longest queue name, without the `.fifo` suffix.
    pub const QUEUE_NAME_MAX: usize = 80;
    pub const FIFO_SUFFIX: &str = ".fifo";
    pub const LEASE_SECONDS_MAX: i64 = 43_200;
    pub const LEASE_SECONDS_DEFAULT: u32 = 30;
    pub const DELAY_SECONDS_MAX: i64 = 900;
    pub const RETENTION_SECONDS_MIN: i64 = 60;
    pub const RETENTION_SECONDS_MAX: i64 = 14 * 24 * 3600;
    pub const RETENTION_SECONDS_DEFAULT: u32 = 4 * 24 * 3600;
    pub const MAX_MESSAGE_BYTES_MAX: i64 = 1024 * 1024;
    pub const MAX_MESSAGE_BYTES_DEFAULT: u32 = 256 * 1024;
    pub const MAX_RECEIVE_COUNT_MAX: i64 = 1000;
    pub const ATTRIBUTES_MAX: usize = 10;
    pub const ATTRIBUTE_NAME_MAX: usize = 256;
    pub const ATTRIBUTE_TYPE_MAX: usize = 256;
    pub const GROUP_ID_MAX: usize = 128;
    pub const DEDUP_ID_MAX: usize = 128;
    /// How long an accepted deduplication ID suppresses resends.
    pub const DEDUP_WINDOW_MS: u64 = 5 * 60 * 1000;
    pub const BATCH_MAX: usize = 10;
    pub const BATCH_ENTRY_ID_MAX: usize = 80;
    pub const RECEIVE_MAX_MESSAGES: i64 = 10;
    pub const ALLOW_POLICY_SOURCES_MAX: usize = 10;
    pub const PEEK_LIMIT_MAX: usize = 100;
    pub const PEEK_LIMIT_DEFAULT: usize = 10;
    pub const BACKOFF_INITIAL_SECONDS_MAX: i64 = 900;
    pub const BACKOFF_MAX_SECONDS_MAX: i64 = 43_200;
    pub const BACKOFF_MULTIPLIER_MIN: f64 = 1.0;
    pub const BACKOFF_MULTIPLIER_MAX: f64 = 10.0;
    /// A move task's pace when it asks for none, and the fastest it may ask for.
    pub const MOVE_RATE_DEFAULT: u32 = 500;
    pub const MOVE_RATE_MAX: i64 = 500;
    /// The most message IDs a move task's filter names.
    pub const MOVE_FILTER_IDS_MAX: usize = 100;
    /// The move tasks of a queue that are kept (and listed), the newest first.
    pub const MOVE_TASKS_KEPT: usize = 10;
    /// Longest long poll, in seconds, and so the longest default wait of a queue.
    pub const RECEIVE_WAIT_SECONDS_MAX: i64 = 20;
    pub const TAGS_MAX: usize = 50;
    pub const TAG_KEY_MAX: usize = 128;
    pub const TAG_VALUE_MAX: usize = 256;
    pub const RECEIVE_ATTEMPT_ID_MAX: usize = 128;
    /// The largest access policy document a queue keeps (SQS's limit).
    pub const POLICY_BYTES_MAX: usize = 8192;
    /// The longest trace header a message carries.
    pub const TRACE_HEADER_MAX: usize = 1024;
    /// How long a FIFO receive's attempt ID replays its answer.
    pub const RECEIVE_ATTEMPT_WINDOW_MS: u64 = 5 * 60 * 1000;
    /// The highest message priority; priorities are 0 (the lowest, the default) to this.
    pub const PRIORITY_MAX: i64 = 9;
    /// How many priority levels a standard queue keeps apart.
    pub const PRIORITY_LEVELS: usize = PRIORITY_MAX as usize + 1;
    /// The largest weight of one level in a queue's `priority_weights`.
    pub const PRIORITY_WEIGHT_MAX: i64 = 1000;

    // How the limits relate: each default within its bounds, each lower bound under its upper one.
    const _: () = assert!(LEASE_SECONDS_DEFAULT as i64 <= LEASE_SECONDS_MAX);
    const _: () = assert!(RETENTION_SECONDS_MIN <= RETENTION_SECONDS_DEFAULT as i64);
    const _: () = assert!(RETENTION_SECONDS_DEFAULT as i64 <= RETENTION_SECONDS_MAX);
    const _: () = assert!(MAX_MESSAGE_BYTES_DEFAULT as i64 <= MAX_MESSAGE_BYTES_MAX);
    const _: () = assert!(BACKOFF_INITIAL_SECONDS_MAX <= BACKOFF_MAX_SECONDS_MAX);
    const _: () = assert!(BACKOFF_MULTIPLIER_MIN <= BACKOFF_MULTIPLIER_MAX);
    const _: () = assert!(MOVE_RATE_DEFAULT as i64 <= MOVE_RATE_MAX);
    const _: () = assert!(PEEK_LIMIT_DEFAULT <= PEEK_LIMIT_MAX);
    const _: () = assert!(PRIORITY_LEVELS <= u8::MAX as usize);
}

/// `standard` or `fifo`; a queue is FIFO exactly when its name ends in `.fifo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueType {
    Standard,
    Fifo,
}

impl QueueType {
    pub fn of_name(name: &str) -> Self {
        if name.ends_with(limits::FIFO_SUFFIX) {
            QueueType::Fifo
        } else {
            QueueType::Standard
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueType::Standard => "standard",
            QueueType::Fifo => "fifo",
        }
    }
}

/// A queue named by its UUID and the name it had when recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueName {
    pub id: Uuid,
    pub name: String,
}

/// Who may use a queue as its dead-letter target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum AllowPolicy {
    #[default]
    AllowAll,
    DenyAll,
    ByQueue(Vec<QueueName>),
}

impl AllowPolicy {
    /// The policy a queue's view shows (an unknown permission reads as `DenyAll`, as
    /// [`AllowPolicyView`] is only ever made from a policy).
    pub fn of_view(view: &AllowPolicyView) -> AllowPolicy {
        match view.permission.as_str() {
            "allow_all" => AllowPolicy::AllowAll,
            "by_queue" => AllowPolicy::ByQueue(
                (view.source_queues.iter().flatten())
                    .map(|q| QueueName {
                        id: q.id,
                        name: q.name.clone(),
                    })
                    .collect(),
            ),
            _ => AllowPolicy::DenyAll,
        }
    }

    pub fn allows(&self, source: Uuid) -> bool {
        match self {
            AllowPolicy::AllowAll => true,
            AllowPolicy::DenyAll => false,
            AllowPolicy::ByQueue(list) => list.iter().any(|q| q.id == source),
        }
    }
}

/// A source queue's binding to its dead-letter target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedrivePolicy {
    pub target: DeadLetterTarget,
    pub max_receive_count: u32,
}

/// Where a source queue's messages go when redriven: a queue of the same Raft group (its
/// internal number), or a queue of another group (its UUID and the name it had when the policy
/// was set), reached through the group's outbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeadLetterTarget {
    Local(u32),
    Remote(QueueName),
}

impl DeadLetterTarget {
    /// The internal number of a target in this group.
    pub fn local(&self) -> Option<u32> {
        match self {
            DeadLetterTarget::Local(qid) => Some(*qid),
            DeadLetterTarget::Remote(_) => None,
        }
    }
}

/// How long a message whose lease expired waits before it is visible again: `initial_seconds`
/// after its first receive, then `multiplier` times longer after each further receive, at most
/// `max_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryBackoff {
    pub initial_seconds: u32,
    pub max_seconds: u32,
    /// The factor between two waits in thousandths (1000 is 1.0), so that settings compare and
    /// store exactly.
    pub multiplier_thousandths: u32,
}

impl RetryBackoff {
    /// The factor between two waits.
    pub fn multiplier(&self) -> f64 {
        f64::from(self.multiplier_thousandths) / 1000.0
    }

    /// The wait after the lease of a message received `receive_count` times expired, in
    /// milliseconds: `min(max, initial × multiplier^(receive_count − 1))`, rounded down.
    /// Computed by squaring with IEEE multiplications only, which every platform rounds alike,
    /// so that every replica stamps the same time.
    pub fn wait_ms(&self, receive_count: u32) -> u64 {
        let max = f64::from(self.max_seconds) * 1000.0;
        let mut wait = f64::from(self.initial_seconds) * 1000.0;
        let mut factor = self.multiplier();
        let mut exponent = receive_count.saturating_sub(1);
        while exponent > 0 && wait > 0.0 && wait < max {
            if exponent & 1 == 1 {
                wait *= factor;
            }
            factor *= factor;
            exponent >>= 1;
        }
        wait.min(max) as u64
    }
}

/// A queue's settings, all validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueConfig {
    pub content_based_deduplication: bool,
    pub lease_seconds: u32,
    pub delay_seconds: u32,
    pub retention_seconds: u32,
    pub max_message_bytes: u32,
    pub redrive_policy: Option<RedrivePolicy>,
    pub redrive_allow_policy: AllowPolicy,
    pub retry_backoff: Option<RetryBackoff>,
    /// How long a receive that names no wait waits for a message, 0-20 seconds.
    pub receive_wait_seconds: u32,
    /// FIFO queues: where a deduplication ID is looked for.
    pub deduplication_scope: DeduplicationScope,
    /// FIFO queues: SQS's throughput quota setting, kept for SQS's clients.
    pub fifo_throughput_limit: FifoThroughputLimit,
    /// An access policy document, kept and returned as given; raftq authorizes by its keys.
    pub policy: Option<String>,
    /// Standard queues: the priority of a message sent without one, 0-9.
    pub default_priority: u8,
    /// Standard queues: how often each priority level is served when several hold visible
    /// messages (see [`PriorityWeights`]); `None`: strictly the highest level first.
    pub priority_weights: Option<PriorityWeights>,
}

/// The weights in which a standard queue serves its priority levels: element `i` is the
/// weight of priority `i`, and every priority past the list's end takes its last element (so
/// `[1, 2, 4]` weighs priority 0 at 1, priority 1 at 2 and priorities 2-9 at 4). Among the
/// levels that hold visible messages, a receive serves each level in proportion to its weight,
/// by a smooth weighted round robin whose credits live in the queue's replicated state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityWeights(pub Vec<u32>);

impl PriorityWeights {
    /// The weight of priority level `priority`.
    pub fn of(&self, priority: u8) -> u32 {
        let at = usize::from(priority).min(self.0.len().saturating_sub(1));
        self.0.get(at).copied().unwrap_or(1)
    }
}

/// Where a FIFO queue looks for a deduplication ID it accepted within the window: anywhere in
/// the queue, or in the sent message's group only (the same ID in two groups is two messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeduplicationScope {
    #[default]
    Queue,
    MessageGroup,
}

impl DeduplicationScope {
    /// Reads the API's spelling: `queue` or `message_group`.
    pub fn parse(text: &str) -> Option<DeduplicationScope> {
        match text {
            "queue" => Some(DeduplicationScope::Queue),
            "message_group" => Some(DeduplicationScope::MessageGroup),
            _ => None,
        }
    }

    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DeduplicationScope::Queue => "queue",
            DeduplicationScope::MessageGroup => "message_group",
        }
    }
}

/// SQS's `FifoThroughputLimit`: whether its throughput quota applies per queue or per message
/// group. raftq has no such quota; it keeps the setting, and its rule that the per-group limit
/// needs deduplication per message group, for SQS's clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FifoThroughputLimit {
    #[default]
    PerQueue,
    PerMessageGroupId,
}

impl FifoThroughputLimit {
    /// Reads the API's spelling: `per_queue` or `per_message_group_id`.
    pub fn parse(text: &str) -> Option<FifoThroughputLimit> {
        match text {
            "per_queue" => Some(FifoThroughputLimit::PerQueue),
            "per_message_group_id" => Some(FifoThroughputLimit::PerMessageGroupId),
            _ => None,
        }
    }

    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FifoThroughputLimit::PerQueue => "per_queue",
            FifoThroughputLimit::PerMessageGroupId => "per_message_group_id",
        }
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            content_based_deduplication: false,
            lease_seconds: limits::LEASE_SECONDS_DEFAULT,
            delay_seconds: 0,
            retention_seconds: limits::RETENTION_SECONDS_DEFAULT,
            max_message_bytes: limits::MAX_MESSAGE_BYTES_DEFAULT,
            redrive_policy: None,
            redrive_allow_policy: AllowPolicy::AllowAll,
            retry_backoff: None,
            receive_wait_seconds: 0,
            deduplication_scope: DeduplicationScope::Queue,
            fifo_throughput_limit: FifoThroughputLimit::PerQueue,
            policy: None,
            default_priority: 0,
            priority_weights: None,
        }
    }
}

/// A resource reference as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRef {
    pub id: Uuid,
    pub name: String,
    pub crn: String,
}

/// An account that holds queues, and how many.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountSummary {
    pub account: String,
    pub queues: usize,
}

/// `crn:v1:raftq:public:queues:<region>:a/<account>:<queue-uuid>::`
pub fn crn(region: &str, account: &str, id: Uuid) -> String {
    format!("crn:v1:raftq:public:queues:{region}:a/{account}:{id}::")
}

/// The parts of a well-formed queue CRN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedCrn<'a> {
    pub region: &'a str,
    pub account: &'a str,
    pub id: Uuid,
}

/// Parses a queue CRN; `None` when the text is not one.
pub fn parse_crn(text: &str) -> Option<ParsedCrn<'_>> {
    let rest = text.strip_prefix("crn:v1:raftq:public:queues:")?;
    let rest = rest.strip_suffix("::")?;
    let mut parts = rest.split(':');
    let region = parts.next()?;
    let account = parts.next()?.strip_prefix("a/")?;
    let id = Uuid::parse_str(parts.next()?).ok()?;
    if parts.next().is_some() || region.is_empty() || account.is_empty() {
        return None;
    }
    Some(ParsedCrn {
        region,
        account,
        id,
    })
}

/// A queue's redrive policy as returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedrivePolicyView {
    pub dead_letter_target: QueueRef,
    pub max_receive_count: u32,
}

/// A queue's redrive allow policy as returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowPolicyView {
    /// `allow_all`, `deny_all` or `by_queue`.
    pub permission: String,
    /// The allowed sources, for `by_queue`.
    pub source_queues: Option<Vec<QueueRef>>,
}

/// The full queue object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueView {
    pub id: Uuid,
    pub name: String,
    pub crn: String,
    /// `arn:aws:sqs:<region>:<account number>:<name>`.
    pub arn: String,
    /// The Raft group that holds it.
    pub group: u32,
    pub queue_type: QueueType,
    pub created_at: Millis,
    /// When its settings last changed (its creation until then).
    pub modified_at: Millis,
    pub content_based_deduplication: bool,
    pub lease_seconds: u32,
    pub delay_seconds: u32,
    pub retention_seconds: u32,
    pub max_message_bytes: u32,
    pub redrive_policy: Option<RedrivePolicyView>,
    pub redrive_allow_policy: AllowPolicyView,
    pub retry_backoff: Option<RetryBackoff>,
    pub receive_wait_seconds: u32,
    pub tags: BTreeMap<String, String>,
    pub deduplication_scope: DeduplicationScope,
    pub fifo_throughput_limit: FifoThroughputLimit,
    pub policy: Option<String>,
    pub default_priority: u8,
    pub priority_weights: Option<PriorityWeights>,
}

/// Where a message is in its life, as peek shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageState {
    Visible,
    Leased,
    Delayed,
    PendingRedrive,
}

/// Where a message move task is: it runs until it has gone through its messages (completed),
/// is cancelled, or fails (its destination, or a message's dead-letter source, was deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoveTaskStatus {
    Running,
    Completed,
    Cancelled,
    Failed,
}

impl MoveTaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MoveTaskStatus::Running => "running",
            MoveTaskStatus::Completed => "completed",
            MoveTaskStatus::Cancelled => "cancelled",
            MoveTaskStatus::Failed => "failed",
        }
    }
}

/// Which messages of its queue a move task takes: those with one of `message_ids` (when any
/// are named) and moved to the queue within `[moved_since, moved_before)` (when either bound
/// is given). `storage_keys` are the named messages' storage keys, which the proposer looked
/// up (the engine keeps no message IDs); an ID that named no message of the queue has none.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MoveFilter {
    pub message_ids: Vec<Uuid>,
    pub storage_keys: Vec<u64>,
    pub moved_since: Option<Millis>,
    pub moved_before: Option<Millis>,
}

/// A message move task as the API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveTaskView {
    pub task_handle: Uuid,
    pub status: MoveTaskStatus,
    /// The queue the messages leave.
    pub source: QueueRef,
    /// Where they go; `None`: each message back to its own dead-letter source.
    pub destination: Option<QueueRef>,
    pub max_messages_per_second: u32,
    pub filter: Option<MoveFilter>,
    pub dry_run: bool,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
    /// The messages that could move when the task started.
    pub to_move: u64,
    pub moved: u64,
    /// Messages the task reached but left in place: leased by a consumer, or without a
    /// dead-letter source to go back to.
    pub skipped: u64,
    pub failure_reason: Option<String>,
}

/// Queue counters as `GET .../stats` returns them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QueueStats {
    pub visible: u64,
    pub leased: u64,
    pub delayed: u64,
    pub pending_redrive: u64,
    pub oldest_message_age_seconds: u64,
    /// Message group IDs of a standard queue that hold messages (its tenants).
    pub active_tenants: u64,
    /// The most messages any one tenant has leased at once now.
    pub largest_tenant_in_flight: u64,
    /// Messages sent with a `deliver_at` that is still ahead (counted in `delayed` too).
    pub scheduled: u64,
    /// The messages of each priority level (standard queues; index = priority).
    pub by_priority: [LevelStats; limits::PRIORITY_LEVELS],
}

/// The messages of one priority level of a standard queue, by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LevelStats {
    pub visible: u64,
    pub leased: u64,
    pub delayed: u64,
    pub pending_redrive: u64,
}

impl LevelStats {
    /// Whether the level holds no message.
    pub fn is_empty(&self) -> bool {
        *self == LevelStats::default()
    }
}

/// One queue's monitoring figures: its counters, how many messages redrive has moved out of it
/// to its dead-letter queue since it was created, and how many were sent to it and acknowledged
/// on it since this node loaded it (not replicated state: a restart or a snapshot starts them
/// at zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueGauges {
    pub account: String,
    pub name: String,
    pub stats: QueueStats,
    pub dead_lettered: u64,
    pub sent: u64,
    pub acked: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crn_round_trips_and_rejects_malformed_text() {
        let id = Uuid::from_u128(7);
        let text = crn("local", "dev", id);
        assert_eq!(
            text,
            "crn:v1:raftq:public:queues:local:a/dev:00000000-0000-0000-0000-000000000007::"
        );
        assert_eq!(
            parse_crn(&text),
            Some(ParsedCrn {
                region: "local",
                account: "dev",
                id
            })
        );
        assert_eq!(parse_crn("crn:v1:raftq:public:queues:local:dev:x::"), None);
        assert_eq!(parse_crn(&text.replace("::", ":")), None);
    }
}
