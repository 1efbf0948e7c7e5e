//! Snapshot files: the rows of the state column family streamed to a file, so that neither
//! building, sending nor keeping a snapshot holds the state in memory or writes it through the
//! database's write path.
//!
//! Format: a magic header, then one record per row (`u32` key length, key, `u32` value length,
//! value, lengths little-endian), then an end marker, the row count, and the SHA-256 of every
//! byte before it. A reader checks all three, so that a truncated or damaged file is refused
//! rather than installed short or wrong. Files of the first format (magic `RAFTQSN1`, the same
//! without the digest) are still read, with their row count checked.
//!
//! The directory holds the current snapshot file, named in `sm_meta`; files being written or
//! received have other names and are removed when the state machine opens. The directory knows
//! the size of the file it keeps: the snapshot policy weighs the log against it.
//!
//! Every file operation goes through the store's [`Disk`], the one its log is on: a server's is
//! the operating system's, a simulation's forgets what was not synced when its power is lost. A
//! new file is written, synced, renamed to its name and its directory synced before it is
//! named anywhere else, so that a power loss leaves either no file or the whole one.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::disk::{create_dir_durably, Cursor, Disk, DiskFile, Open};
use crate::stepped::SteppedFile;

/// The format of the files this build writes; the first is [`MAGIC_WITHOUT_DIGEST`]'s.
pub const FORMAT: u64 = 2;
const MAGIC: &[u8; 8] = b"RAFTQSN2";
/// The first format's magic: no digest after the row count.
const MAGIC_WITHOUT_DIGEST: &[u8; 8] = b"RAFTQSN1";
const ROW: u8 = 1;
const END: u8 = 0;
/// The end of the name of a file being written, until it is renamed to its own.
const PARTIAL: &str = ".partial";

/// Rows as read back from a snapshot file.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The directory of snapshot files. Clones share the size of the kept file.
#[derive(Debug, Clone)]
pub struct SnapshotDir {
    disk: Arc<dyn Disk>,
    path: PathBuf,
    kept_bytes: Arc<AtomicU64>,
}

impl SnapshotDir {
    /// Opens (creating it if needed) the directory `path` on `disk`, removes every file but
    /// `keep`, and checks `keep` ([`SnapshotDir::verify`]): a damaged snapshot is an error now,
    /// not when a follower needs it.
    pub fn open(disk: Arc<dyn Disk>, path: PathBuf, keep: Option<&str>) -> io::Result<SnapshotDir> {
        create_dir_durably(disk.as_ref(), &path)?;
        let dir = SnapshotDir {
            disk,
            path,
            kept_bytes: Arc::default(),
        };
        dir.keep_only(keep)?;
        if let Some(name) = keep {
            dir.verify(name)?;
        }
        Ok(dir)
    }

    /// The size in bytes of the file the directory keeps (0 while it keeps none).
    pub fn kept_bytes(&self) -> u64 {
        self.kept_bytes.load(Ordering::Relaxed)
    }

    /// The path of the file named `name`.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Opens the file named `name` as `how` says.
    pub fn open_file(&self, name: &str, how: Open) -> io::Result<Arc<dyn DiskFile>> {
        self.disk.open(&self.file(name), how)
    }

    /// A fresh name for a file being received.
    pub fn receiving_name() -> String {
        format!("receiving-{}", crate::random::uuid())
    }

    /// Writes `rows` to a new snapshot file, synced and in place before this returns; returns
    /// its name.
    pub fn write_rows(
        &self,
        rows: impl Iterator<Item = io::Result<(Box<[u8]>, Box<[u8]>)>>,
    ) -> io::Result<String> {
        self.write_with(|out| {
            let mut out = Hashing::new(out);
            out.write_all(MAGIC)?;
            let mut count = 0u64;
            for row in rows {
                let (key, value) = row?;
                out.write_all(&[ROW])?;
                for part in [&key, &value] {
                    let len = u32::try_from(part.len()).map_err(io::Error::other)?;
                    out.write_all(&len.to_le_bytes())?;
                    out.write_all(part)?;
                }
                count += 1;
            }
            out.write_all(&[END])?;
            out.write_all(&count.to_le_bytes())?;
            let digest = out.hash.finalize();
            out.inner.write_all(&digest)
        })
    }

    /// Copies a snapshot file read from `source` into a new file, synced and in place before
    /// this returns; returns its name.
    pub fn copy_from(&self, source: &mut impl Read) -> io::Result<String> {
        self.write_with(|out| io::copy(source, out).map(drop))
    }

    fn write_with(
        &self,
        fill: impl FnOnce(&mut BufWriter<SteppedFile>) -> io::Result<()>,
    ) -> io::Result<String> {
        let name = format!("snapshot-{}", crate::random::uuid());
        let partial = format!("{name}{PARTIAL}");
        let file = self.open_file(&partial, Open::CreateNew)?;
        let mut out = BufWriter::new(SteppedFile::new(file));
        let written = fill(&mut out)
            .and_then(|()| out.into_inner().map_err(|e| e.into_error())?.finish())
            .and_then(|file| file.sync_all());
        if let Err(error) = written {
            // A file left half written (a full disk, typically) would hold the space it took.
            if let Err(e) = self.disk.remove_file(&self.file(&partial)) {
                tracing::warn!(error = %e, file = partial, "cannot remove a partial snapshot file");
            }
            return Err(error);
        }
        self.disk.rename(&self.file(&partial), &self.file(&name))?;
        self.disk.sync_dir(&self.path)?;
        Ok(name)
    }

    /// Removes every file of the directory but `keep`, and records the size of `keep`.
    pub fn keep_only(&self, keep: Option<&str>) -> io::Result<()> {
        for name in self.disk.list_dir(&self.path)? {
            if keep != Some(name.as_str()) {
                self.disk.remove_file(&self.file(&name))?;
            }
        }
        let bytes = match keep {
            Some(name) => self.open_file(name, Open::Existing)?.len()?,
            None => 0,
        };
        self.kept_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Reads every row of the snapshot file named `name`; a file that is not one, or that ends
    /// before its end marker, or with a different row count or digest, is an error.
    pub fn read_rows(&self, name: &str) -> io::Result<Rows> {
        let mut rows = Vec::new();
        let file = Cursor::new(self.open_file(name, Open::Existing)?);
        rows_of(file, |key, value| rows.push((key, value)))?;
        Ok(rows)
    }

    /// Checks the snapshot file named `name` as [`SnapshotDir::read_rows`] does, without
    /// keeping its rows.
    pub fn verify(&self, name: &str) -> io::Result<()> {
        check(Cursor::new(self.open_file(name, Open::Existing)?))
    }
}

/// A reader or writer that hashes the bytes passing through it, and counts those written (a
/// backup's size).
pub(crate) struct Hashing<T> {
    pub(crate) inner: T,
    pub(crate) hash: Sha256,
    pub(crate) written: u64,
}

impl<T> Hashing<T> {
    pub(crate) fn new(inner: T) -> Hashing<T> {
        Hashing {
            inner,
            hash: Sha256::new(),
            written: 0,
        }
    }
}

impl<T: Write> Write for Hashing<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<T: Read> Read for Hashing<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

/// Checks the snapshot file read from `source` (from its first byte to its last) as
/// [`SnapshotDir::read_rows`] does, without keeping its rows.
pub fn check(source: impl Read) -> io::Result<()> {
    rows_of(source, |_, _| {})
}

/// Calls `row` with every row of the snapshot file read from `source`, then checks its end: the
/// rows seen before an error may be wrong.
fn rows_of(source: impl Read, mut row: impl FnMut(Vec<u8>, Vec<u8>)) -> io::Result<()> {
    let mut input = Hashing::new(BufReader::new(source));
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic)?;
    let digested = match &magic {
        MAGIC => true,
        MAGIC_WITHOUT_DIGEST => false,
        [b'R', b'A', b'F', b'T', b'Q', b'S', b'N', later] => {
            return Err(invalid(&format!(
                "a snapshot file of format {}, later than this build's snapshot format {FORMAT}: \
                 a later raftq build wrote it",
                char::from(*later)
            )))
        }
        _ => return Err(invalid("not a raftq snapshot file")),
    };
    let mut rows = 0u64;
    loop {
        let mut tag = [0u8; 1];
        input.read_exact(&mut tag)?;
        match tag[0] {
            ROW => {
                let key = read_part(&mut input)?;
                let value = read_part(&mut input)?;
                row(key, value);
                rows += 1;
            }
            END => {
                let mut count = [0u8; 8];
                input.read_exact(&mut count)?;
                if u64::from_le_bytes(count) != rows {
                    return Err(invalid("snapshot row count does not match its rows"));
                }
                let computed = input.hash.finalize();
                let mut input = input.inner;
                if digested {
                    let mut stored = [0u8; 32];
                    input.read_exact(&mut stored)?;
                    if computed.as_slice() != stored {
                        return Err(invalid("snapshot digest does not match its contents"));
                    }
                }
                if input.read(&mut [0u8; 1])? != 0 {
                    return Err(invalid("snapshot file goes on after its end"));
                }
                return Ok(());
            }
            other => return Err(invalid(&format!("unknown snapshot record tag {other}"))),
        }
    }
}

/// One length-prefixed part; read as it comes, so that a damaged length allocates no more than
/// the file holds.
fn read_part(input: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len)?;
    let len = u64::from(u32::from_le_bytes(len));
    let mut part = Vec::new();
    input.take(len).read_to_end(&mut part)?;
    if part.len() as u64 != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash_disk::CrashDisk;
    use crate::crash_tests::{record_syncs, taken};
    use crate::disk::RealDisk;
    use std::fs;
    use std::path::Path;

    type Row = (Box<[u8]>, Box<[u8]>);

    fn rows() -> Vec<io::Result<Row>> {
        vec![
            Ok((b"a".to_vec().into(), b"1".to_vec().into())),
            Ok((b"bb".to_vec().into(), Vec::new().into())),
        ]
    }

    /// A directory on the operating system's disk, in `tmp`.
    fn real(tmp: &tempfile::TempDir) -> SnapshotDir {
        SnapshotDir::open(Arc::new(RealDisk), tmp.path().to_path_buf(), None).expect("open")
    }

    /// A file of [`rows`] written to a directory on the operating system's disk, in `tmp`: the
    /// directory, the file's name and its bytes.
    fn written(tmp: &tempfile::TempDir) -> (SnapshotDir, String, Vec<u8>) {
        let dir = real(tmp);
        let name = dir.write_rows(rows().into_iter()).expect("write");
        let bytes = fs::read(dir.file(&name)).expect("read");
        (dir, name, bytes)
    }

    fn rows_round_trip_and_only_the_kept_file_survives_open_on(disk: Arc<dyn Disk>, at: &Path) {
        let path = at.join("s");
        let dir = SnapshotDir::open(Arc::clone(&disk), path.clone(), None).expect("open");
        let first = dir.write_rows(rows().into_iter()).expect("write");
        let mut source = Cursor::new(dir.open_file(&first, Open::Existing).expect("open first"));
        let second = dir.copy_from(&mut source).expect("copy");
        for name in [&first, &second] {
            assert_eq!(
                dir.read_rows(name).expect("read"),
                vec![(b"a".to_vec(), b"1".to_vec()), (b"bb".to_vec(), Vec::new())]
            );
        }
        let receiving = dir
            .open_file(&SnapshotDir::receiving_name(), Open::CreateNew)
            .expect("create");
        receiving.write_all_at(b"partial", 0).expect("write");
        let dir = SnapshotDir::open(disk, path, Some(&second)).expect("reopen");
        assert_eq!(
            dir.disk.list_dir(&dir.path).expect("list"),
            [second.as_str()]
        );
        let size = dir
            .open_file(&second, Open::Existing)
            .and_then(|f| f.len())
            .expect("size");
        assert!(size > 0);
        assert_eq!(dir.kept_bytes(), size);
        dir.keep_only(None).expect("empty");
        assert_eq!(dir.kept_bytes(), 0);
    }

    #[test]
    fn rows_round_trip_and_only_the_kept_file_survives_open() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        rows_round_trip_and_only_the_kept_file_survives_open_on(Arc::new(RealDisk), tmp.path());
        let crash = CrashDisk::new();
        rows_round_trip_and_only_the_kept_file_survives_open_on(Arc::new(crash), Path::new("/"));
    }

    #[test]
    fn a_file_written_before_its_rename_and_directory_sync_is_gone_or_whole_after_a_power_loss() {
        let disk = CrashDisk::new();
        let path = PathBuf::from("/node/snapshots");
        let dir = SnapshotDir::open(Arc::new(disk.clone()), path.clone(), None).expect("open");
        let moments = record_syncs(&disk);
        let name = dir.write_rows(rows().into_iter()).expect("write");
        disk.no_sync_hook();
        let mut moments = taken(&moments);
        assert_eq!(moments.len(), 2, "the file's sync, then its directory's");
        moments.push(disk.freeze());
        let mut gone = 0;
        for (moment, frozen) in moments.iter().enumerate() {
            for image in frozen.images(256, moment as u64) {
                let names = image
                    .disk
                    .list_dir(&path)
                    .expect("the directory is durable");
                match names.as_slice() {
                    [] => gone += 1,
                    [one] if one == &name => {
                        let whole = SnapshotDir::open(
                            Arc::new(image.disk.clone()),
                            path.clone(),
                            Some(&name),
                        );
                        let rows = whole.and_then(|dir| dir.read_rows(&name));
                        assert_eq!(rows.expect("a renamed file is whole").len(), 2);
                    }
                    [one] => assert_eq!(one, &format!("{name}{PARTIAL}")),
                    more => panic!("more than one file after a power loss: {more:?}"),
                }
                let found = SnapshotDir::open(Arc::new(image.disk), path.clone(), None)
                    .expect("a directory a power loss left opens");
                let left = found.disk.list_dir(&path).expect("list");
                assert!(left.is_empty(), "a file no one names is removed: {left:?}");
            }
        }
        assert!(
            gone > 0,
            "a power loss before the directory sync loses the file"
        );
        let last = moments.last().expect("the end");
        for image in last.images(256, 0) {
            let kept = SnapshotDir::open(Arc::new(image.disk), path.clone(), Some(&name))
                .expect("the synced file survives every power loss");
            assert_eq!(kept.read_rows(&name).expect("read").len(), 2);
        }
    }

    #[test]
    fn a_truncated_file_is_refused() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let (dir, name, bytes) = written(&tmp);
        for cut in [4, 12, bytes.len() - 1] {
            fs::write(dir.file(&name), &bytes[..cut]).expect("truncate");
            assert!(dir.read_rows(&name).is_err(), "cut at {cut}");
        }
        let mut wrong_count = bytes.clone();
        let last = wrong_count.len() - 32 - 8;
        wrong_count[last] = 9;
        fs::write(dir.file(&name), &wrong_count).expect("write");
        assert!(dir.read_rows(&name).is_err());
    }

    #[test]
    fn a_file_of_the_first_format_is_read_and_bytes_after_the_end_are_refused() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let (dir, name, bytes) = written(&tmp);
        let mut first = MAGIC_WITHOUT_DIGEST.to_vec();
        first.extend_from_slice(&bytes[MAGIC.len()..bytes.len() - 32]);
        fs::write(dir.file(&name), &first).expect("write");
        assert_eq!(dir.read_rows(&name).expect("read").len(), 2);
        let mut longer = bytes.clone();
        longer.push(0);
        fs::write(dir.file(&name), &longer).expect("write");
        assert!(dir.read_rows(&name).is_err());
    }

    #[test]
    fn a_file_of_a_later_format_is_refused_naming_both_formats() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let (dir, name, mut bytes) = written(&tmp);
        bytes[7] = b'3';
        fs::write(dir.file(&name), &bytes).expect("write");
        let error = dir.read_rows(&name).expect_err("later").to_string();
        assert!(error.contains("format 3"), "{error}");
        assert!(
            error.contains(&format!("snapshot format {FORMAT}")),
            "{error}"
        );
    }

    #[test]
    fn a_flipped_byte_anywhere_is_refused() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let (dir, name, bytes) = written(&tmp);
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            fs::write(dir.file(&name), &damaged).expect("write");
            assert!(dir.read_rows(&name).is_err(), "byte {at} flipped");
        }
    }
}
