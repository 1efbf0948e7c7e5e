//! Messages: sends, receives, acknowledgements, lease changes and what timers do to them.

use crate::command::{
    AckResult, BatchEntry, BatchResult, Delivery, NewMessage, Outcome, Payload, SendResult,
};
use crate::error::{EngineError, Result};
use crate::model::limits;
use crate::queue::{DedupRecord, Msg, ReceiveRequest, State, NO_GROUP};
use crate::rows::PayloadOp;
use crate::{attempts, receipt, validate};

use super::{Engine, LeaseEnd};

impl Engine {
    pub(super) fn send_one(&mut self, qid: u32, msg: NewMessage) -> Result<SendResult> {
        let now = self.context.now;
        let q = self.queue(qid)?;
        let checked = validate::message(&msg, q.queue_type, &q.config, now)?;
        let group = msg.message_group_id.as_deref().unwrap_or_default();
        let dedup_key = checked.dedup_id.as_deref().map(|id| q.dedup_key(group, id));
        if let Some(key) = &dedup_key {
            if let Some(r) = q.dedup.get(key).filter(|r| r.expires_at > now) {
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
        let (state, until) = match (checked.deliver_at, checked.delay_seconds) {
            (Some(at), _) => (State::Delayed, at),
            (None, 0) => (State::Visible, 0),
            (None, d) => (State::Delayed, now + u64::from(d) * 1000),
        };
        let fifo = q.fifo();
        q.sent += 1;
        let stored = Msg {
            storage_key: seq,
            enqueued_at: now,
            until,
            first_received_at: 0,
            receive_count: 0,
            size: checked.size,
            group: NO_GROUP,
            state,
            priority: checked.priority,
            moved: None,
        };
        q.insert(&mut self.context, seq, stored, group);
        if checked.deliver_at.is_some() {
            q.schedule(seq, msg.message_id);
        }
        if let Some(key) = dedup_key {
            let record = DedupRecord {
                message_id: msg.message_id,
                seq,
                expires_at: now + limits::DEDUP_WINDOW_MS,
            };
            q.record_dedup(&mut self.context, key, record);
        }
        self.context.changes.payloads.push(PayloadOp::Put(
            seq,
            Payload {
                message_id: msg.message_id,
                body: msg.body,
                attributes: msg.attributes,
                message_group_id: msg.message_group_id,
                message_deduplication_id: checked.dedup_id,
                sent_at: now,
                trace_header: msg.trace_header,
            },
        ));
        Ok(SendResult {
            message_id: msg.message_id,
            duplicate: false,
            sequence_number: fifo.then_some(seq),
        })
    }

    pub(super) fn send(
        &mut self,
        account: &str,
        reference: &str,
        message: NewMessage,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        self.send_one(qid, message).map(Outcome::Sent)
    }

    pub(super) fn send_batch(
        &mut self,
        account: &str,
        reference: &str,
        entries: Vec<BatchEntry>,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        validate::batch_entry_ids(&ids)?;
        let results = entries
            .into_iter()
            .map(|entry| BatchResult {
                result: self.send_one(qid, entry.message),
                id: entry.id,
            })
            .collect();
        Ok(Outcome::SentBatch(results))
    }

    pub(super) fn receive(
        &mut self,
        account: &str,
        reference: &str,
        max_messages: Option<i64>,
        lease_seconds: Option<i64>,
        attempt_id: Option<String>,
    ) -> Result<Outcome> {
        let request = self.receive_request(account, reference, max_messages, lease_seconds)?;
        if let Some(id) = &attempt_id {
            attempts::check_id(id)?;
            if !self.queue(request.qid)?.fifo() {
                return Err(EngineError::invalid(
                    "receive_attempt_id",
                    "applies only to FIFO queues",
                ));
            }
        }
        Ok(Outcome::Received(self.lease(&request, attempt_id)))
    }

    /// A receive's queue and options, checked.
    pub(super) fn receive_request(
        &self,
        account: &str,
        reference: &str,
        max_messages: Option<i64>,
        lease_seconds: Option<i64>,
    ) -> Result<ReceiveRequest> {
        let qid = self.lookup(account, reference)?;
        Ok(ReceiveRequest {
            qid,
            max_messages: validate::max_messages(max_messages)?,
            lease_seconds: lease_seconds.map(validate::lease_seconds).transpose()?,
        })
    }

    /// Leases what `request` may take now: the one rule of every receive, parked or not. Under
    /// an attempt ID (FIFO queues), a retry within the window replays the first answer, and a
    /// first answer with messages is recorded for that.
    pub(super) fn lease(
        &mut self,
        request: &ReceiveRequest,
        attempt_id: Option<String>,
    ) -> Vec<Delivery> {
        let qid = request.qid;
        let Some(q) = self.queues.get_mut(&qid) else {
            return Vec::new();
        };
        let lease = request.lease_seconds.unwrap_or(q.config.lease_seconds);
        let max = request.max_messages as usize;
        let lease_ms = u64::from(lease) * 1000;
        let replayed = attempt_id
            .as_deref()
            .and_then(|id| q.replay(&mut self.context, id, lease_ms));
        let leased = match replayed {
            Some(leased) => leased,
            None => {
                let leased = q.receive(&mut self.context, max, lease_ms);
                if let Some(id) = attempt_id.filter(|_| !leased.is_empty()) {
                    q.record_attempt(&mut self.context, id, &leased);
                }
                leased
            }
        };
        let Some(q) = self.queues.get(&qid) else {
            return Vec::new();
        };
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
                self.settle(qid, seq, LeaseEnd::Released { delay_ms: 0 });
            }
        }
        deliveries
    }

    pub(super) fn ack(
        &mut self,
        account: &str,
        reference: &str,
        receipts: Vec<String>,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        validate::count("receipts", receipts.len(), limits::BATCH_MAX)?;
        let now = self.context.now;
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
                    Some((seq, count)) => match q.take_leased(&mut self.context, seq, count, now) {
                        Some(msg) => {
                            q.acked += 1;
                            let payload = PayloadOp::Delete(msg.storage_key);
                            self.context.changes.payloads.push(payload);
                            Ok(())
                        }
                        None => Err(q.lease_ended(seq)),
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

    /// Removes the scheduled message `message_id` before its time, with its payload.
    pub(super) fn cancel_scheduled(
        &mut self,
        account: &str,
        reference: &str,
        message_id: uuid::Uuid,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        let seq = q
            .scheduled_seq(message_id)
            .ok_or_else(|| EngineError::NotScheduled(message_id.to_string()))?;
        let removed = q.remove(&mut self.context, seq);
        debug_assert!(removed.is_some(), "a scheduled message is in its queue");
        if let Some(msg) = removed {
            let payload = PayloadOp::Delete(msg.storage_key);
            self.context.changes.payloads.push(payload);
        }
        Ok(Outcome::ScheduledCancelled)
    }

    pub(super) fn change_lease(
        &mut self,
        account: &str,
        reference: &str,
        text: String,
        lease_seconds: i64,
        delay_seconds: Option<i64>,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let secs = validate::lease_seconds(lease_seconds)?;
        let delay = validate::release_delay(secs, delay_seconds)?;
        let (seq, count) = receipt::decode(&text)
            .ok_or_else(|| EngineError::invalid("receipt", "is not a receipt issued by raftq"))?;
        let now = self.context.now;
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        if q.active_lease(seq, count, now).is_none() {
            return Err(q.lease_ended(seq));
        }
        let lease_expires_at = now + u64::from(secs) * 1000;
        if secs == 0 {
            let delay_ms = u64::from(delay) * 1000;
            self.settle(qid, seq, LeaseEnd::Released { delay_ms });
        } else {
            q.set_state(&mut self.context, seq, State::Leased, lease_expires_at);
        }
        Ok(Outcome::LeaseChanged {
            receipt: text,
            lease_expires_at,
        })
    }
}
