//! Snapshots a leader streams to this node in chunks, written into a file and installed once the
//! last chunk came and the whole file checks out.
//!
//! Two things make this safer than writing chunks where a file's cursor happens to be:
//! - each chunk is handled in a task of its own, run to its end even when the call that brought
//!   it is cancelled (its deadline passed, the leader went away). A write cut short would leave
//!   the file's cursor past the offset recorded for the next chunk, and every later chunk out of
//!   place;
//! - every chunk is written at the offset it names, a chunk past the bytes received so far is
//!   refused, and the finished file is checked (row count and digest, see
//!   `raftq_store::snapshot`) before the state machine is given it. A file that does not check
//!   out is dropped and the leader told to start over from the first byte (openraft's sender
//!   answers a snapshot mismatch so), instead of failing the install, which stops Raft on this
//!   node for good.

use std::io::SeekFrom;
use std::sync::Arc;

use openraft::error::{InstallSnapshotError, RaftError, SnapshotMismatch};
use openraft::raft::{InstallSnapshotRequest, InstallSnapshotResponse};
use openraft::{Raft, Snapshot, SnapshotId, SnapshotSegmentId, StorageError, StorageIOError};
use raftq_store::{NodeId, SnapshotFile, TypeConfig, Work};
use tokio::io::{AsyncSeekExt, AsyncWriteExt};
use tokio::sync::Mutex;

/// What a chunk's handling answers the leader.
pub(crate) type Reply =
    Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>;

/// The snapshot being received, if any. Clones share it.
#[derive(Clone)]
pub(crate) struct SnapshotReceiver {
    incoming: Arc<Mutex<Option<Incoming>>>,
    /// Where a received file is checked.
    work: Work,
}

/// A snapshot part received.
struct Incoming {
    id: SnapshotId,
    file: Box<SnapshotFile>,
    /// Bytes received from the first on: the next chunk may start anywhere up to here.
    received: u64,
}

impl SnapshotReceiver {
    /// A receiver with no snapshot under way, checking what it receives as `work` says.
    pub(crate) fn new(work: Work) -> SnapshotReceiver {
        SnapshotReceiver {
            incoming: Arc::default(),
            work,
        }
    }

    /// Handles one chunk for `raft`, in a task of its own (see the module's documentation).
    pub(crate) async fn receive(
        &self,
        raft: &Raft<TypeConfig>,
        chunk: InstallSnapshotRequest<TypeConfig>,
    ) -> Reply {
        let (receiver, raft) = (self.clone(), raft.clone());
        let handled = tokio::spawn(async move { receiver.handle(&raft, chunk).await });
        handled.await.map_err(|e| not_written(None, &e))?
    }

    async fn handle(
        &self,
        raft: &Raft<TypeConfig>,
        chunk: InstallSnapshotRequest<TypeConfig>,
    ) -> Reply {
        let ours = raft.with_raft_state(|s| *s.vote_ref()).await?;
        let reply = InstallSnapshotResponse { vote: ours };
        if chunk.vote < ours {
            // From a leader of the past: the reply's vote tells it so.
            return Ok(reply);
        }
        let mut incoming = self.incoming.lock().await;
        let id = chunk.meta.snapshot_id.clone();
        let received = match incoming.as_ref() {
            Some(part) if part.id == id => part.received,
            _ => 0,
        };
        if chunk.offset > received {
            return Err(mismatch(&id, chunk.offset));
        }
        if chunk.offset == 0 && received == 0 {
            let file = raft.begin_receiving_snapshot().await.map_err(|e| match e {
                RaftError::Fatal(fatal) => RaftError::Fatal(fatal),
                RaftError::APIError(never) => match never {},
            })?;
            *incoming = Some(Incoming {
                id: id.clone(),
                file,
                received: 0,
            });
        }
        let Some(part) = incoming.as_mut() else {
            return Err(mismatch(&id, chunk.offset));
        };
        let end = chunk.offset + chunk.data.len() as u64;
        write_at(&mut part.file, chunk.offset, &chunk.data)
            .await
            .map_err(|e| not_written(Some(&chunk), &e))?;
        part.received = end;
        if !chunk.done {
            return Ok(reply);
        }
        let Some(part) = incoming.take() else {
            return Err(mismatch(&id, chunk.offset));
        };
        let file = match finish(part.file, end, self.work).await {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!(
                    snapshot = %id,
                    error = %e,
                    "a received snapshot does not check out: the leader is asked to send it again"
                );
                return Err(mismatch(&id, chunk.offset));
            }
        };
        drop(incoming);
        let snapshot = Snapshot {
            meta: chunk.meta,
            snapshot: file,
        };
        let installed = raft.install_full_snapshot(chunk.vote, snapshot).await?;
        Ok(InstallSnapshotResponse {
            vote: installed.vote,
        })
    }
}

/// Writes `data` at byte `offset` of `file`.
async fn write_at(file: &mut SnapshotFile, offset: u64, data: &[u8]) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(offset)).await?;
    file.write_all(data).await?;
    file.flush().await
}

/// Cuts the file at `end` (a chunk sent again from the start leaves later bytes behind it),
/// checks it whole and returns it.
async fn finish(
    file: Box<SnapshotFile>,
    end: u64,
    work: Work,
) -> std::io::Result<Box<SnapshotFile>> {
    file.set_len(end).await?;
    file.check(work).await?;
    Ok(file)
}

/// A failure to write the snapshot `chunk` belongs to.
fn not_written(
    chunk: Option<&InstallSnapshotRequest<TypeConfig>>,
    e: &(impl std::error::Error + 'static),
) -> RaftError<NodeId, InstallSnapshotError> {
    let signature = chunk.map(|c| c.meta.signature());
    RaftError::from(StorageError::from(StorageIOError::write_snapshot(
        signature, e,
    )))
}

/// Tells the leader to send snapshot `id` again from its first byte.
fn mismatch(id: &SnapshotId, got: u64) -> RaftError<NodeId, InstallSnapshotError> {
    RaftError::APIError(InstallSnapshotError::SnapshotMismatch(SnapshotMismatch {
        expect: SnapshotSegmentId {
            id: id.clone(),
            offset: 0,
        },
        got: SnapshotSegmentId {
            id: id.clone(),
            offset: got,
        },
    }))
}
