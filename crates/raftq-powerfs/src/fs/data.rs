//! File contents and attributes: opening, reading, writing, truncating and allocating (each
//! change of a file's bytes or length journaled first), owners, modes and times, and
//! directory listings.

use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirEntryExt, FileExt};
use std::time::SystemTime;

use fuser::{
    Errno, FileHandle, FileType, INodeNo, OpenAccMode, OpenFlags, ReplyDirectory, TimeOrNow,
};
use nix::fcntl::{AtFlags, FallocateFlags, AT_FDCWD};
use nix::sys::stat::{FchmodatFlags, Mode, UtimensatFlags};
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid};

use super::{file_in, Fuse, Handle, PowerFs};
use crate::inodes::entry_type;

/// Reads from `offset` into `buf` as far as the file goes; returns how much was read.
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(done)
}

fn timespec(time: Option<TimeOrNow>) -> TimeSpec {
    match time {
        None => TimeSpec::UTIME_OMIT,
        Some(TimeOrNow::Now) => TimeSpec::UTIME_NOW,
        Some(TimeOrNow::SpecificTime(at)) => {
            let since = at
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            TimeSpec::from_duration(since)
        }
    }
}

impl PowerFs {
    /// Opens the backing file; a writable one is opened for reading too, so that the journal
    /// can read what a write overwrites.
    pub(super) fn open_file(&self, ino: INodeNo, flags: OpenFlags) -> Result<FileHandle, Errno> {
        let node = self.node(ino)?;
        let writable = flags.acc_mode() != OpenAccMode::O_RDONLY;
        // O_APPEND is left to the kernel, which sends the offset; pwrite would ignore it.
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(node.proc_path())
            .fuse()?;
        if writable && flags.0 & libc::O_TRUNC != 0 {
            self.files
                .change(node.backing, &file, 0..file.metadata().fuse()?.len(), |f| {
                    f.set_len(0)
                })
                .fuse()?;
        }
        Ok(self.add_handle(Handle::File {
            file,
            backing: node.backing,
        }))
    }

    pub(super) fn read_file(
        &self,
        fh: FileHandle,
        offset: u64,
        size: u32,
    ) -> Result<Vec<u8>, Errno> {
        let handle = self.handle(fh)?;
        let file = file_in(&handle)?;
        let mut buf = vec![0u8; size as usize];
        let n = read_at_most(file, &mut buf, offset).fuse()?;
        buf.truncate(n);
        Ok(buf)
    }

    pub(super) fn write_file(&self, fh: FileHandle, offset: u64, data: &[u8]) -> Result<(), Errno> {
        let (handle, backing) = self.file_of(fh)?;
        let file = file_in(&handle)?;
        let end = offset + data.len() as u64;
        self.files
            .change(backing, file, offset..end, |f| f.write_all_at(data, offset))
            .fuse()
    }

    /// `fsync`/`fdatasync`: the file's changes are durable (after the backing file's own sync,
    /// when the backing is synced too).
    pub(super) fn file_synced(
        &self,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
    ) -> Result<(), Errno> {
        let node = self.node(ino)?;
        if self.options.sync_backing {
            let handle = self.handle(fh)?;
            let file = file_in(&handle)?;
            if datasync {
                file.sync_data().fuse()?;
            } else {
                file.sync_all().fuse()?;
            }
        }
        self.files.synced(node.backing).fuse()
    }

    /// Sets the length of `ino` (through the handle `fh` when there is one).
    pub(super) fn truncate(
        &self,
        ino: INodeNo,
        fh: Option<FileHandle>,
        size: u64,
    ) -> Result<(), Errno> {
        let node = self.node(ino)?;
        let handle = fh.map(|fh| self.handle(fh)).transpose()?;
        let opened;
        let file = match handle.as_deref() {
            Some(Handle::File { file, .. }) => file,
            _ => {
                opened = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(node.proc_path())
                    .fuse()?;
                &opened
            }
        };
        let current = file.metadata().fuse()?.len();
        let range = size.min(current)..size.max(current);
        self.files
            .change(node.backing, file, range, |f| f.set_len(size))
            .fuse()
    }

    /// `fallocate`: plain allocation (which may lengthen the file) and punching or zeroing a
    /// range are journaled like writes; collapsing and inserting ranges are not supported.
    pub(super) fn allocate(
        &self,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> Result<(), Errno> {
        let (handle, backing) = self.file_of(fh)?;
        let file = file_in(&handle)?;
        let flags = FallocateFlags::from_bits(mode).ok_or(Errno::EOPNOTSUPP)?;
        let allocate = |f: &File| {
            nix::fcntl::fallocate(
                f.as_fd(),
                flags,
                offset as libc::off_t,
                length as libc::off_t,
            )
            .map_err(std::io::Error::from)
        };
        let content = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_ZERO_RANGE;
        let keep_size = FallocateFlags::FALLOC_FL_KEEP_SIZE;
        let range = if flags.intersects(content) && (flags - content - keep_size).is_empty() {
            offset..offset + length
        } else if flags == keep_size {
            // Space only: neither the bytes nor the length change.
            return allocate(file).fuse();
        } else if flags.is_empty() {
            // The length may grow; the bytes within it do not change.
            offset..offset
        } else {
            return Err(Errno::EOPNOTSUPP);
        };
        self.files.change(backing, file, range, allocate).fuse()
    }

    pub(super) fn set_owner_and_mode(
        &self,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> Result<(), Errno> {
        let node = self.node(ino)?;
        if uid.is_some() || gid.is_some() {
            nix::unistd::fchownat(
                node.fd.as_fd(),
                "",
                uid.map(Uid::from_raw),
                gid.map(Gid::from_raw),
                AtFlags::AT_EMPTY_PATH | AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .fuse()?;
        }
        if let Some(mode) = mode {
            nix::sys::stat::fchmodat(
                AT_FDCWD,
                node.proc_path().as_str(),
                Mode::from_bits_truncate(mode & 0o7777),
                FchmodatFlags::FollowSymlink,
            )
            .fuse()?;
        }
        Ok(())
    }

    pub(super) fn set_times(
        &self,
        ino: INodeNo,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
    ) -> Result<(), Errno> {
        if atime.is_none() && mtime.is_none() {
            return Ok(());
        }
        let node = self.node(ino)?;
        nix::sys::stat::utimensat(
            AT_FDCWD,
            node.proc_path().as_str(),
            &timespec(atime),
            &timespec(mtime),
            UtimensatFlags::FollowSymlink,
        )
        .fuse()
    }

    /// Lists the directory once, at open: `readdir` serves that list by position.
    pub(super) fn open_dir(&self, ino: INodeNo) -> Result<FileHandle, Errno> {
        let node = self.node(ino)?;
        let mut entries = vec![
            (node.backing, FileType::Directory, ".".into()),
            (node.backing, FileType::Directory, "..".into()),
        ];
        for item in std::fs::read_dir(node.proc_path()).fuse()? {
            let item = item.fuse()?;
            let kind = entry_type(item.file_type().fuse()?);
            entries.push((item.ino(), kind, item.file_name()));
        }
        Ok(self.add_handle(Handle::Dir { entries }))
    }

    pub(super) fn read_dir(&self, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let handle = match self.handle(fh) {
            Ok(handle) => handle,
            Err(err) => return reply.error(err),
        };
        let Handle::Dir { entries } = &*handle else {
            return reply.error(Errno::ENOTDIR);
        };
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }
}
