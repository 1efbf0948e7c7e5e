//! The file system mounted for real (root and /dev/fuse needed; skipped with a message
//! otherwise): files written with and without fsync, renames and directory fsyncs, then power
//! losses under many seeds. Synced data must always be there; every unsynced sector must be
//! either its old or its new content; every name must be as some subset of the unsynced
//! directory operations leaves it.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use raftq_powerfs::layout::Layout;
use raftq_powerfs::revert::revert;

const SECTOR: usize = 512;

fn fuse_usable() -> bool {
    let root = nix::unistd::geteuid().is_root();
    let device = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_ok();
    if !(root && device) {
        eprintln!("SKIPPED: mounting FUSE needs root and a usable /dev/fuse");
    }
    root && device
}

/// The contents of `name` under `dir`, which must be there.
fn read(dir: &Path, name: &str) -> Vec<u8> {
    fs::read(dir.join(name)).unwrap_or_else(|err| panic!("{name}: {err}"))
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed | 0x80)
        .collect()
}

fn sync_dir(path: &Path) {
    File::open(path)
        .expect("open dir")
        .sync_all()
        .expect("fsync dir");
}

fn write_synced(path: &Path, bytes: &[u8]) {
    let file = File::create(path).expect("create");
    file.write_all_at(bytes, 0).expect("write");
    file.sync_all().expect("fsync");
}

/// A mounted file system over a fresh backing directory.
struct Mounted {
    dir: tempfile::TempDir,
    session: Option<fuser::BackgroundSession>,
}

impl Mounted {
    fn new() -> Mounted {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir(dir.path().join("mnt")).expect("mountpoint");
        let mut mounted = Mounted { dir, session: None };
        mounted.mount();
        mounted
    }

    fn layout(&self) -> Layout {
        Layout::new(self.dir.path().join("backing"))
    }

    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    fn mount(&mut self) {
        let layout = self.layout();
        layout.prepare().expect("prepare");
        layout.discard().expect("discard");
        let options = raftq_powerfs::fs::Options {
            threads: 2,
            sync_backing: false,
        };
        let session = raftq_powerfs::fs::mount(&layout, &self.mnt(), options).expect("mount");
        self.session = Some(session);
    }

    fn unmount(&mut self) {
        if let Some(session) = self.session.take() {
            raftq_powerfs::fs::unmount(session, &self.mnt()).expect("unmount");
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// What the scenario wrote, to check a reverted directory against.
struct Expect {
    synced: Vec<u8>,
    rewritten: Vec<u8>,
    segment_synced: Vec<u8>,
    segment_now: Vec<u8>,
    renamed: Vec<u8>,
    durable: Vec<u8>,
    victim: Vec<u8>,
    replaced: Vec<u8>,
    truncated: Vec<u8>,
}

/// Writes the synced base, then the unsynced changes, through the mount at `mnt`.
fn scenario(mnt: &Path) -> Expect {
    let synced = pattern(4096, 1);
    write_synced(&mnt.join("file"), &synced);
    fs::create_dir(mnt.join("log")).expect("mkdir");
    write_synced(&mnt.join("log/segment"), &vec![0u8; 8192]);
    write_synced(&mnt.join("log/victim"), &pattern(700, 2));
    write_synced(&mnt.join("old"), &pattern(1500, 3));
    write_synced(&mnt.join("target"), &pattern(900, 4));
    write_synced(&mnt.join("truncated"), &pattern(3000, 5));
    sync_dir(&mnt.join("log"));
    sync_dir(mnt);

    // Unsynced overwrite inside the file and an unsynced append past its end.
    let file = OpenOptions::new()
        .write(true)
        .open(mnt.join("file"))
        .expect("open");
    let mut rewritten = synced.clone();
    rewritten[1000..3000].copy_from_slice(&pattern(2000, 6));
    rewritten.extend_from_slice(&pattern(1000, 7));
    file.write_all_at(&rewritten[1000..], 1000).expect("write");
    drop(file);

    // A preallocated segment: a synced record, then an unsynced one.
    let segment = OpenOptions::new()
        .write(true)
        .open(mnt.join("log/segment"))
        .expect("open");
    let mut segment_now = vec![0u8; 8192];
    segment_now[..2048].copy_from_slice(&pattern(2048, 8));
    segment
        .write_all_at(&segment_now[..2048], 0)
        .expect("write");
    segment.sync_data().expect("fdatasync");
    let segment_synced = segment_now.clone();
    segment_now[2048..4096].copy_from_slice(&pattern(2048, 9));
    segment
        .write_all_at(&segment_now[2048..4096], 2048)
        .expect("write");
    drop(segment);

    // In `log/`, never fsynced again: a synced file renamed into place, and an unlink.
    let renamed = pattern(1234, 10);
    write_synced(&mnt.join("log/tmp.new"), &renamed);
    fs::rename(mnt.join("log/tmp.new"), mnt.join("log/renamed")).expect("rename");
    fs::remove_file(mnt.join("log/victim")).expect("unlink");

    // A length cut without a file fsync.
    let cut = OpenOptions::new()
        .write(true)
        .open(mnt.join("truncated"))
        .expect("open");
    cut.set_len(100).expect("truncate");
    drop(cut);

    // Fully durable, in the root: a new file and a rename over another, then fsyncs.
    let durable = pattern(2500, 11);
    write_synced(&mnt.join("durable"), &durable);
    fs::rename(mnt.join("old"), mnt.join("target")).expect("rename over");
    sync_dir(mnt);
    Expect {
        synced,
        rewritten,
        segment_synced,
        segment_now,
        renamed,
        durable,
        victim: pattern(700, 2),
        replaced: pattern(1500, 3),
        truncated: pattern(3000, 5),
    }
}

/// Sector `s` of `bytes` as a file of length `len` reads it (zeros past the end).
fn sector(bytes: &[u8], s: usize, len: usize) -> Vec<u8> {
    let start = s * SECTOR;
    let end = (start + SECTOR).min(len);
    (start..end)
        .map(|i| bytes.get(i).copied().unwrap_or(0))
        .collect()
}

/// Every sector of `got` is that of `old` or of `new`; returns the sectors that were new and
/// differ from old.
fn old_or_new(name: &str, got: &[u8], old: &[u8], new: &[u8]) -> usize {
    let mut newer = 0;
    for s in 0..got.len().div_ceil(SECTOR) {
        let here = sector(got, s, got.len());
        let (was_old, was_new) = (
            here == sector(old, s, got.len()),
            here == sector(new, s, got.len()),
        );
        assert!(
            was_old || was_new,
            "{name}: sector {s} is neither old nor new"
        );
        newer += usize::from(was_new && !was_old);
    }
    newer
}

/// Checks the reverted data directory; returns a summary of the outcome.
fn check(data: &Path, expect: &Expect) -> String {
    let file = read(data, "file");
    assert!(
        [4096, 4096 + 512, 5096].contains(&file.len()),
        "file length {}",
        file.len()
    );
    let file_new = old_or_new("file", &file, &expect.synced, &expect.rewritten);
    let segment = read(data, "log/segment");
    assert_eq!(segment.len(), 8192);
    assert_eq!(
        segment[..2048],
        expect.segment_synced[..2048],
        "the synced record"
    );
    old_or_new(
        "segment",
        &segment,
        &expect.segment_synced,
        &expect.segment_now,
    );
    let names = (
        data.join("log/tmp.new").exists(),
        data.join("log/renamed").exists(),
    );
    assert_ne!(names, (true, true), "a rename is whole");
    for name in ["log/tmp.new", "log/renamed"] {
        if let Ok(bytes) = fs::read(data.join(name)) {
            assert_eq!(bytes, expect.renamed, "{name} was synced before the rename");
        }
    }
    if let Ok(bytes) = fs::read(data.join("log/victim")) {
        assert_eq!(bytes, expect.victim);
    }
    let truncated = read(data, "truncated");
    assert!(truncated.len() == 100 || truncated.len() == 3000);
    assert_eq!(truncated[..100], expect.truncated[..100]);
    if truncated.len() == 3000 {
        assert_eq!(truncated[512..], expect.truncated[512..]);
    }
    assert_eq!(read(data, "durable"), expect.durable);
    assert_eq!(read(data, "target"), expect.replaced);
    assert!(!data.join("old").exists());
    format!(
        "file {} +{file_new} | names {names:?} | victim {} | truncated {}",
        file.len(),
        data.join("log/victim").exists(),
        truncated.len()
    )
}

#[test]
fn a_power_loss_keeps_synced_data_and_each_unsynced_sector_old_or_new() {
    if !fuse_usable() {
        return;
    }
    let mut outcomes = BTreeSet::new();
    let mut names = BTreeSet::new();
    for seed in 0..24 {
        let mut mounted = Mounted::new();
        let expect = scenario(&mounted.mnt());
        mounted.unmount();
        let report = revert(&mounted.layout(), seed).expect("revert");
        assert_eq!(report.failures, 0, "seed {seed}: {report:?}");
        let outcome = check(&mounted.layout().data(), &expect);
        eprintln!("seed {seed}: {outcome}; {report:?}");
        names.insert(outcome.split(" | ").nth(1).unwrap_or_default().to_string());
        outcomes.insert(outcome);
        assert!(fs::read_dir(mounted.layout().files())
            .expect("files")
            .next()
            .is_none());
        // The file system mounts again on what the power loss left.
        mounted.mount();
        assert!(mounted.mnt().join("durable").exists());
    }
    assert_eq!(
        names.len(),
        3,
        "created+renamed, created only, neither: {names:?}"
    );
    assert!(outcomes.len() >= 10, "{outcomes:#?}");
}

#[test]
fn without_a_power_loss_everything_written_is_kept() {
    if !fuse_usable() {
        return;
    }
    let mut mounted = Mounted::new();
    let expect = scenario(&mounted.mnt());
    mounted.unmount();
    mounted.mount();
    let mnt = mounted.mnt();
    assert_eq!(read(&mnt, "file"), expect.rewritten);
    assert_eq!(read(&mnt, "log/segment"), expect.segment_now);
    assert_eq!(read(&mnt, "log/renamed"), expect.renamed);
    assert!(!mnt.join("log/victim").exists());
    assert_eq!(
        fs::metadata(mnt.join("truncated"))
            .expect("truncated")
            .len(),
        100
    );
}

#[test]
fn a_lost_mkdir_takes_its_synced_contents_with_it() {
    if !fuse_usable() {
        return;
    }
    let mut seen = BTreeSet::new();
    for seed in 0..12 {
        let mut mounted = Mounted::new();
        let mnt = mounted.mnt();
        fs::create_dir(mnt.join("snapshots")).expect("mkdir");
        write_synced(&mnt.join("snapshots/s1"), &pattern(600, 12));
        sync_dir(&mnt.join("snapshots"));
        fs::create_dir_all(mnt.join("a/b")).expect("mkdir -p");
        mounted.unmount();
        revert(&mounted.layout(), seed).expect("revert");
        let data = mounted.layout().data();
        let kept = data.join("snapshots").exists();
        if kept {
            assert_eq!(read(&data, "snapshots/s1"), pattern(600, 12));
        }
        // `a/b` was made inside `a`, whose own creation may be lost: b never outlives a.
        seen.insert((kept, data.join("a").exists(), data.join("a/b").exists()));
    }
    assert!(
        seen.contains(&(false, false, false)) && seen.contains(&(true, true, true)),
        "{seen:?}"
    );
}

/// Runs the binary's `mount` around a command; returns its status and how long it took.
fn run_mount(
    dir: &Path,
    command: &[&str],
    stop_after: Option<Duration>,
) -> (Option<i32>, Duration) {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_raftq-powerfs"))
        .arg("mount")
        .arg("--backing")
        .arg(dir.join("backing"))
        .arg("--mountpoint")
        .arg(dir.join("mnt"))
        .arg("--")
        .args(command)
        .spawn()
        .expect("spawn");
    if let Some(after) = stop_after {
        std::thread::sleep(after);
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
    }
    let status = child.wait().expect("wait");
    (status.code(), start.elapsed())
}

#[test]
fn the_mount_command_runs_the_node_passes_sigterm_on_and_reverts_when_armed() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir(dir.path().join("mnt")).expect("mountpoint");
    let mnt = dir.path().join("mnt");
    let script = format!(
        "echo kept > {0}/x && echo more >> {0}/x && exit 3",
        mnt.display()
    );
    let (status, _) = run_mount(dir.path(), &["/bin/sh", "-c", &script], None);
    assert_eq!(status, Some(3), "the command's status");
    let layout = Layout::new(dir.path().join("backing"));
    assert_eq!(
        fs::read_to_string(layout.data().join("x")).expect("x"),
        "kept\nmore\n"
    );
    // A stop signal reaches the command (sleep dies of it: 128 + 15) and unmounts.
    let (status, took) = run_mount(
        dir.path(),
        &["sleep", "30"],
        Some(Duration::from_millis(800)),
    );
    assert_eq!(status, Some(143));
    assert!(took < Duration::from_secs(10));
    // Armed: the next start loses the unsynced file and its name (all seeds: nothing synced).
    let script = format!("echo lost > {}/y", mnt.display());
    run_mount(dir.path(), &["/bin/sh", "-c", &script], None);
    layout.arm(1).expect("arm");
    let check = format!("test ! -s {}/y", mnt.display());
    let (status, _) = run_mount(dir.path(), &["/bin/sh", "-c", &check], None);
    assert_eq!(status, Some(0), "y is gone or empty after the power loss");
    assert_eq!(layout.armed().expect("armed"), None);
}

#[test]
fn concurrent_writers_renames_and_unlinks_leave_a_consistent_directory_and_an_empty_trash() {
    if !fuse_usable() {
        return;
    }
    let mut mounted = Mounted::new();
    let mnt = mounted.mnt();
    let content = |t: usize, k: usize| pattern(300 + 97 * k, (t * 50 + k) as u8);
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let mnt = mnt.clone();
            std::thread::spawn(move || {
                for k in 0..40 {
                    let tmp = mnt.join(format!("t{t}-{k}.tmp"));
                    write_synced(&tmp, &content(t, k));
                    fs::rename(&tmp, mnt.join(format!("t{t}-{k}"))).expect("rename");
                    sync_dir(&mnt);
                    if k % 3 == 2 {
                        fs::remove_file(mnt.join(format!("t{t}-{}", k - 1))).expect("unlink");
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    sync_dir(&mnt);
    let layout = mounted.layout();
    assert!(fs::read_dir(layout.trash())
        .expect("trash")
        .next()
        .is_none());
    assert_eq!(fs::metadata(layout.dirops()).expect("dirops").len(), 0);
    mounted.unmount();
    revert(&layout, 3).expect("revert");
    for t in 0..4 {
        for k in 0..40 {
            let path = layout.data().join(format!("t{t}-{k}"));
            if k % 3 == 1 && k < 39 {
                assert!(!path.exists(), "{path:?} was unlinked and synced");
            } else {
                assert_eq!(fs::read(&path).expect("durable"), content(t, k));
            }
        }
    }
}
