//! The results file (one JSON object a line) and the markdown report made from it: the machine,
//! each system's durability and mappings, the comparative targets, the headline ratios of raftq
//! to each peer, and every measurement, with links to the latency-over-time plots it draws.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

mod scale;
mod targets;

use crate::driver::SystemNotes;
use crate::machine::Machine;
use crate::measure::Measurement;
use crate::timeline::Timeline;

/// One line of the results file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    System(SystemLine),
    /// Boxed: a measurement is several times the size of the other lines.
    Result(Box<Measurement>),
    /// Every send of a row that kept them, written before the row.
    Timeline(Timeline),
}

/// A system and topology under test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SystemLine {
    pub label: String,
    /// `raftq-grpc`, `raftq-rest`, `rabbitmq` or `jetstream`.
    pub system: String,
    /// Copies of each message (nodes of the cluster, or stream replicas).
    pub replicas: usize,
    pub notes: SystemNotes,
    /// raftq: the Raft groups the cluster laid its queues over, when the run was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<u32>,
    /// The CPUs each server could use (its container's cap), when the run was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_per_node: Option<f64>,
}

/// Everything a report is made of.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub machine: Machine,
    pub systems: Vec<SystemLine>,
    pub results: Vec<Measurement>,
    /// The results file's timelines, drawn by [`Results::plot`]; not part of the report's JSON.
    #[serde(skip)]
    pub timelines: Vec<Timeline>,
}

impl Results {
    pub fn parse(machine: Machine, lines: &str) -> Result<Results> {
        let mut systems = Vec::new();
        let mut results = Vec::new();
        let mut timelines = Vec::new();
        for (i, line) in lines.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let parsed: Line =
                serde_json::from_str(line).with_context(|| format!("results line {}", i + 1))?;
            match parsed {
                Line::System(s) => systems.push(s),
                Line::Result(m) => results.push(*m),
                Line::Timeline(t) => timelines.push(t),
            }
        }
        Ok(Results {
            machine,
            systems,
            results,
            timelines,
        })
    }

    /// Draws each timeline as a PNG in the directory beside `markdown` named after it (made if
    /// missing), and links its row to it.
    pub fn plot(&mut self, markdown: &Path) -> Result<()> {
        let stem = markdown
            .file_stem()
            .with_context(|| format!("{} names no file", markdown.display()))?
            .to_string_lossy()
            .into_owned();
        let dir = markdown.with_file_name(&stem);
        for timeline in &self.timelines {
            let Some(row) = self
                .results
                .iter_mut()
                .find(|m| m.label == timeline.label && m.key == timeline.key)
            else {
                continue;
            };
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let name = format!("{}-{}.png", timeline.key.replace('/', "-"), timeline.label);
            let title = match row.latency {
                Some(l) => format!(
                    "{}: {}; p50 {:.2}, p99 {:.2}, p99.9 {:.2}, max {:.2} ms",
                    row.label, row.workload, l.p50_ms, l.p99_ms, l.p999_ms, l.max_ms
                ),
                None => format!("{}: {}", row.label, row.workload),
            };
            timeline.plot(&dir.join(&name), &title, row.latency.map(|l| l.p99_ms))?;
            row.plot = Some(format!("{stem}/{name}"));
        }
        Ok(())
    }

    /// These results with `newer`'s rows in place of all rows of the same workloads, so that a
    /// workload's rows still come from one run; `newer`'s rows say which run measured them (its
    /// command, date, version and load), and its systems not listed yet are added. The header
    /// stays this one's.
    pub fn merge(mut self, newer: Results) -> Results {
        let fact = |k: &str| newer.machine.facts.get(k).map_or("?", String::as_str);
        let run = format!(
            "`{}` at {}, raftq {}, /proc/loadavg before it {}",
            fact("command"),
            fact("date"),
            fact("raftq"),
            newer.machine.load
        );
        self.results
            .retain(|m| !newer.results.iter().any(|n| n.key == m.key));
        // A system of the newer run keeps its place but takes the newer build's notes, which
        // describe how the merged rows were measured.
        for system in newer.systems {
            match self.systems.iter_mut().find(|s| s.label == system.label) {
                Some(line) => *line = system,
                None => self.systems.push(system),
            }
        }
        self.results
            .extend(newer.results.into_iter().map(|m| Measurement {
                run: Some(run.clone()),
                ..m
            }));
        self
    }

    fn system(&self, label: &str) -> Option<&SystemLine> {
        self.systems.iter().find(|s| s.label == label)
    }

    fn get(&self, label: &str, key: &str) -> Option<&Measurement> {
        self.results
            .iter()
            .find(|m| m.label == label && m.key == key && m.messages > 0)
    }

    /// The label of the first system of `kind` with `replicas` copies.
    fn find(&self, kind: &str, replicas: usize) -> Option<&str> {
        self.systems
            .iter()
            .find(|s| s.system == kind && s.replicas == replicas)
            .map(|s| s.label.as_str())
    }

    /// Workload keys in the order they were first measured.
    fn keys(&self) -> Vec<(&str, &str)> {
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for m in &self.results {
            if !keys.iter().any(|(k, _)| *k == m.key) {
                keys.push((&m.key, &m.workload));
            }
        }
        keys
    }

    /// raftq (gRPC) against each peer with as many copies, as (raftq label, peer label).
    fn pairs(&self) -> Vec<(&str, &str)> {
        let mut pairs = Vec::new();
        for raftq in self.systems.iter().filter(|s| s.system == "raftq-grpc") {
            for peer in self
                .systems
                .iter()
                .filter(|s| s.replicas == raftq.replicas && !s.system.starts_with("raftq"))
            {
                pairs.push((raftq.label.as_str(), peer.label.as_str()));
            }
        }
        pairs
    }

    /// The report, naming `json` as where its raw rows are.
    pub fn markdown(&self, json: &str) -> String {
        let mut out = String::new();
        self.header(&mut out, json);
        self.systems_table(&mut out);
        self.targets(&mut out);
        self.headline(&mut out);
        self.details(&mut out);
        out.push_str(METHOD);
        out
    }

    fn header(&self, out: &mut String, json: &str) {
        let _ = writeln!(
            out,
            "# Benchmarks: raftq, RabbitMQ quorum queues, NATS JetStream\n"
        );
        let _ = writeln!(
            out,
            "Written by `scripts/bench`; the raw rows are in `{json}`. \
             Every system ran on this one machine, on loopback, one after the other, driven by \
             the same load generator (`crates/raftq-bench`, one `Driver` trait per system) in \
             the same run.\n"
        );
        self.machine_section(out);
        let _ = writeln!(
            out,
            "\nThe load generator shares the {} cores with the servers, so every number includes \
             the client's own CPU; the `client CPU` column shows how much.\n",
            self.machine.cores
        );
    }

    /// The command and date of the run, then the machine and the facts given about the run.
    fn machine_section(&self, out: &mut String) {
        let m = &self.machine;
        let fact = |k: &str| m.facts.get(k).map_or("?", String::as_str);
        let _ = writeln!(out, "Command: `{}`\n", fact("command"));
        let _ = writeln!(out, "Run: {}\n", fact("date"));
        let _ = writeln!(out, "## Machine\n");
        table_head(out, &["what", "value"]);
        let _ = writeln!(out, "| CPU | {} × {} |", m.cores, m.cpu_model);
        let _ = writeln!(out, "| kernel | {} |", m.kernel);
        let _ = writeln!(out, "| memory | {:.1} GiB |", m.memory_gib);
        let _ = writeln!(out, "| /proc/loadavg before the run | {} |", m.load);
        let _ = writeln!(
            out,
            "| disk fsync (4 KiB append + fdatasync, {} syncs in `{}`) | p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms |",
            m.fsync.syncs, m.fsync.dir, m.fsync.p50_ms, m.fsync.p99_ms, m.fsync.max_ms
        );
        if let Some(t) = &m.first_touch {
            let _ = writeln!(
                out,
                "| first write to memory ({:.1} GiB, one byte per 4 KiB page) | {:.2} µs per page |",
                t.gib, t.us_per_page
            );
        }
        for (k, v) in m
            .facts
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "command" | "date"))
        {
            let _ = writeln!(out, "| {k} | {v} |");
        }
    }

    fn systems_table(&self, out: &mut String) {
        let _ = writeln!(out, "## Systems and their durability\n");
        table_head(
            out,
            &[
                "label",
                "system",
                "copies",
                "durability",
                "FIFO workloads",
                "redelivery",
                "dead letters",
            ],
        );
        for s in &self.systems {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                s.label,
                s.system,
                s.replicas,
                s.notes.durability,
                s.notes.fifo,
                s.notes.redelivery,
                s.notes.dead_letter
            );
        }
        let _ = writeln!(out);
    }

    fn headline(&self, out: &mut String) {
        let _ = writeln!(out, "## Headline: raftq ÷ peer, same run\n");
        let _ = writeln!(
            out,
            "Throughput ratio above 1 and p99 ratio below 1 favour raftq. Each pair has as many \
             copies of each message (3 nodes against quorum queues of 3 and streams of 3 \
             replicas; 1 node against 1 replica).\n"
        );
        for (raftq, peer) in self.pairs() {
            let _ = writeln!(out, "### {raftq} ÷ {peer}\n");
            table_head(
                out,
                &[
                    "workload",
                    &format!("{raftq} msg/s"),
                    &format!("{peer} msg/s"),
                    "throughput ×",
                    &format!("{raftq} p99 ms"),
                    &format!("{peer} p99 ms"),
                    "p99 ×",
                ],
            );
            for (key, what) in self.keys() {
                let (Some(r), Some(p)) = (self.get(raftq, key), self.get(peer, key)) else {
                    continue;
                };
                let p99 = |m: &Measurement| m.latency.map(|l| l.p99_ms);
                let p99_ratio = match (p99(r), p99(p)) {
                    (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                    _ => "–".into(),
                };
                let _ = writeln!(
                    out,
                    "| {what} | {:.0} | {:.0} | {:.2} | {} | {} | {p99_ratio} |",
                    r.per_sec,
                    p.per_sec,
                    r.per_sec / p.per_sec,
                    fmt_opt(p99(r)),
                    fmt_opt(p99(p)),
                );
            }
            let _ = writeln!(out);
        }
    }

    fn details(&self, out: &mut String) {
        let _ = writeln!(out, "## Every measurement\n");
        let _ = writeln!(
            out,
            "msg/s counts messages confirmed (sends) or acknowledged (receive workloads) in the \
             measured window after the warm-up. Latency: per request for sends (a batch is one \
             request), from the send to the ack's return for send+receive+ack, per receive+ack \
             round trip for drains, the quiet tenants' time in queue (send to receive) for the \
             fair queue. Server CPU is user + system time of the server processes \
             over the window; `CPU s/1k` divides it by the messages.\n"
        );
        for (key, what) in self.keys() {
            let _ = writeln!(out, "### {what}\n");
            table_head(
                out,
                &[
                    "system",
                    "msg/s",
                    "p50 ms",
                    "p99 ms",
                    "p99.9 ms",
                    "max ms",
                    "errors",
                    "server CPU s/1k",
                    "client CPU s",
                    "notes",
                ],
            );
            for m in self.results.iter().filter(|m| m.key == key) {
                let l = m.latency;
                let copies = self
                    .system(&m.label)
                    .map_or(String::new(), |s| format!(" ({}×)", s.replicas));
                let _ = writeln!(
                    out,
                    "| {}{copies} | {:.0} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
                    m.label,
                    m.per_sec,
                    fmt_opt(l.map(|l| l.p50_ms)),
                    fmt_opt(l.map(|l| l.p99_ms)),
                    fmt_opt(l.map(|l| l.p999_ms)),
                    fmt_opt(l.map(|l| l.max_ms)),
                    m.errors,
                    m.cpu_per_1k.map_or("–".into(), |c| format!("{c:.3}")),
                    m.client_cpu_seconds,
                    notes(m).join("; "),
                );
            }
            let _ = writeln!(out);
        }
    }
}

/// The notes column of a measurement's row: bytes written, extra figures, its plot, the run
/// that measured it, and the start of its first error.
fn notes(m: &Measurement) -> Vec<String> {
    let written = m.written_bytes_per_msg_per_node;
    let mut notes: Vec<String> = written
        .map(|w| format!("written_bytes_per_msg_per_node {w:.0}"))
        .into_iter()
        .collect();
    notes.extend(m.extra.iter().map(|(k, v)| format!("{k} {}", fmt_num(*v))));
    if let Some(plot) = &m.plot {
        notes.push(format!("[latency over time]({plot})"));
    }
    if let Some(run) = &m.run {
        notes.push(format!("measured by {run}"));
    }
    if let Some(n) = &m.note {
        // The first error in full is in the JSON; its start says enough here.
        let short: String = n.chars().take(NOTE_CHARS).collect();
        let cut = if short.len() < n.len() { "…" } else { "" };
        notes.push(format!(
            "{}{cut}",
            short.replace('|', "/").replace('\n', " ")
        ));
    }
    notes
}

/// Writes the head of a markdown table: the row of `columns` and the separator row under it.
fn table_head(out: &mut String, columns: &[&str]) {
    let _ = writeln!(out, "| {} |", columns.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(columns.len()));
}

/// Characters of a row's note shown in the tables.
const NOTE_CHARS: usize = 160;

/// How the numbers were made and what they do not show; the end of every report.
const METHOD: &str = "## How the numbers are made

- **Closed loop** (`send, N in flight`): N tasks, each sending its next request as soon as the
  previous one is confirmed. **Fixed rate** (`send at a fixed R/s`, at 1,000, 5,000 and
  10,000/s): a dispatcher on a thread of its own hands out intended send times at the rate,
  each at its time (the OS's timer, not the runtime's millisecond one), to 256 workers; latency
  counts from the intended time, so a stall shows as latency of the requests queued behind it,
  and every send meant to start inside the window counts however late it is confirmed (no
  coordinated omission). p50 to max come from an HdrHistogram of microseconds (3 significant
  digits). The 1,000/s row of each system links its **latency over time** (`latency over
  time` in the notes): every send's latency against its intended time, with the row's p99, so a
  stall shows where it happened.
- **send+receive+ack at a fixed R/s**: the same dispatcher and workers send, each message
  stamped with its intended send time; one consumer per 250 msg/s (4 at 1,000/s), each
  receiving up to 10 and acknowledging them, and a message counts when its ack returns, with the
  latency from its intended send time. After the window the consumers go on until every
  message meant to be sent inside it was acknowledged.
- **Warm-up**: each row runs for the warm-up, then the measured window; only requests that
  complete inside the window count. Every row uses a fresh queue (stream), deleted afterwards.
- **send+receive+ack, N in flight**: at most N messages are between the start of their send and
  the return of their ack (a send takes a permit, an ack gives it back); N senders and N/8 (at
  most 32) consumers, each receiving up to 10 and acknowledging them. raftq acknowledges the ten
  in one `Ack` call; RabbitMQ with one basic.ack each; JetStream with one ack each.
- **FIFO**: the same with a group per message, round robin over G groups, and a deduplication
  ID per message. RabbitMQ and JetStream have no message groups: their rows use one ordered
  consumer for all groups (see the systems table), so they show one ordered stream at any G.
- **Drains**: a queue filled with batches of 10 from 32 senders, then 32 consumers receive and
  ack until it is empty; the rate counts from the first ack to the last. The backlog row is
  compared with the same drain of a small queue (the target's near-empty run), drained three
  times on fresh queues: its row is the run of the median rate, and its notes give every run's.
- **Redelivery**: every message is received once and abandoned by the system's explicit
  abandonment, one call per message (raftq: its lease changed to 0 s; JetStream: nak; RabbitMQ:
  basic.nack with requeue), then received again and acked; the rate is the messages over the
  time from the first abandonment to the last ack of a second delivery.
- **Redrive**: the same, but the abandoned messages go to a dead-letter queue after one delivery;
  the time runs from the first abandonment until the dead-letter queue holds all of them.
- **Fair queue**: one raftq standard queue, quiet tenants each sending at a fixed rate
  (intended times handed out as for the fixed-rate sends, the tenants' turns evenly interleaved)
  and a fixed pool of consumers, each receiving one message, holding its lease while it works on
  it, then acking it; a message's work takes from half to 1.5 times a mean time, spread evenly,
  so that the busy consumers do not ask for messages in lockstep. The consumers can take less
  than everything sent with the noisy tenant, so a backlog builds (`backlog_at_end`: messages
  waiting when the senders stopped). Three runs on fresh queues: the quiet tenants alone, beside
  one tenant sending many times as much with every message's tenant as its group ID, and the same
  without group IDs (one tenant: oldest first). Each run's window is `--fair-seconds` (90 s by
  default) rather than the other rows' `--seconds`: the quiet tenants send few messages, and a
  p99 over a short window misses the machine's rare stalls on one side and not the other.
  Latency is the quiet tenants' time in queue, from the start of the send (so the send's own
  latency is in it) to the receive, of every message sent inside the measured window: after the
  window the consumers go on until all of them were received. `quiet_p99_vs_alone` divides a run's quiet p99 by the p99
  alone; `noisy_p99_ms` is the noisy tenant's over its messages received by then; `send_p99_ms`
  is the sends' own latency (to the confirmation), all tenants; `busy_wait_p99_ms`, beside the
  noisy tenant, is how long a message that finds every consumer busy waits at p99 for the first
  of them to finish (from the consumers' work times alone): no order of delivery can bring the
  quiet p99 under it. msg/s counts the acks inside the window. RabbitMQ and JetStream have no
  fair delivery across tenants.
- **Leader killed**: 16 senders through the nodes that do not lead the queue; after 3 s the
  leader's process gets SIGKILL and the senders go on for 10 s. `unavailable_ms` is the longest
  time without a successful send after the kill; `first_ok_after_kill_ms` is when the first send
  started after the kill succeeded. A client whose request died with the leader waits for its
  own timeout (JetStream's publish ack: 5 s by default), which counts.
- **Clients**: one load-generator process for every system. raftq over gRPC: tonic's generated
  client and codec on two HTTP/2 connections per node, each call made by its own task straight
  on its connection (`raftq-h2`, as between the nodes; tonic's `Channel` handed every call
  through three more tasks); single sends go over one `SendMessageStream` per connection (pipelined, each answered
  on its own, as the peers' clients pipeline publishes), batches, receives and acks are unary
  calls; raftq over REST: `raftq-client` (reqwest, a pool of HTTP/1.1 connections); RabbitMQ:
  lapin, one connection per node; JetStream: async-nats, one connection per node.
- **CPU**: user + system time of the server processes (`/proc/<pid>/stat`), per 1,000 messages;
  the load generator's own CPU is shown apart. A killed process counts for nothing after its
  death.
- **Same machine**: the servers and the load generator share the cores, other work on the
  machine (see the load average) takes its share too, and loopback hides network latency. The
  numbers compare systems under the same conditions; they are not what any of them does on
  dedicated hardware.
- **Memory**: on a virtual machine the first write to a page of memory costs system time (the
  hypervisor backs the page then; the machine table gives the cost per page), and a guest that
  reports its free pages hands freed memory back, so every new page of the files a system
  writes costs this again: a system that writes more bytes pays more for it here than on
  dedicated hardware. Between systems `scripts/bench` drops the page cache (when it runs as
  root), so each starts from the same state.
- **Bytes written**: `written_bytes_per_msg_per_node` (notes column; JSON field of the same
  name) is how much `write_bytes` in `/proc/<pid>/io` grew over the measured window, summed over
  the server processes read at both ends of it (one killed by the failover run counts for
  nothing), divided by the row's messages and by the number of those processes. The kernel
  counts a page when a process dirties a clean page of a file (or writes it with direct I/O),
  whether or not it reaches the disk inside the window: a log synced after every small append
  and appended to again counts a page per sync, as the disk writes it, while pages left dirty
  and appended to count once. For receive workloads it includes what the receives and acks
  wrote; for a drain, only the drain (not the fill).
- **Durability differs**: raftq fsyncs every Raft append before it answers, and its receives and
  acks are fsynced Raft writes too; RabbitMQ's quorum queues fsync their Raft log before a
  publisher confirm, and record acks in the log without telling the client when. JetStream runs
  twice. With nats-server's default `sync_interval` (2 minutes, as documented for 2.15) a
  publish is answered once a majority wrote it to the OS's buffers, without an fsync: the files
  are synced every 2 minutes, so a power loss of a majority can lose acknowledged messages there
  and not in the other two (the rows labelled without `-sync`). With `sync_interval: always`
  (the `-sync` rows) every write to the store is fsynced as it is made, so the ack follows a
  sync, as in the other two; the header names the version and both settings.
";

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}"))
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Fsync;
    use crate::measure::{Recorder, Usage};
    use std::collections::BTreeMap;
    use std::time::Duration;

    pub(in crate::report) fn machine() -> Machine {
        Machine {
            cpu_model: "test".into(),
            cores: 2,
            kernel: "k".into(),
            memory_gib: 1.0,
            load: "0.00".into(),
            fsync: Fsync {
                dir: "/tmp".into(),
                syncs: 1,
                p50_ms: 1.0,
                p99_ms: 1.0,
                max_ms: 1.0,
            },
            first_touch: None,
            facts: BTreeMap::new(),
        }
    }

    /// A system whose sends are acknowledged after a sync or not.
    pub(in crate::report) fn synced(
        label: &str,
        system: &str,
        replicas: usize,
        syncs_before_ack: bool,
    ) -> Line {
        Line::System(SystemLine {
            label: label.into(),
            system: system.into(),
            replicas,
            notes: SystemNotes {
                durability: "d".into(),
                syncs_before_ack,
                fifo: "f".into(),
                redelivery: "r".into(),
                dead_letter: "x".into(),
            },
            groups: None,
            cpus_per_node: None,
        })
    }

    pub(in crate::report) fn system(label: &str, system: &str, replicas: usize) -> Line {
        synced(label, system, replicas, true)
    }

    pub(in crate::report) fn result(label: &str, key: &str, messages: u64) -> Line {
        timed(label, key, messages, Duration::from_millis(3))
    }

    pub(in crate::report) fn timed(
        label: &str,
        key: &str,
        messages: u64,
        latency: Duration,
    ) -> Line {
        Line::Result(Box::new(row(label, key, messages, latency)))
    }

    /// A row of `messages` in one second, each taking `latency`, with 1 s of server CPU and
    /// 1 KiB bodies.
    pub(in crate::report) fn row(
        label: &str,
        key: &str,
        messages: u64,
        latency: Duration,
    ) -> Measurement {
        let mut rec = Recorder::new();
        rec.record(messages, latency);
        let usage = Usage {
            server_cpu: 1.0,
            node_cpu: Vec::new(),
            client_cpu: 0.5,
            written: None,
        };
        Measurement {
            body_bytes: Some(1024),
            ..Measurement::new(label, key.into(), key.into(), (256, 1), 1.0, &rec, usage)
        }
    }

    pub(in crate::report) fn parse(lines: &[Line], machine: Machine) -> Results {
        let text: String = lines
            .iter()
            .map(|l| serde_json::to_string(l).expect("json") + "\n")
            .collect();
        Results::parse(machine, &text).expect("parse")
    }

    #[test]
    fn merged_rows_replace_their_workloads_and_say_which_run_measured_them() {
        let earlier = parse(
            &[
                system("raftq-3", "raftq-grpc", 3),
                system("rabbitmq-3", "rabbitmq", 3),
                result("raftq-3", "send/b1/c256", 30_000),
                result("rabbitmq-3", "send/b1/c256", 10_000),
                result("raftq-3", "fair/alone", 50),
                result("rabbitmq-3", "fair/alone", 0),
            ],
            machine(),
        );
        let mut later_machine = machine();
        later_machine
            .facts
            .insert("command".into(), "scripts/bench --workloads fair".into());
        later_machine
            .facts
            .insert("date".into(), "2026-12-03".into());
        later_machine.facts.insert("raftq".into(), "abc1234".into());
        let mut raftq_3_later = system("raftq-3", "raftq-grpc", 3);
        if let Line::System(line) = &mut raftq_3_later {
            line.notes.redelivery = "released".into();
        }
        let later = parse(
            &[
                raftq_3_later,
                system("raftq-1", "raftq-grpc", 1),
                result("raftq-3", "fair/alone", 70),
            ],
            later_machine,
        );
        let merged = earlier.merge(later);
        let rows: Vec<(&str, &str, u64)> = merged
            .results
            .iter()
            .map(|m| (m.label.as_str(), m.key.as_str(), m.messages))
            .collect();
        assert_eq!(
            rows,
            [
                ("raftq-3", "send/b1/c256", 30_000),
                ("rabbitmq-3", "send/b1/c256", 10_000),
                ("raftq-3", "fair/alone", 70),
            ]
        );
        let labels: Vec<&str> = merged.systems.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["raftq-3", "rabbitmq-3", "raftq-1"]);
        let redelivery: Vec<&str> = merged
            .systems
            .iter()
            .map(|s| s.notes.redelivery.as_str())
            .collect();
        assert_eq!(redelivery, ["released", "r", "r"], "the newer run's notes");
        assert!(merged.results[..2].iter().all(|m| m.run.is_none()));
        let md = merged.markdown("docs/benchmarks.json");
        assert!(
            md.contains(
                "measured by `scripts/bench --workloads fair` at 2026-12-03, raftq abc1234, \
                 /proc/loadavg before it 0.00 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| send/b1/c256 | 30000 | 10000 | 3.00 |"),
            "{md}"
        );
    }

    #[test]
    fn the_headline_pairs_raftq_with_every_peer_of_as_many_copies_sync_rows_included() {
        let mut lines = vec![
            system("raftq-3", "raftq-grpc", 3),
            system("raftq-1", "raftq-grpc", 1),
            system("rabbitmq-3", "rabbitmq", 3),
            synced("jetstream-r3", "jetstream", 3, false),
            synced("jetstream-r3-sync", "jetstream", 3, true),
            synced("jetstream-r1-sync", "jetstream", 1, true),
        ];
        // Every system's msg/s in one workload.
        let sends = [
            ("raftq-3", 30_000),
            ("raftq-1", 40_000),
            ("rabbitmq-3", 10_000),
            ("jetstream-r3", 20_000),
            ("jetstream-r3-sync", 15_000),
            ("jetstream-r1-sync", 50_000),
        ];
        lines.extend(sends.map(|(label, messages)| result(label, "send/b1/c256", messages)));
        let md = parse(&lines, machine()).markdown("docs/benchmarks.json");
        let sections: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("### ") && l.contains('÷'))
            .collect();
        assert_eq!(
            sections,
            [
                "### raftq-3 ÷ rabbitmq-3",
                "### raftq-3 ÷ jetstream-r3",
                "### raftq-3 ÷ jetstream-r3-sync",
                "### raftq-1 ÷ jetstream-r1-sync",
            ]
        );
        assert!(
            md.contains("| send/b1/c256 | 30000 | 15000 | 2.00 |"),
            "{md}"
        );
        assert!(
            md.contains("| send/b1/c256 | 40000 | 50000 | 0.80 |"),
            "{md}"
        );
    }

    #[test]
    fn every_row_prints_its_written_bytes_per_message_per_node() {
        // measure's tests cover how the figure is computed; this one how it is printed.
        let mut m = row("raftq-3", "send/b1/c16", 1000, Duration::from_millis(1));
        m.written_bytes_per_msg_per_node = Some(2048.0);
        let results = parse(
            &[
                system("raftq-3", "raftq-grpc", 3),
                Line::Result(Box::new(m)),
            ],
            machine(),
        );
        let md = results.markdown("docs/benchmarks.json");
        let line = md
            .lines()
            .find(|l| l.starts_with("| raftq-3 (3×) | 1000 |"))
            .expect("the row");
        assert!(
            line.ends_with("| written_bytes_per_msg_per_node 2048 |"),
            "{line}"
        );
        let json = serde_json::to_value(&results).expect("json");
        assert_eq!(
            json["results"][0]["written_bytes_per_msg_per_node"],
            serde_json::json!(2048.0)
        );
    }

    #[test]
    fn reports_written_before_bytes_and_sync_were_recorded_still_parse() {
        let mut json = serde_json::to_value(parse(
            &[
                system("jetstream-r3", "jetstream", 3),
                result("jetstream-r3", "send/b1/c1", 10),
            ],
            machine(),
        ))
        .expect("json");
        let notes = json["systems"][0]["notes"].as_object_mut().expect("notes");
        notes.remove("syncs_before_ack");
        let row = json["results"][0].as_object_mut().expect("row");
        row.remove("written_bytes_per_msg_per_node");
        row.remove("body_bytes");
        let old: Results = serde_json::from_value(json).expect("an older report");
        assert!(!old.systems[0].notes.syncs_before_ack);
        assert_eq!(old.results[0].written_bytes_per_msg_per_node, None);
        assert_eq!(old.results[0].body_bytes, None);
    }
}
