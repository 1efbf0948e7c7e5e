//! Calls into the node: a write proposes one command through Raft and returns its outcome with
//! the payloads of the messages it delivers; a read runs one linearizable query. Engine refusals
//! and node failures both come back as an [`ApiError`]; `write_for` and `read_for` also take the
//! answer apart into the one kind the command or query gives.

use raftq_engine::{Command, Outcome, Payload};
use raftq_node::{Query, QueryResult};

use crate::error::ApiError;
use crate::state::Shared;

/// What a committed command answered.
pub struct Written {
    pub outcome: Outcome,
    /// Payloads of delivered messages, by storage key.
    pub payloads: Vec<(u64, Payload)>,
}

impl Shared {
    /// Commits `command` (through the leader) and returns its outcome.
    pub(crate) async fn write(&self, command: Command) -> Result<Written, ApiError> {
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

    /// Commits `command` and takes its outcome apart with `expected`, which answers `None` for
    /// an outcome of another kind than the command's (a bug, answered as `internal`).
    pub(crate) async fn write_for<T>(
        &self,
        command: Command,
        expected: impl FnOnce(Outcome) -> Option<T>,
    ) -> Result<T, ApiError> {
        let written = self.write(command).await?;
        expected(written.outcome).ok_or_else(ApiError::unexpected_answer)
    }

    /// Runs a linearizable query.
    pub(crate) async fn read(&self, query: Query) -> Result<QueryResult, ApiError> {
        Ok(self.api.node.read(query).await??)
    }

    /// Runs `query` and takes its result apart with `expected`, as [`Shared::write_for`] does.
    pub(crate) async fn read_for<T>(
        &self,
        query: Query,
        expected: impl FnOnce(QueryResult) -> Option<T>,
    ) -> Result<T, ApiError> {
        expected(self.read(query).await?).ok_or_else(ApiError::unexpected_answer)
    }
}
