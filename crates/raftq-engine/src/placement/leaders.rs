//! Keeping the groups' leaders spread over the nodes: no node should lead more than
//! ceil(G / N) of the G groups over the N nodes not draining. A node that leads more hands one
//! group over to a member of it that leads fewer (and answers); a hand-over from a node above
//! the cap to one below it leaves neither above it, so moves stop once every node is at or
//! below the cap and a leader is moved again only when an election moved others (a node
//! stopped or came back). A draining node hands every group it leads over, each to the member
//! not draining that leads the fewest, and no group goes to it.
//!
//! Each node decides for the groups it leads, from what it knows of the others' leaders (the
//! placement's last word of each group's leader, or its own replica's), so no node orders
//! another: [`Placement::leader_move`] is that decision, a plain function of what it is given.

use std::collections::{BTreeMap, BTreeSet};

use super::{GroupNumber, NodeId, NodeState, Placement};

impl Placement {
    /// Whether node `id` is draining, or leaving the cluster: it is to lead no group.
    pub fn draining(&self, id: NodeId) -> bool {
        let state = self.nodes.get(&id).map(|node| node.state);
        matches!(state, Some(NodeState::Draining { .. } | NodeState::Leaving))
    }

    /// The most groups one node should lead: the groups shared out evenly over the nodes not
    /// draining, rounded up; `None` before the bootstrap.
    pub fn leader_cap(&self) -> Option<usize> {
        let nodes = self.nodes.keys().filter(|id| !self.draining(**id)).count();
        (nodes > 0 && !self.groups.is_empty()).then(|| self.groups.len().div_ceil(nodes))
    }

    /// The groups node `me` should hand over, and to whom, given each group's leader as it
    /// knows them (`leaders`) and the nodes that answer it (`answering`):
    /// - draining, every group it leads that has a member in `answering` not draining, each to
    ///   the one of those that leads the fewest (then the lowest id);
    /// - leading more than [`Placement::leader_cap`], its first group (in order) with such a
    ///   member that leads fewer than the cap, to the one of those that leads the fewest;
    /// - else none.
    pub fn leader_moves(
        &self,
        leaders: &BTreeMap<GroupNumber, NodeId>,
        me: NodeId,
        answering: &BTreeSet<NodeId>,
    ) -> Vec<(GroupNumber, NodeId)> {
        let Some(cap) = self.leader_cap() else {
            return Vec::new();
        };
        let mut led: BTreeMap<NodeId, usize> = BTreeMap::new();
        for leader in leaders.values() {
            *led.entry(*leader).or_insert(0) += 1;
        }
        let count = |node: &NodeId| led.get(node).copied().unwrap_or(0);
        let draining = self.draining(me);
        if !draining && count(&me) <= cap {
            return Vec::new();
        }
        let takes = |node: &NodeId| {
            *node != me
                && answering.contains(node)
                && !self.draining(*node)
                && (draining || count(node) < cap)
        };
        let mine = leaders.iter().filter(|(_, leader)| **leader == me);
        let moves = mine.filter_map(|(group, _)| {
            let members = &self.groups.get(group)?.members;
            let to = members.iter().filter(|node| takes(node));
            let to = to.min_by_key(|node| (count(node), **node))?;
            Some((*group, *to))
        });
        moves.take(if draining { usize::MAX } else { 1 }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::laid_out;
    use super::super::{PlacementCommand, PlacementOutcome};
    use super::*;

    fn every(size: u64) -> BTreeSet<NodeId> {
        (1..=size).collect()
    }

    /// Applies the moves the nodes decide, one at a time in node order, until none decides
    /// one; returns how many leaders moved.
    fn settle(placement: &Placement, leaders: &mut BTreeMap<GroupNumber, NodeId>) -> usize {
        let mut moves = 0;
        let nodes: Vec<NodeId> = placement.nodes().keys().copied().collect();
        let answering = every(nodes.len() as u64);
        while let Some((group, to)) = (nodes.iter()).find_map(|me| {
            placement
                .leader_moves(leaders, *me, &answering)
                .first()
                .copied()
        }) {
            assert_ne!(
                leaders.get(&group),
                Some(&to),
                "a move to the leader itself"
            );
            leaders.insert(group, to);
            moves += 1;
            assert!(moves <= leaders.len(), "the moves do not stop: {leaders:?}");
        }
        moves
    }

    fn most_led(leaders: &BTreeMap<GroupNumber, NodeId>) -> usize {
        let mut led: BTreeMap<NodeId, usize> = BTreeMap::new();
        for leader in leaders.values() {
            *led.entry(*leader).or_insert(0) += 1;
        }
        led.into_values().max().unwrap_or(0)
    }

    #[test]
    fn the_cap_is_the_groups_shared_out_over_the_nodes_rounded_up() {
        assert_eq!(Placement::default().leader_cap(), None);
        assert_eq!(laid_out(9, 3).leader_cap(), Some(3));
        assert_eq!(laid_out(9, 5).leader_cap(), Some(2));
        assert_eq!(laid_out(4, 5).leader_cap(), Some(1));
    }

    #[test]
    fn a_node_at_or_below_the_cap_moves_nothing() {
        let placement = laid_out(9, 3);
        let leaders: BTreeMap<GroupNumber, NodeId> =
            (1..=9).map(|g| (g, u64::from(g % 3) + 1)).collect();
        for me in 1..=3 {
            assert_eq!(placement.leader_moves(&leaders, me, &every(3)), []);
        }
    }

    #[test]
    fn a_node_that_came_back_gets_its_share_and_nothing_moves_twice() {
        let placement = laid_out(9, 3);
        // Node 3 was down: nodes 1 and 2 lead everything between them.
        let mut leaders: BTreeMap<GroupNumber, NodeId> =
            (1..=9).map(|g| (g, if g <= 5 { 1 } else { 2 })).collect();
        let before = leaders.clone();
        let moves = settle(&placement, &mut leaders);
        assert_eq!(most_led(&leaders), 3, "{leaders:?}");
        // Only groups of the nodes above the cap moved, each once: node 1 led 5 (2 over the
        // cap), node 2 led 4 (1 over).
        assert_eq!(moves, 3);
        let moved = before.iter().filter(|(g, l)| leaders[*g] != **l).count();
        assert_eq!(moved, 3);
        assert_eq!(settle(&placement, &mut leaders), 0, "settled stays settled");
    }

    #[test]
    fn a_move_goes_only_to_a_member_of_the_group_that_answers() {
        let placement = laid_out(4, 5);
        let members = |g: GroupNumber| placement.groups()[&g].members.clone();
        // Node 1 leads everything; the cap is 1.
        let leaders: BTreeMap<GroupNumber, NodeId> = (1..=4).map(|g| (g, 1)).collect();
        let moves = placement.leader_moves(&leaders, 1, &every(5));
        let [(group, to)] = moves[..] else {
            panic!("one move at a time: {moves:?}");
        };
        assert!(members(group).contains(&to) && to != 1);
        // Nobody but node 1 answers: nowhere to go.
        assert_eq!(
            placement.leader_moves(&leaders, 1, &BTreeSet::from([1])),
            []
        );
        // Only node 5 answers: a group node 5 is a member of goes to it.
        let answering = BTreeSet::from([1, 5]);
        let moves = placement.leader_moves(&leaders, 1, &answering);
        let [(group, 5)] = moves[..] else {
            panic!("a move to node 5: {moves:?}");
        };
        assert!(members(group).contains(&5));
    }

    #[test]
    fn any_start_settles_within_the_cap() {
        for (groups, size) in [(9, 3), (15, 5), (4, 3), (16, 5), (3, 3)] {
            let placement = laid_out(groups, size);
            for seed in 0..size {
                // Every group led by one node, or by nodes in turn from an offset.
                let mut all_one: BTreeMap<GroupNumber, NodeId> =
                    (1..=groups).map(|g| (g, seed + 1)).collect();
                settle(&placement, &mut all_one);
                assert!(
                    most_led(&all_one) <= placement.leader_cap().unwrap_or(0),
                    "{groups} groups over {size}: {all_one:?}"
                );
            }
        }
    }

    #[test]
    fn a_draining_node_hands_every_group_over_and_gets_none() {
        let mut placement = laid_out(6, 3);
        let drain = PlacementCommand::Drain { id: 1, boot_id: 0 };
        assert_eq!(placement.apply(0, drain).0, Ok(PlacementOutcome::Done));
        assert!(placement.draining(1) && !placement.draining(2));
        assert_eq!(
            placement.leader_cap(),
            Some(3),
            "6 groups over the 2 others"
        );
        // Node 1 leads two groups, under any cap: it hands both over, to nodes 2 and 3 only.
        let mut leaders: BTreeMap<GroupNumber, NodeId> =
            BTreeMap::from([(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (6, 3)]);
        let moves = placement.leader_moves(&leaders, 1, &every(3));
        assert_eq!(moves.len(), 2, "{moves:?}");
        for (group, to) in moves {
            assert!(to != 1 && placement.groups()[&group].members.contains(&to));
            leaders.insert(group, to);
        }
        settle(&placement, &mut leaders);
        assert!(!leaders.values().any(|l| *l == 1), "{leaders:?}");
        assert!(most_led(&leaders) <= 3);
        let undrain = PlacementCommand::Undrain { id: 1 };
        assert_eq!(placement.apply(0, undrain).0, Ok(PlacementOutcome::Done));
        settle(&placement, &mut leaders);
        assert!(
            most_led(&leaders) <= 2,
            "node 1 takes its share again: {leaders:?}"
        );
    }
}
