//! The simulation's producers and consumers, as the chaos run's: they send to the source queues
//! (a standard queue whose groups are a fair queue's tenants and some of whose messages are
//! scheduled a moment ahead, a standard queue of strict priorities, and a FIFO queue with
//! deduplication and resends), receive from every queue with a short lease, acknowledge a share
//! of what they receive, and record every operation and its outcome in the history the checker
//! judges.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use raftq_check::history::{Event, History, Outcome, QueueKind};
use raftq_check::producer::{self, Message, Producer, Sent};
use raftq_engine::{Command, EngineError, NewMessage, Outcome as Done};
use raftq_node::{NodeError, NodeId, Response};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::sleep;
use uuid::Uuid;

use crate::api::{CallError, Reply, Request};
use crate::world::Control;

/// The account every queue of the simulation belongs to.
pub const ACCOUNT: &str = "sim";
/// Lease length the consumers ask for.
pub const LEASE_SECONDS: i64 = 2;
/// The standard queue whose producers send priorities 0-9 (and no delays), served in strict
/// order.
pub const PRIORITY_QUEUE: &str = "sim-prio";

/// Shared switches of the workers, and the members they may call.
#[derive(Debug, Clone, Default)]
pub struct Switches {
    pub workers: raftq_check::workers::Switches,
    pub members: Arc<Mutex<Vec<NodeId>>>,
}

impl Switches {
    /// A member picked with `rng`.
    fn pick(&self, rng: &mut StdRng) -> NodeId {
        let members = self.members.lock().unwrap_or_else(PoisonError::into_inner);
        members[rng.random_range(0..members.len())]
    }
}

/// How a write ended, from the client's side, and the state machine's answer when it committed.
fn classify(
    reply: Result<Reply, CallError>,
) -> (Outcome, Option<Done>, Vec<(u64, raftq_engine::Payload)>) {
    match reply {
        Ok(Reply::Write(Ok(Response {
            result: Some(Ok(done)),
            payloads,
        }))) => (Outcome::Ok, Some(done), payloads),
        Ok(Reply::Write(Ok(Response {
            result: Some(Err(refused)),
            ..
        }))) => (Outcome::Failed(code(&refused)), None, Vec::new()),
        // Not proposed: the node says no leader took it, it could not reach the leader or may
        // not send to it, or no node ran to ask.
        Ok(Reply::Write(Err(
            NodeError::Unavailable(_) | NodeError::LeaderUnreachable(_) | NodeError::OtherBuild(_),
        )))
        | Err(CallError::Refused(_)) => (Outcome::Failed("unavailable".into()), None, Vec::new()),
        Ok(Reply::Write(Err(error))) => (Outcome::Unknown(error.to_string()), None, Vec::new()),
        Err(error) => (Outcome::Unknown(error.to_string()), None, Vec::new()),
        Ok(other) => (Outcome::Unknown(format!("{other:?}")), None, Vec::new()),
    }
}

fn code(error: &EngineError) -> String {
    error.code().to_string()
}

/// Writes `command` through node `id`.
pub async fn write(control: &Control, id: NodeId, command: Command) -> Result<Reply, CallError> {
    control
        .api
        .call(id, Request::Write(Box::new(command)))
        .await
}

/// Which of the simulation's source queues `queue` is.
fn queue_kind(queue: &str) -> QueueKind {
    match queue {
        PRIORITY_QUEUE => QueueKind::Priorities,
        q if q.ends_with(".fifo") => QueueKind::Fifo,
        _ => QueueKind::Standard,
    }
}

/// Sends messages to `queue` until told to stop.
pub async fn produce(
    control: Control,
    history: History,
    queue: String,
    id: usize,
    switches: Switches,
    seed: u64,
) {
    let kind = queue_kind(&queue);
    let workers = switches.workers.clone();
    let mut producer = SimProducer {
        control,
        switches,
        rng: StdRng::seed_from_u64(seed),
    };
    producer::produce(&mut producer, &history, (&queue, kind), id, &workers).await;
}

/// A producer of the simulation: it writes its sends through a member picked at random, by the
/// simulated clock.
struct SimProducer {
    control: Control,
    switches: Switches,
    rng: StdRng,
}

impl Producer for SimProducer {
    fn now_ms(&self) -> u64 {
        self.control.clock.now_ms()
    }

    fn draw(&mut self) -> u64 {
        self.rng.random()
    }

    fn one_in(&mut self, n: u32) -> bool {
        self.rng.random_ratio(1, n)
    }

    async fn send(&mut self, queue: &str, message: &Message) -> (Outcome, Sent) {
        let id = Uuid::from_u128(self.rng.random());
        let mut new = NewMessage::new(id, &message.body).in_group(&message.group);
        new.message_deduplication_id.clone_from(&message.dedup);
        new.priority = message.placement.priority.map(i64::from);
        new.deliver_at = message
            .placement
            .deliver_at
            .and_then(|at| i64::try_from(at).ok());
        let command = Command::Send {
            account: ACCOUNT.into(),
            queue: queue.into(),
            message: new,
        };
        let node = self.switches.pick(&mut self.rng);
        let (outcome, done, _) = classify(write(&self.control, node, command).await);
        let sent = match done {
            Some(Done::Sent(sent)) => Sent {
                message_id: Some(sent.message_id.to_string()),
                duplicate: sent.duplicate,
                sequence_number: sent.sequence_number,
            },
            _ => Sent::default(),
        };
        (outcome, sent)
    }

    /// A refused send is sent again: the node may have refused it for want of a leader.
    fn after_refusal(&self) -> Option<Duration> {
        Some(Duration::from_millis(50))
    }

    fn pause(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(self.rng.random_range(5..40)))
    }
}

/// Receives from `queue` until told to stop, acknowledging a share of the deliveries.
pub async fn consume(
    control: Control,
    history: History,
    queue: String,
    switches: Switches,
    seed: u64,
) {
    let mut consumer = Consumer {
        control,
        history,
        queue,
        switches,
        rng: StdRng::seed_from_u64(seed),
    };
    while !consumer
        .switches
        .workers
        .stop_consuming
        .load(Ordering::SeqCst)
    {
        match consumer.receive().await {
            None => {
                let pause = consumer.rng.random_range(50..150);
                sleep(Duration::from_millis(pause)).await;
            }
            Some(chosen) if chosen.is_empty() => {}
            Some(chosen) => consumer.ack(chosen).await,
        }
    }
}

/// One consumer of a queue, with the history it records into.
struct Consumer {
    control: Control,
    history: History,
    queue: String,
    switches: Switches,
    rng: StdRng,
}

impl Consumer {
    /// Receives once and records every delivery; `None` when nothing was delivered, else the
    /// deliveries chosen to be acknowledged (message id and receipt).
    async fn receive(&mut self) -> Option<Vec<(String, String)>> {
        let command = Command::Receive {
            account: ACCOUNT.into(),
            queue: self.queue.clone(),
            max_messages: Some(5),
            lease_seconds: Some(LEASE_SECONDS),
            attempt_id: None,
        };
        let start = self.control.clock.now_ms();
        let node = self.switches.pick(&mut self.rng);
        let (outcome, done, payloads) = classify(write(&self.control, node, command).await);
        let end = self.control.clock.now_ms();
        self.history.push(Event::Receive {
            queue: self.queue.clone(),
            start,
            end,
            outcome,
        });
        let deliveries = match done {
            Some(Done::Received(deliveries)) if !deliveries.is_empty() => deliveries,
            _ => return None,
        };
        let mut chosen = Vec::new();
        for delivery in &deliveries {
            let Some((_, payload)) = payloads
                .iter()
                .find(|(key, _)| *key == delivery.meta.storage_key)
            else {
                continue;
            };
            let message_id = payload.message_id.to_string();
            self.history.push(Event::Deliver {
                queue: self.queue.clone(),
                message_id: message_id.clone(),
                body: payload.body.clone(),
                receipt: delivery.receipt.clone(),
                receive_count: u64::from(delivery.meta.receive_count),
                lease_expires_at: delivery.lease_expires_at,
                sequence_number: delivery.meta.fifo.then_some(delivery.meta.seq),
                dead_letter_source: delivery
                    .meta
                    .dead_letter_source
                    .as_ref()
                    .map(|q| q.name.clone()),
                moved_at: delivery.meta.moved_at,
                priority: delivery.meta.priority,
                first_received_at: delivery.meta.first_received_at,
                start,
                end,
            });
            let ack_per_mille = self.switches.workers.ack_per_mille.load(Ordering::SeqCst);
            if self.rng.random_range(0..1000) < ack_per_mille {
                chosen.push((message_id, delivery.receipt.clone()));
            }
        }
        Some(chosen)
    }

    /// Acknowledges `chosen` (message id and receipt) in one call and records each one's outcome.
    async fn ack(&mut self, chosen: Vec<(String, String)>) {
        let command = Command::Ack {
            account: ACCOUNT.into(),
            queue: self.queue.clone(),
            receipts: chosen.iter().map(|(_, receipt)| receipt.clone()).collect(),
        };
        let start = self.control.clock.now_ms();
        let node = self.switches.pick(&mut self.rng);
        let (outcome, done, _) = classify(write(&self.control, node, command).await);
        let end = self.control.clock.now_ms();
        let results = match done {
            Some(Done::Acked(results)) => results,
            _ => Vec::new(),
        };
        for (i, (message_id, receipt)) in chosen.into_iter().enumerate() {
            let outcome = match results.get(i) {
                Some(result) => match &result.result {
                    Ok(()) => Outcome::Ok,
                    Err(refused) => Outcome::Failed(code(refused)),
                },
                None => outcome.clone(),
            };
            self.history.push(Event::Ack {
                queue: self.queue.clone(),
                message_id,
                receipt,
                start,
                end,
                outcome,
            });
        }
    }
}
