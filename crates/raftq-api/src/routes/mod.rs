//! The routes of SPEC.md §3 and the layers around them: body size limits, request logging and
//! metrics, and JSON answers for unknown paths and methods (gRPC statuses for gRPC calls).
//!
//! - [`queues`]: create, list, get, patch, delete, dead-letter sources, stats.
//! - [`messages`]: send, batch send, peek, purge.
//! - [`leases`]: receive (with long polling), ack, lease change.
//! - [`cluster`]: cluster status, liveness, Prometheus metrics.

mod cluster;
mod leases;
mod messages;
mod queues;

use std::convert::Infallible;

use axum::extract::DefaultBodyLimit;
use axum::http::HeaderMap;
use axum::routing::{get, post, MethodRouter};
use axum::{middleware, Extension, Router};
use raftq_engine::model::limits;

use crate::error::ApiError;
use crate::input::BodyLimit;
use crate::{grpc, metrics, AppState};

/// The most a byte of message text can grow in JSON: a control character becomes `\u00XX`.
const JSON_ESCAPE_FACTOR: usize = 6;

/// Room for the JSON syntax and the other fields around a message.
const JSON_OVERHEAD: usize = 64 * 1024;

/// The body limit of every route but batch send: any message the largest queue accepts fits,
/// however much of it JSON must escape.
pub const BODY_LIMIT: usize =
    JSON_ESCAPE_FACTOR * limits::MAX_MESSAGE_BYTES_MAX as usize + JSON_OVERHEAD;

/// The body limit of a batch send: ten of the largest messages fit with room for escapes,
/// though not ten of the largest made only of escaped characters.
pub const BATCH_BODY_LIMIT: usize = 16 * 1024 * 1024;

/// Gives a route its own body limit.
fn with_body_limit(route: MethodRouter<AppState>, limit: usize) -> MethodRouter<AppState> {
    route
        .layer::<_, Infallible>(DefaultBodyLimit::max(limit))
        .layer::<_, Infallible>(Extension(BodyLimit(limit)))
}

/// The whole API with its layers.
pub fn build(state: AppState) -> Router {
    Router::new()
        .route("/v1/queues", post(queues::create).get(queues::list))
        .route(
            "/v1/queues/{q}",
            get(queues::get).patch(queues::patch).delete(queues::delete),
        )
        .route(
            "/v1/queues/{q}/dead_letter_sources",
            get(queues::dead_letter_sources),
        )
        .route("/v1/queues/{q}/stats", get(queues::stats))
        .route(
            "/v1/queues/{q}/messages",
            post(messages::send).get(messages::peek),
        )
        .route(
            "/v1/queues/{q}/messages/batch",
            with_body_limit(post(messages::send_batch), BATCH_BODY_LIMIT),
        )
        .route("/v1/queues/{q}/purge", post(messages::purge))
        .route("/v1/queues/{q}/receive", post(leases::receive))
        .route("/v1/queues/{q}/ack", post(leases::ack))
        .route("/v1/queues/{q}/lease", post(leases::change))
        .route("/v1/cluster", get(cluster::show))
        .route("/v1/cluster/state", get(cluster::state))
        .route("/healthz", get(cluster::healthz))
        .route("/metrics", get(cluster::metrics))
        .fallback(|headers: HeaderMap| async move {
            grpc::refuse(&headers, ApiError::route_not_found())
        })
        .method_not_allowed_fallback(|headers: HeaderMap| async move {
            grpc::refuse(&headers, ApiError::method_not_allowed())
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::observe,
        ))
        .with_state(state)
}
