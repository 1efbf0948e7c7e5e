//! Calls to a node's peer service as an outsider makes them, for tests of what the peer service
//! refuses (built with the `testing` feature only).

use std::time::Duration;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
};
use openraft::{SnapshotMeta, Vote};
use raftq_store::{NodeId, TypeConfig};

use crate::member::routing::Forwarded;
use crate::network::{CallError, Dial, Method, PeerClient};
use crate::query::Query;

/// Calls `method` of the peer service at `addr`, dialed with `tls` and carrying `cluster` and
/// the peer protocol `protocol` (none: no header, as a build before it), with a well-formed
/// request that names node `sender` as the one it comes from (the leader of an append or
/// snapshot, the candidate of a vote, at a high term): for tests that try the peer port as an
/// outsider would.
pub async fn call_peer(
    addr: &str,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    cluster: Option<uuid::Uuid>,
    protocol: Option<u32>,
    method: Method,
    sender: NodeId,
) -> Result<(), CallError> {
    let dial = Dial {
        tls,
        ..Default::default()
    };
    dial.protocol.set(protocol);
    if let Some(id) = cluster {
        dial.cluster.set(id);
    }
    let mut client = PeerClient::new(0, addr, &dial);
    let timeout = Some(Duration::from_secs(5));
    const TERM: u64 = 1_000_000;
    match method {
        Method::Append => {
            let request = AppendEntriesRequest::<TypeConfig> {
                vote: Vote::new_committed(TERM, sender),
                prev_log_id: None,
                entries: Vec::new(),
                leader_commit: None,
            };
            client.call(method, &request, timeout).await
        }
        Method::Vote => {
            let request = VoteRequest::new(Vote::new(TERM, sender), None);
            client.call(method, &request, timeout).await
        }
        Method::Snapshot => {
            let request = InstallSnapshotRequest::<TypeConfig> {
                vote: Vote::new_committed(TERM, sender),
                meta: SnapshotMeta::default(),
                offset: 0,
                data: Vec::new(),
                done: false,
            };
            client.call(method, &request, timeout).await
        }
        Method::Forward => {
            let request: Forwarded = Forwarded::Read(Query::Accounts);
            client.call(method, &request, timeout).await
        }
        Method::Ping | Method::Elect | Method::Admit => client.call(method, &(), timeout).await,
    }
}

/// Sends one snapshot chunk to the peer service at `addr` (no TLS) in the name of `cluster`, and
/// returns what the node answered: for tests of how a node receives snapshots.
pub async fn send_snapshot_chunk(
    addr: &str,
    cluster: uuid::Uuid,
    chunk: &InstallSnapshotRequest<TypeConfig>,
) -> Result<
    Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    CallError,
> {
    let dial = Dial::default();
    dial.cluster.set(cluster);
    let mut client = PeerClient::new(0, addr, &dial);
    client
        .call(Method::Snapshot, chunk, Some(Duration::from_secs(10)))
        .await
}
