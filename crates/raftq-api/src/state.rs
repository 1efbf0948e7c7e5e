//! What every handler shares: the node, the key table and the limits ([`Api`]), with this
//! node's request metrics and the limits' state.

use std::sync::Arc;

use raftq_node::Node;

use crate::keys::Keys;
use crate::metrics::Metrics;
use crate::throttle::{Limits, Throttle};

/// Everything the front ends need: the node it talks to, the region it serves, the key table
/// that maps API keys to accounts, and the limits against abuse (none unless set).
#[derive(Clone)]
pub struct Api {
    pub node: Arc<Node>,
    pub region: String,
    pub keys: Keys,
    pub limits: Limits,
}

impl Api {
    pub fn new(node: Arc<Node>, region: impl Into<String>, keys: Keys) -> Api {
        Api {
            node,
            region: region.into(),
            keys,
            limits: Limits::default(),
        }
    }

    /// The same, with `limits`.
    pub fn with_limits(self, limits: Limits) -> Api {
        Api { limits, ..self }
    }
}

/// The state every handler shares.
pub(crate) struct Shared {
    pub api: Api,
    pub metrics: Metrics,
    pub throttle: Throttle,
}

pub(crate) type AppState = Arc<Shared>;
