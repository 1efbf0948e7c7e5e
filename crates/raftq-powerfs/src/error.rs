//! The errors of the commands: what failed, on which path, and why.

use std::io;
use std::path::{Path, PathBuf};

/// What went wrong in setting up, reverting or running the file system.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The power-loss marker holds something that is not a seed.
    #[error("the power-loss marker {path} does not hold a seed: {text:?}")]
    Marker {
        /// The marker's path.
        path: PathBuf,
        /// What it holds.
        text: String,
    },
    /// A journal file does not parse (only its tail may be torn by a kill).
    #[error("the journal {path} is damaged: {reason}")]
    Journal {
        /// The journal's path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The FUSE mount failed.
    #[error("mounting the file system at {mountpoint}: {source}")]
    Mount {
        /// Where.
        mountpoint: PathBuf,
        /// The error fuser gave.
        #[source]
        source: io::Error,
    },
    /// The command to run on the file system could not be started.
    #[error("starting {command}: {source}")]
    Spawn {
        /// The program.
        command: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Signal handling or waiting for the command failed.
    #[error("{what}: {source}")]
    Process {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: nix::Error,
    },
}

/// Attaches what was done and on which path to an I/O error.
pub trait Context<T> {
    /// The error as an [`Error::Io`].
    fn at(self, what: &'static str, path: &Path) -> Result<T, Error>;
}

impl<T> Context<T> for io::Result<T> {
    fn at(self, what: &'static str, path: &Path) -> Result<T, Error> {
        self.map_err(|source| Error::Io {
            what,
            path: path.to_path_buf(),
            source,
        })
    }
}

impl<T> Context<T> for nix::Result<T> {
    fn at(self, what: &'static str, path: &Path) -> Result<T, Error> {
        self.map_err(|errno| Error::Io {
            what,
            path: path.to_path_buf(),
            source: io::Error::from(errno),
        })
    }
}
