//! Calls into the node, typed: a write proposes a [`Proposal`] through Raft and answers its
//! outcome as the proposal's type, with the payloads of the messages it delivers; a read asks
//! one linearizable [`Question`] and answers as the question's type. The one match of an
//! outcome (or a query's result) is the proposal's (`raftq_engine::typed`). Engine refusals and
//! node failures both come back as an [`ApiError`].

use raftq_engine::{EngineError, Payload, Proposal};
use raftq_node::{NodeError, Question};

use super::Shared;
use crate::error::ApiError;

/// What a committed command answered.
pub struct Written<T> {
    pub outcome: T,
    /// Payloads of delivered messages, by storage key.
    pub payloads: Vec<(u64, Payload)>,
}

impl Shared {
    /// Commits `proposal` (through the leader): its outcome with the payloads it delivers, or
    /// the engine's refusal; the outer error is the node's.
    pub(crate) async fn commit<T>(
        &self,
        proposal: Proposal<T>,
    ) -> Result<Result<Written<T>, EngineError>, NodeError> {
        let (command, outcome) = proposal.split();
        let response = self.api.node.write(command).await?;
        // Every command applied answers; only Raft's own entries (blank, membership) do not.
        let result = response
            .result
            .unwrap_or_else(|| panic!("{} was applied without an outcome", outcome.kind()));
        Ok(result.map(|answer| Written {
            outcome: outcome.take(answer),
            payloads: response.payloads,
        }))
    }

    /// Commits `proposal` and returns its outcome.
    pub(crate) async fn write<T>(&self, proposal: Proposal<T>) -> Result<T, ApiError> {
        Ok(self.commit(proposal).await??.outcome)
    }

    /// Asks a linearizable question.
    pub(crate) async fn read<T>(&self, question: Question<T>) -> Result<T, ApiError> {
        Ok(self.api.node.ask(question).await??)
    }
}
