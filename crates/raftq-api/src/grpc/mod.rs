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
use axum::Router;
use tonic::server::NamedService;

use crate::error::ApiError;
use crate::routes::BATCH_BODY_LIMIT;
use crate::AppState;

/// Generated protobuf messages, server and client of `proto/raftq.proto` (package `raftq.v1`).
pub use raftq_proto::v1 as pb;

use pb::queues_server::QueuesServer;

/// Adds the `raftq.v1.Queues` service to `router`, under `/raftq.v1.Queues/<Method>`, outside
/// the REST body limits, which do not apply to gRPC.
pub(crate) fn serve_on(router: Router, state: AppState) -> Router {
    type Server = QueuesServer<service::QueuesService>;
    let server = Server::new(service::QueuesService::new(state))
        // A batch of the largest messages fits, as over REST.
        .max_decoding_message_size(BATCH_BODY_LIMIT);
    router.route_service(&format!("/{}/{{*method}}", Server::NAME), server)
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
