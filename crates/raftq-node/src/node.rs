//! A raftq node: opens its RocksDB store, runs openraft with the peer gRPC service, finds or
//! forms its cluster on a first start (`formation`), forwards client requests to the leader and, while it leads, proposes
//! the ticks that fire due timers.
//!
//! Time: the leader stamps each entry with its clock (milliseconds since the Unix epoch) when it
//! proposes it; the state machine never reads a clock.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use openraft::error::RaftError;
use openraft::{Config, Raft, ServerState, SnapshotPolicy};
use raftq_engine::{Command, EngineError};
use raftq_store::{
    open_db, NodeId, Response, RocksLogStore, RocksStateMachine, StateReader, TypeConfig, LOGS_CF,
    META_CF,
};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;

use crate::admission::{Admission, Standing};
use crate::batcher::Batcher;
use crate::clock::{LeaderClock, WallClock};
use crate::error::{NodeError, StartError};
use crate::membership::{self, Change, ChangeResult};
use crate::network::{Network, Partition, PeerClients, WINDOW};
use crate::query::{self, Query, QueryResult};
use crate::rpc::raft_server::RaftServer;
use crate::service::PeerService;
use crate::{formation, gate};
use crate::{snapshots, timer};

/// How long a client request may wait for a leader before it is answered `unavailable`.
const LEADER_WAIT: Duration = Duration::from_secs(5);
/// How long shutdown waits for openraft's tasks to release the database.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// Pause between attempts while no leader is known.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Log entries one replication request may cover (openraft's default is 300). The network sends
/// them in requests of at most [`APPEND_BYTES`](crate::network::APPEND_BYTES); a new leader
/// probes where a follower's log matches its own with this many entries at a time, which fewer
/// keeps cheap, while more let a follower that fell behind catch up in fewer round trips.
const MAX_PAYLOAD_ENTRIES: u64 = 32;

/// What a node needs to know to start.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub id: NodeId,
    /// Raft addresses of every member of a new cluster, this node included (`host:port`): used
    /// to form the cluster on the first start. A restarted node goes by the membership in its log.
    pub peers: BTreeMap<NodeId, String>,
    /// A member's peer address, for a node that starts to be added to a running cluster (it
    /// never forms one); `peers` is then unused.
    pub join: Option<String>,
    /// Where the database lives.
    pub data_dir: PathBuf,
    /// The region this cluster serves.
    pub region: String,
    /// Build a snapshot (and purge the log behind it) once at least this many entries were
    /// applied since the last one, and the log since then outweighs it (see `snapshots`).
    pub snapshot_after_logs: u64,
    /// Milliseconds between heartbeats. The election timeout is 5 to 10 of them: a follower
    /// that knew a leader waits out its lease (the longest timeout) and then a random timeout
    /// before it stands, 15 to 20 heartbeats after the last one it heard.
    pub heartbeat_ms: u64,
    /// How far this node's clock may run ahead of the cluster's time (see `clock`).
    pub max_clock_skew_ms: u64,
    /// Where this node reads the time.
    pub wall_clock: WallClock,
}

impl NodeConfig {
    /// Milliseconds between heartbeats unless set otherwise. openraft gives an append one
    /// heartbeat interval to be answered; see docs/cluster.md ("Timing") for how it was chosen.
    pub const DEFAULT_HEARTBEAT_MS: u64 = 50;
    /// How far a clock may run ahead unless set otherwise.
    pub const DEFAULT_MAX_CLOCK_SKEW_MS: u64 = 500;

    /// Defaults for a member `id` of the cluster `peers`.
    pub fn new(id: NodeId, peers: BTreeMap<NodeId, String>, data_dir: PathBuf) -> NodeConfig {
        NodeConfig {
            id,
            peers,
            join: None,
            data_dir,
            region: "local".into(),
            snapshot_after_logs: 20_000,
            heartbeat_ms: Self::DEFAULT_HEARTBEAT_MS,
            max_clock_skew_ms: Self::DEFAULT_MAX_CLOCK_SKEW_MS,
            wall_clock: WallClock::system(),
        }
    }
}

/// A client request a follower hands to the leader.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Forwarded {
    Write(Command),
    Read(Query),
    Change(Change),
}

/// The leader's answer to a [`Forwarded`] request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ForwardReply {
    Written(Response),
    Read(Result<QueryResult, EngineError>),
    Changed(ChangeResult),
}

/// The parts of a node the peer service and the timer share.
pub(crate) struct Core {
    pub id: NodeId,
    pub raft: Raft<TypeConfig>,
    pub batcher: Batcher,
    pub reader: StateReader,
    pub network: Network,
    /// The cluster this node belongs to and whether it may vote.
    pub admission: Admission,
    /// The time this node stamps and reads at while it leads.
    pub clock: Arc<LeaderClock>,
    /// Set while this leader hands its leadership over: it proposes nothing, answers no read and
    /// sends no heartbeat, so that its followers' leader lease runs out and the successor wins.
    pub handing_over: std::sync::atomic::AtomicBool,
    /// Held while a membership change runs (on the leader).
    pub changing: tokio::sync::Mutex<()>,
    /// When each member last answered the election gate's pings.
    pub answered: std::sync::RwLock<BTreeMap<NodeId, tokio::time::Instant>>,
    /// Connections to the leaders this node forwarded to, by node id and address (reused: a
    /// forwarded request must not pay for a new connection), apart from Raft's own.
    pub forwarders: PeerClients,
}

/// A running node.
pub struct Node {
    core: Arc<Core>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// The group-commit task; it ends when aborted at shutdown.
    batching: JoinHandle<()>,
    /// The database, to know when every holder has let go of it.
    db: Weak<rocksdb::DB>,
}

impl Node {
    /// Starts a node whose peer service listens on `listener`.
    pub async fn start(config: NodeConfig, listener: TcpListener) -> Result<Node, StartError> {
        if config.join.is_none() && !config.peers.contains_key(&config.id) {
            return Err(StartError::Config(format!(
                "--peers must include this node ({})",
                config.id
            )));
        }
        std::fs::create_dir_all(&config.data_dir)?;
        let db = open_db(&config.data_dir.join("db"))?;
        let db_handle = Arc::clone(&db);
        let log = RocksLogStore::new(Arc::clone(&db), LOGS_CF, META_CF)?;
        let appended = log.appended();
        let admission = Admission::open(&log).map_err(|e| StartError::Enrolment(e.to_string()))?;
        if config.join.is_some() && admission.standing() == Standing::Blank {
            admission
                .become_joining()
                .await
                .map_err(|e| StartError::Enrolment(e.to_string()))?;
        }
        let sm = RocksStateMachine::open(db, &config.region, config.data_dir.join("snapshots"))?;
        let reader = sm.reader();
        let awaited = sm.awaited();
        let raft_config = Config {
            cluster_name: "raftq".into(),
            heartbeat_interval: config.heartbeat_ms,
            election_timeout_min: 5 * config.heartbeat_ms,
            election_timeout_max: 10 * config.heartbeat_ms,
            // `snapshots::run` asks for them.
            snapshot_policy: SnapshotPolicy::Never,
            max_in_snapshot_log_to_keep: 0,
            max_payload_entries: MAX_PAYLOAD_ENTRIES,
            ..Default::default()
        }
        .validate()
        .map_err(|e| StartError::Config(e.to_string()))?;
        let network = Network {
            peers: PeerClients::new(Partition::default(), admission.cluster()),
        };
        let raft = Raft::new(config.id, Arc::new(raft_config), network.clone(), log, sm)
            .await
            .map_err(|e| StartError::Raft(e.to_string()))?;
        // The election gate keeps them so; off from the start for a node that may not stand.
        raft.runtime_config().elect(admission.may_stand());
        let forming = matches!(admission.standing(), Standing::Blank | Standing::Fresh);
        log_if_flags_differ(&config, &raft, admission.standing());
        let clock = Arc::new(LeaderClock::new(
            config.wall_clock.clone(),
            config.max_clock_skew_ms,
        ));
        let (batcher, batching) =
            Batcher::start(raft.clone(), LEADER_WAIT, awaited, Arc::clone(&clock));
        let core = Arc::new(Core {
            id: config.id,
            raft,
            batcher,
            reader,
            forwarders: PeerClients::new(network.peers.partition.clone(), admission.cluster()),
            network,
            admission,
            clock,
            handing_over: Default::default(),
            changing: tokio::sync::Mutex::new(()),
            answered: Default::default(),
        });
        let (shutdown, signal) = watch::channel(false);
        let mut tasks = Vec::new();
        let service = RaftServer::new(PeerService::new(Arc::clone(&core)))
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX);
        let mut server_signal = signal.clone();
        tasks.push(tokio::spawn(async move {
            // The builder's `tcp_nodelay` only reaches sockets it accepts itself: the incoming
            // stream sets it here, or small replies would wait on Nagle's algorithm.
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            let result = tonic::transport::Server::builder()
                .initial_stream_window_size(Some(WINDOW))
                .initial_connection_window_size(Some(WINDOW))
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = server_signal.wait_for(|stop| *stop).await;
                })
                .await;
            if let Err(e) = result {
                tracing::error!(error = %e, "peer service stopped");
            }
        }));
        if forming {
            tasks.push(tokio::spawn(formation::run(
                Arc::clone(&core),
                config.peers.clone(),
                signal.clone(),
            )));
        }
        if let (Some(member), Standing::Joining) = (&config.join, core.admission.standing()) {
            tasks.push(tokio::spawn(formation::announce(
                Arc::clone(&core),
                member.clone(),
                signal.clone(),
            )));
        }
        tasks.push(tokio::spawn(gate::run(Arc::clone(&core), signal.clone())));
        tasks.push(tokio::spawn(snapshots::run(
            core.raft.clone(),
            core.reader.clone(),
            appended,
            config.snapshot_after_logs,
            signal.clone(),
        )));
        tasks.push(tokio::spawn(timer::run(Arc::clone(&core), signal)));
        Ok(Node {
            core,
            shutdown,
            tasks,
            batching,
            db: Arc::downgrade(&db_handle),
        })
    }

    pub fn id(&self) -> NodeId {
        self.core.id
    }

    /// The openraft handle (metrics, membership).
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.core.raft
    }

    /// Read access to this node's applied state.
    pub fn reader(&self) -> &StateReader {
        &self.core.reader
    }

    /// The switch partition tests use to cut this node's outgoing links.
    pub fn partition(&self) -> &Partition {
        &self.core.network.peers.partition
    }

    /// Commits a command through the leader (forwarding when this node is not it) and returns
    /// the state machine's response. Success means committed on a majority and applied.
    pub async fn write(&self, command: Command) -> Result<Response, NodeError> {
        match self.core.route(Forwarded::Write(command)).await? {
            ForwardReply::Written(response) => Ok(response),
            _ => Err(mismatched()),
        }
    }

    /// A linearizable read, answered by the leader (forwarding when this node is not it).
    pub async fn read(&self, query: Query) -> Result<Result<QueryResult, EngineError>, NodeError> {
        match self.core.route(Forwarded::Read(query)).await? {
            ForwardReply::Read(result) => Ok(result),
            _ => Err(mismatched()),
        }
    }

    /// Changes the cluster's membership through the leader (see `membership`). Success means
    /// the change committed; a refusal changed nothing.
    pub async fn change_membership(&self, change: Change) -> Result<ChangeResult, NodeError> {
        match self.core.route(Forwarded::Change(change)).await? {
            ForwardReply::Changed(result) => Ok(result),
            _ => Err(mismatched()),
        }
    }

    /// When this node leads, hands its leadership to the most caught-up other voter and waits
    /// until that node leads (before a planned stop: the cluster need not wait out an election
    /// timeout). Returns the new leader; `None` when this node did not lead or is the only voter.
    pub async fn hand_over(&self) -> Result<Option<NodeId>, NodeError> {
        if !self.core.is_leader() {
            return Ok(None);
        }
        let (voters, nodes) = {
            let metrics = self.core.raft.metrics();
            let m = metrics.borrow();
            let membership = m.membership_config.membership();
            let voters: std::collections::BTreeSet<NodeId> = membership
                .voter_ids()
                .filter(|id| *id != self.core.id)
                .collect();
            let nodes: BTreeMap<NodeId, String> = membership
                .nodes()
                .map(|(id, n)| (*id, n.addr.clone()))
                .collect();
            (voters, nodes)
        };
        if voters.is_empty() {
            return Ok(None);
        }
        self.core.hand_over(&voters, &nodes).await.map(Some)
    }

    /// This node's clock minus the cluster's (the median of a majority of the voters'), in
    /// milliseconds, and whether it differs by more than the bound (then the node does not stand
    /// for election).
    pub fn clock_offset(&self) -> (i64, bool) {
        (
            self.core.clock.offset().unwrap_or(0),
            self.core.clock.skewed(),
        )
    }

    /// Queues that gained a deliverable message on this node (for long polls).
    pub fn wakeups(&self) -> tokio::sync::broadcast::Receiver<uuid::Uuid> {
        self.core.reader.subscribe()
    }

    /// Stops the node: Raft, the peer service and the timer.
    /// Returns once the database is closed (so the same directory can be opened again).
    pub async fn shutdown(self) {
        let Node {
            core,
            shutdown,
            tasks,
            batching,
            db,
        } = self;
        let _ = shutdown.send(true);
        if let Err(e) = core.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
        for task in tasks {
            let _ = task.await;
        }
        batching.abort();
        let _ = batching.await;
        drop(core);
        let deadline = Instant::now() + CLOSE_WAIT;
        while db.strong_count() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if db.strong_count() > 0 {
            tracing::warn!("the database is still open after shutdown");
        }
    }
}

/// Says when a restarted node's membership, which it goes by, differs from its flags.
fn log_if_flags_differ(config: &NodeConfig, raft: &Raft<TypeConfig>, standing: Standing) {
    let stored: BTreeMap<NodeId, String> = raft
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .nodes()
        .map(|(id, n)| (*id, n.addr.clone()))
        .collect();
    if standing == Standing::Member && config.join.is_none() && stored != config.peers {
        tracing::info!(
            ?stored,
            flags = ?config.peers,
            "the membership in the log differs from --peers; the log's is used"
        );
    }
}

/// A leader answered a request with a reply of another kind.
fn mismatched() -> NodeError {
    NodeError::Storage("mismatched reply".into())
}

impl Core {
    /// Runs a request here when this node leads, else at the leader; retries while no leader
    /// is known, up to [`LEADER_WAIT`] (a membership change also has the time it may take).
    async fn route(&self, request: Forwarded) -> Result<ForwardReply, NodeError> {
        let patience = match request {
            Forwarded::Change(_) => LEADER_WAIT + membership::LONGEST,
            Forwarded::Write(_) | Forwarded::Read(_) => LEADER_WAIT,
        };
        let deadline = Instant::now() + patience;
        loop {
            let outcome = match self.serve_local(&request).await {
                Err(NodeError::NotLeader(Some(leader))) if leader != self.id => {
                    self.forward(leader, &request, deadline).await
                }
                other => other,
            };
            match outcome {
                Err(NodeError::NotLeader(_)) | Err(NodeError::Unavailable(_))
                    if Instant::now() + RETRY_PAUSE < deadline =>
                {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(NodeError::NotLeader(_)) => {
                    return Err(NodeError::Unavailable("no leader could be reached".into()))
                }
                other => return other,
            }
        }
    }

    async fn forward(
        &self,
        leader: NodeId,
        request: &Forwarded,
        deadline: Instant,
    ) -> Result<ForwardReply, NodeError> {
        let addr = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            m.membership_config
                .membership()
                .get_node(&leader)
                .map(|n| n.addr.clone())
        };
        let Some(addr) = addr else {
            return Err(NodeError::NotLeader(None));
        };
        let mut client = self.forwarders.get(leader, &addr);
        let timeout = deadline.saturating_duration_since(Instant::now());
        let read = matches!(request, Forwarded::Read(_));
        // A leader that dies without closing its connections (its host gone, not just its
        // process) leaves the call hanging until its timeout; once this node sees another leader
        // or an election, the call is given up instead.
        let mut metrics = self.raft.metrics();
        if metrics.borrow().current_leader != Some(leader) {
            // Deposed before anything was sent: the request is routed again.
            return Err(NodeError::NotLeader(None));
        }
        // A write that may have reached the leader may have committed; a read can always be
        // asked again.
        let failed = |message: String, maybe_sent: bool| {
            if read || !maybe_sent {
                NodeError::Unavailable(message)
            } else {
                NodeError::Timeout(format!("{message}; the write may still commit"))
            }
        };
        // A leader that removes itself hands over on purpose, and answers where to go next.
        let deposed = async {
            match request {
                Forwarded::Change(_) => std::future::pending::<()>().await,
                _ => {
                    let _ = metrics.wait_for(|m| m.current_leader != Some(leader)).await;
                }
            }
        };
        tokio::select! {
            reply = client.forward(request, timeout) => reply.map_err(|e| {
                failed(format!("forwarding to node {leader}: {e}"), !e.unreachable())
            })?,
            _ = deposed => Err(failed(
                format!("node {leader} stopped leading while a request was forwarded to it"),
                true,
            )),
        }
    }

    /// Serves a request on this node, which must be the leader.
    pub(crate) async fn serve_local(&self, request: &Forwarded) -> Result<ForwardReply, NodeError> {
        if self.handing_over.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(NodeError::NotLeader(None));
        }
        match request {
            Forwarded::Write(command) => self
                .propose(command.clone())
                .await
                .map(ForwardReply::Written),
            Forwarded::Read(query) => {
                self.raft.ensure_linearizable().await.map_err(|e| match e {
                    RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(
                        f,
                    )) => NodeError::NotLeader(f.leader_id),
                    other => NodeError::Unavailable(other.to_string()),
                })?;
                let now = self.clock.now();
                // Timers that fell due since the last entry fire before the read sees the state.
                if self
                    .reader
                    .with_engine(|e| e.next_due())
                    .flatten()
                    .is_some_and(|due| due <= now)
                {
                    self.propose(Command::Tick).await?;
                }
                query::run(&self.reader, query, now).map(ForwardReply::Read)
            }
            Forwarded::Change(change) => self
                .change_membership(change)
                .await
                .map(ForwardReply::Changed),
        }
    }

    /// Proposes a command (stamped with this leader's clock, grouped with concurrent ones) and
    /// waits until it is applied.
    pub(crate) async fn propose(&self, command: Command) -> Result<Response, NodeError> {
        self.batcher.propose(command).await
    }

    /// The leader this node knows of.
    pub(crate) fn current_leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// The members that answered a ping `within` the last while, this node included.
    pub(crate) fn answering(&self, within: Duration) -> std::collections::BTreeSet<NodeId> {
        let mut answering: std::collections::BTreeSet<NodeId> = self
            .answered
            .read()
            .map(|a| {
                a.iter()
                    .filter(|(_, at)| at.elapsed() <= within)
                    .map(|(id, _)| *id)
                    .collect()
            })
            .unwrap_or_default();
        answering.insert(self.id);
        answering
    }

    /// Whether this node currently leads (and is not handing over).
    pub(crate) fn is_leader(&self) -> bool {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        m.state == ServerState::Leader
            && m.current_leader == Some(self.id)
            && !self.handing_over.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{CallError, PeerClient};

    /// A forward to `addr` that fails in transport, with its status.
    async fn failed_forward(addr: &str, timeout: Duration) -> tonic::Status {
        let mut client = PeerClient::new(2, addr, Partition::default(), Default::default());
        let request = Forwarded::Read(Query::ListQueues {
            account: "dev".into(),
            prefix: String::new(),
        });
        match client
            .forward::<_, Result<ForwardReply, NodeError>>(&request, timeout)
            .await
        {
            Err(CallError::Transport(status)) => status,
            other => panic!("expected a transport error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_known_to_have_sent_nothing() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = closed.local_addr().expect("addr").to_string();
        drop(closed);
        let status = failed_forward(&addr, Duration::from_secs(5)).await;
        assert!(CallError::Transport(status).unreachable());
    }

    #[tokio::test]
    async fn a_connection_lost_after_sending_may_have_delivered() {
        // A peer that accepts the connection and drops it: the request may have arrived.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                drop(stream);
            }
        });
        let status = failed_forward(&addr, Duration::from_secs(5)).await;
        assert!(!CallError::Transport(status).unreachable());
        server.abort();
    }

    #[tokio::test]
    async fn a_peer_that_answers_late_is_not_unreachable() {
        // Connected, but no answer within the call's timeout: a slow peer, which openraft must
        // keep sending heartbeats to.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let status = failed_forward(&addr, Duration::from_millis(200)).await;
        assert!(!CallError::Transport(status).unreachable());
        server.abort();
    }
}
