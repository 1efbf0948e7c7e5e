//! Long polling, parked in the engine. A receive with `wait_seconds` is one
//! `Command::ReceiveWait`: it delivers what is deliverable at once, or parks in its queue as a
//! waiter (a fresh UUID, registered on this node before the command is proposed). Whatever entry
//! then makes messages deliverable on the queue (a send, an ack that frees a FIFO group, a lease
//! or delay that ends) delivers to the parked receives in the order they parked, and this node,
//! applying that entry, hands the waiter its answer: a long poll is answered in the commit that
//! wakes it. The engine ends a wait at its deadline, answering it with nothing.
//!
//! Should no answer come by a moment after the deadline (this node lags, or skipped the entry by
//! installing a snapshot), the task ends the wait itself with `Command::EndWait` and takes
//! what this node applies up to it: the deliveries of an earlier entry, or nothing. A request
//! cancelled while it waits (its client went away, or a write failed) ends its wait the same
//! way, from a task of its own; messages delivered to it meanwhile wait out their lease, as
//! those of any consumer that vanished do.

use std::sync::Arc;
use std::time::Duration;

use raftq_engine::{proposal, Delivery, Payload, WaitStart};
use raftq_node::{Delivered, Node};
use tokio::time::{timeout, timeout_at, Instant};
use uuid::Uuid;

use crate::error::ApiError;
use crate::shared::{Shared, Written};

/// How long after its deadline a waiting task waits for the engine's answer before it ends the
/// wait itself: the leader proposes the tick that ends it at the deadline.
const ANSWER_GRACE: Duration = Duration::from_secs(1);

/// How long a task that ended its wait waits for this node to apply up to that end.
const END_APPLIED_WAIT: Duration = Duration::from_secs(5);

/// A receive request, checked.
pub struct ReceiveRequest {
    pub account: String,
    pub queue: String,
    pub max_messages: Option<i64>,
    pub lease_seconds: Option<i64>,
    /// FIFO queues: the receive's attempt ID (see `Command::Receive`).
    pub attempt_id: Option<String>,
    /// How long it may wait for messages; 0: not at all.
    pub wait_seconds: u32,
}

/// What a receive delivered, with the payloads to join.
#[derive(Default)]
pub struct Received {
    pub deliveries: Vec<Delivery>,
    pub payloads: Vec<(u64, Payload)>,
}

impl Received {
    /// Each delivery joined to its payload, found by storage key.
    pub fn messages(&self) -> Result<Vec<(&Delivery, &Payload)>, ApiError> {
        self.deliveries
            .iter()
            .map(|d| {
                self.payloads
                    .iter()
                    .find(|(key, _)| *key == d.meta.storage_key)
                    .map(|(_, payload)| (d, payload))
                    .ok_or_else(|| ApiError::internal("a delivered message has no payload"))
            })
            .collect()
    }
}

impl From<Delivered> for Received {
    fn from(answer: Delivered) -> Received {
        Received {
            deliveries: answer.deliveries,
            payloads: answer.payloads,
        }
    }
}

/// Receives, waiting up to `request.wait_seconds` for something to deliver.
pub async fn receive(shared: &Shared, request: ReceiveRequest) -> Result<Received, ApiError> {
    // A receive under an attempt ID goes first as a plain one, so that its answer is recorded
    // (and a retry replayed); only if it finds nothing does it park, without the ID.
    if request.wait_seconds == 0 || request.attempt_id.is_some() {
        let received = receive_now(shared, &request).await?;
        if request.wait_seconds == 0 || !received.deliveries.is_empty() {
            return Ok(received);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(request.wait_seconds.into());
    let waiter = Uuid::new_v4();
    let mut slot = shared
        .api
        .node
        .await_answer(&request.account, &request.queue, waiter)
        .await;
    // From here until the wait is known to have ended, dropping the guard ends it.
    let mut waiting = Waiting {
        node: Arc::clone(&shared.api.node),
        waiter: Some(waiter),
    };
    let wait = proposal::receive_wait(
        request.account,
        request.queue,
        request.max_messages,
        request.lease_seconds,
        request.wait_seconds.into(),
        waiter,
    );
    // A node error leaves the wait to the guard: it may have parked.
    match shared.commit(wait).await? {
        Ok(Written {
            outcome: WaitStart::Parked,
            ..
        }) => {}
        Ok(Written {
            outcome: WaitStart::Delivered(deliveries),
            payloads,
        }) => {
            waiting.waiter = None;
            return Ok(Received {
                deliveries,
                payloads,
            });
        }
        Err(refused) => {
            waiting.waiter = None;
            return Err(refused.into());
        }
    }
    if let Ok(Some(answer)) = timeout_at(deadline + ANSWER_GRACE, slot.answer()).await {
        waiting.waiter = None;
        return Ok(answer.into());
    }
    shared.write(proposal::end_wait(waiter)).await?;
    waiting.waiter = None;
    // The end, or an entry before it, answered the waiter; this node applies it soon.
    match timeout(END_APPLIED_WAIT, slot.answer()).await {
        Ok(Some(answer)) => Ok(answer.into()),
        _ => Ok(Received::default()),
    }
}

/// The plain receive of `request`: what is deliverable now, under its attempt ID.
async fn receive_now(shared: &Shared, request: &ReceiveRequest) -> Result<Received, ApiError> {
    let command = proposal::receive(
        request.account.clone(),
        request.queue.clone(),
        request.max_messages,
        request.lease_seconds,
        request.attempt_id.clone(),
    );
    let written = shared.commit(command).await??;
    Ok(Received {
        deliveries: written.outcome,
        payloads: written.payloads,
    })
}

/// A wait that may still be parked in the engine: dropped so (the client went away, a write
/// failed), it ends the wait from a task of its own.
struct Waiting {
    node: Arc<Node>,
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
        let node = Arc::clone(&self.node);
        runtime.spawn(async move {
            let (end, _) = proposal::end_wait(waiter).split();
            if let Err(e) = node.write(end).await {
                // The engine ends the wait at its deadline anyway.
                tracing::debug!(error = %e, %waiter, "ending an abandoned wait");
            }
        });
    }
}
