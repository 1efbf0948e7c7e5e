//! Clusters whose nodes read wrong clocks: a leader's clock that jumps either way, a node an hour
//! ahead of the others while a true one is down, and leaders stopped in turn beside it. The
//! state machine's time must stay within the bound of true time and keep going, and leases must
//! last their length.

use std::sync::atomic::AtomicI64;

use super::*;

const HOUR: i64 = 3_600_000;
/// `--max-clock-skew-ms` as the nodes have it by default.
const CLOCK_BOUND_MS: u64 = 500;
/// Room for the time between a node's stamp and this test's reading of the true time.
const SLACK_MS: u64 = 250;

/// Wall clocks for nodes 1 to `size`: the machine's clock shifted by the value at the node's id,
/// which a test moves.
fn shifted_clocks(size: u64) -> (BTreeMap<u64, WallClock>, Vec<Arc<AtomicI64>>) {
    let shifts: Vec<Arc<AtomicI64>> = (0..=size).map(|_| Arc::default()).collect();
    let clocks = (1..=size)
        .map(|id| {
            let shift = Arc::clone(&shifts[id as usize]);
            let clock = WallClock::new(move || {
                now_ms().saturating_add_signed(shift.load(Ordering::SeqCst))
            });
            (id, clock)
        })
        .collect();
    (clocks, shifts)
}

/// Runs `test` within [`BOUND`] on a three-node cluster whose clocks it shifts (by node id),
/// with queue `q` made through its leader (the last argument), then asserts that no node's state
/// is ahead of true time by more than the bound.
async fn on_shifted_clocks(test: impl AsyncFnOnce(&mut Cluster, &[Arc<AtomicI64>], u64)) {
    within(BOUND, async {
        let (clocks, shifts) = shifted_clocks(3);
        let mut cluster = Cluster::start_with_clocks(3, 10_000, clocks).await;
        let leader = cluster.leader().await;
        create_queue(cluster.node(leader), "q").await;
        test(&mut cluster, &shifts, leader).await;
        assert_state_time_is_true(&cluster);
    })
    .await;
}

/// Asserts that no running node's state is at a time more than the bound ahead of true time.
fn assert_state_time_is_true(cluster: &Cluster) {
    for (id, node) in &cluster.nodes {
        let state = node.reader().with_engine(|e| e.now()).expect("engine");
        let ahead = state.saturating_sub(now_ms());
        assert!(
            ahead <= CLOCK_BOUND_MS + SLACK_MS,
            "node {id}'s state is {ahead} ms ahead of true time"
        );
    }
}

/// Asserts that queue `q` holds `(leased, visible)` messages, as `node` reads it.
async fn assert_leases(node: &Node, expected: (u64, u64), why: &str) {
    let s = stats(node, "q").await;
    assert_eq!((s.leased, s.visible), expected, "{why}");
}

/// Watches every running node for `span` and asserts that none takes `skewed` for its leader.
async fn assert_never_led_by(cluster: &Cluster, skewed: u64, span: Duration) {
    let until = Instant::now() + span;
    while Instant::now() < until {
        for (id, node) in &cluster.nodes {
            let leader = node.raft().metrics().borrow().current_leader;
            assert_ne!(leader, Some(skewed), "node {id} follows the skewed node");
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the cluster's leader is another node than `leader`.
async fn until_deposed(cluster: &Cluster, leader: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while cluster.leader().await == leader {
        assert!(Instant::now() < deadline, "the leader kept the lead");
        sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `node` reports its clock outside the bound of the cluster's time.
async fn until_skewed(node: &Node) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !node.status().await.clock_skewed {
        assert!(Instant::now() < deadline, "the skew was never seen");
        sleep(Duration::from_millis(20)).await;
    }
}

/// A leader whose clock jumps an hour ahead stamps at most the bound past real time: a 60 s
/// lease taken before is still held, and the state machine's clock stays near real time. It sees
/// its skew against the others' clocks and gives up the lead.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_clock_jumps_an_hour_ahead_cannot_end_leases_early() {
    on_shifted_clocks(async |cluster, shifts, leader| {
        let node = cluster.node(leader);
        send_plain(node, "q", "held").await;
        outcome(node.write(receive("q", 1, 60)).await.expect("receive"));

        shifts[leader as usize].store(HOUR, Ordering::SeqCst);
        for i in 0..20 {
            send_plain(node, "q", &format!("m{i}")).await;
        }
        until_skewed(node).await;
        assert!(node.status().await.clock_offset_ms > HOUR - 1_000);
        until_deposed(cluster, leader).await;
        assert_leases(node, (1, 20), "the 60 s lease is still held").await;
    })
    .await;
}

/// Three nodes, one an hour ahead. While the true follower is stopped, the two left cannot tell
/// whose clock is wrong: the skewed node never leads and the leader goes on stamping the time a
/// majority of clocks last agreed on. Then, with the follower back, each leader in turn is
/// stopped and started again: whenever the skewed node is left with one true clock, it still
/// never leads. Throughout, no node's state runs ahead of true time by more than the bound, a
/// 60 s lease stays held, and at the end a 3 s lease ends in about 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_an_hour_ahead_never_leads_beside_one_true_clock() {
    on_shifted_clocks(async |cluster, shifts, leader| {
        let followers: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
        let (skewed, stopped) = (followers[0], followers[1]);
        shifts[skewed as usize].store(HOUR, Ordering::SeqCst);
        until_skewed(cluster.node(skewed)).await;
        let node = cluster.node(leader);
        send_plain(node, "q", "held").await;
        outcome(node.write(receive("q", 1, 60)).await.expect("receive"));

        tracing::info!("--- the true follower stops");
        cluster.stop(stopped).await;
        assert_never_led_by(cluster, skewed, Duration::from_secs(4)).await;
        assert_state_time_is_true(cluster);
        cluster.restart(stopped).await;

        for round in 0..3 {
            tracing::info!(round, "--- the leader stops and starts again");
            let leader = cluster.leader().await;
            assert_ne!(leader, skewed);
            cluster.stop(leader).await;
            assert_never_led_by(cluster, skewed, Duration::from_secs(2)).await;
            assert_state_time_is_true(cluster);
            cluster.restart(leader).await;
        }

        let leader = cluster.leader().await;
        assert_ne!(leader, skewed);
        let node = cluster.node(leader);
        send_plain(node, "q", "short").await;
        outcome(node.write(receive("q", 1, 3)).await.expect("receive"));
        assert_leases(node, (2, 0), "both leases held").await;
        sleep(Duration::from_secs(5)).await;
        assert_leases(node, (1, 1), "the 3 s lease ended, the 60 s one did not").await;
    })
    .await;
}

/// A leader whose clock goes back an hour for a moment while it stamps writes, and is then put
/// right, does not hold the cluster's time back: the state's time keeps up with real time and a
/// 2 s lease ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_clock_put_right_after_a_jump_back_keeps_time_going() {
    on_shifted_clocks(async |cluster, shifts, leader| {
        let node = cluster.node(leader);
        shifts[leader as usize].store(-HOUR, Ordering::SeqCst);
        for i in 0..5 {
            send_plain(node, "q", &format!("m{i}")).await;
        }
        shifts[leader as usize].store(0, Ordering::SeqCst);

        let node = cluster.node(cluster.leader().await);
        outcome(node.write(receive("q", 1, 2)).await.expect("receive"));
        let before = node.reader().with_engine(|e| e.now()).expect("engine");
        sleep(Duration::from_secs(4)).await;
        assert_leases(node, (0, 5), "the 2 s lease ended").await;
        // The state's time is that of the last entry applied: one more, stamped now.
        send_plain(node, "q", "after").await;
        let after = node.reader().with_engine(|e| e.now()).expect("engine");
        assert!(
            after >= before + 3_500,
            "the state's time went on: {} ms in 4 s",
            after.saturating_sub(before)
        );
    })
    .await;
}
