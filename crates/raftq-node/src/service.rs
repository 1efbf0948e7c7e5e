//! Incoming peer traffic: the gRPC service of `proto/raft.proto`, handing Raft messages to
//! openraft and forwarded client requests to this node (which must lead), once admitted, and
//! only from the caller's cluster (`admission`). With mutual TLS the caller is known by the node
//! id of its certificate:
//! - votes, forwarded requests and handovers come only from a member of the membership this node
//!   knows (a node that knows none yet, blank or joining, hears from any node of the CA);
//! - appends and snapshots come only from the node they name as their leader. They are not
//!   checked against this node's membership, which may be behind: a node that was away while
//!   members were added must still hear from a leader added meanwhile, or it never catches up;
//! - a ping is answered to any node of the CA: a node being added asks its cluster's members
//!   before it is one.
//!
//! A call is for the Raft group its [`GROUP_HEADER`] names (group 1 without one). A group this
//! node does not take part in answers `not_found` (the caller backs off as from an unreachable
//! peer), except a ping, which every node answers: about the group, or, for one it does not take
//! part in, with no log. Joining a cluster (`admit`) is the node's.
//!
//! The service answers calls over HTTP/2, or [`Delivery`]s from a network in memory ([`serve`]).

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};
use uuid::Uuid;

use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use openraft::Vote;
use raftq_store::{GroupId, NodeId, TypeConfig};

use crate::admission::{
    GroupPing, LeaderContact, PeerCall, PingAnswer, Progress, Standing, CLUSTER_HEADER,
};
use crate::error::NodeError;
use crate::member::routing::{ForwardReply, Forwarded};
use crate::member::{GroupCore, Groups, NodeCore};
use crate::network::{index_range, Answer, Method, GROUP_HEADER};
use crate::protocol;
use crate::rpc::raft_server::Raft as RaftRpc;
use crate::rpc::Blob;
use crate::tls::node_id_of;

pub(crate) struct PeerService {
    node: Arc<NodeCore>,
    groups: Arc<Groups>,
    /// Whether callers show certificates (mutual TLS), by which they are known.
    authenticated: bool,
}

impl PeerService {
    /// What this node answers a ping of `group` with: its log, progress and leader contact in
    /// the group, or none of them where it takes no part in it.
    fn group_ping(&self, group: GroupId) -> Result<GroupPing, Status> {
        let Some(core) = self.groups.get(group) else {
            return Ok(GroupPing {
                group: group.0,
                last_log: None,
                progress: Progress::default(),
                leader: LeaderContact::NotHeard,
                quiet: false,
            });
        };
        let last_log = core
            .last_log()
            .map_err(|e| Status::internal(format!("cannot read the log: {e}")))?;
        Ok(GroupPing {
            group: group.0,
            last_log,
            progress: core.progress(),
            leader: core.leader_contact(),
            quiet: core.is_quiet(),
        })
    }

    /// The service of `node` and its `groups`.
    pub(crate) fn new(
        node: Arc<NodeCore>,
        groups: Arc<Groups>,
        authenticated: bool,
    ) -> PeerService {
        PeerService {
            node,
            groups,
            authenticated,
        }
    }
}

/// The group `request` is for: the one its [`GROUP_HEADER`] names, group 1 without one.
fn group_of(request: &Request<Blob>) -> Result<GroupId, Status> {
    match request.metadata().get(GROUP_HEADER) {
        None => Ok(GroupId::FIRST),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.parse().ok())
            .map(GroupId)
            .ok_or_else(|| Status::invalid_argument(format!("{GROUP_HEADER} must be a number"))),
    }
}

impl PeerService {
    /// The group `request` is for, when this node takes part in it.
    fn core(&self, request: &Request<Blob>) -> Result<Arc<GroupCore>, Status> {
        let group = group_of(request)?;
        self.groups
            .get(group)
            .ok_or_else(|| Status::not_found(format!("this node takes no part in group {group}")))
    }

    /// Admits `request` as a `call` from its sender's cluster to `core`'s group, or refuses it
    /// (and logs why); returns the caller's node id when callers show certificates, and the
    /// peer protocol the call announced.
    async fn screen(
        &self,
        core: &GroupCore,
        call: PeerCall,
        request: &Request<Blob>,
    ) -> Result<(Option<NodeId>, u32), Status> {
        // A forward comes from any node of the cluster (group 1's members), also to a group
        // it takes no part in; votes and hand-overs come from the group's own members.
        let cluster = match call {
            PeerCall::Forward => self.groups.get(GroupId::FIRST),
            _ => None,
        };
        let members = cluster.as_deref().unwrap_or(core);
        let caller = match self.authenticated {
            true => Some(screen_caller(members, call, request).map_err(|reason| {
                tracing::warn!(?call, remote = ?request.remote_addr(), %reason, "peer call refused");
                Status::permission_denied(reason)
            })?),
            false => None,
        };
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
        let protocol = protocol::of_call(request.metadata())?;
        self.node.admission.admit(call, sender).await.map_err(|e| {
            tracing::warn!(?call, remote = ?request.remote_addr(), reason = %e, "peer call refused");
            Status::failed_precondition(e.to_string())
        })?;
        Ok((caller, protocol))
    }

    /// Screens a Raft message (an append, a vote or a snapshot) and reads it; notes the peer
    /// protocol of the node it comes from (`vote`'s leader or candidate).
    async fn raft_message<T: DeserializeOwned>(
        &self,
        call: PeerCall,
        request: Request<Blob>,
        vote: impl FnOnce(&T) -> &Vote<NodeId>,
    ) -> Result<(Arc<GroupCore>, T), Status> {
        let core = self.core(&request)?;
        let (caller, protocol) = self.screen(&core, call, &request).await?;
        let rpc: T = decode(request)?;
        let vote = vote(&rpc);
        check_sender(caller, vote)?;
        if let Some(sender) = vote.leader_id().voted_for() {
            self.node.protocols.note(sender, protocol);
        }
        Ok((core, rpc))
    }
}

/// The node id of the caller's certificate; refuses a certificate that names none, and a vote,
/// forward or handover from a node that is not a member of `core`'s group (for a forward, the
/// caller passes group 1's: the cluster's).
fn screen_caller(
    core: &GroupCore,
    call: PeerCall,
    request: &Request<Blob>,
) -> Result<NodeId, String> {
    let caller = request
        .peer_certs()
        .and_then(|chain| chain.first().and_then(|leaf| node_id_of(leaf)))
        .ok_or("the caller's certificate names no node id")?;
    let members_only = matches!(call, PeerCall::Vote | PeerCall::Forward | PeerCall::Elect);
    if members_only && core.is_member(caller) == Some(false) {
        return Err(format!("node {caller} is not a member of this cluster"));
    }
    Ok(caller)
}

/// Refuses a Raft message that names another sender (`vote`: the leader or candidate it comes
/// from) than the node of the caller's certificate.
fn check_sender(caller: Option<NodeId>, vote: &Vote<NodeId>) -> Result<(), Status> {
    let named = vote.leader_id().voted_for();
    match caller {
        Some(caller) if named != Some(caller) => {
            let reason = format!(
                "the caller's certificate names node {caller}, the message node {}",
                named.map_or("none".to_string(), |n| n.to_string())
            );
            tracing::warn!(%reason, "peer call refused");
            Err(Status::permission_denied(reason))
        }
        _ => Ok(()),
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
        let (core, rpc): (_, AppendEntriesRequest<TypeConfig>) = self
            .raft_message(PeerCall::Append, request, |r: &AppendEntriesRequest<_>| {
                &r.vote
            })
            .await?;
        core.note_append();
        core.note_leader_commit(rpc.leader_commit.map(|l| l.index));
        // Stage events for `scripts/latency`, of appends that carry entries.
        let entries = index_range(&rpc.entries);
        if let Some((first, last)) = entries {
            tracing::trace!(target: "raftq::stage", stage = "append_received", first, last);
        }
        let reply = core.raft.append_entries(rpc).await;
        if let Some((first, last)) = entries {
            tracing::trace!(target: "raftq::stage", stage = "append_answered", first, last);
        }
        encode(&reply)
    }

    async fn ping(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        let asked = self.group_ping(group_of(&request)?)?;
        let status = self
            .node
            .admission
            .status(self.node.clock.wall(), asked.last_log);
        // The groups a ping names (none from a node of an earlier version, whose body is empty).
        let listed = match request.get_ref().data.as_slice() {
            [] => None,
            data => Some(
                postcard::from_bytes::<Vec<u32>>(data)
                    .map_err(|e| Status::invalid_argument(format!("the groups pinged: {e}")))?
                    .into_iter()
                    .map(|group| self.group_ping(GroupId(group)))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        PingAnswer::encode(&status, &asked.progress, &asked.leader, listed.as_deref())
            .map(|data| Response::new(Blob { data }))
            .map_err(|e| Status::internal(format!("cannot encode reply: {e}")))
    }

    async fn vote(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        let (core, rpc): (_, VoteRequest<NodeId>) = self
            .raft_message(PeerCall::Vote, request, |r: &VoteRequest<_>| &r.vote)
            .await?;
        encode(&core.raft.vote(rpc).await)
    }

    async fn install_snapshot(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        let (core, rpc): (_, InstallSnapshotRequest<TypeConfig>) = self
            .raft_message(
                PeerCall::Snapshot,
                request,
                |r: &InstallSnapshotRequest<_>| &r.vote,
            )
            .await?;
        encode(&core.receiver.receive(&core.raft, rpc).await)
    }

    async fn elect(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        let core = self.core(&request)?;
        self.screen(&core, PeerCall::Elect, &request).await?;
        // The election gate is off for this call: the clock's rule is checked here instead.
        if !self.node.clock.may_lead() {
            return Err(Status::failed_precondition(
                "this node's clock is not confirmed within the bound by a majority of the \
                 voters' clocks: it does not stand for election",
            ));
        }
        core.raft
            .trigger()
            .elect()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        encode(&())
    }

    async fn admit(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        let core = self.core(&request)?;
        self.screen(&core, PeerCall::Admit, &request).await?;
        if self.node.admission.standing() == Standing::Joining {
            self.node
                .admission
                .readmitted()
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
            tracing::info!(node = self.node.id, "added to the cluster");
        }
        encode(&())
    }

    async fn forward(&self, request: Request<Blob>) -> Result<Response<Blob>, Status> {
        let core = self.core(&request)?;
        let (_, sender) = self.screen(&core, PeerCall::Forward, &request).await?;
        let own = self.node.forwarders.dial.protocol.speaks();
        if let Some(refusal) = protocol::forwarded_refusal(sender, own) {
            tracing::warn!(remote = ?request.remote_addr(), %refusal, "forwarded request refused");
            return Err(Status::failed_precondition(refusal));
        }
        let forwarded: Forwarded = decode(request)?;
        let reply: Result<ForwardReply, NodeError> = core.serve_forwarded(&forwarded).await;
        encode(&reply)
    }
}

/// One peer call on its way to the node that serves it.
pub struct Delivery {
    pub method: Method,
    pub request: Request<Blob>,
    /// Where the answer goes; dropping it unanswered is a call broken after it was sent.
    pub answer: oneshot::Sender<Answer>,
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

/// Answers every call that arrives on `inbox` with `service`, each in a task of its own (as the
/// HTTP/2 server serves each stream), until the inbox closes or `stop` resolves.
pub(crate) fn serve(
    service: PeerService,
    mut inbox: mpsc::UnboundedReceiver<Delivery>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    let service = Arc::new(service);
    tokio::spawn(async move {
        tokio::pin!(stop);
        loop {
            let delivery = tokio::select! {
                delivery = inbox.recv() => delivery,
                _ = &mut stop => None,
            };
            let Some(Delivery {
                method,
                request,
                answer,
            }) = delivery
            else {
                return;
            };
            let service = Arc::clone(&service);
            tokio::spawn(async move {
                let _ = answer.send(dispatch(&service, method, request).await);
            });
        }
    })
}

/// Runs the peer service's handler of `method`.
async fn dispatch(service: &PeerService, method: Method, request: Request<Blob>) -> Answer {
    crate::network::call!(method, service, request)
}
