//! The power loss itself, done offline (nothing mounted): the seeded plan ([`crate::plan`])
//! applied to the backing directory, then the journal dropped.
//!
//! Files first: each journaled inode, wherever it now is (in `data/` or kept in the trash),
//! gets the lost sectors' old contents back and its planned length. Then names: every entry a
//! pending operation changed is bound as the plan says, by detaching what is there (files
//! unlinked, directories moved into the trash) and then attaching the planned inode (files
//! hard-linked from the trash, directories moved from wherever they are). Directories are
//! held by descriptors throughout, so moving one never loses another. A revert killed half-way
//! can run again: the plan depends only on the journal and the seed, and each step only
//! changes what differs from it.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirEntryExt, FileExt};
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::UnlinkatFlags;

use crate::dirlog::{self, Binding, Kind, Pending};
use crate::error::{Context, Error};
use crate::inodes::binding_of;
use crate::journal::{self, FileJournal};
use crate::layout::Layout;
use crate::plan::{plan_dirs, plan_file, Choose, DirPlan, Seeded};

/// What a revert did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Files with unsynced changes.
    pub files: usize,
    /// Their unsynced sectors.
    pub sectors: usize,
    /// How many of those were lost.
    pub sectors_lost: usize,
    /// Files whose length changed.
    pub lengths_changed: usize,
    /// Directory operations pending.
    pub operations: usize,
    /// How many of those were lost.
    pub operations_lost: usize,
    /// Steps that could not be done (logged each).
    pub failures: usize,
}

/// Rolls back a seeded choice of the unsynced changes in `layout`, then drops the journal.
pub fn revert(layout: &Layout, seed: u64) -> Result<Report, Error> {
    let mut choose = Seeded::new(seed);
    let mut report = Report::default();
    let mut tree = Tree::walk(layout)?;
    for (ino, journal) in read_file_journals(layout)? {
        revert_file(&tree, ino, &journal, &mut choose, &mut report);
    }
    let pending = read_pending(layout)?;
    let plan = plan_dirs(pending.ops(), &mut choose);
    for ((dir, name), binding) in &plan.bindings {
        let name = String::from_utf8_lossy(name);
        tracing::debug!(dir, %name, ?binding, "a name after the power loss");
    }
    report.operations = plan.kept + plan.lost;
    report.operations_lost = plan.lost;
    report.failures += tree.apply(&plan);
    layout.discard()?;
    Ok(report)
}

/// The journals of `layout`'s files, by backing inode number.
fn read_file_journals(layout: &Layout) -> Result<BTreeMap<u64, FileJournal>, Error> {
    let dir = layout.files();
    let mut journals = BTreeMap::new();
    let listing = match std::fs::read_dir(&dir) {
        Ok(listing) => listing,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(journals),
        Err(err) => return Err(err).at("listing", &dir),
    };
    for item in listing {
        let item = item.at("listing", &dir)?;
        let Some(ino) = item.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let path = item.path();
        let bytes = std::fs::read(&path).at("reading", &path)?;
        match journal::decode(&bytes) {
            Ok(Some(journal)) => {
                journals.insert(ino, journal);
            }
            Ok(None) => {}
            Err(reason) => return Err(Error::Journal { path, reason }),
        }
    }
    Ok(journals)
}

/// The directory operations `layout`'s log leaves pending.
fn read_pending(layout: &Layout) -> Result<Pending, Error> {
    let path = layout.dirops();
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Pending::from_records(dirlog::decode(&bytes))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Pending::default()),
        Err(err) => Err(err).at("reading", &path),
    }
}

/// Reverts one file's lost sectors and length.
fn revert_file(
    tree: &Tree,
    ino: u64,
    journal: &FileJournal,
    choose: &mut impl Choose,
    report: &mut Report,
) {
    let Some(file) = tree.open_file(ino) else {
        tracing::debug!(ino, "a journaled file is gone");
        return;
    };
    let result = file.metadata().and_then(|meta| {
        let plan = plan_file(journal, meta.len(), choose);
        tracing::debug!(
            ino,
            name = ?tree.places.get(&ino).map(|(_, name)| name),
            synced = journal.synced_size,
            current = meta.len(),
            length = plan.size,
            unsynced = plan.unsynced,
            lost = plan.lost,
            "reverting a file"
        );
        for (at, bytes) in &plan.writes {
            file.write_all_at(bytes, *at)?;
        }
        file.set_len(plan.size)?;
        report.files += 1;
        report.sectors += plan.unsynced;
        report.sectors_lost += plan.lost;
        report.lengths_changed += usize::from(plan.size != meta.len());
        Ok(())
    });
    if let Err(err) = result {
        tracing::warn!(ino, %err, "cannot revert a file");
        report.failures += 1;
    }
}

/// The backing directory's inodes: a descriptor for every directory and one name for every
/// inode, found by walking `data/` and the trash.
struct Tree {
    dirs: HashMap<u64, OwnedFd>,
    places: HashMap<u64, (u64, OsString)>,
    trash: u64,
}

fn open_dir_at(parent: impl AsFd, name: &std::ffi::OsStr) -> nix::Result<OwnedFd> {
    nix::fcntl::openat(
        parent,
        name,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

impl Tree {
    fn walk(layout: &Layout) -> Result<Tree, Error> {
        let mut tree = Tree {
            dirs: HashMap::new(),
            places: HashMap::new(),
            trash: 0,
        };
        // The trash first, so that a file kept there is found there: that name stays put.
        let trash = tree.add_root(&layout.trash())?;
        tree.trash = trash;
        tree.add_root(&layout.data())?;
        Ok(tree)
    }

    fn add_root(&mut self, path: &Path) -> Result<u64, Error> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .at("opening", path)?;
        let ino = nix::sys::stat::fstat(fd.as_fd())
            .at("reading", path)?
            .st_ino;
        self.dirs.insert(ino, fd);
        let mut stack = vec![ino];
        while let Some(dir) = stack.pop() {
            let listing = self.list(dir).at("listing a directory under", path)?;
            for (name, child, is_dir) in listing {
                self.places.entry(child).or_insert((dir, name.clone()));
                if is_dir && !self.dirs.contains_key(&child) {
                    let fd = open_dir_at(self.dirs[&dir].as_fd(), &name).at("opening", path)?;
                    self.dirs.insert(child, fd);
                    stack.push(child);
                }
            }
        }
        Ok(ino)
    }

    /// The entries of directory `dir`: name, inode number, whether it is a directory.
    fn list(&self, dir: u64) -> io::Result<Vec<(OsString, u64, bool)>> {
        let fd = self
            .dirs
            .get(&dir)
            .ok_or_else(|| io::Error::other("unknown directory"))?;
        let mut out = Vec::new();
        for item in std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))? {
            let item = item?;
            out.push((item.file_name(), item.ino(), item.file_type()?.is_dir()));
        }
        Ok(out)
    }

    /// The regular file `ino`, opened for writing, if it is still somewhere.
    fn open_file(&self, ino: u64) -> Option<File> {
        let (dir, name) = self.places.get(&ino)?;
        let fd = nix::fcntl::openat(
            self.dirs.get(dir)?.as_fd(),
            name.as_os_str(),
            OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let file = File::from(fd);
        file.metadata().ok()?.is_file().then_some(file)
    }

    /// What `name` in directory `dir` is bound to now.
    fn bound(&self, dir: u64, name: &[u8]) -> io::Result<Option<Binding>> {
        let fd = self
            .dirs
            .get(&dir)
            .ok_or_else(|| io::Error::other("unknown directory"))?;
        match nix::sys::stat::fstatat(fd.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(binding_of(&stat))),
            Err(nix::errno::Errno::ENOENT) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Binds every entry as `plan` says; returns how many steps failed (each is logged).
    fn apply(&mut self, plan: &DirPlan) -> usize {
        let mut failures = 0;
        let mut count = |what: &str, key: &(u64, Vec<u8>), result: io::Result<()>| {
            if let Err(err) = result {
                let name = String::from_utf8_lossy(&key.1);
                tracing::warn!(dir = key.0, %name, %err, "cannot {what}");
                failures += 1;
            }
        };
        for binding in plan.bindings.values().flatten() {
            if binding.kind != Kind::Dir {
                let key = (binding.ino, Vec::new());
                count("keep a file to restore", &key, self.keep(binding.ino));
            }
        }
        for (key, want) in &plan.bindings {
            count("detach", key, self.detach(key, *want));
        }
        for (key, want) in &plan.bindings {
            if let Some(want) = want {
                count("attach", key, self.attach(key, *want));
            }
        }
        failures
    }

    /// Makes sure the file `ino` has a name in the trash to link it back from.
    fn keep(&mut self, ino: u64) -> io::Result<()> {
        let name = OsString::from(ino.to_string());
        if self
            .places
            .get(&ino)
            .is_some_and(|(dir, n)| *dir == self.trash && *n == name)
        {
            return Ok(());
        }
        let (dir, from) = self
            .places
            .get(&ino)
            .ok_or_else(|| io::Error::other("lost inode"))?;
        let fds = (&self.dirs[dir], &self.dirs[&self.trash]);
        match nix::unistd::linkat(
            fds.0.as_fd(),
            from.as_os_str(),
            fds.1.as_fd(),
            name.as_os_str(),
            AtFlags::empty(),
        ) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(err) => return Err(err.into()),
        }
        self.places.insert(ino, (self.trash, name));
        Ok(())
    }

    /// Unbinds the entry `key` unless it already holds `want`.
    fn detach(&mut self, key: &(u64, Vec<u8>), want: Option<Binding>) -> io::Result<()> {
        let Some(current) = self.bound(key.0, &key.1)? else {
            return Ok(());
        };
        if want.is_some_and(|w| w.ino == current.ino) {
            return Ok(());
        }
        let dir = self.dirs[&key.0].as_fd();
        if current.kind == Kind::Dir {
            let name = OsString::from(format!("{}.reverted", current.ino));
            nix::fcntl::renameat(
                dir,
                key.1.as_slice(),
                self.dirs[&self.trash].as_fd(),
                name.as_os_str(),
            )?;
            self.places.insert(current.ino, (self.trash, name));
        } else {
            nix::unistd::unlinkat(dir, key.1.as_slice(), UnlinkatFlags::NoRemoveDir)?;
        }
        Ok(())
    }

    /// Binds the entry `key`, now free, to `want`.
    fn attach(&mut self, key: &(u64, Vec<u8>), want: Binding) -> io::Result<()> {
        if let Some(current) = self.bound(key.0, &key.1)? {
            return if current.ino == want.ino {
                Ok(())
            } else {
                Err(io::Error::other("the name is taken"))
            };
        }
        let (from_dir, from) = self
            .places
            .get(&want.ino)
            .cloned()
            .ok_or_else(|| io::Error::other("the inode to restore is gone"))?;
        let (src, dst) = (self.dirs[&from_dir].as_fd(), self.dirs[&key.0].as_fd());
        if want.kind == Kind::Dir {
            nix::fcntl::renameat(src, from.as_os_str(), dst, key.1.as_slice())?;
            let name = std::ffi::OsStr::from_bytes(&key.1).to_os_string();
            self.places.insert(want.ino, (key.0, name));
        } else {
            nix::unistd::linkat(
                src,
                from.as_os_str(),
                dst,
                key.1.as_slice(),
                AtFlags::empty(),
            )?;
        }
        Ok(())
    }
}
