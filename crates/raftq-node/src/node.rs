//! A raftq node: opens its RocksDB store, runs openraft with the peer gRPC service, finds or
//! forms its cluster on a first start (`formation`), forwards client requests to the leader and, while it leads, proposes
//! the ticks that fire due timers.
//!
//! Time: the leader stamps each entry with its clock (milliseconds since the Unix epoch) when it
//! proposes it; the state machine never reads a clock.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use openraft::{Config, Raft, SnapshotPolicy};
use raftq_engine::{Command, Engine, EngineError};
use raftq_store::backup::{self, BackupSummary};
use raftq_store::{
    Database, GroupId, GroupStorage, LogOptions, LogStore, NodeId, NodeStore, Response,
    StateOptions, Storage, TypeConfig, WaitSlot,
};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::transport::server::TcpIncoming;

use crate::admission::{Admission, Standing};
use crate::clock::{LeaderClock, WallClock};
use crate::error::{Halted, NodeError, StartError};
use crate::group_commit::GroupCommit;
use crate::member::membership::{Change, ChangeResult};
use crate::member::routing::LEADER_WAIT;
use crate::member::status::NodeStatus;
use crate::member::{GroupCore, Groups, NodeCore};
use crate::network::{Dial, MemoryNetwork, Network, Partition, PeerClients, WINDOW};
use crate::protocol::Announced;
use crate::query::{question, Query, QueryResult, Question};
use crate::receiving::SnapshotReceiver;
use crate::rpc::raft_server::RaftServer;
use crate::service::{self, Delivery, PeerService};
use crate::space::{self, Space, SpaceReading};
use crate::tls::PeerTls;
use crate::{formation, gate};
use crate::{snapshots, timer};

/// How long shutdown waits for openraft's tasks to release the database.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Log entries one replication request may cover (openraft's default is 300). The network sends
/// them in requests of at most [`APPEND_BYTES`](crate::network::APPEND_BYTES); a new leader
/// probes where a follower's log matches its own with this many entries at a time, which fewer
/// keeps cheap, while more let a follower that fell behind catch up in fewer round trips.
const MAX_PAYLOAD_ENTRIES: u64 = 32;

/// How a node talks to its peers: over TCP (HTTP/2, with TLS when configured), or in memory.
pub enum PeerTransport {
    /// The peer service listens here; calls to peers go over HTTP/2.
    Tcp(tokio::net::TcpListener),
    /// Calls to this node arrive on `inbox`; calls to peers go through `network`.
    Memory {
        network: Arc<dyn MemoryNetwork>,
        inbox: mpsc::UnboundedReceiver<Delivery>,
    },
}

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
    /// Milliseconds between heartbeats. The election timeout is 5 to 7 of them: a follower
    /// that knew a leader waits out its lease (the longest timeout) and then a random timeout
    /// before it stands, 12 to 14 heartbeats after the last one it heard.
    pub heartbeat_ms: u64,
    /// How far this node's clock may run ahead of the cluster's time (see `clock`).
    pub max_clock_skew_ms: u64,
    /// Where this node reads the time.
    pub wall_clock: WallClock,
    /// Mutual TLS with the peers; without it peer traffic is plaintext and unauthenticated.
    pub peer_tls: Option<PeerTls>,
    /// Where the Raft log keeps its segment files and runs its slow work: the data directory's
    /// `log/` on the operating system's disk, with threads of its own, unless a simulation says
    /// otherwise.
    pub log: LogOptions,
    /// How the state store closes: written out, unless a simulation crashes the node.
    pub state: StateOptions,
    /// While it leads, the node refuses writes that add data (`storage_full`) once its data
    /// directory's file system has fewer free bytes than this (0: never; see `space`).
    pub min_free_bytes: u64,
    /// The Raft groups the node takes part in: groups 1 to this, each with every node of
    /// `peers` a member. A fixed layout, for tests of many groups; 1 unless set.
    pub groups: u32,
}

impl NodeConfig {
    /// Milliseconds between heartbeats unless set otherwise. openraft gives an append one
    /// heartbeat interval to be answered; see docs/cluster.md ("Timing") for how it was chosen.
    pub const DEFAULT_HEARTBEAT_MS: u64 = 50;
    /// How far a clock may run ahead unless set otherwise.
    pub const DEFAULT_MAX_CLOCK_SKEW_MS: u64 = 500;
    /// Free bytes below which writes that add data are refused unless set otherwise: room for
    /// RocksDB's flushes and compactions, a snapshot of a modest state and a few log segments.
    pub const DEFAULT_MIN_FREE_BYTES: u64 = 256 << 20;

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
            peer_tls: None,
            log: LogOptions::default(),
            state: StateOptions::default(),
            min_free_bytes: Self::DEFAULT_MIN_FREE_BYTES,
            groups: 1,
        }
    }
}

/// A running node.
pub struct Node {
    /// Group 1, which every call that names no group is for.
    core: Arc<GroupCore>,
    /// Every group this node takes part in, group 1 among them.
    groups: Arc<Groups>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// The groups' group-commit tasks; they end when aborted at shutdown.
    committing: Vec<JoinHandle<()>>,
    /// The database, to know when every holder has let go of it.
    database: Database,
    #[cfg(feature = "testing")]
    failing_disk: raftq_store::FailingDisk,
    /// The applied index at which the snapshot policy last found no snapshot due.
    #[cfg(feature = "testing")]
    snapshot_not_due: watch::Receiver<Option<u64>>,
}

/// The rules of a node's settings that need no state.
fn check(config: &NodeConfig) -> Result<(), StartError> {
    if config.join.is_none() && !config.peers.contains_key(&config.id) {
        return Err(StartError::Config(format!(
            "--peers must include this node ({})",
            config.id
        )));
    }
    if let Some(tls) = config
        .peer_tls
        .as_ref()
        .filter(|tls| tls.node_id != config.id)
    {
        return Err(StartError::Config(format!(
            "the peer certificate names node {}, not this node ({})",
            tls.node_id, config.id
        )));
    }
    Ok(())
}

/// Opens the node's log and state machine in its data directory (made durably if missing).
fn open_storage(config: &NodeConfig) -> Result<Storage, StartError> {
    raftq_store::open_on(&config.data_dir, &config.region, &config.log, &config.state)
        .map_err(storage_error)
}

/// A store that could not open: a damaged one told apart from one that cannot be read.
fn storage_error(e: raftq_store::StorageError) -> StartError {
    if e.is_damage() {
        StartError::Damaged(e.to_string())
    } else {
        StartError::Storage(e)
    }
}

/// openraft's settings for this node.
fn raft_config(config: &NodeConfig) -> Result<Config, StartError> {
    Config {
        cluster_name: "raftq".into(),
        heartbeat_interval: config.heartbeat_ms,
        // The longest timeout is also the followers' leader lease, which a leader handing
        // over waits out: 7 heartbeats keep a planned handover under half a second.
        election_timeout_min: 5 * config.heartbeat_ms,
        election_timeout_max: 7 * config.heartbeat_ms,
        // `snapshots::run` asks for them.
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 0,
        max_payload_entries: MAX_PAYLOAD_ENTRIES,
        ..Default::default()
    }
    .validate()
    .map_err(|e| StartError::Config(e.to_string()))
}

/// Serves the peer service over `transport` (on TCP, over mutual TLS with the configured peer
/// TLS) until `signal` says stop.
fn spawn_peer_service(
    node: Arc<NodeCore>,
    groups: Arc<Groups>,
    config: &NodeConfig,
    transport: PeerTransport,
    mut signal: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let tls = config.peer_tls.as_ref();
    let stop = async move {
        let _ = signal.wait_for(|stop| *stop).await;
    };
    let listener = match transport {
        PeerTransport::Tcp(listener) => listener,
        PeerTransport::Memory { inbox, .. } => {
            return service::serve(PeerService::new(node, groups, false), inbox, stop)
        }
    };
    // No size bound of the peer service's own: peers are authenticated members, what a client
    // may send is bounded at the API's edge, and the largest peer message, the answer to a
    // forwarded peek (up to 100 messages of up to 1 MiB), is larger than any bound that would
    // still stop a faulty peer from making this node allocate much.
    let service = RaftServer::new(PeerService::new(node, groups, tls.is_some()))
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    tokio::spawn(match tls {
        Some(tls) => serve_peers(service, tls.accept(listener), stop).boxed(),
        // The builder's `tcp_nodelay` only reaches sockets it accepts itself: the incoming
        // stream sets it here, or small replies would wait on Nagle's algorithm.
        None => serve_peers(
            service,
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            stop,
        )
        .boxed(),
    })
}

/// Reads the node's enrolment in its cluster from `log`; a node started to join that holds
/// nothing yet is marked as joining first.
async fn open_admission(
    config: &NodeConfig,
    log: &LogStore<TypeConfig>,
) -> Result<Admission, StartError> {
    let admission = Admission::open(log).map_err(|e| StartError::Enrolment(e.to_string()))?;
    if config.join.is_some() && admission.standing() == Standing::Blank {
        admission
            .become_joining()
            .await
            .map_err(|e| StartError::Enrolment(e.to_string()))?;
    }
    Ok(admission)
}

/// How this node dials its peers over `transport`, as a member of `admission`'s cluster.
fn dial(config: &NodeConfig, transport: &PeerTransport, admission: &Admission) -> Dial {
    Dial {
        partition: Partition::default(),
        cluster: admission.cluster(),
        protocol: Announced::default(),
        tls: config.peer_tls.as_ref().map(PeerTls::client),
        memory: match transport {
            PeerTransport::Tcp(_) => None,
            PeerTransport::Memory { network, .. } => Some(Arc::clone(network)),
        },
    }
}

/// The parts of the node every group shares (see [`NodeCore`]), its disk's room read with
/// group 1's `log`'s.
fn node_core(
    config: &NodeConfig,
    dial: Dial,
    admission: Admission,
    log: &LogStore<TypeConfig>,
) -> Arc<NodeCore> {
    Arc::new(NodeCore {
        id: config.id,
        forwarders: PeerClients::new(dial.clone()),
        raft_peers: PeerClients::new(dial),
        admission,
        clock: Arc::new(LeaderClock::new(
            config.wall_clock.clone(),
            config.max_clock_skew_ms,
        )),
        space: Arc::new(Space::new(
            &config.data_dir,
            config.min_free_bytes,
            log.room(),
        )),
        reach: Default::default(),
        protocols: Default::default(),
    })
}

/// Starts openraft for `group` on its `storage`, and the group commit that proposes to it;
/// returns the state the group's tasks share, and the group-commit task.
async fn start_group(
    config: &NodeConfig,
    node: &Arc<NodeCore>,
    group: GroupId,
    storage: GroupStorage,
) -> Result<(Arc<GroupCore>, JoinHandle<()>), StartError> {
    let GroupStorage { log, state_machine } = storage;
    let reader = state_machine.reader();
    let awaited = state_machine.awaited();
    let network = Network {
        peers: node.raft_peers.clone(),
        group,
    };
    let raft = Raft::new(
        config.id,
        Arc::new(raft_config(config)?),
        network.clone(),
        log.clone(),
        state_machine,
    )
    .await
    .map_err(|e| StartError::Raft(e.to_string()))?;
    // The election gate keeps them so; off from the start for a node that may not stand.
    raft.runtime_config().elect(node.admission.may_stand());
    log_if_flags_differ(config, &raft, node.admission.standing()).await;
    let (group_commit, committing) =
        GroupCommit::start(raft.clone(), LEADER_WAIT, awaited, Arc::clone(&node.clock));
    let core = Arc::new(GroupCore {
        group,
        node: Arc::clone(node),
        raft,
        group_commit,
        reader,
        log,
        network,
        receiver: SnapshotReceiver::new(config.log.work),
        handing_over: Default::default(),
        changing: tokio::sync::Mutex::new(()),
        elections_held_back: Default::default(),
        leader_commit: Default::default(),
        appends: Default::default(),
    });
    Ok((core, committing))
}

/// The storage of every group this node starts with: group 1's (`first`), then groups 2 to
/// `config.groups` opened from `store`.
fn group_storages(
    config: &NodeConfig,
    store: &NodeStore,
    first: GroupStorage,
) -> Result<Vec<(GroupId, GroupStorage)>, StartError> {
    let mut storages = vec![(GroupId::FIRST, first)];
    for group in (2..=config.groups).map(GroupId) {
        let storage = store.open_group(group).map_err(storage_error)?;
        storages.push((group, storage));
    }
    Ok(storages)
}

/// The tasks that bring a node into its cluster: forming it (`forming`: the node found no
/// cluster in its data directory) and announcing a joining node to the member it was given.
fn spawn_enrolment(
    core: &Arc<GroupCore>,
    groups: &Groups,
    config: &NodeConfig,
    forming: bool,
    signal: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if forming {
        tasks.push(tokio::spawn(formation::run(
            Arc::clone(core),
            groups.all(),
            config.peers.clone(),
            signal.clone(),
        )));
    }
    if let (Some(member), Standing::Joining) = (&config.join, core.node.admission.standing()) {
        tasks.push(tokio::spawn(formation::announce(
            Arc::clone(core),
            member.clone(),
            signal.clone(),
        )));
    }
    tasks
}

/// The tasks of one group on this node: its election gate, snapshot policy (telling `not_due`
/// when group 1's finds no snapshot due) and timer.
fn spawn_group_tasks(
    core: &Arc<GroupCore>,
    config: &NodeConfig,
    not_due: &watch::Sender<Option<u64>>,
    signal: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let not_due = match core.group {
        GroupId::FIRST => not_due.clone(),
        _ => watch::Sender::new(None),
    };
    vec![
        tokio::spawn(gate::run(Arc::clone(core), signal.clone())),
        tokio::spawn(snapshots::run(
            core.raft.clone(),
            core.reader.clone(),
            core.log.appended(),
            config.snapshot_after_logs,
            not_due,
            signal.clone(),
        )),
        tokio::spawn(timer::run(Arc::clone(core), signal.clone())),
    ]
}

impl Node {
    /// Starts a node whose peer service listens on `listener`.
    pub async fn start(config: NodeConfig, listener: TcpListener) -> Result<Node, StartError> {
        Node::start_with(config, PeerTransport::Tcp(listener)).await
    }

    /// Starts a node that talks to its peers over `transport`.
    pub async fn start_with(
        config: NodeConfig,
        transport: PeerTransport,
    ) -> Result<Node, StartError> {
        check(&config)?;
        let Storage {
            log,
            state_machine,
            node: store,
            database,
        } = open_storage(&config)?;
        #[cfg(feature = "testing")]
        let failing_disk = log.failing_disk();
        let admission = open_admission(&config, &log).await?;
        let forming = matches!(admission.standing(), Standing::Blank | Standing::Fresh);
        let dial = dial(&config, &transport, &admission);
        let node = node_core(&config, dial, admission, &log);
        let groups = Arc::new(Groups::default());
        let mut committing = Vec::new();
        for (group, storage) in
            group_storages(&config, &store, GroupStorage { log, state_machine })?
        {
            let (core, task) = start_group(&config, &node, group, storage).await?;
            groups.insert(core);
            committing.push(task);
        }
        let core = groups
            .get(GroupId::FIRST)
            .ok_or_else(|| StartError::Raft("group 1 did not start".into()))?;
        let (shutdown, signal) = watch::channel(false);
        let not_due = watch::Sender::new(None);
        #[cfg(feature = "testing")]
        let snapshot_not_due = not_due.subscribe();
        let mut tasks = vec![spawn_peer_service(
            Arc::clone(&node),
            Arc::clone(&groups),
            &config,
            transport,
            signal.clone(),
        )];
        tasks.extend(spawn_enrolment(&core, &groups, &config, forming, &signal));
        tasks.push(tokio::spawn(space::run(
            Arc::clone(&node.space),
            signal.clone(),
        )));
        for group in groups.all() {
            tasks.extend(spawn_group_tasks(&group, &config, &not_due, &signal));
        }
        Ok(Node {
            core,
            groups,
            shutdown,
            tasks,
            committing,
            database,
            #[cfg(feature = "testing")]
            failing_disk,
            #[cfg(feature = "testing")]
            snapshot_not_due,
        })
    }

    pub fn id(&self) -> NodeId {
        self.core.node.id
    }

    /// The room left on this node's data directory's disk, as last read (see `space`).
    pub fn space(&self) -> SpaceReading {
        self.core.node.space.reading()
    }

    /// This node's view of itself and the cluster (see [`NodeStatus`]).
    pub async fn status(&self) -> NodeStatus {
        self.core.status().await
    }

    /// Runs `f` on this node's applied state, without asking the leader: what it sees may be
    /// behind the cluster (for reads that must not be, see [`Node::read`]).
    pub fn with_engine<T>(&self, f: impl FnOnce(&Engine) -> T) -> Result<T, NodeError> {
        self.core
            .reader
            .with_engine(f)
            .ok_or_else(|| NodeError::Storage("the state machine's lock is poisoned".into()))
    }

    /// This node's last applied index (`None` before the first) and the SHA-256 of its whole
    /// applied state: two nodes that applied the same entries give the same pair.
    pub fn digest(&self) -> Result<(Option<u64>, String), NodeError> {
        self.core
            .reader
            .digest()
            .map_err(|e| NodeError::Storage(e.to_string()))
    }

    /// Writes a backup of the cluster's state to `out` ([`raftq_store::backup`]): the state at
    /// one applied index, at least as new as every write committed before the call, read on
    /// this node once it has applied that far (the leader tells the index). Applies go on
    /// meanwhile; `out` gets the rows one at a time, on a thread of the blocking pool.
    pub async fn backup(
        &self,
        out: impl std::io::Write + Send + 'static,
    ) -> Result<BackupSummary, NodeError> {
        let index = self
            .ask(question::applied_index())
            .await?
            .map_err(|refused| NodeError::Unavailable(refused.to_string()))?;
        if let Some(index) = index {
            self.core
                .raft
                .wait(Some(LEADER_WAIT))
                .applied_index_at_least(Some(index), "the leader's applied index")
                .await
                .map_err(|e| NodeError::Unavailable(format!("applying up to {index}: {e}")))?;
        }
        let reader = self.core.reader.clone();
        let cluster = self.core.node.admission.cluster().get();
        let taken_at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        tokio::task::spawn_blocking(move || backup::write(&reader, cluster, taken_at_ms, out))
            .await
            .map_err(|e| NodeError::Storage(format!("the backup's thread: {e}")))?
            .map_err(|e| NodeError::Storage(format!("writing the backup: {e}")))
    }

    /// The openraft handle, for tests that look inside (snapshots, purges, metrics).
    #[cfg(feature = "testing")]
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.core.raft
    }

    /// Group `group` as this node takes part in it, for tests of many groups.
    #[cfg(feature = "testing")]
    fn group(&self, group: GroupId) -> Result<Arc<GroupCore>, NodeError> {
        self.groups.get(group).ok_or_else(|| {
            NodeError::Unavailable(format!("this node takes no part in group {group}"))
        })
    }

    /// The openraft handle of `group`, for tests of many groups.
    #[cfg(feature = "testing")]
    pub fn raft_of(&self, group: GroupId) -> Result<Raft<TypeConfig>, NodeError> {
        Ok(self.group(group)?.raft.clone())
    }

    /// Commits a command in `group` through its leader, as [`Node::write`] does in group 1.
    #[cfg(feature = "testing")]
    pub async fn write_in(&self, group: GroupId, command: Command) -> Result<Response, NodeError> {
        self.group(group)?.route(&command).await
    }

    /// A linearizable read in `group`, as [`Node::read`] does in group 1.
    #[cfg(feature = "testing")]
    pub async fn read_in(
        &self,
        group: GroupId,
        query: Query,
    ) -> Result<Result<QueryResult, EngineError>, NodeError> {
        self.group(group)?.route(&query).await
    }

    /// The last applied index and state digest of this node's replica of `group`, as
    /// [`Node::digest`] tells group 1's.
    #[cfg(feature = "testing")]
    pub fn digest_of(&self, group: GroupId) -> Result<(Option<u64>, String), NodeError> {
        self.group(group)?
            .reader
            .digest()
            .map_err(|e| NodeError::Storage(e.to_string()))
    }

    /// The applied state's reader, for tests that look inside (payloads, snapshot files).
    #[cfg(feature = "testing")]
    pub fn reader(&self) -> &raftq_store::StateReader {
        &self.core.reader
    }

    /// Makes this node's peer calls announce `protocol` (none: no header), as a node of another
    /// build would, for tests of clusters of two builds.
    #[cfg(feature = "testing")]
    pub fn announce_protocol(&self, protocol: Option<u32>) {
        self.core.node.forwarders.dial.protocol.set(protocol);
    }

    /// Makes every later write of this node's Raft log fail, as a failing disk would.
    #[cfg(feature = "testing")]
    pub fn fail_disk(&self) {
        self.failing_disk.fail();
    }

    /// The applied index at which the snapshot policy last found no snapshot due, for tests that
    /// wait until the policy has judged their entries (it looks every 200 ms, apart from the
    /// apply).
    #[cfg(feature = "testing")]
    pub fn snapshot_not_due(&self) -> watch::Receiver<Option<u64>> {
        self.snapshot_not_due.clone()
    }

    /// The switch partition tests use to cut this node's outgoing links.
    #[cfg(feature = "testing")]
    pub fn partition(&self) -> &crate::network::Partition {
        &self.core.network.peers.dial.partition
    }

    /// Commits a command through the leader (forwarding when this node is not it) and returns
    /// the state machine's response. Success means committed on a majority and applied.
    pub async fn write(&self, command: Command) -> Result<Response, NodeError> {
        tracing::trace!(target: "raftq::stage", stage = "write");
        let reply = self.core.route(&command).await;
        tracing::trace!(target: "raftq::stage", stage = "written");
        reply
    }

    /// A linearizable read, answered by the leader (forwarding when this node is not it).
    pub async fn read(&self, query: Query) -> Result<Result<QueryResult, EngineError>, NodeError> {
        self.core.route(&query).await
    }

    /// A linearizable read of a typed question: its answer as the question's type.
    pub async fn ask<T>(&self, question: Question<T>) -> Result<Result<T, EngineError>, NodeError> {
        let (query, answer) = question.split();
        Ok(self.read(query).await?.map(|result| answer.take(result)))
    }

    /// Changes the cluster's membership through the leader (see `membership`). Success means
    /// the change committed; a refusal changed nothing.
    pub async fn change_membership(&self, change: Change) -> Result<ChangeResult, NodeError> {
        self.core.route(&change).await
    }

    /// When this node leads, hands its leadership to the most caught-up other voter and waits
    /// until that node leads (before a planned stop: the cluster need not wait out an election
    /// timeout). Returns the new leader; `None` when this node did not lead or is the only voter.
    pub async fn hand_over(&self) -> Result<Option<NodeId>, NodeError> {
        if !self.core.is_leader() {
            return Ok(None);
        }
        let members = self.core.members();
        let mut voters = members.voters();
        voters.remove(&self.core.node.id);
        if voters.is_empty() {
            return Ok(None);
        }
        self.core.hand_over(&voters, &members.nodes).await.map(Some)
    }

    /// Resolves when this node's Raft core stops: on its own (a storage failure, a broken
    /// invariant), after which the node can neither vote nor replicate nor apply and must not go
    /// on answering as if it could, or when [`Node::shutdown`] stops it.
    pub fn halted(&self) -> impl std::future::Future<Output = Halted> + Send + 'static {
        let metrics = self.core.raft.metrics();
        // The server metrics' sender lives in the Raft core and goes when the core ends, after
        // the core put its fatal error in the full metrics. They change only with the vote, the
        // role, the leader or the membership, so this waits without waking on every entry.
        let mut server = self.core.raft.server_metrics();
        async move {
            while server.changed().await.is_ok() {}
            match &metrics.borrow().running_state {
                Err(fatal) => Halted(fatal.to_string()),
                Ok(()) => Halted("the Raft core ended".into()),
            }
        }
    }

    /// Registers a parked receive of this node's client as `waiter`, until the slot is dropped:
    /// the slot gets the answer to its wait when this node applies the entry that ends it. Take
    /// it before proposing the receive.
    pub fn await_answer(&self, waiter: uuid::Uuid) -> WaitSlot {
        self.core.reader.waiters().register(waiter)
    }

    /// Stops the node: Raft, the peer service and the timer.
    /// Returns once the database is closed (so the same directory can be opened again).
    pub async fn shutdown(self) {
        let Node {
            core,
            groups,
            shutdown,
            tasks,
            committing,
            database,
            ..
        } = self;
        let _ = shutdown.send(true);
        for group in groups.all() {
            if let Err(e) = group.raft.shutdown().await {
                tracing::warn!(group = %group.group, error = %e, "raft shutdown");
            }
        }
        for task in tasks {
            let _ = task.await;
        }
        for task in committing {
            task.abort();
            let _ = task.await;
        }
        groups.clear();
        drop(core);
        let deadline = Instant::now() + CLOSE_WAIT;
        while database.is_open() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if database.is_open() {
            tracing::warn!("the database is still open after shutdown");
        }
    }
}

/// Serves the peer service on the connections of `incoming` until `stop` resolves.
async fn serve_peers<S, IO, E>(
    service: RaftServer<PeerService>,
    incoming: S,
    stop: impl std::future::Future<Output = ()>,
) where
    S: futures_util::Stream<Item = Result<IO, E>>,
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let result = tonic::transport::Server::builder()
        .initial_stream_window_size(Some(WINDOW))
        .initial_connection_window_size(Some(WINDOW))
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, stop)
        .await;
    if let Err(e) = result {
        tracing::error!(error = %e, "peer service stopped");
    }
}

/// Says when a restarted node's membership, which it goes by, differs from its flags. Read
/// from the Raft state, which holds the membership loaded from the log (the metrics may not
/// show it yet).
async fn log_if_flags_differ(config: &NodeConfig, raft: &Raft<TypeConfig>, standing: Standing) {
    if standing != Standing::Member || config.join.is_some() {
        return;
    }
    let Ok(stored) = raft
        .with_raft_state(|st| {
            st.membership_state
                .effective()
                .membership()
                .nodes()
                .map(|(id, n)| (*id, n.addr.clone()))
                .collect::<BTreeMap<NodeId, String>>()
        })
        .await
    else {
        return;
    };
    if stored != config.peers {
        tracing::info!(
            ?stored,
            flags = ?config.peers,
            "the membership in the log differs from --peers; the log's is used"
        );
    }
}
