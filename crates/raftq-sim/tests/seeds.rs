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

#[test]
fn one_seed_replays_its_run_event_for_event() {
    let first = run(11, &short()).expect("the first run");
    let second = run(11, &short()).expect("the second run");
    assert!(first.judged.events.len() > 100, "{}", first.summary());
    assert_eq!(
        first.digest,
        second.digest,
        "{}\n{}",
        first.summary(),
        second.summary()
    );
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
