//! Queues: creation, settings (with the checks of redrive and allow policies), purges and
//! deletion, and the reclaiming of what they take away.

use std::collections::VecDeque;

use uuid::Uuid;

use crate::arn::parse_arn;
use crate::command::{AllowPolicyInput, Outcome, QueueAttributes, RedrivePolicyInput};
use crate::error::{EngineError, Result};
use crate::model::{
    limits, parse_crn, AllowPolicy, DeadLetterTarget, QueueConfig, QueueName, QueueType,
    RedrivePolicy,
};
use crate::queue::{Queue, ReclaimSet};
use crate::rows::{self, PayloadOp, RowKey};
use crate::{tags, validate};

use super::{Engine, Reclaim, RECLAIM_PER_TICK};

/// The queue a redrive policy is being set on.
struct Source<'a> {
    id: Uuid,
    name: &'a str,
    queue_type: QueueType,
}

impl Engine {
    pub(super) fn create_queue(
        &mut self,
        account: String,
        queue_id: Uuid,
        name: String,
        attrs: &QueueAttributes,
    ) -> Result<Outcome> {
        let queue_type = validate::queue_name(&name)?;
        if self.names.by_name(&account, &name).is_some() {
            return Err(EngineError::QueueExists(name));
        }
        if self.names.by_id(queue_id).is_some() {
            return Err(EngineError::invalid("queue_id", "is already in use"));
        }
        self.placement.admits(queue_id)?;
        let mut config = QueueConfig::default();
        validate::scalar_attributes(attrs, Some(queue_type), &mut config)?;
        validate::throughput_limit(attrs, &config)?;
        let source = Source {
            id: queue_id,
            name: &name,
            queue_type,
        };
        if let Some(Some(policy)) = &attrs.redrive_policy {
            config.redrive_policy = Some(self.check_redrive(&account, &source, policy)?);
        }
        if let Some(allow) = &attrs.redrive_allow_policy {
            config.redrive_allow_policy = self.check_allow(&account, allow)?;
        }
        let queue_tags = match &attrs.tags {
            Some(change) => {
                tags::check(change)?;
                tags::merged(&Default::default(), change)?
            }
            None => Default::default(),
        };
        let qid = self.next_qid;
        debug_assert!(
            !self.queues.contains_key(&qid) && !self.reclaim.contains_key(&qid),
            "queue number {qid} is new: a deleted queue's messages are still reclaimed under it"
        );
        self.next_qid += 1;
        if let Some(target) = local_target(&config).and_then(|t| self.queues.get_mut(&t)) {
            target.sources.insert(qid);
        }
        self.names.insert(&account, &name, queue_id, qid);
        let mut queue = Queue::new(qid, queue_id, account, name, self.context.now, config);
        queue.tags = queue_tags;
        self.queues.insert(qid, queue);
        self.context.changes.rows.push(RowKey::Queue(qid));
        self.view(qid).map(|v| Outcome::Queue(Box::new(v)))
    }

    pub(super) fn patch_queue(
        &mut self,
        account: &str,
        reference: &str,
        attrs: &QueueAttributes,
    ) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let q = self.queue(qid)?;
        let mut config = q.config.clone();
        validate::scalar_attributes(attrs, Some(q.queue_type), &mut config)?;
        validate::throughput_limit(attrs, &config)?;
        let source = Source {
            id: q.id,
            name: &q.name,
            queue_type: q.queue_type,
        };
        match &attrs.redrive_policy {
            Some(Some(policy)) => {
                config.redrive_policy = Some(self.check_redrive(account, &source, policy)?)
            }
            Some(None) => config.redrive_policy = None,
            None => {}
        }
        if let Some(allow) = &attrs.redrive_allow_policy {
            config.redrive_allow_policy = self.check_allow(account, allow)?;
        }
        let queue_tags = match &attrs.tags {
            Some(change) => {
                tags::check(change)?;
                Some(tags::merged(&q.tags, change)?)
            }
            None => None,
        };
        let old_target = local_target(&q.config);
        let new_target = local_target(&config);
        if old_target != new_target {
            if let Some(t) = old_target.and_then(|t| self.queues.get_mut(&t)) {
                t.sources.remove(&qid);
            }
            if let Some(t) = new_target.and_then(|t| self.queues.get_mut(&t)) {
                t.sources.insert(qid);
            }
        }
        let Some(q) = self.queues.get_mut(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        let retention_changed = q.config.retention_seconds != config.retention_seconds;
        if q.config.priority_weights != config.priority_weights {
            q.reset_credits();
        }
        if q.config != config {
            q.modified_at = self.context.now;
        }
        q.config = config;
        if let Some(queue_tags) = queue_tags {
            q.tags = queue_tags;
        }
        if retention_changed {
            q.clear_retention_timer(&mut self.context);
            q.schedule_retention(&mut self.context);
        }
        let sources: Vec<u32> = q.sources.iter().copied().collect();
        self.context.changes.rows.push(RowKey::Queue(qid));
        self.reconsider_pending(qid);
        for source in sources {
            self.reconsider_pending(source);
        }
        self.view(qid).map(|v| Outcome::Queue(Box::new(v)))
    }

    pub(super) fn delete_queue(&mut self, account: &str, reference: &str) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        let q = self.queue(qid)?;
        if !q.sources.is_empty() {
            let sources = q
                .sources
                .iter()
                .filter_map(|&s| self.queue_ref(s))
                .collect();
            return Err(EngineError::QueueInUse { sources });
        }
        self.end_waits_on(qid);
        let Some(mut q) = self.queues.remove(&qid) else {
            return Err(EngineError::QueueNotFound(reference.to_string()));
        };
        let taken = q.take_for_reclaim(&mut self.context);
        q.clear_dedup_timer(&mut self.context);
        q.clear_move_timer(&mut self.context);
        q.attempts.clear_timer(&mut self.context, qid);
        self.reclaim_later(qid, u64::MAX, taken);
        let changes = &mut self.context.changes;
        changes.ranges.push(rows::dedup_range(qid));
        changes.ranges.push(rows::attempt_range(qid));
        changes.rows.push(RowKey::Queue(qid));
        if !q.move_tasks.is_empty() {
            changes.rows.push(RowKey::MoveTasks(qid));
        }
        if let Some(t) = local_target(&q.config).and_then(|t| self.queues.get_mut(&t)) {
            t.sources.remove(&qid);
        }
        self.names.remove(&q.account, &q.name, q.id);
        Ok(Outcome::Deleted)
    }

    /// Takes every message of the queue out at once; ticks delete them for good later.
    pub(super) fn purge(&mut self, account: &str, reference: &str) -> Result<Outcome> {
        let qid = self.lookup(account, reference)?;
        if let Some(q) = self.queues.get_mut(&qid) {
            let taken = q.take_for_reclaim(&mut self.context);
            debug_assert!(
                q.messages.is_empty() && q.bytes() == 0 && q.ready_len() == 0,
                "a purge leaves the queue empty, its counters with it"
            );
            let below = self.next_seq;
            self.reclaim_later(qid, below, taken);
        }
        Ok(Outcome::Purged)
    }

    /// A tick's own work, after the timers due fired: deletes a bounded number of purged or
    /// deleted messages for good.
    pub(super) fn tick(&mut self) -> Outcome {
        self.reclaim_some(RECLAIM_PER_TICK);
        Outcome::Ticked
    }

    /// Hands messages taken out of queue `qid` to reclamation, which ticks carry out.
    pub(super) fn reclaim_later(&mut self, qid: u32, below: u64, taken: ReclaimSet) {
        let reclaim = self.reclaim.entry(qid).or_insert_with(|| Reclaim {
            below,
            sets: VecDeque::new(),
        });
        reclaim.below = reclaim.below.max(below);
        if !taken.is_empty() {
            reclaim.sets.push_back(taken);
        }
        if reclaim.sets.is_empty() {
            self.reclaim.remove(&qid);
        } else {
            self.context.changes.rows.push(RowKey::Reclaim(qid));
        }
    }

    /// Deletes up to `budget` purged or deleted messages for good, lowest queue and sequence
    /// number first (so every replica, restored or not, deletes the same rows in each tick).
    pub(super) fn reclaim_some(&mut self, mut budget: usize) {
        while budget > 0 {
            let Some(mut entry) = self.reclaim.first_entry() else {
                return;
            };
            let qid = *entry.key();
            let reclaim = entry.get_mut();
            while budget > 0 {
                let Some(set) = reclaim.sets.front_mut() else {
                    break;
                };
                match set.pop(&mut self.context) {
                    Some((_, msg)) => {
                        self.context
                            .changes
                            .payloads
                            .push(PayloadOp::Delete(msg.storage_key));
                        budget -= 1;
                    }
                    None => {
                        reclaim.sets.pop_front();
                    }
                }
            }
            // Only the front set can have been emptied without being dropped.
            if reclaim.sets.front().is_some_and(ReclaimSet::is_empty) {
                reclaim.sets.pop_front();
            }
            if reclaim.sets.is_empty() {
                entry.remove();
                self.context.changes.rows.push(RowKey::Reclaim(qid));
            }
        }
    }

    /// Checks a redrive policy against every rule of SPEC.md §2, each with its own error.
    fn check_redrive(
        &self,
        account: &str,
        source: &Source<'_>,
        input: &RedrivePolicyInput,
    ) -> Result<RedrivePolicy> {
        const TARGET: &str = "redrive_policy.dead_letter_target";
        let (reference, max_receive_count) = validate::redrive_policy(input)?;
        if reference == source.name {
            return Err(EngineError::invalid(
                TARGET,
                "must differ from the source queue",
            ));
        }
        if let Some(rule) = self.foreign_reference(account, reference) {
            return Err(EngineError::invalid(TARGET, rule));
        }
        let target = self
            .find_anywhere(account, reference)
            .ok_or_else(|| EngineError::invalid(TARGET, "names no existing queue"))?;
        if target.id == source.id {
            return Err(EngineError::invalid(
                TARGET,
                "must differ from the source queue",
            ));
        }
        if target.queue_type != source.queue_type {
            return Err(EngineError::invalid(
                TARGET,
                format!(
                    "must be of the same type as the source queue ({})",
                    source.queue_type.as_str()
                ),
            ));
        }
        if !target.redrive_allow_policy.allows(source.id) {
            return Err(EngineError::invalid(
                TARGET,
                "the target's redrive_allow_policy does not allow this source queue",
            ));
        }
        let target = match target.local {
            Some(qid) => DeadLetterTarget::Local(qid),
            None => DeadLetterTarget::Remote(QueueName {
                id: target.id,
                name: target.name.to_string(),
            }),
        };
        Ok(RedrivePolicy {
            target,
            max_receive_count,
        })
    }

    /// Why a CRN or ARN in a body cannot name a queue of `account` here: it is malformed, or
    /// names another region or account. `None` for any other reference.
    fn foreign_reference(&self, account: &str, reference: &str) -> Option<&'static str> {
        const REGION: &str = "must name a queue in the same region";
        const ACCOUNT: &str = "must name a queue in the same account";
        if let Some(parsed) = parse_crn(reference) {
            return if parsed.region != self.region {
                Some(REGION)
            } else if parsed.account != account {
                Some(ACCOUNT)
            } else {
                None
            };
        }
        if let Some(parsed) = parse_arn(reference) {
            return if parsed.region != self.region {
                Some(REGION)
            } else if !parsed.is_of(account) {
                Some(ACCOUNT)
            } else {
                None
            };
        }
        if reference.starts_with("crn:") {
            return Some("is not a valid queue CRN");
        }
        if reference.starts_with("arn:") {
            return Some("is not a valid queue ARN (arn:aws:sqs:<region>:<account number>:<name>)");
        }
        None
    }

    fn check_allow(&self, account: &str, input: &AllowPolicyInput) -> Result<AllowPolicy> {
        const SOURCES: &str = "redrive_allow_policy.source_queues";
        let permission = validate::allow_permission(input)?;
        if input.source_queues.is_some() && permission != "by_queue" {
            return Err(EngineError::invalid(
                SOURCES,
                "applies only to permission by_queue",
            ));
        }
        match permission {
            "allow_all" => Ok(AllowPolicy::AllowAll),
            "deny_all" => Ok(AllowPolicy::DenyAll),
            "by_queue" => {
                let refs = input.source_queues.as_deref().unwrap_or_default();
                validate::count(SOURCES, refs.len(), limits::ALLOW_POLICY_SOURCES_MAX)?;
                let mut list: Vec<QueueName> = Vec::with_capacity(refs.len());
                for (i, reference) in refs.iter().enumerate() {
                    if let Some(rule) = self.foreign_reference(account, reference) {
                        return Err(EngineError::invalid(format!("{SOURCES}[{i}]"), rule));
                    }
                    let q = self.find_anywhere(account, reference).ok_or_else(|| {
                        EngineError::invalid(
                            format!("{SOURCES}[{i}]"),
                            "names no existing queue of this account",
                        )
                    })?;
                    if !list.iter().any(|n| n.id == q.id) {
                        list.push(QueueName {
                            id: q.id,
                            name: q.name.to_string(),
                        });
                    }
                }
                Ok(AllowPolicy::ByQueue(list))
            }
            _ => Ok(AllowPolicy::DenyAll),
        }
    }
}

/// The number of a queue's dead-letter target when that is a queue of this group.
pub(super) fn local_target(config: &QueueConfig) -> Option<u32> {
    config.redrive_policy.as_ref()?.target.local()
}
