//! Receive attempt IDs of FIFO queues (SQS ReceiveRequestAttemptId). A receive may carry an
//! attempt ID; a retry of it with the same ID within 5 minutes of the first returns the same
//! messages with the same receipts, and starts their leases again from the retry, as long as
//! none of them was touched since (acknowledged, released, its lease changed or expired).
//! Otherwise the retry is a new receive, whose answer the ID replays from then on. Times come
//! from the entries, so every replica replays alike.
//!
//! A record keeps, for each message the receive leased, its sequence number, the receive count
//! its lease made (its receipt) and the end of that lease. Records are pruned like
//! deduplication records: by a per-queue timer, at whole seconds.

use std::collections::VecDeque;

use foldhash::HashMap;
use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};
use crate::model::{limits, Millis};
use crate::queue::{prune_due, ApplyContext, Msg, Queue, State, Timer};
use crate::rows::RowKey;

/// One message a recorded receive leased.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AttemptLease {
    pub seq: u64,
    /// The receive count the lease made: with `seq`, the receipt.
    pub receive_count: u32,
    /// When the lease ends, as the receive (or its last replay) set it.
    pub until: Millis,
}

/// What a receive with an attempt ID leased, until `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AttemptRecord {
    pub expires_at: Millis,
    pub leases: Vec<AttemptLease>,
}

/// A queue's attempt records, in window order for pruning.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReceiveAttempts {
    pub records: HashMap<String, AttemptRecord>,
    order: VecDeque<(Millis, String)>,
    timer: Option<Millis>,
}

/// An attempt ID: 1-128 characters of `A-Z a-z 0-9` and ASCII punctuation.
pub fn check_id(id: &str) -> Result<()> {
    if id.is_empty()
        || id.len() > limits::RECEIVE_ATTEMPT_ID_MAX
        || !id.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(EngineError::invalid(
            "receive_attempt_id",
            format!(
                "must be 1-{} characters of A-Z a-z 0-9 and punctuation",
                limits::RECEIVE_ATTEMPT_ID_MAX
            ),
        ));
    }
    Ok(())
}

impl ReceiveAttempts {
    fn arm(&mut self, context: &mut ApplyContext, qid: u32, expires: Millis) {
        let due = prune_due(expires);
        context.timers.insert((due, Timer::Attempts(qid)));
        self.timer = Some(due);
    }

    /// Loads a record during a restore; [`ReceiveAttempts::finish_restore`] orders them.
    pub(crate) fn restore(&mut self, id: String, record: AttemptRecord) {
        self.order.push_back((record.expires_at, id.clone()));
        self.records.insert(id, record);
    }

    /// Puts restored records in window order and arms the queue's timer.
    pub(crate) fn finish_restore(&mut self, context: &mut ApplyContext, qid: u32) {
        self.order.make_contiguous().sort();
        if let Some(&(expires, _)) = self.order.front() {
            self.arm(context, qid, expires);
        }
    }

    /// Forgets the records that left the window, and re-arms the timer.
    pub(crate) fn prune(&mut self, context: &mut ApplyContext, qid: u32) {
        self.timer = None;
        while let Some(&(expires, _)) = self.order.front() {
            if expires > context.now {
                self.arm(context, qid, expires);
                break;
            }
            if let Some((expires, id)) = self.order.pop_front() {
                if self
                    .records
                    .get(&id)
                    .is_some_and(|r| r.expires_at == expires)
                {
                    self.records.remove(&id);
                    context.changes.rows.push(RowKey::Attempt(qid, id));
                }
            }
        }
        if self.records.capacity() > 4 * self.records.len() + 64 {
            self.records.shrink_to_fit();
            self.order.shrink_to_fit();
        }
    }

    /// Drops the queue's timer (for deletion).
    pub(crate) fn clear_timer(&mut self, context: &mut ApplyContext, qid: u32) {
        if let Some(due) = self.timer.take() {
            context.timers.remove(&(due, Timer::Attempts(qid)));
        }
    }
}

impl Queue {
    /// The answer of the receive recorded under attempt `id`, again, if the record is within
    /// its window and every message it leased is still under that lease, untouched: their
    /// leases start again now, for `lease_ms`. `None`: the receive is a new one.
    pub(crate) fn replay(
        &mut self,
        context: &mut ApplyContext,
        id: &str,
        lease_ms: u64,
    ) -> Option<Vec<(u64, Msg)>> {
        let now = context.now;
        let record = self.attempts.records.get(id)?;
        let untouched = record.expires_at > now
            && record.leases.iter().all(|l| {
                self.messages.get(&l.seq).is_some_and(|m| {
                    m.state == State::Leased
                        && m.receive_count == l.receive_count
                        && m.until == l.until
                        && m.until > now
                })
            });
        if !untouched {
            return None;
        }
        let seqs: Vec<u64> = record.leases.iter().map(|l| l.seq).collect();
        let until = now.saturating_add(lease_ms);
        let mut out = Vec::with_capacity(seqs.len());
        for seq in seqs {
            self.set_state(context, seq, State::Leased, until);
            if let Some(msg) = self.messages.get(&seq) {
                out.push((seq, msg.clone()));
            }
        }
        if let Some(record) = self.attempts.records.get_mut(id) {
            for lease in &mut record.leases {
                lease.until = until;
            }
        }
        context
            .changes
            .rows
            .push(RowKey::Attempt(self.qid, id.to_string()));
        Some(out)
    }

    /// Records what a receive with attempt `id` leased, for its retries within the window.
    pub(crate) fn record_attempt(
        &mut self,
        context: &mut ApplyContext,
        id: String,
        leased: &[(u64, Msg)],
    ) {
        let expires_at = context
            .now
            .saturating_add(limits::RECEIVE_ATTEMPT_WINDOW_MS);
        let record = AttemptRecord {
            expires_at,
            leases: leased
                .iter()
                .map(|(seq, msg)| AttemptLease {
                    seq: *seq,
                    receive_count: msg.receive_count,
                    until: msg.until,
                })
                .collect(),
        };
        context
            .changes
            .rows
            .push(RowKey::Attempt(self.qid, id.clone()));
        let attempts = &mut self.attempts;
        attempts.order.push_back((expires_at, id.clone()));
        attempts.records.insert(id, record);
        if attempts.timer.is_none() {
            attempts.arm(context, self.qid, expires_at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_ids_are_printable_ascii_without_spaces() {
        assert!(check_id("a-Z_0!\"#$%&'()*+,./:;<=>?@[\\]^`{|}~").is_ok());
        assert!(check_id(&"x".repeat(128)).is_ok());
        for bad in ["", "a b", "é", "tab\t", &"x".repeat(129)] {
            let e = check_id(bad).expect_err(bad);
            assert_eq!(e.field(), Some("receive_attempt_id"));
        }
    }
}
