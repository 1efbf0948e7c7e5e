//! The seeded fault schedule: which kind of fault comes next, the pause before it, how long it
//! holds, the seed of a power loss, and a random source of its own for the fault's remaining
//! choices (leader or follower, which follower, which file). All of it follows from the run's
//! seed and the fault's place in the schedule alone, so a replay repeats it whatever the cluster
//! did meanwhile; only who leads, which decides a fault's target node, comes from the cluster.
//!
//! Faults come in rounds of every kind once, in a seeded order. Each round opens with the two
//! power-loss kinds and two short kinds (a hold of a few seconds, no wait for the cluster), so
//! both power losses run early in every run, however long the slow faults of the round take (a
//! replace or a grow waits for nodes to catch up); the rest of the round follows, a `grow`
//! always before the `shrink` that removes what it added.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// How long a kind of fault takes, which decides its place in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// A power loss: one of the kinds that open every round.
    Power,
    /// Its injection ends within seconds: a hold (2 s longer for a clock jump) between a few
    /// docker commands, with no wait for the cluster to recover.
    Short,
    /// It waits for the cluster (a replace or a grow waits for nodes to catch up).
    Slow,
}

/// The kinds of fault, each with its pace.
pub const KINDS: [(&str, Pace); 15] = [
    ("kill_leader", Pace::Short),
    ("kill_follower", Pace::Short),
    ("pause_leader", Pace::Short),
    ("isolate_leader", Pace::Short),
    ("isolate_follower", Pace::Short),
    ("restart_all", Pace::Short),
    ("rolling_restart", Pace::Slow),
    ("replace_node", Pace::Slow),
    ("grow", Pace::Slow),
    ("shrink", Pace::Slow),
    ("clock_jump", Pace::Short),
    ("one_way_partition", Pace::Short),
    ("corrupt", Pace::Slow),
    ("power_loss", Pace::Power),
    ("power_loss_all", Pace::Power),
];

/// The kinds of `pace`, in the order of [`KINDS`].
pub fn of_pace(pace: Pace) -> Vec<&'static str> {
    KINDS
        .iter()
        .filter(|(_, p)| *p == pace)
        .map(|(kind, _)| *kind)
        .collect()
}

/// How many faults open a round: the power-loss kinds and short ones.
pub const OPENING: usize = 4;

/// The pause before each fault, in milliseconds.
pub const GAP_MS: Range<u64> = 2_000..5_000;

/// How long a fault holds (a node down, paused or cut off), in milliseconds.
pub const HOLD_MS: Range<u64> = 1_500..4_000;

/// Power-loss seeds are drawn below this, so that `power_loss_all`'s per-node seeds (the drawn
/// one plus the node's id) stay far from overflowing and short enough to read.
const POWER_SEED_LIMIT: u64 = 1 << 32;

/// One fault as the schedule has it.
#[derive(Debug, Clone)]
pub struct Planned {
    pub kind: &'static str,
    /// The pause before it.
    pub gap: Duration,
    pub hold: Duration,
    /// The seed a power loss reverts unsynced writes with; `power_loss_all` gives node N this
    /// plus N. Drawn for every fault, so that the draws stay the same whatever the kind.
    pub power_seed: u64,
    /// The source of the fault's other choices.
    pub rng: StdRng,
}

/// The schedule of one run: an endless sequence of planned faults.
#[derive(Debug)]
pub struct Schedule {
    seed: u64,
    next: u64,
    /// Decides the order of the kinds in each round, and nothing else.
    order: StdRng,
    round: VecDeque<&'static str>,
}

impl Schedule {
    /// The schedule of the run with `seed`.
    pub fn new(seed: u64) -> Schedule {
        Schedule {
            seed,
            next: 0,
            order: StdRng::seed_from_u64(seed),
            round: VecDeque::new(),
        }
    }
}

impl Iterator for Schedule {
    type Item = Planned;

    fn next(&mut self) -> Option<Planned> {
        if self.round.is_empty() {
            self.round = round(&mut self.order).into();
        }
        let kind = self.round.pop_front()?;
        let index = self.next;
        self.next += 1;
        // A stream per fault, from the run's seed and the fault's place: a draw that depends on
        // the cluster (a choice among however many followers there are) cannot shift the draws
        // of later faults.
        let salt = (index + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut rng = StdRng::seed_from_u64(self.seed ^ salt);
        Some(Planned {
            kind,
            gap: Duration::from_millis(rng.random_range(GAP_MS)),
            hold: Duration::from_millis(rng.random_range(HOLD_MS)),
            power_seed: rng.random_range(1..POWER_SEED_LIMIT),
            rng,
        })
    }
}

/// One round: every kind once, the power-loss kinds and `OPENING - 2` short kinds first in a
/// seeded order, then the others shuffled, `grow` before `shrink`.
fn round(rng: &mut StdRng) -> Vec<&'static str> {
    let mut short = of_pace(Pace::Short);
    short.shuffle(rng);
    let mut opening = of_pace(Pace::Power);
    let power = opening.len();
    opening.extend(short.into_iter().take(OPENING - power));
    opening.shuffle(rng);
    let mut rest: Vec<&'static str> = KINDS
        .iter()
        .map(|(kind, _)| *kind)
        .filter(|k| !opening.contains(k))
        .collect();
    rest.shuffle(rng);
    let at = |kind: &str, list: &[&str]| list.iter().position(|k| *k == kind);
    if let (Some(grow), Some(shrink)) = (at("grow", &rest), at("shrink", &rest)) {
        if shrink < grow {
            rest.swap(grow, shrink);
        }
    }
    opening.extend(rest);
    opening
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pace of `kind`; `None` for a name that is no kind.
    fn pace_of(kind: &str) -> Option<Pace> {
        KINDS
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, pace)| *pace)
    }

    /// The longest a short fault or a power loss takes from its start to the next fault's
    /// pause, in milliseconds, when the cluster behaves: its hold, 2 s more for a clock jump,
    /// and for a power loss the whole 30 s wait for the node to come back, plus the docker
    /// commands. Those took up to 7 s for a short fault (a `restart_all`: every container
    /// looked up twice through docker-compose) and 15 s for a `power_loss_all` (arming, kill,
    /// start, reading the logs) on two cores; twice that is allowed. `None` for the slow kinds,
    /// which the opening never holds.
    fn longest_ms(kind: &str, hold: Duration) -> Option<u64> {
        let hold = hold.as_millis() as u64;
        match kind {
            "clock_jump" => Some(hold + 2_000 + 14_000),
            "power_loss" | "power_loss_all" => Some(hold + 30_000 + 30_000),
            k if pace_of(k) == Some(Pace::Short) => Some(hold + 14_000),
            _ => None,
        }
    }

    /// The length of the fault phase of a CI run.
    const CI_RUN_MS: u64 = 150_000;

    #[test]
    fn every_run_of_150_s_has_both_power_losses_whatever_the_seed() {
        for seed in (0..2_000).chain([u64::MAX, 1_796_113_526_348]) {
            let mut clock = 0u64;
            let mut started = Vec::new();
            for planned in Schedule::new(seed).take(OPENING) {
                clock += planned.gap.as_millis() as u64;
                started.push((planned.kind, clock));
                clock += longest_ms(planned.kind, planned.hold)
                    .unwrap_or_else(|| panic!("seed {seed}: {} opens a round", planned.kind));
            }
            for kind in of_pace(Pace::Power) {
                let at = started.iter().find(|(k, _)| *k == kind).map(|(_, at)| *at);
                assert!(
                    at.is_some_and(|at| at < CI_RUN_MS),
                    "seed {seed}: {kind} starts at {at:?} ms: {started:?}"
                );
            }
        }
    }

    #[test]
    fn a_round_has_every_kind_once_opens_with_the_power_losses_and_grows_before_it_shrinks() {
        for seed in 0..500 {
            let kinds: Vec<&str> = Schedule::new(seed)
                .take(3 * KINDS.len())
                .map(|p| p.kind)
                .collect();
            for round in kinds.chunks(KINDS.len()) {
                let mut sorted = round.to_vec();
                sorted.sort_unstable();
                let mut all: Vec<&str> = KINDS.iter().map(|(kind, _)| *kind).collect();
                all.sort_unstable();
                assert_eq!(sorted, all, "seed {seed}: {round:?}");
                let opening = &round[..OPENING];
                assert!(
                    of_pace(Pace::Power).iter().all(|k| opening.contains(k)),
                    "{opening:?}"
                );
                assert!(
                    opening
                        .iter()
                        .all(|k| matches!(pace_of(k), Some(Pace::Power | Pace::Short))),
                    "{opening:?}"
                );
                let at = |kind: &str| round.iter().position(|k| *k == kind);
                assert!(at("grow") < at("shrink"), "seed {seed}: {round:?}");
            }
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_power_seeds() {
        let plan = |seed: u64| -> Vec<(&str, Duration, Duration, u64, u64)> {
            Schedule::new(seed)
                .take(40)
                .map(|mut p| (p.kind, p.gap, p.hold, p.power_seed, p.rng.random()))
                .collect()
        };
        assert_eq!(plan(42), plan(42));
        assert_ne!(plan(42), plan(43));
        for (kind, gap, hold, power_seed, _) in plan(7) {
            assert!(GAP_MS.contains(&(gap.as_millis() as u64)), "{kind}");
            assert!(HOLD_MS.contains(&(hold.as_millis() as u64)), "{kind}");
            assert!((1..POWER_SEED_LIMIT).contains(&power_seed), "{kind}");
        }
    }

    #[test]
    fn every_kind_has_one_pace_and_the_opening_holds_the_power_losses_and_short_kinds() {
        let mut names: Vec<&str> = KINDS.iter().map(|(kind, _)| *kind).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KINDS.len(), "a kind listed twice");
        let (power, short) = (of_pace(Pace::Power).len(), of_pace(Pace::Short).len());
        assert!(OPENING >= power && OPENING - power <= short);
    }
}
