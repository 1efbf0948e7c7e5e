//! Outgoing peer traffic: openraft's network over tonic gRPC (`proto/raft.proto`), and the
//! forwarding of client requests to the leader.
//!
//! Calls go over HTTP/2, or, in a simulation that runs every node in one process, over a
//! [`MemoryNetwork`] that decides when, whether and in what order each call and its answer
//! arrive. Such a network reports a call refused before it was sent as the HTTP/2 transport
//! does ([`refused`]), and never ends a call it lost: the caller's own timeout does.
//!
//! Every payload is postcard-encoded inside a `Blob`. A call that does not reach the peer is
//! reported to openraft as `Unreachable`, so it backs off; an error the peer's Raft returned
//! comes back as `RemoteError`.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use raftq_h2::{H2Channel, Target};
use raftq_store::{GroupId, NodeId, TypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::admission::{ClusterId, GroupPing, PeerStatus, PingAnswer, CLUSTER_HEADER};
use crate::protocol::{Announced, PROTOCOL_HEADER};
use crate::rpc::raft_client::RaftClient;
use crate::rpc::Blob;
use tonic::{Request, Response, Status};

/// The gRPC metadata key of the Raft group a peer call is for; a call without it is for group
/// 1, as every call of a build before groups is.
pub(crate) const GROUP_HEADER: &str = "raftq-group";

/// HTTP/2 flow-control window for peer traffic: large enough that a batch of entries is sent
/// without waiting for window updates.
pub(crate) const WINDOW: u32 = 16 * 1024 * 1024;

/// How long a connection attempt to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// How long openraft waits before calling an unreachable peer again (its default is 500 ms):
/// shorter than the election timeout, so a peer back from a short cut hears from the leader
/// before it stands for election.
const UNREACHABLE_BACKOFF: Duration = Duration::from_millis(100);

/// Encoded bytes of log entries one AppendEntries carries, at most; a single larger entry goes
/// alone. openraft 0.9 gives an append one heartbeat interval to be answered and sends up to
/// `max_payload_entries` entries in it, also when a new leader probes where a follower's log
/// matches its own; entries of many commands made such a request too large to ever be answered
/// in time, and a new leader could not bring its followers up to date.
pub(crate) const APPEND_BYTES: usize = 1024 * 1024;

/// The bytes `value` takes postcard-encoded, as in a log entry or a peer request.
pub(crate) fn encoded_len<T: Serialize + ?Sized>(value: &T) -> usize {
    postcard::experimental::serialized_size(value).unwrap_or(usize::MAX)
}

/// How many of `entries`, from the first, fit in `budget` encoded bytes: at least one.
fn prefix_within<T: Serialize>(entries: &[T], budget: usize) -> usize {
    let mut used = 0usize;
    for (i, entry) in entries.iter().enumerate() {
        used = used.saturating_add(encoded_len(entry));
        if used > budget && i > 0 {
            return i;
        }
    }
    entries.len()
}

/// The indexes of the first and the last of `entries`, if any.
pub(crate) fn index_range(entries: &[openraft::Entry<TypeConfig>]) -> Option<(u64, u64)> {
    (entries.first().zip(entries.last()))
        .map(|(first, last)| (first.log_id.index, last.log_id.index))
}

/// A peer call's outcome: the peer service's answer, or the status the transport failed with.
pub type Answer = Result<Response<Blob>, Status>;

/// The network a node's outgoing peer calls go through in memory.
pub trait MemoryNetwork: Send + Sync + fmt::Debug {
    /// Carries `request` to the node serving `addr` and its answer back. The future ends with
    /// the answer or a transport failure ([`refused`] when nothing was sent), or never, for a
    /// call lost on its way.
    fn call(
        &self,
        addr: &str,
        method: Method,
        request: Request<Blob>,
    ) -> BoxFuture<'static, Answer>;
}

/// The status of a call refused before anything was sent, as the HTTP/2 transport reports a
/// connection that could not be made.
pub fn refused(addr: &str, why: &str) -> Status {
    let error = raftq_h2::Error::Connect {
        authority: addr.to_string(),
        source: std::io::Error::new(std::io::ErrorKind::ConnectionRefused, why.to_string()),
    };
    Status::from_error(Box::new(error))
}

/// Peers this node refuses to talk to: a switch for partition tests, empty in production.
#[derive(Debug, Clone, Default)]
pub struct Partition {
    cut: Arc<RwLock<BTreeSet<NodeId>>>,
}

impl Partition {
    /// Cuts (or, with `false`, heals) this node's links to `peer`.
    #[cfg(feature = "testing")]
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

/// What every call to a peer goes out with: the partition switch it honours, the cluster id it
/// carries, with mutual TLS this node's certificate and the CA it trusts, and the network it
/// goes over when not HTTP/2 (see `memory`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Dial {
    pub partition: Partition,
    pub cluster: ClusterId,
    /// The peer protocol the calls announce.
    pub protocol: Announced,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub memory: Option<Arc<dyn MemoryNetwork>>,
}

/// Clients of peers, one per peer and address, made on first use and shared after: clones of a
/// [`PeerClient`] share its connection.
#[derive(Debug, Clone, Default)]
pub struct PeerClients {
    pub(crate) dial: Dial,
    clients: Arc<Mutex<HashMap<(NodeId, String), PeerClient>>>,
}

impl PeerClients {
    /// Clients that dial as `dial` says.
    pub(crate) fn new(dial: Dial) -> PeerClients {
        PeerClients {
            dial,
            clients: Arc::default(),
        }
    }

    /// The client of `target` at `addr`.
    pub fn get(&self, target: NodeId, addr: &str) -> PeerClient {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients
            .entry((target, addr.to_string()))
            .or_insert_with(|| PeerClient::new(target, addr, &self.dial))
            .clone()
    }
}

/// openraft's network of one Raft group: Raft calls to a peer share one connection, with
/// every other group's. openraft asks for a client for every leadership check of a linearizable
/// read and every election; a new client each time opened a new connection each time.
#[derive(Debug, Clone)]
pub struct Network {
    pub peers: PeerClients,
    pub group: GroupId,
}

impl Network {
    /// The client of `target` at `addr`, its calls for this network's group.
    pub(crate) fn client(&self, target: NodeId, addr: &str) -> PeerClient {
        self.peers.get(target, addr).in_group(self.group)
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        self.client(target, &node.addr)
    }
}

/// The gRPC stub for one peer, over one HTTP/2 connection made on first use and made again after
/// it broke (`raftq-h2`: the calling task writes the request and reads the answer), or over a
/// network in memory.
#[derive(Debug, Clone)]
pub struct PeerClient {
    target: NodeId,
    /// The group its calls are for; `None` for group 1, which goes without the header.
    group: Option<GroupId>,
    client: Option<Stub>,
    partition: Partition,
    cluster: ClusterId,
    protocol: Announced,
}

/// How a [`PeerClient`] reaches its peer.
#[derive(Debug, Clone)]
enum Stub {
    H2(RaftClient<H2Channel>),
    Memory {
        network: Arc<dyn MemoryNetwork>,
        addr: String,
    },
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
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("malformed reply: {0}")]
    Decode(#[from] postcard::Error),
}

impl CallError {
    /// Whether the peer could not be reached at all (cut off, no address, no connection), as
    /// opposed to a call that reached it and failed or answered late. openraft backs off from an
    /// unreachable peer, sending it nothing, not even heartbeats, for [`UNREACHABLE_BACKOFF`];
    /// a slow peer must not be treated so, or under load its election timer fires and leaders
    /// churn (a 3-node run at 256 requests in flight saw 50 ms append timeouts turn into 500 ms
    /// silences and a dozen elections in half a minute).
    pub(crate) fn unreachable(&self) -> bool {
        match self {
            CallError::Cut(_) | CallError::Address(_) => true,
            // The peer hosts no such group (yet): nothing was done there.
            CallError::Transport(status) => {
                never_connected(status) || status.code() == tonic::Code::NotFound
            }
            CallError::Timeout(_) | CallError::Decode(_) => false,
        }
    }
}

/// Whether a failed call never got a connection to the peer, so that nothing was sent: the
/// connection was refused, or could not be made in time.
pub(crate) fn never_connected(status: &tonic::Status) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(status);
    while let Some(e) = cause {
        if let Some(raftq_h2::Error::Connect { .. }) = e.downcast_ref::<raftq_h2::Error>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The calls of the peer service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    Append,
    Vote,
    Snapshot,
    Forward,
    Ping,
    Elect,
    Admit,
}

/// Calls the handler of `$method` on `$target` with `$request`: a client's call, or the peer
/// service's own handler (the two name them alike), one arm per [`Method`].
macro_rules! call {
    ($method:expr, $target:expr, $request:expr) => {
        match $method {
            Method::Append => $target.append_entries($request).await,
            Method::Vote => $target.vote($request).await,
            Method::Snapshot => $target.install_snapshot($request).await,
            Method::Forward => $target.forward($request).await,
            Method::Ping => $target.ping($request).await,
            Method::Elect => $target.elect($request).await,
            Method::Admit => $target.admit($request).await,
        }
    };
}
pub(crate) use call;

impl PeerClient {
    pub(crate) fn new(target: NodeId, addr: &str, dial: &Dial) -> PeerClient {
        let client = match &dial.memory {
            Some(network) => Some(Stub::Memory {
                network: Arc::clone(network),
                addr: addr.to_string(),
            }),
            None => Self::h2(addr, dial).map(Stub::H2),
        };
        PeerClient {
            target,
            group: None,
            client,
            partition: dial.partition.clone(),
            cluster: dial.cluster.clone(),
            protocol: dial.protocol.clone(),
        }
    }

    /// This client (sharing its connection), its calls for `group`.
    pub(crate) fn in_group(mut self, group: GroupId) -> PeerClient {
        self.group = (group != GroupId::FIRST).then_some(group);
        self
    }

    /// The HTTP/2 stub of the peer at `addr`; `None` for an address that is no URI authority.
    fn h2(addr: &str, dial: &Dial) -> Option<RaftClient<H2Channel>> {
        let scheme = if dial.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{addr}")
            .parse::<tonic::codegen::http::Uri>()
            .ok()
            .filter(|origin| origin.authority().is_some())
            .map(|origin| {
                let channel = H2Channel::new(Target {
                    authority: addr.to_string(),
                    tls: dial.tls.clone(),
                    connect_timeout: CONNECT_TIMEOUT,
                    window: Some(WINDOW),
                });
                RaftClient::with_origin(channel, origin)
            })
    }

    pub(crate) async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        method: Method,
        request: &Req,
        timeout: Option<Duration>,
    ) -> Result<Resp, CallError> {
        let reply = self.call_for_bytes(method, request, timeout).await?;
        Ok(postcard::from_bytes(&reply)?)
    }

    /// Calls `method` and returns the reply's bytes, undecoded.
    async fn call_for_bytes<Req: Serialize>(
        &mut self,
        method: Method,
        request: &Req,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>, CallError> {
        if self.partition.is_cut(self.target) {
            return Err(CallError::Cut(self.target));
        }
        let client = self
            .client
            .as_mut()
            .ok_or_else(|| CallError::Address(self.target.to_string()))?;
        let mut request = tonic::Request::new(Blob {
            data: raftq_engine::codec::to_vec(request)?,
        });
        if let Some(t) = timeout {
            request.set_timeout(t);
        }
        if let Some(id) = self.cluster.get() {
            let value = tonic::metadata::MetadataValue::try_from(id.to_string())
                .map_err(|e| CallError::Address(format!("cluster id header: {e}")))?;
            request.metadata_mut().insert(CLUSTER_HEADER, value);
        }
        if let Some(group) = self.group {
            request
                .metadata_mut()
                .insert(GROUP_HEADER, tonic::metadata::MetadataValue::from(group.0));
        }
        if let Some(protocol) = self.protocol.get() {
            request.metadata_mut().insert(
                PROTOCOL_HEADER,
                tonic::metadata::MetadataValue::from(protocol),
            );
        }
        let reply = async {
            match client {
                Stub::H2(client) => call!(method, client, request),
                Stub::Memory { network, addr } => network.call(addr, method, request).await,
            }
        };
        let reply = match timeout {
            Some(t) => tokio::time::timeout(t, reply)
                .await
                .map_err(|_| CallError::Timeout(t))??,
            None => reply.await?,
        };
        Ok(reply.into_inner().data)
    }

    /// Sends a client request to this peer (the leader) and returns its reply.
    pub async fn forward<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        self.call(Method::Forward, request, Some(timeout)).await
    }

    /// This peer's answer to a ping, if it answers within `timeout`.
    pub(crate) async fn ping(&mut self, timeout: Duration) -> Option<PingAnswer> {
        let reply = self
            .call_for_bytes(Method::Ping, &(), Some(timeout))
            .await
            .ok()?;
        PingAnswer::decode(&reply).ok()
    }

    /// This peer's answer to a ping that names `groups`, and its answer for each of them
    /// (`None` from a node of an earlier version, which answers for group 1 alone), if it
    /// answers within `timeout`.
    pub(crate) async fn ping_groups(
        &mut self,
        groups: &[GroupId],
        timeout: Duration,
    ) -> Option<(PingAnswer, Option<Vec<GroupPing>>)> {
        let listed: Vec<u32> = groups.iter().map(|g| g.0).collect();
        let reply = self
            .call_for_bytes(Method::Ping, &listed, Some(timeout))
            .await
            .ok()?;
        PingAnswer::decode_with_groups(&reply).ok()
    }

    /// This peer's status, if it answers a ping within `timeout`.
    pub(crate) async fn ping_status(&mut self, timeout: Duration) -> Option<PeerStatus> {
        self.ping(timeout).await.map(|answer| answer.status)
    }

    /// Asks this peer to stand for election now.
    pub(crate) async fn elect(&mut self, timeout: Duration) -> Result<(), CallError> {
        self.call(Method::Elect, &(), Some(timeout)).await
    }

    /// Tells this peer, a joining node that caught up, that it was added.
    pub(crate) async fn admit(&mut self, timeout: Duration) -> Result<(), CallError> {
        self.call(Method::Admit, &(), Some(timeout)).await
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
            .map_err(|e| {
                if e.unreachable() {
                    RPCError::Unreachable(Unreachable::new(&e))
                } else {
                    RPCError::Network(NetworkError::new(&e))
                }
            })?;
        reply.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(UNREACHABLE_BACKOFF))
    }

    /// Sends the entries that fit in [`APPEND_BYTES`]; when that is not all of them, a success
    /// is reported as a partial one up to the last entry sent, and openraft sends the rest next.
    async fn append_entries(
        &mut self,
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let fit = prefix_within(&rpc.entries, APPEND_BYTES);
        let cut = (fit < rpc.entries.len()).then(|| rpc.entries[fit - 1].log_id);
        rpc.entries.truncate(fit);
        // Stage events for `scripts/latency`, of appends that carry entries.
        let entries = index_range(&rpc.entries);
        if let Some((first, last)) = entries {
            tracing::trace!(target: "raftq::stage", stage = "append_sent", first, last);
        }
        let reply = self.raft_call(Method::Append, &rpc, &option).await;
        if let Some((first, last)) = entries {
            tracing::trace!(target: "raftq::stage", stage = "append_acked", first, last);
        }
        let reply = reply?;
        Ok(match (reply, cut) {
            (AppendEntriesResponse::Success, Some(last)) => {
                AppendEntriesResponse::PartialSuccess(Some(last))
            }
            (reply, _) => reply,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(sizes: &[usize]) -> Vec<Vec<u8>> {
        sizes.iter().map(|n| vec![7u8; *n]).collect()
    }

    #[test]
    fn entries_are_sent_while_they_fit_the_budget() {
        // Each 100-byte vector encodes in 101 bytes (a one-byte length first).
        let all = entries(&[100, 100, 100, 100]);
        assert_eq!(prefix_within(&all, 202), 2);
        assert_eq!(prefix_within(&all, 201), 1);
        assert_eq!(prefix_within(&all, 404), 4);
        assert_eq!(prefix_within(&all, 10_000), 4);
    }

    #[test]
    fn an_entry_larger_than_the_budget_still_goes_alone() {
        let all = entries(&[5_000, 10]);
        assert_eq!(prefix_within(&all, 1_000), 1);
        assert_eq!(prefix_within::<Vec<u8>>(&[], 1_000), 0);
    }
}
