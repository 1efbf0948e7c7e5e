//! The Raft log's entries in segment files, written in place.
//!
//! A segment is a file of fixed size, filled with zeros and synced before its first use (or
//! recycled from a purged segment), named for the index of its first entry. Appends write records
//! one after the other into the newest segment and an fsync makes them durable. Because the file
//! neither grows nor gains blocks, that fsync writes the data alone: the file system has no
//! metadata to commit to its journal, which on ext4 roughly halves an fsync (and more when
//! several processes share the disk).
//!
//! Layout of a segment: a header of [`SEGMENT_HEADER`] bytes (a magic tag, the index of the first
//! entry, the checksum the first record chains from, and the header's own CRC-32), then records
//! of [`RECORD_HEADER`] bytes (payload length, checksum, index) and the payload. Each record's
//! checksum covers the checksum of the record before it, its index, its length and its payload,
//! as in etcd's write-ahead log: a record left in place from an earlier use of the space (a
//! recycled file, a truncated tail) cannot pass for the next one, since it chains from another
//! record. Opening reads the segments and keeps the longest chain from the first segment that
//! holds unpurged entries; a record that fails its checksum ends the log there (a write cut
//! short by a crash, never acknowledged) unless the record after it chains from it, which is
//! damage in the middle of the log and refuses to open. So does a chain that ends (at a damaged
//! record or segment header) before a segment holding records written in full: a crash leaves
//! at most a new segment whose records never reached the disk.
//!
//! A segment is recycled once purged: renamed to the spare, it is the next segment without a
//! fresh zero fill. A helper thread keeps one spare ready so that an append rarely waits for one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use crate::stepped::SteppedFile;
use crate::sync_dir;

/// Bytes of a new segment file.
pub const SEGMENT_BYTES: u64 = 16 << 20;
/// Bytes of a segment's header: magic, first index, the checksum it chains from, its own CRC.
pub const SEGMENT_HEADER: u64 = 24;
/// Bytes of a record's header: payload length, checksum, index.
pub const RECORD_HEADER: u64 = 16;

const MAGIC: &[u8; 8] = b"raftqlog";
const SPARE: &str = "spare";
const SPARE_TMP: &str = "spare.tmp";
const SUFFIX: &str = ".seg";
/// Bytes written at a time while filling a new segment with zeros: one page. The page cache
/// sizes a file's pages by the writes that create them, and an append that dirties part of a
/// large page dirties all of it (the kernel counts it all as written).
const ZERO_CHUNK: usize = 4096;

/// Why the segments could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    #[error("log segment I/O: {0}")]
    Io(#[from] io::Error),
    #[error(
        "log segment {file} is damaged at byte {offset}: the record of entry {index} fails its \
         checksum, yet the record after it is intact"
    )]
    Damaged {
        file: PathBuf,
        offset: u64,
        index: u64,
    },
    #[error(
        "log segment {file} holds intact records from entry {index} on, yet the log before them \
         ends early (a damaged record or segment header)"
    )]
    Stranded { file: PathBuf, index: u64 },
    #[error(
        "the log's first entry is {first}, but entries were purged only up to {purged}: the \
         entries in between are missing"
    )]
    Missing { first: u64, purged: u64 },
}

impl SegmentError {
    /// Whether the stored log is damaged (as opposed to unreadable for another reason).
    pub fn is_damage(&self) -> bool {
        !matches!(self, SegmentError::Io(_))
    }
}

/// One segment file and where its records are.
#[derive(Debug)]
struct Segment {
    first: u64,
    path: PathBuf,
    file: Arc<File>,
    capacity: u64,
    /// The checksum the first record chains from.
    prev_crc: u32,
    /// The offset of each record: entry `first + i` starts at `starts[i]`.
    starts: Vec<u64>,
    /// Past the last record: where the next one goes.
    end: u64,
    /// The checksum of the last record (`prev_crc` when there is none).
    last_crc: u32,
}

impl Segment {
    /// The index after the last entry.
    fn next(&self) -> u64 {
        self.first + self.starts.len() as u64
    }

    /// The bytes of entry `index`'s record, header included.
    fn span(&self, index: u64) -> Option<(u64, u64)> {
        let i = usize::try_from(index.checked_sub(self.first)?).ok()?;
        let start = *self.starts.get(i)?;
        let end = self.starts.get(i + 1).copied().unwrap_or(self.end);
        Some((start, end))
    }
}

/// The log's segment files in one directory.
#[derive(Debug)]
pub struct Segments {
    dir: PathBuf,
    segment_bytes: u64,
    /// In index order; appends go to the last.
    segments: Vec<Segment>,
    /// Entries below this index are purged, even where a file still holds them.
    kept_from: u64,
    spare: Arc<Spare>,
    /// Asks the helper thread for a spare.
    prepare: mpsc::Sender<()>,
}

/// The spare segment, once ready.
#[derive(Debug)]
struct Spare {
    dir: PathBuf,
    bytes: u64,
    ready: Mutex<bool>,
}

impl Spare {
    fn path(&self) -> PathBuf {
        self.dir.join(SPARE)
    }

    fn ready(&self) -> std::sync::MutexGuard<'_, bool> {
        self.ready.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the spare unless one is ready: a file of zeros, synced, then renamed into place.
    fn make(&self) -> io::Result<()> {
        if *self.ready() {
            return Ok(());
        }
        let tmp = self.dir.join(SPARE_TMP);
        zeroed_file(&tmp, self.bytes)?;
        let mut ready = self.ready();
        if *ready {
            // A purged segment became the spare meanwhile.
            return fs::remove_file(&tmp);
        }
        fs::rename(&tmp, self.path())?;
        *ready = true;
        Ok(())
    }
}

/// Creates `path` as a file of `bytes` zeros, written out step by step and synced.
fn zeroed_file(path: &Path, bytes: u64) -> io::Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    let mut out = SteppedFile::new(file);
    let zeros = vec![0u8; ZERO_CHUNK];
    let mut at = 0;
    while at < bytes {
        let n = (bytes - at).min(ZERO_CHUNK as u64);
        out.write_all(&zeros[..n as usize])?;
        at += n;
    }
    out.finish()?.sync_all()
}

fn segment_name(first: u64) -> String {
    format!("{first:020}{SUFFIX}")
}

/// The first index a segment's file name gives, if it is a segment's name.
fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

fn record_crc(prev: u32, index: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&prev.to_le_bytes());
    hasher.update(&index.to_le_bytes());
    hasher.update(&(payload.len() as u64).to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

fn header_bytes(first: u64, prev_crc: u32) -> [u8; SEGMENT_HEADER as usize] {
    let mut header = [0u8; SEGMENT_HEADER as usize];
    header[..8].copy_from_slice(MAGIC);
    header[8..16].copy_from_slice(&first.to_le_bytes());
    header[16..20].copy_from_slice(&prev_crc.to_le_bytes());
    let crc = crc32fast::hash(&header[..20]);
    header[20..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// The first index and the checksum to chain from, if `bytes` starts with an intact header.
fn read_header(bytes: &[u8]) -> Option<(u64, u32)> {
    let header = bytes.get(..SEGMENT_HEADER as usize)?;
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    if &header[..8] != MAGIC || crc32fast::hash(&header[..20]) != word(20) {
        return None;
    }
    let first = u64::from_le_bytes(header[8..16].try_into().ok()?);
    Some((first, word(16)))
}

/// A record as found in a file: its index, stored checksum, payload and end.
struct Record<'a> {
    index: u64,
    crc: u32,
    payload: &'a [u8],
    end: u64,
}

/// The record at `at` in `bytes`, if its header and length fit (its checksum unchecked).
fn parse_record(bytes: &[u8], at: u64) -> Option<Record<'_>> {
    let start = usize::try_from(at).ok()?;
    let header = bytes.get(start..start.checked_add(RECORD_HEADER as usize)?)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[4..8].try_into().ok()?);
    let index = u64::from_le_bytes(header[8..16].try_into().ok()?);
    if len == 0 {
        return None;
    }
    let from = start + RECORD_HEADER as usize;
    let payload = bytes.get(from..from.checked_add(len)?)?;
    Some(Record {
        index,
        crc,
        payload,
        end: (from + len) as u64,
    })
}

/// The chain of records found in one segment.
struct Scanned {
    starts: Vec<u64>,
    end: u64,
    last_crc: u32,
}

/// Follows the chain of records in `bytes` from `first`, chaining from `prev_crc`.
fn scan(path: &Path, bytes: &[u8], first: u64, prev_crc: u32) -> Result<Scanned, SegmentError> {
    let mut scanned = Scanned {
        starts: Vec::new(),
        end: SEGMENT_HEADER,
        last_crc: prev_crc,
    };
    loop {
        let index = first + scanned.starts.len() as u64;
        let Some(record) = parse_record(bytes, scanned.end) else {
            return Ok(scanned);
        };
        if record.index != index
            || record_crc(scanned.last_crc, index, record.payload) != record.crc
        {
            // A record whose own fields are intact, followed by one that chains from it, was
            // damaged after it was written: not a write cut short.
            if record.index == index && chained_after(bytes, &record) {
                return Err(SegmentError::Damaged {
                    file: path.to_path_buf(),
                    offset: scanned.end,
                    index,
                });
            }
            return Ok(scanned);
        }
        scanned.starts.push(scanned.end);
        scanned.end = record.end;
        scanned.last_crc = record.crc;
    }
}

/// Whether the record after `record` in `bytes` is intact and chains from it.
fn chained_after(bytes: &[u8], record: &Record<'_>) -> bool {
    parse_record(bytes, record.end).is_some_and(|next| {
        next.index == record.index + 1
            && record_crc(record.crc, next.index, next.payload) == next.crc
    })
}

/// Whether `bytes`, a segment named for entry `first`, holds that entry's record written in full:
/// one chaining from `prev` (the last record before the segment) or from the checksum the
/// segment's header names, or one the next record chains from. A segment that a crash left before
/// its records reached the disk holds none: zeros, or the records of the file's earlier use.
fn holds_records(bytes: &[u8], first: u64, prev: Option<u32>) -> bool {
    let Some(record) = parse_record(bytes, SEGMENT_HEADER).filter(|r| r.index == first) else {
        return false;
    };
    let named = read_header(bytes)
        .filter(|(f, _)| *f == first)
        .map(|(_, prev)| prev);
    prev.into_iter()
        .chain(named)
        .any(|prev| record_crc(prev, first, record.payload) == record.crc)
        || chained_after(bytes, &record)
}

/// `path`, a segment named for entry `first` past the end of the chain, as a crash's leftover to
/// remove (a roll whose records never reached the disk), unless it holds records written in full
/// (see [`holds_records`], with `prev` the last record before it): then the chain ended early by
/// damage.
fn leftover(
    path: PathBuf,
    bytes: &[u8],
    first: u64,
    prev: Option<u32>,
) -> Result<PathBuf, SegmentError> {
    if holds_records(bytes, first, prev) {
        return Err(SegmentError::Stranded {
            file: path,
            index: first,
        });
    }
    Ok(path)
}

impl Segments {
    /// Opens the segments in `dir` (creating it), new ones of `segment_bytes`, with entries up to
    /// `purged` purged. Files that hold no entry of the log any more are removed.
    pub fn open(dir: &Path, segment_bytes: u64, purged: Option<u64>) -> Result<Self, SegmentError> {
        fs::create_dir_all(dir)?;
        let kept_from = purged.map_or(0, |p| p + 1);
        let mut named = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name == SPARE_TMP {
                fs::remove_file(entry.path())?;
            } else if let Some(first) = parse_name(name) {
                named.push((first, entry.path()));
            }
        }
        named.sort();
        // The chain starts in the last segment that begins at or before the first kept entry;
        // the segments before it hold purged entries only.
        let start = named
            .iter()
            .rposition(|(first, _)| *first <= kept_from)
            .unwrap_or(0);
        let mut stale: Vec<PathBuf> = named.drain(..start).map(|(_, path)| path).collect();
        let mut segments: Vec<Segment> = Vec::new();
        let mut named = named.into_iter();
        for (first, path) in named.by_ref() {
            let file = OpenOptions::new().read(true).write(true).open(&path)?;
            let mut bytes = Vec::new();
            io::Read::read_to_end(&mut &file, &mut bytes)?;
            let chained = match (read_header(&bytes), segments.last()) {
                (Some((f, prev)), None) if f == first => Some(prev),
                (Some((f, prev)), Some(before))
                    if f == first && f >= before.next() && prev == before.last_crc =>
                {
                    Some(prev)
                }
                _ => None,
            };
            let Some(prev_crc) = chained else {
                let prev = segments.last().map(|s| s.last_crc);
                stale.push(leftover(path, &bytes, first, prev)?);
                break;
            };
            // A segment whose chain ends early is followed by none that chains from it.
            let scanned = scan(&path, &bytes, first, prev_crc)?;
            segments.push(Segment {
                first,
                path,
                file: Arc::new(file),
                capacity: bytes.len() as u64,
                prev_crc,
                starts: scanned.starts,
                end: scanned.end,
                last_crc: scanned.last_crc,
            });
        }
        for (first, path) in named {
            let bytes = fs::read(&path)?;
            stale.push(leftover(path, &bytes, first, None)?);
        }
        // With every entry it holds purged, the log starts over at the next append.
        if segments.last().is_some_and(|s| s.next() <= kept_from) {
            stale.extend(segments.drain(..).map(|s| s.path));
        }
        if let (Some(purged), Some(first)) = (purged, segments.first().map(|s| s.first)) {
            if first > kept_from && segments.iter().any(|s| !s.starts.is_empty()) {
                return Err(SegmentError::Missing { first, purged });
            }
        }
        for path in &stale {
            fs::remove_file(path)?;
        }
        if !stale.is_empty() {
            sync_dir(dir)?;
        }
        let spare = Arc::new(Spare {
            dir: dir.to_path_buf(),
            bytes: segment_bytes,
            ready: Mutex::new(
                fs::metadata(dir.join(SPARE)).is_ok_and(|m| m.len() == segment_bytes),
            ),
        });
        let prepare = spawn_preparer(Arc::downgrade(&spare))?;
        let segments = Segments {
            dir: dir.to_path_buf(),
            segment_bytes,
            segments,
            kept_from,
            spare,
            prepare,
        };
        segments.ask_for_spare();
        Ok(segments)
    }

    fn ask_for_spare(&self) {
        // The helper only ever stops with the spare's owner, which is this.
        let _ = self.prepare.send(());
    }

    /// The index of the first entry held, if any.
    #[cfg(test)]
    fn first(&self) -> Option<u64> {
        self.last()
            .map(|_| self.kept_from.max(self.segments[0].first))
    }

    /// The index of the last entry held, if any.
    pub fn last(&self) -> Option<u64> {
        let next = self.segments.last()?.next();
        (next > self.kept_from.max(self.segments[0].first)).then(|| next - 1)
    }

    /// Writes `entries` (each an index and its encoded bytes, in order, continuing the log) and
    /// returns the files written: they are durable once each is synced
    /// ([`File::sync_data`]).
    pub fn append(&mut self, entries: &[(u64, Vec<u8>)]) -> io::Result<Vec<Arc<File>>> {
        let mut written: Vec<Arc<File>> = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut pending_at = 0;
        for (index, payload) in entries {
            let record = RECORD_HEADER + payload.len() as u64;
            if let Some(s) = self.segments.last().filter(|s| *index < s.next()) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "entry {index} would overwrite entry {} without a truncation",
                        s.next() - 1
                    ),
                ));
            }
            // An entry after a gap starts a segment of its own, which chains from the last
            // record all the same.
            let fits = self
                .segments
                .last()
                .is_some_and(|s| s.next() == *index && s.end + record <= s.capacity);
            if !fits {
                self.write_pending(&mut pending, pending_at, &mut written)?;
                self.roll(*index, record)?;
                let active = self.active()?;
                pending.extend_from_slice(&header_bytes(active.first, active.prev_crc));
                pending_at = 0;
            } else if pending.is_empty() {
                pending_at = self.active()?.end;
            }
            let active = self.active_mut()?;
            let crc = record_crc(active.last_crc, *index, payload);
            pending.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            pending.extend_from_slice(&crc.to_le_bytes());
            pending.extend_from_slice(&index.to_le_bytes());
            pending.extend_from_slice(payload);
            active.starts.push(active.end);
            active.end += record;
            active.last_crc = crc;
        }
        self.write_pending(&mut pending, pending_at, &mut written)?;
        Ok(written)
    }

    fn active(&self) -> io::Result<&Segment> {
        self.segments
            .last()
            .ok_or_else(|| io::Error::other("no active log segment"))
    }

    fn active_mut(&mut self) -> io::Result<&mut Segment> {
        self.segments
            .last_mut()
            .ok_or_else(|| io::Error::other("no active log segment"))
    }

    /// Writes `pending` into the active segment at `at`, and notes its file as written.
    fn write_pending(
        &self,
        pending: &mut Vec<u8>,
        at: u64,
        written: &mut Vec<Arc<File>>,
    ) -> io::Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let active = self.active()?;
        active.file.write_all_at(pending, at)?;
        pending.clear();
        if !written.iter().any(|f| Arc::ptr_eq(f, &active.file)) {
            written.push(Arc::clone(&active.file));
        }
        Ok(())
    }

    /// Starts a new segment whose first entry is `first`, with room for a record of `record`
    /// bytes: the spare, renamed, or a new file when none is ready or the record needs more.
    fn roll(&mut self, first: u64, record: u64) -> io::Result<()> {
        let bytes = self.segment_bytes.max(SEGMENT_HEADER + record);
        let path = self.dir.join(segment_name(first));
        let spare = {
            let mut ready = self.spare.ready();
            let usable = *ready && bytes == self.segment_bytes;
            if usable {
                *ready = false;
                fs::rename(self.spare.path(), &path)?;
            }
            usable
        };
        if !spare {
            let tmp = self.dir.join(format!("{}.tmp", segment_name(first)));
            zeroed_file(&tmp, bytes)?;
            fs::rename(&tmp, &path)?;
        }
        // The name must be durable before the records written under it are.
        sync_dir(&self.dir)?;
        self.ask_for_spare();
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        let prev_crc = self.segments.last().map_or(0, |s| s.last_crc);
        self.segments.push(Segment {
            first,
            path,
            file: Arc::new(file),
            capacity: bytes,
            prev_crc,
            starts: Vec::new(),
            end: SEGMENT_HEADER,
            last_crc: prev_crc,
        });
        Ok(())
    }

    /// The encoded bytes of the entries in `start..end` that the log holds, in order.
    pub fn read(&self, start: u64, end: u64) -> io::Result<Vec<(u64, Vec<u8>)>> {
        let start = start.max(self.kept_from);
        let mut out = Vec::new();
        for segment in &self.segments {
            let from = start.max(segment.first);
            let to = end.min(segment.next());
            if from >= to {
                continue;
            }
            let (Some((lo, _)), Some((_, hi))) = (segment.span(from), segment.span(to - 1)) else {
                continue;
            };
            let mut bytes = vec![0; (hi - lo) as usize];
            segment.file.read_exact_at(&mut bytes, lo)?;
            for index in from..to {
                let Some((a, b)) = segment.span(index) else {
                    continue;
                };
                let payload = (a + RECORD_HEADER - lo) as usize..(b - lo) as usize;
                let payload = bytes.get(payload).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, "log record out of bounds")
                })?;
                out.push((index, payload.to_vec()));
            }
        }
        Ok(out)
    }

    /// Removes the entries from `index` on, synced: their records are overwritten with zeros
    /// and later segments are removed before this returns.
    pub fn truncate(&mut self, index: u64) -> io::Result<()> {
        let mut removed = false;
        while self.segments.last().is_some_and(|s| s.first > index) {
            if let Some(segment) = self.segments.pop() {
                fs::remove_file(&segment.path)?;
                removed = true;
            }
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        let Some(segment) = self.segments.last_mut() else {
            return Ok(());
        };
        let Some((at, _)) = segment.span(index) else {
            return Ok(());
        };
        for zeros in truncation_zeros(at, segment.end) {
            let len = usize::try_from(zeros.end - zeros.start).map_err(io::Error::other)?;
            segment.file.write_all_at(&vec![0; len], zeros.start)?;
            segment.file.sync_data()?;
        }
        let kept = (index - segment.first) as usize;
        segment.starts.truncate(kept);
        segment.end = at;
        segment.last_crc = match kept.checked_sub(1).and_then(|i| segment.starts.get(i)) {
            Some(&start) => {
                let mut crc = [0u8; 4];
                segment.file.read_exact_at(&mut crc, start + 4)?;
                u32::from_le_bytes(crc)
            }
            None => segment.prev_crc,
        };
        Ok(())
    }

    /// Purges the entries up to `index`: segments that hold nothing later are recycled as the
    /// spare or returned, for the caller to remove with [`remove_purged`] (away from the lock
    /// over these segments: see there). Until then they are leftovers that the next open drops.
    pub fn purge(&mut self, index: u64) -> io::Result<Vec<PathBuf>> {
        self.kept_from = self.kept_from.max(index + 1);
        let purged = self
            .segments
            .iter()
            .take_while(|s| s.next() <= self.kept_from)
            .count();
        let mut removable = Vec::new();
        for segment in self.segments.drain(..purged) {
            let mut ready = self.spare.ready();
            if !*ready && segment.capacity == self.segment_bytes {
                fs::rename(&segment.path, self.spare.path())?;
                *ready = true;
            } else {
                removable.push(segment.path);
            }
        }
        Ok(removable)
    }
}

/// The byte ranges a truncation overwrites with zeros, in order, each synced before the next,
/// when the first removed record starts at `at` and the segment's records end at `end`.
///
/// First that record's header: once it is zeros, the log ends before it at the next open,
/// whatever part of the rest reached the disk. Then the rest of the removed tail, since a record
/// left there would chain from the one before it and read as damage behind the new records that
/// overwrite its start. In one write, a crash could keep the zeros over part of the first record
/// but not over its header nor the record after it, which still chains from it: damage, and a
/// node that refuses to start for a truncation it never finished.
fn truncation_zeros(at: u64, end: u64) -> [Range<u64>; 2] {
    let header_end = (at + RECORD_HEADER).min(end);
    [at..header_end, header_end..end]
}

/// Removes the segment files a purge returned. Removing a file also drops its pages from the
/// page cache, which is slow for segments written moments ago: done under the
/// segments' lock, with the Raft core waiting for the purge, it would hold up every append.
pub(crate) fn remove_purged(paths: &[PathBuf]) {
    for path in paths {
        if let Err(error) = fs::remove_file(path) {
            tracing::warn!(%error, path = %path.display(), "cannot remove a purged log segment");
        }
    }
}

/// Starts the thread that makes a spare segment whenever asked, until the spare's owner is gone.
fn spawn_preparer(spare: std::sync::Weak<Spare>) -> io::Result<mpsc::Sender<()>> {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("raftq-log-spare".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                let Some(spare) = spare.upgrade() else { return };
                if let Err(error) = spare.make() {
                    tracing::warn!(%error, "cannot prepare a spare log segment");
                }
            }
        })?;
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: u64 = 4096;

    /// Opens segments in `dir`, lets `write` change them, closes them and opens them again.
    fn reopened(dir: &Path, purged: Option<u64>, write: impl FnOnce(&mut Segments)) -> Segments {
        write(&mut Segments::open(dir, SMALL, None).expect("open"));
        Segments::open(dir, SMALL, purged).expect("reopen")
    }

    fn entries(range: std::ops::Range<u64>, size: usize) -> Vec<(u64, Vec<u8>)> {
        range.map(|i| (i, vec![i as u8; size])).collect()
    }

    /// Flips every bit of the byte at `at` of the file at `path`.
    fn flip(path: &Path, at: u64) {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .expect("open");
        let mut byte = [0u8];
        file.read_exact_at(&mut byte, at).expect("read");
        file.write_all_at(&[byte[0] ^ 0xff], at).expect("write");
    }

    fn indexes(read: &[(u64, Vec<u8>)]) -> Vec<u64> {
        read.iter().map(|(i, _)| *i).collect()
    }

    fn segment_files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("list")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| parse_name(n).is_some())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn entries_read_back_across_segments_and_after_reopen() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let written = entries(1..40, 300);
        {
            let mut log = Segments::open(tmp.path(), SMALL, None).expect("open");
            for chunk in written.chunks(7) {
                for file in log.append(chunk).expect("append") {
                    file.sync_data().expect("sync");
                }
            }
            assert_eq!(log.read(1, 40).expect("read"), written);
            assert!(segment_files(tmp.path()).len() > 2, "several segments");
        }
        let log = Segments::open(tmp.path(), SMALL, None).expect("reopen");
        assert_eq!((log.first(), log.last()), (Some(1), Some(39)));
        assert_eq!(log.read(0, u64::MAX).expect("read"), written);
        assert_eq!(indexes(&log.read(10, 12).expect("read")), [10, 11]);
    }

    #[test]
    fn a_record_larger_than_a_segment_gets_a_segment_of_its_own() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let written = vec![
            (1, vec![1; 100]),
            (2, vec![2; 3 * SMALL as usize]),
            (3, vec![3; 100]),
        ];
        let log = reopened(tmp.path(), None, |log| {
            log.append(&written).expect("append");
        });
        assert_eq!(log.read(1, 4).expect("read"), written);
    }

    #[test]
    fn a_truncated_tail_stays_gone_even_where_new_records_line_up_with_old_ones() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let log = reopened(tmp.path(), None, |log| {
            log.append(&entries(1..30, 200)).expect("append");
            log.truncate(5).expect("truncate");
            // Same sizes: entry 5's new record ends where the old entry 6 starts.
            log.append(&[(5, vec![0xee; 200])]).expect("append");
        });
        assert_eq!(log.last(), Some(5));
        assert_eq!(log.read(5, 6).expect("read"), [(5, vec![0xee; 200])]);
        assert_eq!(segment_files(tmp.path()).len(), 1, "later segments removed");
    }

    #[test]
    fn a_truncation_is_kept_without_a_later_append() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let log = reopened(tmp.path(), None, |log| {
            log.append(&entries(1..10, 100)).expect("append");
            log.truncate(4).expect("truncate");
        });
        assert_eq!(log.last(), Some(3));
    }

    #[test]
    fn a_crash_at_any_point_of_a_truncation_leaves_a_log_that_opens() {
        // Records that span several 512-byte sectors, the unit a disk writes whole.
        const SECTOR: u64 = 512;
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let path = tmp.path().join(segment_name(1));
        let (at, end) = {
            let mut log = Segments::open(tmp.path(), SMALL, None).expect("open");
            log.append(&entries(1..4, 1200)).expect("append");
            let segment = &log.segments[0];
            (segment.span(2).expect("entry 2").0, segment.end)
        };
        let before = fs::read(&path).expect("read");
        let zeros = truncation_zeros(at, end);
        for (step, range) in zeros.iter().enumerate() {
            // The steps before this one reached the disk; of this one, any of its sectors did.
            let sectors: Vec<Range<u64>> = (range.start / SECTOR..range.end.div_ceil(SECTOR))
                .map(|s| (s * SECTOR).max(range.start)..((s + 1) * SECTOR).min(range.end))
                .collect();
            for reached in 0..1u32 << sectors.len() {
                let mut bytes = before.clone();
                let written = zeros[..step].iter().cloned().chain(
                    (0..sectors.len())
                        .filter(|i| reached & (1 << i) != 0)
                        .map(|i| sectors[i].clone()),
                );
                for r in written {
                    bytes[r.start as usize..r.end as usize].fill(0);
                }
                fs::write(&path, &bytes).expect("write");
                let log = Segments::open(tmp.path(), SMALL, None).unwrap_or_else(|e| {
                    panic!("step {step}, sectors {reached:b}: {e}");
                });
                let cut = step > 0 || reached != 0;
                assert_eq!(
                    log.last(),
                    Some(if cut { 1 } else { 3 }),
                    "step {step}, sectors {reached:b}"
                );
            }
        }
    }

    #[test]
    fn a_torn_last_record_ends_the_log_and_damage_before_the_end_refuses_to_open() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let path = {
            let mut log = Segments::open(tmp.path(), SMALL, None).expect("open");
            log.append(&entries(1..6, 100)).expect("append");
            tmp.path().join(segment_name(1))
        };
        let record = SEGMENT_HEADER + (RECORD_HEADER + 100) * 4;
        flip(&path, record + RECORD_HEADER + 50);
        let log = Segments::open(tmp.path(), SMALL, None).expect("a torn tail opens");
        assert_eq!(log.last(), Some(4));
        drop(log);
        flip(&path, SEGMENT_HEADER + RECORD_HEADER + 10);
        let error = Segments::open(tmp.path(), SMALL, None).expect_err("damage is refused");
        assert!(error.is_damage(), "{error}");
    }

    #[test]
    fn a_chain_ending_before_a_segment_of_intact_records_refuses_to_open() {
        const SIZE: u64 = 300;
        let per_segment = (SMALL - SEGMENT_HEADER) / (RECORD_HEADER + SIZE);
        let last_record = SEGMENT_HEADER + (per_segment - 1) * (RECORD_HEADER + SIZE);
        // The second segment's header; the payload of the first segment's last record.
        for (segment, at) in [(1, 10), (0, last_record + RECORD_HEADER + 5)] {
            let tmp = tempfile::TempDir::new().expect("temp dir");
            {
                let mut log = Segments::open(tmp.path(), SMALL, None).expect("open");
                log.append(&entries(1..40, SIZE as usize)).expect("append");
            }
            let files = segment_files(tmp.path());
            assert!(files.len() > 2, "several segments");
            flip(&tmp.path().join(&files[segment]), at);
            let error = Segments::open(tmp.path(), SMALL, None).expect_err("damage is refused");
            assert!(
                matches!(&error, SegmentError::Stranded { index, .. } if *index == per_segment + 1),
                "{error}"
            );
        }
    }

    #[test]
    fn a_new_segment_whose_records_never_reached_the_disk_is_dropped() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        {
            let mut log = Segments::open(tmp.path(), SMALL, None).expect("open");
            log.append(&entries(1..40, 300)).expect("append");
        }
        // A recycled segment renamed for the next entry, still holding its earlier records.
        let files = segment_files(tmp.path());
        let leftover = tmp.path().join(segment_name(40));
        fs::copy(tmp.path().join(&files[0]), &leftover).expect("copy");
        let log = Segments::open(tmp.path(), SMALL, None).expect("a crash's leftover opens");
        assert_eq!(log.last(), Some(39));
        assert!(!leftover.exists(), "the leftover is removed");
    }

    #[test]
    fn purged_segments_are_recycled_and_the_log_restarts_after_a_purge_of_everything() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let log = reopened(tmp.path(), Some(50), |log| {
            log.append(&entries(1..40, 300)).expect("append");
            let before = segment_files(tmp.path()).len();
            let removable = log.purge(20).expect("purge");
            assert!(removable.is_empty(), "the one segment purged is recycled");
            assert_eq!(segment_files(tmp.path()).len(), before - 1);
            assert!(
                tmp.path().join(SPARE).exists(),
                "a purged segment is the spare"
            );
            assert_eq!((log.first(), log.last()), (Some(21), Some(39)));
            assert_eq!(indexes(&log.read(0, 23).expect("read")), [21, 22]);
            let removable = log.purge(50).expect("purge");
            assert!(
                removable.len() > 1 && removable.iter().all(|path| path.exists()),
                "with the spare taken, purged segments are left for the caller to remove"
            );
            // One removed; the others stay as leftovers, which the next open drops.
            remove_purged(&removable[..1]);
            assert!(!removable[0].exists());
            assert_eq!(log.last(), None);
            log.append(&entries(51..53, 300))
                .expect("append after the purge");
        });
        assert_eq!((log.first(), log.last()), (Some(51), Some(52)));
    }

    #[test]
    fn entries_missing_after_the_purged_ones_refuse_to_open() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        {
            let mut log = Segments::open(tmp.path(), SMALL, None).expect("open");
            log.append(&entries(10..12, 100)).expect("append");
        }
        let error = Segments::open(tmp.path(), SMALL, Some(5)).expect_err("a gap");
        assert!(
            matches!(
                error,
                SegmentError::Missing {
                    first: 10,
                    purged: 5
                }
            ),
            "{error}"
        );
    }
}
