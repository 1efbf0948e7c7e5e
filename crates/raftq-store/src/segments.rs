//! The Raft log's entries in segment files, written in place.
//!
//! A segment is a file of fixed size, filled with zeros and synced before its first use (or
//! recycled from a purged segment), named for the index of its first entry. Appends write records
//! one after the other into the newest segment and an fsync makes them durable. Because the file
//! neither grows nor gains blocks, that fsync writes the data alone: the file system has no
//! metadata to commit to its journal, which on ext4 roughly halves an fsync (and more when
//! several processes share the disk).
//!
//! The layout of a segment, and the rule that tells a write a crash cut short from damage, are in
//! `records`. Each record carries the log's synced mark ([`SyncedMark`]): how far the log was
//! durable when it was written. Opening reads the segments and keeps the longest chain from the
//! first segment that holds unpurged entries; it ends at the first record that fails its
//! checksum, unless a later record vouches that this one was durable (damage: the log refuses to
//! open). Segments past the end of the chain are a crash's leftovers (a roll whose records were
//! cut short, a truncation's removals) and are removed, unless their records vouch that the
//! log was durable past its end (damage again). Opening then syncs the segments it keeps: what a
//! process read back after its crash is durable before it is acknowledged again.
//!
//! A truncation removes later segments one at a time from the last, each removal synced before
//! the next, so that a crash keeps a prefix of them, never one without the one before it.
//!
//! A segment is recycled once purged: renamed to the spare, it is the next segment without a
//! fresh zero fill. A helper thread keeps one spare ready so that an append rarely waits for one.
//! Files with a `.tmp` name (a spare or a new segment being filled when a crash came) are removed
//! when the segments open.
//!
//! # A full disk
//!
//! Records go into files already filled, so an append inside a segment never asks the file
//! system for space: only a new segment does. A spare or a new segment that finds the disk full
//! is removed again (a half-filled file would hold the space the log waits for), and an append
//! that needs a new segment then stops before the record that would have opened it
//! ([`Segments::append_until_full`]), so no record is ever started that may not fit: the caller
//! waits for room and appends the rest. The helper thread tries again to make the spare, with a
//! growing pause, until it can. [`Segments::room`] tells how much more the log can take without
//! a new file, for a node that refuses writes before the log has to wait.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::disk::{self, Disk, DiskFile, Open, RealDisk};
use crate::records::{self, Format, SegmentError, FORMAT, SEGMENT_HEADER};
use crate::stepped::STEP;
use crate::work::Work;

/// Bytes of a new segment file.
pub const SEGMENT_BYTES: u64 = 16 << 20;

const SPARE: &str = "spare";
const SPARE_TMP: &str = "spare.tmp";
/// The suffix of a file being filled before it takes its name.
const TMP: &str = ".tmp";
const SUFFIX: &str = ".seg";
/// Bytes written at a time while filling a new segment with zeros: one page. The page cache
/// sizes a file's pages by the writes that create them, and an append that dirties part of a
/// large page dirties all of it (the kernel counts it all as written).
const ZERO_CHUNK: usize = 4096;
/// The first pause of the helper thread before it tries again to make a spare it could not.
const SPARE_RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest pause between its tries.
const SPARE_RETRY_MAX: Duration = Duration::from_secs(5);

/// One segment file and where its records are.
#[derive(Debug)]
struct Segment {
    first: u64,
    format: Format,
    path: PathBuf,
    file: Arc<dyn DiskFile>,
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

    /// Whether appends may go on in this segment: one of an earlier format takes none.
    fn appendable(&self, index: u64, record: u64) -> bool {
        self.format == FORMAT && self.next() == index && self.end + record <= self.capacity
    }

    /// The bytes of entry `index`'s record, header included.
    fn span(&self, index: u64) -> Option<(u64, u64)> {
        let i = usize::try_from(index.checked_sub(self.first)?).ok()?;
        let start = *self.starts.get(i)?;
        let end = self.starts.get(i + 1).copied().unwrap_or(self.end);
        Some((start, end))
    }
}

/// Where and how a log keeps its segments.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// The file system of the segments, and of the snapshot files when the store opens whole
    /// ([`crate::open_on`]). With [`Work::Threads`] the Raft core reads and writes snapshot
    /// files with tokio's files, so that disk is then the operating system's ([`RealDisk`]).
    pub disk: Arc<dyn Disk>,
    /// Bytes of a new segment file.
    pub segment_bytes: u64,
    /// Where the slow work runs.
    pub work: Work,
    /// Whether a helper thread makes the spare segment ahead of need (with [`Work::Threads`]
    /// only). Without it, the roll that takes the spare makes the next one at once: slower, in a
    /// fixed order of file operations (for tests and simulations).
    pub spare_thread: bool,
}

impl Default for LogOptions {
    fn default() -> LogOptions {
        LogOptions {
            disk: Arc::new(RealDisk),
            segment_bytes: SEGMENT_BYTES,
            work: Work::Threads,
            spare_thread: true,
        }
    }
}

/// What [`Segments::append_until_full`] wrote.
#[derive(Debug)]
pub struct Written {
    /// The files written, to sync.
    pub files: Vec<Arc<dyn DiskFile>>,
    /// How many of the entries (the first ones) were written.
    pub count: usize,
}

/// The log's segment files in one directory.
#[derive(Debug)]
pub struct Segments {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    segment_bytes: u64,
    /// In index order; appends go to the last.
    segments: Vec<Segment>,
    /// Entries below this index are purged, even where a file still holds them.
    kept_from: u64,
    spare: Arc<Spare>,
    /// Asks the helper thread for a spare (none: the spare is made in place).
    prepare: Option<mpsc::Sender<()>>,
    synced: SyncedMark,
}

/// How far the log is known durable: every entry below this index was fsynced (or purged).
/// Appends write it into their records (see `records`); whoever syncs the files an append
/// returned raises it, and a truncation lowers it to where the log now ends. Clones share it.
#[derive(Debug, Clone, Default)]
pub struct SyncedMark(Arc<AtomicU64>);

impl SyncedMark {
    /// Notes that every entry below `end` is durable.
    pub fn raise(&self, end: u64) {
        self.0.fetch_max(end, Ordering::SeqCst);
    }

    fn lower(&self, end: u64) {
        self.0.fetch_min(end, Ordering::SeqCst);
    }

    /// Every entry below this is durable.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The spare segment, once ready.
#[derive(Debug)]
struct Spare {
    disk: Arc<dyn Disk>,
    dir: PathBuf,
    bytes: u64,
    ready: Mutex<bool>,
    /// Whether the last attempt to make it failed (the disk refused the file), until one
    /// succeeds: a spare merely not made yet is not a want of room.
    failed: AtomicBool,
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
        tracing::trace!(target: "raftq::stage", stage = "spare");
        let zeroed = zeroed_file(self.disk.as_ref(), &tmp, self.bytes);
        self.failed.store(zeroed.is_err(), Ordering::Relaxed);
        zeroed?;
        tracing::trace!(target: "raftq::stage", stage = "spare_made");
        let mut ready = self.ready();
        if *ready {
            // A purged segment became the spare meanwhile.
            return self.disk.remove_file(&tmp);
        }
        self.disk.rename(&tmp, &self.path())?;
        *ready = true;
        Ok(())
    }
}

/// Creates `path` as a file of `bytes` zeros, written out a [`STEP`] at a time (see `stepped`)
/// and synced. A file that could not be filled (the disk is full) is removed again, so that it
/// does not hold space the log is waiting for.
fn zeroed_file(disk: &dyn Disk, path: &Path, bytes: u64) -> io::Result<()> {
    let filled = fill_with_zeros(disk, path, bytes);
    if filled.is_err() {
        match disk.remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                tracing::warn!(error = %e, path = %path.display(), "cannot remove a log file left unfilled");
            }
            _ => {}
        }
    }
    filled
}

/// Whether `error` says that the file system has no room left (or the user's quota is spent).
pub(crate) fn is_full(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// Writes `path` as a file of `bytes` zeros, synced (see [`zeroed_file`]).
fn fill_with_zeros(disk: &dyn Disk, path: &Path, bytes: u64) -> io::Result<()> {
    let file = disk.open(path, Open::Create)?;
    let zeros = vec![0u8; ZERO_CHUNK];
    let (mut at, mut written_out) = (0, 0);
    while at < bytes {
        let n = (bytes - at).min(ZERO_CHUNK as u64);
        file.write_all_at(&zeros[..n as usize], at)?;
        at += n;
        if at - written_out >= STEP || at == bytes {
            file.write_out(written_out, at - written_out)?;
            written_out = at;
        }
    }
    file.sync_all()
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

/// `path`, a segment named for entry `first` past the end of the chain (it ends before entry
/// `end`, its last record's checksum `prev`), as a crash's leftover to remove, unless its records
/// prove that the log lost entries that were durable (see [`records::proves_loss`]).
fn leftover(
    path: PathBuf,
    bytes: &[u8],
    first: u64,
    prev: Option<u32>,
    end: u64,
) -> Result<PathBuf, SegmentError> {
    if records::proves_loss(bytes, first, prev, end) {
        return Err(SegmentError::Stranded {
            file: path,
            index: first,
        });
    }
    Ok(path)
}

/// Segment files by the index of their first entry.
type Named = Vec<(u64, PathBuf)>;

/// The segment files in `dir`, by first index, and the files a crash left with a `.tmp` name.
fn list(disk: &dyn Disk, dir: &Path) -> io::Result<(Named, Vec<PathBuf>)> {
    let (mut named, mut tmp) = (Vec::new(), Vec::new());
    for name in disk.list_dir(dir)? {
        if name.ends_with(TMP) {
            tmp.push(dir.join(&name));
        } else if let Some(first) = parse_name(&name) {
            named.push((first, dir.join(&name)));
        }
    }
    named.sort();
    Ok((named, tmp))
}

/// The first segment of the chain and the checksum it starts from, if the file `bytes` named
/// for entry `first` continues the chain of `segments`.
fn continues(bytes: &[u8], first: u64, segments: &[Segment]) -> Option<(Format, u32)> {
    let (format, f, prev) = records::read_header(bytes)?;
    let follows = match segments.last() {
        None => true,
        Some(before) => f >= before.next() && prev == before.last_crc,
    };
    (f == first && follows).then_some((format, prev))
}

/// Reads the chain of the log from the segment files `named` (in order): the segments it runs
/// through, and the files after its end, which are leftovers to remove.
fn read_chain(
    disk: &dyn Disk,
    named: Named,
    kept_from: u64,
) -> Result<(Vec<Segment>, Vec<PathBuf>), SegmentError> {
    let mut segments: Vec<Segment> = Vec::new();
    let mut leftovers = Vec::new();
    for (first, path) in named {
        let file = disk.open(&path, Open::Existing)?;
        let bytes = disk::read_all(file.as_ref())?;
        if let Some(found) = records::later_format(&bytes) {
            return Err(SegmentError::LaterFormat { file: path, found });
        }
        let chained = match leftovers.is_empty() {
            true => continues(&bytes, first, &segments),
            false => None,
        };
        let Some((format, prev_crc)) = chained else {
            let prev = segments.last().map(|s| s.last_crc);
            let end = segments.last().map_or(kept_from, Segment::next);
            leftovers.push(leftover(path, &bytes, first, prev, end)?);
            continue;
        };
        let scanned = records::scan(&path, format, &bytes, first, prev_crc)?;
        segments.push(Segment {
            first,
            format,
            path,
            file,
            capacity: bytes.len() as u64,
            prev_crc,
            starts: scanned.starts,
            end: scanned.end,
            last_crc: scanned.last_crc,
        });
    }
    Ok((segments, leftovers))
}

impl Segments {
    /// Opens the segments in `dir` (creating it, its entry synced), kept as `options` say, with
    /// entries up to `purged` purged. Files that hold no entry of the log any more are removed;
    /// the segments kept are synced.
    pub fn open(
        options: &LogOptions,
        dir: &Path,
        purged: Option<u64>,
    ) -> Result<Self, SegmentError> {
        let disk = options.disk.as_ref();
        disk::create_dir_durably(disk, dir)?;
        let kept_from = purged.map_or(0, |p| p + 1);
        let (mut named, mut stale) = list(disk, dir)?;
        // The chain starts in the last segment that begins at or before the first kept entry;
        // the segments before it hold purged entries only.
        let start = named
            .iter()
            .rposition(|(first, _)| *first <= kept_from)
            .unwrap_or(0);
        stale.extend(named.drain(..start).map(|(_, path)| path));
        let (mut segments, leftovers) = read_chain(disk, named, kept_from)?;
        stale.extend(leftovers);
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
            match disk.remove_file(path) {
                // A spare's helper thread of an earlier open may still have been at work.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                removed => removed?,
            }
        }
        if !stale.is_empty() {
            disk.sync_dir(dir)?;
        }
        for segment in &segments {
            segment.file.sync_data()?;
        }
        let synced = SyncedMark::default();
        synced.raise(
            segments
                .last()
                .map_or(kept_from, |s| s.next().max(kept_from)),
        );
        let segments = Segments::with_spare(options, dir, segments, kept_from, synced)?;
        debug_assert!(segments.chain_holds(), "the segments opened form one chain");
        debug_assert!(
            segments
                .last()
                .is_none_or(|last| segments.synced.get() > last),
            "every entry an open keeps is durable (synced above) before it is acknowledged again"
        );
        segments.ask_for_spare();
        Ok(segments)
    }

    /// The segments of `dir` with their spare, ready or not, and its helper thread if asked for.
    fn with_spare(
        options: &LogOptions,
        dir: &Path,
        segments: Vec<Segment>,
        kept_from: u64,
        synced: SyncedMark,
    ) -> io::Result<Segments> {
        let disk = &options.disk;
        let spare_ready = disk
            .open(&dir.join(SPARE), Open::Existing)
            .and_then(|f| f.len())
            .is_ok_and(|len| len == options.segment_bytes);
        let spare = Arc::new(Spare {
            disk: Arc::clone(disk),
            dir: dir.to_path_buf(),
            bytes: options.segment_bytes,
            ready: Mutex::new(spare_ready),
            failed: AtomicBool::new(false),
        });
        let prepare = match (options.work, options.spare_thread) {
            (Work::Threads, true) => Some(spawn_preparer(Arc::downgrade(&spare))?),
            _ => None,
        };
        Ok(Segments {
            disk: Arc::clone(disk),
            dir: dir.to_path_buf(),
            segment_bytes: options.segment_bytes,
            segments,
            kept_from,
            spare,
            prepare,
            synced,
        })
    }

    /// The log's synced mark, for whoever syncs the files appends return.
    pub fn synced_mark(&self) -> SyncedMark {
        self.synced.clone()
    }

    fn ask_for_spare(&self) {
        match &self.prepare {
            // The helper only ever stops with the spare's owner, which is this.
            Some(prepare) => drop(prepare.send(())),
            None => {
                if let Err(error) = self.spare.make() {
                    tracing::warn!(%error, "cannot prepare a spare log segment");
                }
            }
        }
    }

    /// The index of the first entry held, if any.
    #[cfg(test)]
    fn first(&self) -> Option<u64> {
        self.last()
            .map(|_| self.kept_from.max(self.segments[0].first))
    }

    /// Whether the segments form the log's chain: each starts at or after the index where the
    /// one before it ended and chains from that one's last checksum, and each one's records
    /// lie within its file, after its header.
    fn chain_holds(&self) -> bool {
        let linked = self.segments.windows(2).all(|pair| {
            let (before, after) = (&pair[0], &pair[1]);
            after.first >= before.next() && after.prev_crc == before.last_crc
        });
        let within = self.segments.iter().all(|s| {
            s.starts
                .first()
                .is_none_or(|&start| start == SEGMENT_HEADER)
                && s.starts.last().is_none_or(|&last| last < s.end)
                && SEGMENT_HEADER <= s.end
                && s.end <= s.capacity
        });
        linked && within
    }

    /// The index of the last entry held, if any.
    pub fn last(&self) -> Option<u64> {
        let next = self.segments.last()?.next();
        (next > self.kept_from.max(self.segments[0].first)).then(|| next - 1)
    }

    /// Writes `entries` (each an index and its encoded bytes, in order, continuing the log) and
    /// returns the files written: they are durable once each is synced
    /// ([`DiskFile::sync_data`]). A disk too full for a new segment fails the append, with the
    /// entries before the one that needed it written.
    pub fn append(&mut self, entries: &[(u64, Vec<u8>)]) -> io::Result<Vec<Arc<dyn DiskFile>>> {
        let written = self.append_until_full(entries)?;
        if written.count < entries.len() {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "the disk has no room for a new log segment",
            ));
        }
        Ok(written.files)
    }

    /// Writes `entries` as [`Segments::append`] does, up to the first that needs a new segment
    /// which the disk has no room for: the entries from that one on are left unwritten (and no
    /// byte of them is), for the caller to append once there is room.
    pub fn append_until_full(&mut self, entries: &[(u64, Vec<u8>)]) -> io::Result<Written> {
        let mut written = Written {
            files: Vec::new(),
            count: entries.len(),
        };
        let mut pending: Vec<u8> = Vec::new();
        let mut pending_at = 0;
        let synced = self.synced.get();
        for (count, (index, payload)) in entries.iter().enumerate() {
            let record = FORMAT.record_header() + payload.len() as u64;
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
                .is_some_and(|s| s.appendable(*index, record));
            if !fits {
                self.write_pending(&mut pending, pending_at, &mut written.files)?;
                match self.roll(*index, record) {
                    Err(e) if is_full(&e) => {
                        written.count = count;
                        break;
                    }
                    rolled => rolled?,
                }
                let active = self.active()?;
                pending.extend_from_slice(&records::header_bytes(active.first, active.prev_crc));
                pending_at = 0;
            } else if pending.is_empty() {
                pending_at = self.active()?.end;
            }
            let active = self.active_mut()?;
            let crc =
                records::encode_record(&mut pending, active.last_crc, *index, synced, payload);
            active.starts.push(active.end);
            active.end += record;
            active.last_crc = crc;
        }
        self.write_pending(&mut pending, pending_at, &mut written.files)?;
        debug_assert!(
            entries[..written.count].last().is_none_or(|(last, _)| {
                self.segments.last().is_some_and(|s| s.next() == last + 1)
            }),
            "the chain's last segment ends with the last entry appended"
        );
        debug_assert!(self.chain_holds(), "an append only extends the chain");
        Ok(written)
    }

    /// Bytes of records the log can take without a new file: what its newest segment has left,
    /// and a segment's worth when the spare is ready.
    pub fn room(&self) -> u64 {
        let active = self
            .segments
            .last()
            .filter(|s| s.format == FORMAT)
            .map_or(0, |s| s.capacity - s.end);
        let spare = if *self.spare.ready() {
            self.segment_bytes - SEGMENT_HEADER
        } else {
            0
        };
        debug_assert!(
            self.segments.last().is_none_or(|s| s.end <= s.capacity),
            "no segment holds records past its end"
        );
        active + spare
    }

    /// Whether the log is short of room: the spare could not be made (the disk refused it) and
    /// the newest segment has less than a quarter of a segment left. A log whose spare is only
    /// not made yet (just opened, or the helper thread at work) is not.
    pub fn short_of_room(&self) -> bool {
        self.spare.failed.load(Ordering::Relaxed) && self.room() < self.segment_bytes / 4
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
        written: &mut Vec<Arc<dyn DiskFile>>,
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
        debug_assert!(
            self.segments.last().is_none_or(|s| s.next() <= first),
            "a new segment starts after the last entry held: the chain only grows at its end"
        );
        tracing::trace!(target: "raftq::stage", stage = "roll", segment = first);
        let bytes = self.segment_bytes.max(SEGMENT_HEADER + record);
        let path = self.dir.join(segment_name(first));
        let spare = {
            let mut ready = self.spare.ready();
            let usable = *ready && bytes == self.segment_bytes;
            if usable {
                *ready = false;
                self.disk.rename(&self.spare.path(), &path)?;
            }
            usable
        };
        if !spare {
            let tmp = self.dir.join(format!("{}{TMP}", segment_name(first)));
            zeroed_file(self.disk.as_ref(), &tmp, bytes)?;
            self.disk.rename(&tmp, &path)?;
        }
        // The name must be durable before the records written under it are.
        self.disk.sync_dir(&self.dir)?;
        self.ask_for_spare();
        let file = self.disk.open(&path, Open::Existing)?;
        let prev_crc = self.segments.last().map_or(0, |s| s.last_crc);
        self.segments.push(Segment {
            first,
            format: FORMAT,
            path,
            file,
            capacity: bytes,
            prev_crc,
            starts: Vec::new(),
            end: SEGMENT_HEADER,
            last_crc: prev_crc,
        });
        debug_assert!(self.chain_holds(), "a new segment continues the chain");
        tracing::trace!(target: "raftq::stage", stage = "rolled", segment = first, spare);
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
                let payload = (a + segment.format.record_header() - lo) as usize..(b - lo) as usize;
                let payload = bytes.get(payload).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, "log record out of bounds")
                })?;
                out.push((index, payload.to_vec()));
            }
        }
        debug_assert!(
            out.windows(2).all(|w| w[1].0 == w[0].0 + 1),
            "the log's entries read back in a row"
        );
        Ok(out)
    }

    /// Removes the entries from `index` on, synced: later segments are removed, the last first
    /// and each removal synced before the next (a crash keeps a prefix of the segments), then
    /// the removed records are overwritten with zeros.
    pub fn truncate(&mut self, index: u64) -> io::Result<()> {
        assert!(
            index >= self.kept_from,
            "a truncation never reaches purged entries, which were committed: {index} < {}",
            self.kept_from
        );
        self.synced.lower(index);
        while self.segments.last().is_some_and(|s| s.first > index) {
            if let Some(segment) = self.segments.pop() {
                self.disk.remove_file(&segment.path)?;
                self.disk.sync_dir(&self.dir)?;
            }
        }
        let Some(segment) = self.segments.last_mut() else {
            return Ok(());
        };
        let Some((at, _)) = segment.span(index) else {
            debug_assert!(segment.next() <= index, "no entry from {index} on is left");
            return Ok(());
        };
        for zeros in truncation_zeros(at, segment.end, segment.format.record_header()) {
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
        debug_assert!(
            segment.next() == index,
            "the log now ends just before {index}"
        );
        debug_assert!(
            self.synced.get() <= index,
            "the synced mark claims no entry the log no longer holds"
        );
        debug_assert!(
            self.chain_holds(),
            "a truncation keeps a prefix of the chain"
        );
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
        debug_assert!(
            self.segments[purged..]
                .iter()
                .all(|s| s.next() > self.kept_from),
            "every segment kept holds an entry that is not purged"
        );
        for segment in self.segments.drain(..purged) {
            let mut ready = self.spare.ready();
            if !*ready && segment.capacity == self.segment_bytes {
                self.disk.rename(&segment.path, &self.spare.path())?;
                *ready = true;
            } else {
                removable.push(segment.path);
            }
        }
        debug_assert!(
            self.kept_from > index,
            "no entry up to a purge's index is read any more"
        );
        debug_assert!(self.chain_holds(), "a purge keeps a suffix of the chain");
        Ok(removable)
    }
}

/// The byte ranges a truncation overwrites with zeros, in order, each synced before the next,
/// when the first removed record starts at `at`, its header `header` bytes long, and the
/// segment's records end at `end`.
///
/// First that record's header: once it is zeros, the log ends before it at the next open,
/// whatever part of the rest reached the disk. Then the rest of the removed tail, since a record
/// left there would chain from the one before it and read as damage behind the new records that
/// overwrite its start. In one write, a crash could keep the zeros over part of the first record
/// but not over its header nor the record after it, which still chains from it: damage, and a
/// node that refuses to start for a truncation it never finished.
fn truncation_zeros(at: u64, end: u64, header: u64) -> [Range<u64>; 2] {
    let header_end = (at + header).min(end);
    [at..header_end, header_end..end]
}

/// Removes the segment files a purge returned. Removing a file also drops its pages from the
/// page cache, which is slow for segments written moments ago: done under the
/// segments' lock, with the Raft core waiting for the purge, it would hold up every append.
pub(crate) fn remove_purged(disk: &dyn Disk, paths: &[PathBuf]) {
    tracing::trace!(target: "raftq::stage", stage = "purge_remove", files = paths.len());
    for path in paths {
        if let Err(error) = disk.remove_file(path) {
            tracing::warn!(%error, path = %path.display(), "cannot remove a purged log segment");
        }
    }
    tracing::trace!(target: "raftq::stage", stage = "purge_removed");
}

/// Starts the thread that makes a spare segment whenever asked, until the spare's owner is gone.
/// One it could not make (a full disk) it tries again unasked, after a pause that doubles from
/// [`SPARE_RETRY_FIRST`] to [`SPARE_RETRY_MAX`], until it can.
fn spawn_preparer(spare: std::sync::Weak<Spare>) -> io::Result<mpsc::Sender<()>> {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("raftq-log-spare".into())
        .spawn(move || {
            let mut retry: Option<Duration> = None;
            loop {
                let asked = match retry {
                    None => rx.recv().is_ok(),
                    Some(pause) => !matches!(
                        rx.recv_timeout(pause),
                        Err(mpsc::RecvTimeoutError::Disconnected)
                    ),
                };
                let Some(spare) = spare.upgrade().filter(|_| asked) else {
                    return;
                };
                retry = match (spare.make(), retry) {
                    (Ok(()), None) => None,
                    (Ok(()), Some(_)) => {
                        tracing::info!("a spare log segment is ready again");
                        None
                    }
                    (Err(error), None) => {
                        tracing::warn!(%error, full = is_full(&error), "cannot prepare a spare log segment; trying again");
                        Some(SPARE_RETRY_FIRST)
                    }
                    (Err(_), Some(pause)) => Some((pause * 2).min(SPARE_RETRY_MAX)),
                };
            }
        })?;
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, OpenOptions};
    use std::os::unix::fs::FileExt;

    /// Opens the segments in `dir` on the real disk, new ones of `segment_bytes`.
    fn open_real(
        dir: &Path,
        segment_bytes: u64,
        purged: Option<u64>,
    ) -> Result<Segments, SegmentError> {
        let options = LogOptions {
            segment_bytes,
            ..LogOptions::default()
        };
        Segments::open(&options, dir, purged)
    }

    const SMALL: u64 = 4096;

    /// Segments of [`SMALL`] bytes whose spare is made in place, not by its thread, so that
    /// whether one is ready does not depend on the thread's timing.
    fn spare_in_place() -> LogOptions {
        LogOptions {
            segment_bytes: SMALL,
            spare_thread: false,
            ..LogOptions::default()
        }
    }

    /// Opens segments in `dir`, lets `write` change them, closes them and opens them again.
    fn reopened(dir: &Path, purged: Option<u64>, write: impl FnOnce(&mut Segments)) -> Segments {
        write(&mut open_real(dir, SMALL, None).expect("open"));
        open_real(dir, SMALL, purged).expect("reopen")
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

    /// Appends `entries` one at a time, each synced before the next, as the log store does.
    fn append_synced(log: &mut Segments, entries: &[(u64, Vec<u8>)]) {
        for entry in entries {
            for file in log.append(std::slice::from_ref(entry)).expect("append") {
                file.sync_data().expect("sync");
            }
            log.synced_mark().raise(entry.0 + 1);
        }
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
            let mut log = open_real(tmp.path(), SMALL, None).expect("open");
            for chunk in written.chunks(7) {
                for file in log.append(chunk).expect("append") {
                    file.sync_data().expect("sync");
                }
            }
            assert_eq!(log.read(1, 40).expect("read"), written);
            assert!(segment_files(tmp.path()).len() > 2, "several segments");
        }
        let log = open_real(tmp.path(), SMALL, None).expect("reopen");
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

    /// A truncation is kept across a reopen with no append after it, and with one whose new
    /// record lines up with an old one (same sizes: entry 5's new record ends where the old
    /// entry 6 starts), which brings none of the old tail back.
    #[test]
    fn a_truncated_tail_stays_gone_with_or_without_a_later_append() {
        let lined_up = [(5, vec![0xee; 200])];
        for (appended, last) in [(&[][..], 4), (&lined_up[..], 5)] {
            let tmp = tempfile::TempDir::new().expect("temp dir");
            let log = reopened(tmp.path(), None, |log| {
                log.append(&entries(1..30, 200)).expect("append");
                log.truncate(5).expect("truncate");
                if !appended.is_empty() {
                    log.append(appended).expect("append");
                }
            });
            assert_eq!(log.last(), Some(last));
            assert_eq!(log.read(5, 6).expect("read"), appended);
            assert_eq!(segment_files(tmp.path()).len(), 1, "later segments removed");
        }
    }

    #[test]
    #[should_panic(expected = "a truncation never reaches purged entries")]
    fn a_truncation_into_purged_entries_stops_the_process() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let mut log = open_real(tmp.path(), SMALL, None).expect("open");
        log.append(&entries(1..10, 100)).expect("append");
        log.purge(5).expect("purge");
        let _ = log.truncate(3);
    }

    #[test]
    #[should_panic(expected = "a length of 0 reads as the end of the chain")]
    fn an_entry_without_bytes_is_never_written() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let mut log = open_real(tmp.path(), SMALL, None).expect("open");
        let _ = log.append(&[(1, Vec::new())]);
    }

    #[test]
    fn a_crash_at_any_point_of_a_truncation_leaves_a_log_that_opens() {
        // Records that span several 512-byte sectors, the unit a disk writes whole.
        const SECTOR: u64 = 512;
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let path = tmp.path().join(segment_name(1));
        let (at, end) = {
            let mut log = open_real(tmp.path(), SMALL, None).expect("open");
            log.append(&entries(1..4, 1200)).expect("append");
            let segment = &log.segments[0];
            (segment.span(2).expect("entry 2").0, segment.end)
        };
        let before = fs::read(&path).expect("read");
        let zeros = truncation_zeros(at, end, FORMAT.record_header());
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
                let log = open_real(tmp.path(), SMALL, None).unwrap_or_else(|e| {
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
            let mut log = open_real(tmp.path(), SMALL, None).expect("open");
            append_synced(&mut log, &entries(1..6, 100));
            tmp.path().join(segment_name(1))
        };
        let header = FORMAT.record_header();
        let record = SEGMENT_HEADER + (header + 100) * 4;
        flip(&path, record + header + 50);
        let log = open_real(tmp.path(), SMALL, None).expect("a torn tail opens");
        assert_eq!(log.last(), Some(4));
        drop(log);
        flip(&path, SEGMENT_HEADER + header + 10);
        let error = open_real(tmp.path(), SMALL, None).expect_err("damage is refused");
        assert!(error.is_damage(), "{error}");
    }

    #[test]
    fn a_chain_ending_before_a_segment_of_intact_records_refuses_to_open() {
        const SIZE: u64 = 300;
        let header = FORMAT.record_header();
        let per_segment = (SMALL - SEGMENT_HEADER) / (header + SIZE);
        let last_record = SEGMENT_HEADER + (per_segment - 1) * (header + SIZE);
        // The second segment's header; the payload of the first segment's last record.
        for (segment, at) in [(1, 10), (0, last_record + header + 5)] {
            let tmp = tempfile::TempDir::new().expect("temp dir");
            {
                let mut log = open_real(tmp.path(), SMALL, None).expect("open");
                append_synced(&mut log, &entries(1..40, SIZE as usize));
            }
            let files = segment_files(tmp.path());
            assert!(files.len() > 2, "several segments");
            flip(&tmp.path().join(&files[segment]), at);
            let error = open_real(tmp.path(), SMALL, None).expect_err("damage is refused");
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
            let mut log = open_real(tmp.path(), SMALL, None).expect("open");
            log.append(&entries(1..40, 300)).expect("append");
        }
        // A recycled segment renamed for the next entry, still holding its earlier records.
        let files = segment_files(tmp.path());
        let leftover = tmp.path().join(segment_name(40));
        fs::copy(tmp.path().join(&files[0]), &leftover).expect("copy");
        let log = open_real(tmp.path(), SMALL, None).expect("a crash's leftover opens");
        assert_eq!(log.last(), Some(39));
        assert!(!leftover.exists(), "the leftover is removed");
    }

    #[test]
    fn only_a_spare_the_disk_refused_leaves_the_log_short_of_room() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let log = Segments::open(&spare_in_place(), tmp.path(), None).expect("open");
        // No segment yet and the spare let go: no room, but nothing refused any either.
        *log.spare.ready() = false;
        fs::remove_file(tmp.path().join(SPARE)).expect("let the spare go");
        assert_eq!(log.room(), 0);
        assert!(
            !log.short_of_room(),
            "a spare not made yet is no want of room"
        );
        // The spare's file cannot be made (its name taken by a directory), as on a full disk.
        fs::create_dir(tmp.path().join(SPARE_TMP)).expect("block the spare");
        assert!(log.spare.make().is_err());
        assert!(
            log.short_of_room(),
            "the disk refused the spare and no segment has room"
        );
        fs::remove_dir(tmp.path().join(SPARE_TMP)).expect("unblock the spare");
        log.spare.make().expect("the spare is made");
        assert!(!log.short_of_room(), "a spare made again is room");
    }

    #[test]
    fn purged_segments_are_recycled_and_the_log_restarts_after_a_purge_of_everything() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        // No spare is ready when the purge comes, once the one the rolls made is let go.
        let options = spare_in_place();
        let write = |log: &mut Segments| {
            log.append(&entries(1..40, 300)).expect("append");
            *log.spare.ready() = false;
            fs::remove_file(tmp.path().join(SPARE)).expect("let the spare go");
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
            remove_purged(&RealDisk, &removable[..1]);
            assert!(!removable[0].exists());
            assert_eq!(log.last(), None);
            log.append(&entries(51..53, 300))
                .expect("append after the purge");
        };
        write(&mut Segments::open(&options, tmp.path(), None).expect("open"));
        let log = open_real(tmp.path(), SMALL, Some(50)).expect("reopen");
        assert_eq!((log.first(), log.last()), (Some(51), Some(52)));
    }

    #[test]
    fn entries_missing_after_the_purged_ones_refuse_to_open() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        {
            let mut log = open_real(tmp.path(), SMALL, None).expect("open");
            log.append(&entries(10..12, 100)).expect("append");
        }
        let error = open_real(tmp.path(), SMALL, Some(5)).expect_err("a gap");
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

    #[test]
    fn a_segment_of_the_first_format_reads_back_and_the_log_goes_on_in_a_new_one() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let old = entries(1..5, 100);
        let path = tmp.path().join(segment_name(1));
        fs::write(&path, records::v1_segment(1, 0, &old, SMALL as usize)).expect("write");
        {
            let mut log = open_real(tmp.path(), SMALL, None).expect("open");
            assert_eq!(log.read(0, u64::MAX).expect("read"), old);
            append_synced(&mut log, &entries(5..7, 100));
        }
        assert_eq!(
            segment_files(tmp.path()).len(),
            2,
            "a new segment for entry 5"
        );
        let log = open_real(tmp.path(), SMALL, None).expect("reopen");
        assert_eq!(log.read(0, u64::MAX).expect("read"), entries(1..7, 100));
        drop(log);
        // As the first format reads it: a damaged record that the next one chains from.
        flip(&path, SEGMENT_HEADER + Format::V1.record_header() + 10);
        let error = open_real(tmp.path(), SMALL, None).expect_err("damage is refused");
        assert!(
            matches!(error, SegmentError::Damaged { index: 1, .. }),
            "{error}"
        );
    }

    #[test]
    fn a_segment_of_a_later_format_is_refused() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        append_synced(
            &mut open_real(tmp.path(), SMALL, None).expect("open"),
            &entries(1..3, 100),
        );
        let path = tmp.path().join(segment_name(1));
        let mut bytes = fs::read(&path).expect("read");
        bytes[7] = b'9';
        let crc = crc32fast::hash(&bytes[..20]);
        bytes[20..24].copy_from_slice(&crc.to_le_bytes());
        fs::write(&path, &bytes).expect("write");
        let error = open_real(tmp.path(), SMALL, None).expect_err("refused");
        assert!(
            matches!(error, SegmentError::LaterFormat { found: '9', .. }),
            "{error}"
        );
        assert!(error.to_string().contains("segment format 9"), "{error}");
        assert!(error.to_string().contains("segment format 2"), "{error}");
        assert!(!error.is_damage());
    }
}
