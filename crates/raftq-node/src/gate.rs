//! The election gate, a pre-vote: a node stands for election only while a majority of the
//! cluster's current voters, itself included, answered its pings lately and would vote for it,
//! and only while its [`admission`](crate::admission) lets it. openraft 0.9 has no pre-vote of
//! its own:
//! - a follower cut off from the others stood for election every half second, raising its term
//!   each time; when it came back, its higher term deposed a working leader and cost the cluster
//!   an election (seconds under load);
//! - a node whose log is behind can never win, but each time it stands, the voters that refuse
//!   it take its higher term and wait out a new election timeout: standing again and again, it
//!   kept the node that could win from ever standing;
//! - a follower that missed its leader's heartbeats for a moment (a stalled disk or CPU, a link
//!   to the leader alone cut) stood while the others still heard the leader: they refused it,
//!   but its higher term reached the leader with the next append's answer and deposed it.
//!
//! Here every node pings the members all the time (the answer carries the peer's standing, the
//! id of its last log entry, how lately it heard a leader and its wall clock) and turns
//! openraft's elections off while too few of them would vote for it: a peer votes only for a log
//! at least as up to date as its own, and not while it heard a leader within the leader's lease.
//! A node that could not get those votes could never win an election anyway, so the gate takes
//! nothing away: once it could, it stands as before. While a leader leads, its followers' gates
//! are closed.
//!
//! While the gate is closed and no leader's appends arrive, the node counts the elections it
//! would have stood in (`elections_held_back` in its status): one once a leader's lease and an
//! election timeout have run out, then one per timeout, taking the longest timeout each time.
//!
//! The gate also keeps this node's clock honest: when its clock differs from the median of a
//! majority of the voters' clocks (itself included) by more than `--max-clock-skew-ms`, it does
//! not stand for election, and a leader hands its leadership over.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use openraft::LogId;
use raftq_store::NodeId;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::admission::PingAnswer;
use crate::shared::Core;

/// How often every member is pinged.
const EVERY: Duration = Duration::from_millis(100);
/// How long a ping may take.
const PING_TIMEOUT: Duration = Duration::from_millis(250);
/// A member's answer counts while it is at most this old: shorter than the time a follower waits
/// for its leader (12 heartbeats, 0.6 s by default) before it stands, with room for a ping that
/// is late under load.
const FRESH: Duration = Duration::from_millis(450);

/// This node's clock minus the median clock of itself and the members that answered
/// (`offsets`: each member's clock minus this node's), once they make a majority of `voters`.
fn clock_offset(offsets: &[i64], voters: usize) -> Option<i64> {
    if (offsets.len() + 1) * 2 <= voters {
        return None;
    }
    let mut all: Vec<i64> = offsets.to_vec();
    all.push(0);
    all.sort_unstable();
    Some(-all[all.len() / 2])
}

/// Whether the `reached` nodes make a majority of every voter set of a (possibly joint)
/// membership.
fn majority(reached: &BTreeSet<NodeId>, configs: &[BTreeSet<NodeId>]) -> bool {
    configs
        .iter()
        .all(|voters| voters.intersection(reached).count() * 2 > voters.len())
}

/// The elections openraft would have started in a spell of `quiet` with elections off and no
/// append from a leader: the first once the leader's lease and an election timeout ran out (two
/// `timeout`s: openraft's lease is its longest timeout), then one per `timeout`.
fn elections_in(quiet: Duration, timeout: Duration) -> u64 {
    let timeouts = quiet.as_millis() / timeout.as_millis().max(1);
    u64::try_from(timeouts)
        .unwrap_or(u64::MAX)
        .saturating_sub(1)
}

/// A member's last answer to a ping.
struct Answer {
    /// When it came.
    at: Instant,
    /// What it said.
    said: PingAnswer,
    /// The member's clock minus this node's.
    offset: i64,
}

impl Answer {
    /// Whether the member would vote for a candidate whose log ends at `last_log`: it may vote,
    /// its log is not ahead, and it does not still hear a leader (one heard within `lease`).
    fn would_vote_for(&self, last_log: Option<&LogId<NodeId>>, lease: Duration) -> bool {
        self.said.status.would_vote_for(last_log)
            && !self
                .said
                .leader
                .is_some_and(|leader| leader.hears_a_leader(self.at.elapsed(), lease))
    }
}

pub(crate) async fn run(core: Arc<Core>, mut shutdown: watch::Receiver<bool>) {
    let mut answers: BTreeMap<NodeId, Answer> = BTreeMap::new();
    let mut open = core.admission.may_stand();
    let mut skewed = false;
    // The longest election timeout, so that the elections counted are the fewest openraft
    // would have started. It is also openraft's leader lease: a voter that heard a leader
    // within it refuses its vote.
    let timeout = Duration::from_millis(core.raft.config().election_timeout_max);
    // Since when the gate has held this node back with no append from a leader, and the
    // elections counted since then.
    let mut held: Option<(Instant, u64)> = None;
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let members = core.members();
        let pings = members
            .nodes
            .iter()
            .filter(|(id, _)| **id != core.id)
            .map(|(id, addr)| {
                let mut client = core.network.peers.get(*id, addr);
                let clock = Arc::clone(&core.clock);
                async move {
                    let sent = clock.wall();
                    let answer = client.ping(PING_TIMEOUT).await;
                    // The peer read its clock about halfway through the round trip.
                    let midway = sent / 2 + clock.wall() / 2;
                    (*id, midway, answer)
                }
            });
        for (id, midway, answer) in join_all(pings).await {
            let now = Instant::now();
            if let Ok(mut reach) = core.reach.write() {
                reach.entry(id).or_default().record(answer.as_ref(), now);
            }
            if let Some(said) = answer {
                let offset = said.status.clock_ms as i64 - midway as i64;
                answers.insert(
                    id,
                    Answer {
                        at: now,
                        said,
                        offset,
                    },
                );
            }
        }
        let recent = || {
            answers
                .iter()
                .filter(|(_, answer)| answer.at.elapsed() <= FRESH)
        };
        let answering = recent().count() + 1;
        let voters = members.voters();
        let offsets: Vec<i64> = recent()
            .filter(|(id, _)| voters.contains(id))
            .map(|(_, answer)| answer.offset)
            .collect();
        let offset = clock_offset(&offsets, voters.len());
        core.clock.set_offset(offset);
        let now_skewed = core.clock.skewed();
        if now_skewed != skewed {
            skewed = now_skewed;
            if skewed {
                tracing::error!(
                    offset_ms = offset,
                    max_ms = core.clock.max_ahead_ms(),
                    "this node's clock differs from the cluster's by more than the bound: it \
                     does not stand for election (fix the clock; see docs/operations.md)"
                );
            } else {
                tracing::info!(
                    offset_ms = offset,
                    "this node's clock agrees with the cluster's again"
                );
            }
        }
        if skewed && core.is_leader() {
            // Apart from this loop, which must go on measuring while the handover runs.
            let mut successors = voters.clone();
            successors.remove(&core.id);
            let leaving = Arc::clone(&core);
            let nodes = members.nodes.clone();
            tokio::spawn(async move {
                if let Err(e) = leaving.hand_over(&successors, &nodes).await {
                    tracing::warn!(error = %e, "a leader with a skewed clock could not hand over");
                }
            });
        }
        let own_log = match core.admission.last_log() {
            Ok(last) => last,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the log's last entry");
                continue;
            }
        };
        let mut voters_for_us: BTreeSet<NodeId> = recent()
            .filter(|(_, answer)| answer.would_vote_for(own_log.as_ref(), timeout))
            .map(|(id, _)| *id)
            .collect();
        voters_for_us.insert(core.id);
        let allow =
            majority(&voters_for_us, &members.configs) && core.admission.may_stand() && !skewed;
        if allow != open {
            open = allow;
            core.raft.runtime_config().elect(allow);
            tracing::info!(
                answering,
                would_vote = voters_for_us.len(),
                standing = ?core.admission.standing(),
                skewed,
                elections = allow,
                "election gate"
            );
        }
        held = if allow || core.current_leader() == Some(core.id) || !voters.contains(&core.id) {
            None
        } else {
            let now = Instant::now();
            let (mut since, mut counted) = held.unwrap_or((now, 0));
            // A leader's append restarts openraft's election timer.
            if let Some(last) = core.last_append().filter(|last| *last > since) {
                (since, counted) = (last, 0);
            }
            let elections = elections_in(now - since, timeout);
            core.elections_held_back
                .fetch_add(elections.saturating_sub(counted), Ordering::Relaxed);
            Some((since, elections))
        };
    }
}

#[cfg(test)]
mod tests {
    use super::majority;
    use std::collections::BTreeSet;

    fn set(ids: &[u64]) -> BTreeSet<u64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_node_stands_only_with_a_majority_in_reach() {
        assert!(majority(&set(&[1]), &[set(&[1])]));
        assert!(!majority(&set(&[1]), &[set(&[1, 2, 3])]));
        assert!(majority(&set(&[1, 2]), &[set(&[1, 2, 3])]));
        assert!(!majority(&set(&[1, 2]), &[set(&[1, 2, 3, 4, 5])]));
        assert!(majority(&set(&[1, 2, 3]), &[set(&[1, 2, 3, 4, 5])]));
    }

    #[test]
    fn a_joint_membership_needs_a_majority_of_both_voter_sets() {
        let joint = [set(&[1, 2, 3]), set(&[3, 4, 5])];
        assert!(!majority(&set(&[1, 2]), &joint));
        assert!(majority(&set(&[1, 3, 4]), &joint));
    }

    #[test]
    fn a_clock_is_judged_against_the_median_of_a_majority() {
        use super::clock_offset;
        // Peers 1 h behind this node: this node is 1 h ahead of the median.
        assert_eq!(clock_offset(&[-3_600_000, -3_600_010], 3), Some(3_600_000));
        // One peer far off does not move the median of three.
        assert_eq!(clock_offset(&[3_600_000, 20], 3), Some(-20));
        assert_eq!(clock_offset(&[10, -10], 3), Some(0));
        // Too few answers to judge.
        assert_eq!(clock_offset(&[], 3), None);
        assert_eq!(clock_offset(&[5], 5), None);
        assert_eq!(clock_offset(&[], 1), Some(0));
    }

    #[test]
    fn elections_are_counted_after_the_lease_then_once_per_timeout() {
        use super::elections_in;
        use std::time::Duration;
        let ms = Duration::from_millis;
        assert_eq!(elections_in(ms(0), ms(350)), 0);
        assert_eq!(elections_in(ms(699), ms(350)), 0);
        assert_eq!(elections_in(ms(700), ms(350)), 1);
        assert_eq!(elections_in(ms(1_049), ms(350)), 1);
        assert_eq!(elections_in(ms(1_050), ms(350)), 2);
        assert_eq!(elections_in(ms(3_500), ms(350)), 9);
    }

    #[test]
    fn reaching_learners_counts_for_nothing() {
        assert!(!majority(&set(&[1, 4, 5]), &[set(&[1, 2, 3])]));
    }
}
