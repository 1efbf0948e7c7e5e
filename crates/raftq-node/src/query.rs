//! Linearizable reads: the queries a client can ask, run against the applied state with the
//! payloads joined from the store.

use raftq_engine::{EngineError, MessageMeta, Payload, QueueRef, QueueStats, QueueView};
use raftq_store::StateReader;
use serde::{Deserialize, Serialize};

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
}

/// The answer to a [`Query`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueryResult {
    Queue(Box<QueueView>),
    Queues(Vec<QueueView>),
    Messages(Vec<(MessageMeta, Payload)>),
    Stats(QueueStats),
    Refs(Vec<QueueRef>),
    Deliverable(bool),
}

/// Runs a query on this node's applied state, at time `now`.
pub fn run(
    reader: &StateReader,
    query: &Query,
    now: u64,
) -> Result<Result<QueryResult, EngineError>, NodeError> {
    reader
        .with_engine(|e| {
            Ok(match query {
                Query::GetQueue { account, queue } => e
                    .get_queue(account, queue)
                    .map(|v| QueryResult::Queue(Box::new(v))),
                Query::ListQueues { account, prefix } => {
                    Ok(QueryResult::Queues(e.list_queues(account, prefix)))
                }
                Query::Peek {
                    account,
                    queue,
                    after,
                    limit,
                } => match e.peek(account, queue, *after, *limit) {
                    Ok(metas) => Ok(QueryResult::Messages(join_payloads(reader, metas)?)),
                    Err(refused) => Err(refused),
                },
                Query::Stats { account, queue } => {
                    e.stats(account, queue, now).map(QueryResult::Stats)
                }
                Query::DeadLetterSources { account, queue } => {
                    e.dead_letter_sources(account, queue).map(QueryResult::Refs)
                }
                Query::Deliverable { account, queue } => {
                    Ok(QueryResult::Deliverable(e.has_deliverable(account, queue)))
                }
            })
        })
        .ok_or_else(|| NodeError::Storage("engine lock poisoned".into()))?
}

fn join_payloads(
    reader: &StateReader,
    metas: Vec<MessageMeta>,
) -> Result<Vec<(MessageMeta, Payload)>, NodeError> {
    metas
        .into_iter()
        .map(|meta| {
            let payload = reader
                .payload(meta.storage_key)
                .map_err(|e| NodeError::Storage(e.to_string()))?
                .ok_or_else(|| {
                    NodeError::Storage(format!("payload {} is missing", meta.storage_key))
                })?;
            Ok((meta, payload))
        })
        .collect()
}
