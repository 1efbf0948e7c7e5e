//! Changes of the cluster's membership, run on the leader one at a time: adding a node (as a
//! learner first, a voter once it caught up) and removing one. A change is refused before it
//! starts when it would break a rule, and answers only once it committed.
//!
//! In a cluster of several groups the change is group 1's (the cluster's membership), and the
//! placement follows it: an added node is recorded (`AddNode`) and the data groups' replicas
//! then move onto it in the background; a node to remove is marked leaving (`RemoveNode`) and
//! the removal waits, at most [`REPLICAS_MOVE`], until it holds no data group's replica any
//! more (see `member::replicas`) before it takes the node out of group 1.
//!
//! openraft changes voters through a joint configuration (old and new voter sets must both
//! agree until the new one commits); a leader that removes itself first hands its leadership to
//! the most caught-up of the remaining voters, which the request then follows.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use raftq_engine::placement::PlacementCommand;
use raftq_engine::Command;
use raftq_store::NodeId;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::error::NodeError;
use crate::member::GroupCore;
use crate::network::PeerClient;

/// How long a new node may take to catch up before it is made a voter; past it, the node is
/// removed again and the change refused.
pub(crate) const CATCH_UP: Duration = Duration::from_secs(120);
/// How long the leader waits for an answer from a node it is asked to add.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a handover may take.
const HANDOVER: Duration = Duration::from_secs(5);
/// A member counts as answering for a removal while its last answer to a ping is at most this
/// old: longer than the election gate's window, so that a loaded machine's slow pings do not
/// refuse a removal that leaves a working majority.
pub(crate) const ANSWERED_WITHIN: Duration = Duration::from_secs(2);
/// How long a change waits for answers that may be late before it refuses for want of them.
const LATE_ANSWERS: Duration = Duration::from_millis(300);
/// How long a membership entry may take to commit before the change is answered as timed out.
const COMMIT_WAIT: Duration = Duration::from_secs(10);
/// How often a successor is asked to stand during a handover.
const ELECT_AGAIN: Duration = Duration::from_millis(100);
/// How long a removal waits for the data groups' replicas to move off the node: each group
/// adds a new member (which catches up, at most [`CATCH_UP`]) and then removes the node.
pub(crate) const REPLICAS_MOVE: Duration = Duration::from_secs(180);
/// How often a removal looks whether the replicas moved.
const LOOK_AGAIN: Duration = Duration::from_millis(200);
/// The longest a change may take on the leader (a new node's catch-up or the replicas moving
/// off a node, a handover and two commits): a client that waits for its answer waits this
/// long.
pub const LONGEST: Duration = REPLICAS_MOVE
    .saturating_add(HANDOVER)
    .saturating_add(COMMIT_WAIT)
    .saturating_add(COMMIT_WAIT);
const _: () = assert!(CATCH_UP.as_secs() <= REPLICAS_MOVE.as_secs());

/// A membership change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    /// Adds node `id`, whose peer service listens at `raft_addr`, as a voter.
    Add { id: NodeId, raft_addr: String },
    /// Removes node `id` (a voter or a learner).
    Remove { id: NodeId },
}

/// Why a membership change was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ChangeError {
    #[error("raft_addr must be HOST:PORT, got {0:?}")]
    BadAddress(String),
    #[error("raft_addr: no raftq node answers at {0}")]
    Unreachable(String),
    #[error("raft_addr: the node at {0} belongs to another cluster")]
    OtherCluster(String),
    #[error("id: node {0} is already a voter")]
    AlreadyVoter(NodeId),
    #[error("id: node {0} is not a member")]
    UnknownNode(NodeId),
    #[error("another membership change is running")]
    Busy,
    #[error("node {0} is the last voter and cannot be removed")]
    LastVoter(NodeId),
    #[error(
        "removing node {id} would leave no majority: {answering} of the {voters} remaining voters answer"
    )]
    NoMajority {
        id: NodeId,
        answering: usize,
        voters: usize,
    },
    #[error("node {id} did not catch up within {seconds} s and was not added")]
    CatchUp { id: NodeId, seconds: u64 },
}

/// A leader's answer to a change: refused (nothing changed) or done.
pub type ChangeResult = Result<(), ChangeError>;

/// Whether `addr` looks like `HOST:PORT`.
fn valid_address(addr: &str) -> bool {
    addr.rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

/// Whether the voters of `after` that are `answering` make a majority of them.
pub(crate) fn keeps_majority(after: &BTreeSet<NodeId>, answering: &BTreeSet<NodeId>) -> bool {
    after.intersection(answering).count() * 2 > after.len()
}

impl GroupCore {
    /// Runs `change` on this node, which must lead.
    pub(crate) async fn change_membership(
        &self,
        change: &Change,
    ) -> Result<ChangeResult, NodeError> {
        if !self.is_leader() {
            return Err(NodeError::NotLeader(self.current_leader()));
        }
        let Ok(_running) = self.changing.try_lock() else {
            return Ok(Err(ChangeError::Busy));
        };
        let members = self.members();
        if members.configs.len() > 1 {
            return Ok(Err(ChangeError::Busy));
        }
        let voters = members.voters();
        match change {
            Change::Add { id, raft_addr } => {
                let added = self.add(*id, raft_addr, &voters).await?;
                if added.is_ok() && self.laid_out() {
                    let addr = raft_addr.clone();
                    self.place(PlacementCommand::AddNode { id: *id, addr })
                        .await?;
                }
                Ok(added)
            }
            Change::Remove { id } => self.remove(*id, &voters, &members.nodes).await,
        }
    }

    /// Whether the placement lays out data groups (a cluster of several groups).
    fn laid_out(&self) -> bool {
        let groups = self.reader.with_engine(|e| e.placement().groups().len());
        groups.is_some_and(|groups| groups > 0)
    }

    /// Commits `change` to the placement, through this node (group 1's leader).
    async fn place(&self, change: PlacementCommand) -> Result<(), NodeError> {
        match self.propose(Command::Place { change }).await?.result {
            Some(Ok(_)) => Ok(()),
            Some(Err(refused)) => Err(NodeError::Unavailable(format!(
                "the placement refused the change: {refused}"
            ))),
            None => Err(NodeError::Storage(
                "a placement change applied with no outcome".into(),
            )),
        }
    }

    /// Marks node `id` leaving and waits, at most [`REPLICAS_MOVE`], until no data group has it
    /// as a member or a target; nothing to do in a cluster of one group, or for a node the
    /// placement does not know (a learner that was never added holds no replica). Should this
    /// node stop leading meanwhile, the removal that follows is refused as not the leader's,
    /// and the request runs again on the new leader, where the replicas have moved.
    async fn move_replicas_off(&self, id: NodeId) -> Result<(), NodeError> {
        let known = self
            .reader
            .with_engine(|e| e.placement().nodes().contains_key(&id));
        if !self.laid_out() || known != Some(true) {
            return Ok(());
        }
        self.place(PlacementCommand::RemoveNode { id }).await?;
        let deadline = Instant::now() + REPLICAS_MOVE;
        loop {
            let holding = self.reader.with_engine(|e| e.placement().holding(id));
            let holding = holding.unwrap_or_default();
            if holding.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(NodeError::Timeout(format!(
                    "node {id} still holds replicas of groups {holding:?}; they keep moving off \
                     it: run the removal again to finish it"
                )));
            }
            tokio::time::sleep(LOOK_AGAIN).await;
        }
    }

    async fn add(
        &self,
        id: NodeId,
        addr: &str,
        voters: &BTreeSet<NodeId>,
    ) -> Result<ChangeResult, NodeError> {
        if !valid_address(addr) {
            return Ok(Err(ChangeError::BadAddress(addr.to_string())));
        }
        if voters.contains(&id) {
            return Ok(Err(ChangeError::AlreadyVoter(id)));
        }
        let mut probe = PeerClient::new(id, addr, &self.network.peers.dial).in_group(self.group);
        let Some(status) = probe.ping_status(PROBE_TIMEOUT).await else {
            return Ok(Err(ChangeError::Unreachable(addr.to_string())));
        };
        let ours = self.node.admission.cluster().get();
        if status.cluster_id.is_some() && status.cluster_id != ours {
            return Ok(Err(ChangeError::OtherCluster(addr.to_string())));
        }
        tracing::info!(group = %self.group, node = id, addr, "adding a learner");
        let refusal = match self.add_learner(id, addr).await? {
            // Caught up: the node may vote from now on.
            true => match probe.admit(PROBE_TIMEOUT).await {
                Ok(()) => None,
                Err(e) => {
                    tracing::warn!(node = id, error = %e, "cannot tell the node it was added");
                    Some(ChangeError::Unreachable(addr.to_string()))
                }
            },
            false => Some(ChangeError::CatchUp {
                id,
                seconds: CATCH_UP.as_secs(),
            }),
        };
        if let Some(refusal) = refusal {
            // The learner goes again, and the change is refused.
            self.commit(ChangeMembers::RemoveNodes(BTreeSet::from([id])))
                .await?;
            return Ok(Err(refusal));
        }
        tracing::info!(group = %self.group, node = id, "the learner caught up; making it a voter");
        self.commit(ChangeMembers::AddVoterIds(BTreeSet::from([id])))
            .await?;
        tracing::info!(group = %self.group, node = id, "added a voter");
        Ok(Ok(()))
    }

    async fn remove(
        &self,
        id: NodeId,
        voters: &BTreeSet<NodeId>,
        nodes: &BTreeMap<NodeId, String>,
    ) -> Result<ChangeResult, NodeError> {
        if let Some(refused) = self.removal_refused(id, voters, nodes).await {
            return Ok(Err(refused));
        }
        if id == self.node.id {
            // The leader leaves: a remaining voter leads first, and the request follows it.
            let mut after = voters.clone();
            after.remove(&id);
            let successor = self.hand_over(&after, nodes).await?;
            return Err(NodeError::NotLeader(Some(successor)));
        }
        self.move_replicas_off(id).await?;
        tracing::info!(group = %self.group, node = id, "removing a member");
        let gone = BTreeSet::from([id]);
        let change = if voters.contains(&id) {
            ChangeMembers::RemoveVoters(gone)
        } else {
            ChangeMembers::RemoveNodes(gone)
        };
        self.commit(change).await?;
        tracing::info!(group = %self.group, node = id, "removed a member");
        Ok(Ok(()))
    }

    /// Adds node `id` at `addr` as a learner, and waits, at most [`CATCH_UP`], until its log
    /// holds every entry up to the one that added it; answers whether it did. (openraft's own
    /// blocking add counts a learner as caught up once it is within its replication lag
    /// threshold, 5,000 entries, of the leader: at once in a short log.)
    pub(crate) async fn add_learner(&self, id: NodeId, addr: &str) -> Result<bool, NodeError> {
        let added = self.raft.add_learner(id, BasicNode::new(addr), false);
        let index = added.await.map_err(write_error)?.log_id.index;
        let caught_up = |m: &openraft::RaftMetrics<NodeId, BasicNode>| {
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(&id).cloned().flatten());
            matched.is_some_and(|matched| matched.index >= index)
        };
        let wait = self.raft.wait(Some(CATCH_UP));
        Ok(wait
            .metrics(caught_up, "the learner caught up")
            .await
            .is_ok())
    }

    /// Why node `id` may not be removed from `voters` (and the learners among `nodes`), if so.
    async fn removal_refused(
        &self,
        id: NodeId,
        voters: &BTreeSet<NodeId>,
        nodes: &BTreeMap<NodeId, String>,
    ) -> Option<ChangeError> {
        if !nodes.contains_key(&id) {
            return Some(ChangeError::UnknownNode(id));
        }
        if !voters.contains(&id) {
            return None;
        }
        let mut after = voters.clone();
        after.remove(&id);
        if after.is_empty() {
            return Some(ChangeError::LastVoter(id));
        }
        let mut answering = self.node.answering(ANSWERED_WITHIN);
        if !keeps_majority(&after, &answering) {
            // The pings' answers may be a round late (a busy node, a member added a moment
            // ago): the change is refused only if they are still missing a few rounds on.
            tokio::time::sleep(LATE_ANSWERS).await;
            answering = self.node.answering(ANSWERED_WITHIN);
        }
        (!keeps_majority(&after, &answering)).then(|| ChangeError::NoMajority {
            id,
            answering: after.intersection(&answering).count(),
            voters: after.len(),
        })
    }

    /// Proposes `change` (members that leave are removed, not kept as learners) and waits until
    /// it committed, at most [`COMMIT_WAIT`].
    pub(crate) async fn commit(
        &self,
        change: ChangeMembers<NodeId, BasicNode>,
    ) -> Result<(), NodeError> {
        match tokio::time::timeout(COMMIT_WAIT, self.raft.change_membership(change, false)).await {
            Ok(result) => result.map(drop).map_err(write_error),
            Err(_) => Err(NodeError::Timeout(
                "the membership change was not committed in time; it may still commit".into(),
            )),
        }
    }

    /// When this node leads the group, hands its leadership to the most caught-up other voter
    /// (see [`GroupCore::hand_over`]). Returns the new leader; `None` when this node did not
    /// lead or is the only voter.
    pub(crate) async fn step_down(&self) -> Result<Option<NodeId>, NodeError> {
        if !self.is_leader() {
            return Ok(None);
        }
        let members = self.members();
        let mut voters = members.voters();
        voters.remove(&self.node.id);
        if voters.is_empty() {
            return Ok(None);
        }
        self.hand_over(&voters, &members.nodes).await.map(Some)
    }

    /// Asks the most caught-up of `candidates` whose clock agrees with the cluster's time to
    /// stand for election, and waits until this node no longer leads. Returns the new leader.
    pub(crate) async fn hand_over(
        &self,
        candidates: &BTreeSet<NodeId>,
        nodes: &BTreeMap<NodeId, String>,
    ) -> Result<NodeId, NodeError> {
        let successor = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            let matched = |id: &NodeId| {
                m.replication
                    .as_ref()
                    .and_then(|r| r.get(id).cloned().flatten())
            };
            candidates
                .iter()
                .filter(|id| **id != self.node.id && self.node.clock.agrees(**id))
                .max_by_key(|id| matched(id))
                .copied()
        };
        let Some(successor) = successor else {
            return Err(NodeError::Unavailable(
                "no voter whose clock agrees with the cluster's to hand over to".into(),
            ));
        };
        let Some(addr) = nodes.get(&successor) else {
            return Err(NodeError::Unavailable(format!(
                "node {successor} has no address"
            )));
        };
        tracing::info!(group = %self.group, successor, "handing leadership over");
        // Followers refuse to vote while they heard from their leader within its lease: this
        // leader goes quiet (no heartbeat, no proposal, no read) until the successor won.
        self.handing_over.store(true, Ordering::Relaxed);
        self.raft.runtime_config().heartbeat(false);
        let outcome = self.await_successor(successor, addr).await;
        self.raft.runtime_config().heartbeat(true);
        self.handing_over.store(false, Ordering::Relaxed);
        outcome
    }

    /// Waits out the followers' leader lease (openraft's is the longest election timeout), then
    /// asks `successor` to stand, again and again, until another node leads.
    async fn await_successor(&self, successor: NodeId, addr: &str) -> Result<NodeId, NodeError> {
        let deadline = Instant::now() + HANDOVER;
        let lease = Duration::from_millis(self.raft.config().election_timeout_max);
        tokio::time::sleep(lease).await;
        let mut client = self.network.client(successor, addr);
        let mut metrics = self.raft.server_metrics();
        loop {
            if let Err(e) = client.elect(HANDOVER).await {
                tracing::warn!(successor, error = %e, "cannot ask for an election");
            }
            let led = tokio::time::timeout_at(
                deadline.min(Instant::now() + ELECT_AGAIN),
                metrics.wait_for(|m| m.current_leader.is_some_and(|l| l != self.node.id)),
            )
            .await;
            if let Ok(Ok(m)) = led {
                return m
                    .current_leader
                    .ok_or_else(|| NodeError::Unavailable("no leader after the handover".into()));
            }
            if Instant::now() >= deadline {
                return Err(NodeError::Unavailable(format!(
                    "node {successor} did not take over within {} s",
                    HANDOVER.as_secs()
                )));
            }
        }
    }
}

/// An openraft write that failed: this node stopped leading, or the change was refused.
fn write_error(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> NodeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
            NodeError::NotLeader(f.leader_id)
        }
        other => NodeError::Unavailable(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_need_a_host_and_a_port() {
        assert!(valid_address("node4:7000"));
        assert!(valid_address("10.0.0.4:7000"));
        assert!(!valid_address("node4"));
        assert!(!valid_address(":7000"));
        assert!(!valid_address("node4:port"));
        assert!(!valid_address("node4:70000"));
    }

    #[test]
    fn a_removal_must_leave_a_reachable_majority() {
        let set = |ids: &[u64]| ids.iter().copied().collect::<BTreeSet<u64>>();
        assert!(keeps_majority(&set(&[1, 2]), &set(&[1, 2])));
        assert!(!keeps_majority(&set(&[1, 2]), &set(&[1])));
        assert!(keeps_majority(&set(&[1, 2, 3, 4]), &set(&[1, 2, 3])));
        assert!(!keeps_majority(&set(&[1, 2, 3, 4]), &set(&[1, 2, 5])));
    }
}
