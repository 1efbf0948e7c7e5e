//! A backup of the cluster's state (`raftq_store::backup`) as a stream of chunks, for the REST
//! and gRPC fronts alike: the node writes the file on a blocking thread into a bounded channel,
//! so neither the node nor the client holds more than a few chunks of it.

use std::sync::Arc;

use axum::body::Bytes;
use futures_util::stream::{self, Stream, StreamExt};
use raftq_node::{ChunkWriter, Node, NodeError, CHUNKS_AHEAD};
use tokio::sync::mpsc;

use crate::error::ApiError;

/// Starts a backup on `node` and waits for its first chunk, so that a backup that cannot start
/// (no leader confirmed the index to back up) is an error here rather than a broken file; then
/// the chunks as they come. An error after the first chunk ends the stream with it.
pub(crate) async fn chunks(
    node: Arc<Node>,
) -> Result<impl Stream<Item = Result<Bytes, NodeError>> + Send + 'static, ApiError> {
    let (sender, mut received) = mpsc::channel(CHUNKS_AHEAD);
    let writer = ChunkWriter::new(sender.clone());
    tokio::spawn(async move {
        match node.backup(writer).await {
            Ok(summary) => tracing::info!(
                bytes = summary.bytes,
                groups = summary.sections.len(),
                rows = summary.sections.iter().map(|s| s.rows).sum::<u64>(),
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
        Some((next.map(Bytes::from), received))
    });
    Ok(stream::once(async move { Ok(Bytes::from(first)) }).chain(rest))
}
