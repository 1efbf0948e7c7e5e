//! The OpenAPI 3.1 document of the REST API, served at `GET /v1/openapi.json` and checked in as
//! `docs/openapi.json`. It is generated from the code, so it cannot drift from it:
//!
//! - the router is built from the annotated handlers (`routes::api`), so a route exists only with
//!   its operation (`tests/integration/http.rs` checks that each documented path answers its
//!   documented methods and only those);
//! - response schemas are derived from the serialized shapes of `json` and `status`; engine types
//!   that the API returns as they are have schema mirrors here (the engine does not depend on
//!   utoipa), held to the engine's JSON by a test;
//! - request schemas are the types the handlers read their bodies into (`body`), next to the
//!   handlers; a test holds their properties to the fields each type reads, and
//!   `tests/integration/http.rs` holds their required fields to those the server requires;
//! - a test holds `docs/openapi.json` to the generated document:
//!   `RAFTQ_UPDATE_OPENAPI=1 cargo test -p raftq-api openapi` rewrites it.
//!
//! Schema mirrors derive `Serialize` too: serde's attributes (`rename`, `skip_serializing_if`)
//! shape their schemas as they shape the response types', and the mirror test compares their
//! JSON.
//!
//! Error answers are listed by the inputs that cause them: a route's responses include those of
//! its [`Account`] (401), [`Admin`] (401, 403), [`QueuePath`] (400, 404) and [`JsonBody`] (400, 413) extractors, and
//! [`Replicated`] (500, 503, 507) for a route that reads or writes through Raft.

use std::collections::BTreeMap;

use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    Content, HeaderBuilder, OpenApi, Ref, RefOr, Required, Response, ResponseBuilder,
};
use utoipa::{IntoParams, IntoResponses, Modify, ToSchema};

use crate::auth::{Account, Admin};
use crate::input::{JsonBody, QueuePath};
pub use crate::schemas::{
    deduplication_scope, permission, queue_reference, queue_type, ErrorBody, QueueStats,
};

/// The document's frame: title, security scheme and tags; `routes::api` adds the operations.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "raftq",
        description = "The REST API of raftq, a Raft-replicated message queue (SPEC.md §3). \
            Choices where the spec is silent are in docs/api.md."
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    components(schemas(ErrorBody)),
    tags(
        (name = "queues", description = "Create, read, change and delete queues"),
        (name = "messages", description = "Send, peek and purge messages"),
        (name = "leases", description = "Receive messages, acknowledge them, change their leases"),
        (name = "move_tasks", description = "Move a queue's messages, paced, back to their dead-letter sources or to another queue"),
        (name = "cluster", description = "Cluster status and membership, liveness, metrics and this document"),
    )
)]
pub struct ApiDoc;

/// The `bearer` security scheme: `Authorization: Bearer <key>`.
struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut OpenApi) {
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "An API key of the server's key file (`--keys`); it names the account. Without \
                 a key file every request is account `dev` and the header is ignored.",
            ))
            .build();
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", SecurityScheme::Http(scheme));
    }
}

/// An error answer: its status, when the API gives it, and a header it sets.
struct ErrorAnswer {
    status: u16,
    when: &'static str,
    header: Option<(&'static str, &'static str)>,
}

impl ErrorAnswer {
    /// The answer `status` with no header of its own.
    const fn new(status: u16, when: &'static str) -> ErrorAnswer {
        ErrorAnswer {
            status,
            when,
            header: None,
        }
    }

    /// The same answer, setting the header `name`.
    const fn with_header(self, name: &'static str, description: &'static str) -> ErrorAnswer {
        ErrorAnswer {
            header: Some((name, description)),
            ..self
        }
    }
}

const INVALID_ARGUMENT: ErrorAnswer = ErrorAnswer::new(
    400,
    "`invalid_argument`: a path parameter, query parameter or body field breaks a rule; `field` \
     names it and `message` says why",
);

const UNAUTHENTICATED: ErrorAnswer =
    ErrorAnswer::new(401, "`unauthenticated`: no API key, or an unknown one")
        .with_header("WWW-Authenticate", "`Bearer`");

const PERMISSION_DENIED: ErrorAnswer =
    ErrorAnswer::new(403, "`permission_denied`: the key's role is not `admin`");

const QUEUE_NOT_FOUND: ErrorAnswer = ErrorAnswer::new(
    404,
    "`queue_not_found`: the account has no such queue (another account's queue is not found \
     either)",
);

const TOO_LARGE: ErrorAnswer = ErrorAnswer::new(
    413,
    "`message_too_large`: the request body is over the route's limit (field `request_body`), or \
     a message over its queue's `max_message_bytes` (field `body`)",
);

const INTERNAL: ErrorAnswer = ErrorAnswer::new(
    500,
    "`internal`: a storage failure of the node; never bad input",
);

const STORAGE_FULL: ErrorAnswer = ErrorAnswer::new(
    507,
    "`storage_full`: a write while the leader's disk is short of space (below `--min-free-bytes` \
     for a write that adds data, or no room left for the Raft log); it was not proposed, and may \
     succeed once space is freed. Reads are never refused so",
);

const UNAVAILABLE: ErrorAnswer = ErrorAnswer::new(
    503,
    "`unavailable`: no leader in time, forwarding failed, or a write was not committed in time \
     (it may still commit); retry",
)
.with_header("Retry-After", "Seconds to wait before a retry: `1`");

/// The responses of `answers`, each with the error envelope as its body.
fn error_responses(answers: &[ErrorAnswer]) -> BTreeMap<String, RefOr<Response>> {
    answers
        .iter()
        .map(|answer| {
            let mut response = ResponseBuilder::new().description(answer.when).content(
                "application/json",
                Content::new(Some(Ref::from_schema_name(ErrorBody::name()))),
            );
            if let Some((name, description)) = answer.header {
                let header = HeaderBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                    .description(Some(description))
                    .build();
                response = response.header(name, header);
            }
            (answer.status.to_string(), response.build().into())
        })
        .collect()
}

/// A route that needs an API key.
impl IntoResponses for Account {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        error_responses(&[UNAUTHENTICATED])
    }
}

/// A route that needs an admin key.
impl IntoResponses for Admin {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        error_responses(&[UNAUTHENTICATED, PERMISSION_DENIED])
    }
}

/// A route on one queue.
impl IntoResponses for QueuePath {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        error_responses(&[INVALID_ARGUMENT, QUEUE_NOT_FOUND])
    }
}

/// The path parameter `q`.
impl IntoParams for QueuePath {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let q = ParameterBuilder::new()
            .name("q")
            .parameter_in(ParameterIn::Path)
            .required(Required::True)
            .description(Some(
                "The queue: its name, its UUID or its CRN, URL-encoded \
                 (`crn%3Av1%3Araftq%3A...`)",
            ))
            .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
            .build();
        vec![q]
    }
}

/// A route that reads a JSON body.
impl IntoResponses for JsonBody {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        error_responses(&[INVALID_ARGUMENT, TOO_LARGE])
    }
}

/// A route that reads or writes through Raft.
pub struct Replicated;

impl IntoResponses for Replicated {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        error_responses(&[INTERNAL, UNAVAILABLE, STORAGE_FULL])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    use serde_json::{json, Value};

    /// The generated document as JSON.
    pub fn document_value() -> Value {
        serde_json::to_value(crate::routes::document()).expect("the document serializes")
    }

    /// What `$ref` points to in `doc`, or the schema itself.
    pub fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
        match schema["$ref"].as_str() {
            Some(target) => {
                let pointer = target.trim_start_matches('#');
                doc.pointer(pointer)
                    .unwrap_or_else(|| panic!("{target} resolves"))
            }
            None => schema,
        }
    }

    /// The property names and the required ones of an object schema, through `$ref` and `allOf`.
    pub fn properties(doc: &Value, schema: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
        let schema = resolve(doc, schema);
        let mut names: BTreeSet<String> = schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let mut required: BTreeSet<String> = schema["required"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        for part in schema["allOf"].as_array().into_iter().flatten() {
            let (more, more_required) = properties(doc, part);
            names.extend(more);
            required.extend(more_required);
        }
        (names, required)
    }

    /// The component schema `name`.
    pub fn component<'a>(doc: &'a Value, name: &str) -> &'a Value {
        let schema = &doc["components"]["schemas"][name];
        assert!(!schema.is_null(), "no schema {name}");
        schema
    }

    fn checked_in_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
    }

    /// Every `$ref` below `value`.
    fn references(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                    found.push(target.to_string());
                }
                map.values().for_each(|v| references(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| references(v, found)),
            _ => {}
        }
    }

    #[test]
    fn openapi_references_resolve() {
        let doc = document_value();
        let mut found = Vec::new();
        references(&doc, &mut found);
        assert!(found.len() > 20);
        for target in found {
            assert!(
                target.starts_with("#/components/schemas/")
                    && doc.pointer(target.trim_start_matches('#')).is_some(),
                "{target}"
            );
        }
    }

    /// Each operation answers the errors of its inputs: a key (unless it needs none), a queue
    /// path, a JSON body; and has an ID, a tag and a summary.
    #[test]
    fn openapi_operations_list_the_errors_of_their_inputs() {
        let doc = document_value();
        let tags: BTreeSet<&str> = doc["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        let mut ids = BTreeSet::new();
        let paths = doc["paths"].as_object().expect("paths");
        for (path, item) in paths {
            for (method, op) in item.as_object().expect("path item") {
                let at = format!("{method} {path}");
                let responses = op["responses"].as_object().expect("responses");
                let has = |status: &str| responses.contains_key(status);
                assert!(has("200") || has("201") || has("204"), "{at}: a success");
                assert!(ids.insert(op["operationId"].as_str().expect("id")), "{at}");
                assert!(op["summary"].is_string(), "{at}: a summary");
                let tag = op["tags"][0].as_str().unwrap_or_default();
                assert!(tags.contains(tag), "{at}: tag {tag}");
                let open = op["security"] == json!([]);
                assert_eq!(has("401"), !open, "{at}: 401 exactly when a key is needed");
                if path.contains("{q}") {
                    assert!(has("400") && has("404"), "{at}: the queue path's errors");
                    assert_eq!(op["parameters"][0]["name"], "q", "{at}");
                }
                if !op["requestBody"].is_null() {
                    assert!(has("400") && has("413"), "{at}: the body's errors");
                }
            }
        }
        assert_eq!(doc["security"], json!([{"bearer": []}]));
        assert_eq!(
            doc["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
    }

    /// `docs/openapi.json` is the generated document; `RAFTQ_UPDATE_OPENAPI=1` rewrites it.
    #[test]
    fn openapi_checked_in_document_is_current() {
        let generated =
            serde_json::to_string_pretty(&crate::routes::document()).expect("serializes") + "\n";
        let path = checked_in_path();
        if std::env::var_os("RAFTQ_UPDATE_OPENAPI").is_some() {
            std::fs::write(&path, &generated).expect("write docs/openapi.json");
            return;
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "docs/openapi.json is not the generated document; regenerate it with \
             `RAFTQ_UPDATE_OPENAPI=1 cargo test -p raftq-api openapi` and review the diff"
        );
    }
}
