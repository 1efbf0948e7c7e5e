use proptest::prelude::*;

use super::*;

fn nodes(ids: impl IntoIterator<Item = NodeId>) -> BTreeMap<NodeId, String> {
    ids.into_iter()
        .map(|id| (id, format!("n{id}:7000")))
        .collect()
}

/// A placement bootstrapped with `groups` groups of 3 over nodes 1 to `size`, the data groups
/// not formed yet.
pub(super) fn laid_out(groups: u32, size: u64) -> Placement {
    let mut placement = Placement::default();
    let command = PlacementCommand::Bootstrap {
        groups,
        replicas: 3,
        nodes: nodes(1..=size),
    };
    let (outcome, _) = placement.apply(0, command);
    assert_eq!(outcome, Ok(PlacementOutcome::Done));
    placement
}

/// [`laid_out`], with every group formed.
fn bootstrapped(groups: u32, size: u64) -> Placement {
    let mut placement = laid_out(groups, size);
    for group in 2..=groups {
        let formed = PlacementCommand::GroupFormed { group };
        assert_eq!(placement.apply(0, formed).0, Ok(PlacementOutcome::Done));
    }
    placement
}

fn reserve(name: &str, id: u128, group: Option<GroupNumber>) -> PlacementCommand {
    PlacementCommand::Reserve {
        account: "dev".into(),
        name: name.into(),
        id: Uuid::from_u128(id),
        group,
    }
}

/// The group the queue `name` was reserved in.
fn reserved(placement: &mut Placement, name: &str, id: u128) -> GroupNumber {
    match placement.apply(5, reserve(name, id, None)).0 {
        Ok(PlacementOutcome::Reserved { entry, .. }) => entry.group,
        other => panic!("unexpected {other:?}"),
    }
}

/// The groups the queues `{prefix}{i}` (with ids `i`) were reserved in, for `i` in `ids`.
fn reserved_many(
    placement: &mut Placement,
    prefix: &str,
    ids: std::ops::Range<u128>,
) -> Vec<GroupNumber> {
    let names = ids.map(|i| (format!("{prefix}{i}"), i));
    names
        .map(|(name, i)| reserved(placement, &name, i))
        .collect()
}

fn members(placement: &Placement, group: GroupNumber) -> Vec<NodeId> {
    placement.groups()[&group].members.iter().copied().collect()
}

#[test]
fn the_groups_formers_and_so_their_first_leaders_are_spread_over_the_nodes() {
    for (groups, size) in [(9, 3), (64, 3), (15, 5), (4, 5)] {
        let placement = laid_out(groups, size);
        let mut formed_by: BTreeMap<NodeId, u32> = BTreeMap::new();
        for (number, entry) in placement.groups() {
            let former = entry.former(*number).expect("a former");
            assert!(
                entry.members.contains(&former),
                "{number} formed by {former}"
            );
            *formed_by.entry(former).or_default() += 1;
        }
        let most = formed_by.values().max().copied().unwrap_or(0);
        assert!(
            most <= groups.div_ceil(size as u32) + 1,
            "{groups} groups over {size} nodes formed as {formed_by:?}"
        );
    }
}

#[test]
fn bootstrap_lays_the_metadata_group_on_every_node_and_the_data_groups_round_robin() {
    let three = laid_out(9, 3);
    for group in 1..=9 {
        assert_eq!(members(&three, group), [1, 2, 3]);
    }
    let five = laid_out(6, 5);
    assert_eq!(members(&five, METADATA_GROUP), [1, 2, 3, 4, 5]);
    let laid: Vec<Vec<NodeId>> = (2..=6).map(|g| members(&five, g)).collect();
    assert_eq!(
        laid,
        [[1, 2, 3], [1, 4, 5], [2, 3, 4], [1, 2, 5], [3, 4, 5]]
    );
    for node in 1..=5 {
        let held = laid.iter().filter(|m| m.contains(&node)).count();
        assert_eq!(held, 3, "node {node} holds its share of the data replicas");
    }
    let formed: Vec<bool> = five.groups().values().map(|g| g.formed).collect();
    assert_eq!(
        formed,
        [true, false, false, false, false, false],
        "the metadata group is formed with the cluster, the data groups later"
    );
    let one = laid_out(2, 1);
    assert_eq!(
        members(&one, 2),
        [1],
        "fewer nodes than replicas: every node"
    );
}

#[test]
fn new_queues_go_only_to_formed_groups() {
    let mut placement = laid_out(3, 3);
    let first = reserved_many(&mut placement, "q", 0..2);
    assert_eq!(first, [1, 1], "only the metadata group is formed");
    let formed = PlacementCommand::GroupFormed { group: 3 };
    assert_eq!(placement.apply(1, formed).0, Ok(PlacementOutcome::Done));
    assert_eq!(reserved(&mut placement, "q2", 2), 3);
    let (outcome, _) = placement.apply(1, reserve("given", 3, Some(2)));
    assert!(
        matches!(outcome, Ok(PlacementOutcome::Reserved { entry, .. }) if entry.group == 2),
        "a group given is taken as it is"
    );
}

#[test]
fn the_queues_held_before_the_bootstrap_are_adopted_into_the_metadata_group() {
    let mut placement = bootstrapped(3, 3);
    let held = [("dev", "old-a", 1), ("ops", "old-b", 2)];
    let changed = placement
        .adopt(held.map(|(account, name, id)| (account.into(), name.into(), Uuid::from_u128(id))));
    for (account, name, id) in held {
        let entry = placement.queue(account, name).expect("adopted");
        assert_eq!(
            (entry.id, entry.group, entry.state),
            (Uuid::from_u128(id), METADATA_GROUP, QueueEntryState::Ready)
        );
        assert!(changed.contains(&PlacementKey::Queue(Uuid::from_u128(id))));
    }
    assert_eq!(placement.queue_count(METADATA_GROUP), 2);
    let next = reserved_many(&mut placement, "new", 3..6);
    assert_eq!(next, [2, 3, 2], "new queues go to the emptier groups first");
}

#[test]
fn a_second_bootstrap_and_bad_layouts_are_refused_and_change_nothing() {
    let mut placement = bootstrapped(3, 3);
    let before = placement.clone();
    let again = PlacementCommand::Bootstrap {
        groups: 4,
        replicas: 3,
        nodes: nodes([9]),
    };
    assert_eq!(
        placement.apply(1, again),
        (Err(PlacementError::AlreadyBootstrapped), vec![])
    );
    assert_eq!(placement, before);
    for (groups, replicas, size) in [(0, 3, 3), (MAX_GROUPS + 1, 3, 3), (3, 0, 3), (3, 3, 0)] {
        let bad = PlacementCommand::Bootstrap {
            groups,
            replicas,
            nodes: nodes(1..=size),
        };
        let (outcome, changed) = Placement::default().apply(0, bad);
        assert!(
            matches!(outcome, Err(PlacementError::BadLayout { .. })),
            "{outcome:?}"
        );
        assert!(changed.is_empty());
    }
    let (outcome, _) = Placement::default().apply(0, reserve("q", 1, None));
    assert_eq!(outcome, Err(PlacementError::NotBootstrapped));
    let drain = PlacementCommand::Drain { id: 1, boot_id: 0 };
    let (outcome, _) = Placement::default().apply(0, drain);
    assert_eq!(outcome, Err(PlacementError::NotBootstrapped));
}

#[test]
fn new_queues_go_to_the_fewest_queues_then_the_fewest_messages_then_the_lowest_group() {
    let mut placement = bootstrapped(3, 3);
    let first = reserved_many(&mut placement, "q", 0..6);
    assert_eq!(first, [1, 2, 3, 1, 2, 3]);
    for (group, messages) in [(1, 50), (2, 10), (3, 30)] {
        let load = PlacementCommand::ReportLoad { group, messages };
        assert_eq!(placement.apply(6, load).0, Ok(PlacementOutcome::Done));
    }
    let next = reserved_many(&mut placement, "q", 6..9);
    assert_eq!(
        next,
        [2, 3, 1],
        "equal queue counts: the fewest messages first"
    );
    for group in 1..=3 {
        assert_eq!(placement.queue_count(group), 3);
    }
}

#[test]
fn a_name_reserved_again_answers_its_entry_and_changes_nothing() {
    let mut placement = bootstrapped(3, 3);
    let group = reserved(&mut placement, "jobs", 7);
    let before = placement.clone();
    let (outcome, changed) = placement.apply(9, reserve("jobs", 8, Some(3)));
    match outcome {
        Ok(PlacementOutcome::Reserved { entry, existing }) => {
            assert!(existing);
            assert_eq!((entry.id, entry.group), (Uuid::from_u128(7), group));
            assert_eq!(entry.state, QueueEntryState::Creating { at: 5 });
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(changed.is_empty());
    assert_eq!(placement, before);
}

#[test]
fn a_queue_given_a_group_goes_there_and_an_unknown_group_is_refused() {
    let mut placement = bootstrapped(3, 3);
    let (outcome, _) = placement.apply(1, reserve("a", 1, Some(3)));
    assert!(matches!(outcome, Ok(PlacementOutcome::Reserved { entry, .. }) if entry.group == 3));
    let (outcome, changed) = placement.apply(1, reserve("b", 2, Some(4)));
    assert_eq!(outcome, Err(PlacementError::UnknownGroup(4)));
    assert!(changed.is_empty());
    assert!(placement.queue("dev", "b").is_none());
    let (outcome, changed) = placement.apply(1, reserve("c", 1, None));
    assert_eq!(outcome, Err(PlacementError::IdInUse(Uuid::from_u128(1))));
    assert!(changed.is_empty());
}

#[test]
fn a_reservation_is_confirmed_or_released_and_a_confirmed_queue_deregistered() {
    let mut placement = bootstrapped(2, 3);
    let group = reserved(&mut placement, "kept", 1);
    reserved(&mut placement, "refused", 2);
    let id = |n| Uuid::from_u128(n);
    assert_eq!(
        placement
            .apply(2, PlacementCommand::Confirm { id: id(1) })
            .0,
        Ok(PlacementOutcome::Done)
    );
    let kept = placement.queue("dev", "kept").expect("kept");
    assert_eq!((kept.state, kept.group), (QueueEntryState::Ready, group));
    assert_eq!(
        placement
            .apply(2, PlacementCommand::Release { id: id(1) })
            .0,
        Err(PlacementError::NotReserved(id(1)))
    );
    assert_eq!(
        placement
            .apply(2, PlacementCommand::Release { id: id(2) })
            .0,
        Ok(PlacementOutcome::Done)
    );
    assert!(placement.queue("dev", "refused").is_none());
    assert_eq!(
        placement
            .apply(3, PlacementCommand::Deregister { id: id(1) })
            .0,
        Ok(PlacementOutcome::Done)
    );
    assert!(placement.queue_by_id(id(1)).is_none());
    assert_eq!((placement.queue_count(1), placement.queue_count(2)), (0, 0));
    for unknown in [
        PlacementCommand::Confirm { id: id(9) },
        PlacementCommand::Release { id: id(9) },
        PlacementCommand::Deregister { id: id(9) },
    ] {
        assert_eq!(
            placement.apply(4, unknown).0,
            Err(PlacementError::UnknownQueue(id(9)))
        );
    }
    assert_eq!(placement.epoch(), 5, "each change to the directory counts");
}

#[test]
fn a_retired_queue_keeps_its_entry_marked_until_deregistered() {
    let mut placement = bootstrapped(2, 3);
    let group = reserved(&mut placement, "gone", 1);
    let id = Uuid::from_u128(1);
    let retire = PlacementCommand::Retire { id };
    assert_eq!(
        placement.apply(2, PlacementCommand::Confirm { id }).0,
        Ok(PlacementOutcome::Done)
    );
    assert_eq!(
        placement.apply(7, retire.clone()).0,
        Ok(PlacementOutcome::Done)
    );
    let (again, changed) = placement.apply(8, retire);
    assert_eq!(
        (again, changed.len()),
        (Ok(PlacementOutcome::Done), 0),
        "retired once"
    );
    let entry = placement.queue("dev", "gone").expect("still there").clone();
    assert_eq!(
        (entry.state, entry.group),
        (QueueEntryState::Deleting { at: 7 }, group)
    );
    // A creation of the name meanwhile is told of the entry as it is, to finish the deletion.
    assert_eq!(
        placement.apply(9, reserve("gone", 2, None)).0,
        Ok(PlacementOutcome::Reserved {
            entry,
            existing: true
        })
    );
    assert_eq!(
        placement.apply(9, PlacementCommand::Release { id }).0,
        Err(PlacementError::NotReserved(id))
    );
    // A deletion its group refused confirms the entry again; the next one retires it anew.
    assert_eq!(
        placement.apply(9, PlacementCommand::Confirm { id }).0,
        Ok(PlacementOutcome::Done)
    );
    let kept = placement.queue("dev", "gone").expect("kept");
    assert_eq!(kept.state, QueueEntryState::Ready);
    let retire = PlacementCommand::Retire { id };
    assert_eq!(placement.apply(9, retire).0, Ok(PlacementOutcome::Done));
    assert_eq!(
        placement.apply(10, PlacementCommand::Deregister { id }).0,
        Ok(PlacementOutcome::Done)
    );
    assert!(placement.queue("dev", "gone").is_none());
    assert_eq!(placement.queue_count(group), 0);
}

#[test]
fn nodes_and_groups_take_their_changes_and_refuse_unknown_ones() {
    let mut placement = bootstrapped(2, 3);
    let apply = |placement: &mut Placement, command| placement.apply(1, command).0;
    use PlacementCommand as C;
    assert_eq!(
        apply(&mut placement, C::Drain { id: 2, boot_id: 77 }),
        Ok(PlacementOutcome::Done)
    );
    assert_eq!(
        placement.nodes()[&2].state,
        NodeState::Draining { boot_id: 77 }
    );
    let moved = C::AddNode {
        id: 2,
        addr: "elsewhere:7000".into(),
    };
    assert_eq!(apply(&mut placement, moved), Ok(PlacementOutcome::Done));
    assert_eq!(
        placement.nodes()[&2],
        NodeEntry {
            addr: "elsewhere:7000".into(),
            state: NodeState::Draining { boot_id: 77 }
        },
        "a new address keeps the node's state"
    );
    assert_eq!(
        apply(&mut placement, C::Undrain { id: 2 }),
        Ok(PlacementOutcome::Done)
    );
    assert_eq!(
        apply(&mut placement, C::RemoveNode { id: 3 }),
        Ok(PlacementOutcome::Done)
    );
    assert_eq!(placement.nodes()[&3].state, NodeState::Leaving);
    assert!(placement.draining(3), "a leaving node leads no group");
    let back = C::AddNode {
        id: 3,
        addr: "n3:7000".into(),
    };
    assert_eq!(apply(&mut placement, back), Ok(PlacementOutcome::Done));
    assert_eq!(
        placement.nodes()[&3].state,
        NodeState::Active,
        "a node added again after it left is active"
    );
    assert_eq!(
        apply(&mut placement, C::Undrain { id: 9 }),
        Err(PlacementError::UnknownNode(9))
    );
    let formed = C::GroupFormed { group: 2 };
    assert_eq!(apply(&mut placement, formed), Ok(PlacementOutcome::Done));
    assert!(placement.groups()[&2].formed);
    let seen = C::LeaderSeen { group: 2, node: 3 };
    assert_eq!(apply(&mut placement, seen), Ok(PlacementOutcome::Done));
    assert_eq!(placement.groups()[&2].leader_hint, Some(3));
    let to = |ids: &[NodeId]| ids.iter().copied().collect::<BTreeSet<_>>();
    let set = |members| C::SetMembers { group: 1, members };
    assert_eq!(
        apply(&mut placement, set(to(&[1, 2]))),
        Ok(PlacementOutcome::Done)
    );
    assert_eq!(members(&placement, 1), [1, 2]);
    assert_eq!(
        apply(&mut placement, set(to(&[]))),
        Err(PlacementError::NoMembers)
    );
    assert_eq!(
        apply(&mut placement, set(to(&[1, 8]))),
        Err(PlacementError::UnknownNode(8))
    );
    assert_eq!(
        placement.target(2),
        Some(&to(&[1, 2, 3])),
        "no target: the members"
    );
    let target = |group, members| C::SetTarget { group, members };
    assert_eq!(
        apply(&mut placement, target(2, to(&[2, 3]))),
        Ok(PlacementOutcome::Done)
    );
    assert_eq!(placement.target(2), Some(&to(&[2, 3])));
    assert_eq!(
        members(&placement, 2),
        [1, 2, 3],
        "the members stay until recorded"
    );
    for (refused, error) in [
        (target(2, to(&[])), PlacementError::NoMembers),
        (target(2, to(&[4])), PlacementError::UnknownNode(4)),
        (target(6, to(&[1])), PlacementError::UnknownGroup(6)),
    ] {
        assert_eq!(apply(&mut placement, refused), Err(error));
    }
    assert_eq!(placement.target(6), None);
    let unknown = C::GroupFormed { group: 5 };
    assert_eq!(
        apply(&mut placement, unknown),
        Err(PlacementError::UnknownGroup(5))
    );
}

#[test]
fn keys_read_back_and_other_rows_are_not_the_placements() {
    for key in [
        PlacementKey::Meta,
        PlacementKey::Node(u64::MAX),
        PlacementKey::Group(7),
        PlacementKey::Queue(Uuid::from_u128(3)),
        PlacementKey::Target(9),
    ] {
        assert_eq!(PlacementKey::decode(&key.encode()), Some(key));
    }
    for other in [&[][..], &[0], &[1, 2, 3], &[12, 1], &[11, 0]] {
        assert_eq!(PlacementKey::decode(other), None, "{other:?}");
    }
}

#[test]
fn a_restart_on_one_node_makes_it_every_groups_one_member_and_keeps_the_queues() {
    let mut placement = bootstrapped(4, 5);
    let queues = reserved_many(&mut placement, "q", 1..9);
    let moves = [
        PlacementCommand::SetTarget {
            group: 2,
            members: BTreeSet::from([3, 4, 5]),
        },
        PlacementCommand::Drain { id: 2, boot_id: 0 },
    ];
    for change in moves {
        assert_eq!(placement.apply(0, change).0, Ok(PlacementOutcome::Done));
    }
    placement.restart_on(7, "restored:7000");
    let restored = BTreeMap::from([(7, "restored:7000".to_string())]);
    assert_eq!(placement.addresses(), restored);
    assert!(!placement.draining(7));
    for (number, group) in placement.groups() {
        assert_eq!(members(&placement, *number), [7], "group {number}");
        assert_eq!(group.leader_hint, Some(7));
        assert!(group.formed);
        assert_eq!(placement.target(*number), Some(&BTreeSet::from([7])));
    }
    let kept: Vec<GroupNumber> = (1..9u128)
        .map(|i| {
            placement
                .queue_by_id(Uuid::from_u128(i))
                .expect("kept")
                .group
        })
        .collect();
    assert_eq!(kept, queues);
    let rows = Placement::restore(placement.export_rows()).expect("rows");
    assert_eq!(rows, placement, "its rows hold it");

    let mut empty = Placement::default();
    empty.restart_on(7, "restored:7000");
    assert_eq!(
        empty,
        Placement::default(),
        "a cluster of one group has no placement"
    );
}

/// One of the commands `pick` chooses, over small ids so that they meet.
fn command(pick: (u8, u8, u8)) -> PlacementCommand {
    let (kind, a, b) = pick;
    let id = Uuid::from_u128(u128::from(a % 6));
    let group = GroupNumber::from(b % 5);
    let node = NodeId::from(b % 5);
    match kind % 15 {
        0 => PlacementCommand::Bootstrap {
            groups: u32::from(a % 4),
            replicas: 3,
            nodes: nodes(1..=NodeId::from(b % 5)),
        },
        1 | 2 => reserve(
            &format!("q{}", a % 4),
            u128::from(a % 6),
            (b % 3 == 0).then_some(group),
        ),
        3 => PlacementCommand::Confirm { id },
        4 => PlacementCommand::Release { id },
        5 => PlacementCommand::Deregister { id },
        6 => PlacementCommand::ReportLoad {
            group,
            messages: u64::from(a),
        },
        7 => PlacementCommand::SetMembers {
            group,
            members: [node, NodeId::from(a % 5)].into(),
        },
        8 => PlacementCommand::GroupFormed { group },
        9 => PlacementCommand::LeaderSeen { group, node },
        10 => PlacementCommand::AddNode {
            id: node,
            addr: format!("a{a}"),
        },
        11 => PlacementCommand::Drain {
            id: node,
            boot_id: u64::from(a),
        },
        12 => PlacementCommand::Retire { id },
        13 => PlacementCommand::SetTarget {
            group,
            members: [node, NodeId::from(a % 5)].into(),
        },
        _ => PlacementCommand::RemoveNode { id: node },
    }
}

proptest! {
    /// A store that writes only the rows each apply reports changed, with their values then,
    /// holds exactly the placement's rows, and the placement read back from them is the same:
    /// a restarted node or a snapshot holds what the applies made.
    #[test]
    fn the_rows_an_apply_reports_keep_a_store_equal_to_the_placement(
        picks in proptest::collection::vec(any::<(u8, u8, u8)>(), 0..60),
    ) {
        let mut placement = Placement::default();
        let mut store: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (now, pick) in picks.into_iter().enumerate() {
            let (_, changed) = placement.apply(now as u64, command(pick));
            for key in changed {
                match placement.row_value(&key) {
                    Some(value) => store.insert(key.encode(), value),
                    None => store.remove(&key.encode()),
                };
            }
        }
        let exported: BTreeMap<Vec<u8>, Vec<u8>> = placement.export_rows().into_iter().collect();
        prop_assert_eq!(&store, &exported);
        let restored = Placement::restore(store).expect("rows read back");
        prop_assert_eq!(restored, placement);
    }
}
