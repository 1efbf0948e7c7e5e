//! The REST API end to end: a real single-node cluster on loopback in a temporary directory, the
//! router on another loopback port (set up by `serving`), and a real HTTP client. Every test is
//! bounded in time and stops its server and node.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Deref;
use std::time::Duration;

use crate::serving::{absent_peer, bounded, two_accounts, Serving};
use raftq_api::Keys;
use reqwest::Method;
use serde_json::{json, Value};
use tokio::time::{sleep, Instant};

/// The served node with a REST client.
struct Server {
    serving: Serving,
    base: String,
    client: reqwest::Client,
    /// The API key sent with every request, if any.
    key: Option<String>,
}

/// The node and its address.
impl Deref for Server {
    type Target = Serving;

    fn deref(&self) -> &Serving {
        &self.serving
    }
}

/// A response: status and JSON body (`Null` when empty, a string when not JSON).
struct Reply {
    status: u16,
    body: Value,
    headers: reqwest::header::HeaderMap,
}

impl Reply {
    fn error_field(&self) -> Option<&str> {
        self.body["error"]["field"].as_str()
    }

    fn error_code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
}

impl Server {
    async fn start(keys: Keys) -> Server {
        Server::over(Serving::start(keys).await)
    }

    async fn start_with(keys: Keys, extra_peers: &[(u64, String)], leader: bool) -> Server {
        Server::over(Serving::start_with(keys, extra_peers, leader).await)
    }

    fn over(serving: Serving) -> Server {
        Server {
            base: format!("http://{}", serving.addr),
            serving,
            client: reqwest::Client::new(),
            key: None,
        }
    }

    fn with_key(mut self, key: &str) -> Server {
        self.key = Some(key.to_string());
        self
    }

    async fn shutdown(self) {
        drop(self.client);
        self.serving.shutdown().await;
    }

    async fn send_raw(
        &self,
        key: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Reply {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Reply {
            status,
            body,
            headers,
        }
    }

    async fn call_as(&self, key: Option<&str>, method: Method, path: &str, body: Value) -> Reply {
        let bytes = (!body.is_null()).then(|| body.to_string().into_bytes());
        self.send_raw(key, method, path, bytes).await
    }

    async fn call(&self, method: Method, path: &str, body: Value) -> Reply {
        self.call_as(self.key.as_deref(), method, path, body).await
    }

    async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, Value::Null).await
    }

    async fn post(&self, path: &str, body: Value) -> Reply {
        self.call(Method::POST, path, body).await
    }

    async fn patch(&self, path: &str, body: Value) -> Reply {
        self.call(Method::PATCH, path, body).await
    }

    async fn delete(&self, path: &str) -> Reply {
        self.call(Method::DELETE, path, Value::Null).await
    }

    /// Creates a queue and returns its object.
    async fn create(&self, body: Value) -> Value {
        let r = self.post("/v1/queues", body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        r.body
    }

    async fn send(&self, queue: &str, body: Value) -> Value {
        let r = self
            .post(&format!("/v1/queues/{queue}/messages"), body)
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }

    async fn receive(&self, queue: &str, body: Value) -> Vec<Value> {
        let r = self
            .post(&format!("/v1/queues/{queue}/receive"), body)
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["messages"].as_array().expect("messages").clone()
    }

    async fn stats(&self, queue: &str) -> Value {
        let r = self.get(&format!("/v1/queues/{queue}/stats")).await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
    }
}

/// Percent-encodes a path segment.
fn enc(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn is_rfc3339_utc(value: &Value) -> bool {
    value.as_str().is_some_and(|t| {
        t.len() == 24 && t.ends_with('Z') && t.as_bytes()[10] == b'T' && t.starts_with("20")
    })
}

fn assert_invalid(r: &Reply, field: &str) {
    assert_eq!(r.status, 400, "{field}: {}", r.body);
    assert_eq!(r.error_code(), "invalid_argument", "{}", r.body);
    assert_eq!(r.error_field(), Some(field), "{}", r.body);
    assert!(!r.body["error"]["message"].as_str().unwrap_or("").is_empty());
}

fn assert_error(r: &Reply, status: u16, code: &str) {
    assert_eq!(r.status, status, "{}", r.body);
    assert_eq!(r.error_code(), code, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_created_read_listed_patched_and_deleted_by_any_reference() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        let q = s.create(json!({"name": "orders"})).await;
        assert_eq!(q["name"], "orders");
        assert_eq!(q["type"], "standard");
        assert!(is_rfc3339_utc(&q["created_at"]), "{q}");
        assert_eq!(q["content_based_deduplication"], false);
        assert_eq!(q["lease_seconds"], 30);
        assert_eq!(q["delay_seconds"], 0);
        assert_eq!(q["retention_seconds"], 4 * 24 * 3600);
        assert_eq!(q["max_message_bytes"], 256 * 1024);
        assert_eq!(q["redrive_policy"], Value::Null);
        assert_eq!(q["redrive_allow_policy"], json!({"permission": "allow_all"}));
        let id = q["id"].as_str().expect("id").to_string();
        let crn = q["crn"].as_str().expect("crn").to_string();
        assert_eq!(crn, format!("crn:v1:raftq:public:queues:local:a/dev:{id}::"));

        let fifo = s
            .create(json!({"name": "orders.fifo", "type": "fifo", "content_based_deduplication": true, "lease_seconds": 5}))
            .await;
        assert_eq!(fifo["type"], "fifo");
        assert_eq!(fifo["content_based_deduplication"], true);
        assert_eq!(fifo["lease_seconds"], 5);
        s.create(json!({"name": "other"})).await;

        let again = s.post("/v1/queues", json!({"name": "orders"})).await;
        assert_error(&again, 409, "queue_exists");

        for reference in [&"orders".to_string(), &id, &crn] {
            let r = s.get(&format!("/v1/queues/{}", enc(reference))).await;
            assert_eq!(r.status, 200, "{reference}: {}", r.body);
            assert_eq!(r.body["id"], id.as_str());
        }

        let all = s.get("/v1/queues").await;
        assert_eq!(all.body["queues"].as_array().map(Vec::len), Some(3));
        let some = s.get("/v1/queues?prefix=ord").await;
        let names: Vec<&str> = some.body["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .filter_map(|q| q["name"].as_str())
            .collect();
        assert_eq!(names, ["orders", "orders.fifo"]);

        let patched = s
            .patch("/v1/queues/orders", json!({"lease_seconds": 60, "delay_seconds": 2}))
            .await;
        assert_eq!(patched.status, 200, "{}", patched.body);
        assert_eq!(patched.body["lease_seconds"], 60);
        assert_eq!(patched.body["delay_seconds"], 2);
        let empty_patch = s.patch("/v1/queues/orders", Value::Null).await;
        assert_eq!(empty_patch.status, 200, "{}", empty_patch.body);
        assert_eq!(empty_patch.body["lease_seconds"], 60);

        let deleted = s.delete(&format!("/v1/queues/{}", enc(&crn))).await;
        assert_eq!(deleted.status, 204);
        assert_eq!(deleted.body, Value::Null);
        assert_error(&s.get("/v1/queues/orders").await, 404, "queue_not_found");
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_policies_bind_list_block_deletion_move_and_detach() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        let dlq = s.create(json!({"name": "dlq"})).await;
        s.create(json!({"name": "dlq.fifo"})).await;
        let closed = s
            .create(json!({"name": "closed", "redrive_allow_policy": {"permission": "deny_all"}}))
            .await;
        assert_eq!(closed["redrive_allow_policy"], json!({"permission": "deny_all"}));

        let wrong_type = s
            .post(
                "/v1/queues",
                json!({"name": "a", "redrive_policy": {"dead_letter_target": "dlq.fifo", "max_receive_count": 1}}),
            )
            .await;
        assert_invalid(&wrong_type, "redrive_policy.dead_letter_target");
        assert!(wrong_type.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("same type")));
        let denied = s
            .post(
                "/v1/queues",
                json!({"name": "a", "redrive_policy": {"dead_letter_target": "closed", "max_receive_count": 1}}),
            )
            .await;
        assert_invalid(&denied, "redrive_policy.dead_letter_target");

        // The target may be given as the resource reference the API returns.
        let src = s
            .create(json!({"name": "src", "redrive_policy": {"dead_letter_target": {"id": dlq["id"], "name": "dlq", "crn": dlq["crn"]}, "max_receive_count": 1}}))
            .await;
        assert_eq!(
            src["redrive_policy"],
            json!({"dead_letter_target": {"id": dlq["id"], "name": "dlq", "crn": dlq["crn"]}, "max_receive_count": 1})
        );
        let by_queue = s
            .create(json!({"name": "picky", "redrive_allow_policy": {"permission": "by_queue", "source_queues": ["src"]}}))
            .await;
        assert_eq!(
            by_queue["redrive_allow_policy"]["source_queues"][0]["name"],
            "src"
        );

        let sources = s.get("/v1/queues/dlq/dead_letter_sources").await;
        assert_eq!(sources.status, 200);
        assert_eq!(sources.body, json!({"queues": [{"id": src["id"], "name": "src", "crn": src["crn"]}]}));
        let in_use = s.delete("/v1/queues/dlq").await;
        assert_error(&in_use, 409, "queue_in_use");
        assert_eq!(in_use.body["error"]["sources"][0]["name"], "src");
        assert!(in_use.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("src")));

        // Release of the last allowed lease moves the message at once.
        let sent = s.send("src", json!({"body": "poison", "attributes": {"k": "v"}})).await;
        let got = s.receive("src", json!({})).await;
        let receipt = got[0]["receipt"].as_str().expect("receipt");
        let released = s
            .post("/v1/queues/src/lease", json!({"receipt": receipt, "lease_seconds": 0}))
            .await;
        assert_eq!(released.status, 200, "{}", released.body);
        let peeked = s.get("/v1/queues/dlq/messages").await;
        let moved = &peeked.body["messages"][0];
        assert_eq!(moved["message_id"], sent["message_id"]);
        assert_eq!(moved["attributes"], json!({"k": "v"}));
        assert_eq!(moved["receive_count"], 0);
        assert_eq!(moved["state"], "visible");
        assert_eq!(moved["dead_letter_source"]["name"], "src");
        assert!(is_rfc3339_utc(&moved["moved_at"]), "{moved}");

        // A patch without the policy keeps it; null detaches it.
        let kept = s.patch("/v1/queues/src", json!({"lease_seconds": 9})).await;
        assert_eq!(kept.body["redrive_policy"]["max_receive_count"], 1);
        let detached = s.patch("/v1/queues/src", json!({"redrive_policy": null})).await;
        assert_eq!(detached.status, 200, "{}", detached.body);
        assert_eq!(detached.body["redrive_policy"], Value::Null);
        let none = s.get("/v1/queues/dlq/dead_letter_sources").await;
        assert_eq!(none.body, json!({"queues": []}));
        assert_eq!(s.delete("/v1/queues/dlq").await.status, 204);
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_sent_received_leased_peeked_and_acknowledged() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        s.create(json!({"name": "work"})).await;
        let sent = s
            .send("work", json!({"body": "hello", "attributes": {"kind": "greeting"}, "message_group_id": "g"}))
            .await;
        assert_eq!(sent["duplicate"], false);
        assert!(sent.get("sequence_number").is_none(), "{sent}");

        let got = s.receive("work", json!({"max_messages": 10, "lease_seconds": 120})).await;
        assert_eq!(got.len(), 1);
        let m = &got[0];
        assert_eq!(m["message_id"], sent["message_id"]);
        assert_eq!(m["body"], "hello");
        assert_eq!(m["attributes"], json!({"kind": "greeting"}));
        assert_eq!(m["receive_count"], 1);
        assert_eq!(m["message_group_id"], "g");
        assert!(is_rfc3339_utc(&m["sent_at"]));
        assert!(is_rfc3339_utc(&m["first_received_at"]));
        for absent in ["sequence_number", "message_deduplication_id", "dead_letter_source", "moved_at", "state"] {
            assert!(m.get(absent).is_none(), "{absent} in {m}");
        }
        let receipt = m["receipt"].as_str().expect("receipt").to_string();

        let peeked = s.get("/v1/queues/work/messages").await;
        let p = &peeked.body["messages"][0];
        assert_eq!(p["state"], "leased");
        assert_eq!(p["receive_count"], 1);
        assert!(p.get("receipt").is_none());
        let stats = s.stats("work").await;
        assert_eq!(stats["leased"], 1);
        assert_eq!(stats["visible"], 0);

        let lease = s
            .post("/v1/queues/work/lease", json!({"receipt": receipt, "lease_seconds": 600}))
            .await;
        assert_eq!(lease.status, 200, "{}", lease.body);
        assert_eq!(lease.body["receipt"], receipt.as_str());
        assert!(is_rfc3339_utc(&lease.body["lease_expires_at"]));

        let acked = s.post("/v1/queues/work/ack", json!({"receipts": [receipt]})).await;
        assert_eq!(acked.status, 200, "{}", acked.body);
        assert_eq!(acked.body, json!({"results": [{"receipt": receipt, "ok": true}]}));
        let twice = s.post("/v1/queues/work/ack", json!({"receipts": [receipt]})).await;
        assert_eq!(twice.body["results"][0]["error"]["code"], "lease_expired");
        let late = s
            .post("/v1/queues/work/lease", json!({"receipt": receipt, "lease_seconds": 5}))
            .await;
        assert_error(&late, 409, "lease_expired");
        let stats = s.stats("work").await;
        assert_eq!(
            stats,
            json!({"visible": 0, "leased": 0, "delayed": 0, "pending_redrive": 0, "oldest_message_age_seconds": 0})
        );
        assert!(s.receive("work", json!({})).await.is_empty());
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_sends_need_ids_deduplicate_and_carry_sequence_numbers() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        s.create(json!({"name": "jobs.fifo"})).await;
        let no_group = s
            .post("/v1/queues/jobs.fifo/messages", json!({"body": "a"}))
            .await;
        assert_invalid(&no_group, "message_group_id");
        let no_dedup = s
            .post(
                "/v1/queues/jobs.fifo/messages",
                json!({"body": "a", "message_group_id": "g"}),
            )
            .await;
        assert_invalid(&no_dedup, "message_deduplication_id");

        let first = s
            .send(
                "jobs.fifo",
                json!({"body": "a", "message_group_id": "g", "message_deduplication_id": "d1"}),
            )
            .await;
        let seq = first["sequence_number"].as_u64().expect("sequence_number");
        let dup = s
            .send(
                "jobs.fifo",
                json!({"body": "other", "message_group_id": "g", "message_deduplication_id": "d1"}),
            )
            .await;
        assert_eq!(dup["duplicate"], true);
        assert_eq!(dup["message_id"], first["message_id"]);
        assert_eq!(dup["sequence_number"], seq);
        let second = s
            .send(
                "jobs.fifo",
                json!({"body": "b", "message_group_id": "g", "message_deduplication_id": "d2"}),
            )
            .await;
        assert!(second["sequence_number"].as_u64().expect("seq") > seq);

        let got = s.receive("jobs.fifo", json!({"max_messages": 10})).await;
        let bodies: Vec<&str> = got.iter().filter_map(|m| m["body"].as_str()).collect();
        assert_eq!(bodies, ["a", "b"]);
        assert_eq!(got[0]["message_group_id"], "g");
        assert_eq!(got[0]["message_deduplication_id"], "d1");
        assert_eq!(got[0]["sequence_number"], seq);

        s.create(json!({"name": "cbd.fifo", "content_based_deduplication": true}))
            .await;
        let a = s
            .send("cbd.fifo", json!({"body": "same", "message_group_id": "g"}))
            .await;
        let b = s
            .send(
                "cbd.fifo",
                json!({"body": "same", "message_group_id": "h", "attributes": {"x": "y"}}),
            )
            .await;
        assert_eq!(b["duplicate"], true);
        assert_eq!(b["message_id"], a["message_id"]);
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_sends_answer_each_entry() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        s.create(json!({"name": "bulk"})).await;
        let r = s
            .post(
                "/v1/queues/bulk/messages/batch",
                json!({"entries": [
                    {"id": "one", "body": "1"},
                    {"id": "two", "body": ""},
                    {"id": "three", "body": "3", "delay_seconds": 5},
                    {"id": "four", "body": "4", "message_deduplication_id": "d"}
                ]}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let results = r.body["results"].as_array().expect("results");
        let ids: Vec<&str> = results.iter().filter_map(|e| e["id"].as_str()).collect();
        assert_eq!(ids, ["one", "two", "three", "four"]);
        assert_eq!(results[0]["duplicate"], false);
        assert!(results[0]["message_id"].is_string());
        assert_eq!(results[1]["error"]["code"], "invalid_argument");
        assert_eq!(results[1]["error"]["field"], "body");
        assert!(results[1].get("message_id").is_none());
        assert!(results[2]["message_id"].is_string());
        // A rule of the queue, answered by the engine for that entry alone.
        assert_eq!(results[3]["error"]["field"], "message_deduplication_id");
        let stats = s.stats("bulk").await;
        assert_eq!(
            (stats["visible"].as_u64(), stats["delayed"].as_u64()),
            (Some(1), Some(1))
        );

        let dup_ids = s
            .post(
                "/v1/queues/bulk/messages/batch",
                json!({"entries": [{"id": "x", "body": "1"}, {"id": "x", "body": "2"}]}),
            )
            .await;
        assert_invalid(&dup_ids, "entries[1].id");
        let bad_id = s
            .post(
                "/v1/queues/bulk/messages/batch",
                json!({"entries": [{"id": "a b", "body": "1"}]}),
            )
            .await;
        assert_invalid(&bad_id, "entries[0].id");
        let too_many: Vec<Value> = (0..11)
            .map(|i| json!({"id": format!("e{i}"), "body": "x"}))
            .collect();
        let r = s
            .post(
                "/v1/queues/bulk/messages/batch",
                json!({"entries": too_many}),
            )
            .await;
        assert_invalid(&r, "entries");
        let r = s
            .post("/v1/queues/bulk/messages/batch", json!({"entries": []}))
            .await;
        assert_invalid(&r, "entries");
        let r = s
            .post(
                "/v1/queues/bulk/messages/batch",
                json!({"entries": [{"id": "a", "body": 1}]}),
            )
            .await;
        assert_invalid(&r, "entries[0].body");
        let r = s
            .post(
                "/v1/queues/bulk/messages/batch",
                json!({"entries": [{"id": "a", "body": "x", "bogus": 1}]}),
            )
            .await;
        assert_invalid(&r, "entries[0].bogus");
        let missing = s
            .post(
                "/v1/queues/nope/messages/batch",
                json!({"entries": [{"id": "a", "body": ""}]}),
            )
            .await;
        assert_error(&missing, 404, "queue_not_found");
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_answer_each_receipt() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        s.create(json!({"name": "acks"})).await;
        s.send("acks", json!({"body": "1"})).await;
        s.send("acks", json!({"body": "2"})).await;
        let got = s.receive("acks", json!({"max_messages": 2})).await;
        assert_eq!(got.len(), 2);
        let r1 = got[0]["receipt"].as_str().expect("receipt");
        let r2 = got[1]["receipt"].as_str().expect("receipt");
        let r = s
            .post(
                "/v1/queues/acks/ack",
                json!({"receipts": [r1, "bogus", r2]}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let results = r.body["results"].as_array().expect("results");
        assert_eq!(results[0], json!({"receipt": r1, "ok": true}));
        assert_eq!(results[1]["receipt"], "bogus");
        assert_eq!(results[1]["error"]["code"], "invalid_argument");
        assert_eq!(results[1]["error"]["field"], "receipts[1]");
        assert_eq!(results[2], json!({"receipt": r2, "ok": true}));
        assert_eq!(s.stats("acks").await["leased"], 0);
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_400_naming_the_field() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        s.create(json!({"name": "v"})).await;
        let cases: Vec<(Method, &str, Value, &str)> = vec![
            (Method::POST, "/v1/queues", json!({}), "name"),
            (Method::POST, "/v1/queues", json!([1]), "request_body"),
            (Method::POST, "/v1/queues", json!({"name": 5}), "name"),
            (Method::POST, "/v1/queues", json!({"name": "bad name"}), "name"),
            (Method::POST, "/v1/queues", json!({"name": "q", "bogus": 1}), "bogus"),
            (Method::POST, "/v1/queues", json!({"name": "q", "type": "fifo"}), "type"),
            (Method::POST, "/v1/queues", json!({"name": "q", "lease_seconds": "x"}), "lease_seconds"),
            (Method::POST, "/v1/queues", json!({"name": "q", "lease_seconds": -1}), "lease_seconds"),
            (Method::POST, "/v1/queues", json!({"name": "q", "lease_seconds": 1.5}), "lease_seconds"),
            (Method::POST, "/v1/queues", json!({"name": "q", "lease_seconds": 43201}), "lease_seconds"),
            (Method::POST, "/v1/queues", json!({"name": "q", "retention_seconds": 59}), "retention_seconds"),
            (Method::POST, "/v1/queues", json!({"name": "q", "max_message_bytes": 0}), "max_message_bytes"),
            (Method::POST, "/v1/queues", json!({"name": "q", "delay_seconds": 901}), "delay_seconds"),
            (Method::POST, "/v1/queues", json!({"name": "q", "content_based_deduplication": true}), "content_based_deduplication"),
            (Method::POST, "/v1/queues", json!({"name": "q", "content_based_deduplication": "yes"}), "content_based_deduplication"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_policy": "v"}), "redrive_policy"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_policy": {"dead_letter_target": "v"}}), "redrive_policy.max_receive_count"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_policy": {"max_receive_count": 3}}), "redrive_policy.dead_letter_target"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_policy": {"dead_letter_target": "v", "max_receive_count": 0}}), "redrive_policy.max_receive_count"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_policy": {"dead_letter_target": "missing", "max_receive_count": 3}}), "redrive_policy.dead_letter_target"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_allow_policy": {}}), "redrive_allow_policy.permission"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_allow_policy": {"permission": "some"}}), "redrive_allow_policy.permission"),
            (Method::POST, "/v1/queues", json!({"name": "q", "redrive_allow_policy": {"permission": "by_queue", "source_queues": [7]}}), "redrive_allow_policy.source_queues[0]"),
            (Method::PATCH, "/v1/queues/v", json!({"name": "w"}), "name"),
            (Method::PATCH, "/v1/queues/v", json!({"lease_seconds": true}), "lease_seconds"),
            (Method::POST, "/v1/queues/v/messages", json!({}), "body"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": 5}), "body"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": ""}), "body"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": "x", "attributes": {"a": 1}}), "attributes.a"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": "x", "attributes": []}), "attributes"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": "x", "delay_seconds": 901}), "delay_seconds"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": "x", "message_group_id": ""}), "message_group_id"),
            (Method::POST, "/v1/queues/v/messages", json!({"body": "x", "message_deduplication_id": "d"}), "message_deduplication_id"),
            (Method::POST, "/v1/queues/v/messages/batch", json!({}), "entries"),
            (Method::POST, "/v1/queues/v/receive", json!({"max_messages": 0}), "max_messages"),
            (Method::POST, "/v1/queues/v/receive", json!({"max_messages": 11}), "max_messages"),
            (Method::POST, "/v1/queues/v/receive", json!({"lease_seconds": "x"}), "lease_seconds"),
            (Method::POST, "/v1/queues/v/receive", json!({"wait_seconds": 21}), "wait_seconds"),
            (Method::POST, "/v1/queues/v/receive", json!({"wait_seconds": -1}), "wait_seconds"),
            (Method::POST, "/v1/queues/v/ack", json!({}), "receipts"),
            (Method::POST, "/v1/queues/v/ack", json!({"receipts": []}), "receipts"),
            (Method::POST, "/v1/queues/v/ack", json!({"receipts": "r"}), "receipts"),
            (Method::POST, "/v1/queues/v/ack", json!({"receipts": [1]}), "receipts[0]"),
            (Method::POST, "/v1/queues/v/lease", json!({"receipt": "x"}), "lease_seconds"),
            (Method::POST, "/v1/queues/v/lease", json!({"lease_seconds": 5}), "receipt"),
            (Method::POST, "/v1/queues/v/lease", json!({"receipt": "bogus", "lease_seconds": 5}), "receipt"),
            (Method::POST, "/v1/queues/v/lease", json!({"receipt": "bogus", "lease_seconds": 43201}), "lease_seconds"),
            (Method::GET, "/v1/queues/v/messages?limit=x", Value::Null, "limit"),
            (Method::GET, "/v1/queues/v/messages?limit=0", Value::Null, "limit"),
            (Method::GET, "/v1/queues/v/messages?limit=101", Value::Null, "limit"),
            (Method::GET, "/v1/queues/v/messages?after=-1", Value::Null, "after"),
            (Method::GET, "/v1/queues/v/messages?foo=1", Value::Null, "foo"),
            (Method::GET, "/v1/queues/v/messages?limit=1&limit=2", Value::Null, "limit"),
            (Method::GET, "/v1/queues?bogus=1", Value::Null, "bogus"),
        ];
        for (method, path, body, field) in cases {
            let r = s.call(method.clone(), path, body.clone()).await;
            assert!(r.status == 400, "{method} {path} {body}: {} {}", r.status, r.body);
            assert_invalid(&r, field);
        }
        for raw in [&b"{not json"[..], b"\"just a string\"", b"{\"name\": \"q\",}"] {
            let r = s.send_raw(None, Method::POST, "/v1/queues", Some(raw.to_vec())).await;
            assert_invalid(&r, "request_body");
        }
        // Nothing above changed anything.
        let all = s.get("/v1/queues").await;
        assert_eq!(all.body["queues"].as_array().map(Vec::len), Some(1));
        assert_eq!(s.stats("v").await["visible"], 0);
        // Empty bodies are {} where every field is optional.
        assert!(s.receive("v", Value::Null).await.is_empty());
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_queues_are_404_and_oversize_messages_413() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        let routes: Vec<(Method, &str, Value)> = vec![
            (Method::GET, "/v1/queues/nope", Value::Null),
            (
                Method::PATCH,
                "/v1/queues/nope",
                json!({"lease_seconds": 5}),
            ),
            (Method::DELETE, "/v1/queues/nope", Value::Null),
            (
                Method::GET,
                "/v1/queues/nope/dead_letter_sources",
                Value::Null,
            ),
            (Method::GET, "/v1/queues/nope/stats", Value::Null),
            (
                Method::POST,
                "/v1/queues/nope/messages",
                json!({"body": "x"}),
            ),
            (Method::GET, "/v1/queues/nope/messages", Value::Null),
            (
                Method::POST,
                "/v1/queues/nope/messages/batch",
                json!({"entries": [{"id": "a", "body": "x"}]}),
            ),
            (
                Method::POST,
                "/v1/queues/nope/receive",
                json!({"wait_seconds": 1}),
            ),
            (
                Method::POST,
                "/v1/queues/nope/ack",
                json!({"receipts": ["r"]}),
            ),
            (
                Method::POST,
                "/v1/queues/nope/lease",
                json!({"receipt": "000000000000000100000001", "lease_seconds": 5}),
            ),
            (Method::POST, "/v1/queues/nope/purge", Value::Null),
        ];
        for (method, path, body) in routes {
            let r = s.call(method.clone(), path, body).await;
            assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
            assert_eq!(r.error_code(), "queue_not_found", "{method} {path}");
        }
        assert_error(&s.get("/v1/nothing").await, 404, "not_found");
        assert_error(
            &s.call(Method::PUT, "/v1/queues", Value::Null).await,
            405,
            "method_not_allowed",
        );

        s.create(json!({"name": "small", "max_message_bytes": 10}))
            .await;
        assert!(s.send("small", json!({"body": "0123456789"})).await["message_id"].is_string());
        let r = s
            .post("/v1/queues/small/messages", json!({"body": "0123456789a"}))
            .await;
        assert_error(&r, 413, "message_too_large");
        assert_eq!(r.error_field(), Some("body"));
        let r = s
            .post(
                "/v1/queues/small/messages",
                json!({"body": "01234", "attributes": {"name": "value"}}),
            )
            .await;
        assert_error(&r, 413, "message_too_large");
        let over_max = "x".repeat(1024 * 1024 + 1);
        let r = s
            .post("/v1/queues/small/messages", json!({"body": over_max}))
            .await;
        assert_error(&r, 413, "message_too_large");
        let huge = "x".repeat(7 * 1024 * 1024);
        let r = s
            .post("/v1/queues/small/messages", json!({"body": huge}))
            .await;
        assert_error(&r, 413, "message_too_large");
        let huge_batch = json!({"entries": [{"id": "a", "body": "x".repeat(17 * 1024 * 1024)}]});
        let r = s.post("/v1/queues/small/messages/batch", huge_batch).await;
        assert_error(&r, 413, "message_too_large");
        assert_eq!(s.stats("small").await["visible"], 1);

        // The largest message of a 1 MiB queue fits, also when its JSON needs escapes.
        s.create(json!({"name": "big", "max_message_bytes": 1024 * 1024}))
            .await;
        let largest = "\"".repeat(512 * 1024) + &"\u{1}".repeat(512 * 1024);
        s.send("big", json!({"body": largest})).await;
        let got = s.receive("big", json!({})).await;
        assert_eq!(got[0]["body"].as_str().map(str::len), Some(1024 * 1024));
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_separate_accounts() {
    let s = Server::start(two_accounts()).await.with_key("acme-key");
    bounded(async {
        let no_key = s.call_as(None, Method::GET, "/v1/queues", Value::Null).await;
        assert_error(&no_key, 401, "unauthenticated");
        assert!(no_key.headers.contains_key("www-authenticate"));
        let wrong = s.call_as(Some("nope"), Method::GET, "/v1/queues", Value::Null).await;
        assert_error(&wrong, 401, "unauthenticated");
        let cluster = s.call_as(None, Method::GET, "/v1/cluster", Value::Null).await;
        assert_error(&cluster, 401, "unauthenticated");

        let acme = s.create(json!({"name": "shared"})).await;
        assert!(acme["crn"].as_str().is_some_and(|c| c.contains(":a/acme:")));
        let id = acme["id"].as_str().expect("id");
        let crn = acme["crn"].as_str().expect("crn");
        let globex = Some("globex-key");
        for reference in ["shared", id, crn] {
            let r = s
                .call_as(globex, Method::GET, &format!("/v1/queues/{}", enc(reference)), Value::Null)
                .await;
            assert_error(&r, 404, "queue_not_found");
            let r = s
                .call_as(globex, Method::POST, &format!("/v1/queues/{}/messages", enc(reference)), json!({"body": "x"}))
                .await;
            assert_error(&r, 404, "queue_not_found");
        }
        let theirs = s
            .call_as(globex, Method::POST, "/v1/queues", json!({"name": "shared"}))
            .await;
        assert_eq!(theirs.status, 201, "{}", theirs.body);
        assert_ne!(theirs.body["id"], acme["id"]);
        assert!(theirs.body["crn"].as_str().is_some_and(|c| c.contains(":a/globex:")));
        let listed = s.call_as(globex, Method::GET, "/v1/queues", Value::Null).await;
        assert_eq!(listed.body["queues"].as_array().map(Vec::len), Some(1));
        assert_eq!(listed.body["queues"][0]["id"], theirs.body["id"]);
        // A dead-letter target of another account is refused by its CRN.
        let foreign = s
            .call_as(
                globex,
                Method::POST,
                "/v1/queues",
                json!({"name": "src", "redrive_policy": {"dead_letter_target": crn, "max_receive_count": 2}}),
            )
            .await;
        assert_invalid(&foreign, "redrive_policy.dead_letter_target");

        assert_eq!(s.call_as(None, Method::GET, "/healthz", Value::Null).await.status, 200);
        assert_eq!(s.call_as(None, Method::GET, "/metrics", Value::Null).await.status, 200);
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_wake_on_a_send_and_end_at_their_deadline() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        s.create(json!({"name": "lp"})).await;
        s.create(json!({"name": "elsewhere"})).await;

        // A send to another queue does not end the wait, and waiting adds no log entries
        // beyond the two receives around it.
        let log_before = s.node.raft().metrics().borrow().last_log_index;
        let started = Instant::now();
        let poll = s.receive("lp", json!({"wait_seconds": 1}));
        let other = async {
            sleep(Duration::from_millis(300)).await;
            s.send("elsewhere", json!({"body": "not for lp"})).await
        };
        let (got, _) = tokio::join!(poll, other);
        let waited = started.elapsed();
        assert!(got.is_empty());
        assert!(waited >= Duration::from_millis(950), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        let log_after = s.node.raft().metrics().borrow().last_log_index;
        let entries = log_after.unwrap_or(0) - log_before.unwrap_or(0);
        assert!(entries <= 3, "{entries} entries while one poll waited");

        let started = Instant::now();
        let poll = s.receive("lp", json!({"wait_seconds": 10}));
        let send = async {
            sleep(Duration::from_millis(300)).await;
            s.send("lp", json!({"body": "wake"})).await
        };
        let (got, sent) = tokio::join!(poll, send);
        let waited = started.elapsed();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["message_id"], sent["message_id"]);
        assert!(waited >= Duration::from_millis(300), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");

        // A delayed message wakes the poll when its delay ends.
        s.send("lp", json!({"body": "later", "delay_seconds": 1}))
            .await;
        let started = Instant::now();
        let got = s.receive("lp", json!({"wait_seconds": 10})).await;
        let waited = started.elapsed();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["body"], "later");
        assert!(waited < Duration::from_secs(4), "{waited:?}");
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_pages_purge_empties_and_stats_count() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        s.create(json!({"name": "p.fifo", "content_based_deduplication": true}))
            .await;
        for body in ["1", "2", "3"] {
            s.send("p.fifo", json!({"body": body, "message_group_id": "g"}))
                .await;
        }
        s.send(
            "p.fifo",
            json!({"body": "4", "message_group_id": "h", "delay_seconds": 600}),
        )
        .await;
        let page = s.get("/v1/queues/p.fifo/messages?limit=2").await;
        assert_eq!(page.status, 200, "{}", page.body);
        let messages = page.body["messages"].as_array().expect("messages");
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0]["state"], "visible");
        assert_eq!(messages[0]["receive_count"], 0);
        assert_eq!(messages[0]["first_received_at"], Value::Null);
        assert!(messages[0]["sequence_number"].is_u64());
        let next = page.body["next_after"].as_u64().expect("next_after");
        assert_eq!(messages[1]["sequence_number"], next);
        let rest = s
            .get(&format!("/v1/queues/p.fifo/messages?limit=&after={next}"))
            .await;
        let bodies: Vec<&str> = rest.body["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter_map(|m| m["body"].as_str())
            .collect();
        assert_eq!(bodies, ["3", "4"]);
        assert_eq!(rest.body["messages"][1]["state"], "delayed");

        let stats = s.stats("p.fifo").await;
        assert_eq!(stats["visible"], 3);
        assert_eq!(stats["delayed"], 1);
        assert_eq!(stats["leased"], 0);
        assert!(stats["oldest_message_age_seconds"].is_u64());

        let purged = s.post("/v1/queues/p.fifo/purge", Value::Null).await;
        assert_eq!(purged.status, 204);
        let stats = s.stats("p.fifo").await;
        assert_eq!(
            (stats["visible"].as_u64(), stats["delayed"].as_u64()),
            (Some(0), Some(0))
        );
        let empty = s.get("/v1/queues/p.fifo/messages").await;
        assert_eq!(empty.body, json!({"messages": [], "next_after": null}));
        // Purge keeps deduplication records.
        let again = s
            .send("p.fifo", json!({"body": "1", "message_group_id": "g"}))
            .await;
        assert_eq!(again["duplicate"], true);
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_health_and_metrics_report_the_node() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
        s.create(json!({"name": "m"})).await;
        let c = s.get("/v1/cluster").await;
        assert_eq!(c.status, 200, "{}", c.body);
        assert_eq!(c.body["leader"], 1);
        assert_eq!(c.body["nodes"].as_array().map(Vec::len), Some(1));
        assert_eq!(c.body["nodes"][0]["id"], 1);
        assert_eq!(c.body["nodes"][0]["role"], "leader");
        assert!(c.body["nodes"][0]["raft_addr"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")));
        assert!(c.body["term"].as_u64().is_some_and(|t| t >= 1));
        assert!(c.body["commit_index"].as_u64().is_some_and(|i| i >= 2));

        let state = s.get("/v1/cluster/state").await;
        assert_eq!(state.status, 200, "{}", state.body);
        assert!(state.body["applied_index"].as_u64().is_some_and(|i| i >= 2));
        let digest = state.body["state_digest"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert_eq!(digest.len(), 64, "hex SHA-256");
        let sent = s
            .call(Method::POST, "/v1/queues/m/messages", json!({"body": "x"}))
            .await;
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
        ] {
            assert!(text.contains(gauge), "{gauge}: {text}");
        }
    })
    .await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_quorum_is_unavailable() {
    // Node 2 never starts: node 1 alone cannot elect a leader.
    let absent_addr = absent_peer().await;
    let s = Server::start_with(Keys::open(), &[(2, absent_addr)], false).await;
    bounded(async {
        let started = Instant::now();
        let r = s.post("/v1/queues", json!({"name": "q"})).await;
        assert_error(&r, 503, "unavailable");
        assert_eq!(
            r.headers.get("retry-after").map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        let r = s.get("/v1/queues").await;
        assert_error(&r, 503, "unavailable");
        assert!(started.elapsed() < Duration::from_secs(20));
        let c = s.get("/v1/cluster").await;
        assert_eq!(c.status, 200);
        assert_eq!(c.body["leader"], Value::Null);
        // A new cluster forms once every listed node has started: none has a membership yet.
        assert_eq!(c.body["nodes"].as_array().map(Vec::len), Some(0));
    })
    .await;
    s.shutdown().await;
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
    let s = Server::start(two_accounts()).await;
    bounded(async {
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
        assert_error(&keyed, 401, "unauthenticated");
    })
    .await;
    s.shutdown().await;
}

/// Every documented path answers exactly its documented methods, and 405 to the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_paths_and_methods_are_the_served_routes() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
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
                let r = s.call(method.clone(), &url, Value::Null).await;
                if documented {
                    assert!(
                        r.status != 405 && r.error_code() != "not_found",
                        "{method} {path}: {} {}",
                        r.status,
                        r.body
                    );
                } else {
                    assert_error(&r, 405, "method_not_allowed");
                }
            }
        }
    })
    .await;
    s.shutdown().await;
}

/// A request example without one of its required fields is refused naming that field, and
/// without an optional one is not: the document's `required` is what the server requires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_required_fields_are_the_ones_the_server_requires() {
    let s = Server::start(Keys::open()).await;
    bounded(async {
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
                        .call(method.clone(), &url, without(example, &field.pointer))
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
    s.shutdown().await;
}

/// Account keys see the cluster as SPEC.md §3 has it and their own queues; admin keys also see
/// the cluster's details, each node's state and every account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_keys_see_the_cluster_details_and_every_account() {
    let s = Server::start(two_accounts()).await;
    bounded(async {
        let admin = Some("admin-key");
        for (key, queue) in [("acme-key", "a1"), ("acme-key", "a2"), ("globex-key", "g1")] {
            let r = s
                .call_as(Some(key), Method::POST, "/v1/queues", json!({"name": queue}))
                .await;
            assert_eq!(r.status, 201, "{}", r.body);
        }
        let seen = s
            .call_as(Some("acme-key"), Method::GET, "/v1/cluster", Value::Null)
            .await;
        assert_eq!(seen.status, 200);
        assert_eq!(seen.body["leader"], 1);
        for detail in ["cluster_id", "clock_offset_ms", "clock_skewed"] {
            assert!(seen.body.get(detail).is_none(), "{detail}: {}", seen.body);
        }
        let full = s
            .call_as(admin, Method::GET, "/v1/cluster", Value::Null)
            .await;
        assert!(full.body["cluster_id"].is_string(), "{}", full.body);
        assert_eq!(full.body["clock_skewed"], false);
        for path in ["/v1/accounts", "/v1/cluster/state"] {
            let r = s
                .call_as(Some("acme-key"), Method::GET, path, Value::Null)
                .await;
            assert_error(&r, 403, "permission_denied");
        }
        let state = s
            .call_as(admin, Method::GET, "/v1/cluster/state", Value::Null)
            .await;
        assert_eq!(state.status, 200);
        let accounts = s
            .call_as(admin, Method::GET, "/v1/accounts", Value::Null)
            .await;
        assert_eq!(
            accounts.body,
            json!({"accounts": [{"account": "acme", "queues": 2}, {"account": "globex", "queues": 1}]})
        );
        let listed = s
            .call_as(Some("globex-key"), Method::GET, "/v1/queues", Value::Null)
            .await;
        assert_eq!(listed.body["queues"].as_array().map(Vec::len), Some(1));
    })
    .await;
    s.shutdown().await;
}

/// Membership changes need an admin key; bad ones are refused naming their field or rule, and
/// change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admin_keys_change_membership_and_bad_changes_are_refused() {
    let s = Server::start(two_accounts()).await;
    bounded(async {
        let add = json!({"id": 9, "raft_addr": "nohost"});
        let admin = Some("admin-key");
        let r = s
            .call_as(
                Some("acme-key"),
                Method::POST,
                "/v1/cluster/nodes",
                add.clone(),
            )
            .await;
        assert_error(&r, 403, "permission_denied");
        let r = s
            .call_as(
                Some("acme-key"),
                Method::DELETE,
                "/v1/cluster/nodes/1",
                Value::Null,
            )
            .await;
        assert_error(&r, 403, "permission_denied");
        let r = s
            .call_as(None, Method::DELETE, "/v1/cluster/nodes/1", Value::Null)
            .await;
        assert_error(&r, 401, "unauthenticated");

        let r = s
            .call_as(admin, Method::POST, "/v1/cluster/nodes", add)
            .await;
        assert_error(&r, 400, "invalid_argument");
        assert_eq!(r.error_field(), Some("raft_addr"));
        let r = s
            .call_as(
                admin,
                Method::POST,
                "/v1/cluster/nodes",
                json!({"id": 1, "raft_addr": "h:1"}),
            )
            .await;
        assert_error(&r, 409, "membership_conflict");
        assert_eq!(r.error_field(), Some("id"));
        let r = s
            .call_as(
                admin,
                Method::POST,
                "/v1/cluster/nodes",
                json!({"id": -1, "raft_addr": "h:1"}),
            )
            .await;
        assert_error(&r, 400, "invalid_argument");
        let r = s
            .call_as(admin, Method::DELETE, "/v1/cluster/nodes/1", Value::Null)
            .await;
        assert_error(&r, 409, "membership_conflict");
        let r = s
            .call_as(admin, Method::DELETE, "/v1/cluster/nodes/7", Value::Null)
            .await;
        assert_error(&r, 400, "invalid_argument");
        let r = s
            .call_as(admin, Method::DELETE, "/v1/cluster/nodes/x", Value::Null)
            .await;
        assert_error(&r, 400, "invalid_argument");
        assert_eq!(r.error_field(), Some("id"));

        let c = s
            .call_as(admin, Method::GET, "/v1/cluster", Value::Null)
            .await;
        assert_eq!(c.body["nodes"].as_array().map(Vec::len), Some(1));
        assert_eq!(c.body["leader"], 1);
    })
    .await;
    s.shutdown().await;
}
