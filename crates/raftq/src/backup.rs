//! `raftq backup --to FILE`: the cluster's state, streamed from any node into a file (admin
//! keys); `raftq restore --from FILE`: a new cluster's first node made from one, in an empty data
//! directory, offline (see `raftq_store::backup`).

use std::fs::File;
use std::io::{BufWriter, IsTerminal};
use std::path::PathBuf;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use raftq_client::{Client, ClientError};
use raftq_store::backup::{self, RestoreTarget};
use serde_json::{json, Value};

use crate::client::{options, Connection};

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The file to write; it must not exist yet.
    #[arg(long)]
    to: PathBuf,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file (`raftq backup --to FILE`).
    #[arg(long)]
    from: PathBuf,
    /// The new node's data directory; it must hold no node's state.
    #[arg(long, env = "RAFTQ_DATA_DIR")]
    data_dir: PathBuf,
    /// The new node's id.
    #[arg(long, env = "RAFTQ_NODE_ID", default_value_t = 1)]
    node_id: u64,
    /// The new node's peer address, HOST:PORT: the `--raft-listen` it will be started with.
    #[arg(long)]
    raft_addr: String,
}

/// Why a backup or a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("--to {0}: {1}")]
    Create(PathBuf, std::io::Error),
    #[error("--from {0}: {1}")]
    Open(PathBuf, std::io::Error),
    #[error("{0}")]
    Restore(#[from] backup::RestoreError),
    #[error("--from: {0}")]
    Read(#[from] backup::BackupError),
}

/// Streams a backup into `args.to`, with a running count of the bytes on a terminal; the file
/// is synced before this reports success, and removed when the backup did not finish.
pub async fn run_backup(conn: &Connection, args: &BackupArgs) -> Result<Value, BackupError> {
    let client = Client::connect(
        &conn.endpoint,
        options(conn, raftq_client::DEFAULT_TIMEOUT)?,
    )?;
    let file = File::options()
        .write(true)
        .create_new(true)
        .open(&args.to)
        .map_err(|e| BackupError::Create(args.to.clone(), e))?;
    let progress = if std::io::stderr().is_terminal() {
        ProgressBar::new_spinner()
    } else {
        ProgressBar::hidden()
    };
    progress.set_style(
        ProgressStyle::with_template("{spinner} {binary_bytes} written ({binary_bytes_per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let fetched = fetch(&client, file, &progress).await;
    progress.finish_and_clear();
    let bytes = fetched.inspect_err(|_| {
        let _ = std::fs::remove_file(&args.to);
    })?;
    Ok(json!({ "file": args.to.display().to_string(), "bytes": bytes }))
}

/// Streams the backup into `file` and syncs it; returns its size.
async fn fetch(client: &Client, file: File, progress: &ProgressBar) -> Result<u64, BackupError> {
    let mut out = BufWriter::new(file);
    let bytes = client
        .backup(&mut out, |bytes| progress.set_position(bytes))
        .await?;
    let file = out
        .into_inner()
        .map_err(|e| ClientError::Output(e.into_error()))?;
    file.sync_all().map_err(ClientError::Output)?;
    Ok(bytes)
}

/// Checks the backup in `args.from` whole, then restores it into `args.data_dir`.
pub async fn run_restore(args: &RestoreArgs) -> Result<Value, BackupError> {
    let file = File::open(&args.from).map_err(|e| BackupError::Open(args.from.clone(), e))?;
    let read = backup::read(file)?;
    let source = read.header.clone();
    let target = RestoreTarget {
        data_dir: args.data_dir.clone(),
        node_id: args.node_id,
        raft_addr: args.raft_addr.clone(),
    };
    let restored = backup::restore(read, &target).await?;
    let groups: Vec<Value> = restored
        .groups
        .iter()
        .map(|g| {
            json!({
                "group": g.group.0,
                "applied_index": g.applied_index,
                "rows": g.rows,
                "leases_ended": g.leases_ended,
                "backup_digest": g.backup_digest,
                "state_digest": g.state_digest,
            })
        })
        .collect();
    Ok(json!({
        "cluster_id": restored.cluster_id.to_string(),
        "node_id": args.node_id,
        "rows": restored.groups.iter().map(|g| g.rows).sum::<usize>(),
        "leases_ended": restored.groups.iter().map(|g| g.leases_ended).sum::<usize>(),
        "groups": groups,
        "source": {
            "cluster_id": source.cluster_id.map(|id| id.to_string()),
            "region": source.region,
            "taken_at_ms": source.taken_at_ms,
        },
    }))
}
