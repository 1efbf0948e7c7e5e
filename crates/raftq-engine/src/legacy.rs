//! Commands as earlier builds wrote them into the Raft log, read back after an upgrade. Each
//! log entry format is decoded into its own types here and converted to today's [`Command`],
//! with the settings it could not carry left unset, so an upgraded node applies its old entries
//! exactly as the build that wrote them did.

use serde::Deserialize;
use uuid::Uuid;

use crate::command::{
    AllowPolicyInput, BatchEntry, Command, NewMessage, QueueAttributes, RedrivePolicyInput,
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
        message: NewMessage,
    },
    SendBatch {
        account: String,
        queue: String,
        entries: Vec<BatchEntry>,
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

impl From<QueueAttributesV0> for QueueAttributes {
    fn from(a: QueueAttributesV0) -> Self {
        QueueAttributes {
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

impl From<CommandV0> for Command {
    fn from(c: CommandV0) -> Self {
        match c {
            CommandV0::CreateQueue {
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
            CommandV0::PatchQueue {
                account,
                queue,
                attributes,
            } => Command::PatchQueue {
                account,
                queue,
                attributes: attributes.into(),
            },
            CommandV0::DeleteQueue { account, queue } => Command::DeleteQueue { account, queue },
            CommandV0::Send {
                account,
                queue,
                message,
            } => Command::Send {
                account,
                queue,
                message,
            },
            CommandV0::SendBatch {
                account,
                queue,
                entries,
            } => Command::SendBatch {
                account,
                queue,
                entries,
            },
            CommandV0::Receive {
                account,
                queue,
                max_messages,
                lease_seconds,
            } => Command::Receive {
                account,
                queue,
                max_messages,
                lease_seconds,
            },
            CommandV0::Ack {
                account,
                queue,
                receipts,
            } => Command::Ack {
                account,
                queue,
                receipts,
            },
            CommandV0::ChangeLease {
                account,
                queue,
                receipt,
                lease_seconds,
            } => Command::ChangeLease {
                account,
                queue,
                receipt,
                lease_seconds,
                delay_seconds: None,
            },
            CommandV0::Purge { account, queue } => Command::Purge { account, queue },
            CommandV0::Tick => Command::Tick,
        }
    }
}
