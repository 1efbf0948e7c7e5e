//! Receives: a plain receive, or a long poll that waits up to its `wait_seconds` for messages,
//! served whole by a replica of the queue's group (see `raftq_node::LongPoll`).

use raftq_engine::{proposal, Delivery, Payload};
use raftq_node::{Delivered, LongPoll};
use uuid::Uuid;

use crate::error::ApiError;
use crate::shared::Shared;

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
    // (and a retry replayed); only if it finds nothing does it wait, without the ID.
    if request.wait_seconds == 0 || request.attempt_id.is_some() {
        let received = receive_now(shared, &request).await?;
        if request.wait_seconds == 0 || !received.deliveries.is_empty() {
            return Ok(received);
        }
    }
    let poll = LongPoll::new(
        request.account,
        request.queue,
        request.max_messages,
        request.lease_seconds,
        request.wait_seconds,
        Uuid::new_v4(),
    );
    Ok(shared.api.node.long_poll(poll).await??.into())
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
