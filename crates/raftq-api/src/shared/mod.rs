//! What every handler shares: the node, the key table and the limits ([`Api`]), with this
//! node's request metrics and the limits' state ([`Shared`]), and the operations every front end
//! calls on it.
//!
//! [`Shared`]'s methods, by file:
//! - here: [`Shared::api`], [`Shared::admit_key`];
//! - `call.rs`: the typed calls into the node, `commit`, `write` and `read`;
//! - `ops.rs`: the operations of SPEC.md §3 and the move tasks, one method each (`create_queue`
//!   to `delete_queue`, `send`, `send_batch`, `receive`, `ack`, `change_lease`,
//!   `list_messages` (a peek or the scheduled messages), `cancel_scheduled`, `purge`, the move
//!   tasks, `accounts`, `change_membership`).

use std::sync::Arc;

use raftq_node::Node;

mod call;
pub mod ops;

use crate::error::ApiError;
use crate::keys::{KeyDigest, Keys};
use crate::metrics::{Metrics, MetricsOptions};
use crate::throttle::{Caller, Limits, Throttle};

/// Everything the front ends need: the node it talks to, the region it serves, the key table
/// that maps API keys to accounts, the limits against abuse (none unless set) and what
/// `GET /metrics` shows.
#[derive(Clone)]
pub struct Api {
    pub node: Arc<Node>,
    pub region: String,
    pub keys: Keys,
    pub limits: Limits,
    pub metrics: MetricsOptions,
}

impl Api {
    pub fn new(node: Arc<Node>, region: impl Into<String>, keys: Keys) -> Api {
        Api {
            node,
            region: region.into(),
            keys,
            limits: Limits::default(),
            metrics: MetricsOptions::default(),
        }
    }

    /// The same, with `limits`.
    pub fn with_limits(self, limits: Limits) -> Api {
        Api { limits, ..self }
    }

    /// The same, with `metrics`.
    pub fn with_metrics(self, metrics: MetricsOptions) -> Api {
        Api { metrics, ..self }
    }
}

/// The state every handler shares; the operations of [`ops`] are its methods.
pub struct Shared {
    pub(crate) api: Api,
    pub(crate) metrics: Metrics,
    pub(crate) throttle: Throttle,
}

impl Shared {
    /// The node, region, keys and limits this API serves.
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// Counts one request of `key` under the per-key limits, for a protocol that authenticates
    /// its requests itself (a signature over the body, checked after the front admitted the
    /// request by its connection); refused as `too_many_requests` when the key is over its rate.
    pub fn admit_key(&self, key: KeyDigest) -> Result<(), ApiError> {
        self.throttle.admit(&Caller {
            key: Some(key),
            connection: None,
        })
    }
}

pub(crate) type AppState = Arc<Shared>;
