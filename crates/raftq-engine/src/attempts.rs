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

use crate::context::{prune_due, ApplyContext, Timer};
use crate::error::{EngineError, Result};
use crate::model::{limits, Millis};
use crate::rows::{AttemptLease, RowKey};

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

    /// Forgets the records that left the window, and re-arms the timer. A record goes at its
    /// timer's time ([`prune_due`]), not at its expiry, whichever timer runs the pruning: a
    /// replica restored from a snapshot holds no stale timer of an earlier record of the same
    /// ID, and must forget the same records at the same entries as one that does.
    pub(crate) fn prune(&mut self, context: &mut ApplyContext, qid: u32) {
        self.timer = None;
        while let Some(&(expires, _)) = self.order.front() {
            if prune_due(expires) > context.now {
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

    /// Starts the leases recorded under `id` again, until `until`, and marks its row dirty.
    pub(crate) fn renew(&mut self, context: &mut ApplyContext, qid: u32, id: &str, until: Millis) {
        if let Some(record) = self.records.get_mut(id) {
            for lease in &mut record.leases {
                lease.until = until;
            }
            context
                .changes
                .rows
                .push(RowKey::Attempt(qid, id.to_string()));
        }
    }

    /// Records the `leases` a receive with attempt `id` made, for its retries within the window.
    pub(crate) fn record(
        &mut self,
        context: &mut ApplyContext,
        qid: u32,
        id: String,
        leases: Vec<AttemptLease>,
    ) {
        let expires_at = context
            .now
            .saturating_add(limits::RECEIVE_ATTEMPT_WINDOW_MS);
        debug_assert!(
            self.order
                .back()
                .is_none_or(|(last, _)| *last <= expires_at),
            "records join the window in expiry order, so pruning looks at the front alone"
        );
        context.changes.rows.push(RowKey::Attempt(qid, id.clone()));
        self.order.push_back((expires_at, id.clone()));
        self.records
            .insert(id, AttemptRecord { expires_at, leases });
        if self.timer.is_none() {
            self.arm(context, qid, expires_at);
        }
    }

    /// Drops the queue's timer (for deletion).
    pub(crate) fn clear_timer(&mut self, context: &mut ApplyContext, qid: u32) {
        if let Some(due) = self.timer.take() {
            context.timers.remove(&(due, Timer::Attempts(qid)));
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
