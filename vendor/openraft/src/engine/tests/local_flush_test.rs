//! raftq: the leader's own copy of an entry counts towards its commit only once the leader's
//! flush is reported (`update_local_progress`, which `RaftCore` calls on `Notify::LocalFlushed`),
//! not when the engine asks for the append. raftq's core hands the leader's entries to the store
//! and runs the `Replicate` commands without waiting for the flush (RAFTQ.md), so a follower's
//! answer can come before the leader's flush; these tests pin down what the engine then does.

use std::sync::Arc;

use maplit::btreeset;
use pretty_assertions::assert_eq;

use crate::engine::testing::UTConfig;
use crate::engine::Command;
use crate::engine::Engine;
use crate::progress::Inflight;
use crate::progress::Progress;
use crate::raft_state::LogStateReader;
use crate::testing::blank_ent;
use crate::testing::log_id;
use crate::utime::UTime;
use crate::EffectiveMembership;
use crate::Membership;
use crate::TokioInstant;
use crate::Vote;

fn m1() -> Membership<u64, ()> {
    Membership::<u64, ()>::new(vec![btreeset! {1}], None)
}

fn m123() -> Membership<u64, ()> {
    Membership::<u64, ()>::new(vec![btreeset! {1,2,3}], None)
}

/// Node 1 leads at term 2, its log and the commit at `(1,1,1)`, which every node holds.
fn eng(m: Membership<u64, ()>) -> Engine<UTConfig> {
    let mut eng = Engine::default();
    eng.state.enable_validation(false); // Disable validation for incomplete state

    eng.config.id = 1;
    eng.state.vote = UTime::new(TokioInstant::now(), Vote::new_committed(2, 1));
    eng.state.log_ids.append(log_id(1, 1, 1));
    eng.state.committed = Some(log_id(1, 1, 1));
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(1, 1, 1)), m)));
    eng.testing_new_leader();
    eng.state.server_state = eng.calc_server_state();
    eng.output.take_commands();

    eng
}

fn matching(eng: &Engine<UTConfig>, id: u64) -> Option<crate::LogId<u64>> {
    eng.leader.as_ref().unwrap().progress.get(&id).matching.clone()
}

#[test]
fn test_follower_ack_before_leader_flush_does_not_commit() -> anyhow::Result<()> {
    let mut eng = eng(m123());

    eng.leader_handler()?.leader_append_entries(vec![blank_ent(0, 0, 0), blank_ent(0, 0, 0)]);

    // The append and both replications are asked for together: nothing waits for the flush.
    assert_eq!(
        vec![
            Command::AppendInputEntries {
                vote: Vote::new_committed(2, 1),
                entries: vec![blank_ent(2, 1, 2), blank_ent(2, 1, 3)],
            },
            Command::Replicate {
                target: 2,
                req: Inflight::logs(None, Some(log_id(2, 1, 3))).with_id(1),
            },
            Command::Replicate {
                target: 3,
                req: Inflight::logs(None, Some(log_id(2, 1, 3))).with_id(1),
            },
        ],
        eng.output.take_commands()
    );
    assert_eq!(
        None,
        matching(&eng, 1),
        "the leader's copy is not counted before its flush"
    );

    tracing::info!("--- node 2 holds (2,1,3) before the leader's flush: one of three, no commit");
    eng.replication_handler().update_matching(2, 1, Some(log_id(2, 1, 3)));

    assert_eq!(Some(&log_id(1, 1, 1)), eng.state.committed());
    assert_eq!(eng.output.take_commands(), vec![]);

    tracing::info!("--- the leader's flush up to (2,1,2) is reported: (2,1,2) is committed");
    eng.replication_handler().update_local_progress(Some(log_id(2, 1, 2)));

    assert_eq!(Some(log_id(2, 1, 2)), matching(&eng, 1));
    assert_eq!(Some(&log_id(2, 1, 2)), eng.state.committed());
    assert_eq!(
        vec![
            Command::ReplicateCommitted {
                committed: Some(log_id(2, 1, 2))
            },
            Command::Commit {
                seq: 1,
                already_committed: Some(log_id(1, 1, 1)),
                upto: log_id(2, 1, 2)
            },
        ],
        eng.output.take_commands()
    );

    tracing::info!("--- and up to (2,1,3): (2,1,3) is committed");
    eng.replication_handler().update_local_progress(Some(log_id(2, 1, 3)));

    assert_eq!(Some(&log_id(2, 1, 3)), eng.state.committed());
    assert_eq!(
        vec![
            Command::ReplicateCommitted {
                committed: Some(log_id(2, 1, 3))
            },
            Command::Commit {
                seq: 2,
                already_committed: Some(log_id(2, 1, 2)),
                upto: log_id(2, 1, 3)
            },
        ],
        eng.output.take_commands()
    );

    Ok(())
}

/// RAFTQ.md, "What the log store must give": flush reports may come in any order; one below what
/// is already counted changes nothing.
#[test]
fn test_leader_flush_reported_out_of_order_is_ignored() -> anyhow::Result<()> {
    let mut eng = eng(m123());

    eng.leader_handler()?.leader_append_entries(vec![blank_ent(0, 0, 0)]);
    eng.leader_handler()?.leader_append_entries(vec![blank_ent(0, 0, 0)]);
    eng.output.take_commands();

    eng.replication_handler().update_local_progress(Some(log_id(2, 1, 3)));
    assert_eq!(Some(log_id(2, 1, 3)), matching(&eng, 1));
    assert_eq!(eng.output.take_commands(), vec![], "one of three holds it: no commit");

    eng.replication_handler().update_local_progress(Some(log_id(2, 1, 2)));
    assert_eq!(Some(log_id(2, 1, 3)), matching(&eng, 1), "not moved back");
    assert_eq!(eng.output.take_commands(), vec![]);

    tracing::info!("--- node 2 holds (2,1,2), the first append sent to it: committed");
    eng.replication_handler().update_matching(2, 1, Some(log_id(2, 1, 2)));
    assert_eq!(Some(&log_id(2, 1, 2)), eng.state.committed());

    Ok(())
}

/// The only voter commits an entry when, and only when, its own flush is reported.
#[test]
fn test_single_voter_commits_on_its_flush() -> anyhow::Result<()> {
    let mut eng = eng(m1());

    eng.leader_handler()?.leader_append_entries(vec![blank_ent(0, 0, 0)]);

    assert_eq!(
        vec![Command::AppendInputEntries {
            vote: Vote::new_committed(2, 1),
            entries: vec![blank_ent(2, 1, 2)],
        }],
        eng.output.take_commands()
    );
    assert_eq!(Some(&log_id(1, 1, 1)), eng.state.committed());

    eng.replication_handler().update_local_progress(Some(log_id(2, 1, 2)));

    assert_eq!(Some(&log_id(2, 1, 2)), eng.state.committed());
    assert_eq!(
        vec![
            Command::ReplicateCommitted {
                committed: Some(log_id(2, 1, 2))
            },
            Command::Commit {
                seq: 1,
                already_committed: Some(log_id(1, 1, 1)),
                upto: log_id(2, 1, 2)
            },
        ],
        eng.output.take_commands()
    );

    Ok(())
}
