//! Power losses while a node builds or receives a snapshot: the whole store (the database in a
//! directory of its own, the log and the snapshot files on a [`CrashDisk`], as a simulation
//! keeps them) opens from every crash image of every moment, holding the state it had applied,
//! with the new snapshot once the database records it and with no snapshot before.
//!
//! The moments are the start of every sync of the crash disk while the snapshot is written (the
//! file's, then its directory's), a moment halfway through a transfer, and the end. The database
//! of a moment is a checkpoint of it taken before the snapshot is recorded (or after, for the
//! end): the database itself is not what these tests lose.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftSnapshotBuilder};
use raftq_engine::{Command, NewMessage, QueueAttributes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::crash_disk::{CrashDisk, Frozen};
use crate::crash_tests::{record_syncs, taken};
use crate::disk::Disk;
use crate::segments::LogOptions;
use crate::{CommandGroup, StateOptions, Storage, TypeConfig, Work};

const REGION: &str = "local";
/// Crash images tried at each moment (all of them when there are fewer).
const IMAGES: usize = 24;
/// Messages the workload sends, each in an entry of its own after the queue's creation.
const MESSAGES: u64 = 40;

/// A node's data directory: the database on the real disk, the rest on a crash disk.
struct Node {
    tmp: tempfile::TempDir,
    disk: CrashDisk,
}

/// What a store opened from a crash image holds.
#[derive(Debug, PartialEq, Eq)]
struct Held {
    /// The applied index and the digest of the state.
    state: (Option<u64>, String),
    /// The current snapshot's id.
    snapshot: Option<String>,
}

impl Node {
    fn new() -> Node {
        Node {
            tmp: tempfile::TempDir::new().expect("temp dir"),
            disk: CrashDisk::new(),
        }
    }

    fn data(&self) -> PathBuf {
        self.tmp.path().join("node")
    }

    fn open_on(&self, disk: &CrashDisk) -> Result<Storage, crate::StorageError> {
        let log = LogOptions {
            disk: Arc::new(disk.clone()),
            segment_bytes: 64 * 1024,
            work: Work::Tasks {
                fsync: Duration::ZERO,
            },
            spare_thread: false,
        };
        let crash = StateOptions {
            flush_on_close: false,
        };
        crate::open_on(&self.data(), REGION, &log, &crash)
    }

    fn open(&self) -> Storage {
        self.open_on(&self.disk).expect("open")
    }

    /// A checkpoint of the open database of `storage`, named `name`.
    fn checkpoint(&self, storage: &Storage, name: &str) -> PathBuf {
        let path = self.tmp.path().join(name);
        rocksdb::checkpoint::Checkpoint::new(&storage.database.0)
            .and_then(|c| c.create_checkpoint(&path))
            .expect("checkpoint");
        path
    }

    /// Opens the store with the database of `checkpoint` and the disk of `image`, and reads
    /// what it holds.
    async fn held(&self, checkpoint: &Path, image: &CrashDisk) -> Result<Held, String> {
        let db = self.data().join("db");
        if db.exists() {
            std::fs::remove_dir_all(&db).map_err(|e| e.to_string())?;
        }
        std::fs::create_dir_all(&db).map_err(|e| e.to_string())?;
        for file in std::fs::read_dir(checkpoint).map_err(|e| e.to_string())? {
            let file = file.map_err(|e| e.to_string())?;
            std::fs::copy(file.path(), db.join(file.file_name())).map_err(|e| e.to_string())?;
        }
        let mut storage = self.open_on(image).map_err(|e| e.to_string())?;
        let state = storage.state_machine.reader().digest();
        let current = storage.state_machine.get_current_snapshot().await;
        let snapshot = current.map_err(|e| e.to_string())?;
        let crate::Storage {
            log,
            state_machine,
            node,
            database,
        } = storage;
        drop((log, state_machine, node));
        if database.close().is_err() {
            return Err("the database stays open once the store is dropped".into());
        }
        Ok(Held {
            state: state.map_err(|e| e.to_string())?,
            snapshot: snapshot.map(|s| s.meta.snapshot_id),
        })
    }

    /// Closes `storage`, then checks that every image of the disk at each of `moments` holds
    /// the state of `before` (a checkpoint and what it holds) and every image at the end that
    /// of `after`.
    async fn images_hold(
        &self,
        storage: Storage,
        moments: &[Frozen],
        before: &(PathBuf, Held),
        after: &(PathBuf, Held),
    ) {
        let end = self.disk.freeze();
        drop(storage);
        self.every_image_holds(moments, &before.0, &before.1).await;
        self.every_image_holds(&[end], &after.0, &after.1).await;
    }

    /// Checks that every crash image of each moment opens holding `expected`.
    async fn every_image_holds(&self, moments: &[Frozen], checkpoint: &Path, expected: &Held) {
        for (moment, frozen) in moments.iter().enumerate() {
            for image in frozen.images(IMAGES, moment as u64) {
                let held = self.held(checkpoint, &image.disk).await;
                assert_eq!(
                    held.as_ref(),
                    Ok(expected),
                    "moment {moment}, crash image {:?}",
                    image.choices
                );
                let names = image.disk.list_dir(&self.data().join("snapshots"));
                let names = names.expect("the snapshot directory is durable");
                let kept = usize::from(expected.snapshot.is_some());
                assert_eq!(
                    names.len(),
                    kept,
                    "only the current file is left: {names:?}"
                );
            }
        }
    }
}

fn entry(index: u64, command: Command) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(CommandGroup {
            now: 1_700_000_000_000 + index,
            commands: Arc::new(vec![command]),
        }),
    }
}

/// A queue and [`MESSAGES`] messages sent to it, at indexes 1 and on.
fn workload() -> Vec<Entry<TypeConfig>> {
    let create = Command::CreateQueue {
        account: "dev".into(),
        queue_id: uuid::Uuid::from_u128(1),
        name: "jobs".into(),
        attributes: QueueAttributes::default(),
    };
    let sends = (0..MESSAGES).map(|i| {
        let body = format!("job {i} {}", "x".repeat(200));
        let send = Command::Send {
            account: "dev".into(),
            queue: "jobs".into(),
            message: NewMessage::new(uuid::Uuid::from_u128(100 + u128::from(i)), body),
        };
        entry(2 + i, send)
    });
    std::iter::once(entry(1, create)).chain(sends).collect()
}

/// A store that applied the workload.
async fn applied(node: &Node) -> Storage {
    let mut storage = node.open();
    storage
        .state_machine
        .apply(workload())
        .await
        .expect("apply");
    storage
}

/// A snapshot of `storage`'s state machine, built now.
async fn build(storage: &mut Storage) -> openraft::Snapshot<TypeConfig> {
    storage
        .state_machine
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("build")
}

fn held_now(storage: &Storage, snapshot: Option<String>) -> Held {
    Held {
        state: storage.state_machine.reader().digest().expect("digest"),
        snapshot,
    }
}

#[tokio::test]
async fn a_snapshot_built_when_the_power_is_lost_is_whole_or_gone_and_the_store_opens() {
    let node = Node::new();
    let mut storage = applied(&node).await;
    let before = (
        node.checkpoint(&storage, "before"),
        held_now(&storage, None),
    );
    let moments = record_syncs(&node.disk);
    let built = build(&mut storage).await;
    node.disk.no_sync_hook();
    let moments = taken(&moments);
    assert_eq!(moments.len(), 2, "the file's sync, then its directory's");
    let held = held_now(&storage, Some(built.meta.snapshot_id));
    let after = (node.checkpoint(&storage, "after"), held);
    node.images_hold(storage, &moments, &before, &after).await;
}

#[tokio::test]
async fn a_snapshot_received_when_the_power_is_lost_leaves_a_store_that_opens() {
    let source = Node::new();
    let mut sender = applied(&source).await;
    let built = build(&mut sender).await;
    let mut bytes = Vec::new();
    let mut sent = built.snapshot;
    sent.read_to_end(&mut bytes)
        .await
        .expect("read the snapshot");
    let expected_after = held_now(&sender, Some(built.meta.snapshot_id.clone()));

    let node = Node::new();
    let mut storage = node.open();
    let before = node.checkpoint(&storage, "before");
    let expected_before = held_now(&storage, None);
    let mut receiving = storage
        .state_machine
        .begin_receiving_snapshot()
        .await
        .expect("begin");
    let (first, second) = bytes.split_at(bytes.len() / 2);
    receiving.write_all(first).await.expect("write");
    let halfway = node.disk.freeze();
    receiving.write_all(second).await.expect("write");
    let moments = record_syncs(&node.disk);
    storage
        .state_machine
        .install_snapshot(&built.meta, receiving)
        .await
        .expect("install");
    node.disk.no_sync_hook();
    let mut moments = taken(&moments);
    assert_eq!(
        moments.len(),
        2,
        "the kept copy's sync, then its directory's"
    );
    moments.insert(0, halfway);
    assert_eq!(
        held_now(&storage, expected_after.snapshot.clone()),
        expected_after
    );
    let after = (node.checkpoint(&storage, "after"), expected_after);
    let before = (before, expected_before);
    node.images_hold(storage, &moments, &before, &after).await;
}
