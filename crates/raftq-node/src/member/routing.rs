//! Client requests on their way to the leader: a node serves a request itself when it leads, or
//! forwards it over the peer service to the leader it knows, and tries again (another leader,
//! or after a pause) while no leader is known. A node that knows the leader but cannot reach it
//! says so at once.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::RaftError;
use raftq_engine::{Command, EngineError};
use raftq_store::{Delivered, NodeId, Response};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::error::NodeError;
use crate::member::longpoll::LongPoll;
use crate::member::membership::{self, Change, ChangeResult};
use crate::member::GroupCore;
use crate::network::{CallError, PeerClient};
use crate::protocol;
use crate::query::{self, Query, QueryResult};
use crate::sections::{SectionPart, SectionPull};

/// How long a client request may wait for a leader before it is answered `unavailable`.
pub(crate) const LEADER_WAIT: Duration = Duration::from_secs(5);
/// Pause between attempts while no leader is known.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// A leader that has left this node's pings unanswered this long while its appends kept
/// arriving is cut off from this node one way: requests are answered at once rather than
/// forwarded into the cut, so that a client with other endpoints moves on. (A leader whose
/// appends stopped too is gone, and requests wait for the next one; a leader whose appends
/// only just came back, after a partition healed, gets the time to answer pings again.)
const SILENT: Duration = Duration::from_secs(1);
/// How long a call forwarded to a leader that stopped leading may still finish: a deposed
/// leader that runs answers at once (what it committed, or that it no longer leads), and a
/// connection to one that stopped is refused at once (nothing was sent); only a call still
/// open after this is answered as a write that may have committed.
const DEPOSED_GRACE: Duration = Duration::from_millis(200);

/// A client request a follower hands to the leader, as it travels: owned as the leader receives
/// it, borrowed from the routed request as a follower sends it ([`Sent`]); both encode alike. An
/// owned command is boxed: it is by far the largest kind (a queue's settings), and boxing leaves
/// its encoding as it is.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Forwarded<W = Box<Command>, R = Query, C = Change> {
    Write(W),
    Read(R),
    Change(C),
    /// A long poll ([`LongPoll`]), served whole by the node it is sent to.
    Wait(W),
    /// A part of a backup's section of the group, served by the member it is sent to.
    Backup(SectionPull),
}

/// A request as a follower sends it to the leader.
pub(crate) type Sent<'a> = Forwarded<&'a Command, &'a Query, &'a Change>;

/// The leader's answer to a [`Forwarded`] request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum ForwardReply {
    Written(Response),
    Read(Result<QueryResult, EngineError>),
    Changed(ChangeResult),
    Waited(Result<Delivered, EngineError>),
    Backup(SectionPart),
}

/// A client request of one kind, and the reply the leader gives to that kind: [`GroupCore::route`]
/// answers a request with its own kind of reply, typed.
pub(crate) trait Routed: Sync {
    type Reply: Send;

    /// Served by any replica of the group, not by its leader only.
    const ANY_REPLICA: bool = false;

    /// How long the request may take, the wait for a leader included.
    fn patience(&self) -> Duration {
        LEADER_WAIT
    }

    /// The request as it is sent to the leader.
    fn sent(&self) -> Sent<'_>;

    /// Serves the request on this node, which must lead.
    fn serve(
        &self,
        core: &Arc<GroupCore>,
    ) -> impl Future<Output = Result<Self::Reply, NodeError>> + Send;

    /// The reply of this kind in a leader's answer; `Err`: a reply of another kind.
    fn reply(reply: ForwardReply) -> Result<Self::Reply, ForwardReply>;
}

impl Routed for Command {
    type Reply = Response;

    fn sent(&self) -> Sent<'_> {
        Forwarded::Write(self)
    }

    async fn serve(&self, core: &Arc<GroupCore>) -> Result<Response, NodeError> {
        core.node.space.admits(self)?;
        core.propose(self.clone()).await
    }

    fn reply(reply: ForwardReply) -> Result<Response, ForwardReply> {
        match reply {
            ForwardReply::Written(response) => Ok(response),
            other => Err(other),
        }
    }
}

impl Routed for Query {
    type Reply = Result<QueryResult, EngineError>;

    fn sent(&self) -> Sent<'_> {
        Forwarded::Read(self)
    }

    async fn serve(&self, core: &Arc<GroupCore>) -> Result<Self::Reply, NodeError> {
        core.raft.ensure_linearizable().await.map_err(|e| match e {
            RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f)) => {
                NodeError::NotLeader(f.leader_id)
            }
            other => NodeError::Unavailable(other.to_string()),
        })?;
        let now = core.node.clock.stamp()?;
        // Timers that fell due since the last entry fire before the read sees the state.
        if core
            .reader
            .with_engine(|e| e.next_due())
            .flatten()
            .is_some_and(|due| due <= now)
        {
            core.propose(Command::Tick).await?;
        }
        query::run(&core.reader, self, now)
    }

    fn reply(reply: ForwardReply) -> Result<Self::Reply, ForwardReply> {
        match reply {
            ForwardReply::Read(result) => Ok(result),
            other => Err(other),
        }
    }
}

impl Routed for Change {
    type Reply = ChangeResult;

    fn sent(&self) -> Sent<'_> {
        Forwarded::Change(self)
    }

    fn patience(&self) -> Duration {
        LEADER_WAIT + membership::LONGEST
    }

    async fn serve(&self, core: &Arc<GroupCore>) -> Result<ChangeResult, NodeError> {
        core.change_membership(self).await
    }

    fn reply(reply: ForwardReply) -> Result<ChangeResult, ForwardReply> {
        match reply {
            ForwardReply::Changed(result) => Ok(result),
            other => Err(other),
        }
    }
}

impl Routed for LongPoll {
    type Reply = Result<Delivered, EngineError>;

    /// The node that has the poll parks it in its replica and answers it as it applies the
    /// entry that ends the wait.
    const ANY_REPLICA: bool = true;

    fn patience(&self) -> Duration {
        LEADER_WAIT + self.lasts()
    }

    fn sent(&self) -> Sent<'_> {
        Forwarded::Wait(self.command())
    }

    async fn serve(&self, core: &Arc<GroupCore>) -> Result<Self::Reply, NodeError> {
        core.long_poll(self).await
    }

    fn reply(reply: ForwardReply) -> Result<Self::Reply, ForwardReply> {
        match reply {
            ForwardReply::Waited(delivered) => Ok(delivered),
            other => Err(other),
        }
    }
}

impl GroupCore {
    /// Runs a request here when this node leads, else at the leader; retries while no leader
    /// is known, up to [`LEADER_WAIT`] (a membership change also has the time it may take).
    /// A leader cut off from this node one way is not waited for: see [`SILENT`].
    pub(crate) async fn route<R: Routed>(
        self: &Arc<Self>,
        request: &R,
    ) -> Result<R::Reply, NodeError> {
        if R::ANY_REPLICA {
            return request.serve(self).await;
        }
        let deadline = Instant::now() + request.patience();
        loop {
            let known = self.raft.server_metrics().borrow().current_leader;
            // Known to lead elsewhere: the request goes there at once. Otherwise Raft tells
            // whether this node leads, or where to go.
            let here = match known {
                Some(leader) if leader != self.node.id => Err(NodeError::NotLeader(Some(leader))),
                _ => self.serve_local(request).await,
            };
            let outcome = match here {
                Err(NodeError::NotLeader(Some(leader))) if leader != self.node.id => {
                    self.forward(leader, request, deadline).await
                }
                other => other,
            };
            match outcome {
                Err(NodeError::NotLeader(_)) | Err(NodeError::Unavailable(_))
                    if Instant::now() + RETRY_PAUSE < deadline =>
                {
                    // Tried again as soon as another leader is known (after a handover or an
                    // election), or after the pause.
                    let mut metrics = self.raft.server_metrics();
                    let _ = tokio::time::timeout(
                        RETRY_PAUSE,
                        metrics
                            .wait_for(|m| m.current_leader.is_some() && m.current_leader != known),
                    )
                    .await;
                }
                Err(NodeError::NotLeader(_)) => {
                    return Err(NodeError::Unavailable("no leader could be reached".into()))
                }
                other => return other,
            }
        }
    }

    async fn forward<R: Routed>(
        &self,
        leader: NodeId,
        request: &R,
        deadline: Instant,
    ) -> Result<R::Reply, NodeError> {
        let mut client = self.forwarder(leader)?;
        let timeout = deadline.saturating_duration_since(Instant::now());
        let sent = request.sent();
        let failure = ForwardFailure::of(leader, &sent);
        // A leader that dies without closing its connections (its host gone, not just its
        // process) leaves the call hanging until its timeout; once this node sees another leader
        // or an election, the call is given up instead.
        let mut metrics = self.raft.server_metrics();
        if metrics.borrow().current_leader != Some(leader) {
            // Deposed before anything was sent: the request is routed again.
            return Err(NodeError::NotLeader(None));
        }
        // A leader that removes itself hands over on purpose, and answers where to go next.
        let deposed = async {
            match sent {
                Forwarded::Change(_) => std::future::pending::<()>().await,
                _ => {
                    let _ = metrics.wait_for(|m| m.current_leader != Some(leader)).await;
                }
            }
        };
        // Nor is a call kept waiting once the leader is cut off from this node.
        let silent = async {
            while !self.cut_off_from(leader) {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        };
        let call = client.forward::<_, Result<ForwardReply, NodeError>>(&sent, timeout);
        tokio::pin!(call);
        tokio::select! {
            biased;
            reply = &mut call => failure.answered::<R>(reply),
            _ = deposed => match tokio::time::timeout(DEPOSED_GRACE, call).await {
                Ok(reply) => failure.answered::<R>(reply),
                Err(_) => Err(failure.error(
                    format!("node {leader} stopped leading while a request was forwarded to it"),
                    true,
                )),
            },
            _ = silent => Err(failure.error(
                format!("node {leader} was cut off while a request was forwarded to it"),
                true,
            )),
        }
    }

    /// The client that forwards to `leader`, or why nothing can be forwarded to it: it is not a
    /// member, this node is cut off from it, or it speaks another peer protocol.
    fn forwarder(&self, leader: NodeId) -> Result<PeerClient, NodeError> {
        let Some(addr) = self.member_addr(leader) else {
            return Err(NodeError::NotLeader(None));
        };
        if self.cut_off_from(leader) {
            return Err(NodeError::LeaderUnreachable(leader));
        }
        let own = self.node.forwarders.dial.protocol.speaks();
        protocol::may_forward(leader, self.node.protocols.of(leader), own)?;
        Ok(self.node.forwarders.get(leader, &addr).in_group(self.group))
    }

    /// The peer address of member `id`, as this node's membership has it.
    fn member_addr(&self, id: NodeId) -> Option<String> {
        let metrics = self.raft.server_metrics();
        let m = metrics.borrow();
        m.membership_config
            .membership()
            .get_node(&id)
            .map(|n| n.addr.clone())
    }

    /// Whether `leader` is cut off from this node one way: its appends arrive, its answers to
    /// this node's pings do not.
    pub(crate) fn cut_off_from(&self, leader: NodeId) -> bool {
        self.node.silent_for(leader, SILENT) && self.appending_for(SILENT)
    }

    /// Serves a request on this node, which must be the leader.
    async fn serve_local<R: Routed>(self: &Arc<Self>, request: &R) -> Result<R::Reply, NodeError> {
        if self.handing_over.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(NodeError::NotLeader(None));
        }
        request.serve(self).await
    }

    /// Serves a request another node forwarded to this one, which must be the leader (a long
    /// poll or a backup's pull: any replica).
    pub(crate) async fn serve_forwarded(
        self: &Arc<Self>,
        request: &Forwarded,
    ) -> Result<ForwardReply, NodeError> {
        match request {
            Forwarded::Write(command) => self
                .serve_local(&**command)
                .await
                .map(ForwardReply::Written),
            Forwarded::Read(query) => self.serve_local(query).await.map(ForwardReply::Read),
            Forwarded::Change(change) => self.serve_local(change).await.map(ForwardReply::Changed),
            Forwarded::Wait(command) => {
                let poll = LongPoll::of(command.as_ref().clone()).ok_or_else(|| {
                    NodeError::Unavailable(format!(
                        "a long poll must be a ReceiveWait: {command:?}"
                    ))
                })?;
                self.route(&poll).await.map(ForwardReply::Waited)
            }
            Forwarded::Backup(pull) => Box::pin(self.serve_section(*pull))
                .await
                .map(ForwardReply::Backup),
        }
    }

    /// Serves a backup's pull of this group's section from this replica (see `sections`).
    async fn serve_section(&self, pull: SectionPull) -> Result<SectionPart, NodeError> {
        match pull {
            SectionPull::Open { index } => {
                self.applied_up_to(index).await?;
                let id = self.node.sections.open(self.group, self.reader.clone());
                Ok(SectionPart::Opened(id))
            }
            SectionPull::Next { id } => self.node.sections.next(id).await,
        }
    }
}

/// How a call forwarded to `leader` that failed is answered: a write that may have reached the
/// leader may have committed; a read can always be asked again.
pub(crate) struct ForwardFailure {
    leader: NodeId,
    read: bool,
}

impl ForwardFailure {
    /// The failures of `sent`, forwarded to `leader`.
    pub(crate) fn of(leader: NodeId, sent: &Sent<'_>) -> ForwardFailure {
        ForwardFailure {
            leader,
            read: matches!(sent, Forwarded::Read(_)),
        }
    }

    fn error(&self, message: String, maybe_sent: bool) -> NodeError {
        if self.read || !maybe_sent {
            NodeError::Unavailable(message)
        } else {
            NodeError::Timeout(format!("{message}; the write may still commit"))
        }
    }

    /// The reply of a call that ended, as the request's kind of reply.
    pub(crate) fn answered<R: Routed>(
        &self,
        reply: Result<Result<ForwardReply, NodeError>, CallError>,
    ) -> Result<R::Reply, NodeError> {
        let leader = self.leader;
        let reply = reply.map_err(|e| {
            self.error(
                format!("forwarding to node {leader}: {e}"),
                !e.unreachable(),
            )
        })??;
        // A reply of another kind than the request's does not follow the protocol, as one that
        // does not decode does not.
        R::reply(reply).map_err(|_| {
            self.error(
                format!("node {leader} answered with a reply of another kind"),
                true,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::{CallError, PeerClient};
    use tokio::net::TcpListener;

    /// A forward to `addr` that fails before any answer, with its error.
    async fn failed_forward(addr: &str, timeout: Duration) -> CallError {
        let mut client = PeerClient::new(2, addr, &Default::default());
        let request: Forwarded = Forwarded::Read(Query::ListQueues {
            account: "dev".into(),
            prefix: String::new(),
        });
        match client
            .forward::<_, Result<ForwardReply, NodeError>>(&request, timeout)
            .await
        {
            Err(e @ (CallError::Transport(_) | CallError::Timeout(_))) => e,
            other => panic!("expected a transport error or a timeout, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_known_to_have_sent_nothing() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = closed.local_addr().expect("addr").to_string();
        drop(closed);
        let error = failed_forward(&addr, Duration::from_secs(5)).await;
        assert!(error.unreachable(), "{error:?}");
    }

    #[tokio::test]
    async fn a_connection_lost_after_sending_may_have_delivered() {
        // A peer that accepts the connection and drops it: the request may have arrived.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                drop(stream);
            }
        });
        let error = failed_forward(&addr, Duration::from_secs(5)).await;
        assert!(matches!(error, CallError::Transport(_)), "{error:?}");
        assert!(!error.unreachable(), "{error:?}");
        server.abort();
    }

    #[tokio::test]
    async fn a_peer_that_answers_late_is_not_unreachable() {
        // Connected, but no answer within the call's timeout: a slow peer, which openraft must
        // keep sending heartbeats to.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let error = failed_forward(&addr, Duration::from_millis(200)).await;
        assert!(matches!(error, CallError::Timeout(_)), "{error:?}");
        assert!(!error.unreachable(), "{error:?}");
        server.abort();
    }
}
