//! # raftq-sqs
//!
//! An Amazon SQS-compatible endpoint, so that applications written against SQS (boto3, the AWS
//! CLI, the AWS SDKs) run against raftq unchanged. It is served on the port of REST and gRPC
//! ([`Sqs`] is a [`raftq_api::Protocol`], handed to [`raftq_api::Front::serving`]) and calls the
//! same operations layer (`raftq_api::ops`) as they do, so every queue rule and error is raftq's
//! own; this crate only speaks SQS's wire formats and names.
//!
//! - `service`: which requests are SQS's (AWS JSON 1.0 by `X-Amz-Target: AmazonSQS.*`, the Query
//!   protocol by a form with `Action=`), reading them and writing answers and errors back.
//! - `shapes`: every action's request and result shapes, which turn Query forms into the JSON
//!   protocol's objects and results into the Query protocol's XML.
//! - `actions`: which function serves each action; `call`: what every action does with its
//!   request (read it, find its queue, map raftq's errors). The actions, each from SQS's request
//!   object to an operation and back: `queues`, `messages`, `tags` and `move_tasks`.
//! - `attributes`: queue attributes, SQS's names and values to raftq's settings and back.
//! - `message`: typed message attributes, body characters, system attributes of a delivery.
//! - `digest`: `MD5OfMessageBody` and `MD5OfMessageAttributes`, as SQS computes them.
//! - [`names`]: account numbers, queue URLs and ARNs.
//! - `auth`: the one place where a request's credentials become an account; `sigv4`: the check
//!   of AWS Signature Version 4 it makes, against the secrets of raftq's key table.
//! - `error`: SQS's errors, and the one mapping from raftq's.
//!
//! What differs from SQS is written down in `docs/sqs.md`.

mod actions;
mod attributes;
mod auth;
mod call;
mod digest;
mod error;
mod message;
mod messages;
mod move_tasks;
pub mod names;
mod queues;
mod service;
mod shapes;
mod sigv4;
mod tags;

pub use service::Sqs;
