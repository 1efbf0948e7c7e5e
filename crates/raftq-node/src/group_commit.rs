//! Group commit on the leader: commands proposed concurrently share one Raft entry, so one log
//! append (one fsync on each node) carries many requests. A few entries are in flight at once;
//! while they are, new commands queue up and leave together as the next entry.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, Fatal, RaftError};
use openraft::Raft;
use raftq_engine::Command;
use raftq_store::{Awaited, CommandGroup, Response, TypeConfig};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::task::JoinHandle;

use crate::clock::LeaderClock;
use crate::error::NodeError;
use crate::network::{encoded_len, APPEND_BYTES};

/// Most commands in one entry.
const MAX_GROUP: usize = 512;
/// Entries proposed and not yet applied, at most: fewer, larger entries cost less per command.
/// Three `raftq serve` processes on one machine carried more sends per second with 1 to 3 than
/// with 4 or 8, and with 3 about 15% more than with 2 at 16 sends in flight (docs/latency.md):
/// the leader writes its log while it replicates, so one entry can be applied, one written and
/// replicated, and the next one fill.
const IN_FLIGHT: usize = 3;
/// Encoded bytes of commands after which an entry takes no more: an entry must fit one
/// AppendEntries ([`APPEND_BYTES`]) with room for the command that crossed this line.
const ENTRY_BYTES: usize = APPEND_BYTES / 2;
/// Commands waiting for an entry, at most (senders wait beyond).
const QUEUE: usize = 8192;

type Reply = oneshot::Sender<Result<Response, NodeError>>;

/// The proposer: hands commands to the group-commit task.
#[derive(Debug, Clone)]
pub(crate) struct GroupCommit {
    tx: mpsc::Sender<(Command, Reply)>,
}

impl GroupCommit {
    /// Starts the group-commit task for `raft`, giving up on an entry not committed in `timeout`;
    /// every entry it proposes is counted in `awaited` until its answer is in.
    pub(crate) fn start(
        raft: Raft<TypeConfig>,
        timeout: Duration,
        awaited: Awaited,
        clock: Arc<LeaderClock>,
    ) -> (GroupCommit, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (
            GroupCommit { tx },
            tokio::spawn(run(raft, rx, timeout, awaited, clock)),
        )
    }

    /// Proposes one command and waits until its entry is applied (or fails).
    pub(crate) async fn propose(&self, command: Command) -> Result<Response, NodeError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((command, reply))
            .await
            .map_err(|_| NodeError::Unavailable("the node is shutting down".into()))?;
        // Once handed over the command may be in an entry: without an answer it may still commit.
        answer.await.map_err(|_| {
            NodeError::Timeout("the node stopped before the write was answered".into())
        })?
    }
}

async fn run(
    raft: Raft<TypeConfig>,
    mut rx: mpsc::Receiver<(Command, Reply)>,
    timeout: Duration,
    awaited: Awaited,
    clock: Arc<LeaderClock>,
) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        tracing::trace!(target: "raftq::stage", stage = "slot");
        let mut bytes = encoded_len(&first.0);
        let mut group = vec![first];
        while group.len() < MAX_GROUP && bytes < ENTRY_BYTES {
            match rx.try_recv() {
                Ok(next) => {
                    bytes = bytes.saturating_add(encoded_len(&next.0));
                    group.push(next);
                }
                Err(_) => break,
            }
        }
        let now = match clock.stamp() {
            Ok(now) => now,
            Err(refusal) => {
                for (_, reply) in group {
                    let _ = reply.send(Err(refusal.clone()));
                }
                continue;
            }
        };
        let raft = raft.clone();
        let waiting = awaited.wait();
        tokio::spawn(async move {
            write(&raft, group, now, timeout).await;
            drop((waiting, permit));
        });
    }
}

/// Proposes `group` as one entry stamped `now`, and answers each command.
async fn write(raft: &Raft<TypeConfig>, group: Vec<(Command, Reply)>, now: u64, timeout: Duration) {
    let (commands, replies): (Vec<Command>, Vec<Reply>) = group.into_iter().unzip();
    let entry = CommandGroup {
        now,
        commands: Arc::new(commands),
    };
    tracing::trace!(target: "raftq::stage", stage = "propose", commands = replies.len());
    let failure = match tokio::time::timeout(timeout, raft.client_write(entry)).await {
        Ok(Ok(written)) => {
            let mut answers = written.data.into_iter();
            for reply in replies {
                let answer = answers
                    .next()
                    .ok_or_else(|| NodeError::Storage("a command got no answer".into()));
                let _ = reply.send(answer);
            }
            return;
        }
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
            NodeError::NotLeader(f.leader_id)
        }
        Ok(Err(RaftError::APIError(e))) => NodeError::Unavailable(e.to_string()),
        // Raft stopped with the entry possibly proposed and replicated: it may still commit.
        Ok(Err(RaftError::Fatal(Fatal::Stopped))) => {
            NodeError::Timeout("the node stopped before the write was answered".into())
        }
        Ok(Err(RaftError::Fatal(e))) => NodeError::Storage(e.to_string()),
        Err(_) => NodeError::Timeout("not committed in time; it may still commit".into()),
    };
    for reply in replies {
        let _ = reply.send(Err(failure.clone()));
    }
}
