//! Long polls, served whole by one replica of the queue's group. A receive with a wait is one
//! `Command::ReceiveWait`: it delivers what is deliverable at once, or parks in its queue as a
//! waiter (registered in this replica before the command is proposed). Whatever entry then makes
//! messages deliverable on the queue (a send, an ack that frees a FIFO group, a lease or delay
//! that ends) delivers to the parked receives in the order they parked, and this replica,
//! applying that entry, hands the waiter its answer: a long poll is answered in the commit that
//! wakes it. The engine ends a wait at its deadline, answering it with nothing.
//!
//! Should no answer come by a moment after the deadline (this replica lags, or skipped the entry
//! by installing a snapshot), the poll ends the wait itself with `Command::EndWait` and takes
//! what this replica applies up to it: the deliveries of an earlier entry, or nothing. A poll
//! cancelled while it waits (its client went away, a write failed, or the node that forwarded it
//! gave up) ends its wait the same way, from a task of its own; messages delivered to it
//! meanwhile wait out their lease, as those of any consumer that vanished do.
//!
//! A node with no replica of the group forwards the poll to one that has (the router's
//! `remote`), which serves it as its own client's.

use std::sync::Arc;
use std::time::Duration;

use raftq_engine::typed::Answer;
use raftq_engine::{proposal, Command, EngineError, Outcome, WaitStart};
use raftq_store::Delivered;
use tokio::time::{timeout, timeout_at, Instant};
use uuid::Uuid;

use crate::error::NodeError;
use crate::member::GroupCore;

/// How long after its deadline a poll waits for the engine's answer before it ends the wait
/// itself: the leader proposes the tick that ends it at the deadline.
const ANSWER_GRACE: Duration = Duration::from_secs(1);

/// How long a poll that ended its wait waits for this replica to apply up to that end.
const END_APPLIED_WAIT: Duration = Duration::from_secs(5);

/// A long poll: a `Command::ReceiveWait`, what takes its outcome apart, its wait and its
/// waiter.
#[derive(Debug, Clone)]
pub struct LongPoll {
    command: Command,
    answer: Answer<Outcome, WaitStart>,
    wait: Duration,
    waiter: Uuid,
}

impl LongPoll {
    /// A receive of up to `max_messages` from queue `queue` of `account` that waits up to
    /// `wait_seconds` for messages, as parked receive `waiter` (a fresh UUID).
    pub fn new(
        account: String,
        queue: String,
        max_messages: Option<i64>,
        lease_seconds: Option<i64>,
        wait_seconds: u32,
        waiter: Uuid,
    ) -> LongPoll {
        let wait_seconds = wait_seconds.into();
        let receive = (max_messages, lease_seconds);
        LongPoll::build(account, queue, receive, wait_seconds, waiter)
    }

    /// The poll of `command`; `None` unless it is a `ReceiveWait`.
    pub(crate) fn of(command: Command) -> Option<LongPoll> {
        let Command::ReceiveWait {
            account,
            queue,
            max_messages,
            lease_seconds,
            wait_seconds,
            waiter,
        } = command
        else {
            return None;
        };
        let receive = (max_messages, lease_seconds);
        Some(LongPoll::build(
            account,
            queue,
            receive,
            wait_seconds,
            waiter,
        ))
    }

    fn build(
        account: String,
        queue: String,
        (max_messages, lease_seconds): (Option<i64>, Option<i64>),
        wait_seconds: i64,
        waiter: Uuid,
    ) -> LongPoll {
        let wait = Duration::from_secs(u64::try_from(wait_seconds).unwrap_or(0));
        let (command, answer) = proposal::receive_wait(
            account,
            queue,
            max_messages,
            lease_seconds,
            wait_seconds,
            waiter,
        )
        .split();
        LongPoll {
            command,
            answer,
            wait,
            waiter,
        }
    }

    pub(crate) fn command(&self) -> &Command {
        &self.command
    }

    /// The account and the queue reference (see `Command::queue_mut`).
    pub(crate) fn queue_mut(&mut self) -> Option<(&str, &mut String)> {
        self.command.queue_mut()
    }

    /// How long the poll may last once parked: its wait, the grace for its answer and the wait
    /// for its end to apply.
    pub(crate) fn lasts(&self) -> Duration {
        self.wait + ANSWER_GRACE + END_APPLIED_WAIT
    }
}

impl GroupCore {
    /// Serves `poll` in this replica (see the module): what it delivered, or why the group
    /// refused it.
    pub(crate) async fn long_poll(
        self: &Arc<Self>,
        poll: &LongPoll,
    ) -> Result<Result<Delivered, EngineError>, NodeError> {
        let deadline = Instant::now() + poll.wait;
        let mut slot = self.reader.waiters().register(poll.waiter);
        // From here until the wait is known to have ended, dropping the guard ends it.
        let mut waiting = Waiting {
            core: Arc::clone(self),
            waiter: Some(poll.waiter),
        };
        // A node error leaves the wait to the guard: it may have parked.
        let started = self.route(&poll.command).await?;
        // Every command applied answers; only Raft's own entries (blank, membership) do not.
        let result = (started.result)
            .unwrap_or_else(|| panic!("{} was applied without an outcome", poll.answer.kind()));
        match result.map(|outcome| poll.answer.take(outcome)) {
            Ok(WaitStart::Parked) => {}
            Ok(WaitStart::Delivered(deliveries)) => {
                waiting.waiter = None;
                return Ok(Ok(Delivered {
                    deliveries,
                    payloads: started.payloads,
                }));
            }
            Err(refused) => {
                waiting.waiter = None;
                return Ok(Err(refused));
            }
        }
        if let Ok(Some(answer)) = timeout_at(deadline + ANSWER_GRACE, slot.answer()).await {
            waiting.waiter = None;
            return Ok(Ok(answer));
        }
        self.route(&Command::EndWait {
            waiter: poll.waiter,
        })
        .await?;
        waiting.waiter = None;
        // The end, or an entry before it, answered the waiter; this replica applies it soon.
        match timeout(END_APPLIED_WAIT, slot.answer()).await {
            Ok(Some(answer)) => Ok(Ok(answer)),
            _ => Ok(Ok(Delivered::default())),
        }
    }
}

/// A wait that may still be parked in the engine: dropped so, it ends the wait from a task of
/// its own.
struct Waiting {
    core: Arc<GroupCore>,
    waiter: Option<Uuid>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(waiter) = self.waiter.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let core = Arc::clone(&self.core);
        runtime.spawn(async move {
            if let Err(e) = core.route(&Command::EndWait { waiter }).await {
                // The engine ends the wait at its deadline anyway.
                tracing::debug!(error = %e, %waiter, "ending an abandoned wait");
            }
        });
    }
}
