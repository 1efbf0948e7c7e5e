//! Whole simulated runs: a seed replays its run event for event, another seed makes another
//! run, and the runs find nothing wrong. Each run is bounded in simulated time, and its data
//! directories go with it.

use std::time::Duration;

use raftq_sim::{run, Options};

fn short() -> Options {
    Options {
        faults_for: Duration::from_secs(8),
    }
}

/// Two runs of one seed at once on two threads, then a third alone: tokio numbers tasks
/// across the whole process, so the runs beside each other also check that nothing in a run
/// depends on what else the process runs.
#[test]
fn one_seed_replays_its_run_event_for_event() {
    let beside = std::thread::spawn(|| run(11, &short()).expect("the run beside"));
    let first = run(11, &short()).expect("the first run");
    let beside = beside.join().expect("the thread beside");
    let alone = run(11, &short()).expect("the run alone");
    assert!(first.judged.events.len() > 100, "{}", first.summary());
    for other in [&beside, &alone] {
        assert_eq!(
            first.digest,
            other.digest,
            "{}\n{}",
            first.summary(),
            other.summary()
        );
    }
    assert_eq!(first.failures(), 0, "{}", first.summary());
}

#[test]
fn another_seed_makes_another_run() {
    let one = run(12, &short()).expect("seed 12");
    let other = run(13, &short()).expect("seed 13");
    assert_ne!(one.digest, other.digest);
    assert_eq!(one.failures(), 0, "{}", one.summary());
    assert_eq!(other.failures(), 0, "{}", other.summary());
}

/// The seeds that found bugs (docs/simulation.md), each run as it was when it found one.
const FOUND_BUGS: &[u64] = &[
    // A leader's clock jump read against a follower's answer from before it.
    15,
];

#[test]
fn the_seeds_that_found_bugs_find_nothing() {
    for seed in FOUND_BUGS {
        let run = run(*seed, &Options::default()).expect("the run");
        assert_eq!(run.failures(), 0, "{}", run.summary());
    }
}
