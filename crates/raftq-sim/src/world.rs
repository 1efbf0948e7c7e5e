//! The simulated cluster: the machines ([`Host`]s) of the nodes, each with its disk and its
//! clock, and the machine of the director, which runs the scenario (the workload, the faults,
//! the final reads) as tasks of its own. The world advances everything one tick at a time:
//! the true time first, then every node in id order, then the director, then whatever the
//! director asked of the machines themselves (crash, start, power loss), which only the world
//! can do between two ticks.
//!
//! A node's Raft log and its snapshot files live on a [`CrashDisk`] that remembers what was not
//! fsynced: a power loss keeps one of the disks the loss could leave, chosen by the world's
//! seeded source, and starts the node again on it. Its database (RocksDB) lives in a directory
//! of its own and survives every crash whole, as after a crash of the process.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use raftq_node::{Node, NodeConfig, NodeId, PeerTransport, WallClock};
use raftq_store::crash_disk::CrashDisk;
use raftq_store::{LogOptions, StateOptions, Work};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tempfile::TempDir;
use tokio::sync::oneshot;

use crate::api::Api;
use crate::host::Host;
use crate::net::Net;

/// How far the world moves at each step.
pub const TICK: Duration = Duration::from_millis(1);
/// The Unix time, in milliseconds, at which every simulation starts: fixed, so that stamps
/// replay.
pub const EPOCH_MS: u64 = 1_800_000_000_000;
/// How long one fsync of the log takes on a simulated disk.
const FSYNC: Duration = Duration::from_millis(2);
/// Bytes of a log segment: small, so that runs roll segments often.
const SEGMENT_BYTES: u64 = 256 * 1024;
/// Entries applied since the last snapshot before the next may be built (the log must also
/// outweigh the messages held; see raftq-node's `snapshots`).
const SNAPSHOT_AFTER_LOGS: u64 = 200;

/// The peer address of node `id`.
pub fn address(id: NodeId) -> String {
    format!("node{id}:7000")
}

/// The true time: what a clock without skew reads.
#[derive(Debug, Clone, Default)]
pub struct Clock(Arc<AtomicU64>);

impl Clock {
    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        EPOCH_MS + self.0.load(Ordering::SeqCst)
    }

    fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

/// What the director asks of a machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Stops the node at once.
    Crash(NodeId),
    /// Starts the node on what its disk holds (a new node, one that joins through `join`).
    Start { id: NodeId, join: Option<String> },
    /// Stops the node and loses what its log did not fsync.
    PowerLoss(NodeId),
    /// Makes the next `count` fsyncs of the node's log disk fail, leaving what each should
    /// have written undecided (as Linux does after it reports a failed fsync).
    FailSyncs { id: NodeId, count: u32 },
}

type Asked = (Action, oneshot::Sender<Result<(), String>>);

/// What the director's tasks hold of the world.
#[derive(Debug, Clone)]
pub struct Control {
    pub api: Api,
    pub net: Arc<Net>,
    pub clock: Clock,
    skews: Arc<Mutex<BTreeMap<NodeId, Arc<AtomicI64>>>>,
    asked: Arc<Mutex<VecDeque<Asked>>>,
}

impl Control {
    /// Has the world do `action` between two ticks; an error when the node would not start.
    pub async fn act(&self, action: Action) -> Result<(), String> {
        let (done, finished) = oneshot::channel();
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back((action, done));
        finished
            .await
            .unwrap_or_else(|_| Err("the world ended".into()))
    }

    /// Sets how far node `id`'s clock reads ahead of the true time (behind when negative).
    pub fn skew(&self, id: NodeId, ms: i64) {
        self.skew_of(id).store(ms, Ordering::SeqCst);
    }

    fn skew_of(&self, id: NodeId) -> Arc<AtomicI64> {
        Arc::clone(
            self.skews
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(id)
                .or_default(),
        )
    }
}

/// A node's machine and what outlives its crashes.
#[derive(Debug)]
struct Machine {
    host: Host,
    /// The disk of its log and its snapshot files.
    disk: CrashDisk,
    /// The directory of its database.
    dir: PathBuf,
    /// The times it was started, which seed its runtimes.
    boots: u64,
    /// The member it joined its cluster through, for a node added to a running cluster: it
    /// starts again with the same flags.
    join: Option<String>,
}

/// Why a simulation did not finish.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("the simulation's files: {0}")]
    Io(#[from] io::Error),
    #[error("the scenario did not end within {0:?} of simulated time")]
    TooLong(Duration),
}

/// What the world saw of the machines in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Why nodes failed to start, in order.
    pub start_failures: Vec<String>,
    /// Power losses, and how many of them lost writes not fsynced yet (of the log or snapshots).
    pub power_losses: u64,
    pub lost_unsynced: u64,
    /// Snapshots the nodes installed (counted when the `raftq-sim` command runs).
    pub snapshots_installed: u64,
}

/// The simulated cluster and its director.
pub struct World {
    seed: u64,
    rng: StdRng,
    control: Control,
    peers: BTreeMap<NodeId, String>,
    machines: BTreeMap<NodeId, Machine>,
    /// Why nodes failed to start, in order.
    failures: Arc<Mutex<Vec<String>>>,
    power_losses: u64,
    lost_unsynced: u64,
    /// This thread's count of installed snapshots when the world began.
    installed_before: u64,
    dir: TempDir,
}

impl World {
    /// A world of `size` nodes (ids 1 to `size`) that will form a cluster, none started yet.
    pub fn new(seed: u64, size: u64) -> io::Result<World> {
        Ok(World {
            seed,
            rng: StdRng::seed_from_u64(!seed),
            control: Control {
                api: Api::default(),
                net: Net::new(seed),
                clock: Clock::default(),
                skews: Arc::default(),
                asked: Arc::default(),
            },
            peers: (1..=size).map(|id| (id, address(id))).collect(),
            machines: BTreeMap::new(),
            failures: Arc::default(),
            power_losses: 0,
            lost_unsynced: 0,
            installed_before: crate::snapshots::installed(),
            dir: TempDir::new()?,
        })
    }

    /// What the world saw so far.
    fn tally(&self) -> Tally {
        Tally {
            start_failures: self
                .failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            power_losses: self.power_losses,
            snapshots_installed: crate::snapshots::installed() - self.installed_before,
            lost_unsynced: self.lost_unsynced,
        }
    }

    /// Starts node `id`: on what its disk holds, or, the first time, on an empty one (joining
    /// through the member at `join`, for a node added to a running cluster).
    fn start(&mut self, id: NodeId, join: Option<String>) -> io::Result<()> {
        let dir = self.dir.path().join(format!("node-{id}"));
        let machine = self.machines.entry(id).or_insert_with(|| Machine {
            host: Host::default(),
            disk: CrashDisk::new(),
            dir,
            boots: 0,
            join: None,
        });
        machine.boots += 1;
        if join.is_some() {
            machine.join = join;
        }
        let mut config = NodeConfig::new(id, self.peers.clone(), machine.dir.clone());
        config.join = machine.join.clone();
        // Often enough that a run builds, sends and installs snapshots and purges the log
        // behind them: a node that was away or is new catches up from a snapshot.
        config.snapshot_after_logs = SNAPSHOT_AFTER_LOGS;
        let (clock, skew) = (self.control.clock.clone(), self.control.skew_of(id));
        config.wall_clock = WallClock::new(move || {
            clock
                .now_ms()
                .saturating_add_signed(skew.load(Ordering::SeqCst))
        });
        config.log = LogOptions {
            disk: Arc::new(machine.disk.clone()),
            segment_bytes: SEGMENT_BYTES,
            work: Work::Tasks { fsync: FSYNC },
            spare_thread: false,
        };
        // Every stop here is a crash: the state store keeps what it had flushed and what its
        // write-ahead log holds, and the node applies the rest of the log again.
        config.state = StateOptions {
            flush_on_close: false,
        };
        let software = run_node(
            config,
            Arc::clone(&self.control.net),
            self.control.api.clone(),
            Arc::clone(&self.failures),
        );
        let seed = self.seed ^ (id << 32) ^ machine.boots;
        machine.host = Host::boot(seed, software)?;
        Ok(())
    }

    /// Stops node `id` at once, and ends the calls it was serving as closed connections.
    fn crash(&mut self, id: NodeId) {
        if let Some(machine) = self.machines.get_mut(&id) {
            machine.host.crash();
        }
        self.control.net.crashed(id);
        self.control.api.crashed(id);
    }

    /// Crashes node `id` and keeps one of the disks the crash could leave of its log and its
    /// snapshot files.
    fn lose_power(&mut self, id: NodeId) {
        self.crash(id);
        if let Some(machine) = self.machines.get_mut(&id) {
            let frozen = machine.disk.freeze();
            let dimensions = frozen.dimensions();
            let choices: Vec<usize> = dimensions
                .iter()
                .map(|outcomes| self.rng.random_range(0..*outcomes))
                .collect();
            // The last outcome of each undecided thing keeps what was written last.
            let lost = choices.iter().zip(&dimensions).any(|(c, d)| c + 1 < *d);
            self.power_losses += 1;
            self.lost_unsynced += u64::from(lost);
            machine.disk = frozen.image(&choices);
        }
    }

    fn act(&mut self, action: &Action) -> Result<(), String> {
        match action {
            Action::Crash(id) => self.crash(*id),
            Action::Start { id, join } => {
                self.crash(*id);
                self.start(*id, join.clone()).map_err(|e| e.to_string())?;
            }
            Action::PowerLoss(id) => self.lose_power(*id),
            Action::FailSyncs { id, count } => {
                if let Some(machine) = self.machines.get(id) {
                    machine.disk.fail_syncs(*count);
                }
            }
        }
        Ok(())
    }

    /// Starts the nodes, then runs `scenario` on the director's machine until it ends, at most
    /// `limit` of simulated time, and answers what it returned, with what the world saw.
    pub fn run<T, F>(
        mut self,
        limit: Duration,
        scenario: impl FnOnce(Control) -> F,
    ) -> Result<(T, Tally), SimError>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let ids: Vec<NodeId> = self.peers.keys().copied().collect();
        for id in ids {
            self.start(id, None)?;
        }
        let ended: Arc<Mutex<Option<T>>> = Arc::default();
        let slot = Arc::clone(&ended);
        let scenario = scenario(self.control.clone());
        let director = Host::boot(self.seed, async move {
            let value = scenario.await;
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
        })?;
        let mut elapsed = Duration::ZERO;
        loop {
            self.control.clock.advance(TICK);
            elapsed += TICK;
            for machine in self.machines.values() {
                machine.host.tick(TICK);
            }
            director.tick(TICK);
            let asked: Vec<Asked> = self
                .control
                .asked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .drain(..)
                .collect();
            for (action, done) in asked {
                let _ = done.send(self.act(&action));
            }
            if let Some(value) = ended.lock().unwrap_or_else(PoisonError::into_inner).take() {
                return Ok((value, self.tally()));
            }
            if elapsed >= limit {
                return Err(SimError::TooLong(limit));
            }
        }
    }
}

/// A node's software: it joins the network, starts, and serves its clients' calls until its
/// machine stops; a node that cannot start says why in `failures`.
async fn run_node(config: NodeConfig, net: Arc<Net>, api: Api, failures: Arc<Mutex<Vec<String>>>) {
    let id = config.id;
    let (network, inbox) = net.attach(id, &address(id));
    match Node::start_with(config, PeerTransport::Memory { network, inbox }).await {
        Ok(node) => api.serve(id, Arc::new(node)).await,
        Err(error) => failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("node {id} did not start: {error}")),
    }
}
