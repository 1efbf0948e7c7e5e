//! Producers and consumers against random nodes, recording every attempt in the history.
//! FIFO producers retry a send whose outcome is unknown with the same deduplication ID, and now
//! and then resend a known ID on purpose; producers of the priority queue send priorities 0-9,
//! those of the other standard queue schedule one message in six a moment ahead; consumers
//! lease for a short time and leave some messages unacknowledged so that leases expire and
//! messages reach the dead-letter queues.

use std::sync::atomic::Ordering;
use std::time::Duration;

use raftq_check::history::{Event, History, Outcome, QueueKind};
use raftq_check::producer::{self, Message, Producer, Sent};
use raftq_check::workers::Switches;
use raftq_client::ClientError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::time::sleep;

use crate::clock::now_ms;
use crate::nodes::{Avoided, Nodes};

/// Lease length the consumers ask for.
pub const LEASE_SECONDS: u64 = 2;

/// How the name of the standard queue of strict priorities ends.
pub const PRIORITY_SUFFIX: &str = "-prio";

fn classify(e: &ClientError) -> Outcome {
    match e {
        ClientError::Api(a) if a.status == 503 || a.status >= 500 => {
            Outcome::Unknown(a.to_string())
        }
        ClientError::Api(a) => Outcome::Failed(a.code.clone()),
        other => Outcome::Unknown(other.to_string()),
    }
}

/// Whether a node answered a request: any API error is an answer, a `503` included (the node
/// is up and says to try again, perhaps elsewhere); a request that timed out or found no
/// server is not.
fn answered(result: &Result<Value, ClientError>) -> bool {
    !matches!(result, Err(e) if !matches!(e, ClientError::Api(_)))
}

/// An RFC 3339 time of the API (`lease_expires_at`, `moved_at`) in milliseconds since the Unix
/// epoch; `None` when absent or not a time.
pub fn millis(v: &Value) -> Option<u64> {
    let t = OffsetDateTime::parse(v.as_str()?, &Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Milliseconds since the Unix epoch as an RFC 3339 time with milliseconds.
fn rfc3339(ms: u64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// Which of the run's source queues `queue` is.
fn queue_kind(queue: &str) -> QueueKind {
    if queue.ends_with(PRIORITY_SUFFIX) {
        QueueKind::Priorities
    } else if queue.ends_with(".fifo") {
        QueueKind::Fifo
    } else {
        QueueKind::Standard
    }
}

/// Sends messages to `queue` until told to stop.
pub async fn produce(
    nodes: Nodes,
    history: History,
    queue: String,
    id: usize,
    switches: Switches,
    seed: u64,
) {
    let mut producer = ChaosProducer {
        nodes,
        avoided: Avoided::default(),
        rng: StdRng::seed_from_u64(seed),
    };
    let kind = queue_kind(&queue);
    producer::produce(&mut producer, &history, (&queue, kind), id, &switches).await;
}

/// A producer of the chaos run: it sends through the HTTP API of a node picked at random,
/// leaving alone for a while the nodes that did not answer.
struct ChaosProducer {
    nodes: Nodes,
    avoided: Avoided,
    rng: StdRng,
}

impl Producer for ChaosProducer {
    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn draw(&mut self) -> u64 {
        self.rng.random()
    }

    fn one_in(&mut self, n: u32) -> bool {
        self.rng.random_ratio(1, n)
    }

    async fn send(&mut self, queue: &str, message: &Message) -> (Outcome, Sent) {
        let mut json = json!({ "body": message.body, "message_group_id": message.group });
        if let Some(dedup) = &message.dedup {
            json["message_deduplication_id"] = dedup.as_str().into();
        }
        if let Some(priority) = message.placement.priority {
            json["priority"] = priority.into();
        }
        if let Some(at) = message.placement.deliver_at {
            json["deliver_at"] = rfc3339(at).into();
        }
        let (node, client) = self.nodes.pick(&self.avoided, &mut self.rng);
        let result = client.send(queue, &json).await;
        self.avoided.note(node, answered(&result));
        match result {
            Ok(reply) => (
                Outcome::Ok,
                Sent {
                    message_id: reply["message_id"].as_str().map(str::to_string),
                    duplicate: reply["duplicate"].as_bool().unwrap_or(false),
                    sequence_number: reply["sequence_number"].as_u64(),
                },
            ),
            Err(e) => (classify(&e), Sent::default()),
        }
    }

    /// A refused send is given up: the API refuses only what is wrong with the request.
    fn after_refusal(&self) -> Option<Duration> {
        None
    }

    fn pause(&mut self) -> Option<Duration> {
        None
    }
}

/// Receives from `queue` until told to stop, acknowledging a share of the deliveries.
pub async fn consume(nodes: Nodes, history: History, queue: String, switches: Switches, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut avoided = Avoided::default();
    while !switches.stop_consuming.load(Ordering::Relaxed) {
        let Some(messages) = receive(&nodes, &history, &queue, (&mut avoided, &mut rng)).await
        else {
            sleep(Duration::from_millis(100)).await;
            continue;
        };
        // One batch ack for the deliveries this consumer decided to acknowledge.
        let per_mille = switches.ack_per_mille.load(Ordering::Relaxed);
        let chosen: Vec<&Value> = messages
            .iter()
            .filter(|_| rng.random_range(0..1000) < per_mille)
            .collect();
        if !chosen.is_empty() {
            ack(&nodes, &history, &queue, &chosen, (&mut avoided, &mut rng)).await;
        }
    }
}

/// One receive from a node picked at random, recorded with each message it delivered; answers
/// the delivered messages, or `None` when the receive failed.
async fn receive(
    nodes: &Nodes,
    history: &History,
    queue: &str,
    (avoided, rng): (&mut Avoided, &mut StdRng),
) -> Option<Vec<Value>> {
    let (node, client) = nodes.pick(avoided, rng);
    let options = json!({"max_messages": 5, "lease_seconds": LEASE_SECONDS, "wait_seconds": 1});
    let start = now_ms();
    let result = client.receive(queue, &options).await;
    let end = now_ms();
    avoided.note(node, answered(&result));
    history.push(Event::Receive {
        queue: queue.into(),
        start,
        end,
        outcome: match &result {
            Ok(_) => Outcome::Ok,
            Err(e) => classify(e),
        },
    });
    let reply = result.ok()?;
    let messages = reply["messages"].as_array().cloned().unwrap_or_default();
    for m in &messages {
        history.push(delivery(queue, m, (start, end)));
    }
    Some(messages)
}

/// The delivery of message `m` by a receive that ran from `start` to `end`; a message without a
/// lease end is taken as leased until the receive's end.
fn delivery(queue: &str, m: &Value, (start, end): (u64, u64)) -> Event {
    Event::Deliver {
        queue: queue.into(),
        message_id: m["message_id"].as_str().unwrap_or_default().into(),
        body: m["body"].as_str().unwrap_or_default().into(),
        receipt: m["receipt"].as_str().unwrap_or_default().into(),
        receive_count: m["receive_count"].as_u64().unwrap_or(0),
        lease_expires_at: millis(&m["lease_expires_at"]).unwrap_or(end),
        sequence_number: m["sequence_number"].as_u64(),
        dead_letter_source: m["dead_letter_source"]["name"].as_str().map(str::to_string),
        moved_at: millis(&m["moved_at"]),
        priority: m["priority"].as_u64().and_then(|p| u8::try_from(p).ok()),
        first_received_at: millis(&m["first_received_at"]),
        start,
        end,
    }
}

/// One batch ack of the `chosen` messages at a node picked at random, each message's outcome
/// recorded.
async fn ack(
    nodes: &Nodes,
    history: &History,
    queue: &str,
    chosen: &[&Value],
    (avoided, rng): (&mut Avoided, &mut StdRng),
) {
    let receipts: Vec<String> = chosen
        .iter()
        .map(|m| m["receipt"].as_str().unwrap_or_default().to_string())
        .collect();
    let (node, client) = nodes.pick(avoided, rng);
    let start = now_ms();
    let result = client.ack(queue, &receipts).await;
    let end = now_ms();
    avoided.note(node, answered(&result));
    for (i, (m, receipt)) in chosen.iter().zip(receipts).enumerate() {
        let outcome = match &result {
            Ok(v) if v["results"][i]["ok"] == true => Outcome::Ok,
            Ok(v) => Outcome::Failed(
                v["results"][i]["error"]["code"]
                    .as_str()
                    .unwrap_or("?")
                    .into(),
            ),
            Err(e) => classify(e),
        };
        history.push(Event::Ack {
            queue: queue.into(),
            message_id: m["message_id"].as_str().unwrap_or_default().into(),
            receipt,
            start,
            end,
            outcome,
        });
    }
}
