//! Finding a queue by name, UUID, CRN or ARN, and allocating sequence numbers.

use uuid::Uuid;

use crate::arn::parse_arn;
use crate::error::{EngineError, Result};
use crate::model::{parse_crn, AllowPolicy, QueueType};
use crate::placement::QueueEntry;
use crate::queue::Queue;

use super::Engine;

/// What a queue reference names, as [`Engine::named`] reads it.
enum Named<'a> {
    /// A queue by id (a CRN).
    Id(Uuid),
    /// A queue by name (a name, or an ARN).
    Name(&'a str),
    /// A queue by id, or by name when no queue has that id (a UUID, which is a valid name).
    IdOrName(Uuid, &'a str),
    /// No queue of the account (a CRN or ARN of another region or account).
    Nothing,
}

/// A queue a command names as a dead-letter target, an allowed source or a destination: one
/// of this group, or one of another group that the router described (see
/// [`crate::command::Elsewhere`]).
pub(super) struct Found<'a> {
    pub id: Uuid,
    pub name: &'a str,
    pub queue_type: QueueType,
    pub redrive_allow_policy: &'a AllowPolicy,
    /// Its number, when it is a queue of this group.
    pub local: Option<u32>,
}

impl Engine {
    /// The queue of `account` that `reference` names, here or, as the router read it, in
    /// another group.
    pub(super) fn find_anywhere(&self, account: &str, reference: &str) -> Option<Found<'_>> {
        if let Some(q) = self
            .find(account, reference)
            .and_then(|qid| self.queues.get(&qid))
        {
            return Some(Found {
                id: q.id,
                name: &q.name,
                queue_type: q.queue_type,
                redrive_allow_policy: &q.config.redrive_allow_policy,
                local: Some(q.qid),
            });
        }
        let remote = self.context.elsewhere.queue(reference)?;
        Some(Found {
            id: remote.id,
            name: &remote.name,
            queue_type: remote.queue_type,
            redrive_allow_policy: &remote.redrive_allow_policy,
            local: None,
        })
    }

    /// Reads a reference to a queue of `account`: a name, UUID, CRN or ARN.
    fn named<'a>(&self, account: &str, reference: &'a str) -> Named<'a> {
        if let Some(parsed) = parse_crn(reference) {
            if parsed.region != self.region || parsed.account != account {
                return Named::Nothing;
            }
            return Named::Id(parsed.id);
        }
        if let Some(parsed) = parse_arn(reference) {
            if parsed.region != self.region || !parsed.is_of(account) {
                return Named::Nothing;
            }
            return Named::Name(parsed.name);
        }
        match Uuid::parse_str(reference) {
            Ok(id) => Named::IdOrName(id, reference),
            Err(_) => Named::Name(reference),
        }
    }

    /// Finds a queue of `account` by name, UUID, CRN or ARN.
    pub(super) fn find(&self, account: &str, reference: &str) -> Option<u32> {
        let by_name = |name: &str| self.names.by_name(account, name);
        match self.named(account, reference) {
            Named::Id(id) => self.find_id(account, id),
            Named::Name(name) => by_name(name),
            Named::IdOrName(id, name) => self.find_id(account, id).or_else(|| by_name(name)),
            Named::Nothing => None,
        }
    }

    /// The placement's directory entry of the queue of `account` that `reference` names, read
    /// as a group reads it when it finds a queue: the group a request on the queue goes to, and
    /// the queue's id.
    pub fn locate(&self, account: &str, reference: &str) -> Option<&QueueEntry> {
        let by_id = |id: Uuid| {
            let entry = self.placement.queue_by_id(id)?;
            (entry.account == account).then_some(entry)
        };
        let by_name = |name: &str| self.placement.queue(account, name);
        match self.named(account, reference) {
            Named::Id(id) => by_id(id),
            Named::Name(name) => by_name(name),
            Named::IdOrName(id, name) => by_id(id).or_else(|| by_name(name)),
            Named::Nothing => None,
        }
    }

    fn find_id(&self, account: &str, id: Uuid) -> Option<u32> {
        let qid = self.names.by_id(id)?;
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
