//! The `raftq` binary as a user runs it: `raftq serve` as a process, the CLI as the client, and
//! a `kill -9` of the server with a restart from the same data directory.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `raftq serve` on `port` with its data in `dir`, and waits until it answers.
fn serve(dir: &Path, port: u16) -> Server {
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start raftq serve");
    let server = Server {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
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
    let server = serve(dir.path(), free_port());
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
    let port = free_port();
    let mut server = serve(dir.path(), port);
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
    let server = serve(dir.path(), port);

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
