//! Runs openraft's storage test suite against `LogStore`, paired with a tiny in-memory state
//! machine defined here (the suite needs one), plus reopen tests for durability.

use std::io::Cursor;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use openraft::storage::RaftLogStorage;
use openraft::storage::RaftLogStorageExt;
use openraft::storage::RaftStateMachine;
use openraft::storage::Snapshot;
use openraft::testing::StoreBuilder;
use openraft::testing::Suite;
use openraft::BasicNode;
use openraft::Entry;
use openraft::EntryPayload;
use openraft::LogId;
use openraft::OptionalSend;
use openraft::RaftLogReader;
use openraft::RaftSnapshotBuilder;
use openraft::SnapshotMeta;
use openraft::StorageError;
use openraft::StorageIOError;
use openraft::StoredMembership;
use openraft::Vote;
use raftq_store::log_store::column_families;
use raftq_store::log_store::Enrolment;
use raftq_store::log_store::LogStore;
use raftq_store::log_store::LOGS_CF;
use raftq_store::META_CF;
use rocksdb::Options;
use rocksdb::DB;
use tempfile::TempDir;

openraft::declare_raft_types!(
    /// Test type config: `String` requests and responses, `u64` node ids.
    pub TestConfig
);

type NodeId = u64;
type Meta = SnapshotMeta<NodeId, BasicNode>;
/// The last snapshot built or installed, shared with snapshot builders.
type SharedSnapshot = Arc<Mutex<Option<(Meta, Vec<u8>)>>>;
type TestResult = Result<(), Box<dyn std::error::Error>>;

/// In-memory state machine: the applied payloads, in order.
#[derive(Debug, Default)]
struct MemStateMachine {
    last_applied: Option<LogId<NodeId>>,
    last_membership: StoredMembership<NodeId, BasicNode>,
    data: Vec<String>,
    snapshot_count: u64,
    current_snapshot: SharedSnapshot,
}

/// A copy of the state machine at the time `get_snapshot_builder` was called.
struct MemSnapshotBuilder {
    meta: Meta,
    data: Vec<String>,
    current_snapshot: SharedSnapshot,
}

impl RaftSnapshotBuilder<TestConfig> for MemSnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TestConfig>, StorageError<NodeId>> {
        let bytes =
            serde_json::to_vec(&self.data).map_err(|e| StorageIOError::read_state_machine(&e))?;
        *self.current_snapshot.lock().unwrap() = Some((self.meta.clone(), bytes.clone()));
        Ok(Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl RaftStateMachine<TestConfig> for MemStateMachine {
    type SnapshotBuilder = MemSnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        Ok((self.last_applied, self.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<String>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TestConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut replies = Vec::new();
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => replies.push(String::new()),
                EntryPayload::Normal(data) => {
                    replies.push(data.clone());
                    self.data.push(data);
                }
                EntryPayload::Membership(membership) => {
                    self.last_membership = StoredMembership::new(Some(entry.log_id), membership);
                    replies.push(String::new());
                }
            }
        }
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.snapshot_count += 1;
        let last = self
            .last_applied
            .map_or_else(|| "none".to_string(), |id| id.to_string());
        MemSnapshotBuilder {
            meta: Meta {
                last_log_id: self.last_applied,
                last_membership: self.last_membership.clone(),
                snapshot_id: format!("{last}-{}", self.snapshot_count),
            },
            data: self.data.clone(),
            current_snapshot: Arc::clone(&self.current_snapshot),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::default())
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let bytes = snapshot.into_inner();
        self.data = serde_json::from_slice(&bytes)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        self.last_applied = meta.last_log_id;
        self.last_membership = meta.last_membership.clone();
        *self.current_snapshot.lock().unwrap() = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TestConfig>>, StorageError<NodeId>> {
        let current = self.current_snapshot.lock().unwrap().clone();
        Ok(current.map(|(meta, bytes)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        }))
    }
}

fn open_db(dir: &TempDir) -> Arc<DB> {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    let db = DB::open_cf_descriptors(&opts, dir.path().join("db"), column_families())
        .expect("open RocksDB");
    Arc::new(db)
}

fn open_store(dir: &TempDir) -> LogStore<TestConfig> {
    open_store_on(dir, open_db(dir))
}

fn open_store_on(dir: &TempDir, db: Arc<DB>) -> LogStore<TestConfig> {
    LogStore::open(db, META_CF, &dir.path().join("log")).expect("open the log store")
}

struct Builder;

impl StoreBuilder<TestConfig, LogStore<TestConfig>, MemStateMachine, TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(TempDir, LogStore<TestConfig>, MemStateMachine), StorageError<NodeId>> {
        let dir = TempDir::new().expect("create temp dir");
        let store = open_store(&dir);
        Ok((dir, store, MemStateMachine::default()))
    }
}

/// `Suite::test_all` starts a fresh tokio runtime per case, so this must not be a `#[tokio::test]`.
#[test]
fn openraft_suite() -> TestResult {
    Suite::test_all(Builder)?;
    Ok(())
}

fn log_id(term: u64, index: u64) -> LogId<NodeId> {
    openraft::testing::log_id(term, 0, index)
}

#[tokio::test]
async fn state_survives_reopen() -> TestResult {
    let dir = TempDir::new().expect("create temp dir");
    {
        let mut store = open_store(&dir);
        let entries = (0..6).map(|i| Entry::<TestConfig> {
            log_id: log_id(1, i),
            payload: EntryPayload::Normal(format!("e{i}")),
        });
        store.blocking_append(entries).await?;
        assert_eq!(store.last_log_id_now()?, Some(log_id(1, 5)));
        store.save_vote(&Vote::new(1, 0)).await?;
        store.save_committed(Some(log_id(1, 4))).await?;
        store.purge(log_id(1, 1)).await?;
        store.truncate(log_id(1, 5)).await?;
        assert_eq!(store.last_log_id_now()?, Some(log_id(1, 4)));
    }

    let mut store = open_store(&dir);
    assert_eq!(store.last_log_id_now()?, Some(log_id(1, 4)));
    assert_eq!(store.read_vote().await?, Some(Vote::new(1, 0)));
    assert_eq!(store.read_committed().await?, Some(log_id(1, 4)));
    let state = store.get_log_state().await?;
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 1)));
    assert_eq!(state.last_log_id, Some(log_id(1, 4)));

    let mut reader = store.get_log_reader().await;
    let all: Vec<u64> = reader
        .try_get_log_entries(..)
        .await?
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(all, [2, 3, 4]);
    let some = reader.try_get_log_entries(3..=3).await?;
    assert_eq!(some.len(), 1);
    assert!(matches!(&some[0].payload, EntryPayload::Normal(s) if s == "e3"));
    assert!(reader.try_get_log_entries(5..).await?.is_empty());
    Ok(())
}

/// A new store holds no Raft state, nor does one with only an enrolment; a vote is state. The
/// enrolment survives a reopen.
#[tokio::test]
async fn raft_state_and_enrolment_are_read_back_after_reopen() -> TestResult {
    let dir = TempDir::new().expect("create temp dir");
    let enrolment = Enrolment {
        cluster_id: Some(uuid::Uuid::from_u128(7)),
        joining: true,
    };
    {
        let mut store = open_store(&dir);
        assert!(!store.holds_raft_state()?);
        assert_eq!(store.enrolment()?, Enrolment::default());
        store.save_enrolment(&enrolment).await?;
        assert!(!store.holds_raft_state()?);
        store.save_vote(&Vote::new(1, 0)).await?;
        assert!(store.holds_raft_state()?);
        assert_eq!(store.last_log_id_now()?, None);
        let entries = (0..2).map(|i| Entry::<TestConfig> {
            log_id: log_id(2, i),
            payload: EntryPayload::Blank,
        });
        store.blocking_append(entries).await?;
        store.purge(log_id(2, 1)).await?;
        assert_eq!(store.last_log_id_now()?, Some(log_id(2, 1)), "all purged");
    }
    let store = open_store(&dir);
    assert!(store.holds_raft_state()?);
    assert_eq!(store.enrolment()?, enrolment);
    Ok(())
}

/// A directory from before segment files holds its entries in the logs column family: opening
/// the store moves them into segments, which keep them across the next reopen.
#[tokio::test]
async fn entries_of_the_logs_column_family_move_into_segments() -> TestResult {
    let dir = TempDir::new().expect("create temp dir");
    {
        let db = open_db(&dir);
        let logs = db.cf_handle(LOGS_CF).expect("logs column family");
        for i in 3..2500u64 {
            let entry = Entry::<TestConfig> {
                log_id: log_id(1, i),
                payload: EntryPayload::Normal(format!("e{i}")),
            };
            db.put_cf(&logs, i.to_be_bytes(), postcard::to_allocvec(&entry)?)?;
        }
        drop(logs);
        let mut store = open_store_on(&dir, db);
        store.purge(log_id(1, 2)).await?;
    }
    let db = open_db(&dir);
    let logs = db.cf_handle(LOGS_CF).expect("logs column family");
    let mut store = open_store_on(&dir, Arc::clone(&db));
    assert!(db
        .iterator_cf(&logs, rocksdb::IteratorMode::Start)
        .next()
        .is_none());
    assert_eq!(store.last_log_id_now()?, Some(log_id(1, 2499)));
    let entries = store.try_get_log_entries(3..2500).await?;
    assert_eq!(entries.len(), 2497);
    assert!(matches!(&entries[1000].payload, EntryPayload::Normal(s) if s == "e1003"));
    Ok(())
}

/// A node's log is its segments and its database's meta family together: either one alone, as
/// when the other was lost or replaced, is refused as damage.
#[tokio::test]
async fn half_of_a_log_is_refused() -> TestResult {
    for lost in ["db", "log"] {
        let dir = TempDir::new().expect("create temp dir");
        {
            let mut store = open_store(&dir);
            store.save_vote(&Vote::new(1, 0)).await?;
            let entries = (0..3).map(|i| Entry::<TestConfig> {
                log_id: log_id(1, i),
                payload: EntryPayload::Blank,
            });
            store.blocking_append(entries).await?;
        }
        drop(open_store(&dir));
        std::fs::remove_dir_all(dir.path().join(lost))?;
        let error = LogStore::<TestConfig>::open(open_db(&dir), META_CF, &dir.path().join("log"))
            .expect_err("refused");
        assert!(error.is_damage(), "{lost}: {error}");
    }
    Ok(())
}

/// Purged segment files are recycled or removed: the log's files do not outgrow what it holds.
#[tokio::test]
async fn a_purge_lets_the_segment_files_go() -> TestResult {
    let dir = TempDir::new().expect("create temp dir");
    let mut store = open_store(&dir);
    let segments = || -> usize {
        std::fs::read_dir(dir.path().join("log"))
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
                    .count()
            })
            .unwrap_or(0)
    };
    let body = "x".repeat(64 * 1024);
    for round in 0..10u64 {
        let entries = (0..100).map(|i| Entry::<TestConfig> {
            log_id: log_id(1, round * 100 + i),
            payload: EntryPayload::Normal(body.clone()),
        });
        store.blocking_append(entries).await?;
        if round == 4 {
            assert!(segments() >= 2, "{} segments hold 32 MiB", segments());
        }
        if round >= 4 {
            store.purge(log_id(1, round * 100 + 99)).await?;
        }
    }
    let appended = store.appended().bytes();
    assert!(
        (65_536_000..65_600_000).contains(&appended),
        "counted as encoded: {appended} bytes"
    );
    // Purged files are removed by a task of their own, after the purge returns.
    let removing = Instant::now();
    while segments() > 0 && removing.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(segments(), 0, "segments after every entry was purged");
    assert!(
        dir.path().join("log/spare").exists(),
        "one was kept as the spare"
    );
    Ok(())
}
