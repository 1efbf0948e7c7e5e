//! `raftq-powerfs`: the commands of the power-loss file system (docs/powerfs.md).
//!
//! - `mount`: as a container's first process, revert or discard the journal, mount the
//!   backing directory's `data/` at the mount point and run the command after `--` on it.
//! - `arm`: the next `mount` reverts unsynced changes with the seed (a power loss).
//! - `revert`: revert now, offline, with a seed.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use raftq_powerfs::layout::Layout;
use raftq_powerfs::supervise::{self, Supervise};
use raftq_powerfs::Error;

#[derive(Debug, Parser)]
#[command(
    name = "raftq-powerfs",
    about = "A FUSE file system that can lose unsynced writes"
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Debug, Subcommand)]
enum Commands {
    /// Mounts the file system and runs a command on it (or serves until SIGTERM).
    Mount {
        /// The backing directory (the data is in its `data/`, the journal in `.powerfs/`).
        #[arg(long, env = "RAFTQ_POWERFS_BACKING")]
        backing: PathBuf,
        /// Where to mount it.
        #[arg(long, env = "RAFTQ_POWERFS_MOUNTPOINT")]
        mountpoint: PathBuf,
        /// Threads serving requests.
        #[arg(long, default_value_t = 4)]
        threads: usize,
        /// Whether an fsync also syncs the backing file, so that it costs what it costs without
        /// the layer (the crash model needs only the journal).
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        sync_backing: bool,
        /// UID:GID to run the command as and to own `data/`.
        #[arg(long, value_parser = parse_user)]
        user: Option<(u32, u32)>,
        /// The command and its arguments.
        #[arg(last = true)]
        command: Vec<OsString>,
    },
    /// Arms a power loss: the next `mount` first reverts unsynced changes with this seed.
    Arm {
        #[arg(long, env = "RAFTQ_POWERFS_BACKING")]
        backing: PathBuf,
        #[arg(long)]
        seed: u64,
    },
    /// Reverts unsynced changes now (nothing may have the backing directory mounted).
    Revert {
        #[arg(long, env = "RAFTQ_POWERFS_BACKING")]
        backing: PathBuf,
        #[arg(long)]
        seed: u64,
    },
}

fn parse_user(text: &str) -> Result<(u32, u32), String> {
    let (uid, gid) = text.split_once(':').ok_or("expected UID:GID")?;
    let number = |s: &str| s.parse::<u32>().map_err(|e| format!("{s:?}: {e}"));
    Ok((number(uid)?, number(gid)?))
}

fn main() -> ExitCode {
    // Before any thread starts, so that every thread has the handled signals blocked.
    if let Err(err) = supervise::block_signals() {
        eprintln!("raftq-powerfs: {err}");
        return ExitCode::FAILURE;
    }
    let filter = std::env::var("RAFTQ_POWERFS_LOG").unwrap_or_else(|_| "info".to_string());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    match run(Cli::parse().command) {
        Ok(status) => ExitCode::from(u8::try_from(status).unwrap_or(1)),
        Err(err) => {
            tracing::error!("{err}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Commands) -> Result<i32, Error> {
    match command {
        Commands::Mount {
            backing,
            mountpoint,
            threads,
            sync_backing,
            user,
            command,
        } => supervise::run(&Supervise {
            layout: Layout::new(backing),
            mountpoint,
            fs: raftq_powerfs::fs::Options {
                threads,
                sync_backing,
            },
            user,
            command,
        }),
        Commands::Arm { backing, seed } => {
            Layout::new(backing).arm(seed)?;
            Ok(0)
        }
        Commands::Revert { backing, seed } => {
            let report = raftq_powerfs::revert::revert(&Layout::new(backing), seed)?;
            tracing::info!(seed, ?report, "unsynced changes reverted");
            Ok(0)
        }
    }
}
