//! The `raftq` command: `raftq serve` runs a node; the other subcommands are the client. A
//! library with one entry point, [`run`], so that the root test crate can build the same command
//! as a binary of its own.

mod backup;
mod certs;
mod client;
mod listener;
mod serve;
mod tls;
mod watch;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc's allocator: a request allocates and frees many small buffers
/// (HTTP/2 frames, protobuf messages, log entries), and glibc's malloc was a large share of a
/// loaded node's CPU in `perf record` profiles of `raftq serve`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What `raftq --version` prints: the package's version and the stored formats this build
/// writes (`scripts/make-fixture` records them beside a fixture).
static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let formats = raftq_store::formats::encode(&raftq_store::formats::current());
    format!("{} (formats {formats})", env!("CARGO_PKG_VERSION"))
});

#[derive(Debug, Parser)]
#[command(
    name = "raftq",
    version = VERSION.as_str(),
    about = "A highly available message queue on Raft"
)]
struct Cli {
    #[command(flatten)]
    connection: client::Connection,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run a node (REST and gRPC on --listen).
    Serve(Box<serve::ServeArgs>),
    /// Make a development CA and node certificates (TLS and mutual TLS between peers).
    Certs(certs::CertsArgs),
    /// Write a backup of the cluster's whole state to a file (admin keys).
    Backup(backup::BackupArgs),
    /// Make the first node of a new cluster from a backup, in an empty data directory (the
    /// node is then started with `raftq serve` on that directory).
    Restore(backup::RestoreArgs),
    /// Boxed: the client's commands carry every queue setting.
    #[command(flatten)]
    Client(Box<client::ClientCmd>),
}

/// Runs the command with the process's arguments and returns its exit code.
#[tokio::main]
pub async fn run() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Serve(args) => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    EnvFilter::try_from_env("RAFTQ_LOG")
                        .unwrap_or_else(|_| EnvFilter::new("info,openraft=warn")),
                )
                // Colours only for a terminal: a log file or a pipe gets plain text.
                .with_ansi(std::io::stdout().is_terminal())
                .init();
            match serve::run(*args).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "raftq stopped");
                    // The log may go to a file or nowhere: the reason is on stderr as well.
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Certs(args) => reported(certs::run(&args).map(|()| None), false),
        Cmd::Client(cmd) => reported(
            client::run(&cli.connection, *cmd).await.map(|()| None),
            false,
        ),
        Cmd::Backup(args) => reported(
            backup::run_backup(&cli.connection, &args).await.map(Some),
            cli.connection.json,
        ),
        Cmd::Restore(args) => reported(
            backup::run_restore(&args).await.map(Some),
            cli.connection.json,
        ),
    }
}

/// Prints what a command answered (its JSON, as `--json` says) or its error, and the exit code
/// that goes with it.
fn reported(
    outcome: Result<Option<serde_json::Value>, impl std::fmt::Display>,
    json: bool,
) -> ExitCode {
    match outcome {
        Ok(answer) => {
            if let Some(answer) = answer {
                client::print(&answer, json);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
