//! Laying the data groups' replicas over the nodes: after a node was added, or began to leave,
//! the metadata group's leader sets each data group's target to what
//! [`Placement::replica_targets`] answers, and each group's leader then changes its voters to
//! its target, one member at a time (a new one added before an old one goes).
//!
//! The layout starts from the targets as they are and moves as few replicas as it can:
//! 1. a node that is leaving (or unknown) loses its replicas;
//! 2. a group with more than `replicas` members (or as many as there are active nodes, if
//!    fewer) gives up its members that hold the most replicas;
//! 3. a group with fewer takes the active nodes that hold the fewest;
//! 4. while one node holds two or more replicas more than another, one of its replicas moves
//!    to that node, from the lowest group that has the first and not the second.
//!
//! Each step leaves the earlier ones' rules kept, so the layout of a layout is itself: a
//! metadata leader that sets it again and again, or a new one that takes over, changes
//! nothing more once the targets are set.

use std::collections::{BTreeMap, BTreeSet};

use super::{GroupNumber, NodeId, NodeState, Placement, METADATA_GROUP};

impl Placement {
    /// The members each data group should have, `replicas` each (fewer while there are fewer
    /// active nodes), spread evenly over the active nodes (see the module).
    pub fn replica_targets(&self, replicas: usize) -> BTreeMap<GroupNumber, BTreeSet<NodeId>> {
        let active: BTreeSet<NodeId> = (self.nodes.iter())
            .filter(|(_, node)| node.state != NodeState::Leaving)
            .map(|(id, _)| *id)
            .collect();
        if active.is_empty() {
            return BTreeMap::new();
        }
        let size = replicas.min(active.len());
        let mut layout: BTreeMap<GroupNumber, BTreeSet<NodeId>> = (self.groups.keys())
            .filter(|group| **group != METADATA_GROUP)
            .filter_map(|group| {
                let target = self.target(*group)?;
                Some((*group, target.intersection(&active).copied().collect()))
            })
            .collect();
        let mut held: BTreeMap<NodeId, usize> = active.iter().map(|id| (*id, 0)).collect();
        for members in layout.values() {
            for member in members {
                *held.entry(*member).or_default() += 1;
            }
        }
        for members in layout.values_mut() {
            resize(members, size, &mut held);
        }
        while let Some((group, from, to)) = next_move(&layout, &held) {
            if let Some(members) = layout.get_mut(&group) {
                members.remove(&from);
                members.insert(to);
            }
            adjust(&mut held, from, false);
            adjust(&mut held, to, true);
        }
        layout
    }

    /// The replicas the data groups may add now, as (group, node): for each node of `answering`,
    /// the first `limit` groups, in group order, whose target has it and whose members do not.
    /// A node then takes at most `limit` new replicas at once (each a snapshot to receive and a
    /// log to catch up), and a node that does not answer holds no group back from adding
    /// another.
    pub fn replica_turns(
        &self,
        answering: &BTreeSet<NodeId>,
        limit: usize,
    ) -> BTreeSet<(GroupNumber, NodeId)> {
        let mut taken: BTreeMap<NodeId, usize> = BTreeMap::new();
        let mut turns = BTreeSet::new();
        for (group, entry) in self.groups.iter().filter(|(g, _)| **g != METADATA_GROUP) {
            let Some(target) = self.target(*group) else {
                continue;
            };
            for node in target.difference(&entry.members) {
                let count = taken.entry(*node).or_default();
                if answering.contains(node) && *count < limit {
                    *count += 1;
                    turns.insert((*group, *node));
                }
            }
        }
        turns
    }

    /// The data groups that have node `id` among their members or their target: those whose
    /// replica it holds, or is still to take or give up.
    pub fn holding(&self, id: NodeId) -> Vec<GroupNumber> {
        let groups = self.groups.iter().filter(|(group, entry)| {
            **group != METADATA_GROUP
                && (entry.members.contains(&id)
                    || self.targets.get(group).is_some_and(|t| t.contains(&id)))
        });
        groups.map(|(group, _)| *group).collect()
    }
}

/// Gives `members` exactly `size` members: drops those that hold the most replicas (then the
/// highest ids), or adds the nodes of `held` that hold the fewest (then the lowest ids).
fn resize(members: &mut BTreeSet<NodeId>, size: usize, held: &mut BTreeMap<NodeId, usize>) {
    while members.len() > size {
        let most = members
            .iter()
            .max_by_key(|id| (held.get(id), **id))
            .copied();
        let Some(most) = most else { break };
        members.remove(&most);
        adjust(held, most, false);
    }
    while members.len() < size {
        let candidates = held.iter().filter(|(id, _)| !members.contains(id));
        let fewest = candidates.min_by_key(|(id, count)| (**count, **id));
        let Some((&fewest, _)) = fewest else { break };
        members.insert(fewest);
        adjust(held, fewest, true);
    }
}

/// The move that evens the replicas out: from the node holding the most to the node holding
/// the fewest, when they differ by two or more, out of the lowest group that has the first and
/// not the second; `None` once no two nodes differ by more than one.
fn next_move(
    layout: &BTreeMap<GroupNumber, BTreeSet<NodeId>>,
    held: &BTreeMap<NodeId, usize>,
) -> Option<(GroupNumber, NodeId, NodeId)> {
    let (&from, &most) = held.iter().max_by_key(|(id, count)| (**count, **id))?;
    let (&to, &fewest) = held.iter().min_by_key(|(id, count)| (**count, **id))?;
    if most < fewest + 2 {
        return None;
    }
    // `from` holds at least two more replicas than `to`, so some group has it and not `to`.
    let group = layout
        .iter()
        .find(|(_, members)| members.contains(&from) && !members.contains(&to))?;
    Some((*group.0, from, to))
}

fn adjust(held: &mut BTreeMap<NodeId, usize>, node: NodeId, up: bool) {
    let count = held.entry(node).or_default();
    *count = match up {
        true => *count + 1,
        false => count.saturating_sub(1),
    };
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::tests::laid_out;
    use super::super::{PlacementCommand, PlacementOutcome};
    use super::*;

    fn apply(placement: &mut Placement, command: PlacementCommand) {
        assert_eq!(placement.apply(0, command).0, Ok(PlacementOutcome::Done));
    }

    fn add(placement: &mut Placement, id: NodeId) {
        let addr = format!("n{id}:7000");
        apply(placement, PlacementCommand::AddNode { id, addr });
    }

    /// Sets every target the layout answers, and makes every group's members its target (as
    /// the groups' leaders would); returns how many replicas moved.
    fn settle(placement: &mut Placement) -> usize {
        let mut moved = 0;
        for (group, members) in placement.replica_targets(3) {
            let before = &placement.groups()[&group].members;
            moved += members.difference(before).count();
            let target = members.clone();
            apply(placement, PlacementCommand::SetTarget { group, members });
            let members = target;
            apply(placement, PlacementCommand::SetMembers { group, members });
        }
        moved
    }

    /// Replicas held per node, over the data groups' members.
    fn held(placement: &Placement) -> BTreeMap<NodeId, usize> {
        let mut held: BTreeMap<NodeId, usize> = BTreeMap::new();
        for (group, entry) in placement.groups() {
            for member in entry.members.iter().filter(|_| *group != METADATA_GROUP) {
                *held.entry(*member).or_default() += 1;
            }
        }
        held
    }

    #[test]
    fn a_bootstrap_lays_the_replicas_out_evenly_already() {
        for (groups, size) in [(4, 3), (9, 3), (10, 5), (2, 1), (4, 5), (7, 4), (64, 5)] {
            let mut placement = laid_out(groups, size);
            let before = placement.groups().clone();
            assert_eq!(settle(&mut placement), 0, "{groups} groups on {size} nodes");
            assert_eq!(placement.groups(), &before);
        }
    }

    #[test]
    fn added_nodes_take_an_even_share_of_the_replicas_with_few_moves() {
        // Nine data groups of three on three nodes: nine replicas each.
        let mut placement = laid_out(10, 3);
        add(&mut placement, 4);
        add(&mut placement, 5);
        let moved = settle(&mut placement);
        let held = held(&placement);
        assert_eq!(held.len(), 5, "every node holds replicas: {held:?}");
        assert!(held.values().all(|n| (5..=6).contains(n)), "{held:?}");
        // 27 replicas over 5 nodes: the new nodes take 5 or 6 each and nothing else moves.
        assert!((10..=12).contains(&moved), "{moved} moved");
        for entry in placement.groups().values() {
            assert_eq!(entry.members.len(), 3);
        }
        assert_eq!(settle(&mut placement), 0, "settled layouts stay");
    }

    #[test]
    fn a_leaving_node_gives_up_every_replica_and_a_returning_one_takes_its_share_again() {
        let mut placement = laid_out(7, 4);
        apply(&mut placement, PlacementCommand::RemoveNode { id: 2 });
        assert_eq!(placement.holding(2).len(), 5, "until its replicas move");
        settle(&mut placement);
        let left = held(&placement);
        assert_eq!(left.get(&2), None, "node 2 holds no replica: {left:?}");
        assert_eq!(placement.holding(2), Vec::<GroupNumber>::new());
        assert!(!placement.holding(1).is_empty());
        assert!(left.values().all(|n| *n == 6), "{left:?}");
        add(&mut placement, 2);
        settle(&mut placement);
        let back = held(&placement);
        assert!(back.values().all(|n| (4..=5).contains(n)), "{back:?}");
        assert_eq!(back.len(), 4);
    }

    /// The data groups whose target has `node` and whose members do not, in order.
    fn waiting(placement: &Placement, node: NodeId) -> Vec<GroupNumber> {
        let groups = placement.groups().iter().filter(|(g, e)| {
            let targeted = placement.target(**g).is_some_and(|t| t.contains(&node));
            targeted && !e.members.contains(&node)
        });
        groups.map(|(g, _)| *g).collect()
    }

    #[test]
    fn a_node_takes_a_few_new_replicas_at_a_time_and_a_silent_one_holds_none_back() {
        let mut placement = laid_out(10, 3);
        add(&mut placement, 4);
        add(&mut placement, 5);
        for (group, members) in placement.replica_targets(3) {
            apply(
                &mut placement,
                PlacementCommand::SetTarget { group, members },
            );
        }
        let everyone = BTreeSet::from([1, 2, 3, 4, 5]);
        let turns = placement.replica_turns(&everyone, 2);
        let to = |node: NodeId| -> Vec<GroupNumber> {
            (turns.iter())
                .filter(|(_, n)| *n == node)
                .map(|(g, _)| *g)
                .collect()
        };
        for node in [4, 5] {
            assert!(
                waiting(&placement, node).len() > 2,
                "node {node} is to take more than two"
            );
            assert_eq!(
                to(node),
                waiting(&placement, node)[..2],
                "the lowest two groups first"
            );
        }
        assert_eq!(turns.len(), 4, "no other node takes a replica: {turns:?}");
        let without_4 = placement.replica_turns(&BTreeSet::from([1, 2, 3, 5]), 2);
        assert!(without_4.iter().all(|(_, n)| *n == 5), "{without_4:?}");
        assert_eq!(without_4.len(), 2);

        // Once a group's member is recorded, the next group takes its turn.
        let (first, _) = *turns.iter().find(|(_, n)| *n == 4).expect("a turn");
        let mut members = placement.groups()[&first].members.clone();
        members.insert(4);
        apply(
            &mut placement,
            PlacementCommand::SetMembers {
                group: first,
                members,
            },
        );
        let next: Vec<GroupNumber> = (placement.replica_turns(&everyone, 2).iter())
            .filter(|(_, n)| *n == 4)
            .map(|(g, _)| *g)
            .collect();
        assert_eq!(next, waiting(&placement, 4)[..2]);
        assert!(!next.contains(&first));
    }

    #[test]
    fn groups_shrink_to_the_active_nodes_and_grow_back_with_them() {
        let mut placement = laid_out(4, 3);
        apply(&mut placement, PlacementCommand::RemoveNode { id: 3 });
        settle(&mut placement);
        for group in 2..=4 {
            let members = &placement.groups()[&group].members;
            assert_eq!(members, &BTreeSet::from([1, 2]), "group {group}");
        }
        add(&mut placement, 3);
        settle(&mut placement);
        for group in 2..=4 {
            let members = &placement.groups()[&group].members;
            assert_eq!(members, &BTreeSet::from([1, 2, 3]), "group {group}");
        }
    }

    proptest! {
        /// Whatever nodes join and leave, the layout gives every group `min(3, active)` active
        /// members, no node two replicas more than another, and is its own layout.
        #[test]
        fn the_layout_is_even_and_a_fixed_point(
            groups in 2u32..20,
            size in 1u64..6,
            changes in proptest::collection::vec((1u64..8, any::<bool>()), 0..8),
        ) {
            let mut placement = laid_out(groups, size);
            for (id, joins) in changes {
                let active = |placement: &Placement| -> BTreeSet<NodeId> {
                    (placement.nodes().iter())
                        .filter(|(_, n)| n.state != NodeState::Leaving)
                        .map(|(id, _)| *id)
                        .collect()
                };
                let others = active(&placement).into_iter().filter(|n| *n != id).count();
                match joins {
                    true => add(&mut placement, id),
                    // The last active node is never removed (it is the last voter).
                    false if placement.nodes().contains_key(&id) && others > 0 => {
                        apply(&mut placement, PlacementCommand::RemoveNode { id });
                    }
                    false => {}
                }
                let active = active(&placement);
                settle(&mut placement);
                for (group, entry) in placement.groups() {
                    if *group == METADATA_GROUP {
                        continue;
                    }
                    prop_assert_eq!(entry.members.len(), active.len().min(3));
                    prop_assert!(entry.members.is_subset(&active));
                }
                let held = held(&placement);
                let counts = active.iter().map(|id| held.get(id).copied().unwrap_or(0));
                let (low, high) = (counts.clone().min(), counts.max());
                prop_assert!(high.unwrap_or(0) <= low.unwrap_or(0) + 1, "{:?}", held);
                prop_assert_eq!(settle(&mut placement), 0);
            }
        }
    }
}
