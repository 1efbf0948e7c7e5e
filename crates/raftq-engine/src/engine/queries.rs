//! Queries: the read-only answers (queues, stats, peeks, dead-letter sources, gauges).

use uuid::Uuid;

use crate::arn::arn;
use crate::command::MessageMeta;
use crate::error::{EngineError, Result};
use crate::model::{
    crn, limits, AccountSummary, AllowPolicy, AllowPolicyView, DeadLetterTarget, MessageState,
    Millis, QueueGauges, QueueName, QueueRef, QueueStats, QueueView, RedrivePolicyView,
};
use crate::queue::{Msg, Queue, State};
use crate::validate;

use super::Engine;

impl Engine {
    /// The queue object.
    pub fn get_queue(&self, account: &str, reference: &str) -> Result<QueueView> {
        self.view(self.lookup(account, reference)?)
    }

    /// How long a receive that names no wait waits on a queue: its `receive_wait_seconds`
    /// (looked up on every such receive, so without building the queue's whole view).
    pub fn receive_wait_seconds(&self, account: &str, reference: &str) -> Result<u32> {
        Ok(self
            .queue(self.lookup(account, reference)?)?
            .config
            .receive_wait_seconds)
    }

    /// The resource reference of a queue.
    pub fn resolve(&self, account: &str, reference: &str) -> Result<QueueRef> {
        let qid = self.lookup(account, reference)?;
        self.queue_ref(qid)
            .ok_or_else(|| EngineError::QueueNotFound(reference.to_string()))
    }

    /// The account's queues whose names start with `prefix`, by name.
    pub fn list_queues(&self, account: &str, prefix: &str) -> Vec<QueueView> {
        let Some(names) = self.names.of(account) else {
            return Vec::new();
        };
        names
            .range(prefix.to_string()..)
            .take_while(|(name, _)| name.starts_with(prefix))
            .filter_map(|(_, &qid)| self.view(qid).ok())
            .collect()
    }

    /// Every account that holds a queue, by name, with its number of queues.
    pub fn accounts(&self) -> Vec<AccountSummary> {
        self.names
            .accounts()
            .map(|(account, names)| AccountSummary {
                account: account.clone(),
                queues: names.len(),
            })
            .collect()
    }

    /// Up to `limit` messages after sequence number `after`, in queue order, in every state.
    pub fn peek(
        &self,
        account: &str,
        reference: &str,
        after: Option<u64>,
        limit: Option<i64>,
    ) -> Result<Vec<MessageMeta>> {
        self.page(account, reference, after, limit, |q, start| {
            q.messages.range(start..).map(|(&seq, msg)| (seq, msg))
        })
    }

    /// Up to `limit` scheduled messages (sent with a `deliver_at` still ahead) after sequence
    /// number `after`, in queue order.
    pub fn scheduled(
        &self,
        account: &str,
        reference: &str,
        after: Option<u64>,
        limit: Option<i64>,
    ) -> Result<Vec<MessageMeta>> {
        self.page(account, reference, after, limit, Queue::scheduled_from)
    }

    /// A page of the messages `listed` gives of a queue from a sequence number on: up to
    /// `limit` of those after sequence number `after`.
    fn page<'q, I>(
        &'q self,
        account: &str,
        reference: &str,
        after: Option<u64>,
        limit: Option<i64>,
        listed: impl FnOnce(&'q Queue, u64) -> I,
    ) -> Result<Vec<MessageMeta>>
    where
        I: Iterator<Item = (u64, &'q Msg)>,
    {
        let q = self.queue(self.lookup(account, reference)?)?;
        let limit = peek_limit(limit)?;
        let start = after.map_or(0, |a| a.saturating_add(1));
        Ok(listed(q, start)
            .take(limit)
            .map(|(seq, msg)| self.meta(q, seq, msg))
            .collect())
    }

    /// Counters of a queue; the age is measured at `now`.
    pub fn stats(&self, account: &str, reference: &str, now: Millis) -> Result<QueueStats> {
        let q = self.queue(self.lookup(account, reference)?)?;
        Ok(self.stats_of(q, now))
    }

    fn stats_of(&self, q: &Queue, now: Millis) -> QueueStats {
        let now = now.max(self.context.now);
        let oldest = q
            .messages
            .values()
            .next()
            .map_or(0, |m| now.saturating_sub(m.enqueued_at) / 1000);
        let (active_tenants, largest_tenant_in_flight) = q.tenants();
        QueueStats {
            visible: q.count(State::Visible),
            leased: q.count(State::Leased),
            delayed: q.count(State::Delayed),
            pending_redrive: q.count(State::Pending),
            oldest_message_age_seconds: oldest,
            active_tenants,
            largest_tenant_in_flight,
            scheduled: q.scheduled_len(),
            by_priority: q.level_stats(),
        }
    }

    /// Every queue of every account with its counters at `now` and its dead-letter moves, for
    /// monitoring; in account and name order.
    pub fn queue_gauges(&self, now: Millis) -> Vec<QueueGauges> {
        self.names
            .accounts()
            .flat_map(|(account, names)| names.iter().map(move |(name, qid)| (account, name, qid)))
            .filter_map(|(account, name, qid)| {
                let q = self.queues.get(qid)?;
                Some(QueueGauges {
                    account: account.clone(),
                    name: name.clone(),
                    stats: self.stats_of(q, now),
                    dead_lettered: q.dead_lettered,
                    sent: q.sent,
                    acked: q.acked,
                })
            })
            .collect()
    }

    /// The queues whose redrive policy names this queue.
    pub fn dead_letter_sources(&self, account: &str, reference: &str) -> Result<Vec<QueueRef>> {
        let q = self.queue(self.lookup(account, reference)?)?;
        Ok(q.sources
            .iter()
            .filter_map(|&s| self.queue_ref(s))
            .collect())
    }

    /// The queues of this group whose dead-letter target is the queue `target` of another
    /// group: its sources here.
    pub fn sources_of_remote(&self, account: &str, target: Uuid) -> Vec<QueueRef> {
        let names_target = |q: &&Queue| {
            q.account == account
                && q.config.redrive_policy.as_ref().is_some_and(
                    |p| matches!(&p.target, DeadLetterTarget::Remote(t) if t.id == target),
                )
        };
        let sources = self.queues.values().filter(names_target);
        sources.filter_map(|q| self.queue_ref(q.qid)).collect()
    }

    /// Whether a receive on this queue would return something now.
    pub fn has_deliverable(&self, account: &str, reference: &str) -> bool {
        self.ready_count(account, reference) > 0
    }

    /// How many places a receive on this queue could start from now: its visible messages, or
    /// for a FIFO queue its unblocked groups (0 for a queue that does not exist).
    pub fn ready_count(&self, account: &str, reference: &str) -> usize {
        self.find(account, reference)
            .and_then(|qid| self.queues.get(&qid))
            .map_or(0, Queue::ready_len)
    }

    pub(super) fn queue_ref(&self, qid: u32) -> Option<QueueRef> {
        let q = self.queues.get(&qid)?;
        Some(QueueRef {
            id: q.id,
            name: q.name.clone(),
            crn: crn(&self.region, &q.account, q.id),
        })
    }

    pub(super) fn name_ref(&self, account: &str, named: &QueueName) -> QueueRef {
        let name = (self.names.by_id(named.id))
            .and_then(|qid| self.queues.get(&qid))
            .map_or_else(|| named.name.clone(), |q| q.name.clone());
        QueueRef {
            id: named.id,
            name,
            crn: crn(&self.region, account, named.id),
        }
    }

    pub(super) fn view(&self, qid: u32) -> Result<QueueView> {
        let q = self.queue(qid)?;
        let c = &q.config;
        let redrive_policy = c.redrive_policy.as_ref().and_then(|p| {
            let dead_letter_target = match &p.target {
                DeadLetterTarget::Local(target) => self.queue_ref(*target)?,
                DeadLetterTarget::Remote(target) => self.name_ref(&q.account, target),
            };
            Some(RedrivePolicyView {
                dead_letter_target,
                max_receive_count: p.max_receive_count,
            })
        });
        let redrive_allow_policy = match &c.redrive_allow_policy {
            AllowPolicy::AllowAll => AllowPolicyView {
                permission: "allow_all".into(),
                source_queues: None,
            },
            AllowPolicy::DenyAll => AllowPolicyView {
                permission: "deny_all".into(),
                source_queues: None,
            },
            AllowPolicy::ByQueue(list) => AllowPolicyView {
                permission: "by_queue".into(),
                source_queues: Some(list.iter().map(|n| self.name_ref(&q.account, n)).collect()),
            },
        };
        Ok(QueueView {
            id: q.id,
            name: q.name.clone(),
            crn: crn(&self.region, &q.account, q.id),
            arn: arn(&self.region, &q.account, &q.name),
            group: self.group,
            queue_type: q.queue_type,
            created_at: q.created_at,
            modified_at: q.modified_at,
            content_based_deduplication: c.content_based_deduplication,
            lease_seconds: c.lease_seconds,
            delay_seconds: c.delay_seconds,
            retention_seconds: c.retention_seconds,
            max_message_bytes: c.max_message_bytes,
            redrive_policy,
            redrive_allow_policy,
            retry_backoff: c.retry_backoff,
            receive_wait_seconds: c.receive_wait_seconds,
            tags: q.tags.clone(),
            deduplication_scope: c.deduplication_scope,
            fifo_throughput_limit: c.fifo_throughput_limit,
            policy: c.policy.clone(),
            default_priority: c.default_priority,
            priority_weights: c.priority_weights.clone(),
        })
    }

    pub(super) fn meta(&self, q: &Queue, seq: u64, msg: &Msg) -> MessageMeta {
        let state = match msg.state {
            State::Visible => MessageState::Visible,
            State::Delayed => MessageState::Delayed,
            State::Leased => MessageState::Leased,
            State::Pending => MessageState::PendingRedrive,
        };
        MessageMeta {
            storage_key: msg.storage_key,
            seq,
            fifo: q.fifo(),
            receive_count: msg.receive_count,
            first_received_at: (msg.first_received_at != 0).then_some(msg.first_received_at),
            enqueued_at: msg.enqueued_at,
            dead_letter_source: msg.moved.as_deref().map(|n| self.name_ref(&q.account, n)),
            moved_at: msg.moved.is_some().then_some(msg.enqueued_at),
            state,
            until: matches!(msg.state, State::Delayed | State::Leased).then_some(msg.until),
            priority: (!q.fifo()).then_some(msg.priority),
            scheduled: q.scheduled_id(seq).is_some(),
        }
    }
}

/// The page size of a peek or a listing: 1-100, 10 when not given.
fn peek_limit(limit: Option<i64>) -> Result<usize> {
    match limit {
        Some(v) => Ok(validate::in_range("limit", v, 1, limits::PEEK_LIMIT_MAX as i64)? as usize),
        None => Ok(limits::PEEK_LIMIT_DEFAULT),
    }
}
