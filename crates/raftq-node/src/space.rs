//! The room left on the disk of a node's data directory, and the writes a leader refuses for
//! want of it (`storage_full`), so that the disk never fills under the log and the state store.
//!
//! Two rules, checked by the leader before it proposes a client's write:
//! - *Writes that add data* (sends, new queues, queue settings, move tasks) are refused once the
//!   file system's free space is below `--min-free-bytes`. Acks, receives, lease changes,
//!   purges and queue deletions still go through: they add little, and acks, purges and
//!   deletions are what frees space (once the log behind them is snapshotted and purged).
//! - *Every* client write is refused while the log is short of room: no spare segment file
//!   could be made and the newest segment has little left, or an append is already waiting for
//!   room (`raftq_store::LogRoom::is_short`). The leader's ticks still go through, so that
//!   leases end and delays pass.
//!
//! A follower checks nothing: its appends wait for room (see `raftq_store::log_store`) while
//! the leader and the other followers commit without it.
//!
//! Both readings are taken every [`REFRESH`] by a task of the node (a `statvfs` call and a look
//! at the log), not per request; a write checks the readings in memory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use raftq_engine::Command;
use raftq_store::LogRoom;
use tokio::sync::watch;

use crate::error::NodeError;
use crate::pace::Pace;

/// How often the readings are taken again.
pub(crate) const REFRESH: Duration = Duration::from_millis(250);

/// The space of the file system holding the data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filesystem {
    /// Bytes an unprivileged process may still write.
    pub avail_bytes: u64,
    pub size_bytes: u64,
}

impl Filesystem {
    /// The space of the file system holding `dir`; `None` (and a warning) when it cannot be
    /// read.
    pub fn of(dir: &Path) -> Option<Filesystem> {
        match nix::sys::statvfs::statvfs(dir) {
            Ok(stat) => {
                let fragment = stat.fragment_size();
                Some(Filesystem {
                    avail_bytes: stat.blocks_available().saturating_mul(fragment),
                    size_bytes: stat.blocks().saturating_mul(fragment),
                })
            }
            Err(e) => {
                tracing::warn!(error = %e, dir = %dir.display(), "cannot read the data directory's free space");
                None
            }
        }
    }
}

/// Which client writes a node refuses for want of space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusing {
    /// None.
    Nothing,
    /// Those that add data: the free space is below `--min-free-bytes`.
    AddingData,
    /// Every one: the log has no room left.
    Everything,
}

/// What a node knows of its space, for its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceReading {
    /// The data directory's file system, as last read.
    pub filesystem: Option<Filesystem>,
    /// What the node refuses now.
    pub refusing: Refusing,
    /// Appends of the log that had to wait for room, since the node started.
    pub log_room_waits: u64,
}

/// The readings of a node's space and the rules over them.
#[derive(Debug)]
pub(crate) struct Space {
    dir: PathBuf,
    min_free_bytes: u64,
    log: LogRoom,
    /// Free bytes as last read (`u64::MAX` until read, or when they cannot be).
    avail_bytes: AtomicU64,
    /// The file system's size as last read (0 when unknown).
    size_bytes: AtomicU64,
    /// Whether the log was short of room when last read.
    log_short: AtomicBool,
}

impl Space {
    /// The space of the data directory `dir`, whose log is `log`, refusing writes that add data
    /// below `min_free_bytes` free (0: never), read once now.
    pub(crate) fn new(dir: &Path, min_free_bytes: u64, log: LogRoom) -> Space {
        let space = Space {
            dir: dir.to_path_buf(),
            min_free_bytes,
            log,
            avail_bytes: AtomicU64::new(u64::MAX),
            size_bytes: AtomicU64::new(0),
            log_short: AtomicBool::new(false),
        };
        space.refresh();
        space
    }

    /// Takes the readings again.
    pub(crate) fn refresh(&self) {
        let filesystem = Filesystem::of(&self.dir);
        let avail = filesystem.map_or(u64::MAX, |f| f.avail_bytes);
        self.avail_bytes.store(avail, Ordering::Relaxed);
        self.size_bytes
            .store(filesystem.map_or(0, |f| f.size_bytes), Ordering::Relaxed);
        self.log_short.store(self.log.is_short(), Ordering::Relaxed);
    }

    /// What the readings refuse now.
    pub(crate) fn refusing(&self) -> Refusing {
        if self.log.waiting() || self.log_short.load(Ordering::Relaxed) {
            Refusing::Everything
        } else if self.avail_bytes.load(Ordering::Relaxed) < self.min_free_bytes {
            Refusing::AddingData
        } else {
            Refusing::Nothing
        }
    }

    /// `Ok` when `command` may be proposed; a [`NodeError::StorageFull`] that says why when the
    /// space refuses it.
    pub(crate) fn admits(&self, command: &Command) -> Result<(), NodeError> {
        let refusing = self.refusing();
        if refusing == Refusing::Nothing || matches!(command, Command::Tick) {
            return Ok(());
        }
        if refusing == Refusing::AddingData && !adds_data(command) {
            return Ok(());
        }
        let avail = self.avail_bytes.load(Ordering::Relaxed);
        Err(NodeError::StorageFull(match refusing {
            Refusing::AddingData => format!(
                "the data directory's disk has {avail} bytes free, below --min-free-bytes \
                 ({}): writes that add data are refused; acks, deletes and purges still work",
                self.min_free_bytes
            ),
            _ => format!(
                "the data directory's disk is full ({avail} bytes free): the Raft log has no \
                 room for a new segment, and every write is refused until space is freed"
            ),
        }))
    }

    /// The readings, for the metrics.
    pub(crate) fn reading(&self) -> SpaceReading {
        let avail_bytes = self.avail_bytes.load(Ordering::Relaxed);
        SpaceReading {
            filesystem: (avail_bytes != u64::MAX).then(|| Filesystem {
                avail_bytes,
                size_bytes: self.size_bytes.load(Ordering::Relaxed),
            }),
            refusing: self.refusing(),
            log_room_waits: self.log.waits(),
        }
    }
}

/// Whether `command` adds data to the state: what `--min-free-bytes` refuses. Commands that
/// delete, change what is there or only deliver it are let through, and so is any command added
/// later only once it is listed here.
fn adds_data(command: &Command) -> bool {
    !matches!(
        command,
        Command::Ack { .. }
            | Command::ChangeLease { .. }
            | Command::Purge { .. }
            | Command::DeleteQueue { .. }
            | Command::CancelMoveTask { .. }
            | Command::Receive { .. }
            | Command::ReceiveWait { .. }
            | Command::EndWait { .. }
            | Command::Tick
            | Command::Place { .. }
            | Command::OutboxDone { .. }
    )
}

/// Takes the readings of `space` every [`REFRESH`] until `shutdown`, logging when what it
/// refuses changes.
pub(crate) async fn run(space: std::sync::Arc<Space>, shutdown: watch::Receiver<bool>) {
    let mut pace = Pace::new(REFRESH, shutdown);
    let mut refusing = space.refusing();
    while pace.tick().await {
        space.refresh();
        let now = space.refusing();
        if now != refusing {
            let avail_bytes = space.avail_bytes.load(Ordering::Relaxed);
            match now {
                Refusing::Nothing => {
                    tracing::info!(
                        avail_bytes,
                        "the data directory has room again: writes are admitted"
                    )
                }
                _ => tracing::warn!(
                    avail_bytes,
                    min_free_bytes = space.min_free_bytes,
                    refusing = ?now,
                    "the data directory is short of space: writes are refused (storage_full)"
                ),
            }
            refusing = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_data_lets_through_what_frees_or_keeps_space() {
        let ack = Command::Ack {
            account: "a".into(),
            queue: "q".into(),
            receipts: vec![],
        };
        let delete = Command::DeleteQueue {
            account: "a".into(),
            queue: "q".into(),
        };
        let purge = Command::Purge {
            account: "a".into(),
            queue: "q".into(),
        };
        let delivered = Command::OutboxDone {
            results: Vec::new(),
        };
        for command in [&ack, &delete, &purge, &Command::Tick, &delivered] {
            assert!(!adds_data(command), "{command:?}");
        }
        let create = Command::CreateQueue {
            account: "a".into(),
            queue_id: uuid::Uuid::nil(),
            name: "q".into(),
            attributes: Default::default(),
        };
        assert!(adds_data(&create));
    }

    #[test]
    fn the_data_directory_s_space_is_read() {
        let dir = tempfile::TempDir::new().expect("temp dir");
        let space = Filesystem::of(dir.path()).expect("statvfs");
        assert!(
            space.size_bytes > 0 && space.avail_bytes <= space.size_bytes,
            "{space:?}"
        );
        assert_eq!(Filesystem::of(&dir.path().join("missing")), None);
    }
}
