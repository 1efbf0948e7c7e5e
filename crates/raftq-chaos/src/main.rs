//! `raftq-chaos`: concurrent producers and consumers on FIFO and standard queues with dead-letter
//! queues, against every node of a compose cluster, while a seeded schedule of faults runs and
//! every node's view is sampled; then the cluster heals, every queue is drained, every node is
//! read, and the history is checked. What the run keeps (history, samples, the logs of removed
//! containers) goes into one directory, named at the end. Exits non-zero on any anomaly or any
//! node that did not come back from a power loss, and then prints the command that replays the
//! run: the same `--seed` and `--duration` replay the same fault schedule. With `--upgrade-to`,
//! a rolling upgrade of every node to another image takes the place of the faults.

mod availability;
mod clock;
mod docker;
mod faults;
mod nodes;
mod power;
mod repair;
mod sampler;
mod schedule;
mod upgrade;
mod workload;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Parser;
use futures_util::future::join_all;
use raftq_check::checker::{self, Final, NodeState};
use raftq_check::history::{Event, History, Outcome};
use raftq_check::workers::{self, Switches};
use raftq_client::{Client, Options};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

use crate::availability::{unavailability, FaultSpan};
use crate::clock::now_ms;
use crate::docker::Compose;
use crate::nodes::Nodes;
use crate::sampler::Sampler;

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
    /// The directory the run keeps its history (`history.jsonl`), the nodes' samples
    /// (`samples.jsonl`) and the logs of the containers it removes (`removed.log`) in; created
    /// when missing. Default: a new `raftq-chaos-SEED-PID` in the system's temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the history here as JSON lines.
    #[arg(long)]
    history: Option<PathBuf>,
    /// Instead of the faults, upgrade the cluster node by node to this image (followers first,
    /// the leader last), each node stopped with SIGTERM and started again on its data.
    #[arg(long)]
    upgrade_to: Option<String>,
    /// With `--upgrade-to`: the least number of seconds the cluster serves with nodes of both
    /// images.
    #[arg(long, default_value_t = 120)]
    mixed_seconds: u64,
    /// The Raft groups the cluster was started with (`RAFTQ_GROUPS`, which the compose files
    /// hand the nodes), named in the replay command.
    #[arg(long, env = "RAFTQ_GROUPS", default_value_t = 1)]
    groups: u32,
}

const MAX_RECEIVE_COUNT: u64 = 3;
/// A request to a paused or cut-off node hangs; the client gives up after this (its outcome is
/// then unknown) and leaves that node alone for a while. Long enough for a receive's 1 s wait.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(now_ms);
    let replay = replay_command(seed, args.duration, args.groups);
    println!("seed {seed} (replay: {replay})");
    let dir = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("raftq-chaos-{seed}-{}", std::process::id()))
    });
    let history = History::default();
    let result = match prepare_dir(&dir) {
        Ok(()) => run(&args, seed, &dir, &history).await,
        Err(e) => Err(e),
    };
    // Whatever the outcome: a run that failed half-way is the one most worth reading.
    let kept = write_history(&history.events(), &dir, args.history.as_deref());
    if let Err(e) = &kept {
        println!("the history was not kept: {e}");
    }
    let code: u8 = match result {
        Ok(0) if kept.is_ok() => 0,
        // A run whose history is lost cannot be looked into: it failed.
        Ok(0) => 2,
        Ok(_) => 1,
        Err(e) => {
            println!("chaos run failed: {e}");
            2
        }
    };
    if code != 0 {
        println!("replay: {replay}");
    }
    println!(
        "history, samples and removed nodes' logs in {}",
        dir.display()
    );
    ExitCode::from(code)
}

/// The command that replays a run: the seed and every option that changes its fault schedule
/// (the others are the script's own: the compose files, endpoints and CA).
fn replay_command(seed: u64, duration: u64, groups: u32) -> String {
    let groups = match groups {
        1 => String::new(),
        n => format!("RAFTQ_GROUPS={n} "),
    };
    format!("{groups}scripts/chaos --seed {seed} --duration {duration}")
}

/// Creates the run's directory, with an empty log of removed containers (which the faults
/// append to), so that a directory used before does not mix two runs' logs.
fn prepare_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let removed = dir.join("removed.log");
    File::create(&removed).map_err(|e| format!("{}: {e}", removed.display()))?;
    Ok(())
}

/// Writes the history as JSON lines to `history.jsonl` in `dir`, and to `copy` if given.
fn write_history(events: &[Event], dir: &Path, copy: Option<&Path>) -> Result<(), String> {
    let main = dir.join("history.jsonl");
    for path in std::iter::once(main.as_path()).chain(copy) {
        let write = || -> std::io::Result<()> {
            let mut out = BufWriter::new(File::create(path)?);
            for e in events {
                serde_json::to_writer(&mut out, e)?;
                out.write_all(b"\n")?;
            }
            out.flush()
        };
        write().map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// One run: the cluster checked healthy, the queues created, the workload and the sampler
/// started, the faults, the heal, the drain, the final state read and the history checked.
/// Answers the number of failures: anomalies, and nodes that did not come back from a power
/// loss.
async fn run(args: &Args, seed: u64, dir: &Path, history: &History) -> Result<u64, String> {
    let (nodes, compose) = connect(args, dir).await?;
    if !nodes.wait_healthy(Duration::from_secs(90)).await {
        return Err("the cluster is not healthy".into());
    }
    let network = compose.network_of("node1").await?;
    let dead_letter = create_queues(&nodes, seed % 1_000_000).await?;
    let sampler = Sampler::start(nodes.clone(), &dir.join("samples.jsonl"))?;
    let switches = Switches::default();
    switches.ack_per_mille.store(600, Ordering::Relaxed);
    let workers = start_workers(&nodes, history, &dead_letter, &switches, seed);
    let fault_start = now_ms();
    let until = Instant::now() + Duration::from_secs(args.duration);
    match &args.upgrade_to {
        Some(image) => {
            let mixed = Duration::from_secs(args.mixed_seconds);
            upgrade::run(&compose, &nodes, image, mixed, dir, history).await?
        }
        None => {
            let plan = faults::Plan { seed, until };
            faults::run(compose.clone(), nodes.clone(), plan, history.clone()).await
        }
    }
    let fault_end = now_ms();
    faults::heal(&compose, &nodes, &network).await;
    if !nodes.wait_healthy(Duration::from_secs(90)).await {
        println!("warning: the cluster did not report one leader within 90 s of healing");
    }
    switches.begin_drain();
    // The backlog grows with the length of the faults; so does the time to drain it.
    let drain_limit = Duration::from_secs(120 + args.duration);
    let drained = drain(&nodes, &dead_letter, drain_limit).await;
    switches.stop_consumers();
    for w in workers {
        // Every request is bounded by REQUEST_TIMEOUT, so workers stop soon after being told.
        let _ = tokio::time::timeout(Duration::from_secs(30), w).await;
    }
    if !drained {
        println!("warning: queues were not empty after draining");
    }
    let fin = Final {
        remaining: remaining(&nodes, &dead_letter).await?,
        node_states: node_states(&nodes).await,
        memberships: memberships(&nodes).await,
        leaders: leaders(&nodes).await,
        outboxes: outboxes(&nodes).await,
        members: nodes.members(),
        dead_letter: dead_letter.clone(),
        max_receive_count: MAX_RECEIVE_COUNT,
        strict_priority_queues: dead_letter
            .keys()
            .filter(|q| q.ends_with(workload::PRIORITY_SUFFIX))
            .cloned()
            .collect(),
    };
    drop(sampler);
    let events = history.events();
    let report = checker::check(&events, &fin);
    let unrecovered = summarize(&events, &report, fault_start, fault_end);
    Ok(report.total() + unrecovered)
}

/// A client per endpoint, the compose project, and the nodes (the spares apart).
async fn connect(args: &Args, dir: &Path) -> Result<(Nodes, Compose), String> {
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
        dir.join("removed.log"),
    )
    .await?;
    let spares = clients
        .iter()
        .enumerate()
        .filter(|(i, _)| compose.is_spare(&nodes::service(*i as u64 + 1)))
        .count();
    let nodes = Nodes::new(clients, args.endpoints.len() - spares);
    Ok((nodes, compose))
}

/// Starts the workers of [`workers::plan`].
fn start_workers(
    nodes: &Nodes,
    history: &History,
    dead_letter: &BTreeMap<String, String>,
    switches: &Switches,
    seed: u64,
) -> Vec<JoinHandle<()>> {
    let produce = |queue, id, seed| {
        workload::produce(
            nodes.clone(),
            history.clone(),
            queue,
            id,
            switches.clone(),
            seed,
        )
    };
    let consume = |queue, seed| {
        workload::consume(
            nodes.clone(),
            history.clone(),
            queue,
            switches.clone(),
            seed,
        )
    };
    workers::start(dead_letter, seed, produce, consume)
}

/// Creates two standard source queues (the second for strict priorities) and a FIFO one with
/// their dead-letter queues; all retry with a backoff, and the standard ones serve the
/// producers' tenants fairly. The first standard queue gets its dead-letter queue after its
/// creation, so that in a cluster of several groups it lies in another group than its
/// dead-letter queue (a queue created with one goes to its group); the others lie beside
/// theirs.
async fn create_queues(nodes: &Nodes, tag: u64) -> Result<BTreeMap<String, String>, String> {
    let client = nodes.client(0);
    let mut pairs = BTreeMap::new();
    for suffix in ["", workload::PRIORITY_SUFFIX, ".fifo"] {
        let source = format!("chaos-{tag}{suffix}");
        let dlq = format!("chaos-{tag}-dlq{suffix}");
        create(client, &dlq, json!({})).await?;
        let policy = json!({"dead_letter_target": dlq, "max_receive_count": MAX_RECEIVE_COUNT});
        let mut attributes = json!({
            "lease_seconds": workload::LEASE_SECONDS,
            "retry_backoff": {"initial_seconds": 1, "max_seconds": 4, "multiplier": 2.0},
        });
        let later = suffix.is_empty();
        if !later {
            attributes["redrive_policy"] = policy.clone();
        }
        create(client, &source, attributes).await?;
        if later {
            patch(client, &source, json!({ "redrive_policy": policy })).await?;
        }
        pairs.insert(source, dlq);
    }
    Ok(pairs)
}

async fn create(client: &Client, name: &str, attributes: Value) -> Result<(), String> {
    let created = || async {
        match client.create_queue(name, &attributes).await {
            Err(e) if e.code() == Some("queue_exists") => Ok(()),
            other => other.map(drop),
        }
    };
    retried(created, format!("could not create {name}")).await
}

async fn patch(client: &Client, name: &str, attributes: Value) -> Result<(), String> {
    let patched = || async { client.patch_queue(name, &attributes).await.map(drop) };
    retried(
        patched,
        format!("could not set the dead-letter queue of {name}"),
    )
    .await
}

/// Calls `call` until it succeeds (a node may be down or electing), 50 times at most.
async fn retried<F, E>(call: impl Fn() -> F, failed: String) -> Result<(), String>
where
    F: std::future::Future<Output = Result<(), E>>,
{
    for _ in 0..50 {
        if call().await.is_ok() {
            return Ok(());
        }
        sleep(Duration::from_millis(200)).await;
    }
    Err(failed)
}

/// Waits until every queue and every outbox is empty twice in a row, up to `limit`.
async fn drain(nodes: &Nodes, dead_letter: &BTreeMap<String, String>, limit: Duration) -> bool {
    let queues: Vec<&String> = dead_letter.iter().flat_map(|(s, d)| [s, d]).collect();
    // Each reading's future takes its own copies of these references.
    let queues = &queues;
    workers::drain(limit, move || async move {
        let mut total = 0;
        for q in queues {
            total += match nodes.client(0).stats(q).await {
                Ok(s) => ["visible", "leased", "delayed", "pending_redrive"]
                    .iter()
                    .map(|k| s[*k].as_u64().unwrap_or(0))
                    .sum::<u64>(),
                Err(_) => 1,
            };
        }
        total + outboxes(nodes).await.values().sum::<u64>()
    })
    .await
}

/// The messages each group's outbox holds (on their way to a dead-letter queue of another
/// group, in no queue meanwhile), the most any member's replica of it shows.
async fn outboxes(nodes: &Nodes) -> BTreeMap<u32, u64> {
    let mut readings = Vec::new();
    for id in nodes.members() {
        let Ok(state) = nodes.client_of(id).cluster_state().await else {
            continue;
        };
        for group in state["groups"].as_array().into_iter().flatten() {
            let number = group["group"].as_u64().and_then(|n| u32::try_from(n).ok());
            if let (Some(number), Some(held)) = (number, group["outbox"].as_u64()) {
                readings.push((number, held));
            }
        }
    }
    checker::most_per_group(readings)
}

/// The messages left in every queue, each with its `moved_at` (when it was moved to that
/// dead-letter queue), read through whichever member answers.
async fn remaining(
    nodes: &Nodes,
    dead_letter: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, BTreeMap<String, Option<u64>>>, String> {
    workers::remaining(dead_letter, |queue, after| async move {
        let mut page = None;
        for id in nodes.members() {
            if let Ok(p) = nodes
                .client_of(id)
                .peek(&queue, Some(workers::PAGE), after)
                .await
            {
                page = Some(p);
                break;
            }
        }
        let page = page?;
        let listed = page["messages"].as_array().cloned().unwrap_or_default();
        let messages = listed
            .iter()
            .filter_map(|m| {
                let id = m["message_id"].as_str()?.to_string();
                Some((id, workload::millis(&m["moved_at"])))
            })
            .collect();
        Some((messages, page["next_after"].as_u64()))
    })
    .await
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

/// Each Raft group's leader, as the first member that answers reports them, once every group
/// has one and no member leads more than its share (the leaders spread again within seconds of
/// the last fault), or as they are after a bounded wait.
async fn leaders(nodes: &Nodes) -> BTreeMap<u32, Option<u64>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let views = nodes.cluster_views().await;
        let leaders: BTreeMap<u32, Option<u64>> = views
            .iter()
            .find_map(|v| v["groups"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|g| {
                let group = u32::try_from(g["group"].as_u64()?).ok()?;
                Some((group, g["leader"].as_u64()))
            })
            .collect();
        let spread = checker::unspread(&leaders, nodes.members().len()).is_empty();
        if spread || Instant::now() >= deadline {
            return leaders;
        }
        sleep(Duration::from_millis(500)).await;
    }
}

/// Every member's replicas (each group's applied index and state digest), once they agree or
/// after a bounded wait.
async fn node_states(nodes: &Nodes) -> Vec<Option<NodeState>> {
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
        let states: Vec<Option<NodeState>> = views.iter().map(replicas).collect();
        if checker::state_differences(&states).is_empty() || Instant::now() > deadline {
            return states;
        }
        sleep(Duration::from_millis(500)).await;
    }
}

/// The replicas a node's `GET /v1/cluster/state` gives: each of `groups`, or, from a build
/// before groups, its one state as group 1's.
fn replicas(view: &Value) -> Option<NodeState> {
    let replica = |v: &Value| {
        Some((
            v["applied_index"].as_u64()?,
            v["state_digest"].as_str()?.to_string(),
        ))
    };
    match view["groups"].as_array() {
        Some(groups) => groups
            .iter()
            .map(|g| Some((u32::try_from(g["group"].as_u64()?).ok()?, replica(g)?)))
            .collect(),
        None => Some(BTreeMap::from([(1, replica(view)?)])),
    }
}

/// What a run's history adds up to, for its summary.
#[derive(Default)]
struct Tally<'a> {
    /// Fault kind → how many.
    faults: BTreeMap<&'a str, u64>,
    /// Operation → [ok, failed, unknown].
    ops: BTreeMap<&'static str, [u64; 3]>,
    /// When each successful operation ended.
    successes: Vec<u64>,
    spans: Vec<FaultSpan<'a>>,
    /// Each node a power loss left unable to come back: the fault's kind, the node, the seed.
    unrecovered: Vec<(&'a str, &'a str, Option<u64>)>,
    sent: u64,
    acked: u64,
    redelivered: u64,
    dead_lettered: BTreeSet<&'a str>,
}

/// Adds up a run's history.
fn tally(events: &[Event]) -> Tally<'_> {
    let mut t = Tally::default();
    for e in events {
        t.add(e);
    }
    t
}

impl<'a> Tally<'a> {
    /// Counts one event: a fault, a delivery, or an operation by its outcome.
    fn add(&mut self, e: &'a Event) {
        match e {
            Event::Fault {
                kind,
                start,
                end,
                restarted,
                seed,
                unrecovered,
                ..
            } => {
                let span = FaultSpan {
                    kind,
                    start: *start,
                    end: *end,
                    restarted: *restarted,
                };
                self.fault(span, *seed, unrecovered);
            }
            Event::Deliver {
                receive_count,
                dead_letter_source,
                message_id,
                ..
            } => {
                if *receive_count > 1 {
                    self.redelivered += 1;
                }
                if dead_letter_source.is_some() {
                    self.dead_lettered.insert(message_id);
                }
            }
            Event::Send {
                outcome,
                end,
                duplicate,
                ..
            } => {
                if *outcome == Outcome::Ok && !duplicate {
                    self.sent += 1;
                }
                self.operation("send", outcome, *end);
            }
            Event::Receive { outcome, end, .. } => self.operation("receive", outcome, *end),
            Event::Ack { outcome, end, .. } => {
                if *outcome == Outcome::Ok {
                    self.acked += 1;
                }
                self.operation("ack", outcome, *end);
            }
        }
    }

    /// A fault injected with `seed`: counted by its kind, its span kept, and each node it left
    /// unable to come back kept with the seed its powerfs reverted with.
    fn fault(&mut self, span: FaultSpan<'a>, seed: Option<u64>, unrecovered: &'a [String]) {
        let kind = span.kind;
        *self.faults.entry(kind).or_default() += 1;
        self.spans.push(span);
        self.unrecovered.extend(
            unrecovered
                .iter()
                .map(|node| (kind, node.as_str(), node_seed(kind, node, seed))),
        );
    }

    /// An operation of `kind` that ended at `end`: counted by its outcome, and its end kept
    /// when it succeeded.
    fn operation(&mut self, kind: &'static str, outcome: &Outcome, end: u64) {
        let slot = match outcome {
            Outcome::Ok => 0,
            Outcome::Failed(_) => 1,
            Outcome::Unknown(_) => 2,
        };
        self.ops.entry(kind).or_default()[slot] += 1;
        if slot == 0 {
            self.successes.push(end);
        }
    }
}

/// The seed `node`'s powerfs reverted with in a power loss recorded with `seed`: a
/// `power_loss_all` gives node N the recorded seed plus N.
fn node_seed(kind: &str, node: &str, seed: Option<u64>) -> Option<u64> {
    if !kind.starts_with("power_loss_all") {
        return seed;
    }
    let id: u64 = node.strip_prefix("node")?.parse().ok()?;
    seed?.checked_add(id)
}

/// Prints the run's summary; answers how many nodes did not come back from a power loss.
fn summarize(events: &[Event], report: &checker::Report, fault_start: u64, fault_end: u64) -> u64 {
    let Tally {
        faults,
        ops,
        successes,
        spans,
        unrecovered,
        sent,
        acked,
        redelivered,
        dead_lettered,
    } = tally(events);
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
        "longest unavailability window with a majority up (overlapping no restart_all or power_loss_all): {}",
        windows.longest_with_majority
    );
    println!(
        "first success after each restart_all and power_loss_all, from the start of its last node (ms): {:?}",
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
    // Not an anomaly of the history: a node that cannot start from what a power cut left is a
    // failure of its own, which fails the run as well.
    println!("unrecovered power losses: {}", unrecovered.len());
    for (kind, node, seed) in &unrecovered {
        let seed = seed.map_or(String::new(), |s| format!(", seed {s}"));
        println!("    {node} did not come back from {kind}{seed}");
    }
    unrecovered.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_command_names_the_seed_the_duration_and_the_groups() {
        assert_eq!(
            replay_command(123, 150, 1),
            "scripts/chaos --seed 123 --duration 150"
        );
        assert_eq!(
            replay_command(123, 150, 4),
            "RAFTQ_GROUPS=4 scripts/chaos --seed 123 --duration 150"
        );
    }

    #[test]
    fn the_history_goes_to_the_run_directory_and_to_the_copy_one_event_a_line() {
        let dir = std::env::temp_dir().join(format!("raftq-chaos-test-{}", std::process::id()));
        prepare_dir(&dir).expect("a fresh directory");
        assert!(dir.join("removed.log").is_file());
        let events = vec![
            Event::Fault {
                kind: "clock_jump (failed)".into(),
                target: "node2".into(),
                start: 1,
                end: 2,
                restarted: None,
                seed: None,
                unrecovered: Vec::new(),
            },
            Event::Receive {
                queue: "q".into(),
                start: 3,
                end: 4,
                outcome: Outcome::Ok,
            },
        ];
        let copy = dir.join("copy.jsonl");
        write_history(&events, &dir, Some(&copy)).expect("written");
        for path in [dir.join("history.jsonl"), copy] {
            let text = std::fs::read_to_string(&path).expect("readable");
            let lines: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
                .collect();
            assert_eq!(lines.len(), 2);
            assert_eq!(lines[0]["Fault"]["kind"], "clock_jump (failed)");
            assert_eq!(lines[1]["Receive"]["queue"], "q");
        }
        std::fs::remove_dir_all(&dir).expect("removed");
    }

    #[test]
    fn a_power_loss_keeps_its_seed_and_unrecovered_nodes_in_the_history_and_the_tally() {
        let fault = |kind: &str, unrecovered: &[&str]| Event::Fault {
            kind: kind.into(),
            target: "all".into(),
            start: 10,
            end: 20,
            restarted: Some(15),
            seed: Some(1_000),
            unrecovered: unrecovered.iter().map(|n| n.to_string()).collect(),
        };
        let events = vec![
            fault("power_loss_all", &["node2", "node3"]),
            fault("power_loss", &[]),
        ];
        let line = serde_json::to_value(&events[0]).expect("serializes");
        assert_eq!(line["Fault"]["seed"], 1_000);
        assert_eq!(line["Fault"]["restarted"], 15);
        assert_eq!(line["Fault"]["unrecovered"], json!(["node2", "node3"]));
        let plain = serde_json::to_value(&events[1]).expect("serializes");
        assert!(plain["Fault"].get("unrecovered").is_none());
        let t = tally(&events);
        assert_eq!(
            t.unrecovered,
            [
                ("power_loss_all", "node2", Some(1_002)),
                ("power_loss_all", "node3", Some(1_003))
            ]
        );
        assert_eq!(t.spans[0].restarted, Some(15));
        assert_eq!(node_seed("power_loss", "node2", Some(7)), Some(7));
    }
}
