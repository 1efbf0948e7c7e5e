//! A message move task's state and its pace, apart from the queues it moves between.
//!
//! A task owns the messages its queue held when it started (sequence numbers below `end_seq`)
//! that match its filter, and goes through them oldest first, from `cursor` on. Its pace is a
//! token bucket in thousandths of a message: each step adds `rate` per millisecond elapsed since
//! the last step (so `rate` messages a second), at most [`MoveTask::burst`] messages' worth
//! (and the rounding of a millisecond), and each message moved takes 1,000. Everything is integer arithmetic on times stamped into the
//! log, so every replica, and a replica rebuilt from rows, takes the same steps at the same
//! times, and the next step's due time follows from the task alone.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::{Millis, MoveFilter, MoveTaskStatus, QueueName};

/// Thousandths of a message: the unit of a task's credit.
const MESSAGE: u64 = 1000;

/// A move task, as the engine keeps it and as its row stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MoveTask {
    pub handle: Uuid,
    pub status: MoveTaskStatus,
    /// `None`: each message goes back to its own dead-letter source.
    pub destination: Option<QueueName>,
    /// Messages per second, 1–500.
    pub rate: u32,
    pub filter: Option<MoveFilter>,
    pub dry_run: bool,
    pub started_at: Millis,
    pub ended_at: Option<Millis>,
    pub to_move: u64,
    pub moved: u64,
    pub skipped: u64,
    pub failure_reason: Option<String>,
    /// The task's messages are those below this sequence number (the next one when it started).
    pub end_seq: u64,
    /// Every message of the task up to this sequence number has been dealt with.
    pub cursor: u64,
    /// When the last step (or the start) was taken.
    pub last_step_at: Millis,
    /// Unspent pace, in thousandths of a message.
    pub credit: u64,
}

impl MoveTask {
    pub fn running(&self) -> bool {
        self.status == MoveTaskStatus::Running
    }

    /// The most messages one step moves, and (with a millisecond's rounding) the most credit
    /// the bucket holds: a tenth of a second's worth, at least one. So a step comes about every
    /// 100 ms whatever the rate, and a task that waited (a leader change, a late tick) never
    /// catches up in a burst.
    pub fn burst(&self) -> u64 {
        (u64::from(self.rate) / 10).max(1)
    }

    /// Adds the pace earned since the last step and records the step's time. The credit holds
    /// at most the burst and what one millisecond earns: steps fall due at whole milliseconds,
    /// rounded up, and the part of a message that rounding earned is carried, not lost.
    pub fn refill(&mut self, now: Millis) {
        let earned = u64::from(self.rate).saturating_mul(now.saturating_sub(self.last_step_at));
        let most = self.burst() * MESSAGE + u64::from(self.rate).saturating_sub(1);
        self.credit = self.credit.saturating_add(earned).min(most);
        self.last_step_at = self.last_step_at.max(now);
    }

    /// Whether the credit pays for one more message.
    pub fn can_move(&self) -> bool {
        self.credit >= MESSAGE
    }

    /// Spends one message's credit.
    pub fn spend(&mut self) {
        self.credit = self.credit.saturating_sub(MESSAGE);
    }

    /// When the next step is due: once the credit pays for a whole step (or for what is left
    /// to move, when that is less), and never at the last step's own time, so that one entry
    /// takes at most one step of a task.
    pub fn next_due(&self) -> Millis {
        let left = self
            .to_move
            .saturating_sub(self.moved + self.skipped)
            .clamp(1, self.burst());
        let missing = (left * MESSAGE).saturating_sub(self.credit);
        let wait = missing.div_ceil(u64::from(self.rate.max(1)));
        self.last_step_at.saturating_add(wait.max(1))
    }

    /// Whether a message of the task's queue is one of its messages: taken before the start
    /// and past the cursor (not dealt with yet), and matching the filter.
    pub fn owns(&self, seq: u64, storage_key: u64, moved_at: Option<Millis>) -> bool {
        seq < self.end_seq && seq > self.cursor && self.matches(storage_key, moved_at)
    }

    /// Whether a message passes the filter.
    pub fn matches(&self, storage_key: u64, moved_at: Option<Millis>) -> bool {
        let Some(f) = &self.filter else {
            return true;
        };
        if !f.message_ids.is_empty() && f.storage_keys.binary_search(&storage_key).is_err() {
            return false;
        }
        if f.moved_since.is_none() && f.moved_before.is_none() {
            return true;
        }
        moved_at.is_some_and(|at| {
            f.moved_since.is_none_or(|since| at >= since)
                && f.moved_before.is_none_or(|before| at < before)
        })
    }

    /// Where a message of the task goes: the task's destination, or else the dead-letter
    /// source it records (`moved`); `None` for a message without one.
    pub fn goes_to<'a>(&'a self, moved: Option<&'a QueueName>) -> Option<&'a QueueName> {
        self.destination.as_ref().or(moved)
    }

    /// Why the task fails when `goes_to`, where a message of it goes, was deleted.
    pub fn gone(&self, goes_to: &QueueName) -> String {
        let what = match self.destination {
            Some(_) => "the destination queue",
            None => "the dead-letter source",
        };
        format!("{what} {} (id {}) was deleted", goes_to.name, goes_to.id)
    }

    /// Ends the task at `now` with `status`.
    pub fn end(&mut self, status: MoveTaskStatus, now: Millis) {
        self.status = status;
        self.ended_at = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(rate: u32, to_move: u64) -> MoveTask {
        MoveTask {
            handle: Uuid::nil(),
            status: MoveTaskStatus::Running,
            destination: None,
            rate,
            filter: None,
            dry_run: false,
            started_at: 0,
            ended_at: None,
            to_move,
            moved: 0,
            skipped: 0,
            failure_reason: None,
            end_seq: 100,
            cursor: 0,
            last_step_at: 0,
            credit: 0,
        }
    }

    #[test]
    fn a_step_comes_every_tenth_of_a_second_with_a_tenth_of_the_rate() {
        let mut t = task(500, 1000);
        assert_eq!(t.burst(), 50);
        assert_eq!(t.next_due(), 100);
        t.refill(100);
        assert_eq!(t.credit, 50 * MESSAGE);
        for _ in 0..50 {
            assert!(t.can_move());
            t.spend();
            t.moved += 1;
        }
        assert!(!t.can_move());
        assert_eq!(t.next_due(), 200);
    }

    #[test]
    fn slow_rates_move_one_message_at_a_time() {
        let mut t = task(3, 10);
        assert_eq!(t.burst(), 1);
        assert_eq!(t.next_due(), 334, "1000 / 3 ms, rounded up");
        t.refill(334);
        assert!(t.can_move());
        t.spend();
        t.moved += 1;
        assert_eq!(t.credit, 2, "the rounding is carried, not lost");
        assert_eq!(t.next_due(), 334 + 333);
    }

    #[test]
    fn a_late_step_does_not_catch_up_in_a_burst() {
        let mut t = task(100, 1000);
        t.refill(60_000);
        assert_eq!(
            t.credit,
            10 * MESSAGE + 99,
            "a tenth of a second's worth, and a millisecond's rounding, at most"
        );
    }

    #[test]
    fn the_last_step_waits_only_for_what_is_left() {
        let mut t = task(500, 3);
        assert_eq!(t.next_due(), 6, "3 messages at 500/s");
        t.refill(6);
        t.moved = 3;
        assert_eq!(
            t.next_due(),
            7,
            "at least one message's wait, never the same time"
        );
    }

    #[test]
    fn filters_take_named_messages_and_moves_within_the_range() {
        let mut t = task(1, 1);
        assert!(t.matches(7, None));
        t.filter = Some(MoveFilter {
            message_ids: vec![Uuid::nil(), Uuid::max()],
            storage_keys: vec![3, 7],
            moved_since: None,
            moved_before: None,
        });
        assert!(t.matches(7, None));
        assert!(!t.matches(5, Some(1)));
        t.filter = Some(MoveFilter {
            moved_since: Some(10),
            moved_before: Some(20),
            ..MoveFilter::default()
        });
        assert!(!t.matches(1, None), "never moved: outside any range");
        assert!(t.matches(1, Some(10)));
        assert!(t.matches(1, Some(19)));
        assert!(!t.matches(1, Some(20)));
        assert!(!t.matches(1, Some(9)));
        assert!(t.owns(5, 1, Some(15)));
        assert!(!t.owns(100, 1, Some(15)), "sent after the start");
        t.cursor = 5;
        assert!(!t.owns(5, 1, Some(15)), "dealt with already");
    }
}
