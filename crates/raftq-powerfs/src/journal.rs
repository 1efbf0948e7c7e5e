//! The format of a file's undo journal (`.powerfs/files/<inode>`): what the file held at its
//! last fsync, as much as later writes changed.
//!
//! A header (`PFJ1`, then the file's size at its last fsync, little-endian `u64`) and then one
//! record per sector the first time it is overwritten since that fsync: the sector's number
//! (`u64`), a tag (`0`: the bytes follow, `1`: they were all zeros) and their length (`u16`, at
//! most 512, shorter for the last sector when the synced size ends inside it). Only sectors that
//! start before the synced size have records: beyond it, the file held nothing. An empty file
//! means no change since the last fsync. A kill can tear the last record; it is ignored, and the
//! write it preceded never happened.

use std::collections::BTreeMap;

/// The crash model's unit: a power loss keeps or loses each 512-byte sector as a whole.
pub const SECTOR: u64 = 512;

const MAGIC: &[u8; 4] = b"PFJ1";

/// The length of a journal's header.
pub const HEADER_LEN: u64 = 12;

/// A sector's content as of the last fsync, up to the synced size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreImage {
    /// These bytes.
    Bytes(Vec<u8>),
    /// This many zero bytes (a preallocated file's sectors mostly are).
    Zeros(u16),
}

impl PreImage {
    /// The pre-image of `bytes`.
    pub fn of(bytes: &[u8]) -> PreImage {
        if bytes.iter().all(|&b| b == 0) {
            PreImage::Zeros(bytes.len() as u16)
        } else {
            PreImage::Bytes(bytes.to_vec())
        }
    }

    /// The whole sector as it was: the bytes, then zeros (past the synced size the file held
    /// nothing, which reads as zeros once the file is longer).
    pub fn sector(&self) -> Vec<u8> {
        let mut out = match self {
            PreImage::Bytes(bytes) => bytes.clone(),
            PreImage::Zeros(_) => Vec::new(),
        };
        out.resize(SECTOR as usize, 0);
        out
    }
}

/// The header of a journal for a file whose size at its last fsync was `synced_size`.
pub fn header(synced_size: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN as usize);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&synced_size.to_le_bytes());
    out
}

/// Appends the record of `sector`'s pre-image to `out`.
pub fn encode_record(out: &mut Vec<u8>, sector: u64, pre: &PreImage) {
    out.extend_from_slice(&sector.to_le_bytes());
    match pre {
        PreImage::Bytes(bytes) => {
            out.push(0);
            out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        PreImage::Zeros(len) => {
            out.push(1);
            out.extend_from_slice(&len.to_le_bytes());
        }
    }
}

/// A file's journal, read back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileJournal {
    /// The file's size at its last fsync.
    pub synced_size: u64,
    /// The pre-images of the sectors changed since, by sector number.
    pub sectors: BTreeMap<u64, PreImage>,
}

/// Reads a journal: `None` when it records no change (empty, or a header torn by a kill).
pub fn decode(bytes: &[u8]) -> Result<Option<FileJournal>, String> {
    if bytes.len() < HEADER_LEN as usize {
        return Ok(None);
    }
    if &bytes[..4] != MAGIC {
        return Err("no journal header".to_string());
    }
    let mut journal = FileJournal {
        synced_size: u64_at(bytes, 4),
        sectors: BTreeMap::new(),
    };
    let mut at = HEADER_LEN as usize;
    while let Some((sector, pre, next)) = record_at(bytes, at)? {
        // The first record of a sector is its content at the fsync; there is only one.
        journal.sectors.entry(sector).or_insert(pre);
        at = next;
    }
    Ok(Some(journal))
}

/// The record at `at`, and where the next one starts; `None` at the end or a torn tail.
fn record_at(bytes: &[u8], at: usize) -> Result<Option<(u64, PreImage, usize)>, String> {
    const FIXED: usize = 8 + 1 + 2;
    if bytes.len() < at + FIXED {
        return Ok(None);
    }
    let sector = u64_at(bytes, at);
    let tag = bytes[at + 8];
    let len = u16::from_le_bytes([bytes[at + 9], bytes[at + 10]]);
    if u64::from(len) > SECTOR {
        return Err(format!("a record at byte {at} is {len} bytes long"));
    }
    match tag {
        0 => {
            let end = at + FIXED + usize::from(len);
            if bytes.len() < end {
                return Ok(None);
            }
            let pre = PreImage::Bytes(bytes[at + FIXED..end].to_vec());
            Ok(Some((sector, pre, end)))
        }
        1 => Ok(Some((sector, PreImage::Zeros(len), at + FIXED))),
        other => Err(format!("a record at byte {at} has the tag {other}")),
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_a_torn_tail_is_ignored() {
        let mut bytes = header(1000);
        encode_record(&mut bytes, 0, &PreImage::of(&[7u8; 512]));
        encode_record(&mut bytes, 1, &PreImage::of(&[0u8; 488]));
        let whole = bytes.len();
        encode_record(&mut bytes, 5, &PreImage::of(&[9u8; 300]));
        let journal = decode(&bytes[..bytes.len() - 1])
            .expect("decode")
            .expect("journal");
        assert_eq!(journal.synced_size, 1000);
        assert_eq!(journal.sectors.len(), 2);
        assert_eq!(journal.sectors[&0], PreImage::Bytes(vec![7u8; 512]));
        assert_eq!(journal.sectors[&1], PreImage::Zeros(488));
        assert_eq!(journal.sectors[&1].sector(), vec![0u8; 512]);
        let all = decode(&bytes).expect("decode").expect("journal");
        assert_eq!(all.sectors[&5].sector()[..300], [9u8; 300]);
        assert!(whole < bytes.len());
    }

    #[test]
    fn an_empty_or_torn_header_records_nothing_and_garbage_is_an_error() {
        assert_eq!(decode(&[]).expect("empty"), None);
        assert_eq!(decode(&header(5)[..7]).expect("torn"), None);
        assert!(decode(b"not a journal").is_err());
    }
}
