//! The layout of a log segment's bytes, and how a segment read after a crash tells a write the
//! crash cut short from damage to what was durable.
//!
//! A segment starts with a header of [`SEGMENT_HEADER`] bytes: a magic tag that names the
//! segment's format, the index of its first entry, the checksum its first record chains from,
//! and the header's own CRC-32. Records follow, each a header (payload length, checksum, index,
//! and in format 2 the synced mark) and the payload. Each record's checksum covers the checksum
//! of the record before it and every other field, as in etcd's write-ahead log: a record left in
//! place from an earlier use of the space (a recycled file, a truncated tail) cannot pass for the
//! next one, since it chains from another record.
//!
//! The synced mark (format 2) is how far the log was known durable when the record was written:
//! every entry below it had been fsynced. A crash loses any part of what was written since the
//! last fsync, sector by sector and in any order, so a record that fails its checksum may be a
//! write cut short, with later records of the same unsynced writes intact. A later record that
//! chains from it and whose mark is past it proves it was durable before the crash: that is
//! damage, and the log refuses to open. Without such a record the log ends before it, and
//! nothing after it was acknowledged: an acknowledgement follows the fsync of every record up
//! to it. Damage to records that no intact later record vouches for (the last ones synced) reads
//! as a cut-short write: no rule can tell the two apart from the bytes alone.
//!
//! Segments of format 1 (no mark) are read with the only rule their bytes allow: a failing
//! record followed by one chaining from it is damage, and so is a later segment holding records
//! written in full. No record is appended to a segment of format 1. A segment whose header is
//! intact but names a later format is refused: this build cannot read it.

use std::io;
use std::path::{Path, PathBuf};

/// Why the segments could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    #[error("log segment I/O: {0}")]
    Io(#[from] io::Error),
    #[error(
        "log segment {file} is damaged at byte {offset}: the record of entry {index} fails its \
         checksum, yet a later record chaining from it is intact and says it was synced"
    )]
    Damaged {
        file: PathBuf,
        offset: u64,
        index: u64,
    },
    #[error(
        "log segment {file} holds intact records from entry {index} on that say the log was \
         synced past where it ends (a damaged record or segment header before them)"
    )]
    Stranded { file: PathBuf, index: u64 },
    #[error(
        "the log's first entry is {first}, but entries were purged only up to {purged}: the \
         entries in between are missing"
    )]
    Missing { first: u64, purged: u64 },
    #[error(
        "log segment {} is of segment format {found}, later than this build's segment format {}: \
         a later raftq build wrote it; run that build (or a later one)",
        file.display(),
        FORMAT.number()
    )]
    LaterFormat { file: PathBuf, found: char },
}

impl SegmentError {
    /// Whether the stored log is damaged (as opposed to unreadable for another reason).
    pub fn is_damage(&self) -> bool {
        !matches!(self, SegmentError::Io(_) | SegmentError::LaterFormat { .. })
    }
}

/// Bytes of a segment's header: magic, first index, the checksum it chains from, its own CRC.
pub const SEGMENT_HEADER: u64 = 24;

/// The layout of a segment's records, named by the magic its header starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Record headers of 16 bytes: payload length, checksum, index.
    V1,
    /// Record headers of 24 bytes: payload length, checksum, index, synced mark.
    V2,
}

/// The format new segments are written in.
pub const FORMAT: Format = Format::V2;

impl Format {
    fn magic(self) -> &'static [u8; 8] {
        match self {
            Format::V1 => b"raftqlog",
            Format::V2 => b"raftqlg2",
        }
    }

    /// The format's number: the last character of its magic (`raftqlog` is the first).
    pub fn number(self) -> u64 {
        match self {
            Format::V1 => 1,
            Format::V2 => 2,
        }
    }

    /// Bytes of a record's header.
    pub fn record_header(self) -> u64 {
        match self {
            Format::V1 => 16,
            Format::V2 => 24,
        }
    }
}

/// The header of a segment whose first entry is `first` and whose first record chains from
/// `prev_crc`, in [`FORMAT`].
pub fn header_bytes(first: u64, prev_crc: u32) -> [u8; SEGMENT_HEADER as usize] {
    let mut header = [0u8; SEGMENT_HEADER as usize];
    header[..8].copy_from_slice(FORMAT.magic());
    header[8..16].copy_from_slice(&first.to_le_bytes());
    header[16..20].copy_from_slice(&prev_crc.to_le_bytes());
    let crc = crc32fast::hash(&header[..20]);
    header[20..].copy_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(
        read_header(&header),
        Some((FORMAT, first, prev_crc)),
        "a segment's header reads back as written"
    );
    header
}

/// The format, first index and checksum to chain from, if `bytes` starts with an intact header.
pub fn read_header(bytes: &[u8]) -> Option<(Format, u64, u32)> {
    let header = bytes.get(..SEGMENT_HEADER as usize)?;
    let word = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let format = [Format::V1, Format::V2]
        .into_iter()
        .find(|f| &header[..8] == f.magic())?;
    if crc32fast::hash(&header[..20]) != word(20) {
        return None;
    }
    let first = u64::from_le_bytes(header[8..16].try_into().ok()?);
    Some((format, first, word(16)))
}

/// The last character of the magic (a later format's number), if `bytes` starts with an intact
/// header of a segment format this build does not know: its magic has the family's prefix and
/// another last byte.
pub fn later_format(bytes: &[u8]) -> Option<char> {
    let header = bytes.get(..SEGMENT_HEADER as usize)?;
    let later = header[..7] == FORMAT.magic()[..7]
        && read_header(bytes).is_none()
        && crc32fast::hash(&header[..20]).to_le_bytes() == header[20..24]
        && header[..8] != Format::V1.magic()[..];
    later.then_some(char::from(header[7]))
}

fn record_crc(format: Format, prev: u32, index: u64, synced: u64, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&prev.to_le_bytes());
    hasher.update(&index.to_le_bytes());
    hasher.update(&(payload.len() as u64).to_le_bytes());
    if format == Format::V2 {
        hasher.update(&synced.to_le_bytes());
    }
    hasher.update(payload);
    hasher.finalize()
}

/// Appends to `out` the record of entry `index` in [`FORMAT`], chaining from `prev` and marked
/// `synced`; returns its checksum.
pub fn encode_record(out: &mut Vec<u8>, prev: u32, index: u64, synced: u64, payload: &[u8]) -> u32 {
    assert!(
        !payload.is_empty(),
        "entry {index}'s record has a payload: a length of 0 reads as the end of the chain"
    );
    assert!(
        u32::try_from(payload.len()).is_ok(),
        "entry {index}'s payload length fits the record's 32-bit length field"
    );
    let before = out.len();
    let crc = record_crc(FORMAT, prev, index, synced, payload);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
    out.extend_from_slice(&synced.to_le_bytes());
    out.extend_from_slice(payload);
    debug_assert_eq!(
        (out.len() - before) as u64,
        FORMAT.record_header() + payload.len() as u64,
        "a record is its header and its payload, as the segment's offsets count it"
    );
    crc
}

/// A record as found in a file: its index, stored checksum, synced mark (0 in format 1),
/// payload and end.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub index: u64,
    pub crc: u32,
    pub synced: u64,
    pub payload: &'a [u8],
    pub end: u64,
}

impl Record<'_> {
    /// Whether this is entry `index`'s record, intact and chaining from `prev`.
    fn chains_from(&self, format: Format, prev: u32, index: u64) -> bool {
        self.index == index
            && record_crc(format, prev, index, self.synced, self.payload) == self.crc
    }
}

/// The record at `at` in `bytes`, if its header and length fit (its checksum unchecked).
pub fn parse_record(format: Format, bytes: &[u8], at: u64) -> Option<Record<'_>> {
    let start = usize::try_from(at).ok()?;
    let header_len = format.record_header() as usize;
    let header = bytes.get(start..start.checked_add(header_len)?)?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[4..8].try_into().ok()?);
    let index = u64::from_le_bytes(header[8..16].try_into().ok()?);
    let synced = match format {
        Format::V1 => 0,
        Format::V2 => u64::from_le_bytes(header[16..24].try_into().ok()?),
    };
    if len == 0 {
        return None;
    }
    let from = start + header_len;
    let payload = bytes.get(from..from.checked_add(len)?)?;
    Some(Record {
        index,
        crc,
        synced,
        payload,
        end: (from + len) as u64,
    })
}

/// The intact records after `record` (entry `index`'s place) in `bytes`, each chaining from the
/// one before, `record` itself unchecked.
fn chain_after<'a>(
    format: Format,
    bytes: &'a [u8],
    record: Record<'a>,
    index: u64,
) -> impl Iterator<Item = Record<'a>> + 'a {
    std::iter::successors(Some((index, record)), move |(i, before)| {
        parse_record(format, bytes, before.end)
            .filter(|next| next.chains_from(format, before.crc, i + 1))
            .map(|next| (i + 1, next))
    })
    .skip(1)
    .map(|(_, record)| record)
}

/// The chain of records found in one segment.
#[derive(Debug)]
pub struct Scanned {
    pub starts: Vec<u64>,
    pub end: u64,
    pub last_crc: u32,
}

/// Follows the chain of records in `bytes` (a segment of `format` at `path`) from entry
/// `first`, chaining from `prev_crc`, to the first record that is not the next one; that one is
/// an error when it is damage (see the module's documentation).
pub fn scan(
    path: &Path,
    format: Format,
    bytes: &[u8],
    first: u64,
    prev_crc: u32,
) -> Result<Scanned, SegmentError> {
    let mut scanned = Scanned {
        starts: Vec::new(),
        end: SEGMENT_HEADER,
        last_crc: prev_crc,
    };
    loop {
        let index = first + scanned.starts.len() as u64;
        let Some(record) = parse_record(format, bytes, scanned.end) else {
            return Ok(scanned);
        };
        if !record.chains_from(format, scanned.last_crc, index) {
            if damaged(format, bytes, record, index) {
                return Err(SegmentError::Damaged {
                    file: path.to_path_buf(),
                    offset: scanned.end,
                    index,
                });
            }
            return Ok(scanned);
        }
        debug_assert!(
            record.end > scanned.end && record.end <= bytes.len() as u64,
            "each record read ends past the one before it, within the file"
        );
        scanned.starts.push(scanned.end);
        scanned.end = record.end;
        scanned.last_crc = record.crc;
    }
}

/// Whether `record`, in entry `index`'s place and failing its checksum, was damaged after it was
/// durable: in format 2, a later record chaining from it says the log was synced past it; in
/// format 1, the record after it, in place and chaining from it, is intact.
fn damaged(format: Format, bytes: &[u8], record: Record<'_>, index: u64) -> bool {
    let mut after = chain_after(format, bytes, record, index);
    match format {
        Format::V1 => record.index == index && after.next().is_some(),
        Format::V2 => after.any(|later| later.synced > index),
    }
}

/// Whether `bytes`, a segment named for entry `first` that the log's chain does not reach (it
/// ends before entry `end`), proves that the log lost entries that were durable, rather than
/// being a crash's leftover: a roll whose records were cut short, or a segment a truncation
/// removed. `prev` is the checksum of the chain's last record.
///
/// In format 2, one of its intact records says the log was synced past `end`. In format 1 (and
/// when the header is unreadable, in either), it holds its first entry's record written in full:
/// chaining from `prev` or from the checksum its header names, or followed by one chaining
/// from it.
pub fn proves_loss(bytes: &[u8], first: u64, prev: Option<u32>, end: u64) -> bool {
    let header = read_header(bytes);
    let named = header.filter(|(_, f, _)| *f == first).map(|(_, _, p)| p);
    let is = |format| header.is_none_or(|(f, _, _)| f == format);
    let chained = |format: Format, record: &Record<'_>| {
        prev.into_iter()
            .chain(named)
            .any(|prev| record.chains_from(format, prev, first))
    };
    let first_record = |format| parse_record(format, bytes, SEGMENT_HEADER);
    let v1 = is(Format::V1)
        && first_record(Format::V1)
            .filter(|record| record.index == first)
            .is_some_and(|record| {
                chained(Format::V1, &record)
                    || chain_after(Format::V1, bytes, record, first)
                        .next()
                        .is_some()
            });
    let v2 = is(Format::V2)
        && first_record(Format::V2).is_some_and(|record| {
            (chained(Format::V2, &record) && record.synced > end)
                || chain_after(Format::V2, bytes, record, first).any(|later| later.synced > end)
        });
    v1 || v2
}

/// A segment of the first format: entries `entries` from `first`, chaining from `prev`, in a
/// file of `bytes` bytes.
#[cfg(test)]
pub fn v1_segment(first: u64, prev: u32, entries: &[(u64, Vec<u8>)], bytes: usize) -> Vec<u8> {
    let mut out = header_bytes(first, prev).to_vec();
    out[..8].copy_from_slice(Format::V1.magic());
    let crc = crc32fast::hash(&out[..20]);
    out[20..24].copy_from_slice(&crc.to_le_bytes());
    let mut last = prev;
    for (index, payload) in entries {
        last = record_crc(Format::V1, last, *index, 0, payload);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&last.to_le_bytes());
        out.extend_from_slice(&index.to_le_bytes());
        out.extend_from_slice(payload);
    }
    out.resize(bytes, 0);
    out
}
