//! Commands as earlier builds wrote them into the Raft log, read back after an upgrade. Each
//! log entry format is decoded into its own types here and converted to the next format's, up
//! to today's [`Command`], with the settings it could not carry left unset, so an upgraded node
//! applies its old entries exactly as the build that wrote them did. From format 2 on, only
//! the queue settings and messages change shape: a format's commands are a [`CommandOf`] of
//! its two shapes, converted by [`CommandOf::convert`].

use std::collections::BTreeMap;

use serde::Deserialize;
use uuid::Uuid;

use crate::attributes;
use crate::attributes::Attribute;
use crate::command::{
    reshape, AllowPolicyInput, BatchEntry, CommandOf, NewMessage, QueueAttributes,
    RedrivePolicyInput, RetryBackoffInput,
};
use crate::tags::TagChange;

/// A command of log formats 0 and 1, over the two shapes that differ between them: queue
/// settings (`A`) and a lease change's delay (`D`).
#[derive(Debug, Clone, Deserialize)]
pub enum EarlyCommand<A, D> {
    CreateQueue {
        account: String,
        queue_id: Uuid,
        name: String,
        attributes: A,
    },
    PatchQueue {
        account: String,
        queue: String,
        attributes: A,
    },
    DeleteQueue {
        account: String,
        queue: String,
    },
    Send {
        account: String,
        queue: String,
        message: NewMessageV1,
    },
    SendBatch {
        account: String,
        queue: String,
        entries: Vec<BatchEntry<NewMessageV1>>,
    },
    Receive {
        account: String,
        queue: String,
        max_messages: Option<i64>,
        lease_seconds: Option<i64>,
    },
    Ack {
        account: String,
        queue: String,
        receipts: Vec<String>,
    },
    ChangeLease {
        account: String,
        queue: String,
        receipt: String,
        lease_seconds: i64,
        delay_seconds: D,
    },
    Purge {
        account: String,
        queue: String,
    },
    Tick,
}

/// A command of log format 0: queue settings without a retry backoff, lease changes without a
/// delay (postcard writes `()` as nothing).
pub type CommandV0 = EarlyCommand<QueueAttributesV0, ()>;

/// A command of log format 1: messages with plain string attributes, queue settings without a
/// default wait or tags, receives without an attempt ID.
pub type CommandV1 = EarlyCommand<QueueAttributesV1, Option<i64>>;

/// A lease change's delay as formats 0 (none) and 1 wrote it.
pub trait EarlyDelay {
    fn delay_seconds(self) -> Option<i64>;
}

impl EarlyDelay for () {
    fn delay_seconds(self) -> Option<i64> {
        None
    }
}

impl EarlyDelay for Option<i64> {
    fn delay_seconds(self) -> Option<i64> {
        self
    }
}

/// Queue settings of log format 0.
#[derive(Debug, Clone, Deserialize)]
pub struct QueueAttributesV0 {
    pub content_based_deduplication: Option<bool>,
    pub lease_seconds: Option<i64>,
    pub delay_seconds: Option<i64>,
    pub retention_seconds: Option<i64>,
    pub max_message_bytes: Option<i64>,
    pub redrive_policy: Option<Option<RedrivePolicyInput>>,
    pub redrive_allow_policy: Option<AllowPolicyInput>,
}

/// Queue settings of log format 1: those of format 0, then a retry backoff (postcard writes a
/// struct as its fields in order, so a nested struct reads as its fields inline).
#[derive(Debug, Clone, Deserialize)]
pub struct QueueAttributesV1 {
    pub v0: QueueAttributesV0,
    pub retry_backoff: Option<Option<RetryBackoffInput>>,
}

impl From<QueueAttributesV0> for QueueAttributesV1 {
    fn from(v0: QueueAttributesV0) -> Self {
        QueueAttributesV1 {
            v0,
            retry_backoff: None,
        }
    }
}

/// A message of log formats 0 and 1, with plain string attributes.
#[derive(Debug, Clone, Deserialize)]
pub struct NewMessageV1 {
    pub message_id: Uuid,
    pub body: String,
    pub attributes: BTreeMap<String, String>,
    pub delay_seconds: Option<i64>,
    pub message_group_id: Option<String>,
    pub message_deduplication_id: Option<String>,
}

impl From<QueueAttributesV1> for QueueAttributesV2 {
    fn from(v1: QueueAttributesV1) -> Self {
        QueueAttributesV2 {
            v1,
            receive_wait_seconds: None,
            tags: None,
        }
    }
}

impl From<NewMessageV1> for NewMessageV2 {
    fn from(m: NewMessageV1) -> Self {
        NewMessageV2 {
            message_id: m.message_id,
            body: m.body,
            attributes: attributes::plain(m.attributes),
            delay_seconds: m.delay_seconds,
            message_group_id: m.message_group_id,
            message_deduplication_id: m.message_deduplication_id,
        }
    }
}

impl<A, D> From<EarlyCommand<A, D>> for CommandV2
where
    QueueAttributesV1: From<A>,
    D: EarlyDelay,
{
    fn from(c: EarlyCommand<A, D>) -> Self {
        use CommandOf as C;
        use EarlyCommand as E;
        // A `CommandOf` with format 1's settings and messages; `convert` takes those on to
        // format 2's.
        let v1: CommandOf<QueueAttributesV1, NewMessageV1> = reshape!(c, E => C, {
            E::CreateQueue { account, queue_id, name, attributes } => C::CreateQueue {
                account,
                queue_id,
                name,
                attributes: attributes.into(),
            },
            E::PatchQueue { account, queue, attributes } => C::PatchQueue {
                account,
                queue,
                attributes: attributes.into(),
            },
            E::Receive { account, queue, max_messages, lease_seconds } => C::Receive {
                account,
                queue,
                max_messages,
                lease_seconds,
                attempt_id: None,
            },
            E::ChangeLease { account, queue, receipt, lease_seconds, delay_seconds } => {
                C::ChangeLease {
                    account,
                    queue,
                    receipt,
                    lease_seconds,
                    delay_seconds: delay_seconds.delay_seconds(),
                }
            },
        } same {
            DeleteQueue { account, queue }
            Send { account, queue, message }
            SendBatch { account, queue, entries }
            Ack { account, queue, receipts }
            Purge { account, queue }
            Tick {}
        });
        v1.convert()
    }
}

/// A command of log format 2: queue settings without a deduplication scope, throughput limit or
/// policy, messages without a trace header.
pub type CommandV2 = CommandOf<QueueAttributesV2, NewMessageV2>;

/// Queue settings of log format 2: those of format 1, then a default wait and tags (postcard
/// writes a struct as its fields in order, so a nested struct reads as its fields inline).
#[derive(Debug, Clone, Deserialize)]
pub struct QueueAttributesV2 {
    pub v1: QueueAttributesV1,
    pub receive_wait_seconds: Option<i64>,
    pub tags: Option<TagChange>,
}

/// A message of log format 2.
#[derive(Debug, Clone, Deserialize)]
pub struct NewMessageV2 {
    pub message_id: Uuid,
    pub body: String,
    pub attributes: BTreeMap<String, Attribute>,
    pub delay_seconds: Option<i64>,
    pub message_group_id: Option<String>,
    pub message_deduplication_id: Option<String>,
}

impl From<QueueAttributesV2> for QueueAttributesV3 {
    fn from(v2: QueueAttributesV2) -> Self {
        QueueAttributesV3 {
            v2,
            deduplication_scope: None,
            fifo_throughput_limit: None,
            policy: None,
        }
    }
}

impl From<NewMessageV2> for NewMessageV3 {
    fn from(v2: NewMessageV2) -> Self {
        NewMessageV3 {
            v2,
            trace_header: None,
        }
    }
}

/// A command of log format 3: queue settings without a default priority or priority weights,
/// messages without a priority or a `deliver_at`.
pub type CommandV3 = CommandOf<QueueAttributesV3, NewMessageV3>;

/// Queue settings of log format 3: those of format 2, then a deduplication scope, a throughput
/// limit and a policy.
#[derive(Debug, Clone, Deserialize)]
pub struct QueueAttributesV3 {
    pub v2: QueueAttributesV2,
    pub deduplication_scope: Option<String>,
    pub fifo_throughput_limit: Option<String>,
    pub policy: Option<Option<String>>,
}

/// A message of log format 3: that of format 2, then a trace header.
#[derive(Debug, Clone, Deserialize)]
pub struct NewMessageV3 {
    pub v2: NewMessageV2,
    pub trace_header: Option<String>,
}

impl From<QueueAttributesV3> for QueueAttributes {
    fn from(a: QueueAttributesV3) -> Self {
        let QueueAttributesV2 {
            v1,
            receive_wait_seconds,
            tags,
        } = a.v2;
        let v0 = v1.v0;
        QueueAttributes {
            content_based_deduplication: v0.content_based_deduplication,
            lease_seconds: v0.lease_seconds,
            delay_seconds: v0.delay_seconds,
            retention_seconds: v0.retention_seconds,
            max_message_bytes: v0.max_message_bytes,
            redrive_policy: v0.redrive_policy,
            redrive_allow_policy: v0.redrive_allow_policy,
            retry_backoff: v1.retry_backoff,
            receive_wait_seconds,
            tags,
            deduplication_scope: a.deduplication_scope,
            fifo_throughput_limit: a.fifo_throughput_limit,
            policy: a.policy,
            default_priority: None,
            priority_weights: None,
        }
    }
}

impl From<NewMessageV3> for NewMessage {
    fn from(m: NewMessageV3) -> Self {
        let v2 = m.v2;
        NewMessage {
            message_id: v2.message_id,
            body: v2.body,
            attributes: v2.attributes,
            delay_seconds: v2.delay_seconds,
            message_group_id: v2.message_group_id,
            message_deduplication_id: v2.message_deduplication_id,
            trace_header: m.trace_header,
            priority: None,
            deliver_at: None,
        }
    }
}
