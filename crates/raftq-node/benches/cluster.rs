//! Replicated throughput and latency of a 3-node cluster in this process, on loopback, with
//! RocksDB on the local disk: 1 KiB sends through `Node::write` (no HTTP), closed loop with 1 and
//! 256 requests in flight, and the unavailability window when the leader is stopped under load.
//! Prints one JSON object per measurement.
//!
//! Run: `scripts/bench-node` (writes docs/benchmarks-node.md).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use raftq_engine::{Command, NewMessage, QueueAttributes};
use raftq_node::{Node, NodeConfig};
use tempfile::TempDir;
use tokio::net::TcpListener;
use uuid::Uuid;

const WARMUP: Duration = Duration::from_secs(2);
const RUN: Duration = Duration::from_secs(10);

async fn start_cluster(dir: &TempDir) -> BTreeMap<u64, Arc<Node>> {
    let mut listeners = BTreeMap::new();
    for id in 1..=3u64 {
        listeners.insert(id, TcpListener::bind("127.0.0.1:0").await.expect("bind"));
    }
    let peers: BTreeMap<u64, String> = listeners
        .iter()
        .map(|(id, l)| (*id, l.local_addr().expect("addr").to_string()))
        .collect();
    let mut nodes = BTreeMap::new();
    for (id, listener) in listeners {
        let config = NodeConfig::new(id, peers.clone(), dir.path().join(format!("n{id}")));
        let node = Node::start(config, listener).await.expect("start");
        nodes.insert(id, Arc::new(node));
    }
    nodes
}

fn send(body: &str) -> Command {
    Command::Send {
        account: "dev".into(),
        queue: "bench".into(),
        message: NewMessage {
            message_id: Uuid::new_v4(),
            body: body.into(),
            attributes: BTreeMap::new(),
            delay_seconds: None,
            message_group_id: None,
            message_deduplication_id: None,
        },
    }
}

/// Runs `in_flight` closed-loop senders against `node` for `duration`; returns (ops, histogram
/// of latencies in µs, failures).
async fn closed_loop(
    node: Arc<Node>,
    in_flight: usize,
    duration: Duration,
) -> (u64, Histogram<u64>, u64) {
    let body = "x".repeat(1024);
    let hist = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram"),
    ));
    let failures = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + duration;
    let mut tasks = Vec::new();
    for _ in 0..in_flight {
        let (node, hist, failures, body) = (
            Arc::clone(&node),
            Arc::clone(&hist),
            Arc::clone(&failures),
            body.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut local = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("h");
            while Instant::now() < end {
                let start = Instant::now();
                match node.write(send(&body)).await {
                    Ok(_) => {
                        let _ = local.record(start.elapsed().as_micros() as u64);
                    }
                    Err(_) => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if let Ok(mut h) = hist.lock() {
                let _ = h.add(&local);
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let hist = hist.lock().map(|h| h.clone()).expect("histogram lock");
    (hist.len(), hist, failures.load(Ordering::Relaxed))
}

fn report(name: &str, in_flight: usize, ops: u64, hist: &Histogram<u64>, failures: u64) {
    let secs = RUN.as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "bench": name,
            "in_flight": in_flight,
            "ops_per_sec": (ops as f64 / secs).round(),
            "p50_ms": hist.value_at_quantile(0.50) as f64 / 1000.0,
            "p99_ms": hist.value_at_quantile(0.99) as f64 / 1000.0,
            "max_ms": hist.max() as f64 / 1000.0,
            "failures": failures,
        })
    );
}

/// The member that is leader by its own account (another member's view may be stale).
async fn leader(nodes: &BTreeMap<u64, Arc<Node>>) -> u64 {
    loop {
        let leading = nodes
            .iter()
            .find(|(_, n)| n.raft().metrics().borrow().state == openraft::ServerState::Leader);
        if let Some((&id, _)) = leading {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Stops the leader while 16 senders write through the surviving nodes; the window is the
/// longest time no write succeeded.
async fn failover(nodes: &mut BTreeMap<u64, Arc<Node>>) {
    let old = leader(nodes).await;
    let survivors: Vec<Arc<Node>> = nodes
        .iter()
        .filter(|(id, _)| **id != old)
        .map(|(_, n)| Arc::clone(n))
        .collect();
    let last_ok = Arc::new(Mutex::new(Instant::now()));
    let longest = Arc::new(Mutex::new(Duration::ZERO));
    let stop = Arc::new(AtomicBool::new(false));
    let body = "x".repeat(1024);
    let mut tasks = Vec::new();
    for i in 0..16 {
        let node = Arc::clone(&survivors[i % survivors.len()]);
        let (last_ok, longest, stop, body) = (
            Arc::clone(&last_ok),
            Arc::clone(&longest),
            Arc::clone(&stop),
            body.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if node.write(send(&body)).await.is_ok() {
                    let now = Instant::now();
                    if let (Ok(mut last), Ok(mut long)) = (last_ok.lock(), longest.lock()) {
                        *long = (*long).max(now - *last);
                        *last = now;
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Stopping a follower, or a leader that cannot be stopped, would measure no failover at
    // all: fail loudly instead.
    assert_eq!(
        leader(nodes).await,
        old,
        "leadership moved during the lead-in"
    );
    let node = nodes.remove(&old).expect("the leader is a member");
    let node = Arc::try_unwrap(node)
        .unwrap_or_else(|_| panic!("the leader is still shared, so it cannot be stopped"));
    node.shutdown().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let new = leader(nodes).await;
    assert_ne!(new, old, "a new leader took over");
    // Writes that did not come back after the stop count up to the end of the window.
    let tail = last_ok.lock().map(|l| l.elapsed()).unwrap_or_default();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    let window = longest.lock().map(|l| *l).unwrap_or_default().max(tail);
    println!(
        "{}",
        serde_json::json!({"bench": "leader_failover", "unavailable_ms": window.as_millis() as u64})
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = TempDir::new().expect("temp dir");
        let mut nodes = start_cluster(&dir).await;
        let node = Arc::clone(&nodes[&leader(&nodes).await]);
        node.write(Command::CreateQueue {
            account: "dev".into(),
            queue_id: Uuid::new_v4(),
            name: "bench".into(),
            attributes: QueueAttributes::default(),
        })
        .await
        .expect("create queue");
        closed_loop(Arc::clone(&node), 64, WARMUP).await;
        for in_flight in [1, 256] {
            let (ops, hist, failures) = closed_loop(Arc::clone(&node), in_flight, RUN).await;
            report("send_1KiB_3_nodes", in_flight, ops, &hist, failures);
        }
        drop(node);
        failover(&mut nodes).await;
        for (_, node) in nodes {
            if let Ok(node) = Arc::try_unwrap(node) {
                node.shutdown().await;
            }
        }
    });
}
