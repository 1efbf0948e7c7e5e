//! Raft log storage: openraft's [`RaftLogStorage`] and [`RaftLogReader`] (storage-v2 API) for
//! any [`RaftTypeConfig`].
//!
//! Layout: the entries, postcard-encoded, in segment files of their own (see `segments`), in
//! a directory given to [`LogStore::open`]; the vote, the committed log id, the last purged log
//! id and the node's [`Enrolment`] in its cluster in the *meta* column family of a
//! caller-opened [`DB`], each postcard-encoded.
//!
//! Durability policy:
//! - [`append`](RaftLogStorage::append) writes its entries into the segments with one write. A
//!   leader's own append, which the Raft core does not wait for, is readable at once, and the
//!   append hands its [`LogFlushed`] callback to a sync thread, which fsyncs the segments written
//!   for every append queued meanwhile and only then calls the callbacks, in order: openraft
//!   counts an entry durable (acknowledges it, counts it towards a commit) only after its fsync,
//!   while the leader goes on replicating instead of waiting for the disk. The core waits for
//!   every other append's flush (a follower's: it answers its leader only once its copy is
//!   durable), so those fsync in the append itself and call the callback there: the same fsync,
//!   without waking the sync thread and being woken by it.
//! - [`save_vote`](RaftLogStorage::save_vote) and [`truncate`](RaftLogStorage::truncate) first
//!   wait for the appends still with the sync thread, so that they never become durable before
//!   an append that came ahead of them; then they write synced, the vote to the meta family, a
//!   truncation to the segments.
//! - [`purge`](RaftLogStorage::purge) records the last purged log id synced, then lets the
//!   segments go: a crash in between leaves entries that the next start drops.
//! - An append that needs a new segment file while the disk has no room for one waits (the
//!   Raft core with it) and tries again, with a pause that doubles up to a second, until there
//!   is room: the records before it are written, none is started that may not fit (see
//!   `segments`), and nothing fails, so the node goes on by itself once space is freed. A node
//!   refuses writes well before that (see [`LogRoom`]); the wait is the last resort.
//! - A write or fsync of the log that fails stops the store: every later append, vote,
//!   truncation, purge and barrier fails, so that nothing is written behind appends whose state
//!   on the disk is unknown (see [`Durability`]).
//! - After every fsync of appended segments, the log's synced mark rises past them; appends write
//!   it into their records, which is how a start tells a crash's cut-short write from damage
//!   (see `records`).
//! - [`save_committed`](RaftLogStorage::save_committed) is written without an fsync. Losing it
//!   in a crash is harmless (fewer committed entries are re-applied at startup), and one that
//!   outlived entries the crash took is read back as the last entry held.
//!
//! The synced writes of the vote, a truncation and a purge run on tokio's blocking pool so that
//! their fsync does not stall a runtime worker (in a simulation, where [`Work`] says, inline). An append the core waits for is the exception
//! above: it stalls the worker that runs the core, which has nothing else to do meanwhile, for
//! one fsync; the other workers go on.
//!
//! The entries appended last are also kept decoded in memory (see `recent`), up to
//! [`RECENT_BYTES`] of encoded entries: replication and apply read them from there.
//!
//! The store counts the encoded bytes of every entry appended since it was made
//! ([`LogStore::appended`]): the snapshot policy weighs the log's growth against the size of
//! the snapshot that would let it go.
//!
//! A directory written by raftq before the entries moved to segment files holds them in the
//! *logs* column family; opening the store moves them into segments.

use std::cmp::Ordering::Less;
use std::fmt;
use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;
use std::ops::Bound;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use openraft::storage::LogFlushed;
use openraft::storage::LogState;
use openraft::storage::RaftLogStorage;
use openraft::AnyError;
use openraft::LogId;
use openraft::OptionalSend;
use openraft::RaftLogId;
use openraft::RaftLogReader;
use openraft::RaftTypeConfig;
use openraft::StorageError;
use openraft::StorageIOError;
use openraft::Vote;
use raftq_engine::codec::to_vec;
use rocksdb::BoundColumnFamily;
use rocksdb::ColumnFamilyDescriptor;
use rocksdb::IteratorMode;
use rocksdb::Options;
use rocksdb::WriteBatch;
use rocksdb::WriteOptions;
use rocksdb::DB;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::error::SendError;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use uuid::Uuid;

use crate::disk::{self, Disk, DiskFile, Open};
use crate::layout::META_CF;
use crate::recent::Recent;
use crate::records::SegmentError;
use crate::segments::{remove_purged, LogOptions, Segments, SyncedMark};
use crate::work::Work;

/// Name of the column family where a directory written before segment files held its entries.
pub const LOGS_CF: &str = "raft_logs";

/// Encoded bytes of the entries appended last that are kept decoded in memory: several entries
/// in flight at group commit's largest entries.
pub const RECENT_BYTES: usize = 16 * 1024 * 1024;

/// Entries moved at a time from the logs column family into segments.
const MOVE_BATCH: usize = 1024;

/// The first pause of an append waiting for room for a new segment.
const ROOM_WAIT_FIRST: Duration = Duration::from_millis(10);
/// The longest pause between its tries.
const ROOM_WAIT_MAX: Duration = Duration::from_secs(1);

pub(crate) const KEY_VOTE: &[u8] = b"vote";
const KEY_COMMITTED: &[u8] = b"committed";
const KEY_LAST_PURGED: &[u8] = b"last_purged_log_id";
const KEY_ENROLMENT: &[u8] = b"enrolment";
const KEY_SEGMENTS_ID: &[u8] = b"segments_id";

/// The file in the segments' directory that names them, as the meta family records.
const SEGMENTS_ID_FILE: &str = "id";

/// What a node's data directory records of its cluster besides the log: written when the
/// cluster forms or the node first hears from it, and read at every start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enrolment {
    /// The cluster this directory belongs to; a node refuses Raft traffic from any other.
    pub cluster_id: Option<Uuid>,
    /// The node must be added to the cluster (as a learner) before it may vote or stand for
    /// election: it was started to join, or found its directory empty while its cluster existed.
    pub joining: bool,
}

/// Descriptors of the column families [`LogStore`] uses: [`META_CF`], and [`LOGS_CF`], which
/// only a directory from before segment files has rows in; open the [`DB`] with them (plus any
/// of your own).
pub fn column_families() -> Vec<ColumnFamilyDescriptor> {
    vec![
        ColumnFamilyDescriptor::new(LOGS_CF, Options::default()),
        ColumnFamilyDescriptor::new(META_CF, Options::default()),
    ]
}

/// [`LogStore::open`] was given a column family name the [`DB`] was not opened with.
#[derive(Debug, thiserror::Error)]
#[error("RocksDB column family {0:?} not found")]
pub struct MissingColumnFamily(pub String);

/// Why a log store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LogStoreError {
    #[error(transparent)]
    MissingColumnFamily(#[from] MissingColumnFamily),
    #[error("log files or threads: {0}")]
    Io(#[from] io::Error),
    #[error("RocksDB: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error(transparent)]
    Segments(#[from] SegmentError),
    #[error("cannot read the log's metadata: {0}")]
    Meta(AnyError),
    #[error("cannot move the entries of the logs column family into segments: {0}")]
    Move(#[from] MoveError),
    #[error(
        "the log's segment files in {0} are missing or not this database's: the entries this \
         node acknowledged are gone"
    )]
    SegmentsLost(std::path::PathBuf),
    #[error(
        "the log's segment files in {0} hold entries, but the database that holds this node's \
         vote is new: it was lost"
    )]
    DatabaseLost(std::path::PathBuf),
}

/// Why the entries of the logs column family could not be moved into segments.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error("RocksDB: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error("segments: {0}")]
    Segments(#[from] io::Error),
    #[error("a key of {0} bytes is not a log index")]
    Key(usize),
}

impl LogStoreError {
    /// Whether the stored log is damaged (as opposed to unreadable for another reason).
    pub fn is_damage(&self) -> bool {
        match self {
            LogStoreError::Segments(e) => e.is_damage(),
            LogStoreError::SegmentsLost(_) | LogStoreError::DatabaseLost(_) => true,
            _ => false,
        }
    }
}

/// Raft log store. Cloning is cheap: clones share the same segments and [`DB`].
pub struct LogStore<C: RaftTypeConfig> {
    db: Arc<DB>,
    /// The file system of the segments.
    disk: Arc<dyn Disk>,
    meta_cf: Arc<str>,
    segments: Arc<Mutex<Segments>>,
    /// Appends waiting for their segments to reach the disk, and barriers behind them.
    syncer: UnboundedSender<Flush<C>>,
    /// Where the slow work runs.
    work: Work,
    /// The entries appended last, shared by every clone.
    recent: Arc<Mutex<Recent<C::Entry>>>,
    /// The id of the last entry, shared by every clone.
    last: KnownLastLogId<C::NodeId>,
    appended: Appended,
    durability: Arc<Durability>,
    room: LogRoom,
    #[cfg(feature = "testing")]
    failing: FailingDisk,
    _c: PhantomData<C>,
}

/// How the log stands for room on its disk: what it can take before it needs a new segment
/// file, and whether an append waits for room for one. Shared by a store, its clones and
/// whoever admits writes to it; cheap to clone.
#[derive(Debug, Clone)]
pub struct LogRoom {
    segments: Arc<Mutex<Segments>>,
    waiting: Arc<AtomicBool>,
    waits: Arc<AtomicU64>,
}

impl LogRoom {
    /// Whether the log is short of room: an append waits for room, or no spare segment could be
    /// made and the newest one has less than a quarter of a segment left. A node refuses its
    /// clients' writes then, so that the entries in flight still fit.
    pub fn is_short(&self) -> bool {
        if self.waiting() {
            return true;
        }
        let segments = self.segments.lock().unwrap_or_else(PoisonError::into_inner);
        segments.short_of_room()
    }

    /// Whether an append is waiting for room for a new segment.
    pub fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Appends that had to wait for room, since the store opened.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }
}

/// What a store, its clones and its sync thread know of the durability of its writes.
#[derive(Debug, Default)]
struct Durability {
    /// Appends handed to the sync thread whose callbacks it has not called yet.
    queued: AtomicUsize,
    /// The first write or fsync of the log that failed. What the disk holds of the writes
    /// before it is unknown from then on: Linux reports a failed writeback once and may drop the
    /// pages, so a later fsync can succeed without them. The store then takes no more writes
    /// and passes no more barriers; openraft stops on the errors, and the node restarts from
    /// what the disk holds.
    failed: OnceLock<String>,
    /// How far the log is known durable (see `segments`).
    synced: SyncedMark,
}

impl Durability {
    fn fail(&self, error: &dyn fmt::Display) {
        if self.failed.set(error.to_string()).is_ok() {
            tracing::error!(%error, "the log's disk failed: the log store takes no more writes");
        }
    }

    /// An error once a write or fsync failed.
    fn check(&self) -> io::Result<()> {
        match self.failed.get() {
            Some(error) => Err(io::Error::other(format!(
                "the log's disk failed ({error}): the log store takes no more writes"
            ))),
            None => Ok(()),
        }
    }
}

/// A test switch: once turned on, every later write of the log store (and of its clones) fails
/// as a failing disk would.
#[cfg(feature = "testing")]
#[derive(Debug, Clone, Default)]
pub struct FailingDisk(Arc<std::sync::atomic::AtomicBool>);

#[cfg(feature = "testing")]
impl FailingDisk {
    pub fn fail(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The id of the last log entry once known (the outer `None` after a truncation or purge, until
/// it is read again).
type KnownLastLogId<NID> = Arc<Mutex<Option<Option<LogId<NID>>>>>;

/// Encoded bytes of the entries a [`LogStore`] and its clones appended since it was made.
#[derive(Debug, Clone, Default)]
pub struct Appended(Arc<AtomicU64>);

impl Appended {
    /// The bytes counted so far.
    pub fn bytes(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self, bytes: usize) {
        self.0.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// Who hears that an append is durable.
enum Done<C: RaftTypeConfig> {
    /// openraft's callback.
    Raft(LogFlushed<C>),
    /// A test's, for an append the caller does not wait for (as openraft's leader does).
    #[cfg(any(test, feature = "testing"))]
    Test(Box<dyn FnOnce(io::Result<()>) + Send>),
}

impl<C: RaftTypeConfig> Done<C> {
    /// Whether the caller waits for this append's flush (see [`LogFlushed::is_awaited`]).
    fn is_awaited(&self) -> bool {
        match self {
            Done::Raft(callback) => callback.is_awaited(),
            #[cfg(any(test, feature = "testing"))]
            Done::Test(_) => false,
        }
    }

    fn completed(self, result: io::Result<()>) {
        match self {
            Done::Raft(callback) => callback.log_io_completed(result),
            #[cfg(any(test, feature = "testing"))]
            Done::Test(done) => done(result),
        }
    }
}

/// Work for the sync thread.
enum Flush<C: RaftTypeConfig> {
    /// An append waiting for its segment files to reach the disk: the indexes of its first and
    /// last entries, the files, and who to tell.
    Append(Option<(u64, u64)>, Vec<Arc<dyn DiskFile>>, Done<C>),
    /// Answered once every append queued before it is durable.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

/// Logs that an append's entries (their first and last index) reached `stage`, for
/// `scripts/latency`'s timeline.
fn trace_stage(stage: &'static str, entries: Option<(u64, u64)>) {
    if let Some((first, last)) = entries {
        tracing::trace!(target: "raftq::stage", stage, first, last);
    }
}

/// fsyncs the data of each of `files` once.
fn sync_files(files: &[Arc<dyn DiskFile>]) -> io::Result<()> {
    let mut synced: Vec<&Arc<dyn DiskFile>> = Vec::with_capacity(files.len());
    for file in files {
        if !synced.iter().any(|f| Arc::ptr_eq(f, file)) {
            file.sync_data()?;
            synced.push(file);
        }
    }
    Ok(())
}

/// The sync thread (or task, see [`Work`]): one fsync of the files written by every append that
/// queued while the previous one ran, then each append's callback, in order, and the barriers.
fn spawn_syncer<C: RaftTypeConfig>(
    durability: Arc<Durability>,
    work: Work,
) -> io::Result<UnboundedSender<Flush<C>>> {
    let (tx, mut rx) = unbounded_channel::<Flush<C>>();
    match work {
        Work::Threads => {
            std::thread::Builder::new()
                .name("raftq-log-sync".into())
                .spawn(move || {
                    while let Some(first) = rx.blocking_recv() {
                        sync_queued(&durability, queued_after(first, &mut rx));
                    }
                })?;
        }
        Work::Tasks { fsync } => {
            let runtime = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
            runtime.spawn(async move {
                while let Some(first) = rx.recv().await {
                    // The disk takes its time; what is written meanwhile rides on this sync.
                    tokio::time::sleep(fsync).await;
                    sync_queued(&durability, queued_after(first, &mut rx));
                }
            });
        }
    }
    Ok(tx)
}

/// `first` and everything queued behind it by now.
fn queued_after<C: RaftTypeConfig>(
    first: Flush<C>,
    rx: &mut UnboundedReceiver<Flush<C>>,
) -> Vec<Flush<C>> {
    let mut waiting = vec![first];
    while let Ok(more) = rx.try_recv() {
        waiting.push(more);
    }
    waiting
}

/// Syncs the files of every append in `waiting` once, raises the synced mark past them, then
/// tells each append (in the order they came) and answers the barriers. Once an fsync failed,
/// every later append hears of the failure too.
fn sync_queued<C: RaftTypeConfig>(durability: &Durability, waiting: Vec<Flush<C>>) {
    let mut files: Vec<Arc<dyn DiskFile>> = Vec::new();
    let mut end = None;
    for flush in &waiting {
        if let Flush::Append(entries, written, _) = flush {
            files.extend(written.iter().cloned());
            end = entries.map(|(_, last)| last + 1).or(end);
        }
    }
    let synced = durability.check().and_then(|()| sync_files(&files));
    match &synced {
        Ok(()) => end.into_iter().for_each(|end| durability.synced.raise(end)),
        Err(error) => durability.fail(error),
    }
    debug_assert!(
        synced.is_err() || end.is_none_or(|end| durability.synced.get() >= end),
        "an append is reported durable only once the synced mark covers it"
    );
    let synced = synced.map_err(|e| e.to_string());
    let mut told: Option<u64> = None;
    for flush in waiting {
        match flush {
            Flush::Append(entries, _, callback) => {
                if let Some((first, last)) = entries {
                    debug_assert!(told.is_none_or(|t| first > t), "callbacks in append order");
                    told = Some(last);
                }
                trace_stage("synced", entries);
                callback.completed(synced.clone().map_err(io::Error::other));
                let queued = durability.queued.fetch_sub(1, Ordering::SeqCst);
                debug_assert!(
                    queued > 0,
                    "each callback told was counted when its append queued"
                );
            }
            Flush::Barrier(done) => {
                let _ = done.send(());
            }
        }
    }
}

impl<C: RaftTypeConfig> Clone for LogStore<C> {
    fn clone(&self) -> Self {
        Self {
            db: Arc::clone(&self.db),
            disk: Arc::clone(&self.disk),
            meta_cf: Arc::clone(&self.meta_cf),
            segments: Arc::clone(&self.segments),
            syncer: self.syncer.clone(),
            work: self.work,
            recent: Arc::clone(&self.recent),
            last: Arc::clone(&self.last),
            appended: self.appended.clone(),
            durability: Arc::clone(&self.durability),
            room: self.room.clone(),
            #[cfg(feature = "testing")]
            failing: self.failing.clone(),
            _c: PhantomData,
        }
    }
}

impl<C: RaftTypeConfig> Debug for LogStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore")
            .field("db", &self.db.path())
            .field("meta_cf", &self.meta_cf)
            .finish()
    }
}

impl<C: RaftTypeConfig> LogStore<C>
where
    C::Entry: Clone,
{
    /// Opens the log store: entries in segment files under `dir` (created when missing), the
    /// rest in `db`'s column family `meta_cf`. Entries a directory from before segment files
    /// holds in [`LOGS_CF`] are moved into segments first.
    pub fn open(db: Arc<DB>, meta_cf: &str, dir: &Path) -> Result<Self, LogStoreError> {
        Self::open_on(db, meta_cf, dir, &LogOptions::default())
    }

    /// Opens the log store as [`LogStore::open`] does, with its segments kept as `options`
    /// say: on another disk, of another size.
    pub fn open_on(
        db: Arc<DB>,
        meta_cf: &str,
        dir: &Path,
        options: &LogOptions,
    ) -> Result<Self, LogStoreError> {
        if db.cf_handle(meta_cf).is_none() {
            return Err(MissingColumnFamily(meta_cf.to_owned()).into());
        }
        let purged: Option<LogId<C::NodeId>> =
            read_meta(&db, meta_cf, KEY_LAST_PURGED).map_err(LogStoreError::Meta)?;
        let mut segments = Segments::open(options, dir, purged.map(|p| p.index))?;
        pair_segments(&db, options.disk.as_ref(), meta_cf, dir, &segments)?;
        move_rocks_entries(&db, &mut segments)?;
        let durability = Arc::new(Durability {
            synced: segments.synced_mark(),
            ..Durability::default()
        });
        let segments = Arc::new(Mutex::new(segments));
        Ok(Self {
            syncer: spawn_syncer(Arc::clone(&durability), options.work)?,
            work: options.work,
            durability,
            room: LogRoom {
                segments: Arc::clone(&segments),
                waiting: Arc::default(),
                waits: Arc::default(),
            },
            segments,
            recent: Arc::new(Mutex::new(Recent::new(RECENT_BYTES))),
            last: Arc::default(),
            appended: Appended::default(),
            #[cfg(feature = "testing")]
            failing: FailingDisk::default(),
            db,
            disk: Arc::clone(&options.disk),
            meta_cf: meta_cf.into(),
            _c: PhantomData,
        })
    }

    /// The switch that makes this store's writes fail.
    #[cfg(feature = "testing")]
    pub fn failing_disk(&self) -> FailingDisk {
        self.failing.clone()
    }

    /// Fails once a write of the log failed, or when the test switch says the disk fails.
    fn disk_check(&self) -> Result<(), io::Error> {
        #[cfg(feature = "testing")]
        if self.failing.0.load(Ordering::Relaxed) {
            return Err(io::Error::other("the disk fails (test switch)"));
        }
        self.durability.check()
    }

    /// `result`, noting a failure as the log's: the store takes no more writes.
    fn noted<T, E: fmt::Display>(&self, result: Result<T, E>) -> Result<T, E> {
        if let Err(error) = &result {
            self.durability.fail(error);
        }
        result
    }

    /// The count of bytes appended, shared with this store.
    pub fn appended(&self) -> Appended {
        self.appended.clone()
    }

    /// How the log stands for room on its disk, shared with this store.
    pub fn room(&self) -> LogRoom {
        self.room.clone()
    }

    fn meta(&self) -> Result<Arc<BoundColumnFamily<'_>>, AnyError> {
        self.db
            .cf_handle(&self.meta_cf)
            .ok_or_else(|| AnyError::new(&MissingColumnFamily(self.meta_cf.to_string())))
    }

    fn get_meta<T: DeserializeOwned>(&self, key: &[u8]) -> Result<Option<T>, AnyError> {
        read_meta(&self.db, &self.meta_cf, key)
    }

    fn meta_batch<T: Serialize>(&self, key: &[u8], value: &T) -> Result<WriteBatch, AnyError> {
        let bytes = to_vec(value).map_err(|e| AnyError::new(&e))?;
        let mut batch = WriteBatch::default();
        batch.put_cf(&self.meta()?, key, bytes);
        Ok(batch)
    }

    /// Writes `batch` with `sync = true`, on the blocking pool (see [`Work`]).
    async fn write_synced(&self, batch: WriteBatch) -> Result<(), AnyError> {
        self.disk_check().map_err(|e| AnyError::new(&e))?;
        let db = Arc::clone(&self.db);
        let written = self
            .work
            .blocking(move || write_synced_now(&db, batch))
            .await
            .map_err(|e| AnyError::new(&e))?
            .map_err(|e| AnyError::new(&e));
        self.noted(written)
    }

    /// Runs `work` on the segments, on the blocking pool (see [`Work`]).
    async fn on_segments<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Segments) -> io::Result<T> + Send + 'static,
    ) -> Result<T, AnyError> {
        self.disk_check().map_err(|e| AnyError::new(&e))?;
        let segments = Arc::clone(&self.segments);
        let done = self
            .work
            .blocking(move || work(&mut segments.lock().unwrap_or_else(PoisonError::into_inner)))
            .await
            .map_err(|e| AnyError::new(&e))?
            .map_err(|e| AnyError::new(&e));
        self.noted(done)
    }

    /// Waits until every append handed to the sync thread so far is durable; an error when
    /// one of them, or any earlier write of the log, failed.
    async fn appends_synced(&self) -> Result<(), AnyError> {
        self.disk_check().map_err(|e| AnyError::new(&e))?;
        if self.durability.queued.load(Ordering::SeqCst) > 0 {
            let (done, synced) = tokio::sync::oneshot::channel();
            self.syncer
                .send(Flush::Barrier(done))
                .map_err(|_| AnyError::error("the log's sync thread stopped"))?;
            synced
                .await
                .map_err(|_| AnyError::error("the log's sync thread stopped"))?;
            self.disk_check().map_err(|e| AnyError::new(&e))?;
        }
        let synced = self.durability.synced.get();
        debug_assert!(
            self.segments().last().is_none_or(|last| last < synced),
            "every entry appended is durable before a vote or truncation is written"
        );
        Ok(())
    }

    fn segments(&self) -> MutexGuard<'_, Segments> {
        self.segments.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether this store holds any Raft state: a log entry, a vote or a purge marker. A node
    /// that held some and now holds none lost its data directory.
    pub fn holds_raft_state(&self) -> Result<bool, AnyError> {
        if self.segments().last().is_some() {
            return Ok(true);
        }
        for key in [KEY_VOTE, KEY_LAST_PURGED] {
            if self
                .db
                .get_pinned_cf(&self.meta()?, key)
                .map_err(|e| AnyError::new(&e))?
                .is_some()
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The id of the last entry purged from the log (none before the first purge).
    pub fn last_purged(&self) -> Result<Option<LogId<C::NodeId>>, AnyError> {
        self.get_meta(KEY_LAST_PURGED)
    }

    /// The id of the last entry in the log (the last purged one when every entry was purged):
    /// what a candidate's log is compared with. Kept in memory as entries are appended.
    pub fn last_log_id_now(&self) -> Result<Option<LogId<C::NodeId>>, AnyError> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = &*last {
            return Ok(known.clone());
        }
        let found = match self.last_log_id()? {
            Some(log_id) => Some(log_id),
            None => self.get_meta(KEY_LAST_PURGED)?,
        };
        *last = Some(found.clone());
        Ok(found)
    }

    fn forget_last(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// This node's enrolment in its cluster (the default before one was saved).
    pub fn enrolment(&self) -> Result<Enrolment, AnyError> {
        Ok(self.get_meta(KEY_ENROLMENT)?.unwrap_or_default())
    }

    /// Saves this node's enrolment, synced to disk before it returns.
    pub async fn save_enrolment(&self, enrolment: &Enrolment) -> Result<(), AnyError> {
        self.write_synced(self.meta_batch(KEY_ENROLMENT, enrolment)?)
            .await
    }

    fn decode_entry(index: u64, bytes: &[u8]) -> Result<C::Entry, AnyError> {
        let entry: C::Entry = postcard::from_bytes(bytes).map_err(|e| AnyError::new(&e))?;
        let found = entry.get_log_id().index;
        if found != index {
            return Err(AnyError::error(format!(
                "log entry {found} stored as entry {index}"
            )));
        }
        Ok(entry)
    }

    /// The cache of the entries appended last. A panic while it was held may have left it
    /// half-updated: it is emptied then, and reads go to the segments until appends refill it.
    fn recent(&self) -> MutexGuard<'_, Recent<C::Entry>> {
        self.recent.lock().unwrap_or_else(|poisoned| {
            let mut recent = poisoned.into_inner();
            recent.truncate(0);
            recent
        })
    }

    fn read_entries<RB: RangeBounds<u64>>(&self, range: RB) -> Result<Vec<C::Entry>, AnyError> {
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => match i.checked_add(1) {
                Some(i) => i,
                None => return Ok(Vec::new()),
            },
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => i.checked_add(1),
            Bound::Excluded(&i) => Some(i),
            Bound::Unbounded => None,
        };
        // Cloned out of the lock: appends wait only for the handles to be copied.
        let cached = end.and_then(|end| self.recent().get(start, end));
        if let Some(entries) = cached {
            return Ok(entries.iter().map(|e| C::Entry::clone(e)).collect());
        }
        let stored = self
            .segments()
            .read(start, end.unwrap_or(u64::MAX))
            .map_err(|e| AnyError::new(&e))?;
        stored
            .iter()
            .map(|(index, bytes)| Self::decode_entry(*index, bytes))
            .collect()
    }

    fn last_log_id(&self) -> Result<Option<LogId<C::NodeId>>, AnyError> {
        let Some(last) = self.segments().last() else {
            return Ok(None);
        };
        Ok(self
            .read_entries(last..=last)?
            .first()
            .map(|entry| entry.get_log_id().clone()))
    }

    /// Appends `entries` (see [`RaftLogStorage::append`]), telling `callback` once they are
    /// durable.
    async fn append_done<I>(&mut self, entries: I, callback: Done<C>) -> io::Result<()>
    where
        I: IntoIterator<Item = C::Entry>,
    {
        let mut decoded = Vec::new();
        let mut encoded: Vec<(u64, Vec<u8>)> = Vec::new();
        for entry in entries {
            let value = to_vec(&entry).map_err(io::Error::other)?;
            encoded.push((entry.get_log_id().index, value));
            decoded.push(entry);
        }
        debug_assert!(
            encoded.windows(2).all(|w| w[1].0 == w[0].0 + 1),
            "an append's entries follow each other"
        );
        let entries =
            (encoded.first().zip(encoded.last())).map(|((first, _), (last, _))| (*first, *last));
        // An append the Raft core waits for syncs here, unless appends the core did not wait for
        // (of its time as leader) are still with the sync thread: their callbacks come first.
        let in_place = callback.is_awaited() && self.durability.queued.load(Ordering::SeqCst) == 0;
        let files = match self.write_entries(&encoded, in_place).await {
            Ok(files) => files,
            Err(e) => {
                callback.completed(Err(io::Error::other(e.to_string())));
                return Err(e);
            }
        };
        trace_stage("appended", entries);
        self.remember(decoded, &encoded);
        if in_place {
            debug_assert!(
                entries.is_none_or(|(_, last)| self.durability.synced.get() > last),
                "an append is reported durable only once the synced mark covers it"
            );
            trace_stage("synced", entries);
            callback.completed(Ok(()));
            return Ok(());
        }
        self.durability.queued.fetch_add(1, Ordering::SeqCst);
        if let Err(SendError(Flush::Append(_, _, callback))) =
            self.syncer.send(Flush::Append(entries, files, callback))
        {
            let queued = self.durability.queued.fetch_sub(1, Ordering::SeqCst);
            debug_assert!(queued > 0, "the append that failed to queue was counted");
            callback.completed(Err(io::Error::other("the log's sync thread stopped")));
        }
        Ok(())
    }

    /// Writes `encoded` into the segments, readable at once; durable once the files returned
    /// are synced, which `in_place` does here (raising the synced mark past them), else the
    /// sync thread. An append that needs a new segment the disk has no room for waits until
    /// there is (see [`LogStore::wait_for_room`]); any other failure stops the store's writes.
    async fn write_entries(
        &self,
        encoded: &[(u64, Vec<u8>)],
        in_place: bool,
    ) -> io::Result<Vec<Arc<dyn DiskFile>>> {
        let mut files: Vec<Arc<dyn DiskFile>> = Vec::new();
        let mut done = 0;
        let mut waited: Option<(tokio::time::Instant, Duration)> = None;
        loop {
            self.noted(self.disk_check())?;
            let written = self.segments().append_until_full(&encoded[done..]);
            let written = self.noted(written)?;
            for file in written.files {
                if !files.iter().any(|f| Arc::ptr_eq(f, &file)) {
                    files.push(file);
                }
            }
            done += written.count;
            if done == encoded.len() {
                break;
            }
            waited = Some(self.wait_for_room(encoded[done].0, waited).await);
        }
        if let Some((since, _)) = waited {
            self.room.waiting.store(false, Ordering::Relaxed);
            tracing::info!(
                waited_ms = since.elapsed().as_millis() as u64,
                "the log has room again: appends go on"
            );
        }
        debug_assert_eq!(
            done,
            encoded.len(),
            "every entry is written before the append returns"
        );
        if in_place {
            self.noted(sync_files(&files))?;
            if let Some((last, _)) = encoded.last() {
                self.durability.synced.raise(last + 1);
            }
        }
        Ok(files)
    }

    /// Waits before the next try of an append stopped at entry `index` for want of room for a
    /// new segment: the first wait (`waited` none) is logged and counted, and each pause doubles
    /// from [`ROOM_WAIT_FIRST`] to [`ROOM_WAIT_MAX`]. Returns when the wait began and the pause
    /// it took.
    async fn wait_for_room(
        &self,
        index: u64,
        waited: Option<(tokio::time::Instant, Duration)>,
    ) -> (tokio::time::Instant, Duration) {
        let (since, pause) = match waited {
            Some((since, pause)) => (since, (pause * 2).min(ROOM_WAIT_MAX)),
            None => {
                self.room.waiting.store(true, Ordering::Relaxed);
                self.room.waits.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    index,
                    "the log's disk has no room for a new segment: appends wait until space is freed"
                );
                (tokio::time::Instant::now(), ROOM_WAIT_FIRST)
            }
        };
        tokio::time::sleep(pause).await;
        (since, pause)
    }

    /// Keeps appended entries in the cache of recent ones, counts their bytes and notes the
    /// last one's id.
    fn remember(&self, decoded: Vec<C::Entry>, encoded: &[(u64, Vec<u8>)]) {
        debug_assert_eq!(
            decoded.len(),
            encoded.len(),
            "each entry kept goes with its own encoding, or the cache counts wrong bytes"
        );
        let last = decoded.last().map(|entry| entry.get_log_id().clone());
        let mut recent = self.recent();
        for (entry, (index, value)) in decoded.into_iter().zip(encoded) {
            self.appended.add(value.len());
            recent.push(*index, entry, value.len());
        }
        drop(recent);
        if let Some(last) = last {
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(Some(last));
        }
    }

    /// Appends `entries` as openraft's leader does: this returns once they are written, and
    /// `done` hears from the sync thread once they are durable.
    #[cfg(any(test, feature = "testing"))]
    pub async fn append_as_leader(
        &mut self,
        entries: impl IntoIterator<Item = C::Entry>,
        done: impl FnOnce(io::Result<()>) + Send + 'static,
    ) -> io::Result<()> {
        self.append_done(entries, Done::Test(Box::new(done))).await
    }
}

/// Reads the postcard value at `key` of `db`'s column family `cf`.
fn read_meta<T: DeserializeOwned>(db: &DB, cf: &str, key: &[u8]) -> Result<Option<T>, AnyError> {
    let handle = db
        .cf_handle(cf)
        .ok_or_else(|| AnyError::new(&MissingColumnFamily(cf.to_owned())))?;
    let Some(bytes) = db
        .get_pinned_cf(&handle, key)
        .map_err(|e| AnyError::new(&e))?
    else {
        return Ok(None);
    };
    postcard::from_bytes(&bytes)
        .map(Some)
        .map_err(|e| AnyError::new(&e))
}

/// Checks that the segments in `dir` and the meta family of `db` belong together: both record
/// the same id, written to the segments' directory first and then to the database when neither
/// has one (a new node, or a directory from before segment files). One half of a node's log
/// without the other is refused: a node without its segments lost acknowledged entries, and a
/// node whose database is new lost its vote.
fn pair_segments(
    db: &DB,
    disk: &dyn Disk,
    meta_cf: &str,
    dir: &Path,
    segments: &Segments,
) -> Result<(), LogStoreError> {
    let recorded: Option<Uuid> =
        read_meta(db, meta_cf, KEY_SEGMENTS_ID).map_err(LogStoreError::Meta)?;
    let path = dir.join(SEGMENTS_ID_FILE);
    let found = disk::read_file(disk, &path)?.and_then(|bytes| Uuid::from_slice(&bytes).ok());
    let id = match (recorded, found) {
        (Some(recorded), Some(found)) if recorded == found => return Ok(()),
        (Some(_), _) => return Err(LogStoreError::SegmentsLost(dir.to_path_buf())),
        (None, Some(_)) if segments.last().is_some() => {
            return Err(LogStoreError::DatabaseLost(dir.to_path_buf()))
        }
        // Written to the directory before a crash kept it from the database.
        (None, Some(found)) => found,
        (None, None) => {
            let id = crate::random::uuid();
            let file = disk.open(&path, Open::Create)?;
            file.write_all_at(id.as_bytes(), 0)?;
            file.sync_all()?;
            disk.sync_dir(dir)?;
            id
        }
    };
    let bytes = to_vec(&id).map_err(|e| LogStoreError::Meta(AnyError::new(&e)))?;
    let handle = db
        .cf_handle(meta_cf)
        .ok_or_else(|| MissingColumnFamily(meta_cf.to_owned()))?;
    let mut batch = WriteBatch::default();
    batch.put_cf(&handle, KEY_SEGMENTS_ID, bytes);
    Ok(write_synced_now(db, batch)?)
}

/// Moves the entries `db` holds in [`LOGS_CF`] (keyed by big-endian index) into `segments`,
/// synced, then deletes them there. Entries the segments already hold are not written twice,
/// so a move cut short by a crash goes on at the next start.
fn move_rocks_entries(db: &DB, segments: &mut Segments) -> Result<(), MoveError> {
    let Some(logs) = db.cf_handle(LOGS_CF) else {
        return Ok(());
    };
    let mut found = 0usize;
    let mut previous: Option<u64> = None;
    let mut batch: Vec<(u64, Vec<u8>)> = Vec::with_capacity(MOVE_BATCH);
    let mut rows = db.iterator_cf(&logs, IteratorMode::Start).peekable();
    while let Some(row) = rows.next() {
        let (key, value) = row?;
        let index = <[u8; 8]>::try_from(&key[..])
            .map(u64::from_be_bytes)
            .map_err(|_| MoveError::Key(key.len()))?;
        debug_assert!(
            previous.is_none_or(|before| index > before),
            "the logs family's keys are big-endian indexes, read in ascending order"
        );
        previous = Some(index);
        found += 1;
        if segments.last().is_none_or(|last| index > last) {
            batch.push((index, value.to_vec()));
        }
        if let Some((last, _)) = batch
            .last()
            .filter(|_| batch.len() == MOVE_BATCH || rows.peek().is_none())
        {
            let last = *last;
            sync_files(&segments.append(&batch)?)?;
            segments.synced_mark().raise(last + 1);
            batch.clear();
        }
    }
    if found == 0 {
        return Ok(());
    }
    tracing::info!(
        entries = found,
        "moved the log's entries into segment files"
    );
    let mut delete = WriteBatch::default();
    delete.delete_range_cf(&logs, &[0u8; 8][..], &[0xffu8; 9][..]);
    Ok(write_synced_now(db, delete)?)
}

/// Writes `batch` to `db` with `sync = true`, on the calling thread.
fn write_synced_now(db: &DB, batch: WriteBatch) -> Result<(), rocksdb::Error> {
    let mut synced = WriteOptions::default();
    synced.set_sync(true);
    db.write_opt(batch, &synced)
}

impl<C: RaftTypeConfig> RaftLogReader<C> for LogStore<C>
where
    C::Entry: Clone,
{
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        Ok(self
            .read_entries(range)
            .map_err(StorageIOError::read_logs)?)
    }
}

impl<C: RaftTypeConfig> RaftLogStorage<C> for LogStore<C>
where
    C::Entry: Clone,
{
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        let last_purged_log_id: Option<LogId<C::NodeId>> = self
            .get_meta(KEY_LAST_PURGED)
            .map_err(StorageIOError::read_logs)?;
        // With every entry purged, the last log id is the last purged one.
        let last_log_id = match self.last_log_id().map_err(StorageIOError::read_logs)? {
            Some(log_id) => Some(log_id),
            None => last_purged_log_id.clone(),
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        if cfg!(debug_assertions) {
            let saved: Option<Vote<C::NodeId>> = self.get_meta(KEY_VOTE).unwrap_or_default();
            debug_assert!(
                saved
                    .as_ref()
                    .is_none_or(|saved| vote.partial_cmp(saved) != Some(Less)),
                "a vote never goes back: {saved:?} then {vote}"
            );
        }
        let batch = self
            .meta_batch(KEY_VOTE, vote)
            .map_err(StorageIOError::write_vote)?;
        self.appends_synced()
            .await
            .map_err(StorageIOError::write_vote)?;
        self.write_synced(batch)
            .await
            .map_err(StorageIOError::write_vote)?;
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.get_meta(KEY_VOTE).map_err(StorageIOError::read_vote)?)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        let batch = self
            .meta_batch(KEY_COMMITTED, &committed)
            .map_err(StorageIOError::write)?;
        self.db
            .write(batch)
            .map_err(|e| StorageIOError::write(&e))?;
        Ok(())
    }

    /// The committed log id saved last, or the last entry held when that is earlier: a crash
    /// may take entries whose fsync had not finished while a later commit index was saved.
    async fn read_committed(
        &mut self,
    ) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        let committed: Option<Option<LogId<C::NodeId>>> =
            self.get_meta(KEY_COMMITTED).map_err(StorageIOError::read)?;
        let last = self.last_log_id_now().map_err(StorageIOError::read)?;
        Ok(committed.flatten().min(last))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<C>,
    ) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.append_done(entries, Done::Raft(callback))
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        tracing::debug!(%log_id, "truncating raft log from (inclusive)");
        if cfg!(debug_assertions) {
            let purged: Option<LogId<C::NodeId>> =
                self.get_meta(KEY_LAST_PURGED).unwrap_or_default();
            debug_assert!(
                purged.is_none_or(|purged| purged.index < log_id.index),
                "a truncation never reaches purged entries, which were committed"
            );
        }
        self.appends_synced()
            .await
            .map_err(StorageIOError::write_logs)?;
        self.recent().truncate(log_id.index);
        let index = log_id.index;
        self.on_segments(move |segments| segments.truncate(index))
            .await
            .map_err(StorageIOError::write_logs)?;
        self.forget_last();
        debug_assert!(
            self.segments().last().is_none_or(|last| last < index),
            "a truncation leaves no entry from its index on"
        );
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        tracing::debug!(%log_id, "purging raft log up to (inclusive)");
        tracing::trace!(target: "raftq::stage", stage = "purge", index = log_id.index);
        if cfg!(debug_assertions) {
            let purged: Option<LogId<C::NodeId>> =
                self.get_meta(KEY_LAST_PURGED).unwrap_or_default();
            debug_assert!(
                purged.is_none_or(|purged| purged.index <= log_id.index),
                "a purge never goes back: the entries purged before are gone"
            );
        }
        let batch = self
            .meta_batch(KEY_LAST_PURGED, &log_id)
            .map_err(StorageIOError::write_logs)?;
        self.write_synced(batch)
            .await
            .map_err(StorageIOError::write_logs)?;
        self.recent().purge(log_id.index);
        let index = log_id.index;
        let removable = self
            .on_segments(move |segments| segments.purge(index))
            .await
            .map_err(StorageIOError::write_logs)?;
        // Apart, not awaited: the purge is durable already (its id is synced above).
        let disk = Arc::clone(&self.disk);
        self.work
            .detached(move || remove_purged(disk.as_ref(), &removable));
        self.forget_last();
        tracing::trace!(target: "raftq::stage", stage = "purged", index = log_id.index);
        Ok(())
    }
}
