//! The RocksDB state machine: openraft's suite over the real log store and state machine, and
//! raftq's own checks that the engine's state and payloads survive a reopen and travel whole in
//! a snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftSnapshotBuilder, StorageError};
use raftq_engine::{Attribute, Command, NewMessage, Outcome, QueueAttributes};
use raftq_store::disk::RealDisk;
use raftq_store::{
    open_db, open_on, CommandGroup, GroupFamilies, GroupId, GroupStorage, LogOptions, LogStore,
    NodeId, RocksStateMachine, StateOptions, TypeConfig, Work, META_CF,
};
use tempfile::TempDir;
use uuid::Uuid;

const REGION: &str = "local";

/// Snapshots built and installed by a server's threads, or inline, as a simulation does.
const WORKS: [Work; 2] = [
    Work::Threads,
    Work::Tasks {
        fsync: std::time::Duration::ZERO,
    },
];

fn open(dir: &TempDir) -> (LogStore<TypeConfig>, RocksStateMachine) {
    open_with(dir, Work::Threads)
}

fn open_with(dir: &TempDir, work: Work) -> (LogStore<TypeConfig>, RocksStateMachine) {
    let db = open_db(&dir.path().join("db"), &Default::default()).expect("open RocksDB");
    let log = LogStore::open(Arc::clone(&db), META_CF, &dir.path().join("log")).expect("log store");
    let disk = Arc::new(RealDisk);
    let families = GroupFamilies::of(GroupId::FIRST);
    let snapshots = dir.path().join("snapshots");
    let sm = RocksStateMachine::open(db, families, REGION, disk, snapshots, work)
        .expect("open state machine");
    (log, sm)
}

/// Opens the node's storage in `dir` and there the storage of `group` (not group 1, which
/// the node's storage holds open).
fn open_group(dir: &TempDir, work: Work, group: GroupId) -> GroupStorage {
    assert_ne!(group, GroupId::FIRST);
    let log = LogOptions {
        work,
        ..LogOptions::default()
    };
    let storage = open_on(dir.path(), REGION, &log, &StateOptions::default()).expect("storage");
    storage.node.open_group(group).expect("open the group")
}

/// Opens the node's storage in `dir` again once the database opened before is closed: the
/// logs' sync threads let go of it a moment after their stores are dropped, and RocksDB refuses
/// to open a database this process still holds (its `LOCK`).
async fn reopen(dir: &TempDir) -> raftq_store::Storage {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match open_on(
            dir.path(),
            REGION,
            &LogOptions::default(),
            &Default::default(),
        ) {
            Ok(storage) => return storage,
            Err(e) if e.to_string().contains("LOCK") => {
                assert!(tokio::time::Instant::now() < deadline, "reopen: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(e) => panic!("reopen: {e}"),
        }
    }
}

/// Builds stores of group 1, or of `group` beside it in the same database.
struct Builder {
    work: Work,
    group: Option<GroupId>,
}

impl StoreBuilder<TypeConfig, LogStore<TypeConfig>, RocksStateMachine, TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(TempDir, LogStore<TypeConfig>, RocksStateMachine), StorageError<NodeId>> {
        let dir = TempDir::new().expect("create temp dir");
        let (log, sm) = match self.group {
            None => open_with(&dir, self.work),
            Some(group) => {
                let opened = open_group(&dir, self.work, group);
                (opened.log, opened.state_machine)
            }
        };
        Ok((dir, log, sm))
    }
}

/// `Suite::test_all` starts a tokio runtime per case, so this is a plain test.
#[test]
fn openraft_suite_passes_on_the_real_log_and_state_machine() {
    for work in WORKS {
        Suite::test_all(Builder { work, group: None }).expect("openraft storage suite");
    }
}

#[test]
fn openraft_suite_passes_on_a_second_groups_log_and_state_machine() {
    for work in WORKS {
        let group = Some(GroupId(2));
        Suite::test_all(Builder { work, group }).expect("openraft storage suite");
    }
}

#[tokio::test]
async fn groups_in_one_database_keep_their_state_and_files_apart() {
    let dir = TempDir::new().expect("temp dir");
    let work = Work::Threads;
    let (before, digest) = {
        let GroupStorage {
            state_machine: mut second,
            ..
        } = open_group(&dir, work, GroupId(2));
        second.apply(workload()).await.expect("apply");
        second
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build a snapshot");
        let digest = second.reader().digest().expect("digest");
        (export(&second), digest)
    };
    assert!(dir.path().join("groups/2/log").is_dir());
    let snapshots = std::fs::read_dir(dir.path().join("groups/2/snapshots")).expect("list");
    assert_eq!(
        snapshots.count(),
        1,
        "the snapshot is in the group's directory"
    );

    let storage = reopen(&dir).await;
    assert_eq!(storage.node.groups(), [GroupId::FIRST, GroupId(2)]);
    let first = storage.state_machine.reader();
    assert_eq!(
        first.digest().expect("digest").0,
        None,
        "group 1 applied nothing"
    );
    let blank = TempDir::new().expect("temp dir");
    let (_log, empty) = open(&blank);
    assert_eq!(first.with_engine(|e| e.export_rows()), Some(export(&empty)));
    assert_eq!(first.snapshot_bytes(), 0);
    let second = storage.node.open_group(GroupId(2)).expect("reopen group 2");
    assert_eq!(export(&second.state_machine), before);
    assert_eq!(
        second.state_machine.reader().digest().expect("digest"),
        digest
    );
    assert_eq!(
        second.state_machine.last_applied().map(|id| id.index),
        Some(7)
    );
}

/// A group dropped from a node leaves nothing of it: not held, no files, and opened again it
/// starts blank; files a drop cut short left behind go when the group is next opened.
#[tokio::test]
async fn a_dropped_group_leaves_nothing_and_opens_again_blank() {
    let dir = TempDir::new().expect("temp dir");
    {
        let GroupStorage {
            state_machine: mut second,
            ..
        } = open_group(&dir, Work::Threads, GroupId(2));
        second.apply(workload()).await.expect("apply");
    }
    let storage = reopen(&dir).await;
    assert_eq!(storage.node.groups(), [GroupId::FIRST, GroupId(2)]);
    assert!(
        storage.node.drop_group(GroupId::FIRST).is_err(),
        "group 1 stays"
    );
    storage.node.drop_group(GroupId(2)).expect("drop group 2");
    assert_eq!(storage.node.groups(), [GroupId::FIRST]);
    assert!(!dir.path().join("groups/2").exists(), "its files are gone");
    // Files of a drop whose removal of the directory was cut short.
    let leftover = dir.path().join("groups/2/log");
    std::fs::create_dir_all(&leftover).expect("a leftover directory");
    std::fs::write(leftover.join("0000000000000001.log"), b"old").expect("a leftover file");
    let again = storage
        .node
        .open_group(GroupId(2))
        .expect("open group 2 again");
    assert_eq!(again.state_machine.last_applied(), None, "blank");
    let names: Vec<_> = std::fs::read_dir(&leftover).expect("list").collect();
    assert!(
        names
            .iter()
            .flatten()
            .all(|e| e.file_name() != "0000000000000001.log"),
        "the leftover went"
    );
    let blank = TempDir::new().expect("temp dir");
    let (_log, empty) = open(&blank);
    assert_eq!(export(&again.state_machine), export(&empty));
}

fn entry(index: u64, now: u64, command: Command) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(CommandGroup {
            now,
            commands: Arc::new(vec![command]),
        }),
    }
}

fn workload() -> Vec<Entry<TypeConfig>> {
    let start = 1_700_000_000_000;
    let mut entries = vec![entry(
        1,
        start,
        Command::CreateQueue {
            account: "dev".into(),
            queue_id: Uuid::from_u128(1),
            name: "jobs.fifo".into(),
            attributes: QueueAttributes::default(),
        },
    )];
    for i in 0..5u64 {
        entries.push(entry(
            2 + i,
            start + i,
            Command::Send {
                account: "dev".into(),
                queue: "jobs.fifo".into(),
                message: NewMessage {
                    attributes: BTreeMap::from([("k".to_string(), Attribute::string("v"))]),
                    ..NewMessage::new(Uuid::from_u128(100 + u128::from(i)), format!("job {i}"))
                        .in_group("g")
                        .deduplicated_by(format!("d{i}"))
                },
            },
        ));
    }
    entries.push(entry(
        7,
        start + 10,
        Command::Receive {
            account: "dev".into(),
            queue: "jobs.fifo".into(),
            max_messages: Some(2),
            lease_seconds: Some(60),
            attempt_id: None,
        },
    ));
    entries
}

fn export(sm: &RocksStateMachine) -> Vec<(Vec<u8>, Vec<u8>)> {
    sm.reader()
        .with_engine(|e| e.export_rows())
        .expect("engine readable")
}

#[tokio::test]
async fn applied_state_and_payloads_survive_a_reopen() {
    let dir = TempDir::new().expect("temp dir");
    let (before, responses) = {
        let (_log, mut sm) = open(&dir);
        let _waiting = sm.awaited().wait();
        let responses = sm.apply(workload()).await.expect("apply");
        (export(&sm), responses)
    };
    // The receive in the same batch as the sends still gets its payloads.
    let last = responses.last().and_then(|r| r.first()).expect("responses");
    match &last.result {
        Some(Ok(Outcome::Received(d))) => assert_eq!(d.len(), 2),
        other => panic!("unexpected {other:?}"),
    }
    let bodies: Vec<&str> = last.payloads.iter().map(|(_, p)| p.body.as_str()).collect();
    assert_eq!(bodies, ["job 0", "job 1"]);

    let (_log, mut sm) = open(&dir);
    let (applied, _) = sm.applied_state().await.expect("applied state");
    assert_eq!(applied.map(|id| id.index), Some(7));
    assert_eq!(export(&sm), before);
    let payload = sm
        .reader()
        .payload(1)
        .expect("read")
        .expect("payload present");
    assert_eq!(payload.body, "job 0");
    assert_eq!(payload.attributes["k"], Attribute::string("v"));
}

/// A standard queue with priority weights, a send at `priority` and one scheduled an hour
/// ahead.
fn prioritized(priority: i64) -> Vec<Entry<TypeConfig>> {
    let start: u64 = 1_700_000_000_000;
    let mut urgent = NewMessage::new(Uuid::from_u128(100), "urgent");
    urgent.priority = Some(priority);
    let mut later = NewMessage::new(Uuid::from_u128(101), "later");
    later.deliver_at = Some(1_700_000_000_000 + 3_600_000);
    let send = |index, message| {
        let command = Command::Send {
            account: "dev".into(),
            queue: "jobs".into(),
            message,
        };
        entry(index, start, command)
    };
    let weights = QueueAttributes {
        priority_weights: Some(Some(vec![1, 2])),
        ..QueueAttributes::default()
    };
    let create = Command::CreateQueue {
        account: "dev".into(),
        queue_id: Uuid::from_u128(1),
        name: "jobs".into(),
        attributes: weights,
    };
    vec![entry(1, start, create), send(2, urgent), send(3, later)]
}

/// The digest and engine rows of a state machine that applied `entries` in `dir`.
async fn applied(
    dir: &TempDir,
    entries: Vec<Entry<TypeConfig>>,
) -> (String, Vec<(Vec<u8>, Vec<u8>)>) {
    let (_log, mut sm) = open(dir);
    sm.apply(entries).await.expect("apply");
    let (_, digest) = sm.reader().digest().expect("digest");
    (digest, export(&sm))
}

#[tokio::test]
async fn priorities_weights_and_schedules_are_in_the_digest_and_survive_a_reopen() {
    let dir = TempDir::new().expect("temp dir");
    let (digest, rows) = applied(&dir, prioritized(7)).await;
    let other = TempDir::new().expect("temp dir");
    let (other_digest, _) = applied(&other, prioritized(6)).await;
    assert_ne!(
        digest, other_digest,
        "a message's priority is part of the state"
    );

    let (_log, sm) = open(&dir);
    assert_eq!(export(&sm), rows, "the state reads back as it was written");
    assert_eq!(sm.reader().digest().expect("digest").1, digest);
    let (stats, scheduled) = sm
        .reader()
        .with_engine(|e| {
            let stats = e.stats("dev", "jobs", 0).expect("stats");
            let view = e.get_queue("dev", "jobs").expect("queue");
            assert_eq!(view.priority_weights.map(|w| w.0), Some(vec![1, 2]));
            (stats, e.scheduled("dev", "jobs", None, None).expect("list"))
        })
        .expect("engine readable");
    assert_eq!((stats.by_priority[7].visible, stats.scheduled), (1, 1));
    assert_eq!(scheduled.len(), 1);
}

#[tokio::test]
async fn a_receive_applied_after_its_sends_reads_their_payloads_from_the_database() {
    let dir = TempDir::new().expect("temp dir");
    let (_log, mut sm) = open(&dir);
    let mut entries = workload();
    let receive = entries.pop().expect("the receive is last");
    sm.apply(entries).await.expect("apply the sends");
    let _waiting = sm.awaited().wait();
    let responses = sm.apply([receive]).await.expect("apply the receive");
    let answer = responses.first().and_then(|r| r.first()).expect("answer");
    let mut bodies: Vec<(u64, &str)> = answer
        .payloads
        .iter()
        .map(|(k, p)| (*k, p.body.as_str()))
        .collect();
    bodies.sort();
    assert_eq!(bodies, [(1, "job 0"), (2, "job 1")]);

    let read = sm.reader().payloads(&[2, 99, 1]).expect("read");
    let read: Vec<Option<&str>> = read
        .iter()
        .map(|p| p.as_ref().map(|p| p.body.as_str()))
        .collect();
    assert_eq!(read, [Some("job 1"), None, Some("job 0")]);
}

#[tokio::test]
async fn without_an_awaited_write_a_receive_applies_alike_but_reads_no_payloads() {
    let (awaited_dir, unawaited_dir) = (
        TempDir::new().expect("temp dir"),
        TempDir::new().expect("temp dir"),
    );
    let (_log, mut awaited) = open(&awaited_dir);
    let _waiting = awaited.awaited().wait();
    let answered = awaited.apply(workload()).await.expect("apply");
    let (_log, mut unawaited) = open(&unawaited_dir);
    let unanswered = unawaited.apply(workload()).await.expect("apply");

    assert_eq!(export(&awaited), export(&unawaited));
    let last = |responses: &[Vec<raftq_store::Response>]| {
        responses
            .last()
            .and_then(|r| r.first())
            .cloned()
            .expect("responses")
    };
    let (answered, unanswered) = (last(&answered), last(&unanswered));
    assert_eq!(answered.result, unanswered.result);
    assert_eq!(answered.payloads.len(), 2);
    assert!(unanswered.payloads.is_empty());
}

#[tokio::test]
async fn a_deleted_queue_leaves_at_once_and_ticks_free_its_payloads_across_a_reopen() {
    let dir = TempDir::new().expect("temp dir");
    let start = 1_700_000_000_100;
    let delete = Command::DeleteQueue {
        account: "dev".into(),
        queue: "jobs.fifo".into(),
    };
    {
        let (_log, mut sm) = open(&dir);
        let mut entries = workload();
        entries.push(entry(8, start, delete));
        sm.apply(entries).await.expect("apply");
    }
    // Reopening restores from the rows: deduplication rows of the deleted queue would be
    // refused as orphans, so they must be gone; its messages wait for reclamation.
    let (_log, mut sm) = open(&dir);
    let reader = sm.reader();
    assert_eq!(reader.with_engine(|e| e.reclaim_backlog()), Some(5));
    assert!(reader.payload(1).expect("read").is_some());
    sm.apply([entry(9, start + 1, Command::Tick)])
        .await
        .expect("tick");
    assert_eq!(reader.with_engine(|e| e.reclaim_backlog()), Some(0));
    assert!(reader.payload(1).expect("read").is_none());
    let after = export(&sm);
    drop((reader, sm, _log));
    let (_log, sm) = open(&dir);
    assert_eq!(export(&sm), after);
    assert_eq!(after.len(), 1, "only the meta row is left: {after:?}");
}

#[tokio::test]
async fn a_snapshot_reproduces_the_state_on_a_fresh_node() {
    for work in WORKS {
        a_snapshot_reproduces_the_state_with(work).await;
    }
}

async fn a_snapshot_reproduces_the_state_with(work: Work) {
    let source_dir = TempDir::new().expect("temp dir");
    let (_log, mut source) = open_with(&source_dir, work);
    source.apply(workload()).await.expect("apply");
    assert_eq!(source.reader().snapshot_bytes(), 0, "no snapshot yet");
    let snapshot = source
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("build snapshot");

    let target_dir = TempDir::new().expect("temp dir");
    let (_log2, mut target) = open_with(&target_dir, work);
    target
        .install_snapshot(&snapshot.meta, snapshot.snapshot)
        .await
        .expect("install");
    assert_eq!(export(&target), export(&source));
    let built = source.reader().snapshot_bytes();
    assert!(built > 0, "the snapshot file's size is known");
    assert_eq!(target.reader().snapshot_bytes(), built, "the same file");
    let digest = |sm: &RocksStateMachine| sm.reader().digest().expect("digest");
    assert_eq!(
        digest(&target),
        digest(&source),
        "rows and payloads identical"
    );
    assert_eq!(digest(&target).0, Some(7));
    let (applied, _) = target.applied_state().await.expect("applied state");
    assert_eq!(applied.map(|id| id.index), Some(7));
    let payload = target.reader().payload(3).expect("read").expect("payload");
    assert_eq!(payload.body, "job 2");
    let current = target
        .get_current_snapshot()
        .await
        .expect("current snapshot");
    assert_eq!(
        current.map(|s| s.meta.snapshot_id),
        Some(snapshot.meta.snapshot_id)
    );
}
