//! What a workload records: latency histograms, message counts, errors, the measured window
//! after the warm-up, and the CPU time of the server processes and of this client.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies are recorded in microseconds, up to this many.
const MAX_LATENCY_MICROS: u64 = 300_000_000;

/// The part of a run that counts: after the warm-up, before the end.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start: Instant,
    pub end: Instant,
}

impl Window {
    /// A window that opens after `warmup` from now and lasts `length`.
    pub fn after(warmup: Duration, length: Duration) -> Window {
        let start = Instant::now() + warmup;
        Window {
            start,
            end: start + length,
        }
    }

    pub fn contains(&self, t: Instant) -> bool {
        t >= self.start && t <= self.end
    }

    pub fn open(&self) -> bool {
        Instant::now() < self.end
    }

    pub fn seconds(&self) -> f64 {
        (self.end - self.start).as_secs_f64()
    }
}

/// One task's tally; tasks merge theirs at the end.
#[derive(Debug, Clone)]
pub struct Recorder {
    pub latency: Histogram<u64>,
    pub messages: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder::new()
    }
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_MICROS, 3)
                .expect("constant histogram bounds are valid"),
            messages: 0,
            errors: 0,
            first_error: None,
        }
    }

    /// Counts `messages` that took `latency`.
    pub fn record(&mut self, messages: u64, latency: Duration) {
        self.messages += messages;
        let micros = u64::try_from(latency.as_micros()).unwrap_or(MAX_LATENCY_MICROS);
        self.latency.saturating_record(micros.max(1));
    }

    pub fn error(&mut self, error: &anyhow::Error) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!("{error:#}"));
        }
    }

    pub fn merge(&mut self, other: &Recorder) {
        self.messages += other.messages;
        self.errors += other.errors;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&other.latency);
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }

    pub fn latency_summary(&self) -> Option<Latency> {
        if self.latency.is_empty() {
            return None;
        }
        let ms = |q: f64| self.latency.value_at_quantile(q) as f64 / 1000.0;
        Some(Latency {
            p50_ms: ms(0.50),
            p90_ms: ms(0.90),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: self.latency.max() as f64 / 1000.0,
        })
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Latency {
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

/// One row of the results: a workload run against one system.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measurement {
    /// The system and topology (`raftq-3`, `rabbitmq-3`, `jetstream-r3`, ...).
    pub label: String,
    /// Which workload; rows with the same `key` are compared across systems.
    pub key: String,
    /// Human description of the workload.
    pub workload: String,
    pub in_flight: usize,
    pub batch: usize,
    pub seconds: f64,
    pub messages: u64,
    /// Messages per second over `seconds`.
    pub per_sec: f64,
    pub latency: Option<Latency>,
    pub errors: u64,
    pub server_cpu_seconds: f64,
    pub client_cpu_seconds: f64,
    /// Server CPU seconds per 1,000 messages.
    pub cpu_per_1k: Option<f64>,
    /// Workload-specific numbers (sends/s of an end-to-end run, unavailability, ...).
    pub extra: BTreeMap<String, f64>,
    /// Why a row is missing numbers, or the first error seen.
    pub note: Option<String>,
    /// The run that measured this row when it is not the report's own: a row merged in from a
    /// later run of some workloads (its command, date and raftq version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

impl Measurement {
    /// A row from a recorder over `seconds` with `cpu` spent.
    pub fn new(
        label: &str,
        key: String,
        workload: String,
        shape: (usize, usize),
        seconds: f64,
        recorder: &Recorder,
        cpu: CpuSpent,
    ) -> Measurement {
        let messages = recorder.messages;
        Measurement {
            label: label.to_string(),
            key,
            workload,
            in_flight: shape.0,
            batch: shape.1,
            seconds,
            messages,
            per_sec: if seconds > 0.0 {
                messages as f64 / seconds
            } else {
                0.0
            },
            latency: recorder.latency_summary(),
            errors: recorder.errors,
            server_cpu_seconds: cpu.server,
            client_cpu_seconds: cpu.client,
            cpu_per_1k: (messages > 0).then(|| cpu.server * 1000.0 / messages as f64),
            extra: BTreeMap::new(),
            note: recorder.first_error.clone(),
            run: None,
        }
    }

    /// A row for a workload the system has no equivalent of.
    pub fn not_applicable(label: &str, key: String, workload: String, why: &str) -> Measurement {
        let mut m = Measurement::new(
            label,
            key,
            workload,
            (0, 0),
            0.0,
            &Recorder::new(),
            CpuSpent::default(),
        );
        m.note = Some(format!("n/a: {why}"));
        m
    }
}

/// CPU seconds spent between two samples.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSpent {
    pub server: f64,
    pub client: f64,
}

/// Reads the CPU time (user + system) of the server processes and of this process.
#[derive(Debug, Clone)]
pub struct CpuProbe {
    pids: Vec<u32>,
    ticks_per_second: f64,
}

/// A CPU sample: clock ticks used so far by each server (`None` once it is gone) and by this
/// client.
#[derive(Debug, Clone)]
pub struct CpuSample {
    servers: Vec<Option<u64>>,
    client: u64,
}

impl CpuProbe {
    pub fn new(pids: Vec<u32>) -> Result<CpuProbe> {
        let output = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .context("running getconf CLK_TCK")?;
        let ticks: f64 = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .context("getconf CLK_TCK printed no number")?;
        Ok(CpuProbe {
            pids,
            ticks_per_second: ticks,
        })
    }

    pub fn sample(&self) -> CpuSample {
        CpuSample {
            servers: self
                .pids
                .iter()
                .map(|pid| process_ticks(&format!("/proc/{pid}/stat")))
                .collect(),
            client: process_ticks("/proc/self/stat").unwrap_or(0),
        }
    }

    /// CPU spent since `before`; a server that is gone now (killed by the failover workload)
    /// counts for nothing.
    pub fn since(&self, before: &CpuSample) -> CpuSpent {
        let now = self.sample();
        let server: u64 = before
            .servers
            .iter()
            .zip(&now.servers)
            .filter_map(|(b, n)| Some(n.as_ref()?.saturating_sub(*b.as_ref()?)))
            .sum();
        CpuSpent {
            server: server as f64 / self.ticks_per_second,
            client: now.client.saturating_sub(before.client) as f64 / self.ticks_per_second,
        }
    }

    /// The CPU spent during `window`, sampled at its edges (spawn before it opens).
    pub async fn during(self, window: Window) -> CpuSpent {
        tokio::time::sleep_until(window.start.into()).await;
        let before = self.sample();
        tokio::time::sleep_until(window.end.into()).await;
        self.since(&before)
    }
}

/// utime + stime (fields 14 and 15) of `/proc/<pid>/stat`, in clock ticks.
fn process_ticks(path: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_ticks() {
        assert!(process_ticks("/proc/self/stat").is_some());
        assert!(process_ticks("/proc/0/stat").is_none());
    }

    #[test]
    fn recorders_merge_counts_and_latencies() {
        let mut a = Recorder::new();
        a.record(10, Duration::from_millis(2));
        let mut b = Recorder::new();
        b.record(1, Duration::from_millis(4));
        b.error(&anyhow::anyhow!("boom"));
        a.merge(&b);
        assert_eq!((a.messages, a.errors), (11, 1));
        assert_eq!(a.first_error.as_deref(), Some("boom"));
        let l = a.latency_summary().expect("latency");
        assert!((l.max_ms - 4.0).abs() < 0.01);
    }
}
