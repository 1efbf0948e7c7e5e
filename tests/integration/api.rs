//! The client API end to end through both of its fronts: each scenario is written once against
//! [`Front`] and runs as two tests, `<scenario>::rest` and `<scenario>::grpc`, on a real
//! single-node cluster served on loopback (`serving`). Refusals are tables of calls, each with
//! the spec's code and field that both fronts must answer with (checked by `front::refused`).
//! What only one front has (raw HTTP, the OpenAPI document, send streams, the shared port) is
//! in `http` and `grpc`. Every test is bounded in time and stops its server and node.

use std::future::Future;
use std::time::Duration;

use raftq_api::Keys;
use serde_json::{json, Map, Value};
use tokio::time::{sleep, Instant};

use crate::front::{is_rfc3339_utc, refused, rfc3339_in, Front, Kind, Op, Served};
use crate::serving::{two_accounts, Serving};

/// Runs `scenario` within the time bound through the front `kind` of the node that `serving`
/// starts, then stops both.
async fn run(
    kind: Kind,
    serving: impl Future<Output = Serving>,
    scenario: impl AsyncFnOnce(&Front),
) {
    Front::start(kind, serving.await).await.run(scenario).await;
}

/// One module per scenario with one test per front, `rest` and `grpc`, each on the node that
/// its group's `serving` starts.
macro_rules! on_both_fronts {
    ($($serving:expr => [$($scenario:ident),* $(,)?])*) => {$($(
        mod $scenario {
            use super::*;
            on_both_fronts!(@test rest, Rest, $scenario, $serving);
            on_both_fronts!(@test grpc, Grpc, $scenario, $serving);
        }
    )*)*};
    (@test $test:ident, $kind:ident, $scenario:ident, $serving:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            run(Kind::$kind, $serving, super::$scenario).await;
        }
    };
}

on_both_fronts! {
    Serving::start(Keys::open()) => [
        queues_are_created_read_listed_patched_and_deleted_by_any_reference,
        redrive_policies_bind_list_block_deletion_move_and_detach,
        messages_are_sent_received_leased_peeked_and_acknowledged,
        fifo_sends_need_ids_deduplicate_and_carry_sequence_numbers,
        batch_sends_answer_each_entry,
        acks_answer_each_receipt,
        bad_input_is_refused_naming_the_field,
        unknown_queues_are_not_found,
        oversize_messages_are_refused_and_the_largest_fit,
        long_polls_wake_on_a_send_and_end_at_their_deadline,
        peek_pages_purge_empties_and_stats_count,
        the_cluster_reports_the_node,
        fair_queues_serve_quiet_tenants_first_and_leases_end_with_a_backoff,
        move_tasks_count_move_back_filter_cancel_and_refuse_bad_input,
        typed_attributes_round_trip_and_plain_ones_keep_their_shape,
        tags_default_waits_and_modified_at_are_queue_settings,
        fifo_receive_attempts_replay_their_answer,
        fifo_queues_deduplicate_per_queue_or_per_message_group,
        priorities_order_deliveries_and_scheduled_messages_are_listed_and_cancelled,
    ]
    Serving::start(two_accounts()) => [
        api_keys_separate_accounts,
        admin_keys_see_the_cluster_details_and_every_account,
        only_admin_keys_change_membership_and_bad_changes_are_refused,
        arns_name_queues_and_other_accounts_arns_are_refused,
    ]
    Serving::without_quorum(Keys::open()) => [
        a_cluster_without_quorum_is_unavailable,
    ]
}

/// The string `name` of each of `items`.
fn strings<'a>(items: &'a [Value], name: &str) -> Vec<&'a str> {
    items
        .iter()
        .filter_map(|item| item[name].as_str())
        .collect()
}

/// The queues of a list.
fn queues(list: &Value) -> &[Value] {
    list["queues"].as_array().expect("queues")
}

/// `count` batch entries `e0`, `e1`... with `body`.
fn entries(count: usize, body: &str) -> Value {
    (0..count)
        .map(|i| json!({"id": format!("e{i}"), "body": body}))
        .collect()
}

/// A queue is created with its defaults or its settings, read by name, UUID or CRN, listed by
/// prefix, patched (an empty patch changes nothing) and deleted.
async fn queues_are_created_read_listed_patched_and_deleted_by_any_reference(api: &Front) {
    let q = api.create(json!({"name": "orders"})).await;
    assert_eq!(q["name"], "orders");
    assert_eq!(q["type"], "standard");
    assert!(is_rfc3339_utc(&q["created_at"]), "{q}");
    assert_eq!(q["content_based_deduplication"], false);
    assert_eq!(q["lease_seconds"], 30);
    assert_eq!(q["delay_seconds"], 0);
    assert_eq!(q["retention_seconds"], 4 * 24 * 3600);
    assert_eq!(q["max_message_bytes"], 256 * 1024);
    assert_eq!(q["redrive_policy"], Value::Null);
    assert_eq!(
        q["redrive_allow_policy"],
        json!({"permission": "allow_all"})
    );
    let id = q["id"].as_str().expect("id");
    let crn = q["crn"].as_str().expect("crn");
    assert_eq!(
        crn,
        format!("crn:v1:raftq:public:queues:local:a/dev:{id}::")
    );

    let fifo = api
        .create(json!({"name": "orders.fifo", "type": "fifo", "content_based_deduplication": true, "lease_seconds": 5}))
        .await;
    assert_eq!(fifo["type"], "fifo");
    assert_eq!(fifo["content_based_deduplication"], true);
    assert_eq!(fifo["lease_seconds"], 5);
    api.create(json!({"name": "other"})).await;

    let again = api.call(Op::CreateQueue, json!({"name": "orders"})).await;
    refused(again, "queue_exists", None);

    for reference in ["orders", id, crn] {
        let got = api.ok(Op::GetQueue(reference), Value::Null).await;
        assert_eq!(got["id"], id, "{reference}");
    }
    let all = api.ok(Op::ListQueues, Value::Null).await;
    assert_eq!(queues(&all).len(), 3);
    let some = api.ok(Op::ListQueues, json!({"prefix": "ord"})).await;
    assert_eq!(strings(queues(&some), "name"), ["orders", "orders.fifo"]);

    let patched = api
        .ok(
            Op::PatchQueue("orders"),
            json!({"lease_seconds": 60, "delay_seconds": 2}),
        )
        .await;
    assert_eq!(patched["lease_seconds"], 60);
    assert_eq!(patched["delay_seconds"], 2);
    assert_eq!(patched["retention_seconds"], q["retention_seconds"]);
    let empty_patch = api.ok(Op::PatchQueue("orders"), Value::Null).await;
    assert_eq!(empty_patch["lease_seconds"], 60);

    assert_eq!(api.ok(Op::DeleteQueue(crn), Value::Null).await, Value::Null);
    let gone = api.call(Op::GetQueue("orders"), Value::Null).await;
    refused(gone, "queue_not_found", None);
}

/// A redrive policy's target must be of the same type and allow the source; it lists its
/// sources and cannot be deleted while bound; a message whose last allowed lease ends moves
/// there; a patch keeps the policy unless it detaches it with `null`.
async fn redrive_policies_bind_list_block_deletion_move_and_detach(api: &Front) {
    let dlq = api.create(json!({"name": "dlq"})).await;
    api.create(json!({"name": "dlq.fifo"})).await;
    let closed = api
        .create(json!({"name": "closed", "redrive_allow_policy": {"permission": "deny_all"}}))
        .await;
    assert_eq!(
        closed["redrive_allow_policy"],
        json!({"permission": "deny_all"})
    );

    let source = |name: &str, target: &Value| json!({"name": name, "redrive_policy": {"dead_letter_target": target, "max_receive_count": 1}});
    let target_field = Some("redrive_policy.dead_letter_target");
    let wrong_type = api
        .call(Op::CreateQueue, source("a", &json!("dlq.fifo")))
        .await;
    let wrong_type = refused(wrong_type, "invalid_argument", target_field);
    assert!(wrong_type.error["message"]
        .as_str()
        .is_some_and(|m| m.contains("same type")));
    let denied = api
        .call(Op::CreateQueue, source("a", &json!("closed")))
        .await;
    refused(denied, "invalid_argument", target_field);

    let src = api.create(source("src", &dlq["crn"])).await;
    assert_eq!(
        src["redrive_policy"],
        json!({"dead_letter_target": {"id": dlq["id"], "name": "dlq", "crn": dlq["crn"]}, "max_receive_count": 1})
    );
    let by_queue = api
        .create(json!({"name": "picky", "redrive_allow_policy": {"permission": "by_queue", "source_queues": ["src"]}}))
        .await;
    assert_eq!(by_queue["redrive_allow_policy"]["permission"], "by_queue");
    assert_eq!(
        by_queue["redrive_allow_policy"]["source_queues"][0]["name"],
        "src"
    );

    let src_ref = json!({"id": src["id"], "name": "src", "crn": src["crn"]});
    let sources = api.ok(Op::DeadLetterSources("dlq"), Value::Null).await;
    assert_eq!(sources, json!({"queues": [src_ref]}));
    let in_use = api.call(Op::DeleteQueue("dlq"), Value::Null).await;
    let in_use = refused(in_use, "queue_in_use", None);
    assert_eq!(in_use.error["sources"], json!([src_ref]));
    assert!(in_use.error["message"]
        .as_str()
        .is_some_and(|m| m.contains("src")));

    // Release of the last allowed lease moves the message at once.
    let sent = api
        .send("src", json!({"body": "poison", "attributes": {"k": "v"}}))
        .await;
    let got = api.receive("src", json!({})).await;
    let receipt = got[0]["receipt"].as_str().expect("receipt");
    api.ok(
        Op::ChangeLease("src"),
        json!({"receipt": receipt, "lease_seconds": 0}),
    )
    .await;
    let peeked = api.ok(Op::Peek("dlq"), Value::Null).await;
    let moved = &peeked["messages"][0];
    assert_eq!(moved["message_id"], sent["message_id"]);
    assert_eq!(moved["attributes"], json!({"k": "v"}));
    assert_eq!(moved["receive_count"], 0);
    assert_eq!(moved["state"], "visible");
    assert_eq!(moved["dead_letter_source"]["name"], "src");
    assert!(is_rfc3339_utc(&moved["moved_at"]), "{moved}");

    // A patch without the policy keeps it; null detaches it.
    let kept = api
        .ok(Op::PatchQueue("src"), json!({"lease_seconds": 9}))
        .await;
    assert_eq!(kept["redrive_policy"]["max_receive_count"], 1);
    let detached = api
        .ok(Op::PatchQueue("src"), json!({"redrive_policy": null}))
        .await;
    assert_eq!(detached["redrive_policy"], Value::Null);
    assert_eq!(detached["lease_seconds"], 9);
    let none = api.ok(Op::DeadLetterSources("dlq"), Value::Null).await;
    assert_eq!(none, json!({"queues": []}));
    assert_eq!(
        api.ok(Op::DeleteQueue("dlq"), Value::Null).await,
        Value::Null
    );
}

/// A received message carries its fields and a lease, shows as leased to a peek and in the
/// stats, has its lease changed, and is acknowledged once: after that its receipt is refused.
async fn messages_are_sent_received_leased_peeked_and_acknowledged(api: &Front) {
    api.create(json!({"name": "work"})).await;
    let sent = api
        .send(
            "work",
            json!({"body": "hello", "attributes": {"kind": "greeting"}, "message_group_id": "g"}),
        )
        .await;
    assert_eq!(sent["duplicate"], false);
    assert!(sent.get("sequence_number").is_none(), "{sent}");

    let got = api
        .receive("work", json!({"max_messages": 10, "lease_seconds": 120}))
        .await;
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(m["message_id"], sent["message_id"]);
    assert_eq!(m["body"], "hello");
    assert_eq!(m["attributes"], json!({"kind": "greeting"}));
    assert_eq!(m["receive_count"], 1);
    assert_eq!(m["message_group_id"], "g");
    assert!(is_rfc3339_utc(&m["sent_at"]));
    assert!(is_rfc3339_utc(&m["first_received_at"]));
    assert!(is_rfc3339_utc(&m["lease_expires_at"]));
    for absent in [
        "sequence_number",
        "message_deduplication_id",
        "dead_letter_source",
        "moved_at",
        "state",
    ] {
        assert!(m.get(absent).is_none(), "{absent} in {m}");
    }
    let receipt = m["receipt"].as_str().expect("receipt");

    let peeked = api.ok(Op::Peek("work"), Value::Null).await;
    let p = &peeked["messages"][0];
    assert_eq!(p["state"], "leased");
    assert_eq!(p["receive_count"], 1);
    assert!(p.get("receipt").is_none());
    let stats = api.stats("work").await;
    assert_eq!(stats["leased"], 1);
    assert_eq!(stats["visible"], 0);

    let lease = api
        .ok(
            Op::ChangeLease("work"),
            json!({"receipt": receipt, "lease_seconds": 600}),
        )
        .await;
    assert_eq!(lease["receipt"], receipt);
    assert!(is_rfc3339_utc(&lease["lease_expires_at"]));

    let ack = json!({"receipts": [receipt]});
    let acked = api.ok(Op::Ack("work"), ack.clone()).await;
    assert_eq!(
        acked,
        json!({"results": [{"receipt": receipt, "ok": true}]})
    );
    let twice = api.ok(Op::Ack("work"), ack).await;
    assert_eq!(twice["results"][0]["error"]["code"], "lease_expired");
    let late = api
        .call(
            Op::ChangeLease("work"),
            json!({"receipt": receipt, "lease_seconds": 5}),
        )
        .await;
    refused(late, "lease_expired", None);
    let stats = api.stats("work").await;
    let level = json!({"visible": 0, "leased": 0, "delayed": 0, "pending_redrive": 0});
    assert_eq!(
        stats,
        json!({"visible": 0, "leased": 0, "delayed": 0, "pending_redrive": 0, "scheduled": 0, "oldest_message_age_seconds": 0, "active_tenants": 0, "largest_tenant_in_flight": 0, "by_priority": vec![level; 10]})
    );
    assert!(api.receive("work", json!({})).await.is_empty());
}

/// A FIFO send needs a group and (without content-based deduplication) a deduplication ID; a
/// repeated ID answers the first message, whose sequence number orders the queue.
async fn fifo_sends_need_ids_deduplicate_and_carry_sequence_numbers(api: &Front) {
    api.create(json!({"name": "jobs.fifo"})).await;
    for (body, field) in [
        (json!({"body": "a"}), "message_group_id"),
        (
            json!({"body": "a", "message_group_id": "g"}),
            "message_deduplication_id",
        ),
    ] {
        let r = api.call(Op::Send("jobs.fifo"), body).await;
        refused(r, "invalid_argument", Some(field));
    }

    let fifo = |body: &str, dedup: &str| json!({"body": body, "message_group_id": "g", "message_deduplication_id": dedup});
    let first = api.send("jobs.fifo", fifo("a", "d1")).await;
    let seq = first["sequence_number"].as_u64().expect("sequence_number");
    let dup = api.send("jobs.fifo", fifo("other", "d1")).await;
    assert_eq!(dup["duplicate"], true);
    assert_eq!(dup["message_id"], first["message_id"]);
    assert_eq!(dup["sequence_number"], seq);
    let second = api.send("jobs.fifo", fifo("b", "d2")).await;
    assert!(second["sequence_number"].as_u64().expect("seq") > seq);

    let got = api.receive("jobs.fifo", json!({"max_messages": 10})).await;
    assert_eq!(strings(&got, "body"), ["a", "b"]);
    assert_eq!(got[0]["message_group_id"], "g");
    assert_eq!(got[0]["message_deduplication_id"], "d1");
    assert_eq!(got[0]["sequence_number"], seq);

    api.create(json!({"name": "cbd.fifo", "content_based_deduplication": true}))
        .await;
    let a = api
        .send("cbd.fifo", json!({"body": "same", "message_group_id": "g"}))
        .await;
    let b = api
        .send(
            "cbd.fifo",
            json!({"body": "same", "message_group_id": "h", "attributes": {"x": "y"}}),
        )
        .await;
    assert_eq!(b["duplicate"], true);
    assert_eq!(b["message_id"], a["message_id"]);
}

/// A batch answers each entry in order, sent or refused on its own; a batch that is wrong as a
/// whole is refused naming its field; ten of the largest messages fit in one batch.
async fn batch_sends_answer_each_entry(api: &Front) {
    api.create(json!({"name": "bulk"})).await;
    let r = api
        .ok(
            Op::SendBatch("bulk"),
            json!({"entries": [
                {"id": "one", "body": "1"},
                {"id": "two", "body": ""},
                {"id": "three", "body": "3", "delay_seconds": 5},
                {"id": "four", "body": "4", "message_deduplication_id": "d"}
            ]}),
        )
        .await;
    let results = r["results"].as_array().expect("results");
    assert_eq!(strings(results, "id"), ["one", "two", "three", "four"]);
    assert_eq!(results[0]["duplicate"], false);
    assert!(results[0]["message_id"].is_string());
    assert_eq!(results[1]["error"]["code"], "invalid_argument");
    assert_eq!(results[1]["error"]["field"], "body");
    assert!(results[1].get("message_id").is_none());
    assert!(results[2]["message_id"].is_string());
    // A rule of the queue, answered by the engine for that entry alone.
    assert_eq!(results[3]["error"]["code"], "invalid_argument");
    assert_eq!(results[3]["error"]["field"], "message_deduplication_id");
    let stats = api.stats("bulk").await;
    assert_eq!(
        (stats["visible"].as_u64(), stats["delayed"].as_u64()),
        (Some(1), Some(1))
    );

    let refusals = [
        (
            "bulk",
            json!([{"id": "x", "body": "1"}, {"id": "x", "body": "2"}]),
            "invalid_argument",
            Some("entries[1].id"),
        ),
        (
            "bulk",
            json!([{"id": "a b", "body": "1"}]),
            "invalid_argument",
            Some("entries[0].id"),
        ),
        (
            "bulk",
            entries(11, "x"),
            "invalid_argument",
            Some("entries"),
        ),
        ("bulk", json!([]), "invalid_argument", Some("entries")),
        (
            "nope",
            json!([{"id": "a", "body": ""}]),
            "queue_not_found",
            None,
        ),
    ];
    for (queue, list, code, field) in refusals {
        let r = api
            .call(Op::SendBatch(queue), json!({ "entries": list }))
            .await;
        refused(r, code, field);
    }

    // Ten of the largest messages fit in one call: within REST's batch body limit, and beyond
    // tonic's default limit of 4 MiB a message.
    api.create(json!({"name": "big", "max_message_bytes": 1024 * 1024}))
        .await;
    let largest = "x".repeat(1024 * 1024);
    let r = api
        .ok(
            Op::SendBatch("big"),
            json!({ "entries": entries(10, &largest) }),
        )
        .await;
    let results = r["results"].as_array().expect("results");
    assert_eq!(results.len(), 10);
    assert!(results.iter().all(|e| e["message_id"].is_string()), "{r}");
}

/// An ack answers each receipt in order: a bogus one is refused naming its place, and the
/// others are acknowledged.
async fn acks_answer_each_receipt(api: &Front) {
    api.create(json!({"name": "acks"})).await;
    api.send("acks", json!({"body": "1"})).await;
    api.send("acks", json!({"body": "2"})).await;
    let got = api.receive("acks", json!({"max_messages": 2})).await;
    assert_eq!(got.len(), 2);
    let r1 = got[0]["receipt"].as_str().expect("receipt");
    let r2 = got[1]["receipt"].as_str().expect("receipt");
    let r = api
        .ok(Op::Ack("acks"), json!({"receipts": [r1, "bogus", r2]}))
        .await;
    let results = r["results"].as_array().expect("results");
    assert_eq!(results[0], json!({"receipt": r1, "ok": true}));
    assert_eq!(results[1]["receipt"], "bogus");
    assert_eq!(results[1]["error"]["code"], "invalid_argument");
    assert_eq!(results[1]["error"]["field"], "receipts[1]");
    assert_eq!(results[2], json!({"receipt": r2, "ok": true}));
    assert_eq!(api.stats("acks").await["leased"], 0);
}

/// Bad input is `invalid_argument` naming the field, and changes nothing.
async fn bad_input_is_refused_naming_the_field(api: &Front) {
    api.create(json!({"name": "v"})).await;
    let (create, send, batch) = (Op::CreateQueue, Op::Send("v"), Op::SendBatch("v"));
    let (receive, ack, lease, peek) = (
        Op::Receive("v"),
        Op::Ack("v"),
        Op::ChangeLease("v"),
        Op::Peek("v"),
    );
    #[rustfmt::skip]
    let cases = [
        (create, json!({}), "name"),
        (create, json!({"name": ""}), "name"),
        (create, json!({"name": "bad name"}), "name"),
        (create, json!({"name": "q", "type": "fifo"}), "type"),
        (create, json!({"name": "q", "lease_seconds": -1}), "lease_seconds"),
        (create, json!({"name": "q", "lease_seconds": 43201}), "lease_seconds"),
        (create, json!({"name": "q", "retention_seconds": 59}), "retention_seconds"),
        (create, json!({"name": "q", "max_message_bytes": 0}), "max_message_bytes"),
        (create, json!({"name": "q", "delay_seconds": 901}), "delay_seconds"),
        (create, json!({"name": "q", "content_based_deduplication": true}), "content_based_deduplication"),
        (create, json!({"name": "q", "redrive_policy": {"dead_letter_target": "v"}}), "redrive_policy.max_receive_count"),
        (create, json!({"name": "q", "redrive_policy": {"max_receive_count": 3}}), "redrive_policy.dead_letter_target"),
        (create, json!({"name": "q", "redrive_policy": {"dead_letter_target": "v", "max_receive_count": 0}}), "redrive_policy.max_receive_count"),
        (create, json!({"name": "q", "redrive_policy": {"dead_letter_target": "missing", "max_receive_count": 3}}), "redrive_policy.dead_letter_target"),
        (create, json!({"name": "q", "redrive_allow_policy": {}}), "redrive_allow_policy.permission"),
        (create, json!({"name": "q", "redrive_allow_policy": {"permission": "some"}}), "redrive_allow_policy.permission"),
        (send, json!({}), "body"),
        (send, json!({"body": ""}), "body"),
        (send, json!({"body": "x", "delay_seconds": 901}), "delay_seconds"),
        (send, json!({"body": "x", "message_group_id": ""}), "message_group_id"),
        (send, json!({"body": "x", "message_deduplication_id": "d"}), "message_deduplication_id"),
        (batch, json!({}), "entries"),
        (receive, json!({"max_messages": 0}), "max_messages"),
        (receive, json!({"max_messages": 11}), "max_messages"),
        (receive, json!({"lease_seconds": -1}), "lease_seconds"),
        (receive, json!({"wait_seconds": 21}), "wait_seconds"),
        (receive, json!({"wait_seconds": -1}), "wait_seconds"),
        (ack, json!({}), "receipts"),
        (ack, json!({"receipts": []}), "receipts"),
        (lease, json!({"receipt": "x"}), "lease_seconds"),
        (lease, json!({"lease_seconds": 5}), "receipt"),
        (lease, json!({"receipt": "bogus", "lease_seconds": 5}), "receipt"),
        (lease, json!({"receipt": "bogus", "lease_seconds": 43201}), "lease_seconds"),
        (peek, json!({"limit": 0}), "limit"),
        (peek, json!({"limit": 101}), "limit"),
    ];
    for (op, input, field) in cases {
        refused(api.call(op, input).await, "invalid_argument", Some(field));
    }
    // Nothing above changed anything.
    let all = api.ok(Op::ListQueues, Value::Null).await;
    assert_eq!(queues(&all).len(), 1);
    assert_eq!(api.stats("v").await["visible"], 0);
}

/// Every operation on a queue that does not exist is `queue_not_found`.
async fn unknown_queues_are_not_found(api: &Front) {
    let calls = [
        (Op::GetQueue("nope"), Value::Null),
        (Op::PatchQueue("nope"), json!({"lease_seconds": 5})),
        (Op::PatchQueue("nope"), Value::Null),
        (Op::DeleteQueue("nope"), Value::Null),
        (Op::DeadLetterSources("nope"), Value::Null),
        (Op::Stats("nope"), Value::Null),
        (Op::Send("nope"), json!({"body": "x"})),
        (Op::Peek("nope"), Value::Null),
        (
            Op::SendBatch("nope"),
            json!({"entries": [{"id": "a", "body": "x"}]}),
        ),
        (Op::Receive("nope"), json!({"wait_seconds": 1})),
        (Op::Ack("nope"), json!({"receipts": ["r"]})),
        (
            Op::ChangeLease("nope"),
            json!({"receipt": "000000000000000100000001", "lease_seconds": 5}),
        ),
        (Op::Purge("nope"), Value::Null),
    ];
    for (op, input) in calls {
        refused(api.call(op, input).await, "queue_not_found", None);
    }
}

/// A message over its queue's limit (attributes counted) or over the largest any queue takes
/// is `message_too_large` and is not stored; the largest message of a 1 MiB queue fits, also
/// when its JSON needs escapes.
async fn oversize_messages_are_refused_and_the_largest_fit(api: &Front) {
    api.create(json!({"name": "small", "max_message_bytes": 10}))
        .await;
    let fits = api.send("small", json!({"body": "0123456789"})).await;
    assert!(fits["message_id"].is_string());
    for body in [
        json!({"body": "0123456789a"}),
        json!({"body": "01234", "attributes": {"name": "value"}}),
        json!({"body": "x".repeat(1024 * 1024 + 1)}),
    ] {
        let r = api.call(Op::Send("small"), body).await;
        refused(r, "message_too_large", Some("body"));
    }
    assert_eq!(api.stats("small").await["visible"], 1);

    api.create(json!({"name": "big", "max_message_bytes": 1024 * 1024}))
        .await;
    let largest = "\"".repeat(512 * 1024) + &"\u{1}".repeat(512 * 1024);
    api.send("big", json!({ "body": largest })).await;
    let got = api.receive("big", json!({})).await;
    assert_eq!(got[0]["body"].as_str().map(str::len), Some(1024 * 1024));
}

/// A call without a key or with an unknown one is `unauthenticated`; another account's queue
/// is not found by any reference, nor taken as a dead-letter target, and its name is free.
async fn api_keys_separate_accounts(api: &Front) {
    let wrong = api.with_key(Some("nope"));
    let unauthenticated = [
        (api, Op::ListQueues, Value::Null),
        (api, Op::Cluster, Value::Null),
        (&wrong, Op::ListQueues, Value::Null),
        (&wrong, Op::CreateQueue, json!({"name": "x"})),
    ];
    for (front, op, input) in unauthenticated {
        refused(front.call(op, input).await, "unauthenticated", None);
    }

    let acme = api.with_key(Some("acme-key"));
    let globex = api.with_key(Some("globex-key"));
    let mine = acme.create(json!({"name": "shared"})).await;
    let id = mine["id"].as_str().expect("id");
    let crn = mine["crn"].as_str().expect("crn");
    assert!(crn.contains(":a/acme:"), "{crn}");
    for reference in ["shared", id, crn] {
        let r = globex.call(Op::GetQueue(reference), Value::Null).await;
        refused(r, "queue_not_found", None);
        let r = globex.call(Op::Send(reference), json!({"body": "x"})).await;
        refused(r, "queue_not_found", None);
    }
    let theirs = globex.create(json!({"name": "shared"})).await;
    assert_ne!(theirs["id"], mine["id"]);
    assert!(theirs["crn"]
        .as_str()
        .is_some_and(|c| c.contains(":a/globex:")));
    let listed = globex.ok(Op::ListQueues, Value::Null).await;
    assert_eq!(queues(&listed).len(), 1);
    assert_eq!(listed["queues"][0]["id"], theirs["id"]);
    // A dead-letter target of another account is refused by its CRN.
    let foreign = globex
        .call(
            Op::CreateQueue,
            json!({"name": "src", "redrive_policy": {"dead_letter_target": crn, "max_receive_count": 2}}),
        )
        .await;
    refused(
        foreign,
        "invalid_argument",
        Some("redrive_policy.dead_letter_target"),
    );
    assert_eq!(acme.ok(Op::Cluster, Value::Null).await["leader"], 1);
}

/// A long poll ends at its deadline when nothing comes (a send to another queue does not end
/// it, and waiting adds no log entries but the tick that ends it), is answered by the entry of
/// the send that wakes it, and wakes when a delay ends.
async fn long_polls_wake_on_a_send_and_end_at_their_deadline(api: &Front) {
    api.create(json!({"name": "lp"})).await;
    api.create(json!({"name": "elsewhere"})).await;
    let last_log_index = || {
        let metrics = api.serving().node.raft().metrics();
        let index = metrics.borrow().last_log_index;
        index.unwrap_or(0)
    };

    // A receive of `lp` that waits up to `wait_seconds`, with a send of `body` to `queue` 300 ms
    // after it starts: what the receive got, what the send answered, how long the receive
    // waited and how many log entries were appended meanwhile.
    let poll_with_send = async |wait_seconds: u64, queue: &str, body: &str| {
        let log_before = last_log_index();
        let started = Instant::now();
        let poll = api.receive("lp", json!({"wait_seconds": wait_seconds}));
        let send = async {
            sleep(Duration::from_millis(300)).await;
            api.send(queue, json!({"body": body})).await
        };
        let (got, sent) = tokio::join!(poll, send);
        let waited = started.elapsed();
        (got, sent, waited, last_log_index() - log_before)
    };

    // A send to another queue does not end the wait, and waiting adds no log entries beyond
    // the parked receive and the tick at its deadline.
    let (got, _, waited, entries) = poll_with_send(1, "elsewhere", "not for lp").await;
    assert!(got.is_empty());
    assert!(waited >= Duration::from_millis(950), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    assert!(entries <= 3, "{entries} entries while one poll waited");

    // The send's own entry answers the poll: two entries, the parked receive and the send.
    let (got, sent, waited, entries) = poll_with_send(10, "lp", "wake").await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["message_id"], sent["message_id"]);
    assert_eq!(got[0]["body"], "wake");
    assert_eq!(got[0]["receive_count"], 1);
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    assert!(
        entries <= 2,
        "{entries} entries: a parked receive, the send that answered it"
    );

    // A delayed message wakes the poll when its delay ends.
    api.send("lp", json!({"body": "later", "delay_seconds": 1}))
        .await;
    let started = Instant::now();
    let got = api.receive("lp", json!({"wait_seconds": 10})).await;
    let waited = started.elapsed();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["body"], "later");
    assert!(waited < Duration::from_secs(4), "{waited:?}");
}

/// A peek shows pages of messages with their state and no lease; the stats count them; a purge
/// empties the queue but keeps its deduplication records.
async fn peek_pages_purge_empties_and_stats_count(api: &Front) {
    api.create(json!({"name": "p.fifo", "content_based_deduplication": true}))
        .await;
    for body in ["1", "2", "3"] {
        api.send("p.fifo", json!({"body": body, "message_group_id": "g"}))
            .await;
    }
    api.send(
        "p.fifo",
        json!({"body": "4", "message_group_id": "h", "delay_seconds": 600}),
    )
    .await;
    let page = api.ok(Op::Peek("p.fifo"), json!({"limit": 2})).await;
    let messages = page["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["state"], "visible");
    assert_eq!(messages[0]["receive_count"], 0);
    assert_eq!(messages[0]["first_received_at"], Value::Null);
    assert!(messages[0]["sequence_number"].is_u64());
    let next = page["next_after"].as_u64().expect("next_after");
    assert_eq!(messages[1]["sequence_number"], next);
    // A null limit is not given (over REST, an empty query parameter).
    let rest = api
        .ok(Op::Peek("p.fifo"), json!({"limit": null, "after": next}))
        .await;
    let messages = rest["messages"].as_array().expect("messages");
    assert_eq!(strings(messages, "body"), ["3", "4"]);
    assert_eq!(messages[1]["state"], "delayed");

    let stats = api.stats("p.fifo").await;
    assert_eq!(stats["visible"], 3);
    assert_eq!(stats["delayed"], 1);
    assert_eq!(stats["leased"], 0);
    assert!(stats["oldest_message_age_seconds"].is_u64());

    assert_eq!(api.ok(Op::Purge("p.fifo"), Value::Null).await, Value::Null);
    let stats = api.stats("p.fifo").await;
    assert_eq!(
        (stats["visible"].as_u64(), stats["delayed"].as_u64()),
        (Some(0), Some(0))
    );
    let empty = api.ok(Op::Peek("p.fifo"), Value::Null).await;
    assert_eq!(empty, json!({"messages": [], "next_after": null}));
    // Purge keeps deduplication records.
    let again = api
        .send("p.fifo", json!({"body": "1", "message_group_id": "g"}))
        .await;
    assert_eq!(again["duplicate"], true);
}

/// The cluster shows the node as its leader and only member, with its peer address, whether it
/// answers and how far its log goes, the term and commit index, the node answering and the
/// region.
async fn the_cluster_reports_the_node(api: &Front) {
    api.create(json!({"name": "m"})).await;
    // The creation is answered from its apply; openraft's metrics, which the cluster's figures
    // come from, take the applied entry a moment later.
    let deadline = Instant::now() + Duration::from_secs(5);
    let c = loop {
        let c = api.ok(Op::Cluster, Value::Null).await;
        let applied = c["nodes"][0]["applied_index"].as_u64();
        if applied.is_some_and(|a| a >= 2) || Instant::now() > deadline {
            break c;
        }
        sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(c["leader"], 1);
    assert_eq!(c["node_id"], 1);
    assert_eq!(c["region"], "local");
    assert_eq!(c["nodes"].as_array().map(Vec::len), Some(1));
    assert_eq!(c["nodes"][0]["id"], 1);
    assert_eq!(c["nodes"][0]["role"], "leader");
    assert!(c["nodes"][0]["raft_addr"]
        .as_str()
        .is_some_and(|a| a.starts_with("127.0.0.1:")));
    assert!(c["term"].as_u64().is_some_and(|t| t >= 1), "{c}");
    assert!(c["commit_index"].as_u64().is_some_and(|i| i >= 2), "{c}");
    assert_eq!(c["nodes"][0]["answering"], true);
    // The leader has its whole log: what it matched of itself is at least what it committed.
    let matched = c["nodes"][0]["matched_index"].as_u64();
    assert!(matched >= c["commit_index"].as_u64(), "{c}");
    // Its own figures: the cluster's commit index, and a log that holds it.
    assert_eq!(c["nodes"][0]["commit_index"], c["commit_index"], "{c}");
    let applied = c["nodes"][0]["applied_index"].as_u64();
    assert!(applied.is_some_and(|a| a >= 2), "{c}");
    assert!(c["nodes"][0]["last_log_index"].as_u64() >= applied, "{c}");
}

/// Without a quorum, writes and reads are `unavailable` soon, and the cluster shows no leader.
async fn a_cluster_without_quorum_is_unavailable(api: &Front) {
    let started = Instant::now();
    let r = api.call(Op::CreateQueue, json!({"name": "q"})).await;
    refused(r, "unavailable", None);
    refused(
        api.call(Op::ListQueues, Value::Null).await,
        "unavailable",
        None,
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let c = api.ok(Op::Cluster, Value::Null).await;
    assert_eq!(c["leader"], Value::Null);
    // A new cluster forms once every listed node has started: none has a membership yet.
    assert_eq!(c["nodes"].as_array().map(Vec::len), Some(0));
}

/// Account keys see the cluster as SPEC.md §3 has it and their own queues; admin keys also see
/// the cluster's details and every account.
async fn admin_keys_see_the_cluster_details_and_every_account(api: &Front) {
    let acme = api.with_key(Some("acme-key"));
    let globex = api.with_key(Some("globex-key"));
    let admin = api.with_key(Some("admin-key"));
    for (account, queue) in [(&acme, "a1"), (&acme, "a2"), (&globex, "g1")] {
        account.create(json!({ "name": queue })).await;
    }
    let seen = acme.ok(Op::Cluster, Value::Null).await;
    assert_eq!(seen["leader"], 1);
    assert_eq!(seen["nodes"].as_array().map(Vec::len), Some(1));
    for detail in [
        "cluster_id",
        "clock_offset_ms",
        "clock_skewed",
        "clock_confirmed",
        "state_time_ms",
    ] {
        assert!(seen.get(detail).is_none(), "{detail}: {seen}");
    }
    let full = admin.ok(Op::Cluster, Value::Null).await;
    assert_eq!(full["nodes"].as_array().map(Vec::len), Some(1));
    assert!(full["cluster_id"].is_string(), "{full}");
    assert_eq!(full["clock_skewed"], false);
    assert_eq!(full["clock_confirmed"], true);
    assert!(
        full["state_time_ms"].as_u64().is_some_and(|t| t > 0),
        "{full}"
    );
    let denied = acme.call(Op::Accounts, Value::Null).await;
    refused(denied, "permission_denied", None);
    let accounts = admin.ok(Op::Accounts, Value::Null).await;
    assert_eq!(
        accounts,
        json!({"accounts": [{"account": "acme", "queues": 2}, {"account": "globex", "queues": 1}]})
    );
    let listed = globex.ok(Op::ListQueues, Value::Null).await;
    assert_eq!(queues(&listed).len(), 1);
}

/// Membership changes need an admin key; bad ones are refused naming their field or rule, and
/// change nothing.
async fn only_admin_keys_change_membership_and_bad_changes_are_refused(api: &Front) {
    let acme = api.with_key(Some("acme-key"));
    let admin = api.with_key(Some("admin-key"));
    let add = json!({"id": 9, "raft_addr": "nohost"});
    let node = |id: u64| json!({ "id": id });
    let cases = [
        (&acme, Op::AddNode, add.clone(), "permission_denied", None),
        (&acme, Op::RemoveNode, node(1), "permission_denied", None),
        (api, Op::RemoveNode, node(1), "unauthenticated", None),
        (&acme, Op::DrainNode, node(1), "permission_denied", None),
        (&acme, Op::UndrainNode, node(1), "permission_denied", None),
        // A cluster of one group: nothing to drain into.
        (&admin, Op::DrainNode, node(1), "unsupported", None),
        (&admin, Op::UndrainNode, node(1), "unsupported", None),
        (
            &admin,
            Op::AddNode,
            add,
            "invalid_argument",
            Some("raft_addr"),
        ),
        (
            &admin,
            Op::AddNode,
            json!({"id": 1, "raft_addr": "h:1"}),
            "membership_conflict",
            Some("id"),
        ),
        (&admin, Op::RemoveNode, node(1), "membership_conflict", None),
        (
            &admin,
            Op::RemoveNode,
            node(7),
            "invalid_argument",
            Some("id"),
        ),
    ];
    for (front, op, input, code, field) in cases {
        refused(front.call(op, input).await, code, field);
    }
    let c = admin.ok(Op::Cluster, Value::Null).await;
    assert_eq!(c["nodes"].as_array().map(Vec::len), Some(1));
    assert_eq!(c["leader"], 1);
}

/// A standard queue serves the tenant with the fewest messages in flight first and counts its
/// tenants; a retry backoff is set, shown and cleared, a release may ask for a delay, and an
/// expired lease leaves the message delayed until its backoff ends (docs/semantics.md).
async fn fair_queues_serve_quiet_tenants_first_and_leases_end_with_a_backoff(api: &Front) {
    let backoff = json!({"initial_seconds": 2, "max_seconds": 60, "multiplier": 1.5});
    let q = api
        .create(json!({"name": "fair", "retry_backoff": backoff}))
        .await;
    assert_eq!(q["retry_backoff"], backoff);
    let bad = [
        (
            json!({"initial_seconds": 2, "max_seconds": 60, "multiplier": 11}),
            "retry_backoff.multiplier",
        ),
        (
            json!({"max_seconds": 60, "multiplier": 2}),
            "retry_backoff.initial_seconds",
        ),
        (
            json!({"initial_seconds": 9, "max_seconds": 8, "multiplier": 2}),
            "retry_backoff.max_seconds",
        ),
    ];
    for (value, field) in bad {
        let patched = api
            .call(Op::PatchQueue("fair"), json!({"retry_backoff": value}))
            .await;
        refused(patched, "invalid_argument", Some(field));
    }
    assert_eq!(
        api.ok(Op::GetQueue("fair"), Value::Null).await["retry_backoff"],
        backoff
    );

    for body in ["n0", "n1", "n2"] {
        api.send("fair", json!({"body": body, "message_group_id": "noisy"}))
            .await;
    }
    api.send("fair", json!({"body": "q0", "message_group_id": "quiet"}))
        .await;
    let got = api
        .receive("fair", json!({"max_messages": 2, "lease_seconds": 1}))
        .await;
    assert_eq!(strings(&got, "body"), ["n0", "q0"], "one of each tenant");
    let stats = api.stats("fair").await;
    assert_eq!(
        (&stats["active_tenants"], &stats["largest_tenant_in_flight"]),
        (&json!(2), &json!(1))
    );

    // The releases of a lease with a delay, refused unless the lease ends.
    let receipt = |m: &Value| m["receipt"].as_str().expect("receipt").to_string();
    let early = api
        .call(
            Op::ChangeLease("fair"),
            json!({"receipt": receipt(&got[1]), "lease_seconds": 10, "delay_seconds": 5}),
        )
        .await;
    refused(early, "invalid_argument", Some("delay_seconds"));
    api.ok(
        Op::ChangeLease("fair"),
        json!({"receipt": receipt(&got[1]), "lease_seconds": 0, "delay_seconds": 600}),
    )
    .await;

    // n0's lease of 1 s expires: it waits its 2 s backoff as a delayed message.
    let deadline = Instant::now() + Duration::from_secs(10);
    let states = loop {
        let peeked = api.ok(Op::Peek("fair"), Value::Null).await;
        let messages = peeked["messages"].as_array().expect("messages").clone();
        if messages[0]["state"] == "delayed" {
            break messages;
        }
        assert!(Instant::now() < deadline, "the lease never ended: {peeked}");
        sleep(Duration::from_millis(100)).await;
    };
    for delayed in [&states[0], &states[3]] {
        assert_eq!(delayed["state"], "delayed", "{delayed}");
        assert!(is_rfc3339_utc(&delayed["visible_at"]), "{delayed}");
    }
    assert!(states[1].get("visible_at").is_none(), "{}", states[1]);

    let cleared = api
        .ok(Op::PatchQueue("fair"), json!({"retry_backoff": null}))
        .await;
    assert_eq!(cleared["retry_backoff"], Value::Null);
}

/// The queue's newest move task once it has ended (polled).
async fn ended_task(api: &Front, queue: &str) -> Value {
    loop {
        let list = api.ok(Op::MoveTasks(queue), Value::Null).await;
        let newest = list["tasks"][0].clone();
        if newest["status"] != "running" {
            return newest;
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// A dead-letter queue's messages are counted by a dry run, moved back by a task (all of them,
/// or those a filter names), and a slow task is cancelled; the tasks are listed newest first, and
/// bad input is refused naming its field.
async fn move_tasks_count_move_back_filter_cancel_and_refuse_bad_input(api: &Front) {
    let dlq = api.create(json!({"name": "dlq"})).await;
    api.create(json!({"name": "work", "redrive_policy": {"dead_letter_target": "dlq", "max_receive_count": 1}}))
        .await;
    api.create(json!({"name": "plain"})).await;
    api.create(json!({"name": "other.fifo"})).await;
    for i in 0..3 {
        api.send("work", json!({"body": format!("m{i}")})).await;
    }
    let got = api
        .receive("work", json!({"max_messages": 10, "lease_seconds": 0}))
        .await;
    assert_eq!(got.len(), 3);
    assert_eq!(api.stats("dlq").await["visible"], 3);

    let refusals = [
        ("plain", json!({}), "invalid_argument", Some("destination")),
        (
            "dlq",
            json!({"destination": "other.fifo"}),
            "invalid_argument",
            Some("destination"),
        ),
        (
            "dlq",
            json!({"destination": "dlq"}),
            "invalid_argument",
            Some("destination"),
        ),
        (
            "dlq",
            json!({"max_messages_per_second": 0}),
            "invalid_argument",
            Some("max_messages_per_second"),
        ),
        (
            "dlq",
            json!({"max_messages_per_second": 501}),
            "invalid_argument",
            Some("max_messages_per_second"),
        ),
        (
            "dlq",
            json!({"filter": {"message_ids": ["x"]}}),
            "invalid_argument",
            Some("filter.message_ids[0]"),
        ),
        (
            "dlq",
            json!({"filter": {"moved_since": "yesterday"}}),
            "invalid_argument",
            Some("filter.moved_since"),
        ),
        (
            "dlq",
            json!({"filter": {"moved_since": "2024-05-02T00:00:00Z", "moved_before": "2024-05-01T00:00:00Z"}}),
            "invalid_argument",
            Some("filter.moved_before"),
        ),
        ("nope", json!({}), "queue_not_found", None),
    ];
    for (queue, input, code, field) in refusals {
        refused(api.call(Op::StartMoveTask(queue), input).await, code, field);
    }
    let unknown = api
        .call(
            Op::CancelMoveTask("dlq", &uuid::Uuid::new_v4().to_string()),
            Value::Null,
        )
        .await;
    refused(unknown, "move_task_not_found", None);
    assert_eq!(
        api.ok(Op::MoveTasks("dlq"), Value::Null).await,
        json!({"tasks": []}),
        "refusals start nothing"
    );

    let dry = api
        .ok(Op::StartMoveTask("dlq"), json!({"dry_run": true}))
        .await;
    assert_eq!(dry["status"], "completed");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        (dry["to_move"].clone(), dry["moved"].clone()),
        (json!(3), json!(0))
    );
    assert_eq!(
        dry["source"],
        json!({"id": dlq["id"], "name": "dlq", "crn": dlq["crn"]})
    );
    assert_eq!(dry["destination"], Value::Null);
    assert_eq!(dry["filter"], Value::Null);
    assert_eq!(dry["max_messages_per_second"], 500);
    assert!(
        is_rfc3339_utc(&dry["started_at"]) && is_rfc3339_utc(&dry["ended_at"]),
        "{dry}"
    );
    assert!(dry.get("failure_reason").is_none(), "{dry}");

    let peeked = api.ok(Op::Peek("dlq"), Value::Null).await;
    let second = peeked["messages"][1]["message_id"].clone();
    let by_id = api
        .ok(
            Op::StartMoveTask("dlq"),
            json!({"filter": {"message_ids": [second]}}),
        )
        .await;
    assert_eq!(by_id["filter"], json!({"message_ids": [second]}));
    let by_id = ended_task(api, "dlq").await;
    assert_eq!(by_id["status"], "completed");
    assert_eq!(
        (by_id["to_move"].clone(), by_id["moved"].clone()),
        (json!(1), json!(1))
    );
    let back = api.ok(Op::Peek("work"), Value::Null).await;
    assert_eq!(back["messages"][0]["message_id"], second);
    assert_eq!(back["messages"][0]["body"], "m1");
    assert!(
        back["messages"][0].get("dead_letter_source").is_none(),
        "{back}"
    );

    let slow = api
        .ok(
            Op::StartMoveTask("dlq"),
            json!({"destination": "plain", "max_messages_per_second": 1}),
        )
        .await;
    assert_eq!(slow["status"], "running");
    assert_eq!(slow["destination"]["name"], "plain");
    let handle = slow["task_handle"].as_str().expect("task_handle");
    let second_task = api.call(Op::StartMoveTask("dlq"), json!({})).await;
    refused(second_task, "move_task_running", None);
    let cancelled = api.ok(Op::CancelMoveTask("dlq", handle), Value::Null).await;
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["task_handle"], handle);
    let again = api
        .call(Op::CancelMoveTask("dlq", handle), Value::Null)
        .await;
    refused(again, "move_task_not_running", None);
    let moved_to_plain = cancelled["moved"].as_u64().expect("moved");
    assert_eq!(api.stats("plain").await["visible"], moved_to_plain);

    let all = api.ok(Op::StartMoveTask("dlq"), json!({})).await;
    assert_eq!(all["to_move"], 2 - moved_to_plain);
    assert_eq!(ended_task(api, "dlq").await["status"], "completed");
    assert_eq!(api.stats("dlq").await["visible"], 0);
    assert_eq!(api.stats("work").await["visible"], 3 - moved_to_plain);

    let list = api.ok(Op::MoveTasks("dlq"), Value::Null).await;
    let statuses: Vec<&str> = strings(list["tasks"].as_array().expect("tasks"), "status");
    assert_eq!(
        statuses,
        ["completed", "cancelled", "completed", "completed"]
    );
}

/// Typed attributes come back with their types and values (base64 for binary ones), plain ones
/// without `attribute_types`, as before; a 1 MiB message with a binary attribute fits; a bad
/// type, number or base64 value is refused naming the field and stores nothing.
async fn typed_attributes_round_trip_and_plain_ones_keep_their_shape(api: &Front) {
    api.create(json!({"name": "t", "max_message_bytes": 1024 * 1024}))
        .await;
    api.send(
        "t",
        json!({
            "body": "typed",
            "attributes": {"plain": "x", "price": "-12.50e3", "img": "AP/Y/w==", "tag": "v"},
            "attribute_types": {"price": "Number.float", "img": "Binary.jpg", "tag": "String.label"},
        }),
    )
    .await;
    api.send("t", json!({"body": "plain", "attributes": {"k": "v"}}))
        .await;
    let got = api.receive("t", json!({"max_messages": 10})).await;
    assert_eq!(strings(&got, "body"), ["typed", "plain"]);
    assert_eq!(
        got[0]["attributes"],
        json!({"plain": "x", "price": "-12.50e3", "img": "AP/Y/w==", "tag": "v"})
    );
    assert_eq!(
        got[0]["attribute_types"],
        json!({"price": "Number.float", "img": "Binary.jpg", "tag": "String.label"})
    );
    assert_eq!(got[1]["attributes"], json!({"k": "v"}));
    assert!(got[1].get("attribute_types").is_none(), "{}", got[1]);

    #[rustfmt::skip]
    let cases = [
        (json!({"Bin": "not base64!"}), json!({"Bin": "Binary"}), "attributes.Bin"),
        (json!({"n": "1.2.3"}), json!({"n": "Number"}), "attributes.n"),
        (json!({"n": "1"}), json!({"n": "Integer"}), "attribute_types.n"),
        (json!({"n": "1"}), json!({"m": "Number"}), "attribute_types.m"),
    ];
    for (attributes, types, field) in cases {
        let body = json!({"body": "b", "attributes": attributes, "attribute_types": types});
        refused(
            api.call(Op::Send("t"), body).await,
            "invalid_argument",
            Some(field),
        );
    }
    assert_eq!(api.stats("t").await["visible"], 0);

    // 512 KiB of body, a 4-byte name, a 6-byte type and the rest in bytes: exactly 1 MiB.
    let largest = |len: usize| {
        json!({
            "body": "x".repeat(512 * 1024),
            "attributes": {"blob": base64_of(&vec![0xA5u8; len])},
            "attribute_types": {"blob": "Binary"},
        })
    };
    let fits = 512 * 1024 - 10;
    api.send("t", largest(fits)).await;
    let got = api.receive("t", json!({})).await;
    let blob = got[0]["attributes"]["blob"].as_str().map(str::to_string);
    assert_eq!(blob, Some(base64_of(&vec![0xA5u8; fits])));
    let over = api.call(Op::Send("t"), largest(fits + 1)).await;
    refused(over, "message_too_large", Some("body"));
}

/// Standard base64 with padding.
fn base64_of(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Tags are set on create, merged and removed by a patch and shown on the queue; a queue's
/// `receive_wait_seconds` is the wait of a receive that names none; `modified_at` moves when
/// a setting changes, not for tags; bad values are refused naming the field.
async fn tags_default_waits_and_modified_at_are_queue_settings(api: &Front) {
    let q = api
        .create(
            json!({"name": "w", "tags": {"team": "pay", "env": "prod"}, "receive_wait_seconds": 1}),
        )
        .await;
    assert_eq!(q["tags"], json!({"team": "pay", "env": "prod"}));
    assert_eq!(q["receive_wait_seconds"], 1);
    assert_eq!(q["modified_at"], q["created_at"]);
    assert!(is_rfc3339_utc(&q["modified_at"]), "{q}");

    sleep(Duration::from_millis(20)).await;
    let tagged = api
        .ok(
            Op::PatchQueue("w"),
            json!({"tags": {"team": "billing", "env": null, "new": ""}}),
        )
        .await;
    assert_eq!(tagged["tags"], json!({"team": "billing", "new": ""}));
    assert_eq!(
        tagged["modified_at"], q["created_at"],
        "tags are not settings"
    );

    // No wait given: the queue's second. A wait given wins.
    let started = Instant::now();
    assert!(api.receive("w", json!({})).await.is_empty());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(950), "{waited:?}");
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    let started = Instant::now();
    assert!(api
        .receive("w", json!({"wait_seconds": 0}))
        .await
        .is_empty());
    assert!(started.elapsed() < Duration::from_millis(900));

    let patched = api
        .ok(Op::PatchQueue("w"), json!({"receive_wait_seconds": 0}))
        .await;
    assert!(
        patched["modified_at"].as_str() > q["modified_at"].as_str(),
        "{patched}"
    );
    let started = Instant::now();
    assert!(api.receive("w", json!({})).await.is_empty());
    assert!(started.elapsed() < Duration::from_millis(900));

    let too_many: Map<String, Value> = (0..51).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases = [
        (
            Op::CreateQueue,
            json!({"name": "x", "receive_wait_seconds": 21}),
            "receive_wait_seconds",
        ),
        (
            Op::CreateQueue,
            json!({"name": "x", "tags": too_many}),
            "tags",
        ),
        (
            Op::PatchQueue("w"),
            json!({"tags": {"aws:cost": "1"}}),
            "tags.aws:cost",
        ),
        (
            Op::PatchQueue("w"),
            json!({"tags": {"k": "v".repeat(257)}}),
            "tags.k",
        ),
        (
            Op::PatchQueue("w"),
            json!({"receive_wait_seconds": -1}),
            "receive_wait_seconds",
        ),
        (
            Op::Receive("w"),
            json!({"wait_seconds": 21}),
            "wait_seconds",
        ),
    ];
    for (op, input, field) in cases {
        refused(api.call(op, input).await, "invalid_argument", Some(field));
    }
    let after = api.ok(Op::GetQueue("w"), Value::Null).await;
    assert_eq!(after["tags"], tagged["tags"]);
    assert_eq!(after["modified_at"], patched["modified_at"]);
}

/// A FIFO queue's `deduplication_scope`: `queue` by default, `message_group` takes one
/// deduplication ID once in each group; a standard queue and other values are refused.
async fn fifo_queues_deduplicate_per_queue_or_per_message_group(api: &Front) {
    let q = api.create(json!({"name": "per-queue.fifo"})).await;
    assert_eq!(q["deduplication_scope"], "queue");
    let q = api
        .create(json!({"name": "per-group.fifo", "deduplication_scope": "message_group"}))
        .await;
    assert_eq!(q["deduplication_scope"], "message_group");
    for (queue, distinct) in [("per-queue.fifo", false), ("per-group.fifo", true)] {
        let ids: Vec<Value> = ["a", "b"]
            .into_iter()
            .map(|group| {
                json!({"body": group, "message_group_id": group, "message_deduplication_id": "d"})
            })
            .collect();
        let first = api.send(queue, ids[0].clone()).await;
        let second = api.send(queue, ids[1].clone()).await;
        assert_eq!(
            first["message_id"] != second["message_id"],
            distinct,
            "{queue}: {first} {second}"
        );
    }
    api.create(json!({"name": "plain"})).await;
    let cases = [
        (
            Op::CreateQueue,
            json!({"name": "x", "deduplication_scope": "queue"}),
        ),
        (
            Op::CreateQueue,
            json!({"name": "x.fifo", "deduplication_scope": "group"}),
        ),
        (
            Op::PatchQueue("plain"),
            json!({"deduplication_scope": "message_group"}),
        ),
        (
            Op::PatchQueue("per-queue.fifo"),
            json!({"deduplication_scope": "Queue"}),
        ),
    ];
    for (op, input) in cases {
        refused(
            api.call(op, input).await,
            "invalid_argument",
            Some("deduplication_scope"),
        );
    }
    let patched = api
        .ok(
            Op::PatchQueue("per-group.fifo"),
            json!({"deduplication_scope": "queue"}),
        )
        .await;
    assert_eq!(patched["deduplication_scope"], "queue");
}

/// A FIFO receive retried with its attempt ID gets the same messages and receipts; a standard
/// queue refuses attempt IDs, and a malformed one is refused.
async fn fifo_receive_attempts_replay_their_answer(api: &Front) {
    api.create(json!({"name": "a.fifo", "content_based_deduplication": true}))
        .await;
    api.create(json!({"name": "plain"})).await;
    for body in ["one", "two", "three"] {
        api.send("a.fifo", json!({"body": body, "message_group_id": "g"}))
            .await;
    }
    let attempt = json!({"max_messages": 2, "receive_attempt_id": "attempt-1"});
    let first = api.receive("a.fifo", attempt.clone()).await;
    assert_eq!(strings(&first, "body"), ["one", "two"]);
    let again = api.receive("a.fifo", attempt.clone()).await;
    assert_eq!(strings(&again, "receipt"), strings(&first, "receipt"));
    assert_eq!(again[0]["receive_count"], 1);
    // Another attempt finds the group blocked by those leases.
    let other = json!({"max_messages": 2, "receive_attempt_id": "attempt-2"});
    assert!(api.receive("a.fifo", other).await.is_empty());

    // Once a message was acknowledged, the retry is a new receive.
    let receipt = first[0]["receipt"].clone();
    api.ok(Op::Ack("a.fifo"), json!({"receipts": [receipt]}))
        .await;
    assert!(api.receive("a.fifo", attempt).await.is_empty());

    let cases = [
        (Op::Receive("plain"), json!({"receive_attempt_id": "x"})),
        (
            Op::Receive("a.fifo"),
            json!({"receive_attempt_id": "has space"}),
        ),
        (
            Op::Receive("a.fifo"),
            json!({"receive_attempt_id": "x".repeat(129)}),
        ),
    ];
    for (op, input) in cases {
        refused(
            api.call(op, input).await,
            "invalid_argument",
            Some("receive_attempt_id"),
        );
    }
}

/// A queue's ARN names it in a path and as a dead-letter target or allowed source; another
/// account's ARN is not found in a path and refused as a target.
async fn arns_name_queues_and_other_accounts_arns_are_refused(api: &Front) {
    let acme = api.with_key(Some("acme-key"));
    let globex = api.with_key(Some("globex-key"));
    let dlq = acme.create(json!({"name": "dlq"})).await;
    let arn = dlq["arn"].as_str().expect("arn").to_string();
    let prefix = "arn:aws:sqs:local:";
    let number = arn
        .strip_prefix(prefix)
        .and_then(|r| r.strip_suffix(":dlq"));
    assert!(
        number.is_some_and(|n| n.len() == 12 && n.bytes().all(|b| b.is_ascii_digit())),
        "{arn}"
    );
    let by_arn = acme.ok(Op::GetQueue(&arn), Value::Null).await;
    assert_eq!(by_arn["id"], dlq["id"]);
    acme.send(&arn, json!({"body": "via arn"})).await;
    let src = acme
        .create(json!({"name": "src", "redrive_policy": {"dead_letter_target": arn, "max_receive_count": 2}}))
        .await;
    assert_eq!(src["redrive_policy"]["dead_letter_target"]["id"], dlq["id"]);
    let src_arn = src["arn"].as_str().expect("arn");
    let allowed = acme
        .ok(
            Op::PatchQueue("dlq"),
            json!({"redrive_allow_policy": {"permission": "by_queue", "source_queues": [src_arn]}}),
        )
        .await;
    assert_eq!(
        allowed["redrive_allow_policy"]["source_queues"][0]["name"],
        "src"
    );

    globex.create(json!({"name": "dlq"})).await;
    refused(
        globex.call(Op::GetQueue(&arn), Value::Null).await,
        "queue_not_found",
        None,
    );
    let theirs = json!({"name": "mine", "redrive_policy": {"dead_letter_target": arn, "max_receive_count": 2}});
    let r = refused(
        globex.call(Op::CreateQueue, theirs).await,
        "invalid_argument",
        Some("redrive_policy.dead_letter_target"),
    );
    assert!(
        r.error["message"]
            .as_str()
            .is_some_and(|m| m.contains("same account")),
        "{}",
        r.error
    );
}

async fn priorities_order_deliveries_and_scheduled_messages_are_listed_and_cancelled(api: &Front) {
    let q = api
        .create(json!({"name": "prio", "default_priority": 2}))
        .await;
    assert_eq!(
        (&q["default_priority"], &q["priority_weights"]),
        (&json!(2), &Value::Null)
    );
    api.send("prio", json!({"body": "low", "priority": 0}))
        .await;
    api.send("prio", json!({"body": "high", "priority": 9}))
        .await;
    api.send("prio", json!({"body": "default"})).await;
    let stats = api.stats("prio").await;
    assert_eq!(stats["by_priority"][9]["visible"], 1, "{stats}");
    assert_eq!(stats["by_priority"][2]["visible"], 1, "{stats}");
    let got = api.receive("prio", json!({"max_messages": 3})).await;
    assert_eq!(strings(&got, "body"), ["high", "default", "low"]);
    let priorities: Vec<&Value> = got.iter().map(|m| &m["priority"]).collect();
    assert_eq!(priorities, [&json!(9), &json!(2), &json!(0)]);

    let weighted = api
        .ok(Op::PatchQueue("prio"), json!({"priority_weights": [1, 3]}))
        .await;
    assert_eq!(weighted["priority_weights"], json!([1, 3]));
    let strict = api
        .ok(Op::PatchQueue("prio"), json!({"priority_weights": null}))
        .await;
    assert_eq!(strict["priority_weights"], Value::Null);

    api.create(json!({"name": "prio.fifo"})).await;
    let fifo = json!({"body": "x", "message_group_id": "g", "message_deduplication_id": "d",
        "priority": 1});
    let bad = [
        ("prio.fifo", Op::Send("prio.fifo"), fifo, "priority"),
        (
            "prio",
            Op::Send("prio"),
            json!({"body": "x", "priority": 10}),
            "priority",
        ),
        (
            "prio",
            Op::Send("prio"),
            json!({"body": "x", "deliver_at": "soon"}),
            "deliver_at",
        ),
        (
            "prio",
            Op::Send("prio"),
            json!({"body": "x", "deliver_at": rfc3339_in(60), "delay_seconds": 5}),
            "deliver_at",
        ),
        (
            "prio",
            Op::Send("prio"),
            json!({"body": "x", "deliver_at": rfc3339_in(5 * 24 * 3600)}),
            "deliver_at",
        ),
        (
            "prio",
            Op::PatchQueue("prio"),
            json!({"priority_weights": [0]}),
            "priority_weights[0]",
        ),
        (
            "prio.fifo",
            Op::PatchQueue("prio.fifo"),
            json!({"default_priority": 1}),
            "default_priority",
        ),
    ];
    for (queue, op, input, field) in bad {
        refused(api.call(op, input).await, "invalid_argument", Some(field));
        assert_eq!(
            api.stats(queue).await["visible"],
            0,
            "{queue}: nothing sent"
        );
    }

    let later = api
        .send(
            "prio",
            json!({"body": "later", "deliver_at": rfc3339_in(3600)}),
        )
        .await;
    let soon = api
        .send(
            "prio",
            json!({"body": "soon", "deliver_at": rfc3339_in(4), "priority": 5}),
        )
        .await;
    let listed = api.ok(Op::Scheduled("prio"), json!({"limit": 1})).await;
    let page = listed["messages"].as_array().expect("messages");
    assert_eq!(strings(page, "body"), ["later"]);
    assert_eq!(
        (&page[0]["scheduled"], &page[0]["state"]),
        (&json!(true), &json!("delayed"))
    );
    assert!(is_rfc3339_utc(&page[0]["visible_at"]), "{}", page[0]);
    let rest = api
        .ok(
            Op::Scheduled("prio"),
            json!({"after": listed["next_after"]}),
        )
        .await;
    assert_eq!(
        strings(rest["messages"].as_array().expect("messages"), "body"),
        ["soon"]
    );
    assert_eq!(api.stats("prio").await["scheduled"], 2);

    let later_id = later["message_id"].as_str().expect("message_id");
    api.ok(Op::CancelScheduled("prio", later_id), Value::Null)
        .await;
    let again = api
        .call(Op::CancelScheduled("prio", later_id), Value::Null)
        .await;
    refused(again, "message_not_scheduled", None);
    let not_an_id = api
        .call(Op::CancelScheduled("prio", "x"), Value::Null)
        .await;
    refused(not_an_id, "invalid_argument", Some("message_id"));

    // `soon` is due within 4 s: delivered then, with its priority, and no longer cancellable.
    let deadline = Instant::now() + Duration::from_secs(10);
    let due = loop {
        let got = api.receive("prio", json!({"max_messages": 10})).await;
        if !got.is_empty() {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "the scheduled message never came"
        );
        sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(strings(&due, "body"), ["soon"]);
    assert_eq!(due[0]["priority"], 5);
    let soon_id = soon["message_id"].as_str().expect("message_id");
    let late = api
        .call(Op::CancelScheduled("prio", soon_id), Value::Null)
        .await;
    refused(late, "message_not_scheduled", None);
    assert_eq!(api.stats("prio").await["scheduled"], 0);
}
