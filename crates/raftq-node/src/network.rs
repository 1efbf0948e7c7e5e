//! Outgoing peer traffic: openraft's network over tonic gRPC (`proto/raft.proto`), and the
//! forwarding of client requests to the leader.
//!
//! Every payload is postcard-encoded inside a `Blob`. A call that does not reach the peer is
//! reported to openraft as `Unreachable`, so it backs off; an error the peer's Raft returned
//! comes back as `RemoteError`.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use raftq_store::{NodeId, TypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};

use crate::rpc::raft_client::RaftClient;
use crate::rpc::Blob;

/// HTTP/2 flow-control window for peer traffic: large enough that a batch of entries is sent
/// without waiting for window updates.
pub(crate) const WINDOW: u32 = 16 * 1024 * 1024;

/// How long a connection attempt to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Peers this node refuses to talk to: a switch for partition tests, empty in production.
#[derive(Debug, Clone, Default)]
pub struct Partition {
    cut: Arc<RwLock<BTreeSet<NodeId>>>,
}

impl Partition {
    /// Cuts (or, with `false`, heals) this node's links to `peer`.
    pub fn set(&self, peer: NodeId, cut: bool) {
        if let Ok(mut set) = self.cut.write() {
            if cut {
                set.insert(peer);
            } else {
                set.remove(&peer);
            }
        }
    }

    pub fn is_cut(&self, peer: NodeId) -> bool {
        self.cut.read().is_ok_and(|set| set.contains(&peer))
    }
}

/// Makes a client per peer.
#[derive(Debug, Clone, Default)]
pub struct Network {
    pub partition: Partition,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient::new(target, &node.addr, self.partition.clone())
    }
}

/// The gRPC stub for one peer; it connects lazily and reconnects on its own.
#[derive(Debug, Clone)]
pub struct PeerClient {
    target: NodeId,
    client: Option<RaftClient<Channel>>,
    partition: Partition,
}

/// Why a call to a peer failed before its Raft could answer.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("peer {0} is cut off")]
    Cut(NodeId),
    #[error("peer address {0} is invalid")]
    Address(String),
    #[error("transport: {0}")]
    Transport(#[from] tonic::Status),
    #[error("malformed reply: {0}")]
    Decode(#[from] postcard::Error),
}

#[derive(Clone, Copy)]
enum Method {
    Append,
    Vote,
    Snapshot,
    Forward,
}

impl PeerClient {
    pub fn new(target: NodeId, addr: &str, partition: Partition) -> PeerClient {
        let client = Endpoint::from_shared(format!("http://{addr}"))
            .ok()
            .map(|e| {
                let e = e
                    .connect_timeout(CONNECT_TIMEOUT)
                    .tcp_nodelay(true)
                    .initial_stream_window_size(Some(WINDOW))
                    .initial_connection_window_size(Some(WINDOW));
                RaftClient::new(e.connect_lazy())
            });
        PeerClient {
            target,
            client,
            partition,
        }
    }

    async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        method: Method,
        request: &Req,
        timeout: Option<Duration>,
    ) -> Result<Resp, CallError> {
        if self.partition.is_cut(self.target) {
            return Err(CallError::Cut(self.target));
        }
        let client = self
            .client
            .as_mut()
            .ok_or_else(|| CallError::Address(self.target.to_string()))?;
        let mut request = tonic::Request::new(Blob {
            data: postcard::to_allocvec(request)?,
        });
        if let Some(t) = timeout {
            request.set_timeout(t);
        }
        let reply = match method {
            Method::Append => client.append_entries(request).await?,
            Method::Vote => client.vote(request).await?,
            Method::Snapshot => client.install_snapshot(request).await?,
            Method::Forward => client.forward(request).await?,
        };
        Ok(postcard::from_bytes(&reply.into_inner().data)?)
    }

    /// Sends a client request to this peer (the leader) and returns its reply.
    pub async fn forward<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        self.call(Method::Forward, request, Some(timeout)).await
    }

    async fn raft_call<Req: Serialize, Resp: DeserializeOwned, E>(
        &mut self,
        method: Method,
        request: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        E: std::error::Error + DeserializeOwned,
    {
        let reply: Result<Resp, RaftError<NodeId, E>> = self
            .call(method, request, Some(option.hard_ttl()))
            .await
            .map_err(|e| match e {
                CallError::Decode(d) => RPCError::Network(NetworkError::new(&d)),
                other => RPCError::Unreachable(Unreachable::new(&other)),
            })?;
        reply.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.raft_call(Method::Append, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.raft_call(Method::Snapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.raft_call(Method::Vote, &rpc, &option).await
    }
}
