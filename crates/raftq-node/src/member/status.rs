//! What a node reports of itself and of the cluster as it sees it: leader, term, commit and
//! applied index, the members with their roles, whether they answer its pings and (on a leader)
//! how far each one's log is replicated, the cluster
//! id, this node's clock offset, whether its leader is cut off from it and the elections its
//! election gate held it back from. `GET /v1/cluster`, the gRPC `Cluster` call and
//! `GET /metrics` show it.
//!
//! With its Raft groups ([`GroupStatus`]): each group's members and leader and, where this
//! node holds a replica, how far that replica has come. Group 1's figures are also the node's
//! own (`role`, `term`, the indexes): it is the group every node is a member of.
//!
//! Roles: the known leader is [`Role::Leader`]; this node reports its own state (candidate,
//! follower, learner, shutdown); other voters are followers and non-voters learners, since a node
//! sees only its own state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use openraft::{BasicNode, RaftMetrics, ServerState};
use raftq_store::{GroupId, NodeId};
use uuid::Uuid;

use crate::admission::{LeaderContact, Progress};
use crate::member::membership::ANSWERED_WITHIN;
use crate::member::{GroupCore, Groups, LastAnswer};

/// A member's role as this node sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Candidate,
    Follower,
    Learner,
    Shutdown,
}

impl Role {
    /// The name the APIs show.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Candidate => "candidate",
            Role::Follower => "follower",
            Role::Learner => "learner",
            Role::Shutdown => "shutdown",
        }
    }
}

impl From<ServerState> for Role {
    fn from(state: ServerState) -> Role {
        match state {
            ServerState::Leader => Role::Leader,
            ServerState::Candidate => Role::Candidate,
            ServerState::Follower => Role::Follower,
            ServerState::Learner => Role::Learner,
            ServerState::Shutdown => Role::Shutdown,
        }
    }
}

/// One member of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: NodeId,
    pub raft_addr: String,
    pub role: Role,
    /// Whether it answered this node's pings in the last 2 s (this node always does): the
    /// members a leader counts on to keep a majority when it is asked to remove a voter.
    pub answering: bool,
    /// On a leader, the last log index it knows the member holds (its own last log index for
    /// itself); `None` on other nodes, which do not track replication, and for a member the
    /// leader has not matched yet.
    pub matched_index: Option<u64>,
    /// The last index of the member's log, the highest index it knows committed and the last
    /// index it applied: this node's own, or what the member answered this node's last ping
    /// with; `None` while it does not answer. A node of an earlier version answers the first
    /// only.
    pub last_log_index: Option<u64>,
    pub commit_index: Option<u64>,
    pub applied_index: Option<u64>,
}

/// A node's view of itself and the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node answering.
    pub node_id: NodeId,
    /// This node's own role.
    pub role: Role,
    /// The leader this node knows of.
    pub leader: Option<NodeId>,
    /// Every member, voters and learners, by id.
    pub members: Vec<Member>,
    pub term: u64,
    /// The highest index this node knows committed (at least its applied index).
    pub commit_index: u64,
    /// The last index this node applied to its state machine.
    pub last_applied: u64,
    /// The last index in this node's log.
    pub last_log_index: u64,
    /// The id the cluster got when it formed; `None` until this node formed or joined one.
    pub cluster_id: Option<Uuid>,
    /// This node's clock minus the cluster's time (the median of a majority of the voters'
    /// clocks that agree), in milliseconds; 0 while it cannot tell.
    pub clock_offset_ms: i64,
    /// Whether that is beyond the bound: the node then does not stand for election.
    pub clock_skewed: bool,
    /// Whether the last round of pings found a majority of the voters' clocks in agreement: a
    /// node stands for election only then.
    pub clock_confirmed: bool,
    /// The time of this node's applied state (the largest stamp it applied), in milliseconds
    /// since the Unix epoch.
    pub state_time_ms: u64,
    /// Whether the leader is cut off from this node one way: its appends arrive, but it has
    /// not answered this node's pings for a second. Requests to this node are then refused at
    /// once ([`NodeError::LeaderUnreachable`](crate::NodeError::LeaderUnreachable)) instead of
    /// forwarded.
    pub leader_unreachable: bool,
    /// Elections this node would have stood in since it started, had its election gate not
    /// held it back (too few voters answering or willing to vote for it, a skewed clock, or a
    /// node that may not vote), while no leader's appends reached it.
    pub elections_held_back: u64,
    /// The Raft groups of the cluster, by number: group 1 alone until the placement lays out
    /// more.
    pub groups: Vec<GroupStatus>,
}

/// One Raft group as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStatus {
    pub group: u32,
    /// Its voters: as this node's replica knows them, or as the placement lays them out.
    pub members: Vec<NodeId>,
    /// Its leader: as this node's replica knows it, or the placement's last word of it.
    pub leader: Option<NodeId>,
    /// Whether it has been formed (its former initialized it: `GroupEntry::former`).
    pub formed: bool,
    /// The queues in it.
    pub queues: u64,
    /// This node's replica of it; `None` where this node holds none.
    pub replica: Option<ReplicaStatus>,
}

/// How far this node's replica of a group has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// This node's role in the group.
    pub role: Role,
    pub term: u64,
    /// The highest index this node knows committed in the group (at least its applied index).
    pub commit_index: u64,
    pub last_applied: u64,
    pub last_log_index: u64,
    /// Messages in the group's outbox as this replica applied it: taken out of their queues,
    /// on their way to queues of other groups.
    pub outbox: u64,
}

impl GroupCore {
    /// How far this node has come, as it answers a ping. Read from openraft's metrics and the
    /// appends this node received, never by asking the Raft core: the election gate times
    /// pings, and a busy core must not slow the answer. A follower knows committed what its
    /// leader's appends said; a leader, what a majority of each voter set holds in its log.
    pub(crate) fn progress(&self) -> Progress {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let applied_index = m.last_applied.map_or(0, |l| l.index);
        let commit = if m.state == ServerState::Leader {
            held_by_majority(&m)
        } else {
            self.leader_commit.load(Ordering::Relaxed)
        };
        Progress {
            commit_index: commit.max(applied_index),
            applied_index,
        }
    }

    /// How lately this node heard from a leader, as it answers a ping: from the appends it
    /// received and the quiet leader's answers to its pings, never by asking the Raft core (see
    /// [`GroupCore::progress`]).
    pub(crate) fn leader_contact(&self) -> LeaderContact {
        if self.is_leader() {
            return LeaderContact::Leading;
        }
        match self.last_heard() {
            Some(at) => LeaderContact::HeardMsAgo(
                u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX),
            ),
            None => LeaderContact::NotHeard,
        }
    }

    /// Records the commit index a leader's append carried.
    pub(crate) fn note_leader_commit(&self, index: Option<u64>) {
        if let Some(index) = index {
            self.leader_commit.fetch_max(index, Ordering::Relaxed);
        }
    }

    /// This node's status, read from openraft's metrics and, for the committed index, its state.
    pub(crate) async fn status(&self) -> NodeStatus {
        let answering = self.node.answering(ANSWERED_WITHIN);
        let answers = self.node.last_answers(ANSWERED_WITHIN);
        let mut status = self.status_from_metrics(&answering);
        // The committed index lives in the Raft state, not in the metrics; the applied index
        // stands in for it when the Raft core cannot answer.
        if let Ok(Some(committed)) = self
            .raft
            .with_raft_state(|st| st.committed.map(|l| l.index))
            .await
        {
            status.commit_index = status.commit_index.max(committed);
        }
        add_progress(&mut status, &answers);
        status
    }

    /// This node's status as openraft's metrics and this node's own state show it, the members
    /// in `answering` marked so; the committed index is the applied one, and the members'
    /// progress is not filled in.
    fn status_from_metrics(&self, answering: &BTreeSet<NodeId>) -> NodeStatus {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let last_applied = m.last_applied.map_or(0, |l| l.index);
        NodeStatus {
            node_id: m.id,
            role: m.state.into(),
            leader: m.current_leader,
            members: members(&m, answering),
            term: m.current_term,
            commit_index: last_applied,
            last_applied,
            last_log_index: m.last_log_index.unwrap_or(0),
            cluster_id: self.node.admission.cluster().get(),
            clock_offset_ms: self.node.clock.offset().unwrap_or(0),
            clock_skewed: self.node.clock.skewed(),
            clock_confirmed: self.node.clock.confirmed(),
            state_time_ms: self.reader.with_engine(|e| e.now()).unwrap_or(0),
            leader_unreachable: m
                .current_leader
                .is_some_and(|leader| leader != m.id && self.cut_off_from(leader)),
            elections_held_back: self.elections_held_back.load(Ordering::Relaxed),
            groups: Vec::new(),
        }
    }

    /// This node's replica of the group, from openraft's metrics and the leader's word of what
    /// is committed.
    fn replica(&self) -> ReplicaStatus {
        // Read before the metrics are borrowed below: `progress` borrows them too.
        let progress = self.progress();
        let outbox = u64::try_from(self.outbox_len()).unwrap_or(u64::MAX);
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        ReplicaStatus {
            role: m.state.into(),
            term: m.current_term,
            commit_index: progress.commit_index,
            last_applied: progress.applied_index,
            last_log_index: m.last_log_index.unwrap_or(0),
            outbox,
        }
    }

    /// The messages in the group's outbox as this replica applied it (none before its state is
    /// loaded).
    pub(crate) fn outbox_len(&self) -> usize {
        self.reader
            .with_engine(|e| e.outbox().count())
            .unwrap_or_default()
    }

    /// The group as this node's replica sees it, `queues` in it.
    fn group_status(&self, formed: bool, queues: u64) -> GroupStatus {
        let members = self.members();
        GroupStatus {
            group: self.group.0,
            members: members.voters().into_iter().collect(),
            leader: self.current_leader(),
            formed,
            queues,
            replica: Some(self.replica()),
        }
    }
}

/// Every group of the cluster as this node sees it (see [`GroupStatus`]): the placement's
/// groups, read from `metadata`'s applied state (group 1), each from this node's replica when
/// it holds one among `held`; group 1 alone, holding every queue, while the placement is not
/// laid out.
pub(crate) fn groups(metadata: &GroupCore, held: &Groups) -> Vec<GroupStatus> {
    let laid_out = metadata.reader.with_engine(|engine| {
        let placement = engine.placement();
        let groups = placement.groups().iter();
        let groups = groups.map(|(g, entry)| (*g, entry.clone(), placement.queue_count(*g)));
        (groups.collect::<Vec<_>>(), engine.accounts())
    });
    let Some((laid_out, accounts)) = laid_out else {
        return Vec::new();
    };
    if laid_out.is_empty() {
        let queues = accounts.iter().map(|a| a.queues).sum::<usize>();
        let queues = u64::try_from(queues).unwrap_or(u64::MAX);
        return vec![metadata.group_status(true, queues)];
    }
    laid_out
        .into_iter()
        .map(|(number, entry, queues)| match held.get(GroupId(number)) {
            Some(core) => core.group_status(entry.formed, queues),
            None => GroupStatus {
                group: number,
                members: entry.members.into_iter().collect(),
                leader: entry.leader_hint,
                formed: entry.formed,
                queues,
                replica: None,
            },
        })
        .collect()
}

/// Every member as the metrics `m` show it, the members in `answering` marked so, with how far
/// a leader matched each one's log; their own progress is not filled in.
fn members(m: &RaftMetrics<NodeId, BasicNode>, answering: &BTreeSet<NodeId>) -> Vec<Member> {
    let membership = m.membership_config.membership();
    let voters: Vec<NodeId> = membership.voter_ids().collect();
    let matched = |id: &NodeId| {
        if *id == m.id && m.state == ServerState::Leader {
            return m.last_log_index;
        }
        m.replication
            .as_ref()
            .and_then(|r| r.get(id).cloned().flatten())
            .map(|l| l.index)
    };
    membership
        .nodes()
        .map(|(id, n)| Member {
            id: *id,
            raft_addr: n.addr.clone(),
            role: if m.current_leader == Some(*id) {
                Role::Leader
            } else if *id == m.id {
                m.state.into()
            } else if voters.contains(id) {
                Role::Follower
            } else {
                Role::Learner
            },
            answering: answering.contains(id),
            matched_index: matched(id),
            last_log_index: None,
            commit_index: None,
            applied_index: None,
        })
        .collect()
}

/// Fills in each member's log end and progress: this node's own from `status`, the others'
/// from their last `answers` to its pings.
fn add_progress(status: &mut NodeStatus, answers: &BTreeMap<NodeId, LastAnswer>) {
    for member in &mut status.members {
        let answer = if member.id == status.node_id {
            LastAnswer {
                last_log_index: Some(status.last_log_index),
                progress: Some(Progress {
                    commit_index: status.commit_index,
                    applied_index: status.last_applied,
                }),
            }
        } else {
            answers.get(&member.id).copied().unwrap_or_default()
        };
        member.last_log_index = answer.last_log_index;
        member.commit_index = answer.progress.map(|p| p.commit_index);
        member.applied_index = answer.progress.map(|p| p.applied_index);
    }
}

/// The highest log index that a majority of every voter set holds, as a leader's replication
/// metrics show it (its own log counts for itself).
fn held_by_majority(m: &RaftMetrics<NodeId, BasicNode>) -> u64 {
    let held = |id: &NodeId| {
        if *id == m.id {
            return m.last_log_index.unwrap_or(0);
        }
        m.replication
            .as_ref()
            .and_then(|r| r.get(id).cloned().flatten())
            .map_or(0, |l| l.index)
    };
    m.membership_config
        .membership()
        .get_joint_config()
        .iter()
        .map(|voters| {
            let mut indexes: Vec<u64> = voters.iter().map(held).collect();
            indexes.sort_unstable_by(|a, b| b.cmp(a));
            indexes.get(voters.len() / 2).copied().unwrap_or(0)
        })
        .min()
        .unwrap_or(0)
}
