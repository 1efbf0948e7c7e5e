//! Backups as an operator takes them: `raftq backup` from a node that keeps serving writes,
//! `raftq restore` into an empty data directory, and the new cluster served from it.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tempfile::TempDir;

use crate::process::{bodies, cli, free_addr, ok, serve_with, Server, BIN};

/// `raftq restore` of `backup` into `data_dir` for a node at `raft_addr`: its JSON answer, or
/// its stderr.
fn restore(backup: &Path, data_dir: &Path, raft_addr: &str) -> Result<Value, String> {
    let out = Command::new(BIN)
        .arg("--json")
        .arg("restore")
        .arg("--from")
        .arg(backup)
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--raft-addr", raft_addr])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}

/// Starts the node restored into `data_dir`, at the peer address it was restored for.
fn serve_restored(data_dir: &Path, raft_addr: &str) -> Server {
    let peers = format!("1={raft_addr}");
    serve_with(
        data_dir,
        &[
            "--node-id",
            "1",
            "--raft-listen",
            raft_addr,
            "--peers",
            &peers,
        ],
    )
}

/// Every body `queue` holds, received (and leased) until it gives none.
fn drain(server: &Server, queue: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let got = ok(server, &["receive", queue, "--max", "10", "--lease", "600"]);
        let messages = got["messages"].as_array().cloned().unwrap_or_default();
        if messages.is_empty() {
            return bodies;
        }
        bodies.extend(
            messages
                .iter()
                .filter_map(|m| m["body"].as_str().map(str::to_string)),
        );
    }
}

fn cluster_id(server: &Server) -> String {
    ok(server, &["cluster", "status"])["cluster_id"]
        .as_str()
        .expect("a cluster id")
        .to_string()
}

#[test]
fn a_backup_taken_during_writes_restores_every_acknowledged_message_into_a_new_cluster() {
    let (source_dir, restored_dir) = (TempDir::new().expect("dir"), TempDir::new().expect("dir"));
    let source = serve_with(source_dir.path(), &[]);
    ok(&source, &["queue", "create", "work"]);
    ok(&source, &["send", "work", "in flight"]);
    let leased = ok(&source, &["receive", "work", "--lease", "600"]);
    assert_eq!(leased["messages"][0]["body"], "in flight");

    // A producer sends until told to stop; each body is recorded once its send was answered.
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (endpoint, acked, stop) = (source.endpoint.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let body = format!("m{i}");
                let sent = Command::new(BIN)
                    .args(["--endpoint", &endpoint, "--json", "send", "work", &body])
                    .output()
                    .expect("raftq send");
                if sent.status.success() {
                    acked.lock().expect("lock").push(body);
                }
            }
        })
    };
    while acked.lock().expect("lock").len() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let before: Vec<String> = acked.lock().expect("lock").clone();
    let file = restored_dir.path().join("raftq.backup");
    let written = ok(&source, &["backup", "--to", file.to_str().expect("utf-8")]);
    stop.store(true, Ordering::Relaxed);
    producer.join().expect("producer");
    assert!(written["bytes"].as_u64().expect("bytes") > 0);

    let data = restored_dir.path().join("node-1");
    let raft = free_addr();
    let restored = restore(&file, &data, &raft).expect("restore");
    assert_eq!(restored["leases_ended"], 1, "{restored}");
    assert_eq!(restored["source"]["cluster_id"], cluster_id(&source));
    let again = restore(&file, &data, &raft).expect_err("a second restore into it is refused");
    assert!(again.contains("already holds"), "{again}");

    let node = serve_restored(&data, &raft);
    assert_ne!(cluster_id(&node), cluster_id(&source));
    assert_eq!(ok(&node, &["stats", "work"])["leased"], 0);
    let bodies: BTreeSet<String> = drain(&node, "work").into_iter().collect();
    assert!(
        bodies.contains("in flight"),
        "the leased message is visible again"
    );
    let missing: Vec<&String> = before.iter().filter(|b| !bodies.contains(*b)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged before the backup, missing: {missing:?}"
    );
    // Writes go on in the new cluster.
    ok(&node, &["send", "work", "after"]);
    assert_eq!(drain(&node, "work"), ["after"]);
}

#[test]
fn a_restore_reproduces_the_backed_up_state_and_refuses_a_damaged_file() {
    let dir = TempDir::new().expect("dir");
    let source = serve_with(&dir.path().join("source"), &[]);
    ok(&source, &["queue", "create", "orders.fifo"]);
    for (body, dedup) in [("o1", "a"), ("o2", "b"), ("o1 again", "a")] {
        ok(
            &source,
            &[
                "send",
                "orders.fifo",
                body,
                "--group",
                "g",
                "--dedup",
                dedup,
            ],
        );
    }
    let file = dir.path().join("raftq.backup");
    ok(&source, &["backup", "--to", file.to_str().expect("utf-8")]);
    let refused = cli(&source, &["backup", "--to", file.to_str().expect("utf-8")]);
    assert!(refused.is_err(), "an existing file is not overwritten");

    let mut damaged = std::fs::read(&file).expect("read");
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    let damaged_file = dir.path().join("damaged.backup");
    std::fs::write(&damaged_file, damaged).expect("write");
    let target = dir.path().join("from-damaged");
    let error = restore(&damaged_file, &target, &free_addr()).expect_err("refused");
    assert!(error.contains("damaged"), "{error}");
    assert!(!target.exists(), "a refused backup writes nothing");

    let raft = free_addr();
    let data = dir.path().join("restored");
    let restored = restore(&file, &data, &raft).expect("restore");
    assert_eq!(restored["leases_ended"], 0);
    let group = &restored["groups"][0];
    assert_eq!(group["group"], 1, "{restored}");
    assert_eq!(group["state_digest"], group["backup_digest"]);
    let node = serve_restored(&data, &raft);
    let orders = ok(&node, &["receive", "orders.fifo", "--max", "10"]);
    assert_eq!(
        bodies(&orders),
        ["o1", "o2"],
        "in order, the duplicate still known"
    );
    let duplicate = ok(
        &node,
        &[
            "send",
            "orders.fifo",
            "o2 again",
            "--group",
            "g",
            "--dedup",
            "b",
        ],
    );
    assert_eq!(
        duplicate["duplicate"], true,
        "deduplication entries are restored"
    );
}
