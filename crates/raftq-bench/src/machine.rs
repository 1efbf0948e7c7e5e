//! The header of a report: the machine's cores, kernel and memory, the fsync latency of the disk
//! the systems write to, and facts handed in by the caller (versions, configurations, date).
//!
//! It can also measure what a first write to memory costs ([`first_touch`]). On a virtual
//! machine the hypervisor backs a guest page only when it is first written, and a guest that
//! reports its free pages hands freed memory back: every new page of the files a system writes
//! then costs this, so a system that writes more bytes pays more for it here than on dedicated
//! hardware.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::measure::Recorder;

/// Bytes written before each fsync: one small log append.
const FSYNC_WRITE: usize = 4096;
/// The fsync loop stops after this many syncs or this long, whichever comes first.
const FSYNC_SYNCS: usize = 1000;
const FSYNC_TIME: Duration = Duration::from_secs(3);
/// The unit of memory the first-touch measure writes to once.
const PAGE: usize = 4096;
/// The first-touch measure allocates in pieces of this size.
const TOUCH_PIECE: usize = 256 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: usize,
    pub kernel: String,
    pub memory_gib: f64,
    /// `/proc/loadavg` when the header was written (before the run): other work on the
    /// machine skews the results.
    pub load: String,
    pub fsync: Fsync,
    /// The first-touch measure, when it was made.
    #[serde(default)]
    pub first_touch: Option<FirstTouch>,
    /// Versions, configurations and the like, as `name = value`.
    pub facts: BTreeMap<String, String>,
}

/// Latency of appending [`FSYNC_WRITE`] bytes to a file and `fdatasync`ing it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fsync {
    pub dir: String,
    pub syncs: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// One write to each page of a stretch of newly allocated memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FirstTouch {
    pub gib: f64,
    pub seconds: f64,
    /// Time per [`PAGE`] bytes, user and system together.
    pub us_per_page: f64,
}

/// A `/proc/meminfo` field (`MemTotal:`, ...) in bytes; 0 when it cannot be read.
fn meminfo(field: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .map_or(0, |kib| kib.saturating_mul(1024))
}

/// Writes one byte to every page of `bytes` of newly allocated memory, holding all of it until
/// the end (freed memory would be handed out again for the next piece), then frees it.
pub fn first_touch(bytes: u64) -> FirstTouch {
    let start = Instant::now();
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut left = bytes;
    while left > 0 {
        let len = usize::try_from(left).map_or(TOUCH_PIECE, |l| l.min(TOUCH_PIECE));
        let mut piece = vec![0u8; len];
        for byte in piece.iter_mut().step_by(PAGE) {
            *byte = 1;
        }
        pieces.push(std::hint::black_box(piece));
        left -= len as u64;
    }
    let seconds = start.elapsed().as_secs_f64();
    drop(pieces);
    let pages = bytes.div_ceil(PAGE as u64).max(1);
    FirstTouch {
        gib: bytes as f64 / f64::from(1u32 << 30),
        seconds,
        us_per_page: seconds * 1e6 / pages as f64,
    }
}

impl Machine {
    /// Describes this machine, measuring fsync in `dir`.
    pub fn describe(dir: &Path, facts: BTreeMap<String, String>) -> Result<Machine> {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, m)| m.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|k| k.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Ok(Machine {
            cpu_model,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel,
            memory_gib: meminfo("MemTotal:") as f64 / f64::from(1u32 << 30),
            load: std::fs::read_to_string("/proc/loadavg")
                .map(|l| l.trim().to_string())
                .unwrap_or_default(),
            fsync: measure_fsync(dir)?,
            first_touch: None,
            facts,
        })
    }
}

fn measure_fsync(dir: &Path) -> Result<Fsync> {
    let path = dir.join(format!(".raftq-bench-fsync-{}", std::process::id()));
    let result = fsync_loop(&path);
    // The probe file is ours alone; a failure to remove it leaves a stray file, nothing more.
    let _ = std::fs::remove_file(&path);
    let rec = result?;
    let latency = rec
        .latency_summary()
        .context("the fsync loop made no sync")?;
    Ok(Fsync {
        dir: dir.display().to_string(),
        syncs: rec.messages,
        p50_ms: latency.p50_ms,
        p99_ms: latency.p99_ms,
        max_ms: latency.max_ms,
    })
}

fn fsync_loop(path: &Path) -> Result<Recorder> {
    let mut file: File = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let block = vec![b'f'; FSYNC_WRITE];
    let mut rec = Recorder::new();
    let start = Instant::now();
    while rec.messages < FSYNC_SYNCS as u64 && start.elapsed() < FSYNC_TIME {
        let t0 = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        rec.record(1, t0.elapsed());
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_this_machine() {
        let dir = std::env::temp_dir();
        let facts = BTreeMap::from([("raftq".to_string(), "test".to_string())]);
        let m = Machine::describe(&dir, facts).expect("describe");
        assert!(m.cores >= 1);
        assert!(m.fsync.syncs >= 1);
        assert_eq!(m.facts["raftq"], "test");
    }

    #[test]
    fn the_first_touch_measure_covers_what_it_was_asked_for() {
        let touch = first_touch(TOUCH_PIECE as u64 + 3 * PAGE as u64);
        assert!((touch.gib - (TOUCH_PIECE + 3 * PAGE) as f64 / f64::from(1u32 << 30)).abs() < 1e-9);
        assert!(touch.seconds > 0.0);
        assert!(touch.us_per_page > 0.0);
    }
}
