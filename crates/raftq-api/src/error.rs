//! The one place where failures become answers: engine refusals ([`EngineError`]), node
//! failures ([`NodeError`]) and the API's own (authentication, body limits, unknown routes) all
//! turn into an [`ApiError`] with the spec's snake_case code, message and field, which REST
//! answers with an HTTP status and a JSON body and gRPC with a status code and metadata.
//!
//! | code | HTTP | gRPC | from |
//! |---|---|---|---|
//! | `invalid_argument` | 400 | `INVALID_ARGUMENT` | [`EngineError::InvalidArgument`], and every input check of the API |
//! | `unauthenticated` | 401 | `UNAUTHENTICATED` | a missing or unknown API key |
//! | `permission_denied` | 403 | `PERMISSION_DENIED` | a cluster operation with a key that is not an admin's |
//! | `queue_not_found` | 404 | `NOT_FOUND` | [`EngineError::QueueNotFound`] (also another account's queue) |
//! | `move_task_not_found` | 404 | `NOT_FOUND` | [`EngineError::MoveTaskNotFound`] |
//! | `not_found`, `method_not_allowed` | 404, 405 | `UNIMPLEMENTED` | a path or method the API does not have |
//! | `queue_exists` | 409 | `ALREADY_EXISTS` | [`EngineError::QueueExists`] |
//! | `queue_in_use`, `lease_expired`, `move_task_running`, `move_task_not_running`, `message_not_scheduled` | 409 | `FAILED_PRECONDITION` | the engine's errors of those names |
//! | `membership_conflict` | 409 | `FAILED_PRECONDITION` | a membership change that the cluster's state refuses ([`ChangeError`]) |
//! | `message_too_large` | 413 | `RESOURCE_EXHAUSTED` | [`EngineError::MessageTooLarge`], a request body over the limit |
//! | `too_many_requests` | 429 | `RESOURCE_EXHAUSTED` | a request over a rate or long-poll limit (`throttle`), with `Retry-After` |
//! | `storage_full` | 507 | `RESOURCE_EXHAUSTED` | [`NodeError::StorageFull`]: the leader's disk is short of space; the write was not proposed, and may succeed once space is freed |
//! | `unavailable` | 503 | `UNAVAILABLE` | [`NodeError::Unavailable`], [`NodeError::Timeout`], [`NodeError::NotLeader`], [`NodeError::LeaderUnreachable`], [`NodeError::OtherBuild`] |
//! | `unsupported` | 501 | `UNIMPLEMENTED` | [`NodeError::Unsupported`]: an operation the cluster's layout does not support (a drain in a cluster of one group) |
//! | `internal` | 500 | `INTERNAL` | [`NodeError::Storage`] and answers the API cannot read; never bad input |
//!
//! A gRPC status carries the spec's code in the metadata `raftq-error-code`, the field (if any)
//! in `raftq-error-field`, and the whole error as an encoded `raftq.v1.Error` in `raftq-error-bin`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use prost::Message as _;
use raftq_engine::{EngineError, QueueRef};
use raftq_node::{ChangeError, NodeError};
use serde::Serialize;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

use raftq_proto::v1 as pb;

/// gRPC metadata: the spec's snake_case code.
pub const CODE_METADATA: &str = "raftq-error-code";
/// gRPC metadata: the field the error is about, percent-encoded where not printable ASCII.
pub const FIELD_METADATA: &str = "raftq-error-field";
/// gRPC binary metadata: the error as an encoded `raftq.v1.Error`.
pub const ERROR_METADATA: &str = "raftq-error-bin";

/// A refused or failed request, as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// For `queue_in_use`: the queues whose redrive policy names the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<QueueRef>>,
    /// For `too_many_requests`: the seconds to wait before a retry (the `Retry-After` header).
    #[serde(skip)]
    pub retry_after: Option<u64>,
    /// The engine's refusal this error stands for, for front ends that answer refusals of one
    /// code differently (the SQS endpoint tells a receipt of a gone message from one of an
    /// ended lease, both `lease_expired`).
    #[serde(skip)]
    pub engine: Option<Box<EngineError>>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            sources: None,
            retry_after: None,
            engine: None,
        }
    }

    /// A `400 invalid_argument` about `field`, saying which `rule` it breaks.
    pub fn invalid(field: impl Into<String>, rule: impl Into<String>) -> ApiError {
        EngineError::invalid(field, rule).into()
    }

    pub fn unauthenticated(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", message)
    }

    pub fn permission_denied(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "permission_denied", message)
    }

    /// A request body over the size limit of its route.
    pub fn body_too_large(limit: usize) -> ApiError {
        ApiError {
            field: Some("request_body".into()),
            ..ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "message_too_large",
                format!("the request body is larger than {limit} bytes"),
            )
        }
    }

    /// A request over one of the server's limits; a retry after `retry_after` seconds may pass.
    pub fn too_many_requests(message: impl Into<String>, retry_after: u64) -> ApiError {
        ApiError {
            retry_after: Some(retry_after),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_requests", message)
        }
    }

    pub fn route_not_found() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
    }

    pub fn method_not_allowed() -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take this method",
        )
    }

    /// A failure of the server itself, never of the request.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        let status = match &e {
            EngineError::InvalidArgument { .. } => StatusCode::BAD_REQUEST,
            EngineError::QueueNotFound(_) | EngineError::MoveTaskNotFound(_) => {
                StatusCode::NOT_FOUND
            }
            EngineError::QueueExists(_)
            | EngineError::QueueInUse { .. }
            | EngineError::LeaseExpired
            | EngineError::MessageGone
            | EngineError::MoveTaskRunning(_)
            | EngineError::MoveTaskNotRunning(_)
            | EngineError::NotScheduled(_)
            | EngineError::Placement(_) => StatusCode::CONFLICT,
            EngineError::MessageTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        };
        let sources = match &e {
            EngineError::QueueInUse { sources } => Some(sources.clone()),
            _ => None,
        };
        let base = ApiError::new(status, e.code(), e.to_string());
        ApiError {
            field: e.field().map(str::to_string),
            sources,
            engine: Some(Box::new(e)),
            ..base
        }
    }
}

impl From<NodeError> for ApiError {
    fn from(e: NodeError) -> ApiError {
        match e {
            NodeError::Unavailable(_)
            | NodeError::NotLeader(_)
            | NodeError::LeaderUnreachable(_)
            | NodeError::OtherBuild(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("{e}; retry"),
            ),
            NodeError::Timeout(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("{e}; a retried write may apply twice"),
            ),
            NodeError::StorageFull(_) => ApiError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                "storage_full",
                e.to_string(),
            ),
            NodeError::Storage(_) => ApiError::internal(e.to_string()),
            NodeError::Unsupported(_) => {
                ApiError::new(StatusCode::NOT_IMPLEMENTED, "unsupported", e.to_string())
            }
        }
    }
}

impl From<ChangeError> for ApiError {
    /// Bad input is a `400` naming its field; a change the cluster's state refuses is a `409`.
    fn from(e: ChangeError) -> ApiError {
        let field = match &e {
            ChangeError::BadAddress(_)
            | ChangeError::Unreachable(_)
            | ChangeError::OtherCluster(_) => Some("raft_addr"),
            ChangeError::AlreadyVoter(_) | ChangeError::UnknownNode(_) => Some("id"),
            _ => None,
        };
        let (status, code) = match &e {
            ChangeError::BadAddress(_)
            | ChangeError::Unreachable(_)
            | ChangeError::UnknownNode(_) => (StatusCode::BAD_REQUEST, "invalid_argument"),
            _ => (StatusCode::CONFLICT, "membership_conflict"),
        };
        ApiError {
            field: field.map(str::to_string),
            ..ApiError::new(status, code, e.to_string())
        }
    }
}

impl ApiError {
    /// The gRPC status code of this error's spec code.
    pub fn grpc_code(&self) -> Code {
        match self.code {
            "invalid_argument" => Code::InvalidArgument,
            "unauthenticated" => Code::Unauthenticated,
            "permission_denied" => Code::PermissionDenied,
            "queue_not_found" | "move_task_not_found" => Code::NotFound,
            "not_found" | "method_not_allowed" => Code::Unimplemented,
            "queue_exists" => Code::AlreadyExists,
            "queue_in_use"
            | "lease_expired"
            | "move_task_running"
            | "move_task_not_running"
            | "message_not_scheduled"
            | "membership_conflict" => Code::FailedPrecondition,
            "message_too_large" | "too_many_requests" | "storage_full" => Code::ResourceExhausted,
            "unavailable" => Code::Unavailable,
            "unsupported" => Code::Unimplemented,
            _ => Code::Internal,
        }
    }
}

/// `text` as a metadata value: printable ASCII as it is, other bytes and `%` as `%XX`.
fn metadata_text(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'%' => "%25".to_string(),
            0x20..=0x7e => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Status {
        let mut metadata = MetadataMap::new();
        metadata.insert(CODE_METADATA, MetadataValue::from_static(e.code));
        if let Some(field) = &e.field {
            if let Ok(value) = metadata_text(field).parse() {
                metadata.insert(FIELD_METADATA, value);
            }
        }
        if let Some(seconds) = e.retry_after {
            metadata.insert("retry-after", MetadataValue::from(seconds));
        }
        let details = pb::Error::from(&e).encode_to_vec();
        metadata.insert_bin(ERROR_METADATA, MetadataValue::from_bytes(&details));
        Status::with_metadata(e.grpc_code(), e.message, metadata)
    }
}

/// The JSON body of an error: `{"error": {...}}`.
#[derive(Serialize)]
struct Envelope<'a> {
    error: &'a ApiError,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(Envelope { error: &self })).into_response();
        let headers = response.headers_mut();
        match self.status {
            StatusCode::UNAUTHORIZED => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_map_to_the_spec_statuses() {
        #[rustfmt::skip]
        let cases = [
            (EngineError::invalid("name", "bad"), 400, "invalid_argument"),
            (EngineError::QueueNotFound("q".into()), 404, "queue_not_found"),
            (EngineError::QueueExists("q".into()), 409, "queue_exists"),
            (EngineError::QueueInUse { sources: vec![] }, 409, "queue_in_use"),
            (EngineError::LeaseExpired, 409, "lease_expired"),
            (EngineError::MessageGone, 409, "lease_expired"),
            (EngineError::MoveTaskNotFound("t".into()), 404, "move_task_not_found"),
            (EngineError::MoveTaskRunning("t".into()), 409, "move_task_running"),
            (EngineError::MoveTaskNotRunning("completed".into()), 409, "move_task_not_running"),
            (EngineError::NotScheduled("m".into()), 409, "message_not_scheduled"),
            (EngineError::MessageTooLarge { field: "body".into(), size: 2, max: 1 }, 413, "message_too_large"),
        ];
        for (e, status, code) in cases {
            let api = ApiError::from(e);
            assert_eq!(api.status.as_u16(), status);
            assert_eq!(api.code, code);
        }
    }

    #[test]
    fn membership_refusals_name_their_field_or_are_conflicts() {
        let cases = [
            (ChangeError::BadAddress("x".into()), 400, Some("raft_addr")),
            (
                ChangeError::Unreachable("x:1".into()),
                400,
                Some("raft_addr"),
            ),
            (ChangeError::UnknownNode(9), 400, Some("id")),
            (ChangeError::AlreadyVoter(1), 409, Some("id")),
            (
                ChangeError::OtherCluster("x:1".into()),
                409,
                Some("raft_addr"),
            ),
            (ChangeError::Busy, 409, None),
            (ChangeError::LastVoter(1), 409, None),
            (
                ChangeError::NoMajority {
                    id: 1,
                    answering: 1,
                    voters: 3,
                },
                409,
                None,
            ),
        ];
        for (e, status, field) in cases {
            let api = ApiError::from(e);
            assert_eq!(api.status.as_u16(), status, "{api:?}");
            assert_eq!(api.field.as_deref(), field, "{api:?}");
            let expected = if status == 400 {
                "invalid_argument"
            } else {
                "membership_conflict"
            };
            assert_eq!(api.code, expected);
        }
    }

    #[test]
    fn node_errors_are_unavailable_except_storage_ones() {
        for e in [
            NodeError::Unavailable("x".into()),
            NodeError::LeaderUnreachable(1),
            NodeError::Timeout("x".into()),
            NodeError::NotLeader(None),
            NodeError::OtherBuild("x".into()),
        ] {
            assert_eq!(ApiError::from(e).status, StatusCode::SERVICE_UNAVAILABLE);
        }
        let storage = ApiError::from(NodeError::Storage("disk".into()));
        assert_eq!(storage.status, StatusCode::INTERNAL_SERVER_ERROR);
        let full = ApiError::from(NodeError::StorageFull("no room".into()));
        assert_eq!(
            (full.status.as_u16(), full.code),
            (507, "storage_full"),
            "{full:?}"
        );
        assert!(full.message.contains("no room"), "{}", full.message);
        let unsupported = ApiError::from(NodeError::Unsupported("a drain".into()));
        assert_eq!(
            (unsupported.status.as_u16(), unsupported.grpc_code()),
            (501, Code::Unimplemented),
            "{unsupported:?}"
        );
    }

    #[test]
    fn every_code_has_its_grpc_status_and_metadata() {
        let cases = [
            (ApiError::invalid("a.b", "bad"), Code::InvalidArgument),
            (ApiError::unauthenticated("no"), Code::Unauthenticated),
            (ApiError::permission_denied("no"), Code::PermissionDenied),
            (
                EngineError::QueueNotFound("q".into()).into(),
                Code::NotFound,
            ),
            (ApiError::route_not_found(), Code::Unimplemented),
            (ApiError::method_not_allowed(), Code::Unimplemented),
            (
                EngineError::QueueExists("q".into()).into(),
                Code::AlreadyExists,
            ),
            (
                EngineError::QueueInUse { sources: vec![] }.into(),
                Code::FailedPrecondition,
            ),
            (EngineError::LeaseExpired.into(), Code::FailedPrecondition),
            (
                EngineError::MoveTaskNotFound("t".into()).into(),
                Code::NotFound,
            ),
            (
                EngineError::MoveTaskRunning("t".into()).into(),
                Code::FailedPrecondition,
            ),
            (
                EngineError::MoveTaskNotRunning("cancelled".into()).into(),
                Code::FailedPrecondition,
            ),
            (ApiError::body_too_large(1), Code::ResourceExhausted),
            (NodeError::NotLeader(None).into(), Code::Unavailable),
            (
                NodeError::StorageFull("no room".into()).into(),
                Code::ResourceExhausted,
            ),
            (ApiError::internal("disk"), Code::Internal),
        ];
        for (e, code) in cases {
            let status = Status::from(e.clone());
            assert_eq!(status.code(), code, "{}", e.code);
            assert_eq!(status.message(), e.message);
            let meta = status.metadata();
            assert_eq!(meta.get(CODE_METADATA).unwrap().to_str().unwrap(), e.code);
            assert_eq!(
                meta.get(FIELD_METADATA)
                    .map(|v| v.to_str().unwrap().to_string()),
                e.field
            );
            let bin = meta.get_bin(ERROR_METADATA).unwrap().to_bytes().unwrap();
            assert_eq!(pb::Error::decode(bin).unwrap().code, e.code);
        }
    }

    #[test]
    fn fields_that_are_not_printable_ascii_are_percent_encoded() {
        assert_eq!(metadata_text("entries[1].id"), "entries[1].id");
        assert_eq!(metadata_text("attributes.é%"), "attributes.%C3%A9%25");
        let status = Status::from(ApiError::invalid("attributes.\n", "bad"));
        assert_eq!(
            status
                .metadata()
                .get(FIELD_METADATA)
                .unwrap()
                .to_str()
                .unwrap(),
            "attributes.%0A"
        );
    }

    #[test]
    fn invalid_arguments_name_their_field() {
        let e = ApiError::invalid("lease_seconds", "must be an integer");
        let body = serde_json::to_value(&e).unwrap();
        assert_eq!(body["field"], "lease_seconds");
        assert_eq!(body["code"], "invalid_argument");
        assert!(body.get("sources").is_none());
    }
}
