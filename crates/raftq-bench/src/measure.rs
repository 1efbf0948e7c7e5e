//! What a workload records: latency histograms, message counts, errors, the measured window
//! after the warm-up, the CPU time of the server processes and of this client, and the bytes the
//! server processes wrote to storage.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::timeline::Timeline;

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

/// The note of a row sent at a fixed rate: the messages a second it was meant to send.
pub const INTENDED_PER_SEC: &str = "intended_per_sec";

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
    /// CPU seconds of each server process over the window, in `--pids` order (`None`: not read
    /// at both ends); absent from rows of older reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_cpu_seconds: Vec<Option<f64>>,
    pub client_cpu_seconds: f64,
    /// Server CPU seconds per 1,000 messages.
    pub cpu_per_1k: Option<f64>,
    /// Bytes the server processes wrote to storage over the window, per message and per server
    /// process (see [`Written::per_message_per_node`]); absent from rows of older reports.
    #[serde(default)]
    pub written_bytes_per_msg_per_node: Option<f64>,
    /// The size of each message's body; absent from rows of older reports.
    #[serde(default)]
    pub body_bytes: Option<usize>,
    /// Workload-specific numbers (sends/s of an end-to-end run, unavailability, ...).
    pub extra: BTreeMap<String, f64>,
    /// Why a row is missing numbers, or the first error seen.
    pub note: Option<String>,
    /// The run that measured this row when it is not the report's own: a row merged in from a
    /// later run of some workloads (its command, date and raftq version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The latency-over-time plot of a fixed-rate row, relative to the report that links it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plot: Option<String>,
    /// Every send of a fixed-rate row with its times, on its way from the workload to the results
    /// file, which holds it as a line of its own (it is never part of the report's JSON).
    #[serde(skip)]
    pub timeline: Option<Timeline>,
}

impl Measurement {
    /// Whether the row sent at a fixed rate ([`INTENDED_PER_SEC`] in its notes), where every
    /// system carries the rate it is given, rather than with a number in flight.
    pub fn at_fixed_rate(&self) -> bool {
        self.extra.contains_key(INTENDED_PER_SEC)
    }

    /// A row from a recorder over `seconds` with `usage` spent.
    pub fn new(
        label: &str,
        key: String,
        workload: String,
        shape: (usize, usize),
        seconds: f64,
        recorder: &Recorder,
        usage: Usage,
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
            server_cpu_seconds: usage.server_cpu,
            node_cpu_seconds: usage.node_cpu.clone(),
            client_cpu_seconds: usage.client_cpu,
            cpu_per_1k: (messages > 0).then(|| usage.server_cpu * 1000.0 / messages as f64),
            written_bytes_per_msg_per_node: usage
                .written
                .and_then(|w| w.per_message_per_node(messages)),
            body_bytes: None,
            extra: BTreeMap::new(),
            note: recorder.first_error.clone(),
            run: None,
            plot: None,
            timeline: None,
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
            Usage::default(),
        );
        m.note = Some(format!("n/a: {why}"));
        m
    }
}

/// What the server processes and this client used between two samples.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// CPU seconds (user + system) of the server processes.
    pub server_cpu: f64,
    /// The same per server process, in the probe's order; `None` for one not read at both
    /// samples.
    pub node_cpu: Vec<Option<f64>>,
    /// CPU seconds of this load generator.
    pub client_cpu: f64,
    /// Bytes the server processes wrote to storage; `None` when no server's `/proc/<pid>/io`
    /// could be read at both samples.
    pub written: Option<Written>,
}

/// Bytes written to storage by the server processes read at both ends of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub bytes: u64,
    /// How many server processes the bytes add up over.
    pub servers: usize,
}

impl Written {
    /// Bytes per message per server process: the storage cost of one message on one node.
    /// `None` for a window without messages.
    pub fn per_message_per_node(self, messages: u64) -> Option<f64> {
        if messages == 0 || self.servers == 0 {
            return None;
        }
        Some(self.bytes as f64 / messages as f64 / self.servers as f64)
    }
}

/// Reads what the server processes and this process used: CPU time from `/proc/<pid>/stat`,
/// bytes written to storage from `/proc/<pid>/io`.
#[derive(Debug, Clone)]
pub struct Probe {
    pids: Vec<u32>,
    ticks_per_second: f64,
}

/// One sample: per server, its CPU clock ticks and its `write_bytes` so far (each `None` once
/// it is gone, or when it cannot be read), and this client's ticks.
#[derive(Debug, Clone)]
pub struct Sample {
    ticks: Vec<Option<u64>>,
    written: Vec<Option<u64>>,
    client: u64,
}

impl Probe {
    pub fn new(pids: Vec<u32>) -> Result<Probe> {
        let output = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .context("running getconf CLK_TCK")?;
        let ticks: f64 = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .context("getconf CLK_TCK printed no number")?;
        Ok(Probe {
            pids,
            ticks_per_second: ticks,
        })
    }

    pub fn sample(&self) -> Sample {
        Sample {
            ticks: self
                .pids
                .iter()
                .map(|pid| process_ticks(&format!("/proc/{pid}/stat")))
                .collect(),
            written: self
                .pids
                .iter()
                .map(|pid| written_bytes(&format!("/proc/{pid}/io")))
                .collect(),
            client: process_ticks("/proc/self/stat").unwrap_or(0),
        }
    }

    /// What was used since `before`; a server that is gone now (killed by the failover
    /// workload) counts for nothing, and is not one of the servers its bytes are divided by.
    pub fn since(&self, before: &Sample) -> Usage {
        self.between(before, &self.sample())
    }

    fn between(&self, before: &Sample, now: &Sample) -> Usage {
        let written: Vec<u64> = both_ends(&before.written, &now.written).collect();
        let node_cpu: Vec<Option<f64>> = before
            .ticks
            .iter()
            .zip(&now.ticks)
            .map(|(b, n)| {
                let ticks = n.as_ref()?.saturating_sub(*b.as_ref()?);
                Some(ticks as f64 / self.ticks_per_second)
            })
            .collect();
        Usage {
            server_cpu: node_cpu.iter().flatten().sum(),
            node_cpu,
            client_cpu: now.client.saturating_sub(before.client) as f64 / self.ticks_per_second,
            written: (!written.is_empty()).then(|| Written {
                bytes: written.iter().sum(),
                servers: written.len(),
            }),
        }
    }

    /// What was used during `window`, sampled at its edges (spawn before it opens).
    pub async fn during(self, window: Window) -> Usage {
        tokio::time::sleep_until(window.start.into()).await;
        let before = self.sample();
        tokio::time::sleep_until(window.end.into()).await;
        self.since(&before)
    }
}

/// Per server read at both samples, how much its counter grew.
fn both_ends<'a>(
    before: &'a [Option<u64>],
    now: &'a [Option<u64>],
) -> impl Iterator<Item = u64> + 'a {
    before
        .iter()
        .zip(now)
        .filter_map(|(b, n)| Some(n.as_ref()?.saturating_sub(*b.as_ref()?)))
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

/// `write_bytes` of `/proc/<pid>/io`: the bytes the process caused to be written to storage.
/// The kernel counts a page when the process dirties it (or writes it with direct I/O), so a
/// page written, synced and written again counts twice, as it goes to the disk twice.
fn written_bytes(path: &str) -> Option<u64> {
    parse_write_bytes(&std::fs::read_to_string(path).ok()?)
}

fn parse_write_bytes(io: &str) -> Option<u64> {
    io.lines()
        .find_map(|line| line.strip_prefix("write_bytes:"))?
        .trim()
        .parse()
        .ok()
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
    fn this_process_has_written_bytes() {
        assert!(written_bytes("/proc/self/io").is_some());
        assert!(written_bytes("/proc/0/io").is_none());
    }

    #[test]
    fn write_bytes_is_read_from_its_own_line() {
        let io = "rchar: 6976\nwchar: 10\nsyscr: 10\nsyscw: 1\nread_bytes: 4096\n\
                  write_bytes: 12288\ncancelled_write_bytes: 4096\n";
        assert_eq!(parse_write_bytes(io), Some(12_288));
        assert_eq!(parse_write_bytes("rchar: 1\n"), None);
        assert_eq!(parse_write_bytes("write_bytes: lots\n"), None);
    }

    #[test]
    fn written_bytes_are_divided_by_messages_and_servers() {
        let written = Written {
            bytes: 3 * 1000 * 2048,
            servers: 3,
        };
        assert_eq!(written.per_message_per_node(1000), Some(2048.0));
        assert_eq!(written.per_message_per_node(0), None);
        let none = Written {
            bytes: 0,
            servers: 0,
        };
        assert_eq!(none.per_message_per_node(10), None);
    }

    #[test]
    fn a_server_gone_or_unreadable_at_either_end_counts_for_nothing() {
        let probe = Probe {
            pids: vec![1, 2, 3],
            ticks_per_second: 100.0,
        };
        let before = Sample {
            ticks: vec![Some(100), Some(200), Some(300)],
            written: vec![Some(1_000), Some(2_000), None],
            client: 50,
        };
        // The first server was killed in between; the third's io could never be read.
        let now = Sample {
            ticks: vec![None, Some(250), Some(310)],
            written: vec![None, Some(6_000), Some(9_000)],
            client: 70,
        };
        let usage = probe.between(&before, &now);
        assert!((usage.server_cpu - 0.6).abs() < 1e-9);
        assert_eq!(usage.node_cpu, [None, Some(0.5), Some(0.1)]);
        assert!((usage.client_cpu - 0.2).abs() < 1e-9);
        assert_eq!(
            usage.written,
            Some(Written {
                bytes: 4_000,
                servers: 1
            })
        );
        let unreadable = Sample {
            written: vec![None, None, None],
            ..now
        };
        assert_eq!(probe.between(&before, &unreadable).written, None);
    }

    #[test]
    fn rows_carry_the_written_bytes_per_message_per_node() {
        let mut rec = Recorder::new();
        rec.record(500, Duration::from_millis(1));
        let usage = Usage {
            server_cpu: 1.0,
            node_cpu: vec![Some(0.5), Some(0.25), Some(0.25)],
            client_cpu: 0.5,
            written: Some(Written {
                bytes: 3_000_000,
                servers: 3,
            }),
        };
        let m = Measurement::new(
            "l",
            "k".into(),
            "w".into(),
            (1, 1),
            1.0,
            &rec,
            usage.clone(),
        );
        assert_eq!(m.node_cpu_seconds, [Some(0.5), Some(0.25), Some(0.25)]);
        assert_eq!(m.written_bytes_per_msg_per_node, Some(2000.0));
        assert_eq!(m.cpu_per_1k, Some(2.0));
        let empty = Measurement::new(
            "l",
            "k".into(),
            "w".into(),
            (1, 1),
            1.0,
            &Recorder::new(),
            usage,
        );
        assert_eq!(empty.written_bytes_per_msg_per_node, None);
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
