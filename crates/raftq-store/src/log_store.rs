//! Raft log storage on RocksDB: openraft's [`RaftLogStorage`] and [`RaftLogReader`]
//! (storage-v2 API) for any [`RaftTypeConfig`].
//!
//! Layout: two column families in a caller-opened [`DB`].
//! - the *logs* family maps a log index, as a big-endian `u64` key (so that key order is index
//!   order), to the postcard encoding of the entry;
//! - the *meta* family holds the vote, the committed log id, the last purged log id and the
//!   node's [`Enrolment`] in its cluster, each postcard-encoded.
//!
//! Durability policy:
//! - [`save_vote`](RaftLogStorage::save_vote) and [`truncate`](RaftLogStorage::truncate) are
//!   written with `sync = true` (the WAL is fsynced) before they return.
//! - [`append`](RaftLogStorage::append) writes its entries in one [`WriteBatch`]. A leader's
//!   own append, which the Raft core does not wait for, is readable at once, and the append
//!   hands its [`LogFlushed`] callback to a sync thread, which fsyncs the WAL once for every
//!   append queued meanwhile and only then calls the callbacks, in order: openraft counts an
//!   entry durable (acknowledges it, counts it towards a commit) only after its fsync, while the
//!   leader goes on replicating instead of waiting for the disk. The core waits for every other
//!   append's flush (a follower's: it answers its leader only once its copy is durable), so
//!   those write the batch with the fsync in the append itself and call the callback there: the
//!   same fsync, without waking the sync thread and being woken by it.
//! - [`purge`](RaftLogStorage::purge) and [`save_committed`](RaftLogStorage::save_committed) are
//!   written without their own fsync. Losing them in a crash is harmless (purged entries come
//!   back, or fewer committed entries are re-applied at startup), and since the WAL is written in
//!   order, the next synced write makes them durable too. `purge` records the last purged log id
//!   and deletes the entries in one atomic batch.
//!
//! The vote's and a truncation's synced writes run on tokio's blocking pool so that their fsync
//! does not stall a runtime worker. An append the core waits for is the exception above: it
//! stalls the worker that runs the core, which has nothing else to do meanwhile, for one fsync;
//! the other workers go on.
//!
//! The entries appended last are also kept decoded in memory (see `recent`), up to
//! [`RECENT_BYTES`] of encoded entries: replication and apply read them from there.
//!
//! The store counts the encoded bytes of every entry appended since it was made
//! ([`RocksLogStore::appended`]): the snapshot policy weighs the log's growth against the size of
//! the snapshot that would let it go.

use std::fmt;
use std::fmt::Debug;
use std::io;
use std::marker::PhantomData;
use std::ops::Bound;
use std::ops::RangeBounds;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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
use rocksdb::ColumnFamily;
use rocksdb::ColumnFamilyDescriptor;
use rocksdb::DBCompressionType;
use rocksdb::Direction;
use rocksdb::IteratorMode;
use rocksdb::Options;
use rocksdb::ReadOptions;
use rocksdb::WriteBatch;
use rocksdb::WriteOptions;
use rocksdb::DB;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::recent::Recent;

/// Default name of the column family holding log entries.
pub const LOGS_CF: &str = "raft_logs";
/// Default name of the column family holding the vote, committed and last purged log ids.
pub const META_CF: &str = "raft_meta";

/// Encoded bytes of the entries appended last that are kept decoded in memory: several entries
/// in flight at group commit's largest entries.
pub const RECENT_BYTES: usize = 16 * 1024 * 1024;

/// A write batch's bytes for one put besides its value, at most: record tag, column family id,
/// key and the varint lengths of both.
const BATCH_RECORD_BYTES: usize = 32;

const KEY_VOTE: &[u8] = b"vote";
const KEY_COMMITTED: &[u8] = b"committed";
const KEY_LAST_PURGED: &[u8] = b"last_purged_log_id";
const KEY_ENROLMENT: &[u8] = b"enrolment";

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

/// Descriptors of the column families [`RocksLogStore`] uses under their default names
/// [`LOGS_CF`] and [`META_CF`]; open the [`DB`] with them (plus any of your own).
///
/// Log entries live only until the next snapshot purges them, so the logs family spends as
/// little CPU on them as it can in between: they are not compressed, and they are kept in blob
/// files (RocksDB's integrated BlobDB) apart from the keys, so that compactions, which carry a
/// purge's range delete down the levels, move small keys and blob references instead of reading
/// and writing every entry again. A blob file is deleted once no key refers to it any more.
pub fn column_families() -> Vec<ColumnFamilyDescriptor> {
    let mut logs = Options::default();
    logs.set_compression_type(DBCompressionType::None);
    logs.set_enable_blob_files(true);
    logs.set_min_blob_size(0);
    vec![
        ColumnFamilyDescriptor::new(LOGS_CF, logs),
        ColumnFamilyDescriptor::new(META_CF, Options::default()),
    ]
}

/// [`RocksLogStore::new`] was given a column family name the [`DB`] was not opened with.
#[derive(Debug, thiserror::Error)]
#[error("RocksDB column family {0:?} not found")]
pub struct MissingColumnFamily(pub String);

/// Why a log store could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LogStoreError {
    #[error(transparent)]
    MissingColumnFamily(#[from] MissingColumnFamily),
    #[error("cannot start the WAL sync thread: {0}")]
    Thread(#[from] io::Error),
}

/// Raft log store on RocksDB. Cloning is cheap: clones share the same [`DB`].
pub struct RocksLogStore<C: RaftTypeConfig> {
    db: Arc<DB>,
    logs_cf: Arc<str>,
    meta_cf: Arc<str>,
    /// Appends waiting for the write-ahead log to reach the disk.
    syncer: std::sync::mpsc::Sender<Flush<C>>,
    /// The entries appended last, shared by every clone.
    recent: Arc<Mutex<Recent<C::Entry>>>,
    /// The id of the last entry, shared by every clone.
    last: KnownLastLogId<C::NodeId>,
    appended: Appended,
    /// Appends handed to the sync thread whose callbacks it has not called yet.
    queued: Arc<AtomicUsize>,
    #[cfg(feature = "testing")]
    failing: FailingDisk,
    _c: PhantomData<C>,
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

/// Encoded bytes of the entries a [`RocksLogStore`] and its clones appended since it was made.
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

/// An append waiting for the write-ahead log to reach the disk: the indexes of its first and last
/// entries, and openraft's callback.
type Flush<C> = (Option<(u64, u64)>, LogFlushed<C>);

/// Logs that an append's entries (their first and last index) reached `stage`, for
/// `scripts/latency`'s timeline.
fn trace_stage(stage: &'static str, entries: Option<(u64, u64)>) {
    if let Some((first, last)) = entries {
        tracing::trace!(target: "raftq::stage", stage, first, last);
    }
}

/// The WAL sync thread: one fsync for every append that queued while the previous one ran,
/// then each append's callback, in order.
fn spawn_syncer<C: RaftTypeConfig>(
    db: Arc<DB>,
    queued: Arc<AtomicUsize>,
) -> io::Result<std::sync::mpsc::Sender<Flush<C>>> {
    let (tx, rx) = std::sync::mpsc::channel::<Flush<C>>();
    // A weak handle: the thread must not keep the database open after the store is gone.
    let db = Arc::downgrade(&db);
    std::thread::Builder::new()
        .name("raftq-wal-sync".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut waiting = vec![first];
                waiting.extend(rx.try_iter());
                let synced = match db.upgrade() {
                    Some(db) => db.flush_wal(true).map_err(|e| e.to_string()),
                    None => Err("the database is closed".to_string()),
                };
                let done = waiting.len();
                for (entries, callback) in waiting {
                    trace_stage("synced", entries);
                    let result = synced.clone().map_err(io::Error::other);
                    callback.log_io_completed(result);
                }
                queued.fetch_sub(done, Ordering::SeqCst);
            }
        })?;
    Ok(tx)
}

impl<C: RaftTypeConfig> Clone for RocksLogStore<C> {
    fn clone(&self) -> Self {
        Self {
            db: Arc::clone(&self.db),
            logs_cf: Arc::clone(&self.logs_cf),
            meta_cf: Arc::clone(&self.meta_cf),
            syncer: self.syncer.clone(),
            recent: Arc::clone(&self.recent),
            last: Arc::clone(&self.last),
            appended: self.appended.clone(),
            queued: Arc::clone(&self.queued),
            #[cfg(feature = "testing")]
            failing: self.failing.clone(),
            _c: PhantomData,
        }
    }
}

impl<C: RaftTypeConfig> Debug for RocksLogStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RocksLogStore")
            .field("path", &self.db.path())
            .field("logs_cf", &self.logs_cf)
            .field("meta_cf", &self.meta_cf)
            .finish()
    }
}

impl<C: RaftTypeConfig> RocksLogStore<C>
where
    C::Entry: Clone,
{
    /// Creates a log store on `db`, which the caller opened with the column families named
    /// `logs_cf` and `meta_cf` (see [`column_families`] for the default ones).
    pub fn new(db: Arc<DB>, logs_cf: &str, meta_cf: &str) -> Result<Self, LogStoreError> {
        for name in [logs_cf, meta_cf] {
            if db.cf_handle(name).is_none() {
                return Err(MissingColumnFamily(name.to_owned()).into());
            }
        }
        let queued = Arc::new(AtomicUsize::new(0));
        Ok(Self {
            syncer: spawn_syncer(Arc::clone(&db), Arc::clone(&queued))?,
            queued,
            recent: Arc::new(Mutex::new(Recent::new(RECENT_BYTES))),
            last: Arc::default(),
            appended: Appended::default(),
            #[cfg(feature = "testing")]
            failing: FailingDisk::default(),
            db,
            logs_cf: logs_cf.into(),
            meta_cf: meta_cf.into(),
            _c: PhantomData,
        })
    }

    /// The switch that makes this store's writes fail.
    #[cfg(feature = "testing")]
    pub fn failing_disk(&self) -> FailingDisk {
        self.failing.clone()
    }

    /// Fails when the test switch says the disk fails.
    fn disk_check(&self) -> Result<(), io::Error> {
        #[cfg(feature = "testing")]
        if self.failing.0.load(Ordering::Relaxed) {
            return Err(io::Error::other("the disk fails (test switch)"));
        }
        Ok(())
    }

    /// The count of bytes appended, shared with this store.
    pub fn appended(&self) -> Appended {
        self.appended.clone()
    }

    fn cf(&self, name: &str) -> Result<&ColumnFamily, AnyError> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| AnyError::new(&MissingColumnFamily(name.to_owned())))
    }

    fn logs(&self) -> Result<&ColumnFamily, AnyError> {
        self.cf(&self.logs_cf)
    }

    fn meta(&self) -> Result<&ColumnFamily, AnyError> {
        self.cf(&self.meta_cf)
    }

    fn get_meta<T: DeserializeOwned>(&self, key: &[u8]) -> Result<Option<T>, AnyError> {
        let Some(bytes) = self
            .db
            .get_pinned_cf(self.meta()?, key)
            .map_err(|e| AnyError::new(&e))?
        else {
            return Ok(None);
        };
        postcard::from_bytes(&bytes)
            .map(Some)
            .map_err(|e| AnyError::new(&e))
    }

    fn meta_batch<T: Serialize>(&self, key: &[u8], value: &T) -> Result<WriteBatch, AnyError> {
        let bytes = to_vec(value).map_err(|e| AnyError::new(&e))?;
        let mut batch = WriteBatch::default();
        batch.put_cf(self.meta()?, key, bytes);
        Ok(batch)
    }

    /// Writes `batch` with `sync = true`, on the blocking pool.
    async fn write_synced(&self, batch: WriteBatch) -> Result<(), AnyError> {
        self.disk_check().map_err(|e| AnyError::new(&e))?;
        let db = Arc::clone(&self.db);
        tokio::task::spawn_blocking(move || {
            let mut opts = WriteOptions::default();
            opts.set_sync(true);
            db.write_opt(batch, &opts)
        })
        .await
        .map_err(|e| AnyError::new(&e))?
        .map_err(|e| AnyError::new(&e))
    }

    /// Whether this store holds any Raft state: a log entry, a vote or a purge marker. A node
    /// that held some and now holds none lost its data directory.
    pub fn holds_raft_state(&self) -> Result<bool, AnyError> {
        if let Some(kv) = self
            .db
            .iterator_cf(self.logs()?, IteratorMode::Start)
            .next()
        {
            kv.map_err(|e| AnyError::new(&e))?;
            return Ok(true);
        }
        for key in [KEY_VOTE, KEY_LAST_PURGED] {
            if self
                .db
                .get_pinned_cf(self.meta()?, key)
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

    fn decode_entry(key: &[u8], value: &[u8]) -> Result<C::Entry, AnyError> {
        let entry: C::Entry = postcard::from_bytes(value).map_err(|e| AnyError::new(&e))?;
        let index = entry.get_log_id().index;
        if key != index_key(index) {
            return Err(AnyError::error(format!(
                "log entry {index} stored under key {key:02x?}"
            )));
        }
        Ok(entry)
    }

    /// The cache of the entries appended last. A panic while it was held may have left it
    /// half-updated: it is emptied then, and reads go to RocksDB until appends refill it.
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
        let mut opts = ReadOptions::default();
        match range.end_bound() {
            Bound::Included(&i) => opts.set_iterate_upper_bound(key_after(i)),
            Bound::Excluded(&i) => opts.set_iterate_upper_bound(index_key(i)),
            Bound::Unbounded => {}
        }
        let start_key = index_key(start);
        let iter = self.db.iterator_cf_opt(
            self.logs()?,
            opts,
            IteratorMode::From(&start_key, Direction::Forward),
        );
        iter.map(|kv| {
            let (key, value) = kv.map_err(|e| AnyError::new(&e))?;
            Self::decode_entry(&key, &value)
        })
        .collect()
    }

    fn last_log_id(&self) -> Result<Option<LogId<C::NodeId>>, AnyError> {
        match self.db.iterator_cf(self.logs()?, IteratorMode::End).next() {
            None => Ok(None),
            Some(kv) => {
                let (key, value) = kv.map_err(|e| AnyError::new(&e))?;
                Ok(Some(Self::decode_entry(&key, &value)?.get_log_id().clone()))
            }
        }
    }
}

impl<C: RaftTypeConfig> RaftLogReader<C> for RocksLogStore<C>
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

impl<C: RaftTypeConfig> RaftLogStorage<C> for RocksLogStore<C>
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
        let batch = self
            .meta_batch(KEY_VOTE, vote)
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

    async fn read_committed(
        &mut self,
    ) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        let committed: Option<Option<LogId<C::NodeId>>> =
            self.get_meta(KEY_COMMITTED).map_err(StorageIOError::read)?;
        Ok(committed.flatten())
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
        let logs = self.logs().map_err(StorageIOError::write_logs)?;
        let mut encoded = Vec::new();
        for entry in entries {
            let value = to_vec(&entry).map_err(|e| StorageIOError::write_logs(&e))?;
            encoded.push((entry, value));
        }
        // Sized up front: the batch would otherwise grow by copying every entry written so far.
        let bytes = encoded
            .iter()
            .map(|(_, v)| v.len() + BATCH_RECORD_BYTES)
            .sum();
        let mut batch = WriteBatch::with_capacity_bytes(bytes);
        let mut written = Vec::with_capacity(encoded.len());
        let last = encoded.last().map(|(entry, _)| entry.get_log_id().clone());
        let entries = (encoded.first().zip(encoded.last()))
            .map(|((first, _), (last, _))| (first.get_log_id().index, last.get_log_id().index));
        for (entry, value) in encoded {
            let index = entry.get_log_id().index;
            batch.put_cf(logs, index_key(index), &value);
            written.push((index, entry, value.len()));
        }
        // An append the Raft core waits for syncs here, unless appends the core did not wait for
        // (of its time as leader) are still with the sync thread: their callbacks come first.
        let in_place = callback.is_awaited() && self.queued.load(Ordering::SeqCst) == 0;
        let mut options = WriteOptions::default();
        options.set_sync(in_place);
        // Readable at once; durable after this write when it synced, else once the sync thread
        // has flushed the write-ahead log, which is when openraft hears of it through the
        // callback.
        if let Err(e) = self.disk_check().and_then(|()| {
            self.db
                .write_opt(batch, &options)
                .map_err(|e| io::Error::other(e.to_string()))
        }) {
            callback.log_io_completed(Err(io::Error::other(e.to_string())));
            return Err(StorageIOError::write_logs(&e).into());
        }
        trace_stage("appended", entries);
        let mut recent = self.recent();
        for (index, entry, size) in written {
            self.appended.add(size);
            recent.push(index, entry, size);
        }
        drop(recent);
        if let Some(last) = last {
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(Some(last));
        }
        if in_place {
            trace_stage("synced", entries);
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        self.queued.fetch_add(1, Ordering::SeqCst);
        if let Err(std::sync::mpsc::SendError((_, callback))) =
            self.syncer.send((entries, callback))
        {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            callback.log_io_completed(Err(io::Error::other("the WAL sync thread stopped")));
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        tracing::debug!(%log_id, "truncating raft log from (inclusive)");
        let logs = self.logs().map_err(StorageIOError::write_logs)?;
        self.recent().truncate(log_id.index);
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(logs, &index_key(log_id.index)[..], &KEY_PAST_ALL[..]);
        self.write_synced(batch)
            .await
            .map_err(StorageIOError::write_logs)?;
        self.forget_last();
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        tracing::debug!(%log_id, "purging raft log up to (inclusive)");
        let mut batch = self
            .meta_batch(KEY_LAST_PURGED, &log_id)
            .map_err(StorageIOError::write_logs)?;
        let logs = self.logs().map_err(StorageIOError::write_logs)?;
        self.recent().purge(log_id.index);
        batch.delete_range_cf(logs, &index_key(0)[..], &key_after(log_id.index)[..]);
        self.db
            .write(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.forget_last();
        Ok(())
    }
}

/// Key of the entry at `index`: big-endian, so RocksDB's bytewise order is index order.
fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// The smallest key greater than `index_key(index)`: an exclusive bound that includes `index`,
/// even for `u64::MAX`.
fn key_after(index: u64) -> [u8; 9] {
    let mut key = [0; 9];
    key[..8].copy_from_slice(&index.to_be_bytes());
    key
}

/// A key greater than every entry key: the exclusive end of "everything from here on".
const KEY_PAST_ALL: [u8; 9] = [0xff; 9];
