//! The simulated network between nodes: every peer call goes through it, delayed by a latency
//! drawn from the network's seeded random source, and lost on a link that is cut. A link is one
//! way, so a partition that only stops one direction (a node's calls arrive, its answers do not)
//! is a cut of that direction alone.
//!
//! A call reaches its node as the HTTP/2 transport would deliver it: refused at once when no
//! node serves the address (nothing was sent, so openraft backs off), lost without an end when
//! the link is cut (the caller's timeout ends it), and broken when the node stops while it
//! serves the call (it may have been applied).
//! A caller waits outside the called node's tasks ([`Waiting`]): a crash ends its calls
//! ([`Net::crashed`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use raftq_node::rpc::Blob;
use raftq_node::{refused, Answer, Delivery, MemoryNetwork, NodeId, PeerMethod};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};
use tonic::{Request, Status};

use crate::waiting::Waiting;

/// How long a call or an answer takes on a link, in microseconds, unless set otherwise.
const LATENCY_US: RangeInclusive<u64> = 100..=2_000;

/// The network: the nodes attached to it and the state of every link.
#[derive(Debug)]
pub struct Net {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    rng: StdRng,
    /// The node serving each address, where its calls go, and the runtime it runs on.
    nodes: BTreeMap<String, Attached>,
    waiting: Waiting<Answer>,
    /// Links that lose everything sent over them: (from, to).
    cut: BTreeSet<(NodeId, NodeId)>,
    latency_us: RangeInclusive<u64>,
}

impl Net {
    /// A network whose every random choice comes from `seed`.
    pub fn new(seed: u64) -> Arc<Net> {
        Arc::new(Net {
            state: Mutex::new(State {
                rng: StdRng::seed_from_u64(seed),
                nodes: BTreeMap::new(),
                waiting: Waiting::default(),
                cut: BTreeSet::new(),
                latency_us: LATENCY_US,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Attaches node `id` at `addr`, running on the current runtime: the network it calls its
    /// peers over, and the inbox its peer service takes calls from. A node attached again
    /// (restarted) replaces the last one.
    pub fn attach(
        self: &Arc<Net>,
        id: NodeId,
        addr: &str,
    ) -> (Arc<dyn MemoryNetwork>, mpsc::UnboundedReceiver<Delivery>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let attached = Attached {
            id,
            inbox: tx,
            runtime: Handle::current(),
        };
        self.state().nodes.insert(addr.to_string(), attached);
        let link = Link {
            net: Arc::clone(self),
            from: id,
        };
        (Arc::new(link), rx)
    }

    /// Detaches the node at `addr`: calls to it are refused until a node is attached there.
    pub fn detach(&self, addr: &str) {
        self.state().nodes.remove(addr);
    }

    /// Cuts (or, with `false`, heals) the link from `from` to `to`.
    pub fn cut(&self, from: NodeId, to: NodeId, cut: bool) {
        let mut state = self.state();
        if cut {
            state.cut.insert((from, to));
        } else {
            state.cut.remove(&(from, to));
        }
    }

    /// Cuts (or heals) both links between `a` and `b`.
    pub fn partition(&self, a: NodeId, b: NodeId, cut: bool) {
        self.cut(a, b, cut);
        self.cut(b, a, cut);
    }

    fn is_cut(&self, from: NodeId, to: NodeId) -> bool {
        self.state().cut.contains(&(from, to))
    }

    /// A latency for one crossing of a link.
    fn latency(&self) -> Duration {
        let mut state = self.state();
        let range = state.latency_us.clone();
        Duration::from_micros(state.rng.random_range(range))
    }

    /// The node serving `addr`; `None` when none does.
    fn node_at(&self, addr: &str) -> Option<Attached> {
        self.state().nodes.get(addr).cloned()
    }

    /// Ends every call node `id` was serving, oldest first, unanswered: the node crashed.
    pub fn crashed(&self, id: NodeId) {
        let ended = self.state().waiting.crashed(id);
        drop(ended);
    }

    /// Carries one call from `from` to `addr` and its answer back.
    async fn carry(self: Arc<Net>, from: NodeId, addr: String, delivery: Call) -> Answer {
        let Some(Attached {
            id: to,
            inbox,
            runtime,
        }) = self.node_at(&addr)
        else {
            return Err(refused(&addr, "no node serves this address"));
        };
        tokio::time::sleep(self.latency()).await;
        if self.is_cut(from, to) {
            return std::future::pending().await;
        }
        let (answer, answered) = oneshot::channel();
        inbox
            .send(Delivery {
                method: delivery.method,
                request: delivery.request,
                answer,
            })
            .map_err(|_| refused(&addr, "the node does not run"))?;
        let (number, reply) = self.state().waiting.add(to);
        // The answer comes back through a task of the called node's runtime, which dies with it.
        let net = Arc::clone(&self);
        drop(runtime.spawn(async move {
            if let Ok(answer) = answered.await {
                let waiting = net.state().waiting.take(number);
                if let Some(relayed) = waiting {
                    let _ = relayed.send(answer);
                }
            }
        }));
        let reply = reply
            .await
            .map_err(|_| Status::unavailable("the node stopped while it served the call"))?;
        tokio::time::sleep(self.latency()).await;
        if self.is_cut(to, from) {
            return std::future::pending().await;
        }
        reply
    }
}

/// A node attached to the network.
#[derive(Debug, Clone)]
struct Attached {
    id: NodeId,
    inbox: mpsc::UnboundedSender<Delivery>,
    runtime: Handle,
}

/// A call on its way, before its answer channel exists.
struct Call {
    method: PeerMethod,
    request: Request<Blob>,
}

/// One node's end of the network.
struct Link {
    net: Arc<Net>,
    from: NodeId,
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link").field("from", &self.from).finish()
    }
}

impl MemoryNetwork for Link {
    fn call(
        &self,
        addr: &str,
        method: PeerMethod,
        request: Request<Blob>,
    ) -> BoxFuture<'static, Answer> {
        let call = Call { method, request };
        Box::pin(Arc::clone(&self.net).carry(self.from, addr.to_string(), call))
    }
}
