//! Moves to queues of other groups (see [`crate::outbox`]): a message leaves its queue for the
//! outbox, arrives in its target's group once, and leaves the outbox when that group took it, or
//! goes back where it came from when that group refused it.

use uuid::Uuid;

use crate::command::{Arrival, Outcome};
use crate::error::{EngineError, Result};
use crate::model::{MoveTaskStatus, QueueName};
use crate::outbox::{MoveKind, MoveResult, MovedMessage, Outgoing};
use crate::placement::METADATA_GROUP;
use crate::queue::{Msg, State, NO_GROUP};
use crate::rows::{PayloadOp, RowKey};

use super::Engine;

impl Engine {
    /// Takes message `seq` out of queue `qid` into the outbox, bound for queue `target` of
    /// another group. Returns whether it left (the message exists).
    pub(super) fn send_away(
        &mut self,
        qid: u32,
        seq: u64,
        target: Uuid,
        kind: MoveKind,
        dead_letter_source: Option<QueueName>,
    ) -> bool {
        let Some((msg, group)) = self.take_out(qid, seq) else {
            return false;
        };
        let number = self.alloc_seq();
        let message = MovedMessage {
            storage_key: msg.storage_key,
            enqueued_at: msg.enqueued_at,
            first_received_at: msg.first_received_at,
            receive_count: msg.receive_count,
            size: msg.size,
            priority: msg.priority,
            group,
            moved: msg.moved.map(|m| *m),
        };
        let outgoing = Outgoing {
            target,
            kind,
            dead_letter_source,
            message,
        };
        self.outbox.insert(number, outgoing);
        self.context.changes.rows.push(RowKey::Outbox(number));
        true
    }

    /// Takes the arrivals from group `from_group`'s outbox, each once (see
    /// [`crate::outbox::Lane`]): inserted at the end of its queue as a new message of it, or
    /// refused when the queue is not here (deleted since it was named).
    pub(super) fn insert_moved(
        &mut self,
        from_group: u32,
        acked_below: u64,
        arrivals: Vec<Arrival>,
    ) -> Result<Outcome> {
        if from_group == self.group {
            return Err(EngineError::invalid(
                "from_group",
                "must be another group than this one",
            ));
        }
        let mut lane = self.inbound.remove(&from_group).unwrap_or_default();
        lane.forget_below(acked_below);
        let results = arrivals
            .into_iter()
            .map(|arrival| lane.take(arrival.seq, || self.arrive(arrival)))
            .collect();
        self.inbound.insert(from_group, lane);
        self.context.changes.rows.push(RowKey::Inbound(from_group));
        Ok(Outcome::Arrived(results))
    }

    /// Inserts one new arrival into its queue; why not, when its queue is not here.
    fn arrive(&mut self, arrival: Arrival) -> Option<String> {
        let Arrival {
            outgoing, payload, ..
        } = arrival;
        let target = outgoing.target;
        let refused = || Some(format!("queue {target} does not exist"));
        let here = self.names.by_id(target);
        // Checked before a sequence number is taken, so that a refusal changes no state.
        let Some(qid) = here.filter(|qid| self.queues.contains_key(qid)) else {
            return refused();
        };
        let seq = self.alloc_seq();
        let m = outgoing.message;
        let now = self.context.now;
        let msg = Msg::arriving(seq, now, m.size, m.priority, outgoing.dead_letter_source);
        let Some(q) = self.queues.get_mut(&qid) else {
            return refused();
        };
        q.insert(&mut self.context, seq, msg, &m.group);
        let put = PayloadOp::Put(seq, payload);
        self.context.changes.payloads.push(put);
        None
    }

    /// Drops the outbox entries their target groups took; those refused go back: a redriven
    /// message to its source queue, pending (as when its dead-letter target does not accept
    /// it), and a task's message to the end of the task's queue, the task failing with the
    /// reason. A message whose queue is gone meanwhile is deleted, as that queue's were.
    pub(super) fn outbox_done(&mut self, results: Vec<MoveResult>) -> Result<Outcome> {
        for result in results {
            let Some(outgoing) = self.outbox.remove(&result.seq) else {
                continue;
            };
            self.context.changes.rows.push(RowKey::Outbox(result.seq));
            let key = outgoing.message.storage_key;
            let kept = match result.refused {
                None => false,
                Some(reason) => self.take_back(outgoing, reason),
            };
            if !kept {
                self.context.changes.payloads.push(PayloadOp::Delete(key));
            }
        }
        Ok(Outcome::OutboxDone)
    }

    /// Puts a refused message back where it came from; whether it went back (its queue is
    /// still here).
    fn take_back(&mut self, outgoing: Outgoing, reason: String) -> bool {
        let now = self.context.now;
        let (qid, state) = match outgoing.kind {
            MoveKind::Redrive { source } => (source, State::Pending),
            MoveKind::Task { queue, .. } => (queue, State::Visible),
        };
        if !self.queues.contains_key(&qid) {
            return false;
        }
        let seq = self.alloc_seq();
        let Some(q) = self.queues.get_mut(&qid) else {
            return false;
        };
        let m = outgoing.message;
        let msg = Msg {
            storage_key: m.storage_key,
            enqueued_at: m.enqueued_at,
            until: 0,
            first_received_at: m.first_received_at,
            receive_count: m.receive_count,
            size: m.size,
            group: NO_GROUP,
            state,
            priority: m.priority,
            moved: m.moved.clone().map(Box::new),
        };
        q.insert(&mut self.context, seq, msg, &m.group);
        match outgoing.kind {
            MoveKind::Redrive { .. } => q.dead_lettered = q.dead_lettered.saturating_sub(1),
            MoveKind::Task { handle, .. } => {
                if let Some(task) = q.move_tasks.iter_mut().find(|t| t.handle == handle) {
                    task.moved = task.moved.saturating_sub(1);
                    if task.running() {
                        // Named as a task whose target is deleted in its own group is.
                        let named = task.goes_to(m.moved.as_ref()).map(|to| task.gone(to));
                        task.failure_reason = Some(named.unwrap_or(reason));
                        task.end(MoveTaskStatus::Failed, now);
                        q.clear_move_timer(&mut self.context);
                    }
                    self.context.changes.rows.push(RowKey::MoveTasks(qid));
                }
            }
        }
        self.context.changes.rows.push(RowKey::Queue(qid));
        true
    }

    /// The outbox, in order: what this group's leader delivers.
    pub fn outbox(&self) -> impl Iterator<Item = (u64, &Outgoing)> {
        self.outbox.iter().map(|(&seq, o)| (seq, o))
    }

    /// Whether an unknown queue a move task names may be one of another group (this state is of
    /// a data group, or of the metadata group of a cluster of several): the move goes through
    /// the outbox, and the target's group says whether it exists.
    pub(super) fn has_other_groups(&self) -> bool {
        self.group != METADATA_GROUP || !self.placement.groups().is_empty()
    }
}
