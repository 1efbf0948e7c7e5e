//! The inode table: the node ids FUSE knows, each standing for a backing inode held open by an
//! `O_PATH` descriptor (so renames in the backing directory never lose it, and its number
//! cannot be reused while the kernel may still name it), with the kernel's lookup count.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};
use nix::sys::stat::{FileStat, SFlag};

use crate::dirlog::{Binding, Kind};

/// A backing inode.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its `O_PATH` descriptor.
    pub fd: Arc<OwnedFd>,
    /// Its inode number in the backing file system.
    pub backing: u64,
}

impl Node {
    /// A path that opens the inode itself (through `/proc`), for calls that take no descriptor.
    pub fn proc_path(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }
}

#[derive(Debug)]
struct Slot {
    node: Node,
    lookups: u64,
}

/// FUSE node ids and the backing inodes they stand for.
#[derive(Debug)]
pub struct Inodes {
    slots: HashMap<u64, Slot>,
    by_backing: HashMap<u64, u64>,
    next: u64,
}

impl Inodes {
    /// A table holding the root (node id 1), which is never forgotten.
    pub fn new(root: OwnedFd, root_backing: u64) -> Self {
        let mut inodes = Inodes {
            slots: HashMap::new(),
            by_backing: HashMap::new(),
            next: INodeNo::ROOT.0 + 1,
        };
        let node = Node {
            fd: Arc::new(root),
            backing: root_backing,
        };
        inodes.slots.insert(
            INodeNo::ROOT.0,
            Slot {
                node,
                lookups: u64::MAX / 2,
            },
        );
        inodes.by_backing.insert(root_backing, INodeNo::ROOT.0);
        inodes
    }

    /// The node with id `ino`.
    pub fn get(&self, ino: INodeNo) -> Option<Node> {
        self.slots.get(&ino.0).map(|slot| slot.node.clone())
    }

    /// The id of the backing inode `backing` (opened as `fd`), counting one lookup; a known
    /// inode keeps the descriptor it has.
    pub fn remember(&mut self, fd: OwnedFd, backing: u64) -> INodeNo {
        if let Some(&ino) = self.by_backing.get(&backing) {
            if let Some(slot) = self.slots.get_mut(&ino) {
                slot.lookups += 1;
                return INodeNo(ino);
            }
        }
        let ino = self.next;
        self.next += 1;
        let node = Node {
            fd: Arc::new(fd),
            backing,
        };
        self.slots.insert(ino, Slot { node, lookups: 1 });
        self.by_backing.insert(backing, ino);
        INodeNo(ino)
    }

    /// The kernel dropped `count` lookups of `ino`; at none the node is let go.
    pub fn forget(&mut self, ino: INodeNo, count: u64) {
        let Some(slot) = self.slots.get_mut(&ino.0) else {
            return;
        };
        slot.lookups = slot.lookups.saturating_sub(count);
        if slot.lookups == 0 {
            let backing = slot.node.backing;
            self.slots.remove(&ino.0);
            if self.by_backing.get(&backing) == Some(&ino.0) {
                self.by_backing.remove(&backing);
            }
        }
    }
}

/// The kind of a backing inode from its mode.
pub fn kind_of(mode: u32) -> Kind {
    match SFlag::from_bits_truncate(mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFDIR => Kind::Dir,
        SFlag::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// What a name is bound to, from its `stat`.
pub fn binding_of(stat: &FileStat) -> Binding {
    Binding {
        ino: stat.st_ino,
        kind: kind_of(stat.st_mode),
    }
}

fn file_type(mode: u32) -> FileType {
    match SFlag::from_bits_truncate(mode) & SFlag::S_IFMT {
        SFlag::S_IFDIR => FileType::Directory,
        SFlag::S_IFLNK => FileType::Symlink,
        SFlag::S_IFIFO => FileType::NamedPipe,
        SFlag::S_IFSOCK => FileType::Socket,
        SFlag::S_IFCHR => FileType::CharDevice,
        SFlag::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

fn time(secs: i64, nanos: i64) -> SystemTime {
    let nanos = Duration::from_nanos(nanos.clamp(0, 999_999_999) as u64);
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + nanos
    }
}

/// The attributes FUSE reports for node `ino` whose backing inode has `stat`.
pub fn attr(ino: INodeNo, stat: &FileStat) -> FileAttr {
    FileAttr {
        ino,
        size: stat.st_size as u64,
        blocks: stat.st_blocks as u64,
        atime: time(stat.st_atime, stat.st_atime_nsec),
        mtime: time(stat.st_mtime, stat.st_mtime_nsec),
        ctime: time(stat.st_ctime, stat.st_ctime_nsec),
        crtime: UNIX_EPOCH,
        kind: file_type(stat.st_mode),
        perm: (stat.st_mode & 0o7777) as u16,
        nlink: stat.st_nlink as u32,
        uid: stat.st_uid,
        gid: stat.st_gid,
        rdev: stat.st_rdev as u32,
        blksize: stat.st_blksize as u32,
        flags: 0,
    }
}

/// The FUSE file type of a directory entry's `std` file type.
pub fn entry_type(kind: std::fs::FileType) -> FileType {
    FileType::from_std(kind).unwrap_or(FileType::RegularFile)
}
