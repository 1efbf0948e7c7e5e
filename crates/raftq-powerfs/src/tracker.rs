//! The daemon's side of the undo journal: before a file's sectors change, their content as of
//! the file's last fsync is appended to its journal ([`FileJournals`]); before a name is
//! unlinked or replaced, its inode is kept in the trash and the operation logged
//! ([`DirJournal`]). An fsync of a file empties its journal; an fsync of a directory makes the
//! operations on it durable, and the trash lets go of inodes no pending operation names.
//!
//! Nothing here is fsynced: the journal has to survive a process kill only, like the page
//! cache, and the backing files never need to reach a disk for the model to hold.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};
use nix::unistd::UnlinkatFlags;

use crate::dirlog::{self, DirOp, Entry, Pending, Record};
use crate::journal::{self, PreImage, SECTOR};
use crate::layout::Layout;

/// Locks a mutex, taking its value over from a thread that panicked holding it.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One file's journal while the daemon runs.
#[derive(Debug, Default)]
struct FileState {
    /// The open journal file, once there was a change.
    journal: Option<File>,
    /// Its length: the next record goes there.
    len: u64,
    /// Whether anything changed since the last fsync.
    dirty: bool,
    /// The file's size at its last fsync.
    synced_size: u64,
    /// One bit per sector below the synced size: whether its pre-image is in the journal.
    saved: Vec<u64>,
    /// Taken out of the table: a thread that still holds it looks again.
    retired: bool,
}

impl FileState {
    fn is_saved(&self, sector: u64) -> bool {
        self.saved
            .get((sector / 64) as usize)
            .is_some_and(|word| word >> (sector % 64) & 1 == 1)
    }

    fn mark_saved(&mut self, sector: u64) {
        let word = (sector / 64) as usize;
        if self.saved.len() <= word {
            self.saved.resize(word + 1, 0);
        }
        self.saved[word] |= 1 << (sector % 64);
    }

    /// Starts a journal for changes after an fsync at which the file was `synced_size` long.
    fn begin(&mut self, path: &PathBuf, synced_size: u64) -> io::Result<()> {
        let journal = match self.journal.take() {
            Some(journal) => journal,
            None => OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)?,
        };
        journal.write_all_at(&journal::header(synced_size), 0)?;
        self.journal = Some(journal);
        self.len = journal::HEADER_LEN;
        self.synced_size = synced_size;
        self.saved.clear();
        self.dirty = true;
        Ok(())
    }

    /// Journals the pre-images of the sectors of `range` not journaled yet, read from `file`.
    fn save(&mut self, file: &File, range: Range<u64>) -> io::Result<()> {
        let end = range
            .end
            .div_ceil(SECTOR)
            .min(self.synced_size.div_ceil(SECTOR));
        let mut records = Vec::new();
        let mut sectors = Vec::new();
        for sector in range.start / SECTOR..end {
            if self.is_saved(sector) {
                continue;
            }
            let len = SECTOR.min(self.synced_size - sector * SECTOR) as usize;
            let mut bytes = vec![0u8; len];
            read_up_to(file, &mut bytes, sector * SECTOR)?;
            journal::encode_record(&mut records, sector, &PreImage::of(&bytes));
            sectors.push(sector);
        }
        if records.is_empty() {
            return Ok(());
        }
        let journal = self
            .journal
            .as_ref()
            .ok_or_else(|| io::Error::other("a change before the journal began"))?;
        journal.write_all_at(&records, self.len)?;
        self.len += records.len() as u64;
        for sector in sectors {
            self.mark_saved(sector);
        }
        Ok(())
    }
}

/// Reads into `buf` from `offset` as far as the file goes; the rest stays zero.
fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// The journals of the files changed since the daemon started, by backing inode number.
#[derive(Debug)]
pub struct FileJournals {
    layout: Layout,
    states: Mutex<HashMap<u64, Arc<Mutex<FileState>>>>,
}

impl FileJournals {
    /// No journal yet (the layout's journal was discarded or reverted).
    pub fn new(layout: Layout) -> Self {
        FileJournals {
            layout,
            states: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `change` on `file` (backing inode `ino`) once the sectors of `range` are journaled;
    /// an empty range changes the length only. No fsync of the file runs meanwhile.
    pub fn change<T>(
        &self,
        ino: u64,
        file: &File,
        range: Range<u64>,
        change: impl FnOnce(&File) -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            let state = Arc::clone(lock(&self.states).entry(ino).or_default());
            let mut state = lock(&state);
            if state.retired {
                continue;
            }
            if !state.dirty {
                state.begin(&self.layout.file_journal(ino), file.metadata()?.len())?;
            }
            state.save(file, range)?;
            return change(file);
        }
    }

    /// The file was fsynced: everything written to it is durable.
    pub fn synced(&self, ino: u64) -> io::Result<()> {
        let Some(state) = lock(&self.states).get(&ino).cloned() else {
            return Ok(());
        };
        let mut state = lock(&state);
        if state.dirty {
            if let Some(journal) = &state.journal {
                journal.set_len(0)?;
            }
            state.dirty = false;
            state.len = 0;
            state.saved.clear();
        }
        Ok(())
    }

    /// A handle of the file was closed: a journal with no change is let go.
    pub fn released(&self, ino: u64) {
        let mut states = lock(&self.states);
        let Some(state) = states.get(&ino).cloned() else {
            return;
        };
        let Ok(mut state) = state.try_lock() else {
            return;
        };
        if !state.dirty {
            state.retired = true;
            states.remove(&ino);
            self.remove_journal(ino);
        }
    }

    /// The inode is new (its number may be a dead file's) or gone: its journal is dropped.
    pub fn forget(&self, ino: u64) {
        let mut states = lock(&self.states);
        if let Some(state) = states.remove(&ino) {
            lock(&state).retired = true;
        }
        self.remove_journal(ino);
    }

    fn remove_journal(&self, ino: u64) {
        let path = self.layout.file_journal(ino);
        if let Err(err) = std::fs::remove_file(&path) {
            if err.kind() != io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), %err, "cannot remove a journal");
            }
        }
    }
}

/// The pending directory operations, their log and the trash.
#[derive(Debug)]
pub struct DirJournal {
    layout: Layout,
    log: File,
    len: u64,
    pending: Pending,
    next_id: u64,
    /// How many pending operations name each inode.
    refs: HashMap<u64, usize>,
    trash: OwnedFd,
}

/// A log past this length is rewritten with only what is pending.
const COMPACT_AT: u64 = 1 << 20;

impl DirJournal {
    /// An empty log (the layout's journal was discarded or reverted).
    pub fn open(layout: Layout) -> io::Result<Self> {
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(layout.dirops())?;
        let trash = nix::fcntl::open(
            &layout.trash(),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(DirJournal {
            layout,
            log,
            len: 0,
            pending: Pending::default(),
            next_id: 1,
            refs: HashMap::new(),
            trash,
        })
    }

    /// Logs an operation over `entries`; returns its id, to cancel it if it fails.
    pub fn record(&mut self, entries: Vec<Entry>) -> io::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let op = DirOp::new(id, entries);
        self.append(&Record::Op(op.clone()))?;
        for ino in op.inodes() {
            *self.refs.entry(ino).or_default() += 1;
        }
        self.pending.apply(Record::Op(op));
        Ok(id)
    }

    /// The operation `id` failed; returns the inodes no pending operation names any more.
    pub fn cancel(&mut self, id: u64) -> io::Result<Vec<u64>> {
        self.finish(Record::Cancel(id))
    }

    /// The directory `dir` was fsynced; returns the inodes no pending operation names any more.
    pub fn synced(&mut self, dir: u64) -> io::Result<Vec<u64>> {
        if !self
            .pending
            .ops()
            .iter()
            .any(|op| op.unsynced.contains(&dir))
        {
            return Ok(Vec::new());
        }
        self.finish(Record::Synced(dir))
    }

    fn finish(&mut self, record: Record) -> io::Result<Vec<u64>> {
        self.append(&record)?;
        let mut free = Vec::new();
        for op in self.pending.apply(record) {
            for ino in op.inodes() {
                if let Some(count) = self.refs.get_mut(&ino) {
                    *count -= 1;
                    if *count == 0 {
                        self.refs.remove(&ino);
                        free.push(ino);
                    }
                }
            }
        }
        self.compact()?;
        Ok(free)
    }

    fn append(&mut self, record: &Record) -> io::Result<()> {
        let bytes = dirlog::encode(record);
        self.log.write_all_at(&bytes, self.len)?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Empties the log when nothing is pending, or rewrites a long one with what is.
    fn compact(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            self.log.set_len(0)?;
            self.len = 0;
        } else if self.len > COMPACT_AT {
            let bytes: Vec<u8> = self
                .pending
                .ops()
                .iter()
                .flat_map(|op| dirlog::encode(&Record::Op(op.clone())))
                .collect();
            let tmp = self.layout.dirops_tmp();
            std::fs::write(&tmp, &bytes)?;
            std::fs::rename(&tmp, self.layout.dirops())?;
            self.log = OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.layout.dirops())?;
            self.len = bytes.len() as u64;
        }
        Ok(())
    }

    /// Keeps the file (or symlink) `name` of `parent`, inode `ino`, alive in the trash.
    pub fn keep_file(&self, parent: BorrowedFd<'_>, name: &[u8], ino: u64) -> io::Result<()> {
        let target = ino.to_string();
        match nix::unistd::linkat(
            parent,
            name,
            self.trash.as_fd(),
            target.as_str(),
            AtFlags::empty(),
        ) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Moves the directory `name` of `parent`, inode `ino`, into the trash (instead of rmdir).
    pub fn keep_dir(&self, parent: BorrowedFd<'_>, name: &[u8], ino: u64) -> io::Result<()> {
        let target = ino.to_string();
        nix::fcntl::renameat(parent, name, self.trash.as_fd(), target.as_str())?;
        Ok(())
    }

    /// The trash lets go of `ino`; returns whether that was the file's last name, so its data
    /// journal can go too.
    pub fn collect(&self, ino: u64) -> io::Result<bool> {
        let name = ino.to_string();
        let stat = match nix::sys::stat::fstatat(
            self.trash.as_fd(),
            name.as_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => stat,
            Err(nix::errno::Errno::ENOENT) => return Ok(false),
            Err(err) => return Err(err.into()),
        };
        if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            std::fs::remove_dir_all(self.layout.trash().join(&name))?;
            return Ok(false);
        }
        nix::unistd::unlinkat(
            self.trash.as_fd(),
            name.as_str(),
            UnlinkatFlags::NoRemoveDir,
        )?;
        Ok(stat.st_nlink == 1)
    }
}
