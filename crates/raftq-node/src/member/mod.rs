//! This node as a member of its cluster: [`NodeCore`], the parts of a running node that every
//! Raft group on it shares, and [`GroupCore`], one group as this node takes part in it, which
//! its tasks share (the peer service, the election gate, the timer, formation, membership
//! changes and routing), with what they ask of them.
//!
//! `NodeCore`'s methods, here: what the pings tell of the other nodes (`answering`,
//! `last_answers`, `silent_for`).
//!
//! `GroupCore`'s methods live by concern, one file each:
//! - here: proposing (`propose`), waiting for the replica to apply (`applied_up_to`), the
//!   group's last log id (`last_log`), what this node knows of
//!   the group's leader and members (`current_leader`, `is_leader`, `is_member`, `members`) and
//!   of the leader's appends (`note_append`, `last_append`, `appending_for`) and of a leader
//!   leading quietly (`last_heard`, `note_quiet_leader`, `is_quiet`);
//! - [`routing`]: a client request served here or at the leader (`route`, `serve_local`,
//!   `forward`, `forwarder`, `serve_forwarded`, `member_addr`, `cut_off_from`), and the request
//!   kinds ([`routing::Routed`]);
//! - [`membership`]: membership changes and leadership handovers (`change_membership`, `add`,
//!   `remove`, `commit`, `hand_over`, `await_successor`);
//! - [`longpoll`]: a long poll served whole in this replica (`long_poll`);
//! - [`replicas`]: the group's voters brought to the placement's target (`converge`);
//! - [`status`]: what this node reports of itself and of the members (`status`,
//!   `status_from_metrics`, `progress`, `leader_contact`, `note_leader_commit`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use openraft::{Raft, ServerState};
use raftq_engine::Command;
use raftq_store::{GroupId, LogStore, NodeId, Response, StateReader, TypeConfig};
use tokio::time::Instant;

use crate::admission::{Admission, PingAnswer, Progress};
use crate::clock::LeaderClock;
use crate::error::NodeError;
use crate::group_commit::GroupCommit;
use crate::network::{Network, PeerClients};
use crate::protocol::Heard;
use crate::receiving::SnapshotReceiver;
use crate::sections::Sections;
use crate::space::Space;

pub(crate) mod longpoll;
pub(crate) mod membership;
pub(crate) mod replicas;
pub(crate) mod routing;
pub(crate) mod status;

/// Appends count as still arriving while the last one is at most this old (ten heartbeats at
/// the default interval).
pub(crate) const APPENDING: Duration = Duration::from_millis(500);

/// The parts of a node that every Raft group on it shares: who it is, its standing in the
/// cluster, its clock, its disk's room, what its pings tell of the other nodes, and its
/// connections to its peers, for forwarding and for Raft.
pub(crate) struct NodeCore {
    pub id: NodeId,
    /// The cluster this node belongs to and whether it may vote.
    pub admission: Admission,
    /// The time this node stamps and reads at while it leads.
    pub clock: Arc<LeaderClock>,
    /// The room left on the data directory's disk, which a leader's writes must find.
    pub space: Arc<Space>,
    /// What the election gate's pings tell of each member.
    pub reach: RwLock<BTreeMap<NodeId, Reach>>,
    /// Set while the placement says this node drains: it stands in no election, and hands
    /// over every group it leads (`groups::run`).
    pub draining: AtomicBool,
    /// The peer protocol each node's appends, votes and snapshots announced.
    pub protocols: Heard,
    /// Connections to the leaders this node forwarded to, by node id and address (reused: a
    /// forwarded request must not pay for a new connection), apart from Raft's own.
    pub forwarders: PeerClients,
    /// Connections to the peers for the Raft calls of every group (each call names its group),
    /// shared by the groups so that a node pair has one however many groups they share.
    pub raft_peers: PeerClients,
    /// The backup sections this node writes for the node taking a backup.
    pub sections: Arc<Sections>,
}

/// One Raft group as this node takes part in it, with the node's shared parts ([`NodeCore`]):
/// what the peer service, the election gate and the timer share for that group.
///
/// Leadership and membership are read from openraft's server metrics, which change only with
/// the vote, the role, the leader or the membership; its full metrics are sent again on every
/// pass of the Raft core, so a task waiting on them wakes for every entry.
pub(crate) struct GroupCore {
    pub group: GroupId,
    pub node: Arc<NodeCore>,
    pub raft: Raft<TypeConfig>,
    pub group_commit: GroupCommit,
    pub reader: StateReader,
    /// The group's log, for the id of its last entry (what a candidate's log is compared with).
    pub log: LogStore<TypeConfig>,
    pub network: Network,
    /// The snapshot a leader of the group streams to this node, while one comes.
    pub receiver: SnapshotReceiver,
    /// Set while this leader hands its leadership over: it proposes nothing, answers no read and
    /// sends no heartbeat, so that its followers' leader lease runs out and the successor wins.
    pub handing_over: AtomicBool,
    /// Held while a membership change runs (on the leader).
    pub changing: tokio::sync::Mutex<()>,
    /// Elections the election gate kept this node from standing in (see `gate`).
    pub elections_held_back: AtomicU64,
    /// The highest commit index a leader's append told this node.
    pub leader_commit: AtomicU64,
    /// Since when a leader's appends and heartbeats have been reaching this node without a gap
    /// longer than [`APPENDING`], and when the last one came.
    pub appends: RwLock<Option<(Instant, Instant)>>,
    /// Set while this node leads the group quietly: no heartbeats while no entry comes and
    /// every member has all it committed (see `gate`).
    pub quiet: AtomicBool,
    /// When the group's leader, as this node knows it, last answered its ping as leading
    /// quietly: that answer stands in for the heartbeats it does not send.
    pub quiet_leader_heard: RwLock<Option<Instant>>,
    /// Stops the group's tasks (set on the node's shutdown, or when this node leaves the
    /// group).
    pub stop: tokio::sync::watch::Sender<bool>,
}

/// The Raft groups this node takes part in, by id (in order, so that whatever goes over them
/// goes in the same order every time), and whether the placement lays out data groups.
#[derive(Default)]
pub(crate) struct Groups {
    groups: RwLock<BTreeMap<GroupId, Arc<GroupCore>>>,
    /// Set once this node saw the placement bootstrapped (it never goes back): until then
    /// every request is group 1's, without a look at the directory.
    laid_out: AtomicBool,
}

impl Groups {
    /// The group `group`, if this node takes part in it.
    pub fn get(&self, group: GroupId) -> Option<Arc<GroupCore>> {
        let groups = self.groups.read().unwrap_or_else(PoisonError::into_inner);
        groups.get(&group).cloned()
    }

    /// Adds `core`'s group.
    pub fn insert(&self, core: Arc<GroupCore>) {
        let mut groups = self.groups.write().unwrap_or_else(PoisonError::into_inner);
        groups.insert(core.group, core);
    }

    /// Takes group `group` out: this node takes part in it no more.
    pub fn remove(&self, group: GroupId) -> Option<Arc<GroupCore>> {
        let mut groups = self.groups.write().unwrap_or_else(PoisonError::into_inner);
        groups.remove(&group)
    }

    /// Every group, in order.
    pub fn all(&self) -> Vec<Arc<GroupCore>> {
        let groups = self.groups.read().unwrap_or_else(PoisonError::into_inner);
        groups.values().cloned().collect()
    }

    /// Lets go of every group, so that what they hold (the database) can close.
    pub fn clear(&self) {
        self.groups
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Records that the placement is bootstrapped.
    pub fn note_laid_out(&self) {
        self.laid_out.store(true, Ordering::Relaxed);
    }

    /// Whether this node saw the placement bootstrapped.
    pub fn laid_out(&self) -> bool {
        self.laid_out.load(Ordering::Relaxed)
    }
}

/// What the election gate's pings tell of a member.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Reach {
    /// When it last answered.
    pub answered: Option<Instant>,
    /// Since when its pings have gone unanswered (`None` while it answers).
    pub silent_since: Option<Instant>,
    /// What it answered last.
    pub last_answer: Option<LastAnswer>,
}

/// What a member's last answer to a ping told of its log.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LastAnswer {
    /// The last index of its log.
    pub last_log_index: Option<u64>,
    /// How far it has come; `None` from a node of an earlier version.
    pub progress: Option<Progress>,
}

impl Reach {
    /// Records the outcome of one ping at `now`: its answer, if any.
    pub(crate) fn record(&mut self, answer: Option<&PingAnswer>, now: Instant) {
        match answer {
            Some(answer) => {
                self.answered = Some(now);
                self.silent_since = None;
                self.last_answer = Some(LastAnswer {
                    last_log_index: answer.status.last_log.map(|l| l.index),
                    progress: answer.progress,
                });
            }
            None => {
                self.silent_since.get_or_insert(now);
            }
        }
    }
}

/// The membership as this node sees it.
pub(crate) struct Members {
    /// The voter sets: one, or two while a change is joint.
    pub configs: Vec<BTreeSet<NodeId>>,
    /// Every member (voters and learners) and its peer address.
    pub nodes: BTreeMap<NodeId, String>,
}

impl Members {
    /// The voters of every voter set.
    pub(crate) fn voters(&self) -> BTreeSet<NodeId> {
        self.configs.iter().flatten().copied().collect()
    }
}

impl NodeCore {
    /// The members that answered a ping `within` the last while, this node included.
    pub(crate) fn answering(&self, within: Duration) -> BTreeSet<NodeId> {
        let mut answering: BTreeSet<NodeId> = self.last_answers(within).into_keys().collect();
        answering.insert(self.id);
        answering
    }

    /// The last answers of the members that answered a ping `within` the last while.
    pub(crate) fn last_answers(&self, within: Duration) -> BTreeMap<NodeId, LastAnswer> {
        self.reach
            .read()
            .map(|r| {
                r.iter()
                    .filter(|(_, reach)| reach.answered.is_some_and(|at| at.elapsed() <= within))
                    .filter_map(|(id, reach)| reach.last_answer.map(|answer| (*id, answer)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether member `id` has left every ping unanswered for at least `this_long`.
    pub(crate) fn silent_for(&self, id: NodeId, this_long: Duration) -> bool {
        self.reach
            .read()
            .ok()
            .and_then(|r| r.get(&id).and_then(|reach| reach.silent_since))
            .is_some_and(|since| since.elapsed() >= this_long)
    }
}

impl GroupCore {
    /// Proposes a command (stamped with this leader's clock, grouped with concurrent ones) and
    /// waits until it is applied.
    pub(crate) async fn propose(&self, command: Command) -> Result<Response, NodeError> {
        self.group_commit.propose(command).await
    }

    /// The id of the last entry of this node's log of the group.
    /// Waits until this replica applied up to `index` (none: nothing to wait for), at most
    /// `LEADER_WAIT`.
    pub(crate) async fn applied_up_to(&self, index: Option<u64>) -> Result<(), NodeError> {
        let Some(index) = index else {
            return Ok(());
        };
        self.raft
            .wait(Some(routing::LEADER_WAIT))
            .applied_index_at_least(Some(index), "the leader's applied index")
            .await
            .map(drop)
            .map_err(|e| {
                NodeError::Unavailable(format!("group {} applying up to {index}: {e}", self.group))
            })
    }

    pub(crate) fn last_log(&self) -> Result<Option<openraft::LogId<NodeId>>, openraft::AnyError> {
        self.log.last_log_id_now()
    }

    /// The leader this node knows of.
    pub(crate) fn current_leader(&self) -> Option<NodeId> {
        self.raft.server_metrics().borrow().current_leader
    }

    /// Records that a leader's append or heartbeat reached this node.
    pub(crate) fn note_append(&self) {
        let now = Instant::now();
        if let Ok(mut appends) = self.appends.write() {
            let since = match *appends {
                Some((since, last)) if now.duration_since(last) <= APPENDING => since,
                _ => now,
            };
            *appends = Some((since, now));
        }
    }

    /// When a leader's last append or heartbeat reached this node.
    pub(crate) fn last_append(&self) -> Option<Instant> {
        self.appends
            .read()
            .ok()
            .and_then(|a| *a)
            .map(|(_, last)| last)
    }

    /// When this node last heard its leader: its last append or heartbeat, or its last answer
    /// to a ping as leading quietly, whichever came later.
    pub(crate) fn last_heard(&self) -> Option<Instant> {
        self.last_append().max(self.quiet_leader_last_heard())
    }

    /// When the leader last answered a ping as leading quietly.
    pub(crate) fn quiet_leader_last_heard(&self) -> Option<Instant> {
        self.quiet_leader_heard.read().ok().and_then(|at| *at)
    }

    /// Records that the leader answered a ping at `at` as leading quietly.
    pub(crate) fn note_quiet_leader(&self, at: Instant) {
        if let Ok(mut heard) = self.quiet_leader_heard.write() {
            *heard = (*heard).max(Some(at));
        }
    }

    /// Whether this node leads the group quietly now.
    pub(crate) fn is_quiet(&self) -> bool {
        self.quiet.load(Ordering::Relaxed) && self.is_leader()
    }

    /// Whether a leader's appends have been reaching this node, without a gap, for at least
    /// `this_long` up to now.
    pub(crate) fn appending_for(&self, this_long: Duration) -> bool {
        self.appends
            .read()
            .ok()
            .and_then(|a| *a)
            .is_some_and(|(since, last)| {
                last.elapsed() <= APPENDING && since.elapsed() >= this_long
            })
    }

    /// Whether this node currently leads (and is not handing over).
    pub(crate) fn is_leader(&self) -> bool {
        let metrics = self.raft.server_metrics();
        let m = metrics.borrow();
        m.state == ServerState::Leader
            && m.current_leader == Some(self.node.id)
            && !self.handing_over.load(Ordering::Relaxed)
    }

    /// Whether node `id` is a member (voter or learner) of the membership this node knows; `None`
    /// while it knows none. Read in place: the peer service asks on every call.
    pub(crate) fn is_member(&self, id: NodeId) -> Option<bool> {
        let metrics = self.raft.server_metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        let mut nodes = membership.nodes().peekable();
        nodes.peek()?;
        Some(nodes.any(|(member, _)| *member == id))
    }

    /// The membership this node knows (the last in its log).
    pub(crate) fn members(&self) -> Members {
        let metrics = self.raft.server_metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        Members {
            configs: membership.get_joint_config().clone(),
            nodes: membership
                .nodes()
                .map(|(id, n)| (*id, n.addr.clone()))
                .collect(),
        }
    }
}
