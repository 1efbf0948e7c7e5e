//! Producers and consumers against random nodes, recording every attempt in the history.
//! FIFO producers retry a send whose outcome is unknown with the same deduplication ID, and now
//! and then resend a known ID on purpose; producers of the priority queue send priorities 0-9,
//! those of the other standard queue schedule one message in six a moment ahead; consumers
//! lease for a short time and leave some messages unacknowledged so that leases expire and
//! messages reach the dead-letter queues.

use std::sync::atomic::Ordering;
use std::time::Duration;

use raftq_check::history::{Event, History, Outcome, Placement, QueueKind};
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
    let fifo = queue.ends_with(".fifo");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut avoided = Avoided::default();
    let mut n = 0u64;
    while !switches.stop_producing.load(Ordering::Relaxed) {
        n += 1;
        let body = format!("{queue}/{id}/{n}");
        // FIFO groups of this producer; on the standard queue, tenants of a fair queue: one
        // tenant all producers share sends three times as much as each producer's own.
        let group = match (fifo, n % 4) {
            (true, _) => format!("p{id}-g{}", n % 3),
            (false, 0) => format!("tenant-{id}"),
            (false, _) => "tenant-shared".to_string(),
        };
        let placement = Placement::pick(queue_kind(&queue), now_ms(), rng.random());
        let mut ok = false;
        for _attempt in 0..20 {
            let outcome = send(
                &nodes,
                &history,
                &queue,
                (&body, &body, &group, placement),
                (&mut avoided, &mut rng),
            )
            .await;
            match outcome {
                Outcome::Unknown(_) if fifo => sleep(Duration::from_millis(100)).await,
                Outcome::Unknown(_) => {
                    // Not retried (a standard queue would get a second copy), but not hammered.
                    sleep(Duration::from_millis(100)).await;
                    break;
                }
                Outcome::Ok => {
                    ok = true;
                    break;
                }
                _ => break,
            }
        }
        if fifo && ok && rng.random_ratio(1, 8) {
            let resend = format!("resend:{body}");
            send(
                &nodes,
                &history,
                &queue,
                (&resend, &body, &group, placement),
                (&mut avoided, &mut rng),
            )
            .await;
        }
    }
}

/// One send of `body` (with deduplication ID `dedup` on a FIFO queue) in `group`, placed by
/// `placement`.
async fn send(
    nodes: &Nodes,
    history: &History,
    queue: &str,
    (body, dedup, group, placement): (&str, &str, &str, Placement),
    (avoided, rng): (&mut Avoided, &mut StdRng),
) -> Outcome {
    let fifo = queue.ends_with(".fifo");
    let mut message = json!({ "body": body, "message_group_id": group });
    if fifo {
        message["message_deduplication_id"] = dedup.into();
    }
    if let Some(priority) = placement.priority {
        message["priority"] = priority.into();
    }
    if let Some(at) = placement.deliver_at {
        message["deliver_at"] = rfc3339(at).into();
    }
    let (node, client) = nodes.pick(avoided, rng);
    let start = now_ms();
    let result = client.send(queue, &message).await;
    let end = now_ms();
    avoided.note(node, answered(&result));
    let (outcome, reply) = match result {
        Ok(v) => (Outcome::Ok, v),
        Err(e) => (classify(&e), Value::Null),
    };
    history.push(Event::Send {
        queue: queue.into(),
        body: body.into(),
        group: Some(group.to_string()),
        dedup: fifo.then(|| dedup.to_string()),
        start,
        end,
        outcome: outcome.clone(),
        message_id: reply["message_id"].as_str().map(str::to_string),
        duplicate: reply["duplicate"].as_bool().unwrap_or(false),
        sequence_number: reply["sequence_number"].as_u64(),
        priority: placement.priority,
        deliver_at: placement.deliver_at,
    });
    outcome
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
