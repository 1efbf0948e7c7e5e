//! The routes of SPEC.md §3 and the layers around them: body size limits and JSON answers for
//! unknown paths and methods (gRPC statuses for gRPC calls). Each handler carries its OpenAPI
//! operation (`#[utoipa::path]`), and the router is built from those (see `openapi`).
//!
//! - [`queues`]: create, list, get, patch, delete, dead-letter sources, stats.
//! - [`messages`]: send, batch send, peek, purge, list and cancel scheduled messages.
//! - [`leases`]: receive (with long polling), ack, lease change.
//! - [`move_tasks`]: start, list and cancel message move tasks.
//! - [`cluster`]: cluster status and membership, liveness, Prometheus metrics and the OpenAPI
//!   document.
//! - [`backup`]: the cluster's state as one backup file, streamed.

mod backup;
mod cluster;
mod leases;
mod messages;
mod move_tasks;
mod queues;

use std::convert::Infallible;

use axum::extract::DefaultBodyLimit;
use axum::http::HeaderMap;
use axum::routing::MethodRouter;
use axum::{Extension, Router};
use utoipa::OpenApi;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::input::BodyLimit;
use crate::limits::{BATCH_BODY_LIMIT, BODY_LIMIT};
use crate::shared::AppState;
use crate::{grpc, openapi};

/// Gives a route its own body limit.
fn with_body_limit(route: MethodRouter<AppState>, limit: usize) -> MethodRouter<AppState> {
    route
        .layer::<_, Infallible>(DefaultBodyLimit::max(limit))
        .layer::<_, Infallible>(Extension(BodyLimit(limit)))
}

/// The routes, each registered from its annotated handler, so that the router and the OpenAPI
/// document (`openapi`) list the same paths and methods. Only handlers of one path may share a
/// `routes!`.
pub fn api() -> OpenApiRouter<AppState> {
    let batch = routes!(messages::send_batch).map(|route| with_body_limit(route, BATCH_BODY_LIMIT));
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(queues::create, queues::list))
        .routes(routes!(queues::get, queues::patch, queues::delete))
        .routes(routes!(queues::dead_letter_sources))
        .routes(routes!(queues::stats))
        .routes(routes!(messages::send, messages::peek))
        .routes(batch)
        .routes(routes!(messages::purge))
        .routes(routes!(messages::scheduled))
        .routes(routes!(messages::cancel_scheduled))
        .routes(routes!(leases::receive))
        .routes(routes!(leases::ack))
        .routes(routes!(leases::change))
        .routes(routes!(move_tasks::start, move_tasks::list))
        .routes(routes!(move_tasks::cancel))
        .routes(routes!(cluster::show))
        .routes(routes!(cluster::add_node))
        .routes(routes!(cluster::remove_node))
        .routes(routes!(cluster::drain_node, cluster::undrain_node))
        .routes(routes!(cluster::state))
        .routes(routes!(backup::backup))
        .routes(routes!(cluster::accounts))
        .routes(routes!(cluster::healthz))
        .routes(routes!(cluster::metrics))
        .routes(routes!(cluster::openapi))
}

/// The OpenAPI document of the routes that [`build`] serves.
pub fn document() -> utoipa::openapi::OpenApi {
    api().into_openapi()
}

/// The whole API with its layers.
pub fn build(state: AppState) -> Router {
    let (router, _) = api().split_for_parts();
    router
        .fallback(|headers: HeaderMap| async move {
            grpc::refuse(&headers, ApiError::route_not_found())
        })
        .method_not_allowed_fallback(|headers: HeaderMap| async move {
            grpc::refuse(&headers, ApiError::method_not_allowed())
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde::de::DeserializeOwned;
    use serde_json::{json, Value};

    use super::*;
    use crate::body;
    use crate::openapi::tests::{component, document_value, properties};

    fn names(fields: &[&str]) -> BTreeSet<String> {
        fields.iter().map(|f| f.to_string()).collect()
    }

    /// The fields a request type reads, as its refusal of an unknown one lists them.
    fn accepted<T: DeserializeOwned>() -> BTreeSet<String> {
        let refusal = body::read::<T>(&json!({"-": 0})).err().expect("refused");
        let list = refusal
            .message
            .split_once("(expected one of: ")
            .and_then(|(_, list)| list.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{}", refusal.message));
        names(&list.split(", ").collect::<Vec<_>>())
    }

    /// The query parameters of an operation.
    fn query_params(doc: &Value, method: &str, path: &str) -> BTreeSet<String> {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "query")
            .filter_map(|p| p["name"].as_str().map(str::to_string))
            .collect()
    }

    /// Each request schema has exactly the fields its type reads (which refuses any other).
    #[test]
    fn openapi_request_schemas_name_the_fields_the_handlers_accept() {
        let doc = document_value();
        let cases = [
            ("CreateQueue", accepted::<queues::CreateQueue>()),
            ("QueueSettings", accepted::<queues::QueueSettings>()),
            ("RedrivePolicyBody", accepted::<queues::RedrivePolicyBody>()),
            ("AllowPolicyBody", accepted::<queues::AllowPolicyBody>()),
            ("RetryBackoffBody", accepted::<queues::RetryBackoffBody>()),
            ("SendMessage", accepted::<messages::SendMessage>()),
            ("SendBatch", accepted::<messages::SendBatch>()),
            ("BatchEntry", accepted::<messages::BatchEntry>()),
            ("Receive", accepted::<leases::Receive>()),
            ("Ack", accepted::<leases::Ack>()),
            ("ChangeLease", accepted::<leases::ChangeLease>()),
            ("AddNode", accepted::<cluster::AddNode>()),
            ("StartMoveTask", accepted::<move_tasks::StartMoveTask>()),
            ("MoveFilterBody", accepted::<move_tasks::MoveFilterBody>()),
        ];
        for (schema, fields) in cases {
            let (props, required) = properties(&doc, component(&doc, schema));
            assert_eq!(props, fields, "{schema}");
            assert!(required.is_subset(&props), "{schema}");
        }
        assert_eq!(
            query_params(&doc, "get", "/v1/queues"),
            names(queues::LIST_PARAMS)
        );
        assert_eq!(
            query_params(&doc, "get", "/v1/queues/{q}/messages"),
            names(messages::PEEK_PARAMS)
        );
        assert_eq!(
            query_params(&doc, "get", "/v1/queues/{q}/scheduled"),
            names(messages::PEEK_PARAMS)
        );
    }
}
