//! The header of a report: the machine's cores, kernel and memory, the fsync latency of the disk
//! the systems write to, and facts handed in by the caller (versions, configurations, date).

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
        let memory_kib: f64 = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0);
        Ok(Machine {
            cpu_model,
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            kernel,
            memory_gib: memory_kib / (1024.0 * 1024.0),
            load: std::fs::read_to_string("/proc/loadavg")
                .map(|l| l.trim().to_string())
                .unwrap_or_default(),
            fsync: measure_fsync(dir)?,
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
}
