//! The node's status ([`raftq_node::NodeStatus`]) as `GET /v1/cluster` shows it in JSON and
//! `GET /metrics` as gauges, with the region the cluster serves. Its details (the cluster id and
//! the clock offset) are shown to admin keys only.

use raftq_node::{GroupStatus, Node};
use serde::Serialize;
use utoipa::ToSchema;

use crate::keys::Principal;

/// One member of the cluster.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Member {
    pub id: u64,
    pub raft_addr: String,
    /// `leader`, `candidate`, `follower`, `learner` or `shutdown`.
    pub role: &'static str,
    /// Whether it answered the answering node's pings in the last 2 s (the answering node
    /// always does).
    pub answering: bool,
    /// When the answering node leads: the last log index it knows this member holds (its own
    /// last log index for itself), so the leader's last index minus it is the member's lag;
    /// `null` on other nodes and for a member not matched yet.
    #[schema(required = true)]
    pub matched_index: Option<u64>,
    /// The last index of the member's log: the answering node's own, or what the member
    /// answered its last ping with; `null` while the member does not answer.
    #[schema(required = true)]
    pub last_log_index: Option<u64>,
    /// The highest index the member knows committed, likewise; `null` also from a member of an
    /// earlier version.
    #[schema(required = true)]
    pub commit_index: Option<u64>,
    /// The last index the member's state machine applied, likewise.
    #[schema(required = true)]
    pub applied_index: Option<u64>,
}

/// One Raft group as the answering node sees it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Group {
    /// Its number; group 1 is the metadata group, every voter a member.
    pub group: u32,
    /// Its voters' node ids.
    pub members: Vec<u64>,
    /// Its leader's node id, as the answering node's replica knows it or, where that node holds
    /// none, as the leader last recorded itself; `null` when none is known.
    #[schema(required = true)]
    pub leader: Option<u64>,
    /// Whether its former (one of its members, by group number in turn) has formed it.
    pub formed: bool,
    /// The queues it holds.
    pub queues: u64,
    /// The answering node's role in the group (as in `nodes`); `null` where it holds no replica,
    /// and then the indexes below are `null` too.
    #[schema(required = true)]
    pub role: Option<&'static str>,
    #[schema(required = true)]
    pub term: Option<u64>,
    /// The highest index of the group's log the answering node knows committed.
    #[schema(required = true)]
    pub commit_index: Option<u64>,
    /// The last index of the group's log the answering node applied.
    #[schema(required = true)]
    pub applied_index: Option<u64>,
    /// The last index of the answering node's log of the group.
    #[schema(required = true)]
    pub last_log_index: Option<u64>,
    /// Messages in the group's outbox as the answering node applied it: taken out of their
    /// queues (dead-lettered, or moved by a task) and on their way to queues of other groups.
    #[schema(required = true)]
    pub outbox: Option<u64>,
}

impl From<GroupStatus> for Group {
    fn from(g: GroupStatus) -> Group {
        let replica = g.replica;
        Group {
            group: g.group,
            members: g.members,
            leader: g.leader,
            formed: g.formed,
            queues: g.queues,
            role: replica.map(|r| r.role.as_str()),
            term: replica.map(|r| r.term),
            commit_index: replica.map(|r| r.commit_index),
            applied_index: replica.map(|r| r.last_applied),
            last_log_index: replica.map(|r| r.last_log_index),
            outbox: replica.map(|r| r.outbox),
        }
    }
}

/// What `GET /v1/cluster` answers (plus a few fields for metrics, not serialized).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(description = "The cluster as the answering node sees it.")]
pub struct RaftStatus {
    /// The leader's node ID; `null` when there is none.
    #[schema(required = true)]
    pub leader: Option<u64>,
    pub nodes: Vec<Member>,
    pub term: u64,
    pub commit_index: u64,
    /// The node answering.
    pub node_id: u64,
    /// The region the cluster serves.
    pub region: String,
    /// The cluster's Raft groups by number: group 1 alone unless the cluster was started with
    /// more (`--groups`). The figures above (`leader`, `term`, `commit_index`) are group 1's.
    pub groups: Vec<Group>,
    /// Admin keys only: the id the cluster got when it formed, kept in every member's data
    /// directory; absent on a node that has not formed or joined a cluster yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Admin keys only: the answering node's clock minus the median of the voters' clocks, in
    /// milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<i64>,
    /// Admin keys only: whether that is beyond `--max-clock-skew-ms`: the node then does not
    /// stand for election.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_skewed: Option<bool>,
    /// Admin keys only: whether a majority of the voters' clocks agreed on the cluster's time at
    /// the answering node's last round of pings: a node stands for election only then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_confirmed: Option<bool>,
    /// Admin keys only: the time of the answering node's applied state (the largest time a
    /// leader stamped on an entry it applied), in milliseconds since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_time_ms: Option<u64>,
    #[serde(skip)]
    pub last_applied: u64,
    #[serde(skip)]
    pub last_log_index: u64,
    /// Members, this node included, that answered its pings in the last 2 s.
    #[serde(skip)]
    pub members_answering: u64,
    #[serde(skip)]
    pub leader_unreachable: bool,
    #[serde(skip)]
    pub elections_held_back: u64,
}

impl RaftStatus {
    /// The status as `principal` may see it: without the details unless it is an admin.
    pub(crate) fn shown_to(self, principal: &Principal) -> RaftStatus {
        if principal.is_admin() {
            return self;
        }
        RaftStatus {
            cluster_id: None,
            clock_offset_ms: None,
            clock_skewed: None,
            clock_confirmed: None,
            state_time_ms: None,
            ..self
        }
    }
}

/// The status of `node`, for the cluster serving `region`.
pub async fn of(node: &Node, region: &str) -> RaftStatus {
    let status = node.status().await;
    let members_answering = status.members.iter().filter(|m| m.answering).count() as u64;
    RaftStatus {
        leader: status.leader,
        nodes: status
            .members
            .into_iter()
            .map(|m| Member {
                id: m.id,
                raft_addr: m.raft_addr,
                role: m.role.as_str(),
                answering: m.answering,
                matched_index: m.matched_index,
                last_log_index: m.last_log_index,
                commit_index: m.commit_index,
                applied_index: m.applied_index,
            })
            .collect(),
        term: status.term,
        commit_index: status.commit_index,
        node_id: status.node_id,
        region: region.to_string(),
        groups: status.groups.into_iter().map(Group::from).collect(),
        cluster_id: status.cluster_id.map(|id| id.to_string()),
        clock_offset_ms: Some(status.clock_offset_ms),
        clock_skewed: Some(status.clock_skewed),
        clock_confirmed: Some(status.clock_confirmed),
        state_time_ms: Some(status.state_time_ms),
        last_applied: status.last_applied,
        last_log_index: status.last_log_index,
        members_answering,
        leader_unreachable: status.leader_unreachable,
        elections_held_back: status.elections_held_back,
    }
}
