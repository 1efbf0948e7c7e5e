//! Where things live in the backing directory: `data/` is what the mount shows; `.powerfs/`
//! holds the undo journal (`files/<inode>` per file, `dirops` for directory operations), the
//! trash that keeps unlinked and replaced inodes alive until no pending operation names them,
//! and the power-loss marker.
//!
//! The journal lives on the same file system as `data/` (hard links into the trash need that)
//! and is never fsynced: it only has to survive a process kill, as the page cache does.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Context, Error};

/// The paths of one backing directory.
#[derive(Debug, Clone)]
pub struct Layout {
    backing: PathBuf,
}

impl Layout {
    /// The layout of the backing directory `backing`.
    pub fn new(backing: impl Into<PathBuf>) -> Self {
        Layout {
            backing: backing.into(),
        }
    }

    /// The directory the mount shows.
    pub fn data(&self) -> PathBuf {
        self.backing.join("data")
    }

    /// The journal's directory.
    pub fn state(&self) -> PathBuf {
        self.backing.join(".powerfs")
    }

    /// The per-file journals, named by backing inode number.
    pub fn files(&self) -> PathBuf {
        self.state().join("files")
    }

    /// The journal of one file.
    pub fn file_journal(&self, ino: u64) -> PathBuf {
        self.files().join(ino.to_string())
    }

    /// The log of directory operations.
    pub fn dirops(&self) -> PathBuf {
        self.state().join("dirops")
    }

    /// Where the directory-operation log is rewritten before it replaces the log.
    pub fn dirops_tmp(&self) -> PathBuf {
        self.state().join("dirops.tmp")
    }

    /// The inodes pending operations may need again, named by inode number.
    pub fn trash(&self) -> PathBuf {
        self.state().join("trash")
    }

    /// Present (holding a seed) when the next start is to revert unsynced changes.
    pub fn marker(&self) -> PathBuf {
        self.state().join("power-loss")
    }

    /// Makes `data/` and `.powerfs/` when missing.
    pub fn prepare(&self) -> Result<(), Error> {
        for dir in [self.data(), self.state(), self.files(), self.trash()] {
            fs::create_dir_all(&dir).at("creating", &dir)?;
        }
        Ok(())
    }

    /// Forgets every unsynced change: what was written stays, as after a process crash whose
    /// page cache the kernel kept.
    pub fn discard(&self) -> Result<(), Error> {
        for dir in [self.files(), self.trash()] {
            remove_dir_all_if_present(&dir)?;
            fs::create_dir_all(&dir).at("creating", &dir)?;
        }
        for file in [self.dirops(), self.dirops_tmp()] {
            remove_file_if_present(&file)?;
        }
        Ok(())
    }

    /// Arms a power loss: the next start reverts unsynced changes with `seed`.
    pub fn arm(&self, seed: u64) -> Result<(), Error> {
        self.prepare()?;
        let tmp = self.state().join("power-loss.tmp");
        fs::write(&tmp, format!("{seed}\n")).at("writing", &tmp)?;
        let marker = self.marker();
        fs::rename(&tmp, &marker).at("renaming to", &marker)
    }

    /// The seed of an armed power loss, if one is armed.
    pub fn armed(&self) -> Result<Option<u64>, Error> {
        let marker = self.marker();
        let text = match fs::read_to_string(&marker) {
            Ok(text) => text,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err).at("reading", &marker),
        };
        match text.trim().parse() {
            Ok(seed) => Ok(Some(seed)),
            Err(_) => Err(Error::Marker { path: marker, text }),
        }
    }

    /// Removes the power-loss marker (after the revert it asked for is done).
    pub fn disarm(&self) -> Result<(), Error> {
        remove_file_if_present(&self.marker())
    }
}

fn remove_file_if_present(path: &Path) -> Result<(), Error> {
    match fs::remove_file(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err).at("removing", path),
        _ => Ok(()),
    }
}

fn remove_dir_all_if_present(path: &Path) -> Result<(), Error> {
    match fs::remove_dir_all(path) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err).at("removing", path),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_power_loss_is_armed_read_and_disarmed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        layout.prepare().expect("prepare");
        assert_eq!(layout.armed().expect("armed"), None);
        layout.arm(42).expect("arm");
        assert_eq!(layout.armed().expect("armed"), Some(42));
        layout.disarm().expect("disarm");
        assert_eq!(layout.armed().expect("armed"), None);
    }

    #[test]
    fn discarding_empties_the_journal_and_keeps_the_data() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path());
        layout.prepare().expect("prepare");
        fs::write(layout.data().join("kept"), b"x").expect("write data");
        fs::write(layout.file_journal(7), b"journal").expect("write journal");
        fs::write(layout.trash().join("7"), b"t").expect("write trash");
        fs::write(layout.dirops(), b"ops").expect("write dirops");
        layout.discard().expect("discard");
        assert!(layout.data().join("kept").exists());
        assert!(!layout.file_journal(7).exists());
        assert!(!layout.trash().join("7").exists());
        assert!(layout.trash().is_dir());
        assert!(!layout.dirops().exists());
    }
}
