//! # raftq-api
//!
//! The REST/JSON front end of SPEC.md §3 over a [`raftq_node::Node`]. [`router`] builds the
//! axum [`Router`] that a binary serves; every route turns a request into one
//! [`raftq_engine::Command`] (a write through Raft) or one [`raftq_node::Query`] (a linearizable
//! read) and turns the answer back into the JSON shapes of the spec.
//!
//! - [`auth`]: API keys (`Authorization: Bearer <key>`) and the open mode of a keyless server.
//! - `input`: request parsing — bodies as JSON values read field by field, so every type error,
//!   unknown field or missing field is a `400` that names the field, before anything is proposed.
//! - `json`: the response shapes (queue object, messages, results) and RFC 3339 times.
//! - `error`: the one mapping from engine and node errors to HTTP statuses and error codes.
//! - `longpoll`: receives that wait for a wake-up of their queue instead of polling the log.
//! - `metrics`: request logs, request counters and the Prometheus text of `GET /metrics`.
//! - `routes`: the handlers, grouped by resource.
//!
//! Choices where the spec is silent are written down in `docs/api.md`.

pub mod auth;
mod call;
mod error;
mod input;
mod json;
mod longpoll;
mod metrics;
mod routes;
mod status;

use std::sync::Arc;

use axum::Router;
use raftq_node::Node;

pub use auth::{load_keys, Keys, KeysError, OPEN_ACCOUNT};

/// Everything the HTTP front end needs: the node it talks to, the region it serves and the key
/// table that maps API keys to accounts.
#[derive(Clone)]
pub struct Api {
    pub node: Arc<Node>,
    pub region: String,
    pub keys: Keys,
}

impl Api {
    pub fn new(node: Arc<Node>, region: impl Into<String>, keys: Keys) -> Api {
        Api {
            node,
            region: region.into(),
            keys,
        }
    }
}

/// The state every handler shares.
pub(crate) struct Shared {
    pub api: Api,
    pub metrics: metrics::Metrics,
}

pub(crate) type AppState = Arc<Shared>;

/// The REST API of SPEC.md §3, with request logging and metrics, ready to serve.
pub fn router(api: Api) -> Router {
    let state = Arc::new(Shared {
        api,
        metrics: metrics::Metrics::default(),
    });
    routes::build(state)
}
