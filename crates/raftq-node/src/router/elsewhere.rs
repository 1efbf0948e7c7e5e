//! Queues of other groups that a request names: a dead-letter target, the sources of an allow
//! policy or a move task's destination in another group than the request's queue, which the
//! router reads in their groups and hands to the queue's group with the command
//! (`Command::WithRemote`); and the dead-letter sources a queue has in other groups, which its
//! listing of sources, a move task back to them and its deletion must know of.

use futures_util::future::join_all;
use raftq_engine::command::{Elsewhere, RemoteQueue};
use raftq_engine::model::{crn, AllowPolicy, QueueRef};
use raftq_engine::{Command, EngineError};
use raftq_store::GroupId;

use crate::error::NodeError;
use crate::query::question;

use super::{Route, Router};

impl Router {
    /// `command`, on the queue `route` leads to, with the queues of other groups it names
    /// described (see the module); as it is when it names none.
    pub(super) async fn with_remote(
        &self,
        command: Command,
        route: Route,
    ) -> Result<Command, NodeError> {
        let (account, references, back_to_sources) = match &command {
            Command::CreateQueue {
                account,
                attributes,
                ..
            }
            | Command::PatchQueue {
                account,
                attributes,
                ..
            } => {
                let target = (attributes.redrive_policy.as_ref())
                    .and_then(|p| p.as_ref()?.dead_letter_target.clone());
                let sources = (attributes.redrive_allow_policy.as_ref())
                    .and_then(|p| p.source_queues.clone())
                    .unwrap_or_default();
                let references: Vec<String> = target.into_iter().chain(sources).collect();
                (account, references, false)
            }
            Command::StartMoveTask { account, task, .. } => match &task.destination {
                Some(destination) => (account, vec![destination.clone()], false),
                None => (account, Vec::new(), true),
            },
            _ => return Ok(command),
        };
        let mut elsewhere = Elsewhere::default();
        for reference in references {
            if let Some(queue) = self.describe(account, &reference, route.group).await? {
                elsewhere.queues.push(queue);
            }
        }
        if back_to_sources {
            elsewhere.has_sources = !self.sources_elsewhere(account, route).await?.is_empty();
        }
        if elsewhere == Elsewhere::default() {
            return Ok(command);
        }
        Ok(Command::WithRemote {
            elsewhere,
            command: Box::new(command),
        })
    }

    /// The queue `reference` names, as its group shows it, when that is another group than
    /// `group`; `None` for a queue of `group` or of no group (the command's group then finds
    /// it, or says it names no queue).
    async fn describe(
        &self,
        account: &str,
        reference: &str,
        group: GroupId,
    ) -> Result<Option<RemoteQueue>, NodeError> {
        let Some(route) = self.locate(account, reference).filter(|r| r.group != group) else {
            return Ok(None);
        };
        let queue = crn(&self.region, account, route.id);
        let (query, answer) = question::get_queue(account.to_string(), queue).split();
        let view = match self.route_to(route.group, &query).await? {
            Ok(result) => answer.take(result),
            Err(EngineError::QueueNotFound(_)) => return Ok(None),
            Err(refused) => return Err(NodeError::Unavailable(refused.to_string())),
        };
        Ok(Some(RemoteQueue {
            reference: reference.to_string(),
            id: view.id,
            name: view.name,
            queue_type: view.queue_type,
            redrive_allow_policy: AllowPolicy::of_view(&view.redrive_allow_policy),
        }))
    }

    /// The queues of other groups than the queue's whose dead-letter target it is.
    pub(super) async fn sources_elsewhere(
        &self,
        account: &str,
        route: Route,
    ) -> Result<Vec<QueueRef>, NodeError> {
        let Some(groups) = self.laid_out() else {
            return Ok(Vec::new());
        };
        let (query, answer) = question::remote_sources(account.to_string(), route.id).split();
        let others = groups.into_iter().filter(|g| *g != route.group);
        let asked = others.map(|group| self.route_to(group, &query));
        let mut sources = Vec::new();
        for reply in join_all(asked).await {
            match reply? {
                Ok(result) => sources.extend(answer.take(result)),
                Err(refused) => return Err(NodeError::Unavailable(refused.to_string())),
            }
        }
        Ok(sources)
    }
}
