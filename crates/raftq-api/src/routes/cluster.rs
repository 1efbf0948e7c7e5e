//! Cluster and operations routes: `GET /v1/cluster` (leader, members and roles, term, commit
//! index), `GET /v1/cluster/state` (this node's applied index and a digest of its persisted state,
//! to compare nodes), `GET /healthz` (liveness, no key needed) and `GET /metrics` (Prometheus text, no key
//! needed).

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use raftq_node::NodeError;

use crate::auth::Account;
use crate::error::ApiError;
use crate::{status, AppState};

pub async fn show(State(state): State<AppState>, _account: Account) -> Response {
    Json(status::of(&state.api.node, &state.api.region).await).into_response()
}

/// This node's own state, not forwarded: two nodes that applied the same entries answer the same
/// `applied_index` and `state_digest`.
pub async fn state(State(state): State<AppState>, _account: Account) -> Response {
    match state.api.node.reader().digest() {
        Ok((applied, digest)) => Json(json!({
            "node_id": state.api.node.id(),
            "applied_index": applied,
            "state_digest": digest,
        }))
        .into_response(),
        Err(e) => ApiError::from(NodeError::Storage(e.to_string())).into_response(),
    }
}

pub async fn healthz(State(state): State<AppState>) -> Response {
    Json(json!({"status": "ok", "node_id": state.api.node.id()})).into_response()
}

pub async fn metrics(State(state): State<AppState>) -> Response {
    let status = status::of(&state.api.node, &state.api.region).await;
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(&status),
    )
        .into_response()
}
