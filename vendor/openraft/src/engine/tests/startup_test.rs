use std::sync::Arc;

use maplit::btreeset;
use pretty_assertions::assert_eq;

use crate::engine::testing::UTConfig;
use crate::engine::Command;
use crate::engine::Engine;
use crate::engine::LogIdList;
use crate::entry::RaftEntry;
use crate::progress::entry::ProgressEntry;
use crate::progress::Inflight;
use crate::raft::VoteRequest;
use crate::raft::VoteResponse;
use crate::raft_state::LogStateReader;
use crate::testing::log_id;
use crate::utime::UTime;
use crate::EffectiveMembership;
use crate::Entry;
use crate::Membership;
use crate::ServerState;
use crate::TokioInstant;
use crate::Vote;

fn m_empty() -> Membership<u64, ()> {
    Membership::<u64, ()>::new(vec![btreeset! {}], None)
}

fn m23() -> Membership<u64, ()> {
    Membership::<u64, ()>::new(vec![btreeset! {2,3}], None)
}

fn m34() -> Membership<u64, ()> {
    Membership::<u64, ()>::new(vec![btreeset! {3,4}], None)
}

fn eng() -> Engine<UTConfig> {
    let mut eng = Engine::testing_default(0);
    eng.state.enable_validation(false);
    eng.config.id = 2;
    // This will be overridden
    eng.state.server_state = ServerState::default();
    eng
}

/// It is a Leader but not yet append any logs.
///
/// raftq: upstream asserts that the node resumes its leadership under the same vote at startup
/// (BecomeLeader, then it appends a blank entry `(1,2,0)` and replicates it). raftq changed the
/// rule (`Engine::startup`, RAFTQ.md): a leader's log may lack, after a crash, entries it had
/// already sent, so it does not resume under the vote it held. The vote is demoted in memory only
/// (not committed, no `SaveVote`: the saved vote stays `Vote::new_committed(1, 2)`), the node is a
/// plain follower, and it stands for election at a new term when its election timer fires.
#[test]
fn test_startup_as_leader_without_logs() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m23())));
    // Committed vote made it a leader at startup upstream.
    eng.state.vote = UTime::new(TokioInstant::now(), Vote::new_committed(1, 2));
    let before = TokioInstant::now();

    eng.startup();

    assert_eq!(ServerState::Follower, eng.state.server_state);
    assert!(eng.leader.is_none(), "no leadership is resumed");
    assert!(eng.candidate_ref().is_none(), "no election starts at once");
    // In memory, the same vote, no longer committed; refreshed, so the election timer counts
    // one election timeout from startup.
    assert_eq!(Vote::new(1, 2), *eng.state.vote_ref());
    assert!(eng.state.vote_last_modified() >= Some(before));
    // No command at all: in particular no `SaveVote`, so the vote saved on disk is unchanged.
    assert_eq!(eng.output.take_commands(), vec![]);

    Ok(())
}

/// raftq: upstream asserts that a restarted leader resumes under the same vote and reuses its
/// noop log id `(1,2,4)`, replicating `(1,2,6)` at once. Under raftq's rule (see above) it stays a
/// follower with the vote demoted in memory, and its next election is at term 2: the entries it
/// proposes as leader then have log ids of term 2, never the term-1 ids it may have sent before it
/// stopped.
#[test]
fn test_startup_as_leader_with_proposed_logs() -> anyhow::Result<()> {
    tracing::info!("--- a leader proposed logs and restarted, stands for election at a new term");
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m23())));
    // Fake existing log ids
    eng.state.log_ids = LogIdList::new([log_id(1, 1, 2), log_id(1, 2, 4), log_id(1, 2, 6)]);
    // Committed vote made it a leader at startup upstream.
    eng.state.vote = UTime::new(TokioInstant::now(), Vote::new_committed(1, 2));

    eng.startup();

    assert_eq!(ServerState::Follower, eng.state.server_state);
    assert!(eng.leader.is_none(), "no leadership is resumed");
    assert_eq!(Vote::new(1, 2), *eng.state.vote_ref());
    assert_eq!(Some(&log_id(1, 2, 6)), eng.state.last_log_id(), "the log is untouched");
    // No `SaveVote`: the saved vote is unchanged.
    assert_eq!(eng.output.take_commands(), vec![]);

    tracing::info!("--- its election timer fires: it stands at term 2");
    eng.elect();

    assert_eq!(ServerState::Candidate, eng.state.server_state);
    assert_eq!(Vote::new(2, 2), *eng.state.vote_ref());
    assert_eq!(
        vec![
            //
            Command::SaveVote { vote: Vote::new(2, 2) },
            Command::SendVote {
                vote_req: VoteRequest::new(Vote::new(2, 2), Some(log_id(1, 2, 6)))
            },
        ],
        eng.output.take_commands()
    );

    tracing::info!("--- it and node 3 grant it: it leads at term 2; its first entry is (2,2,7)");
    // RaftCore sends the vote request to this node too; its own grant comes back like any other.
    eng.handle_vote_resp(2, VoteResponse::new(Vote::new(2, 2), Some(log_id(1, 2, 6)), true));
    assert_eq!(ServerState::Candidate, eng.state.server_state);
    eng.handle_vote_resp(3, VoteResponse::new(Vote::new(2, 2), None, true));

    assert_eq!(ServerState::Leader, eng.state.server_state);
    assert_eq!(Vote::new_committed(2, 2), *eng.state.vote_ref());
    assert_eq!(eng.leader.as_ref().unwrap().noop_log_id(), Some(&log_id(2, 2, 7)));
    assert_eq!(
        vec![
            //
            Command::RebuildReplicationStreams {
                targets: vec![(3, ProgressEntry {
                    matching: None,
                    curr_inflight_id: 0,
                    inflight: Inflight::None,
                    searching_end: 7
                })]
            },
            Command::SaveVote {
                vote: Vote::new_committed(2, 2)
            },
            Command::BecomeLeader,
            Command::AppendInputEntries {
                vote: Vote::new_committed(2, 2),
                entries: vec![Entry::<UTConfig>::new_blank(log_id(2, 2, 7))],
            },
            Command::Replicate {
                target: 3,
                req: Inflight::logs(None, Some(log_id(2, 2, 7))).with_id(1)
            }
        ],
        eng.output.take_commands()
    );

    Ok(())
}

/// When starting up, a leader that is not a voter should not panic.
#[test]
fn test_startup_as_leader_not_voter_issue_920() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m_empty())));
    // Committed vote makes it a leader at startup.
    eng.state.vote = UTime::new(TokioInstant::now(), Vote::new_committed(1, 2));

    eng.startup();

    assert_eq!(ServerState::Learner, eng.state.server_state);
    assert_eq!(eng.output.take_commands(), vec![]);

    Ok(())
}

#[test]
fn test_startup_candidate_becomes_follower() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m23())));
    // Non-committed vote makes it a candidate at startup.
    eng.state.vote = UTime::new(TokioInstant::now(), Vote::new(1, 2));

    eng.startup();

    assert_eq!(ServerState::Follower, eng.state.server_state);
    assert_eq!(0, eng.output.take_commands().len());

    Ok(())
}
#[test]
fn test_startup_as_follower() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m23())));

    eng.startup();

    assert_eq!(ServerState::Follower, eng.state.server_state);
    assert_eq!(0, eng.output.take_commands().len());

    Ok(())
}

#[test]
fn test_startup_as_learner() -> anyhow::Result<()> {
    let mut eng = eng();
    // self.id==2 is not a voter:
    eng.state
        .membership_state
        .set_effective(Arc::new(EffectiveMembership::new(Some(log_id(2, 1, 3)), m34())));

    eng.startup();

    assert_eq!(ServerState::Learner, eng.state.server_state);
    assert_eq!(0, eng.output.take_commands().len());

    Ok(())
}
