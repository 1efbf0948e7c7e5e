//! # raftq-engine
//!
//! The queue service as a deterministic state machine, in the style of quinn-proto: no tokio,
//! no clock, no randomness, no I/O. [`Engine::apply`] takes an [`Entry`] — a [`Command`] and the
//! leader's clock reading — and returns the command's [`Outcome`] (or the [`EngineError`] that
//! refused it) together with the [`Changes`] the store must persist. IDs that must be unique
//! (queue and message UUIDs) arrive inside the command, stamped by the proposer.
//!
//! ## Time
//! Every entry first advances the engine's clock to `max(clock, entry.now)`, so time never goes
//! backwards, and fires every timer that is due: lease ends, delay ends, retention expiry,
//! deduplication pruning and the paced steps of message move tasks. A leader-only timer
//! proposes [`Command::Tick`] at [`Engine::next_due`] so that these happen without traffic.
//! Applying a tick twice, or late, changes nothing more.
//!
//! ## Parked receives
//! A [`Command::ReceiveWait`] that finds nothing parks in its queue until its deadline. Whatever
//! entry later makes a message deliverable there (a send, a delay or lease that ends, an ack that
//! frees a FIFO group, a redrive) delivers to the parked receives in the order they parked, in
//! that entry, by the rules of any receive; [`Applied::answers`] carries what each got, for the
//! node whose client waits. A wait that ends without messages (its deadline, a
//! [`Command::EndWait`], its queue's deletion) is answered too, with none.
//!
//! ## The boundary with the store
//! Message bodies, attributes, IDs and `sent_at` never change after a send; they form the
//! [`Payload`], which the engine hands to the store in [`Changes::payloads`] and never keeps in
//! memory. The engine keeps only per-message metadata and indexes. Deliveries and peeks return
//! [`MessageMeta`] with the payload's `storage_key`; the store joins the payload to them.
//! The whole engine state is a set of rows in one sorted key space ([`rows`]); after each apply,
//! [`Changes::rows`] lists the rows it touched and [`Engine::row_value`] gives their new values
//! (`None`: delete). A store writes those rows, the payload operations and its last-applied
//! marker in one atomic batch, and restarts with [`Engine::restore`] over its rows. A snapshot is
//! all rows in key order ([`Engine::export_rows`] plus the payload rows).
//!
//! ## Costs
//! Per-queue indexes make every operation cost O(log n) in the queue's depth and group count:
//! messages by sequence number, a ready set (visible messages of a standard queue by priority
//! level and tenant, heads of unblocked groups of a FIFO queue), per-group message sets, a
//! global timer set of `(due, what)` (delays, scheduled messages and leases alike), scheduled
//! messages in queue order, and deduplication records in window order. Retention needs no per-message
//! timer: messages enter a queue in time order, so the oldest is always first.

pub mod arn;
pub mod attempts;
pub mod attributes;
pub mod codec;
pub mod command;
mod context;
mod engine;
pub mod error;
mod interned;
pub mod legacy;
pub mod model;
mod move_task;
pub mod outbox;
pub mod placement;
mod queue;
pub mod receipt;
pub mod rows;
pub mod tags;
pub mod typed;
pub mod validate;

pub use attributes::{Attribute, AttributeValue};
pub use command::{
    AckResult, AllowPolicyInput, BatchEntry, BatchResult, Command, Delivery, Entry, MessageMeta,
    MoveTaskInput, NewMessage, Outcome, Payload, QueueAttributes, RedrivePolicyInput,
    RetryBackoffInput, SendResult, WaitAnswer,
};
pub use engine::{Applied, Engine, RECLAIM_PER_TICK};
pub use error::EngineError;
pub use model::{
    LevelStats, MessageState, Millis, MoveFilter, MoveTaskStatus, MoveTaskView, PriorityWeights,
    QueueGauges, QueueRef, QueueStats, QueueType, QueueView, RetryBackoff,
};
pub use rows::{Changes, PayloadOp, RowKey};
pub use typed::{proposal, LeaseChange, Proposal, WaitStart};
