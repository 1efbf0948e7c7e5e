//! Message move tasks: an operator's paced, cancellable move of a queue's messages (a
//! dead-letter queue's, typically) back to each message's dead-letter source or to a destination
//! of the same type. The task lives in the engine, so every replica holds it and a new leader's
//! timer carries it on; its steps fire as timers (`Timer::MoveTask`), each step in one entry,
//! and each message moves with the same one-step transfer as redrive, exactly once.

use uuid::Uuid;

use crate::command::{MoveTaskInput, Outcome};
use crate::error::{EngineError, Result};
use crate::model::{crn, limits, MoveTaskStatus, MoveTaskView, QueueName, QueueRef};
use crate::move_task::MoveTask;
use crate::outbox::MoveKind;
use crate::queue::{Queue, State};
use crate::rows::RowKey;
use crate::validate;

use super::Engine;

/// The most messages one step of a task looks at (moved, skipped, or passed by its filter), so
/// that no entry's apply grows with the depth of the queue.
const EXAMINED_PER_STEP: usize = 1024;

/// What a step does with the next message of its queue.
enum Next {
    /// No message of the task is left: it is complete.
    Done,
    /// Not one of the task's messages (the filter passes it by).
    Pass(u64),
    /// Leased by a consumer, or without a dead-letter source to go back to: left in place.
    Skip(u64),
    /// Moves to the queue numbered so.
    Move(u64, u32),
    /// Moves to the queue of another group with this UUID, through the outbox.
    Away(u64, Uuid),
    /// Its destination is gone: the task fails, saying why.
    Fail(String),
}

impl Engine {
    pub(super) fn start_move_task(
        &mut self,
        account: &str,
        reference: &str,
        handle: Uuid,
        input: MoveTaskInput,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let rate = validate::move_task(&input)?;
        let q = self.queue(qid)?;
        if let Some(running) = q.move_tasks.front().filter(|t| t.running()) {
            return Err(EngineError::MoveTaskRunning(running.handle.to_string()));
        }
        let destination = match &input.destination {
            Some(reference) => Some(self.check_destination(account, q, reference)?),
            None if q.sources.is_empty() && !self.context.elsewhere.has_sources => {
                return Err(EngineError::invalid(
                    "destination",
                    validate::DESTINATION_REQUIRED,
                ))
            }
            None => None,
        };
        if self.find_task(account, handle).is_some() {
            return Err(EngineError::invalid("task_handle", "is already in use"));
        }
        let mut filter = input.filter;
        if let Some(f) = &mut filter {
            f.storage_keys.sort_unstable();
            f.storage_keys.dedup();
        }
        let now = self.context.now;
        let mut task = MoveTask {
            handle,
            status: MoveTaskStatus::Running,
            destination,
            rate,
            filter,
            dry_run: input.dry_run,
            started_at: now,
            ended_at: None,
            to_move: 0,
            moved: 0,
            skipped: 0,
            failure_reason: None,
            end_seq: self.next_seq,
            cursor: 0,
            last_step_at: now,
            credit: 0,
        };
        let (owned, movable) = count(q, &task);
        task.to_move = movable;
        if task.dry_run || owned == 0 {
            task.end(MoveTaskStatus::Completed, now);
        }
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        q.move_tasks.push_front(task);
        q.move_tasks.truncate(limits::MOVE_TASKS_KEPT);
        q.arm_move_timer(&mut self.context);
        self.context.changes.rows.push(RowKey::MoveTasks(qid));
        self.task_outcome(qid, handle)
    }

    pub(super) fn cancel_move_task(
        &mut self,
        account: &str,
        reference: Option<&str>,
        text: &str,
    ) -> Result<Outcome> {
        let qid = match reference {
            Some(reference) => Some(self.lookup(account, reference)?),
            None => None,
        };
        let not_found = || EngineError::MoveTaskNotFound(text.to_string());
        let handle = Uuid::parse_str(text).map_err(|_| not_found())?;
        let qid = qid
            .or_else(|| self.find_task(account, handle))
            .ok_or_else(not_found)?;
        let now = self.context.now;
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(not_found());
        };
        let task = q
            .move_tasks
            .iter_mut()
            .find(|t| t.handle == handle)
            .ok_or_else(not_found)?;
        if !task.running() {
            return Err(EngineError::MoveTaskNotRunning(
                task.status.as_str().to_string(),
            ));
        }
        task.end(MoveTaskStatus::Cancelled, now);
        q.clear_move_timer(&mut self.context);
        self.context.changes.rows.push(RowKey::MoveTasks(qid));
        self.task_outcome(qid, handle)
    }

    /// One step of the running task of queue `qid`: moves the messages its pace pays for, oldest
    /// first, and completes or fails it when that is due; then sets the timer of the next step.
    pub(super) fn step_move_task(&mut self, qid: u32) {
        let now = self.context.now;
        let Some(q) = self.queues.get_mut(&qid) else {
            return;
        };
        q.clear_move_timer(&mut self.context);
        let Some(mut task) = q.running_task().cloned() else {
            return;
        };
        task.refill(now);
        let cursor = task.cursor;
        for _ in 0..EXAMINED_PER_STEP {
            match self.next_of(qid, &task) {
                Next::Done => {
                    task.end(MoveTaskStatus::Completed, now);
                    break;
                }
                Next::Pass(seq) => task.cursor = seq,
                Next::Skip(seq) => {
                    task.skipped += 1;
                    task.cursor = seq;
                }
                Next::Move(..) | Next::Away(..) if !task.can_move() => break,
                Next::Move(seq, target) => {
                    if self.transfer(qid, seq, target, None) {
                        task.moved += 1;
                        task.spend();
                    }
                    task.cursor = seq;
                }
                Next::Away(seq, target) => {
                    let kind = MoveKind::Task {
                        queue: qid,
                        handle: task.handle,
                    };
                    if self.send_away(qid, seq, target, kind, None) {
                        task.moved += 1;
                        task.spend();
                    }
                    task.cursor = seq;
                }
                Next::Fail(reason) => {
                    task.failure_reason = Some(reason);
                    task.end(MoveTaskStatus::Failed, now);
                    break;
                }
            }
        }
        debug_assert!(
            task.cursor >= cursor && task.cursor < task.end_seq.max(1),
            "a task's cursor only moves forward, over the task's own messages: each once"
        );
        if let Some(q) = self.queues.get_mut(&qid) {
            if let Some(slot) = q.move_tasks.front_mut() {
                *slot = task;
            }
            q.arm_move_timer(&mut self.context);
        }
        self.context.changes.rows.push(RowKey::MoveTasks(qid));
    }

    /// What the task does with the next message of queue `qid` past its cursor.
    fn next_of(&self, qid: u32, task: &MoveTask) -> Next {
        let Some((&seq, msg)) = self
            .queues
            .get(&qid)
            .and_then(|q| q.messages.range(task.cursor + 1..task.end_seq).next())
        else {
            return Next::Done;
        };
        let moved_at = msg.moved.is_some().then_some(msg.enqueued_at);
        if !task.matches(msg.storage_key, moved_at) {
            return Next::Pass(seq);
        }
        if msg.state == State::Leased {
            return Next::Skip(seq);
        }
        let Some(goes_to) = task.goes_to(msg.moved.as_deref()) else {
            return Next::Skip(seq);
        };
        match self.names.by_id(goes_to.id) {
            Some(target) => Next::Move(seq, target),
            None if self.has_other_groups() => Next::Away(seq, goes_to.id),
            None => Next::Fail(task.gone(goes_to)),
        }
    }

    /// The destination a task names: a queue of the account, of the source's type, not the
    /// source itself.
    fn check_destination(
        &self,
        account: &str,
        source: &Queue,
        reference: &str,
    ) -> Result<QueueName> {
        let target = self
            .find_anywhere(account, reference)
            .ok_or_else(|| EngineError::invalid("destination", validate::NO_SUCH_DESTINATION))?;
        if target.id == source.id {
            return Err(EngineError::invalid(
                "destination",
                "must differ from the source queue",
            ));
        }
        if target.queue_type != source.queue_type {
            return Err(EngineError::invalid(
                "destination",
                format!(
                    "must be of the same type as the source queue ({})",
                    source.queue_type.as_str()
                ),
            ));
        }
        Ok(QueueName {
            id: target.id,
            name: target.name.to_string(),
        })
    }

    /// The queue of `account` that holds the task `handle`.
    fn find_task(&self, account: &str, handle: Uuid) -> Option<u32> {
        self.names.of(account)?.values().copied().find(|qid| {
            self.queues
                .get(qid)
                .is_some_and(|q| q.move_tasks.iter().any(|t| t.handle == handle))
        })
    }

    fn task_outcome(&self, qid: u32, handle: Uuid) -> Result<Outcome> {
        let q = self.queue(qid)?;
        q.move_tasks
            .iter()
            .find(|t| t.handle == handle)
            .map(|t| Outcome::MoveTask(Box::new(self.task_view(q, t))))
            .ok_or_else(|| EngineError::MoveTaskNotFound(handle.to_string()))
    }

    /// The last move tasks of a queue, the newest first.
    pub fn move_tasks(&self, account: &str, reference: &str) -> Result<Vec<MoveTaskView>> {
        let q = self.queue(self.lookup(account, reference)?)?;
        Ok(q.move_tasks.iter().map(|t| self.task_view(q, t)).collect())
    }

    /// The storage keys of a queue's messages, in queue order: with the payloads, they tell
    /// which messages a move task's filter names by ID.
    pub fn storage_keys(&self, account: &str, reference: &str) -> Result<Vec<u64>> {
        let q = self.queue(self.lookup(account, reference)?)?;
        Ok(q.messages.values().map(|m| m.storage_key).collect())
    }

    fn task_view(&self, q: &Queue, t: &MoveTask) -> MoveTaskView {
        MoveTaskView {
            task_handle: t.handle,
            status: t.status,
            source: QueueRef {
                id: q.id,
                name: q.name.clone(),
                crn: crn(&self.region, &q.account, q.id),
            },
            destination: t.destination.as_ref().map(|d| self.name_ref(&q.account, d)),
            max_messages_per_second: t.rate,
            filter: t.filter.clone(),
            dry_run: t.dry_run,
            started_at: t.started_at,
            ended_at: t.ended_at,
            to_move: t.to_move,
            moved: t.moved,
            skipped: t.skipped,
            failure_reason: t.failure_reason.clone(),
        }
    }
}

/// How many messages of `q` a starting task owns, and how many of those could move now (not
/// leased, and with somewhere to go): one pass over the queue's metadata.
fn count(q: &Queue, task: &MoveTask) -> (u64, u64) {
    let mut owned = 0;
    let mut movable = 0;
    for (&seq, msg) in q.messages.range(..task.end_seq) {
        let moved_at = msg.moved.is_some().then_some(msg.enqueued_at);
        if !task.owns(seq, msg.storage_key, moved_at) {
            continue;
        }
        owned += 1;
        let has_place = task.destination.is_some() || msg.moved.is_some();
        if msg.state != State::Leased && has_place {
            movable += 1;
        }
    }
    (owned, movable)
}
