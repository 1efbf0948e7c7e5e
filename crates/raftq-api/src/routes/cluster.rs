//! Cluster and operations routes: `GET /v1/cluster` (leader, members and roles, term, commit
//! index), `GET /healthz` (liveness, no key needed) and `GET /metrics` (Prometheus text, no key
//! needed).

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::auth::Account;
use crate::{status, AppState};

pub async fn show(State(state): State<AppState>, _account: Account) -> Response {
    Json(status::of(&state.api.node, &state.api.region).await).into_response()
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
