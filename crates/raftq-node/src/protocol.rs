//! The peer protocol: the version of what nodes send each other without a format number of its
//! own, so that nodes of two builds (during a rolling upgrade) never read each other's requests
//! as something else.
//!
//! Log entries and snapshots carry their format and are read by every later build. A forwarded
//! client request and its answer do not: they are the engine's commands, queries and outcomes,
//! postcard-encoded as they are in the build that sends them, and postcard reads a shape it does
//! not expect as garbage rather than refuse it. So every peer call carries the sender's
//! [`PEER_PROTOCOL`] in the [`PROTOCOL_HEADER`] header (a call without it comes from a build
//! before the header: protocol 0), and:
//! - a node learns each peer's protocol from the appends, votes and snapshots it receives
//!   ([`Heard`]), and forwards a request only to a leader whose protocol it heard is its own;
//!   while another build leads, its clients are answered `unavailable` (send to the leader, or
//!   once the upgrade is over);
//! - a leader refuses a forwarded request that names another protocol or none.
//!
//! Raise [`PEER_PROTOCOL`] whenever the encoding of a forwarded request or of its answer changes:
//! a `Command`, `Query`, `Change`, their outcomes, `NodeError` (a new variant at the end of an
//! enum too: a node of the earlier build cannot read it).

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use raftq_store::NodeId;
use tonic::metadata::MetadataMap;
use tonic::Status;

use crate::error::NodeError;

/// The version of the peer protocol this build speaks.
pub const PEER_PROTOCOL: u32 = 4;

/// The header every peer call carries the sender's protocol in.
pub(crate) const PROTOCOL_HEADER: &str = "raftq-peer-protocol";

/// The protocol a call without [`PROTOCOL_HEADER`] speaks: that of a build before the header.
const BEFORE_THE_HEADER: u32 = 0;

/// The protocol a call's sender speaks, as its header says.
pub(crate) fn of_call(metadata: &MetadataMap) -> Result<u32, Status> {
    match metadata.get(PROTOCOL_HEADER) {
        None => Ok(BEFORE_THE_HEADER),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Status::invalid_argument(format!("{PROTOCOL_HEADER} must be a number"))),
    }
}

/// The protocol a node announces on its calls, shared with its peer clients: this build's, or,
/// in tests of mixed builds, another one, or none as a build before the header.
#[derive(Debug, Clone)]
pub(crate) struct Announced(Arc<RwLock<Option<u32>>>);

impl Default for Announced {
    fn default() -> Announced {
        Announced(Arc::new(RwLock::new(Some(PEER_PROTOCOL))))
    }
}

impl Announced {
    /// What calls carry in the header; `None`: no header.
    pub(crate) fn get(&self) -> Option<u32> {
        *self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The protocol this node speaks, as its calls announce it.
    pub(crate) fn speaks(&self) -> u32 {
        self.get().unwrap_or(BEFORE_THE_HEADER)
    }

    #[cfg(feature = "testing")]
    pub(crate) fn set(&self, protocol: Option<u32>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = protocol;
    }
}

/// The protocol each peer's latest append, vote or snapshot call announced.
#[derive(Debug, Default)]
pub(crate) struct Heard(RwLock<BTreeMap<NodeId, u32>>);

impl Heard {
    pub(crate) fn note(&self, node: NodeId, protocol: u32) {
        let known = self
            .0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&node)
            == Some(&protocol);
        if !known {
            self.0
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(node, protocol);
        }
    }

    pub(crate) fn of(&self, node: NodeId) -> Option<u32> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&node)
            .copied()
    }
}

/// Whether a node that speaks `own` may forward a request to `leader`, which was heard to speak
/// `heard`. Not heard from yet: unavailable for now (its first append is on its way, and the
/// request is routed again); heard to run another build: not sent at all.
pub(crate) fn may_forward(leader: NodeId, heard: Option<u32>, own: u32) -> Result<(), NodeError> {
    match heard {
        Some(protocol) if protocol == own => Ok(()),
        Some(protocol) => Err(NodeError::OtherBuild(format!(
            "node {leader} leads and runs another build (peer protocol {protocol}, this node's \
             {own}): this node does not forward to it while the upgrade lasts; send to node \
             {leader} directly, or try again once every node runs the same build"
        ))),
        None => Err(NodeError::Unavailable(format!(
            "node {leader} leads but has not been heard from yet: its build is not known"
        ))),
    }
}

/// Why a leader that speaks `own` refuses a request forwarded by a node that speaks `sender`;
/// `None`: it takes it.
pub(crate) fn forwarded_refusal(sender: u32, own: u32) -> Option<String> {
    (sender != own).then(|| {
        format!(
            "a request forwarded in peer protocol {sender} (0: a build before peer protocols) \
             reached a leader of peer protocol {own}: nodes of two builds do not forward to each \
             other; send to the leader directly, or try again once every node runs the same \
             build"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_goes_only_to_a_leader_heard_to_speak_the_same_protocol() {
        assert_eq!(may_forward(2, Some(PEER_PROTOCOL), PEER_PROTOCOL), Ok(()));
        let other = may_forward(2, Some(0), PEER_PROTOCOL).expect_err("another build");
        let NodeError::OtherBuild(text) = other else {
            panic!("another build is no retry: {other:?}")
        };
        assert!(
            text.contains("peer protocol 0") && text.contains("node 2"),
            "{text}"
        );
        assert!(matches!(
            may_forward(2, None, PEER_PROTOCOL),
            Err(NodeError::Unavailable(_))
        ));
        assert_eq!(forwarded_refusal(PEER_PROTOCOL, PEER_PROTOCOL), None);
        assert!(forwarded_refusal(0, PEER_PROTOCOL).is_some());
    }

    #[test]
    fn the_latest_protocol_heard_from_a_node_counts() {
        let heard = Heard::default();
        assert_eq!(heard.of(3), None);
        heard.note(3, 0);
        heard.note(3, PEER_PROTOCOL);
        assert_eq!(heard.of(3), Some(PEER_PROTOCOL));
    }
}
