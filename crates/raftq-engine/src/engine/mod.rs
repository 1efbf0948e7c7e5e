//! The engine: applies entries to the state of every queue of every account, answers queries,
//! and materializes its rows for the store. This file holds the state and the apply loop (the
//! clock, timers, the dispatch of commands); each concept's rules are in a file of their own.
//! Where `Engine`'s methods live:
//! - here: `new`, `region`, `now`, `next_due`, `reclaim_backlog`, `apply`, `parked_count`,
//!   `message_bytes`, and the loop's `advance`, `fire`, `execute`;
//! - [`references`], finding queues: `named`, `find`, `find_id`, `locate`, `lookup`, `queue`,
//!   `alloc_seq` (over the queues' names, a type of their own in [`names`]);
//! - [`queues`]: `create_queue`, `patch_queue`, `delete_queue`, `purge`, `tick`,
//!   `reclaim_later`, `reclaim_some`, `check_redrive`, `foreign_reference`, `check_allow`;
//! - [`messages`]: `send`, `send_one`, `send_batch`, `receive`, `receive_request`, `lease`,
//!   `ack`, `change_lease`, `cancel_scheduled`;
//! - [`redrive`], where a message goes when its lease ends: `settle`, `set_state`, `accepts`,
//!   `reconsider_pending`, `move_message`, `move_away`, `transfer`, `take_out`;
//! - [`move_tasks`]: `start_move_task`, `cancel_move_task`, `step_move_task`, `next_of`,
//!   `check_destination`, `find_task`, `task_outcome`, `move_tasks`, `storage_keys`,
//!   `task_view`;
//! - [`waiters`], parked receives: `receive_wait`, `receive_or_park`, `park`, `unpark`,
//!   `end_wait`, `end_wait_of`, `end_waits_on`, `serve_waiters`, `serve_queue`;
//! - [`queries`]: `get_queue`, `list_queues`, `accounts`, `peek`, `scheduled`, `stats`,
//!   `stats_of`, `queue_gauges`, `dead_letter_sources`, `has_deliverable`, `ready_count`,
//!   `receive_wait_seconds`, `resolve`, `queue_ref`, `name_ref`, `view`, `meta`;
//! - [`stored`], the engine as rows and rebuilt from them: `row_value`, `export_rows`,
//!   `restore` and its `restore_*` steps, `message_row`, `is_reclaiming`, `numbers_ahead`,
//!   `restored_queue`;
//! - [`handoff`], a restored state made ready for a new cluster: `end_leases_and_waits`;
//! - [`outbox`], moves to queues of other groups: `send_away`, `insert_moved`, `arrive`,
//!   `outbox_done`, `take_back`, `outbox`, `has_other_groups`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use uuid::Uuid;

use crate::command::{Command, Elsewhere, Entry, Outcome, WaitAnswer};
use crate::context::{ApplyContext, Timer};
use crate::error::{EngineError, Result};
use crate::model::Millis;
use crate::outbox::{Lane, Outgoing};
use crate::placement::{GroupNumber, Placement, PlacementCommand, METADATA_GROUP};
use crate::queue::{Queue, ReclaimSet, State};
use crate::rows::{Changes, PayloadOp, RowKey};

mod handoff;
mod messages;
mod move_tasks;
mod names;
mod outbox;
mod queries;
mod queues;
mod redrive;
mod references;
mod stored;
mod waiters;

use names::QueueNames;
use redrive::LeaseEnd;

/// The result of applying one entry: the command's outcome (or why it was refused), what the
/// store must persist with it, and the parked receives whose wait the entry ended, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub result: Result<Outcome>,
    pub changes: Changes,
    pub answers: Vec<WaitAnswer>,
}

/// How many purged or deleted messages one tick deletes for good. Purging or deleting a queue
/// is then constant work in its own entry however deep the queue, and no later entry carries
/// more than this much cleanup.
pub const RECLAIM_PER_TICK: usize = 1024;

/// The queue service's state machine. Deterministic: the same entries give the same state.
#[derive(Debug, Clone)]
pub struct Engine {
    region: String,
    /// The Raft group this state is of (not stored: the node knows it from where the state
    /// lives), which the queues' views show.
    group: GroupNumber,
    next_seq: u64,
    next_qid: u32,
    queues: BTreeMap<u32, Queue>,
    names: QueueNames,
    /// Purged or deleted messages still to delete, by queue; ticks delete them in key order.
    reclaim: BTreeMap<u32, Reclaim>,
    /// Where each parked receive waits: its queue and its place in the queue's order.
    parked: HashMap<Uuid, (u32, u64)>,
    /// The cluster's placement, which only the metadata group's commands change.
    placement: Placement,
    /// Messages on their way to queues of other groups, by their number in this group.
    outbox: BTreeMap<u64, Outgoing>,
    /// What this group took from each other group's outbox, by that group.
    inbound: BTreeMap<GroupNumber, Lane>,
    context: ApplyContext,
}

/// Messages of one queue that purges or the queue's deletion took away, oldest set first.
#[derive(Debug, Clone)]
struct Reclaim {
    /// Every message below this sequence number is being reclaimed (all of them once the queue
    /// is deleted: `u64::MAX`).
    below: u64,
    sets: VecDeque<ReclaimSet>,
}

impl Engine {
    /// An empty state for a cluster serving `region`.
    pub fn new(region: impl Into<String>) -> Engine {
        Engine {
            region: region.into(),
            group: METADATA_GROUP,
            next_seq: 1,
            next_qid: 1,
            queues: BTreeMap::new(),
            names: QueueNames::default(),
            reclaim: BTreeMap::new(),
            parked: HashMap::new(),
            placement: Placement::default(),
            outbox: BTreeMap::new(),
            inbound: BTreeMap::new(),
            context: ApplyContext::default(),
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// This state as group `group`'s (group 1's unless told).
    pub fn in_group(mut self, group: GroupNumber) -> Engine {
        self.group = group;
        self
    }

    pub fn group(&self) -> GroupNumber {
        self.group
    }

    /// The cluster's placement (empty outside the metadata group).
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Applies a change to the placement, its rows among the entry's changes. The bootstrap
    /// adopts the queues this group holds already (see [`Placement::adopt`]).
    fn place(&mut self, change: PlacementCommand) -> Result<Outcome> {
        let bootstrap = matches!(change, PlacementCommand::Bootstrap { .. });
        let (outcome, mut changed) = self.placement.apply(self.context.now, change);
        if bootstrap && outcome.is_ok() {
            let held = self.queues.values();
            let held = held.map(|q| (q.account.clone(), q.name.clone(), q.id));
            changed.extend(self.placement.adopt(held));
        }
        let rows = changed.into_iter().map(RowKey::Placement);
        self.context.changes.rows.extend(rows);
        Ok(Outcome::Placed(outcome?))
    }

    /// The state machine's clock: the latest time of any applied entry.
    pub fn now(&self) -> Millis {
        self.context.now
    }

    /// When the next lease, delay, retention, deduplication, move task or wait timer falls due,
    /// or now while purged or deleted messages remain to be deleted; the leader proposes a
    /// [`Command::Tick`] then.
    pub fn next_due(&self) -> Option<Millis> {
        if !self.reclaim.is_empty() {
            return Some(self.context.now);
        }
        self.context.timers.first().map(|(due, _)| *due)
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
    /// is due, then runs the command; after each timer and after the command, parked receives
    /// take what became deliverable (so those that waited go before the command's own receive).
    /// A refused command changes nothing.
    pub fn apply(&mut self, entry: Entry) -> Applied {
        let before = (self.context.now, self.next_seq, self.next_qid);
        self.advance(entry.now);
        let result = self.execute(entry.command);
        self.serve_waiters();
        self.context.changes.rows.push(RowKey::Meta);
        debug_assert!(
            self.context.now >= before.0 && self.context.now >= entry.now,
            "the state's time never goes back, and reaches every entry's"
        );
        debug_assert!(
            self.next_seq >= before.1 && self.next_qid >= before.2,
            "sequence and queue numbers only grow: a number once given names nothing else"
        );
        debug_assert!(
            self.context.woken.is_empty(),
            "every queue woken by the entry had its parked receives served"
        );
        Applied {
            result,
            changes: std::mem::take(&mut self.context.changes),
            answers: std::mem::take(&mut self.context.answers),
        }
    }

    /// How many receives are parked, waiting for messages.
    pub fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// The sizes (body and attributes) of the messages in every queue, added up: most of what a
    /// snapshot of the state holds. Messages taken out by a purge or a queue's deletion are not
    /// counted, though their rows stay until they are deleted for good.
    pub fn message_bytes(&self) -> u64 {
        self.queues.values().map(Queue::bytes).sum()
    }

    fn advance(&mut self, now: Millis) {
        self.context.now = self.context.now.max(now);
        let mut fired: Millis = 0;
        while let Some(&(due, timer)) = self.context.timers.first() {
            if due > self.context.now {
                break;
            }
            debug_assert!(
                due >= fired,
                "timers fire in the order they fall due: what a timer sets is due from now on"
            );
            fired = due;
            self.context.timers.pop_first();
            self.fire(due, timer);
            // In the order things fell due: a message that became deliverable goes to the
            // receives parked then, before a later deadline ends one of them.
            self.serve_waiters();
        }
        debug_assert!(
            self.context
                .timers
                .first()
                .is_none_or(|(due, _)| *due > self.context.now),
            "every timer due by the state's time has fired"
        );
    }

    fn fire(&mut self, due: Millis, timer: Timer) {
        match timer {
            Timer::Message { qid, seq } => {
                let Some(q) = self.queues.get_mut(&qid) else {
                    return;
                };
                match q.messages.get(&seq).map(|m| m.state) {
                    Some(State::Delayed) => q.set_state(&mut self.context, seq, State::Visible, 0),
                    Some(State::Leased) => self.settle(qid, seq, LeaseEnd::Expired),
                    _ => {}
                }
            }
            Timer::Retention(qid) => {
                let Some(q) = self.queues.get_mut(&qid) else {
                    return;
                };
                q.clear_retention_timer(&mut self.context);
                // Expired by the time the next timer falls due (nothing else happens before),
                // not by the entry's: a timer armed for a message that has left since (a node
                // that restored its state has no such timer) must not take the next message
                // before a timer due in between, such as that message's lease end. The timer
                // armed next takes the rest in its turn.
                let next_due = self.context.timers.first().map_or(Millis::MAX, |&(d, _)| d);
                let until = self.context.now.min(next_due.saturating_sub(1)).max(due);
                for seq in q.expired(until) {
                    discard(q, &mut self.context, seq);
                }
                q.schedule_retention(&mut self.context);
            }
            Timer::Dedup(qid) => {
                if let Some(q) = self.queues.get_mut(&qid) {
                    q.prune_dedup(&mut self.context);
                }
            }
            Timer::MoveTask(qid) => self.step_move_task(qid),
            Timer::Attempts(qid) => {
                if let Some(q) = self.queues.get_mut(&qid) {
                    q.attempts.prune(&mut self.context, qid);
                }
            }
            Timer::Wait { qid, order } => self.end_wait(qid, order),
        }
    }

    /// Applies a client or system command: the queue-level ones here, those that send, lease
    /// and settle messages in [`Engine::execute_on_messages`].
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
            Command::Purge { account, queue } => self.purge(&account, &queue),
            Command::Tick => Ok(self.tick()),
            Command::Place { change } => self.place(change),
            Command::StartMoveTask {
                account,
                queue,
                task_handle,
                task,
            } => self.start_move_task(&account, &queue, task_handle, task),
            Command::CancelMoveTask {
                account,
                queue,
                task_handle,
            } => self.cancel_move_task(&account, queue.as_deref(), &task_handle),
            Command::CancelScheduled { account, queue, id } => {
                self.cancel_scheduled(&account, &queue, id)
            }
            Command::WithRemote { elsewhere, command } => {
                self.execute_with_remote(elsewhere, *command)
            }
            Command::InsertMoved {
                from_group,
                acked_below,
                arrivals,
            } => self.insert_moved(from_group, acked_below, arrivals),
            Command::OutboxDone { results } => self.outbox_done(results),
            message_command => self.execute_on_messages(message_command),
        }
    }

    /// Applies `command` with the queues of other groups it names at hand.
    fn execute_with_remote(&mut self, elsewhere: Elsewhere, command: Command) -> Result<Outcome> {
        if matches!(command, Command::WithRemote { .. }) {
            return Err(EngineError::invalid(
                "command",
                "must not describe other groups' queues twice",
            ));
        }
        self.context.elsewhere = elsewhere;
        let result = self.execute(command);
        self.context.elsewhere = Elsewhere::default();
        result
    }

    /// Applies a command that sends, leases or settles messages; [`Engine::execute`] passes
    /// only those here.
    fn execute_on_messages(&mut self, command: Command) -> Result<Outcome> {
        match command {
            Command::Send {
                account,
                queue,
                message,
            } => self.send(&account, &queue, message),
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
                attempt_id,
            } => self.receive(&account, &queue, max_messages, lease_seconds, attempt_id),
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
                delay_seconds,
            } => self.change_lease(&account, &queue, receipt, lease_seconds, delay_seconds),
            Command::ReceiveWait {
                account,
                queue,
                max_messages: max,
                lease_seconds: lease,
                wait_seconds: wait,
                waiter,
            } => self.receive_wait(&account, &queue, (max, lease), wait, waiter),
            Command::EndWait { waiter } => Ok(self.end_wait_of(waiter)),
            other => unreachable!("execute handles {other:?} itself"),
        }
    }
}

/// Removes a message for good: from its queue and, through the store, its payload.
fn discard(q: &mut Queue, context: &mut ApplyContext, seq: u64) {
    if let Some(msg) = q.remove(context, seq) {
        context
            .changes
            .payloads
            .push(PayloadOp::Delete(msg.storage_key));
    }
}
