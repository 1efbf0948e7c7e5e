//! The `raftq` binary as a user runs it: `raftq serve` as a process, the CLI as the client, a
//! `kill -9` of the server with a restart from the same data directory, and a cluster grown,
//! repaired and shrunk with `raftq cluster add | replace | remove`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_raftq-test");

pub(crate) struct Server {
    pub child: Child,
    pub endpoint: String,
    /// The CA the CLI trusts, for a server with `--tls-cert`.
    pub ca_cert: Option<PathBuf>,
    /// More flags of every CLI call (a client certificate).
    pub cli_flags: Vec<String>,
    /// The server's log lines after the one that named its address.
    log: mpsc::Receiver<String>,
}

impl Server {
    /// Waits (at most 10 s) for a log line that contains `text`.
    pub(crate) fn wait_for_log(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(text) => return,
                Ok(_) => {}
                Err(e) => panic!("no log line with `{text}`: {e}"),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address in the log line `raftq serving listen=ADDR ...`.
fn served_address(line: &str) -> Option<&str> {
    let rest = line.split_once("raftq serving")?.1;
    rest.split_once("listen=")?.1.split_whitespace().next()
}

/// Starts `raftq serve` on a port the kernel picks (`--listen 127.0.0.1:0`, so no other test's
/// server can take it between a choice and a bind) with its data in `dir`, learns the port from
/// the server's log, and waits until it answers.
fn serve(dir: &Path) -> Server {
    serve_with(dir, &[])
}

/// [`serve`] with more flags.
pub(crate) fn serve_with(dir: &Path, flags: &[&str]) -> Server {
    start(dir, flags, None)
}

/// [`serve`] with more flags; with `ca_cert`, the flags turn TLS on and the CLI trusts that CA.
pub(crate) fn start(dir: &Path, flags: &[&str], ca_cert: Option<&Path>) -> Server {
    start_as(dir, flags, ca_cert, &[])
}

/// [`start`], with `cli_flags` on every CLI call.
pub(crate) fn start_as(
    dir: &Path,
    flags: &[&str],
    ca_cert: Option<&Path>,
    cli_flags: &[&str],
) -> Server {
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir)
        .args(flags)
        .env("RAFTQ_LOG", "info")
        // Written to a pipe, the log must be plain text without colour codes (its address is
        // read from it below), with nothing in the environment asking for that.
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start raftq serve");
    let log = child.stdout.take().expect("the server's log (its stdout)");
    let errors = drain(child.stderr.take().expect("the server's stderr"));
    let (tx, rx) = mpsc::channel();
    // Reads the whole log, so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(log).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let addr = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            let _ = child.kill();
            let stderr = errors
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_default();
            panic!("the server did not log the address it serves on; its stderr: {stderr}");
        };
        if let Some(addr) = served_address(&line) {
            break addr.to_string();
        }
    };
    let scheme = if ca_cert.is_some() { "https" } else { "http" };
    let server = Server {
        child,
        endpoint: format!("{scheme}://{addr}"),
        ca_cert: ca_cert.map(Path::to_path_buf),
        cli_flags: cli_flags.iter().map(|f| f.to_string()).collect(),
        log: rx,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while cli(&server, &["health"]).is_err() {
        assert!(Instant::now() < deadline, "the server did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

/// Reads `stderr` to its end on a thread of its own (so the server never blocks on a full pipe);
/// the text arrives once the server has closed it.
fn drain(mut stderr: std::process::ChildStderr) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx
}

/// Runs the CLI against `server` with `--json`; the parsed output, or stderr on failure.
pub(crate) fn cli(server: &Server, args: &[&str]) -> Result<Value, String> {
    let mut all: Vec<&str> = server.cli_flags.iter().map(String::as_str).collect();
    all.extend_from_slice(args);
    cli_at(&server.endpoint, server.ca_cert.as_deref(), &all)
}

/// Runs the CLI against `endpoint`, trusting `ca_cert`, with `--json`.
pub(crate) fn cli_at(
    endpoint: &str,
    ca_cert: Option<&Path>,
    args: &[&str],
) -> Result<Value, String> {
    let mut command = Command::new(BIN);
    command.args(["--endpoint", endpoint, "--json"]);
    if let Some(ca) = ca_cert {
        command.arg("--ca-cert").arg(ca);
    }
    let out = command.args(args).output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(serde_json::from_str(text.trim()).unwrap_or(Value::Null))
}

pub(crate) fn ok(server: &Server, args: &[&str]) -> Value {
    cli(server, args).unwrap_or_else(|e| panic!("raftq {args:?} failed: {e}"))
}

#[test]
fn the_cli_drives_a_queue_end_to_end() {
    let dir = TempDir::new().expect("temp dir");
    let server = serve(dir.path());
    ok(&server, &["queue", "create", "work"]);
    let sent = ok(&server, &["send", "work", "hello", "--attr", "k=v"]);
    assert_eq!(sent["duplicate"], false);
    let got = ok(
        &server,
        &["receive", "work", "--max", "10", "--lease", "60"],
    );
    let message = &got["messages"][0];
    assert_eq!(message["body"], "hello");
    assert_eq!(message["attributes"]["k"], "v");
    let receipt = message["receipt"].as_str().expect("receipt");
    let acked = ok(&server, &["ack", "work", receipt]);
    assert_eq!(acked["results"][0]["ok"], true);
    assert_eq!(ok(&server, &["stats", "work"])["visible"], 0);
    let err = cli(&server, &["queue", "create", "bad name"]).expect_err("refused");
    assert!(err.contains("invalid_argument"), "{err}");
    let listed = ok(&server, &["queue", "list"]);
    assert_eq!(listed["queues"][0]["name"], "work");
    let accounts = ok(&server, &["cluster", "accounts"]);
    assert_eq!(
        accounts["accounts"],
        serde_json::json!([{"account": "dev", "queues": 1}])
    );
}

/// `raftq dlq move | tasks | cancel`: a dry run counts a dead-letter queue's messages, a task
/// moves them back, the list shows both, and refusals come back as errors.
#[test]
fn the_cli_moves_a_dead_letter_queue_back() {
    let dir = TempDir::new().expect("temp dir");
    let server = serve(dir.path());
    ok(&server, &["queue", "create", "dlq"]);
    let with_dlq = [
        "queue",
        "create",
        "work",
        "--dead-letter-target",
        "dlq",
        "--max-receive-count",
        "1",
    ];
    ok(&server, &with_dlq);
    for body in ["m0", "m1", "m2"] {
        ok(&server, &["send", "work", body]);
    }
    ok(&server, &["receive", "work", "--max", "10", "--lease", "0"]);
    assert_eq!(ok(&server, &["stats", "dlq"])["visible"], 3);

    let dry = ok(&server, &["dlq", "move", "dlq", "--dry-run"]);
    assert_eq!(
        (dry["status"].as_str(), dry["to_move"].as_u64()),
        (Some("completed"), Some(3))
    );
    let task = ok(&server, &["dlq", "move", "dlq", "--rate", "100"]);
    let handle = task["task_handle"].as_str().expect("task_handle");
    let deadline = Instant::now() + Duration::from_secs(10);
    let tasks = loop {
        let tasks = ok(&server, &["dlq", "tasks", "dlq"]);
        if tasks["tasks"][0]["status"] == "completed" {
            break tasks;
        }
        assert!(
            Instant::now() < deadline,
            "the task did not complete: {tasks}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(tasks["tasks"][0]["task_handle"], handle);
    assert_eq!(tasks["tasks"][0]["moved"], 3);
    assert_eq!(tasks["tasks"][1]["dry_run"], true);
    assert_eq!(ok(&server, &["stats", "work"])["visible"], 3);
    assert_eq!(ok(&server, &["stats", "dlq"])["visible"], 0);

    let err = cli(&server, &["dlq", "cancel", "dlq", handle]).expect_err("it has ended");
    assert!(err.contains("move_task_not_running"), "{err}");
    let err = cli(&server, &["dlq", "move", "dlq", "--destination", "nope"]).expect_err("refused");
    assert!(
        err.contains("invalid_argument") && err.contains("destination"),
        "{err}"
    );
}

/// Waits (at most 10 s) until `raftq --key KEY queue list` succeeds (`works`) or fails.
fn key_comes_to(server: &Server, key: &str, works: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = cli(server, &["--key", key, "queue", "list"]);
        match &listed {
            Ok(_) if works => return,
            Err(e) if !works => {
                assert!(e.contains("unauthenticated"), "{e}");
                return;
            }
            _ => {}
        }
        assert!(Instant::now() < deadline, "key {key}: {listed:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn keys_are_rotated_without_a_restart() {
    let dir = TempDir::new().expect("temp dir");
    let keys = dir.path().join("keys.toml");
    let file = |key: &str| format!("[[keys]]\naccount = \"acme\"\nkey = \"{key}\"\n");
    std::fs::write(&keys, file("first")).expect("write the key file");
    let data = dir.path().join("data");
    let mut server = serve_with(&data, &["--keys", keys.to_str().expect("utf-8 path")]);
    key_comes_to(&server, "first", true);
    // Replaced, then announced with SIGHUP.
    std::fs::write(&keys, file("second")).expect("write the key file");
    let hangup = Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(hangup.success());
    key_comes_to(&server, "first", false);
    key_comes_to(&server, "second", true);
    // A file that does not parse keeps the keys in force.
    std::fs::write(&keys, "[[keys]]\naccount = \"acme\"\n").expect("write the key file");
    server.wait_for_log("key file not reloaded");
    key_comes_to(&server, "second", true);
    // Replaced without a signal: seen when the file changes.
    std::fs::write(&keys, file("third")).expect("write the key file");
    key_comes_to(&server, "second", false);
    key_comes_to(&server, "third", true);
    let exited = server.child.try_wait().expect("the server's status");
    assert!(exited.is_none(), "the server restarted: {exited:?}");
}

#[test]
fn kill_9_and_restart_keeps_messages_leases_and_deduplication() {
    let dir = TempDir::new().expect("temp dir");
    let mut server = serve(dir.path());
    ok(&server, &["queue", "create", "orders.fifo"]);
    let first = ok(
        &server,
        &["send", "orders.fifo", "o1", "--group", "g", "--dedup", "d1"],
    );
    for i in 2..=5 {
        let body = format!("o{i}");
        let dedup = format!("d{i}");
        ok(
            &server,
            &[
                "send",
                "orders.fifo",
                &body,
                "--group",
                "g",
                "--dedup",
                &dedup,
            ],
        );
    }
    ok(
        &server,
        &["receive", "orders.fifo", "--max", "2", "--lease", "600"],
    );

    server.child.kill().expect("kill -9");
    let _ = server.child.wait();
    drop(server);
    let server = serve(dir.path());

    let stats = ok(&server, &["stats", "orders.fifo"]);
    assert_eq!(
        (stats["visible"].clone(), stats["leased"].clone()),
        (3.into(), 2.into())
    );
    let again = ok(
        &server,
        &[
            "send",
            "orders.fifo",
            "other",
            "--group",
            "g",
            "--dedup",
            "d1",
        ],
    );
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["message_id"], first["message_id"]);
    let peeked = ok(&server, &["peek", "orders.fifo"]);
    assert_eq!(bodies(&peeked), ["o1", "o2", "o3", "o4", "o5"]);
}

/// The bodies of the messages of a `receive` or `peek` answer, in order.
pub fn bodies(answer: &Value) -> Vec<&str> {
    answer["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["body"].as_str())
        .collect()
}

/// A loopback address with a port that was free a moment ago (peer addresses must be known
/// before the nodes start, so the kernel cannot pick them at bind time).
///
/// The port is taken below Linux's ephemeral range (32768 and up): a port the kernel handed out
/// for `bind(0)` and released can be handed again at once to another test's listener or to the
/// local end of any connection, and the server that was meant to bind it would fail to start.
/// Below that range only this function hands ports out, each once per test run, starting at an
/// offset drawn from the process id so that two test runs at once rarely meet.
pub(crate) fn free_addr() -> String {
    const FIRST: u16 = 10_000;
    const SPAN: u16 = 22_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let offset = u16::try_from(std::process::id() % u32::from(SPAN)).expect("below SPAN");
    loop {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(step < SPAN, "no free port left below the ephemeral range");
        let port = FIRST + (offset + step) % SPAN;
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return listener.local_addr().expect("address").to_string();
        }
    }
}

/// The voters' ids in a `cluster status` answer.
fn voters(status: &Value) -> Vec<u64> {
    status["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["role"] != "learner")
        .filter_map(|n| n["id"].as_u64())
        .collect()
}

/// The flags node `id` starts with besides its own (none, or its peer certificates).
type NodeFlags<'a> = &'a dyn Fn(u64) -> Vec<String>;

/// Starts node `id` with `flags` and the node's own from `node_flags`.
fn serve_node(dir: &Path, id: u64, flags: &[&str], node_flags: NodeFlags) -> Server {
    let own = node_flags(id);
    let mut all = flags.to_vec();
    all.extend(own.iter().map(String::as_str));
    serve_with(dir, &all)
}

/// Starts node 2 with `--join` node 1's peer address.
fn joining_node(dir: &Path, raft: &str, first: &str, node_flags: NodeFlags) -> Server {
    let flags = ["--node-id", "2", "--raft-listen", raft, "--join", first];
    serve_node(dir, 2, &flags, node_flags)
}

#[test]
fn the_cli_grows_repairs_and_shrinks_a_cluster() {
    grow_repair_shrink(&|_| Vec::new());
}

#[test]
fn a_cluster_with_mutual_tls_between_peers_grows_repairs_and_shrinks() {
    let certs = TempDir::new().expect("dir");
    let ca = crate::certs::Authority::new("raftq cluster CA");
    let ca_file = ca.write(certs.path(), "ca");
    let issued: Vec<_> = (1..=2)
        .map(|id| {
            let uri = raftq_node::tls::node_uri(id);
            ca.issue(certs.path(), &format!("node-{id}"), &[uri])
        })
        .collect();
    grow_repair_shrink(&|id| {
        let own = &issued[usize::try_from(id - 1).expect("small id")];
        [
            ("--peer-cert", &own.cert),
            ("--peer-key", &own.key),
            ("--peer-ca", &ca_file),
        ]
        .into_iter()
        .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
        .collect()
    });
}

/// Grows a one-node cluster to two with `raftq cluster add`, replaces node 2 after it lost its
/// disk with `raftq cluster replace`, and shrinks it back with `raftq cluster remove`.
fn grow_repair_shrink(node_flags: NodeFlags) {
    let (dir1, dir2) = (TempDir::new().expect("dir"), TempDir::new().expect("dir"));
    let (raft1, raft2) = (free_addr(), free_addr());
    let peers = format!("1={raft1}");
    let first = serve_node(
        dir1.path(),
        1,
        &["--node-id", "1", "--raft-listen", &raft1, "--peers", &peers],
        node_flags,
    );
    ok(&first, &["queue", "create", "work"]);
    ok(&first, &["send", "work", "before"]);

    let mut second = joining_node(dir2.path(), &raft2, &raft1, node_flags);
    let grown = ok(
        &first,
        &["cluster", "add", "--id", "2", "--raft-addr", &raft2],
    );
    assert_eq!(voters(&grown), [1, 2]);
    ok(&second, &["send", "work", "through node 2"]);
    assert_eq!(ok(&first, &["stats", "work"])["visible"], 2);
    let again = cli(
        &first,
        &["cluster", "add", "--id", "2", "--raft-addr", &raft2],
    );
    assert!(again.is_err_and(|e| e.contains("membership_conflict")));

    // Node 2 loses its disk: it comes back blank, and `replace` makes it a voter again.
    second.child.kill().expect("kill -9");
    let _ = second.child.wait();
    drop(second);
    let dir2 = TempDir::new().expect("dir");
    let second = joining_node(dir2.path(), &raft2, &raft1, node_flags);
    let repaired = ok(&first, &["cluster", "replace", "--id", "2"]);
    assert_eq!(voters(&repaired), [1, 2]);
    assert_eq!(ok(&second, &["stats", "work"])["visible"], 2);

    let shrunk = ok(&first, &["cluster", "remove", "--id", "2"]);
    assert_eq!(voters(&shrunk), [1]);
    assert_eq!(voters(&ok(&first, &["cluster", "status"])), [1]);
    let unknown = cli(&first, &["cluster", "remove", "--id", "9"]);
    assert!(unknown.is_err_and(|e| e.contains("invalid_argument")));
}
