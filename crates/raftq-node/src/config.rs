//! What a node needs to know to start ([`NodeConfig`]), from the command line or a test.

use std::collections::BTreeMap;
use std::path::PathBuf;

use raftq_store::{LogOptions, NodeId, StateOptions};

use crate::clock::WallClock;
use crate::tls::PeerTls;

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
    /// How many Raft groups the cluster lays out, the metadata group (1) among them: more than
    /// one makes the leader of group 1 bootstrap the placement with this many (see `groups`),
    /// once. 1 unless set: the cluster runs as one group.
    pub groups: u32,
    /// How long a queue's directory entry may stay half made (a creation or a deletion whose
    /// client stopped between its steps) before group 1's leader settles it (see `router`).
    pub settle_after: std::time::Duration,
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
    /// How long a half-made directory entry waits to be settled unless set otherwise: far
    /// longer than the steps of a creation or deletion take (each waits seconds at most for a
    /// leader), so that only one whose client stopped is settled.
    pub const DEFAULT_SETTLE_AFTER: std::time::Duration = std::time::Duration::from_secs(300);
    /// The most Raft groups a cluster may lay out.
    pub const MAX_GROUPS: u32 = raftq_engine::placement::MAX_GROUPS;

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
            settle_after: Self::DEFAULT_SETTLE_AFTER,
        }
    }
}
