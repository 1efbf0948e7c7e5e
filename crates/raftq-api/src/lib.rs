//! # raftq-api
//!
//! The client APIs of SPEC.md §3 over a [`raftq_node::Node`]: REST/JSON and gRPC
//! (`proto/raftq.proto`), both served by the one service ([`Front`]) that [`router`] builds, on
//! one port. Every call turns into one [`raftq_engine::Command`] (a write through Raft) or one
//! [`raftq_node::Query`] (a linearizable read), through the same code for both front ends.
//!
//! - `keys`: API keys (`Authorization: Bearer <key>`) and access key pairs, their roles, and the
//!   open mode of a keyless server; `auth`: the extractors that authenticate a request with them.
//!   Access key pairs are for a front end that checks request signatures itself (`raftq-sqs`),
//!   which asks the table for a pair's secret and principal ([`Keys::access_key`]).
//! - `state`: what every handler shares ([`Api`]: the node, the region, the keys).
//! - [`ops`]: the operations, independent of the wire format: the checks that need no state,
//!   defaults, the command or query and the reading of its outcome. REST and gRPC both call them,
//!   and so does any further [`Protocol`] served beside them (`raftq-sqs`).
//! - `input`: REST request parsing — bodies as JSON values read field by field, so every type
//!   error, unknown field or missing field is a `400` that names the field, before anything is
//!   proposed.
//! - `attributes`: the text form of typed message attributes (`attributes` and
//!   `attribute_types`) in requests and answers of both front ends.
//! - `json`: the response shapes (queue object, messages, results) and RFC 3339 times; gRPC
//!   converts the same shapes to protobuf.
//! - `error`: the one mapping from engine and node errors to error codes, HTTP statuses and
//!   gRPC statuses.
//! - `longpoll`: receives that park in the engine until an entry delivers to them.
//! - `backup`: a backup of the cluster's state as a stream of chunks, for both front ends.
//! - `metrics`: request logs (REST and gRPC), request counters and latency histograms, and the
//!   Prometheus text of `GET /metrics` with Raft and per-queue gauges.
//! - `routes`: the REST handlers, grouped by resource, each with its OpenAPI operation.
//! - `openapi`: the frame of the OpenAPI document and the errors each input can cause; the
//!   document itself is built from the annotated handlers (`routes::document`), served at
//!   `GET /v1/openapi.json` and checked in as `docs/openapi.json`. `schemas`: the schemas of
//!   engine types the API returns as they are.
//! - `limits`: the request body limits; `throttle`: the limits against abuse (request rates and
//!   long polls per API key and per connection), off unless configured.
//! - `front`: the service each connection gets: gRPC calls to the tonic server, requests a
//!   further [`Protocol`] claims to it, the rest to the REST router, each throttled, logged,
//!   counted and timed.
//! - [`grpc`]: the gRPC service `raftq.v1.Queues` and its generated client ([`grpc::pb`]).
//!
//! Choices where the spec is silent are written down in `docs/api.md`.

mod attributes;
mod auth;
mod backup;
mod body;
mod error;
mod front;
pub mod grpc;
mod input;
mod json;
mod keys;
mod limits;
mod longpoll;
mod metrics;
mod openapi;
mod routes;
mod schemas;
mod shared;
mod status;
mod throttle;

use std::sync::Arc;

pub use error::{ApiError, CODE_METADATA, ERROR_METADATA, FIELD_METADATA};
pub use front::{Front, Protocol, Responding};
pub use keys::{
    load_keys, AccessGrant, AccessKeyError, KeyDigest, Keys, KeysError, Principal, Role,
    OPEN_ACCOUNT,
};
pub use limits::BODY_LIMIT;
pub use metrics::{MetricsOptions, Route};
pub use shared::{ops, Api};
pub use throttle::{Caller, Limits};

/// The REST API of SPEC.md §3 and the gRPC service `raftq.v1.Queues` on one port, with request
/// logging and metrics, ready for `axum::serve` (HTTP/1.1 and HTTP/2, which gRPC needs).
pub fn router(api: Api) -> Front {
    let state = Arc::new(shared::Shared {
        throttle: throttle::Throttle::new(api.limits),
        api,
        metrics: metrics::Metrics::default(),
    });
    let rest = routes::build(state.clone()).layer(axum::middleware::from_fn_with_state(
        state.clone(),
        front::observe,
    ));
    Front::new(rest, state)
}
