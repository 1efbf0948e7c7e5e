//! `raftq-sim`: runs the simulation for many seeds, two at a time (one per thread), prints one
//! line per seed, and for every seed that found something wrong, what it found, the command
//! that replays it and where its history was kept. Exits with 1 when any seed failed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Parser;
use raftq_sim::world::SimError;
use raftq_sim::{json_lines, replay_command, run, Options, Run};

#[derive(Debug, Parser)]
#[command(name = "raftq-sim")]
struct Args {
    /// Runs this one seed.
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Runs this many seeds, from `--first` on.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// The first seed of `--seeds`.
    #[arg(long, default_value_t = 1)]
    first: u64,
    /// Seconds of simulated faults per seed.
    #[arg(long, default_value_t = 20)]
    faults_for: u64,
    /// Seeds run at once, each on a thread of its own.
    #[arg(long, default_value_t = 2)]
    threads: u64,
    /// Real seconds a seed may take before the run stops as failed: a seed stuck in simulated
    /// time (tasks that wake each other forever without a timer) never ends otherwise.
    #[arg(long, default_value_t = 120)]
    seed_seconds: u64,
    /// Where the history of each seed that failed is kept (`seed-N.jsonl`; with `--seed`, of
    /// that seed whatever it found). Default: a new `raftq-sim-PID` in the temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    {
        use tracing_subscriber::layer::SubscriberExt;
        let counting = tracing_subscriber::registry().with(raftq_sim::snapshots::counter());
        if tracing::subscriber::set_global_default(counting).is_err() {
            eprintln!("snapshot installs are not counted: a tracing subscriber is already set");
        }
    }
    let batch = Batch {
        options: Options {
            faults_for: Duration::from_secs(args.faults_for),
        },
        seeds: match args.seed {
            Some(seed) => vec![seed],
            None => (args.first..args.first + args.seeds).collect(),
        },
        dir: args.dir.clone().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("raftq-sim-{}", std::process::id()))
        }),
        keep_every: args.seed.is_some(),
        next: AtomicU64::new(0),
        failed: Mutex::new(Vec::new()),
        power_losses: AtomicU64::new(0),
        lost_unsynced: AtomicU64::new(0),
        running: Mutex::new(BTreeMap::new()),
    };
    let started = Instant::now();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            watch(
                &batch.running,
                &done,
                Duration::from_secs(args.seed_seconds),
                &batch.options,
            )
        });
        let workers: Vec<_> = (0..args.threads.max(1))
            .map(|_| scope.spawn(|| batch.work()))
            .collect();
        for worker in workers {
            let _ = worker.join();
        }
        // The watchdog ends with the seeds.
        done.store(true, Ordering::SeqCst);
    });
    let failed = batch.failed.into_inner().unwrap_or_default();
    println!(
        "{} seeds in {:.0} s: {} failed {:?}; {} power losses, {} of them lost unsynced writes",
        batch.seeds.len(),
        started.elapsed().as_secs_f64(),
        failed.len(),
        failed,
        batch.power_losses.into_inner(),
        batch.lost_unsynced.into_inner()
    );
    match failed.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}

/// The seeds of one run and what the threads running them share: the next seed to take, the
/// seeds that failed, the tallies, and when each running seed started (for the watchdog).
struct Batch {
    options: Options,
    seeds: Vec<u64>,
    /// Where failed seeds' histories are kept.
    dir: PathBuf,
    /// Keeps every seed's history, not only failed ones' (a single `--seed`).
    keep_every: bool,
    next: AtomicU64,
    failed: Mutex<Vec<u64>>,
    power_losses: AtomicU64,
    lost_unsynced: AtomicU64,
    running: Mutex<BTreeMap<u64, Instant>>,
}

impl Batch {
    /// Takes seeds and runs them until none is left, printing a line for each.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::SeqCst) as usize;
            let Some(seed) = self.seeds.get(i).copied() else {
                return;
            };
            let clock = Instant::now();
            self.running.lock().map(|mut r| r.insert(seed, clock)).ok();
            let ran = run(seed, &self.options);
            self.running.lock().map(|mut r| r.remove(&seed)).ok();
            let line = self.report(seed, ran);
            println!("{line} ({:.1} s)", clock.elapsed().as_secs_f64());
        }
    }

    /// Tallies what `seed` ran into and says it in a line (with how to replay it if it failed).
    fn report(&self, seed: u64, ran: Result<Run, SimError>) -> String {
        if let Ok(run) = &ran {
            self.power_losses
                .fetch_add(run.tally.power_losses, Ordering::SeqCst);
            self.lost_unsynced
                .fetch_add(run.tally.lost_unsynced, Ordering::SeqCst);
        }
        let replay = replay_command(seed, &self.options);
        match ran {
            Ok(run) if run.failures() == 0 && !self.keep_every => run.summary(),
            Ok(run) if run.failures() == 0 => {
                format!("{}\n  {}", run.summary(), keep(&self.dir, &run))
            }
            Ok(run) => {
                self.failed.lock().map(|mut f| f.push(seed)).ok();
                format!(
                    "{}\n  replay: {replay}\n  {}",
                    run.summary(),
                    keep(&self.dir, &run)
                )
            }
            Err(error) => {
                self.failed.lock().map(|mut f| f.push(seed)).ok();
                format!("seed {seed}: {error}\n  replay: {replay}")
            }
        }
    }
}

/// Writes the history of `run` into `dir`, and says where (or why not).
fn keep(dir: &Path, run: &Run) -> String {
    let path = dir.join(format!("seed-{}.jsonl", run.seed));
    match std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, json_lines(&run.judged.events)))
    {
        Ok(()) => format!("history: {}", path.display()),
        Err(e) => format!("history not kept ({}): {e}", path.display()),
    }
}

/// Stops the process as failed once a seed in `running` has run `limit` of real time, saying
/// which and how to replay it; returns once `done`.
fn watch(
    running: &Mutex<BTreeMap<u64, Instant>>,
    done: &AtomicBool,
    limit: Duration,
    options: &Options,
) {
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
        let stuck = running.lock().ok().and_then(|r| {
            r.iter()
                .find(|(_, at)| at.elapsed() > limit)
                .map(|(seed, _)| *seed)
        });
        if let Some(seed) = stuck {
            println!(
                "seed {seed}: still running after {} s of real time, stuck in simulated time\n  \
                 replay: {}",
                limit.as_secs(),
                replay_command(seed, options)
            );
            std::process::exit(1);
        }
    }
}
