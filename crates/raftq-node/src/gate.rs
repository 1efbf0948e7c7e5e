//! The election gate, a pre-vote: a node stands for election only while a majority of the
//! cluster's current voters, itself included, answered its pings lately and would vote for it,
//! and only while its [`admission`](crate::admission) lets it. openraft 0.9 has no pre-vote of
//! its own:
//! - a follower cut off from the others stood for election every half second, raising its term
//!   each time; when it came back, its higher term deposed a working leader and cost the cluster
//!   an election (seconds under load);
//! - a node whose log is behind can never win, but each time it stands, the voters that refuse
//!   it take its higher term and wait out a new election timeout: standing again and again, it
//!   kept the node that could win from ever standing.
//!
//! Here every node pings the members all the time (the answer carries the peer's standing and
//! the id of its last log entry) and turns openraft's elections off while too few of them would
//! vote for it. A node that could not get those votes could never win an election anyway, so
//! the gate takes nothing away: once it could, it stands as before.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use raftq_store::NodeId;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::admission::PeerStatus;
use crate::node::Core;

/// How often every member is pinged.
const EVERY: Duration = Duration::from_millis(100);
/// How long a ping may take.
const PING_TIMEOUT: Duration = Duration::from_millis(250);
/// A member's answer counts while it is at most this old: shorter than the time a follower waits
/// for its leader (0.75 s) before it stands.
const FRESH: Duration = Duration::from_millis(600);

/// Whether the `reached` nodes make a majority of every voter set of a (possibly joint)
/// membership.
fn majority(reached: &BTreeSet<NodeId>, configs: &[BTreeSet<NodeId>]) -> bool {
    configs
        .iter()
        .all(|voters| voters.intersection(reached).count() * 2 > voters.len())
}

pub(crate) async fn run(core: Arc<Core>, mut shutdown: watch::Receiver<bool>) {
    let mut answers: BTreeMap<NodeId, (Instant, PeerStatus)> = BTreeMap::new();
    let mut open = core.admission.may_stand();
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let (configs, others) = {
            let metrics = core.raft.metrics();
            let m = metrics.borrow();
            let membership = m.membership_config.membership();
            let others: Vec<(NodeId, String)> = membership
                .nodes()
                .filter(|(id, _)| **id != core.id)
                .map(|(id, node)| (*id, node.addr.clone()))
                .collect();
            (membership.get_joint_config().clone(), others)
        };
        let pings = others.iter().map(|(id, addr)| {
            let mut client = core.network.peers.get(*id, addr);
            async move { (*id, client.ping(PING_TIMEOUT).await) }
        });
        let now = Instant::now();
        for (id, status) in join_all(pings).await {
            if let Some(status) = status {
                answers.insert(id, (now, status));
            }
        }
        let recent = || {
            answers
                .iter()
                .filter(|(_, (at, _))| at.elapsed() <= FRESH)
                .map(|(id, (_, status))| (*id, status))
        };
        let mut answering: BTreeSet<NodeId> = recent().map(|(id, _)| id).collect();
        answering.insert(core.id);
        if let Ok(mut shared) = core.answering.write() {
            shared.clone_from(&answering);
        }
        let own_log = match core.admission.last_log() {
            Ok(last) => last,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the log's last entry");
                continue;
            }
        };
        let mut voters_for_us: BTreeSet<NodeId> = recent()
            .filter(|(_, status)| status.would_vote_for(own_log.as_ref()))
            .map(|(id, _)| id)
            .collect();
        voters_for_us.insert(core.id);
        let allow = majority(&voters_for_us, &configs) && core.admission.may_stand();
        if allow != open {
            open = allow;
            core.raft.runtime_config().elect(allow);
            tracing::info!(
                answering = answering.len(),
                would_vote = voters_for_us.len(),
                standing = ?core.admission.standing(),
                elections = allow,
                "election gate"
            );
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
    fn reaching_learners_counts_for_nothing() {
        assert!(!majority(&set(&[1, 4, 5]), &[set(&[1, 2, 3])]));
    }
}
