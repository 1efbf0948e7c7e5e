//! A raftq node: opens its RocksDB store, runs openraft with the peer gRPC service, finds or
//! forms its cluster on a first start (`formation`), forwards client requests to the leader and, while it leads, proposes
//! the ticks that fire due timers.
//!
//! Time: the leader stamps each entry with its clock (milliseconds since the Unix epoch) when it
//! proposes it; the state machine never reads a clock.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use futures_util::FutureExt;
use raftq_engine::placement::PlacementCommand;
use raftq_engine::{Command, Engine, EngineError};
use raftq_store::backup::BackupSummary;
use raftq_store::{
    Database, Delivered, GroupId, GroupStorage, LogStore, NodeId, Response, Storage, TypeConfig,
    WaitSlot,
};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::transport::server::TcpIncoming;

use crate::admission::{Admission, Standing};
use crate::clock::LeaderClock;
use crate::config::NodeConfig;
use crate::error::{Halted, NodeError, StartError};
use crate::groups::{self, Launcher};
use crate::member::longpoll::LongPoll;
use crate::member::membership::{Change, ChangeResult};
use crate::member::status::NodeStatus;
use crate::member::{GroupCore, Groups, NodeCore};
use crate::network::{Dial, MemoryNetwork, Partition, PeerClients, WINDOW};
use crate::protocol::Announced;
use crate::query::{Query, QueryResult, Question};
use crate::router::{self, Router};
use crate::rpc::raft_server::RaftServer;
use crate::service::{self, Delivery, PeerService};
use crate::space::{self, Space, SpaceReading};
use crate::tls::PeerTls;
use crate::{backup, formation, gate};

/// How long shutdown waits for openraft's tasks to release the database.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How long a drain waits for the drained node to lead no group: its hand-overs run at once,
/// each about half a second.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

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

/// A node's replica of one group, as [`Node::digests`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDigest {
    pub group: GroupId,
    /// The last entry the replica applied (none before the first).
    pub applied_index: Option<u64>,
    /// [`Node::digest`] of the replica's state.
    pub state_digest: String,
    /// The messages in the group's outbox, on their way to queues of other groups.
    pub outbox: usize,
}

/// A running node.
pub struct Node {
    /// Group 1, which every call that names no group is for.
    core: Arc<GroupCore>,
    /// Every group this node takes part in, group 1 among them.
    groups: Arc<Groups>,
    /// Where each client request goes (the group of its queue).
    router: Arc<Router>,
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
    if !(1..=NodeConfig::MAX_GROUPS).contains(&config.groups) {
        return Err(StartError::Config(format!(
            "--groups must be 1 to {}, not {}",
            NodeConfig::MAX_GROUPS,
            config.groups
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
        .map_err(StartError::opening)
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
        draining: Default::default(),
        protocols: Default::default(),
        sections: Default::default(),
    })
}

/// The tasks that bring a node into its cluster: forming it (`forming`: the node found no
/// cluster in its data directory) and announcing a joining node to the member it was given.
fn spawn_enrolment(
    core: &Arc<GroupCore>,
    config: &NodeConfig,
    forming: bool,
    signal: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if forming {
        tasks.push(tokio::spawn(formation::run(
            Arc::clone(core),
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

/// The tasks of the node as a whole: its peer service, its enrolment (see
/// [`spawn_enrolment`]), the election gate of every group and the readings of its disk's room.
fn spawn_node_tasks(
    core: &Arc<GroupCore>,
    groups: &Arc<Groups>,
    config: &NodeConfig,
    transport: PeerTransport,
    forming: bool,
    signal: &watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let node = &core.node;
    let mut tasks = vec![spawn_peer_service(
        Arc::clone(node),
        Arc::clone(groups),
        config,
        transport,
        signal.clone(),
    )];
    tasks.extend(spawn_enrolment(core, config, forming, signal));
    tasks.push(tokio::spawn(gate::run(
        Arc::clone(node),
        Arc::clone(groups),
        signal.clone(),
    )));
    tasks.push(tokio::spawn(space::run(
        Arc::clone(&node.space),
        signal.clone(),
    )));
    tasks
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
        let (shutdown, signal) = watch::channel(false);
        let not_due = watch::Sender::new(None);
        #[cfg(feature = "testing")]
        let snapshot_not_due = not_due.subscribe();
        let launcher = Launcher {
            config: config.clone(),
            node: Arc::clone(&node),
            store,
            groups: Arc::clone(&groups),
            signal: signal.clone(),
        };
        let started = launcher
            .start_held(GroupStorage { log, state_machine }, not_due)
            .await?;
        let core = Arc::clone(&started[0].core);
        let mut tasks = spawn_node_tasks(&core, &groups, &config, transport, forming, &signal);
        let (group_tasks, committing): (Vec<_>, Vec<_>) =
            started.into_iter().map(|g| (g.tasks, g.committing)).unzip();
        tasks.extend(group_tasks.into_iter().flatten());
        tasks.push(tokio::spawn(groups::run(
            launcher,
            Arc::clone(&core),
            signal.clone(),
        )));
        let router = Arc::new(Router::new(
            Arc::clone(&core),
            Arc::clone(&groups),
            config.region.clone(),
        ));
        tasks.push(tokio::spawn(router::deliver(
            Arc::clone(&router),
            signal.clone(),
        )));
        tasks.push(tokio::spawn(router::settle(
            Arc::clone(&router),
            config.settle_after,
            signal,
        )));
        Ok(Node {
            router,
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
        let mut status = self.core.status().await;
        status.groups = crate::member::status::groups(&self.core, &self.groups);
        status
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

    /// [`Node::digest`] of every group this node holds a replica of, in group order.
    pub fn digests(&self) -> Result<Vec<GroupDigest>, NodeError> {
        let groups = self.groups.all();
        (groups.iter())
            .map(|core| {
                let (applied_index, state_digest) =
                    (core.reader.digest()).map_err(|e| NodeError::Storage(e.to_string()))?;
                Ok(GroupDigest {
                    group: core.group,
                    applied_index,
                    state_digest,
                    outbox: core.outbox_len(),
                })
            })
            .collect()
    }

    /// Plans `group`'s section of a backup: read at least as far as its leader applied now,
    /// from this node's replica once it applied that far, or, where there is none here or it
    /// does not get that far within `LEADER_WAIT`, from another member.
    async fn plan_section(&self, plan: &mut backup::Plan, group: GroupId) -> Result<(), NodeError> {
        let index = self.router.applied_index(group).await?;
        let ready = match self.groups.get(group) {
            Some(core) => core.applied_up_to(index).await.is_ok().then_some(core),
            None => None,
        };
        match ready {
            Some(core) => plan.local(&core),
            None => plan.remote(self.router.member_clients(group, self.id())?, index),
        }
        Ok(())
    }

    /// Writes a backup of the cluster's state to `out` ([`raftq_store::backup`]): every group's
    /// state at an applied index of its own, at least as new as every write the group committed
    /// before the call (its leader tells the index), read on this node once it applied that far,
    /// or, for a group this node holds no replica of or whose replica here does not apply that
    /// far within `LEADER_WAIT` (5 s), on another member (see `backup`). Applies go on
    /// meanwhile; `out` gets the rows as they are read, on a thread of the blocking pool.
    pub async fn backup(
        &self,
        out: impl std::io::Write + Send + 'static,
    ) -> Result<BackupSummary, NodeError> {
        let mut plan = backup::Plan::default();
        self.plan_section(&mut plan, GroupId::FIRST).await?;
        // Group 1's state, applied that far, tells the other groups.
        let groups = self.core.reader.with_engine(|e| {
            let groups = e.placement().groups().keys();
            groups.map(|g| GroupId(*g)).collect::<Vec<_>>()
        });
        for group in groups.unwrap_or_default() {
            if group != GroupId::FIRST {
                self.plan_section(&mut plan, group).await?;
            }
        }
        let cluster = self.core.node.admission.cluster().get();
        let region = self.core.reader.with_engine(|e| e.region().to_string());
        let region =
            region.ok_or_else(|| NodeError::Storage("the engine's lock is poisoned".into()))?;
        let taken_at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        tokio::task::spawn_blocking(move || plan.write(cluster, region, taken_at_ms, out))
            .await
            .map_err(|e| NodeError::Storage(format!("the backup's thread: {e}")))?
    }

    /// The openraft handle, for tests that look inside (snapshots, purges, metrics).
    #[cfg(feature = "testing")]
    pub fn raft(&self) -> &openraft::Raft<TypeConfig> {
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
    pub fn raft_of(&self, group: GroupId) -> Result<openraft::Raft<TypeConfig>, NodeError> {
        Ok(self.group(group)?.raft.clone())
    }

    /// Whether this node leads `group` quietly (see `gate`), for tests of many groups.
    #[cfg(feature = "testing")]
    pub fn leads_quietly(&self, group: GroupId) -> Result<bool, NodeError> {
        Ok(self.group(group)?.is_quiet())
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
        let reply = self.router.write(command).await;
        tracing::trace!(target: "raftq::stage", stage = "written");
        reply
    }

    /// A receive that waits for messages: `poll`, served whole by a replica of its queue's
    /// group, this node's or, when this node has none, a member's (see `member::longpoll`).
    /// What it delivered (nothing when its wait ended empty), or why the group refused it.
    pub async fn long_poll(
        &self,
        poll: LongPoll,
    ) -> Result<Result<Delivered, EngineError>, NodeError> {
        self.router.long_poll(poll).await
    }

    /// A linearizable read, answered by the leader (forwarding when this node is not it).
    pub async fn read(&self, query: Query) -> Result<Result<QueryResult, EngineError>, NodeError> {
        self.router.read(query).await
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

    /// Drains node `id` (`on`: it hands over every group it leads and leads none until its
    /// drain ends) or ends its drain, through group 1's placement; a drain answers once node
    /// `id` leads no group as this node sees it, or fails after 5 s (`DRAIN_WAIT`) naming the groups
    /// it still leads (the drain stays). A cluster of one group has no placement to drain in:
    /// `PlacementError::NotBootstrapped`.
    pub async fn drain(&self, id: NodeId, on: bool) -> Result<Result<(), EngineError>, NodeError> {
        let change = match on {
            true => PlacementCommand::Drain { id, boot_id: 0 },
            false => PlacementCommand::Undrain { id },
        };
        match self.write(Command::Place { change }).await?.result {
            Some(Ok(_)) => {}
            Some(Err(refused)) => return Ok(Err(refused)),
            None => return Err(NodeError::Storage("a drain applied with no outcome".into())),
        }
        if !on {
            return Ok(Ok(()));
        }
        let deadline = tokio::time::Instant::now() + DRAIN_WAIT;
        loop {
            let groups = crate::member::status::groups(&self.core, &self.groups);
            let led = groups.iter().filter(|g| g.leader == Some(id));
            let led: Vec<u32> = led.map(|g| g.group).collect();
            if led.is_empty() {
                return Ok(Ok(()));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(NodeError::Unavailable(format!(
                    "node {id} still leads group(s) {led:?} after {DRAIN_WAIT:?}; it stays \
                     draining and hands them over as it can"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Hands the leadership of every group this node leads to the most caught-up other voter
    /// of the group, all at once, and waits until they lead (before a planned stop: the groups
    /// need not wait out an election timeout). Returns group 1's new leader; `None` when this
    /// node did not lead it or is its only voter. A group that could not be handed over is
    /// logged (it elects a leader once this node stops).
    pub async fn hand_over(&self) -> Result<Option<NodeId>, NodeError> {
        let others = self.groups.all().into_iter();
        let others = others.filter(|core| core.group != GroupId::FIRST);
        let others = join_all(others.map(|core| async move {
            let handed = core.step_down().await;
            (core.group, handed)
        }));
        let (first, others) = tokio::join!(self.core.step_down(), others);
        for (group, handed) in others {
            if let Err(e) = handed {
                tracing::warn!(%group, error = %e, "cannot hand the group over");
            }
        }
        first
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

    /// Registers a parked receive of this node's client on queue `queue` of `account` as
    /// `waiter`, until the slot is dropped: the slot gets the answer to its wait when this node
    /// applies the entry that ends it. Take it before proposing the receive.
    pub async fn await_answer(&self, account: &str, queue: &str, waiter: uuid::Uuid) -> WaitSlot {
        self.router.await_answer(account, queue, waiter).await
    }

    /// Stops the node: Raft, the peer service and the timer.
    /// Returns once the database is closed (so the same directory can be opened again).
    pub async fn shutdown(self) {
        let Node {
            core,
            groups,
            router,
            shutdown,
            tasks,
            committing,
            mut database,
            ..
        } = self;
        let _ = shutdown.send(true);
        let first = groups.all();
        let shut: Vec<GroupId> = first.iter().map(|group| group.group).collect();
        shut_down(first).await;
        for task in tasks {
            let _ = task.await;
        }
        // Groups the lifecycle started while the node was shutting down.
        let mut later = groups.all();
        later.retain(|group| !shut.contains(&group.group));
        shut_down(later).await;
        for task in committing {
            task.abort();
            let _ = task.await;
        }
        groups.clear();
        drop((core, router));
        let deadline = Instant::now() + CLOSE_WAIT;
        loop {
            match database.close() {
                Ok(()) => return,
                Err(held) if Instant::now() < deadline => {
                    database = held;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(_) => {
                    tracing::warn!("the database is still open after shutdown");
                    return;
                }
            }
        }
    }
}

/// Shuts the Raft instances of `groups` down, and lets go of them (what they hold keeps the
/// database open).
async fn shut_down(groups: Vec<Arc<GroupCore>>) {
    for group in groups {
        if let Err(e) = group.raft.shutdown().await {
            tracing::warn!(group = %group.group, error = %e, "raft shutdown");
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
