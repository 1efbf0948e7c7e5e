//! Backups of a cluster of several groups: taken on a node that holds no replica of some
//! groups (their sections come from members), restored on one node that then leads every
//! group, and grown again.

use std::collections::BTreeSet;

use raftq_store::backup::{self, RestoreTarget};
use raftq_store::GroupId;

use super::replicas::every_queue_holds;
use super::*;

/// A backup of five nodes of four groups, taken on a node outside a data group, holds every
/// group; restored on one node, every queue is in its group with its messages (the leased
/// one visible again), and nodes added to the restored cluster take their replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_holds_every_group_and_restores_on_one_node_that_grows_again() {
    within(Duration::from_secs(240), async {
        let cluster = Cluster::start_groups(5, 4).await;
        let groups = cluster.formed(1).await;
        let mut queues = BTreeMap::new();
        for i in 0..6 {
            let name = format!("q{i}");
            create_and_fill(cluster.node(5), &name, 3).await;
            let entry = cluster.placement(5).queue(ACCOUNT, &name).cloned();
            queues.insert(name, entry.expect("in the directory").group);
        }
        let leased = cluster.node(5).write(receive("q0", 1, 600)).await;
        match outcome(leased.expect("receive")) {
            Outcome::Received(deliveries) => assert_eq!(deliveries.len(), 1),
            other => panic!("unexpected {other:?}"),
        }
        let outside = (1..=5)
            .find(|id| !groups[&2].members.contains(id))
            .expect("a node outside group 2");
        assert!(cluster.node(outside).raft_of(GroupId(2)).is_err());

        let path = cluster.dir.path().join("raftq.backup");
        let file = std::fs::File::create(&path).expect("create");
        let summary = cluster.node(outside).backup(file).await.expect("backup");
        let read = backup::read(std::fs::File::open(&path).expect("open")).expect("whole");
        let sections: Vec<u32> = read.groups.iter().map(|g| g.group.0).collect();
        assert_eq!(sections, [1, 2, 3, 4]);
        assert_eq!(summary.sections.len(), 4);
        for (state, written) in read.groups.iter().zip(&summary.sections) {
            assert_eq!(state.state_digest, written.state_digest);
            assert!(state.applied_index.is_some(), "group {}", state.group);
        }

        let mut restored = Cluster::start_on(0, 20_000, BTreeMap::new(), 50, BTreeMap::new()).await;
        restored.groups = 4;
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        restored.peers.insert(1, addr.clone());
        let target = RestoreTarget {
            data_dir: restored.dir.path().join("node-1"),
            node_id: 1,
            raft_addr: addr,
        };
        let made = backup::restore(read, &target).await.expect("restore");
        let ended: usize = made.groups.iter().map(|g| g.leases_ended).sum();
        assert_eq!(ended, 1);
        restored.launch(1, listener, None).await;
        for (group, entry) in restored.formed(1).await {
            assert_eq!(entry.members, BTreeSet::from([1]), "group {group}");
        }
        every_queue_holds(&restored, 1, &queues, 3).await;
        for (name, group) in &queues {
            let entry = restored.placement(1).queue(ACCOUNT, name).cloned();
            assert_eq!(entry.expect("restored").group, *group, "{name}");
        }

        for id in [2, 3] {
            let addr = restored.launch_joining(id).await;
            change(restored.node(1), add(id, &addr))
                .await
                .unwrap_or_else(|e| panic!("node {id} added: {e}"));
        }
        restored.replicas_settled(1, 3, &[1, 2, 3], 3).await;
        send_plain(restored.node(3), "q1", "after").await;
        assert_eq!(stats(restored.node(2), "q1").await.visible, 4);
    })
    .await;
}

/// A backup taken through a follower whose replica lags (the leader's appends no longer reach
/// it) is read on another member, at least as new as the leader's state when it began: it
/// holds the write the follower never got.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_through_a_lagging_replica_is_read_on_another_member() {
    within(Duration::from_secs(90), async {
        let cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let follower = cluster.follower().await;
        create_queue(cluster.node(leader), "kept").await;
        cluster.node(leader).partition().set(follower, true);
        send_plain(cluster.node(leader), "kept", "late").await;
        let applied = |id: u64| {
            let metrics = cluster.node(id).raft().metrics();
            let index = metrics.borrow().last_applied.map(|log| log.index);
            index
        };
        let written = applied(leader);
        let summary = cluster.node(follower).backup(std::io::sink()).await;
        let section = summary.expect("backup").sections.remove(0);
        assert!(
            section.applied_index >= written,
            "read at {:?}, before the leader's {written:?}",
            section.applied_index
        );
        assert!(
            applied(follower) < written,
            "the follower's replica lagged all along"
        );
        cluster.node(leader).partition().set(follower, false);
    })
    .await;
}
