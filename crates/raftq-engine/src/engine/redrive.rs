//! Redrive: messages received too often move to their queue's dead-letter target, or wait while
//! the target does not accept them.

use uuid::Uuid;

use crate::model::{DeadLetterTarget, QueueName};
use crate::outbox::MoveKind;
use crate::queue::{Msg, State};
use crate::rows::RowKey;

use super::Engine;

/// How a message's lease ended, which decides how long it stays invisible when it is not
/// redriven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LeaseEnd {
    /// The lease expired: the queue's retry backoff applies.
    Expired,
    /// The consumer released it (a lease changed to 0 seconds, or a zero-length receive), or a
    /// pending redrive no longer applies: visible again after `delay_ms`.
    Released { delay_ms: u64 },
}

/// Where a message due for redrive goes.
#[derive(Clone, Copy)]
enum Due {
    /// To the queue of this group numbered so.
    Here(u32),
    /// To the queue of another group with this UUID (its group checks whether it takes it).
    Away(Uuid),
}

impl Engine {
    /// A message whose lease ended unacknowledged, or that waits for redrive: moves it to the
    /// dead-letter target when its receive count has reached the policy's maximum and the
    /// target accepts it, keeps it pending when the target does not, else makes it visible,
    /// after the wait `end` calls for.
    pub(super) fn settle(&mut self, qid: u32, seq: u64, end: LeaseEnd) {
        let Some(q) = self.queues.get(&qid) else {
            return;
        };
        let Some(msg) = q.messages.get(&seq) else {
            return;
        };
        let due = q
            .config
            .redrive_policy
            .as_ref()
            .filter(|p| msg.receive_count >= p.max_receive_count)
            .map(|p| match &p.target {
                DeadLetterTarget::Local(target) => Due::Here(*target),
                DeadLetterTarget::Remote(target) => Due::Away(target.id),
            });
        let wait_ms = match end {
            LeaseEnd::Expired => q
                .config
                .retry_backoff
                .map_or(0, |b| b.wait_ms(msg.receive_count)),
            LeaseEnd::Released { delay_ms } => delay_ms,
        };
        let state = msg.state;
        match due {
            Some(Due::Here(target)) if self.accepts(qid, target) => {
                self.move_message(qid, seq, target)
            }
            Some(Due::Away(target)) => self.move_away(qid, seq, target),
            Some(_) if state == State::Pending => {}
            Some(_) => self.set_state(qid, seq, State::Pending),
            None if wait_ms > 0 => {
                let until = self.context.now.saturating_add(wait_ms);
                if let Some(q) = self.queues.get_mut(&qid) {
                    q.set_state(&mut self.context, seq, State::Delayed, until);
                }
            }
            None => self.set_state(qid, seq, State::Visible),
        }
    }

    pub(super) fn set_state(&mut self, qid: u32, seq: u64, state: State) {
        if let Some(q) = self.queues.get_mut(&qid) {
            q.set_state(&mut self.context, seq, state, 0);
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

    pub(super) fn reconsider_pending(&mut self, qid: u32) {
        let pending: Vec<u64> = match self.queues.get(&qid) {
            Some(q) => q.pending(),
            None => return,
        };
        for seq in pending {
            self.settle(qid, seq, LeaseEnd::Released { delay_ms: 0 });
        }
    }

    /// Redrives a message: moves it to its dead-letter target, recording where it came from,
    /// and counts the move on the source.
    fn move_message(&mut self, source: u32, seq: u64, target: u32) {
        let from = self.source_name(source);
        if self.transfer(source, seq, target, from) {
            self.count_dead_lettered(source);
        }
    }

    /// Redrives a message to its dead-letter target in another group, through the outbox
    /// (the move counts on the source now, and is taken back if the target refuses it).
    fn move_away(&mut self, source: u32, seq: u64, target: Uuid) {
        let from = self.source_name(source);
        let kind = MoveKind::Redrive { source };
        if self.send_away(source, seq, target, kind, from) {
            self.count_dead_lettered(source);
        }
    }

    /// The name a redriven message records as its dead-letter source.
    fn source_name(&self, source: u32) -> Option<QueueName> {
        self.queues.get(&source).map(|sq| QueueName {
            id: sq.id,
            name: sq.name.clone(),
        })
    }

    fn count_dead_lettered(&mut self, source: u32) {
        if let Some(sq) = self.queues.get_mut(&source) {
            sq.dead_lettered += 1;
        }
        self.context.changes.rows.push(RowKey::Queue(source));
    }

    /// Moves a message to the end of `target` in one step: it leaves the source and enters the
    /// target in the same apply, so it is never in both and never in neither. It enters as a new
    /// message of the target (visible, never received, its retention counted from now) with its
    /// group ID and priority, and with `dead_letter_source` when redrive moves it. Returns whether it moved
    /// (the message and both queues exist).
    pub(super) fn transfer(
        &mut self,
        source: u32,
        seq: u64,
        target: u32,
        dead_letter_source: Option<QueueName>,
    ) -> bool {
        if !self.queues.contains_key(&target) {
            return false;
        }
        let now = self.context.now;
        let Some((msg, group)) = self.take_out(source, seq) else {
            return false;
        };
        let new_seq = self.alloc_seq();
        if let Some(tq) = self.queues.get_mut(&target) {
            let moved = Msg::arriving(
                msg.storage_key,
                now,
                msg.size,
                msg.priority,
                dead_letter_source,
            );
            tq.insert(&mut self.context, new_seq, moved, &group);
        }
        true
    }

    /// Takes message `seq` out of queue `source` to move it elsewhere, with the name of its
    /// FIFO group or tenant (empty: none).
    pub(super) fn take_out(&mut self, source: u32, seq: u64) -> Option<(Msg, String)> {
        let sq = self.queues.get_mut(&source)?;
        let group = sq
            .messages
            .get(&seq)
            .and_then(|m| sq.group_name(m.group))
            .unwrap_or_default()
            .to_string();
        let msg = sq.remove(&mut self.context, seq)?;
        Some((msg, group))
    }
}
