//! The gRPC front end: the `raftq.v1.Queues` service of `proto/raftq.proto`, one rpc per
//! operation of SPEC.md §3, served by [`crate::router`] on the same port as REST.
//!
//! It is a thin layer over the same code as REST: a call authenticates with the same [`Keys`]
//! (metadata `authorization: Bearer <key>`), decodes its protobuf request into the plain values
//! of `ops` (which checks, proposes or queries, and long polls), renders the answer through the
//! shapes of `json` converted to protobuf, and fails with the status that `error` maps from the
//! same `ApiError` REST would answer.
//!
//! - `convert`: protobuf requests to `ops` inputs, response shapes to protobuf.
//! - `service`: the rpc handlers.
//!
//! [`Keys`]: crate::Keys

mod convert;
mod service;

use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderMap;
use axum::response::Response;
use tonic::server::NamedService;

use crate::error::ApiError;
use crate::limits::BATCH_BODY_LIMIT;
use crate::shared::AppState;

/// Generated protobuf messages, server and client of `proto/raftq.proto` (package `raftq.v1`).
pub use raftq_proto::v1 as pb;

use pb::queues_server::QueuesServer;

/// The tonic server of `raftq.v1.Queues`.
pub(crate) type Server = QueuesServer<service::QueuesService>;

/// The `raftq.v1.Queues` server, outside the REST body limits, which do not apply to gRPC.
pub(crate) fn server(state: AppState) -> Server {
    Server::new(service::QueuesService::new(state))
        // A batch of the largest messages fits, as over REST.
        .max_decoding_message_size(BATCH_BODY_LIMIT)
}

/// Whether `path` is under `/raftq.v1.Queues/`, the service's (its rpcs and the names that are
/// none, which it answers `UNIMPLEMENTED`).
pub(crate) fn is_service_path(path: &str) -> bool {
    path.strip_prefix('/')
        .and_then(|rest| rest.strip_prefix(Server::NAME))
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether a request is a gRPC call (`content-type: application/grpc[+proto|...]`).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// The answer to a request no route takes: a gRPC status (`UNIMPLEMENTED`, with the error's
/// metadata) for a gRPC call, so that gRPC clients never get REST's JSON, else the JSON error.
pub(crate) fn refuse(headers: &HeaderMap, error: ApiError) -> Response {
    if is_grpc(headers) {
        tonic::Status::from(error).into_http()
    } else {
        axum::response::IntoResponse::into_response(error)
    }
}

#[cfg(test)]
mod tests {
    use super::is_service_path;

    #[test]
    fn only_paths_under_the_service_go_to_it() {
        assert!(is_service_path("/raftq.v1.Queues/SendMessage"));
        assert!(is_service_path("/raftq.v1.Queues/NoSuchRpc"));
        assert!(!is_service_path("/raftq.v1.Queues"));
        assert!(!is_service_path("/raftq.v1.QueuesX/SendMessage"));
        assert!(!is_service_path("/v1/queues"));
        assert!(!is_service_path("/other.Service/Call"));
    }
}
