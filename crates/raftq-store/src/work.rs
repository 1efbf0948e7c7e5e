//! Where the log store's slow work runs: the fsyncs of the appends the Raft core does not wait
//! for, the spare segment made ahead of need, and the synced writes of votes, truncations and
//! purges.
//!
//! A server runs them on threads of their own ([`Work::Threads`]) so that no fsync stalls a
//! runtime worker. A simulation runs them as tasks of the current tokio runtime
//! ([`Work::Tasks`]): every step then happens at a moment that runtime decides, so a paused,
//! seeded runtime replays a run exactly, and a crash between an append and its fsync is a
//! moment a simulation can reach.

use std::io;
use std::time::Duration;

/// Where the log store's slow work runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Work {
    /// A sync thread, a thread that makes the spare segment, and tokio's blocking pool.
    #[default]
    Threads,
    /// A sync task on the tokio runtime that opens the store, each of whose fsyncs takes
    /// `fsync` of that runtime's time (a simulated disk's speed); the spare made in place by
    /// the roll that takes the one before; the synced writes inline, on the task that asks. A
    /// caller that waits for an append's callback must then let the runtime run meanwhile.
    Tasks { fsync: Duration },
}

impl Work {
    /// Runs `work`: on tokio's blocking pool, or here.
    pub(crate) async fn blocking<T: Send + 'static>(
        self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<T> {
        match self {
            Work::Threads => tokio::task::spawn_blocking(work)
                .await
                .map_err(io::Error::other),
            Work::Tasks { .. } => Ok(work()),
        }
    }

    /// Runs `work` without waiting for it: on tokio's blocking pool, or here and now.
    pub(crate) fn detached(self, work: impl FnOnce() + Send + 'static) {
        match self {
            Work::Threads => drop(tokio::task::spawn_blocking(work)),
            Work::Tasks { .. } => work(),
        }
    }
}
