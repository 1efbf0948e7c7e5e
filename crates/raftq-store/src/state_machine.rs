//! The durable state machine: the engine applied to committed entries, its rows and message
//! payloads in RocksDB.
//!
//! Layout: the `sm_state` column family holds the engine's rows and the payload rows in one
//! sorted key space (see `raftq_engine::rows`); `sm_meta` holds the last applied log id, the
//! membership and the current snapshot's metadata and file name. Snapshot files (see
//! [`crate::snapshot`]) live in a directory of their own.
//!
//! Durability policy: one `apply` call writes every row its entries changed, their payload puts
//! and deletes, the last applied log id and the membership in one atomic `WriteBatch`, without
//! the write-ahead log and without an fsync: the Raft log (synced) replays whatever a crash
//! loses. The database flushes its column families together (`atomic_flush`), so what reaches
//! disk is always the state of one applied log id with that id. Building a snapshot flushes the
//! state before its metadata is recorded (with an fsync) and openraft purges the log it covers,
//! so the log always holds every entry after the state on disk.
//! On start the engine is rebuilt from `sm_state` (no log replay beyond what was not yet applied).
//!
//! A full disk: an apply cannot refuse a committed entry. RocksDB stops taking writes once a
//! write-out of its files found the disk full (a background error), and resumes by itself when
//! its file manager sees room again (it looks every 5 seconds); meanwhile an apply tries its
//! write again, with a pause that doubles up to [`APPLY_RETRY_MAX`], and readers of the engine
//! wait with it. A node keeps free space (`--min-free-bytes`) so that this does not happen in
//! practice; see docs/operations.md ("Full disk").
//!
//! Answers: applying a command answers its outcome, and for a receive the payloads it delivers,
//! read from the database. Only the node that proposed a write reads its answer, so the payloads
//! are read only while this node awaits writes of its own ([`Awaited`]): never on a follower.
//! The answers to parked receives go to the waiters registered on this node ([`Waiters`]), with
//! their payloads, once the apply is written.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder,
    SnapshotMeta, StorageError, StorageIOError, StoredMembership,
};
use raftq_engine::rows::{
    decode_payload, encode_payload, payload_key, stored_format, RowKey, FORMAT_VERSION,
};
use raftq_engine::{Changes, Delivery, Engine, Outcome, Payload, PayloadOp};
use rocksdb::{BoundColumnFamily, FlushOptions, IteratorMode, WriteBatch, WriteOptions, DB};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::disk::{Cursor, Disk, DiskFile};
use crate::layout::GroupFamilies;
use crate::snapshot::SnapshotDir;
use crate::state_digest::StateDigest;
use crate::types::{Delivered, NodeId, Response, TypeConfig};
use crate::waiters::Waiters;
use crate::{SnapshotFile, Work};

const KEY_APPLIED: &[u8] = b"applied";
const KEY_SNAPSHOT: &[u8] = b"snapshot";

type Meta = SnapshotMeta<NodeId, BasicNode>;
type Membership = StoredMembership<NodeId, BasicNode>;

/// One group's state in the node's database: the database, and the names of the group's
/// families in it. Dereferences to the database.
#[derive(Debug, Clone)]
pub(crate) struct GroupDb {
    db: Arc<DB>,
    families: GroupFamilies,
}

impl GroupDb {
    /// The family of engine rows and payloads.
    fn state(&self) -> io::Result<Arc<BoundColumnFamily<'_>>> {
        family(&self.db, &self.families.state)
    }

    /// The family of the applied marker, membership and current snapshot.
    fn meta(&self) -> io::Result<Arc<BoundColumnFamily<'_>>> {
        family(&self.db, &self.families.meta)
    }
}

impl std::ops::Deref for GroupDb {
    type Target = DB;

    fn deref(&self) -> &DB {
        &self.db
    }
}

fn family<'a>(db: &'a DB, name: &str) -> io::Result<Arc<BoundColumnFamily<'a>>> {
    db.cf_handle(name)
        .ok_or_else(|| io::Error::other(format!("column family {name} is missing")))
}

/// Why the state machine could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("column family {0} is missing")]
    MissingColumnFamily(String),
    #[error("RocksDB: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error("stored state is unreadable: {0}")]
    Rows(#[from] raftq_engine::rows::RowError),
    #[error("stored metadata is unreadable: {0}")]
    Meta(#[from] postcard::Error),
    #[error("snapshot directory: {0}")]
    Snapshots(#[from] io::Error),
}

impl OpenError {
    /// Whether the stored state is damaged: a checksum, a row or a snapshot file that does not
    /// read back as written.
    pub fn is_damage(&self) -> bool {
        match self {
            OpenError::MissingColumnFamily(_) => false,
            OpenError::Rocks(e) => crate::is_damage(e),
            OpenError::Rows(_) | OpenError::Meta(_) => true,
            OpenError::Snapshots(e) => matches!(
                e.kind(),
                io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
            ),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Applied {
    last_applied: Option<LogId<NodeId>>,
    membership: Membership,
}

/// The rows of one view of the state, in key order.
pub type Rows<'a> = &'a mut dyn Iterator<Item = io::Result<(Box<[u8]>, Box<[u8]>)>>;

/// Read access to the applied state, for queries on any node.
#[derive(Debug, Clone)]
pub struct StateReader {
    db: GroupDb,
    engine: Arc<RwLock<Engine>>,
    waiters: Waiters,
    snapshots: SnapshotDir,
}

impl StateReader {
    /// The size in bytes of this node's current snapshot file (0 before the first).
    pub fn snapshot_bytes(&self) -> u64 {
        self.snapshots.kept_bytes()
    }

    /// The sizes (body and attributes) of the messages the applied state holds, added up (0 if
    /// the engine is unreadable: a state machine that failed stops Raft anyway).
    pub fn message_bytes(&self) -> u64 {
        self.with_engine(Engine::message_bytes).unwrap_or(0)
    }

    /// The parked receives of this node's clients, where their answers go.
    pub fn waiters(&self) -> &Waiters {
        &self.waiters
    }

    /// Runs `f` on the engine.
    pub fn with_engine<T>(&self, f: impl FnOnce(&Engine) -> T) -> Option<T> {
        self.engine.read().ok().map(|e| f(&e))
    }

    /// Runs `f` on the engine and keeps a view of the database as of the same applied state,
    /// so that payloads of what `f` saw can be read after the engine is released: applies can
    /// go on meanwhile and may delete them from the database, not from the view.
    pub fn with_engine_and_view<T>(
        &self,
        f: impl FnOnce(&Engine) -> T,
    ) -> Option<(T, PayloadView<'_>)> {
        let engine = self.engine.read().ok()?;
        // An apply writes its batch before it releases the engine, so under the read lock the
        // database holds exactly what the engine shows.
        let view = self.db.snapshot();
        Some((f(&engine), PayloadView { db: &self.db, view }))
    }

    /// A digest of this node's applied state — every state row and payload as persisted, with
    /// the index of the last applied entry they reflect — read from one consistent snapshot of
    /// the database. Two nodes that applied the same entries have equal digests.
    pub fn digest(&self) -> Result<(Option<u64>, String), AnyError> {
        self.with_view(|applied, rows| {
            let mut digest = StateDigest::default();
            for row in rows {
                let (key, value) = row?;
                digest.add(&key, &value);
            }
            Ok((applied, digest.finish()))
        })
        .map_err(|e| AnyError::new(&e))
    }

    /// The index of the last entry the applied state reflects (none before the first).
    pub fn applied_index(&self) -> io::Result<Option<u64>> {
        self.with_view(|applied, _| Ok(applied))
    }

    /// Runs `f` on one consistent view of the applied state: the index of the last entry it
    /// reflects and its rows (engine rows and payloads) in key order.
    pub fn with_view<T>(
        &self,
        f: impl FnOnce(Option<u64>, Rows<'_>) -> io::Result<T>,
    ) -> io::Result<T> {
        let view = self.db.snapshot();
        let applied = applied_in(&self.db, &view)?;
        let mut rows = view
            .iterator_cf(&self.db.state()?, IteratorMode::Start)
            .map(|row| row.map_err(io::Error::other));
        let answer = f(applied.last_applied.map(|id| id.index), &mut rows);
        drop(rows);
        answer
    }

    /// The payload stored under `storage_key`.
    pub fn payload(&self, storage_key: u64) -> Result<Option<Payload>, AnyError> {
        Ok(self.payloads(&[storage_key])?.pop().flatten())
    }

    /// The payloads stored under `storage_keys`, in their order, read in one batch: the keys a
    /// receive delivers are mostly neighbours, which then share index searches and blocks.
    pub fn payloads(&self, storage_keys: &[u64]) -> Result<Vec<Option<Payload>>, AnyError> {
        let state = self.db.state().map_err(|e| AnyError::new(&e))?;
        let keys: Vec<_> = storage_keys.iter().map(|k| payload_key(*k)).collect();
        self.db
            .batched_multi_get_cf(&state, &keys, false)
            .into_iter()
            .map(|read| decoded(read.map_err(|e| AnyError::new(&e))?))
            .collect()
    }
}

fn decoded(bytes: Option<impl AsRef<[u8]>>) -> Result<Option<Payload>, AnyError> {
    bytes
        .map(|b| decode_payload(b.as_ref()).map_err(|e| AnyError::new(&e)))
        .transpose()
}

/// Payloads as of one applied state (see [`StateReader::with_engine_and_view`]).
pub struct PayloadView<'a> {
    db: &'a GroupDb,
    view: rocksdb::SnapshotWithThreadMode<'a, DB>,
}

impl PayloadView<'_> {
    /// The payload stored under `storage_key` in this view.
    pub fn payload(&self, storage_key: u64) -> Result<Option<Payload>, AnyError> {
        let state = self.db.state().map_err(|e| AnyError::new(&e))?;
        decoded(
            self.view
                .get_cf(&state, payload_key(storage_key))
                .map_err(|e| AnyError::new(&e))?,
        )
    }
}

/// How many writes this node proposed and still waits for. Only a write's proposer reads what
/// applying it answers, so while there are none (on a follower, always) applying leaves out what
/// only answers need: the payloads a receive delivers, read from the database.
#[derive(Debug, Clone, Default)]
pub struct Awaited(Arc<AtomicUsize>);

impl Awaited {
    /// Counts one write from now until the guard is dropped: take it before proposing, drop it
    /// once the answer is in.
    pub fn wait(&self) -> AwaitedWrite {
        self.0.fetch_add(1, Ordering::SeqCst);
        AwaitedWrite(Arc::clone(&self.0))
    }

    fn any(&self) -> bool {
        self.0.load(Ordering::SeqCst) > 0
    }
}

/// One write counted by [`Awaited::wait`].
#[derive(Debug)]
pub struct AwaitedWrite(Arc<AtomicUsize>);

impl Drop for AwaitedWrite {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The most bytes an apply's write batch reserves up front (an apply that catches up on many
/// entries may be far larger than the next one).
const BATCH_CAPACITY_LIMIT: usize = 16 * 1024 * 1024;

/// openraft's state machine over the engine and RocksDB.
#[derive(Debug)]
pub struct RocksStateMachine {
    db: GroupDb,
    engine: Arc<RwLock<Engine>>,
    applied: Applied,
    awaited: Awaited,
    snapshot_count: u64,
    snapshots: Snapshots,
    waiters: Waiters,
    /// Where snapshots are built and installed, and how their files are read and written.
    work: Work,
    /// The size of the last apply's write batch: the next one starts at that capacity rather
    /// than growing by copying what it holds.
    batch_bytes: usize,
}

/// The snapshot directory, and the lock that orders updates of the current snapshot between
/// builders (off the state machine's task) and installs.
#[derive(Debug, Clone)]
struct Snapshots {
    dir: SnapshotDir,
    current: Arc<Mutex<()>>,
}

impl RocksStateMachine {
    /// Opens the state stored in `db` (opened with [`state_column_families`]), with snapshot
    /// files in `snapshot_dir` on `disk`, built and installed as `work` says; an empty database
    /// gives an empty engine for `region`. With [`Work::Threads`], the Raft core reads and
    /// writes snapshot files with tokio's files: `disk` is then the operating system's.
    pub fn open(
        db: Arc<DB>,
        families: GroupFamilies,
        region: &str,
        disk: Arc<dyn Disk>,
        snapshot_dir: PathBuf,
        work: Work,
    ) -> Result<Self, OpenError> {
        let db = GroupDb { db, families };
        let (applied, engine) = read_state(&db, region)?;
        let current = stored_snapshot(&db)?;
        let kept = current.as_ref().map(|s| s.file.as_str());
        let dir = SnapshotDir::open(disk, snapshot_dir, kept)?;
        Ok(RocksStateMachine {
            db,
            engine: Arc::new(RwLock::new(engine)),
            applied,
            awaited: Awaited::default(),
            snapshot_count: 0,
            batch_bytes: 0,
            snapshots: Snapshots {
                dir,
                current: Arc::default(),
            },
            waiters: Waiters::default(),
            work,
        })
    }

    /// The count of writes this node waits for; its proposer must count each one.
    /// The id of the last entry applied (none before the first).
    pub fn last_applied(&self) -> Option<LogId<NodeId>> {
        self.applied.last_applied
    }

    pub fn awaited(&self) -> Awaited {
        self.awaited.clone()
    }

    /// A handle for queries.
    pub fn reader(&self) -> StateReader {
        StateReader {
            db: self.db.clone(),
            engine: Arc::clone(&self.engine),
            waiters: self.waiters.clone(),
            snapshots: self.snapshots.dir.clone(),
        }
    }

    fn region(&self) -> io::Result<String> {
        self.engine
            .read()
            .map(|e| e.region().to_string())
            .map_err(|_| io::Error::other("engine lock poisoned"))
    }
}

/// Writes one command's range deletes and payload changes into `batch`, in order, and adds the
/// rows it changed to `rows`; `fresh`, when the batch answers a waiting client, tracks payloads put
/// earlier in the same batch, which reads of the database cannot see yet.
fn stage(
    batch: &mut WriteBatch,
    cf: &Arc<BoundColumnFamily<'_>>,
    changes: Changes,
    rows: &mut BTreeSet<RowKey>,
    mut fresh: Option<&mut HashMap<u64, Payload>>,
) {
    for range in &changes.ranges {
        batch.delete_range_cf(cf, &range.start, &range.end);
    }
    rows.extend(changes.rows);
    for op in changes.payloads {
        match op {
            PayloadOp::Put(k, payload) => {
                batch.put_cf(cf, payload_key(k), encode_payload(&payload));
                if let Some(fresh) = fresh.as_deref_mut() {
                    fresh.insert(k, payload);
                }
            }
            PayloadOp::Delete(k) => {
                batch.delete_cf(cf, payload_key(k));
                if let Some(fresh) = fresh.as_deref_mut() {
                    fresh.remove(&k);
                }
            }
        }
    }
}

/// Writes `rows` as the engine holds them after every command of the batch, so that a row many
/// commands change (the engine's metadata row: every command does) is written once. Each row is
/// written as it ends up, present or absent, so it may follow every range delete of the batch
/// whatever the order of the commands was.
fn stage_rows(
    batch: &mut WriteBatch,
    cf: &Arc<BoundColumnFamily<'_>>,
    engine: &Engine,
    rows: BTreeSet<RowKey>,
) {
    for key in rows {
        match engine.row_value(&key) {
            Some(value) => batch.put_cf(cf, key.encode(), value),
            None => batch.delete_cf(cf, key.encode()),
        }
    }
}

/// The payloads of `deliveries`, by storage key: from `fresh` for those put earlier in the same
/// apply (not in the database yet), else read from the database in one batch.
fn delivered(
    reader: &StateReader,
    fresh: &HashMap<u64, Payload>,
    deliveries: &[Delivery],
) -> Result<Vec<(u64, Payload)>, AnyError> {
    let mut payloads = Vec::new();
    let mut stored = Vec::new();
    for key in deliveries.iter().map(|d| d.meta.storage_key) {
        match fresh.get(&key) {
            Some(p) => payloads.push((key, p.clone())),
            None => stored.push(key),
        }
    }
    let read = reader.payloads(&stored)?;
    payloads.extend(
        stored
            .into_iter()
            .zip(read)
            .filter_map(|(k, p)| p.map(|p| (k, p))),
    );
    Ok(payloads)
}

/// The first pause of an apply whose write found no room.
const APPLY_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(50);
/// The longest pause between its tries.
const APPLY_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `error` is RocksDB's for a disk without room (or a space limit reached).
pub fn is_no_space(error: &rocksdb::Error) -> bool {
    let message = error.to_string();
    error.kind() == rocksdb::ErrorKind::IOError
        && (message.contains("No space left on device") || message.contains("Space limit"))
}

/// Writes an apply's `batch` without the write-ahead log. While RocksDB has no room, the write
/// is tried again until it succeeds (see the module documentation): the calling thread waits,
/// off the runtime's worker list on a multi-threaded runtime so its other tasks go on.
fn write_applied(db: &DB, batch: WriteBatch) -> Result<(), rocksdb::Error> {
    let mut unlogged = WriteOptions::default();
    unlogged.disable_wal(true);
    // Kept for a retry: a failed write consumes its batch.
    let retry = batch.data().to_vec();
    let error = match db.write_opt(batch, &unlogged) {
        Err(e) if is_no_space(&e) => e,
        written => return written,
    };
    tracing::warn!(%error, "the state store's disk is full: applies wait until space is freed");
    let waiting = || {
        let since = Instant::now();
        let mut pause = APPLY_RETRY_FIRST;
        loop {
            std::thread::sleep(pause);
            match db.write_opt(WriteBatch::from_data(&retry), &unlogged) {
                Err(e) if is_no_space(&e) => pause = (pause * 2).min(APPLY_RETRY_MAX),
                written => {
                    let waited_ms = since.elapsed().as_millis() as u64;
                    tracing::info!(waited_ms, "the state store has room again: applies go on");
                    return written;
                }
            }
        }
    };
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(waiting),
        _ => waiting(),
    }
}

fn read_failed(e: AnyError) -> StorageError<NodeId> {
    StorageIOError::read_state_machine(e).into()
}

/// What one call of `apply` gathers while the engine applies its commands: the rows to write in
/// one batch, the payloads these commands stored (a delivery in the same call reads them here:
/// they are not in the database yet), and the waiters to answer once the batch is written.
struct Applying<'a> {
    batch: WriteBatch,
    state: Arc<BoundColumnFamily<'a>>,
    reader: StateReader,
    /// Whether anyone may wait for an answer; when nobody does, no payload is gathered.
    answered: bool,
    fresh: HashMap<u64, Payload>,
    rows: BTreeSet<RowKey>,
    waiters_answered: Vec<(oneshot::Sender<Delivered>, Delivered)>,
}

impl Applying<'_> {
    /// Stages the rows `applied` changed, gathers the waiters it answered with their payloads,
    /// and returns the response for its proposer.
    fn take(
        &mut self,
        applied: raftq_engine::Applied,
        waiters: &Waiters,
    ) -> Result<Response, AnyError> {
        stage(
            &mut self.batch,
            &self.state,
            applied.changes,
            &mut self.rows,
            self.answered.then_some(&mut self.fresh),
        );
        for answer in applied.answers {
            let Some(sender) = waiters.take(answer.waiter) else {
                continue;
            };
            let payloads = delivered(&self.reader, &self.fresh, &answer.deliveries)?;
            let delivered = Delivered {
                deliveries: answer.deliveries,
                payloads,
            };
            self.waiters_answered.push((sender, delivered));
        }
        let payloads = match (self.answered, &applied.result) {
            (true, Ok(Outcome::Received(deliveries))) => {
                delivered(&self.reader, &self.fresh, deliveries)?
            }
            _ => Vec::new(),
        };
        Ok(Response {
            result: Some(applied.result),
            payloads,
        })
    }
}

fn io_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(&e).into()
}

impl RaftStateMachine<TypeConfig> for RocksStateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
        Ok((self.applied.last_applied, self.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Vec<Response>>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let db = &self.db;
        let meta = db.meta().map_err(io_err)?;
        let mut applying = Applying {
            batch: WriteBatch::with_capacity_bytes(self.batch_bytes),
            state: db.state().map_err(io_err)?,
            reader: self.reader(),
            // A write proposed or a waiter registered after this check is in a later apply.
            answered: self.awaited.any() || self.waiters.any(),
            fresh: HashMap::new(),
            rows: BTreeSet::new(),
            waiters_answered: Vec::new(),
        };
        let mut responses = Vec::new();
        let mut engine = self
            .engine
            .write()
            .map_err(|_| io_err(std::io::Error::other("engine lock poisoned")))?;
        let first = self.applied.last_applied.map_or(0, |id| id.index + 1);
        tracing::trace!(target: "raftq::stage", stage = "apply", first);
        for entry in entries {
            self.applied.last_applied = Some(entry.log_id);
            let mut answers = Vec::new();
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Membership(m) => {
                    self.applied.membership = StoredMembership::new(Some(entry.log_id), m);
                }
                EntryPayload::Normal(proposed) => {
                    for command in Arc::unwrap_or_clone(proposed.commands) {
                        let applied = engine.apply(raftq_engine::Entry {
                            now: proposed.now,
                            command,
                        });
                        answers.push(applying.take(applied, &self.waiters).map_err(read_failed)?);
                    }
                }
            }
            responses.push(answers);
        }
        let Applying {
            mut batch,
            state,
            rows,
            waiters_answered,
            ..
        } = applying;
        stage_rows(&mut batch, &state, &engine, rows);
        let applied = postcard::to_allocvec(&self.applied).map_err(io_err)?;
        batch.put_cf(&meta, KEY_APPLIED, applied);
        self.batch_bytes = batch.size_in_bytes().min(BATCH_CAPACITY_LIMIT);
        // Written before the engine is released: readers then never see a message whose rows
        // are not in the database yet. No write-ahead log: the Raft log replays what a crash
        // loses from the memtables (see the module documentation).
        write_applied(&self.db, batch).map_err(io_err)?;
        drop(engine);
        for (sender, delivered) in waiters_answered {
            // A waiter that went away meanwhile leaves its messages to their leases.
            let _ = sender.send(delivered);
        }
        let last = self.applied.last_applied.map_or(0, |id| id.index);
        tracing::trace!(target: "raftq::stage", stage = "applied", first, last);
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.snapshot_count += 1;
        SnapshotBuilder {
            db: self.db.clone(),
            snapshots: self.snapshots.clone(),
            count: self.snapshot_count,
            work: self.work,
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<SnapshotFile>, StorageError<NodeId>> {
        let name = SnapshotDir::receiving_name();
        let file = SnapshotFile::create_new(&self.snapshots.dir, &name, self.work)
            .await
            .map_err(|e| StorageError::from(StorageIOError::write_snapshot(None, &e)))?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StorageError<NodeId>> {
        let received = snapshot
            .into_file()
            .await
            .map_err(|e| unreadable(meta, &e))?;
        let region = self.region().map_err(io_err)?;
        let (db, engine, snapshots) = (
            self.db.clone(),
            Arc::clone(&self.engine),
            self.snapshots.clone(),
        );
        let owned = meta.clone();
        let started = Instant::now();
        // Reading, restoring and writing a large state takes seconds: off the runtime's workers,
        // which carry the Raft core and the network meanwhile.
        let (applied, rows) = self
            .work
            .blocking(move || install(&db, &engine, &snapshots, region, &owned, received))
            .await
            .map_err(io_err)?
            .map_err(|e| *e)?;
        self.applied = applied;
        tracing::info!(
            snapshot = %meta.snapshot_id,
            rows,
            seconds = started.elapsed().as_secs_f64(),
            "installed a snapshot"
        );
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let Some(stored) = stored_snapshot(&self.db).map_err(io_err)? else {
            return Ok(None);
        };
        let file = SnapshotFile::open(&self.snapshots.dir, &stored.file, self.work)
            .await
            .map_err(|e| unreadable(&stored.meta, &e))?;
        Ok(Some(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(file),
        }))
    }
}

/// The applied marker and the engine `db` holds for `region`, its rows rewritten in this
/// build's row format (synced) when they were stored in an earlier one.
fn read_state(db: &GroupDb, region: &str) -> Result<(Applied, Engine), OpenError> {
    let missing = |name: &str| OpenError::MissingColumnFamily(name.to_string());
    let state = db.state().map_err(|_| missing(&db.families.state))?;
    let meta = db.meta().map_err(|_| missing(&db.families.meta))?;
    let applied = match db.get_cf(&meta, KEY_APPLIED)? {
        Some(bytes) => postcard::from_bytes(&bytes)?,
        None => Applied::default(),
    };
    let rows: Vec<(Vec<u8>, Vec<u8>)> = db
        .iterator_cf(&state, IteratorMode::Start)
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .map(|(k, v)| (k.into_vec(), v.into_vec()))
        .collect();
    let format = stored_format(&rows)?;
    let engine = Engine::restore(region, rows)?.in_group(db.families.group.0);
    let mut batch = WriteBatch::default();
    if in_this_format(&mut batch, &state, format, &engine) {
        let mut sync = WriteOptions::default();
        sync.set_sync(true);
        db.write_opt(batch, &sync)?;
    }
    Ok((applied, engine))
}

/// Puts into `batch` every engine row of `engine` in this build's row format when its state was
/// stored in an earlier `format` (payload rows name their own format and stay as they are), so
/// that no row of the earlier format is left under a meta row that names this build's: every
/// apply writes the meta row in this format, and a later restart or snapshot would read the
/// rows it left in the earlier one wrongly. Answers whether it put anything.
fn in_this_format(
    batch: &mut WriteBatch,
    state: &Arc<BoundColumnFamily<'_>>,
    format: Option<u32>,
    engine: &Engine,
) -> bool {
    let Some(earlier) = format.filter(|f| *f < FORMAT_VERSION) else {
        return false;
    };
    let rows = engine.export_rows();
    tracing::info!(
        from = earlier,
        to = FORMAT_VERSION,
        rows = rows.len(),
        "the state's rows written again in this build's row format"
    );
    for (key, value) in rows {
        batch.put_cf(state, key, value);
    }
    true
}

/// Replaces the state with the snapshot `received` describes by `meta`: keeps its file, rebuilds
/// the engine from its rows and writes them, the applied marker and the snapshot record in one
/// synced batch. Returns the applied marker and the number of rows.
fn install(
    db: &GroupDb,
    engine: &RwLock<Engine>,
    snapshots: &Snapshots,
    region: String,
    meta: &Meta,
    received: Arc<dyn DiskFile>,
) -> Result<(Applied, usize), Box<StorageError<NodeId>>> {
    let read_err = |e| Box::new(unreadable(meta, &e));
    let name = snapshots
        .dir
        .copy_from(&mut Cursor::new(received))
        .map_err(read_err)?;
    let rows = snapshots.dir.read_rows(&name).map_err(read_err)?;
    let format = stored_format(&rows).map_err(|e| unreadable(meta, &e))?;
    let restored = Engine::restore(region, rows.iter().cloned())
        .map_err(|e| unreadable(meta, &e))?
        .in_group(db.families.group.0);
    let state = db.state().map_err(io_err)?;
    let meta_cf = db.meta().map_err(io_err)?;
    let mut batch = WriteBatch::default();
    batch.delete_range_cf(&state, [0u8].as_slice(), [0xffu8; 16].as_slice());
    for (k, v) in &rows {
        batch.put_cf(&state, k, v);
    }
    in_this_format(&mut batch, &state, format, &restored);
    let applied = Applied {
        last_applied: meta.last_log_id,
        membership: meta.last_membership.clone(),
    };
    batch.put_cf(
        &meta_cf,
        KEY_APPLIED,
        postcard::to_allocvec(&applied).map_err(io_err)?,
    );
    let stored = StoredSnapshot {
        meta: meta.clone(),
        file: name,
    };
    batch.put_cf(
        &meta_cf,
        KEY_SNAPSHOT,
        postcard::to_allocvec(&stored).map_err(io_err)?,
    );
    let mut sync = WriteOptions::default();
    sync.set_sync(true);
    let _current = snapshots
        .current
        .lock()
        .map_err(|_| io_err(io::Error::other("snapshot lock poisoned")))?;
    // The engine is held across the write, as in `apply`, so readers see the old state or the
    // new one whole.
    let mut engine_now = engine
        .write()
        .map_err(|_| io_err(io::Error::other("engine lock poisoned")))?;
    db.write_opt(batch, &sync).map_err(io_err)?;
    *engine_now = restored;
    drop(engine_now);
    snapshots
        .dir
        .keep_only(Some(&stored.file))
        .map_err(io_err)?;
    Ok((applied, rows.len()))
}

/// The error of a snapshot described by `meta` that could not be read.
fn unreadable(meta: &Meta, e: &(impl std::error::Error + 'static)) -> StorageError<NodeId> {
    StorageError::from(StorageIOError::read_snapshot(Some(meta.signature()), e))
}

/// The current snapshot, as kept in `sm_meta`: its metadata and the name of its file.
#[derive(Debug, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: Meta,
    file: String,
}

fn stored_snapshot(db: &GroupDb) -> io::Result<Option<StoredSnapshot>> {
    db.get_cf(&db.meta()?, KEY_SNAPSHOT)
        .map_err(io::Error::other)?
        .map(|bytes| postcard::from_bytes(&bytes).map_err(io::Error::other))
        .transpose()
}

/// Builds a snapshot off the state machine's task, from one consistent view of the database:
/// the rows and the applied marker written with them, so the snapshot's last log id is exactly
/// the state its rows hold (at or after the moment it was requested).
pub struct SnapshotBuilder {
    db: GroupDb,
    snapshots: Snapshots,
    count: u64,
    work: Work,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let started = Instant::now();
        tracing::trace!(target: "raftq::stage", stage = "snapshot");
        let stored = match self.work {
            Work::Threads => self.build_on_a_thread().await,
            Work::Tasks { .. } => build(&self.db, &self.snapshots, self.count),
        }
        .map_err(io_err)?;
        tracing::info!(
            snapshot = %stored.meta.snapshot_id,
            seconds = started.elapsed().as_secs_f64(),
            "built a snapshot"
        );
        let file = SnapshotFile::open(&self.snapshots.dir, &stored.file, self.work)
            .await
            .map_err(io_err)?;
        tracing::trace!(target: "raftq::stage", stage = "snapshotted");
        Ok(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(file),
        })
    }
}

impl SnapshotBuilder {
    /// Builds on a thread of its own, at a lower priority.
    async fn build_on_a_thread(&self) -> io::Result<StoredSnapshot> {
        let db = self.db.clone();
        let snapshots = self.snapshots.clone();
        let count = self.count;
        let (done, built) = oneshot::channel();
        std::thread::Builder::new()
            .name("raftq-snapshot".into())
            .spawn(move || {
                lower_priority();
                // Nobody is left to hear of it only if the build was abandoned.
                let _ = done.send(build_when_room(&db, &snapshots, count));
            })?;
        built.await.map_err(io::Error::other)?
    }
}

/// Lowers the calling thread's CPU priority (nice 10, Linux): a snapshot is seconds of CPU
/// (reading, hashing and writing every row), which on a busy node would otherwise take turns
/// from the threads that append, replicate and apply. Not lowered, it still gets built.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain system calls about this thread itself; no memory is shared.
        let lowered =
            unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10) };
        if lowered != 0 {
            let error = io::Error::last_os_error();
            tracing::debug!(%error, "cannot lower the snapshot thread's priority");
        }
    }
}

/// Builds as [`build`] does, and again while the disk has no room for the file or RocksDB's
/// flush (the partial file is removed each time), with a pause that doubles up to
/// [`APPLY_RETRY_MAX`]: a failed build would stop the Raft core, and a snapshot is what lets the
/// log behind it go.
fn build_when_room(db: &GroupDb, snapshots: &Snapshots, count: u64) -> io::Result<StoredSnapshot> {
    let mut pause = APPLY_RETRY_FIRST;
    loop {
        match build(db, snapshots, count) {
            Err(error) if crate::segments::is_full(&error) || io_no_space(&error) => {
                if pause == APPLY_RETRY_FIRST {
                    tracing::warn!(%error, "no room for a snapshot: its build waits until space is freed");
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(APPLY_RETRY_MAX);
            }
            built => return built,
        }
    }
}

/// Whether `error` carries RocksDB's error for a disk without room.
fn io_no_space(error: &io::Error) -> bool {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rocksdb::Error>())
        .is_some_and(is_no_space)
}

/// Streams the rows of one view to a new snapshot file and makes it the current snapshot,
/// unless a newer one was installed meanwhile (which then stays current and is returned).
fn build(db: &GroupDb, snapshots: &Snapshots, count: u64) -> io::Result<StoredSnapshot> {
    let view = db.snapshot();
    let applied = applied_in(db, &view)?;
    let rows = view
        .iterator_cf(&db.state()?, IteratorMode::Start)
        .map(|r| r.map_err(io::Error::other));
    let name = snapshots.dir.write_rows(rows)?;
    drop(view);
    // Applies skip the write-ahead log: flush the state (at or past this view) to disk before
    // the snapshot is recorded and openraft purges the log that could replay it.
    let mut wait = FlushOptions::default();
    wait.set_wait(true);
    db.flush_cfs_opt(&[&db.state()?, &db.meta()?], &wait)
        .map_err(io::Error::other)?;
    let last = applied
        .last_applied
        .map_or_else(|| "none".to_string(), |id| id.to_string());
    let built = StoredSnapshot {
        meta: Meta {
            last_log_id: applied.last_applied,
            last_membership: applied.membership,
            snapshot_id: format!("{last}-{count}"),
        },
        file: name,
    };
    let _current = snapshots
        .current
        .lock()
        .map_err(|_| io::Error::other("snapshot lock poisoned"))?;
    let current = match stored_snapshot(db)? {
        Some(newer) if newer.meta.last_log_id > built.meta.last_log_id => newer,
        _ => {
            let mut sync = WriteOptions::default();
            sync.set_sync(true);
            db.put_cf_opt(
                &db.meta()?,
                KEY_SNAPSHOT,
                postcard::to_allocvec(&built).map_err(io::Error::other)?,
                &sync,
            )
            .map_err(io::Error::other)?;
            built
        }
    };
    snapshots.dir.keep_only(Some(&current.file))?;
    Ok(current)
}

/// The applied marker as a view of the database holds it.
fn applied_in(db: &GroupDb, view: &rocksdb::SnapshotWithThreadMode<'_, DB>) -> io::Result<Applied> {
    match view
        .get_cf(&db.meta()?, KEY_APPLIED)
        .map_err(io::Error::other)?
    {
        Some(bytes) => postcard::from_bytes(&bytes).map_err(io::Error::other),
        None => Ok(Applied::default()),
    }
}
