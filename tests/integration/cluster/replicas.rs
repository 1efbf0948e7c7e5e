//! Membership changes in a cluster of several groups: the data groups' replicas move onto added
//! nodes and off removed ones, and a node whose data was lost is replaced in every group.

use std::collections::BTreeSet;

use raftq_node::call_peer;
use raftq_store::GroupId;

use super::*;

impl Cluster {
    /// Waits until node `via`'s placement shows every data group with its members equal to its
    /// target, of `size` members each, over the nodes `over` only, each of which holds a
    /// replica, no node more than `most`, and every running node running a replica, and
    /// keeping the files, exactly of the groups it is a member of. Returns the groups of each
    /// node.
    pub(super) async fn replicas_settled(
        &self,
        via: u64,
        size: usize,
        over: &[u64],
        most: usize,
    ) -> BTreeMap<u64, Vec<u32>> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let placement = self.placement(via);
            let mut held: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
            let mut settled = true;
            for (group, entry) in placement.groups().iter().filter(|(g, _)| **g != 1) {
                settled &= placement.target(*group) == Some(&entry.members);
                settled &= entry.members.len() == size;
                for member in &entry.members {
                    held.entry(*member).or_default().push(*group);
                }
            }
            let nodes: Vec<u64> = held.keys().copied().collect();
            settled &= nodes == over && held.values().all(|groups| groups.len() <= most);
            for (id, node) in &self.nodes {
                for group in placement.groups().keys().filter(|g| **g != 1) {
                    let member = held.get(id).is_some_and(|groups| groups.contains(group));
                    settled &= node.raft_of(GroupId(*group)).is_ok() == member;
                    // A node keeps the files of the groups it holds only.
                    let files = format!("node-{id}/groups/{group}");
                    settled &= self.dir.path().join(files).exists() == member;
                }
            }
            if settled {
                return held;
            }
            let running: BTreeMap<u64, Vec<u32>> = (self.nodes.iter())
                .map(|(id, node)| {
                    let groups = placement.groups().keys();
                    let groups = groups.filter(|g| node.raft_of(GroupId(**g)).is_ok());
                    (*id, groups.copied().collect())
                })
                .collect();
            assert!(
                Instant::now() < deadline,
                "replicas not settled: {held:?}, targets {:?}, running {running:?}",
                placement
                    .groups()
                    .keys()
                    .map(|g| placement.target(*g))
                    .collect::<Vec<_>>()
            );
            sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until every running node sees exactly `voters` as the voters of every group that
    /// it runs and whose placement members are `voters`' nodes.
    async fn group_voters_are(&self, group: GroupId, voters: &BTreeSet<u64>) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen: Vec<BTreeSet<u64>> = (self.nodes.values())
                .filter_map(|n| n.raft_of(group).ok())
                .map(|raft| {
                    let m = raft.metrics().borrow().clone();
                    m.membership_config.membership().voter_ids().collect()
                })
                .collect();
            if !seen.is_empty() && seen.iter().all(|v| v == voters) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "group {group}: voters {seen:?}, not {voters:?}"
            );
            sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Runs `test` within four minutes on the cluster and queues of [`three_nodes_with_queues`].
async fn on_three_nodes_with_queues(
    groups: u32,
    count: usize,
    messages: usize,
    test: impl AsyncFnOnce(&mut Cluster, BTreeMap<String, u32>),
) {
    within(Duration::from_secs(240), async {
        let (mut cluster, queues) = three_nodes_with_queues(groups, count, messages).await;
        test(&mut cluster, queues).await;
    })
    .await;
}

/// Three nodes of `groups` groups, once formed, with queues `q0` to `q{count - 1}` made through
/// node 1 (spread over the groups by the placement), `messages` messages each; returns each
/// queue's group too.
async fn three_nodes_with_queues(
    groups: u32,
    count: usize,
    messages: usize,
) -> (Cluster, BTreeMap<String, u32>) {
    let cluster = Cluster::start_groups(3, groups).await;
    cluster.formed(1).await;
    let node = cluster.node(1);
    let mut queues = BTreeMap::new();
    for i in 0..count {
        let name = format!("q{i}");
        create_and_fill(node, &name, messages).await;
        let deadline = Instant::now() + Duration::from_secs(5);
        let group = loop {
            if let Some(entry) = cluster.placement(1).queue(ACCOUNT, &name) {
                break entry.group;
            }
            assert!(Instant::now() < deadline, "{name} not in the directory");
            sleep(Duration::from_millis(20)).await;
        };
        queues.insert(name, group);
    }
    (cluster, queues)
}

/// Every queue of `queues` holds `visible` messages, read through node `via`.
pub(super) async fn every_queue_holds(
    cluster: &Cluster,
    via: u64,
    queues: &BTreeMap<String, u32>,
    visible: u64,
) {
    for name in queues.keys() {
        let seen = stats(cluster.node(via), name).await.visible;
        assert_eq!(seen, visible, "{name} through node {via}");
    }
}

/// Sends one message to every queue of `queues` through node `via`.
async fn send_to_every_queue(cluster: &Cluster, via: u64, queues: &BTreeMap<String, u32>) {
    for name in queues.keys() {
        send_plain(cluster.node(via), name, "after").await;
    }
}

/// Nodes 4 and 5 added to three nodes of four groups take their share of the data groups'
/// replicas (each group moving through a new member before an old one goes) and of their
/// leaders; a removed node gives its replicas up before it leaves, and every queue keeps its
/// messages throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn added_nodes_take_their_share_of_the_replicas_and_a_removed_node_gives_its_up() {
    on_three_nodes_with_queues(4, 6, 5, async |cluster, queues| {
        let groups: BTreeSet<u32> = queues.values().copied().collect();
        assert!(groups.len() >= 3, "the queues spread: {queues:?}");
        for id in [4, 5] {
            let addr = cluster.launch_joining(id).await;
            change(cluster.node(2), add(id, &addr))
                .await
                .unwrap_or_else(|e| panic!("node {id} added: {e}"));
        }
        // Nine replicas of the three data groups over five nodes: at most two each.
        cluster.replicas_settled(1, 3, &[1, 2, 3, 4, 5], 2).await;
        for (group, entry) in cluster.placement(3).groups() {
            let voters = &entry.members;
            cluster.group_voters_are(GroupId(*group), voters).await;
        }
        every_queue_holds(cluster, 5, &queues, 5).await;

        // Node 1 leaves: its replicas move first, then it leaves group 1.
        change(cluster.node(3), Change::Remove { id: 1 })
            .await
            .expect("node 1 removed");
        cluster.stop(1).await;
        cluster.voters_are(&[2, 3, 4, 5]).await;
        cluster.replicas_settled(2, 3, &[2, 3, 4, 5], 3).await;
        send_to_every_queue(cluster, 4, &queues).await;
        every_queue_holds(cluster, 2, &queues, 6).await;
    })
    .await;
}

/// A node made a voter of group 1 by an add that stopped before the placement recorded it (the
/// add's first step alone, here: the learner added, told it was admitted, made a voter) is
/// recorded by group 1's leader, and takes its share of the data groups' replicas as an added
/// node does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_voter_the_placement_lacks_is_recorded_and_takes_its_replicas() {
    on_three_nodes_with_queues(4, 6, 2, async |cluster, queues| {
        let leader = cluster.leader().await;
        let addr = cluster.launch_joining(4).await;
        let raft = cluster.node(leader).raft();
        let learner = openraft::BasicNode::new(addr);
        raft.add_learner(4, learner.clone(), true)
            .await
            .expect("a learner");
        let cluster_id = cluster.node(leader).status().await.cluster_id;
        let admit = PeerMethod::Admit;
        call_peer(
            &learner.addr,
            None,
            cluster_id,
            Some(PEER_PROTOCOL),
            admit,
            leader,
        )
        .await
        .expect("admitted");
        raft.change_membership([1, 2, 3, 4], false)
            .await
            .expect("a voter");
        cluster.voters_are(&[1, 2, 3, 4]).await;
        // Nine replicas of the three data groups over four nodes: at most three each.
        cluster.replicas_settled(1, 3, &[1, 2, 3, 4], 3).await;
        let placement = cluster.placement(2);
        assert!(placement.addresses().contains_key(&4), "node 4 recorded");
        let first = placement.groups().get(&1).map(|g| g.members.clone());
        assert_eq!(first, Some(BTreeSet::from([1, 2, 3, 4])));
        every_queue_holds(cluster, 4, &queues, 2).await;
    })
    .await;
}

/// A node of three whose data was lost is replaced (removed, then added again): the data
/// groups shrink to the two nodes left meanwhile and grow back onto it, so that with another
/// node stopped afterwards every group elects with its vote and keeps every message.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_lost_its_data_is_replaced_in_every_group() {
    on_three_nodes_with_queues(3, 4, 3, async |cluster, queues| {
        let lost = 3;
        cluster.stop(lost).await;
        std::fs::remove_dir_all(cluster.dir.path().join(format!("node-{lost}"))).expect("wipe");
        cluster.restart(lost).await;
        let addr = cluster.peers[&lost].clone();
        change(cluster.node(1), Change::Remove { id: lost })
            .await
            .expect("removed");
        cluster.replicas_settled(1, 2, &[1, 2], 2).await;
        change(cluster.node(1), add(lost, &addr))
            .await
            .expect("added back");
        cluster.voters_are(&[1, 2, 3]).await;
        cluster.replicas_settled(1, 3, &[1, 2, 3], 2).await;
        for group in 2..=3 {
            cluster
                .group_voters_are(GroupId(group), &BTreeSet::from([1, 2, 3]))
                .await;
        }
        // The two left of groups 1 to 3 need the replaced node's vote.
        cluster.stop(1).await;
        every_queue_holds(cluster, lost, &queues, 3).await;
        send_to_every_queue(cluster, 2, &queues).await;
        every_queue_holds(cluster, lost, &queues, 4).await;
    })
    .await;
}
