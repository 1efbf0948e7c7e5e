//! Backups: a node's whole replicated state at one applied index as one file, and a new
//! cluster's first node restored from it.
//!
//! Format: the magic `RAFTQBK1`; the header's length (`u32`, little-endian) and the header
//! ([`BackupHeader`], postcard); one record per row of the state column family (as a snapshot
//! file has them: a row tag, the key's and the value's lengths as `u32` little-endian, each
//! followed by its bytes); an end tag and the row count (`u64`); the state digest of those rows
//! (as [`StateReader::digest`] computes it); and the SHA-256 of every byte before it. A reader
//! checks the count, the digest of the rows and the file's digest, so a truncated or damaged
//! backup is refused, never restored short.
//!
//! Writing reads one view of the database row by row, so a backup of any size holds one row in
//! memory at a time. A restore holds the rows once, as the engine it rebuilds holds their
//! messages.
//!
//! A restore writes into an empty data directory: the rows, with every lease and parked receive
//! of the old cluster's clients ended ([`Engine::end_leases_and_waits`]), installed as the
//! snapshot of a one-voter membership, the log purged up to it, and a new cluster id. The node
//! started on it leads a new cluster, which never answers the old one's nodes (their cluster id
//! differs); nodes added to it receive the state as a snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{BasicNode, CommittedLeaderId, LogId, Membership, SnapshotMeta, StoredMembership};
use raftq_engine::rows::{decode_key, KeyKind, RowError};
use raftq_engine::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::disk::RealDisk;
use crate::snapshot::SnapshotDir;
use crate::state_digest::StateDigest;
use crate::state_machine::StateReader;
use crate::types::NodeId;
use crate::{Enrolment, SnapshotFile, Work};

const MAGIC: &[u8; 8] = b"RAFTQBK1";
/// The header's format; a reader refuses others.
const FORMAT: u32 = 1;
const ROW: u8 = 1;
const END: u8 = 0;
/// The largest header a reader accepts: a header names a cluster, an index and a region.
const MAX_HEADER_BYTES: u32 = 64 * 1024;

/// Where a backup came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupHeader {
    pub format: u32,
    /// The cluster the state was copied from.
    pub cluster_id: Option<Uuid>,
    /// The index of the last entry the state reflects (none before the first).
    pub applied_index: Option<u64>,
    /// The region the cluster serves (queue ARNs name it).
    pub region: String,
    /// The engine's row format of the node that wrote it.
    pub row_format: u32,
    /// When the backup began, in milliseconds since the Unix epoch.
    pub taken_at_ms: u64,
}

/// What a backup holds, as [`write`] wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSummary {
    pub applied_index: Option<u64>,
    pub rows: u64,
    pub bytes: u64,
    /// The digest of the state at `applied_index`, as the node's `/v1/cluster/state` gives it.
    pub state_digest: String,
}

/// A backup read back whole and checked.
#[derive(Debug)]
pub struct Backup {
    pub header: BackupHeader,
    pub rows: StateRows,
    pub state_digest: String,
}

/// State rows (key, value), in key order.
pub type StateRows = Vec<(Vec<u8>, Vec<u8>)>;

/// Why a backup could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("cannot read the backup: {0}")]
    Io(#[from] io::Error),
    #[error(
        "not a raftq backup (its first bytes are not {:?})",
        String::from_utf8_lossy(MAGIC)
    )]
    NotABackup,
    #[error("the backup's header is unreadable: {0}")]
    Header(#[from] postcard::Error),
    #[error("the backup's format {found} is not one this build reads ({FORMAT})")]
    Format { found: u32 },
    #[error("the backup is damaged: {0}")]
    Damaged(&'static str),
}

/// Why a restore did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error(transparent)]
    Backup(#[from] BackupError),
    #[error(
        "the data directory {0} already holds a node's state; a restore starts a new cluster \
         and writes only into an empty directory"
    )]
    NotEmpty(PathBuf),
    #[error(transparent)]
    Storage(#[from] crate::StorageError),
    #[error("the backup's rows cannot be read by this build: {0}")]
    Rows(#[from] RowError),
    #[error("cannot write the restored state: {0}")]
    Write(String),
}

/// A writer that hashes and counts the bytes passing through it.
struct Hashing<W> {
    inner: W,
    hash: Sha256,
    bytes: u64,
}

impl<W: Write> Hashing<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.hash.update(bytes);
        self.bytes += bytes.len() as u64;
        Ok(())
    }
}

/// Writes a backup of the state `reader` holds to `out`, from one view of the database: every
/// row as of one applied index, whatever applies go on meanwhile. `cluster_id` is the cluster
/// the node belongs to and `taken_at_ms` when the backup began.
pub fn write(
    reader: &StateReader,
    cluster_id: Option<Uuid>,
    taken_at_ms: u64,
    out: impl Write,
) -> io::Result<BackupSummary> {
    let region = reader
        .with_engine(|e| e.region().to_string())
        .ok_or_else(|| io::Error::other("the engine's lock is poisoned"))?;
    reader.with_view(|applied_index, rows| {
        write_rows(
            header_of(cluster_id, applied_index, region, taken_at_ms),
            rows,
            out,
        )
    })
}

fn header_of(
    cluster_id: Option<Uuid>,
    applied_index: Option<u64>,
    region: String,
    taken_at_ms: u64,
) -> BackupHeader {
    BackupHeader {
        format: FORMAT,
        cluster_id,
        applied_index,
        region,
        row_format: raftq_engine::rows::FORMAT_VERSION,
        taken_at_ms,
    }
}

/// Writes the backup of `rows` to `out`.
fn write_rows(
    header: BackupHeader,
    rows: crate::state_machine::Rows<'_>,
    out: impl Write,
) -> io::Result<BackupSummary> {
    let encoded = postcard::to_allocvec(&header).map_err(io::Error::other)?;
    let mut out = Hashing {
        inner: out,
        hash: Sha256::new(),
        bytes: 0,
    };
    out.put(MAGIC)?;
    out.put(
        &u32::try_from(encoded.len())
            .map_err(io::Error::other)?
            .to_le_bytes(),
    )?;
    out.put(&encoded)?;
    let mut digest = StateDigest::default();
    let mut count = 0u64;
    for row in rows {
        let (key, value) = row?;
        digest.add(&key, &value);
        out.put(&[ROW])?;
        for part in [&key, &value] {
            out.put(
                &u32::try_from(part.len())
                    .map_err(io::Error::other)?
                    .to_le_bytes(),
            )?;
            out.put(part)?;
        }
        count += 1;
    }
    out.put(&[END])?;
    out.put(&count.to_le_bytes())?;
    let state_digest = digest.finish();
    out.put(&hex::decode(&state_digest).map_err(io::Error::other)?)?;
    let file_digest = out.hash.clone().finalize();
    out.inner.write_all(&file_digest)?;
    out.inner.flush()?;
    Ok(BackupSummary {
        applied_index: header.applied_index,
        rows: count,
        bytes: out.bytes + file_digest.len() as u64,
        state_digest,
    })
}

/// A reader that hashes the bytes it reads.
struct Checked<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Checked<R> {
    fn exact<const N: usize>(&mut self) -> Result<[u8; N], BackupError> {
        let mut bytes = [0u8; N];
        self.fill(&mut bytes)?;
        Ok(bytes)
    }

    fn fill(&mut self, bytes: &mut [u8]) -> Result<(), BackupError> {
        self.inner.read_exact(bytes).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => BackupError::Damaged("it ends before its end marker"),
            _ => BackupError::Io(e),
        })?;
        self.hash.update(&*bytes);
        Ok(())
    }

    /// A part preceded by its length, read as it comes so that a damaged length allocates no
    /// more than the file holds.
    fn part(&mut self) -> Result<Vec<u8>, BackupError> {
        let len = u64::from(u32::from_le_bytes(self.exact()?));
        let mut part = Vec::new();
        (&mut self.inner).take(len).read_to_end(&mut part)?;
        if part.len() as u64 != len {
            return Err(BackupError::Damaged("it ends inside a row"));
        }
        self.hash.update(&part);
        Ok(part)
    }
}

/// Reads a whole backup from `source` and checks it: its format, its row count, the digest of
/// its rows and its own digest.
pub fn read(source: impl Read) -> Result<Backup, BackupError> {
    let mut input = Checked {
        inner: io::BufReader::new(source),
        hash: Sha256::new(),
    };
    if &input.exact::<8>().map_err(|_| BackupError::NotABackup)? != MAGIC {
        return Err(BackupError::NotABackup);
    }
    let header_len = u32::from_le_bytes(input.exact()?);
    if header_len > MAX_HEADER_BYTES {
        return Err(BackupError::Damaged("its header is longer than any header"));
    }
    let mut encoded = vec![0u8; header_len as usize];
    input.fill(&mut encoded)?;
    let header: BackupHeader = postcard::from_bytes(&encoded)?;
    if header.format != FORMAT {
        return Err(BackupError::Format {
            found: header.format,
        });
    }
    let mut rows = Vec::new();
    let mut digest = StateDigest::default();
    loop {
        match input.exact::<1>()?[0] {
            ROW => {
                let key = input.part()?;
                let value = input.part()?;
                digest.add(&key, &value);
                rows.push((key, value));
            }
            END => break,
            _ => return Err(BackupError::Damaged("a record has an unknown tag")),
        }
    }
    if u64::from_le_bytes(input.exact()?) != rows.len() as u64 {
        return Err(BackupError::Damaged(
            "its row count does not match its rows",
        ));
    }
    let state_digest = digest.finish();
    if hex::encode(input.exact::<32>()?) != state_digest {
        return Err(BackupError::Damaged(
            "its state digest does not match its rows",
        ));
    }
    let computed = input.hash.finalize();
    let mut stored = [0u8; 32];
    input
        .inner
        .read_exact(&mut stored)
        .map_err(|_| BackupError::Damaged("it ends before its digest"))?;
    if computed.as_slice() != stored {
        return Err(BackupError::Damaged(
            "its digest does not match its contents",
        ));
    }
    if input.inner.read(&mut [0u8; 1])? != 0 {
        return Err(BackupError::Damaged("it goes on after its digest"));
    }
    Ok(Backup {
        header,
        rows,
        state_digest,
    })
}

/// The node a restore makes: the first and only voter of a new cluster.
#[derive(Debug, Clone)]
pub struct RestoreTarget {
    pub data_dir: PathBuf,
    pub node_id: NodeId,
    /// The address its peers reach it at (`--raft-listen` of the node started on it).
    pub raft_addr: String,
}

/// What a restore made.
#[derive(Debug, Clone)]
pub struct Restored {
    /// The new cluster's id.
    pub cluster_id: Uuid,
    /// The index of the snapshot the node starts from (the backup's applied index, at least 1).
    pub applied_index: u64,
    pub rows: usize,
    /// Leases of the old cluster's clients that ended, their messages visible again.
    pub leases_ended: usize,
    /// The digest of the backup's state, and of the state as restored: equal when no lease or
    /// parked receive had to end.
    pub backup_digest: String,
    pub state_digest: String,
}

/// Restores `backup` into `target`'s data directory, which must hold no node's state.
pub async fn restore(backup: Backup, target: &RestoreTarget) -> Result<Restored, RestoreError> {
    let storage = crate::open(&target.data_dir, &backup.header.region)?;
    let crate::Storage {
        mut log,
        mut state_machine,
        ..
    } = storage;
    let enrolment = log.enrolment().map_err(write_failed)?;
    if log.holds_raft_state().map_err(write_failed)?
        || state_machine.last_applied().is_some()
        || enrolment.cluster_id.is_some()
    {
        return Err(RestoreError::NotEmpty(target.data_dir.clone()));
    }
    let (rows, leases_ended) = handed_off(&backup)?;
    let staging = SnapshotDir::open(Arc::new(RealDisk), target.data_dir.join("restoring"), None)
        .map_err(write_failed)?;
    let name = staging
        .write_rows(
            rows.iter()
                .map(|(k, v)| Ok((k.clone().into_boxed_slice(), v.clone().into_boxed_slice()))),
        )
        .map_err(write_failed)?;
    let applied = LogId::new(
        CommittedLeaderId::new(1, target.node_id),
        backup.header.applied_index.unwrap_or(0).max(1),
    );
    let nodes = BTreeMap::from([(target.node_id, BasicNode::new(&target.raft_addr))]);
    let membership = Membership::new(vec![BTreeSet::from([target.node_id])], nodes);
    let meta = SnapshotMeta {
        last_log_id: Some(applied),
        last_membership: StoredMembership::new(Some(applied), membership),
        snapshot_id: format!("restored-{}", applied.index),
    };
    let file = SnapshotFile::open(&staging, &name, Work::Threads)
        .await
        .map_err(write_failed)?;
    state_machine
        .install_snapshot(&meta, Box::new(file))
        .await
        .map_err(write_failed)?;
    log.purge(applied).await.map_err(write_failed)?;
    let cluster_id = crate::random::uuid();
    log.save_enrolment(&Enrolment {
        cluster_id: Some(cluster_id),
        joining: false,
    })
    .await
    .map_err(write_failed)?;
    std::fs::remove_dir_all(target.data_dir.join("restoring")).map_err(write_failed)?;
    let (_, state_digest) = state_machine.reader().digest().map_err(write_failed)?;
    Ok(Restored {
        cluster_id,
        applied_index: applied.index,
        rows: rows.len(),
        leases_ended,
        backup_digest: backup.state_digest,
        state_digest,
    })
}

/// The backup's rows as the new cluster starts with them, in key order: the engine's, with the
/// old clients' leases and waits ended, and the payloads as they are. Also how many leases
/// ended.
fn handed_off(backup: &Backup) -> Result<(StateRows, usize), RestoreError> {
    let mut engine = Engine::restore(backup.header.region.clone(), backup.rows.iter().cloned())?;
    let leases_ended = engine.end_leases_and_waits();
    let mut rows = engine.export_rows();
    for (key, value) in &backup.rows {
        if matches!(decode_key(key)?, KeyKind::Payload(_)) {
            rows.push((key.clone(), value.clone()));
        }
    }
    rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok((rows, leases_ended))
}

fn write_failed(e: impl std::fmt::Display) -> RestoreError {
    RestoreError::Write(e.to_string())
}
