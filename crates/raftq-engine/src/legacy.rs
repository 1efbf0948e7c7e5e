//! Commands as earlier builds wrote them into the Raft log, read back after an upgrade. Each
//! log entry format is decoded into its own types here and converted to the next format's, up
//! to today's [`Command`], with the settings it could not carry left unset, so an upgraded node
//! applies its old entries exactly as the build that wrote them did.

use std::collections::BTreeMap;

use serde::Deserialize;
use uuid::Uuid;

use crate::attributes;
use crate::command::{
    AllowPolicyInput, BatchEntry, Command, NewMessage, QueueAttributes, RedrivePolicyInput,
    RetryBackoffInput,
};

/// A command of log format 0: queue settings without a retry backoff, lease changes without a
/// delay.
#[derive(Debug, Clone, Deserialize)]
pub enum CommandV0 {
    CreateQueue {
        account: String,
        queue_id: Uuid,
        name: String,
        attributes: QueueAttributesV0,
    },
    PatchQueue {
        account: String,
        queue: String,
        attributes: QueueAttributesV0,
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
        entries: Vec<BatchEntryV1>,
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
    },
    Purge {
        account: String,
        queue: String,
    },
    Tick,
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

impl From<QueueAttributesV0> for QueueAttributesV1 {
    fn from(a: QueueAttributesV0) -> Self {
        QueueAttributesV1 {
            content_based_deduplication: a.content_based_deduplication,
            lease_seconds: a.lease_seconds,
            delay_seconds: a.delay_seconds,
            retention_seconds: a.retention_seconds,
            max_message_bytes: a.max_message_bytes,
            redrive_policy: a.redrive_policy,
            redrive_allow_policy: a.redrive_allow_policy,
            retry_backoff: None,
        }
    }
}

impl From<CommandV0> for CommandV1 {
    fn from(c: CommandV0) -> Self {
        match c {
            CommandV0::CreateQueue {
                account,
                queue_id,
                name,
                attributes,
            } => CommandV1::CreateQueue {
                account,
                queue_id,
                name,
                attributes: attributes.into(),
            },
            CommandV0::PatchQueue {
                account,
                queue,
                attributes,
            } => CommandV1::PatchQueue {
                account,
                queue,
                attributes: attributes.into(),
            },
            CommandV0::DeleteQueue { account, queue } => CommandV1::DeleteQueue { account, queue },
            CommandV0::Send {
                account,
                queue,
                message,
            } => CommandV1::Send {
                account,
                queue,
                message,
            },
            CommandV0::SendBatch {
                account,
                queue,
                entries,
            } => CommandV1::SendBatch {
                account,
                queue,
                entries,
            },
            CommandV0::Receive {
                account,
                queue,
                max_messages,
                lease_seconds,
            } => CommandV1::Receive {
                account,
                queue,
                max_messages,
                lease_seconds,
            },
            CommandV0::Ack {
                account,
                queue,
                receipts,
            } => CommandV1::Ack {
                account,
                queue,
                receipts,
            },
            CommandV0::ChangeLease {
                account,
                queue,
                receipt,
                lease_seconds,
            } => CommandV1::ChangeLease {
                account,
                queue,
                receipt,
                lease_seconds,
                delay_seconds: None,
            },
            CommandV0::Purge { account, queue } => CommandV1::Purge { account, queue },
            CommandV0::Tick => CommandV1::Tick,
        }
    }
}

/// A command of log format 1: messages with plain string attributes, queue settings without a
/// default wait or tags, receives without an attempt ID.
#[derive(Debug, Clone, Deserialize)]
pub enum CommandV1 {
    CreateQueue {
        account: String,
        queue_id: Uuid,
        name: String,
        attributes: QueueAttributesV1,
    },
    PatchQueue {
        account: String,
        queue: String,
        attributes: QueueAttributesV1,
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
        entries: Vec<BatchEntryV1>,
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
        delay_seconds: Option<i64>,
    },
    Purge {
        account: String,
        queue: String,
    },
    Tick,
}

/// Queue settings of log format 1.
#[derive(Debug, Clone, Deserialize)]
pub struct QueueAttributesV1 {
    pub content_based_deduplication: Option<bool>,
    pub lease_seconds: Option<i64>,
    pub delay_seconds: Option<i64>,
    pub retention_seconds: Option<i64>,
    pub max_message_bytes: Option<i64>,
    pub redrive_policy: Option<Option<RedrivePolicyInput>>,
    pub redrive_allow_policy: Option<AllowPolicyInput>,
    pub retry_backoff: Option<Option<RetryBackoffInput>>,
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

/// A batch entry of log formats 0 and 1.
#[derive(Debug, Clone, Deserialize)]
pub struct BatchEntryV1 {
    pub id: String,
    pub message: NewMessageV1,
}

impl From<QueueAttributesV1> for QueueAttributes {
    fn from(a: QueueAttributesV1) -> Self {
        QueueAttributes {
            content_based_deduplication: a.content_based_deduplication,
            lease_seconds: a.lease_seconds,
            delay_seconds: a.delay_seconds,
            retention_seconds: a.retention_seconds,
            max_message_bytes: a.max_message_bytes,
            redrive_policy: a.redrive_policy,
            redrive_allow_policy: a.redrive_allow_policy,
            retry_backoff: a.retry_backoff,
            receive_wait_seconds: None,
            tags: None,
        }
    }
}

impl From<NewMessageV1> for NewMessage {
    fn from(m: NewMessageV1) -> Self {
        NewMessage {
            message_id: m.message_id,
            body: m.body,
            attributes: attributes::plain(m.attributes),
            delay_seconds: m.delay_seconds,
            message_group_id: m.message_group_id,
            message_deduplication_id: m.message_deduplication_id,
        }
    }
}

impl From<CommandV1> for Command {
    fn from(c: CommandV1) -> Self {
        match c {
            CommandV1::CreateQueue {
                account,
                queue_id,
                name,
                attributes,
            } => Command::CreateQueue {
                account,
                queue_id,
                name,
                attributes: attributes.into(),
            },
            CommandV1::PatchQueue {
                account,
                queue,
                attributes,
            } => Command::PatchQueue {
                account,
                queue,
                attributes: attributes.into(),
            },
            CommandV1::DeleteQueue { account, queue } => Command::DeleteQueue { account, queue },
            CommandV1::Send {
                account,
                queue,
                message,
            } => Command::Send {
                account,
                queue,
                message: message.into(),
            },
            CommandV1::SendBatch {
                account,
                queue,
                entries,
            } => Command::SendBatch {
                account,
                queue,
                entries: entries
                    .into_iter()
                    .map(|e| BatchEntry {
                        id: e.id,
                        message: e.message.into(),
                    })
                    .collect(),
            },
            CommandV1::Receive {
                account,
                queue,
                max_messages,
                lease_seconds,
            } => Command::Receive {
                account,
                queue,
                max_messages,
                lease_seconds,
                attempt_id: None,
            },
            CommandV1::Ack {
                account,
                queue,
                receipts,
            } => Command::Ack {
                account,
                queue,
                receipts,
            },
            CommandV1::ChangeLease {
                account,
                queue,
                receipt,
                lease_seconds,
                delay_seconds,
            } => Command::ChangeLease {
                account,
                queue,
                receipt,
                lease_seconds,
                delay_seconds,
            },
            CommandV1::Purge { account, queue } => Command::Purge { account, queue },
            CommandV1::Tick => Command::Tick,
        }
    }
}
