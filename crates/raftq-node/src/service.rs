//! Incoming peer traffic: the gRPC service of `proto/raft.proto`, handing Raft messages to
//! openraft and forwarded client requests to this node (which must lead), once admitted: with
//! mutual TLS, only from a member of the membership this node knows (by the node id of the
//! caller's certificate; a node that knows no membership yet, blank or joining, hears from any
//! node of the cluster's CA), and only from the caller's cluster (`admission`). A ping is
//! answered to any node of the CA: a node being added asks its cluster's members before it is
//! one.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::admission::{PeerCall, Standing, CLUSTER_HEADER};
use crate::error::NodeError;
use crate::routing::{ForwardReply, Forwarded};
use crate::rpc::raft_server::Raft as RaftRpc;
use crate::rpc::Blob;
use crate::shared::Core;
use crate::tls::node_id_of;

pub(crate) struct PeerService {
    core: Arc<Core>,
    /// Whether callers show certificates (mutual TLS), by which they are known.
    authenticated: bool,
}

impl PeerService {
    pub(crate) fn new(core: Arc<Core>, authenticated: bool) -> PeerService {
        PeerService {
            core,
            authenticated,
        }
    }
}

impl PeerService {
    /// Admits `request` as a `call` from a member of its sender's cluster, or refuses it (and
    /// logs why).
    async fn screen(&self, call: PeerCall, request: &Request<Blob>) -> Result<(), Status> {
        if self.authenticated {
            self.screen_caller(request).map_err(|reason| {
                tracing::warn!(?call, remote = ?request.remote_addr(), %reason, "peer call refused");
                Status::permission_denied(reason)
            })?;
        }
        let sender = match request.metadata().get(CLUSTER_HEADER) {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .ok()
                    .and_then(|v| Uuid::parse_str(v).ok())
                    .ok_or_else(|| {
                        Status::invalid_argument(format!("{CLUSTER_HEADER} must be a UUID"))
                    })?,
            ),
        };
        self.core.admission.admit(call, sender).await.map_err(|e| {
            tracing::warn!(?call, remote = ?request.remote_addr(), reason = %e, "peer call refused");
            Status::failed_precondition(e.to_string())
        })
    }

    /// Refuses a caller whose certificate names no node id, or a node that is not a member.
    fn screen_caller(&self, request: &Request<Blob>) -> Result<(), String> {
        let caller = request
            .peer_certs()
            .and_then(|chain| chain.first().and_then(|leaf| node_id_of(leaf)))
            .ok_or("the caller's certificate names no node id")?;
        match self.core.is_member(caller) {
            None | Some(true) => Ok(()),
            Some(false) => Err(format!("node {caller} is not a member of this cluster")),
        }
    }
}

fn decode<T: DeserializeOwned>(request: Request<Blob>) -> Result<T, Status> {
    postcard::from_bytes(&request.into_inner().data)
        .map_err(|e| Status::invalid_argument(format!("malformed request: {e}")))
}

fn encode<T: Serialize>(reply: &T) -> Result<Response<Blob>, Status> {
    raftq_engine::codec::to_vec(reply)
        .map(|data| Response::new(Blob { data }))
        .map_err(|e| Status::internal(format!("cannot encode reply: {e}")))
}

#[tonic::async_trait]
impl RaftRpc for PeerService {
    async fn append_entries(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        self.screen(PeerCall::Append, &request).await?;
        self.core.note_append();
        encode(&self.core.raft.append_entries(decode(request)?).await)
    }

    async fn ping(&self, _request: Request<Blob>) -> Result<Response<Blob>, Status> {
        let status = self
            .core
            .admission
            .status(self.core.clock.wall())
            .map_err(|e| Status::internal(format!("cannot read the log: {e}")))?;
        encode(&status)
    }

    async fn vote(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        self.screen(PeerCall::Vote, &request).await?;
        encode(&self.core.raft.vote(decode(request)?).await)
    }

    async fn install_snapshot(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        self.screen(PeerCall::Snapshot, &request).await?;
        encode(&self.core.raft.install_snapshot(decode(request)?).await)
    }

    async fn elect(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        self.screen(PeerCall::Elect, &request).await?;
        self.core
            .raft
            .trigger()
            .elect()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        encode(&())
    }

    async fn admit(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        self.screen(PeerCall::Admit, &request).await?;
        if self.core.admission.standing() == Standing::Joining {
            self.core
                .admission
                .readmitted()
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
            tracing::info!(node = self.core.id, "added to the cluster");
        }
        encode(&())
    }

    async fn forward(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        self.screen(PeerCall::Forward, &request).await?;
        let forwarded: Forwarded = decode(request)?;
        let reply: Result<ForwardReply, NodeError> = self.core.serve_local(&forwarded).await;
        encode(&reply)
    }
}
