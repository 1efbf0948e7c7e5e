//! Names: lookups and the directory operations. Each operation runs under the directory
//! journal's lock and is logged write-ahead when it removes or replaces a name (the inode it
//! detaches is first kept in the trash), or right after it is done when it only adds one (a
//! kill in between leaves a name the caller never heard of, as if it were synced).

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use fuser::{Errno, FileAttr, FileHandle, INodeNo, RenameFlags, Request};
use nix::fcntl::{AtFlags, OFlag, AT_FDCWD};
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::{Gid, Uid, UnlinkatFlags};

use super::{Fuse, Handle, PowerFs};
use crate::dirlog::{Entry, Kind};
use crate::inodes::{attr, binding_of, kind_of, Node};
use crate::tracker::{lock, DirJournal};

/// What `name` in `parent` is bound to, if anything.
fn bound(parent: &Node, name: &OsStr) -> Result<Option<FileStat>, Errno> {
    match nix::sys::stat::fstatat(parent.fd.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(err) => Err(Errno::from_i32(err as i32)),
    }
}

/// Whether the directory `name` in `parent` has no entries.
fn is_empty_dir(parent: &Node, name: &OsStr) -> Result<bool, Errno> {
    let fd = nix::fcntl::openat(
        parent.fd.as_fd(),
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .fuse()?;
    let dir = File::from(fd);
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&dir));
    Ok(std::fs::read_dir(path).fuse()?.next().is_none())
}

/// Gives `name` in `parent` to the caller (the daemon creates as root); failures are only
/// logged, as when the daemon does not run as root.
fn give_to_caller(req: &Request, parent: &Node, name: &OsStr) {
    if let Err(err) = nix::unistd::fchownat(
        parent.fd.as_fd(),
        name,
        Some(Uid::from_raw(req.uid())),
        Some(Gid::from_raw(req.gid())),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    ) {
        tracing::debug!(?name, %err, "cannot give a new file to its creator");
    }
}

fn entry(
    parent: &Node,
    name: &OsStr,
    before: Option<&FileStat>,
    after: Option<&FileStat>,
) -> Entry {
    Entry {
        dir: parent.backing,
        name: name.as_bytes().to_vec(),
        before: before.map(binding_of),
        after: after.map(binding_of),
    }
}

impl PowerFs {
    /// Looks `name` up in `parent`, counting a lookup of its node.
    pub(super) fn lookup_at(&self, parent: &Node, name: &OsStr) -> Result<FileAttr, Errno> {
        let fd = nix::fcntl::openat(
            parent.fd.as_fd(),
            name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .fuse()?;
        let stat = nix::sys::stat::fstat(fd.as_fd()).fuse()?;
        let ino = lock(&self.inodes).remember(fd, stat.st_ino);
        Ok(attr(ino, &stat))
    }

    /// Logs that `name` in `parent` was just created; a data journal left by an earlier inode
    /// of the same number is dropped.
    fn log_added(&self, dirs: &mut DirJournal, parent: &Node, name: &OsStr) -> Result<(), Errno> {
        let stat = bound(parent, name)?.ok_or(Errno::ENOENT)?;
        self.files.forget(stat.st_ino);
        dirs.record(vec![entry(parent, name, None, Some(&stat))])
            .fuse()?;
        Ok(())
    }

    /// Lets the trash go of the inodes no pending operation names any more.
    fn collect(&self, dirs: &DirJournal, free: Vec<u64>) {
        for ino in free {
            match dirs.collect(ino) {
                Ok(true) => self.files.forget(ino),
                Ok(false) => {}
                Err(err) => tracing::warn!(ino, %err, "cannot empty the trash"),
            }
        }
    }

    /// Cancels the logged operation `id`, which failed with `err`.
    fn cancel(&self, dirs: &mut DirJournal, id: u64, err: Errno) -> Errno {
        match dirs.cancel(id) {
            Ok(free) => self.collect(dirs, free),
            Err(cancel) => tracing::warn!(id, %cancel, "cannot cancel a failed operation"),
        }
        err
    }

    pub(super) fn create_at(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
    ) -> Result<(FileAttr, FileHandle), Errno> {
        let parent = self.node(parent)?;
        let mut dirs = lock(&self.dirs);
        let created = nix::fcntl::openat(
            parent.fd.as_fd(),
            name,
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode),
        );
        let file = match created {
            Ok(fd) => File::from(fd),
            Err(nix::errno::Errno::EEXIST) if flags & libc::O_EXCL == 0 => {
                drop(dirs);
                let attr = self.lookup_at(&parent, name)?;
                let fh = self.open_file(attr.ino, fuser::OpenFlags(flags))?;
                return Ok((attr, fh));
            }
            Err(err) => return Err(Errno::from_i32(err as i32)),
        };
        give_to_caller(req, &parent, name);
        self.log_added(&mut dirs, &parent, name)?;
        drop(dirs);
        let backing = nix::sys::stat::fstat(file.as_fd()).fuse()?.st_ino;
        let attr = self.lookup_at(&parent, name)?;
        Ok((attr, self.add_handle(Handle::File { file, backing })))
    }

    pub(super) fn mkdir_at(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
    ) -> Result<FileAttr, Errno> {
        self.add_at(req, parent, name, |dir| {
            nix::sys::stat::mkdirat(dir, name, Mode::from_bits_truncate(mode))
        })
    }

    pub(super) fn symlink_at(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        target: &Path,
    ) -> Result<FileAttr, Errno> {
        self.add_at(req, parent, name, |dir| {
            nix::unistd::symlinkat(target, dir, name)
        })
    }

    /// Adds `name` in `parent` with `make` (given the parent's descriptor) under the journal's
    /// lock, gives it to the caller and logs it.
    fn add_at(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        make: impl FnOnce(BorrowedFd<'_>) -> nix::Result<()>,
    ) -> Result<FileAttr, Errno> {
        let parent = self.node(parent)?;
        let mut dirs = lock(&self.dirs);
        make(parent.fd.as_fd()).fuse()?;
        give_to_caller(req, &parent, name);
        self.log_added(&mut dirs, &parent, name)?;
        drop(dirs);
        self.lookup_at(&parent, name)
    }

    pub(super) fn link_at(
        &self,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
    ) -> Result<FileAttr, Errno> {
        let node = self.node(ino)?;
        let parent = self.node(newparent)?;
        let mut dirs = lock(&self.dirs);
        nix::unistd::linkat(
            AT_FDCWD,
            node.proc_path().as_str(),
            parent.fd.as_fd(),
            newname,
            AtFlags::AT_SYMLINK_FOLLOW,
        )
        .fuse()?;
        let stat = bound(&parent, newname)?.ok_or(Errno::ENOENT)?;
        dirs.record(vec![entry(&parent, newname, None, Some(&stat))])
            .fuse()?;
        drop(dirs);
        self.lookup_at(&parent, newname)
    }

    pub(super) fn unlink_at(&self, parent: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let parent = self.node(parent)?;
        let mut dirs = lock(&self.dirs);
        let stat = bound(&parent, name)?.ok_or(Errno::ENOENT)?;
        if kind_of(stat.st_mode) == Kind::Dir {
            return Err(Errno::EISDIR);
        }
        dirs.keep_file(parent.fd.as_fd(), name.as_bytes(), stat.st_ino)
            .fuse()?;
        let id = dirs
            .record(vec![entry(&parent, name, Some(&stat), None)])
            .fuse()?;
        if let Err(err) = nix::unistd::unlinkat(parent.fd.as_fd(), name, UnlinkatFlags::NoRemoveDir)
        {
            return Err(self.cancel(&mut dirs, id, Errno::from_i32(err as i32)));
        }
        Ok(())
    }

    pub(super) fn rmdir_at(&self, parent: INodeNo, name: &OsStr) -> Result<(), Errno> {
        let parent = self.node(parent)?;
        let mut dirs = lock(&self.dirs);
        let stat = bound(&parent, name)?.ok_or(Errno::ENOENT)?;
        if kind_of(stat.st_mode) != Kind::Dir {
            return Err(Errno::ENOTDIR);
        }
        if !is_empty_dir(&parent, name)? {
            return Err(Errno::ENOTEMPTY);
        }
        let id = dirs
            .record(vec![entry(&parent, name, Some(&stat), None)])
            .fuse()?;
        // Kept in the trash instead of removed, so that a lost rmdir can be undone.
        if let Err(err) = dirs.keep_dir(parent.fd.as_fd(), name.as_bytes(), stat.st_ino) {
            return Err(self.cancel(&mut dirs, id, Errno::from(err)));
        }
        Ok(())
    }

    pub(super) fn rename_at(
        &self,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> Result<(), Errno> {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            return Err(Errno::EINVAL);
        }
        let from = self.node(parent)?;
        let to = self.node(newparent)?;
        let mut dirs = lock(&self.dirs);
        let source = bound(&from, name)?.ok_or(Errno::ENOENT)?;
        let target = bound(&to, newname)?;
        if let Some(target) = &target {
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                return Err(Errno::EEXIST);
            }
            if target.st_ino == source.st_ino {
                return Ok(());
            }
            check_replaceable(&source, target, &to, newname)?;
        }
        let target_kind = target.as_ref().map(|t| kind_of(t.st_mode));
        if let (Some(t), Some(kind)) = (&target, target_kind) {
            if kind != Kind::Dir {
                dirs.keep_file(to.fd.as_fd(), newname.as_bytes(), t.st_ino)
                    .fuse()?;
            }
        }
        let id = dirs
            .record(vec![
                entry(&from, name, Some(&source), None),
                entry(&to, newname, target.as_ref(), Some(&source)),
            ])
            .fuse()?;
        if let (Some(t), Some(Kind::Dir)) = (&target, target_kind) {
            if let Err(err) = dirs.keep_dir(to.fd.as_fd(), newname.as_bytes(), t.st_ino) {
                return Err(self.cancel(&mut dirs, id, Errno::from(err)));
            }
        }
        if let Err(err) = nix::fcntl::renameat(from.fd.as_fd(), name, to.fd.as_fd(), newname) {
            return Err(self.cancel(&mut dirs, id, Errno::from_i32(err as i32)));
        }
        Ok(())
    }

    pub(super) fn dir_synced(&self, ino: INodeNo) -> Result<(), Errno> {
        let node = self.node(ino)?;
        if self.options.sync_backing {
            File::open(node.proc_path()).fuse()?.sync_all().fuse()?;
        }
        let mut dirs = lock(&self.dirs);
        let free = dirs.synced(node.backing).fuse()?;
        self.collect(&dirs, free);
        Ok(())
    }

    pub(super) fn readlink_of(&self, ino: INodeNo) -> Result<Vec<u8>, Errno> {
        let node = self.node(ino)?;
        let target = nix::fcntl::readlinkat(node.fd.as_fd(), "").fuse()?;
        Ok(target.as_bytes().to_vec())
    }
}

/// Whether `source` may replace `target` (the `name` in `parent`), as rename(2) allows.
fn check_replaceable(
    source: &FileStat,
    target: &FileStat,
    parent: &Node,
    name: &OsStr,
) -> Result<(), Errno> {
    match (kind_of(source.st_mode), kind_of(target.st_mode)) {
        (Kind::Dir, Kind::Dir) if !is_empty_dir(parent, name)? => Err(Errno::ENOTEMPTY),
        (Kind::Dir, Kind::Dir) => Ok(()),
        (Kind::Dir, _) => Err(Errno::ENOTDIR),
        (_, Kind::Dir) => Err(Errno::EISDIR),
        _ => Ok(()),
    }
}
