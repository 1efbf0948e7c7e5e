//! Backups: a node's whole replicated state, every Raft group's at one applied index of its
//! own, as one file, and a new cluster's first node restored from it.
//!
//! Format: the magic `RAFTQBK1`; the header's length (`u32`, little-endian) and the header
//! ([`BackupHeader`], postcard); one section per group, in group order, group 1 first; a
//! finish tag and the SHA-256 of every byte before it. A section is its tag, the group (`u32`),
//! whether an index follows (a byte) and the index (`u64`); one record per row of the group's
//! state column family (as a snapshot file has them: a row tag, the key's and the value's
//! lengths as `u32` little-endian, each followed by its bytes); an end tag and the row count
//! (`u64`); and the state digest of those rows (as [`StateReader::digest`] computes it). A reader
//! checks every count and digest, so a truncated or damaged backup is refused, never restored
//! short. A backup of format 1 (before clusters of several groups) is group 1's rows alone, at
//! the header's index, without a section's tag, group and index; it reads as ever.
//!
//! Writing reads one view of a group's database row by row, so a backup of any size holds one
//! row in memory at a time; a group this node holds no replica of is written by a member and
//! copied in as it comes ([`write_section`], [`BackupWriter::copy`]). The groups' indexes are
//! their own: each is at least as new as every write its group committed before the backup
//! began. A restore holds one group's rows at a time, as the engine it rebuilds holds their
//! messages.
//!
//! A restore writes into an empty data directory: each group's rows, with every lease and
//! parked receive of the old cluster's clients ended ([`Engine::end_leases_and_waits`]),
//! installed as the snapshot of a one-voter membership, the group's log purged up to it, and a
//! new cluster id. The placement in group 1 names the restored node as the one node and the one
//! member of every group ([`Engine::restart_placement_on`]). The node started on it leads a new
//! cluster, which never answers the old one's nodes (their cluster id differs); nodes added to
//! it receive the state as snapshots, and the groups' replicas spread over them.

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
use crate::snapshot::{Hashing, SnapshotDir};
use crate::state_digest::StateDigest;
use crate::state_machine::StateReader;
use crate::types::{GroupId, NodeId};
use crate::{Enrolment, LogStore, RocksStateMachine, SnapshotFile, TypeConfig, Work};

const MAGIC: &[u8; 8] = b"RAFTQBK1";
/// The header's format this build writes: a section per group.
const FORMAT: u32 = 2;
/// The format of a backup of group 1 alone, without sections, which this build reads too.
const ONE_GROUP: u32 = 1;
const END: u8 = 0;
const ROW: u8 = 1;
const SECTION: u8 = 2;
const FINISH: u8 = 3;
/// The largest header a reader accepts: a header names a cluster, an index and a region.
const MAX_HEADER_BYTES: u32 = 64 * 1024;

/// Where a backup came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupHeader {
    pub format: u32,
    /// The cluster the state was copied from.
    pub cluster_id: Option<Uuid>,
    /// Format 1: the index of the last entry the state reflects (none before the first).
    /// Format 2: none; each group's section names its own.
    pub applied_index: Option<u64>,
    /// The region the cluster serves (queue ARNs name it).
    pub region: String,
    /// The engine's row format of the node that wrote it.
    pub row_format: u32,
    /// When the backup began, in milliseconds since the Unix epoch.
    pub taken_at_ms: u64,
}

/// What one group's section holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionSummary {
    pub group: GroupId,
    /// The index of the last entry of the group that its rows reflect.
    pub applied_index: Option<u64>,
    pub rows: u64,
    /// The digest of the group's state at `applied_index`, as its replicas' `digest` gives it.
    pub state_digest: String,
}

/// What a backup holds, as [`BackupWriter`] wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSummary {
    pub bytes: u64,
    /// Its groups' sections, in group order.
    pub sections: Vec<SectionSummary>,
}

/// A backup read back whole and checked.
#[derive(Debug)]
pub struct Backup {
    pub header: BackupHeader,
    /// Every group's state, in group order, group 1 first.
    pub groups: Vec<GroupState>,
}

/// One group's state in a backup.
#[derive(Debug)]
pub struct GroupState {
    pub group: GroupId,
    pub applied_index: Option<u64>,
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
    #[error("the backup's format {found} is not one this build reads ({ONE_GROUP} or {FORMAT})")]
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

/// A backup file being written: its header, then each group's section in group order, then
/// its end ([`BackupWriter::finish`]).
pub struct BackupWriter<W> {
    out: Hashing<W>,
    sections: Vec<SectionSummary>,
}

impl<W: Write> BackupWriter<W> {
    /// Writes the header of a backup of cluster `cluster_id`, serving `region`, begun at
    /// `taken_at_ms`.
    pub fn start(
        cluster_id: Option<Uuid>,
        region: String,
        taken_at_ms: u64,
        out: W,
    ) -> io::Result<BackupWriter<W>> {
        let header = BackupHeader {
            format: FORMAT,
            cluster_id,
            applied_index: None,
            region,
            row_format: raftq_engine::rows::FORMAT_VERSION,
            taken_at_ms,
        };
        let encoded = postcard::to_allocvec(&header).map_err(io::Error::other)?;
        let mut out = Hashing::new(out);
        out.write_all(MAGIC)?;
        out.write_all(&length(encoded.len())?)?;
        out.write_all(&encoded)?;
        Ok(BackupWriter {
            out,
            sections: Vec::new(),
        })
    }

    /// Writes `group`'s section from one view of the state `reader` holds.
    pub fn add(&mut self, group: GroupId, reader: &StateReader) -> io::Result<()> {
        let summary = write_section(group, reader, &mut self.out)?;
        self.sections.push(summary);
        Ok(())
    }

    /// Writes bytes of a section another node writes ([`write_section`]), as they come.
    pub fn copy(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)
    }

    /// Records what a section copied whole ([`BackupWriter::copy`]) holds.
    pub fn copied(&mut self, summary: SectionSummary) {
        self.sections.push(summary);
    }

    /// Ends the backup with its digest and flushes it.
    pub fn finish(mut self) -> io::Result<BackupSummary> {
        self.out.write_all(&[FINISH])?;
        let file_digest = self.out.hash.clone().finalize();
        self.out.inner.write_all(&file_digest)?;
        self.out.inner.flush()?;
        Ok(BackupSummary {
            bytes: self.out.written + file_digest.len() as u64,
            sections: self.sections,
        })
    }
}

/// A part's length as it is written before it.
fn length(len: usize) -> io::Result<[u8; 4]> {
    Ok(u32::try_from(len).map_err(io::Error::other)?.to_le_bytes())
}

/// Writes `group`'s section of a backup to `out`, from one view of the state `reader` holds:
/// every row as of one applied index, whatever applies go on meanwhile.
pub fn write_section(
    group: GroupId,
    reader: &StateReader,
    out: impl Write,
) -> io::Result<SectionSummary> {
    reader.with_view(|applied_index, rows| section(group, applied_index, rows, out))
}

/// Writes the section of `group`'s `rows` at `applied_index` to `out`.
fn section(
    group: GroupId,
    applied_index: Option<u64>,
    rows: crate::state_machine::Rows<'_>,
    mut out: impl Write,
) -> io::Result<SectionSummary> {
    out.write_all(&[SECTION])?;
    out.write_all(&group.0.to_le_bytes())?;
    out.write_all(&[u8::from(applied_index.is_some())])?;
    out.write_all(&applied_index.unwrap_or(0).to_le_bytes())?;
    let (rows, state_digest) = write_rows(rows, &mut out)?;
    Ok(SectionSummary {
        group,
        applied_index,
        rows,
        state_digest,
    })
}

/// Writes `rows`, then the end tag, their count and their digest; returns the count and the
/// digest.
fn write_rows(
    rows: crate::state_machine::Rows<'_>,
    out: &mut impl Write,
) -> io::Result<(u64, String)> {
    let mut digest = StateDigest::default();
    let mut count = 0u64;
    for row in rows {
        let (key, value) = row?;
        digest.add(&key, &value);
        out.write_all(&[ROW])?;
        for part in [&key, &value] {
            out.write_all(&length(part.len())?)?;
            out.write_all(part)?;
        }
        count += 1;
    }
    out.write_all(&[END])?;
    out.write_all(&count.to_le_bytes())?;
    let state_digest = digest.finish();
    out.write_all(&hex::decode(&state_digest).map_err(io::Error::other)?)?;
    Ok((count, state_digest))
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

    /// A group's rows up to their end tag, checked against the count and the digest after it.
    fn rows(
        &mut self,
        group: GroupId,
        applied_index: Option<u64>,
    ) -> Result<GroupState, BackupError> {
        let mut rows = Vec::new();
        let mut digest = StateDigest::default();
        loop {
            match self.exact::<1>()?[0] {
                ROW => {
                    let key = self.part()?;
                    let value = self.part()?;
                    digest.add(&key, &value);
                    rows.push((key, value));
                }
                END => break,
                _ => return Err(BackupError::Damaged("a record has an unknown tag")),
            }
        }
        if u64::from_le_bytes(self.exact()?) != rows.len() as u64 {
            return Err(BackupError::Damaged("a row count does not match its rows"));
        }
        let state_digest = digest.finish();
        if hex::encode(self.exact::<32>()?) != state_digest {
            return Err(BackupError::Damaged(
                "a state digest does not match its rows",
            ));
        }
        Ok(GroupState {
            group,
            applied_index,
            rows,
            state_digest,
        })
    }

    /// The sections of a backup of format 2, up to its finish tag.
    fn sections(&mut self) -> Result<Vec<GroupState>, BackupError> {
        let mut groups: Vec<GroupState> = Vec::new();
        loop {
            match self.exact::<1>()?[0] {
                SECTION => {
                    let group = GroupId(u32::from_le_bytes(self.exact()?));
                    let indexed = self.exact::<1>()?[0];
                    let index = u64::from_le_bytes(self.exact()?);
                    let applied_index = match indexed {
                        0 => None,
                        1 => Some(index),
                        _ => return Err(BackupError::Damaged("a section's index is unreadable")),
                    };
                    let in_order = match groups.last() {
                        None => group == GroupId::FIRST,
                        Some(last) => last.group < group,
                    };
                    if !in_order {
                        return Err(BackupError::Damaged(
                            "its groups are not in order from group 1",
                        ));
                    }
                    groups.push(self.rows(group, applied_index)?);
                }
                FINISH if !groups.is_empty() => return Ok(groups),
                _ => return Err(BackupError::Damaged("a section has an unknown tag")),
            }
        }
    }
}

/// Reads a whole backup from `source` and checks it: its format, its sections' row counts and
/// digests, and its own digest.
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
    let groups = match header.format {
        ONE_GROUP => vec![input.rows(GroupId::FIRST, header.applied_index)?],
        FORMAT => input.sections()?,
        found => return Err(BackupError::Format { found }),
    };
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
    Ok(Backup { header, groups })
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
    /// Each group, in group order.
    pub groups: Vec<RestoredGroup>,
}

/// What a restore made of one group.
#[derive(Debug, Clone)]
pub struct RestoredGroup {
    pub group: GroupId,
    /// The index of the snapshot the group starts from (the backup's index, at least 1).
    pub applied_index: u64,
    pub rows: usize,
    /// Leases of the old cluster's clients that ended, their messages visible again.
    pub leases_ended: usize,
    /// The digest of the backup's state, and of the state as restored: equal when no lease,
    /// parked receive or placement had to change.
    pub backup_digest: String,
    pub state_digest: String,
}

/// Restores `backup` into `target`'s data directory, which must hold no node's state.
pub async fn restore(backup: Backup, target: &RestoreTarget) -> Result<Restored, RestoreError> {
    let crate::Storage {
        mut log,
        mut state_machine,
        node,
        ..
    } = crate::open(&target.data_dir, &backup.header.region)?;
    let enrolment = log.enrolment().map_err(write_failed)?;
    if log.holds_raft_state().map_err(write_failed)?
        || state_machine.last_applied().is_some()
        || enrolment.cluster_id.is_some()
        || node.groups() != [GroupId::FIRST]
    {
        return Err(RestoreError::NotEmpty(target.data_dir.clone()));
    }
    let mut groups = Vec::new();
    for state in backup.groups {
        let rows = handed_off(&backup.header.region, &state, target)?;
        let restored = if state.group == GroupId::FIRST {
            install(state, rows, &mut log, &mut state_machine, target).await?
        } else {
            let crate::GroupStorage {
                mut log,
                mut state_machine,
            } = node.open_group(state.group)?;
            install(state, rows, &mut log, &mut state_machine, target).await?
        };
        groups.push(restored);
    }
    let cluster_id = crate::random::uuid();
    log.save_enrolment(&Enrolment {
        cluster_id: Some(cluster_id),
        joining: false,
    })
    .await
    .map_err(write_failed)?;
    Ok(Restored { cluster_id, groups })
}

/// Installs a group's `rows` (from `state` in the backup) in its `log` and `state_machine`, as
/// the snapshot of a membership of `target` alone, and purges the log up to it.
async fn install(
    state: GroupState,
    (rows, leases_ended): (StateRows, usize),
    log: &mut LogStore<TypeConfig>,
    state_machine: &mut RocksStateMachine,
    target: &RestoreTarget,
) -> Result<RestoredGroup, RestoreError> {
    let staging_dir = target.data_dir.join("restoring");
    let staging =
        SnapshotDir::open(Arc::new(RealDisk), staging_dir.clone(), None).map_err(write_failed)?;
    let name = staging.write_rows(boxed(&rows)).map_err(write_failed)?;
    let applied = LogId::new(
        CommittedLeaderId::new(1, target.node_id),
        state.applied_index.unwrap_or(0).max(1),
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
    std::fs::remove_dir_all(&staging_dir).map_err(write_failed)?;
    let (_, state_digest) = state_machine.reader().digest().map_err(write_failed)?;
    Ok(RestoredGroup {
        group: state.group,
        applied_index: applied.index,
        rows: rows.len(),
        leases_ended,
        backup_digest: state.state_digest,
        state_digest,
    })
}

/// A group's rows as the new cluster starts with them, in key order: the engine's, with the old
/// clients' leases and waits ended and the placement laid on `target` alone, and the payloads
/// as they are. Also how many leases ended.
fn handed_off(
    region: &str,
    state: &GroupState,
    target: &RestoreTarget,
) -> Result<(StateRows, usize), RestoreError> {
    let mut engine = Engine::restore(region.to_string(), state.rows.iter().cloned())?;
    let leases_ended = engine.end_leases_and_waits();
    engine.restart_placement_on(target.node_id, &target.raft_addr);
    let mut rows = engine.export_rows();
    for (key, value) in &state.rows {
        if matches!(decode_key(key)?, KeyKind::Payload(_)) {
            rows.push((key.clone(), value.clone()));
        }
    }
    rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok((rows, leases_ended))
}

/// A row as a snapshot file's writer and a section's take it.
type BoxedRow = (Box<[u8]>, Box<[u8]>);

/// `rows` as a snapshot file's writer and a section's take them.
fn boxed(rows: &[(Vec<u8>, Vec<u8>)]) -> impl Iterator<Item = io::Result<BoxedRow>> + '_ {
    rows.iter()
        .map(|(k, v)| Ok((k.clone().into_boxed_slice(), v.clone().into_boxed_slice())))
}

fn write_failed(e: impl std::fmt::Display) -> RestoreError {
    RestoreError::Write(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    type Row = (Vec<u8>, Vec<u8>);

    fn rows(prefix: u8, count: u8) -> Vec<Row> {
        (0..count).map(|i| (vec![prefix, i], vec![i; 3])).collect()
    }

    /// The section of `rows` of `group` at `index`, as a member writes it for another node.
    fn section_bytes(group: u32, index: Option<u64>, rows: &[Row]) -> (Vec<u8>, SectionSummary) {
        let mut iter = boxed(rows);
        let mut bytes = Vec::new();
        let summary = section(GroupId(group), index, &mut iter, &mut bytes).expect("section");
        (bytes, summary)
    }

    /// A backup of format 2 with a section per `(group, index, rows)`.
    fn backup_of(groups: &[(u32, Option<u64>, Vec<Row>)]) -> (Vec<u8>, BackupSummary) {
        let mut file = Vec::new();
        let mut writer = BackupWriter::start(None, "test-1".into(), 42, &mut file).expect("header");
        for (group, index, rows) in groups {
            let (bytes, summary) = section_bytes(*group, *index, rows);
            for chunk in bytes.chunks(7) {
                writer.copy(chunk).expect("copy");
            }
            writer.copied(summary);
        }
        let summary = writer.finish().expect("finish");
        (file, summary)
    }

    #[test]
    fn every_groups_section_reads_back_as_written() {
        let groups = [
            (1, Some(40), rows(1, 3)),
            (2, None, Vec::new()),
            (5, Some(7), rows(9, 2)),
        ];
        let (file, summary) = backup_of(&groups);
        assert_eq!(summary.bytes, file.len() as u64);
        let read = read(file.as_slice()).expect("a whole backup");
        assert_eq!(read.header.format, FORMAT);
        assert_eq!(read.header.region, "test-1");
        assert_eq!(read.groups.len(), 3);
        for ((group, index, rows), (state, written)) in
            groups.iter().zip(read.groups.iter().zip(&summary.sections))
        {
            assert_eq!(state.group, GroupId(*group));
            assert_eq!(state.applied_index, *index);
            assert_eq!(&state.rows, rows);
            assert_eq!(state.state_digest, written.state_digest);
            assert_eq!(written.rows, rows.len() as u64);
        }
    }

    #[test]
    fn a_backup_of_one_group_without_sections_still_reads() {
        let header = BackupHeader {
            format: ONE_GROUP,
            cluster_id: Some(Uuid::from_u128(9)),
            applied_index: Some(12),
            region: "test-1".into(),
            row_format: 1,
            taken_at_ms: 1,
        };
        let encoded = postcard::to_allocvec(&header).expect("header");
        let mut file = MAGIC.to_vec();
        file.extend(length(encoded.len()).expect("length"));
        file.extend(encoded);
        let rows = rows(4, 5);
        let mut iter = boxed(&rows);
        let (_, digest) = write_rows(&mut iter, &mut file).expect("rows");
        let sum = Sha256::digest(&file);
        file.extend(sum);
        let read = read(file.as_slice()).expect("a whole backup");
        assert_eq!(read.header, header);
        assert_eq!(read.groups.len(), 1);
        assert_eq!(read.groups[0].group, GroupId::FIRST);
        assert_eq!(read.groups[0].applied_index, Some(12));
        assert_eq!(read.groups[0].rows, rows);
        assert_eq!(read.groups[0].state_digest, digest);
    }

    /// The error `read` gives for `file`.
    fn refusal(file: &[u8]) -> String {
        read(file).expect_err("refused").to_string()
    }

    #[test]
    fn a_damaged_truncated_or_disordered_backup_is_refused() {
        let (file, _) = backup_of(&[(1, Some(3), rows(1, 4)), (2, Some(3), rows(2, 4))]);
        for at in [20, file.len() / 2, file.len() - 40, file.len() - 1] {
            let mut damaged = file.clone();
            damaged[at] ^= 0x10;
            assert!(refusal(&damaged).contains("damaged"), "a flip at {at}");
        }
        for keep in [10, file.len() / 2, file.len() - 1] {
            assert!(refusal(&file[..keep]).contains("damaged"), "cut at {keep}");
        }
        let mut longer = file.clone();
        longer.push(0);
        assert!(refusal(&longer).contains("goes on after"));
        let (second_first, _) = backup_of(&[(2, None, Vec::new()), (1, None, Vec::new())]);
        assert!(refusal(&second_first).contains("not in order"));
        let (twice, _) = backup_of(&[(1, None, Vec::new()), (1, None, Vec::new())]);
        assert!(refusal(&twice).contains("not in order"));
        let (none, _) = backup_of(&[]);
        assert!(refusal(&none).contains("unknown tag"));
        assert!(refusal(b"not a backup at all").contains("not a raftq backup"));
    }
}
