//! What every handler shares: the node and the key table ([`Api`]), with this node's request
//! metrics and the claims of its long polls.

use std::sync::Arc;

use raftq_node::Node;

use crate::claims::Claims;
use crate::keys::Keys;
use crate::metrics::Metrics;

/// Everything the front ends need: the node it talks to, the region it serves and the key
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
    pub metrics: Metrics,
    pub claims: Claims,
}

pub(crate) type AppState = Arc<Shared>;
