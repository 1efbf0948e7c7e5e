//! Calls into the node: a write proposes one command through Raft and returns its outcome with
//! the payloads of the messages it delivers; a read runs one linearizable query. Engine refusals
//! and node failures both come back as an [`ApiError`].

use raftq_engine::{Command, Outcome, Payload};
use raftq_node::{Query, QueryResult};

use crate::error::ApiError;
use crate::Shared;

/// What a committed command answered.
pub struct Written {
    pub outcome: Outcome,
    /// Payloads of delivered messages, by storage key.
    pub payloads: Vec<(u64, Payload)>,
}

impl Shared {
    /// Commits `command` (through the leader) and returns its outcome.
    pub async fn write(&self, command: Command) -> Result<Written, ApiError> {
        let response = self.api.node.write(command).await?;
        match response.result {
            Some(Ok(outcome)) => Ok(Written {
                outcome,
                payloads: response.payloads,
            }),
            Some(Err(refused)) => Err(refused.into()),
            None => Err(ApiError::unexpected_answer()),
        }
    }

    /// Runs a linearizable query.
    pub async fn read(&self, query: Query) -> Result<QueryResult, ApiError> {
        Ok(self.api.node.read(query).await??)
    }
}
