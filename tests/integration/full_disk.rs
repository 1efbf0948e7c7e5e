//! `raftq serve` on a disk of its own that fills: a tmpfs mounted for the test (which therefore
//! runs as root, as CI does; without the right to mount it fails and says so). Below
//! `--min-free-bytes` sends are refused with `507 storage_full` while acks, queue deletions and
//! reads go on; with the disk full to the last byte, writes are refused and reads still work;
//! once the filler files are removed, sends succeed again without a restart; and after a
//! `kill -9` the node opens its data directory cleanly with every acknowledged message.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::process::{cli, ok, serve_with, Server};

/// The size of the node's disk: RocksDB's preallocated write-ahead log and two log segments
/// (the one written and the spare) take about 110 MiB of it.
const DISK_SIZE: &str = "192m";
/// `--min-free-bytes` of the node.
const MIN_FREE: u64 = 48 << 20;

/// A tmpfs mounted at a directory, unmounted when dropped (also when a test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("mount point");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output();
        let why = match mounted {
            Ok(out) if out.status.success() => return Tmpfs(dir.to_path_buf()),
            Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
            Err(e) => format!("cannot run mount: {e}"),
        };
        panic!(
            "cannot mount a {size} tmpfs at {} ({why}): this test gives the node a small disk of \
             its own to fill, which needs root (CAP_SYS_ADMIN); run it as root, as CI does",
            dir.display()
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.0).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            // Still busy (a server that has not exited yet): detach it now, freed once unused.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Bytes free on the file system holding `dir`.
fn avail(dir: &Path) -> u64 {
    raftq_node::Filesystem::of(dir)
        .expect("statvfs")
        .avail_bytes
}

/// Writes the file `path` of `bytes` bytes or, with `None`, until the disk is full to the last
/// page.
fn fill(path: &Path, bytes: Option<u64>) {
    let mut file = File::create(path).expect("filler file");
    let mut chunk = vec![0xa5u8; 1 << 20];
    let mut written = 0u64;
    loop {
        let n = match bytes {
            Some(total) => (total - written).min(chunk.len() as u64) as usize,
            None => chunk.len(),
        };
        if n == 0 {
            return;
        }
        match file.write_all(&chunk[..n]) {
            Ok(()) => written += n as u64,
            Err(e) if bytes.is_none() && e.kind() == ErrorKind::StorageFull => {
                if chunk.len() <= 4096 {
                    return;
                }
                chunk.truncate(chunk.len() / 2);
            }
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
}

/// Runs the CLI's `args` against `server` until `done` says its result is the one awaited, for
/// at most 10 s (the node reads its free space every 250 ms); the last result.
fn until(
    server: &Server,
    args: &[&str],
    mut done: impl FnMut(&Result<Value, String>) -> bool,
) -> Result<Value, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let result = cli(server, args);
        if done(&result) || Instant::now() > deadline {
            return result;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `body` to queue `work` until the node refuses it for want of space (at most 10 s):
/// the refusal, and how many of the sends the node took before it (it reads the disk every
/// 250 ms, so the first ones after the disk filled may still go in).
fn send_until_refused(server: &Server, body: &str) -> (usize, Result<Value, String>) {
    let mut taken = 0;
    let result = until(server, &["send", "work", body], |result| {
        let refused = result
            .as_ref()
            .err()
            .is_some_and(|e| e.contains("storage_full"));
        taken += usize::from(result.is_ok());
        refused
    });
    (taken, result)
}

/// Asserts that `result` is a `507 storage_full` refusal.
fn assert_storage_full(result: Result<Value, String>, what: &str) {
    let error = result.expect_err(what);
    assert!(
        error.contains("507") && error.contains("storage_full"),
        "{what}: {error}"
    );
}

/// The bodies `peek` shows of queue `work`, sorted.
fn bodies(server: &Server) -> Vec<String> {
    let peeked = ok(server, &["peek", "work", "--limit", "100"]);
    let mut bodies: Vec<String> = peeked["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["body"].as_str().expect("body").to_string())
        .collect();
    bodies.sort();
    bodies
}

#[test]
fn a_full_disk_refuses_writes_keeps_reads_and_recovers_without_a_restart() {
    let tmp = TempDir::new().expect("temp dir");
    let disk = Tmpfs::mount(&tmp.path().join("disk"), DISK_SIZE);
    let data = disk.0.join("data");
    let min_free = MIN_FREE.to_string();
    let flags = ["--min-free-bytes", min_free.as_str()];
    let mut server = serve_with(&data, &flags);
    ok(&server, &["queue", "create", "work"]);
    ok(&server, &["queue", "create", "other"]);
    for body in ["m0", "m1", "m2", "m3", "m4"] {
        ok(&server, &["send", "work", body]);
    }
    let got = ok(
        &server,
        &["receive", "work", "--max", "1", "--lease", "600"],
    );
    let receipt = got["messages"][0]["receipt"].as_str().expect("receipt");
    let acked = got["messages"][0]["body"]
        .as_str()
        .expect("body")
        .to_string();

    // Below --min-free-bytes: sends are refused, acks, deletions and reads are not.
    let room = avail(&disk.0);
    assert!(room > MIN_FREE + (8 << 20), "{room} bytes free after start");
    fill(&disk.0.join("filler-1"), Some(room - MIN_FREE / 2));
    let (late, refused) = send_until_refused(&server, "late");
    assert_storage_full(refused, "a send below --min-free-bytes");
    ok(&server, &["ack", "work", receipt]);
    ok(&server, &["queue", "delete", "other"]);
    let visible = 4 + late;
    assert_eq!(ok(&server, &["stats", "work"])["visible"], visible);

    // The disk full to its last page: writes refused, reads served.
    fill(&disk.0.join("filler-2"), None);
    assert!(avail(&disk.0) < 1 << 20, "the disk is full");
    assert_storage_full(
        cli(&server, &["send", "work", "late"]),
        "a send on a full disk",
    );
    assert_storage_full(
        cli(&server, &["queue", "create", "late"]),
        "a new queue on a full disk",
    );
    assert_eq!(ok(&server, &["stats", "work"])["visible"], visible);
    assert_eq!(bodies(&server).len(), visible);
    let listed = ok(&server, &["queue", "list"]);
    assert_eq!(listed["queues"].as_array().map(Vec::len), Some(1));

    // Space freed: sends succeed again, the node never restarted.
    std::fs::remove_file(disk.0.join("filler-1")).expect("remove filler");
    std::fs::remove_file(disk.0.join("filler-2")).expect("remove filler");
    until(&server, &["send", "work", "after"], Result::is_ok).expect("a send once space is freed");
    assert!(
        server.child.try_wait().expect("server status").is_none(),
        "the server kept running"
    );

    // A kill -9 and a restart: the directory opens, with every acknowledged message.
    server.child.kill().expect("kill -9");
    server.child.wait().expect("wait");
    drop(server);
    let server = serve_with(&data, &flags);
    let mut expected: Vec<String> = ["m0", "m1", "m2", "m3", "m4", "after"]
        .into_iter()
        .chain(std::iter::repeat_n("late", late))
        .filter(|b| *b != acked)
        .map(str::to_string)
        .collect();
    expected.sort();
    assert_eq!(bodies(&server), expected);
}
