//! A backup of the cluster's state (`raftq_store::backup`) as a stream of chunks, for the REST
//! and gRPC fronts alike: the node writes the file on a blocking thread into a bounded channel,
//! so neither the node nor the client holds more than a few chunks of it.

use std::io::{self, Write};
use std::sync::Arc;

use axum::body::Bytes;
use futures_util::stream::{self, Stream, StreamExt};
use raftq_node::{Node, NodeError};
use tokio::sync::mpsc;

use crate::error::ApiError;

/// The size of the chunks the backup is sent in.
const CHUNK: usize = 256 * 1024;
/// How many chunks may wait for the client: the backup's reader pauses beyond that.
const CHUNKS_AHEAD: usize = 4;

/// Starts a backup on `node` and waits for its first chunk, so that a backup that cannot start
/// (no leader confirmed the index to back up) is an error here rather than a broken file; then
/// the chunks as they come. An error after the first chunk ends the stream with it.
pub(crate) async fn chunks(
    node: Arc<Node>,
) -> Result<impl Stream<Item = Result<Bytes, NodeError>> + Send + 'static, ApiError> {
    let (sender, mut received) = mpsc::channel(CHUNKS_AHEAD);
    let writer = ChunkWriter {
        chunks: sender.clone(),
        pending: Vec::with_capacity(CHUNK),
    };
    tokio::spawn(async move {
        match node.backup(writer).await {
            Ok(summary) => tracing::info!(
                applied_index = ?summary.applied_index,
                rows = summary.rows,
                bytes = summary.bytes,
                state_digest = %summary.state_digest,
                "wrote a backup"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "a backup did not finish");
                let _ = sender.send(Err(e)).await;
            }
        }
    });
    let first = match received.recv().await {
        Some(Ok(chunk)) => chunk,
        Some(Err(e)) => return Err(e.into()),
        None => {
            return Err(NodeError::Unavailable("the backup ended before it began".into()).into())
        }
    };
    let rest = stream::unfold(received, |mut received| async move {
        let next = received.recv().await?;
        Some((next, received))
    });
    Ok(stream::once(async move { Ok(first) }).chain(rest))
}

/// A writer that sends what it is given in chunks over a channel, waiting while the channel is
/// full (it runs on a blocking thread); it fails once the receiver is gone (the client left).
struct ChunkWriter {
    chunks: mpsc::Sender<Result<Bytes, NodeError>>,
    pending: Vec<u8>,
}

impl ChunkWriter {
    fn send_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.pending,
            Vec::with_capacity(CHUNK),
        ));
        self.chunks
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if self.pending.len() >= CHUNK {
            self.send_pending()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_pending()
    }
}
