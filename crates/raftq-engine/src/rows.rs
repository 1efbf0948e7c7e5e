//! The engine's persistent form: the whole state as rows of a sorted key space, and the change
//! log each apply produces. A store writes the dirty rows (materialized by
//! [`Engine::row_value`](crate::Engine::row_value)) and the payload operations in one atomic batch
//! with its last-applied marker; a snapshot is every row in key order, so two engines that applied
//! the same entries produce byte-identical snapshots.
//!
//! Keys are a tag byte followed by big-endian numbers, so rows sort by queue and sequence number:
//! `0` meta, `1` queue(qid), `2` message(qid, seq), `3` dedup(qid, id), `4` payload(storage key),
//! `5` reclaim(qid): the messages of `qid` below a sequence number that a purge or the queue's
//! deletion took away and whose rows are still being deleted, `6` waiter(qid, order): a receive
//! parked on `qid`, in the order receives parked.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::command::Payload;
use crate::model::{AllowPolicy, Millis, QueueConfig, QueueName, RedrivePolicy};

/// Version of the row format, kept in the meta row.
pub const FORMAT_VERSION: u32 = 5;

/// The oldest row format this build reads: version 3 only added reclaim rows, version 4 the
/// retry backoff to queue rows (older queue rows read as [`QueueRowV3`]), version 5 waiter rows.
pub const OLDEST_READABLE_VERSION: u32 = 2;

const TAG_META: u8 = 0;
const TAG_QUEUE: u8 = 1;
const TAG_MESSAGE: u8 = 2;
const TAG_DEDUP: u8 = 3;
const TAG_PAYLOAD: u8 = 4;
const TAG_RECLAIM: u8 = 5;
const TAG_WAITER: u8 = 6;

/// The key of an engine-owned row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RowKey {
    Meta,
    Queue(u32),
    Message(u32, u64),
    Dedup(u32, String),
    Reclaim(u32),
    Waiter(u32, u64),
}

impl RowKey {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        match self {
            RowKey::Meta => out.push(TAG_META),
            RowKey::Queue(qid) => {
                out.push(TAG_QUEUE);
                out.extend_from_slice(&qid.to_be_bytes());
            }
            RowKey::Message(qid, seq) => {
                out.push(TAG_MESSAGE);
                out.extend_from_slice(&qid.to_be_bytes());
                out.extend_from_slice(&seq.to_be_bytes());
            }
            RowKey::Dedup(qid, id) => {
                out.push(TAG_DEDUP);
                out.extend_from_slice(&qid.to_be_bytes());
                out.extend_from_slice(id.as_bytes());
            }
            RowKey::Reclaim(qid) => {
                out.push(TAG_RECLAIM);
                out.extend_from_slice(&qid.to_be_bytes());
            }
            RowKey::Waiter(qid, order) => {
                out.push(TAG_WAITER);
                out.extend_from_slice(&qid.to_be_bytes());
                out.extend_from_slice(&order.to_be_bytes());
            }
        }
        out
    }
}

/// The keys of every deduplication row of queue `qid`: from `start` (inclusive) to `end`
/// (exclusive). No ID contains the byte 0xFF (IDs are UTF-8), so `end` follows all of them.
pub fn dedup_range(qid: u32) -> KeyRange {
    let mut start = vec![TAG_DEDUP];
    start.extend_from_slice(&qid.to_be_bytes());
    let mut end = start.clone();
    end.push(0xFF);
    KeyRange { start, end }
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
        TAG_WAITER if rest.len() == 12 => {
            KeyKind::Engine(RowKey::Waiter(u32_at(rest)?, u64_of(&rest[4..])?))
        }
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
}

impl QueueRow {
    /// Reads a queue row written in row format `version`.
    pub(crate) fn decode(version: u32, bytes: &[u8]) -> Result<QueueRow, RowError> {
        if version >= 4 {
            return Ok(postcard::from_bytes(bytes)?);
        }
        let old: QueueRowV3 = postcard::from_bytes(bytes)?;
        let c = old.config;
        Ok(QueueRow {
            id: old.id,
            account: old.account,
            name: old.name,
            created_at: old.created_at,
            config: QueueConfig {
                content_based_deduplication: c.content_based_deduplication,
                lease_seconds: c.lease_seconds,
                delay_seconds: c.delay_seconds,
                retention_seconds: c.retention_seconds,
                max_message_bytes: c.max_message_bytes,
                redrive_policy: c.redrive_policy,
                redrive_allow_policy: c.redrive_allow_policy,
                retry_backoff: None,
            },
            dead_lettered: old.dead_lettered,
        })
    }
}

/// A queue row of row formats 2 and 3, whose settings had no retry backoff.
#[derive(Debug, Deserialize)]
struct QueueRowV3 {
    id: Uuid,
    account: String,
    name: String,
    created_at: Millis,
    config: QueueConfigV3,
    dead_lettered: u64,
}

#[derive(Debug, Deserialize)]
struct QueueConfigV3 {
    content_based_deduplication: bool,
    lease_seconds: u32,
    delay_seconds: u32,
    retention_seconds: u32,
    max_message_bytes: u32,
    redrive_policy: Option<RedrivePolicy>,
    redrive_allow_policy: AllowPolicy,
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
}

/// Messages of a queue whose rows and payloads are still being deleted: those below sequence
/// number `below` (every one, when the queue itself was deleted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReclaimRow {
    pub below: u64,
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

/// Encodes a payload row's value.
pub fn encode_payload(payload: &Payload) -> Vec<u8> {
    encode(payload)
}

/// Decodes a payload row's value.
pub fn decode_payload(bytes: &[u8]) -> Result<Payload, RowError> {
    Ok(postcard::from_bytes(bytes)?)
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
            RowKey::Waiter(1, 7),
            RowKey::Waiter(1, 300),
            RowKey::Waiter(2, 1),
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
    }
}
