//! Cluster and operations routes: `GET /v1/cluster` (leader, members and roles, term, commit
//! index), `GET /v1/cluster/state` (this node's applied index and a digest of its persisted state,
//! to compare nodes), `GET /healthz` (liveness, no key needed) and `GET /metrics` (Prometheus text, no key
//! needed).

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use raftq_node::NodeError;

use crate::auth::Account;
use crate::error::ApiError;
use crate::openapi;
use crate::{status, AppState};

/// What `GET /v1/cluster/state` answers.
#[derive(Serialize, ToSchema)]
pub struct NodeState {
    /// The node answering.
    node_id: u64,
    /// The last log index this node applied; `null` before the first.
    #[schema(required = true)]
    applied_index: Option<u64>,
    /// The hex SHA-256 of this node's replicated state.
    state_digest: String,
}

/// What `GET /healthz` answers.
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    status: &'static str,
    /// The node answering.
    node_id: u64,
}

/// Cluster status
///
/// The leader, the members and their roles, the term and the commit index, as the answering
/// node sees them.
#[utoipa::path(
    get,
    path = "/v1/cluster",
    operation_id = "GetCluster",
    tag = "cluster",
    responses(
        (status = 200, description = "The cluster", body = status::RaftStatus),
        Account,
    )
)]
pub async fn show(State(state): State<AppState>, _account: Account) -> Response {
    Json(status::of(&state.api.node, &state.api.region).await).into_response()
}

/// This node's applied index and state digest
///
/// This node's own state, not forwarded: two nodes that applied the same entries answer the same
/// `applied_index` and `state_digest`.
#[utoipa::path(
    get,
    path = "/v1/cluster/state",
    operation_id = "GetNodeState",
    tag = "cluster",
    responses(
        (status = 200, description = "This node's state", body = NodeState),
        (status = 500, description = "`internal`: the node cannot read its state", body = openapi::ErrorBody),
        Account,
    )
)]
pub async fn state(State(state): State<AppState>, _account: Account) -> Response {
    match state.api.node.reader().digest() {
        Ok((applied_index, state_digest)) => Json(NodeState {
            node_id: state.api.node.id(),
            applied_index,
            state_digest,
        })
        .into_response(),
        Err(e) => ApiError::from(NodeError::Storage(e.to_string())).into_response(),
    }
}

/// Liveness
///
/// No key needed.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "Healthz",
    tag = "cluster",
    security(),
    responses((status = 200, description = "The process serves", body = Health))
)]
pub async fn healthz(State(state): State<AppState>) -> Response {
    Json(Health {
        status: "ok",
        node_id: state.api.node.id(),
    })
    .into_response()
}

/// Prometheus metrics
///
/// Request counts and latencies, Raft gauges and per-queue gauges of this node, in the
/// Prometheus text format (see docs/api.md, Observability). No key needed.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "Metrics",
    tag = "cluster",
    security(),
    responses((status = 200, description = "Prometheus text", body = String, content_type = "text/plain; version=0.0.4; charset=utf-8"))
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let status = status::of(&state.api.node, &state.api.region).await;
    let now = raftq_node::now_ms();
    let (queues, reclaiming) = state
        .api
        .node
        .reader()
        .with_engine(|engine| (engine.queue_gauges(now), engine.reclaim_backlog()))
        .unwrap_or_default();
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(&status, &queues, reclaiming),
    )
        .into_response()
}
