//! Where a client request goes: to the Raft group that holds its queue.
//!
//! The router reads the queue's group and id from this node's replica of the metadata group
//! (group 1), which may lag, and replaces the queue reference in the request with the queue's
//! CRN (its id). An id exists in one group only, so a request sent on a stale route finds no
//! queue where it lands and changes nothing there: the group answers `queue_not_found`,
//! the router brings its replica of group 1 up to its leader's applied index and, if the queue's
//! entry changed, sends the request again on the fresh route; otherwise the client gets
//! `queue_not_found` under the reference it gave.
//!
//! - A creation reserves the name in the directory (group 1 chooses the group, or takes the
//!   group of the queue's dead-letter queue, so that redrive stays within one group), creates
//!   the queue in that group, then confirms the reservation, or releases it when the group
//!   refused (not when a queue of the name exists: a concurrent creation may have made it).
//! - A dead-letter queue, an allowed source or a move task's destination in another group than
//!   the request's queue is read in its group and handed to the queue's group with the command
//!   ([`elsewhere`]); messages then move there through the source group's outbox, which each
//!   group's leader delivers ([`outbox`]). A queue's dead-letter sources are those of its group
//!   and those other groups name it in; a queue that is the dead-letter queue of a queue of
//!   another group is refused deletion, as one of its own group is.
//! - A deletion retires the queue's entry in the directory (`Retire`), deletes the queue in its
//!   group, then takes the entry out (`Deregister`). A creation that finds its name's entry
//!   retired finishes that deletion first (the deleting node may have stopped, or be about to
//!   deregister), then reserves the name anew: it never takes over the entry of a queue being
//!   deleted, which the deletion's last step would take out from under it.
//! - An entry left half made for a long while (`NodeConfig::settle_after`: a creation or a
//!   deletion whose client stopped between its steps) is settled by group 1's leader
//!   ([`settle`]): a reservation whose queue its group holds is confirmed, one whose queue it
//!   does not is released, and a retired entry's deletion is finished.
//! - Listing queues and accounts asks every group and merges the answers.
//! - A long poll is served whole by a replica of its queue's group: this node's, or a member's
//!   (see `member::longpoll`). Of the steps a caller may write itself, a parked receive's end
//!   goes to the group it parked in, and on a node with no replica of the queue's group a
//!   `ReceiveWait` is a plain receive (it answers at once: no replica here applies its answer).
//! - A request on a group this node takes no part in (in clusters larger than a group's
//!   replicas) is forwarded to the group's last known leader, or to its members in turn.
//!
//! Until the placement is bootstrapped (a cluster of one group), every request goes to group 1
//! as it is. Once it is, group 1 creates only queues reserved in the directory, so a creation
//! that a bootstrap overtook is refused there and made again through the directory.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::future::join_all;
use raftq_engine::placement::{
    PlacementCommand, PlacementError, PlacementOutcome, QueueEntry, QueueEntryState,
};
use raftq_engine::{Command, EngineError, Outcome};
use raftq_store::{Delivered, GroupId, NodeId, Response, WaitSlot};
use tokio::sync::watch;
use tokio::time::Instant;
use uuid::Uuid;

use crate::error::NodeError;
use crate::member::longpoll::LongPoll;
use crate::member::routing::{ForwardFailure, ForwardReply, Forwarded, Routed};
use crate::member::{GroupCore, Groups};
use crate::network::PeerClient;
use crate::pace::Pace;
use crate::query::{question, Query, QueryResult};

mod elsewhere;
mod outbox;

pub(crate) use outbox::deliver;

/// Pause between rounds over a remote group's members while none of them leads.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Where a request on a queue goes: the queue's group and id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    group: GroupId,
    id: Uuid,
}

/// A request on one queue, which the router sends to the queue's group.
trait OnQueue: Routed<Reply: QueueReply> + Clone {
    /// The account and the queue reference (see `Command::queue_mut`).
    fn queue_mut(&mut self) -> Option<(&str, &mut String)>;
}

/// A group's answer to a request on one queue, which may say it holds no such queue.
trait QueueReply {
    /// Whether the group answered that it holds no such queue.
    fn not_found(&self) -> bool;

    /// A not-found answer, told under `reference`.
    fn not_found_as(reference: &str) -> Self;
}

impl OnQueue for Command {
    fn queue_mut(&mut self) -> Option<(&str, &mut String)> {
        Command::queue_mut(self)
    }
}

impl OnQueue for Query {
    fn queue_mut(&mut self) -> Option<(&str, &mut String)> {
        Query::queue_mut(self)
    }
}

impl OnQueue for LongPoll {
    fn queue_mut(&mut self) -> Option<(&str, &mut String)> {
        LongPoll::queue_mut(self)
    }
}

impl QueueReply for Response {
    fn not_found(&self) -> bool {
        self.result
            .as_ref()
            .is_some_and(|result| result.not_found())
    }

    fn not_found_as(reference: &str) -> Response {
        Response {
            result: Some(QueueReply::not_found_as(reference)),
            payloads: Vec::new(),
        }
    }
}

impl<T> QueueReply for Result<T, EngineError> {
    fn not_found(&self) -> bool {
        matches!(self, Err(EngineError::QueueNotFound(_)))
    }

    fn not_found_as(reference: &str) -> Self {
        Err(EngineError::QueueNotFound(reference.to_string()))
    }
}

/// How long the group of a parked receive is remembered: longer than any wait (20 s) lasts,
/// and the end of a wait (`EndWait`) comes after its deadline.
const WAIT_KEPT: Duration = Duration::from_secs(60);

/// The data groups recent parked receives wait in, for their `EndWait`: an end is rare (the
/// engine ends a wait at its deadline and answers it), so entries are kept for
/// [`WAIT_KEPT`] rather than removed when answered; a waiter not found is in group 1 (or
/// ended long ago, and its end changes nothing).
#[derive(Default)]
struct Waits {
    groups: HashMap<Uuid, GroupId>,
    /// Waiters in the order they parked, to forget them after [`WAIT_KEPT`].
    order: VecDeque<(Instant, Uuid)>,
}

impl Waits {
    fn insert(&mut self, waiter: Uuid, group: GroupId) {
        let now = Instant::now();
        while let Some((at, old)) = self.order.front().copied() {
            if now.duration_since(at) < WAIT_KEPT {
                break;
            }
            self.order.pop_front();
            self.groups.remove(&old);
        }
        self.order.push_back((now, waiter));
        self.groups.insert(waiter, group);
    }

    fn group_of(&self, waiter: &Uuid) -> GroupId {
        self.groups.get(waiter).copied().unwrap_or(GroupId::FIRST)
    }
}

/// A group's last seen leader, its members, and the nodes' addresses.
type Members = (Option<NodeId>, Vec<NodeId>, BTreeMap<NodeId, String>);

/// The router of one node (see the module).
pub(crate) struct Router {
    /// Group 1, whose applied placement tells the routes.
    metadata: Arc<GroupCore>,
    /// The region the cluster serves, for the CRN a request's queue is stamped with.
    region: String,
    groups: Arc<Groups>,
    /// The data group each recent parked receive of this node's clients waits in.
    waits: Mutex<Waits>,
}

impl Router {
    pub fn new(metadata: Arc<GroupCore>, groups: Arc<Groups>, region: String) -> Router {
        Router {
            metadata,
            region,
            groups,
            waits: Mutex::default(),
        }
    }

    /// Commits `command` in the group of its queue.
    pub async fn write(&self, command: Command) -> Result<Response, NodeError> {
        match &command {
            Command::CreateQueue { .. } => self.create(command).await,
            Command::DeleteQueue { .. } => self.delete(command).await,
            Command::EndWait { waiter } => {
                let group = self.waits().group_of(waiter);
                self.route_to(group, &command).await
            }
            Command::ReceiveWait { .. } => self.receive_wait(command).await,
            Command::PatchQueue { account, queue, .. }
            | Command::StartMoveTask { account, queue, .. } => {
                let command = match self.route_of(account, queue) {
                    Some(route) => self.with_remote(command, route).await?,
                    None => command,
                };
                Ok(self.on_queue(command).await?.0)
            }
            _ => Ok(self.on_queue(command).await?.0),
        }
    }

    /// Parks a receive in its queue's group, its group remembered before it is sent (an end
    /// that follows a failed or abandoned park must find it). On a node with no replica of
    /// the group, whose apply could not answer the wait, it is a plain receive instead: what is
    /// deliverable now, or nothing (the client polls again).
    async fn receive_wait(&self, command: Command) -> Result<Response, NodeError> {
        let Command::ReceiveWait {
            account,
            queue,
            max_messages,
            lease_seconds,
            waiter,
            ..
        } = &command
        else {
            unreachable!("receive_wait is given parked receives only");
        };
        let Some(route) = self.route_of(account, queue) else {
            return Ok(self.on_queue(command).await?.0);
        };
        if self.groups.get(route.group).is_none() {
            let receive = Command::Receive {
                account: account.clone(),
                queue: queue.clone(),
                max_messages: *max_messages,
                lease_seconds: *lease_seconds,
                attempt_id: None,
            };
            return Ok(self.on_queue(receive).await?.0);
        }
        self.waits().insert(*waiter, route.group);
        Ok(self.on_queue(command).await?.0)
    }

    /// Serves a long poll in a replica of its queue's group: this node's, or one of the group's
    /// members' (see `member::longpoll`).
    pub async fn long_poll(
        &self,
        poll: LongPoll,
    ) -> Result<Result<Delivered, EngineError>, NodeError> {
        Ok(self.on_queue(poll).await?.0)
    }

    /// Answers `query` from the group of its queue, or from every group for the listings.
    pub async fn read(&self, query: Query) -> Result<Result<QueryResult, EngineError>, NodeError> {
        match &query {
            Query::ListQueues { .. } | Query::Accounts => match self.laid_out() {
                Some(groups) => self.every_group(groups, &query).await,
                None => self.metadata.route(&query).await,
            },
            Query::DeadLetterSources { account, .. } => {
                let account = account.clone();
                let (answer, route) = self.on_queue(query).await?;
                match (answer, route) {
                    (Ok(QueryResult::Refs(mut sources)), Some(route)) => {
                        sources.extend(self.sources_elsewhere(&account, route).await?);
                        sources.sort_by(|a, b| a.name.cmp(&b.name));
                        Ok(Ok(QueryResult::Refs(sources)))
                    }
                    (answer, _) => Ok(answer),
                }
            }
            _ => Ok(self.on_queue(query).await?.0),
        }
    }

    /// The slot that gets the answer to the parked receive `waiter` on queue `queue` of
    /// `account`, from this node's replica of the queue's group (group 1's when this node has
    /// none: the wait is then ended at its deadline and answers what this node applied). A
    /// queue this node's directory does not hold yet is looked up again after a refresh.
    pub async fn await_answer(&self, account: &str, queue: &str, waiter: Uuid) -> WaitSlot {
        let mut route = self.route_of(account, queue);
        if route.is_none() && self.groups.laid_out() && self.refresh().await.is_ok() {
            route = self.locate(account, queue);
        }
        let local = route.and_then(|route| self.groups.get(route.group));
        let core = local.unwrap_or_else(|| Arc::clone(&self.metadata));
        core.reader.waiters().register(waiter)
    }

    fn waits(&self) -> std::sync::MutexGuard<'_, Waits> {
        self.waits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// [`Router::locate`], without a look at the directory while this node has not seen the
    /// placement bootstrapped (every queue is then group 1's): the request path of a cluster
    /// of one group takes no lock of the state machine.
    fn route_of(&self, account: &str, reference: &str) -> Option<Route> {
        match self.groups.laid_out() {
            true => self.locate(account, reference),
            false => None,
        }
    }

    /// The route of the queue `reference` of `account` in this node's replica of the
    /// directory; `None` when it has no entry (or no directory: a cluster of one group).
    fn locate(&self, account: &str, reference: &str) -> Option<Route> {
        let entry = self.metadata.reader.with_engine(|engine| {
            let entry = engine.locate(account, reference)?;
            Some(Route {
                group: GroupId(entry.group),
                id: entry.id,
            })
        });
        entry.flatten()
    }

    /// Every group of the placement, when it is bootstrapped.
    fn laid_out(&self) -> Option<Vec<GroupId>> {
        let groups = self.metadata.reader.with_engine(|engine| {
            let groups = engine.placement().groups().keys();
            groups.map(|g| GroupId(*g)).collect::<Vec<_>>()
        })?;
        (!groups.is_empty()).then_some(groups)
    }

    /// Sends `request` to its queue's group, on a fresh route when the first was stale (see
    /// the module); returns the answer and the route it took (`None`: group 1, with the
    /// reference as the client gave it, the queue being in no directory).
    async fn on_queue<R: OnQueue>(
        &self,
        mut request: R,
    ) -> Result<(R::Reply, Option<Route>), NodeError> {
        let Some((account, reference)) = request
            .queue_mut()
            .map(|(account, queue)| (account.to_string(), queue.clone()))
        else {
            return Ok((self.metadata.route(&request).await?, None));
        };
        let mut tried = None;
        loop {
            let route = match tried {
                Some(_) => self.locate(&account, &reference),
                None => self.route_of(&account, &reference),
            };
            if tried == Some(route) {
                return Ok((R::Reply::not_found_as(&reference), route));
            }
            if let Some((_, queue)) = request.queue_mut() {
                // A CRN names a queue by id alone: a bare UUID could also be a queue's name.
                let stamp = |r: Route| raftq_engine::model::crn(&self.region, &account, r.id);
                *queue = route.map_or_else(|| reference.clone(), stamp);
            }
            let group = route.map_or(GroupId::FIRST, |r| r.group);
            let reply = self.route_to(group, &request).await?;
            if !reply.not_found() {
                return Ok((reply, route));
            }
            if tried.is_some() || self.laid_out().is_none() {
                return Ok((R::Reply::not_found_as(&reference), route));
            }
            tried = Some(route);
            self.refresh().await?;
        }
    }

    /// Creates a queue in two steps through the directory (see the module).
    async fn create(&self, mut command: Command) -> Result<Response, NodeError> {
        if self.laid_out().is_none() {
            // Group 1 refuses a creation that the placement's bootstrap overtook: it then goes
            // through the directory.
            let direct = self.metadata.route(&command).await?;
            let overtaken = matches!(
                direct.result,
                Some(Err(EngineError::Placement(PlacementError::Unreserved(_))))
            );
            if !overtaken {
                return Ok(direct);
            }
        }
        let Command::CreateQueue {
            account,
            queue_id,
            name,
            attributes,
        } = &mut command
        else {
            unreachable!("create is given creations only");
        };
        // A queue goes to the group of its dead-letter queue: a lease that ends moves the
        // message within one group.
        let dead_letters = (attributes.redrive_policy.as_ref())
            .and_then(|policy| policy.as_ref()?.dead_letter_target.as_deref())
            .and_then(|target| self.locate(account, target));
        let reserve = PlacementCommand::Reserve {
            account: account.clone(),
            name: name.clone(),
            id: *queue_id,
            group: dead_letters.map(|route| route.group.0),
        };
        let (entry, existing) = match self.reserve(account, reserve).await? {
            Ok(reserved) => reserved,
            Err(refused) => return Ok(refused),
        };
        *queue_id = entry.id;
        let route = Route {
            group: GroupId(entry.group),
            id: entry.id,
        };
        let command = self.with_remote(command, route).await?;
        let created = self.route_to(GroupId(entry.group), &command).await?;
        let settle = match &created.result {
            Some(Ok(_)) if entry.state != QueueEntryState::Ready => {
                Some(PlacementCommand::Confirm { id: entry.id })
            }
            // A queue of the name exists: a concurrent creation of it may have made it.
            Some(Err(EngineError::QueueExists(_))) => None,
            Some(Err(_)) if !existing => Some(PlacementCommand::Release { id: entry.id }),
            _ => None,
        };
        if let Some(change) = settle {
            self.settle(change).await;
        }
        Ok(created)
    }

    /// Reserves a queue's name (`reserve`) in the directory: its entry and whether the name had
    /// it already, or the refusal to answer. A name whose queue is being deleted gets that
    /// deletion finished first, and is then reserved anew.
    async fn reserve(
        &self,
        account: &str,
        reserve: PlacementCommand,
    ) -> Result<Result<(QueueEntry, bool), Response>, NodeError> {
        let mut finished = false;
        loop {
            let reserved = self.place(reserve.clone()).await?;
            let (entry, existing) = match reserved.result {
                Some(Ok(Outcome::Placed(PlacementOutcome::Reserved { entry, existing }))) => {
                    (entry, existing)
                }
                _ => return Ok(Err(reserved)),
            };
            match entry.state {
                QueueEntryState::Deleting { .. } if !finished => {
                    self.finish_deletion(account, &entry).await?;
                    finished = true;
                }
                QueueEntryState::Deleting { .. } => {
                    return Err(NodeError::Unavailable(format!(
                        "queue {} is being deleted; create it again in a moment",
                        entry.name
                    )))
                }
                _ => return Ok(Ok((entry, existing))),
            }
        }
    }

    /// Finishes the deletion of the queue of `entry`, begun (the entry retired) by a deletion
    /// that has not taken it out of the directory yet, or never will (its node stopped): deletes
    /// the queue in its group, if it is still there, then its entry (or, should the group
    /// refuse, keeps the queue and confirms its entry again).
    async fn finish_deletion(&self, account: &str, entry: &QueueEntry) -> Result<(), NodeError> {
        let delete = Command::DeleteQueue {
            account: account.to_string(),
            queue: raftq_engine::model::crn(&self.region, account, entry.id),
        };
        let deleted = self.route_to(GroupId(entry.group), &delete).await?;
        self.settle_deletion(entry.id, &deleted, true).await;
        Ok(())
    }

    /// Deletes a queue in its group, then takes it out of the directory. The entry is retired
    /// first, so that a creation of the name meanwhile finishes this deletion rather than take
    /// the entry of a queue about to go for its own.
    async fn delete(&self, command: Command) -> Result<Response, NodeError> {
        let named = command
            .clone()
            .queue_mut()
            .map(|(a, q)| (a.to_string(), q.clone()));
        let retired = named.as_ref().and_then(|(a, q)| self.route_of(a, q));
        if let (Some((account, _)), Some(route)) = (&named, retired) {
            let sources = self.sources_elsewhere(account, route).await?;
            if !sources.is_empty() {
                return Ok(Response {
                    result: Some(Err(EngineError::QueueInUse { sources })),
                    payloads: Vec::new(),
                });
            }
        }
        if let Some(route) = retired {
            // Refused only when the entry went meanwhile: the deletion below finds that out.
            self.place(PlacementCommand::Retire { id: route.id })
                .await?;
        }
        let (deleted, route) = self.on_queue(command).await?;
        // Sent to group 1 by name (this node had not seen the placement yet): its entry is
        // looked up now.
        let route = route.or_else(|| {
            let (account, queue) = named.as_ref()?;
            self.locate(account, queue)
        });
        if let Some(route) = route {
            // A queue its group does not hold (a stale entry, or one being created) is left to
            // the next creation of the name.
            self.settle_deletion(route.id, &deleted, false).await;
        }
        Ok(deleted)
    }

    /// Settles the entry of queue `id` after its group answered its deletion with `deleted`:
    /// takes it out of the directory when the queue is gone (also when the group holds no such
    /// queue, if `missing_is_gone`), confirms it again when the group refused (the queue stays:
    /// a dead-letter queue in use, for one).
    async fn settle_deletion(&self, id: Uuid, deleted: &Response, missing_is_gone: bool) {
        match &deleted.result {
            Some(Ok(_)) => self.settle(PlacementCommand::Deregister { id }).await,
            Some(Err(EngineError::QueueNotFound(_))) if missing_is_gone => {
                self.settle(PlacementCommand::Deregister { id }).await
            }
            Some(Err(EngineError::QueueNotFound(_))) | None => {}
            Some(Err(_)) => self.settle(PlacementCommand::Confirm { id }).await,
        }
    }

    /// Commits a placement change in group 1.
    async fn place(&self, change: PlacementCommand) -> Result<Response, NodeError> {
        self.metadata.route(&Command::Place { change }).await
    }

    /// Commits the second step of a creation or a deletion; a failure leaves the directory
    /// entry as it was: a reservation still marked as being created (requests reach the queue
    /// all the same), or the entry of a queue deleted in its group (the next creation of the
    /// name makes the queue again under that entry).
    async fn settle(&self, change: PlacementCommand) {
        let outcome = self.place(change.clone()).await;
        let refused = match &outcome {
            Ok(response) => match &response.result {
                Some(Err(refused)) => Some(refused.to_string()),
                _ => None,
            },
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = refused {
            tracing::warn!(?change, %why, "the directory keeps the entry as it was");
        }
    }

    /// Settles the directory entries left half made for `after` or longer, by the state's time
    /// `now` (see the module); one that cannot be settled now (its group has no leader) is
    /// tried again on the next call.
    async fn settle_stale(&self, now: u64, after: Duration) {
        let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        let stale = self.metadata.reader.with_engine(|engine| {
            let queues = engine.placement().queues();
            let stale = queues.filter(|entry| match entry.state {
                QueueEntryState::Creating { at } | QueueEntryState::Deleting { at } => {
                    now.saturating_sub(at) >= after_ms
                }
                QueueEntryState::Ready => false,
            });
            stale.cloned().collect::<Vec<_>>()
        });
        for entry in stale.unwrap_or_default() {
            let account = entry.account.clone();
            let queue = raftq_engine::model::crn(&self.region, &account, entry.id);
            let settled = match entry.state {
                QueueEntryState::Creating { .. } => {
                    let (query, _) = question::get_queue(account, queue).split();
                    match self.route_to(GroupId(entry.group), &query).await {
                        Ok(Ok(_)) => Some(PlacementCommand::Confirm { id: entry.id }),
                        Ok(Err(EngineError::QueueNotFound(_))) => {
                            Some(PlacementCommand::Release { id: entry.id })
                        }
                        _ => None,
                    }
                }
                _ => {
                    if let Err(e) = self.finish_deletion(&account, &entry).await {
                        tracing::debug!(name = entry.name, error = %e, "a deletion left half made waits");
                    }
                    None
                }
            };
            if let Some(change) = settled {
                tracing::info!(
                    ?change,
                    name = entry.name,
                    "settling a creation left half made"
                );
                self.settle(change).await;
            }
        }
    }

    /// Brings this node's replica of group 1 up to its leader's applied index, so that the
    /// directory read next holds every change committed before.
    async fn refresh(&self) -> Result<(), NodeError> {
        let (query, answer) = question::applied_index().split();
        let index = match self.metadata.route(&query).await? {
            Ok(result) => answer.take(result),
            Err(refused) => return Err(NodeError::Unavailable(refused.to_string())),
        };
        self.metadata.applied_up_to(index).await
    }

    /// The index `group`'s leader applied up to (none: the group has no entry yet).
    pub async fn applied_index(&self, group: GroupId) -> Result<Option<u64>, NodeError> {
        let (query, answer) = question::applied_index().split();
        match self.route_to(group, &query).await? {
            Ok(result) => Ok(answer.take(result)),
            Err(refused) => Err(NodeError::Unavailable(refused.to_string())),
        }
    }

    /// Peer clients of `group`'s members but `except`, for calls of the group: the leader the
    /// placement last saw first.
    pub fn member_clients(
        &self,
        group: GroupId,
        except: NodeId,
    ) -> Result<Vec<PeerClient>, NodeError> {
        let (leader, mut members, nodes) = self
            .members_of(group)
            .ok_or_else(|| NodeError::Unavailable(format!("no group {group} in the placement")))?;
        members.retain(|id| *id != except);
        members.sort_by_key(|id| Some(*id) != leader);
        let forwarders = &self.metadata.node.forwarders;
        Ok(members
            .into_iter()
            .filter_map(|id| Some(forwarders.get(id, nodes.get(&id)?).in_group(group)))
            .collect())
    }

    /// Asks `query` of every group in `groups` and merges the answers (queues in name order,
    /// accounts with their queues summed); the first refusal is the answer.
    async fn every_group(
        &self,
        groups: Vec<GroupId>,
        query: &Query,
    ) -> Result<Result<QueryResult, EngineError>, NodeError> {
        let asked = groups.into_iter().map(|group| self.route_to(group, query));
        let mut queues = Vec::new();
        let mut accounts = BTreeMap::new();
        for answer in join_all(asked).await {
            match answer? {
                Ok(QueryResult::Queues(views)) => queues.extend(views),
                Ok(QueryResult::Accounts(summaries)) => {
                    for summary in summaries {
                        *accounts.entry(summary.account).or_insert(0) += summary.queues;
                    }
                }
                Ok(other) => {
                    return Err(NodeError::Unavailable(format!(
                        "a group answered a listing with {other:?}"
                    )))
                }
                Err(refused) => return Ok(Err(refused)),
            }
        }
        Ok(Ok(match query {
            Query::Accounts => QueryResult::Accounts(
                (accounts.into_iter())
                    .map(|(account, queues)| raftq_engine::model::AccountSummary {
                        account,
                        queues,
                    })
                    .collect(),
            ),
            _ => {
                queues.sort_by(|a, b| a.name.cmp(&b.name));
                QueryResult::Queues(queues)
            }
        }))
    }

    /// Runs `request` in `group`: through this node's replica, or forwarded (see
    /// [`Router::remote`]).
    async fn route_to<R: Routed>(
        &self,
        group: GroupId,
        request: &R,
    ) -> Result<R::Reply, NodeError> {
        match self.groups.get(group) {
            Some(core) => core.route(request).await,
            // Boxed: the forwarding future is large, and the futures of the front ends that
            // await a route would otherwise nest it past the compiler's depth limit.
            None => Box::pin(self.remote(group, request)).await,
        }
    }

    /// The leader the placement last saw of `group`, its members and their addresses (of group
    /// 1 before the placement is laid out: its Raft membership); `None` when the placement has
    /// no such group (or no member of it).
    fn members_of(&self, group: GroupId) -> Option<Members> {
        let members = self.metadata.reader.with_engine(|engine| {
            let placement = engine.placement();
            let entry = placement.groups().get(&group.0)?;
            let members: Vec<NodeId> = entry.members.iter().copied().collect();
            Some((entry.leader_hint, members, placement.addresses()))
        });
        let unplaced = || {
            let known = self.metadata.members();
            let members = known.nodes.keys().copied().collect();
            (self.metadata.current_leader(), members, known.nodes)
        };
        let members = match members.flatten() {
            None if group == GroupId::FIRST => Some(unplaced()),
            placed => placed,
        };
        members.filter(|(_, members, _)| !members.is_empty())
    }

    /// Runs `request` in `group`, which this node takes no part in: at the leader the
    /// placement last saw, else at each member in turn, following a member's word of who
    /// leads, until one serves it or the request's patience (`Routed::patience`) has passed.
    async fn remote<R: Routed>(&self, group: GroupId, request: &R) -> Result<R::Reply, NodeError> {
        let (mut next, members, nodes) = self
            .members_of(group)
            .ok_or_else(|| NodeError::Unavailable(format!("no group {group} in the placement")))?;
        let deadline = Instant::now() + request.patience();
        let sent = request.sent();
        let read = matches!(sent, Forwarded::Read(_));
        let mut turn = 0;
        loop {
            let target = match next.take() {
                Some(leader) => leader,
                None => {
                    if turn > 0 && turn % members.len() == 0 {
                        tokio::time::sleep(RETRY_PAUSE).await;
                    }
                    turn += 1;
                    members[(turn - 1) % members.len()]
                }
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(NodeError::Unavailable(format!(
                    "no leader of group {group} could be reached"
                )));
            }
            let Some(addr) = nodes.get(&target) else {
                continue;
            };
            let mut client = self
                .metadata
                .node
                .forwarders
                .get(target, addr)
                .in_group(group);
            let failure = ForwardFailure::of(target, &sent);
            match client
                .forward::<_, Result<ForwardReply, NodeError>>(&sent, left)
                .await
            {
                Ok(Err(NodeError::NotLeader(Some(leader)))) if leader != target => {
                    next = Some(leader);
                }
                Ok(Err(NodeError::NotLeader(_) | NodeError::Unavailable(_))) => {}
                Err(e) if read || e.unreachable() => {}
                answer => return failure.answered::<R>(answer),
            }
        }
    }
}

/// Settles the directory's half-made entries ([`Router::settle_stale`]) while this node leads
/// group 1, every quarter of `after` (at most every 30 s), until `shutdown`.
pub(crate) async fn settle(router: Arc<Router>, after: Duration, shutdown: watch::Receiver<bool>) {
    let every = (after / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let mut pace = Pace::new(every, shutdown);
    while pace.tick().await {
        if !router.metadata.is_leader() {
            continue;
        }
        if let Some(now) = router.metadata.node.clock.now() {
            router.settle_stale(now, after).await;
        }
    }
}
