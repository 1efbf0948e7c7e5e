//! # raftq-store
//!
//! raftq's durable Raft storage, split as openraft's storage-v2 wants it:
//! - [`log_store`]: the Raft log (entries, vote, committed index, purge marker). Every vote and
//!   every append is synced to disk before openraft is told it is done; one append call (a batch
//!   of entries) costs one fsync. The entries live in segment files (`segments`), the rest in
//!   RocksDB.
//! - [`state_machine`]: the engine applied to committed entries, with its rows, the message
//!   payloads, the last applied log id and the membership written in one atomic batch per apply.
//! - [`snapshot`]: snapshot files, streamed from one view of the state to disk and back.
//! - [`backup`]: the whole state at one applied index as a file, and a new cluster restored
//!   from one.
//! - [`types`]: the Raft type configuration both share.
//! - [`waiters`]: the parked receives of this node's clients, which applies answer.
//! - [`random`]: the random choices a node makes (openraft's election timeouts, new ids), which
//!   a simulation seeds.
//! - [`disk`]: the file layer the log's and the snapshots' files go through; with the `testing`
//!   feature, `crash_disk`, a recording one that builds the disks a power loss can leave.
//! - [`work`]: where the log's slow work runs, on threads of its own or, in a simulation, as
//!   tasks of the runtime.
//! - [`sync_times`]: how long the real disk's fsyncs of the log take, for the node's metrics.
//! - [`formats`]: the stored formats a data directory holds, recorded in it and checked first.
//! - [`layout`]: where each Raft group's column families and files live.
//!
//! The log's metadata and the state machine of every Raft group a node hosts live in one
//! RocksDB instance, opened with [`open_db`]; each group's storage opens from the node's
//! ([`NodeStore::open_group`]).

pub mod backup;
#[cfg(any(test, feature = "testing"))]
pub mod crash_disk;
#[cfg(test)]
mod crash_tests;
pub mod disk;
pub mod formats;
pub mod layout;
pub mod log_store;
pub mod random;
mod recent;
mod records;
mod segments;
pub mod snapshot;
#[cfg(test)]
mod snapshot_crash_tests;
mod snapshot_file;
mod state_digest;
pub mod state_machine;
mod stepped;
pub mod sync_times;
pub mod types;
pub mod waiters;
pub mod work;

pub use layout::{GroupDirs, GroupFamilies, META_CF, SM_META_CF, STATE_CF};
#[cfg(feature = "testing")]
pub use log_store::FailingDisk;
pub use log_store::{
    Appended, Enrolment, LogRoom, LogStore, LogStoreError, MissingColumnFamily, LOGS_CF,
};
pub use records::SegmentError;
pub use segments::LogOptions;
pub use snapshot_file::SnapshotFile;
pub use state_machine::{
    Awaited, AwaitedWrite, OpenError, PayloadView, RocksStateMachine, StateReader,
};
pub use types::{CommandGroup, Delivered, GroupId, NodeId, Response, TypeConfig};
pub use waiters::{WaitSlot, Waiters};
pub use work::Work;

/// The column families a raftq node's database opens with: the log's of a directory from
/// before segment files, group 1's, and every family `existing` names (those of the other
/// groups the node hosts, and any the database already has).
fn column_families(existing: Vec<String>) -> Vec<rocksdb::ColumnFamilyDescriptor> {
    let mut names: std::collections::BTreeSet<String> = existing.into_iter().collect();
    names.insert(LOGS_CF.to_string());
    names.extend(GroupFamilies::of(GroupId::FIRST).all().map(str::to_string));
    names
        .into_iter()
        .map(|name| rocksdb::ColumnFamilyDescriptor::new(name, rocksdb::Options::default()))
        .collect()
}

/// Opens (creating when missing) a raftq node's database at `path`, then reads every row of
/// every column family once (tables and blob files, checksums verified), so that a damaged file
/// is found before the node takes part in the cluster, not when a follower needs the entry.
///
/// Column families flush together (`atomic_flush`): the state machine writes without the
/// write-ahead log, so its rows and its applied marker must reach disk at one point.
///
/// The write-ahead log is recovered to the last record before the first one that fails its
/// checksum (see the comment at its mode below); a closed log file shorter than the manifest
/// recorded refuses to open.
pub fn open_db(
    path: &std::path::Path,
    state: &StateOptions,
) -> Result<std::sync::Arc<rocksdb::DB>, rocksdb::Error> {
    let mut options = rocksdb::Options::default();
    if !state.flush_on_close {
        // Read from an options string, as the crate has no setter of its own; first, since
        // the options it makes keep nothing set on `options` but its fields (the Env below).
        options = options.get_options_from_string("avoid_flush_during_shutdown=true")?;
    }
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    options.set_atomic_flush(true);
    options.increase_parallelism(2);
    options.set_bytes_per_sync(1 << 20);
    // Compactions run at a low CPU priority: seconds of CPU on a busy node, which would
    // otherwise take turns from the threads that append, replicate and apply.
    let mut env = rocksdb::Env::new()?;
    env.lower_thread_pool_cpu_priority();
    options.set_env(&env);
    // Which records of the write-ahead log a crash may tear: the database's only logged writes
    // are the log's metadata (vote, purge marker, enrolment, segments id: synced; the commit
    // index: not synced) and a snapshot's install and record (synced); the state machine's
    // applies skip the log. A synced write makes every record before it durable, so a record
    // that fails its checksum is followed only by records whose write had not returned: none
    // was acknowledged, and replay stops there (point in time). Torn records lie inside the file
    // length as often as at its end (the length and the data reach the disk apart), and the
    // modes that refuse a damaged record short of the end (`TolerateCorruptedTailRecords`,
    // `AbsoluteConsistency`) would refuse such a crash's database. What this mode cannot tell
    // apart is a synced record damaged later on the disk: it drops it and what follows, where
    // the checksums of the tables, the segments and snapshots still refuse damage.
    options.set_wal_recovery_mode(rocksdb::DBRecoveryMode::PointInTime);
    options.set_track_and_verify_wals_in_manifest(true);
    // Every group's families have memtables of their own; their sum is capped, so that a node
    // hosting many groups does not hold a write buffer's worth per family.
    let buffers = rocksdb::WriteBufferManager::new_write_buffer_manager(WRITE_BUFFERS_BYTES, false);
    options.set_write_buffer_manager(&buffers);
    // A new database has no families to list yet.
    let existing = rocksdb::DB::list_cf(&options, path).unwrap_or_default();
    let families = column_families(existing);
    let names: Vec<String> = families.iter().map(|f| f.name().to_string()).collect();
    let db = rocksdb::DB::open_cf_descriptors(&options, path, families)?;
    verify(&db, &names)?;
    Ok(std::sync::Arc::new(db))
}

/// The memtable bytes of every column family together.
const WRITE_BUFFERS_BYTES: usize = 256 << 20;

/// How a node's state store behaves when it closes.
#[derive(Debug, Clone)]
pub struct StateOptions {
    /// Whether closing the database writes out what the applies wrote. Applies skip the
    /// write-ahead log, so a database closed without it reopens at its last flush, as a killed
    /// process leaves it, and the node applies the log's entries since then again. Servers
    /// flush, so that a clean stop restarts without that work; a simulated crash does not,
    /// since a killed process cannot.
    pub flush_on_close: bool,
}

impl Default for StateOptions {
    fn default() -> StateOptions {
        StateOptions {
            flush_on_close: true,
        }
    }
}

/// Makes the names in `dir` (files created, renamed or removed) durable.
pub(crate) fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// A node's storage over one RocksDB instance: group 1's Raft log and state machine, the node's
/// store that opens the other groups', and a handle that tells when the database is closed.
pub struct Storage {
    pub log: LogStore<TypeConfig>,
    pub state_machine: RocksStateMachine,
    pub node: NodeStore,
    pub database: Database,
}

/// One Raft group's storage: its log and its state machine.
pub struct GroupStorage {
    pub log: LogStore<TypeConfig>,
    pub state_machine: RocksStateMachine,
}

/// A hold on a node's database, with which its owner closes it once nothing else holds it. The
/// database closes (and lets go of its `LOCK`) in the thread that drops its last hold, so only
/// a close made here tells when the directory can be opened again.
pub struct Database(std::sync::Arc<rocksdb::DB>);

impl Database {
    /// Closes the database now, when this is its last hold; gives the hold back otherwise.
    pub fn close(self) -> Result<(), Database> {
        std::sync::Arc::try_unwrap(self.0)
            .map(drop)
            .map_err(Database)
    }
}

impl NodeStore {
    /// Removes what this node holds of `group` (not group 1, which every node holds): its
    /// column families first, after which the group is not held ([`NodeStore::groups`]), then
    /// its directory. Only once nothing of the group is open any more (its Raft instance shut
    /// down, its storage dropped).
    pub fn drop_group(&self, group: GroupId) -> Result<(), StorageError> {
        if group == GroupId::FIRST {
            return Err(StorageError::FirstGroup);
        }
        for name in GroupFamilies::of(group).all() {
            if self.db.cf_handle(name).is_some() {
                self.db.drop_cf(name)?;
            }
        }
        remove_dir(&GroupDirs::of(&self.data_dir, group).base)
    }
}

/// Removes `dir` and what it holds, if it is there.
fn remove_dir(dir: &std::path::Path) -> Result<(), StorageError> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StorageError::Files(e)),
        _ => Ok(()),
    }
}

/// Why a node's storage could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("cannot open the database: {0}")]
    Database(#[from] rocksdb::Error),
    #[error("{0}")]
    Formats(#[from] formats::FormatError),
    #[error("cannot open the log: {0}")]
    Log(#[from] LogStoreError),
    #[error("cannot read the log: {0}")]
    LogRead(openraft::AnyError),
    #[error("cannot open the state machine: {0}")]
    StateMachine(#[from] OpenError),
    #[error(
        "the log was purged up to entry {purged} but the state machine applied only up to {}: \
         entries it never applied are gone (a snapshot install that did not finish); \
         this node's data cannot serve: remove its data directory and replace the node",
        applied.map_or("none".to_string(), |a| a.to_string())
    )]
    PurgedPastApplied { purged: u64, applied: Option<u64> },
    #[error("cannot remove a group's files: {0}")]
    Files(std::io::Error),
    #[error("group 1 is held by every node and is never dropped")]
    FirstGroup,
}

impl StorageError {
    /// Whether the data on disk is damaged (as opposed to unreadable for another reason).
    pub fn is_damage(&self) -> bool {
        match self {
            StorageError::Database(e) => is_damage(e),
            StorageError::Formats(e) => e.is_damage(),
            StorageError::Log(e) => e.is_damage(),
            StorageError::LogRead(_) => false,
            StorageError::StateMachine(e) => e.is_damage(),
            StorageError::PurgedPastApplied { .. } => true,
            StorageError::Files(_) | StorageError::FirstGroup => false,
        }
    }
}

/// Opens a node's storage in `data_dir` (the database in `db/`, group 1's log segment files in
/// `log/` and snapshot files in `snapshots/`), creating what is missing, for a cluster serving
/// `region`.
pub fn open(data_dir: &std::path::Path, region: &str) -> Result<Storage, StorageError> {
    open_on(
        data_dir,
        region,
        &LogOptions::default(),
        &StateOptions::default(),
    )
}

/// Opens a node's storage as [`open`] does, with the log's segment files and the snapshot files
/// kept as `log` says (on another disk, their slow work done elsewhere: a simulation's) and the
/// state store closing as `state` says.
pub fn open_on(
    data_dir: &std::path::Path,
    region: &str,
    log: &LogOptions,
    state: &StateOptions,
) -> Result<Storage, StorageError> {
    disk::create_dir_durably(&disk::RealDisk, data_dir).map_err(LogStoreError::Io)?;
    let db = open_db(&data_dir.join("db"), state)?;
    formats::check_and_record(&db)?;
    // RocksDB syncs the entries of its own directory, not the directory's entry in its parent.
    sync_dir(data_dir).map_err(LogStoreError::Io)?;
    let database = Database(std::sync::Arc::clone(&db));
    let node = NodeStore {
        db,
        data_dir: data_dir.to_path_buf(),
        region: region.to_string(),
        log: log.clone(),
    };
    let GroupStorage { log, state_machine } = node.open_group(GroupId::FIRST)?;
    Ok(Storage {
        log,
        state_machine,
        node,
        database,
    })
}

/// A node's database and data directory, from which each Raft group's storage opens.
#[derive(Clone)]
pub struct NodeStore {
    db: std::sync::Arc<rocksdb::DB>,
    data_dir: std::path::PathBuf,
    region: String,
    log: LogOptions,
}

impl NodeStore {
    /// The groups whose column families the database holds, in order (group 1 always).
    pub fn groups(&self) -> Vec<GroupId> {
        let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), self.db.path());
        let mut groups: Vec<GroupId> = names
            .unwrap_or_default()
            .iter()
            .filter_map(|name| GroupFamilies::group_of(name))
            .chain([GroupId::FIRST])
            .collect();
        groups.sort();
        groups.dedup();
        groups
    }

    /// Opens `group`'s log and state machine (see [`layout`]), creating its column families
    /// and directories when missing. A group whose families are all missing is new to this
    /// node: files left in its directory (by a [`NodeStore::drop_group`] cut short) go first.
    pub fn open_group(&self, group: GroupId) -> Result<GroupStorage, StorageError> {
        let families = GroupFamilies::of(group);
        let dirs = GroupDirs::of(&self.data_dir, group);
        let held = families
            .all()
            .iter()
            .any(|name| self.db.cf_handle(name).is_some());
        if !held && group != GroupId::FIRST {
            remove_dir(&dirs.base)?;
        }
        for name in families.all() {
            if self.db.cf_handle(name).is_none() {
                self.db.create_cf(name, &rocksdb::Options::default())?;
            }
        }
        let log = LogStore::open_on(
            std::sync::Arc::clone(&self.db),
            &families.log_meta,
            &dirs.log,
            &self.log,
        )?;
        let state_machine = RocksStateMachine::open(
            std::sync::Arc::clone(&self.db),
            families,
            &self.region,
            std::sync::Arc::clone(&self.log.disk),
            dirs.snapshots,
            self.log.work,
        )?;
        let purged = log
            .last_purged()
            .map_err(StorageError::LogRead)?
            .map(|id| id.index);
        let applied = state_machine.last_applied().map(|id| id.index);
        if let Some(purged) = purged.filter(|p| applied.is_none_or(|a| a < *p)) {
            return Err(StorageError::PurgedPastApplied { purged, applied });
        }
        Ok(GroupStorage { log, state_machine })
    }
}

/// Reads every key and value of `db`'s `families` with checksums verified, bypassing the block
/// cache.
/// Range deletions are ignored, so rows a purge or a restore deleted but compaction has not yet
/// dropped are read too: an iterator that honours them skips their blocks, and compaction would
/// meet the damage later, stopping every write of a node that already serves.
fn verify(db: &rocksdb::DB, families: &[String]) -> Result<(), rocksdb::Error> {
    for name in families {
        let Some(handle) = db.cf_handle(name) else {
            continue;
        };
        let mut read = rocksdb::ReadOptions::default();
        read.fill_cache(false);
        read.set_verify_checksums(true);
        // Deprecated only because it saves no time when DeleteRange is unused; the log and the
        // state machine use it, and here it is what makes the deleted rows readable.
        #[allow(deprecated)]
        read.set_ignore_range_deletions(true);
        for row in db.iterator_cf_opt(&handle, read, rocksdb::IteratorMode::Start) {
            row?;
        }
    }
    Ok(())
}

/// Whether `error` says that stored data is damaged (rather than, say, unreachable).
pub fn is_damage(error: &rocksdb::Error) -> bool {
    error.kind() == rocksdb::ErrorKind::Corruption
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::storage::RaftLogStorage;
    use openraft::{CommittedLeaderId, LogId};

    #[test]
    fn a_log_purged_past_the_applied_state_is_refused_as_damage() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let mut storage = open(tmp.path(), "local").expect("open");
        runtime
            .block_on(
                storage
                    .log
                    .purge(LogId::new(CommittedLeaderId::new(1, 1), 5)),
            )
            .expect("purge");
        drop(storage);
        let error = open(tmp.path(), "local").err().expect("refused");
        assert!(
            matches!(
                error,
                StorageError::PurgedPastApplied {
                    purged: 5,
                    applied: None
                }
            ),
            "{error}"
        );
        assert!(error.is_damage());
    }

    /// The largest table file in `dir`.
    fn largest_table(dir: &std::path::Path) -> std::path::PathBuf {
        std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "sst"))
            .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .expect("a table file")
    }

    /// Writes 200 rows of 1 KiB to the state column family of a new database at `path` and
    /// flushes them to a table; with `then_delete`, deletes them all with one range deletion,
    /// flushed to a table of its own, as a purge leaves them until compaction.
    fn write_rows(path: &std::path::Path, then_delete: bool) {
        let db = open_db(path, &StateOptions::default()).expect("open");
        let state = &db.cf_handle(STATE_CF).expect("state");
        for i in 0..200u32 {
            db.put_cf(state, i.to_be_bytes(), vec![i as u8; 1024])
                .expect("put");
        }
        db.flush_cf(state).expect("flush");
        if then_delete {
            let mut batch = rocksdb::WriteBatch::default();
            batch.delete_range_cf(state, 0u32.to_be_bytes(), 200u32.to_be_bytes());
            db.write(batch).expect("range deletion");
            db.flush_cf(state).expect("flush");
        }
    }

    /// Flips 8 bytes a quarter into the largest table under `path`: inside the data blocks,
    /// which opening alone does not read.
    fn damage_largest_table(path: &std::path::Path) {
        let table = largest_table(path);
        let mut bytes = std::fs::read(&table).expect("read");
        let at = bytes.len() / 4;
        for b in &mut bytes[at..at + 8] {
            *b ^= 0xff;
        }
        std::fs::write(&table, bytes).expect("write");
    }

    /// A damaged table is found when the database opens: one of live rows, and one whose rows
    /// a range deletion covers.
    #[test]
    fn a_damaged_table_is_found_when_the_database_opens() {
        for then_delete in [false, true] {
            let tmp = tempfile::TempDir::new().expect("temp dir");
            let path = tmp.path().join("db");
            write_rows(&path, then_delete);
            damage_largest_table(&path);
            let error =
                open_db(&path, &StateOptions::default()).expect_err("a damaged table is refused");
            assert!(is_damage(&error), "range deletion {then_delete}: {error}");
        }
    }

    #[test]
    fn a_database_closed_without_flushing_keeps_its_flushed_and_logged_writes_only() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let path = tmp.path().join("db");
        let crash = StateOptions {
            flush_on_close: false,
        };
        let mut unlogged = rocksdb::WriteOptions::default();
        unlogged.disable_wal(true);
        {
            let db = open_db(&path, &crash).expect("open");
            let state = &db.cf_handle(STATE_CF).expect("state");
            let meta = &db.cf_handle(META_CF).expect("meta");
            db.put_cf_opt(state, b"flushed", b"1", &unlogged)
                .expect("put");
            db.flush_cf(state).expect("flush");
            db.put_cf_opt(state, b"unlogged", b"2", &unlogged)
                .expect("put");
            db.put_cf(meta, b"logged", b"3").expect("put");
        }
        let db = open_db(&path, &crash).expect("reopen");
        let state = &db.cf_handle(STATE_CF).expect("state");
        let meta = &db.cf_handle(META_CF).expect("meta");
        assert_eq!(
            db.get_cf(state, b"flushed").expect("get"),
            Some(b"1".to_vec())
        );
        assert_eq!(db.get_cf(state, b"unlogged").expect("get"), None);
        assert_eq!(
            db.get_cf(meta, b"logged").expect("get"),
            Some(b"3".to_vec())
        );
    }

    /// The newest write-ahead log file of the database at `path`.
    fn newest_wal(path: &std::path::Path) -> std::path::PathBuf {
        std::fs::read_dir(path)
            .expect("list")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .max()
            .expect("a write-ahead log file")
    }

    #[test]
    fn a_write_ahead_log_whose_last_record_is_torn_opens_without_it() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let path = tmp.path().join("db");
        let mut synced = rocksdb::WriteOptions::default();
        synced.set_sync(true);
        {
            let db = open_db(&path, &StateOptions::default()).expect("open");
            let meta = &db.cf_handle(META_CF).expect("meta");
            for key in 1..=3u8 {
                db.put_cf_opt(meta, [key], [key; 300], &synced)
                    .expect("put");
            }
        }
        // The last record's sectors half on the disk: its value damaged, the file as long.
        let wal = newest_wal(&path);
        let mut bytes = std::fs::read(&wal).expect("read");
        let value = bytes
            .windows(300)
            .rposition(|w| w == [3u8; 300])
            .expect("the last value");
        bytes[value + 150..value + 300].fill(0);
        std::fs::write(&wal, &bytes).expect("write");
        let db = open_db(&path, &StateOptions::default()).expect("a torn last record opens");
        let meta = &db.cf_handle(META_CF).expect("meta");
        assert_eq!(db.get_cf(meta, [2]).expect("get"), Some(vec![2; 300]));
        assert_eq!(db.get_cf(meta, [3]).expect("get"), None);
    }
}
