//! raftq-powerfs: a pass-through FUSE file system that can forget what was never fsynced, so
//! that the chaos test can cut a node's power (docs/powerfs.md).
//!
//! The daemon ([`fs`]) serves a backing directory's `data/` at a mount point and writes
//! through to it at once, so a process kill keeps every write, as the page cache does. Beside
//! `data/`, in `.powerfs/`, it keeps an undo journal ([`tracker`]): the contents each file had
//! at its last fsync (per 512-byte sector, as each sector is first overwritten), and the
//! directory operations no directory fsync has covered yet, with the files they unlinked or
//! replaced kept alive in a trash directory. Offline, [`revert`] rolls a seeded choice of those
//! unsynced changes back ([`plan`] makes the choice), which is what a power loss may leave; a
//! start without a power loss ([`layout::Layout::discard`]) drops the journal and keeps
//! everything. [`supervise`] runs the daemon as a container's first process around the node.

pub mod dirlog;
pub mod error;
pub mod fs;
pub mod inodes;
pub mod journal;
pub mod layout;
pub mod plan;
pub mod revert;
pub mod supervise;
pub mod tracker;

pub use error::Error;
