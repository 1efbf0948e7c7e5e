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
//! A node the placement drains stands in no election either (the node's groups hand over what
//! it leads).
//!
//! One task pings for every group on the node: each peer once a round, for all the groups the
//! two share (the answer tells of each), then each group's gate decides on its members'
//! answers. So the pings cost the same however many groups a node holds.
//!
//! A leader whose group took no entry for a while, and whose every member knows all of its log
//! committed, leads quietly: it turns openraft's heartbeats off, and says so in its answers. Its
//! followers take such an answer for a heartbeat, so their gates stay closed while it answers;
//! once it stops answering (it stopped, or is cut off), they hear nothing, as they would with
//! heartbeats missing, and stand. The first new entry brings the heartbeats back. An idle
//! group so costs no Raft traffic at all, only its share of the pings.
//!
//! While the gate is closed and no leader's appends arrive, the node counts the elections it
//! would have stood in (`elections_held_back` in its status): one once a leader's lease and an
//! election timeout have run out, then one per timeout, taking the longest timeout each time.
//!
//! The gate also reads the voters' clocks on each round ([`read_clocks`]): a node stands only
//! while a majority of the voters' clocks agree on the cluster's time and its own is within
//! `--max-clock-skew-ms` of it; a leader whose clock is outside it hands its leadership over to
//! a voter whose clock is within it. A node that cannot tell (too few clocks answer, or they
//! disagree) does not stand; a leader that cannot tell goes on leading on the cluster's time it
//! last measured (see `clock`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use openraft::LogId;
use raftq_store::{GroupId, NodeId};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::admission::PingAnswer;
use crate::clock::read_clocks;
use crate::member::{GroupCore, Groups, Members, NodeCore};
use crate::network::PeerClient;
use crate::pace::Pace;

/// How often every peer is pinged.
const EVERY: Duration = Duration::from_millis(100);
/// How long a ping may take.
const PING_TIMEOUT: Duration = Duration::from_millis(250);
/// A member's answer counts while it is at most this old: shorter than the time a follower waits
/// for its leader (12 heartbeats, 0.6 s by default) before it stands, with room for a ping that
/// is late under load.
const FRESH: Duration = Duration::from_millis(450);
/// How long a leader must have had no new entry before it leads quietly (see
/// [`Gate::lead_quietly_or_not`]): twenty heartbeats at the default interval, so that a group
/// taking entries now and then keeps its heartbeats.
const QUIET_AFTER: Duration = Duration::from_secs(1);
/// How long a leader whose clock is skewed waits after a failed handover before it tries again.
const HANDOVER_AGAIN: Duration = Duration::from_secs(1);

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

/// The answer of `ping`, and when the peer is taken to have read the clock it answered with:
/// when the answer came. It read it at some time of the round trip; taken as read at the latest
/// it can have been, its clock is never thought ahead of what it was. A peer whose answer was
/// slow on its way there (a loaded machine) then seems behind, not ahead, so the cluster's time,
/// a median that holds this node's own clock too, never runs ahead of the real time by a round
/// trip: a lease ends late by up to a round trip rather than early.
async fn timed<T, F: std::future::Future<Output = T>>(ping: F) -> (Instant, T) {
    let answer = ping.await;
    (Instant::now(), answer)
}

/// A member's last answer to a ping.
struct Answer {
    /// When it came.
    at: Instant,
    /// What it said.
    said: PingAnswer,
    /// When, by this node's monotonic clock, the member read the clock it answered with.
    clock_read: Instant,
}

/// This node's monotonic and wall time, read together: the monotonic first, so that a pause
/// between the two readings (a descheduled thread on a loaded machine) makes a member's clock
/// seem behind, never ahead.
#[derive(Debug, Clone, Copy)]
struct Now {
    at: Instant,
    wall: u64,
}

impl Now {
    fn read(clock: &crate::clock::LeaderClock) -> Now {
        let at = Instant::now();
        Now {
            at,
            wall: clock.wall(),
        }
    }
}

impl Answer {
    /// The member's clock minus this node's wall time at `now`: the member's clock as it
    /// answered, carried forward by the monotonic time from then to `now`, minus the wall time
    /// read with it (not the monotonic time at the call, which a pause after `now` was read
    /// would add to the member's clock). Read so, an answer from before this node's own clock
    /// jumped disagrees with it at once, as a fresh one would.
    fn offset(&self, now: Now) -> i64 {
        let since = now.at.saturating_duration_since(self.clock_read);
        let since = i64::try_from(since.as_millis()).unwrap_or(i64::MAX);
        (self.said.status.clock_ms as i64)
            .saturating_add(since)
            .saturating_sub(now.wall as i64)
    }

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

/// Logs what a round of pings changed in what this node knows of its clock: `(confirmed,
/// skewed)`.
fn log_clock(core: &GroupCore, (confirmed, skewed): (bool, bool)) {
    let offset_ms = core.node.clock.offset();
    let bound_ms = core.node.clock.bound_ms();
    if skewed {
        tracing::error!(
            offset_ms,
            bound_ms,
            "this node's clock differs from the cluster's by more than the bound: it does not \
             stand for election (fix the clock; see docs/operations.md)"
        );
    } else if confirmed {
        tracing::info!(
            offset_ms,
            "a majority of the voters' clocks agree with this node's"
        );
    } else {
        tracing::warn!(
            "too few of the voters' clocks answer or agree to tell the cluster's time: this node \
             does not stand for election"
        );
    }
}

/// Pings every node this node shares a group with, once every [`EVERY`] for all the groups
/// they share, and opens or closes each group's gate on what they answer, until `shutdown`
/// changes.
pub(crate) async fn run(node: Arc<NodeCore>, groups: Arc<Groups>, shutdown: watch::Receiver<bool>) {
    let mut gates: BTreeMap<GroupId, Gate> = BTreeMap::new();
    let mut pace = Pace::new(EVERY, shutdown);
    while pace.tick().await {
        let cores: Vec<(Arc<GroupCore>, Members)> = groups
            .all()
            .into_iter()
            .map(|core| {
                let members = core.members();
                (core, members)
            })
            .collect();
        gates.retain(|group, _| cores.iter().any(|(core, _)| core.group == *group));
        let answers = ping(&node, &cores).await;
        for (core, members) in cores {
            gates
                .entry(core.group)
                .or_insert_with(|| Gate::new(Arc::clone(&core)))
                .round(&members, &answers);
        }
    }
}

/// What one peer answered a round's ping with, for each group it was pinged for.
struct Answered {
    /// When the answer came.
    at: Instant,
    /// When, by this node's monotonic clock, the peer read the clock it answered with.
    clock_read: Instant,
    /// Its answer for each group, and whether it leads that group quietly.
    groups: BTreeMap<GroupId, (PingAnswer, bool)>,
}

/// Pings every other member of the `cores`' groups at once, each once for every group it
/// shares with this node, and notes each one's reach. A peer of an earlier version, which
/// answers for group 1 alone, is pinged once more for each other group it shares.
async fn ping(
    node: &Arc<NodeCore>,
    cores: &[(Arc<GroupCore>, Members)],
) -> BTreeMap<NodeId, Answered> {
    let mut shared: BTreeMap<NodeId, (&str, Vec<GroupId>)> = BTreeMap::new();
    for (core, members) in cores {
        for (id, addr) in &members.nodes {
            if *id != node.id {
                let peer = shared.entry(*id).or_insert_with(|| (addr, Vec::new()));
                peer.1.push(core.group);
            }
        }
    }
    let pings = shared.into_iter().map(|(id, (addr, groups))| {
        let client = node.raft_peers.get(id, addr);
        async move { (id, ping_peer(client, &groups).await) }
    });
    let mut answered = BTreeMap::new();
    for (id, answer) in join_all(pings).await {
        if let Ok(mut reach) = node.reach.write() {
            // What the peer says of itself; its log and progress as group 1's where it is in it.
            let first = answer.as_ref().and_then(|a| {
                let (said, _) = a
                    .groups
                    .get(&GroupId::FIRST)
                    .or_else(|| a.groups.values().next())?;
                Some(said)
            });
            let at = answer.as_ref().map_or_else(Instant::now, |a| a.at);
            reach.entry(id).or_default().record(first, at);
        }
        if let Some(answer) = answer {
            answered.insert(id, answer);
        }
    }
    answered
}

/// One peer's answer for `groups`.
async fn ping_peer(mut client: PeerClient, groups: &[GroupId]) -> Option<Answered> {
    let (clock_read, answer) = timed(client.ping_groups(groups, PING_TIMEOUT)).await;
    let (first, listed) = answer?;
    let mut answered = Answered {
        at: Instant::now(),
        clock_read,
        groups: BTreeMap::new(),
    };
    match listed {
        Some(listed) => {
            for said in listed {
                let answer = (said.answer(&first.status), said.quiet);
                answered.groups.insert(GroupId(said.group), answer);
            }
        }
        None => {
            answered.groups.insert(GroupId::FIRST, (first, false));
            let others = groups.iter().filter(|g| **g != GroupId::FIRST).map(|g| {
                let mut client = client.clone().in_group(*g);
                async move { (*g, client.ping(PING_TIMEOUT).await) }
            });
            for (group, answer) in join_all(others).await {
                if let Some(answer) = answer {
                    answered.groups.insert(group, (answer, false));
                }
            }
        }
    }
    Some(answered)
}

/// What the gate keeps from one round of pings to the next.
struct Gate {
    core: Arc<GroupCore>,
    /// Each member's last answer.
    answers: BTreeMap<NodeId, Answer>,
    /// Whether openraft's elections are on.
    open: bool,
    /// Whether the voters' clocks agreed on the cluster's time, and whether this node's was
    /// outside the bound of it, at the last round.
    last_clock: (bool, bool),
    /// The handover of a leader whose clock is skewed, while one runs.
    handover: Option<JoinHandle<()>>,
    /// The longest election timeout, so that the elections counted are the fewest openraft
    /// would have started. It is also openraft's leader lease: a voter that heard a leader
    /// within it refuses its vote.
    timeout: Duration,
    /// Since when the gate has held this node back with no append from a leader, and the
    /// elections counted since then.
    held: Option<(Instant, u64)>,
    /// The index of the group's last log entry at the last round, and since when it has been
    /// that (for a leader: how long no entry came).
    last_index: Option<(u64, Instant)>,
    /// Whether openraft's ticks are on.
    ticking: bool,
}

impl Gate {
    fn new(core: Arc<GroupCore>) -> Gate {
        Gate {
            open: core.node.admission.may_stand(),
            timeout: Duration::from_millis(core.raft.config().election_timeout_max),
            core,
            answers: BTreeMap::new(),
            last_clock: (false, false),
            handover: None,
            held: None,
            last_index: None,
            ticking: true,
        }
    }

    /// One round: takes the members' answers, reads the voters' clocks, hands a skewed leader's
    /// leadership over, opens or closes the gate and counts the elections held back, and
    /// leads quietly or not.
    fn round(&mut self, members: &Members, answered: &BTreeMap<NodeId, Answered>) {
        self.take(members, answered);
        let answering = self.recent().count() + 1;
        let voters = members.voters();
        let clock = self.read_clocks(&voters);
        self.hand_over_if_skewed(clock, &voters, members);
        let own_log = match self.core.last_log() {
            Ok(last) => last,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the log's last entry");
                return;
            }
        };
        let mut voters_for_us: BTreeSet<NodeId> = self
            .recent()
            .filter(|(_, answer)| answer.would_vote_for(own_log.as_ref(), self.timeout))
            .map(|(id, _)| *id)
            .collect();
        voters_for_us.insert(self.core.node.id);
        let allow = majority(&voters_for_us, &members.configs)
            && self.core.node.admission.may_stand()
            && self.core.node.clock.may_lead()
            && !self.core.node.draining.load(Ordering::Relaxed);
        if allow != self.open {
            self.open = allow;
            self.core.raft.runtime_config().elect(allow);
            tracing::info!(
                group = %self.core.group,
                answering,
                would_vote = voters_for_us.len(),
                standing = ?self.core.node.admission.standing(),
                clock_confirmed = clock.0,
                clock_skewed = clock.1,
                elections = allow,
                "election gate"
            );
        }
        self.count_held_back(allow, &voters);
        self.lead_quietly_or_not(own_log.map_or(0, |l| l.index), members);
        self.tick_or_not(allow);
    }

    /// Keeps the round's answers of the members for this group, and notes the leader's answer
    /// as heard when it leads quietly.
    fn take(&mut self, members: &Members, answered: &BTreeMap<NodeId, Answered>) {
        let leader = self.core.current_leader();
        for id in members.nodes.keys() {
            let Some(peer) = answered.get(id) else {
                continue;
            };
            let Some((said, quiet)) = peer.groups.get(&self.core.group) else {
                continue;
            };
            if *quiet && leader == Some(*id) {
                self.core.note_quiet_leader(peer.at);
            }
            let answer = Answer {
                at: peer.at,
                said: *said,
                clock_read: peer.clock_read,
            };
            self.answers.insert(*id, answer);
        }
    }

    /// The members' answers that are still fresh.
    fn recent(&self) -> impl Iterator<Item = (&NodeId, &Answer)> {
        self.answers
            .iter()
            .filter(|(_, answer)| answer.at.elapsed() <= FRESH)
    }

    /// Records what the fresh answers of `voters` say of this node's clock, logs a change, and
    /// returns `(confirmed, skewed)`.
    fn read_clocks(&mut self, voters: &BTreeSet<NodeId>) -> (bool, bool) {
        let core = &self.core;
        // The node has one clock, measured by group 1's gate; the others read what it found.
        if core.group != GroupId::FIRST {
            return (core.node.clock.confirmed(), core.node.clock.skewed());
        }
        let now = Now::read(&core.node.clock);
        let mut clocks: BTreeMap<NodeId, i64> = self
            .recent()
            .filter(|(id, _)| voters.contains(id))
            .map(|(id, answer)| (*id, answer.offset(now)))
            .collect();
        if voters.contains(&core.node.id) {
            clocks.insert(core.node.id, 0);
        }
        core.node.clock.record(read_clocks(
            &clocks,
            voters.len(),
            core.node.clock.bound_ms(),
        ));
        let clock = (core.node.clock.confirmed(), core.node.clock.skewed());
        if clock != self.last_clock {
            self.last_clock = clock;
            log_clock(core, clock);
        }
        clock
    }

    /// Starts a handover of this node's leadership to another voter when its clock is skewed
    /// and no handover runs.
    fn hand_over_if_skewed(
        &mut self,
        (_, skewed): (bool, bool),
        voters: &BTreeSet<NodeId>,
        members: &Members,
    ) {
        let idle = self.handover.as_ref().is_none_or(JoinHandle::is_finished);
        if !(skewed && idle && self.core.is_leader()) {
            return;
        }
        // Apart from the gate's loop, which must go on measuring while the handover runs.
        let mut successors = voters.clone();
        successors.remove(&self.core.node.id);
        let leaving = Arc::clone(&self.core);
        let nodes = members.nodes.clone();
        self.handover = Some(tokio::spawn(async move {
            if let Err(e) = leaving.hand_over(&successors, &nodes).await {
                tracing::warn!(error = %e, "a leader with a skewed clock could not hand over");
                // Tried again after a pause, not on every round.
                tokio::time::sleep(HANDOVER_AGAIN).await;
            }
        }));
    }

    /// Counts the elections openraft would have started while the gate holds back this voter
    /// and no leader's append arrives (`allow`: the gate is open now).
    fn count_held_back(&mut self, allow: bool, voters: &BTreeSet<NodeId>) {
        let core = &self.core;
        if allow || core.current_leader() == Some(core.node.id) || !voters.contains(&core.node.id) {
            self.held = None;
            return;
        }
        let now = Instant::now();
        let (mut since, mut counted) = self.held.unwrap_or((now, 0));
        // A leader's append restarts openraft's election timer; a quiet leader's answer stands
        // in for its appends.
        if let Some(last) = core.last_heard().filter(|last| *last > since) {
            (since, counted) = (last, 0);
        }
        let elections = elections_in(now - since, self.timeout);
        core.elections_held_back
            .fetch_add(elections.saturating_sub(counted), Ordering::Relaxed);
        self.held = Some((since, elections));
    }

    /// Turns openraft's ticks off while they would do nothing: on a quiet leader (no
    /// heartbeats to send) and on a member whose gate is closed while a quiet leader answers
    /// (no election to start), and on again otherwise. An idle group's Raft core then sleeps.
    fn tick_or_not(&mut self, allow: bool) {
        let core = &self.core;
        let hears_quiet_leader = core
            .quiet_leader_last_heard()
            .is_some_and(|at| at.elapsed() <= FRESH);
        let idle = if core.is_leader() {
            core.quiet.load(Ordering::Relaxed)
        } else {
            !allow && hears_quiet_leader
        };
        if idle == self.ticking {
            self.ticking = !idle;
            core.raft.runtime_config().tick(!idle);
        }
    }

    /// Leads the group quietly (no heartbeats) once this node has led it for [`QUIET_AFTER`]
    /// with no new entry and every other member's fresh answer shows it knows all of the log
    /// committed (`last_index`, this node's last entry); leads it with heartbeats again as soon
    /// as one of those stops being so. The followers take the quiet leader's answers to their
    /// pings for its heartbeats (`GroupCore::note_quiet_leader`), so their gates stay closed
    /// while it answers, and open as they would without heartbeats once it stops answering.
    fn lead_quietly_or_not(&mut self, last_index: u64, members: &Members) {
        let now = Instant::now();
        let since = match self.last_index {
            Some((index, since)) if index == last_index => since,
            _ => now,
        };
        self.last_index = Some((last_index, since));
        let core = &self.core;
        if core.handing_over.load(Ordering::Relaxed) {
            // The handover holds the heartbeats off until it is over, and turns them on again.
            core.quiet.store(false, Ordering::Relaxed);
            return;
        }
        let caught_up = members
            .nodes
            .keys()
            .filter(|id| **id != core.node.id)
            .all(|id| {
                self.answers.get(id).is_some_and(|answer| {
                    answer.at.elapsed() <= FRESH
                        && answer
                            .said
                            .progress
                            .is_some_and(|p| p.commit_index >= last_index)
                })
            });
        let quiet = core.is_leader() && now.duration_since(since) >= QUIET_AFTER && caught_up;
        if quiet != core.quiet.load(Ordering::Relaxed) {
            core.quiet.store(quiet, Ordering::Relaxed);
            core.raft.runtime_config().heartbeat(!quiet);
            tracing::debug!(group = %core.group, quiet, "leading quietly");
        }
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

    /// The answer of a peer whose clock is this node's (`wall`), which took 99 ms to get there
    /// and 1 ms back.
    async fn answer_of_a_true_clock(wall: impl Fn() -> u64) -> super::Answer {
        use crate::admission::{PeerStatus, PingAnswer, Standing};
        use std::time::Duration;
        use tokio::time::{sleep, Instant};
        let (clock_read, said) = super::timed(async {
            sleep(Duration::from_millis(99)).await;
            let clock_ms = wall();
            sleep(Duration::from_millis(1)).await;
            Some(PingAnswer {
                status: PeerStatus {
                    cluster_id: None,
                    standing: Standing::Member,
                    last_log: None,
                    clock_ms,
                },
                progress: None,
                leader: None,
            })
        })
        .await;
        super::Answer {
            at: Instant::now(),
            said: said.expect("an answer"),
            clock_read,
        }
    }

    /// A peer clock read late in the round trip: taken as read halfway, it would seem 49 ms
    /// ahead.
    #[tokio::test(start_paused = true)]
    async fn a_peer_clock_read_late_in_the_round_trip_is_not_thought_ahead() {
        let epoch = tokio::time::Instant::now();
        let wall = move || 1_800_000_000_000 + epoch.elapsed().as_millis() as u64;
        let answer = answer_of_a_true_clock(wall).await;
        let now = super::Now {
            at: tokio::time::Instant::now(),
            wall: wall(),
        };
        let offset = answer.offset(now);
        assert!(offset <= 0, "the peer's clock seems {offset} ms ahead");
    }

    /// A pass of the gate that reads the time, then is held up (its thread descheduled) before
    /// it works out the members' offsets, still finds a true clock not ahead: its offsets are
    /// taken at the time it read, not carried forward by the pause.
    #[tokio::test(start_paused = true)]
    async fn a_pass_held_up_after_it_read_the_time_thinks_no_true_clock_ahead() {
        let epoch = tokio::time::Instant::now();
        let wall = move || 1_800_000_000_000 + epoch.elapsed().as_millis() as u64;
        let answer = answer_of_a_true_clock(wall).await;
        let now = super::Now::read(&crate::clock::LeaderClock::new(
            crate::clock::WallClock::new(wall),
            500,
        ));
        tokio::time::sleep(std::time::Duration::from_millis(40)).await;
        let offset = answer.offset(now);
        assert!(offset <= 0, "the peer's clock seems {offset} ms ahead");
    }

    #[test]
    fn reaching_learners_counts_for_nothing() {
        assert!(!majority(&set(&[1, 4, 5]), &[set(&[1, 2, 3])]));
    }
}
