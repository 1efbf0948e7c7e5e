//! The request body limits, which the REST routes, the JSON reader and the gRPC server share.

use raftq_engine::model::limits;

/// The most a byte of message text can grow in JSON: a control character becomes `\u00XX`.
const JSON_ESCAPE_FACTOR: usize = 6;

/// Room for the JSON syntax and the other fields around a message.
const JSON_OVERHEAD: usize = 64 * 1024;

/// The body limit of every route but batch send: any message the largest queue accepts fits,
/// however much of it JSON must escape.
pub const BODY_LIMIT: usize =
    JSON_ESCAPE_FACTOR * limits::MAX_MESSAGE_BYTES_MAX as usize + JSON_OVERHEAD;

/// The body limit of a batch send: ten of the largest messages fit with room for escapes,
/// though not ten of the largest made only of escaped characters.
pub const BATCH_BODY_LIMIT: usize = 16 * 1024 * 1024;
