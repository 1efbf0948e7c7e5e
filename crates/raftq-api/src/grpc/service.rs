//! The rpc handlers of `raftq.v1.Queues`. Each authenticates the call, decodes its request with
//! `convert`, runs the operation of `ops` that the REST route of the same name runs, and converts
//! the same response shape to protobuf. Errors become statuses through `error`.

use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use raftq_node::Change;

use super::convert;
use super::pb;
use super::pb::queues_server::Queues;
use crate::error::ApiError;
use crate::json;
use crate::keys::Principal;
use crate::ops::{Listing, ReceiveOptions};
use crate::shared::AppState;
use crate::status;
use crate::throttle::Caller;

/// What a handler answers.
type Reply<T> = Result<Response<T>, Status>;

/// The results of a `SendMessageStream`, in request order.
type SendResults = Pin<Box<dyn Stream<Item = Result<pb::SendMessageStreamResult, Status>> + Send>>;
/// The chunks of a backup file, in order.
type BackupChunks = Pin<Box<dyn Stream<Item = Result<pb::BackupChunk, Status>> + Send>>;

/// Sends of one `SendMessageStream` in flight at once, at most: the stream reads no further
/// request until the oldest of them is answered.
const STREAM_IN_FLIGHT: usize = 1024;

/// The service, over the state the REST routes share.
pub struct QueuesService {
    state: AppState,
}

impl QueuesService {
    pub fn new(state: AppState) -> QueuesService {
        QueuesService { state }
    }

    /// The account a call is made for (from `authorization: Bearer <key>`) and its request;
    /// refuses the call with `UNAUTHENTICATED` when its key is missing or unknown.
    fn open<T>(&self, request: Request<T>) -> Result<(String, T), Status> {
        let (principal, request) = self.principal(request)?;
        Ok((principal.account, request))
    }

    /// The request of a cluster operation; refuses the call with `PERMISSION_DENIED` unless its
    /// key is an admin's.
    fn open_admin<T>(&self, request: Request<T>) -> Result<T, Status> {
        let (principal, request) = self.principal(request)?;
        principal.require_admin()?;
        Ok(request)
    }

    /// The account a call on one queue is made for, the queue it names (refused with
    /// `invalid_argument` when empty) and the rest of its request.
    fn open_queue<T: OnQueue>(&self, request: Request<T>) -> Result<(String, String, T), Status> {
        let (account, mut request) = self.open(request)?;
        let queue = convert::queue(std::mem::take(request.queue()))?;
        Ok((account, queue, request))
    }

    fn principal<T>(&self, request: Request<T>) -> Result<(Principal, T), Status> {
        let header = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes());
        let principal = self.state.api.keys.authenticate(header)?;
        Ok((principal, request.into_inner()))
    }
}

/// A request on one queue, named by its `queue` field.
trait OnQueue {
    fn queue(&mut self) -> &mut String;
}

macro_rules! on_queue {
    ($($request:ident),* $(,)?) => {$(
        impl OnQueue for pb::$request {
            fn queue(&mut self) -> &mut String {
                &mut self.queue
            }
        }
    )*};
}

on_queue!(
    GetQueueRequest,
    DeleteQueueRequest,
    ListDeadLetterSourcesRequest,
    ReceiveMessagesRequest,
    AckRequest,
    ChangeLeaseRequest,
    PeekMessagesRequest,
    ListScheduledMessagesRequest,
    CancelScheduledMessageRequest,
    PurgeQueueRequest,
    GetQueueStatsRequest,
    ListMoveTasksRequest,
    CancelMoveTaskRequest,
);

fn reply<T>(message: impl Into<T>) -> Reply<T> {
    Ok(Response::new(message.into()))
}

#[tonic::async_trait]
impl Queues for QueuesService {
    async fn create_queue(&self, request: Request<pb::CreateQueueRequest>) -> Reply<pb::Queue> {
        let (account, r) = self.open(request)?;
        let view = self.state.create_queue(account, r.into()).await?;
        reply(json::Queue::new(&view))
    }

    async fn list_queues(
        &self,
        request: Request<pb::ListQueuesRequest>,
    ) -> Reply<pb::ListQueuesResponse> {
        let (account, r) = self.open(request)?;
        let views = self.state.list_queues(account, r.prefix).await?;
        reply(json::QueueList::new(&views))
    }

    async fn get_queue(&self, request: Request<pb::GetQueueRequest>) -> Reply<pb::Queue> {
        let (account, queue, _) = self.open_queue(request)?;
        let view = self.state.get_queue(account, queue).await?;
        reply(json::Queue::new(&view))
    }

    async fn patch_queue(&self, request: Request<pb::PatchQueueRequest>) -> Reply<pb::Queue> {
        let (account, r) = self.open(request)?;
        let (queue, attributes) = convert::patch(r)?;
        let view = self.state.patch_queue(account, queue, attributes).await?;
        reply(json::Queue::new(&view))
    }

    async fn delete_queue(
        &self,
        request: Request<pb::DeleteQueueRequest>,
    ) -> Reply<pb::DeleteQueueResponse> {
        let (account, queue, _) = self.open_queue(request)?;
        self.state.delete_queue(account, queue).await?;
        reply(pb::DeleteQueueResponse {})
    }

    async fn list_dead_letter_sources(
        &self,
        request: Request<pb::ListDeadLetterSourcesRequest>,
    ) -> Reply<pb::ListDeadLetterSourcesResponse> {
        let (account, queue, _) = self.open_queue(request)?;
        let queues = self.state.dead_letter_sources(account, queue).await?;
        reply(json::RefList { queues })
    }

    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Reply<pb::SendMessageResponse> {
        let (account, r) = self.open(request)?;
        let (queue, message) = convert::send(r)?;
        let sent = self.state.send(account, queue, message).await?;
        reply(json::Sent::new(&sent))
    }

    type SendMessageStreamStream = SendResults;

    async fn send_message_stream(
        &self,
        request: Request<Streaming<pb::SendMessageRequest>>,
    ) -> Reply<SendResults> {
        let (account, requests) = self.open(request)?;
        let state = self.state.clone();
        let results = requests
            .map(move |request| {
                let (state, account) = (state.clone(), account.clone());
                async move {
                    // A request that cannot be read ends the stream; a send that fails does not.
                    let request = request?;
                    let outcome = async {
                        let (queue, message) = convert::send(request)?;
                        state.send(account, queue, message).await
                    };
                    Ok(convert::stream_result(outcome.await))
                }
            })
            .buffered(STREAM_IN_FLIGHT);
        Ok(Response::new(Box::pin(results)))
    }

    async fn send_message_batch(
        &self,
        request: Request<pb::SendMessageBatchRequest>,
    ) -> Reply<pb::SendMessageBatchResponse> {
        let (account, r) = self.open(request)?;
        let (queue, entries) = convert::send_batch(r)?;
        let results = self.state.send_batch(account, queue, entries).await?;
        reply(pb::SendMessageBatchResponse {
            results: results
                .into_iter()
                .map(|r| json::BatchEntryResult::new(r).into())
                .collect(),
        })
    }

    async fn receive_messages(
        &self,
        request: Request<pb::ReceiveMessagesRequest>,
    ) -> Reply<pb::ReceiveMessagesResponse> {
        let caller = request
            .extensions()
            .get::<Caller>()
            .copied()
            .unwrap_or_default();
        let (account, queue, r) = self.open_queue(request)?;
        let options = ReceiveOptions {
            max_messages: r.max_messages,
            lease_seconds: r.lease_seconds,
            wait_seconds: r.wait_seconds,
            receive_attempt_id: r.receive_attempt_id,
            caller,
        };
        let received = self.state.receive(account, queue, options).await?;
        reply(json::Delivered::new(&received)?)
    }

    async fn ack(&self, request: Request<pb::AckRequest>) -> Reply<pb::AckResponse> {
        let (account, queue, r) = self.open_queue(request)?;
        let results = self.state.ack(account, queue, r.receipts).await?;
        reply(pb::AckResponse {
            results: results
                .into_iter()
                .map(|r| json::AckEntryResult::new(r).into())
                .collect(),
        })
    }

    async fn change_lease(
        &self,
        request: Request<pb::ChangeLeaseRequest>,
    ) -> Reply<pb::ChangeLeaseResponse> {
        let (account, queue, r) = self.open_queue(request)?;
        let changed = self
            .state
            .change_lease(account, queue, r.receipt, r.lease_seconds, r.delay_seconds)
            .await?;
        reply(json::LeaseChanged::new(changed))
    }

    async fn peek_messages(
        &self,
        request: Request<pb::PeekMessagesRequest>,
    ) -> Reply<pb::PeekMessagesResponse> {
        let (account, queue, r) = self.open_queue(request)?;
        let messages = self
            .state
            .list_messages(account, queue, Listing::All, (r.after, r.limit))
            .await?;
        reply(json::Peeked::new(&messages))
    }

    async fn list_scheduled_messages(
        &self,
        request: Request<pb::ListScheduledMessagesRequest>,
    ) -> Reply<pb::ListScheduledMessagesResponse> {
        let (account, queue, r) = self.open_queue(request)?;
        let messages = self
            .state
            .list_messages(account, queue, Listing::Scheduled, (r.after, r.limit))
            .await?;
        reply(json::Peeked::new(&messages))
    }

    async fn cancel_scheduled_message(
        &self,
        request: Request<pb::CancelScheduledMessageRequest>,
    ) -> Reply<pb::CancelScheduledMessageResponse> {
        let (account, queue, r) = self.open_queue(request)?;
        self.state
            .cancel_scheduled(account, queue, &r.message_id)
            .await?;
        reply(pb::CancelScheduledMessageResponse {})
    }

    async fn purge_queue(
        &self,
        request: Request<pb::PurgeQueueRequest>,
    ) -> Reply<pb::PurgeQueueResponse> {
        let (account, queue, _) = self.open_queue(request)?;
        self.state.purge(account, queue).await?;
        reply(pb::PurgeQueueResponse {})
    }

    async fn get_queue_stats(
        &self,
        request: Request<pb::GetQueueStatsRequest>,
    ) -> Reply<pb::QueueStats> {
        let (account, queue, _) = self.open_queue(request)?;
        let stats = self.state.queue_stats(account, queue).await?;
        reply(convert::stats(stats))
    }

    async fn start_move_task(
        &self,
        request: Request<pb::StartMoveTaskRequest>,
    ) -> Reply<pb::MoveTask> {
        let (account, r) = self.open(request)?;
        let (queue, task) = convert::start_move_task(r)?;
        let task = self.state.start_move_task(account, queue, task).await?;
        reply(json::MoveTask::new(&task))
    }

    async fn list_move_tasks(
        &self,
        request: Request<pb::ListMoveTasksRequest>,
    ) -> Reply<pb::ListMoveTasksResponse> {
        let (account, queue, _) = self.open_queue(request)?;
        let tasks = self.state.list_move_tasks(account, queue).await?;
        reply(json::MoveTaskList::new(&tasks))
    }

    async fn cancel_move_task(
        &self,
        request: Request<pb::CancelMoveTaskRequest>,
    ) -> Reply<pb::MoveTask> {
        let (account, queue, r) = self.open_queue(request)?;
        let task = self
            .state
            .cancel_move_task(account, Some(queue), r.task_handle)
            .await?;
        reply(json::MoveTask::new(&task))
    }

    async fn get_cluster(&self, request: Request<pb::GetClusterRequest>) -> Reply<pb::Cluster> {
        let (principal, _) = self.principal(request)?;
        let status = status::of(&self.state.api.node, &self.state.api.region).await;
        reply(status.shown_to(&principal))
    }

    async fn list_accounts(
        &self,
        request: Request<pb::ListAccountsRequest>,
    ) -> Reply<pb::ListAccountsResponse> {
        self.open_admin(request)?;
        let accounts = self.state.accounts().await?;
        reply(pb::ListAccountsResponse {
            accounts: accounts
                .into_iter()
                .map(|a| pb::AccountEntry {
                    account: a.account,
                    queues: a.queues as u64,
                })
                .collect(),
        })
    }

    type BackupStream = BackupChunks;

    async fn backup(&self, request: Request<pb::BackupRequest>) -> Reply<BackupChunks> {
        self.open_admin(request)?;
        let chunks = crate::backup::chunks(self.state.api.node.clone()).await?;
        let chunks = chunks.map(|chunk| match chunk {
            Ok(data) => Ok(pb::BackupChunk {
                data: data.to_vec(),
            }),
            Err(e) => Err(Status::from(ApiError::from(e))),
        });
        Ok(Response::new(Box::pin(chunks)))
    }

    async fn add_node(&self, request: Request<pb::AddNodeRequest>) -> Reply<pb::Cluster> {
        let r = self.open_admin(request)?;
        let change = Change::Add {
            id: r.id,
            raft_addr: r.raft_addr,
        };
        reply(self.state.change_membership(change).await?)
    }

    async fn drain_node(&self, request: Request<pb::DrainNodeRequest>) -> Reply<pb::Cluster> {
        let r = self.open_admin(request)?;
        reply(self.state.drain(r.id, true).await?)
    }

    async fn undrain_node(&self, request: Request<pb::DrainNodeRequest>) -> Reply<pb::Cluster> {
        let r = self.open_admin(request)?;
        reply(self.state.drain(r.id, false).await?)
    }

    async fn remove_node(&self, request: Request<pb::RemoveNodeRequest>) -> Reply<pb::Cluster> {
        let r = self.open_admin(request)?;
        reply(
            self.state
                .change_membership(Change::Remove { id: r.id })
                .await?,
        )
    }
}
