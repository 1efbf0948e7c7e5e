//! A [`Disk`] in memory that records what a power loss could take, and builds the disks it could
//! leave: crash images.
//!
//! The model, per file: the content as of its last completed fsync, and each 512-byte sector
//! written since, with every content it held meanwhile (a sector reaches the disk whole or not
//! at all, and the page cache may write it back at any moment, so a crash leaves any one of
//! them). The file's length likewise. Per directory: the entries as of its last sync, and the
//! creations, renames and removals since. A crash image is the synced state plus any choice of
//! those sector contents and lengths, and any subset of those directory operations that respects
//! their order of dependence (a rename or removal of a name needs the operation that gave the
//! name to that file): a directory whose own entry is lost takes its files with it.
//!
//! A capacity ([`CrashDisk::set_capacity`]) makes it a disk that fills: a write that would
//! grow its files past it fails as a full disk's does and changes nothing.
//!
//! An fsync that fails (see [`CrashDisk::fail_syncs`]) leaves the sectors it should have written
//! unknown, as Linux does: it reports the error once and marks the pages clean, so a later
//! fsync does not write them again. They stay undecided in every later image until written
//! again.
//!
//! [`CrashDisk::freeze`] takes the state of a moment; [`Frozen::images`] lists its crash images,
//! all of them when they are few, else a sample drawn from a seed: the same seed gives the same
//! images. [`CrashDisk::on_sync`] calls back at the start of every sync, before it takes
//! effect: the moment of a power loss during that sync.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::disk::{Disk, DiskFile, Open};

/// Bytes a disk writes whole: a crash keeps each sector's old or new content, never a mix.
pub const SECTOR: u64 = 512;

/// The recording disk. Clones share the same files.
#[derive(Clone, Default)]
pub struct CrashDisk {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    hook: Mutex<Option<SyncHook>>,
}

type SyncHook = Box<dyn FnMut(&CrashDisk) + Send>;

impl fmt::Debug for CrashDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrashDisk").finish_non_exhaustive()
    }
}

/// What a directory entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File(u64),
    Dir,
}

/// A change to a directory's entries since its last sync.
#[derive(Debug, Clone)]
enum DirOp {
    Link(String, Node),
    Unlink(String, Node),
    Rename(String, String, Node),
}

#[derive(Debug, Clone, Default)]
struct Dir {
    /// The entries as the running system sees them.
    now: BTreeMap<String, Node>,
    /// The entries as of the last sync of the directory.
    durable: BTreeMap<String, Node>,
    /// The operations since, in order.
    pending: Vec<DirOp>,
}

/// A file's content, and what of it is not durable.
#[derive(Debug, Clone, Default)]
struct Inode {
    /// The content as reads see it.
    data: Vec<u8>,
    /// Each sector written since it was last durable: its contents since, the durable one first.
    dirty: BTreeMap<u64, Vec<Vec<u8>>>,
    /// Sectors whose fsync failed: undecided until written again.
    unknown: BTreeSet<u64>,
    /// The lengths since the last durable one, that one first.
    lens: Vec<u64>,
}

impl Inode {
    fn new() -> Inode {
        Inode {
            lens: vec![0],
            ..Inode::default()
        }
    }

    /// The content of sector `s`, zeros past the end of the file.
    fn sector(&self, s: u64) -> Vec<u8> {
        let mut bytes = vec![0; SECTOR as usize];
        let start = (s * SECTOR) as usize;
        if let Some(held) = self.data.get(start..) {
            let n = held.len().min(bytes.len());
            bytes[..n].copy_from_slice(&held[..n]);
        }
        bytes
    }

    /// Changes the bytes of `range` with `change`, noting each sector's new content.
    fn change(&mut self, range: std::ops::Range<u64>, change: impl FnOnce(&mut Vec<u8>)) {
        let sectors = range.start / SECTOR..range.end.div_ceil(SECTOR);
        for s in sectors.clone() {
            if !self.dirty.contains_key(&s) {
                let before = self.sector(s);
                self.dirty.insert(s, vec![before]);
            }
        }
        change(&mut self.data);
        for s in sectors {
            let now = self.sector(s);
            self.unknown.remove(&s);
            if let Some(versions) = self.dirty.get_mut(&s) {
                if versions.last() != Some(&now) {
                    versions.push(now);
                }
                if versions.len() == 1 {
                    self.dirty.remove(&s);
                }
            }
        }
        let len = self.data.len() as u64;
        if self.lens.last() != Some(&len) {
            self.lens.push(len);
        }
    }

    fn write(&mut self, buf: &[u8], at: u64) -> io::Result<()> {
        let start = usize::try_from(at).map_err(io::Error::other)?;
        let end = start + buf.len();
        self.change(at..end as u64, |data| {
            if data.len() < end {
                data.resize(end, 0);
            }
            data[start..end].copy_from_slice(buf);
        });
        Ok(())
    }

    fn set_len(&mut self, len: u64) {
        let old = self.data.len() as u64;
        self.change(len.min(old)..len.max(old), |data| {
            data.resize(len as usize, 0)
        });
    }

    /// A completed fsync: what is written is durable, but for sectors a failed fsync left
    /// undecided.
    fn sync(&mut self) {
        let unknown = &self.unknown;
        self.dirty.retain(|s, _| unknown.contains(s));
        self.lens = vec![self.data.len() as u64];
    }

    /// The content of this file in a crash image: `len` its length's choice, `sectors` the
    /// choice for each sector of [`Inode::choices`], in order.
    fn image(&self, len: usize, sectors: &mut impl Iterator<Item = usize>) -> Vec<u8> {
        let mut bytes = self.data.clone();
        for (s, versions) in &self.dirty {
            let distinct = distinct(versions);
            let pick = if distinct.len() > 1 {
                sectors.next().unwrap_or(0)
            } else {
                0
            };
            let start = (*s * SECTOR) as usize;
            if bytes.len() < start + SECTOR as usize {
                bytes.resize(start + SECTOR as usize, 0);
            }
            bytes[start..start + SECTOR as usize].copy_from_slice(distinct[pick]);
        }
        let lens = distinct(&self.lens);
        let len = lens.get(len).map_or(self.data.len() as u64, |l| **l);
        bytes.resize(len as usize, 0);
        bytes
    }

    /// The number of choices for the length, then for each sector that has more than one.
    fn choices(&self) -> (usize, Vec<usize>) {
        let sectors = self
            .dirty
            .values()
            .map(|v| distinct(v).len())
            .filter(|n| *n > 1)
            .collect();
        (distinct(&self.lens).len(), sectors)
    }
}

/// The distinct values of `all`, in their first order.
fn distinct<T: PartialEq>(all: &[T]) -> Vec<&T> {
    let mut seen: Vec<&T> = Vec::with_capacity(all.len());
    for value in all {
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    seen
}

/// Everything the disk holds, durable or not.
#[derive(Debug, Clone)]
struct State {
    files: BTreeMap<u64, Inode>,
    /// Every directory that exists, by path; `/` always does.
    dirs: BTreeMap<PathBuf, Dir>,
    next_ino: u64,
    /// File syncs still to fail.
    failing_syncs: u32,
    /// The most bytes the files named in a directory may hold together, if bounded.
    capacity: Option<u64>,
}

impl Default for State {
    fn default() -> State {
        State {
            files: BTreeMap::new(),
            dirs: BTreeMap::from([(PathBuf::from("/"), Dir::default())]),
            next_ino: 1,
            failing_syncs: 0,
            capacity: None,
        }
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

/// `path`'s directory and name.
fn split(path: &Path) -> io::Result<(&Path, String)> {
    let parent = path
        .parent()
        .filter(|p| p.is_absolute())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an absolute path"))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a UTF-8 file name"))?;
    Ok((parent, name.to_owned()))
}

impl State {
    fn dir_mut(&mut self, path: &Path) -> io::Result<&mut Dir> {
        self.dirs.get_mut(path).ok_or_else(|| not_found(path))
    }

    fn file_at(&self, path: &Path) -> io::Result<u64> {
        let (dir, name) = split(path)?;
        match self.dirs.get(dir).and_then(|d| d.now.get(&name)) {
            Some(Node::File(ino)) => Ok(*ino),
            _ => Err(not_found(path)),
        }
    }

    fn inode(&mut self, ino: u64) -> io::Result<&mut Inode> {
        self.files
            .get_mut(&ino)
            .ok_or_else(|| io::Error::other("a file of the crash disk vanished"))
    }

    fn open(&mut self, path: &Path, how: Open) -> io::Result<u64> {
        match (self.file_at(path), how) {
            (Ok(ino), Open::Existing) => Ok(ino),
            (Ok(ino), Open::Create) => {
                self.inode(ino)?.set_len(0);
                Ok(ino)
            }
            (Ok(_), Open::CreateNew) => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            )),
            (Err(e), Open::Existing) => Err(e),
            (Err(_), Open::Create | Open::CreateNew) => {
                let (dir, name) = split(path)?;
                let ino = self.next_ino;
                let dir = self.dir_mut(dir)?;
                dir.now.insert(name.clone(), Node::File(ino));
                dir.pending.push(DirOp::Link(name, Node::File(ino)));
                self.next_ino += 1;
                self.files.insert(ino, Inode::new());
                Ok(ino)
            }
        }
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        let (dir, from_name) = split(from)?;
        let (to_dir, to_name) = split(to)?;
        if dir != to_dir {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the crash disk renames within a directory only",
            ));
        }
        let dir = self.dir_mut(dir)?;
        let node = dir.now.remove(&from_name).ok_or_else(|| not_found(from))?;
        dir.now.insert(to_name.clone(), node.clone());
        dir.pending.push(DirOp::Rename(from_name, to_name, node));
        Ok(())
    }

    fn remove_file(&mut self, path: &Path) -> io::Result<()> {
        let (dir, name) = split(path)?;
        let dir = self.dir_mut(dir)?;
        match dir.now.get(&name) {
            Some(Node::File(_)) => {}
            _ => return Err(not_found(path)),
        }
        if let Some(node) = dir.now.remove(&name) {
            dir.pending.push(DirOp::Unlink(name, node));
        }
        Ok(())
    }

    fn create_dir(&mut self, path: &Path) -> io::Result<()> {
        if self.dirs.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        let (parent, name) = split(path)?;
        let parent = self.dir_mut(parent)?;
        if parent.now.contains_key(&name) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "a file"));
        }
        parent.now.insert(name.clone(), Node::Dir);
        parent.pending.push(DirOp::Link(name, Node::Dir));
        self.dirs.insert(path.to_path_buf(), Dir::default());
        Ok(())
    }

    /// Refuses, as a full disk does, to grow the file `ino` to `len` bytes when the files named
    /// now would then hold more than the capacity.
    fn make_room(&self, ino: u64, len: u64) -> io::Result<()> {
        let Some(capacity) = self.capacity else {
            return Ok(());
        };
        let old = self.files.get(&ino).map_or(0, |f| f.data.len() as u64);
        if len <= old {
            return Ok(());
        }
        let named: BTreeSet<u64> = (self.dirs.values())
            .flat_map(|d| d.now.values())
            .filter_map(|node| match node {
                Node::File(ino) => Some(*ino),
                Node::Dir => None,
            })
            .collect();
        let used: u64 = (named.iter())
            .filter_map(|ino| self.files.get(ino))
            .map(|f| f.data.len() as u64)
            .sum();
        if used + (len - old) > capacity {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "no space left on device (crash disk)",
            ));
        }
        Ok(())
    }

    fn sync_file(&mut self, ino: u64) -> io::Result<()> {
        if self.failing_syncs > 0 {
            self.failing_syncs -= 1;
            let inode = self.inode(ino)?;
            let dirty: Vec<u64> = inode.dirty.keys().copied().collect();
            inode.unknown.extend(dirty);
            return Err(io::Error::other("fsync failed (crash disk)"));
        }
        self.inode(ino)?.sync();
        Ok(())
    }

    /// The inodes some directory entry names now, durably or in an operation since.
    fn named_files(&self) -> BTreeSet<u64> {
        let mut named = BTreeSet::new();
        for dir in self.dirs.values() {
            let ops = dir.pending.iter().map(|op| match op {
                DirOp::Link(_, n) | DirOp::Unlink(_, n) | DirOp::Rename(_, _, n) => n,
            });
            for node in dir.now.values().chain(dir.durable.values()).chain(ops) {
                if let Node::File(ino) = node {
                    named.insert(*ino);
                }
            }
        }
        named
    }
}

impl CrashDisk {
    /// An empty disk: the root directory `/`, durable.
    pub fn new() -> CrashDisk {
        CrashDisk::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls `hook` at the start of every file or directory sync, before it takes effect, and
    /// outside the disk's lock (the hook may freeze the disk). Replaces an earlier hook.
    pub fn on_sync(&self, hook: impl FnMut(&CrashDisk) + Send + 'static) {
        *self
            .inner
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(hook));
    }

    /// Removes the hook of [`CrashDisk::on_sync`].
    pub fn no_sync_hook(&self) {
        *self
            .inner
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    fn before_sync(&self) {
        let mut hook = self
            .inner
            .hook
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(hook) = hook.as_mut() {
            hook(self);
        }
    }

    /// Makes the next `count` file syncs fail, leaving what they should have written undecided.
    pub fn fail_syncs(&self, count: u32) {
        self.state().failing_syncs = count;
    }

    /// Bounds the bytes its files may hold together (`None`: unbounded). A write or length
    /// change that would grow them past it fails with [`io::ErrorKind::StorageFull`]; writes
    /// within a file's length always succeed, as on a disk whose files are allocated.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.state().capacity = bytes;
    }

    /// The state of this moment.
    pub fn freeze(&self) -> Frozen {
        self.freeze_with(|| ()).0
    }

    /// The state of this moment, and what `also` returns when called at that moment: no
    /// operation of the disk runs meanwhile, so what `also` reads of the system (callbacks
    /// called, another store's content) happened before it or after it.
    pub fn freeze_with<T>(&self, also: impl FnOnce() -> T) -> (Frozen, T) {
        let state = self.state();
        let seen = also();
        (
            Frozen {
                state: state.clone(),
            },
            seen,
        )
    }

    /// The content of the file at `path`, as reads see it.
    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut state = self.state();
        let ino = state.file_at(path)?;
        Ok(state.inode(ino)?.data.clone())
    }

    /// Overwrites bytes of the file at `path`, synced: damage, as a test makes it.
    pub fn damage(&self, path: &Path, at: u64, bytes: &[u8]) -> io::Result<()> {
        let mut state = self.state();
        let ino = state.file_at(path)?;
        let inode = state.inode(ino)?;
        inode.write(bytes, at)?;
        inode.sync();
        Ok(())
    }
}

/// An open file of a [`CrashDisk`]: it stays readable and writable when renamed or removed.
#[derive(Debug)]
struct CrashFile {
    disk: CrashDisk,
    ino: u64,
}

impl DiskFile for CrashFile {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.disk.state();
        state.make_room(self.ino, offset + buf.len() as u64)?;
        state.inode(self.ino)?.write(buf, offset)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut state = self.disk.state();
        let data = &state.inode(self.ino)?.data;
        let start = usize::try_from(offset).map_err(io::Error::other)?;
        let held = data
            .get(start..start.saturating_add(buf.len()))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(held);
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut state = self.disk.state();
        let data = &state.inode(self.ino)?.data;
        let start = usize::try_from(offset).map_or(data.len(), |s| s.min(data.len()));
        let held = &data[start..];
        let n = held.len().min(buf.len());
        buf[..n].copy_from_slice(&held[..n]);
        Ok(n)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.disk.state().inode(self.ino)?.data.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.disk.state();
        state.make_room(self.ino, len)?;
        state.inode(self.ino)?.set_len(len);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.disk.before_sync();
        self.disk.state().sync_file(self.ino)
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync_data()
    }

    fn write_out(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
}

impl Disk for CrashDisk {
    fn open(&self, path: &Path, how: Open) -> io::Result<Arc<dyn DiskFile>> {
        let ino = self.state().open(path, how)?;
        Ok(Arc::new(CrashFile {
            disk: self.clone(),
            ino,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.state().rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.state().remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.before_sync();
        let mut state = self.state();
        let dir = state.dir_mut(dir)?;
        dir.durable = dir.now.clone();
        dir.pending.clear();
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let state = self.state();
        let dir = state.dirs.get(dir).ok_or_else(|| not_found(dir))?;
        Ok(dir.now.keys().cloned().collect())
    }

    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        self.state().create_dir(dir)
    }
}

/// The state of a [`CrashDisk`] at one moment, from which its crash images are built.
#[derive(Debug, Clone)]
pub struct Frozen {
    state: State,
}

/// One crash image: the disk after the power came back, and the choices that made it.
#[derive(Debug, Clone)]
pub struct Image {
    pub disk: CrashDisk,
    /// For each undecided sector, length and directory operation, in a fixed order, which
    /// outcome this image took (0: the durable one).
    pub choices: Vec<usize>,
}

impl Frozen {
    /// The number of outcomes of each undecided thing: per named file its length (when it
    /// changed) and each sector written since its last sync (when its content changed), then
    /// per directory each operation since its last sync (kept or lost).
    pub fn dimensions(&self) -> Vec<usize> {
        let mut dims = Vec::new();
        for ino in self.state.named_files() {
            if let Some(inode) = self.state.files.get(&ino) {
                let (lens, sectors) = inode.choices();
                dims.push(lens);
                dims.extend(sectors);
            }
        }
        for dir in self.state.dirs.values() {
            dims.extend(dir.pending.iter().map(|_| 2));
        }
        dims
    }

    /// The number of distinct crash images (saturating).
    pub fn count(&self) -> u64 {
        self.dimensions()
            .iter()
            .fold(1u64, |n, d| n.saturating_mul(*d as u64))
    }

    /// Every crash image when there are at most `limit`, else `limit` of them: the one that
    /// keeps nothing unsynced, the one that keeps everything, and others drawn with `seed`.
    pub fn images(&self, limit: usize, seed: u64) -> Vec<Image> {
        let dims = self.dimensions();
        let choices: Vec<Vec<usize>> = if self.count() <= limit as u64 {
            every_choice(&dims)
        } else {
            let mut rng = SplitMix(seed);
            let mut picked = vec![vec![0; dims.len()], dims.iter().map(|d| d - 1).collect()];
            while picked.len() < limit {
                picked.push(dims.iter().map(|d| rng.below(*d)).collect());
            }
            picked
        };
        choices
            .into_iter()
            .map(|choices| Image {
                disk: self.image(&choices),
                choices,
            })
            .collect()
    }

    /// The crash image of `choices` (see [`Frozen::dimensions`]; missing ones are 0).
    pub fn image(&self, choices: &[usize]) -> CrashDisk {
        let mut picks = choices.iter().copied().chain(std::iter::repeat(0));
        let mut files = BTreeMap::new();
        for ino in self.state.named_files() {
            if let Some(inode) = self.state.files.get(&ino) {
                let len = picks.next().unwrap_or(0);
                let (_, sectors) = inode.choices();
                let mut own = picks
                    .by_ref()
                    .take(sectors.len())
                    .collect::<Vec<_>>()
                    .into_iter();
                let data = inode.image(len, &mut own);
                let lens = vec![data.len() as u64];
                files.insert(
                    ino,
                    Inode {
                        data,
                        lens,
                        ..Inode::default()
                    },
                );
            }
        }
        let mut dirs: BTreeMap<PathBuf, Dir> = BTreeMap::new();
        for (path, dir) in &self.state.dirs {
            let kept: Vec<bool> = dir
                .pending
                .iter()
                .map(|_| picks.next() == Some(1))
                .collect();
            let exists = path == Path::new("/")
                || split(path).is_ok_and(|(parent, name)| {
                    dirs.get(parent)
                        .is_some_and(|p| p.now.get(&name) == Some(&Node::Dir))
                });
            if exists {
                let entries = replay(&dir.durable, &dir.pending, &kept);
                dirs.insert(
                    path.clone(),
                    Dir {
                        now: entries.clone(),
                        durable: entries,
                        pending: Vec::new(),
                    },
                );
            }
        }
        let state = State {
            files,
            dirs,
            next_ino: self.state.next_ino,
            failing_syncs: 0,
            capacity: self.state.capacity,
        };
        CrashDisk {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                hook: Mutex::new(None),
            }),
        }
    }
}

/// `durable` with the operations of `ops` that `kept` says reached the disk, each only where
/// the operations it depends on did: a name is given only when free, taken only from the file
/// it names.
fn replay(
    durable: &BTreeMap<String, Node>,
    ops: &[DirOp],
    kept: &[bool],
) -> BTreeMap<String, Node> {
    let mut entries = durable.clone();
    for (op, kept) in ops.iter().zip(kept) {
        if !kept {
            continue;
        }
        match op {
            DirOp::Link(name, node) => {
                entries.entry(name.clone()).or_insert_with(|| node.clone());
            }
            DirOp::Unlink(name, node) => {
                if entries.get(name) == Some(node) {
                    entries.remove(name);
                }
            }
            DirOp::Rename(from, to, node) => {
                if entries.get(from) == Some(node) {
                    entries.remove(from);
                    entries.insert(to.clone(), node.clone());
                }
            }
        }
    }
    entries
}

/// Every combination of choices, `dims[i]` outcomes for choice `i`.
fn every_choice(dims: &[usize]) -> Vec<Vec<usize>> {
    let mut all = vec![Vec::with_capacity(dims.len())];
    for &d in dims {
        all = all
            .into_iter()
            .flat_map(|prefix| {
                (0..d).map(move |c| {
                    let mut next = prefix.clone();
                    next.push(c);
                    next
                })
            })
            .collect();
    }
    all
}

/// A small seeded generator (SplitMix64): the same seed, the same sample of images.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.next_u64() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> PathBuf {
        PathBuf::from(p)
    }

    fn durable_dir(disk: &CrashDisk, p: &str) {
        disk.create_dir(&path(p)).expect("mkdir");
        disk.sync_dir(Path::new("/")).expect("sync /");
    }

    #[test]
    fn a_synced_write_is_in_every_image_and_an_unsynced_one_in_some() {
        let disk = CrashDisk::new();
        durable_dir(&disk, "/d");
        let file = disk.open(&path("/d/f"), Open::Create).expect("create");
        file.write_all_at(&[1; 1024], 0).expect("write");
        file.sync_data().expect("sync");
        disk.sync_dir(&path("/d")).expect("sync dir");
        // Two sectors rewritten, one of them twice.
        file.write_all_at(&[2; 512], 0).expect("write");
        file.write_all_at(&[3; 512], 512).expect("write");
        file.write_all_at(&[4; 10], 512).expect("write");
        let frozen = disk.freeze();
        assert_eq!(frozen.dimensions(), [1, 2, 3]);
        let images = frozen.images(100, 0);
        assert_eq!(images.len(), 6);
        let mut seen: Vec<(u8, u8)> = images
            .iter()
            .map(|i| {
                let bytes = i.disk.read(&path("/d/f")).expect("the file is durable");
                assert_eq!(bytes.len(), 1024);
                (bytes[0], bytes[512])
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, [(1, 1), (1, 3), (1, 4), (2, 1), (2, 3), (2, 4)]);
    }

    #[test]
    fn directory_operations_persist_in_any_subset_that_respects_their_order() {
        let disk = CrashDisk::new();
        durable_dir(&disk, "/d");
        disk.open(&path("/d/a"), Open::Create).expect("create");
        disk.rename(&path("/d/a"), &path("/d/b")).expect("rename");
        disk.open(&path("/d/c"), Open::Create).expect("create");
        disk.sync_dir(&path("/d")).expect("sync");
        disk.remove_file(&path("/d/b")).expect("remove");
        disk.remove_file(&path("/d/c")).expect("remove");
        disk.open(&path("/d/e"), Open::Create).expect("create");
        disk.rename(&path("/d/e"), &path("/d/g")).expect("rename");
        let mut listings: Vec<Vec<String>> = disk
            .freeze()
            .images(100, 0)
            .iter()
            .map(|i| i.disk.list_dir(&path("/d")).expect("list"))
            .collect();
        listings.sort();
        listings.dedup();
        // b and c each gone or not; e absent, present, or renamed to g (never g without e).
        assert_eq!(listings.len(), 12, "{listings:?}");
        assert!(listings
            .iter()
            .all(|l| !l.contains(&"g".to_string()) || !l.contains(&"e".to_string())));
    }

    #[test]
    fn a_directory_whose_entry_is_lost_takes_its_files() {
        let disk = CrashDisk::new();
        disk.create_dir(&path("/d")).expect("mkdir");
        let file = disk.open(&path("/d/f"), Open::Create).expect("create");
        file.write_all_at(b"x", 0).expect("write");
        file.sync_all().expect("sync");
        disk.sync_dir(&path("/d")).expect("sync");
        let images = disk.freeze().images(100, 0);
        assert_eq!(images.len(), 2);
        let found: Vec<bool> = images
            .iter()
            .map(|i| i.disk.read(&path("/d/f")).is_ok())
            .collect();
        assert_eq!(found, [false, true]);
    }

    #[test]
    fn what_a_failed_fsync_should_have_written_stays_undecided_after_a_later_one() {
        let disk = CrashDisk::new();
        let file = disk.open(&path("/f"), Open::Create).expect("create");
        file.write_all_at(&[0; 1024], 0).expect("write");
        file.sync_data().expect("sync");
        disk.sync_dir(Path::new("/")).expect("sync");
        file.write_all_at(&[1; 512], 0).expect("write");
        disk.fail_syncs(1);
        assert!(file.sync_data().is_err());
        file.write_all_at(&[2; 512], 512).expect("write");
        file.sync_data().expect("sync");
        let mut firsts: Vec<(u8, u8)> = disk
            .freeze()
            .images(100, 0)
            .iter()
            .map(|i| {
                let bytes = i.disk.read(&path("/f")).expect("read");
                (bytes[0], bytes[512])
            })
            .collect();
        firsts.sort_unstable();
        assert_eq!(firsts, [(0, 2), (1, 2)]);
    }

    #[test]
    fn a_sample_is_the_same_for_the_same_seed() {
        let disk = CrashDisk::new();
        let file = disk.open(&path("/f"), Open::Create).expect("create");
        file.write_all_at(&[7; 512 * 20], 0).expect("write");
        let frozen = disk.freeze();
        assert!(frozen.count() > 1000);
        let choices = |seed| -> Vec<Vec<usize>> {
            frozen
                .images(50, seed)
                .into_iter()
                .map(|i| i.choices)
                .collect()
        };
        assert_eq!(choices(3), choices(3));
        assert_ne!(choices(3), choices(4));
        assert_eq!(choices(3).len(), 50);
    }
}
