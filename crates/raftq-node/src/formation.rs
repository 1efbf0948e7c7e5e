//! How a node whose data directory holds no Raft state finds its place: it asks every peer
//! listed in `--peers` for its [`PeerStatus`](crate::admission::PeerStatus), every
//! [`EVERY`], until it knows.
//!
//! - If any peer shows that a cluster exists, this node lost its directory (or was never part
//!   of the cluster): it becomes *joining* and does not vote or stand until it is added again.
//!   It logs what to do.
//! - Once every listed peer answered and none holds state, the node is *fresh*: a member of a
//!   cluster being formed.
//! - The lowest-numbered node forms the cluster (saves a new cluster id, then `initialize`) only
//!   once every listed peer is fresh, so no member of a new cluster can mistake it for one that
//!   existed before it started. A new cluster therefore forms once all of its nodes have started.
//!   It initializes group 1, the metadata group; the data groups are formed later, as the
//!   placement lays them out (`groups`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use openraft::error::RaftError;
use openraft::BasicNode;
use raftq_store::NodeId;
use tokio::sync::watch;

use crate::admission::{PeerStatus, Standing};
use crate::member::GroupCore;
use crate::pace::Pace;

/// How often the peers are asked.
const EVERY: Duration = Duration::from_millis(100);
/// How long an answer may take.
const PING_TIMEOUT: Duration = Duration::from_millis(250);

/// What a blank node makes of its peers' answers (`None`: no answer).
#[derive(Debug, PartialEq, Eq)]
enum Finding {
    /// A cluster exists, as the peer with this id shows.
    ClusterExists(NodeId),
    /// Every peer answered and none holds state; `all_fresh` when they are all fresh.
    AllBlank { all_fresh: bool },
    /// Not every peer answered yet.
    Unknown,
}

fn find(answers: &[(NodeId, Option<PeerStatus>)]) -> Finding {
    if let Some((id, _)) = answers
        .iter()
        .find(|(_, s)| s.is_some_and(|s| s.shows_a_cluster()))
    {
        return Finding::ClusterExists(*id);
    }
    if answers.iter().any(|(_, s)| s.is_none()) {
        return Finding::Unknown;
    }
    Finding::AllBlank {
        all_fresh: answers
            .iter()
            .all(|(_, s)| s.is_some_and(|s| s.standing == Standing::Fresh)),
    }
}

/// Runs until this node is a member or joining. `peers` are the listed members (this node
/// included); `core` is group 1.
pub(crate) async fn run(
    core: Arc<GroupCore>,
    peers: BTreeMap<NodeId, String>,
    shutdown: watch::Receiver<bool>,
) {
    let forms = peers.keys().next() == Some(&core.node.id);
    let others: Vec<(NodeId, String)> = peers
        .iter()
        .filter(|(id, _)| **id != core.node.id)
        .map(|(id, addr)| (*id, addr.clone()))
        .collect();
    let mut pace = Pace::new(EVERY, shutdown);
    let mut waiting_logged = false;
    loop {
        let standing = core.node.admission.standing();
        if matches!(standing, Standing::Member | Standing::Joining) || !pace.tick().await {
            return;
        }
        let pings = others.iter().map(|(id, addr)| {
            let mut client = core.network.peers.get(*id, addr);
            async move { (*id, client.ping_status(PING_TIMEOUT).await) }
        });
        let answers = join_all(pings).await;
        match (standing, find(&answers)) {
            (Standing::Blank, Finding::ClusterExists(peer)) => {
                if let Err(e) = core.node.admission.become_joining().await {
                    tracing::error!(error = %e, "cannot record that this node must join");
                    continue;
                }
                tracing::error!(
                    node = core.node.id,
                    peer,
                    "this node's data directory holds no Raft state, but its cluster exists \
                     (node {peer} answered with it): the directory was lost or is new. The node \
                     will not vote or stand for election until it is added again; on any member, \
                     run `raftq cluster replace --id {}` (docs/operations.md)",
                    core.node.id
                );
                return;
            }
            (Standing::Blank, Finding::AllBlank { .. }) => core.node.admission.become_fresh(),
            (Standing::Fresh, Finding::AllBlank { all_fresh: true }) if forms => {
                form(&core, &peers).await;
            }
            (_, Finding::Unknown) if !waiting_logged => {
                waiting_logged = true;
                let silent: Vec<NodeId> = answers
                    .iter()
                    .filter(|(_, s)| s.is_none())
                    .map(|(id, _)| *id)
                    .collect();
                tracing::info!(?silent, "waiting for every listed peer to answer");
            }
            _ => {}
        }
    }
}

/// For a node started with `--join`: asks `member` (every [`EVERY`], until it answers) which
/// cluster it belongs to, and says in the log what the operator does next.
pub(crate) async fn announce(
    core: Arc<GroupCore>,
    member: String,
    shutdown: watch::Receiver<bool>,
) {
    let mut client = core.network.peers.get(0, &member);
    let mut pace = Pace::new(EVERY * 10, shutdown);
    let mut silence_logged = false;
    while pace.tick().await {
        if core.node.admission.standing() != Standing::Joining {
            return;
        }
        match client.ping_status(PING_TIMEOUT).await {
            Some(status) if status.cluster_id.is_some() => {
                tracing::info!(
                    member = %member,
                    cluster = ?status.cluster_id,
                    "waiting to be added: on any member, run `raftq cluster add --id {} \
                     --raft-addr <this node's peer address>`",
                    core.node.id
                );
                return;
            }
            Some(_) => tracing::warn!(member = %member, "--join names a node of no cluster"),
            None if !silence_logged => {
                silence_logged = true;
                tracing::warn!(member = %member, "--join: no raftq node answers there yet");
            }
            None => {}
        }
    }
}

/// Saves a new cluster id and proposes the listed membership in group 1 (`core`).
async fn form(core: &GroupCore, peers: &BTreeMap<NodeId, String>) {
    let id = match core.node.admission.form().await {
        Ok(id) => id,
        Err(e) => {
            tracing::error!(error = %e, "cannot form the cluster");
            return;
        }
    };
    let members: BTreeMap<NodeId, BasicNode> = peers
        .iter()
        .map(|(id, addr)| (*id, BasicNode::new(addr)))
        .collect();
    match core.raft.initialize(members).await {
        Ok(()) => tracing::info!(node = core.node.id, cluster = %id, "formed the cluster"),
        Err(RaftError::APIError(e)) => {
            tracing::info!(node = core.node.id, reason = %e, "cluster already formed")
        }
        Err(e) => tracing::error!(error = %e, "cannot form the cluster"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn status(standing: Standing, cluster: bool) -> Option<PeerStatus> {
        Some(PeerStatus {
            cluster_id: cluster.then(|| Uuid::from_u128(1)),
            standing,
            last_log: None,
            clock_ms: 0,
        })
    }

    #[test]
    fn any_peer_with_state_or_a_cluster_id_shows_the_cluster_exists() {
        for shown in [
            status(Standing::Member, false),
            status(Standing::Joining, false),
            status(Standing::Fresh, true),
        ] {
            let answers = [(2, status(Standing::Fresh, false)), (3, shown)];
            assert_eq!(find(&answers), Finding::ClusterExists(3));
        }
        // Also while another peer is silent.
        let answers = [(2, None), (3, status(Standing::Member, true))];
        assert_eq!(find(&answers), Finding::ClusterExists(3));
    }

    #[test]
    fn blank_peers_count_only_once_all_answered() {
        let answers = [(2, status(Standing::Blank, false)), (3, None)];
        assert_eq!(find(&answers), Finding::Unknown);
        let answers = [
            (2, status(Standing::Blank, false)),
            (3, status(Standing::Fresh, false)),
        ];
        assert_eq!(find(&answers), Finding::AllBlank { all_fresh: false });
        let answers = [
            (2, status(Standing::Fresh, false)),
            (3, status(Standing::Fresh, false)),
        ];
        assert_eq!(find(&answers), Finding::AllBlank { all_fresh: true });
        assert_eq!(find(&[]), Finding::AllBlank { all_fresh: true });
    }
}
