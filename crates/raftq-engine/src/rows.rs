//! The engine's persistent form: the whole state as rows of a sorted key space, and the change
//! log each apply produces. A store writes the dirty rows (materialized by
//! [`Engine::row_value`](crate::Engine::row_value)) and the payload operations in one atomic batch
//! with its last-applied marker; a snapshot is every row in key order, so two engines that applied
//! the same entries produce byte-identical snapshots.
//!
//! Keys are a tag byte followed by big-endian numbers, so rows sort by queue and sequence number:
//! `0` meta, `1` queue(qid), `2` message(qid, seq), `3` dedup(qid, id), `4` payload(storage key),
//! `5` reclaim(qid): the messages of `qid` below a sequence number that a purge or the queue's
//! deletion took away and whose rows are still being deleted, `6` move tasks(qid): the queue's
//! last message move tasks, `7` attempt(qid, id): a FIFO receive's answer under its attempt ID,
//! `8` waiter(qid, order): a receive parked on `qid`, in the order receives parked, `9`
//! outbox(number): a message on its way to a queue of another group, `10` inbound(group): what
//! this group took from that group's outbox (see [`crate::outbox`]).
//!
//! Payload rows carry their own format (a leading [`PAYLOAD_FORMAT`] byte), since a payload
//! outlives the build that wrote it: those of row formats up to 4, with plain string attributes,
//! start with the length of their message UUID (16) instead and are read as such; those of
//! payload format 1 have no trace header.
//!
//! Deduplication rows are keyed by the deduplication ID, or, on a queue that deduplicates per
//! message group, by the group and the ID (see `Queue::dedup_key`): rows of row format 5 and
//! earlier are all of the first kind.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use std::collections::BTreeMap;

use crate::attributes::{self, Attribute};
use crate::command::Payload;
use crate::model::{
    limits, AllowPolicy, DeadLetterTarget, DeduplicationScope, FifoThroughputLimit, Millis,
    PriorityWeights, QueueConfig, QueueName, RedrivePolicy, RetryBackoff,
};
use crate::move_task::MoveTask;
use crate::placement::PlacementKey;

/// Version of the row format, kept in the meta row.
pub const FORMAT_VERSION: u32 = 11;

/// The oldest row format this build reads: version 3 only added reclaim rows, version 4 the
/// retry backoff to queue rows, version 5 a queue's default wait, tags and `modified_at`,
/// receive attempt rows, move task rows, waiter rows, and typed attributes in payloads, version 6
/// a queue's deduplication scope, throughput limit and policy, version 7 a queue's default
/// priority, priority weights and round robin credits, and a message's priority and the ID it
/// is scheduled under, version 8 the placement's rows, version 9 the state of a queue's
/// directory entry whose deletion began, version 10 the groups' target members, version 11
/// dead-letter targets in other groups and the outbox and inbound lane rows (older rows read as
/// [`QueueRowV3`], [`QueueRowV4`], [`QueueRowV5`], [`QueueRowV6`], [`QueueRowV10`],
/// [`MessageRowV6`] and [`PayloadV4`]).
pub const OLDEST_READABLE_VERSION: u32 = 2;
const _: () = assert!(OLDEST_READABLE_VERSION <= FORMAT_VERSION);

/// The first byte of a payload row of today's format.
pub const PAYLOAD_FORMAT: u8 = 2;

/// The first byte of a payload row without a trace header.
const PAYLOAD_FORMAT_1: u8 = 1;

/// The first byte of a payload row of row formats 2 to 4: the length of its message UUID.
const PAYLOAD_V4_FIRST_BYTE: u8 = 16;

const TAG_META: u8 = 0;
const TAG_QUEUE: u8 = 1;
const TAG_MESSAGE: u8 = 2;
const TAG_DEDUP: u8 = 3;
const TAG_PAYLOAD: u8 = 4;
const TAG_RECLAIM: u8 = 5;
const TAG_MOVE_TASKS: u8 = 6;
const TAG_ATTEMPT: u8 = 7;
const TAG_WAITER: u8 = 8;
const TAG_OUTBOX: u8 = 9;
const TAG_INBOUND: u8 = 10;

/// The key of an engine-owned row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RowKey {
    Meta,
    Queue(u32),
    Message(u32, u64),
    Dedup(u32, String),
    Reclaim(u32),
    MoveTasks(u32),
    Attempt(u32, String),
    Waiter(u32, u64),
    /// A message on its way to a queue of another group, by its number in the outbox.
    Outbox(u64),
    /// What this group took from another group's outbox, by that group.
    Inbound(u32),
    /// A row of the cluster's placement (metadata group).
    Placement(PlacementKey),
}

impl RowKey {
    pub fn encode(&self) -> Vec<u8> {
        // The number after a queue's ID, big-endian so that its rows sort by it.
        let order;
        let (tag, qid, rest): (u8, u32, &[u8]) = match self {
            RowKey::Meta => return vec![TAG_META],
            RowKey::Placement(key) => return key.encode(),
            RowKey::Outbox(number) => return [&[TAG_OUTBOX][..], &number.to_be_bytes()].concat(),
            RowKey::Inbound(group) => return [&[TAG_INBOUND][..], &group.to_be_bytes()].concat(),
            RowKey::Queue(qid) => (TAG_QUEUE, *qid, &[]),
            RowKey::Message(qid, seq) => {
                order = seq.to_be_bytes();
                (TAG_MESSAGE, *qid, &order)
            }
            RowKey::Dedup(qid, id) => (TAG_DEDUP, *qid, id.as_bytes()),
            RowKey::Reclaim(qid) => (TAG_RECLAIM, *qid, &[]),
            RowKey::MoveTasks(qid) => (TAG_MOVE_TASKS, *qid, &[]),
            RowKey::Attempt(qid, id) => (TAG_ATTEMPT, *qid, id.as_bytes()),
            RowKey::Waiter(qid, waiter) => {
                order = waiter.to_be_bytes();
                (TAG_WAITER, *qid, &order)
            }
        };
        let mut out = Vec::with_capacity(5 + rest.len());
        out.push(tag);
        out.extend_from_slice(&qid.to_be_bytes());
        out.extend_from_slice(rest);
        out
    }
}

/// The keys of every row of kind `tag` of queue `qid` keyed by an ID after it: from `start`
/// (inclusive) to `end` (exclusive). No ID contains the byte 0xFF (IDs are UTF-8), so `end`
/// follows all of them.
fn id_range(tag: u8, qid: u32) -> KeyRange {
    let mut start = vec![tag];
    start.extend_from_slice(&qid.to_be_bytes());
    let mut end = start.clone();
    end.push(0xFF);
    KeyRange { start, end }
}

/// The keys of every deduplication row of queue `qid`.
pub fn dedup_range(qid: u32) -> KeyRange {
    id_range(TAG_DEDUP, qid)
}

/// The keys of every receive attempt row of queue `qid`.
pub fn attempt_range(qid: u32) -> KeyRange {
    id_range(TAG_ATTEMPT, qid)
}

/// Keys from `start` (inclusive) to `end` (exclusive), deleted together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
}

impl KeyRange {
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key < self.end.as_slice()
    }
}

/// The key of a message payload row.
pub fn payload_key(storage_key: u64) -> [u8; 9] {
    let mut out = [TAG_PAYLOAD; 9];
    out[1..].copy_from_slice(&storage_key.to_be_bytes());
    out
}

/// What a key holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    Engine(RowKey),
    Payload(u64),
}

/// Reads a key written by [`RowKey::encode`] or [`payload_key`].
pub fn decode_key(key: &[u8]) -> Result<KeyKind, RowError> {
    if let Some(placement) = PlacementKey::decode(key) {
        return Ok(KeyKind::Engine(RowKey::Placement(placement)));
    }
    let (&tag, rest) = key.split_first().ok_or(RowError::BadKey)?;
    let u32_at = |b: &[u8]| -> Result<u32, RowError> {
        Ok(u32::from_be_bytes(
            b.get(..4)
                .ok_or(RowError::BadKey)?
                .try_into()
                .map_err(|_| RowError::BadKey)?,
        ))
    };
    let u64_of = |b: &[u8]| -> Result<u64, RowError> {
        Ok(u64::from_be_bytes(
            b.try_into().map_err(|_| RowError::BadKey)?,
        ))
    };
    Ok(match tag {
        TAG_META if rest.is_empty() => KeyKind::Engine(RowKey::Meta),
        TAG_QUEUE if rest.len() == 4 => KeyKind::Engine(RowKey::Queue(u32_at(rest)?)),
        TAG_MESSAGE if rest.len() == 12 => {
            KeyKind::Engine(RowKey::Message(u32_at(rest)?, u64_of(&rest[4..])?))
        }
        TAG_DEDUP if rest.len() > 4 => {
            let id = String::from_utf8(rest[4..].to_vec()).map_err(|_| RowError::BadKey)?;
            KeyKind::Engine(RowKey::Dedup(u32_at(rest)?, id))
        }
        TAG_PAYLOAD if rest.len() == 8 => KeyKind::Payload(u64_of(rest)?),
        TAG_RECLAIM if rest.len() == 4 => KeyKind::Engine(RowKey::Reclaim(u32_at(rest)?)),
        TAG_MOVE_TASKS if rest.len() == 4 => KeyKind::Engine(RowKey::MoveTasks(u32_at(rest)?)),
        TAG_ATTEMPT if rest.len() > 4 => {
            let id = String::from_utf8(rest[4..].to_vec()).map_err(|_| RowError::BadKey)?;
            KeyKind::Engine(RowKey::Attempt(u32_at(rest)?, id))
        }
        TAG_WAITER if rest.len() == 12 => {
            KeyKind::Engine(RowKey::Waiter(u32_at(rest)?, u64_of(&rest[4..])?))
        }
        TAG_OUTBOX if rest.len() == 8 => KeyKind::Engine(RowKey::Outbox(u64_of(rest)?)),
        TAG_INBOUND if rest.len() == 4 => KeyKind::Engine(RowKey::Inbound(u32_at(rest)?)),
        _ => return Err(RowError::BadKey),
    })
}

/// A change to a payload row, in the order they must be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadOp {
    Put(u64, Payload),
    Delete(u64),
}

/// What one apply changed: key ranges to delete (first), rows to rewrite (or delete, where
/// [`Engine::row_value`] has none) and payload writes.
///
/// [`Engine::row_value`]: crate::Engine::row_value
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub ranges: Vec<KeyRange>,
    pub rows: Vec<RowKey>,
    pub payloads: Vec<PayloadOp>,
}

/// A row that cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    #[error("malformed row key")]
    BadKey,
    #[error("malformed row value: {0}")]
    BadValue(#[from] postcard::Error),
    #[error(
        "row format version {0} is not supported (this build reads {OLDEST_READABLE_VERSION} to {FORMAT_VERSION})"
    )]
    UnsupportedVersion(u32),
    #[error("row refers to queue {0}, which has no queue row")]
    MissingQueue(u32),
    #[error("payload row of an unknown format")]
    BadPayload,
    #[error(transparent)]
    Placement(#[from] crate::placement::PlacementRowError),
}

/// The row format of a state's engine rows (any order, payload rows among them), as its meta row
/// names it; `None` for a state without one (empty). One format holds for every engine row of a
/// state: a state of an earlier format must be written again whole in this build's
/// ([`crate::Engine::export_rows`]) before this build writes any row of it.
pub fn stored_format(rows: &[(Vec<u8>, Vec<u8>)]) -> Result<Option<u32>, RowError> {
    let meta = RowKey::Meta.encode();
    rows.iter()
        .find(|(key, _)| *key == meta)
        .map(|(_, value)| Ok(postcard::from_bytes::<MetaRow>(value)?.version))
        .transpose()
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MetaRow {
    pub version: u32,
    pub now: Millis,
    pub next_seq: u64,
    pub next_qid: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QueueRow {
    pub id: Uuid,
    pub account: String,
    pub name: String,
    pub created_at: Millis,
    pub config: QueueConfig,
    pub dead_lettered: u64,
    pub modified_at: Millis,
    pub tags: BTreeMap<String, String>,
    /// The credits of the round robin over priority levels (by priority).
    pub credits: [i64; limits::PRIORITY_LEVELS],
}

impl QueueRow {
    /// Reads a queue row written in row format `version`. Rows before format 11 named every
    /// dead-letter target by its number in the group.
    pub(crate) fn decode(version: u32, bytes: &[u8]) -> Result<QueueRow, RowError> {
        if version >= 11 {
            return Ok(postcard::from_bytes(bytes)?);
        }
        let old = QueueRowV10::decode(version, bytes)?;
        let c = old.config;
        let v5 = c.v6.v5;
        let v3 = v5.v4.v3;
        Ok(QueueRow {
            id: old.id,
            account: old.account,
            name: old.name,
            created_at: old.created_at,
            config: QueueConfig {
                content_based_deduplication: v3.content_based_deduplication,
                lease_seconds: v3.lease_seconds,
                delay_seconds: v3.delay_seconds,
                retention_seconds: v3.retention_seconds,
                max_message_bytes: v3.max_message_bytes,
                redrive_policy: v3.redrive_policy.map(|p| RedrivePolicy {
                    target: DeadLetterTarget::Local(p.target),
                    max_receive_count: p.max_receive_count,
                }),
                redrive_allow_policy: v3.redrive_allow_policy,
                retry_backoff: v5.v4.retry_backoff,
                receive_wait_seconds: v5.receive_wait_seconds,
                deduplication_scope: c.v6.deduplication_scope,
                fifo_throughput_limit: c.v6.fifo_throughput_limit,
                policy: c.v6.policy,
                default_priority: c.default_priority,
                priority_weights: c.priority_weights,
            },
            dead_lettered: old.dead_lettered,
            modified_at: old.modified_at,
            tags: old.tags,
            credits: old.credits,
        })
    }
}

/// A queue row of row formats 7 to 10: settings whose dead-letter target is a queue number.
#[derive(Debug, Serialize, Deserialize)]
struct QueueRowV10 {
    id: Uuid,
    account: String,
    name: String,
    created_at: Millis,
    config: QueueConfigV10,
    dead_lettered: u64,
    modified_at: Millis,
    tags: BTreeMap<String, String>,
    credits: [i64; limits::PRIORITY_LEVELS],
}

/// Queue settings of row formats 7 to 10: those of format 6, then the default priority and the
/// priority weights.
#[derive(Debug, Serialize, Deserialize)]
struct QueueConfigV10 {
    v6: QueueConfigV6,
    default_priority: u8,
    priority_weights: Option<PriorityWeights>,
}

impl QueueRowV10 {
    /// Reads a queue row of row formats 2 to 10. Rows before format 7 had no default priority,
    /// weights or credits: theirs are the defaults (strict order from priority 0).
    fn decode(version: u32, bytes: &[u8]) -> Result<QueueRowV10, RowError> {
        if version >= 7 {
            return Ok(postcard::from_bytes(bytes)?);
        }
        let old = QueueRowV6::decode(version, bytes)?;
        Ok(QueueRowV10 {
            id: old.id,
            account: old.account,
            name: old.name,
            created_at: old.created_at,
            config: QueueConfigV10 {
                v6: old.config,
                default_priority: 0,
                priority_weights: None,
            },
            dead_lettered: old.dead_lettered,
            modified_at: old.modified_at,
            tags: old.tags,
            credits: [0; limits::PRIORITY_LEVELS],
        })
    }
}

/// A queue row of row format 6: settings without a default priority or priority weights, no
/// round robin credits.
#[derive(Debug, Serialize, Deserialize)]
struct QueueRowV6 {
    id: Uuid,
    account: String,
    name: String,
    created_at: Millis,
    config: QueueConfigV6,
    dead_lettered: u64,
    modified_at: Millis,
    tags: BTreeMap<String, String>,
}

/// Queue settings of row format 6: those of format 5, then the deduplication scope, the
/// throughput limit and the policy.
#[derive(Debug, Serialize, Deserialize)]
struct QueueConfigV6 {
    v5: QueueConfigV5,
    deduplication_scope: DeduplicationScope,
    fifo_throughput_limit: FifoThroughputLimit,
    policy: Option<String>,
}

impl QueueRowV6 {
    /// Reads a queue row of row formats 2 to 6. Rows before format 6 had no deduplication
    /// scope, throughput limit or policy: theirs are the defaults.
    fn decode(version: u32, bytes: &[u8]) -> Result<QueueRowV6, RowError> {
        if version == 6 {
            return Ok(postcard::from_bytes(bytes)?);
        }
        let old = QueueRowV5::decode(version, bytes)?;
        Ok(QueueRowV6 {
            id: old.id,
            account: old.account,
            name: old.name,
            created_at: old.created_at,
            config: QueueConfigV6 {
                v5: old.config,
                deduplication_scope: DeduplicationScope::default(),
                fifo_throughput_limit: FifoThroughputLimit::default(),
                policy: None,
            },
            dead_lettered: old.dead_lettered,
            modified_at: old.modified_at,
            tags: old.tags,
        })
    }
}

/// A queue row of row format 5: settings without a deduplication scope, throughput limit or
/// policy.
#[derive(Debug, Serialize, Deserialize)]
struct QueueRowV5 {
    id: Uuid,
    account: String,
    name: String,
    created_at: Millis,
    config: QueueConfigV5,
    dead_lettered: u64,
    modified_at: Millis,
    tags: BTreeMap<String, String>,
}

/// Queue settings of row format 5: those of format 4, then the default wait (postcard writes a
/// struct as its fields in order, so a nested struct reads as its fields inline).
#[derive(Debug, Serialize, Deserialize)]
struct QueueConfigV5 {
    v4: QueueConfigV4,
    receive_wait_seconds: u32,
}

impl QueueRowV5 {
    /// Reads a queue row of row formats 2 to 5. Rows before format 5 had no tags and no default
    /// wait; their `modified_at` reads as their creation.
    fn decode(version: u32, bytes: &[u8]) -> Result<QueueRowV5, RowError> {
        if version == 5 {
            return Ok(postcard::from_bytes(bytes)?);
        }
        let old: QueueRowV4 = if version == 4 {
            postcard::from_bytes(bytes)?
        } else {
            let v3: QueueRowV3 = postcard::from_bytes(bytes)?;
            v3.map_config(|v3| QueueConfigV4 {
                v3,
                retry_backoff: None,
            })
        };
        Ok(QueueRowV5 {
            id: old.id,
            account: old.account,
            name: old.name,
            created_at: old.created_at,
            config: QueueConfigV5 {
                v4: old.config,
                receive_wait_seconds: 0,
            },
            dead_lettered: old.dead_lettered,
            modified_at: old.created_at,
            tags: BTreeMap::new(),
        })
    }
}

/// A queue row of row formats 2 to 4, over its settings `C`: no default wait, no tags, no
/// `modified_at`.
#[derive(Debug, Serialize, Deserialize)]
struct EarlyQueueRow<C> {
    id: Uuid,
    account: String,
    name: String,
    created_at: Millis,
    config: C,
    dead_lettered: u64,
}

impl<C> EarlyQueueRow<C> {
    /// The same row with its settings converted by `convert`.
    fn map_config<D>(self, convert: impl FnOnce(C) -> D) -> EarlyQueueRow<D> {
        EarlyQueueRow {
            id: self.id,
            account: self.account,
            name: self.name,
            created_at: self.created_at,
            config: convert(self.config),
            dead_lettered: self.dead_lettered,
        }
    }
}

/// A queue row of row format 4.
type QueueRowV4 = EarlyQueueRow<QueueConfigV4>;

/// Queue settings of row format 4: those of formats 2 and 3, then a retry backoff.
#[derive(Debug, Serialize, Deserialize)]
struct QueueConfigV4 {
    v3: QueueConfigV3,
    retry_backoff: Option<RetryBackoff>,
}

/// A queue row of row formats 2 and 3, whose settings had no retry backoff.
type QueueRowV3 = EarlyQueueRow<QueueConfigV3>;

#[derive(Debug, Serialize, Deserialize)]
struct QueueConfigV3 {
    content_based_deduplication: bool,
    lease_seconds: u32,
    delay_seconds: u32,
    retention_seconds: u32,
    max_message_bytes: u32,
    redrive_policy: Option<RedrivePolicyV10>,
    redrive_allow_policy: AllowPolicy,
}

/// A redrive policy of row formats 2 to 10: its target a queue number of the group.
#[derive(Debug, Serialize, Deserialize)]
struct RedrivePolicyV10 {
    target: u32,
    max_receive_count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MessageRow {
    pub storage_key: u64,
    pub enqueued_at: Millis,
    pub state: u8,
    pub until: Millis,
    pub first_received_at: Millis,
    pub receive_count: u32,
    pub size: u32,
    pub group: Option<String>,
    pub moved: Option<QueueName>,
    pub priority: u8,
    /// The message ID of a message scheduled by its `deliver_at`, until it is due.
    pub scheduled: Option<Uuid>,
}

impl MessageRow {
    /// Reads a message row written in row format `version`. Rows before format 7 had no
    /// priority (0) and no scheduled message (a delay then was a delay).
    pub(crate) fn decode(version: u32, bytes: &[u8]) -> Result<MessageRow, RowError> {
        if version >= 7 {
            return Ok(postcard::from_bytes(bytes)?);
        }
        let old: MessageRowV6 = postcard::from_bytes(bytes)?;
        Ok(MessageRow {
            storage_key: old.storage_key,
            enqueued_at: old.enqueued_at,
            state: old.state,
            until: old.until,
            first_received_at: old.first_received_at,
            receive_count: old.receive_count,
            size: old.size,
            group: old.group,
            moved: old.moved,
            priority: 0,
            scheduled: None,
        })
    }
}

/// A message row of row formats 2 to 6: without a priority or a scheduled message ID.
#[derive(Debug, Serialize, Deserialize)]
struct MessageRowV6 {
    storage_key: u64,
    enqueued_at: Millis,
    state: u8,
    until: Millis,
    first_received_at: Millis,
    receive_count: u32,
    size: u32,
    group: Option<String>,
    moved: Option<QueueName>,
}

/// Messages of a queue whose rows and payloads are still being deleted: those below sequence
/// number `below` (every one, when the queue itself was deleted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReclaimRow {
    pub below: u64,
}

/// The last move tasks of a queue, the newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MoveTasksRow {
    pub tasks: Vec<MoveTask>,
}

/// One message a recorded receive leased.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AttemptLease {
    pub seq: u64,
    /// The receive count the lease made: with `seq`, the receipt.
    pub receive_count: u32,
    /// When the lease ends, as the receive (or its last replay) set it.
    pub until: Millis,
}

/// A FIFO receive's answer under its attempt ID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AttemptRow {
    pub expires_at: Millis,
    pub leases: Vec<AttemptLease>,
}

/// A parked receive (see [`crate::Command::ReceiveWait`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WaiterRow {
    pub waiter: Uuid,
    pub max_messages: u32,
    pub lease_seconds: Option<u32>,
    pub deadline: Millis,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DedupRow {
    pub message_id: Uuid,
    pub seq: u64,
    pub expires_at: Millis,
}

/// Encodes a row value.
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structs into a Vec cannot fail.
    crate::codec::to_vec(value).unwrap_or_default()
}

/// Encodes a payload row's value: [`PAYLOAD_FORMAT`], then the payload.
pub fn encode_payload(payload: &Payload) -> Vec<u8> {
    encode(&(PAYLOAD_FORMAT, payload))
}

/// Decodes a payload row's value, of today's format, of payload format 1 or of row formats 2
/// to 4.
pub fn decode_payload(bytes: &[u8]) -> Result<Payload, RowError> {
    let old: PayloadV1 = match bytes.first() {
        Some(&PAYLOAD_FORMAT) => return Ok(postcard::from_bytes(&bytes[1..])?),
        Some(&PAYLOAD_FORMAT_1) => postcard::from_bytes(&bytes[1..])?,
        Some(&PAYLOAD_V4_FIRST_BYTE) => {
            let v4: PayloadV4 = postcard::from_bytes(bytes)?;
            PayloadV1 {
                message_id: v4.message_id,
                body: v4.body,
                attributes: attributes::plain(v4.attributes),
                message_group_id: v4.message_group_id,
                message_deduplication_id: v4.message_deduplication_id,
                sent_at: v4.sent_at,
            }
        }
        _ => return Err(RowError::BadPayload),
    };
    Ok(Payload {
        message_id: old.message_id,
        body: old.body,
        attributes: old.attributes,
        message_group_id: old.message_group_id,
        message_deduplication_id: old.message_deduplication_id,
        sent_at: old.sent_at,
        trace_header: None,
    })
}

/// A payload of payload format 1, without a trace header.
#[derive(Debug, Serialize, Deserialize)]
struct PayloadV1 {
    message_id: Uuid,
    body: String,
    attributes: BTreeMap<String, Attribute>,
    message_group_id: Option<String>,
    message_deduplication_id: Option<String>,
    sent_at: Millis,
}

/// A payload of row formats 2 to 4, whose attributes were plain strings.
#[derive(Debug, Serialize, Deserialize)]
struct PayloadV4 {
    message_id: Uuid,
    body: String,
    attributes: BTreeMap<String, String>,
    message_group_id: Option<String>,
    message_deduplication_id: Option<String>,
    sent_at: Millis,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_sort_by_queue_then_sequence() {
        let keys = [
            RowKey::Meta,
            RowKey::Queue(1),
            RowKey::Queue(2),
            RowKey::Message(1, 5),
            RowKey::Message(1, 300),
            RowKey::Message(2, 1),
            RowKey::Dedup(1, "a".into()),
            RowKey::Reclaim(1),
            RowKey::MoveTasks(1),
            RowKey::Attempt(1, "a".into()),
            RowKey::Waiter(1, 7),
            RowKey::Waiter(1, 300),
            RowKey::Waiter(2, 1),
            RowKey::Outbox(1),
            RowKey::Outbox(300),
            RowKey::Inbound(2),
            RowKey::Inbound(300),
        ];
        let encoded: Vec<Vec<u8>> = keys.iter().map(RowKey::encode).collect();
        let mut sorted = encoded.clone();
        sorted.sort();
        assert_eq!(sorted, encoded);
        for (key, bytes) in keys.iter().zip(&encoded) {
            assert_eq!(decode_key(bytes).unwrap(), KeyKind::Engine(key.clone()));
        }
        assert_eq!(decode_key(&payload_key(9)).unwrap(), KeyKind::Payload(9));
        assert!(decode_key(&[9, 1]).is_err());
        let range = dedup_range(1);
        assert!(range.contains(&RowKey::Dedup(1, "a".into()).encode()));
        assert!(range.contains(&RowKey::Dedup(1, "\u{10FFFF}".repeat(128)).encode()));
        assert!(!range.contains(&RowKey::Dedup(2, String::new()).encode()));
        assert!(!range.contains(&RowKey::Dedup(0, "z".into()).encode()));
        assert!(!range.contains(&RowKey::Message(1, 5).encode()));
        assert!(decode_key(&[]).is_err());
        let attempts = attempt_range(1);
        assert!(attempts.contains(&RowKey::Attempt(1, "x".into()).encode()));
        assert!(!attempts.contains(&RowKey::Dedup(1, "x".into()).encode()));
        assert!(!attempts.contains(&RowKey::Attempt(2, "x".into()).encode()));
    }

    fn payload(attributes: BTreeMap<String, Attribute>) -> Payload {
        Payload {
            message_id: Uuid::from_u128(9),
            body: "hello".into(),
            attributes,
            message_group_id: Some("g".into()),
            message_deduplication_id: None,
            sent_at: 1_700_000_000_000,
            trace_header: None,
        }
    }

    /// The payload a row an earlier format wrote, in hex, reads as.
    fn read_payload(row: &str) -> Payload {
        let bytes = hex::decode(row).expect("hex");
        decode_payload(&bytes).expect("an earlier format's payload")
    }

    /// A payload row as row format 4 wrote it: UUID 9, body `hello`, attribute `k` = `v`,
    /// group `g`, no deduplication ID, sent at 1,700,000,000,000 ms.
    const PAYLOAD_V4: &str = "10000000000000000000000000000000090568656c6c6f01016b017601016700\
        80d095ffbc31";

    #[test]
    fn payloads_of_row_format_4_read_with_plain_attributes() {
        let plain = BTreeMap::from([("k".to_string(), Attribute::string("v"))]);
        assert_eq!(read_payload(PAYLOAD_V4), payload(plain));
    }

    /// A payload row of payload format 1: UUID 9, body `hello`, the `Number` attribute `n` =
    /// `1.5`, group `g`, no deduplication ID, sent at 1,700,000,000,000 ms.
    const PAYLOAD_FORMAT_1_ROW: &str = "0110000000000000000000000000000000090568656c6c6f01016e\
        064e756d6265720003312e350101670080d095ffbc31";

    #[test]
    fn payloads_of_payload_format_1_read_without_a_trace_header() {
        let typed = BTreeMap::from([("n".to_string(), Attribute::text("Number", "1.5"))]);
        assert_eq!(read_payload(PAYLOAD_FORMAT_1_ROW), payload(typed));
    }

    /// The queue row of `work` as row format 6 wrote it: UUID 2 of account `dev`, created at
    /// 1,700,000,000,000 ms with a 45 s lease and the other settings at their defaults.
    const QUEUE_ROW_FORMAT_6: &str = "10000000000000000000000000000000020364657604776f726b80d095\
        ffbc31002d00808c15808010000000000000000080d095ffbc3100";

    /// The row of a message of `work` as row format 6 wrote it: storage key 1, sent at
    /// 1,700,000,000,000 ms with a 5 s delay, in group `g`.
    const MESSAGE_ROW_FORMAT_6: &str = "0180d095ffbc310188f795ffbc3100000501016700";

    #[test]
    fn queue_and_message_rows_of_row_format_6_read_without_priorities() {
        let bytes = hex::decode(QUEUE_ROW_FORMAT_6).expect("hex");
        let queue = QueueRow::decode(6, &bytes).expect("a format 6 queue row");
        assert_eq!(
            (queue.id, queue.name.as_str()),
            (Uuid::from_u128(2), "work")
        );
        assert_eq!(
            queue.config,
            QueueConfig {
                lease_seconds: 45,
                ..QueueConfig::default()
            }
        );
        assert_eq!(queue.credits, [0; limits::PRIORITY_LEVELS]);
        assert!(QueueRow::decode(7, &bytes).is_err(), "the formats differ");

        let bytes = hex::decode(MESSAGE_ROW_FORMAT_6).expect("hex");
        let message = MessageRow::decode(6, &bytes).expect("a format 6 message row");
        let sent_at = 1_700_000_000_000;
        assert_eq!(
            message,
            MessageRow {
                storage_key: 1,
                enqueued_at: sent_at,
                state: 1,
                until: sent_at + 5_000,
                first_received_at: 0,
                receive_count: 0,
                size: 5,
                group: Some("g".into()),
                moved: None,
                priority: 0,
                scheduled: None,
            }
        );
        let today = encode(&message);
        assert_eq!(MessageRow::decode(7, &today).expect("today's row"), message);
    }

    /// The queue row of `work` as row format 10 wrote it: UUID 2 of account `dev`, created at
    /// 1,700,000,000,000 ms, its dead-letter target queue number 3 after 5 receives, default
    /// priority 4, one message dead-lettered.
    const QUEUE_ROW_FORMAT_10: &str = "10000000000000000000000000000000020364657604776f726b80d0\
        95ffbc31001e00808c1580801001030500000000000004000180d095ffbc310000000000000000000000";

    #[test]
    fn queue_rows_of_row_format_10_read_their_dead_letter_target_as_one_of_the_group() {
        let bytes = hex::decode(QUEUE_ROW_FORMAT_10).expect("hex");
        let queue = QueueRow::decode(10, &bytes).expect("a format 10 queue row");
        let policy = RedrivePolicy {
            target: DeadLetterTarget::Local(3),
            max_receive_count: 5,
        };
        assert_eq!(queue.config.redrive_policy, Some(policy));
        assert_eq!((queue.config.default_priority, queue.dead_lettered), (4, 1));
        assert!(QueueRow::decode(11, &bytes).is_err(), "the formats differ");
        let today = encode(&queue);
        let read = QueueRow::decode(FORMAT_VERSION, &today).expect("today's row");
        assert_eq!(read, queue);
    }

    #[test]
    fn payloads_round_trip_with_typed_attributes() {
        let typed = BTreeMap::from([
            (
                "b".to_string(),
                Attribute::bytes("Binary.jpg", vec![0, 255, 16]),
            ),
            ("n".to_string(), Attribute::text("Number", "1.5")),
            ("s".to_string(), Attribute::string("")),
        ]);
        let mut p = payload(typed);
        p.trace_header = Some("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1".into());
        let bytes = encode_payload(&p);
        assert_eq!(bytes[0], PAYLOAD_FORMAT);
        assert_eq!(decode_payload(&bytes).expect("decodes"), p);
        assert!(matches!(decode_payload(&[7, 1]), Err(RowError::BadPayload)));
    }
}
