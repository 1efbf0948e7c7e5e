//! `raftq-chaos`: concurrent producers and consumers on FIFO and standard queues with dead-letter
//! queues, against every node of a compose cluster, while a seeded schedule of faults runs; then
//! the cluster heals, every queue is drained, every node is read, and the history is checked.
//! Exits non-zero on any anomaly. The same `--seed` replays the same fault schedule.

mod availability;
mod checker;
mod docker;
mod faults;
mod history;
mod nodes;
mod workload;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Parser;
use futures_util::future::join_all;
use raftq_client::{Client, Options};
use serde_json::{json, Value};
use tokio::time::{sleep, Instant};

use crate::availability::{unavailability, FaultSpan};
use crate::checker::Final;
use crate::docker::Compose;
use crate::history::{now_ms, Event, History, Outcome};
use crate::nodes::Nodes;
use crate::workload::Control;

#[derive(Debug, Parser)]
#[command(name = "raftq-chaos")]
struct Args {
    /// Seed of the fault schedule and the workload's choices (printed; random when absent).
    #[arg(long)]
    seed: Option<u64>,
    /// Seconds of faults.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// The compose files of the cluster as it starts (repeatable: later ones override).
    #[arg(long, default_value = "docker-compose.yml")]
    compose_file: Vec<PathBuf>,
    /// The compose files that define the spare nodes the `grow` fault adds (repeatable).
    #[arg(long)]
    spare_compose_file: Vec<PathBuf>,
    #[arg(long, default_value = "raftq")]
    project: String,
    /// The nodes' API endpoints, node 1 first: the starting cluster's, then the spares'.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "https://127.0.0.1:8081,https://127.0.0.1:8082,https://127.0.0.1:8083"
    )]
    endpoints: Vec<String>,
    /// PEM certificate of the CA the nodes' API certificates come from (for `https://`
    /// endpoints).
    #[arg(long)]
    ca_cert: Option<PathBuf>,
    /// Write the history here as JSON lines.
    #[arg(long)]
    history: Option<PathBuf>,
}

const MAX_RECEIVE_COUNT: u64 = 3;
/// A request to a paused or cut-off node hangs; the client gives up after this (its outcome is
/// then unknown) and leaves that node alone for a while. Long enough for a receive's 1 s wait.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(now_ms);
    println!("seed {seed} (replay with --seed {seed})");
    match run(&args, seed).await {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            println!("chaos run failed: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: &Args, seed: u64) -> Result<u64, String> {
    let ca_cert = match &args.ca_cert {
        Some(path) => {
            Some(std::fs::read(path).map_err(|e| format!("--ca-cert {}: {e}", path.display()))?)
        }
        None => None,
    };
    let clients = args
        .endpoints
        .iter()
        .map(|e| {
            Client::connect(
                e,
                Options {
                    timeout: REQUEST_TIMEOUT,
                    ca_cert: ca_cert.clone(),
                    ..Options::default()
                },
            )
            .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let compose = Compose::detect(
        args.project.clone(),
        args.compose_file.clone(),
        args.spare_compose_file.clone(),
    )
    .await?;
    let spares = clients
        .iter()
        .enumerate()
        .filter(|(i, _)| compose.is_spare(&nodes::service(*i as u64 + 1)))
        .count();
    let nodes = Nodes::new(clients, args.endpoints.len() - spares);
    if !nodes.wait_healthy(Duration::from_secs(90)).await {
        return Err("the cluster is not healthy".into());
    }
    let network = compose.network_of("node1").await?;
    let tag = seed % 1_000_000;
    let dead_letter = create_queues(&nodes, tag).await?;
    let history = History::default();
    let control = Control::default();
    control.ack_per_mille.store(600, Ordering::Relaxed);

    let mut workers = Vec::new();
    let mut n = 0u64;
    for (source, dlq) in &dead_letter {
        for id in 0..2 {
            n += 1;
            workers.push(tokio::spawn(workload::produce(
                nodes.clone(),
                history.clone(),
                source.clone(),
                id,
                control.clone(),
                seed ^ n,
            )));
        }
        for queue in [source, dlq] {
            for _ in 0..2 {
                n += 1;
                workers.push(tokio::spawn(workload::consume(
                    nodes.clone(),
                    history.clone(),
                    queue.clone(),
                    control.clone(),
                    seed ^ n,
                )));
            }
        }
    }
    let fault_start = now_ms();
    let until = Instant::now() + Duration::from_secs(args.duration);
    faults::run(compose.clone(), nodes.clone(), seed, until, history.clone()).await;
    let fault_end = now_ms();
    faults::heal(&compose, &nodes, &network).await;
    if !nodes.wait_healthy(Duration::from_secs(90)).await {
        println!("warning: the cluster did not report one leader within 90 s of healing");
    }
    control.stop_producing.store(true, Ordering::Relaxed);
    control.ack_per_mille.store(1000, Ordering::Relaxed);
    // The backlog grows with the length of the faults; so does the time to drain it.
    let drain_limit = Duration::from_secs(120 + args.duration);
    let drained = drain(&nodes, &dead_letter, drain_limit).await;
    control.stop_consuming.store(true, Ordering::Relaxed);
    for w in workers {
        // Every request is bounded by REQUEST_TIMEOUT, so workers stop soon after being told.
        let _ = tokio::time::timeout(Duration::from_secs(30), w).await;
    }
    if !drained {
        println!("warning: queues were not empty after draining");
    }
    let fin = Final {
        remaining: remaining(&nodes, &dead_letter).await,
        node_states: node_states(&nodes).await,
        memberships: memberships(&nodes).await,
        members: nodes.members(),
        dead_letter: dead_letter.clone(),
        max_receive_count: MAX_RECEIVE_COUNT,
    };
    let events = history.events();
    if let Some(path) = &args.history {
        let lines: Vec<String> = events
            .iter()
            .filter_map(|e| serde_json::to_string(e).ok())
            .collect();
        std::fs::write(path, lines.join("\n")).map_err(|e| format!("writing the history: {e}"))?;
    }
    let report = checker::check(&events, &fin);
    summarize(&events, &report, fault_start, fault_end);
    Ok(report.total())
}

/// Creates a standard and a FIFO source queue with their dead-letter queues; both retry with a
/// backoff, and the standard one serves the producers' tenants fairly.
async fn create_queues(nodes: &Nodes, tag: u64) -> Result<BTreeMap<String, String>, String> {
    let client = nodes.client(0);
    let mut pairs = BTreeMap::new();
    for suffix in ["", ".fifo"] {
        let source = format!("chaos-{tag}{suffix}");
        let dlq = format!("chaos-{tag}-dlq{suffix}");
        create(client, &dlq, json!({})).await?;
        let policy = json!({
            "redrive_policy": {"dead_letter_target": dlq, "max_receive_count": MAX_RECEIVE_COUNT},
            "lease_seconds": workload::LEASE_SECONDS,
            "retry_backoff": {"initial_seconds": 1, "max_seconds": 4, "multiplier": 2.0},
        });
        create(client, &source, policy).await?;
        pairs.insert(source, dlq);
    }
    Ok(pairs)
}

async fn create(client: &Client, name: &str, attributes: Value) -> Result<(), String> {
    for _ in 0..50 {
        match client.create_queue(name, &attributes).await {
            Ok(_) => return Ok(()),
            Err(e) if e.code() == Some("queue_exists") => return Ok(()),
            Err(_) => sleep(Duration::from_millis(200)).await,
        }
    }
    Err(format!("could not create {name}"))
}

/// Waits until every queue is empty twice in a row, up to `limit`.
async fn drain(nodes: &Nodes, dead_letter: &BTreeMap<String, String>, limit: Duration) -> bool {
    let queues: Vec<&String> = dead_letter.iter().flat_map(|(s, d)| [s, d]).collect();
    let deadline = Instant::now() + limit;
    let mut empty_in_a_row = 0;
    while Instant::now() < deadline {
        let mut total = 0;
        for q in &queues {
            match nodes.client(0).stats(q).await {
                Ok(s) => {
                    total += ["visible", "leased", "delayed", "pending_redrive"]
                        .iter()
                        .map(|k| s[*k].as_u64().unwrap_or(0))
                        .sum::<u64>()
                }
                Err(_) => total += 1,
            }
        }
        empty_in_a_row = if total == 0 { empty_in_a_row + 1 } else { 0 };
        if empty_in_a_row >= 2 {
            return true;
        }
        sleep(Duration::from_secs(1)).await;
    }
    false
}

/// The message ids left in every queue, read through whichever member answers. A queue no
/// member can read ends the run: taking it for empty would report its messages as lost.
async fn remaining(
    nodes: &Nodes,
    dead_letter: &BTreeMap<String, String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for q in dead_letter.iter().flat_map(|(s, d)| [s, d]) {
        let mut ids = BTreeSet::new();
        let mut after = None;
        loop {
            let mut page = None;
            for id in nodes.members() {
                if let Ok(p) = nodes.client_of(id).peek(q, Some(100), after).await {
                    page = Some(p);
                    break;
                }
            }
            let Some(page) = page else {
                eprintln!("no member answers a peek of {q}: the remaining messages are unknown");
                std::process::exit(2);
            };
            let messages = page["messages"].as_array().cloned().unwrap_or_default();
            ids.extend(
                messages
                    .iter()
                    .filter_map(|m| m["message_id"].as_str().map(str::to_string)),
            );
            after = page["next_after"].as_u64();
            if messages.len() < 100 || after.is_none() {
                break;
            }
        }
        out.insert(q.clone(), ids);
    }
    out
}

/// Every member's voters and cluster id as it reports them.
async fn memberships(nodes: &Nodes) -> Vec<Option<(Vec<u64>, String)>> {
    nodes
        .cluster_views()
        .await
        .iter()
        .map(|v| {
            let voters = v["nodes"]
                .as_array()?
                .iter()
                .filter(|n| n["role"] != "learner")
                .map(|n| n["id"].as_u64())
                .collect::<Option<Vec<u64>>>()?;
            Some((voters, v["cluster_id"].as_str()?.to_string()))
        })
        .collect()
}

/// Every member's applied index and state digest, once they agree or after a bounded wait.
async fn node_states(nodes: &Nodes) -> Vec<Option<(u64, String)>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // All at once: timers keep proposing ticks for a while after the workload stops, and
        // nodes read one after the other would each be read at another entry.
        let views: Vec<Value> = join_all(nodes.members().into_iter().map(|id| async move {
            nodes
                .client_of(id)
                .cluster_state()
                .await
                .unwrap_or(Value::Null)
        }))
        .await;
        let states: Vec<Option<(u64, String)>> = views
            .iter()
            .map(|v| {
                Some((
                    v["applied_index"].as_u64()?,
                    v["state_digest"].as_str()?.to_string(),
                ))
            })
            .collect();
        let agree = states.iter().all(|s| s.is_some()) && states.windows(2).all(|w| w[0] == w[1]);
        if agree || Instant::now() > deadline {
            return states;
        }
        sleep(Duration::from_millis(500)).await;
    }
}

fn summarize(events: &[Event], report: &checker::Report, fault_start: u64, fault_end: u64) {
    let mut faults: BTreeMap<&str, u64> = BTreeMap::new();
    let mut ops: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    let mut successes: Vec<u64> = Vec::new();
    let mut spans: Vec<FaultSpan<'_>> = Vec::new();
    let (mut sent, mut acked, mut redelivered, mut dead_lettered) = (0, 0, 0, BTreeSet::new());
    for e in events {
        let (kind, outcome, end) = match e {
            Event::Fault {
                kind, start, end, ..
            } => {
                *faults.entry(kind).or_default() += 1;
                spans.push(FaultSpan {
                    kind,
                    start: *start,
                    end: *end,
                });
                continue;
            }
            Event::Deliver {
                receive_count,
                dead_letter_source,
                message_id,
                ..
            } => {
                if *receive_count > 1 {
                    redelivered += 1;
                }
                if dead_letter_source.is_some() {
                    dead_lettered.insert(message_id.clone());
                }
                continue;
            }
            Event::Send {
                outcome,
                end,
                duplicate,
                ..
            } => {
                if *outcome == Outcome::Ok && !duplicate {
                    sent += 1;
                }
                ("send", outcome, *end)
            }
            Event::Receive { outcome, end, .. } => ("receive", outcome, *end),
            Event::Ack { outcome, end, .. } => {
                if *outcome == Outcome::Ok {
                    acked += 1;
                }
                ("ack", outcome, *end)
            }
        };
        let slot = match outcome {
            Outcome::Ok => 0,
            Outcome::Failed(_) => 1,
            Outcome::Unknown(_) => 2,
        };
        ops.entry(kind).or_default()[slot] += 1;
        if slot == 0 {
            successes.push(end);
        }
    }
    let windows = unavailability(&successes, &spans, fault_start, fault_end);
    println!("faults injected: {faults:?}");
    for (kind, [ok, failed, unknown]) in &ops {
        println!("{kind}: ok {ok}, failed {failed}, unknown {unknown}");
    }
    println!(
        "messages: sent {sent}, acked {acked}, redelivered {redelivered}, dead-lettered {}",
        dead_lettered.len()
    );
    println!("longest unavailability window: {}", windows.longest);
    println!(
        "longest unavailability window with a majority up (overlapping no restart_all): {}",
        windows.longest_with_majority
    );
    println!(
        "first success after each restart_all, from the start of its last node (ms): {:?}",
        windows.after_whole_cluster
    );
    println!(
        "longest unavailability window by the faults it overlapped (ms): {:?}",
        windows.longest_by_kind
    );
    println!(
        "longest window per fault with a majority up: p50 {} ms, p99 {} ms, max {} ms over {} faults: {:?}",
        windows.per_fault_quantile(0.5),
        windows.per_fault_quantile(0.99),
        windows.per_fault_quantile(1.0),
        windows.per_fault.len(),
        windows.per_fault
    );
    for (name, (count, examples)) in &report.anomalies {
        println!("{name}: {count} anomalies");
        for e in examples {
            println!("    {e}");
        }
    }
    for (name, count) in &report.unverifiable {
        println!("{name}: {count} cases not verifiable (a receive's outcome was unknown)");
    }
    println!("total anomalies: {}", report.total());
}
