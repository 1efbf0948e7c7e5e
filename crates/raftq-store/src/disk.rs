//! The file layer the Raft log's files go through: [`Disk`] for names (open, rename, remove,
//! list, directory sync) and [`DiskFile`] for an open file's bytes (positioned reads and writes,
//! fsync).
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
use std::io;
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
}

/// An open file.
pub trait DiskFile: fmt::Debug + Send + Sync {
    /// Writes all of `buf` at `offset`, growing the file when it ends before.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Fills `buf` from `offset`; an error when the file ends before.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file holds no byte.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
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

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn sync_data(&self) -> io::Result<()> {
        crate::sync_times::timed(|| self.0.sync_data())
    }

    fn sync_all(&self) -> io::Result<()> {
        crate::sync_times::timed(|| self.0.sync_all())
    }

    fn write_out(&self, offset: u64, len: u64) -> io::Result<()> {
        crate::stepped::write_out_range(&self.0, offset, len)
    }
}

impl Disk for RealDisk {
    fn open(&self, path: &Path, how: Open) -> io::Result<Arc<dyn DiskFile>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        if how == Open::Create {
            options.create(true).truncate(true);
        }
        Ok(Arc::new(RealFile(options.open(path)?)))
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
    }
}
