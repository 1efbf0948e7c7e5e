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
//! (`claims`); the others wait for the next wake-up or for one of those receives to end, which
//! wakes them too. This only decides when to ask: every receive still goes through the log.

use std::time::Duration;

use raftq_engine::{Command, Delivery, Outcome, Payload};
use raftq_node::{Query, QueryResult};
use tokio::sync::broadcast::{error::RecvError, Receiver};
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
    pub attempt_id: Option<String>,
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

async fn receive_once(shared: &Shared, request: &ReceiveRequest) -> Result<Received, ApiError> {
    let written = shared
        .write(Command::Receive {
            account: request.account.clone(),
            queue: request.queue.clone(),
            max_messages: request.max_messages,
            lease_seconds: request.lease_seconds,
            attempt_id: request.attempt_id.clone(),
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
