//! `GET /v1/cluster/backup` (admin keys): the cluster's whole state, every group's, as one
//! backup file (`raftq_store::backup`), streamed as the answering node reads it.

use std::io;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use crate::auth::Admin;
use crate::openapi;
use crate::shared::AppState;

/// A backup of the cluster's state
///
/// The whole replicated state (queues, messages with their state and payloads, deduplication
/// entries, move tasks, tags, and the placement of the Raft groups), each group at an applied
/// index of its own at least as new as every write it acknowledged before the request, with the
/// cluster id, checksummed. The cluster
/// keeps serving meanwhile. `raftq restore --from FILE` starts a new cluster from it.
#[utoipa::path(
    get,
    path = "/v1/cluster/backup",
    operation_id = "Backup",
    tag = "cluster",
    responses(
        (status = 200, description = "The backup file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 503, description = "`unavailable`: no leader could confirm the index to back up", body = openapi::ErrorBody),
        Admin,
    )
)]
pub async fn backup(State(state): State<AppState>, _admin: Admin) -> Response {
    match crate::backup::chunks(state.api.node.clone()).await {
        Ok(chunks) => (
            [
                (CONTENT_TYPE, "application/octet-stream"),
                (CONTENT_DISPOSITION, "attachment; filename=\"raftq.backup\""),
            ],
            Body::from_stream(chunks.map(|c| c.map_err(|e| io::Error::other(e.to_string())))),
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}
