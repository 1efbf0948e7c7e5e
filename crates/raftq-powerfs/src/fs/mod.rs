//! The FUSE file system: every call passes through to the backing directory's `data/` at
//! once, after the undo journal ([`crate::tracker`]) has what a power loss would roll back.
//!
//! Mount options: no writeback cache (fuser does not ask for it), so every `write` reaches
//! the daemon, and the backing file, before it returns, and a process kill keeps it; reads go
//! through the kernel's page cache, which stays right because every change passes through this
//! mount (the backing directory is changed behind it only while it is not mounted); entries
//! and attributes are cached for a second for the same reason. `allow_other`, because the
//! daemon mounts as root and the node runs as another user; no `default_permissions`: the
//! daemon checks nothing and the backing's owners are set to the caller's on creation. Locks
//! stay in the kernel (fuser does not ask for POSIX locks). `fsync` and `fsyncdir` only mark
//! the journal: the backing never needs to reach a disk.

mod data;
mod names;

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    AccessFlags, BackgroundSession, BsdFileFlags, Config, Errno, FileAttr, FileHandle, FileType,
    Filesystem, FopenFlags, Generation, INodeNo, IoctlFlags, KernelConfig, LockOwner, MountOption,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, SessionACL,
    TimeOrNow, WriteFlags,
};
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::error::{Context, Error};
use crate::inodes::{attr, Inodes, Node};
use crate::layout::Layout;
use crate::tracker::{lock, DirJournal, FileJournals};

/// How long the kernel may keep entries and attributes.
const TTL: Duration = Duration::from_secs(1);

/// The largest write the kernel sends in one request.
const MAX_WRITE: u32 = 1 << 20;

/// An open file or directory.
#[derive(Debug)]
enum Handle {
    File {
        file: File,
        backing: u64,
    },
    Dir {
        entries: Vec<(u64, FileType, OsString)>,
    },
}

#[derive(Debug, Default)]
struct Handles {
    next: u64,
    open: HashMap<u64, Arc<Handle>>,
}

/// The pass-through file system over a backing directory's `data/`.
#[derive(Debug)]
pub struct PowerFs {
    inodes: Mutex<Inodes>,
    handles: Mutex<Handles>,
    files: FileJournals,
    /// Also the lock that makes directory operations one at a time.
    dirs: Mutex<DirJournal>,
    options: Options,
}

/// How the file system is served.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Threads serving requests.
    pub threads: usize,
    /// Whether an fsync also syncs the backing file or directory, so that it costs what it
    /// costs without the layer (the model needs only the journal: without, fsyncs are free and
    /// the node's timing changes).
    pub sync_backing: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: 4,
            sync_backing: true,
        }
    }
}

/// The error of a failed system call, for the kernel.
trait Fuse<T> {
    fn fuse(self) -> Result<T, Errno>;
}

impl<T> Fuse<T> for io::Result<T> {
    fn fuse(self) -> Result<T, Errno> {
        self.map_err(Errno::from)
    }
}

impl<T> Fuse<T> for nix::Result<T> {
    fn fuse(self) -> Result<T, Errno> {
        self.map_err(|errno| Errno::from_i32(errno as i32))
    }
}

impl PowerFs {
    /// The file system over `layout`'s `data/`, whose journal must be empty (discarded or
    /// reverted).
    pub fn new(layout: &Layout, options: Options) -> Result<Self, Error> {
        let data = layout.data();
        let root = nix::fcntl::open(
            &data,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .at("opening", &data)?;
        let stat = nix::sys::stat::fstat(root.as_fd()).at("reading", &data)?;
        let dirs = DirJournal::open(layout.clone()).at("opening", &layout.dirops())?;
        Ok(PowerFs {
            inodes: Mutex::new(Inodes::new(root, stat.st_ino)),
            handles: Mutex::new(Handles::default()),
            files: FileJournals::new(layout.clone()),
            dirs: Mutex::new(dirs),
            options,
        })
    }

    fn node(&self, ino: INodeNo) -> Result<Node, Errno> {
        lock(&self.inodes).get(ino).ok_or(Errno::ESTALE)
    }

    fn handle(&self, fh: FileHandle) -> Result<Arc<Handle>, Errno> {
        lock(&self.handles)
            .open
            .get(&fh.0)
            .cloned()
            .ok_or(Errno::EBADF)
    }

    fn add_handle(&self, handle: Handle) -> FileHandle {
        let mut handles = lock(&self.handles);
        handles.next += 1;
        let fh = handles.next;
        handles.open.insert(fh, Arc::new(handle));
        FileHandle(fh)
    }

    fn remove_handle(&self, fh: FileHandle) -> Option<Arc<Handle>> {
        lock(&self.handles).open.remove(&fh.0)
    }

    fn file_of(&self, fh: FileHandle) -> Result<(Arc<Handle>, u64), Errno> {
        let handle = self.handle(fh)?;
        match &*handle {
            Handle::File { backing, .. } => {
                let backing = *backing;
                Ok((handle, backing))
            }
            Handle::Dir { .. } => Err(Errno::EISDIR),
        }
    }

    fn getattr_of(&self, ino: INodeNo) -> Result<FileAttr, Errno> {
        let node = self.node(ino)?;
        let stat = nix::sys::stat::fstat(node.fd.as_fd()).fuse()?;
        Ok(attr(ino, &stat))
    }

    fn statfs_of(&self) -> Result<nix::sys::statvfs::Statvfs, Errno> {
        let root = self.node(INodeNo::ROOT)?;
        nix::sys::statvfs::fstatvfs(root.fd.as_fd()).fuse()
    }
}

/// The underlying `File` of a file handle.
fn file_in(handle: &Handle) -> Result<&File, Errno> {
    match handle {
        Handle::File { file, .. } => Ok(file),
        Handle::Dir { .. } => Err(Errno::EISDIR),
    }
}

fn reply_entry(reply: ReplyEntry, result: Result<FileAttr, Errno>) {
    match result {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(err) => reply.error(err),
    }
}

fn reply_attr(reply: ReplyAttr, result: Result<FileAttr, Errno>) {
    match result {
        Ok(attr) => reply.attr(&TTL, &attr),
        Err(err) => reply.error(err),
    }
}

fn reply_empty(reply: ReplyEmpty, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(err) => reply.error(err),
    }
}

/// Mounts the file system over `layout` at `mountpoint` until the returned session is
/// unmounted or dropped.
pub fn mount(
    layout: &Layout,
    mountpoint: &Path,
    options: Options,
) -> Result<BackgroundSession, Error> {
    let fs = PowerFs::new(layout, options)?;
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("raftq-powerfs".to_string()),
        MountOption::Subtype("powerfs".to_string()),
        MountOption::NoAtime,
    ];
    config.acl = SessionACL::All;
    config.n_threads = Some(options.threads.max(1));
    config.clone_fd = true;
    let mount_error = |source| Error::Mount {
        mountpoint: mountpoint.to_path_buf(),
        source,
    };
    let session = fuser::Session::new(fs, mountpoint, &config).map_err(mount_error)?;
    session.spawn().map_err(mount_error)
}

/// How long an unmount keeps retrying while the mount is busy.
const UNMOUNT_PATIENCE: Duration = Duration::from_secs(10);

/// Unmounts `session` from `mountpoint` and waits for its threads.
///
/// The unmount is retried while the kernel answers `EBUSY`: a file closed a moment ago can
/// still hold the mount, for example a descriptor copied into a child process that another
/// thread forked and that has not reached its `exec` yet. When this process may not unmount
/// (not root), fuser's own unmount goes through `fusermount`. A thread that reads its cloned
/// device after the unmount gets `ECONNABORTED`: the session ended as asked, which is no
/// failure.
pub fn unmount(session: BackgroundSession, mountpoint: &Path) -> io::Result<()> {
    let deadline = Instant::now() + UNMOUNT_PATIENCE;
    let unmounted = loop {
        match nix::mount::umount2(mountpoint, nix::mount::MntFlags::empty()) {
            Err(nix::errno::Errno::EBUSY) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(nix::errno::Errno::EBUSY) => return Err(io::Error::from(nix::errno::Errno::EBUSY)),
            other => break other.is_ok(),
        }
    };
    let ended = if unmounted {
        session.join()
    } else {
        session.umount_and_join()
    };
    match ended {
        Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => Ok(()),
        other => other,
    }
}

impl Filesystem for PowerFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        if let Err(limit) = config.set_max_write(MAX_WRITE) {
            tracing::debug!(limit, "the kernel limits writes");
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        reply_entry(
            reply,
            self.node(parent).and_then(|p| self.lookup_at(&p, name)),
        );
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        lock(&self.inodes).forget(ino, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        reply_attr(reply, self.getattr_of(ino));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = self
            .set_owner_and_mode(ino, mode, uid, gid)
            .and_then(|()| self.set_times(ino, atime, mtime))
            .and_then(|()| match size {
                Some(size) => self.truncate(ino, fh, size),
                None => Ok(()),
            })
            .and_then(|()| self.getattr_of(ino));
        reply_attr(reply, result);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.readlink_of(ino) {
            Ok(target) => reply.data(&target),
            Err(err) => reply.error(err),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        reply_entry(reply, self.mkdir_at(req, parent, name, mode & !umask));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.unlink_at(parent, name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.rmdir_at(parent, name));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        reply_entry(reply, self.symlink_at(req, parent, link_name, target));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        reply_empty(
            reply,
            self.rename_at(parent, name, newparent, newname, flags),
        );
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply_entry(reply, self.link_at(ino, newparent, newname));
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.open_file(ino, flags) {
            Ok(fh) => reply.opened(fh, FopenFlags::empty()),
            Err(err) => reply.error(err),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.read_file(fh, offset, size) {
            Ok(bytes) => reply.data(&bytes),
            Err(err) => reply.error(err),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.write_file(fh, offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(err) => reply.error(err),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Some(handle) = self.remove_handle(fh) {
            if let Handle::File { backing, .. } = &*handle {
                self.files.released(*backing);
            }
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.file_synced(ino, fh, datasync));
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.open_dir(ino) {
            Ok(fh) => reply.opened(fh, FopenFlags::empty()),
            Err(err) => reply.error(err),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.read_dir(fh, offset, reply);
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.remove_handle(fh);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.dir_synced(ino));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.statfs_of() {
            Ok(s) => reply.statfs(
                s.blocks(),
                s.blocks_free(),
                s.blocks_available(),
                s.files(),
                s.files_free(),
                s.block_size() as u32,
                s.name_max() as u32,
                s.fragment_size() as u32,
            ),
            Err(err) => reply.error(err),
        }
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        // Regular files answer no ioctl (a terminal check of `isatty` asks one).
        reply.error(Errno::ENOTTY);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self.create_at(req, parent, name, mode & !umask, flags) {
            Ok((attr, fh)) => reply.created(&TTL, &attr, Generation(0), fh, FopenFlags::empty()),
            Err(err) => reply.error(err),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.allocate(fh, offset, length, mode));
    }
}
