//! The engine: applies entries to the state of every queue of every account, answers queries,
//! and materializes its rows for the store.

use std::collections::{BTreeMap, HashMap, VecDeque};

use uuid::Uuid;

use crate::command::{
    AckResult, AllowPolicyInput, BatchEntry, BatchResult, Command, Delivery, Entry, MessageMeta,
    NewMessage, Outcome, Payload, QueueAttributes, RedrivePolicyInput, SendResult,
};
use crate::error::{EngineError, Result};
use crate::model::{
    crn, limits, parse_crn, AllowPolicy, AllowPolicyView, MessageState, Millis, QueueConfig,
    QueueGauges, QueueName, QueueRef, QueueStats, QueueType, QueueView, RedrivePolicy,
    RedrivePolicyView,
};
use crate::queue::{Books, DedupRecord, Detached, Msg, Queue, State, Timer, NO_GROUP};
use crate::rows::{
    self, decode_key, Changes, DedupRow, KeyKind, MessageRow, MetaRow, PayloadOp, QueueRow,
    ReclaimRow, RowError, RowKey, FORMAT_VERSION, OLDEST_READABLE_VERSION,
};
use crate::{receipt, validate};

/// The result of applying one entry: the command's outcome (or why it was refused) and what
/// the store must persist with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub result: Result<Outcome>,
    pub changes: Changes,
}

/// How many purged or deleted messages one tick deletes for good. Purging or deleting a queue
/// is then constant work in its own entry however deep the queue, and no later entry carries
/// more than this much cleanup.
pub const RECLAIM_PER_TICK: usize = 1024;

/// The queue service's state machine. Deterministic: the same entries give the same state.
#[derive(Debug, Clone)]
pub struct Engine {
    region: String,
    next_seq: u64,
    next_qid: u32,
    queues: BTreeMap<u32, Queue>,
    by_name: BTreeMap<String, BTreeMap<String, u32>>,
    by_id: HashMap<Uuid, u32>,
    /// Purged or deleted messages still to delete, by queue; ticks delete them in key order.
    reclaim: BTreeMap<u32, Reclaim>,
    books: Books,
}

/// Messages of one queue that purges or the queue's deletion took away, oldest set first.
#[derive(Debug, Clone)]
struct Reclaim {
    /// Every message below this sequence number is being reclaimed (all of them once the queue
    /// is deleted: `u64::MAX`).
    below: u64,
    sets: VecDeque<Detached>,
}

/// The queue a redrive policy is being set on.
struct Source<'a> {
    id: Uuid,
    name: &'a str,
    queue_type: QueueType,
}

impl Engine {
    /// An empty state for a cluster serving `region`.
    pub fn new(region: impl Into<String>) -> Engine {
        Engine {
            region: region.into(),
            next_seq: 1,
            next_qid: 1,
            queues: BTreeMap::new(),
            by_name: BTreeMap::new(),
            by_id: HashMap::new(),
            reclaim: BTreeMap::new(),
            books: Books::default(),
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// The state machine's clock: the latest time of any applied entry.
    pub fn now(&self) -> Millis {
        self.books.now
    }

    /// When the next lease, delay, retention or deduplication timer falls due, or now while
    /// purged or deleted messages remain to be deleted; the leader proposes a
    /// [`Command::Tick`] then.
    pub fn next_due(&self) -> Option<Millis> {
        if !self.reclaim.is_empty() {
            return Some(self.books.now);
        }
        self.books.timers.first().map(|(due, _)| *due)
    }

    /// Purged or deleted messages whose rows and payloads are not deleted yet.
    pub fn reclaim_backlog(&self) -> u64 {
        self.reclaim
            .values()
            .flat_map(|r| &r.sets)
            .map(|set| set.len() as u64)
            .sum()
    }

    /// Applies one entry: first advances the clock (time never goes backwards) and fires what
    /// is due, then runs the command. A refused command changes nothing.
    pub fn apply(&mut self, entry: Entry) -> Applied {
        self.advance(entry.now);
        let result = self.execute(entry.command);
        self.books.changes.rows.push(RowKey::Meta);
        Applied {
            result,
            changes: std::mem::take(&mut self.books.changes),
        }
    }

    fn advance(&mut self, now: Millis) {
        self.books.now = self.books.now.max(now);
        while let Some(&(due, timer)) = self.books.timers.first() {
            if due > self.books.now {
                break;
            }
            self.books.timers.pop_first();
            self.fire(timer);
        }
    }

    fn fire(&mut self, timer: Timer) {
        match timer {
            Timer::Message { qid, seq } => {
                let Some(q) = self.queues.get_mut(&qid) else {
                    return;
                };
                match q.messages.get(&seq).map(|m| m.state) {
                    Some(State::Delayed) => q.set_state(&mut self.books, seq, State::Visible, 0),
                    Some(State::Leased) => self.settle(qid, seq),
                    _ => {}
                }
            }
            Timer::Retention(qid) => {
                let Some(q) = self.queues.get_mut(&qid) else {
                    return;
                };
                q.clear_retention_timer(&mut self.books);
                for seq in q.expired(self.books.now) {
                    discard(q, &mut self.books, seq);
                }
                q.schedule_retention(&mut self.books);
            }
            Timer::Dedup(qid) => {
                if let Some(q) = self.queues.get_mut(&qid) {
                    q.prune_dedup(&mut self.books);
                }
            }
        }
    }

    fn execute(&mut self, command: Command) -> Result<Outcome> {
        match command {
            Command::CreateQueue {
                account,
                queue_id,
                name,
                attributes,
            } => self.create_queue(account, queue_id, name, &attributes),
            Command::PatchQueue {
                account,
                queue,
                attributes,
            } => self.patch_queue(&account, &queue, &attributes),
            Command::DeleteQueue { account, queue } => self.delete_queue(&account, &queue),
            Command::Send {
                account,
                queue,
                message,
            } => {
                let qid = self.lookup(&account, &queue)?;
                self.send_one(qid, message).map(Outcome::Sent)
            }
            Command::SendBatch {
                account,
                queue,
                entries,
            } => self.send_batch(&account, &queue, entries),
            Command::Receive {
                account,
                queue,
                max_messages,
                lease_seconds,
            } => self.receive(&account, &queue, max_messages, lease_seconds),
            Command::Ack {
                account,
                queue,
                receipts,
            } => self.ack(&account, &queue, receipts),
            Command::ChangeLease {
                account,
                queue,
                receipt,
                lease_seconds,
            } => self.change_lease(&account, &queue, receipt, lease_seconds),
            Command::Purge { account, queue } => {
                let qid = self.lookup(&account, &queue)?;
                if let Some(q) = self.queues.get_mut(&qid) {
                    let detached = q.detach(&mut self.books);
                    let below = self.next_seq;
                    self.doom(qid, below, detached);
                }
                Ok(Outcome::Purged)
            }
            Command::Tick => {
                self.reclaim_some(RECLAIM_PER_TICK);
                Ok(Outcome::Ticked)
            }
        }
    }

    // ---- queue references ----------------------------------------------------------------

    /// Finds a queue of `account` by name, UUID or CRN.
    fn find(&self, account: &str, reference: &str) -> Option<u32> {
        if let Some(parsed) = parse_crn(reference) {
            if parsed.region != self.region || parsed.account != account {
                return None;
            }
            return self.find_id(account, parsed.id);
        }
        if let Ok(id) = Uuid::parse_str(reference) {
            if let Some(qid) = self.find_id(account, id) {
                return Some(qid);
            }
        }
        self.by_name.get(account)?.get(reference).copied()
    }

    fn find_id(&self, account: &str, id: Uuid) -> Option<u32> {
        let qid = *self.by_id.get(&id)?;
        let q = self.queues.get(&qid)?;
        (q.account == account).then_some(qid)
    }

    fn lookup(&self, account: &str, reference: &str) -> Result<u32> {
        self.find(account, reference)
            .ok_or_else(|| EngineError::QueueNotFound(reference.to_string()))
    }

    fn queue(&self, qid: u32) -> Result<&Queue> {
        self.queues
            .get(&qid)
            .ok_or_else(|| EngineError::QueueNotFound(qid.to_string()))
    }

    fn alloc_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    // ---- queues ---------------------------------------------------------------------------

    fn create_queue(
        &mut self,
        account: String,
        queue_id: Uuid,
        name: String,
        attrs: &QueueAttributes,
    ) -> Result<Outcome> {
        let queue_type = validate::queue_name(&name)?;
        if self
            .by_name
            .get(&account)
            .is_some_and(|names| names.contains_key(&name))
        {
            return Err(EngineError::QueueExists(name));
        }
        if self.by_id.contains_key(&queue_id) {
            return Err(EngineError::invalid("queue_id", "is already in use"));
        }
        let mut config = QueueConfig::default();
        validate::scalar_attributes(attrs, queue_type, &mut config)?;
        let source = Source {
            id: queue_id,
            name: &name,
            queue_type,
        };
        if let Some(Some(policy)) = &attrs.redrive_policy {
            config.redrive_policy = Some(self.check_redrive(&account, &source, policy)?);
        }
        if let Some(allow) = &attrs.redrive_allow_policy {
            config.redrive_allow_policy = self.check_allow(&account, allow)?;
        }
        let qid = self.next_qid;
        self.next_qid += 1;
        if let Some(target) = config
            .redrive_policy
            .and_then(|p| self.queues.get_mut(&p.target))
        {
            target.sources.insert(qid);
        }
        self.by_name
            .entry(account.clone())
            .or_default()
            .insert(name.clone(), qid);
        self.by_id.insert(queue_id, qid);
        let queue = Queue::new(qid, queue_id, account, name, self.books.now, config);
        self.queues.insert(qid, queue);
        self.books.changes.rows.push(RowKey::Queue(qid));
        self.view(qid).map(|v| Outcome::Queue(Box::new(v)))
    }

    fn patch_queue(
        &mut self,
        account: &str,
        reference: &str,
        attrs: &QueueAttributes,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let q = self.queue(qid)?;
        let mut config = q.config.clone();
        validate::scalar_attributes(attrs, q.queue_type, &mut config)?;
        let source = Source {
            id: q.id,
            name: &q.name,
            queue_type: q.queue_type,
        };
        match &attrs.redrive_policy {
            Some(Some(policy)) => {
                config.redrive_policy = Some(self.check_redrive(account, &source, policy)?)
            }
            Some(None) => config.redrive_policy = None,
            None => {}
        }
        if let Some(allow) = &attrs.redrive_allow_policy {
            config.redrive_allow_policy = self.check_allow(account, allow)?;
        }
        let old_target = q.config.redrive_policy.map(|p| p.target);
        let new_target = config.redrive_policy.map(|p| p.target);
        if old_target != new_target {
            if let Some(t) = old_target.and_then(|t| self.queues.get_mut(&t)) {
                t.sources.remove(&qid);
            }
            if let Some(t) = new_target.and_then(|t| self.queues.get_mut(&t)) {
                t.sources.insert(qid);
            }
        }
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        let retention_changed = q.config.retention_seconds != config.retention_seconds;
        q.config = config;
        if retention_changed {
            q.clear_retention_timer(&mut self.books);
            q.schedule_retention(&mut self.books);
        }
        let sources: Vec<u32> = q.sources.iter().copied().collect();
        self.books.changes.rows.push(RowKey::Queue(qid));
        self.reconsider_pending(qid);
        for source in sources {
            self.reconsider_pending(source);
        }
        self.view(qid).map(|v| Outcome::Queue(Box::new(v)))
    }

    fn delete_queue(&mut self, account: &str, reference: &str) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let q = self.queue(qid)?;
        if !q.sources.is_empty() {
            let sources = q
                .sources
                .iter()
                .filter_map(|&s| self.queue_ref(s))
                .collect();
            return Err(EngineError::QueueInUse { sources });
        }
        let Some(mut q) = self.queues.remove(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        let detached = q.detach(&mut self.books);
        q.clear_dedup_timer(&mut self.books);
        self.doom(qid, u64::MAX, detached);
        let changes = &mut self.books.changes;
        changes.ranges.push(rows::dedup_range(qid));
        changes.rows.push(RowKey::Queue(qid));
        if let Some(t) = q
            .config
            .redrive_policy
            .and_then(|p| self.queues.get_mut(&p.target))
        {
            t.sources.remove(&qid);
        }
        if let Some(names) = self.by_name.get_mut(&q.account) {
            names.remove(&q.name);
            if names.is_empty() {
                self.by_name.remove(&q.account);
            }
        }
        self.by_id.remove(&q.id);
        Ok(Outcome::Deleted)
    }

    /// Hands messages taken out of queue `qid` to reclamation, which ticks carry out.
    fn doom(&mut self, qid: u32, below: u64, detached: Detached) {
        let reclaim = self.reclaim.entry(qid).or_insert_with(|| Reclaim {
            below,
            sets: VecDeque::new(),
        });
        reclaim.below = reclaim.below.max(below);
        if !detached.is_empty() {
            reclaim.sets.push_back(detached);
        }
        if reclaim.sets.is_empty() {
            self.reclaim.remove(&qid);
        } else {
            self.books.changes.rows.push(RowKey::Reclaim(qid));
        }
    }

    /// Deletes up to `budget` purged or deleted messages for good, lowest queue and sequence
    /// number first (so every replica, restored or not, deletes the same rows in each tick).
    fn reclaim_some(&mut self, mut budget: usize) {
        while budget > 0 {
            let Some(mut entry) = self.reclaim.first_entry() else {
                return;
            };
            let qid = *entry.key();
            let reclaim = entry.get_mut();
            while budget > 0 {
                let Some(set) = reclaim.sets.front_mut() else {
                    break;
                };
                match set.pop(&mut self.books) {
                    Some((_, msg)) => {
                        self.books.changes.payloads.push(PayloadOp::Delete(msg.mid));
                        budget -= 1;
                    }
                    None => {
                        reclaim.sets.pop_front();
                    }
                }
            }
            // Only the front set can have been emptied without being dropped.
            if reclaim.sets.front().is_some_and(Detached::is_empty) {
                reclaim.sets.pop_front();
            }
            if reclaim.sets.is_empty() {
                entry.remove();
                self.books.changes.rows.push(RowKey::Reclaim(qid));
            }
        }
    }

    /// Checks a redrive policy against every rule of SPEC.md §2, each with its own error.
    fn check_redrive(
        &self,
        account: &str,
        source: &Source<'_>,
        input: &RedrivePolicyInput,
    ) -> Result<RedrivePolicy> {
        const TARGET: &str = "redrive_policy.dead_letter_target";
        const MAX: &str = "redrive_policy.max_receive_count";
        let reference = input
            .dead_letter_target
            .as_deref()
            .ok_or_else(|| EngineError::invalid(TARGET, "is required"))?;
        let max = input
            .max_receive_count
            .ok_or_else(|| EngineError::invalid(MAX, "is required"))?;
        let max_receive_count = validate::in_range(MAX, max, 1, limits::MAX_RECEIVE_COUNT_MAX)?;
        if reference == source.name {
            return Err(EngineError::invalid(
                TARGET,
                "must differ from the source queue",
            ));
        }
        let target = match parse_crn(reference) {
            Some(parsed) if parsed.region != self.region => {
                return Err(EngineError::invalid(
                    TARGET,
                    "must be in the same region as the source queue",
                ))
            }
            Some(parsed) if parsed.account != account => {
                return Err(EngineError::invalid(
                    TARGET,
                    "must be in the same account as the source queue",
                ))
            }
            None if reference.starts_with("crn:") => {
                return Err(EngineError::invalid(TARGET, "is not a valid queue CRN"))
            }
            _ => self
                .find(account, reference)
                .and_then(|qid| self.queues.get(&qid))
                .ok_or_else(|| EngineError::invalid(TARGET, "names no existing queue"))?,
        };
        if target.id == source.id {
            return Err(EngineError::invalid(
                TARGET,
                "must differ from the source queue",
            ));
        }
        if target.queue_type != source.queue_type {
            return Err(EngineError::invalid(
                TARGET,
                format!(
                    "must be of the same type as the source queue ({})",
                    source.queue_type.as_str()
                ),
            ));
        }
        if !target.config.redrive_allow_policy.allows(source.id) {
            return Err(EngineError::invalid(
                TARGET,
                "the target's redrive_allow_policy does not allow this source queue",
            ));
        }
        Ok(RedrivePolicy {
            target: target.qid,
            max_receive_count,
        })
    }

    fn check_allow(&self, account: &str, input: &AllowPolicyInput) -> Result<AllowPolicy> {
        const PERMISSION: &str = "redrive_allow_policy.permission";
        const SOURCES: &str = "redrive_allow_policy.source_queues";
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
        if input.source_queues.is_some() && permission != "by_queue" {
            return Err(EngineError::invalid(
                SOURCES,
                "applies only to permission by_queue",
            ));
        }
        match permission {
            "allow_all" => Ok(AllowPolicy::AllowAll),
            "deny_all" => Ok(AllowPolicy::DenyAll),
            "by_queue" => {
                let refs = input.source_queues.as_deref().unwrap_or_default();
                validate::count(SOURCES, refs.len(), limits::ALLOW_POLICY_SOURCES_MAX)?;
                let mut list: Vec<QueueName> = Vec::with_capacity(refs.len());
                for (i, reference) in refs.iter().enumerate() {
                    let q = self
                        .find(account, reference)
                        .and_then(|qid| self.queues.get(&qid))
                        .ok_or_else(|| {
                            EngineError::invalid(
                                format!("{SOURCES}[{i}]"),
                                "names no existing queue of this account",
                            )
                        })?;
                    if !list.iter().any(|n| n.id == q.id) {
                        list.push(QueueName {
                            id: q.id,
                            name: q.name.clone(),
                        });
                    }
                }
                Ok(AllowPolicy::ByQueue(list))
            }
            _ => Ok(AllowPolicy::DenyAll),
        }
    }

    // ---- messages -------------------------------------------------------------------------

    fn send_one(&mut self, qid: u32, msg: NewMessage) -> Result<SendResult> {
        let now = self.books.now;
        let q = self.queue(qid)?;
        let checked = validate::message(&msg, q.queue_type, &q.config)?;
        if let Some(id) = &checked.dedup_id {
            if let Some(r) = q.dedup.get(id).filter(|r| r.expires_at > now) {
                return Ok(SendResult {
                    message_id: r.message_id,
                    duplicate: true,
                    sequence_number: Some(r.seq),
                });
            }
        }
        let seq = self.alloc_seq();
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(EngineError::QueueNotFound(qid.to_string()));
        };
        let (state, until) = match checked.delay_seconds {
            0 => (State::Visible, 0),
            d => (State::Delayed, now + u64::from(d) * 1000),
        };
        let fifo = q.fifo();
        let stored = Msg {
            mid: seq,
            enqueued_at: now,
            until,
            first_received_at: 0,
            receive_count: 0,
            size: checked.size,
            group: NO_GROUP,
            state,
            moved: None,
        };
        q.insert(
            &mut self.books,
            seq,
            stored,
            msg.message_group_id.as_deref().unwrap_or_default(),
        );
        if let Some(id) = &checked.dedup_id {
            let record = DedupRecord {
                message_id: msg.message_id,
                seq,
                expires_at: now + limits::DEDUP_WINDOW_MS,
            };
            q.record_dedup(&mut self.books, id.clone(), record);
        }
        self.books.changes.payloads.push(PayloadOp::Put(
            seq,
            Payload {
                message_id: msg.message_id,
                body: msg.body,
                attributes: msg.attributes,
                message_group_id: msg.message_group_id,
                message_deduplication_id: checked.dedup_id,
                sent_at: now,
            },
        ));
        Ok(SendResult {
            message_id: msg.message_id,
            duplicate: false,
            sequence_number: fifo.then_some(seq),
        })
    }

    fn send_batch(
        &mut self,
        account: &str,
        reference: &str,
        entries: Vec<BatchEntry>,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        validate::count("entries", entries.len(), limits::BATCH_MAX)?;
        for (i, entry) in entries.iter().enumerate() {
            let field = format!("entries[{i}].id");
            validate::batch_entry_id(&field, &entry.id)?;
            if entries[..i].iter().any(|e| e.id == entry.id) {
                return Err(EngineError::invalid(
                    field,
                    "must be unique within the batch",
                ));
            }
        }
        let results = entries
            .into_iter()
            .map(|entry| BatchResult {
                result: self.send_one(qid, entry.message),
                id: entry.id,
            })
            .collect();
        Ok(Outcome::SentBatch(results))
    }

    fn receive(
        &mut self,
        account: &str,
        reference: &str,
        max_messages: Option<i64>,
        lease_seconds: Option<i64>,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let max = validate::in_range(
            "max_messages",
            max_messages.unwrap_or(1),
            1,
            limits::RECEIVE_MAX_MESSAGES,
        )?;
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        let lease = match lease_seconds {
            Some(v) => validate::in_range("lease_seconds", v, 0, limits::LEASE_SECONDS_MAX)?,
            None => q.config.lease_seconds,
        };
        let leased = q.receive(&mut self.books, max as usize, u64::from(lease) * 1000);
        let q = self.queue(qid)?;
        let deliveries = leased
            .iter()
            .map(|(seq, msg)| Delivery {
                receipt: receipt::encode(*seq, msg.receive_count),
                lease_expires_at: msg.until,
                meta: self.meta(q, *seq, msg),
            })
            .collect();
        if lease == 0 {
            // A zero-length lease ends as it starts: the messages are deliverable again (or due
            // for redrive) at once, after this receive.
            for (seq, _) in leased {
                self.settle(qid, seq);
            }
        }
        Ok(Outcome::Received(deliveries))
    }

    fn ack(&mut self, account: &str, reference: &str, receipts: Vec<String>) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        validate::count("receipts", receipts.len(), limits::BATCH_MAX)?;
        let now = self.books.now;
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        let results = receipts
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                let result = match receipt::decode(&text) {
                    None => Err(EngineError::invalid(
                        format!("receipts[{i}]"),
                        "is not a receipt issued by raftq",
                    )),
                    Some((seq, count)) => match q.take_leased(&mut self.books, seq, count, now) {
                        Some(msg) => {
                            let payload = PayloadOp::Delete(msg.mid);
                            self.books.changes.payloads.push(payload);
                            Ok(())
                        }
                        None => Err(EngineError::LeaseExpired),
                    },
                };
                AckResult {
                    receipt: text,
                    result,
                }
            })
            .collect();
        Ok(Outcome::Acked(results))
    }

    fn change_lease(
        &mut self,
        account: &str,
        reference: &str,
        text: String,
        lease_seconds: i64,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let secs =
            validate::in_range("lease_seconds", lease_seconds, 0, limits::LEASE_SECONDS_MAX)?;
        let (seq, count) = receipt::decode(&text)
            .ok_or_else(|| EngineError::invalid("receipt", "is not a receipt issued by raftq"))?;
        let now = self.books.now;
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        q.active_lease(seq, count, now)
            .ok_or(EngineError::LeaseExpired)?;
        let lease_expires_at = now + u64::from(secs) * 1000;
        if secs == 0 {
            self.settle(qid, seq);
        } else {
            q.set_state(&mut self.books, seq, State::Leased, lease_expires_at);
        }
        Ok(Outcome::LeaseChanged {
            receipt: text,
            lease_expires_at,
        })
    }

    // ---- redrive --------------------------------------------------------------------------

    /// A message whose lease ended unacknowledged, or that waits for redrive: moves it to the
    /// dead-letter target when its receive count has reached the policy's maximum and the
    /// target accepts it, keeps it pending when the target does not, else makes it visible.
    fn settle(&mut self, qid: u32, seq: u64) {
        let Some(q) = self.queues.get(&qid) else {
            return;
        };
        let Some(msg) = q.messages.get(&seq) else {
            return;
        };
        let due = q
            .config
            .redrive_policy
            .filter(|p| msg.receive_count >= p.max_receive_count);
        let state = msg.state;
        match due {
            Some(policy) if self.accepts(qid, policy.target) => {
                self.move_message(qid, seq, policy.target)
            }
            Some(_) if state == State::Pending => {}
            Some(_) => self.set_state(qid, seq, State::Pending),
            None => self.set_state(qid, seq, State::Visible),
        }
    }

    fn set_state(&mut self, qid: u32, seq: u64, state: State) {
        if let Some(q) = self.queues.get_mut(&qid) {
            q.set_state(&mut self.books, seq, state, 0);
        }
    }

    /// Whether `target` takes redriven messages from `source` now.
    fn accepts(&self, source: u32, target: u32) -> bool {
        match (self.queues.get(&source), self.queues.get(&target)) {
            (Some(s), Some(t)) => {
                s.account == t.account
                    && s.queue_type == t.queue_type
                    && t.config.redrive_allow_policy.allows(s.id)
            }
            _ => false,
        }
    }

    fn reconsider_pending(&mut self, qid: u32) {
        let pending: Vec<u64> = match self.queues.get(&qid) {
            Some(q) => q.pending(),
            None => return,
        };
        for seq in pending {
            self.settle(qid, seq);
        }
    }

    /// Moves a message to the end of `target` in one step: it leaves the source and enters the
    /// target in the same apply, so it is never in both and never in neither.
    fn move_message(&mut self, source: u32, seq: u64, target: u32) {
        if !self.queues.contains_key(&target) {
            return;
        }
        let now = self.books.now;
        let Some(sq) = self.queues.get_mut(&source) else {
            return;
        };
        let group = sq
            .messages
            .get(&seq)
            .and_then(|m| sq.group_name(m.group))
            .unwrap_or_default()
            .to_string();
        let from = QueueName {
            id: sq.id,
            name: sq.name.clone(),
        };
        let Some(msg) = sq.remove(&mut self.books, seq) else {
            return;
        };
        sq.dead_lettered += 1;
        self.books.changes.rows.push(RowKey::Queue(source));
        let new_seq = self.alloc_seq();
        if let Some(tq) = self.queues.get_mut(&target) {
            let moved = Msg {
                mid: msg.mid,
                enqueued_at: now,
                until: 0,
                first_received_at: 0,
                receive_count: 0,
                size: msg.size,
                group: NO_GROUP,
                state: State::Visible,
                moved: Some(Box::new(from)),
            };
            tq.insert(&mut self.books, new_seq, moved, &group);
        }
    }

    // ---- queries --------------------------------------------------------------------------

    /// The queue object.
    pub fn get_queue(&self, account: &str, reference: &str) -> Result<QueueView> {
        self.view(self.lookup(account, reference)?)
    }

    /// The resource reference of a queue.
    pub fn resolve(&self, account: &str, reference: &str) -> Result<QueueRef> {
        let qid = self.lookup(account, reference)?;
        self.queue_ref(qid)
            .ok_or_else(|| EngineError::QueueNotFound(reference.to_string()))
    }

    /// The account's queues whose names start with `prefix`, by name.
    pub fn list_queues(&self, account: &str, prefix: &str) -> Vec<QueueView> {
        let Some(names) = self.by_name.get(account) else {
            return Vec::new();
        };
        names
            .range(prefix.to_string()..)
            .take_while(|(name, _)| name.starts_with(prefix))
            .filter_map(|(_, &qid)| self.view(qid).ok())
            .collect()
    }

    /// Up to `limit` messages after sequence number `after`, in queue order, in every state.
    pub fn peek(
        &self,
        account: &str,
        reference: &str,
        after: Option<u64>,
        limit: Option<i64>,
    ) -> Result<Vec<MessageMeta>> {
        let q = self.queue(self.lookup(account, reference)?)?;
        let limit = match limit {
            Some(v) => validate::in_range("limit", v, 1, limits::PEEK_LIMIT_MAX as i64)? as usize,
            None => limits::PEEK_LIMIT_DEFAULT,
        };
        let start = after.map_or(0, |a| a.saturating_add(1));
        Ok(q.messages
            .range(start..)
            .take(limit)
            .map(|(&seq, msg)| self.meta(q, seq, msg))
            .collect())
    }

    /// Counters of a queue; the age is measured at `now`.
    pub fn stats(&self, account: &str, reference: &str, now: Millis) -> Result<QueueStats> {
        let q = self.queue(self.lookup(account, reference)?)?;
        Ok(self.stats_of(q, now))
    }

    fn stats_of(&self, q: &Queue, now: Millis) -> QueueStats {
        let now = now.max(self.books.now);
        let oldest = q
            .messages
            .values()
            .next()
            .map_or(0, |m| now.saturating_sub(m.enqueued_at) / 1000);
        QueueStats {
            visible: q.count(State::Visible),
            leased: q.count(State::Leased),
            delayed: q.count(State::Delayed),
            pending_redrive: q.count(State::Pending),
            oldest_message_age_seconds: oldest,
        }
    }

    /// Every queue of every account with its counters at `now` and its dead-letter moves, for
    /// monitoring; in account and name order.
    pub fn queue_gauges(&self, now: Millis) -> Vec<QueueGauges> {
        self.by_name
            .iter()
            .flat_map(|(account, names)| names.iter().map(move |(name, qid)| (account, name, qid)))
            .filter_map(|(account, name, qid)| {
                let q = self.queues.get(qid)?;
                Some(QueueGauges {
                    account: account.clone(),
                    name: name.clone(),
                    stats: self.stats_of(q, now),
                    dead_lettered: q.dead_lettered,
                })
            })
            .collect()
    }

    /// The queues whose redrive policy names this queue.
    pub fn dead_letter_sources(&self, account: &str, reference: &str) -> Result<Vec<QueueRef>> {
        let q = self.queue(self.lookup(account, reference)?)?;
        Ok(q.sources
            .iter()
            .filter_map(|&s| self.queue_ref(s))
            .collect())
    }

    /// Whether a receive on this queue would return something now.
    pub fn has_deliverable(&self, account: &str, reference: &str) -> bool {
        self.ready_count(account, reference) > 0
    }

    /// How many places a receive on this queue could start from now: its visible messages, or
    /// for a FIFO queue its unblocked groups (0 for a queue that does not exist).
    pub fn ready_count(&self, account: &str, reference: &str) -> usize {
        self.find(account, reference)
            .and_then(|qid| self.queues.get(&qid))
            .map_or(0, Queue::ready_len)
    }

    fn queue_ref(&self, qid: u32) -> Option<QueueRef> {
        let q = self.queues.get(&qid)?;
        Some(QueueRef {
            id: q.id,
            name: q.name.clone(),
            crn: crn(&self.region, &q.account, q.id),
        })
    }

    fn name_ref(&self, account: &str, named: &QueueName) -> QueueRef {
        let name = self
            .by_id
            .get(&named.id)
            .and_then(|qid| self.queues.get(qid))
            .map_or_else(|| named.name.clone(), |q| q.name.clone());
        QueueRef {
            id: named.id,
            name,
            crn: crn(&self.region, account, named.id),
        }
    }

    fn view(&self, qid: u32) -> Result<QueueView> {
        let q = self.queue(qid)?;
        let c = &q.config;
        let redrive_policy = c.redrive_policy.and_then(|p| {
            Some(RedrivePolicyView {
                dead_letter_target: self.queue_ref(p.target)?,
                max_receive_count: p.max_receive_count,
            })
        });
        let redrive_allow_policy = match &c.redrive_allow_policy {
            AllowPolicy::AllowAll => AllowPolicyView {
                permission: "allow_all".into(),
                source_queues: None,
            },
            AllowPolicy::DenyAll => AllowPolicyView {
                permission: "deny_all".into(),
                source_queues: None,
            },
            AllowPolicy::ByQueue(list) => AllowPolicyView {
                permission: "by_queue".into(),
                source_queues: Some(list.iter().map(|n| self.name_ref(&q.account, n)).collect()),
            },
        };
        Ok(QueueView {
            id: q.id,
            name: q.name.clone(),
            crn: crn(&self.region, &q.account, q.id),
            queue_type: q.queue_type,
            created_at: q.created_at,
            content_based_deduplication: c.content_based_deduplication,
            lease_seconds: c.lease_seconds,
            delay_seconds: c.delay_seconds,
            retention_seconds: c.retention_seconds,
            max_message_bytes: c.max_message_bytes,
            redrive_policy,
            redrive_allow_policy,
        })
    }

    fn meta(&self, q: &Queue, seq: u64, msg: &Msg) -> MessageMeta {
        let state = match msg.state {
            State::Visible => MessageState::Visible,
            State::Delayed => MessageState::Delayed,
            State::Leased => MessageState::Leased,
            State::Pending => MessageState::PendingRedrive,
        };
        MessageMeta {
            storage_key: msg.mid,
            seq,
            fifo: q.fifo(),
            receive_count: msg.receive_count,
            first_received_at: (msg.first_received_at != 0).then_some(msg.first_received_at),
            enqueued_at: msg.enqueued_at,
            dead_letter_source: msg.moved.as_deref().map(|n| self.name_ref(&q.account, n)),
            moved_at: msg.moved.is_some().then_some(msg.enqueued_at),
            state,
            until: matches!(msg.state, State::Delayed | State::Leased).then_some(msg.until),
        }
    }

    // ---- rows -----------------------------------------------------------------------------

    /// The current value of a row, or `None` when the row no longer exists (delete it).
    pub fn row_value(&self, key: &RowKey) -> Option<Vec<u8>> {
        match key {
            RowKey::Meta => Some(rows::encode(&MetaRow {
                version: FORMAT_VERSION,
                now: self.books.now,
                next_seq: self.next_seq,
                next_qid: self.next_qid,
            })),
            RowKey::Queue(qid) => self.queues.get(qid).map(|q| {
                rows::encode(&QueueRow {
                    id: q.id,
                    account: q.account.clone(),
                    name: q.name.clone(),
                    created_at: q.created_at,
                    config: q.config.clone(),
                    dead_lettered: q.dead_lettered,
                })
            }),
            RowKey::Message(qid, seq) => {
                let (m, group) = match self.queues.get(qid) {
                    Some(q) if !self.doomed(*qid, *seq) => {
                        let m = q.messages.get(seq)?;
                        (m, q.group_name(m.group))
                    }
                    _ => self
                        .reclaim
                        .get(qid)?
                        .sets
                        .iter()
                        .find_map(|s| s.get(*seq))?,
                };
                Some(rows::encode(&MessageRow {
                    mid: m.mid,
                    enqueued_at: m.enqueued_at,
                    state: m.state as u8,
                    until: m.until,
                    first_received_at: m.first_received_at,
                    receive_count: m.receive_count,
                    size: m.size,
                    group: group.map(str::to_string),
                    moved: m.moved.as_deref().cloned(),
                }))
            }
            RowKey::Dedup(qid, id) => {
                let r = self.queues.get(qid)?.dedup.get(id)?;
                Some(rows::encode(&DedupRow {
                    message_id: r.message_id,
                    seq: r.seq,
                    expires_at: r.expires_at,
                }))
            }
            RowKey::Reclaim(qid) => self
                .reclaim
                .get(qid)
                .map(|r| rows::encode(&ReclaimRow { below: r.below })),
        }
    }

    /// Whether message `seq` of queue `qid` is one a purge or the queue's deletion took away.
    fn doomed(&self, qid: u32, seq: u64) -> bool {
        self.reclaim.get(&qid).is_some_and(|r| seq < r.below)
    }

    /// Every engine row (payloads excluded), in key order: the engine's part of a snapshot.
    pub fn export_rows(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut keys = vec![RowKey::Meta];
        for (&qid, q) in &self.queues {
            keys.push(RowKey::Queue(qid));
            keys.extend(q.messages.keys().map(|&seq| RowKey::Message(qid, seq)));
            keys.extend(q.dedup.keys().map(|id| RowKey::Dedup(qid, id.clone())));
        }
        for (&qid, r) in &self.reclaim {
            keys.push(RowKey::Reclaim(qid));
            for set in &r.sets {
                keys.extend(set.seqs().map(|seq| RowKey::Message(qid, seq)));
            }
        }
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = keys
            .iter()
            .filter_map(|k| Some((k.encode(), self.row_value(k)?)))
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Rebuilds an engine from rows (in any order; payload rows are skipped). No rows at all
    /// gives an empty engine.
    pub fn restore(
        region: impl Into<String>,
        rows: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
    ) -> Result<Engine, RowError> {
        let mut engine = Engine::new(region);
        let mut meta: Option<MetaRow> = None;
        let mut queues: Vec<(u32, QueueRow)> = Vec::new();
        let mut messages: Vec<(u32, u64, MessageRow)> = Vec::new();
        let mut dedups: Vec<(u32, String, DedupRow)> = Vec::new();
        let mut reclaims: Vec<(u32, ReclaimRow)> = Vec::new();
        for (key, value) in rows {
            match decode_key(&key)? {
                KeyKind::Payload(_) => {}
                KeyKind::Engine(RowKey::Meta) => meta = Some(postcard::from_bytes(&value)?),
                KeyKind::Engine(RowKey::Queue(qid)) => {
                    queues.push((qid, postcard::from_bytes(&value)?))
                }
                KeyKind::Engine(RowKey::Message(qid, seq)) => {
                    messages.push((qid, seq, postcard::from_bytes(&value)?))
                }
                KeyKind::Engine(RowKey::Dedup(qid, id)) => {
                    dedups.push((qid, id, postcard::from_bytes(&value)?))
                }
                KeyKind::Engine(RowKey::Reclaim(qid)) => {
                    reclaims.push((qid, postcard::from_bytes(&value)?))
                }
            }
        }
        let Some(meta) = meta else {
            return match queues.first() {
                Some(&(qid, _)) => Err(RowError::MissingQueue(qid)),
                None => Ok(engine),
            };
        };
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&meta.version) {
            return Err(RowError::UnsupportedVersion(meta.version));
        }
        engine.books.now = meta.now;
        engine.next_seq = meta.next_seq;
        engine.next_qid = meta.next_qid;
        for (qid, row) in queues {
            engine
                .by_name
                .entry(row.account.clone())
                .or_default()
                .insert(row.name.clone(), qid);
            engine.by_id.insert(row.id, qid);
            let mut q = Queue::new(
                qid,
                row.id,
                row.account,
                row.name,
                row.created_at,
                row.config,
            );
            q.dead_lettered = row.dead_lettered;
            engine.queues.insert(qid, q);
        }
        let targets: Vec<(u32, u32)> = engine
            .queues
            .iter()
            .filter_map(|(&qid, q)| Some((qid, q.config.redrive_policy?.target)))
            .collect();
        for (source, target) in targets {
            engine
                .queues
                .get_mut(&target)
                .ok_or(RowError::MissingQueue(target))?
                .sources
                .insert(source);
        }
        for (qid, row) in reclaims {
            engine.reclaim.insert(
                qid,
                Reclaim {
                    below: row.below,
                    sets: VecDeque::from([Detached::new(qid)]),
                },
            );
        }
        messages.sort_unstable_by_key(|&(qid, seq, _)| (qid, seq));
        for (qid, seq, row) in messages {
            let state = State::from_u8(row.state).ok_or(RowError::BadKey)?;
            let msg = Msg {
                mid: row.mid,
                enqueued_at: row.enqueued_at,
                until: row.until,
                first_received_at: row.first_received_at,
                receive_count: row.receive_count,
                size: row.size,
                group: NO_GROUP,
                state,
                moved: row.moved.map(Box::new),
            };
            let doomed = engine.doomed(qid, seq);
            match engine.queues.get_mut(&qid) {
                Some(q) if !doomed => q.insert(
                    &mut engine.books,
                    seq,
                    msg,
                    row.group.as_deref().unwrap_or_default(),
                ),
                _ => engine
                    .reclaim
                    .get_mut(&qid)
                    .and_then(|r| r.sets.front_mut())
                    .ok_or(RowError::MissingQueue(qid))?
                    .restore(seq, msg, row.group.as_deref()),
            }
        }
        for (qid, id, row) in dedups {
            let q = engine
                .queues
                .get_mut(&qid)
                .ok_or(RowError::MissingQueue(qid))?;
            q.restore_dedup(
                id,
                DedupRecord {
                    message_id: row.message_id,
                    seq: row.seq,
                    expires_at: row.expires_at,
                },
            );
        }
        for q in engine.queues.values_mut() {
            q.finish_restore(&mut engine.books);
        }
        engine.books.changes = Changes::default();
        Ok(engine)
    }
}

/// Removes a message for good: from its queue and, through the store, its payload.
fn discard(q: &mut Queue, books: &mut Books, seq: u64) {
    if let Some(msg) = q.remove(books, seq) {
        books.changes.payloads.push(PayloadOp::Delete(msg.mid));
    }
}
