//! The stored formats a data directory holds, recorded in the directory itself, so that a build
//! refuses data written by a later one before it reads any of it, with a message that names the
//! data's format and its own.
//!
//! Each kind of stored shape has a number of its own, which a build raises when it writes that
//! shape differently: the log entries ([`LOG_FORMAT`]), the state's rows
//! ([`raftq_engine::rows::FORMAT_VERSION`]), the message payloads
//! ([`raftq_engine::rows::PAYLOAD_FORMAT`]), the log's segment files, the snapshot files and the
//! metadata the log and the state machine keep in RocksDB (vote, enrolment, purge marker, applied
//! marker, membership: [`METADATA_FORMAT`]). A build reads every earlier number of each kind.
//!
//! The record is one row of the log's metadata family, `formats`, as text: `kind=number` pairs
//! separated by spaces (`log=3 rows=6 ...`), so that a later build can add a kind without
//! changing the record's own shape. A node checks it when it opens its storage, before the log,
//! the state or a snapshot is read, and then records its own numbers (synced) unless the record
//! already says the same: from then on the directory may hold what this build writes, and an
//! earlier build that knows the record refuses it. A directory without the record was written
//! by a build before it; the formats of those builds are all ones this build reads, and the
//! checks where each shape is read (a log entry's number, a segment's magic, the row format in
//! the meta row, a payload's first byte, a snapshot's magic) refuse anything else there too.

use rocksdb::{WriteBatch, WriteOptions, DB};

use crate::layout::META_CF;
use crate::types::LOG_FORMAT;

/// The version of the encodings of the log's and the state machine's metadata rows.
pub const METADATA_FORMAT: u64 = 1;

/// The key of the record in the log's metadata family.
const KEY_FORMATS: &[u8] = b"formats";

/// Why a directory's formats are not ones this build reads.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    #[error(
        "the data directory holds {kind} format {data}, newer than this build's {kind} format \
         {build}: a later raftq build wrote it; run that build (or a later one) on it"
    )]
    Newer { kind: String, data: u64, build: u64 },
    #[error(
        "the data directory holds {kind} format {data}, a kind of stored format this build does \
         not know (it knows {known}): a later raftq build wrote it; run that build (or a later \
         one) on it"
    )]
    Unknown {
        kind: String,
        data: u64,
        known: String,
    },
    #[error("the data directory's record of its stored formats is unreadable: `{0}`")]
    Unreadable(String),
    #[error("the data directory's record of its stored formats: {0}")]
    Database(#[from] rocksdb::Error),
}

impl FormatError {
    /// Whether the record itself is damaged (as opposed to naming formats of a later build).
    pub fn is_damage(&self) -> bool {
        matches!(self, FormatError::Unreadable(_))
    }
}

/// The number of each kind of stored format this build writes, and reads down to the first.
pub fn current() -> [(&'static str, u64); 6] {
    [
        ("log", LOG_FORMAT),
        ("rows", u64::from(raftq_engine::rows::FORMAT_VERSION)),
        ("payload", u64::from(raftq_engine::rows::PAYLOAD_FORMAT)),
        ("segments", crate::records::FORMAT.number()),
        ("snapshot", crate::snapshot::FORMAT),
        ("metadata", METADATA_FORMAT),
    ]
}

/// The record's text for `formats`.
pub fn encode(formats: &[(&str, u64)]) -> String {
    let pairs: Vec<String> = formats.iter().map(|(k, n)| format!("{k}={n}")).collect();
    pairs.join(" ")
}

/// The `kind=number` pairs of a record's text.
fn decode(text: &str) -> Result<Vec<(String, u64)>, FormatError> {
    text.split_whitespace()
        .map(|pair| {
            let (kind, number) = pair
                .split_once('=')
                .ok_or_else(|| FormatError::Unreadable(text.to_string()))?;
            let number = number
                .parse()
                .map_err(|_| FormatError::Unreadable(text.to_string()))?;
            Ok((kind.to_string(), number))
        })
        .collect()
}

/// Refuses `text` if it names a format later than this build's or a kind it does not know.
pub fn check(text: &str) -> Result<(), FormatError> {
    let build = current();
    for (kind, data) in decode(text)? {
        match build.iter().find(|(k, _)| *k == kind) {
            Some(&(_, number)) if data > number => {
                return Err(FormatError::Newer {
                    kind,
                    data,
                    build: number,
                })
            }
            Some(_) => {}
            None => {
                let known: Vec<&str> = build.iter().map(|(k, _)| *k).collect();
                return Err(FormatError::Unknown {
                    kind,
                    data,
                    known: known.join(", "),
                });
            }
        }
    }
    Ok(())
}

/// Checks the record of `db` (a directory without one passes), then records this build's
/// formats, synced, unless the record already says the same.
pub fn check_and_record(db: &DB) -> Result<(), FormatError> {
    let ours = encode(&current());
    match read(db)? {
        Some(text) if text == ours => return Ok(()),
        Some(text) => check(&text)?,
        None => {}
    }
    write(db, &ours)
}

/// The record's text, if the directory has one.
fn read(db: &DB) -> Result<Option<String>, FormatError> {
    let Some(bytes) = db.get_cf(&meta(db)?, KEY_FORMATS)? else {
        return Ok(None);
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| FormatError::Unreadable(String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// Records `text` as the directory's formats, synced. Public for tests that make a directory
/// look written by another build.
pub fn write(db: &DB, text: &str) -> Result<(), FormatError> {
    let mut batch = WriteBatch::default();
    batch.put_cf(&meta(db)?, KEY_FORMATS, text.as_bytes());
    let mut synced = WriteOptions::default();
    synced.set_sync(true);
    Ok(db.write_opt(batch, &synced)?)
}

fn meta(db: &DB) -> Result<std::sync::Arc<rocksdb::BoundColumnFamily<'_>>, FormatError> {
    db.cf_handle(META_CF)
        .ok_or_else(|| FormatError::Unreadable(format!("no column family {META_CF}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(dir: &std::path::Path) -> DB {
        let mut options = rocksdb::Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        DB::open_cf(&options, dir, [META_CF]).expect("open")
    }

    #[test]
    fn this_builds_formats_and_earlier_ones_pass() {
        check(&encode(&current())).expect("this build's");
        check("log=0 rows=2 payload=1 segments=1 snapshot=1 metadata=1").expect("earlier");
        check("").expect("no kinds");
    }

    #[test]
    fn a_later_number_of_any_kind_is_refused_naming_both_numbers() {
        for (kind, number) in current() {
            let later: Vec<(&str, u64)> = current()
                .into_iter()
                .map(|(k, n)| (k, if k == kind { n + 1 } else { n }))
                .collect();
            let error = check(&encode(&later)).expect_err("later");
            let expected = FormatError::Newer {
                kind: kind.to_string(),
                data: number + 1,
                build: number,
            };
            assert_eq!(error, expected);
            let text = error.to_string();
            assert!(
                text.contains(&format!("{kind} format {}", number + 1)),
                "{text}"
            );
            assert!(text.contains(&format!("{kind} format {number}")), "{text}");
            assert!(!error.is_damage());
        }
    }

    #[test]
    fn an_unknown_kind_is_refused_and_a_garbled_record_is_damage() {
        let error = check("log=3 queues=1").expect_err("unknown");
        assert!(matches!(&error, FormatError::Unknown { kind, data: 1, .. } if kind == "queues"));
        assert!(error.to_string().contains("rows"), "{error}");
        let error = check("log=three").expect_err("garbled");
        assert!(error.is_damage(), "{error}");
    }

    #[test]
    fn a_directory_is_checked_then_records_this_builds_formats() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let db = db(tmp.path());
        check_and_record(&db).expect("a directory without a record");
        assert_eq!(read(&db).expect("read"), Some(encode(&current())));
        write(&db, "log=1 rows=2").expect("written");
        check_and_record(&db).expect("earlier formats");
        assert_eq!(read(&db).expect("read"), Some(encode(&current())));
        write(&db, "log=99").expect("written");
        let error = check_and_record(&db).expect_err("later");
        assert!(matches!(error, FormatError::Newer { data: 99, .. }));
        assert_eq!(read(&db).expect("read").as_deref(), Some("log=99"));
    }
}
