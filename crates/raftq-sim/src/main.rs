//! `raftq-sim`: runs the simulation for many seeds, two at a time (one per thread), prints one
//! line per seed, and for every seed that found something wrong, what it found, the command
//! that replays it and where its history was kept. Exits with 1 when any seed failed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Parser;
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
    /// Where the history of each seed that failed is kept (`seed-N.jsonl`; with `--seed`, of
    /// that seed whatever it found). Default: a new `raftq-sim-PID` in the temporary directory.
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let options = Options {
        faults_for: Duration::from_secs(args.faults_for),
    };
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => (args.first..args.first + args.seeds).collect(),
    };
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("raftq-sim-{}", std::process::id())));
    let keep_every = args.seed.is_some();
    let next = AtomicU64::new(0);
    let failed = Mutex::new(Vec::new());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..args.threads.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                let Some(seed) = seeds.get(i).copied() else {
                    return;
                };
                let clock = Instant::now();
                let line = match run(seed, &options) {
                    Ok(run) if run.failures() == 0 && !keep_every => run.summary(),
                    Ok(run) if run.failures() == 0 => {
                        format!("{}\n  {}", run.summary(), keep(&dir, &run))
                    }
                    Ok(run) => {
                        failed.lock().map(|mut f| f.push(seed)).ok();
                        format!(
                            "{}\n  replay: {}\n  {}",
                            run.summary(),
                            replay_command(seed, &options),
                            keep(&dir, &run)
                        )
                    }
                    Err(error) => {
                        failed.lock().map(|mut f| f.push(seed)).ok();
                        format!(
                            "seed {seed}: {error}\n  replay: {}",
                            replay_command(seed, &options)
                        )
                    }
                };
                println!("{line} ({:.1} s)", clock.elapsed().as_secs_f64());
            });
        }
    });
    let failed = failed.into_inner().unwrap_or_default();
    println!(
        "{} seeds in {:.0} s: {} failed {:?}",
        seeds.len(),
        started.elapsed().as_secs_f64(),
        failed.len(),
        failed
    );
    match failed.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
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
