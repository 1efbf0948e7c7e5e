//! A data group's voters brought to its target (the members the placement says it should
//! have), by its leader, one membership change at a time ([`GroupCore::converge`]): a learner
//! that is not in the target goes; a target node that is not a voter is added as a learner,
//! and made a voter once it caught up; then a voter that is not in the target goes, while the
//! voters left keep an answering majority (the leader itself hands its leadership to another
//! voter of the target first). A new member is in before an old one goes, so a group of three
//! moves through four voters and never has fewer than its target while it moves.
//!
//! [`next_step`] is that decision, a plain function of the membership and the target.

use std::collections::{BTreeMap, BTreeSet};

use openraft::ChangeMembers;
use raftq_store::NodeId;

use crate::error::NodeError;
use crate::member::membership::{keeps_majority, ANSWERED_WITHIN};
use crate::member::GroupCore;

/// The next change that brings a group's membership to its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing to change: the voters are the target, or what is left waits for a target node
    /// to answer or for a majority to answer without the voter to remove.
    Stay,
    /// Remove this learner, which is not in the target.
    DropLearner(NodeId),
    /// Add this target node as a learner, and make it a voter once it caught up.
    Add(NodeId),
    /// Remove this voter, which is not in the target.
    Remove(NodeId),
    /// This node, the leader, is not in the target: hand the leadership to a voter of it.
    HandOver(BTreeSet<NodeId>),
}

/// What a group's leader knows of the nodes when it decides its next change: the nodes that
/// answer its pings, and those the group may add a replica on now (their turn: see
/// `Placement::replica_turns`).
pub(crate) struct Reach<'a> {
    pub answering: &'a BTreeSet<NodeId>,
    pub turns: &'a BTreeSet<NodeId>,
}

/// The next change for a group whose voters are `voters` and whose members (voters and
/// learners) are `members`, towards `target`, on its leader `me`, with `reach` (see the
/// module).
pub(crate) fn next_step(
    target: &BTreeSet<NodeId>,
    voters: &BTreeSet<NodeId>,
    members: &BTreeSet<NodeId>,
    reach: &Reach<'_>,
    me: NodeId,
) -> Step {
    let answering = reach.answering;
    let mut learners = members.difference(voters);
    if let Some(learner) = learners.find(|id| !target.contains(id)) {
        return Step::DropLearner(*learner);
    }
    let mut missing = target.difference(voters);
    let added = |id: &&NodeId| answering.contains(id) && reach.turns.contains(id);
    if let Some(new) = missing.clone().find(added) {
        return Step::Add(*new);
    }
    if missing.next().is_some() {
        return Step::Stay;
    }
    let Some(old) = voters.difference(target).next() else {
        return Step::Stay;
    };
    if *old == me {
        let successors: BTreeSet<NodeId> = target.intersection(voters).copied().collect();
        return Step::HandOver(successors);
    }
    let mut after = voters.clone();
    after.remove(old);
    match keeps_majority(&after, answering) {
        true => Step::Remove(*old),
        false => Step::Stay,
    }
}

impl GroupCore {
    /// Makes the next change towards `target` ([`next_step`]) when this node leads the group
    /// and no other change runs; `turns` are the nodes the group may add a replica on now and
    /// `nodes` the peer addresses. A new member that does not catch up within `CATCH_UP` goes
    /// again (a later call tries anew).
    pub(crate) async fn converge(
        &self,
        target: &BTreeSet<NodeId>,
        turns: &BTreeSet<NodeId>,
        nodes: &BTreeMap<NodeId, String>,
    ) -> Result<(), NodeError> {
        let Ok(_running) = self.changing.try_lock() else {
            return Ok(());
        };
        let members = self.members();
        if !self.is_leader() || members.configs.len() > 1 {
            return Ok(());
        }
        let voters = members.voters();
        let all: BTreeSet<NodeId> = members.nodes.keys().copied().collect();
        let answering = self.node.answering(ANSWERED_WITHIN);
        let reach = Reach {
            answering: &answering,
            turns,
        };
        let step = next_step(target, &voters, &all, &reach, self.node.id);
        let group = self.group;
        match step {
            Step::Stay => Ok(()),
            Step::DropLearner(id) => {
                tracing::info!(%group, node = id, "removing a learner the group's target lacks");
                self.commit(ChangeMembers::RemoveNodes(BTreeSet::from([id])))
                    .await
            }
            Step::Add(id) => {
                let addr = nodes.get(&id).cloned().unwrap_or_default();
                tracing::info!(%group, node = id, addr, "adding a replica: a learner first");
                if !self.add_learner(id, &addr).await? {
                    tracing::warn!(%group, node = id, "the new replica did not catch up");
                    let gone = ChangeMembers::RemoveNodes(BTreeSet::from([id]));
                    return self.commit(gone).await;
                }
                self.commit(ChangeMembers::AddVoterIds(BTreeSet::from([id])))
                    .await?;
                tracing::info!(%group, node = id, "the new replica is a voter");
                Ok(())
            }
            Step::Remove(id) => {
                tracing::info!(%group, node = id, "removing a replica the group's target lacks");
                self.commit(ChangeMembers::RemoveVoters(BTreeSet::from([id])))
                    .await
            }
            Step::HandOver(successors) => self.hand_over(&successors, nodes).await.map(drop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    /// The step on leader `me` of voters `voters` (and learners `learners`) towards `target`,
    /// with every node but `silent` answering and every node's turn to take a replica.
    fn step(target: &[NodeId], voters: &[NodeId], learners: &[NodeId], silent: &[NodeId]) -> Step {
        step_with_turns(
            target,
            voters,
            learners,
            silent,
            &(1..=9).collect::<Vec<_>>(),
        )
    }

    /// [`step`], with the turn to take a replica of the nodes `turns` only.
    fn step_with_turns(
        target: &[NodeId],
        voters: &[NodeId],
        learners: &[NodeId],
        silent: &[NodeId],
        turns: &[NodeId],
    ) -> Step {
        let members = set(voters).union(&set(learners)).copied().collect();
        let answering = (1..=9).filter(|id| !silent.contains(id)).collect();
        let turns = set(turns);
        let reach = Reach {
            answering: &answering,
            turns: &turns,
        };
        next_step(&set(target), &set(voters), &members, &reach, 1)
    }

    #[test]
    fn a_replica_is_added_only_on_its_turn_and_nothing_goes_meanwhile() {
        assert_eq!(
            step_with_turns(&[1, 2, 4], &[1, 2, 3], &[], &[], &[]),
            Step::Stay
        );
        assert_eq!(
            step_with_turns(&[1, 2, 4, 5], &[1, 2, 3], &[], &[], &[5]),
            Step::Add(5)
        );
        assert_eq!(
            step_with_turns(&[1, 2, 4], &[1, 2, 3, 4], &[], &[], &[]),
            Step::Remove(3),
            "a replica in already needs no turn for the old one to go"
        );
    }

    #[test]
    fn a_new_member_comes_in_before_an_old_one_goes() {
        assert_eq!(step(&[1, 2, 4], &[1, 2, 3], &[], &[]), Step::Add(4));
        assert_eq!(step(&[1, 2, 4], &[1, 2, 3], &[4], &[]), Step::Add(4));
        assert_eq!(step(&[1, 2, 4], &[1, 2, 3, 4], &[], &[]), Step::Remove(3));
        assert_eq!(step(&[1, 2, 4], &[1, 2, 4], &[], &[]), Step::Stay);
    }

    #[test]
    fn a_silent_target_node_is_waited_for_and_nothing_goes_meanwhile() {
        assert_eq!(step(&[1, 2, 4], &[1, 2, 3], &[], &[4]), Step::Stay);
        assert_eq!(step(&[1, 2, 4, 5], &[1, 2, 3], &[], &[4]), Step::Add(5));
    }

    #[test]
    fn a_voter_goes_only_while_an_answering_majority_stays() {
        // Node 3 is silent: removing 2 would leave 1 and 3, one of two answering.
        assert_eq!(step(&[1, 3], &[1, 2, 3], &[], &[3]), Step::Stay);
        assert_eq!(step(&[1, 2], &[1, 2, 3], &[], &[3]), Step::Remove(3));
    }

    #[test]
    fn learners_outside_the_target_go_first_and_a_leader_outside_it_hands_over() {
        assert_eq!(
            step(&[1, 2, 3], &[1, 2, 3], &[5], &[]),
            Step::DropLearner(5)
        );
        assert_eq!(
            step(&[2, 3, 4], &[1, 2, 3, 4], &[], &[]),
            Step::HandOver(set(&[2, 3, 4]))
        );
    }
}
