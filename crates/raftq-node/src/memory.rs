//! Peer calls carried in memory instead of over HTTP/2, for a simulation that runs every node of
//! a cluster in one process and decides when, whether and in what order each call and its answer
//! arrive (`crates/raftq-sim`).
//!
//! Only the transport changes: a call is still screened, decoded and answered by the node's peer
//! service, and the caller still classifies a failure as the HTTP/2 transport would make it: a
//! call refused before it was sent (no node at the address, or it does not run) is
//! [`raftq_h2::Error::Connect`], so openraft backs off from the peer; a call lost on its way
//! never ends, and the caller's own timeout ends it.

use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

use crate::network::Method;
use crate::rpc::raft_server::Raft as RaftRpc;
use crate::rpc::Blob;
use crate::service::PeerService;

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

/// How a node talks to its peers: over TCP (HTTP/2, with TLS when configured), or in memory.
pub enum PeerTransport {
    /// The peer service listens here; calls to peers go over HTTP/2.
    Tcp(tokio::net::TcpListener),
    /// Calls to this node arrive on `inbox`; calls to peers go through `network`.
    Memory {
        network: Arc<dyn MemoryNetwork>,
        inbox: mpsc::UnboundedReceiver<Delivery>,
    },
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
    match method {
        Method::Append => service.append_entries(request).await,
        Method::Vote => service.vote(request).await,
        Method::Snapshot => service.install_snapshot(request).await,
        Method::Forward => service.forward(request).await,
        Method::Ping => service.ping(request).await,
        Method::Elect => service.elect(request).await,
        Method::Admit => service.admit(request).await,
    }
}
