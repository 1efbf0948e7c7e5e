//! The engine as rows (`crate::rows`): each changed row's new value after an apply, every row
//! for a snapshot, and the engine rebuilt from them on start.

use std::collections::VecDeque;

use crate::attempts::AttemptRecord;
use crate::error::Result;
use crate::queue::{DedupRecord, Msg, Parked, Queue, ReceiveRequest, ReclaimSet, State, NO_GROUP};
use crate::rows::{
    self, decode_key, AttemptRow, Changes, DedupRow, KeyKind, MessageRow, MetaRow, MoveTasksRow,
    QueueRow, ReclaimRow, RowError, RowKey, WaiterRow, FORMAT_VERSION, OLDEST_READABLE_VERSION,
};

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
            RowKey::Queue(qid) => self.queues.get(qid).map(|q| {
                rows::encode(&QueueRow {
                    id: q.id,
                    account: q.account.clone(),
                    name: q.name.clone(),
                    created_at: q.created_at,
                    config: q.config.clone(),
                    dead_lettered: q.dead_lettered,
                    modified_at: q.modified_at,
                    tags: q.tags.clone(),
                })
            }),
            RowKey::Message(qid, seq) => {
                let (m, group) = match self.queues.get(qid) {
                    Some(q) if !self.is_reclaiming(*qid, *seq) => {
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
                    storage_key: m.storage_key,
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
        }
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
        let mut queues: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut messages: Vec<(u32, u64, MessageRow)> = Vec::new();
        let mut dedups: Vec<(u32, String, DedupRow)> = Vec::new();
        let mut reclaims: Vec<(u32, ReclaimRow)> = Vec::new();
        let mut move_tasks: Vec<(u32, MoveTasksRow)> = Vec::new();
        let mut attempts: Vec<(u32, String, AttemptRow)> = Vec::new();
        let mut waiters: Vec<(u32, u64, WaiterRow)> = Vec::new();
        for (key, value) in rows {
            match decode_key(&key)? {
                KeyKind::Payload(_) => {}
                KeyKind::Engine(RowKey::Meta) => meta = Some(postcard::from_bytes(&value)?),
                KeyKind::Engine(RowKey::Queue(qid)) => queues.push((qid, value)),
                KeyKind::Engine(RowKey::Message(qid, seq)) => {
                    messages.push((qid, seq, postcard::from_bytes(&value)?))
                }
                KeyKind::Engine(RowKey::Dedup(qid, id)) => {
                    dedups.push((qid, id, postcard::from_bytes(&value)?))
                }
                KeyKind::Engine(RowKey::Reclaim(qid)) => {
                    reclaims.push((qid, postcard::from_bytes(&value)?))
                }
                KeyKind::Engine(RowKey::MoveTasks(qid)) => {
                    move_tasks.push((qid, postcard::from_bytes(&value)?))
                }
                KeyKind::Engine(RowKey::Attempt(qid, id)) => {
                    attempts.push((qid, id, postcard::from_bytes(&value)?))
                }
                KeyKind::Engine(RowKey::Waiter(qid, order)) => {
                    waiters.push((qid, order, postcard::from_bytes(&value)?))
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
        engine.context.now = meta.now;
        engine.next_seq = meta.next_seq;
        engine.next_qid = meta.next_qid;
        for (qid, bytes) in queues {
            let row = QueueRow::decode(meta.version, &bytes)?;
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
            q.modified_at = row.modified_at;
            q.tags = row.tags;
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
        for (qid, row) in move_tasks {
            engine
                .queues
                .get_mut(&qid)
                .ok_or(RowError::MissingQueue(qid))?
                .move_tasks = row.tasks.into();
        }
        for (qid, row) in reclaims {
            engine.reclaim.insert(
                qid,
                Reclaim {
                    below: row.below,
                    sets: VecDeque::from([ReclaimSet::new(qid)]),
                },
            );
        }
        messages.sort_unstable_by_key(|&(qid, seq, _)| (qid, seq));
        for (qid, seq, row) in messages {
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
                moved: row.moved.map(Box::new),
            };
            let reclaiming = engine.is_reclaiming(qid, seq);
            match engine.queues.get_mut(&qid) {
                Some(q) if !reclaiming => q.insert(
                    &mut engine.context,
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
        for (qid, id, row) in attempts {
            let q = engine
                .queues
                .get_mut(&qid)
                .ok_or(RowError::MissingQueue(qid))?;
            q.attempts.restore(
                id,
                AttemptRecord {
                    expires_at: row.expires_at,
                    leases: row.leases,
                },
            );
        }
        for (qid, order, row) in waiters {
            if !engine.queues.contains_key(&qid) {
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
            engine.park(order, parked);
        }
        for (&qid, q) in engine.queues.iter_mut() {
            q.finish_restore(&mut engine.context);
            q.attempts.finish_restore(&mut engine.context, qid);
        }
        engine.context.changes = Changes::default();
        engine.context.woken.clear();
        Ok(engine)
    }
}
