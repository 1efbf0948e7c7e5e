//! In-process clusters on loopback: replication through followers, leader loss (with receives
//! parked), full restarts, catch-up through snapshots, when snapshots are rebuilt, a partitioned
//! leader and a cut-off follower. Every test is bounded in time and removes its data directories.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::InstallSnapshotRequest;
use raftq_engine::{
    Command, EngineError, MessageState, MoveTaskInput, MoveTaskStatus, NewMessage, Outcome,
    QueueAttributes, QueueStats, RedrivePolicyInput, RetryBackoffInput, SendResult,
};
use raftq_node::{
    now_ms, send_snapshot_chunk, CallError, Change, ChangeError, ChangeResult, Node, NodeConfig,
    NodeError, PeerMethod, Query, QueryResult, Response, WallClock, PEER_PROTOCOL,
};
use tempfile::TempDir;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::time::{sleep, timeout, Instant};
use uuid::Uuid;

mod backup;
mod clock;
mod full_disk;
mod groups;
mod replicas;
mod routing;

const ACCOUNT: &str = "dev";

struct Cluster {
    dir: TempDir,
    peers: BTreeMap<u64, String>,
    nodes: BTreeMap<u64, Node>,
    snapshot_after_logs: u64,
    /// Nodes that read another clock than the machine's.
    clocks: BTreeMap<u64, WallClock>,
    heartbeat_ms: u64,
    /// Nodes whose log is kept otherwise than on the operating system's disk.
    logs: BTreeMap<u64, raftq_store::LogOptions>,
    /// The Raft groups the cluster lays out (`NodeConfig::groups`).
    groups: u32,
    /// How long a half-made directory entry waits to be settled (`NodeConfig::settle_after`).
    settle_after: Duration,
}

impl Cluster {
    async fn start(size: u64, snapshot_after_logs: u64) -> Cluster {
        Cluster::start_with_clocks(size, snapshot_after_logs, BTreeMap::new()).await
    }

    async fn start_with_clocks(
        size: u64,
        snapshot_after_logs: u64,
        clocks: BTreeMap<u64, WallClock>,
    ) -> Cluster {
        Cluster::start_with(size, snapshot_after_logs, clocks, 50).await
    }

    async fn start_with(
        size: u64,
        snapshot_after_logs: u64,
        clocks: BTreeMap<u64, WallClock>,
        heartbeat_ms: u64,
    ) -> Cluster {
        let logs = BTreeMap::new();
        Cluster::start_on(size, snapshot_after_logs, clocks, heartbeat_ms, logs).await
    }

    /// [`Cluster::start_with`], the logs of the nodes in `logs` kept as it says.
    async fn start_on(
        size: u64,
        snapshot_after_logs: u64,
        clocks: BTreeMap<u64, WallClock>,
        heartbeat_ms: u64,
        logs: BTreeMap<u64, raftq_store::LogOptions>,
    ) -> Cluster {
        let cluster = Cluster {
            dir: TempDir::new().expect("temp dir"),
            peers: BTreeMap::new(),
            nodes: BTreeMap::new(),
            snapshot_after_logs,
            clocks,
            heartbeat_ms,
            logs,
            groups: 1,
            settle_after: NodeConfig::DEFAULT_SETTLE_AFTER,
        };
        cluster.launch_all(size).await
    }

    /// A cluster of `size` nodes that lays out `groups` Raft groups.
    async fn start_groups(size: u64, groups: u32) -> Cluster {
        let logs = BTreeMap::new();
        let mut cluster = Cluster::start_on(0, 20_000, BTreeMap::new(), 50, logs).await;
        cluster.groups = groups;
        cluster.launch_all(size).await
    }

    /// Starts nodes 1 to `size`, each listed in the others' peers.
    async fn launch_all(mut self, size: u64) -> Cluster {
        let mut listeners = BTreeMap::new();
        for id in 1..=size {
            let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            self.peers
                .insert(id, l.local_addr().expect("addr").to_string());
            listeners.insert(id, l);
        }
        for (id, listener) in listeners {
            self.launch(id, listener, None).await;
        }
        self
    }

    /// Starts node `id`: a member listed in the cluster's peers, or, with `join`, a node that
    /// waits to be added.
    async fn launch(&mut self, id: u64, listener: TcpListener, join: Option<String>) {
        let mut config = NodeConfig::new(
            id,
            self.peers.clone(),
            self.dir.path().join(format!("node-{id}")),
        );
        config.join = join;
        config.groups = self.groups;
        config.settle_after = self.settle_after;
        config.heartbeat_ms = self.heartbeat_ms;
        if let Some(clock) = self.clocks.get(&id) {
            config.wall_clock = clock.clone();
        }
        config.snapshot_after_logs = self.snapshot_after_logs;
        if let Some(log) = self.logs.get(&id) {
            config.log = log.clone();
        }
        let node = Node::start(config, listener).await.expect("start node");
        self.nodes.insert(id, node);
    }

    async fn stop(&mut self, id: u64) {
        if let Some(node) = self.nodes.remove(&id) {
            node.shutdown().await;
        }
    }

    async fn restart(&mut self, id: u64) {
        let addr = self.peers[&id].clone();
        let listener = TcpListener::bind(&addr).await.expect("rebind");
        self.launch(id, listener, None).await;
    }

    /// Starts a new node `id` that waits to be added; returns its peer address.
    async fn launch_joining(&mut self, id: u64) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let member = self.peers[&1].clone();
        self.peers.insert(id, addr.clone());
        self.launch(id, listener, Some(member)).await;
        addr
    }

    /// Waits until every running node sees exactly `voters` as the voters.
    async fn voters_are(&self, voters: &[u64]) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let seen: Vec<Vec<u64>> = self
                .nodes
                .values()
                .map(|n| {
                    let m = n.raft().metrics().borrow().clone();
                    let membership = m.membership_config.membership();
                    membership.voter_ids().collect()
                })
                .collect();
            if seen.iter().all(|v| v == voters) {
                return;
            }
            assert!(Instant::now() < deadline, "voters {seen:?}, not {voters:?}");
            sleep(Duration::from_millis(50)).await;
        }
    }

    fn node(&self, id: u64) -> &Node {
        &self.nodes[&id]
    }

    /// The leader of group 1 all running nodes agree on.
    async fn leader(&self) -> u64 {
        self.leader_of(raftq_store::GroupId::FIRST).await
    }

    async fn follower(&self) -> u64 {
        let leader = self.leader().await;
        *self
            .nodes
            .keys()
            .find(|id| **id != leader)
            .expect("a follower")
    }

    /// Waits until every running node applied the same entries and holds the same state, row
    /// for row and payload for payload (equal digests of their persisted state).
    async fn converged(&self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let digests: Vec<_> = self
                .nodes
                .values()
                .map(|n| n.reader().digest().expect("state digest"))
                .collect();
            if digests.windows(2).all(|w| w[0] == w[1]) {
                return;
            }
            assert!(Instant::now() < deadline, "node states differ: {digests:?}");
            sleep(Duration::from_millis(50)).await;
        }
    }
}

fn create(name: &str, attributes: QueueAttributes) -> Command {
    Command::CreateQueue {
        account: ACCOUNT.into(),
        queue_id: Uuid::new_v4(),
        name: name.into(),
        attributes,
    }
}

fn send(queue: &str, group: &str, dedup: &str, body: &str) -> Command {
    Command::Send {
        account: ACCOUNT.into(),
        queue: queue.into(),
        message: NewMessage::new(Uuid::new_v4(), body)
            .in_group(group)
            .deduplicated_by(dedup),
    }
}

/// A message for a standard queue.
fn plain(queue: &str, body: &str) -> Command {
    Command::Send {
        account: ACCOUNT.into(),
        queue: queue.into(),
        message: NewMessage::new(Uuid::new_v4(), body),
    }
}

fn receive(queue: &str, max: i64, lease: i64) -> Command {
    Command::Receive {
        account: ACCOUNT.into(),
        queue: queue.into(),
        max_messages: Some(max),
        lease_seconds: Some(lease),
        attempt_id: None,
    }
}

/// A receive of one message with a lease of `lease` seconds that parks as `waiter` for up to
/// `wait` seconds.
fn receive_wait(queue: &str, wait: i64, lease: i64, waiter: Uuid) -> Command {
    Command::ReceiveWait {
        account: ACCOUNT.into(),
        queue: queue.into(),
        max_messages: Some(1),
        lease_seconds: Some(lease),
        wait_seconds: wait,
        waiter,
    }
}

/// Sends a message of `body` to the standard queue `queue` through `node`, which must take it.
async fn send_plain(node: &Node, queue: &str, body: &str) -> SendResult {
    let response = node.write(plain(queue, body)).await;
    sent(response.unwrap_or_else(|e| panic!("send {body:?} to {queue}: {e}")))
}

fn outcome(response: Response) -> Outcome {
    match response.result {
        Some(Ok(o)) => o,
        other => panic!("unexpected {other:?}"),
    }
}

fn sent(response: Response) -> SendResult {
    match outcome(response) {
        Outcome::Sent(r) => r,
        other => panic!("unexpected {other:?}"),
    }
}

/// Sends `count` messages `m0`, `m1`, ... to `queue` through `node`, one after the other.
async fn fill(node: &Node, queue: &str, count: usize) {
    for i in 0..count {
        send_plain(node, queue, &format!("m{i}")).await;
    }
}

/// Creates the standard queue `queue` through `node` and [`fill`]s it with `count` messages.
/// Creates a standard queue with the default settings through `node`.
async fn create_queue(node: &Node, queue: &str) {
    outcome(
        node.write(create(queue, QueueAttributes::default()))
            .await
            .expect("create"),
    );
}

async fn create_and_fill(node: &Node, queue: &str, count: usize) {
    create_queue(node, queue).await;
    fill(node, queue, count).await;
}

/// A queue's counters, read through `node`; retried while no leader is known (an election may
/// take longer than one request waits).
async fn stats(node: &Node, queue: &str) -> QueueStats {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let query = Query::Stats {
            account: ACCOUNT.into(),
            queue: queue.into(),
        };
        match node.read(query).await {
            Ok(Ok(QueryResult::Stats(s))) => return *s,
            Err(NodeError::Unavailable(_)) if Instant::now() < deadline => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Bodies in queue order, read through `node`.
async fn bodies(node: &Node, queue: &str) -> Vec<String> {
    let query = Query::Peek {
        account: ACCOUNT.into(),
        queue: queue.into(),
        after: None,
        limit: Some(100),
    };
    match node.read(query).await {
        Ok(Ok(QueryResult::Messages(m))) => m.into_iter().map(|(_, p)| p.body).collect(),
        other => panic!("unexpected {other:?}"),
    }
}

const BOUND: Duration = Duration::from_secs(90);

/// Runs a test's body, failing the test if it takes longer than `limit`.
async fn within(limit: Duration, body: impl Future<Output = ()>) {
    timeout(limit, body).await.expect("within the time bound");
}

/// With nothing more to send, a leader tells its followers of a commit within moments, not at
/// its next heartbeat: a follower applies the entry (and answers the long polls parked on it)
/// at once. The heartbeat here is a second, so a follower that waited for it would lag
/// 0.5 s on average.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_learns_of_a_lone_commit_long_before_the_next_heartbeat() {
    within(BOUND, async {
        let cluster = Cluster::start_with(3, 10_000, BTreeMap::new(), 1_000).await;
        let leader = cluster.node(cluster.leader().await);
        let follower = cluster.node(cluster.follower().await);
        let create = create("jobs.fifo", QueueAttributes::default());
        outcome(leader.write(create).await.expect("create"));
        for i in 0..5 {
            // Off the heartbeat's beat, and with nothing else in flight.
            sleep(Duration::from_millis(137)).await;
            let message = send("jobs.fifo", "g", &format!("d{i}"), &format!("m{i}"));
            sent(leader.write(message).await.expect("send"));
            let applied = leader.raft().metrics().borrow().last_applied;
            let started = Instant::now();
            while follower.raft().metrics().borrow().last_applied < applied {
                assert!(
                    started.elapsed() < Duration::from_millis(300),
                    "send {i}: the follower had not applied {applied:?} 300 ms after the leader"
                );
                sleep(Duration::from_millis(1)).await;
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_through_a_follower_are_applied_on_every_node() {
    within(BOUND, async {
        let cluster = Cluster::start(3, 10_000).await;
        let follower = cluster.node(cluster.follower().await);
        outcome(
            follower
                .write(create("jobs.fifo", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        for i in 0..40 {
            let r = sent(
                follower
                    .write(send(
                        "jobs.fifo",
                        &format!("g{}", i % 4),
                        &format!("d{i}"),
                        &format!("m{i}"),
                    ))
                    .await
                    .expect("send"),
            );
            assert!(!r.duplicate);
        }
        let got = outcome(
            follower
                .write(receive("jobs.fifo", 10, 30))
                .await
                .expect("receive"),
        );
        assert!(matches!(got, Outcome::Received(ref d) if !d.is_empty()));
        cluster.converged().await;
        for node in cluster.nodes.values() {
            assert_eq!(
                stats(node, "jobs.fifo").await.visible + stats(node, "jobs.fifo").await.leased,
                40
            );
        }
    })
    .await;
}

/// During a rolling upgrade, nodes of two builds never read each other's forwarded requests: a
/// follower sends nothing to a leader heard to speak another peer protocol (its client is told
/// at once), and a leader refuses a request forwarded in another protocol or in none (a build
/// before the protocol header), which it would otherwise read as whatever its own shapes say.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_of_two_builds_never_forward_to_each_other() {
    within(BOUND, async {
        let cluster = Cluster::start(3, 10_000).await;
        let leader_id = cluster.leader().await;
        let (leader, follower) = (
            cluster.node(leader_id),
            cluster.node(cluster.follower().await),
        );
        create_queue(follower, "jobs").await;
        let cluster_id = leader.status().await.cluster_id;

        // A request forwarded with no protocol, as a build before the header sends it.
        let earlier = raftq_node::call_peer(
            &cluster.peers[&leader_id],
            None,
            cluster_id,
            None,
            PeerMethod::Forward,
            follower.id(),
        )
        .await;
        match earlier {
            Err(CallError::Transport(status)) => {
                assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
                assert!(status.message().contains("peer protocol 0"), "{status:?}");
            }
            other => panic!("a forward of an earlier build was taken: {other:?}"),
        }

        // The leader now speaks another protocol, as a node of a later build would.
        leader.announce_protocol(Some(PEER_PROTOCOL + 1));
        sleep(Duration::from_millis(500)).await;
        let started = Instant::now();
        match follower.write(plain("jobs", "not sent")).await {
            Err(NodeError::OtherBuild(text)) => {
                assert!(
                    text.contains(&format!("peer protocol {}", PEER_PROTOCOL + 1)),
                    "{text}"
                )
            }
            other => panic!("a follower forwarded to a leader of another build: {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the client is told at once, not after the leader wait"
        );
        // The leader still serves its own clients, and nothing was sent through the follower.
        send_plain(leader, "jobs", "at the leader").await;
        cluster.converged().await;
        assert_eq!(bodies(leader, "jobs").await, ["at the leader"]);

        // Both on the same build again: forwards go through.
        leader.announce_protocol(Some(PEER_PROTOCOL));
        sleep(Duration::from_millis(500)).await;
        send_plain(follower, "jobs", "forwarded").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn losing_the_leader_keeps_acknowledged_sends_dedup_and_timers() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let node = cluster.node(leader);
        outcome(
            node.write(create("orders.fifo", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        let mut ids = Vec::new();
        for i in 0..20 {
            ids.push(
                sent(
                    node.write(send("orders.fifo", "g", &format!("d{i}"), &format!("m{i}")))
                        .await
                        .expect("send"),
                )
                .message_id,
            );
        }
        // Lease the head for 1 s: the new leader's timer must end it.
        outcome(
            node.write(receive("orders.fifo", 1, 1))
                .await
                .expect("receive"),
        );
        cluster.stop(leader).await;
        let new_leader = cluster.leader().await;
        assert_ne!(new_leader, leader);
        let node = cluster.node(new_leader);
        let expected: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
        assert_eq!(
            bodies(node, "orders.fifo").await,
            expected,
            "FIFO order and every send kept"
        );
        let again = sent(
            node.write(send("orders.fifo", "g", "d3", "other"))
                .await
                .expect("resend"),
        );
        assert!(again.duplicate);
        assert_eq!(again.message_id, ids[3]);
        // Read from the node's own applied state, which proposes nothing: only the new leader's
        // timer can have ended the lease.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = node
                .with_engine(|e| e.stats(ACCOUNT, "orders.fifo", e.now()))
                .expect("engine")
                .expect("stats");
            if (s.visible, s.leased) == (20, 0) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the lease did not expire under the new leader: {s:?}"
            );
            sleep(Duration::from_millis(50)).await;
        }
        match outcome(
            node.write(receive("orders.fifo", 1, 30))
                .await
                .expect("receive"),
        ) {
            Outcome::Received(d) => assert_eq!(d[0].meta.receive_count, 2),
            other => panic!("unexpected {other:?}"),
        }
    })
    .await;
}

/// Receives parked before the leader stops stay parked under the next one: a send delivers to
/// the oldest in its own entry, answered on the follower whose client waits; the new leader's
/// timer ends a wait at its deadline; a message delivered to a receive whose node is gone is
/// delivered again once its lease ends; and the old leader, back, holds the same state.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parked_receives_outlive_a_leader_change_and_lose_no_message() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let follower = cluster.follower().await;
        outcome(
            cluster
                .node(leader)
                .write(create("jobs", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        let (kept, lost, late) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let mut kept_slot = cluster
            .node(follower)
            .await_answer(ACCOUNT, "jobs", kept)
            .await;
        let parked = cluster
            .node(follower)
            .write(receive_wait("jobs", 20, 30, kept))
            .await
            .expect("park on the follower");
        assert_eq!(outcome(parked), Outcome::Parked);
        // Parked by the leader's own client, which goes away with it.
        let parked = cluster
            .node(leader)
            .write(receive_wait("jobs", 20, 2, lost))
            .await
            .expect("park on the leader");
        assert_eq!(outcome(parked), Outcome::Parked);

        cluster.stop(leader).await;
        let new_leader = cluster.leader().await;
        assert_ne!(new_leader, leader);
        let node = cluster.node(new_leader);
        assert_eq!(node.with_engine(|e| e.parked_count()).expect("engine"), 2);

        // A wait parked now ends at its deadline, by the new leader's timer.
        let mut late_slot = cluster
            .node(follower)
            .await_answer(ACCOUNT, "jobs", late)
            .await;
        let started = Instant::now();
        let parked = cluster
            .node(follower)
            .write(receive_wait("jobs", 1, 30, late))
            .await
            .expect("park");
        assert_eq!(outcome(parked), Outcome::Parked);
        let ended = timeout(Duration::from_secs(10), late_slot.answer())
            .await
            .expect("the wait ends at its deadline")
            .expect("an answer");
        assert!(ended.deliveries.is_empty() && ended.payloads.is_empty());
        assert!(started.elapsed() >= Duration::from_millis(900));

        // The first send goes to the receive that parked first, answered in the send's entry.
        send_plain(node, "jobs", "m0").await;
        let answer = timeout(Duration::from_secs(10), kept_slot.answer())
            .await
            .expect("answered")
            .expect("an answer");
        let (got, payloads) = (answer.deliveries, answer.payloads);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].meta.receive_count, 1);
        assert_eq!(payloads.len(), 1);
        assert_eq!(payloads[0].1.body, "m0");

        // The second goes to the receive whose node is gone: nobody reads it, and it is
        // delivered again once its 2 s lease ends.
        send_plain(node, "jobs", "m1").await;
        assert_eq!(node.with_engine(|e| e.parked_count()).expect("engine"), 0);
        let deadline = Instant::now() + Duration::from_secs(15);
        let again = loop {
            match outcome(node.write(receive("jobs", 10, 30)).await.expect("receive")) {
                Outcome::Received(d) if !d.is_empty() => break d,
                Outcome::Received(_) => {}
                other => panic!("unexpected {other:?}"),
            }
            assert!(Instant::now() < deadline, "m1 is stuck beyond its lease");
            sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(again.len(), 1, "m0 stays leased to the receive that got it");
        assert_eq!(again[0].meta.receive_count, 2);
        assert_eq!(bodies(node, "jobs").await, ["m0", "m1"]);

        cluster.restart(leader).await;
        cluster.converged().await;
    })
    .await;
}

/// A retry backoff is stamped by the leader whose timer ended the lease; after that leader is
/// gone, the next one keeps the same end: the message stays delayed, still blocks its FIFO
/// group, and is delivered (before the rest of its group) once the end passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_backoff_stamped_by_one_leader_holds_under_the_next() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let node = cluster.node(leader);
        let backoff = QueueAttributes {
            retry_backoff: Some(Some(RetryBackoffInput {
                initial_seconds: Some(6),
                max_seconds: Some(6),
                multiplier: Some(1.0),
            })),
            ..QueueAttributes::default()
        };
        outcome(
            node.write(create("retry.fifo", backoff))
                .await
                .expect("create"),
        );
        for (dedup, body) in [("d0", "m0"), ("d1", "m1")] {
            sent(
                node.write(send("retry.fifo", "g", dedup, body))
                    .await
                    .expect("send"),
            );
        }
        outcome(
            node.write(receive("retry.fifo", 1, 1))
                .await
                .expect("receive"),
        );
        // The head's lease ends after 1 s; the leader's timer stamps the end of its backoff.
        let head = |node: &Node| {
            node.with_engine(|e| e.peek(ACCOUNT, "retry.fifo", None, Some(1)))
                .expect("engine")
                .expect("peek")
                .remove(0)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let waiting = loop {
            let m = head(node);
            if m.state == MessageState::Delayed {
                break m;
            }
            assert!(Instant::now() < deadline, "the lease did not end: {m:?}");
            sleep(Duration::from_millis(50)).await;
        };
        let visible_at = waiting.until.expect("the end of the backoff");
        cluster.stop(leader).await;
        let new_leader = cluster.leader().await;
        let node = cluster.node(new_leader);
        // Its applied state may trail the commit of the expiry for a moment after the election.
        let deadline = Instant::now() + Duration::from_secs(10);
        while head(node).state != MessageState::Delayed {
            assert!(
                Instant::now() < deadline,
                "the expiry never reached the new leader"
            );
            sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            head(node).until,
            Some(visible_at),
            "the same end of the backoff"
        );
        let during = outcome(
            node.write(receive("retry.fifo", 10, 30))
                .await
                .expect("receive"),
        );
        if now_ms() + 500 < visible_at {
            assert_eq!(
                during,
                Outcome::Received(Vec::new()),
                "the group stays blocked"
            );
        }
        sleep(Duration::from_millis(
            visible_at.saturating_sub(now_ms()) + 100,
        ))
        .await;
        match outcome(
            node.write(receive("retry.fifo", 10, 30))
                .await
                .expect("receive"),
        ) {
            Outcome::Received(d) => {
                let seqs: Vec<u64> = d.iter().map(|d| d.meta.seq).collect();
                assert_eq!(seqs.len(), 2, "{d:?}");
                assert_eq!(seqs[0], waiting.seq, "the waiting head first");
                assert_eq!(d[0].meta.receive_count, 2);
            }
            other => panic!("unexpected {other:?}"),
        }
    })
    .await;
}

/// A new leader does not know how much of its log a follower holds, and openraft 0.9 finds out
/// by sending entries, each request given one heartbeat interval to be answered. A request of
/// many large entries would time out every time, so that followers fell behind under load and a
/// new leader could not commit at all: requests are bounded in bytes and in entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_leader_brings_followers_with_long_logs_of_large_entries_up_to_date() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let node = cluster.node(leader);
        let attributes = QueueAttributes {
            max_message_bytes: Some(256 * 1024),
            ..QueueAttributes::default()
        };
        outcome(
            node.write(create("big.fifo", attributes))
                .await
                .expect("create"),
        );
        // Concurrent sends share entries: 8 rounds of 48 sends of 128 KiB.
        let body = "x".repeat(128 * 1024);
        for round in 0..8 {
            let writes = (0..48).map(|i| {
                let n = round * 48 + i;
                node.write(send("big.fifo", &format!("g{n}"), &format!("d{n}"), &body))
            });
            for response in join_all(writes).await {
                sent(response.expect("send"));
            }
        }
        cluster.converged().await;
        cluster.stop(leader).await;
        let new_leader = cluster.leader().await;
        let node = cluster.node(new_leader);
        sent(
            node.write(send("big.fifo", "after", "after", "x"))
                .await
                .expect("a write once the leader stopped"),
        );
        assert_eq!(stats(node, "big.fifo").await.visible, 8 * 48 + 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarting_every_node_loses_nothing() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let node = cluster.node(cluster.leader().await);
        outcome(
            node.write(create("q.fifo", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        let first = sent(
            node.write(send("q.fifo", "g", "d0", "m0"))
                .await
                .expect("send"),
        );
        for i in 1..10 {
            sent(
                node.write(send("q.fifo", "g", &format!("d{i}"), &format!("m{i}")))
                    .await
                    .expect("send"),
            );
        }
        outcome(
            node.write(receive("q.fifo", 2, 600))
                .await
                .expect("receive"),
        );
        for id in [1, 2, 3] {
            cluster.stop(id).await;
        }
        for id in [1, 2, 3] {
            cluster.restart(id).await;
        }
        let node = cluster.node(cluster.leader().await);
        let s = stats(node, "q.fifo").await;
        assert_eq!((s.visible, s.leased), (8, 2), "messages and leases survive");
        let again = sent(
            node.write(send("q.fifo", "g", "d0", "x"))
                .await
                .expect("resend"),
        );
        assert!(again.duplicate);
        assert_eq!(again.message_id, first.message_id);
        cluster.converged().await;
    })
    .await;
}

/// A leader replicates its entries before its own copy is flushed (`vendor/openraft/RAFTQ.md`),
/// so after a crash its log may lack entries it sent: it must not lead again in the term it led
/// in, where its next entries would take those entries' log ids with other contents. A single
/// node that restarts leads again, in a new term, with everything it acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_that_restarts_leads_again_only_in_a_new_term() {
    within(BOUND, async {
        let mut cluster = Cluster::start(1, 10_000).await;
        let leader = cluster.leader().await;
        create_and_fill(cluster.node(leader), "restart", 1).await;
        let term = |cluster: &Cluster| cluster.node(leader).raft().metrics().borrow().current_term;
        let before = term(&cluster);
        cluster.stop(leader).await;
        cluster.restart(leader).await;
        assert_eq!(cluster.leader().await, leader);
        assert!(
            term(&cluster) > before,
            "the restarted leader resumed term {before}"
        );
        assert_eq!(bodies(cluster.node(leader), "restart").await, ["m0"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_down_while_the_log_is_purged_catches_up_through_a_snapshot() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 30).await;
        let leader = cluster.leader().await;
        let down = *cluster
            .nodes
            .keys()
            .find(|id| **id != leader)
            .expect("follower");
        cluster.stop(down).await;
        let node = cluster.node(leader);
        create_and_fill(node, "q", 120).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while node.raft().metrics().borrow().purged.is_none() {
            assert!(Instant::now() < deadline, "the leader never purged its log");
            sleep(Duration::from_millis(50)).await;
        }
        cluster.restart(down).await;
        cluster.converged().await;
        assert_eq!(stats(cluster.node(down), "q").await.visible, 120);
    })
    .await;
}

/// Snapshot chunks that arrive out of step (a gap, as a write cut short by a cancelled call
/// leaves, or a damaged byte) are refused and the leader asked to start over, never installed:
/// a failed install would stop Raft on the follower for good. The whole snapshot sent again in
/// order is installed, and the follower goes on following.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_snapshot_received_out_of_step_is_asked_for_again_not_installed() {
    within(BOUND, async {
        let cluster = Cluster::start(3, 20).await;
        let leader = cluster.leader().await;
        let node = cluster.node(leader);
        create_and_fill(node, "q", 40).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while node.raft().metrics().borrow().snapshot.is_none() {
            assert!(Instant::now() < deadline, "the leader built no snapshot");
            sleep(Duration::from_millis(50)).await;
        }
        let mut snapshot = node
            .raft()
            .get_snapshot()
            .await
            .expect("read the snapshot")
            .expect("a snapshot");
        let mut bytes = Vec::new();
        snapshot
            .snapshot
            .read_to_end(&mut bytes)
            .await
            .expect("snapshot bytes");
        let vote = node.raft().metrics().borrow().vote;
        let cluster_id = node.status().await.cluster_id.expect("a cluster id");
        let follower = cluster.follower().await;
        let addr = cluster.peers[&follower].clone();
        let send = |offset: usize, data: &[u8], done: bool| {
            let chunk = InstallSnapshotRequest {
                vote,
                meta: snapshot.meta.clone(),
                offset: offset as u64,
                data: data.to_vec(),
                done,
            };
            let addr = addr.clone();
            async move {
                send_snapshot_chunk(&addr, cluster_id, &chunk)
                    .await
                    .expect("the follower answers")
            }
        };
        let asked_again = |reply: Result<_, RaftError<u64, InstallSnapshotError>>| match reply {
            Err(RaftError::APIError(InstallSnapshotError::SnapshotMismatch(m))) => {
                assert_eq!(m.expect.offset, 0, "{m}")
            }
            other => panic!("expected to be asked for the snapshot again, got {other:?}"),
        };
        let half = bytes.len() / 2;
        asked_again(send(half, &bytes[half..], true).await);
        send(0, &bytes[..half], false).await.expect("first half");
        asked_again(send(half + 1, &bytes[half + 1..], true).await);
        let mut damaged = bytes[half..].to_vec();
        damaged[0] ^= 1;
        asked_again(send(half, &damaged, true).await);
        send(0, &bytes[..half], false)
            .await
            .expect("first half again");
        send(half, &bytes[half..], true).await.expect("installed");
        send_plain(node, "q", "after").await;
        cluster.converged().await;
        assert_eq!(stats(cluster.node(follower), "q").await.visible, 41);
    })
    .await;
}

/// A snapshot is due once 20 entries were applied since the last one *and* the log appended
/// since then outweighs the messages the state holds: neither many small entries over a large
/// state nor a state growing with its log rewrites it, while a purge that empties the state makes
/// the next one due. The policy judges the log on a timer of its own, apart from the apply, so
/// the test waits until it has judged the last entry and found no snapshot due, then checks that
/// no snapshot was built: a policy that asked for one reports nothing more until that snapshot
/// is in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_snapshot_is_built_only_once_the_log_outweighs_the_messages_held() {
    within(BOUND, async {
        let cluster = Cluster::start(1, 20).await;
        let node = cluster.node(cluster.leader().await);
        let snapshot = || node.raft().metrics().borrow().snapshot;
        let wait_for_snapshot_after = |last| async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while snapshot() == last {
                assert!(Instant::now() < deadline, "no snapshot after {last:?}");
                sleep(Duration::from_millis(50)).await;
            }
        };
        let judged_not_due = || async {
            let (written, _) = node.digest().expect("applied state");
            let mut not_due = node.snapshot_not_due();
            timeout(
                Duration::from_secs(10),
                not_due.wait_for(|judged| *judged >= written),
            )
            .await
            .expect("the policy found no snapshot due")
            .expect("the policy runs");
        };
        outcome(
            node.write(create("q", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        let large = "x".repeat(16 * 1024);
        for _ in 0..20 {
            send_plain(node, "q", &large).await;
        }
        // Each entry of the log holds its message and more: the log outweighs the messages.
        wait_for_snapshot_after(None).await;
        let first = snapshot();
        let first_bytes = node.reader().snapshot_bytes();
        // The policy may see its 20 entries before the last large sends are applied: the
        // cluster's own first entries and the queue's creation count among them.
        assert!(first_bytes > 16 * 16 * 1024, "{first_bytes} bytes");
        fill(node, "q", 100).await;
        judged_not_due().await;
        assert_eq!(
            snapshot(),
            first,
            "100 small entries do not outweigh the messages"
        );
        for _ in 0..30 {
            send_plain(node, "q", &large).await;
        }
        judged_not_due().await;
        assert_eq!(
            snapshot(),
            first,
            "a log of 30 large messages does not outweigh the 50 the state holds"
        );
        outcome(
            node.write(Command::Purge {
                account: ACCOUNT.into(),
                queue: "q".into(),
            })
            .await
            .expect("purge"),
        );
        wait_for_snapshot_after(first).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_isolated_leader_acknowledges_nothing_and_the_majority_goes_on() {
    within(BOUND, async {
        let cluster = Cluster::start(3, 10_000).await;
        let old = cluster.leader().await;
        outcome(
            cluster
                .node(old)
                .write(create("q.fifo", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        let others: Vec<u64> = cluster
            .nodes
            .keys()
            .copied()
            .filter(|id| *id != old)
            .collect();
        for &o in &others {
            cluster.node(old).partition().set(o, true);
            cluster.node(o).partition().set(old, true);
        }
        let lost = cluster
            .node(old)
            .write(send("q.fifo", "g", "lost", "lost"))
            .await;
        assert!(
            matches!(lost, Err(NodeError::Timeout(_) | NodeError::Unavailable(_))),
            "got {lost:?}"
        );
        // The majority elects a leader and serves.
        let deadline = Instant::now() + Duration::from_secs(15);
        let new = loop {
            let l = cluster
                .node(others[0])
                .raft()
                .metrics()
                .borrow()
                .current_leader;
            if let Some(l) = l.filter(|l| *l != old) {
                break l;
            }
            assert!(Instant::now() < deadline, "majority elected no leader");
            sleep(Duration::from_millis(50)).await;
        };
        let kept = sent(
            cluster
                .node(new)
                .write(send("q.fifo", "g", "kept", "kept"))
                .await
                .expect("send"),
        );
        assert!(!kept.duplicate);
        for &o in &others {
            cluster.node(old).partition().set(o, false);
            cluster.node(o).partition().set(old, false);
        }
        cluster.converged().await;
        for node in cluster.nodes.values() {
            let b = node
                .reader()
                .with_engine(|e| e.stats(ACCOUNT, "q.fifo", 0))
                .expect("engine");
            assert_eq!(
                b.map(|s| s.visible),
                Ok::<u64, EngineError>(1),
                "one history: only the committed send"
            );
        }
        assert_eq!(bodies(cluster.node(old), "q.fifo").await, ["kept"]);
    })
    .await;
}

/// A follower cut off from the others does not stand for election, so when it comes back its
/// term does not depose the leader: with the gate held open, it would have stood in each of the
/// elections the test waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_follower_does_not_stand_and_rejoins_under_the_same_leader() {
    within(BOUND, async {
        let cluster = Cluster::start(3, 10_000).await;
        let follower = cluster.follower().await;
        held_back_while_cut(&cluster, follower, |on| isolate(&cluster, follower, on)).await;
    })
    .await;
}

/// A follower cut off from its leader alone does not stand while the other follower still hears
/// the leader: that follower would refuse its vote, and the higher term of a candidate that
/// cannot win would depose the leader when the cut heals.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_cut_off_from_its_leader_alone_does_not_depose_it() {
    within(BOUND, async {
        let cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let follower = cluster.follower().await;
        held_back_while_cut(&cluster, follower, |on| {
            cluster.node(follower).partition().set(leader, on);
            cluster.node(leader).partition().set(follower, on);
        })
        .await;
    })
    .await;
}

/// Cuts `follower`'s links with `cut`, waits until its election gate held it back from three
/// elections (those openraft would have started, counted in the node's status), checks that its
/// term did not move, heals the cut, and checks that it rejoins under the same leader, whose
/// term did not move either.
async fn held_back_while_cut(cluster: &Cluster, follower: u64, cut: impl Fn(bool)) {
    let leader = cluster.leader().await;
    let term = |id: u64| cluster.node(id).raft().metrics().borrow().current_term;
    let before = term(leader);
    let cut_off = cluster.node(follower);
    let held_back = || async move { cut_off.status().await.elections_held_back };
    let before_cut = held_back().await;
    cut(true);
    let deadline = Instant::now() + Duration::from_secs(15);
    while held_back().await < before_cut + 3 {
        assert!(
            Instant::now() < deadline,
            "the gate did not hold the cut-off follower back from three elections"
        );
        sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        term(follower),
        before,
        "the cut-off follower stood for election"
    );
    cut(false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while cut_off.raft().metrics().borrow().current_leader != Some(leader) {
        assert!(Instant::now() < deadline, "the follower did not rejoin");
        sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(term(leader), before, "the leader was deposed");
    assert_eq!(cluster.leader().await, leader);
}

/// A follower whose calls to the leader are lost while the leader's appends still reach it (a
/// one-way cut) answers its clients at once that it cannot reach the leader, instead of holding
/// each request until the client gives up: a client with other endpoints moves on to them. The
/// test waits until the follower's status says the leader is cut off from it (its pings
/// unanswered for a second while the appends arrive, which is what the refusal goes by), then
/// checks that a request is refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_cut_off_one_way_from_its_leader_answers_at_once() {
    within(BOUND, async {
        let cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let follower = cluster.follower().await;
        let through = cluster.node(follower);
        outcome(
            through
                .write(create("cut", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        through.partition().set(leader, true);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !through.status().await.leader_unreachable {
            assert!(
                Instant::now() < deadline,
                "the follower never saw its leader cut off"
            );
            sleep(Duration::from_millis(50)).await;
        }
        let asked = Instant::now();
        let refused = through.write(plain("cut", "refused")).await;
        assert!(
            matches!(refused, Err(NodeError::LeaderUnreachable(l)) if l == leader),
            "{refused:?}"
        );
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "the follower held the request {:?}",
            asked.elapsed()
        );
        send_plain(cluster.node(leader), "cut", "kept").await;
        through.partition().set(leader, false);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match through.write(plain("cut", "healed")).await {
                Ok(response) => {
                    sent(response);
                    break;
                }
                // Refused before it was sent: trying again cannot apply it twice.
                Err(NodeError::LeaderUnreachable(_) | NodeError::Unavailable(_))
                    if Instant::now() < deadline =>
                {
                    sleep(Duration::from_millis(100)).await
                }
                other => panic!("the healed follower still refuses: {other:?}"),
            }
        }
        assert_eq!(cluster.leader().await, leader, "the leader was deposed");
        cluster.converged().await;
        assert_eq!(bodies(through, "cut").await, ["kept", "healed"]);
    })
    .await;
}

/// A leader whose disk fails while it serves stops: its Raft core halts, it acknowledges
/// nothing it could not write, and the other nodes elect a leader that has every send
/// acknowledged before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_whose_disk_fails_halts_and_the_others_go_on() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let failing = cluster.node(leader);
        outcome(
            failing
                .write(create("disk", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        send_plain(failing, "disk", "before").await;
        let halted = failing.halted();
        failing.fail_disk();
        let refused = failing.write(plain("disk", "unwritten")).await;
        assert!(refused.is_err(), "acknowledged without a log: {refused:?}");
        let halted = timeout(Duration::from_secs(10), halted)
            .await
            .expect("the Raft core halts");
        assert!(halted.to_string().contains("disk fails"), "{halted}");
        cluster.stop(leader).await;
        let successor = cluster.leader().await;
        assert_ne!(successor, leader);
        send_plain(cluster.node(successor), "disk", "after").await;
        cluster.converged().await;
        // The refused send's outcome is unknown to its client: it may have reached the others.
        let mut kept = bodies(cluster.node(successor), "disk").await;
        kept.retain(|body| body != "unwritten");
        assert_eq!(kept, ["before", "after"]);
    })
    .await;
}

/// Cuts (or heals) every link between `id` and the other nodes, both ways (the links of the
/// others that run): to them it is as if its process were paused.
fn isolate(cluster: &Cluster, id: u64, cut: bool) {
    for &other in cluster.peers.keys().filter(|other| **other != id) {
        cluster.node(id).partition().set(other, cut);
        if let Some(node) = cluster.nodes.get(&other) {
            node.partition().set(id, cut);
        }
    }
}

/// A node that lost its data directory (kill -9, directory deleted, started again with the same
/// flags) must not vote with its empty log: here node 3, paused while nodes 1 and 2 acknowledged
/// sends, would win an election with that vote while node 2 is down, and the cluster would go
/// on without those sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_lost_its_disk_does_not_vote_away_acknowledged_sends() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let node = cluster.node(cluster.leader().await);
        outcome(
            node.write(create("q", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        for i in 0..50 {
            send_plain(node, "q", &format!("before-{i}")).await;
        }
        cluster.converged().await;
        isolate(&cluster, 3, true);
        let node = cluster.node(1);
        for i in 0..100 {
            send_plain(node, "q", &format!("while-paused-{i}")).await;
        }
        cluster.stop(1).await;
        cluster.stop(2).await;
        std::fs::remove_dir_all(cluster.dir.path().join("node-1")).expect("wipe node 1");
        cluster.restart(1).await;
        isolate(&cluster, 3, false);
        sleep(Duration::from_secs(2)).await;
        cluster.restart(2).await;
        // Read through node 3, which serves from whichever node leads.
        let s = stats(cluster.node(3), "q").await;
        assert_eq!(s.visible, 150, "every acknowledged send is served");
    })
    .await;
}

fn add(id: u64, raft_addr: &str) -> Change {
    Change::Add {
        id,
        raft_addr: raft_addr.to_string(),
    }
}

async fn change(node: &Node, change: Change) -> ChangeResult {
    node.change_membership(change)
        .await
        .expect("the leader answers")
}

/// A node started with `--join` is added as a voter and holds the same state; a leader that is
/// removed hands over first and the cluster goes on without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_are_added_and_removed_while_the_cluster_serves() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let node = cluster.node(leader);
        create_and_fill(node, "q", 20).await;
        let follower = cluster.follower().await;
        let addr = cluster.launch_joining(4).await;
        change(cluster.node(follower), add(4, &addr))
            .await
            .expect("node 4 added");
        cluster.voters_are(&[1, 2, 3, 4]).await;
        cluster.converged().await;
        assert_eq!(stats(cluster.node(4), "q").await.visible, 20);

        // Remove the leader through another node: it hands over, then leaves.
        let leader = cluster.leader().await;
        change(cluster.node(4), Change::Remove { id: leader })
            .await
            .expect("the leader removed");
        let remaining: Vec<u64> = [1, 2, 3, 4]
            .into_iter()
            .filter(|id| *id != leader)
            .collect();
        cluster.stop(leader).await;
        cluster.voters_are(&remaining).await;
        let node = cluster.node(cluster.leader().await);
        send_plain(node, "q", "after").await;
        cluster.converged().await;
        assert_eq!(stats(node, "q").await.visible, 21);
    })
    .await;
}

/// A follower shows how far every member has come: its own figures, and the log, commit and
/// applied index each other member answered its pings with; a member that stopped answering
/// shows none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_shows_every_members_log_commit_and_applied_index() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        create_and_fill(cluster.node(leader), "q", 10).await;
        let written = cluster.node(leader).status().await.last_applied;
        let follower = cluster.follower().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = cluster.node(follower).status().await;
            let caught_up = status.members.iter().all(|m| {
                m.applied_index.is_some_and(|a| a >= written)
                    && m.commit_index >= m.applied_index
                    && m.last_log_index >= m.commit_index
            });
            if caught_up {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {follower} does not show every member at index {written}: {:?}",
                status.members
            );
            sleep(Duration::from_millis(50)).await;
        }
        let other = cluster
            .nodes
            .keys()
            .copied()
            .find(|id| *id != leader && *id != follower)
            .expect("a third node");
        cluster.stop(other).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = cluster.node(follower).status().await;
            let stopped = status
                .members
                .iter()
                .find(|m| m.id == other)
                .expect("member");
            if !stopped.answering {
                assert_eq!(
                    (
                        stopped.last_log_index,
                        stopped.commit_index,
                        stopped.applied_index
                    ),
                    (None, None, None)
                );
                break;
            }
            assert!(Instant::now() < deadline, "node {other} still answers");
            sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// Each refused change names its rule and leaves the membership as it was. For the removal
/// that would leave no majority answering, the test waits until the leader's status shows the
/// stopped follower no longer answering its pings (the answers the leader counts when asked
/// to remove a voter), rather than for a fixed time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_membership_changes_are_refused_and_change_nothing() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let node = cluster.node(leader);
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let nobody = closed.local_addr().expect("addr").to_string();
        drop(closed);
        let other = Cluster::start(1, 10_000).await;
        other.leader().await;
        let cases = [
            (add(2, &cluster.peers[&3]), ChangeError::AlreadyVoter(2)),
            (add(9, "nohost"), ChangeError::BadAddress("nohost".into())),
            (add(9, &nobody), ChangeError::Unreachable(nobody.clone())),
            (
                add(9, &other.peers[&1]),
                ChangeError::OtherCluster(other.peers[&1].clone()),
            ),
            (Change::Remove { id: 9 }, ChangeError::UnknownNode(9)),
        ];
        for (bad, expected) in cases {
            assert_eq!(change(node, bad).await, Err(expected));
        }
        assert_eq!(
            change(other.node(1), Change::Remove { id: 1 }).await,
            Err(ChangeError::LastVoter(1))
        );
        // With one follower down, removing the other leaves one of two voters answering.
        let mut followers = cluster.nodes.keys().copied().filter(|id| *id != leader);
        let (down, kept) = (followers.next().expect("a"), followers.next().expect("b"));
        cluster.stop(down).await;
        let node = cluster.node(leader);
        let deadline = Instant::now() + Duration::from_secs(10);
        while node
            .status()
            .await
            .members
            .iter()
            .any(|m| m.id == down && m.answering)
        {
            assert!(
                Instant::now() < deadline,
                "the leader still counts node {down} as answering"
            );
            sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            change(node, Change::Remove { id: kept }).await,
            Err(ChangeError::NoMajority {
                id: kept,
                answering: 1,
                voters: 2
            })
        );
        cluster.voters_are(&[1, 2, 3]).await;
    })
    .await;
}

/// The documented repair of a lost disk: the node, started again with its flags, refuses to
/// vote until `replace` removed it and added it back; then it votes, and with one other node
/// down the cluster still elects a leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_lost_its_disk_votes_again_once_replaced() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let node = cluster.node(cluster.leader().await);
        create_and_fill(node, "q", 10).await;
        let lost = cluster.follower().await;
        cluster.stop(lost).await;
        std::fs::remove_dir_all(cluster.dir.path().join(format!("node-{lost}"))).expect("wipe");
        cluster.restart(lost).await;
        let addr = cluster.peers[&lost].clone();
        let node = cluster.node(cluster.leader().await);
        change(node, Change::Remove { id: lost })
            .await
            .expect("removed");
        change(node, add(lost, &addr)).await.expect("added back");
        cluster.voters_are(&[1, 2, 3]).await;
        cluster.converged().await;
        // Stop a node other than the replaced one: the two left need its vote.
        let others: Vec<u64> = cluster
            .nodes
            .keys()
            .copied()
            .filter(|id| *id != lost)
            .collect();
        let (down, other) = (others[0], others[1]);
        cluster.stop(down).await;
        let node = cluster.node(other);
        send_plain(node, "q", "after").await;
        assert_eq!(stats(cluster.node(lost), "q").await.visible, 11);
    })
    .await;
}

/// A leader about to stop hands over: its successor leads after one election, without waiting
/// for the old leader to go silent, and writes through the old leader go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_hands_over_before_it_stops() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let node = cluster.node(leader);
        outcome(
            node.write(create("q", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        let term = node.raft().metrics().borrow().current_term;
        let successor = node
            .hand_over()
            .await
            .expect("handed over")
            .expect("a successor");
        assert_ne!(successor, leader);
        let metrics = cluster.node(successor).raft().metrics().borrow().clone();
        assert_eq!(
            (metrics.current_leader, metrics.current_term),
            (Some(successor), term + 1)
        );
        send_plain(node, "q", "after").await;
        cluster.stop(leader).await;
        assert_eq!(
            cluster.leader().await,
            successor,
            "no election after the stop"
        );
        let follower = cluster.follower().await;
        assert_eq!(cluster.node(follower).hand_over().await, Ok(None));
    })
    .await;
}

/// A move task started under one leader goes on under the next, from the state every node holds:
/// the new leader's timer takes the remaining steps, and every message goes back to its source
/// exactly once, oldest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_task_goes_on_under_the_next_leader() {
    within(BOUND, async {
        let mut cluster = Cluster::start(3, 10_000).await;
        let leader = cluster.leader().await;
        let node = cluster.node(leader);
        outcome(
            node.write(create("dlq", QueueAttributes::default()))
                .await
                .expect("create"),
        );
        let redrive = QueueAttributes {
            redrive_policy: Some(Some(RedrivePolicyInput {
                dead_letter_target: Some("dlq".into()),
                max_receive_count: Some(1),
            })),
            ..QueueAttributes::default()
        };
        outcome(node.write(create("work", redrive)).await.expect("create"));
        fill(node, "work", 40).await;
        // A zero-length lease ends at once: each message is dead-lettered by its receive.
        while stats(node, "work").await.visible > 0 {
            outcome(node.write(receive("work", 10, 0)).await.expect("receive"));
        }
        assert_eq!(stats(node, "dlq").await.visible, 40);
        let start = Command::StartMoveTask {
            account: ACCOUNT.into(),
            queue: "dlq".into(),
            task_handle: Uuid::new_v4(),
            task: MoveTaskInput {
                max_messages_per_second: Some(20),
                ..MoveTaskInput::default()
            },
        };
        match outcome(node.write(start).await.expect("start")) {
            Outcome::MoveTask(task) => assert_eq!(task.to_move, 40),
            other => panic!("unexpected {other:?}"),
        }
        let task_of = |node: &Node| {
            node.with_engine(|e| e.move_tasks(ACCOUNT, "dlq"))
                .expect("engine")
                .expect("tasks")
                .remove(0)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while task_of(node).moved < 6 {
            assert!(Instant::now() < deadline, "the task did not start moving");
            sleep(Duration::from_millis(20)).await;
        }
        cluster.stop(leader).await;
        let new_leader = cluster.leader().await;
        assert_ne!(new_leader, leader);
        let node = cluster.node(new_leader);
        let moved_before = task_of(node).moved;
        assert!(
            moved_before < 40,
            "the old leader did not finish it: {moved_before}"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let task = task_of(node);
            if task.status != MoveTaskStatus::Running {
                assert_eq!(task.status, MoveTaskStatus::Completed, "{task:?}");
                assert_eq!((task.moved, task.skipped), (40, 0));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the new leader did not go on: {task:?}"
            );
            sleep(Duration::from_millis(50)).await;
        }
        let expected: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
        assert_eq!(
            bodies(node, "work").await,
            expected,
            "each once, oldest first"
        );
        assert!(bodies(node, "dlq").await.is_empty());
        cluster.converged().await;
    })
    .await;
}
