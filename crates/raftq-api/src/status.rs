//! The node's Raft status from openraft's metrics and state: term, leader, commit index and the
//! members with their roles. `GET /v1/cluster` shows it as JSON and `GET /metrics` as gauges.
//!
//! Roles: the known leader is `leader`; this node reports its own state (`candidate`,
//! `follower`, `learner`, `shutdown`); other voters are `follower` and non-voters `learner`,
//! since a node sees only its own state.

use openraft::ServerState;
use raftq_node::Node;
use serde::Serialize;
use utoipa::ToSchema;

/// One member of the cluster.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Member {
    pub id: u64,
    pub raft_addr: String,
    /// `leader`, `candidate`, `follower`, `learner` or `shutdown`.
    pub role: &'static str,
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
    /// The id the cluster got when it formed, kept in every member's data directory; `null`
    /// on a node that has not formed or joined a cluster yet.
    #[schema(required = true)]
    pub cluster_id: Option<String>,
    /// The answering node's clock minus the median of the voters' clocks, in milliseconds.
    pub clock_offset_ms: i64,
    /// Whether that is beyond `--max-clock-skew-ms`: the node then does not stand for election.
    pub clock_skewed: bool,
    #[serde(skip)]
    pub last_applied: u64,
    #[serde(skip)]
    pub last_log_index: u64,
}

fn state_name(state: ServerState) -> &'static str {
    match state {
        ServerState::Leader => "leader",
        ServerState::Candidate => "candidate",
        ServerState::Follower => "follower",
        ServerState::Learner => "learner",
        ServerState::Shutdown => "shutdown",
    }
}

/// Reads the status of `node`.
pub async fn of(node: &Node, region: &str) -> RaftStatus {
    let raft = node.raft();
    let (clock_offset_ms, clock_skewed) = node.clock_offset();
    let mut status = {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let nodes = membership
            .nodes()
            .map(|(id, n)| Member {
                id: *id,
                raft_addr: n.addr.clone(),
                role: if m.current_leader == Some(*id) {
                    "leader"
                } else if *id == m.id {
                    state_name(m.state)
                } else if voters.contains(id) {
                    "follower"
                } else {
                    "learner"
                },
            })
            .collect();
        let last_applied = m.last_applied.map_or(0, |l| l.index);
        RaftStatus {
            leader: m.current_leader,
            nodes,
            term: m.current_term,
            commit_index: last_applied,
            node_id: m.id,
            region: region.to_string(),
            cluster_id: node.cluster_id().map(|id| id.to_string()),
            clock_offset_ms,
            clock_skewed,
            last_applied,
            last_log_index: m.last_log_index.unwrap_or(0),
        }
    };
    // The committed index lives in the Raft state, not in the metrics; it is at least the
    // applied index, which stands in for it when the Raft core cannot answer.
    if let Ok(Some(committed)) = raft
        .with_raft_state(|st| st.committed.map(|l| l.index))
        .await
    {
        status.commit_index = status.commit_index.max(committed);
    }
    status
}
