//! Incoming peer traffic: the gRPC service of `proto/raft.proto`, handing Raft messages to
//! openraft and forwarded client requests to this node (which must lead).

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::{Request, Response, Status};

use crate::error::NodeError;
use crate::node::{Core, ForwardReply, Forwarded};
use crate::rpc::raft_server::Raft as RaftRpc;
use crate::rpc::Blob;

pub(crate) struct PeerService {
    core: Arc<Core>,
}

impl PeerService {
    pub(crate) fn new(core: Arc<Core>) -> PeerService {
        PeerService { core }
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
        encode(&self.core.raft.append_entries(decode(request)?).await)
    }

    async fn ping(&self, _request: Request<Blob>) -> Result<Response<Blob>, Status> {
        encode(&())
    }

    async fn vote(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        encode(&self.core.raft.vote(decode(request)?).await)
    }

    async fn install_snapshot(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        encode(&self.core.raft.install_snapshot(decode(request)?).await)
    }

    async fn forward(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        let forwarded: Forwarded = decode(request)?;
        let reply: Result<ForwardReply, NodeError> = self.core.serve_local(&forwarded).await;
        encode(&reply)
    }
}
