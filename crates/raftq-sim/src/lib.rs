//! # raftq-sim
//!
//! A deterministic simulation of a whole raftq cluster in one thread: real nodes (routing, group
//! commit, the timer, the election gate, membership, handover and the clock, the vendored Raft
//! core, the engine and the storage) on machines whose time, network, clocks and log disks the
//! simulation owns ([`world`]), driven by a director that plays a workload and a schedule of
//! faults ([`scenario`], [`workload`], [`faults`]) and judges the history with the chaos run's
//! checker. Every choice comes from the seed, so one seed replays the same run, event for event
//! ([`run`]).
//!
//! - [`net`]: the network between the nodes (latencies, cuts one way or both).
//! - [`host`]: one machine, a paused and seeded tokio runtime stepped a tick at a time.
//! - [`api`]: how the director's clients call a node.

pub mod api;
pub mod faults;
pub mod host;
pub mod net;
pub mod scenario;
pub mod snapshots;
mod waiting;
pub mod workload;
pub mod world;

use std::cell::Cell;
use std::sync::Once;
use std::time::Duration;

use raftq_check::history::Event;
use sha2::{Digest, Sha256};

use crate::scenario::Judged;
use crate::world::{SimError, Tally, World};

/// What a run is made of besides its seed.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Simulated time of faults (the workload runs through them, then drains).
    pub faults_for: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            faults_for: Duration::from_secs(20),
        }
    }
}

/// Simulated time a run may take beyond its faults: the start, the heal, the drain and the
/// final reads, each bounded.
const AFTER_FAULTS: Duration = Duration::from_secs(300);

/// What one seed's run found.
#[derive(Debug)]
pub struct Run {
    pub seed: u64,
    /// The SHA-256 of the history, one JSON line per event: equal for two runs of one seed.
    pub digest: String,
    pub judged: Judged,
    /// What the world saw of the machines.
    pub tally: Tally,
    /// Panics on the run's thread: an assertion of the node's code that failed on a task,
    /// which tokio would otherwise only end.
    pub panics: u64,
}

impl Run {
    /// Anomalies, unrecovered nodes and problems: 0 for a run that found nothing wrong.
    pub fn failures(&self) -> u64 {
        self.judged.report.total()
            + (self.judged.unrecovered.len()
                + self.judged.problems.len()
                + self.tally.start_failures.len()) as u64
            + self.panics
    }

    /// One line that says what the run found.
    pub fn summary(&self) -> String {
        let faults = self
            .judged
            .events
            .iter()
            .filter(|e| matches!(e, Event::Fault { .. }))
            .count();
        let mut line = format!(
            "seed {}: {} events, {faults} faults ({} power losses, {} lost unsynced writes), {} \
             snapshots installed, {} anomalies, history {}",
            self.seed,
            self.judged.events.len(),
            self.tally.power_losses,
            self.tally.lost_unsynced,
            self.tally.snapshots_installed,
            self.judged.report.total(),
            &self.digest[..16]
        );
        for (invariant, (count, examples)) in &self.judged.report.anomalies {
            if *count > 0 {
                line.push_str(&format!("\n  {invariant}: {count} (e.g. {examples:?})"));
            }
        }
        if self.panics > 0 {
            line.push_str(&format!(
                "\n  {} panics (see the output above)",
                self.panics
            ));
        }
        for problem in self
            .judged
            .problems
            .iter()
            .chain(&self.judged.unrecovered)
            .chain(&self.tally.start_failures)
        {
            line.push_str(&format!("\n  {problem}"));
        }
        line
    }
}

/// The command that replays `seed` with `options`.
pub fn replay_command(seed: u64, options: &Options) -> String {
    format!(
        "scripts/sim --seed {seed} --faults-for {}",
        options.faults_for.as_secs()
    )
}

thread_local! {
    static PANICS: Cell<u64> = const { Cell::new(0) };
}

/// Counts every panic on the thread it happens on, then reports it as before.
fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|n| n.set(n.get() + 1));
            report(info);
        }));
    });
}

/// Runs the simulation of `seed` on this thread.
pub fn run(seed: u64, options: &Options) -> Result<Run, SimError> {
    count_panics();
    let panics_before = PANICS.with(Cell::get);
    raftq_store::random::seed(Some(seed));
    let world = World::new(seed, 3)?;
    let faults_for = options.faults_for;
    let (judged, tally) = world.run(faults_for + AFTER_FAULTS, move |control| {
        scenario::play(control, seed, faults_for)
    })?;
    raftq_store::random::seed(None);
    Ok(Run {
        seed,
        digest: digest(&judged.events),
        judged,
        tally,
        panics: PANICS.with(Cell::get) - panics_before,
    })
}

/// `events` as JSON lines.
pub fn json_lines(events: &[Event]) -> Vec<u8> {
    let mut lines = Vec::new();
    for event in events {
        lines.extend(serde_json::to_vec(event).unwrap_or_default());
        lines.push(b'\n');
    }
    lines
}

/// The SHA-256 of `events` as JSON lines.
pub fn digest(events: &[Event]) -> String {
    hex::encode(Sha256::digest(json_lines(events)))
}
