//! The file layer the Raft log's files and the snapshot files go through: [`Disk`] for names
//! (open, rename, remove, list, directory sync) and [`DiskFile`] for an open file's bytes
//! (positioned reads and writes, fsync); [`Cursor`] reads and writes one as a stream.
//!
//! [`RealDisk`] is the operating system's (`std::fs`, and `sync_file_range` for written-out
//! steps). A store picks its disk once, when it opens; an append then costs one call through a
//! vtable per write and per fsync, and no copy. Tests (and a simulation of a whole cluster) put
//! the recording disk of [`crash_disk`](crate::crash_disk) in its place, which keeps what was
//! synced apart from what was not and builds the states a power loss can leave.
//!
//! Directory entries are files' names: creating, renaming or removing a file changes its
//! directory, which is durable only once the directory itself is synced
//! ([`Disk::sync_dir`]); [`create_dir_durably`] makes a directory whose entry is durable.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// How [`Disk::open`] opens a file: both read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// The file must exist.
    Existing,
    /// Created when missing, emptied when present.
    Create,
    /// Created; an `AlreadyExists` error when present.
    CreateNew,
}

/// An open file.
pub trait DiskFile: fmt::Debug + Send + Sync {
    /// Writes all of `buf` at `offset`, growing the file when it ends before.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Fills `buf` from `offset`; an error when the file ends before.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Reads into `buf` from `offset` up to the end of the file; the bytes read (0 at or past
    /// the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file holds no byte.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Cuts or grows (with zeros) the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the file's data (and its length) durable: `fdatasync`.
    fn sync_data(&self) -> io::Result<()>;
    /// Makes the file's data and metadata durable: `fsync`.
    fn sync_all(&self) -> io::Result<()>;
    /// Starts writing `len` bytes from `offset` out to the disk and waits for them, without
    /// making them durable (`sync_file_range`): pacing for large files, not a sync.
    fn write_out(&self, offset: u64, len: u64) -> io::Result<()>;
}

/// The file system a store's files live on.
pub trait Disk: fmt::Debug + Send + Sync {
    /// Opens the file at `path` for reading and writing.
    fn open(&self, path: &Path, how: Open) -> io::Result<Arc<dyn DiskFile>>;
    /// Renames `from` to `to` (in the same directory), replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes the file at `path`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of the directory `dir` durable: files created, renamed and removed.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The names in the directory `dir` (those that are UTF-8).
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates the directory `dir`, whose parent exists; an `AlreadyExists` error when it does.
    fn create_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The operating system's files; its fsyncs are timed ([`crate::sync_times`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct RealDisk;

/// A file of the operating system.
#[derive(Debug)]
struct RealFile(File);

impl DiskFile for RealFile {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(buf, offset)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        crate::sync_times::timed(|| self.0.sync_data())
    }

    fn sync_all(&self) -> io::Result<()> {
        crate::sync_times::timed(|| self.0.sync_all())
    }

    fn write_out(&self, offset: u64, len: u64) -> io::Result<()> {
        write_out_range(&self.0, offset, len)
    }
}

impl RealDisk {
    /// `file`, open on the operating system's disk, as a [`DiskFile`].
    pub fn file(file: File) -> Arc<dyn DiskFile> {
        Arc::new(RealFile(file))
    }
}

impl Disk for RealDisk {
    fn open(&self, path: &Path, how: Open) -> io::Result<Arc<dyn DiskFile>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        match how {
            Open::Existing => {}
            Open::Create => {
                options.create(true).truncate(true);
            }
            Open::CreateNew => {
                options.create_new(true);
            }
        }
        Ok(RealDisk::file(options.open(path)?))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let dir = File::open(dir)?;
        crate::sync_times::timed(|| dir.sync_all())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir(dir)
    }
}

/// The directory holding `path`: its parent, or `.` for a relative name of one component.
pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Creates `dir` and its missing ancestors, each one's entry synced in its parent, and syncs the
/// parent of `dir` even when `dir` existed: a directory made by a process that crashed before
/// syncing its parent (or by another program) exists until a power loss, then is gone with
/// everything written into it.
pub fn create_dir_durably(disk: &dyn Disk, dir: &Path) -> io::Result<()> {
    match disk.create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound && dir.parent().is_some() => {
            create_dir_durably(disk, parent_of(dir))?;
            match disk.create_dir(dir) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
        }
        Err(e) => return Err(e),
    }
    disk.sync_dir(parent_of(dir))
}

/// Reads the whole file at `path`; `None` when there is none.
pub(crate) fn read_file(disk: &dyn Disk, path: &Path) -> io::Result<Option<Vec<u8>>> {
    let file = match disk.open(path, Open::Existing) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    read_all(file.as_ref()).map(Some)
}

/// Every byte of `file`.
pub(crate) fn read_all(file: &dyn DiskFile) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.len()?).map_err(io::Error::other)?;
    let mut bytes = vec![0; len];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(bytes)
}

/// An open file read and written as a stream, from a position that each read and write moves
/// on, as a file descriptor's offset does. Clones share the file, each with its own position.
#[derive(Debug, Clone)]
pub struct Cursor {
    file: Arc<dyn DiskFile>,
    position: u64,
}

impl Cursor {
    /// A cursor at the first byte of `file`.
    pub fn new(file: Arc<dyn DiskFile>) -> Cursor {
        Cursor { file, position: 0 }
    }

    /// The file.
    pub fn file(&self) -> &Arc<dyn DiskFile> {
        &self.file
    }

    /// The position the next read or write starts at.
    pub fn position(&self) -> u64 {
        self.position
    }
}

impl Read for Cursor {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.position)?;
        debug_assert!(n <= buf.len());
        self.position += n as u64;
        Ok(n)
    }
}

impl Write for Cursor {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write_all_at(buf, self.position)?;
        self.position += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for Cursor {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let position = match to {
            SeekFrom::Start(at) => Some(at),
            SeekFrom::Current(by) => self.position.checked_add_signed(by),
            SeekFrom::End(by) => self.file.len()?.checked_add_signed(by),
        };
        self.position = position.ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "a seek before the first byte")
        })?;
        Ok(self.position)
    }
}

/// Writes `len` bytes of `file` from `offset` out to the disk and waits for them, without the
/// cache flush and the metadata of an fsync.
#[cfg(target_os = "linux")]
fn write_out_range(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::Error::other("file range beyond i64"));
    };
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: the descriptor is `file`'s, open for the whole call, which reads and writes no
    // memory of this process.
    let done = unsafe { libc::sync_file_range(file.as_raw_fd(), offset, len, flags) };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Writes `file`'s data out to the disk and waits for it (systems without `sync_file_range`).
#[cfg(not(target_os = "linux"))]
fn write_out_range(file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    file.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_disk_reads_back_writes_renames_and_lists() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let dir = tmp.path().join("a/b");
        create_dir_durably(&RealDisk, &dir).expect("create");
        create_dir_durably(&RealDisk, &dir).expect("again");
        let file = RealDisk.open(&dir.join("x"), Open::Create).expect("open");
        file.write_all_at(b"hello", 3).expect("write");
        file.sync_data().expect("sync");
        assert_eq!(file.len().expect("len"), 8);
        RealDisk
            .rename(&dir.join("x"), &dir.join("y"))
            .expect("rename");
        RealDisk.sync_dir(&dir).expect("sync dir");
        assert_eq!(RealDisk.list_dir(&dir).expect("list"), ["y"]);
        let read = read_file(&RealDisk, &dir.join("y")).expect("read");
        assert_eq!(read.as_deref(), Some(&b"\0\0\0hello"[..]));
        assert_eq!(read_file(&RealDisk, &dir.join("x")).expect("read"), None);
        RealDisk.remove_file(&dir.join("y")).expect("remove");
        assert!(RealDisk.list_dir(&dir).expect("list").is_empty());
        RealDisk.open(&dir.join("z"), Open::CreateNew).expect("new");
        let again = RealDisk.open(&dir.join("z"), Open::CreateNew).err();
        assert_eq!(again.map(|e| e.kind()), Some(io::ErrorKind::AlreadyExists));
    }

    #[test]
    fn a_cursor_reads_writes_and_seeks_as_a_file_descriptor_does() {
        let tmp = tempfile::TempDir::new().expect("temp dir");
        let file = RealDisk
            .open(&tmp.path().join("f"), Open::Create)
            .expect("open");
        let mut cursor = Cursor::new(Arc::clone(&file));
        cursor.write_all(b"0123456789").expect("write");
        assert_eq!(cursor.seek(SeekFrom::Current(-6)).expect("seek"), 4);
        cursor.write_all(b"ab").expect("write at 4");
        assert_eq!(cursor.position(), 6);
        assert!(cursor.seek(SeekFrom::Current(-7)).is_err());
        assert_eq!(cursor.seek(SeekFrom::End(-3)).expect("seek"), 7);
        let mut tail = String::new();
        cursor.read_to_string(&mut tail).expect("read");
        assert_eq!(tail, "789");
        let mut whole = String::new();
        Cursor::new(file).read_to_string(&mut whole).expect("read");
        assert_eq!(whole, "0123ab6789");
    }
}
