//! Clusters of several Raft groups: the metadata group (1) lays out the data groups, each
//! formed once by its former; each group elects, replicates and applies on its own over
//! the nodes' shared connections, and keeps its state apart from the others'.

use std::collections::BTreeSet;

use raftq_engine::placement::{GroupEntry, Placement, PlacementCommand};
use raftq_store::GroupId;

use super::*;

const GROUPS: u32 = 3;

impl Cluster {
    /// The leader of `group` all running nodes agree on.
    pub(super) async fn leader_of(&self, group: GroupId) -> u64 {
        self.leader_apart_from(group, None).await
    }

    /// The leader of `group` that the running nodes taking part in it, other than `away`,
    /// agree on (`away` not among the candidates), once they do.
    async fn leader_apart_from(&self, group: GroupId, away: Option<u64>) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let leaders: Vec<Option<u64>> = (self.nodes.iter())
                .filter(|(id, _)| Some(**id) != away)
                .filter_map(|(_, n)| n.raft_of(group).ok())
                .map(|raft| raft.metrics().borrow().current_leader)
                .collect();
            if let Some(Some(l)) = leaders.first() {
                let agreed = leaders.iter().all(|x| x == &Some(*l));
                if agreed && self.nodes.contains_key(l) && Some(*l) != away {
                    return *l;
                }
            }
            assert!(
                Instant::now() < deadline,
                "group {group}: no leader: {leaders:?}"
            );
            sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every running node taking part in `group` holds the same state of it, and
    /// at least `members` nodes do; returns it.
    async fn converged_in(&self, group: GroupId, members: usize) -> (Option<u64>, String) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let digests: Vec<_> = (self.nodes.values())
                .filter_map(|n| n.digest_of(group).ok())
                .collect();
            if digests.len() >= members && digests.windows(2).all(|w| w[0] == w[1]) {
                return digests[0].clone();
            }
            assert!(
                Instant::now() < deadline,
                "group {group}: states differ: {digests:?}"
            );
            sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until node 1's placement names the leader of `group` as its leader (the leader
    /// as the nodes agree on it then: leaders move while they spread over the nodes).
    async fn hinted(&self, group: GroupId) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let hint = self.placement(1).groups()[&group.0].leader_hint;
            if hint == Some(self.leader_of(group).await) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "group {group}: leader hint {hint:?}"
            );
            sleep(Duration::from_millis(50)).await;
        }
    }

    /// The placement node `id` applied.
    pub(super) fn placement(&self, id: u64) -> Placement {
        let node = self.node(id);
        node.with_engine(|engine| engine.placement().clone())
            .expect("the applied state")
    }

    /// Waits until node `id`'s placement shows every data group formed; returns the groups.
    pub(super) async fn formed(&self, id: u64) -> BTreeMap<u32, GroupEntry> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let groups = self.placement(id).groups().clone();
            if groups.len() == self.groups as usize && groups.values().all(|g| g.formed) {
                return groups;
            }
            assert!(Instant::now() < deadline, "groups not formed: {groups:?}");
            sleep(Duration::from_millis(50)).await;
        }
    }
}

fn every_group() -> impl Iterator<Item = GroupId> {
    (1..=GROUPS).map(GroupId)
}

/// Creates queue `name` in `group` through `node`, reserved in the directory with that group
/// first (as the router creates a queue, with the group given).
pub(super) async fn create_in(node: &Node, group: GroupId, name: &str) {
    let id = Uuid::new_v4();
    let reserve = PlacementCommand::Reserve {
        account: ACCOUNT.into(),
        name: name.into(),
        id,
        group: Some(group.0),
    };
    let reserved = node.write_in(GroupId::FIRST, Command::Place { change: reserve });
    outcome(reserved.await.expect("reserve"));
    let create = Command::CreateQueue {
        account: ACCOUNT.into(),
        queue_id: id,
        name: name.into(),
        attributes: QueueAttributes::default(),
    };
    let created = node.write_in(group, create).await;
    outcome(created.unwrap_or_else(|e| panic!("group {group}: create: {e}")));
}

/// Creates queue `q{group}` in each group and sends `count` messages to it, through `via`.
async fn fill(cluster: &Cluster, via: u64, count: usize) {
    for group in every_group() {
        let name = format!("q{group}");
        let node = cluster.node(via);
        create_in(node, group, &name).await;
        for i in 0..count {
            node.write_in(group, plain(&name, &format!("m{i}")))
                .await
                .unwrap_or_else(|e| panic!("group {group}: send: {e}"));
        }
    }
}

/// The counters of queue `name` in `group`, read through `node`: `None` when the group holds
/// no such queue.
pub(super) async fn stats_in(node: &Node, group: GroupId, name: &str) -> Option<QueueStats> {
    let query = Query::Stats {
        account: ACCOUNT.into(),
        queue: name.into(),
    };
    match node.read_in(group, query).await {
        Ok(Ok(QueryResult::Stats(stats))) => Some(*stats),
        Ok(Err(EngineError::QueueNotFound(_))) => None,
        other => panic!("group {group}: unexpected {other:?}"),
    }
}

#[tokio::test]
async fn groups_elect_replicate_and_keep_their_state_apart() {
    within(Duration::from_secs(60), async {
        let cluster = Cluster::start_groups(3, GROUPS).await;
        for group in every_group() {
            cluster.leader_of(group).await;
        }
        // Through one node, which forwards to each group's leader where it is not it.
        fill(&cluster, 3, 5).await;
        let mut states = Vec::new();
        for group in every_group() {
            let (applied, digest) = cluster.converged_in(group, 3).await;
            assert!(applied.is_some(), "group {group} applied its entries");
            states.push(digest);
        }
        states.dedup();
        assert_eq!(
            states.len(),
            GROUPS as usize,
            "each group holds its own state"
        );
        for group in every_group() {
            let name = format!("q{group}");
            for other in every_group() {
                let stats = stats_in(cluster.node(1), other, &name).await;
                match other == group {
                    true => assert_eq!(stats.map(|s| s.visible), Some(5), "{name} in {other}"),
                    false => assert!(stats.is_none(), "{name} is not in group {other}"),
                }
            }
        }
        let dir = cluster.dir.path().join("node-1");
        assert!(dir.join("log").is_dir() && dir.join("groups/2/log").is_dir());
    })
    .await;
}

#[tokio::test]
async fn a_leader_cut_off_loses_only_the_groups_it_led() {
    within(Duration::from_secs(90), async {
        let cluster = Cluster::start_spread().await;
        let mut leaders = BTreeMap::new();
        for group in every_group() {
            leaders.insert(group, cluster.leader_of(group).await);
        }
        let away = leaders[&GroupId(2)];
        isolate(&cluster, away, true);
        let successor = cluster.leader_apart_from(GroupId(2), Some(away)).await;
        assert_ne!(successor, away);
        for (group, leader) in &leaders {
            let now = cluster.leader_apart_from(*group, Some(away)).await;
            if *leader != away {
                assert_eq!(now, *leader, "group {group} kept its leader");
            }
        }
        let through = *cluster
            .nodes
            .keys()
            .find(|id| **id != away)
            .expect("a node");
        let node = cluster.node(through);
        create_in(node, GroupId(2), "after").await;
        isolate(&cluster, away, false);
        let (applied, _) = cluster.converged_in(GroupId(2), 3).await;
        assert!(applied.is_some());
        let stats = stats_in(cluster.node(away), GroupId(2), "after").await;
        assert!(stats.is_some(), "the node back has group 2's queue");
    })
    .await;
}

impl Cluster {
    /// Waits until the leader of every group leads it quietly or, with `quiet` false, until
    /// `group`'s leader does not; returns every group's leader.
    async fn quiet(&self, groups: &[GroupId], quiet: bool) -> BTreeMap<GroupId, u64> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut leaders = BTreeMap::new();
            for group in groups {
                let leader = self.leader_of(*group).await;
                let led = self.node(leader).leads_quietly(*group);
                if led.expect("the leader takes part") == quiet {
                    leaders.insert(*group, leader);
                }
            }
            if leaders.len() == groups.len() {
                return leaders;
            }
            assert!(Instant::now() < deadline, "quiet {quiet}: only {leaders:?}");
            sleep(Duration::from_millis(20)).await;
        }
    }

    /// Three nodes of [`GROUPS`] groups, once every group is formed and the leaders are spread
    /// (one group a node), after which they stay where they are.
    async fn start_spread() -> Cluster {
        let cluster = Cluster::start_groups(3, GROUPS).await;
        cluster.formed(1).await;
        cluster.spread(GROUPS, 1, 1).await;
        cluster
    }

    /// Every running node's term in each of `groups`.
    fn terms(&self, groups: &[GroupId]) -> Vec<u64> {
        let rafts = groups
            .iter()
            .flat_map(|group| self.nodes.values().filter_map(|n| n.raft_of(*group).ok()));
        rafts
            .map(|raft| raft.metrics().borrow().current_term)
            .collect()
    }
}

#[tokio::test]
async fn idle_groups_are_led_quietly_and_a_quiet_leader_cut_off_is_replaced() {
    within(Duration::from_secs(90), async {
        let cluster = Cluster::start_spread().await;
        fill(&cluster, 1, 2).await;
        let groups: Vec<GroupId> = every_group().collect();
        let leaders = cluster.quiet(&groups, true).await;
        // With no heartbeats, the followers hear their quiet leaders through their pings: no
        // one stands, and every group keeps its term and its leader.
        let terms = cluster.terms(&groups);
        sleep(Duration::from_secs(3)).await;
        assert_eq!(
            cluster.terms(&groups),
            terms,
            "a quiet group held an election"
        );
        assert_eq!(cluster.quiet(&groups, true).await, leaders);
        // An entry brings the heartbeats back, and is read back from every replica.
        let node = cluster.node(1);
        node.write_in(GroupId(2), plain("q2", "woke"))
            .await
            .expect("a send to a quiet group");
        cluster.quiet(&[GroupId(2)], false).await;
        cluster.converged_in(GroupId(2), 3).await;
        let stats = stats_in(cluster.node(leaders[&GroupId(2)]), GroupId(2), "q2").await;
        assert_eq!(stats.expect("q2").visible, 3);
        // A quiet leader cut off stops answering pings: its followers stand as they would
        // without its heartbeats, and elect another that takes writes.
        cluster.quiet(&groups, true).await;
        let away = leaders[&GroupId(3)];
        isolate(&cluster, away, true);
        let successor = cluster.leader_apart_from(GroupId(3), Some(away)).await;
        assert_ne!(successor, away);
        let via = cluster.node(successor);
        via.write_in(GroupId(3), plain("q3", "after"))
            .await
            .expect("a send to the new leader");
        isolate(&cluster, away, false);
        cluster.converged_in(GroupId(3), 3).await;
    })
    .await;
}

#[tokio::test]
async fn every_group_comes_back_when_every_node_restarts() {
    within(Duration::from_secs(90), async {
        let mut cluster = Cluster::start_groups(3, GROUPS).await;
        for group in every_group() {
            cluster.leader_of(group).await;
        }
        fill(&cluster, 1, 3).await;
        for id in 1..=3 {
            cluster.stop(id).await;
        }
        for id in 1..=3 {
            cluster.restart(id).await;
        }
        for group in every_group() {
            cluster.leader_of(group).await;
            let name = format!("q{group}");
            let stats = stats_in(cluster.node(2), group, &name).await;
            assert_eq!(
                stats.map(|s| s.visible),
                Some(3),
                "{name} after the restart"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn the_metadata_group_lays_out_the_data_groups_and_each_is_formed_once() {
    within(Duration::from_secs(120), async {
        let mut cluster = Cluster::start_groups(5, 4).await;
        let groups = cluster.formed(1).await;
        assert_eq!(
            groups[&1].members,
            (1..=5).collect(),
            "group 1 is on every node"
        );
        for (number, entry) in groups.iter().filter(|(n, _)| **n != 1) {
            let group = GroupId(*number);
            assert_eq!(entry.members.len(), 3, "group {group}: three replicas");
            let leader = cluster.leader_of(group).await;
            assert!(
                entry.members.contains(&leader),
                "group {group} is led by a member"
            );
            let running: BTreeSet<u64> = (cluster.nodes.iter())
                .filter(|(_, n)| n.raft_of(group).is_ok())
                .map(|(id, _)| *id)
                .collect();
            assert_eq!(
                running, entry.members,
                "group {group} runs on its members only"
            );
            let raft = cluster.node(leader).raft_of(group).expect("group");
            let voters: BTreeSet<u64> = raft
                .metrics()
                .borrow()
                .membership_config
                .membership()
                .voter_ids()
                .collect();
            assert_eq!(voters, entry.members, "group {group}: its Raft voters");
            let name = format!("q{group}");
            let node = cluster.node(leader);
            create_in(node, group, &name).await;
            cluster.hinted(group).await;
        }
        for id in 1..=5 {
            cluster.stop(id).await;
        }
        for id in 1..=5 {
            cluster.restart(id).await;
        }
        let layout = |groups: &BTreeMap<u32, GroupEntry>| -> Vec<(u32, BTreeSet<u64>, bool)> {
            let entries = groups.iter();
            entries
                .map(|(n, g)| (*n, g.members.clone(), g.formed))
                .collect()
        };
        assert_eq!(
            layout(&cluster.formed(3).await),
            layout(&groups),
            "the layout survives the restart"
        );
        for (number, entry) in groups.iter().filter(|(n, _)| **n != 1) {
            let group = GroupId(*number);
            let leader = cluster.leader_of(group).await;
            let name = format!("q{group}");
            let stats = stats_in(cluster.node(leader), group, &name).await;
            assert!(stats.is_some(), "{name} after the restart");
            cluster.converged_in(group, entry.members.len()).await;
        }
    })
    .await;
}

impl Cluster {
    /// How many of groups 1 to `groups` each running node leads, as the running nodes agree.
    async fn leaders_per_node(&self, groups: u32) -> BTreeMap<u64, usize> {
        let mut led = BTreeMap::new();
        for group in 1..=groups {
            *led.entry(self.leader_of(GroupId(group)).await).or_insert(0) += 1;
        }
        led
    }

    /// Waits up to 30 s until no node leads more than `cap` of groups 1 to `groups`, and
    /// `node` leads at least one; returns the leaders per node.
    async fn spread(&self, groups: u32, cap: usize, node: u64) -> BTreeMap<u64, usize> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let led = self.leaders_per_node(groups).await;
            if led.values().all(|n| *n <= cap) && led.contains_key(&node) {
                return led;
            }
            assert!(Instant::now() < deadline, "leaders per node: {led:?}");
            sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test]
async fn leaders_spread_over_the_nodes_and_again_once_a_node_comes_back() {
    within(Duration::from_secs(150), async {
        let groups = 6;
        let mut cluster = Cluster::start_groups(3, groups).await;
        cluster.formed(1).await;
        cluster.spread(groups, 2, 3).await;
        cluster.stop(3).await;
        // Nodes 1 and 2 lead every group meanwhile.
        let without = cluster.leaders_per_node(groups).await;
        assert_eq!(without.values().sum::<usize>(), 6, "{without:?}");
        cluster.restart(3).await;
        let led = cluster.spread(groups, 2, 3).await;
        assert_eq!(led.values().collect::<Vec<_>>(), [&2, &2, &2], "{led:?}");
    })
    .await;
}

#[tokio::test]
async fn a_drained_node_leads_no_group_while_every_node_serves_on() {
    within(Duration::from_secs(150), async {
        let groups = 6;
        let cluster = Cluster::start_groups(3, groups).await;
        cluster.formed(1).await;
        let led = cluster.spread(groups, 2, 3).await;
        let drained = *led.keys().next().expect("a leader");
        let started = Instant::now();
        let answer = cluster.node(2).drain(drained, true).await;
        assert_eq!(answer, Ok(Ok(())));
        assert!(started.elapsed() < Duration::from_secs(5));
        let led = cluster.leaders_per_node(groups).await;
        assert!(!led.contains_key(&drained), "{led:?}");
        // Every node, the drained one too, serves every group's queues meanwhile.
        for id in 1..=3 {
            create_queue(cluster.node(id), &format!("after-{id}")).await;
        }
        for id in 1..=3 {
            for queue in 1..=3 {
                super::fill(cluster.node(id), &format!("after-{queue}"), 1).await;
            }
        }
        assert_eq!(stats(cluster.node(drained), "after-1").await.visible, 3);
        let unknown = cluster.node(1).drain(9, true).await;
        assert!(
            matches!(&unknown, Ok(Err(EngineError::Placement(_)))),
            "{unknown:?}"
        );
        assert_eq!(cluster.node(1).drain(drained, false).await, Ok(Ok(())));
        cluster.spread(groups, 2, drained).await;
    })
    .await;
}
