//! Replicated throughput and latency of a 3-node cluster in this process, on loopback, with
//! RocksDB on the local disk: 1 KiB sends through `Node::write` (no HTTP), closed loop with 1 and
//! 256 requests in flight; the unavailability window while every node is restarted in turn as
//! SIGTERM does it (a leader hands over first) under load; and the window when the leader is
//! stopped under load. Prints one JSON object per measurement.
//!
//! Run: `scripts/bench-node` (writes docs/benchmarks-node.md).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use raftq_engine::{Command, NewMessage, QueueAttributes};
use raftq_node::{Node, NodeConfig, Role};
use tempfile::TempDir;
use tokio::net::TcpListener;
use uuid::Uuid;

const WARMUP: Duration = Duration::from_secs(2);
const RUN: Duration = Duration::from_secs(10);

/// The nodes that are up, shared with the senders.
type Pool = Arc<RwLock<BTreeMap<u64, Arc<Node>>>>;

/// Three nodes on loopback: their peer addresses and the nodes.
async fn start_cluster(dir: &TempDir) -> (BTreeMap<u64, String>, Pool) {
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
        nodes.insert(id, Arc::new(start_node(dir, &peers, id, listener).await));
    }
    (peers, Arc::new(RwLock::new(nodes)))
}

async fn start_node(
    dir: &TempDir,
    peers: &BTreeMap<u64, String>,
    id: u64,
    listener: TcpListener,
) -> Node {
    let config = NodeConfig::new(id, peers.clone(), dir.path().join(format!("n{id}")));
    Node::start(config, listener).await.expect("start")
}

fn members(pool: &Pool) -> BTreeMap<u64, Arc<Node>> {
    pool.read().map(|p| p.clone()).unwrap_or_default()
}

/// Takes node `id` out of the pool and waits until no sender holds it any more.
async fn take(pool: &Pool, id: u64) -> Node {
    let mut node = pool
        .write()
        .ok()
        .and_then(|mut p| p.remove(&id))
        .expect("the node is in the pool");
    loop {
        match Arc::try_unwrap(node) {
            Ok(node) => return node,
            Err(shared) => node = shared,
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn send(body: &str) -> Command {
    Command::Send {
        account: "dev".into(),
        queue: "bench".into(),
        message: NewMessage::new(Uuid::new_v4(), body),
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
async fn leader(pool: &Pool) -> u64 {
    loop {
        for (id, node) in members(pool) {
            if node.status().await.role == Role::Leader {
                return id;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// 16 senders writing through the nodes in the pool (whichever are there at each write), and
/// the longest time no write succeeded.
struct Senders {
    last_ok: Arc<Mutex<Instant>>,
    longest: Arc<Mutex<Duration>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Senders {
    fn start(pool: &Pool) -> Senders {
        let last_ok = Arc::new(Mutex::new(Instant::now()));
        let longest = Arc::new(Mutex::new(Duration::ZERO));
        let stop = Arc::new(AtomicBool::new(false));
        let body = "x".repeat(1024);
        let mut tasks = Vec::new();
        for i in 0..16 {
            let (pool, last_ok, longest, stop, body) = (
                Arc::clone(pool),
                Arc::clone(&last_ok),
                Arc::clone(&longest),
                Arc::clone(&stop),
                body.clone(),
            );
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    // Only the node written through is held during the write, so a node taken out
                    // of the pool is soon held by no sender.
                    let node = {
                        let up = members(&pool);
                        up.values().nth(i % up.len().max(1)).cloned()
                    };
                    let Some(node) = node else {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    };
                    let written = node.write(send(&body)).await.is_ok();
                    drop(node);
                    if written {
                        let now = Instant::now();
                        if let (Ok(mut last), Ok(mut long)) = (last_ok.lock(), longest.lock()) {
                            *long = (*long).max(now - *last);
                            *last = now;
                        }
                    }
                }
            }));
        }
        Senders {
            last_ok,
            longest,
            stop,
            tasks,
        }
    }

    /// Stops the senders; the longest window, counting writes that did not come back up to
    /// now.
    async fn stop(self) -> Duration {
        let tail = self.last_ok.lock().map(|l| l.elapsed()).unwrap_or_default();
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
        self.longest
            .lock()
            .map(|l| *l)
            .unwrap_or_default()
            .max(tail)
    }
}

/// Restarts every node in turn under load, as SIGTERM does it (a leader hands its leadership
/// over first), waiting until each is back and caught up; the window is the longest time no
/// write succeeded.
async fn rolling_restart(dir: &TempDir, peers: &BTreeMap<u64, String>, pool: &Pool) {
    let senders = Senders::start(pool);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut leaders_restarted = 0;
    for (&id, addr) in peers {
        let node = take(pool, id).await;
        if matches!(node.hand_over().await, Ok(Some(_))) {
            leaders_restarted += 1;
        }
        node.shutdown().await;
        let listener = TcpListener::bind(addr)
            .await
            .expect("bind the same address");
        let node = Arc::new(start_node(dir, peers, id, listener).await);
        let mut target = 0;
        for other in members(pool).values() {
            target = target.max(other.status().await.last_applied);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while node.status().await.last_applied < target {
            assert!(
                Instant::now() < deadline,
                "the restarted node did not catch up"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if let Ok(mut p) = pool.write() {
            p.insert(id, node);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let window = senders.stop().await;
    println!(
        "{}",
        serde_json::json!({"bench": "rolling_restart", "unavailable_ms": window.as_millis() as u64,
                           "leaders_restarted": leaders_restarted})
    );
}

/// Stops the leader while 16 senders write through the surviving nodes; the window is the
/// longest time no write succeeded.
async fn failover(pool: &Pool) {
    let old = leader(pool).await;
    let senders = {
        let survivors: Pool = Arc::new(RwLock::new(
            members(pool)
                .into_iter()
                .filter(|(id, _)| *id != old)
                .collect(),
        ));
        Senders::start(&survivors)
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Stopping a follower, or a leader that cannot be stopped, would measure no failover at
    // all: fail loudly instead.
    assert_eq!(
        leader(pool).await,
        old,
        "leadership moved during the lead-in"
    );
    take(pool, old).await.shutdown().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let new = leader(pool).await;
    assert_ne!(new, old, "a new leader took over");
    let window = senders.stop().await;
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
        let (peers, pool) = start_cluster(&dir).await;
        let node = Arc::clone(&members(&pool)[&leader(&pool).await]);
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
        rolling_restart(&dir, &peers, &pool).await;
        failover(&pool).await;
        for id in members(&pool).into_keys() {
            take(&pool, id).await.shutdown().await;
        }
    });
}
