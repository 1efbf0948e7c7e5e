//! Test setup shared by the tests of the client API (`api`, `http`, `grpc`): a real single-node
//! cluster on loopback in a temporary directory (or a node that cannot elect a leader),
//! `raftq_api::router` with the SQS-compatible endpoint served on another loopback port, as
//! `raftq serve` serves them, a time bound for every test, and a key
//! file of two accounts. Each test stops its server and node with [`Serving::shutdown`].

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use raftq_api::{router, Api, Keys};
use raftq_node::{Node, NodeConfig};
use raftq_sqs::Sqs;
use sha2::Digest;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout, Instant};

/// Longest any one test may run.
pub const TEST_LIMIT: Duration = Duration::from_secs(90);

const KEY_FILE: &str = r#"
[[keys]]
account = "acme"
key = "acme-key"

[[keys]]
account = "globex"
# SHA-256 of "globex-key"
key_sha256 = "GLOBEX_DIGEST"

[[keys]]
account = "ops"
key = "admin-key"
role = "admin"
"#;

/// The key file of two accounts: `acme` (key `acme-key`, given as it is) and `globex` (key
/// `globex-key`, given by its SHA-256, computed here rather than trusted from a constant), and
/// an admin key `admin-key` of the account `ops`.
pub fn key_file() -> String {
    let globex_digest = hex::encode(sha2::Sha256::digest(b"globex-key"));
    KEY_FILE.replace("GLOBEX_DIGEST", &globex_digest)
}

/// The keys of [`key_file`].
pub fn two_accounts() -> Keys {
    Keys::from_toml(&key_file()).expect("keys")
}

/// Runs a test body within [`TEST_LIMIT`].
pub async fn bounded(body: impl Future<Output = ()>) {
    timeout(TEST_LIMIT, body).await.expect("test took too long");
}

/// A node and the router serving it.
pub struct Serving {
    /// Where the router listens (REST and gRPC).
    pub addr: SocketAddr,
    pub node: Arc<Node>,
    stop: oneshot::Sender<()>,
    serving: JoinHandle<()>,
    _dir: TempDir,
}

/// Starts node 1 of a cluster of itself and `extra_peers`.
async fn start_node(extra_peers: &[(u64, String)], dir: &TempDir) -> Node {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind raft");
    let mut peers = BTreeMap::from([(1, listener.local_addr().expect("addr").to_string())]);
    peers.extend(extra_peers.iter().cloned());
    let mut config = NodeConfig::new(1, peers, dir.path().join("node-1"));
    config.heartbeat_ms = 50;
    Node::start(config, listener).await.expect("start node")
}

impl Serving {
    /// A single-node cluster, once it leads.
    pub async fn start(keys: Keys) -> Serving {
        Serving::start_with(keys, &[], true).await
    }

    /// Node 1 of a cluster of two whose node 2 never starts: alone, it cannot elect a leader.
    pub async fn without_quorum(keys: Keys) -> Serving {
        Serving::start_with(keys, &[(2, absent_peer().await)], false).await
    }

    /// Node 1 of a cluster with `extra_peers`; waits until it leads when `leader`.
    async fn start_with(keys: Keys, extra_peers: &[(u64, String)], leader: bool) -> Serving {
        let dir = TempDir::new().expect("temp dir");
        let node = Arc::new(start_node(extra_peers, &dir).await);
        if leader {
            let deadline = Instant::now() + Duration::from_secs(15);
            while node.raft().metrics().borrow().current_leader != Some(1) {
                assert!(Instant::now() < deadline, "no leader");
                sleep(Duration::from_millis(20)).await;
            }
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind api");
        let addr = listener.local_addr().expect("addr");
        let advertised = format!("http://{addr}");
        let app = router(Api::new(Arc::clone(&node), "local", keys))
            .serving(|ops| Sqs::new(ops, &advertised, BTreeMap::new()));
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Serving {
            addr,
            node,
            stop,
            serving,
            _dir: dir,
        }
    }

    /// Stops the router and the node; drop the clients first, or the stop waits for them.
    pub async fn shutdown(self) {
        let Serving {
            node,
            stop,
            serving,
            _dir,
            ..
        } = self;
        let _ = stop.send(());
        let _ = timeout(Duration::from_secs(10), serving).await;
        if let Ok(node) = Arc::try_unwrap(node) {
            node.shutdown().await;
        }
    }
}

/// The address of a peer that never starts: a port that was free a moment ago, on a loopback
/// address no test listens on. (On 127.0.0.1 another test's node could be given the same port
/// and answer as this peer: two clusters' nodes 1 then met, and openraft's engine panicked.)
async fn absent_peer() -> String {
    let absent = tokio::net::TcpListener::bind("127.0.0.2:0")
        .await
        .expect("bind");
    absent.local_addr().expect("addr").to_string()
}
