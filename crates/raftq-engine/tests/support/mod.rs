//! Test harness shared by the engine's integration tests: an engine, a clock the test moves, and
//! an in-memory row store that persists each apply's changes the way the real store does.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use raftq_engine::rows::{decode_payload, encode_payload, payload_key};
use raftq_engine::{
    Applied, Changes, Command, Delivery, Engine, EngineError, Entry, MessageMeta, MessageState,
    NewMessage, Outcome, Payload, PayloadOp, QueueAttributes, QueueView, SendResult, WaitAnswer,
};
use uuid::Uuid;

pub const ACCOUNT: &str = "dev";
pub const START: u64 = 1_700_000_000_000;

/// Rows as a store keeps them: engine rows and payload rows in one sorted map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemStore {
    pub rows: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl MemStore {
    pub fn persist(&mut self, engine: &Engine, changes: &Changes) {
        if !changes.ranges.is_empty() {
            self.rows
                .retain(|k, _| !changes.ranges.iter().any(|r| r.contains(k)));
        }
        for key in &changes.rows {
            match engine.row_value(key) {
                Some(value) => self.rows.insert(key.encode(), value),
                None => self.rows.remove(&key.encode()),
            };
        }
        for op in &changes.payloads {
            match op {
                PayloadOp::Put(k, p) => {
                    self.rows
                        .insert(payload_key(*k).to_vec(), encode_payload(p));
                }
                PayloadOp::Delete(k) => {
                    self.rows.remove(payload_key(*k).as_slice());
                }
            }
        }
    }

    pub fn payload(&self, storage_key: u64) -> Option<Payload> {
        let bytes = self.rows.get(payload_key(storage_key).as_slice())?;
        decode_payload(bytes).ok()
    }

    /// The rows the engine owns (everything but payloads).
    pub fn engine_rows(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.rows
            .iter()
            .filter(|(k, _)| k.first() != Some(&4))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Storage keys of the payloads held.
    pub fn payload_keys(&self) -> BTreeSet<u64> {
        self.rows
            .keys()
            .filter(|k| k.first() == Some(&4) && k.len() == 9)
            .filter_map(|k| k[1..].try_into().ok().map(u64::from_be_bytes))
            .collect()
    }
}

pub struct Harness {
    pub engine: Engine,
    pub now: u64,
    pub store: MemStore,
    next_id: u128,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    pub fn new() -> Self {
        Harness {
            engine: Engine::new("local"),
            now: START,
            store: MemStore::default(),
            next_id: 1,
        }
    }

    /// A harness holding the queue `name`, with the default settings.
    pub fn with_queue(name: &str) -> Self {
        let mut h = Harness::new();
        h.create(name);
        h
    }

    /// A harness of Raft group `group`'s state, empty, whose IDs differ from every other
    /// group's harness.
    pub fn in_group(group: u32) -> Self {
        Harness {
            engine: Engine::new("local").in_group(group),
            next_id: u128::from(group) << 64,
            ..Harness::new()
        }
    }

    /// A harness over `engine` (a restored one, say), its clock at `now`, its store empty.
    pub fn over(engine: Engine, now: u64) -> Self {
        Harness {
            engine,
            now,
            ..Harness::new()
        }
    }

    pub fn fresh_id(&mut self) -> Uuid {
        self.next_id += 1;
        Uuid::from_u128(self.next_id)
    }

    /// Applies a command at the harness clock and persists its changes.
    pub fn apply(&mut self, command: Command) -> Result<Outcome, EngineError> {
        self.apply_changes(command).result
    }

    /// Like [`Harness::apply`], also returning what the store was told to write.
    pub fn apply_changes(&mut self, command: Command) -> Applied {
        let applied = self.engine.apply(Entry {
            now: self.now,
            command,
        });
        self.store.persist(&self.engine, &applied.changes);
        applied
    }

    pub fn advance_ms(&mut self, ms: u64) {
        self.now += ms;
    }

    pub fn advance(&mut self, secs: u64) {
        self.now += secs * 1000;
    }

    pub fn tick(&mut self) {
        self.apply(Command::Tick).expect("tick never fails");
    }

    pub fn try_create(
        &mut self,
        name: &str,
        attributes: QueueAttributes,
    ) -> Result<QueueView, EngineError> {
        self.try_create_in(ACCOUNT, name, attributes)
    }

    pub fn try_create_in(
        &mut self,
        account: &str,
        name: &str,
        attributes: QueueAttributes,
    ) -> Result<QueueView, EngineError> {
        let queue_id = self.fresh_id();
        self.apply_to_queue(Command::CreateQueue {
            account: account.into(),
            queue_id,
            name: name.into(),
            attributes,
        })
    }

    pub fn create(&mut self, name: &str) -> QueueView {
        self.try_create(name, QueueAttributes::default())
            .expect("create queue")
    }

    pub fn create_with(&mut self, name: &str, attributes: QueueAttributes) -> QueueView {
        self.try_create(name, attributes).expect("create queue")
    }

    /// Creates the queue `name`, with the default settings, in `account`.
    pub fn create_in(&mut self, account: &str, name: &str) -> QueueView {
        self.try_create_in(account, name, QueueAttributes::default())
            .expect("create queue")
    }

    pub fn try_patch(
        &mut self,
        queue: &str,
        attributes: QueueAttributes,
    ) -> Result<QueueView, EngineError> {
        self.apply_to_queue(Command::PatchQueue {
            account: ACCOUNT.into(),
            queue: queue.into(),
            attributes,
        })
    }

    /// Applies a create or a patch: the queue's view it answers with.
    fn apply_to_queue(&mut self, command: Command) -> Result<QueueView, EngineError> {
        match self.apply(command)? {
            Outcome::Queue(view) => Ok(*view),
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    pub fn message(&mut self, body: &str) -> NewMessage {
        NewMessage::new(self.fresh_id(), body)
    }

    pub fn try_send_msg(
        &mut self,
        queue: &str,
        message: NewMessage,
    ) -> Result<SendResult, EngineError> {
        match self.apply(Command::Send {
            account: ACCOUNT.into(),
            queue: queue.into(),
            message,
        })? {
            Outcome::Sent(r) => Ok(r),
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    /// Sends to a standard queue.
    pub fn send(&mut self, queue: &str, body: &str) -> SendResult {
        let m = self.message(body);
        self.try_send_msg(queue, m).expect("send")
    }

    /// Sends to a standard queue as the tenant `group`.
    pub fn send_as(&mut self, queue: &str, group: &str, body: &str) -> SendResult {
        let m = self.message(body).in_group(group);
        self.try_send_msg(queue, m).expect("send as a tenant")
    }

    /// Sends to a standard queue at `priority`.
    pub fn send_at_priority(&mut self, queue: &str, priority: i64, body: &str) -> SendResult {
        let mut m = self.message(body);
        m.priority = Some(priority);
        self.try_send_msg(queue, m).expect("send with a priority")
    }

    /// Sends a message due at `deliver_at` (engine time, ms).
    pub fn send_scheduled(&mut self, queue: &str, deliver_at: u64, body: &str) -> SendResult {
        let mut m = self.message(body);
        m.deliver_at = Some(deliver_at as i64);
        self.try_send_msg(queue, m).expect("send scheduled")
    }

    /// Cancels the scheduled message `message_id`.
    pub fn cancel_scheduled(&mut self, queue: &str, message_id: Uuid) -> Result<(), EngineError> {
        self.apply(Command::CancelScheduled {
            account: ACCOUNT.into(),
            queue: queue.into(),
            id: message_id,
        })
        .map(drop)
    }

    /// Sends to a FIFO queue with the body as deduplication ID.
    pub fn send_fifo(&mut self, queue: &str, group: &str, body: &str) -> SendResult {
        let mut m = self.message(body);
        m.message_group_id = Some(group.into());
        m.message_deduplication_id = Some(body.into());
        self.try_send_msg(queue, m).expect("send fifo")
    }

    pub fn try_receive(
        &mut self,
        queue: &str,
        max: i64,
        lease_seconds: Option<i64>,
    ) -> Result<Vec<Delivery>, EngineError> {
        match self.apply(Command::Receive {
            account: ACCOUNT.into(),
            queue: queue.into(),
            max_messages: Some(max),
            lease_seconds,
            attempt_id: None,
        })? {
            Outcome::Received(d) => Ok(d),
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    pub fn receive(&mut self, queue: &str, max: i64) -> Vec<Delivery> {
        self.try_receive(queue, max, None).expect("receive")
    }

    pub fn receive_leased(&mut self, queue: &str, max: i64, lease_seconds: i64) -> Vec<Delivery> {
        self.try_receive(queue, max, Some(lease_seconds))
            .expect("receive")
    }

    /// A receive that parks as `waiter` for `wait_seconds` when it finds nothing: its outcome,
    /// and the answers to parked receives its entry gave.
    pub fn receive_wait(
        &mut self,
        queue: &str,
        max: i64,
        wait_seconds: i64,
        waiter: Uuid,
    ) -> (Result<Outcome, EngineError>, Vec<WaitAnswer>) {
        let applied = self.apply_changes(Command::ReceiveWait {
            account: ACCOUNT.into(),
            queue: queue.into(),
            max_messages: Some(max),
            lease_seconds: None,
            wait_seconds,
            waiter,
        });
        (applied.result, applied.answers)
    }

    /// Bodies of deliveries, joined from the payload store.
    pub fn bodies(&self, deliveries: &[Delivery]) -> Vec<String> {
        deliveries
            .iter()
            .map(|d| {
                self.store
                    .payload(d.meta.storage_key)
                    .map(|p| p.body)
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The tenant (message group ID) of the message stored under `storage_key`; "" for none.
    pub fn tenant(&self, storage_key: u64) -> String {
        self.store
            .payload(storage_key)
            .and_then(|p| p.message_group_id)
            .unwrap_or_default()
    }

    pub fn ack(&mut self, queue: &str, receipt: &str) -> Result<(), EngineError> {
        match self.apply(Command::Ack {
            account: ACCOUNT.into(),
            queue: queue.into(),
            receipts: vec![receipt.into()],
        })? {
            Outcome::Acked(mut results) => results.remove(0).result,
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    pub fn change_lease(
        &mut self,
        queue: &str,
        receipt: &str,
        secs: i64,
    ) -> Result<u64, EngineError> {
        self.change_lease_with(queue, receipt, secs, None)
    }

    /// Changes a lease to `secs`, with the delay of a release (`secs` 0).
    pub fn change_lease_with(
        &mut self,
        queue: &str,
        receipt: &str,
        secs: i64,
        delay_seconds: Option<i64>,
    ) -> Result<u64, EngineError> {
        match self.apply(Command::ChangeLease {
            account: ACCOUNT.into(),
            queue: queue.into(),
            receipt: receipt.into(),
            lease_seconds: secs,
            delay_seconds,
        })? {
            Outcome::LeaseChanged {
                lease_expires_at, ..
            } => Ok(lease_expires_at),
            other => panic!("unexpected outcome {other:?}"),
        }
    }

    /// The full persisted state, for "changes nothing" and determinism checks.
    pub fn snapshot(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        self.store.rows.clone()
    }
}

/// The error of a refused result, checked against `code` and `field`.
#[track_caller]
pub fn refused<T: Debug>(
    result: Result<T, EngineError>,
    code: &str,
    field: Option<&str>,
) -> EngineError {
    let err = result.expect_err("expected a refusal");
    assert_eq!(err.code(), code, "{err}");
    assert_eq!(err.field(), field, "{err}");
    err
}

/// The engine restored from rows as an earlier build wrote them, keys and values in hex.
pub fn restore_hex(rows: &[(&str, &str)]) -> Engine {
    let rows = rows
        .iter()
        .map(|(k, v)| (hex::decode(k).expect("hex"), hex::decode(v).expect("hex")));
    Engine::restore("local", rows).expect("the rows restore")
}

/// Queue attributes with the named scalar fields set (`content_based_deduplication`: 1 is true).
pub fn attrs(fields: &[(&str, i64)]) -> QueueAttributes {
    let mut a = QueueAttributes::default();
    for &(field, value) in fields {
        match field {
            "lease_seconds" => a.lease_seconds = Some(value),
            "delay_seconds" => a.delay_seconds = Some(value),
            "retention_seconds" => a.retention_seconds = Some(value),
            "max_message_bytes" => a.max_message_bytes = Some(value),
            "content_based_deduplication" => a.content_based_deduplication = Some(value == 1),
            other => panic!("no scalar attribute {other}"),
        }
    }
    a
}

/// Attributes that set a redrive policy.
pub fn redrive(target: &str, max_receive_count: i64) -> QueueAttributes {
    QueueAttributes {
        redrive_policy: Some(Some(raftq_engine::RedrivePolicyInput {
            dead_letter_target: Some(target.into()),
            max_receive_count: Some(max_receive_count),
        })),
        ..Default::default()
    }
}

/// Attributes that set a retry backoff.
pub fn backoff(initial_seconds: i64, max_seconds: i64, multiplier: f64) -> QueueAttributes {
    QueueAttributes {
        retry_backoff: Some(Some(raftq_engine::RetryBackoffInput {
            initial_seconds: Some(initial_seconds),
            max_seconds: Some(max_seconds),
            multiplier: Some(multiplier),
        })),
        ..Default::default()
    }
}

/// Replays a receive from a standard queue against the fair rule, starting from the messages
/// `before` it (a full peek): before each message taken, no tenant with a visible message has
/// fewer in flight than the chosen one, none with as few has an older visible message, and the
/// message is its tenant's oldest visible one.
pub fn check_fair_choices(h: &Harness, before: &[MessageMeta], got: &[Delivery]) {
    let now = h.engine.now();
    let mut in_flight: BTreeMap<String, u32> = BTreeMap::new();
    let mut visible: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for m in before {
        let t = h.tenant(m.storage_key);
        let lease_ended = m.until.is_some_and(|u| u <= now);
        match m.state {
            MessageState::Leased if !lease_ended => *in_flight.entry(t).or_default() += 1,
            MessageState::Visible => visible.entry(t).or_default().push(m.seq),
            MessageState::Delayed | MessageState::Leased if lease_ended => {
                // Due now: the receive's entry makes it visible first.
                visible.entry(t).or_default().push(m.seq);
            }
            _ => {}
        }
    }
    for list in visible.values_mut() {
        list.sort_unstable();
    }
    for d in got {
        let best = visible
            .iter()
            .filter(|(_, seqs)| !seqs.is_empty())
            .map(|(t, seqs)| (in_flight.get(t).copied().unwrap_or(0), seqs[0], t.clone()))
            .min()
            .expect("a delivery with nothing visible");
        assert_eq!(
            d.meta.seq, best.1,
            "chose {:?}, fairest was {best:?}",
            d.meta
        );
        visible.get_mut(&best.2).expect("tenant").remove(0);
        *in_flight.entry(best.2).or_default() += 1;
    }
}
