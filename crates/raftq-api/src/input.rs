//! Request extraction. A body is read within its route's size limit and time, parsed as JSON and
//! read into its request type by `body` ([`JsonBody`]), so that malformed JSON, a wrong type, an
//! unknown field or a missing required field is a `400 invalid_argument` naming the field (JSON
//! path style: `entries[2].body`, `redrive_policy.max_receive_count`). Path and query parameters
//! get the same treatment through [`QueuePath`] and [`Params`].

use std::collections::BTreeMap;
use std::future::poll_fn;
use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::body::{self, REQUEST_BODY};
use crate::error::ApiError;

/// A request body parsed as JSON and read as a `T`; an empty body is `{}`.
pub struct JsonBody<T = Value>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(crate::limits::BODY_LIMIT, |l| l.0);
        let bytes = read_body(req.into_body(), limit).await?;
        let value = if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Object(Map::new())
        } else {
            serde_json::from_slice(&bytes)
                .map_err(|e| ApiError::invalid(REQUEST_BODY, format!("is not valid JSON: {e}")))?
        };
        body::read(&value).map(JsonBody)
    }
}

/// How much of a body over its limit is still read (and dropped) before the `413` goes out: a
/// client that is still sending then reads the answer, where closing at once could reset its
/// connection before it does.
const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

/// How long a request body may take to arrive in full: a client that sends it slower (a
/// slowloris holding a connection and a task open) is refused.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads a body of at most `limit` bytes, within [`BODY_TIMEOUT`].
async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    tokio::time::timeout(BODY_TIMEOUT, read_body_untimed(body, limit))
        .await
        .map_err(|_| {
            ApiError::invalid(
                REQUEST_BODY,
                format!("did not arrive within {} s", BODY_TIMEOUT.as_secs()),
            )
        })?
}

async fn read_body_untimed(mut body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let mut kept = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame =
            frame.map_err(|e| ApiError::invalid(REQUEST_BODY, format!("cannot be read: {e}")))?;
        if let Ok(data) = frame.into_data() {
            total = total.saturating_add(data.len());
            if total <= limit {
                kept.extend_from_slice(&data);
            } else if total > DRAIN_LIMIT {
                break;
            }
        }
    }
    if total > limit {
        return Err(ApiError::body_too_large(limit));
    }
    Ok(Bytes::from(kept))
}

/// The body limit of a route, recorded for the error message of a body over it.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// The queue reference of a `/v1/queues/{q}...` path, percent-decoded.
pub struct QueuePath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for QueuePath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(q)| QueuePath(q))
            .map_err(|r| ApiError::invalid("queue", format!("bad queue path: {}", r.body_text())))
    }
}

/// The query parameters of a request; each may be given once.
pub struct Params(BTreeMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(pairs) = Query::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map_err(|r| {
                ApiError::invalid("query", format!("cannot be read: {}", r.body_text()))
            })?;
        let mut map = BTreeMap::new();
        for (key, value) in pairs {
            if map.contains_key(&key) {
                return Err(ApiError::invalid(key, "is given more than once"));
            }
            map.insert(key, value);
        }
        Ok(Params(map))
    }
}

impl Params {
    /// Refuses any parameter not in `known`.
    pub fn only(&self, known: &[&str]) -> Result<(), ApiError> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            Some(unknown) => Err(ApiError::invalid(
                unknown.clone(),
                format!(
                    "is not a known query parameter (expected one of: {})",
                    known.join(", ")
                ),
            )),
            None => Ok(()),
        }
    }

    /// A text parameter; empty counts as given.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// A number parameter; absent and empty are `None`.
    pub fn number<T: std::str::FromStr>(
        &self,
        key: &str,
        what: &str,
    ) -> Result<Option<T>, ApiError> {
        match self.0.get(key).map(|v| v.trim()) {
            None | Some("") => Ok(None),
            Some(text) => text
                .parse()
                .map(Some)
                .map_err(|_| ApiError::invalid(key, format!("must be {what}"))),
        }
    }
}
