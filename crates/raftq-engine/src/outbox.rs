//! Messages on their way to a queue of another Raft group, and the lanes that make each arrive
//! exactly once.
//!
//! A move to a queue this group does not hold (redrive to a dead-letter queue of another group,
//! a move task's step toward a destination or a dead-letter source there) takes the message out
//! of its queue and records it in the group's outbox, in the same entry: the message is then in
//! the outbox and nowhere else, its payload kept under its storage key. The group's leader
//! delivers the outbox to the target's group ([`crate::Command::InsertMoved`], each message an
//! [`Arrival`](crate::command::Arrival)), in outbox order,
//! and once that group committed the arrivals, drops them ([`crate::Command::OutboxDone`]).
//!
//! Each outbox entry is numbered with a sequence number of its group, which only grows. The
//! target group keeps, per source group, a [`Lane`]: the highest number it took from that group.
//! An arrival at or below it is a delivery repeated (a leader changed, or an answer was lost)
//! and changes nothing, so a message arrives once however often it is sent. The number, not the
//! message's ID, is what makes it so: a message may rightly move to the same queue twice
//! (redriven, moved back by a task, redriven again).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::{Millis, QueueName};

/// A message in the outbox: where it goes, why, and the message as it was in its queue (so
/// that a refused move puts it back as it was).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outgoing {
    /// The queue it goes to, in another group.
    pub target: Uuid,
    pub kind: MoveKind,
    /// What the message records as its dead-letter source where it arrives (redrive only).
    pub dead_letter_source: Option<QueueName>,
    pub message: MovedMessage,
}

/// What moves a message out of its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MoveKind {
    /// Redrive from the source queue numbered so.
    Redrive { source: u32 },
    /// A step of the move task `handle` of the queue numbered `queue`.
    Task { queue: u32, handle: Uuid },
}

/// A message's metadata as it left its queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MovedMessage {
    /// Its payload's key in the group it left.
    pub storage_key: u64,
    pub enqueued_at: Millis,
    pub first_received_at: Millis,
    pub receive_count: u32,
    pub size: u32,
    pub priority: u8,
    /// Its FIFO message group or fair-queue tenant (the empty name: none).
    pub group: String,
    /// The dead-letter source it recorded in the queue it left.
    pub moved: Option<QueueName>,
}

/// How the target's group took one arrival: inserted (`refused` is `None`), or refused, saying
/// why (its queue is gone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveResult {
    pub seq: u64,
    pub refused: Option<String>,
}

/// What a group took from one source group's outbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lane {
    /// Every arrival numbered up to this was taken (inserted or refused).
    pub upto: u64,
    /// The arrivals refused whose source may not know yet: a repeated delivery answers the same.
    pub refused: BTreeMap<u64, String>,
}

impl Lane {
    /// Takes the arrival numbered `seq`, whose fate `take` decides when it is new; returns how
    /// it was taken, now or the first time.
    pub fn take(&mut self, seq: u64, take: impl FnOnce() -> Option<String>) -> MoveResult {
        if seq <= self.upto {
            return MoveResult {
                seq,
                refused: self.refused.get(&seq).cloned(),
            };
        }
        let refused = take();
        self.upto = seq;
        if let Some(reason) = &refused {
            self.refused.insert(seq, reason.clone());
        }
        MoveResult { seq, refused }
    }

    /// Forgets the refusals the source group no longer asks about: those below `acked_below`.
    pub fn forget_below(&mut self, acked_below: u64) {
        self.refused = self.refused.split_off(&acked_below);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_takes_each_number_once_and_answers_a_repeat_as_the_first_time() {
        let mut lane = Lane::default();
        let mut taken = Vec::new();
        for seq in [3, 5, 9] {
            let result = lane.take(seq, || {
                taken.push(seq);
                (seq == 5).then(|| "gone".to_string())
            });
            assert_eq!(result.refused.is_some(), seq == 5);
        }
        for seq in [3, 5, 9, 1] {
            let result = lane.take(seq, || panic!("{seq} was taken already"));
            assert_eq!(result.refused.as_deref(), (seq == 5).then_some("gone"));
        }
        assert_eq!(taken, [3, 5, 9]);
        assert_eq!(lane.upto, 9);
        lane.forget_below(5);
        assert_eq!(lane.refused.len(), 1);
        lane.forget_below(6);
        assert!(lane.refused.is_empty());
    }
}
