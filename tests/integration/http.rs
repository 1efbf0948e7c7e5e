//! What only the REST API has, end to end on a real single-node cluster on loopback (set up by
//! `serving`) with a real HTTP client: JSON that protobuf cannot carry (wrong types, unknown
//! fields, malformed bodies, query strings), dead-letter targets given as resource references,
//! unknown routes and methods, body size limits, the headers of refusals, the node state,
//! health and metrics routes, and the OpenAPI document against the served routes. The
//! operations both fronts share are tested through both in `api`. Every test is bounded in
//! time and stops its server and node.

use std::collections::{BTreeMap, BTreeSet};

use crate::front::{refused, Rest, Served};
use crate::serving::{two_accounts, Serving};
use raftq_api::Keys;
use reqwest::Method;
use serde_json::{json, Value};

/// Input that only JSON can express, refused naming its field: values of the wrong type,
/// unknown fields, malformed bodies and query strings; and nothing of it changes anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_that_protobuf_cannot_carry_is_a_400_naming_the_field() {
    Rest::test(Keys::open(), async |s| {
        assert_eq!(s.post("/v1/queues", json!({"name": "v"})).await.status, 201);
        let cases: Vec<(Method, &str, Value, &str)> = vec![
            (Method::POST, "/v1/queues", json!([1]), "request_body"),
            (Method::POST, "/v1/queues", json!({"name": 5}), "name"),
            (Method::POST, "/v1/queues", json!({"name": "q", "bogus": 1}), "bogus"),
            (Method::POST, "/v1/queues", json!({"name": "q", "lease_seconds": "x"}), "lease_seconds"),
            (Method::POST, "/v1/queues", json!({"name": "q", "lease_seconds": 1.5}), "lease_seconds"),
            (Method::POST, "/v1/queues", json!({"name": "q", "content_based_deduplication": "yes"}), "content_based_deduplication"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_policy": "v"}), "redrive_policy"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_allow_policy": {"permission": "by_queue", "source_queues": [7]}}), "redrive_allow_policy.source_queues[0]"),
            (Method::PATCH, "/v1/queues/v", json!({"name": "w"}), "name"),
            (Method::PATCH, "/v1/queues/v", json!({"lease_seconds": true}), "lease_seconds"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": 5}), "body"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": "x", "attributes": {"a": 1}}), "attributes.a"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": "x", "attributes": []}), "attributes"),
            (Method::POST, "/v1/queues/v/messages/batch", json!({"entries": [{"id": "a", "body": 1}]}), "entries[0].body"),
            (Method::POST, "/v1/queues/v/messages/batch", json!({"entries": [{"id": "a", "body": "x", "bogus": 1}]}), "entries[0].bogus"),
            (Method::POST, "/v1/queues/v/receive", json!({"lease_seconds": "x"}), "lease_seconds"),
            (Method::POST, "/v1/queues/v/ack", json!({"receipts": "r"}), "receipts"),
            (Method::POST, "/v1/queues/v/ack", json!({"receipts": [1]}), "receipts[0]"),
            (Method::GET, "/v1/queues/v/messages?limit=x", Value::Null, "limit"),
            (Method::GET, "/v1/queues/v/messages?after=-1", Value::Null, "after"),
            (Method::GET, "/v1/queues/v/messages?foo=1", Value::Null, "foo"),
            (Method::GET, "/v1/queues/v/messages?limit=1&limit=2", Value::Null, "limit"),
            (Method::GET, "/v1/queues?bogus=1", Value::Null, "bogus"),
            (Method::POST, "/v1/cluster/nodes", json!({"id": -1, "raft_addr": "h:1"}), "id"),
            (Method::DELETE, "/v1/cluster/nodes/x", Value::Null, "id"),
            (Method::POST, "/v1/cluster/nodes/x/drain", Value::Null, "id"),
        ];
        for (method, path, body, field) in cases {
            let r = s.request(method.clone(), path, body.clone()).await;
            assert_eq!(r.status, 400, "{method} {path} {body}: {}", r.body);
            refused(r.outcome(), "invalid_argument", Some(field));
        }
        for raw in [&b"{not json"[..], b"\"just a string\"", b"{\"name\": \"q\",}"] {
            let r = s.send_raw(None, Method::POST, "/v1/queues", Some(raw.to_vec())).await;
            refused(r.outcome(), "invalid_argument", Some("request_body"));
        }
        // Nothing above changed anything.
        let all = s.get("/v1/queues").await;
        assert_eq!(all.body["queues"].as_array().map(Vec::len), Some(1));
        assert_eq!(s.get("/v1/queues/v/stats").await.body["visible"], 0);
        // Empty bodies are {} where every field is optional.
        let got = s.post("/v1/queues/v/receive", Value::Null).await;
        assert_eq!(got.status, 200, "{}", got.body);
        assert_eq!(got.body, json!({"messages": []}));
    })
    .await;
}

/// The target of a redrive policy may be given as the resource reference the API returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_target_may_be_the_resource_reference_the_api_returns() {
    Rest::test(Keys::open(), async |s| {
        let dlq = s.post("/v1/queues", json!({"name": "dlq"})).await.body;
        let target = json!({"id": dlq["id"], "name": "dlq", "crn": dlq["crn"]});
        let policy = json!({"dead_letter_target": target, "max_receive_count": 1});
        let src = s
            .post(
                "/v1/queues",
                json!({"name": "src", "redrive_policy": policy}),
            )
            .await;
        assert_eq!(src.status, 201, "{}", src.body);
        assert_eq!(src.body["redrive_policy"], policy);
    })
    .await;
}

/// Unknown routes are `404 not_found`, unknown methods `405`, and bodies over the route's
/// limit `413` before they are read; nothing of them is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_and_methods_and_oversize_bodies_are_refused() {
    Rest::test(Keys::open(), async |s| {
        refused(s.get("/v1/nothing").await.outcome(), "not_found", None);
        let put = s.request(Method::PUT, "/v1/queues", Value::Null).await;
        refused(put.outcome(), "method_not_allowed", None);

        let small = json!({"name": "small", "max_message_bytes": 10});
        assert_eq!(s.post("/v1/queues", small).await.status, 201);
        let huge = json!({"body": "x".repeat(7 * 1024 * 1024)});
        let r = s.post("/v1/queues/small/messages", huge).await;
        refused(r.outcome(), "message_too_large", Some("request_body"));
        let huge_batch = json!({"entries": [{"id": "a", "body": "x".repeat(17 * 1024 * 1024)}]});
        let r = s.post("/v1/queues/small/messages/batch", huge_batch).await;
        refused(r.outcome(), "message_too_large", Some("request_body"));
        assert_eq!(s.get("/v1/queues/small/stats").await.body["visible"], 0);
    })
    .await;
}

/// A request without a valid key is challenged (`WWW-Authenticate`); health and metrics need
/// no key; the node's state needs an admin key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_of_keys_are_challenged_and_only_admins_see_the_node_state() {
    Rest::test(two_accounts(), async |s| {
        let no_key = s.get("/v1/queues").await;
        assert!(no_key.headers.contains_key("www-authenticate"));
        refused(no_key.outcome(), "unauthenticated", None);
        assert_eq!(s.get("/healthz").await.status, 200);
        assert_eq!(s.get("/metrics").await.status, 200);

        let state = s
            .request_as(
                Some("acme-key"),
                Method::GET,
                "/v1/cluster/state",
                Value::Null,
            )
            .await;
        refused(state.outcome(), "permission_denied", None);
        let state = s
            .request_as(
                Some("admin-key"),
                Method::GET,
                "/v1/cluster/state",
                Value::Null,
            )
            .await;
        assert_eq!(state.status, 200);
    })
    .await;
}

/// An `unavailable` answer says when to retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_answers_say_when_to_retry() {
    Rest::over(Serving::without_quorum(Keys::open()).await)
        .run(async |s| {
            let r = s.post("/v1/queues", json!({"name": "q"})).await;
            assert_eq!(
                r.headers.get("retry-after").map(|v| v.as_bytes()),
                Some(&b"1"[..])
            );
            refused(r.outcome(), "unavailable", None);
        })
        .await;
}

/// The node's state (applied index and a digest that every change changes), health and
/// metrics (requests by route and status, Raft, member, clock and queue gauges, log fsyncs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_state_health_and_metrics_report_the_node() {
    Rest::test(Keys::open(), async |s| {
        assert_eq!(s.post("/v1/queues", json!({"name": "m"})).await.status, 201);
        let c = s.get("/v1/cluster").await;
        assert_eq!(c.status, 200, "{}", c.body);
        // One node, one group: group 1 holds the queue, this node its leader.
        let groups = c.body["groups"].as_array().expect("groups");
        assert_eq!(groups.len(), 1, "{}", c.body);
        let group = &groups[0];
        assert_eq!(
            (&group["group"], &group["queues"], &group["role"]),
            (&json!(1), &json!(1), &json!("leader")),
            "{group}"
        );
        assert_eq!(group["leader"], c.body["leader"]);
        assert_eq!(group["members"], json!([c.body["node_id"]]));
        assert_eq!(s.get("/v1/queues/m").await.body["group"], 1);

        let state = s.get("/v1/cluster/state").await;
        assert_eq!(state.status, 200, "{}", state.body);
        assert!(state.body["applied_index"].as_u64().is_some_and(|i| i >= 2));
        let digest = state.body["state_digest"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(digest.len(), 64, "hex SHA-256");
        let sent = s.post("/v1/queues/m/messages", json!({"body": "x"})).await;
        assert_eq!(sent.status, 200, "{}", sent.body);
        let after = s.get("/v1/cluster/state").await;
        assert_ne!(
            after.body["state_digest"], digest,
            "a change changes the digest"
        );

        let h = s.get("/healthz").await;
        assert_eq!(h.status, 200);
        assert_eq!(h.body["status"], "ok");

        let m = s.get("/metrics").await;
        assert_eq!(m.status, 200);
        let text = m.body.as_str().expect("text");
        assert!(
            text.contains(
                "raftq_requests_total{protocol=\"http\",method=\"POST\",route=\"/v1/queues\",status=\"201\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "raftq_requests_total{protocol=\"http\",method=\"GET\",route=\"/v1/cluster\",status=\"200\"} 1"
            ),
            "{text}"
        );
        for gauge in [
            "raftq_raft_term ",
            "raftq_raft_leader_id 1",
            "raftq_raft_commit_index ",
            "raftq_raft_last_applied_index ",
            "raftq_raft_apply_lag ",
            "raftq_queue_visible_messages{account=\"dev\",queue=\"m\"} 1",
            "raftq_queue_dead_lettered_messages_total{account=\"dev\",queue=\"m\"} 0",
            "raftq_raft_member_answering{member=\"1\"} 1",
            "raftq_raft_member_replication_lag_entries{member=\"1\"} 0",
            "raftq_clock_offset_seconds ",
            "raftq_clock_skewed 0",
            "raftq_clock_confirmed 1",
        ] {
            assert!(text.contains(gauge), "{gauge}: {text}");
        }
        // The log's appends were fsynced on the real disk, and counted.
        let fsyncs: u64 = text
            .lines()
            .find_map(|line| line.strip_prefix("raftq_log_fsync_duration_seconds_count "))
            .and_then(|count| count.parse().ok())
            .unwrap_or_else(|| panic!("no fsync count: {text}"));
        assert!(fsyncs > 0, "{text}");
    })
    .await;
}

/// What a `$ref` of the OpenAPI document `doc` points to, or the schema itself.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(target) => doc
            .pointer(target.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("{target} resolves")),
        None => schema,
    }
}

/// The properties (name and schema) and the required names of an object schema, through
/// `$ref`, `allOf` and `oneOf` (whose object member a nullable field names).
fn object_schema<'a>(
    doc: &'a Value,
    schema: &'a Value,
) -> (BTreeMap<&'a str, &'a Value>, BTreeSet<&'a str>) {
    let schema = resolve(doc, schema);
    let mut props: BTreeMap<&str, &Value> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, s)| (name.as_str(), s))
        .collect();
    let mut required: BTreeSet<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let parts = ["allOf", "oneOf"].map(|k| schema[k].as_array());
    for part in parts.into_iter().flatten().flatten() {
        let (more, more_required) = object_schema(doc, part);
        props.extend(more);
        required.extend(more_required);
    }
    (props, required)
}

/// A field of a request example: its JSON pointer, its name in errors, whether it is required.
struct ExampleField {
    pointer: String,
    name: String,
    required: bool,
}

/// The fields of `example` under `schema`, nested objects and the first object of an array
/// included; the example must give every required field.
fn example_fields(
    doc: &Value,
    schema: &Value,
    example: &Value,
    at: (&str, &str),
    found: &mut Vec<ExampleField>,
) {
    let (props, required) = object_schema(doc, schema);
    let Some(object) = example.as_object().filter(|_| !props.is_empty()) else {
        return;
    };
    let (pointer, name) = at;
    for field in &required {
        assert!(
            object.contains_key(*field),
            "the example gives {name}.{field}"
        );
    }
    for (key, value) in object {
        let field_schema = props
            .get(key.as_str())
            .unwrap_or_else(|| panic!("{name}.{key}: the example names a field the schema lacks"));
        let field = ExampleField {
            pointer: format!("{pointer}/{key}"),
            name: if name.is_empty() {
                key.clone()
            } else {
                format!("{name}.{key}")
            },
            required: required.contains(key.as_str()),
        };
        match value {
            Value::Object(_) => example_fields(
                doc,
                field_schema,
                value,
                (&field.pointer, &field.name),
                found,
            ),
            Value::Array(items) if items.first().is_some_and(Value::is_object) => {
                let item_schema = &resolve(doc, field_schema)["items"];
                let (pointer, name) =
                    (format!("{}/0", field.pointer), format!("{}[0]", field.name));
                example_fields(doc, item_schema, &items[0], (&pointer, &name), found);
            }
            _ => {}
        }
        found.push(field);
    }
}

/// `body` without the field at `pointer`.
fn without(body: &Value, pointer: &str) -> Value {
    let mut body = body.clone();
    let (parent, key) = pointer.rsplit_once('/').expect("a field pointer");
    body.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .expect("an object")
        .remove(key);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_is_served_without_a_key() {
    Rest::test(two_accounts(), async |s| {
        let r = s.get("/v1/openapi.json").await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(
            r.headers.get("content-type").map(|v| v.as_bytes()),
            Some(&b"application/json"[..])
        );
        let doc = &r.body;
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
        assert!(doc["paths"]["/v1/queues/{q}/receive"]["post"].is_object());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
        let checked_in: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON");
        assert_eq!(
            doc, &checked_in,
            "the served document is the checked-in one"
        );
        let keyed = s.get("/v1/queues").await;
        refused(keyed.outcome(), "unauthenticated", None);
    })
    .await;
}

/// Every documented path answers exactly its documented methods, and 405 to the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_paths_and_methods_are_the_served_routes() {
    Rest::test(Keys::open(), async |s| {
        let doc = s.get("/v1/openapi.json").await.body;
        let paths = doc["paths"].as_object().expect("paths");
        assert!(paths.len() >= 15, "{} paths", paths.len());
        for (path, item) in paths {
            let url = path.replace("{q}", "openapi-absent");
            for method in [
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
            ] {
                let documented = item.get(method.as_str().to_lowercase()).is_some();
                let r = s.request(method.clone(), &url, Value::Null).await;
                if documented {
                    assert!(
                        r.status != 405 && r.error_code() != "not_found",
                        "{method} {path}: {} {}",
                        r.status,
                        r.body
                    );
                } else {
                    refused(r.outcome(), "method_not_allowed", None);
                }
            }
        }
    })
    .await;
}

/// A request example without one of its required fields is refused naming that field, and
/// without an optional one is not: the document's `required` is what the server requires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_required_fields_are_the_ones_the_server_requires() {
    Rest::test(Keys::open(), async |s| {
        let doc = s.get("/v1/openapi.json").await.body;
        let mut checked = 0;
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("operations") {
                let schema = &op["requestBody"]["content"]["application/json"]["schema"];
                if schema.is_null() {
                    continue;
                }
                let example = &resolve(&doc, schema)["example"];
                assert!(example.is_object(), "{method} {path}: an example");
                let mut fields = Vec::new();
                example_fields(&doc, schema, example, ("", ""), &mut fields);
                let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
                // An absent queue: the fields are read before the queue is looked up.
                let url = path.replace("{q}", "openapi-absent");
                for field in fields {
                    let r = s
                        .request(method.clone(), &url, without(example, &field.pointer))
                        .await;
                    let refused = r.status == 400
                        && r.error_field() == Some(field.name.as_str())
                        && r.body["error"]["message"] == format!("{}: is required", field.name);
                    assert_eq!(
                        refused, field.required,
                        "{method} {path} without {}: {} {}",
                        field.name, r.status, r.body
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 30, "{checked} fields");
    })
    .await;
}
