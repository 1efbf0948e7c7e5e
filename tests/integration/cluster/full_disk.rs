//! A follower whose disk fills: its appends wait for room while the leader and the other
//! follower go on committing, and once space is freed it catches up by itself, without a restart.

use raftq_store::crash_disk::CrashDisk;
use raftq_store::LogOptions;

use super::*;

/// Bytes of node 3's segments: small, so that a few hundred sends need new ones.
const SEGMENT: u64 = 64 << 10;

/// A three-node cluster whose node 3 keeps its log on `disk` and follows, with queue `q`.
async fn cluster_with_a_follower_on(disk: &CrashDisk) -> (Cluster, u64) {
    let log = LogOptions {
        disk: Arc::new(disk.clone()),
        segment_bytes: SEGMENT,
        ..LogOptions::default()
    };
    // No snapshot: node 3's snapshot files would be on the crash disk, which the Raft core
    // cannot stream.
    let logs = BTreeMap::from([(3, log)]);
    let cluster = Cluster::start_on(3, u64::MAX, BTreeMap::new(), 50, logs).await;
    if cluster.leader().await == 3 {
        cluster.node(3).hand_over().await.expect("hand over");
    }
    let leader = cluster.leader().await;
    assert_ne!(leader, 3);
    create_queue(cluster.node(leader), "q").await;
    (cluster, leader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_whose_disk_is_full_waits_while_the_others_commit() {
    let disk = CrashDisk::new();
    let (cluster, leader) = cluster_with_a_follower_on(&disk).await;
    let body = "x".repeat(1000);
    // From now on node 3's log files cannot grow: its segment and its spare take ~120 sends.
    disk.set_capacity(Some(0));
    for i in 0..400 {
        let written = timeout(
            Duration::from_secs(5),
            cluster
                .node(leader)
                .write(plain("q", &format!("{i}{body}"))),
        )
        .await
        .unwrap_or_else(|_| panic!("send {i} committed by the leader and one follower"));
        sent(written.expect("send"));
    }
    let follower = cluster.node(3);
    // Node 3 may still be receiving the entries it has no room for.
    let deadline = Instant::now() + Duration::from_secs(10);
    while follower.space().log_room_waits == 0 {
        assert!(Instant::now() < deadline, "node 3's append waits for room");
        sleep(Duration::from_millis(20)).await;
    }
    let applied = |node: &Node| node.raft().metrics().borrow().last_applied;
    assert!(
        applied(follower) < applied(cluster.node(leader)),
        "node 3 is behind while it waits"
    );
    assert_eq!(stats(cluster.node(leader), "q").await.visible, 400);
    // Space freed: node 3 catches up by itself.
    disk.set_capacity(None);
    cluster.converged().await;
    assert_eq!(
        follower
            .reader()
            .with_engine(|e| e.queue_gauges(now_ms()))
            .expect("engine")
            .iter()
            .map(|g| g.stats.visible)
            .sum::<u64>(),
        400
    );
}
