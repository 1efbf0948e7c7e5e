//! What one entry's apply lends to the queues it touches: the clock of the entry, the global timer
//! set and its [`Timer`]s, the rows dirtied, the queues woken for their parked receives,
//! the answers given to them, and the queues of other groups its command names.

use std::collections::BTreeSet;

use crate::command::{Elsewhere, WaitAnswer};
use crate::model::Millis;
use crate::rows::Changes;

/// Something due at a time; the engine fires these in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// A delay or lease of one message ends.
    Message { qid: u32, seq: u64 },
    /// The queue's oldest message may have reached its retention limit.
    Retention(u32),
    /// The queue's oldest deduplication record may have left the window.
    Dedup(u32),
    /// The queue's running move task may take its next step.
    MoveTask(u32),
    /// The queue's oldest receive attempt record may have left the window.
    Attempts(u32),
    /// The wait of the receive parked in `qid` as `order` ends.
    Wait { qid: u32, order: u64 },
}

/// Deduplication records are pruned at whole seconds: the records of a queue that leave the
/// window within one second go in one tick, not one tick each (after a burst of sends, a tick
/// every few milliseconds for the length of the window). Sends ignore a record past its end
/// whether it was pruned yet or not, so the rounding shows nowhere but in when rows go. The due
/// time depends on the record alone, so a node that restored its state arms the same timers as
/// one that applied every entry.
const PRUNE_EVERY_MS: Millis = 1_000;

/// When the record that leaves the window at `expires` is pruned (deduplication and receive
/// attempt records alike).
pub(crate) fn prune_due(expires: Millis) -> Millis {
    expires.div_ceil(PRUNE_EVERY_MS) * PRUNE_EVERY_MS
}

/// The engine's clock, timer set and change log, lent to queue mutations, with the queues that
/// gained a deliverable message since their parked receives were last served and the answers
/// to parked receives the entry gave.
#[derive(Debug, Clone, Default)]
pub(crate) struct ApplyContext {
    pub now: Millis,
    pub timers: BTreeSet<(Millis, Timer)>,
    pub changes: Changes,
    pub woken: Vec<u32>,
    pub answers: Vec<WaitAnswer>,
    /// The queues of other groups the entry's command names (see [`Command::WithRemote`]).
    ///
    /// [`Command::WithRemote`]: crate::Command::WithRemote
    pub elsewhere: Elsewhere,
}
