//! Reloading files while the server runs: a task that calls back when `SIGHUP` arrives or when
//! the content of a watched file changes (compared once a second by SHA-256, so that an edit in
//! place, a rename over the file and a Kubernetes secret swap are all seen, whatever the clock
//! of the file system).

use std::path::PathBuf;
use std::time::Duration;

use sha2::{Digest, Sha256};

/// How often the watched files are read.
const POLL: Duration = Duration::from_secs(1);

/// The SHA-256 of every file in `paths`, in order (`None` for one that cannot be read).
fn fingerprint(paths: &[PathBuf]) -> Vec<Option<[u8; 32]>> {
    paths
        .iter()
        .map(|path| {
            std::fs::read(path)
                .ok()
                .map(|bytes| Sha256::digest(bytes).into())
        })
        .collect()
}

/// Spawns a task that calls `reload` on `SIGHUP` and whenever the content of one of `paths`
/// changed since the last call (or since the start). The task runs as long as the runtime.
pub fn spawn(paths: Vec<PathBuf>, reload: impl Fn() + Send + 'static) {
    tokio::spawn(async move {
        let mut last = fingerprint(&paths);
        let mut hangup = hangups();
        let mut poll = tokio::time::interval(POLL);
        loop {
            tokio::select! {
                _ = poll.tick() => {}
                _ = next_hangup(&mut hangup) => {
                    tracing::info!("SIGHUP: reloading");
                    last = fingerprint(&paths);
                    reload();
                    continue;
                }
            }
            let now = fingerprint(&paths);
            if now != last {
                last = now;
                reload();
            }
        }
    });
}

#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = ();

#[cfg(unix)]
fn hangups() -> Hangups {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(stream) => Some(stream),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP: files are reloaded when they change only");
            None
        }
    }
}

#[cfg(not(unix))]
fn hangups() -> Hangups {}

/// Resolves at the next `SIGHUP`; never where there is none.
#[cfg(unix)]
async fn next_hangup(hangups: &mut Hangups) {
    match hangups {
        Some(stream) => {
            if stream.recv().await.is_none() {
                std::future::pending::<()>().await
            }
        }
        None => std::future::pending::<()>().await,
    }
}

#[cfg(not(unix))]
async fn next_hangup(_: &mut Hangups) {
    std::future::pending::<()>().await
}
