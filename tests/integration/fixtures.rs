//! Data directories that earlier builds wrote (`tests/fixtures/data/<name>/`, made by
//! `scripts/make-fixture`) opened by this build. For each fixture:
//! - its data is unpacked into a temporary directory and a node of this build started on it,
//!   its clock running from the time the fixture's node stopped (so that no lease, delay or
//!   deduplication window of the fixture has ended since);
//! - it serves what the fixture's build served: every queue, its stats, its messages with their
//!   states and its move tasks (fields this build added apart), and, when the fixture's build
//!   wrote this build's formats, the same state digest;
//! - it still knows the deduplication IDs the fixture's build recorded;
//! - it takes new sends, receives and acks on every queue, and after them (its rows now in this
//!   build's format) it opens again to the same state.
//!
//! Newer data is refused: a fixture whose recorded formats or segment header say a later build
//! wrote them makes `raftq serve` exit with both numbers on its stderr.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use raftq_api::{router, Api, Keys};
use raftq_node::{Node, NodeConfig, WallClock};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::net::TcpListener;

use crate::process::BIN;
use crate::serving::bounded;

/// Every fixture's directory.
fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/data");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|entry| entry.expect("a fixture directory").path())
        .collect();
    dirs.sort();
    dirs
}

/// The fixture's data directory, unpacked into `into`.
fn unpack(fixture: &Path, into: &Path) -> PathBuf {
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(fixture.join("data.tar.gz"))
        .arg("-C")
        .arg(into)
        .status()
        .expect("run tar");
    assert!(
        status.success(),
        "tar could not unpack {}",
        fixture.display()
    );
    into.join("data")
}

fn expected(fixture: &Path) -> Value {
    let path = fixture.join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Checks that `actual` holds everything `expected` does: the same scalars (numbers by value, as
/// JSON has it: `2` and `2.0` are one number), arrays of the same length whose items hold the
/// expected ones, objects with every expected field (fields only `actual` has are ones a later
/// build added). Answers the path of the first difference.
fn holds(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(want), Value::Object(got)) => want.iter().try_for_each(|(key, value)| {
            let at = format!("{path}.{key}");
            let field = got.get(key).ok_or_else(|| format!("{at} is missing"))?;
            holds(value, field, &at)
        }),
        (Value::Array(want), Value::Array(got)) if want.len() == got.len() => want
            .iter()
            .zip(got)
            .enumerate()
            .try_for_each(|(i, (w, g))| holds(w, g, &format!("{path}[{i}]"))),
        (Value::Number(want), Value::Number(got)) if want.as_f64() == got.as_f64() => Ok(()),
        _ if expected == actual => Ok(()),
        _ => Err(format!("{path}: expected {expected}, served {actual}")),
    }
}

/// A node of this build on a fixture's data, its clock running from `start_ms`, and the REST
/// API serving it.
struct Upgraded {
    base: String,
    http: reqwest::Client,
    node: Arc<Node>,
    serving: tokio::task::JoinHandle<()>,
}

impl Upgraded {
    async fn start(data: PathBuf, start_ms: u64) -> Upgraded {
        let raft = TcpListener::bind("127.0.0.1:0").await.expect("bind raft");
        let peers = BTreeMap::from([(1, raft.local_addr().expect("addr").to_string())]);
        let mut config = NodeConfig::new(1, peers, data);
        let started = Instant::now();
        config.wall_clock = WallClock::new(move || start_ms + started.elapsed().as_millis() as u64);
        let node = Arc::new(Node::start(config, raft).await.expect("the node starts"));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind api");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let app = router(Api::new(Arc::clone(&node), "local", Keys::open()));
        let serving = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let upgraded = Upgraded {
            base,
            http: reqwest::Client::new(),
            node,
            serving,
        };
        upgraded.wait_until_it_leads().await;
        upgraded
    }

    async fn wait_until_it_leads(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.node.raft().metrics().borrow().current_leader != Some(1) {
            assert!(Instant::now() < deadline, "the upgraded node does not lead");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The JSON answer of a request, which must succeed.
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.expect("a request");
        let status = answer.status();
        let text = answer.text().await.expect("an answer");
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// Stops serving and shuts the node down, its data directory free for the next one.
    async fn shutdown(self) {
        let Upgraded {
            http,
            mut node,
            serving,
            ..
        } = self;
        // The server's connection tasks hold the router, and so the node, until the client's
        // connections close.
        drop(http);
        serving.abort();
        let _ = serving.await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Arc::try_unwrap(node) {
                Ok(alone) => return alone.shutdown().await,
                Err(shared) => {
                    assert!(Instant::now() < deadline, "the node is still held");
                    node = shared;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

/// What the node serves of `queue`, in the shape `scripts/make-fixture` records.
async fn served(node: &Upgraded, queue: &str) -> Value {
    let messages = node
        .get(&format!("/v1/queues/{queue}/messages?limit=100"))
        .await;
    let tasks = node.get(&format!("/v1/queues/{queue}/move_tasks")).await;
    json!({
        "queue": node.get(&format!("/v1/queues/{queue}")).await,
        "stats": node.get(&format!("/v1/queues/{queue}/stats")).await,
        "messages": messages["messages"],
        "move_tasks": tasks["tasks"],
    })
}

/// Sends a message to `queue`, receives until it comes, and acks it.
async fn round_trip(node: &Upgraded, queue: &str) {
    let body = format!("after the upgrade to {queue}");
    let mut send = json!({"body": body});
    if queue.ends_with(".fifo") {
        send["message_group_id"] = json!("after-upgrade");
        send["message_deduplication_id"] = json!("after-upgrade");
    }
    let sent = node
        .post(&format!("/v1/queues/{queue}/messages"), send)
        .await;
    assert_eq!(sent["duplicate"], false, "{queue}: {sent}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let receipt = loop {
        let got = node
            .post(
                &format!("/v1/queues/{queue}/receive"),
                json!({"max_messages": 10, "lease_seconds": 60}),
            )
            .await;
        let ours = got["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["body"] == body.as_str());
        if let Some(message) = ours {
            break message["receipt"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "{queue}: the new message never came"
        );
    };
    let acked = node
        .post(
            &format!("/v1/queues/{queue}/ack"),
            json!({"receipts": [receipt]}),
        )
        .await;
    assert_eq!(acked["results"][0]["ok"], true, "{queue}: {acked}");
}

/// What the node serves of every queue of `queues`, the one figure that moves with the clock
/// left out.
async fn every_queue(node: &Upgraded, queues: &serde_json::Map<String, Value>) -> Vec<Value> {
    let mut all = Vec::new();
    for queue in queues.keys() {
        let mut actual = served(node, queue).await;
        if let Some(stats) = actual["stats"].as_object_mut() {
            stats.remove("oldest_message_age_seconds");
        }
        all.push(actual);
    }
    all
}

/// Opens one fixture with this build and checks what it serves, then that it takes writes, and
/// that once it wrote (its rows in this build's format) it opens again to the same state.
async fn check(fixture: &Path) {
    let name = fixture.display();
    let want = expected(fixture);
    let tmp = TempDir::new().expect("temp dir");
    let data = unpack(fixture, tmp.path());
    let stopped_at = want["stopped_at_ms"].as_u64().expect("stopped_at_ms");
    let node = Upgraded::start(data.clone(), stopped_at).await;
    // The digest is over the rows as stored: equal when the fixture's build wrote this build's
    // formats; rows of an earlier format are written again in this one's when the node opens
    // them, so their digest is another.
    let formats = raftq_store::formats::encode(&raftq_store::formats::current());
    if want["formats"] == formats.as_str() {
        let state = node.get("/v1/cluster/state").await;
        assert_eq!(
            state["state_digest"], want["cluster_state"]["state_digest"],
            "{name}: the state digest"
        );
    }
    let queues = want["queues"].as_object().expect("queues");
    for (queue, recorded) in queues {
        let actual = served(&node, queue).await;
        // The one figure that moves with the clock: it grew between the reading and the stop.
        let mut recorded = recorded.clone();
        if let Some(stats) = recorded["stats"].as_object_mut() {
            stats.remove("oldest_message_age_seconds");
        }
        if let Err(difference) = holds(&recorded, &actual, queue) {
            panic!("{name}: {difference}");
        }
    }
    for duplicate in want["duplicates"].as_array().expect("duplicates") {
        let queue = duplicate["queue"].as_str().expect("queue");
        let mut send = duplicate.clone();
        send.as_object_mut().expect("a send").remove("queue");
        let sent = node
            .post(&format!("/v1/queues/{queue}/messages"), send)
            .await;
        assert_eq!(
            sent["duplicate"], true,
            "{name}: {duplicate} is still a duplicate"
        );
    }
    for queue in queues.keys() {
        round_trip(&node, queue).await;
    }
    let before = every_queue(&node, queues).await;
    node.shutdown().await;
    let node = Upgraded::start(data, stopped_at).await;
    assert_eq!(
        every_queue(&node, queues).await,
        before,
        "{name}: restarted after writes"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_serves_what_its_build_served_and_takes_writes() {
    bounded(async {
        let all = fixtures();
        assert!(!all.is_empty(), "no fixtures in tests/fixtures/data");
        for fixture in all {
            check(&fixture).await;
        }
    })
    .await;
}

/// `raftq serve` on `data`: its exit status and stderr, once it exits (within 30 s).
fn refused_start(data: &Path) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start raftq serve");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("raftq serve did not refuse {}", data.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("read stderr");
    (status, stderr)
}

/// The newest fixture, unpacked into `into`.
fn newest_fixture(into: &Path) -> PathBuf {
    let newest = fixtures().into_iter().last().expect("a fixture");
    unpack(&newest, into)
}

#[test]
fn a_newer_format_of_any_kind_is_refused_naming_both_numbers() {
    for (kind, number) in raftq_store::formats::current() {
        let tmp = TempDir::new().expect("temp dir");
        let data = newest_fixture(tmp.path());
        let later: Vec<(&str, u64)> = raftq_store::formats::current()
            .into_iter()
            .map(|(k, n)| (k, if k == kind { n + 1 } else { n }))
            .collect();
        {
            let db = raftq_store::open_db(&data.join("db"), &Default::default()).expect("open");
            raftq_store::formats::write(&db, &raftq_store::formats::encode(&later))
                .expect("record later formats");
        }
        let (status, stderr) = refused_start(&data);
        assert!(!status.success(), "{kind}: {stderr}");
        let data_says = format!("{kind} format {}", number + 1);
        let build_says = format!("{kind} format {number}");
        assert!(
            stderr.contains(&data_says) && stderr.contains(&build_says),
            "{kind}: {stderr}"
        );
    }
}

#[test]
fn a_segment_of_a_newer_format_is_refused_naming_both_numbers() {
    let tmp = TempDir::new().expect("temp dir");
    let data = newest_fixture(tmp.path());
    let segment = std::fs::read_dir(data.join("log"))
        .expect("the log's directory")
        .map(|entry| entry.expect("an entry").path())
        .find(|path| path.extension().is_some_and(|e| e == "seg"))
        .expect("a segment file");
    let mut bytes = std::fs::read(&segment).expect("read the segment");
    bytes[7] = b'3';
    let crc = crc32fast::hash(&bytes[..20]);
    bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&segment, &bytes).expect("write the segment");
    let (status, stderr) = refused_start(&data);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("segment format 3") && stderr.contains("segment format 2"),
        "{stderr}"
    );
}
