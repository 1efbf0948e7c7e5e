//! The engine as rows (`crate::rows`): each changed row's new value after an apply, every row
//! for a snapshot, and the engine rebuilt from them on start.

use std::collections::VecDeque;

use crate::attempts::AttemptRecord;
use crate::error::Result;
use crate::outbox::{Lane, Outgoing};
use crate::placement::Placement;
use crate::queue::{DedupRecord, Msg, Parked, Queue, ReceiveRequest, ReclaimSet, State, NO_GROUP};
use crate::rows::{
    self, decode_key, AttemptRow, Changes, DedupRow, KeyKind, MessageRow, MetaRow, MoveTasksRow,
    QueueRow, ReclaimRow, RowError, RowKey, WaiterRow, FORMAT_VERSION, OLDEST_READABLE_VERSION,
};

use super::queues::local_target;
use super::{Engine, Reclaim};

impl Engine {
    /// The current value of a row, or `None` when the row no longer exists (delete it).
    pub fn row_value(&self, key: &RowKey) -> Option<Vec<u8>> {
        match key {
            RowKey::Meta => Some(rows::encode(&MetaRow {
                version: FORMAT_VERSION,
                now: self.context.now,
                next_seq: self.next_seq,
                next_qid: self.next_qid,
            })),
            RowKey::Queue(qid) => self.queues.get(qid).map(|q| rows::encode(&queue_row(q))),
            RowKey::Message(qid, seq) => self.message_row(*qid, *seq).map(|row| rows::encode(&row)),
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
            RowKey::MoveTasks(qid) => {
                let q = self.queues.get(qid).filter(|q| !q.move_tasks.is_empty())?;
                Some(rows::encode(&MoveTasksRow {
                    tasks: q.move_tasks.iter().cloned().collect(),
                }))
            }
            RowKey::Attempt(qid, id) => {
                let r = self.queues.get(qid)?.attempts.records.get(id)?;
                Some(rows::encode(&AttemptRow {
                    expires_at: r.expires_at,
                    leases: r.leases.clone(),
                }))
            }
            RowKey::Waiter(qid, order) => {
                let parked = self.queues.get(qid)?.waiters.get(order)?;
                Some(rows::encode(&WaiterRow {
                    waiter: parked.waiter,
                    max_messages: parked.request.max_messages,
                    lease_seconds: parked.request.lease_seconds,
                    deadline: parked.deadline,
                }))
            }
            RowKey::Placement(key) => self.placement.row_value(key),
            RowKey::Outbox(number) => self.outbox.get(number).map(rows::encode),
            RowKey::Inbound(group) => self.inbound.get(group).map(rows::encode),
        }
    }

    /// The row of message `seq` of queue `qid`, in the queue or in what a purge or the queue's
    /// deletion took away.
    fn message_row(&self, qid: u32, seq: u64) -> Option<MessageRow> {
        let (m, group, scheduled) = match self.queues.get(&qid) {
            Some(q) if !self.is_reclaiming(qid, seq) => {
                let m = q.messages.get(&seq)?;
                (m, q.group_name(m.group), q.scheduled_id(seq))
            }
            _ => self
                .reclaim
                .get(&qid)?
                .sets
                .iter()
                .find_map(|s| s.get(seq))?,
        };
        Some(MessageRow {
            storage_key: m.storage_key,
            enqueued_at: m.enqueued_at,
            state: m.state as u8,
            until: m.until,
            first_received_at: m.first_received_at,
            receive_count: m.receive_count,
            size: m.size,
            group: group.map(str::to_string),
            moved: m.moved.as_deref().cloned(),
            priority: m.priority,
            scheduled,
        })
    }

    /// Whether message `seq` of queue `qid` is one a purge or the queue's deletion took away.
    fn is_reclaiming(&self, qid: u32, seq: u64) -> bool {
        self.reclaim.get(&qid).is_some_and(|r| seq < r.below)
    }

    /// Every engine row (payloads excluded), in key order: the engine's part of a snapshot.
    pub fn export_rows(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut keys = vec![RowKey::Meta];
        for (&qid, q) in &self.queues {
            keys.push(RowKey::Queue(qid));
            keys.extend(q.messages.keys().map(|&seq| RowKey::Message(qid, seq)));
            keys.extend(q.dedup.keys().map(|id| RowKey::Dedup(qid, id.clone())));
            keys.push(RowKey::MoveTasks(qid));
            keys.extend(
                q.attempts
                    .records
                    .keys()
                    .map(|id| RowKey::Attempt(qid, id.clone())),
            );
            keys.extend(q.waiters.keys().map(|&order| RowKey::Waiter(qid, order)));
        }
        keys.extend(self.outbox.keys().map(|&number| RowKey::Outbox(number)));
        keys.extend(self.inbound.keys().map(|&group| RowKey::Inbound(group)));
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
        out.extend(self.placement.export_rows());
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
        let mut rows = RowsByKind::read(rows)?;
        engine.placement = Placement::restore(std::mem::take(&mut rows.placement))?;
        let Some(meta) = rows.meta else {
            return match rows.queues.first() {
                Some(&(qid, _)) => Err(RowError::MissingQueue(qid)),
                None => Ok(engine),
            };
        };
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&meta.version) {
            return Err(RowError::UnsupportedVersion(meta.version));
        }
        engine.context.now = meta.now;
        engine.next_seq = meta.next_seq;
        engine.next_qid = meta.next_qid;
        engine.restore_queues(meta.version, rows.queues)?;
        engine.restore_dead_letter_sources()?;
        for (qid, row) in rows.move_tasks {
            engine.restored_queue(qid)?.move_tasks = row.tasks.into();
        }
        for (qid, row) in rows.reclaims {
            let reclaim = Reclaim {
                below: row.below,
                sets: VecDeque::from([ReclaimSet::new(qid)]),
            };
            engine.reclaim.insert(qid, reclaim);
        }
        engine.restore_messages(meta.version, rows.messages)?;
        engine.restore_windows(rows.dedups, rows.attempts)?;
        engine.restore_waiters(rows.waiters)?;
        engine.outbox = rows.outbox.into_iter().collect();
        engine.inbound = rows.inbound.into_iter().collect();
        for (&qid, q) in engine.queues.iter_mut() {
            q.finish_restore(&mut engine.context);
            q.attempts.finish_restore(&mut engine.context, qid);
        }
        engine.context.changes = Changes::default();
        engine.context.woken.clear();
        debug_assert!(
            engine.numbers_ahead(),
            "the next sequence and queue numbers restored are past every one in use"
        );
        Ok(engine)
    }

    /// Whether the next sequence number is past every message's, parked receive's and outbox
    /// entry's, and the
    /// next queue number past every queue's, reclaimed ones included.
    fn numbers_ahead(&self) -> bool {
        let below_next = |seq: u64| seq < self.next_seq;
        let seqs = self.queues.values().all(|q| {
            q.messages
                .keys()
                .next_back()
                .copied()
                .is_none_or(below_next)
                && q.waiters.keys().next_back().copied().is_none_or(below_next)
        });
        let reclaimed = self
            .reclaim
            .values()
            .all(|r| r.sets.iter().flat_map(ReclaimSet::seqs).all(below_next));
        let outbox = self.outbox.keys().copied().all(below_next);
        let qids = self
            .queues
            .keys()
            .chain(self.reclaim.keys())
            .all(|&qid| qid < self.next_qid);
        seqs && reclaimed && outbox && qids
    }

    /// The restored queue `qid`; a row of a queue that has none is an error.
    fn restored_queue(&mut self, qid: u32) -> Result<&mut Queue, RowError> {
        self.queues.get_mut(&qid).ok_or(RowError::MissingQueue(qid))
    }

    /// Restores the queues from their rows, written in format `version`, with their names.
    fn restore_queues(
        &mut self,
        version: u32,
        queues: Vec<(u32, Vec<u8>)>,
    ) -> Result<(), RowError> {
        for (qid, bytes) in queues {
            let row = QueueRow::decode(version, &bytes)?;
            self.names.insert(&row.account, &row.name, row.id, qid);
            let mut q = Queue::new(
                qid,
                row.id,
                row.account,
                row.name,
                row.created_at,
                row.config,
            );
            q.dead_lettered = row.dead_lettered;
            q.modified_at = row.modified_at;
            q.tags = row.tags;
            q.credits = row.credits;
            self.queues.insert(qid, q);
        }
        Ok(())
    }

    /// Tells each dead-letter target which queues' redrive policies name it.
    fn restore_dead_letter_sources(&mut self) -> Result<(), RowError> {
        let targets: Vec<(u32, u32)> = self
            .queues
            .iter()
            .filter_map(|(&qid, q)| Some((qid, local_target(&q.config)?)))
            .collect();
        for (source, target) in targets {
            self.restored_queue(target)?.sources.insert(source);
        }
        Ok(())
    }

    /// Restores the messages from their rows, written in format `version`, in key order, into
    /// their queues or into what a purge or the queue's deletion took away.
    fn restore_messages(
        &mut self,
        version: u32,
        mut messages: Vec<(u32, u64, Vec<u8>)>,
    ) -> Result<(), RowError> {
        messages.sort_unstable_by_key(|&(qid, seq, _)| (qid, seq));
        for (qid, seq, bytes) in messages {
            let row = MessageRow::decode(version, &bytes)?;
            let state = State::from_u8(row.state).ok_or(RowError::BadKey)?;
            let msg = Msg {
                storage_key: row.storage_key,
                enqueued_at: row.enqueued_at,
                until: row.until,
                first_received_at: row.first_received_at,
                receive_count: row.receive_count,
                size: row.size,
                group: NO_GROUP,
                state,
                priority: row.priority,
                moved: row.moved.map(Box::new),
            };
            let reclaiming = self.is_reclaiming(qid, seq);
            match self.queues.get_mut(&qid) {
                Some(q) if !reclaiming => {
                    let group = row.group.as_deref().unwrap_or_default();
                    q.insert(&mut self.context, seq, msg, group);
                    if let Some(id) = row.scheduled {
                        q.schedule(seq, id);
                    }
                }
                _ => self
                    .reclaim
                    .get_mut(&qid)
                    .and_then(|r| r.sets.front_mut())
                    .ok_or(RowError::MissingQueue(qid))?
                    .restore(seq, msg, row.group.as_deref(), row.scheduled),
            }
        }
        Ok(())
    }

    /// Restores the deduplication and receive attempt records of the queues.
    fn restore_windows(
        &mut self,
        dedups: Vec<(u32, String, DedupRow)>,
        attempts: Vec<(u32, String, AttemptRow)>,
    ) -> Result<(), RowError> {
        for (qid, id, row) in dedups {
            let record = DedupRecord {
                message_id: row.message_id,
                seq: row.seq,
                expires_at: row.expires_at,
            };
            self.restored_queue(qid)?.restore_dedup(id, record);
        }
        for (qid, id, row) in attempts {
            let record = AttemptRecord {
                expires_at: row.expires_at,
                leases: row.leases,
            };
            self.restored_queue(qid)?.attempts.restore(id, record);
        }
        Ok(())
    }

    /// Parks the receives that were parked, each in its place in its queue's order.
    fn restore_waiters(&mut self, waiters: Vec<(u32, u64, WaiterRow)>) -> Result<(), RowError> {
        for (qid, order, row) in waiters {
            if !self.queues.contains_key(&qid) {
                return Err(RowError::MissingQueue(qid));
            }
            let request = ReceiveRequest {
                qid,
                max_messages: row.max_messages,
                lease_seconds: row.lease_seconds,
            };
            let parked = Parked {
                waiter: row.waiter,
                request,
                deadline: row.deadline,
            };
            self.park(order, parked);
        }
        Ok(())
    }
}

/// The queue's row.
fn queue_row(q: &Queue) -> QueueRow {
    QueueRow {
        id: q.id,
        account: q.account.clone(),
        name: q.name.clone(),
        created_at: q.created_at,
        config: q.config.clone(),
        dead_lettered: q.dead_lettered,
        modified_at: q.modified_at,
        tags: q.tags.clone(),
        credits: q.credits,
    }
}

/// Engine rows sorted by kind, decoded but for the queues' and messages' (their format depends
/// on the meta row's version).
#[derive(Default)]
struct RowsByKind {
    meta: Option<MetaRow>,
    queues: Vec<(u32, Vec<u8>)>,
    messages: Vec<(u32, u64, Vec<u8>)>,
    dedups: Vec<(u32, String, DedupRow)>,
    reclaims: Vec<(u32, ReclaimRow)>,
    move_tasks: Vec<(u32, MoveTasksRow)>,
    attempts: Vec<(u32, String, AttemptRow)>,
    waiters: Vec<(u32, u64, WaiterRow)>,
    outbox: Vec<(u64, Outgoing)>,
    inbound: Vec<(u32, Lane)>,
    placement: Vec<(Vec<u8>, Vec<u8>)>,
}

impl RowsByKind {
    /// Sorts `rows` (in any order) by kind; payload rows are skipped.
    fn read(rows: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> Result<RowsByKind, RowError> {
        let mut sorted = RowsByKind::default();
        for (key, value) in rows {
            let KeyKind::Engine(key) = decode_key(&key)? else {
                continue;
            };
            match key {
                RowKey::Meta => sorted.meta = Some(postcard::from_bytes(&value)?),
                RowKey::Queue(qid) => sorted.queues.push((qid, value)),
                RowKey::Message(qid, seq) => sorted.messages.push((qid, seq, value)),
                RowKey::Dedup(qid, id) => {
                    sorted.dedups.push((qid, id, postcard::from_bytes(&value)?))
                }
                RowKey::Reclaim(qid) => sorted.reclaims.push((qid, postcard::from_bytes(&value)?)),
                RowKey::MoveTasks(qid) => {
                    sorted.move_tasks.push((qid, postcard::from_bytes(&value)?))
                }
                RowKey::Attempt(qid, id) => {
                    sorted
                        .attempts
                        .push((qid, id, postcard::from_bytes(&value)?))
                }
                RowKey::Waiter(qid, order) => {
                    sorted
                        .waiters
                        .push((qid, order, postcard::from_bytes(&value)?))
                }
                RowKey::Placement(key) => sorted.placement.push((key.encode(), value)),
                RowKey::Outbox(number) => {
                    sorted.outbox.push((number, postcard::from_bytes(&value)?))
                }
                RowKey::Inbound(group) => {
                    sorted.inbound.push((group, postcard::from_bytes(&value)?))
                }
            }
        }
        Ok(sorted)
    }
}
