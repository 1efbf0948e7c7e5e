//! Finding a queue by name, UUID, CRN or ARN, and allocating sequence numbers.

use uuid::Uuid;

use crate::arn::parse_arn;
use crate::error::{EngineError, Result};
use crate::model::parse_crn;
use crate::queue::Queue;

use super::Engine;

impl Engine {
    /// Finds a queue of `account` by name, UUID, CRN or ARN.
    pub(super) fn find(&self, account: &str, reference: &str) -> Option<u32> {
        if let Some(parsed) = parse_crn(reference) {
            if parsed.region != self.region || parsed.account != account {
                return None;
            }
            return self.find_id(account, parsed.id);
        }
        if let Some(parsed) = parse_arn(reference) {
            if parsed.region != self.region || !parsed.is_of(account) {
                return None;
            }
            return self.by_name.get(account)?.get(parsed.name).copied();
        }
        if let Ok(id) = Uuid::parse_str(reference) {
            if let Some(qid) = self.find_id(account, id) {
                return Some(qid);
            }
        }
        self.by_name.get(account)?.get(reference).copied()
    }

    fn find_id(&self, account: &str, id: Uuid) -> Option<u32> {
        let qid = *self.by_id.get(&id)?;
        let q = self.queues.get(&qid)?;
        (q.account == account).then_some(qid)
    }

    pub(super) fn lookup(&self, account: &str, reference: &str) -> Result<u32> {
        self.find(account, reference)
            .ok_or_else(|| EngineError::QueueNotFound(reference.to_string()))
    }

    pub(super) fn queue(&self, qid: u32) -> Result<&Queue> {
        self.queues
            .get(&qid)
            .ok_or_else(|| EngineError::QueueNotFound(qid.to_string()))
    }

    pub(super) fn alloc_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        debug_assert!(
            seq > 0,
            "sequence numbers start at 1: a move task's cursor 0 is none"
        );
        self.next_seq += 1;
        seq
    }
}
