//! How the simulation's clients reach a node: each running node takes calls from an inbox of
//! its own (in place of the HTTP API) and serves each on a task of its runtime. A call to a node
//! that does not run is refused at once; one that gets no answer in time ends unanswered. Its
//! caller waits outside the node's tasks ([`Waiting`]): a crash ends it as a closed connection
//! ([`Api::crashed`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use raftq_engine::{Command, EngineError};
use raftq_node::{
    Change, ChangeResult, GroupDigest, Node, NodeError, NodeId, NodeStatus, Query, QueryResult,
    Response,
};
use tokio::sync::mpsc;

use crate::waiting::Waiting;

/// How long a client waits for an answer before it gives the call up (its outcome is then
/// unknown), as the chaos run's clients do.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// What a client asks a node.
#[derive(Debug)]
pub enum Request {
    Write(Box<Command>),
    Read(Query),
    Status,
    /// Each group's last applied index and the digest of its applied state.
    Digests,
    Change(Change),
}

/// A node's answer, one per kind of [`Request`].
#[derive(Debug)]
pub enum Reply {
    Write(Result<Response, NodeError>),
    Read(Result<Result<QueryResult, EngineError>, NodeError>),
    Status(Box<NodeStatus>),
    Digests(Result<Vec<GroupDigest>, NodeError>),
    Change(Result<ChangeResult, NodeError>),
}

/// Why a call got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No node ran there: nothing was asked.
    #[error("node {0} does not run")]
    Refused(NodeId),
    /// The node stopped while it served the call, or did not answer in time: it may have done
    /// what was asked.
    #[error("node {0} gave no answer")]
    NoAnswer(NodeId),
}

/// A call on its way to a node: what is asked, and the number its answer goes back under.
type Call = (Request, u64);

/// The inboxes of the running nodes, and the callers waiting for an answer.
#[derive(Debug, Clone, Default)]
pub struct Api {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    inboxes: BTreeMap<NodeId, mpsc::UnboundedSender<Call>>,
    waiting: Waiting<Reply>,
}

impl Api {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks node `id`, waiting up to [`REQUEST_TIMEOUT`] for its answer.
    pub async fn call(&self, id: NodeId, request: Request) -> Result<Reply, CallError> {
        let (number, answered) = {
            let mut state = self.state();
            let inbox = state
                .inboxes
                .get(&id)
                .cloned()
                .ok_or(CallError::Refused(id))?;
            let (number, answered) = state.waiting.add(id);
            if inbox.send((request, number)).is_err() {
                state.waiting.take(number);
                return Err(CallError::Refused(id));
            }
            (number, answered)
        };
        let reply = tokio::time::timeout(REQUEST_TIMEOUT, answered).await;
        self.state().waiting.take(number);
        match reply {
            Ok(Ok(reply)) => Ok(reply),
            _ => Err(CallError::NoAnswer(id)),
        }
    }

    /// Serves the calls to node `id` on tasks of the current runtime until that runtime ends;
    /// calls from then on are refused.
    pub async fn serve(&self, id: NodeId, node: Arc<Node>) {
        let (inbox, mut calls) = mpsc::unbounded_channel::<Call>();
        self.state().inboxes.insert(id, inbox);
        while let Some((request, number)) = calls.recv().await {
            let node = Arc::clone(&node);
            let api = self.clone();
            tokio::spawn(async move {
                let reply = answer_to(&node, request).await;
                let waiting = api.state().waiting.take(number);
                if let Some(answer) = waiting {
                    let _ = answer.send(reply);
                }
            });
        }
    }

    /// Ends every call node `id` was serving, oldest first, unanswered: the node crashed.
    pub fn crashed(&self, id: NodeId) {
        let ended = self.state().waiting.crashed(id);
        drop(ended);
    }
}

async fn answer_to(node: &Node, request: Request) -> Reply {
    match request {
        Request::Write(command) => Reply::Write(node.write(*command).await),
        Request::Read(query) => Reply::Read(node.read(query).await),
        Request::Status => Reply::Status(Box::new(node.status().await)),
        Request::Digests => Reply::Digests(node.digests()),
        Request::Change(change) => Reply::Change(node.change_membership(change).await),
    }
}
