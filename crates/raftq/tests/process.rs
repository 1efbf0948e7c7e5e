//! The `raftq` binary as a user runs it: `raftq serve` as a process, the CLI as the client, and
//! a `kill -9` of the server with a restart from the same data directory.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_raftq");

struct Server {
    child: Child,
    endpoint: String,
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
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir)
        .env("RAFTQ_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start raftq serve");
    let log = child.stdout.take().expect("the server's log (its stdout)");
    let (tx, rx) = mpsc::channel();
    // Reads the whole log, so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(log).lines().map_while(Result::ok) {
            if let Some(addr) = served_address(&line) {
                let _ = tx.send(addr.to_string());
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the server logs the address it serves on");
    let server = Server {
        child,
        endpoint: format!("http://{addr}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while cli(&server, &["health"]).is_err() {
        assert!(Instant::now() < deadline, "the server did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    server
}

/// Runs the CLI against `server` with `--json`; the parsed output, or stderr on failure.
fn cli(server: &Server, args: &[&str]) -> Result<Value, String> {
    let out = Command::new(BIN)
        .args(["--endpoint", &server.endpoint, "--json"])
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(serde_json::from_str(text.trim()).unwrap_or(Value::Null))
}

fn ok(server: &Server, args: &[&str]) -> Value {
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
    let bodies: Vec<&str> = peeked["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["body"].as_str())
        .collect();
    assert_eq!(bodies, ["o1", "o2", "o3", "o4", "o5"]);
}
