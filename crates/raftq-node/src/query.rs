//! Linearizable reads: the queries a client can ask, run against the applied state with the
//! payloads joined from the store.

use std::collections::BTreeSet;

use raftq_engine::model::AccountSummary;
use raftq_engine::typed::Typed;
use raftq_engine::{
    Engine, EngineError, MessageMeta, MoveTaskView, Payload, QueueRef, QueueStats, QueueView,
};
use raftq_store::{PayloadView, StateReader};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::NodeError;

/// A read of the queue state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Query {
    GetQueue {
        account: String,
        queue: String,
    },
    ListQueues {
        account: String,
        prefix: String,
    },
    Peek {
        account: String,
        queue: String,
        after: Option<u64>,
        limit: Option<i64>,
    },
    Stats {
        account: String,
        queue: String,
    },
    DeadLetterSources {
        account: String,
        queue: String,
    },
    /// Whether a receive would deliver something now (for long polls).
    Deliverable {
        account: String,
        queue: String,
    },
    /// Every account that holds queues.
    Accounts,
    /// The last move tasks of a queue.
    MoveTasks {
        account: String,
        queue: String,
    },
    /// The storage keys of the messages of a queue that have these IDs (for a move task's
    /// filter): read from the payloads, which the engine does not keep.
    StorageKeys {
        account: String,
        queue: String,
        message_ids: Vec<Uuid>,
    },
    /// The index of the last entry applied on the leader once it has confirmed that it leads:
    /// every write committed before the query is at or below it (what a node waits to have
    /// applied before it reads a state at least that new).
    AppliedIndex,
    /// The messages scheduled by a `deliver_at` still ahead, in queue order.
    Scheduled {
        account: String,
        queue: String,
        after: Option<u64>,
        limit: Option<i64>,
    },
    /// The queues of a group whose dead-letter target is the queue `id` of another group.
    RemoteSources {
        account: String,
        id: Uuid,
    },
}

impl Query {
    /// The account and the queue reference of a query on one queue: where it is routed, and
    /// what the router replaces with the queue's id (see `Command::queue_mut`). `None` for the
    /// queries on every queue or on none.
    pub fn queue_mut(&mut self) -> Option<(&str, &mut String)> {
        match self {
            Query::GetQueue { account, queue }
            | Query::Peek { account, queue, .. }
            | Query::Stats { account, queue }
            | Query::DeadLetterSources { account, queue }
            | Query::Deliverable { account, queue }
            | Query::MoveTasks { account, queue }
            | Query::StorageKeys { account, queue, .. }
            | Query::Scheduled { account, queue, .. } => Some((account.as_str(), queue)),
            Query::ListQueues { .. }
            | Query::Accounts
            | Query::AppliedIndex
            | Query::RemoteSources { .. } => None,
        }
    }
}

/// The answer to a [`Query`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueryResult {
    Queue(Box<QueueView>),
    Queues(Vec<QueueView>),
    Messages(Vec<(MessageMeta, Payload)>),
    /// Boxed: a queue's figures per priority level make it many times the other answers.
    Stats(Box<QueueStats>),
    Refs(Vec<QueueRef>),
    Deliverable(bool),
    Accounts(Vec<AccountSummary>),
    MoveTasks(Vec<MoveTaskView>),
    StorageKeys(Vec<u64>),
    AppliedIndex(Option<u64>),
}

/// A query with the type of its answer.
pub type Question<T> = Typed<Query, QueryResult, T>;

/// The queries a client asks, typed by their answer (see [`Query`] for each).
pub mod question {
    use super::*;

    raftq_engine::typed_requests! {
        Query => QueryResult;
        fn get_queue(account: String, queue: String)
            -> Box<QueueView> = GetQueue { QueryResult::Queue(view) => view };
        fn list_queues(account: String, prefix: String)
            -> Vec<QueueView> = ListQueues { QueryResult::Queues(views) => views };
        fn peek(account: String, queue: String, after: Option<u64>, limit: Option<i64>)
            -> Vec<(MessageMeta, Payload)> = Peek { QueryResult::Messages(messages) => messages };
        fn stats(account: String, queue: String)
            -> QueueStats = Stats { QueryResult::Stats(stats) => *stats };
        fn dead_letter_sources(account: String, queue: String)
            -> Vec<QueueRef> = DeadLetterSources { QueryResult::Refs(refs) => refs };
        fn remote_sources(account: String, id: Uuid)
            -> Vec<QueueRef> = RemoteSources { QueryResult::Refs(refs) => refs };
        fn accounts()
            -> Vec<AccountSummary> = Accounts { QueryResult::Accounts(accounts) => accounts };
        fn move_tasks(account: String, queue: String)
            -> Vec<MoveTaskView> = MoveTasks { QueryResult::MoveTasks(tasks) => tasks };
        fn storage_keys(account: String, queue: String, message_ids: Vec<Uuid>)
            -> Vec<u64> = StorageKeys { QueryResult::StorageKeys(keys) => keys };
        fn scheduled(account: String, queue: String, after: Option<u64>, limit: Option<i64>)
            -> Vec<(MessageMeta, Payload)> = Scheduled {
            QueryResult::Messages(messages) => messages
        };
        fn applied_index()
            -> Option<u64> = AppliedIndex { QueryResult::AppliedIndex(index) => index };
    }
}

/// What the engine answers under its lock: a final result, or messages whose payloads are read
/// after the lock is released (to show them, or to find those with given IDs).
enum Answer {
    Done(QueryResult),
    Messages(Vec<MessageMeta>),
    Keys(Vec<u64>),
    /// The applied index, which the store holds.
    AppliedIndex,
}

/// Runs a query on this node's applied state, at time `now`. The engine is held only while it
/// answers; a peek's payloads are read afterwards from a view of the same state (taken for
/// peeks only).
pub fn run(
    reader: &StateReader,
    query: &Query,
    now: u64,
) -> Result<Result<QueryResult, EngineError>, NodeError> {
    let poisoned = || NodeError::Storage("engine lock poisoned".into());
    let answer_of = |e: &Engine| answer(e, query, now);
    let reads_payloads = matches!(
        query,
        Query::Peek { .. } | Query::Scheduled { .. } | Query::StorageKeys { .. }
    );
    let (answer, view) = if reads_payloads {
        let (answer, view) = reader
            .with_engine_and_view(answer_of)
            .ok_or_else(poisoned)?;
        (answer, Some(view))
    } else {
        (reader.with_engine(answer_of).ok_or_else(poisoned)?, None)
    };
    let no_view = || NodeError::Storage("payloads read without a view".into());
    Ok(match answer {
        Ok(Answer::Done(result)) => Ok(result),
        Ok(Answer::Messages(metas)) => {
            let view = view.ok_or_else(no_view)?;
            Ok(QueryResult::Messages(join_payloads(&view, metas)?))
        }
        Ok(Answer::Keys(keys)) => {
            let view = view.ok_or_else(no_view)?;
            let ids = match query {
                Query::StorageKeys { message_ids, .. } => message_ids.iter().copied().collect(),
                _ => BTreeSet::new(),
            };
            Ok(QueryResult::StorageKeys(keys_of(&view, keys, ids)?))
        }
        Ok(Answer::AppliedIndex) => Ok(QueryResult::AppliedIndex(
            reader
                .applied_index()
                .map_err(|e| NodeError::Storage(e.to_string()))?,
        )),
        Err(refused) => Err(refused),
    })
}

fn answer(e: &Engine, query: &Query, now: u64) -> Result<Answer, EngineError> {
    match query {
        Query::GetQueue { account, queue } => e
            .get_queue(account, queue)
            .map(|v| Answer::Done(QueryResult::Queue(Box::new(v)))),
        Query::ListQueues { account, prefix } => Ok(Answer::Done(QueryResult::Queues(
            e.list_queues(account, prefix),
        ))),
        Query::Peek {
            account,
            queue,
            after,
            limit,
        } => e.peek(account, queue, *after, *limit).map(Answer::Messages),
        Query::Stats { account, queue } => e
            .stats(account, queue, now)
            .map(|s| Answer::Done(QueryResult::Stats(Box::new(s)))),
        Query::DeadLetterSources { account, queue } => e
            .dead_letter_sources(account, queue)
            .map(|r| Answer::Done(QueryResult::Refs(r))),
        Query::Deliverable { account, queue } => Ok(Answer::Done(QueryResult::Deliverable(
            e.has_deliverable(account, queue),
        ))),
        Query::Accounts => Ok(Answer::Done(QueryResult::Accounts(e.accounts()))),
        Query::MoveTasks { account, queue } => e
            .move_tasks(account, queue)
            .map(|t| Answer::Done(QueryResult::MoveTasks(t))),
        Query::StorageKeys { account, queue, .. } => {
            e.storage_keys(account, queue).map(Answer::Keys)
        }
        Query::Scheduled {
            account,
            queue,
            after,
            limit,
        } => e
            .scheduled(account, queue, *after, *limit)
            .map(Answer::Messages),
        Query::AppliedIndex => Ok(Answer::AppliedIndex),
        Query::RemoteSources { account, id } => Ok(Answer::Done(QueryResult::Refs(
            e.sources_of_remote(account, *id),
        ))),
    }
}

/// Of the messages stored under `keys`, the keys of those whose ID is in `ids`; stops reading
/// once every ID is found.
fn keys_of(
    view: &PayloadView<'_>,
    keys: Vec<u64>,
    mut ids: BTreeSet<Uuid>,
) -> Result<Vec<u64>, NodeError> {
    let mut found = Vec::new();
    for key in keys {
        if ids.is_empty() {
            break;
        }
        let payload = view
            .payload(key)
            .map_err(|e| NodeError::Storage(e.to_string()))?;
        if payload.is_some_and(|p| ids.remove(&p.message_id)) {
            found.push(key);
        }
    }
    Ok(found)
}

fn join_payloads(
    view: &PayloadView<'_>,
    metas: Vec<MessageMeta>,
) -> Result<Vec<(MessageMeta, Payload)>, NodeError> {
    metas
        .into_iter()
        .map(|meta| {
            let payload = view
                .payload(meta.storage_key)
                .map_err(|e| NodeError::Storage(e.to_string()))?
                .ok_or_else(|| {
                    NodeError::Storage(format!("payload {} is missing", meta.storage_key))
                })?;
            Ok((meta, payload))
        })
        .collect()
}
