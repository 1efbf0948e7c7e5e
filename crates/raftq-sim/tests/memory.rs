//! Three nodes over the network in memory, on one tokio runtime: they form a cluster, elect a
//! leader, take writes through any node (followers forward them over the same network), and
//! elect another leader when the first is cut off both ways; once healed, the old leader
//! follows. Bounded in time; the data directories go with the test.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use raftq_engine::{Command, NewMessage, QueueAttributes};
use raftq_node::{Node, NodeConfig, NodeId, PeerTransport, Query, QueryResult};
use raftq_sim::net::Net;
use tempfile::TempDir;
use tokio::time::{sleep, timeout, Instant};
use uuid::Uuid;

const ACCOUNT: &str = "dev";
const BOUND: Duration = Duration::from_secs(60);

fn addr(id: NodeId) -> String {
    format!("node{id}:7000")
}

async fn start(net: &Arc<Net>, dir: &TempDir, id: NodeId, size: u64) -> Node {
    let peers: BTreeMap<NodeId, String> = (1..=size).map(|n| (n, addr(n))).collect();
    let config = NodeConfig::new(id, peers, dir.path().join(format!("node-{id}")));
    let (network, inbox) = net.attach(id, &addr(id));
    Node::start_with(config, PeerTransport::Memory { network, inbox })
        .await
        .expect("start")
}

/// The leader the nodes `asked` name, once they agree on one among them.
async fn leader(nodes: &BTreeMap<NodeId, Node>, asked: &[NodeId]) -> NodeId {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let mut named = Vec::new();
        for id in asked {
            named.push(nodes[id].status().await.leader);
        }
        if let Some(Some(first)) = named.first() {
            if asked.contains(first) && named.iter().all(|l| l == &Some(*first)) {
                return *first;
            }
        }
        assert!(Instant::now() < deadline, "no leader: {named:?}");
        sleep(Duration::from_millis(20)).await;
    }
}

fn send(body: &str) -> Command {
    Command::Send {
        account: ACCOUNT.into(),
        queue: "q".into(),
        message: NewMessage::new(Uuid::new_v4(), body),
    }
}

async fn visible(node: &Node) -> u64 {
    let query = Query::Stats {
        account: ACCOUNT.into(),
        queue: "q".into(),
    };
    match node.read(query).await {
        Ok(Ok(QueryResult::Stats(stats))) => stats.visible,
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_form_replicate_and_elect_again_over_the_network_in_memory() {
    timeout(BOUND, async {
        let dir = TempDir::new().expect("temp dir");
        let net = Net::new(7);
        let mut nodes = BTreeMap::new();
        for id in 1..=3 {
            nodes.insert(id, start(&net, &dir, id, 3).await);
        }
        let first = leader(&nodes, &[1, 2, 3]).await;
        let create = Command::CreateQueue {
            account: ACCOUNT.into(),
            queue_id: Uuid::new_v4(),
            name: "q".into(),
            attributes: QueueAttributes::default(),
        };
        nodes[&first].write(create).await.expect("create");
        for (i, node) in nodes.values().enumerate() {
            node.write(send(&format!("m{i}"))).await.expect("send");
        }
        assert_eq!(visible(&nodes[&first]).await, 3);

        let rest: Vec<NodeId> = (1..=3).filter(|id| *id != first).collect();
        for other in &rest {
            net.partition(first, *other, true);
        }
        let second = leader(&nodes, &rest).await;
        nodes[&second].write(send("m3")).await.expect("send");
        assert_eq!(visible(&nodes[&second]).await, 4);
        for other in &rest {
            net.partition(first, *other, false);
        }
        assert_eq!(
            leader(&nodes, &[1, 2, 3]).await,
            second,
            "the old leader follows"
        );
        for node in nodes.into_values() {
            node.shutdown().await;
        }
    })
    .await
    .expect("bounded");
}
