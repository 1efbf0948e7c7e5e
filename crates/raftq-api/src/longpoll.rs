//! Long polling. A receive with `wait_seconds` that finds nothing waits for a wake-up of its
//! queue (the node broadcasts the UUID of every queue that gains a deliverable message as
//! entries apply) or for the deadline, and only then receives again. The log is never polled:
//! each further receive follows a wake-up. A lagged subscription may have missed the wake-up it
//! waits for, so it counts as one. The subscription is taken before the first receive, so a
//! message that becomes deliverable between the two cannot be missed.
//!
//! One wake-up wakes every waiter of the queue on this node, and most of them would find nothing:
//! a FIFO group freed by an ack feeds one receive, not the 31 other consumers waiting on it. So a
//! woken waiter receives again only while the queue, as this node applied it, has more places a
//! receive could start from than the receives this node already sent after wake-ups will take
//! ([`Claims`]); the others wait for the next wake-up or for one of those receives to end, which
//! wakes them too. This only decides when to ask: every receive still goes through the log.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use raftq_engine::{Command, Delivery, Outcome, Payload};
use raftq_node::{Query, QueryResult};
use tokio::sync::broadcast::{self, error::RecvError, Receiver};
use tokio::time::{timeout_at, Instant};
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::Shared;

/// A receive request, checked.
pub struct ReceiveRequest {
    pub account: String,
    pub queue: String,
    pub max_messages: Option<i64>,
    pub lease_seconds: Option<i64>,
    pub wait: Duration,
}

/// What a receive delivered, with the payloads to join.
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

/// Why a wait for a wake-up ended.
enum Wake {
    /// The queue may have something to deliver.
    Woken,
    /// The node stopped broadcasting; nothing will wake this wait.
    Closed,
}

/// Receives, waiting up to `request.wait` for something to deliver.
pub async fn receive(shared: &Shared, request: ReceiveRequest) -> Result<Received, ApiError> {
    let deadline = Instant::now() + request.wait;
    let mut wakeups = shared.api.node.wakeups();
    let mut ended = shared.claims.subscribe();
    let first = receive_once(shared, &request).await?;
    if !first.deliveries.is_empty() || request.wait.is_zero() {
        return Ok(first);
    }
    let queue_id = queue_uuid(shared, &request).await?;
    let wants = request
        .max_messages
        .and_then(|m| usize::try_from(m).ok())
        .unwrap_or(1);
    loop {
        match timeout_at(deadline, next_wakeup(&mut wakeups, &mut ended, queue_id)).await {
            Err(_elapsed) => return Ok(first),
            Ok(Wake::Closed) => {
                tokio::time::sleep_until(deadline).await;
                return Ok(first);
            }
            Ok(Wake::Woken) => {
                let ready = shared
                    .api
                    .node
                    .with_engine(|e| e.ready_count(&request.account, &request.queue))
                    .unwrap_or(usize::MAX);
                let Some(_claim) = shared.claims.claim(queue_id, ready, wants) else {
                    continue;
                };
                let again = receive_once(shared, &request).await?;
                if !again.deliveries.is_empty() {
                    return Ok(again);
                }
            }
        }
    }
}

/// How many wake-ups a waiter may fall behind on the ends of claims before it is told it lagged
/// (and so re-checks).
const ENDED_BACKLOG: usize = 1024;

/// The receives this node sent after wake-ups and that have not ended, by queue: how many
/// messages each may take (its `max_messages`). A claim ends when its receive is answered,
/// fails or is abandoned, and its end is broadcast so that the waiters it held back check again.
pub(crate) struct Claims {
    taken: Mutex<HashMap<Uuid, usize>>,
    ended: broadcast::Sender<Uuid>,
}

impl Default for Claims {
    fn default() -> Claims {
        Claims {
            taken: Mutex::default(),
            ended: broadcast::channel(ENDED_BACKLOG).0,
        }
    }
}

impl Claims {
    /// The queues whose claims end from now on.
    fn subscribe(&self) -> Receiver<Uuid> {
        self.ended.subscribe()
    }

    /// Claims `wants` messages of `queue`, which has `ready` places to start a receive from, if
    /// the claims already made take fewer than that; `None` when they take them all.
    fn claim(&self, queue: Uuid, ready: usize, wants: usize) -> Option<Claim<'_>> {
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        let held = taken.entry(queue).or_default();
        if *held >= ready {
            return None;
        }
        *held = held.saturating_add(wants);
        Some(Claim {
            claims: self,
            queue,
            wants,
        })
    }
}

/// One receive counted in [`Claims`] until it is dropped.
struct Claim<'a> {
    claims: &'a Claims,
    queue: Uuid,
    wants: usize,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut taken = self
            .claims
            .taken
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = taken.get_mut(&self.queue) {
            *held = held.saturating_sub(self.wants);
            if *held == 0 {
                taken.remove(&self.queue);
            }
        }
        drop(taken);
        // No subscriber is no error: nobody waits.
        let _ = self.claims.ended.send(self.queue);
    }
}

async fn receive_once(shared: &Shared, request: &ReceiveRequest) -> Result<Received, ApiError> {
    let written = shared
        .write(Command::Receive {
            account: request.account.clone(),
            queue: request.queue.clone(),
            max_messages: request.max_messages,
            lease_seconds: request.lease_seconds,
        })
        .await?;
    match written.outcome {
        Outcome::Received(deliveries) => Ok(Received {
            deliveries,
            payloads: written.payloads,
        }),
        _ => Err(ApiError::unexpected_answer()),
    }
}

/// The UUID the wake-ups name the queue by. The wake-ups come from this node's own applies, so
/// its own applied state is the one to ask, without a quorum round; only a node that has not
/// applied the queue's creation yet asks the leader.
async fn queue_uuid(shared: &Shared, request: &ReceiveRequest) -> Result<Uuid, ApiError> {
    let local = shared
        .api
        .node
        .with_engine(|e| e.resolve(&request.account, &request.queue).ok())
        .ok()
        .flatten();
    if let Some(queue) = local {
        return Ok(queue.id);
    }
    let query = Query::GetQueue {
        account: request.account.clone(),
        queue: request.queue.clone(),
    };
    shared
        .read_for(query, |r| match r {
            QueryResult::Queue(view) => Some(view.id),
            _ => None,
        })
        .await
}

/// The next wake-up of `queue_id`: a message became deliverable, or a claim on it ended.
async fn next_wakeup(
    wakeups: &mut Receiver<Uuid>,
    ended: &mut Receiver<Uuid>,
    queue_id: Uuid,
) -> Wake {
    loop {
        let heard = tokio::select! {
            heard = wakeups.recv() => heard,
            heard = ended.recv() => heard,
        };
        match heard {
            Ok(id) if id == queue_id => return Wake::Woken,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return Wake::Woken,
            Err(RecvError::Closed) => return Wake::Closed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_hold_back_waiters_while_they_take_every_ready_place() {
        let claims = Claims::default();
        let (queue, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        // One FIFO group ready: the first waiter goes, the next one waits.
        let first = claims.claim(queue, 1, 10).expect("the first claim");
        assert!(claims.claim(queue, 1, 10).is_none());
        let _apart = claims.claim(other, 1, 10).expect("queues are apart");
        // 25 messages ready: with the first claim, two more receives of 10 cover them.
        let _second = claims.claim(queue, 25, 10).expect("a second claim");
        let _third = claims.claim(queue, 25, 10).expect("a third claim");
        assert!(claims.claim(queue, 25, 10).is_none());
        drop(first);
        assert!(claims.claim(queue, 25, 10).is_some());
    }

    #[test]
    fn an_ended_claim_lets_the_next_waiter_go() {
        let claims = Claims::default();
        let queue = Uuid::from_u128(1);
        let mut ended = claims.subscribe();
        let first = claims.claim(queue, 1, 1).expect("the first claim");
        assert!(claims.claim(queue, 1, 1).is_none());
        drop(first);
        assert_eq!(ended.try_recv().ok(), Some(queue));
        assert!(claims.claim(queue, 1, 1).is_some());
        assert!(claims.claim(queue, 0, 1).is_none(), "nothing ready");
    }
}
