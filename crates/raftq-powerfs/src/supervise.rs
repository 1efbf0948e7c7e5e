//! The daemon as a container's first process: it reverts (when a power loss was armed) or
//! discards the journal, mounts the file system, runs the node on it as an unprivileged user,
//! and unmounts when the node has exited.
//!
//! Signals: every signal it handles is blocked in all its threads and taken with `sigwait`;
//! `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`, `SIGUSR1` and `SIGUSR2` are passed on to the node
//! (so `docker stop` stops the node gracefully), `SIGCHLD` reaps children (as a first process
//! must; orphans too). When the node exits, the file system is unmounted (lazily when
//! something still holds it) and the daemon exits with the node's status (128 + the signal
//! when a signal ended it). `SIGKILL` (`docker kill`) ends every process of the container at
//! once: the FUSE connection closes with the daemon, the mount goes with the container's mount
//! namespace, and every write the daemon had answered is in the backing files, as after a
//! process crash with the page cache kept.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus};
use nix::unistd::{Gid, Pid, Uid};

use crate::error::{Context, Error};
use crate::layout::Layout;

/// What to mount and run.
#[derive(Debug, Clone)]
pub struct Supervise {
    /// The backing directory.
    pub layout: Layout,
    /// Where to mount `data/`.
    pub mountpoint: PathBuf,
    /// How to serve the file system.
    pub fs: crate::fs::Options,
    /// The user and group to run the command as (and to own `data/`).
    pub user: Option<(u32, u32)>,
    /// The command to run on the mounted file system; none: serve until a stop signal.
    pub command: Vec<OsString>,
}

/// The signals the daemon takes with `sigwait`.
fn handled() -> SigSet {
    let mut set = SigSet::empty();
    for signal in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGCHLD,
    ] {
        set.add(signal);
    }
    set
}

/// Blocks the handled signals in this thread and every thread started after: call first.
pub fn block_signals() -> Result<(), Error> {
    handled().thread_block().map_err(|source| Error::Process {
        what: "blocking signals",
        source,
    })
}

/// Reverts the unsynced changes if a power loss was armed, else keeps everything.
pub fn prepare(layout: &Layout) -> Result<(), Error> {
    layout.prepare()?;
    match layout.armed()? {
        Some(seed) => {
            let report = crate::revert::revert(layout, seed)?;
            tracing::info!(seed, ?report, "power loss: unsynced changes reverted");
            layout.disarm()
        }
        None => {
            tracing::info!("no power loss: everything written is kept");
            layout.discard()
        }
    }
}

/// Prepares, mounts, runs the command until it exits (or serves until a stop signal), and
/// unmounts; returns the exit status to leave with. Call [`block_signals`] first.
pub fn run(options: &Supervise) -> Result<i32, Error> {
    prepare(&options.layout)?;
    if let Some((uid, gid)) = options.user {
        let data = options.layout.data();
        nix::unistd::chown(&data, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
            .at("giving to the node's user", &data)?;
    }
    raise_file_limit();
    let session = crate::fs::mount(&options.layout, &options.mountpoint, options.fs)?;
    tracing::info!(mountpoint = %options.mountpoint.display(), "mounted");
    let status = if options.command.is_empty() {
        wait_for_stop()
    } else {
        run_command(options)
    };
    unmount(session, options);
    status
}

/// Lifts the soft limit of open files to the hard one: every inode the kernel knows and every
/// file changed since its last fsync holds a descriptor.
fn raise_file_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((_, hard)) => {
            if let Err(err) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!(%err, "cannot raise the open-file limit");
            }
        }
        Err(err) => tracing::warn!(%err, "cannot read the open-file limit"),
    }
}

/// The next of the `set` of signals this process handles (they are blocked, and taken here).
fn next_signal(set: &SigSet) -> Result<Signal, Error> {
    set.wait().map_err(|source| Error::Process {
        what: "waiting for a signal",
        source,
    })
}

fn wait_for_stop() -> Result<i32, Error> {
    let set = handled();
    loop {
        let signal = next_signal(&set)?;
        if signal == Signal::SIGCHLD {
            reap(None);
        } else {
            tracing::info!(?signal, "stopping");
            return Ok(0);
        }
    }
}

fn run_command(options: &Supervise) -> Result<i32, Error> {
    let program = &options.command[0];
    let mut command = Command::new(program);
    command.args(&options.command[1..]);
    if let Some((uid, gid)) = options.user {
        command.uid(uid).gid(gid);
    }
    // SAFETY: between fork and exec only async-signal-safe calls: the signal mask and prctl.
    unsafe {
        command.pre_exec(|| {
            nix::sys::signal::pthread_sigmask(
                SigmaskHow::SIG_SETMASK,
                Some(&SigSet::empty()),
                None,
            )?;
            // Outside a container (tests), the command must not outlive the file system.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().map_err(|source| Error::Spawn {
        command: program.to_string_lossy().into_owned(),
        source,
    })?;
    let pid = Pid::from_raw(child.id() as i32);
    tracing::info!(pid = child.id(), "started the command");
    let set = handled();
    loop {
        let signal = next_signal(&set)?;
        if signal != Signal::SIGCHLD {
            tracing::info!(?signal, "passing a signal on");
            if let Err(err) = nix::sys::signal::kill(pid, signal) {
                tracing::warn!(%err, "cannot pass the signal on");
            }
        } else if let Some(status) = reap(Some(pid)) {
            tracing::info!(status, "the command exited");
            return Ok(status);
        }
    }
}

/// Reaps every child that ended; returns the exit status of `main` if it was one of them.
fn reap(main: Option<Pid>) -> Option<i32> {
    let mut status = None;
    loop {
        match nix::sys::wait::waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if Some(pid) == main => status = Some(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if Some(pid) == main => {
                status = Some(128 + signal as i32);
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return status,
            Ok(_) => {}
        }
    }
}

fn unmount(session: fuser::BackgroundSession, options: &Supervise) {
    if let Err(err) = crate::fs::unmount(session, &options.mountpoint) {
        tracing::warn!(%err, "unmount failed; detaching the mount");
        if let Err(err) = nix::mount::umount2(&options.mountpoint, nix::mount::MntFlags::MNT_DETACH)
        {
            tracing::warn!(%err, "cannot detach the mount");
        }
    }
}
