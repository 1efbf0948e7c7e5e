//! `raftq-bench`: the comparative load generator. It drives raftq (gRPC or REST), a RabbitMQ
//! quorum queue or a NATS JetStream stream through one [`driver::Driver`] trait with the same
//! workloads, and writes what it measured as JSON lines; `report` turns those into
//! `docs/benchmarks.md`. `scripts/bench` starts the servers and runs everything.
//!
//! - `run`: the workloads against one system; appends one JSON line per measurement.
//! - `machine`: the report header (cores, kernel, fsync latency, versions given as facts).
//! - `report`: markdown and JSON from the machine header and the results, or from an earlier
//!   report with the rows of the workloads measured again replaced (`--merge`), and the
//!   latency-over-time plots of the fixed-rate rows that kept their sends' times, in a directory
//!   beside the markdown named after it; with `--scale`, the scale-out report of
//!   `scripts/bench-scale` instead.

mod driver;
mod jetstream;
mod machine;
mod measure;
mod producer;
mod rabbitmq;
mod raftq;
mod report;
mod timeline;
mod tls;
mod workloads;

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use driver::Driver;
use machine::Machine;
use measure::Measurement;
use report::{Line, Results, SystemLine};
use timeline::Timeline;
use workloads::{Bench, FairSettings, Settings, Spread};

#[derive(Debug, Parser)]
#[command(
    name = "raftq-bench",
    about = "Comparative benchmarks of raftq against RabbitMQ and NATS JetStream"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the workloads against one system (a flag given twice: the last one counts).
    #[command(args_override_self = true)]
    Run(Box<RunArgs>),
    /// Describes the machine and measures fsync latency.
    Machine(MachineArgs),
    /// Writes the markdown report (and the combined JSON) from the results.
    Report(ReportArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum System {
    RaftqGrpc,
    RaftqRest,
    Rabbitmq,
    Jetstream,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::RaftqGrpc => "raftq-grpc",
            System::RaftqRest => "raftq-rest",
            System::Rabbitmq => "rabbitmq",
            System::Jetstream => "jetstream",
        }
    }
}

/// The workloads `run --workloads` chooses from; each stands for the rows of its flags below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Workload {
    /// Single sends (`--send-in-flight`).
    Send,
    /// Sends in batches of 10 (`--batch-in-flight`).
    Batch,
    /// Sends at fixed rates (`--rate`).
    Rate,
    /// Send+receive+ack (`--e2e-in-flight`).
    E2e,
    /// Send+receive+ack at fixed rates (`--e2e-rate`).
    E2eRate,
    /// FIFO send+receive+ack (`--fifo-groups`).
    Fifo,
    /// Redelivery of abandoned deliveries (`--redeliver`).
    Redeliver,
    /// Redrive to a dead-letter queue (`--redrive`).
    Redrive,
    /// A fair queue's quiet tenants alone and beside a noisy one (`--fair-*`).
    Fair,
    /// The backlog drained against a near-empty queue's (`--backlog`).
    Backlog,
    /// The leader killed under load (`--failover-seconds`).
    Failover,
    /// Sends and send+receive+ack over many queues (`--spread-*`); only when named here.
    Spread,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    #[arg(long, value_enum)]
    system: System,
    /// Name of this system and topology in the report (`raftq-3`, `jetstream-r1`, ...).
    #[arg(long)]
    label: String,
    /// The nodes' client endpoints, comma-separated (http://, amqp:// or nats:// URLs).
    #[arg(long, value_delimiter = ',', required = true)]
    endpoints: Vec<String>,
    /// The server processes, in endpoint order: CPU is read from them, the failover kills one.
    #[arg(long, value_delimiter = ',', required = true)]
    pids: Vec<u32>,
    /// Copies of each message (JetStream: the stream's replicas; else the number of nodes).
    #[arg(long)]
    replicas: Option<usize>,
    /// JetStream only: the servers' `sync_interval`, as they were started with it (for the
    /// system's durability notes; default: `default`, nats-server's own).
    #[arg(long, value_enum)]
    jetstream_sync: Option<jetstream::SyncInterval>,
    /// Results file; each measurement is appended as one JSON line.
    #[arg(long)]
    out: PathBuf,
    /// Warm-up before each measured window, in seconds.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Length of each measured window, in seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Message body size in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// In-flight counts of the closed-loop single sends (comma list; empty: none).
    #[arg(long, default_value = "1,16,256")]
    send_in_flight: String,
    /// In-flight counts of the closed-loop sends in batches of 10.
    #[arg(long, default_value = "16,256")]
    batch_in_flight: String,
    /// Messages/s of the fixed-rate send runs (comma list; empty: none).
    #[arg(long, default_value = "1000,5000,10000")]
    rate: String,
    /// Tasks that carry out the fixed-rate sends (of the send+receive+ack runs too).
    #[arg(long, default_value_t = 256)]
    rate_workers: usize,
    /// The fixed-rate send run at this rate writes every send's times to the results file, for
    /// the report's latency-over-time plot (0: none).
    #[arg(long, default_value_t = 1000.0)]
    timeline_rate: f64,
    /// Sender counts of the send+receive+ack runs.
    #[arg(long, default_value = "16,256")]
    e2e_in_flight: String,
    /// Messages/s of the fixed-rate send+receive+ack runs (comma list; empty: none).
    #[arg(long, default_value = "1000")]
    e2e_rate: String,
    /// Group counts of the FIFO send+receive+ack runs.
    #[arg(long, default_value = "1,100,10000")]
    fifo_groups: String,
    /// Senders of the FIFO runs.
    #[arg(long, default_value_t = 256)]
    fifo_in_flight: usize,
    /// Messages of the backlog filled then drained (0: no backlog run).
    #[arg(long, default_value_t = 1_000_000)]
    backlog: u64,
    /// Messages of the near-empty queue whose drain the backlog's is compared with.
    #[arg(long, default_value_t = 20_000)]
    backlog_baseline: u64,
    /// Messages of the redelivery run (0: none).
    #[arg(long, default_value_t = 10_000)]
    redeliver: u64,
    /// Messages of the redrive run (0: none).
    #[arg(long, default_value_t = 10_000)]
    redrive: u64,
    /// Messages/s of each quiet tenant of the fair-queue rows.
    #[arg(long, default_value_t = 2.0)]
    fair_quiet_rate: f64,
    /// How many times a quiet tenant's rate the noisy tenant of the fair-queue rows sends.
    #[arg(long, default_value_t = 100)]
    fair_noisy_times: u32,
    /// Quiet tenants of the fair-queue rows.
    #[arg(long, default_value_t = 9)]
    fair_quiet_tenants: u32,
    /// Consumers of the fair-queue rows, each working on one message at a time.
    #[arg(long, default_value_t = 8)]
    fair_consumers: usize,
    /// Milliseconds a consumer of the fair-queue rows works on a message before it acks it, on
    /// average (each message from half to 1.5 times this).
    #[arg(long, default_value_t = 50.0)]
    fair_work_ms: f64,
    /// Length of the measured window of each fair-queue row, in seconds: longer than the other
    /// rows' because the quiet tenants send only 2 messages/s each, and a p99 needs samples.
    #[arg(long, default_value_t = 90.0)]
    fair_seconds: f64,
    /// Seconds the failover run goes on after killing the leader (0: no failover run).
    #[arg(long, default_value_t = 0.0)]
    failover_seconds: f64,
    /// Queues of the rows over many queues (`--workloads spread`): enough that each of a
    /// cluster's Raft groups holds several (two each of 9 groups by default).
    #[arg(long, default_value_t = 18)]
    spread_queues: usize,
    /// Messages in flight of the rows over many queues, over all their queues.
    #[arg(long, default_value_t = 256)]
    spread_in_flight: usize,
    /// raftq-grpc only: the endpoints are `https://` and their certificates are of this CA.
    #[arg(long)]
    ca_cert: Option<PathBuf>,
    /// raftq-grpc only, with `--ca-cert`: the name each node's certificate must carry, in
    /// endpoint order (default: each endpoint's host), for endpoints reached by an address
    /// their certificates do not name (a container's address on its network).
    #[arg(long, value_delimiter = ',')]
    tls_names: Vec<String>,
    /// raftq only: the Raft groups the cluster lays its queues over, as it was started with
    /// (`--groups`); the run first waits until every one of them is formed and has a leader, and
    /// no node leads more than its share of them (the balancer spread them).
    #[arg(long)]
    groups: Option<u32>,
    /// The CPUs each server may use (a container's `cpus` cap), recorded for the report.
    #[arg(long)]
    cpus_per_node: Option<f64>,
    /// Only these workloads, comma-separated (default: all; each still needs its flags above).
    #[arg(long, value_enum, value_delimiter = ',')]
    workloads: Option<Vec<Workload>>,
}

#[derive(Debug, clap::Args)]
struct MachineArgs {
    /// A directory on the disk the servers write to, for the fsync loop.
    #[arg(long)]
    dir: PathBuf,
    /// A fact for the header, `name=value` (versions, configurations, the command, the date).
    #[arg(long = "fact")]
    facts: Vec<String>,
    /// Measure the cost of a first write to memory over this many GiB (see `machine.rs`).
    #[arg(long)]
    first_touch_gib: Option<f64>,
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// The output of `machine`.
    #[arg(long)]
    machine: PathBuf,
    /// The results file of the `run`s.
    #[arg(long)]
    results: PathBuf,
    #[arg(long)]
    markdown: PathBuf,
    /// Machine, systems and results in one JSON document (the plots go beside the markdown).
    #[arg(long)]
    json: PathBuf,
    /// An earlier report's JSON to merge these results into: its header and its rows stay,
    /// except the rows of the workloads measured again here, which the new rows replace.
    #[arg(long)]
    merge: Option<PathBuf>,
    /// The scale-out report of `scripts/bench-scale` (raftq clusters of several sizes and
    /// group counts, capped nodes) instead of the comparative one.
    #[arg(long)]
    scale: bool,
}

fn list<T: FromStr>(text: &str) -> Result<Vec<T>>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().with_context(|| format!("`{s}` in `{text}`")))
        .collect()
}

/// A comma list of messages/s, each positive and finite.
fn rates(text: &str) -> Result<Vec<f64>> {
    let rates: Vec<f64> = list(text)?;
    if let Some(bad) = rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        bail!("rate `{bad}` in `{text}`: each rate must be a positive number of messages/s");
    }
    Ok(rates)
}

fn positive(n: u64) -> Option<u64> {
    (n > 0).then_some(n)
}

impl RunArgs {
    fn settings(&self) -> Result<Settings> {
        if self.seconds <= 0.0 || self.warmup < 0.0 {
            bail!("--seconds must be positive and --warmup not negative");
        }
        Ok(Settings {
            warmup: Duration::from_secs_f64(self.warmup),
            seconds: Duration::from_secs_f64(self.seconds),
            size: self.size,
            send_in_flight: self.only(Workload::Send, list(&self.send_in_flight)?),
            batch_in_flight: self.only(Workload::Batch, list(&self.batch_in_flight)?),
            rates: self.only(Workload::Rate, rates(&self.rate)?),
            rate_workers: self.rate_workers,
            timeline_rate: (self.timeline_rate > 0.0).then_some(self.timeline_rate),
            e2e_in_flight: self.only(Workload::E2e, list(&self.e2e_in_flight)?),
            e2e_rates: self.only(Workload::E2eRate, rates(&self.e2e_rate)?),
            fifo_groups: self.only(Workload::Fifo, list(&self.fifo_groups)?),
            fifo_in_flight: self.fifo_in_flight,
            backlog: self.only(Workload::Backlog, positive(self.backlog)),
            backlog_baseline: self.backlog_baseline,
            redeliver: self.only(Workload::Redeliver, positive(self.redeliver)),
            redrive: self.only(Workload::Redrive, positive(self.redrive)),
            fair: self.only(Workload::Fair, Some(self.fair()?)),
            spread: self.spread()?,
            failover: self.only(
                Workload::Failover,
                (self.failover_seconds > 0.0)
                    .then(|| Duration::from_secs_f64(self.failover_seconds)),
            ),
        })
    }

    /// `settings` when `--workloads` includes `workload` (or is not given), else none.
    fn only<T: Default>(&self, workload: Workload, settings: T) -> T {
        match &self.workloads {
            Some(chosen) if !chosen.contains(&workload) => T::default(),
            _ => settings,
        }
    }

    /// The rows over many queues, when `--workloads` names them.
    fn spread(&self) -> Result<Option<Spread>> {
        let named = self
            .workloads
            .as_ref()
            .is_some_and(|w| w.contains(&Workload::Spread));
        if !named {
            return Ok(None);
        }
        if self.spread_queues == 0 || self.spread_in_flight == 0 {
            bail!("--spread-queues and --spread-in-flight must be at least 1");
        }
        Ok(Some(Spread {
            queues: self.spread_queues,
            in_flight: self.spread_in_flight,
        }))
    }

    fn fair(&self) -> Result<FairSettings> {
        if self.fair_quiet_rate <= 0.0 || self.fair_work_ms <= 0.0 || self.fair_seconds <= 0.0 {
            bail!("--fair-quiet-rate, --fair-work-ms and --fair-seconds must be positive");
        }
        if self.fair_quiet_tenants == 0 || self.fair_noisy_times == 0 || self.fair_consumers == 0 {
            bail!(
                "--fair-quiet-tenants, --fair-noisy-times and --fair-consumers must be at least 1"
            );
        }
        Ok(FairSettings {
            quiet_rate: self.fair_quiet_rate,
            noisy_times: self.fair_noisy_times,
            quiet_tenants: self.fair_quiet_tenants,
            consumers: self.fair_consumers,
            work: Duration::from_secs_f64(self.fair_work_ms / 1000.0),
            seconds: Duration::from_secs_f64(self.fair_seconds),
        })
    }
}

/// Appends `line` to the results file and prints it, unless it is a timeline (thousands of
/// numbers, for the report and `scripts/latency` only).
fn append(path: &PathBuf, line: &Line) -> Result<()> {
    let text = serde_json::to_string(line)?;
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    writeln!(file, "{text}").with_context(|| format!("writing {}", path.display()))?;
    if !matches!(line, Line::Timeline(_)) {
        println!("{text}");
    }
    Ok(())
}

/// Appends a row to the results file, its timeline (if it kept one) on a line of its own first.
fn append_row(path: &PathBuf, mut row: Measurement) -> Result<()> {
    if let Some(timeline) = row.timeline.take() {
        let timeline = Timeline {
            label: row.label.clone(),
            key: row.key.clone(),
            ..timeline
        };
        append(path, &Line::Timeline(timeline))?;
    }
    append(path, &Line::Result(Box::new(row)))
}

async fn run_system<D: Driver>(driver: D, args: &RunArgs) -> Result<()> {
    let settings = args.settings()?;
    let replicas = args.replicas.unwrap_or(args.endpoints.len());
    let bench = Bench::new(driver, args.label.clone(), args.pids.clone(), settings)?;
    let system = SystemLine {
        label: args.label.clone(),
        system: args.system.name().into(),
        replicas,
        notes: bench.driver().notes(),
        groups: args.groups,
        cpus_per_node: args.cpus_per_node,
    };
    append(&args.out, &Line::System(system))?;
    bench.run(&mut |m| append_row(&args.out, m)).await
}

async fn run(args: RunArgs) -> Result<()> {
    if args.pids.len() != args.endpoints.len() {
        bail!("one pid per endpoint");
    }
    if args.jetstream_sync.is_some() && !matches!(args.system, System::Jetstream) {
        bail!(
            "--jetstream-sync applies to --system jetstream only, not {}",
            args.system.name()
        );
    }
    let grpc_only = args.ca_cert.is_some() || !args.tls_names.is_empty() || args.groups.is_some();
    if grpc_only && !matches!(args.system, System::RaftqGrpc) {
        bail!(
            "--ca-cert, --tls-names and --groups apply to --system raftq-grpc only, not {}",
            args.system.name()
        );
    }
    let endpoints = &args.endpoints;
    match args.system {
        System::RaftqGrpc => run_system(grpc(&args).await?, &args).await,
        System::RaftqRest => run_system(raftq::RaftqRest::connect(endpoints).await?, &args).await,
        System::Rabbitmq => run_system(rabbitmq::RabbitMq::connect(endpoints).await?, &args).await,
        System::Jetstream => {
            let replicas = args.replicas.unwrap_or(1);
            let sync = args
                .jetstream_sync
                .unwrap_or(jetstream::SyncInterval::Default);
            let driver = jetstream::JetStream::connect(endpoints, replicas, sync).await?;
            run_system(driver, &args).await
        }
    }
}

/// The gRPC driver as `args` ask for it: with TLS, and once the cluster's groups are formed.
async fn grpc(args: &RunArgs) -> Result<raftq::RaftqGrpc> {
    let tls = match &args.ca_cert {
        Some(path) => Some(raftq::Tls {
            ca_pem: std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
            names: args.tls_names.clone(),
        }),
        None if args.tls_names.is_empty() => None,
        None => bail!("--tls-names needs --ca-cert"),
    };
    let driver = raftq::RaftqGrpc::connect(&args.endpoints, tls.as_ref()).await?;
    if let Some(groups) = args.groups {
        driver.wait_for_groups(groups).await?;
    }
    Ok(driver)
}

fn machine(args: MachineArgs) -> Result<()> {
    let mut facts = BTreeMap::new();
    for fact in &args.facts {
        let (k, v) = fact
            .split_once('=')
            .ok_or_else(|| anyhow!("--fact `{fact}` is not name=value"))?;
        facts.insert(k.trim().to_string(), v.trim().to_string());
    }
    let first_touch = args
        .first_touch_gib
        .map(|gib| machine::first_touch((gib.max(0.0) * f64::from(1u32 << 30)) as u64));
    let machine = Machine {
        first_touch,
        ..Machine::describe(&args.dir, facts)?
    };
    let text = serde_json::to_string_pretty(&machine)?;
    std::fs::write(&args.out, &text).with_context(|| format!("writing {}", args.out.display()))?;
    println!("{text}");
    Ok(())
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn report(args: ReportArgs) -> Result<()> {
    let machine: Machine = serde_json::from_str(&read(&args.machine)?)
        .with_context(|| format!("parsing {}", args.machine.display()))?;
    let mut results = Results::parse(machine, &read(&args.results)?)?;
    results.plot(&args.markdown)?;
    if let Some(earlier) = &args.merge {
        let earlier: Results = serde_json::from_str(&read(earlier)?)
            .with_context(|| format!("parsing {}", earlier.display()))?;
        results = earlier.merge(results);
    }
    let json = args.json.display().to_string();
    let markdown = if args.scale {
        results.scale_markdown(&json)
    } else {
        results.markdown(&json)
    };
    std::fs::write(&args.markdown, markdown)
        .with_context(|| format!("writing {}", args.markdown.display()))?;
    std::fs::write(&args.json, serde_json::to_string_pretty(&results)? + "\n")
        .with_context(|| format!("writing {}", args.json.display()))?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    driver::epoch();
    // Warnings of the client libraries go to stderr. Without a subscriber, every span they open
    // (h2 opens some per call) would still be offered to the `log` crate, at a cost in CPU.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RAFTQ_BENCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match Cli::parse().command {
        Command::Run(args) => run(*args).await,
        Command::Machine(args) => machine(args),
        Command::Report(args) => report(args),
    }
}
