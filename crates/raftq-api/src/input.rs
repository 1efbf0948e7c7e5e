//! Request parsing. Bodies are read as [`serde_json::Value`] and taken apart field by field with
//! [`Fields`], so that malformed JSON, a wrong type, an unknown field or a missing required field
//! is a `400 invalid_argument` naming the field (JSON path style: `entries[2].body`,
//! `redrive_policy.max_receive_count`). `null` counts as absent for optional fields. Path and
//! query parameters get the same treatment through [`QueuePath`] and [`Params`].

use std::collections::BTreeMap;
use std::future::poll_fn;
use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// The field name used for the request body as a whole.
pub const REQUEST_BODY: &str = "request_body";

/// A request body parsed as JSON; an empty body is `{}`.
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(crate::limits::BODY_LIMIT, |l| l.0);
        let bytes = read_body(req.into_body(), limit).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(JsonBody(Value::Object(Map::new())));
        }
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::invalid(REQUEST_BODY, format!("is not valid JSON: {e}")))
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

/// The fields of one JSON object of a request, with the path that names them in errors.
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    /// `""` for the body itself, else the object's path followed by `.`.
    prefix: String,
}

fn type_error(field: String, what: &str) -> ApiError {
    ApiError::invalid(field, format!("must be {what}"))
}

impl<'a> Fields<'a> {
    /// The request body, which must be a JSON object.
    pub fn root(value: &'a Value) -> Result<Fields<'a>, ApiError> {
        match value {
            Value::Object(map) => Ok(Fields {
                map,
                prefix: String::new(),
            }),
            _ => Err(type_error(REQUEST_BODY.into(), "a JSON object")),
        }
    }

    /// A nested object found at `path`.
    pub fn nested(value: &'a Value, path: String) -> Result<Fields<'a>, ApiError> {
        match value {
            Value::Object(map) => Ok(Fields {
                map,
                prefix: format!("{path}."),
            }),
            _ => Err(type_error(path, "a JSON object")),
        }
    }

    /// The path of one of this object's fields.
    pub fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Refuses any field not in `known`.
    pub fn only(&self, known: &[&str]) -> Result<(), ApiError> {
        match self.map.keys().find(|k| !known.contains(&k.as_str())) {
            Some(unknown) => Err(ApiError::invalid(
                self.path(unknown),
                format!(
                    "is not a known field (expected one of: {})",
                    known.join(", ")
                ),
            )),
            None => Ok(()),
        }
    }

    /// The raw value, `null` included; `None` only when the field is absent.
    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    /// The value of an optional field; absent and `null` are both `None`.
    pub fn value(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    /// A nested object that `null` clears, read by `read`: absent is `None` (leave as it is),
    /// `null` is `Some(None)` (clear), an object is `Some(Some(..))`.
    pub fn clearable<T>(
        &self,
        key: &str,
        read: impl FnOnce(Fields<'a>) -> Result<T, ApiError>,
    ) -> Result<Option<Option<T>>, ApiError> {
        match self.raw(key) {
            None => Ok(None),
            Some(v) if v.is_null() => Ok(Some(None)),
            Some(v) => read(Fields::nested(v, self.path(key))?).map(|t| Some(Some(t))),
        }
    }

    pub fn required<T>(&self, key: &str, value: Option<T>) -> Result<T, ApiError> {
        value.ok_or_else(|| ApiError::invalid(self.path(key), "is required"))
    }

    pub fn string(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        self.value(key)
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| type_error(self.path(key), "a string"))
            })
            .transpose()
    }

    pub fn required_string(&self, key: &str) -> Result<&'a str, ApiError> {
        self.required(key, self.string(key)?)
    }

    pub fn integer(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.value(key)
            .map(|v| integer(v, self.path(key)))
            .transpose()
    }

    pub fn number(&self, key: &str) -> Result<Option<f64>, ApiError> {
        self.value(key)
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| type_error(self.path(key), "a number"))
            })
            .transpose()
    }

    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ApiError> {
        self.value(key)
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| type_error(self.path(key), "true or false"))
            })
            .transpose()
    }

    pub fn array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, ApiError> {
        self.value(key)
            .map(|v| {
                v.as_array()
                    .ok_or_else(|| type_error(self.path(key), "an array"))
            })
            .transpose()
    }

    pub fn object(&self, key: &str) -> Result<Option<&'a Map<String, Value>>, ApiError> {
        self.value(key)
            .map(|v| {
                v.as_object()
                    .ok_or_else(|| type_error(self.path(key), "a JSON object"))
            })
            .transpose()
    }
}

/// A JSON integer (no fraction, no string) that fits in an `i64`.
fn integer(value: &Value, field: String) -> Result<i64, ApiError> {
    match value {
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Ok(i),
            (None, Some(_)) => Err(ApiError::invalid(field, "is out of range")),
            (None, None) => Err(type_error(field, "an integer")),
        },
        _ => Err(type_error(field, "an integer")),
    }
}

/// A string element of an array, named `path` in errors.
pub fn string_at(value: &Value, path: String) -> Result<&str, ApiError> {
    value.as_str().ok_or_else(|| type_error(path, "a string"))
}

/// A queue reference in a body: a name, UUID or CRN as a string, or a resource reference object
/// as the API returns them (its `crn`, else `id`, else `name` is used).
pub fn queue_reference(value: &Value, path: String) -> Result<String, ApiError> {
    if let Some(text) = value.as_str() {
        return Ok(text.to_string());
    }
    let object = Fields::nested(value, path.clone())
        .map_err(|_| type_error(path.clone(), "a queue reference (name, UUID or CRN)"))?;
    object.only(&["id", "name", "crn"])?;
    for key in ["crn", "id", "name"] {
        if let Some(text) = object.string(key)? {
            return Ok(text.to_string());
        }
    }
    Err(ApiError::invalid(
        path,
        "must name the queue by crn, id or name",
    ))
}

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
                .map_err(|_| type_error(key.to_string(), what)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_name_the_offending_field() {
        let body =
            json!({"a": "x", "n": 1.5, "big": 18446744073709551615u64, "neg": -3, "nil": null});
        let f = Fields::root(&body).unwrap();
        assert_eq!(f.integer("a").unwrap_err().field.as_deref(), Some("a"));
        assert_eq!(f.integer("n").unwrap_err().message, "n: must be an integer");
        assert_eq!(
            f.integer("big").unwrap_err().message,
            "big: is out of range"
        );
        assert_eq!(f.integer("neg").unwrap(), Some(-3));
        assert_eq!(f.integer("nil").unwrap(), None);
        assert!(f.raw("nil").is_some());
        assert_eq!(
            f.required_string("missing").unwrap_err().message,
            "missing: is required"
        );
        let e = f.only(&["a", "n", "big", "neg"]).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("nil"));
    }

    #[test]
    fn nested_fields_carry_their_path() {
        let body = json!({"redrive_policy": {"max_receive_count": "x"}});
        let root = Fields::root(&body).unwrap();
        let inner = Fields::nested(&body["redrive_policy"], "redrive_policy".into()).unwrap();
        assert!(root.string("redrive_policy").is_err());
        let e = inner.integer("max_receive_count").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("redrive_policy.max_receive_count"));
        assert!(Fields::root(&json!([1])).is_err());
    }

    #[test]
    fn queue_references_are_strings_or_resource_objects() {
        let p = || "t".to_string();
        assert_eq!(queue_reference(&json!("dlq"), p()).unwrap(), "dlq");
        assert_eq!(
            queue_reference(&json!({"id": "u", "name": "n", "crn": "c"}), p()).unwrap(),
            "c"
        );
        assert_eq!(queue_reference(&json!({"name": "n"}), p()).unwrap(), "n");
        assert!(queue_reference(&json!(5), p()).is_err());
        assert!(queue_reference(&json!({}), p()).is_err());
    }
}
