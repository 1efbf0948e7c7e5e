//! One test per rule of SPEC.md §1–§2, as the engine implements them. Each test drives the
//! engine through the shared [`Harness`] and checks exact outcomes, error codes and fields,
//! payloads, peeks and stats.

mod support;

use std::collections::BTreeMap;
use std::fmt::Debug;

use raftq_engine::model::crn;
use raftq_engine::validate::content_hash;
use raftq_engine::{
    AllowPolicyInput, Attribute, BatchEntry, Command, Delivery, Engine, EngineError, Entry,
    LevelStats, MessageMeta, MessageState, NewMessage, Outcome, Payload, QueueAttributes,
    QueueStats, QueueType, RedrivePolicyInput, RowKey, SendResult, RECLAIM_PER_TICK,
};
use support::*;

// ---- helpers ----------------------------------------------------------------------------------

/// An `invalid_argument` refusal naming `field`.
#[track_caller]
fn invalid<T: Debug>(result: Result<T, EngineError>, field: &str) -> EngineError {
    refused(result, "invalid_argument", Some(field))
}

/// Runs `f` at the current clock and asserts it left every persisted row as it was.
#[track_caller]
fn assert_unchanged(h: &mut Harness, f: impl FnOnce(&mut Harness)) {
    h.tick();
    let before = h.snapshot();
    f(h);
    assert_eq!(h.snapshot(), before, "a refused command changed the state");
}

/// Asserts that `command` is refused with `code` and changes nothing.
#[track_caller]
fn assert_refused(h: &mut Harness, command: Command, code: &str) {
    assert_unchanged(h, |h| {
        let err = h.apply(command).expect_err("expected a refusal");
        assert_eq!(err.code(), code, "{err}");
    });
}

fn fifo(name: &str) -> bool {
    QueueType::of_name(name) == QueueType::Fifo
}

/// A message for `queue`: FIFO queues get group `group` and the body as deduplication ID.
fn msg_for(h: &mut Harness, queue: &str, group: &str, body: &str) -> NewMessage {
    let m = h.message(body);
    if fifo(queue) {
        m.in_group(group).deduplicated_by(body)
    } else {
        m
    }
}

/// Sends `body` to a queue of either type (group `g` on FIFO queues).
fn put(h: &mut Harness, queue: &str, body: &str) -> SendResult {
    let m = msg_for(h, queue, "g", body);
    h.try_send_msg(queue, m).expect("send")
}

/// Sends `body` with a delay.
fn put_delayed(h: &mut Harness, queue: &str, group: &str, body: &str, delay: i64) -> SendResult {
    let mut m = msg_for(h, queue, group, body);
    m.delay_seconds = Some(delay);
    h.try_send_msg(queue, m).expect("send delayed")
}

/// Queue-level commands, for [`queue_cmd`].
enum Op {
    Patch(Box<QueueAttributes>),
    Delete,
    Purge,
}

fn queue_cmd(queue: &str, op: Op) -> Command {
    let (account, queue) = (ACCOUNT.to_string(), queue.to_string());
    match op {
        Op::Patch(attributes) => Command::PatchQueue {
            account,
            queue,
            attributes: *attributes,
        },
        Op::Delete => Command::DeleteQueue { account, queue },
        Op::Purge => Command::Purge { account, queue },
    }
}

fn send_cmd(queue: &str, message: NewMessage) -> Command {
    Command::Send {
        account: ACCOUNT.into(),
        queue: queue.into(),
        message,
    }
}

fn receive_cmd(queue: &str, max: i64) -> Command {
    Command::Receive {
        account: ACCOUNT.into(),
        queue: queue.into(),
        max_messages: Some(max),
        lease_seconds: None,
        attempt_id: None,
    }
}

fn ack_cmd(queue: &str, receipts: &[&str]) -> Command {
    Command::Ack {
        account: ACCOUNT.into(),
        queue: queue.into(),
        receipts: receipts.iter().map(|r| r.to_string()).collect(),
    }
}

fn acked(outcome: Result<Outcome, EngineError>) -> Vec<Result<(), EngineError>> {
    match outcome.expect("ack") {
        Outcome::Acked(results) => results.into_iter().map(|r| r.result).collect(),
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn batch(h: &mut Harness, queue: &str, entries: Vec<BatchEntry>) -> Result<Outcome, EngineError> {
    h.apply(Command::SendBatch {
        account: ACCOUNT.into(),
        queue: queue.into(),
        entries,
    })
}

fn entry(h: &mut Harness, id: &str, body: &str) -> BatchEntry {
    BatchEntry {
        id: id.into(),
        message: h.message(body),
    }
}

fn peek(h: &Harness, queue: &str) -> Vec<MessageMeta> {
    h.engine
        .peek(ACCOUNT, queue, None, Some(100))
        .expect("peek")
}

fn states(h: &Harness, queue: &str) -> Vec<MessageState> {
    peek(h, queue).iter().map(|m| m.state).collect()
}

fn payload(h: &Harness, meta: &MessageMeta) -> Payload {
    h.store.payload(meta.storage_key).expect("payload stored")
}

fn peek_bodies(h: &Harness, queue: &str) -> Vec<String> {
    peek(h, queue).iter().map(|m| payload(h, m).body).collect()
}

fn stats(h: &Harness, queue: &str) -> QueueStats {
    h.engine.stats(ACCOUNT, queue, h.now).expect("stats")
}

fn counts(visible: u64, leased: u64, delayed: u64, pending_redrive: u64) -> QueueStats {
    QueueStats {
        visible,
        leased,
        delayed,
        pending_redrive,
        ..QueueStats::default()
    }
}

/// Stats without the age, the tenants and the priority levels.
fn state_counts(h: &Harness, queue: &str) -> QueueStats {
    QueueStats {
        oldest_message_age_seconds: 0,
        active_tenants: 0,
        largest_tenant_in_flight: 0,
        by_priority: Default::default(),
        ..stats(h, queue)
    }
}

/// Bodies of what a receive returns.
fn recv(h: &mut Harness, queue: &str, max: i64) -> Vec<String> {
    let got = h.receive(queue, max);
    h.bodies(&got)
}

/// Nothing of `queue` is deliverable until `secs` seconds from now; then `expected` is, in
/// order.
#[track_caller]
fn assert_held_for(h: &mut Harness, queue: &str, secs: u64, expected: &[&str]) {
    h.advance(secs - 1);
    assert!(
        h.receive(queue, 10).is_empty(),
        "deliverable before {secs} s"
    );
    h.advance(1);
    assert_eq!(recv(h, queue, 10), expected);
}

fn recv_leased(h: &mut Harness, queue: &str, max: i64, lease_seconds: i64) -> Vec<String> {
    let got = h.receive_leased(queue, max, lease_seconds);
    h.bodies(&got)
}

fn receipts(deliveries: &[Delivery]) -> Vec<String> {
    deliveries.iter().map(|d| d.receipt.clone()).collect()
}

fn ack_all(h: &mut Harness, queue: &str, deliveries: &[Delivery]) {
    for d in deliveries {
        h.ack(queue, &d.receipt).expect("ack");
    }
}

/// Receives one message for 5 s and lets the lease expire (the tick applies the expiry).
fn lapse(h: &mut Harness, queue: &str) -> Delivery {
    let mut got = h.receive_leased(queue, 1, 5);
    assert_eq!(got.len(), 1, "nothing to receive from {queue}");
    h.advance(5);
    h.tick();
    got.remove(0)
}

fn allow(permission: &str, sources: Option<&[&str]>) -> QueueAttributes {
    QueueAttributes {
        redrive_allow_policy: Some(AllowPolicyInput {
            permission: Some(permission.into()),
            source_queues: sources.map(|s| s.iter().map(|q| q.to_string()).collect()),
        }),
        ..Default::default()
    }
}

fn detach() -> QueueAttributes {
    QueueAttributes {
        redrive_policy: Some(None),
        ..Default::default()
    }
}

/// A harness with a dead-letter queue and a source bound to it with `max_receive_count`:
/// the harness, the source and the dead-letter queue.
fn with_dlq(fifo: bool, max: i64) -> (Harness, &'static str, &'static str) {
    let (src, dlq) = if fifo {
        ("src.fifo", "dlq.fifo")
    } else {
        ("src", "dlq")
    };
    let mut h = Harness::with_queue(dlq);
    h.create_with(src, redrive(dlq, max));
    (h, src, dlq)
}

/// A harness with a source whose message waits for redrive because the target denies it.
fn pending_setup(fifo: bool) -> (Harness, &'static str, &'static str) {
    let (mut h, src, dlq) = with_dlq(fifo, 1);
    h.try_patch(dlq, allow("deny_all", None)).expect("deny");
    put(&mut h, src, "m");
    lapse(&mut h, src);
    assert_eq!(states(&h, src), [MessageState::PendingRedrive]);
    (h, src, dlq)
}

/// The redrive policy check's refusal: always on the target field; `rule` is part of the text.
#[track_caller]
fn redrive_refused(h: &mut Harness, source: &str, attrs: QueueAttributes, rule: &str) {
    let err = invalid(
        h.try_create(source, attrs),
        "redrive_policy.dead_letter_target",
    );
    assert!(err.to_string().contains(rule), "{err} should say {rule:?}");
}

// ---- queues -----------------------------------------------------------------------------------

#[test]
fn queue_is_fifo_exactly_when_its_name_ends_in_fifo() {
    let mut h = Harness::new();
    assert_eq!(h.create("orders").queue_type, QueueType::Standard);
    assert_eq!(h.create("orders.fifo").queue_type, QueueType::Fifo);
    assert_eq!(h.create("fifo").queue_type, QueueType::Standard);
    assert_eq!(h.create("x-fifo").queue_type, QueueType::Standard);
}

#[test]
fn queue_names_are_unique_per_account() {
    let mut h = Harness::with_queue("orders");
    refused(
        h.try_create("orders", QueueAttributes::default()),
        "queue_exists",
        None,
    );
    let other = h.try_create_in("acme", "orders", QueueAttributes::default());
    assert_eq!(other.expect("same name in another account").name, "orders");
}

#[test]
fn malformed_queue_names_are_invalid_on_name() {
    let mut h = Harness::new();
    let long = "a".repeat(81);
    for bad in ["", ".fifo", "a b", "a.b", "a.fifo.fifo", "ü", long.as_str()] {
        invalid(h.try_create(bad, QueueAttributes::default()), "name");
    }
    h.create(&"a".repeat(80));
    h.create(&format!("{}.fifo", "b".repeat(80)));
    h.create("Az09_-");
}

#[test]
fn queue_defaults_follow_the_spec() {
    let mut h = Harness::new();
    let q = h.create("orders");
    assert_eq!(q.created_at, START);
    assert!(!q.content_based_deduplication);
    assert_eq!(q.lease_seconds, 30);
    assert_eq!(q.delay_seconds, 0);
    assert_eq!(q.retention_seconds, 345_600);
    assert_eq!(q.max_message_bytes, 262_144);
    assert_eq!(q.redrive_policy, None);
    assert_eq!(q.redrive_allow_policy.permission, "allow_all");
    assert_eq!(q.redrive_allow_policy.source_queues, None);
}

#[test]
fn out_of_range_queue_attributes_name_the_field() {
    let mut h = Harness::new();
    let cases = [
        ("lease_seconds", 43_201),
        ("lease_seconds", -1),
        ("delay_seconds", 901),
        ("retention_seconds", 59),
        ("retention_seconds", 1_209_601),
        ("max_message_bytes", 0),
        ("max_message_bytes", 1_048_577),
        ("content_based_deduplication", 1),
    ];
    for (field, value) in cases {
        let bad = attrs(&[(field, value)]);
        invalid(h.try_create("q", bad.clone()), field);
        h.create("q");
        invalid(h.try_patch("q", bad), field);
        h.apply(queue_cmd("q", Op::Delete)).expect("delete");
    }
    let edges = attrs(&[
        ("lease_seconds", 43_200),
        ("delay_seconds", 900),
        ("retention_seconds", 1_209_600),
        ("max_message_bytes", 1_048_576),
    ]);
    let q = h.create_with("edges", edges);
    assert_eq!(
        (
            q.lease_seconds,
            q.delay_seconds,
            q.retention_seconds,
            q.max_message_bytes
        ),
        (43_200, 900, 1_209_600, 1_048_576)
    );
    let low = attrs(&[("retention_seconds", 60), ("max_message_bytes", 1)]);
    assert_eq!(h.create_with("low", low).retention_seconds, 60);
}

#[test]
fn queue_is_referenced_by_name_uuid_and_crn() {
    let mut h = Harness::new();
    let q = h.create("orders");
    for reference in [q.name.clone(), q.id.to_string(), q.crn.clone()] {
        assert_eq!(
            h.engine.get_queue(ACCOUNT, &reference).expect("get").id,
            q.id
        );
        put(&mut h, &reference, &format!("via {reference}"));
    }
    assert_eq!(stats(&h, "orders").visible, 3);
}

#[test]
fn crn_has_the_spec_format() {
    let mut h = Harness::new();
    let q = h.create("orders");
    assert_eq!(
        q.crn,
        format!("crn:v1:raftq:public:queues:local:a/dev:{}::", q.id)
    );
    let r = h.engine.resolve(ACCOUNT, "orders").expect("resolve");
    assert_eq!((r.id, r.name, r.crn), (q.id, q.name, q.crn));
}

/// Neither a get nor a send finds a queue by `reference`.
#[track_caller]
fn assert_not_found(h: &mut Harness, reference: &str) {
    refused(
        h.engine.get_queue(ACCOUNT, reference),
        "queue_not_found",
        None,
    );
    let m = h.message("x");
    refused(h.try_send_msg(reference, m), "queue_not_found", None);
}

#[test]
fn another_accounts_queue_is_not_found_by_name_uuid_or_crn() {
    let mut h = Harness::new();
    let q = h.create_in("acme", "secret");
    for reference in [q.name.clone(), q.id.to_string(), q.crn.clone()] {
        assert_not_found(&mut h, &reference);
    }
    assert!(h.engine.list_queues(ACCOUNT, "").is_empty());
}

#[test]
fn accounts_are_listed_with_their_queue_counts_while_they_hold_queues() {
    let mut h = Harness::new();
    assert!(h.engine.accounts().is_empty());
    h.create("orders");
    h.create("billing");
    h.create_in("acme", "secret");
    let listed: Vec<(String, usize)> = h
        .engine
        .accounts()
        .into_iter()
        .map(|a| (a.account, a.queues))
        .collect();
    assert_eq!(listed, [("acme".into(), 1), (ACCOUNT.into(), 2)]);
    h.apply(Command::DeleteQueue {
        account: "acme".into(),
        queue: "secret".into(),
    })
    .expect("delete");
    let accounts: Vec<String> = h.engine.accounts().into_iter().map(|a| a.account).collect();
    assert_eq!(accounts, [ACCOUNT]);
}

#[test]
fn crn_of_another_region_is_not_found() {
    let mut h = Harness::new();
    let q = h.create("orders");
    assert_not_found(&mut h, &crn("eu-west", ACCOUNT, q.id));
}

#[test]
fn patch_changes_only_the_given_fields() {
    let mut h = Harness::new();
    let before = h.create_with(
        "orders.fifo",
        attrs(&[("delay_seconds", 5), ("content_based_deduplication", 1)]),
    );
    h.advance(10);
    let after = h
        .try_patch("orders.fifo", attrs(&[("lease_seconds", 99)]))
        .expect("patch");
    assert_eq!(after.lease_seconds, 99);
    let mut expected = before;
    expected.lease_seconds = 99;
    expected.modified_at = h.now;
    assert_eq!(after, expected);
    assert_eq!(
        h.engine.get_queue(ACCOUNT, "orders.fifo").expect("get"),
        expected
    );
}

#[test]
fn refused_commands_change_nothing() {
    let (mut h, src, dlq) = with_dlq(false, 3);
    put(&mut h, src, "a");
    let lease = h.receive(src, 1);
    h.advance(1);
    let bad_name = Command::CreateQueue {
        account: ACCOUNT.into(),
        queue_id: h.fresh_id(),
        name: "bad name".into(),
        attributes: QueueAttributes::default(),
    };
    assert_refused(&mut h, bad_name, "invalid_argument");
    let bad_patch = queue_cmd(
        src,
        Op::Patch(Box::new(QueueAttributes {
            lease_seconds: Some(5),
            ..redrive("nowhere", 2)
        })),
    );
    assert_refused(&mut h, bad_patch, "invalid_argument");
    let in_use = queue_cmd(dlq, Op::Delete);
    assert_refused(&mut h, in_use, "queue_in_use");
    let empty = h.message("");
    assert_refused(&mut h, send_cmd(src, empty), "invalid_argument");
    let lost = h.message("x");
    assert_refused(&mut h, send_cmd("missing", lost), "queue_not_found");
    assert_refused(&mut h, receive_cmd(src, 11), "invalid_argument");
    assert_refused(&mut h, ack_cmd(src, &[]), "invalid_argument");
    let change = Command::ChangeLease {
        account: ACCOUNT.into(),
        queue: src.into(),
        receipt: lease[0].receipt.clone(),
        lease_seconds: 43_201,
        delay_seconds: None,
    };
    assert_refused(&mut h, change, "invalid_argument");
    let too_many = (0..11)
        .map(|i| entry(&mut h, &format!("e{i}"), "b"))
        .collect();
    let batch_cmd = Command::SendBatch {
        account: ACCOUNT.into(),
        queue: src.into(),
        entries: too_many,
    };
    assert_refused(&mut h, batch_cmd, "invalid_argument");
    let purge = queue_cmd("missing", Op::Purge);
    assert_refused(&mut h, purge, "queue_not_found");
}

// ---- sending ----------------------------------------------------------------------------------

#[test]
fn fifo_send_requires_a_message_group_id() {
    let mut h = Harness::with_queue("f.fifo");
    let m = h.message("a").deduplicated_by("d");
    invalid(h.try_send_msg("f.fifo", m), "message_group_id");
}

#[test]
fn fifo_send_requires_a_dedup_id_unless_content_based() {
    let mut h = Harness::with_queue("f.fifo");
    let cbd = attrs(&[("content_based_deduplication", 1)]);
    h.create_with("c.fifo", cbd);
    for queue in ["f.fifo", "c.fifo"] {
        let m = h.message("a").in_group("g");
        let result = h.try_send_msg(queue, m);
        if queue == "f.fifo" {
            invalid(result, "message_deduplication_id");
        } else {
            assert!(!result.expect("content-based").duplicate);
        }
    }
}

#[test]
fn message_group_and_dedup_ids_are_1_to_128_printable_ascii() {
    let mut h = Harness::with_queue("f.fifo");
    let long = "x".repeat(129);
    for field in ["message_group_id", "message_deduplication_id"] {
        for bad in ["", "tab\there", "ünï", long.as_str()] {
            let mut m = msg_for(&mut h, "f.fifo", "g", "body");
            let tag = Some(bad.to_string());
            if field == "message_group_id" {
                m.message_group_id = tag;
            } else {
                m.message_deduplication_id = tag;
            }
            invalid(h.try_send_msg("f.fifo", m), field);
        }
    }
    let mut m = msg_for(&mut h, "f.fifo", &"g".repeat(128), "body");
    m.message_deduplication_id = Some("~ !".repeat(42) + "ab");
    h.try_send_msg("f.fifo", m).expect("128 printable bytes");
}

#[test]
fn content_based_dedup_id_is_sha256_of_the_body_without_attributes() {
    let mut h = Harness::new();
    let cbd = attrs(&[("content_based_deduplication", 1)]);
    h.create_with("c.fifo", cbd);
    let send = |h: &mut Harness, attr: &str| {
        let mut m = h.message("abc");
        m.message_group_id = Some("g".into());
        m.attributes.insert(attr.into(), Attribute::string(attr));
        h.try_send_msg("c.fifo", m).expect("send")
    };
    let first = send(&mut h, "k");
    let stored = payload(&h, &peek(&h, "c.fifo")[0]);
    assert_eq!(
        stored.message_deduplication_id.as_deref(),
        Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    );
    assert_eq!(
        content_hash("abc"),
        stored.message_deduplication_id.unwrap_or_default()
    );
    let again = send(&mut h, "other");
    assert!(again.duplicate);
    assert_eq!(again.message_id, first.message_id);
    assert_eq!(again.sequence_number, first.sequence_number);
    assert_eq!(peek(&h, "c.fifo").len(), 1);
}

/// A FIFO queue with one message sent under dedup ID "d"; returns the original send.
fn dedup_setup(h: &mut Harness, attrs: QueueAttributes) -> SendResult {
    h.create_with("f.fifo", attrs);
    h.send_fifo("f.fifo", "g", "d")
}

/// Resends dedup ID "d" with a different body and checks it is a duplicate of `original`.
#[track_caller]
fn assert_duplicate(h: &mut Harness, queue: &str, original: &SendResult) {
    let m = h
        .message("different body")
        .in_group("other")
        .deduplicated_by("d");
    let again = h.try_send_msg(queue, m).expect("resend");
    assert!(again.duplicate);
    assert_eq!(again.message_id, original.message_id);
    assert_eq!(again.sequence_number, original.sequence_number);
}

#[test]
fn dedup_returns_the_original_id_within_the_window() {
    let mut h = Harness::new();
    let original = dedup_setup(&mut h, QueueAttributes::default());
    assert!(!original.duplicate);
    h.advance(299);
    assert_duplicate(&mut h, "f.fifo", &original);
    assert_eq!(peek_bodies(&h, "f.fifo"), ["d"]);
}

#[test]
fn dedup_returns_the_original_id_even_after_ack() {
    let mut h = Harness::new();
    let original = dedup_setup(&mut h, QueueAttributes::default());
    let got = h.receive("f.fifo", 1);
    ack_all(&mut h, "f.fifo", &got);
    assert!(peek(&h, "f.fifo").is_empty());
    h.advance(60);
    assert_duplicate(&mut h, "f.fifo", &original);
    assert!(peek(&h, "f.fifo").is_empty());
}

#[test]
fn dedup_returns_the_original_id_even_after_retention_expiry() {
    let mut h = Harness::new();
    let original = dedup_setup(&mut h, attrs(&[("retention_seconds", 60)]));
    h.advance(61);
    h.tick();
    assert!(peek(&h, "f.fifo").is_empty());
    assert_duplicate(&mut h, "f.fifo", &original);
    assert!(peek(&h, "f.fifo").is_empty());
}

/// Records that leave the window within one second are pruned together, by one tick at the end
/// of that second, instead of a tick each; a send after a record's end is new whether or not
/// the record was pruned yet.
#[test]
fn dedup_records_are_pruned_a_second_at_a_time() {
    let mut h = Harness::with_queue("f.fifo");
    for id in ["d0", "d1", "d2"] {
        h.advance_ms(100);
        let m = msg_for(&mut h, "f.fifo", "g", id);
        assert!(!h.try_send_msg("f.fifo", m).expect("send").duplicate);
    }
    let got = h.receive("f.fifo", 10);
    ack_all(&mut h, "f.fifo", &got);
    // The records end at START + 300.1 s, 300.2 s and 300.3 s.
    assert_eq!(h.engine.next_due(), Some(START + 301_000));
    h.advance_ms(300_000 - 150);
    let m = msg_for(&mut h, "f.fifo", "g", "d0");
    assert!(
        !h.try_send_msg("f.fifo", m).expect("resend").duplicate,
        "a record past its end deduplicates nothing"
    );
}

#[test]
fn dedup_returns_the_original_id_even_after_move_to_dlq() {
    let (mut h, src, dlq) = with_dlq(true, 1);
    let original = h.send_fifo(src, "g", "d");
    lapse(&mut h, src);
    assert_eq!(peek_bodies(&h, dlq), ["d"]);
    assert_duplicate(&mut h, src, &original);
    assert!(peek(&h, src).is_empty());
    assert_eq!(peek(&h, dlq).len(), 1);
}

#[test]
fn dedup_id_makes_a_new_message_after_the_window() {
    let mut h = Harness::new();
    let original = dedup_setup(&mut h, QueueAttributes::default());
    h.advance(301);
    let again = h.send_fifo("f.fifo", "g", "d");
    assert!(!again.duplicate);
    assert_ne!(again.message_id, original.message_id);
    assert_eq!(peek_bodies(&h, "f.fifo"), ["d", "d"]);
    h.advance(200);
    assert_duplicate(&mut h, "f.fifo", &again);
}

#[test]
fn dedup_is_per_queue() {
    let mut h = Harness::with_queue("a.fifo");
    h.create("b.fifo");
    let a = h.send_fifo("a.fifo", "g", "d");
    let b = h.send_fifo("b.fifo", "g", "d");
    assert!(!a.duplicate && !b.duplicate);
    assert_ne!(a.message_id, b.message_id);
    assert_eq!(peek(&h, "b.fifo").len(), 1);
}

#[test]
fn standard_queue_refuses_a_dedup_id() {
    let mut h = Harness::with_queue("std");
    let m = h.message("a").deduplicated_by("d");
    invalid(h.try_send_msg("std", m), "message_deduplication_id");
    assert!(peek(&h, "std").is_empty());
}

#[test]
fn group_id_on_a_standard_queue_is_stored_but_orders_nothing() {
    let mut h = Harness::with_queue("std");
    for body in ["a", "b"] {
        let m = h.message(body).in_group("g");
        let sent = h.try_send_msg("std", m).expect("send");
        assert_eq!(sent.sequence_number, None);
    }
    let first = h.receive("std", 1);
    let stored = payload(&h, &first[0].meta);
    assert_eq!(stored.message_group_id.as_deref(), Some("g"));
    // The same group in a FIFO queue would be blocked while "a" is leased.
    let second = h.receive("std", 1);
    assert_eq!(h.bodies(&second), ["b"]);
}

#[test]
fn delay_hides_a_message_until_it_ends() {
    let mut h = Harness::new();
    h.create_with("slow", attrs(&[("delay_seconds", 10)]));
    put(&mut h, "slow", "queue-default");
    put_delayed(&mut h, "slow", "g", "own-delay", 20);
    put_delayed(&mut h, "slow", "g", "no-delay", 0);
    let metas = peek(&h, "slow");
    assert_eq!(metas[0].until, Some(START + 10_000));
    assert_eq!(metas[1].until, Some(START + 20_000));
    assert_eq!(
        states(&h, "slow"),
        [
            MessageState::Delayed,
            MessageState::Delayed,
            MessageState::Visible
        ]
    );
    assert_eq!(recv(&mut h, "slow", 10), ["no-delay"]);
    assert_held_for(&mut h, "slow", 10, &["queue-default"]);
    assert_held_for(&mut h, "slow", 10, &["own-delay"]);
}

#[test]
fn delay_seconds_of_a_message_is_0_to_900() {
    let mut h = Harness::with_queue("q");
    for bad in [-1, 901] {
        let mut m = h.message("a");
        m.delay_seconds = Some(bad);
        invalid(h.try_send_msg("q", m), "delay_seconds");
    }
    put_delayed(&mut h, "q", "g", "a", 900);
    assert_eq!(peek(&h, "q")[0].until, Some(START + 900_000));
}

#[test]
fn message_size_counts_body_attribute_names_and_values() {
    let mut h = Harness::new();
    h.create_with("small", attrs(&[("max_message_bytes", 10)]));
    let sized = |h: &mut Harness, body: &str, name: &str, value: &str| {
        let mut m = h.message(body);
        m.attributes.insert(name.into(), Attribute::string(value));
        h.try_send_msg("small", m)
    };
    sized(&mut h, "12345", "abc", "de").expect("exactly 10 bytes");
    let err = refused(
        sized(&mut h, "12345", "abcd", "de"),
        "message_too_large",
        Some("body"),
    );
    assert!(
        matches!(
            err,
            EngineError::MessageTooLarge {
                size: 11,
                max: 10,
                ..
            }
        ),
        "{err:?}"
    );
    refused(
        sized(&mut h, "12345", "abc", "def"),
        "message_too_large",
        Some("body"),
    );
    refused(
        sized(&mut h, "12345678901", "a", ""),
        "message_too_large",
        Some("body"),
    );
    assert_eq!(peek(&h, "small").len(), 1);
}

#[test]
fn empty_body_and_bad_attributes_are_refused() {
    let mut h = Harness::with_queue("q");
    let m = h.message("");
    invalid(h.try_send_msg("q", m), "body");
    let with_attrs = |h: &mut Harness, names: Vec<String>| {
        let mut m = h.message("b");
        m.attributes = names
            .into_iter()
            .map(|n| (n, Attribute::string("v")))
            .collect();
        h.try_send_msg("q", m)
    };
    invalid(
        with_attrs(&mut h, (0..11).map(|i| format!("a{i}")).collect()),
        "attributes",
    );
    invalid(with_attrs(&mut h, vec![String::new()]), "attributes");
    invalid(with_attrs(&mut h, vec!["n".repeat(257)]), "attributes");
    with_attrs(&mut h, (0..10).map(|i| format!("a{i}")).collect()).expect("10 attributes");
    with_attrs(&mut h, vec!["é".repeat(256)]).expect("256-character name");
    assert_eq!(peek(&h, "q").len(), 2);
}

#[test]
fn fifo_sequence_numbers_grow() {
    let mut h = Harness::with_queue("f.fifo");
    h.create("other.fifo");
    let seqs: Vec<u64> = ["a1", "b1", "a2"]
        .iter()
        .map(|body| {
            h.send_fifo("other.fifo", "g", body);
            let group = &body[..1];
            h.send_fifo("f.fifo", group, body)
                .sequence_number
                .expect("fifo seq")
        })
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let peeked: Vec<u64> = peek(&h, "f.fifo").iter().map(|m| m.seq).collect();
    assert_eq!(peeked, seqs);
}

#[test]
fn batch_send_takes_1_to_10_entries_with_unique_well_formed_ids() {
    let mut h = Harness::with_queue("q");
    invalid(batch(&mut h, "q", vec![]), "entries");
    let eleven = (0..11)
        .map(|i| entry(&mut h, &format!("e{i}"), "b"))
        .collect();
    invalid(batch(&mut h, "q", eleven), "entries");
    let dup = vec![entry(&mut h, "same", "a"), entry(&mut h, "same", "b")];
    invalid(batch(&mut h, "q", dup), "entries[1].id");
    let long = "i".repeat(81);
    for bad in ["", "a b", "a.b", long.as_str()] {
        let entries = vec![entry(&mut h, "ok", "a"), entry(&mut h, bad, "b")];
        invalid(batch(&mut h, "q", entries), "entries[1].id");
    }
    assert!(peek(&h, "q").is_empty());
    let ten = (0..10)
        .map(|i| entry(&mut h, &format!("Id_-{i}"), "b"))
        .collect();
    batch(&mut h, "q", ten).expect("10 entries");
    assert_eq!(peek(&h, "q").len(), 10);
}

#[test]
fn batch_send_reports_each_entry_on_its_own() {
    let mut h = Harness::with_queue("q");
    let entries = vec![
        entry(&mut h, "one", "a"),
        entry(&mut h, "two", ""),
        entry(&mut h, "three", "c"),
    ];
    let ids: Vec<_> = entries.iter().map(|e| e.message.message_id).collect();
    let Outcome::SentBatch(results) = batch(&mut h, "q", entries).expect("batch") else {
        panic!("not a batch outcome");
    };
    let names: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(names, ["one", "two", "three"]);
    assert_eq!(results[0].result.as_ref().map(|r| r.message_id), Ok(ids[0]));
    invalid(results[1].result.clone(), "body");
    assert_eq!(results[2].result.as_ref().map(|r| r.message_id), Ok(ids[2]));
    assert_eq!(peek_bodies(&h, "q"), ["a", "c"]);
}

// ---- receiving, FIFO order --------------------------------------------------------------------

#[test]
fn fifo_group_is_blocked_while_a_message_is_leased() {
    let mut h = Harness::with_queue("f.fifo");
    for body in ["a1", "a2", "a3"] {
        h.send_fifo("f.fifo", "a", body);
    }
    assert_eq!(recv(&mut h, "f.fifo", 1), ["a1"]);
    assert!(h.receive("f.fifo", 10).is_empty());
    assert_held_for(&mut h, "f.fifo", 30, &["a1", "a2", "a3"]);
}

#[test]
fn fifo_group_is_blocked_while_its_head_is_delayed() {
    let mut h = Harness::with_queue("f.fifo");
    put_delayed(&mut h, "f.fifo", "a", "a1", 30);
    h.send_fifo("f.fifo", "a", "a2");
    h.send_fifo("f.fifo", "b", "b1");
    assert_eq!(recv_leased(&mut h, "f.fifo", 10, 600), ["b1"]);
    assert_held_for(&mut h, "f.fifo", 30, &["a1", "a2"]);
}

#[test]
fn fifo_group_is_blocked_while_its_head_is_pending_redrive() {
    let (mut h, src, _) = pending_setup(true);
    h.send_fifo(src, "g", "g2");
    h.send_fifo(src, "other", "o1");
    assert_eq!(recv(&mut h, src, 10), ["o1"]);
    assert!(h.receive(src, 10).is_empty());
    assert_eq!(
        states(&h, src),
        [
            MessageState::PendingRedrive,
            MessageState::Visible,
            MessageState::Leased
        ]
    );
}

#[test]
fn fifo_receive_returns_consecutive_messages_of_a_group_and_leases_them() {
    let mut h = Harness::with_queue("f.fifo");
    for body in ["a1", "a2", "a3"] {
        h.send_fifo("f.fifo", "a", body);
    }
    let got = h.receive("f.fifo", 2);
    assert_eq!(h.bodies(&got), ["a1", "a2"]);
    assert!(got.iter().all(|d| d.meta.state == MessageState::Leased));
    assert_eq!(state_counts(&h, "f.fifo"), counts(1, 2, 0, 0));
    assert!(h.receive("f.fifo", 10).is_empty());
    ack_all(&mut h, "f.fifo", &got);
    assert_eq!(recv(&mut h, "f.fifo", 10), ["a3"]);
}

#[test]
fn fifo_receive_stops_at_the_first_delayed_message() {
    let mut h = Harness::with_queue("f.fifo");
    for body in ["a1", "a2"] {
        h.send_fifo("f.fifo", "a", body);
    }
    put_delayed(&mut h, "f.fifo", "a", "a3", 60);
    h.send_fifo("f.fifo", "a", "a4");
    let got = h.receive("f.fifo", 10);
    assert_eq!(h.bodies(&got), ["a1", "a2"]);
    ack_all(&mut h, "f.fifo", &got);
    assert!(
        h.receive("f.fifo", 10).is_empty(),
        "a4 waits behind delayed a3"
    );
    h.advance(60);
    assert_eq!(recv(&mut h, "f.fifo", 10), ["a3", "a4"]);
}

#[test]
fn delayed_message_never_blocks_earlier_messages_of_its_group() {
    let mut h = Harness::with_queue("f.fifo");
    h.send_fifo("f.fifo", "a", "a1");
    put_delayed(&mut h, "f.fifo", "a", "a2", 60);
    let got = h.receive("f.fifo", 1);
    assert_eq!(h.bodies(&got), ["a1"]);
    h.change_lease("f.fifo", &got[0].receipt, 0)
        .expect("release");
    assert_eq!(recv(&mut h, "f.fifo", 10), ["a1"]);
}

#[test]
fn new_send_never_unblocks_a_blocked_group() {
    let mut h = Harness::with_queue("f.fifo");
    h.send_fifo("f.fifo", "leased", "l1");
    put_delayed(&mut h, "f.fifo", "delayed", "d1", 60);
    assert_eq!(recv(&mut h, "f.fifo", 10), ["l1"]);
    h.send_fifo("f.fifo", "leased", "l2");
    h.send_fifo("f.fifo", "delayed", "d2");
    assert!(h.receive("f.fifo", 10).is_empty());
    assert_eq!(state_counts(&h, "f.fifo"), counts(2, 1, 1, 0));
}

#[test]
fn oldest_deliverable_group_goes_first() {
    let mut h = Harness::with_queue("f.fifo");
    for (group, body) in [("a", "a1"), ("b", "b1"), ("a", "a2"), ("c", "c1")] {
        h.send_fifo("f.fifo", group, body);
    }
    let first = h.receive("f.fifo", 1);
    assert_eq!(h.bodies(&first), ["a1"]);
    ack_all(&mut h, "f.fifo", &first);
    // b1 is older than a2, the head of group a now.
    assert_eq!(recv(&mut h, "f.fifo", 1), ["b1"]);
    assert_eq!(recv(&mut h, "f.fifo", 10), ["a2", "c1"]);
}

#[test]
fn blocked_group_does_not_hold_up_other_groups() {
    let mut h = Harness::with_queue("f.fifo");
    h.send_fifo("f.fifo", "a", "a1");
    h.send_fifo("f.fifo", "a", "a2");
    put_delayed(&mut h, "f.fifo", "b", "b1", 60);
    h.send_fifo("f.fifo", "b", "b2");
    h.send_fifo("f.fifo", "c", "c1");
    assert_eq!(recv(&mut h, "f.fifo", 1), ["a1"]);
    assert_eq!(recv(&mut h, "f.fifo", 10), ["c1"]);
}

#[test]
fn standard_queue_delivers_oldest_visible_first() {
    let mut h = Harness::with_queue("std");
    put_delayed(&mut h, "std", "", "late", 10);
    for body in ["a", "b", "c"] {
        put(&mut h, "std", body);
    }
    assert_eq!(recv(&mut h, "std", 1), ["a"]);
    h.advance(10);
    assert_eq!(recv(&mut h, "std", 2), ["late", "b"]);
    assert_eq!(recv(&mut h, "std", 10), ["c"]);
}

#[test]
fn receive_max_messages_is_1_to_10() {
    let mut h = Harness::with_queue("std");
    for i in 0..12 {
        put(&mut h, "std", &format!("m{i}"));
    }
    for bad in [0, 11, -1] {
        invalid(h.try_receive("std", bad, None), "max_messages");
    }
    assert_eq!(h.receive("std", 1).len(), 1);
    assert_eq!(h.receive("std", 10).len(), 10);
    assert_eq!(stats(&h, "std").leased, 11);
}

#[test]
fn receive_lease_seconds_is_0_to_43200() {
    let mut h = Harness::with_queue("std");
    put(&mut h, "std", "a");
    for bad in [-1, 43_201] {
        invalid(h.try_receive("std", 1, Some(bad)), "lease_seconds");
    }
    let got = h.receive_leased("std", 1, 43_200);
    assert_eq!(got[0].lease_expires_at, START + 43_200_000);
    h.advance(43_200);
    let again = h.receive_leased("std", 1, 0);
    assert_eq!(again[0].lease_expires_at, h.now);
    assert_eq!(again[0].meta.receive_count, 2);
}

#[test]
fn a_zero_second_lease_makes_the_message_deliverable_again_at_once() {
    let mut h = Harness::with_queue("std");
    put(&mut h, "std", "a");
    let first = h.receive_leased("std", 1, 0);
    assert_eq!(
        h.ack("std", &first[0].receipt),
        Err(EngineError::LeaseExpired)
    );
    let again = h.receive("std", 1);
    assert_eq!(h.bodies(&again), ["a"]);
    assert_eq!(again[0].meta.receive_count, 2);
}

// ---- leases -----------------------------------------------------------------------------------

#[test]
fn leased_message_is_not_redelivered_until_its_lease_ends() {
    let mut h = Harness::with_queue("std");
    put(&mut h, "std", "a");
    let got = h.receive("std", 10);
    assert_eq!(got[0].lease_expires_at, START + 30_000);
    h.advance(29);
    assert!(h.receive("std", 10).is_empty());
    assert_eq!(state_counts(&h, "std"), counts(0, 1, 0, 0));
}

#[test]
fn each_lease_adds_one_to_receive_count_and_expiry_keeps_it() {
    let mut h = Harness::with_queue("std");
    put(&mut h, "std", "a");
    let first = lapse(&mut h, "std");
    assert_eq!(first.meta.receive_count, 1);
    assert_eq!(first.meta.first_received_at, Some(START));
    assert_eq!(peek(&h, "std")[0].receive_count, 1);
    assert_eq!(states(&h, "std"), [MessageState::Visible]);
    let second = h.receive("std", 1);
    assert_eq!(second[0].meta.receive_count, 2);
    assert_eq!(second[0].meta.first_received_at, Some(START));
    assert_eq!(second[0].meta.storage_key, first.meta.storage_key);
}

#[test]
fn ack_deletes_the_message() {
    let mut h = Harness::with_queue("std");
    put(&mut h, "std", "a");
    let got = h.receive("std", 1);
    h.ack("std", &got[0].receipt).expect("ack");
    assert!(peek(&h, "std").is_empty());
    assert!(h.store.payload_keys().is_empty());
    h.advance(60);
    assert!(h.receive("std", 10).is_empty());
}

/// Both an ack and a lease change with `receipt` are refused as `lease_expired` and change nothing.
#[track_caller]
fn assert_stale(h: &mut Harness, queue: &str, receipt: &str) {
    assert_unchanged(h, |h| {
        refused(h.ack(queue, receipt), "lease_expired", None);
        refused(h.change_lease(queue, receipt, 60), "lease_expired", None);
        refused(h.change_lease(queue, receipt, 0), "lease_expired", None);
    });
}

#[test]
fn stale_receipt_is_lease_expired_and_changes_nothing() {
    let mut h = Harness::with_queue("std");
    put(&mut h, "std", "a");
    let old = lapse(&mut h, "std");
    assert_stale(&mut h, "std", &old.receipt);
    let newer = h.receive("std", 1);
    assert_stale(&mut h, "std", &old.receipt);
    h.ack("std", &newer[0].receipt)
        .expect("ack the active lease");
    assert_stale(&mut h, "std", &newer[0].receipt);
}

/// How a receipt's lease ended, for [`a_stale_receipt_says_whether_its_message_is_gone`].
enum Ended {
    Acked,
    Lapsed,
    ReceivedAgain,
    Purged,
    Expired,
}

#[test]
fn a_stale_receipt_says_whether_its_message_is_gone() {
    use Ended::*;
    let cases = [
        (Acked, EngineError::MessageGone),
        (Purged, EngineError::MessageGone),
        (Expired, EngineError::MessageGone),
        (Lapsed, EngineError::LeaseExpired),
        (ReceivedAgain, EngineError::LeaseExpired),
    ];
    for (ended, expected) in cases {
        let mut h = Harness::new();
        h.create_with("std", attrs(&[("retention_seconds", 60)]));
        put(&mut h, "std", "a");
        let receipt = h.receive_leased("std", 1, 10)[0].receipt.clone();
        match ended {
            Acked => h.ack("std", &receipt).expect("ack"),
            Lapsed => {
                h.advance(10);
                h.tick();
            }
            ReceivedAgain => {
                h.advance(10);
                assert_eq!(h.receive("std", 1).len(), 1);
            }
            Purged => {
                h.apply(queue_cmd("std", Op::Purge)).expect("purge");
            }
            Expired => {
                h.advance(60);
                h.tick();
            }
        }
        assert_eq!(h.ack("std", &receipt), Err(expected.clone()));
        assert_eq!(h.change_lease("std", &receipt, 5), Err(expected));
    }
}

#[test]
fn malformed_receipt_is_invalid_argument() {
    let mut h = Harness::with_queue("std");
    put(&mut h, "std", "a");
    h.receive("std", 1);
    invalid(h.ack("std", "not-a-receipt"), "receipts[0]");
    invalid(h.change_lease("std", "zz", 10), "receipt");
    assert_eq!(stats(&h, "std").leased, 1);
}

#[test]
fn change_lease_extends_from_now() {
    let mut h = Harness::with_queue("std");
    put(&mut h, "std", "a");
    let got = h.receive_leased("std", 1, 10);
    h.advance(5);
    let until = h.change_lease("std", &got[0].receipt, 20).expect("extend");
    assert_eq!(until, START + 25_000);
    assert_eq!(peek(&h, "std")[0].until, Some(until));
    h.advance(19);
    assert!(h.receive("std", 1).is_empty());
    h.ack("std", &got[0].receipt).expect("receipt still active");
}

#[test]
fn change_lease_to_zero_releases() {
    let mut h = Harness::with_queue("std");
    put(&mut h, "std", "a");
    let got = h.receive("std", 1);
    h.advance(1);
    assert_eq!(h.change_lease("std", &got[0].receipt, 0), Ok(h.now));
    assert_eq!(states(&h, "std"), [MessageState::Visible]);
    assert_stale(&mut h, "std", &got[0].receipt);
    assert_eq!(h.receive("std", 1)[0].meta.receive_count, 2);
}

#[test]
fn ack_batch_takes_1_to_10_receipts_with_per_receipt_results() {
    let mut h = Harness::with_queue("std");
    for body in ["a", "b", "c"] {
        put(&mut h, "std", body);
    }
    let got = receipts(&h.receive("std", 3));
    invalid(h.apply(ack_cmd("std", &[])), "receipts");
    let eleven = vec![got[0].as_str(); 11];
    invalid(h.apply(ack_cmd("std", &eleven)), "receipts");
    assert_eq!(stats(&h, "std").leased, 3);
    let results = acked(h.apply(ack_cmd("std", &[&got[0], "junk", &got[0], &got[2]])));
    assert_eq!(results[0], Ok(()));
    invalid(results[1].clone(), "receipts[1]");
    refused(results[2].clone(), "lease_expired", None);
    assert_eq!(results[3], Ok(()));
    assert_eq!(peek_bodies(&h, "std"), ["b"]);
}

// ---- retention --------------------------------------------------------------------------------

/// Creates `src`, whose messages are kept 60 s and go to `dlq` after one receive.
fn kept_60_s_then_dead_lettered(h: &mut Harness) {
    h.create("dlq");
    h.create_with(
        "src",
        QueueAttributes {
            retention_seconds: Some(60),
            ..redrive("dlq", 1)
        },
    );
}

#[test]
fn message_expires_after_retention_whatever_its_state() {
    let mut h = Harness::new();
    kept_60_s_then_dead_lettered(&mut h);
    h.try_patch("dlq", allow("deny_all", None)).expect("deny");
    put(&mut h, "src", "pending");
    lapse(&mut h, "src");
    put(&mut h, "src", "leased");
    let leased = h.receive_leased("src", 1, 600);
    put_delayed(&mut h, "src", "", "delayed", 600);
    put(&mut h, "src", "visible");
    assert_eq!(state_counts(&h, "src"), counts(1, 1, 1, 1));
    h.now = START + 59_999;
    h.tick();
    assert_eq!(peek(&h, "src").len(), 4);
    h.now = START + 60_000;
    h.tick();
    assert_eq!(peek_bodies(&h, "src"), ["leased", "delayed", "visible"]);
    h.now = START + 65_000;
    h.tick();
    assert!(peek(&h, "src").is_empty());
    assert_eq!(stats(&h, "src"), QueueStats::default());
    assert!(h.store.payload_keys().is_empty());
    assert_stale(&mut h, "src", &leased[0].receipt);
    assert!(h.receive("src", 10).is_empty());
}

#[test]
fn retention_is_measured_from_when_each_message_entered() {
    let mut h = Harness::new();
    h.create_with("q", attrs(&[("retention_seconds", 60)]));
    put(&mut h, "q", "old");
    h.advance(30);
    put(&mut h, "q", "new");
    h.advance(30);
    h.tick();
    assert_eq!(peek_bodies(&h, "q"), ["new"]);
    h.advance(30);
    h.tick();
    assert!(peek(&h, "q").is_empty());
}

/// The retention timer set for a queue's oldest message stays set after that message is acked;
/// when it fires, in an entry that comes long after, it takes only what expired by its own
/// time. The next message's lease ends first, so that message goes to the dead-letter queue,
/// as it does on a node that restored its state (which has no timer for the acked message).
#[test]
fn a_retention_timer_fires_in_its_turn_among_the_timers_an_entry_passes() {
    let run = |restore: bool| {
        let mut h = Harness::new();
        kept_60_s_then_dead_lettered(&mut h);
        put(&mut h, "src", "acked");
        h.advance(20);
        put(&mut h, "src", "dead-lettered");
        let got = h.receive_leased("src", 2, 45);
        h.ack("src", &got[0].receipt).expect("ack");
        if restore {
            h.engine = Engine::restore("local", h.store.rows.clone()).expect("restore");
        }
        // Passes the acked message's expiry (60 s), the lease end (65 s) and the next
        // message's expiry (80 s) in one entry.
        h.advance(65);
        h.tick();
        (peek_bodies(&h, "src"), peek_bodies(&h, "dlq"))
    };
    assert_eq!(
        run(false),
        (Vec::<String>::new(), vec!["dead-lettered".to_string()])
    );
    assert_eq!(run(false), run(true));
}

#[test]
fn retention_expiry_of_a_fifo_head_unblocks_the_group() {
    let mut h = Harness::new();
    h.create_with("f.fifo", attrs(&[("retention_seconds", 60)]));
    h.send_fifo("f.fifo", "a", "leased-head");
    assert_eq!(recv_leased(&mut h, "f.fifo", 1, 600), ["leased-head"]);
    put_delayed(&mut h, "f.fifo", "c", "delayed-head", 600);
    h.advance(10);
    h.send_fifo("f.fifo", "a", "a2");
    h.send_fifo("f.fifo", "c", "c2");
    assert_held_for(&mut h, "f.fifo", 50, &["a2", "c2"]);
}

// ---- dead-letter queues and redrive -----------------------------------------------------------

#[test]
fn redrive_policy_requires_both_fields() {
    let mut h = Harness::with_queue("dlq");
    let policy = |target: Option<&str>, max: Option<i64>| QueueAttributes {
        redrive_policy: Some(Some(RedrivePolicyInput {
            dead_letter_target: target.map(str::to_string),
            max_receive_count: max,
        })),
        ..Default::default()
    };
    invalid(
        h.try_create("src", policy(None, Some(3))),
        "redrive_policy.dead_letter_target",
    );
    invalid(
        h.try_create("src", policy(Some("dlq"), None)),
        "redrive_policy.max_receive_count",
    );
    h.create_with("src", policy(Some("dlq"), Some(3)));
}

#[test]
fn max_receive_count_is_1_to_1000() {
    let mut h = Harness::with_queue("dlq");
    for bad in [0, 1001, -1] {
        invalid(
            h.try_create("src", redrive("dlq", bad)),
            "redrive_policy.max_receive_count",
        );
    }
    assert_eq!(
        h.create_with("one", redrive("dlq", 1))
            .redrive_policy
            .map(|p| p.max_receive_count),
        Some(1)
    );
    let most = h.create_with("most", redrive("dlq", 1000));
    assert_eq!(most.redrive_policy.map(|p| p.max_receive_count), Some(1000));
}

#[test]
fn redrive_target_must_exist() {
    let mut h = Harness::new();
    h.create_in("acme", "theirs");
    redrive_refused(
        &mut h,
        "src",
        redrive("nowhere", 3),
        "names no existing queue",
    );
    redrive_refused(
        &mut h,
        "src",
        redrive("theirs", 3),
        "names no existing queue",
    );
    let gone = h.fresh_id().to_string();
    redrive_refused(&mut h, "src", redrive(&gone, 3), "names no existing queue");
}

#[test]
fn redrive_target_is_referenced_by_name_uuid_or_crn() {
    let mut h = Harness::new();
    let dlq = h.create("dlq");
    for (source, reference) in [
        ("s1", &dlq.name),
        ("s2", &dlq.id.to_string()),
        ("s3", &dlq.crn),
    ] {
        let q = h.create_with(source, redrive(reference, 3));
        let target = q.redrive_policy.expect("policy").dead_letter_target;
        assert_eq!(
            (target.id, target.name, target.crn),
            (dlq.id, dlq.name.clone(), dlq.crn.clone())
        );
    }
}

#[test]
fn redrive_target_must_be_in_the_same_account() {
    let mut h = Harness::new();
    let theirs = h.create_in("acme", "theirs");
    redrive_refused(&mut h, "src", redrive(&theirs.crn, 3), "same account");
}

#[test]
fn redrive_target_must_be_in_the_same_region() {
    let mut h = Harness::new();
    let dlq = h.create("dlq");
    redrive_refused(
        &mut h,
        "src",
        redrive(&crn("eu-west", ACCOUNT, dlq.id), 3),
        "same region",
    );
}

#[test]
fn redrive_target_must_be_of_the_same_type() {
    let mut h = Harness::with_queue("dlq");
    h.create("dlq.fifo");
    redrive_refused(&mut h, "src.fifo", redrive("dlq", 3), "same type");
    redrive_refused(&mut h, "src", redrive("dlq.fifo", 3), "same type");
    h.create_with("src.fifo", redrive("dlq.fifo", 3));
}

#[test]
fn redrive_target_must_differ_from_the_source() {
    let mut h = Harness::new();
    let q = h.create("q");
    for reference in [q.name.clone(), q.id.to_string(), q.crn.clone()] {
        let err = invalid(
            h.try_patch("q", redrive(&reference, 3)),
            "redrive_policy.dead_letter_target",
        );
        assert!(err.to_string().contains("differ"), "{err}");
    }
}

#[test]
fn redrive_target_must_allow_the_source() {
    let mut h = Harness::with_queue("other");
    h.create_with("denies", allow("deny_all", None));
    h.create_with("others-only", allow("by_queue", Some(&["other"])));
    h.create("src");
    for target in ["denies", "others-only"] {
        let err = invalid(
            h.try_patch("src", redrive(target, 3)),
            "redrive_policy.dead_letter_target",
        );
        assert!(err.to_string().contains("redrive_allow_policy"), "{err}");
    }
    h.try_patch("others-only", allow("by_queue", Some(&["other", "src"])))
        .expect("allow src");
    h.try_patch("src", redrive("others-only", 3))
        .expect("now allowed");
}

#[test]
fn redrive_allow_policy_is_validated() {
    let mut h = Harness::new();
    for i in 0..11 {
        h.create(&format!("s{i}"));
    }
    const PERMISSION: &str = "redrive_allow_policy.permission";
    const SOURCES: &str = "redrive_allow_policy.source_queues";
    invalid(h.try_create("t", allow("bogus", None)), PERMISSION);
    let no_permission = QueueAttributes {
        redrive_allow_policy: Some(AllowPolicyInput::default()),
        ..Default::default()
    };
    invalid(h.try_create("t", no_permission), PERMISSION);
    invalid(
        h.try_create("t", allow("allow_all", Some(&["s0"]))),
        SOURCES,
    );
    invalid(h.try_create("t", allow("deny_all", Some(&["s0"]))), SOURCES);
    invalid(h.try_create("t", allow("by_queue", None)), SOURCES);
    invalid(h.try_create("t", allow("by_queue", Some(&[]))), SOURCES);
    let names: Vec<String> = (0..11).map(|i| format!("s{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    invalid(h.try_create("t", allow("by_queue", Some(&refs))), SOURCES);
    invalid(
        h.try_create("t", allow("by_queue", Some(&["s0", "unknown"]))),
        "redrive_allow_policy.source_queues[1]",
    );
    let t = h.create_with("t", allow("by_queue", Some(&refs[..10])));
    let listed = t
        .redrive_allow_policy
        .source_queues
        .expect("by_queue lists sources");
    assert_eq!(t.redrive_allow_policy.permission, "by_queue");
    assert_eq!(
        listed.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        refs[..10]
    );
}

#[test]
fn message_moves_after_max_receive_count_leases_end_unacknowledged() {
    let (mut h, src, dlq) = with_dlq(false, 2);
    put(&mut h, src, "m");
    let first = h.receive(src, 1);
    h.change_lease(src, &first[0].receipt, 0).expect("release");
    assert_eq!(
        states(&h, src),
        [MessageState::Visible],
        "one lease is not enough"
    );
    h.receive_leased(src, 1, 5);
    h.advance(5);
    h.tick();
    assert!(peek(&h, src).is_empty());
    assert_eq!(peek_bodies(&h, dlq), ["m"]);
    // Released leases count too.
    put(&mut h, src, "n");
    for _ in 0..2 {
        let got = h.receive(src, 1);
        h.change_lease(src, &got[0].receipt, 0).expect("release");
    }
    assert_eq!(peek_bodies(&h, dlq), ["m", "n"]);
}

#[test]
fn moved_message_keeps_its_payload_and_gets_a_new_life_in_the_target() {
    let (mut h, src, dlq) = with_dlq(true, 1);
    h.try_patch(dlq, attrs(&[("retention_seconds", 60)]))
        .expect("patch");
    let mut m = msg_for(&mut h, src, "grp", "body");
    m.attributes = BTreeMap::from([("k".to_string(), Attribute::text("Number.n", "1"))]);
    m.message_deduplication_id = Some("dedup".into());
    let sent = h.try_send_msg(src, m).expect("send");
    let before = payload(&h, &peek(&h, src)[0]);
    h.advance(100);
    h.send_fifo(dlq, "x", "already-there");
    let leased = lapse(&mut h, src);
    let moved_at = h.now;
    let metas = peek(&h, dlq);
    assert_eq!(metas.len(), 2);
    let moved = &metas[1];
    assert_eq!(payload(&h, moved), before);
    assert_eq!(before.message_id, sent.message_id);
    assert_eq!(
        before.attributes.get("k"),
        Some(&Attribute::text("Number.n", "1"))
    );
    assert_eq!(before.message_group_id.as_deref(), Some("grp"));
    assert_eq!(before.message_deduplication_id.as_deref(), Some("dedup"));
    assert_eq!(before.sent_at, START);
    assert_eq!(moved.receive_count, 0);
    assert_eq!((moved.state, moved.until), (MessageState::Visible, None));
    assert!(moved.seq > metas[0].seq && moved.seq > leased.meta.seq);
    let source = h.engine.resolve(ACCOUNT, src).expect("source ref");
    assert_eq!(moved.dead_letter_source.as_ref(), Some(&source));
    assert_eq!(moved.moved_at, Some(moved_at));
    assert_eq!(moved.enqueued_at, moved_at);
    // Retention counts from the move: the message was sent 105 s ago, the target keeps 60 s.
    h.now = moved_at + 59_000;
    h.tick();
    assert_eq!(
        peek_bodies(&h, dlq),
        ["body"],
        "already-there expired, the moved one not"
    );
    let delivered = h.receive(dlq, 10);
    assert_eq!(h.bodies(&delivered), ["body"]);
    assert_eq!(delivered[0].meta.receive_count, 1);
    assert_eq!(delivered[0].meta.dead_letter_source.as_ref(), Some(&source));
    h.now = moved_at + 60_000;
    h.tick();
    assert!(peek(&h, dlq).is_empty());
}

#[test]
fn moved_message_is_never_in_both_queues() {
    let (mut h, src, dlq) = with_dlq(false, 1);
    put(&mut h, src, "m");
    let leased = lapse(&mut h, src);
    assert_eq!(stats(&h, src), QueueStats::default());
    assert_eq!(state_counts(&h, dlq), counts(1, 0, 0, 0));
    assert!(peek(&h, src).is_empty());
    assert_eq!(h.store.payload_keys().len(), 1);
    assert_stale(&mut h, src, &leased.receipt);
    let got = h.receive(dlq, 10);
    ack_all(&mut h, dlq, &got);
    assert!(h.store.payload_keys().is_empty());
}

#[test]
fn queue_gauges_count_dead_letter_moves_per_source_and_survive_restore() {
    let (mut h, src, dlq) = with_dlq(false, 1);
    put(&mut h, src, "m");
    put(&mut h, src, "n");
    lapse(&mut h, src);
    lapse(&mut h, src);
    let gauges = |e: &Engine| {
        e.queue_gauges(h.now)
            .into_iter()
            .map(|g| (g.name, g.dead_lettered, g.stats.visible))
            .collect::<Vec<_>>()
    };
    let expected = vec![(dlq.to_string(), 0, 2), (src.to_string(), 2, 0)];
    assert_eq!(gauges(&h.engine), expected);
    let restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(gauges(&restored), expected);
}

#[test]
fn queue_gauges_count_sends_and_acks_in_memory_only() {
    let (mut h, src, dlq) = with_dlq(true, 1);
    h.send_fifo(src, "g", "a");
    h.send_fifo(src, "g", "a"); // a duplicate: not a send
    h.send_fifo(src, "h", "b");
    let got = h.receive(src, 10);
    assert_eq!(got.len(), 2);
    h.ack(src, &got[0].receipt).expect("ack");
    assert!(
        h.ack(src, &got[0].receipt).is_err(),
        "a second ack is refused"
    );
    h.send_fifo(src, "k", "c");
    lapse(&mut h, src); // dead-letters "c": a move is no send to its target
    let gauges = |e: &Engine| {
        e.queue_gauges(h.now)
            .into_iter()
            .map(|g| (g.name, g.sent, g.acked))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        gauges(&h.engine),
        vec![(dlq.to_string(), 0, 0), (src.to_string(), 3, 1)]
    );
    let restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(
        gauges(&restored),
        vec![(dlq.to_string(), 0, 0), (src.to_string(), 0, 0)]
    );
}

#[test]
fn moves_skip_the_targets_deduplication() {
    let (mut h, src, dlq) = with_dlq(true, 1);
    let in_target = h.send_fifo(dlq, "g", "d");
    h.send_fifo(src, "g", "d");
    lapse(&mut h, src);
    assert_eq!(peek_bodies(&h, dlq), ["d", "d"]);
    assert_duplicate(&mut h, dlq, &in_target);
}

#[test]
fn denied_move_leaves_the_message_pending_redrive() {
    let (mut h, src, dlq) = pending_setup(false);
    assert_eq!(state_counts(&h, src), counts(0, 0, 0, 1));
    assert!(peek(&h, dlq).is_empty());
    h.advance(3600);
    assert!(h.receive(src, 10).is_empty());
    assert_eq!(state_counts(&h, src), counts(0, 0, 0, 1));
    assert!(!h.engine.has_deliverable(ACCOUNT, src));
}

#[test]
fn pending_message_moves_when_the_policy_is_fixed() {
    for fix in [allow("allow_all", None), allow("by_queue", Some(&["src"]))] {
        let (mut h, src, dlq) = pending_setup(false);
        h.try_patch(dlq, fix).expect("fix");
        assert!(peek(&h, src).is_empty());
        assert_eq!(peek_bodies(&h, dlq), ["m"]);
    }
    let (mut h, src, _) = pending_setup(false);
    h.create("dlq2");
    h.try_patch(src, redrive("dlq2", 1)).expect("retarget");
    assert_eq!(peek_bodies(&h, "dlq2"), ["m"]);
}

#[test]
fn pending_message_is_deliverable_again_when_the_policy_is_detached() {
    let (mut h, src, dlq) = pending_setup(true);
    let view = h.try_patch(src, detach()).expect("detach");
    assert_eq!(view.redrive_policy, None);
    assert_eq!(states(&h, src), [MessageState::Visible]);
    let got = h.receive(src, 10);
    assert_eq!(h.bodies(&got), ["m"]);
    assert_eq!(got[0].meta.receive_count, 2);
    assert!(peek(&h, dlq).is_empty());
}

#[test]
fn detaching_moves_nothing_back() {
    let (mut h, src, dlq) = with_dlq(false, 1);
    put(&mut h, src, "m");
    lapse(&mut h, src);
    h.try_patch(src, detach()).expect("detach");
    assert!(peek(&h, src).is_empty());
    assert_eq!(peek_bodies(&h, dlq), ["m"]);
}

#[test]
fn deleting_a_dead_letter_target_is_queue_in_use_until_detached() {
    let (mut h, src, dlq) = with_dlq(false, 1);
    h.create_with("src2", redrive(dlq, 5));
    let delete = |h: &mut Harness| h.apply(queue_cmd(dlq, Op::Delete));
    let expected = vec![
        h.engine.resolve(ACCOUNT, src).expect("src"),
        h.engine.resolve(ACCOUNT, "src2").expect("src2"),
    ];
    let err = refused(delete(&mut h), "queue_in_use", None);
    assert_eq!(
        err,
        EngineError::QueueInUse {
            sources: expected.clone()
        }
    );
    assert_eq!(h.engine.dead_letter_sources(ACCOUNT, dlq), Ok(expected));
    h.try_patch(src, detach()).expect("detach");
    refused(delete(&mut h), "queue_in_use", None);
    h.try_patch("src2", detach()).expect("detach");
    assert_eq!(h.engine.dead_letter_sources(ACCOUNT, dlq), Ok(vec![]));
    assert_eq!(delete(&mut h), Ok(Outcome::Deleted));
    refused(h.engine.get_queue(ACCOUNT, dlq), "queue_not_found", None);
}

// ---- purge, stats, peek -----------------------------------------------------------------------

/// A harness with one message in each state in `src`: pending redrive, leased, delayed and
/// visible.
fn every_state() -> (Harness, &'static str) {
    let (mut h, src, _) = pending_setup(false);
    put(&mut h, src, "leased");
    h.receive(src, 1);
    put_delayed(&mut h, src, "", "delayed", 60);
    put(&mut h, src, "visible");
    (h, src)
}

#[test]
fn purge_removes_every_message_in_every_state() {
    let (mut h, src) = every_state();
    assert_eq!(state_counts(&h, src), counts(1, 1, 1, 1));
    h.apply(queue_cmd(src, Op::Purge)).expect("purge");
    assert!(peek(&h, src).is_empty());
    assert_eq!(stats(&h, src), QueueStats::default());
    assert_eq!(h.engine.reclaim_backlog(), 4);
    h.tick();
    assert!(h.store.payload_keys().is_empty());
    assert_eq!(h.engine.reclaim_backlog(), 0);
    h.advance(120);
    assert!(h.receive(src, 10).is_empty());
    assert!(peek(&h, "dlq").is_empty());
}

/// The state's message bytes (bodies and attributes, which the snapshot policy weighs against
/// the log) count a message from its send to its ack or purge, in every state, across queues,
/// and again when the engine is restored from its rows.
#[test]
fn message_bytes_count_the_messages_held_until_acked_or_purged() {
    let mut h = Harness::new();
    assert_eq!(h.engine.message_bytes(), 0);
    h.create("a");
    h.create("b");
    put(&mut h, "a", "1234567890");
    put(&mut h, "a", "abcde");
    put(&mut h, "b", "xyz");
    put_delayed(&mut h, "b", "", "later", 60);
    assert_eq!(h.engine.message_bytes(), 10 + 5 + 3 + 5);
    let leased = h.receive("a", 1);
    assert_eq!(
        h.engine.message_bytes(),
        23,
        "a leased message is still held"
    );
    let restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(restored.message_bytes(), 23);
    h.ack("a", &leased[0].receipt).expect("ack");
    assert_eq!(h.engine.message_bytes(), 23 - 10);
    h.apply(queue_cmd("b", Op::Purge)).expect("purge");
    assert_eq!(h.engine.message_bytes(), 5);
}

/// Sends `n` messages to `queue` (of groups `g0`..`g9`, each with a deduplication ID, when FIFO),
/// then leases 5 and delays one, so purged messages carry timers.
fn fill(h: &mut Harness, queue: &str, n: usize) {
    for i in 0..n {
        let mut m = msg_for(h, queue, &format!("g{}", i % 10), &format!("m{i}"));
        if queue.ends_with(".fifo") {
            m.message_deduplication_id = Some(format!("d{i}"));
        }
        h.try_send_msg(queue, m).expect("send");
    }
    h.receive(queue, 5);
    put_delayed(h, queue, "g0", "delayed", 60);
}

/// Applies a purge or delete and checks it wrote a few rows and no payload, however deep the
/// queue.
#[track_caller]
fn constant_work(h: &mut Harness, command: Command, outcome: Outcome) {
    let applied = h.apply_changes(command);
    assert_eq!(applied.result, Ok(outcome));
    assert!(applied.changes.payloads.is_empty());
    assert!(
        applied.changes.rows.len() <= 3,
        "{:?}",
        applied.changes.rows
    );
}

/// Ticks until nothing is left to reclaim, checking that each tick deletes at most
/// [`RECLAIM_PER_TICK`] payloads; returns the number of ticks.
fn reclaim_all(h: &mut Harness) -> usize {
    let mut ticks = 0;
    while h.engine.reclaim_backlog() > 0 {
        assert_eq!(
            h.engine.next_due(),
            Some(h.engine.now()),
            "reclaiming is due"
        );
        let before = h.store.payload_keys().len();
        h.tick();
        let deleted = before - h.store.payload_keys().len();
        assert!(
            deleted > 0 && deleted <= RECLAIM_PER_TICK,
            "{deleted} in one tick"
        );
        assert_eq!(h.store.engine_rows(), h.engine.export_rows());
        ticks += 1;
    }
    ticks
}

#[test]
fn purge_is_constant_work_and_ticks_delete_the_messages_in_bounded_steps() {
    let mut h = Harness::with_queue("big");
    let n = 2 * RECLAIM_PER_TICK + 10;
    fill(&mut h, "big", n);
    constant_work(&mut h, queue_cmd("big", Op::Purge), Outcome::Purged);
    assert_eq!(stats(&h, "big"), QueueStats::default());
    assert!(peek(&h, "big").is_empty());
    assert!(h.receive("big", 10).is_empty());
    assert_eq!(h.engine.reclaim_backlog(), n as u64 + 1);

    put(&mut h, "big", "after the purge");
    assert_eq!(reclaim_all(&mut h), 3);
    assert_eq!(
        h.store.payload_keys().len(),
        1,
        "only the later message is left"
    );
    h.advance(120);
    let got = h.receive("big", 10);
    assert_eq!(h.bodies(&got), ["after the purge"]);
    assert_eq!(h.store.engine_rows(), h.engine.export_rows());
}

#[test]
fn deleting_a_deep_queue_frees_its_name_at_once_and_ticks_delete_its_messages() {
    let mut h = Harness::with_queue("big.fifo");
    h.create("other");
    put(&mut h, "other", "stays");
    fill(&mut h, "big.fifo", RECLAIM_PER_TICK + 1);
    let dedup_rows = |h: &Harness| h.store.rows.keys().filter(|k| k[0] == 3).count();
    assert!(dedup_rows(&h) > RECLAIM_PER_TICK);

    constant_work(&mut h, queue_cmd("big.fifo", Op::Delete), Outcome::Deleted);
    assert_eq!(dedup_rows(&h), 0, "deduplication rows go by range");
    assert_eq!(h.store.engine_rows(), h.engine.export_rows());

    h.create("big.fifo");
    assert_eq!(stats(&h, "big.fifo"), QueueStats::default());
    h.send_fifo("big.fifo", "g0", "new");
    assert_eq!(reclaim_all(&mut h), 2);
    assert_eq!(
        h.store.payload_keys().len(),
        2,
        "the new queue's and the other's"
    );
    let got = h.receive("big.fifo", 10);
    assert_eq!(h.bodies(&got), ["new"]);
    assert_eq!(
        h.engine.next_due(),
        Some(h.now + 30_000),
        "the new lease is next"
    );
}

#[test]
fn a_restore_during_reclamation_deletes_the_same_rows_tick_by_tick() {
    let mut h = Harness::with_queue("a.fifo");
    h.create("b");
    fill(&mut h, "a.fifo", RECLAIM_PER_TICK + 3);
    fill(&mut h, "b", 20);
    h.apply(queue_cmd("b", Op::Purge)).expect("purge b");
    put(&mut h, "b", "kept");
    h.apply(queue_cmd("a.fifo", Op::Delete)).expect("delete a");
    h.tick();
    fill(&mut h, "b", 7);
    h.apply(queue_cmd("b", Op::Purge)).expect("purge b again");

    let mut restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    assert_eq!(restored.reclaim_backlog(), h.engine.reclaim_backlog());
    while h.engine.reclaim_backlog() > 0 {
        both(&mut h, &mut restored, Command::Tick);
    }
    assert_eq!(restored.reclaim_backlog(), 0);
    assert!(h.store.payload_keys().is_empty());
}

#[test]
fn stats_count_messages_by_state_and_the_oldest_age() {
    let (mut h, src) = every_state();
    h.advance(42);
    let s = stats(&h, src);
    let mut by_priority = [LevelStats::default(); 10];
    by_priority[0] = LevelStats {
        visible: 1,
        leased: 1,
        delayed: 1,
        pending_redrive: 1,
    };
    assert_eq!(
        s,
        QueueStats {
            oldest_message_age_seconds: 42 + 5,
            by_priority,
            ..counts(1, 1, 1, 1)
        }
    );
    let later = h.engine.stats(ACCOUNT, src, h.now + 10_000).expect("stats");
    assert_eq!(later.oldest_message_age_seconds, 57);
}

#[test]
fn peek_shows_states_without_leasing_or_counting() {
    let (mut h, src) = every_state();
    let first = peek(&h, src);
    assert_eq!(
        first.iter().map(|m| m.state).collect::<Vec<_>>(),
        [
            MessageState::PendingRedrive,
            MessageState::Leased,
            MessageState::Delayed,
            MessageState::Visible
        ]
    );
    assert_eq!(
        first.iter().map(|m| m.receive_count).collect::<Vec<_>>(),
        [1, 1, 0, 0]
    );
    assert_eq!(peek(&h, src), first);
    assert_eq!(recv(&mut h, src, 10), ["visible"]);
}

#[test]
fn peek_pages_with_after_and_limit() {
    let mut h = Harness::with_queue("q");
    for i in 0..12 {
        put(&mut h, "q", &format!("m{i}"));
    }
    let page = |h: &Harness, after, limit| h.engine.peek(ACCOUNT, "q", after, limit);
    for bad in [0, 101] {
        invalid(page(&h, None, Some(bad)), "limit");
    }
    assert_eq!(page(&h, None, None).expect("default").len(), 10);
    let first = page(&h, None, Some(5)).expect("first page");
    assert_eq!(first.len(), 5);
    let second = page(&h, first.last().map(|m| m.seq), Some(100)).expect("second page");
    assert_eq!(second.len(), 7);
    assert!(first.last().map(|m| m.seq) < second.first().map(|m| m.seq));
    assert_eq!(page(&h, second.last().map(|m| m.seq), Some(5)), Ok(vec![]));
    assert_eq!(stats(&h, "q").visible, 12);
}

// ---- time -------------------------------------------------------------------------------------

#[test]
fn earlier_entry_time_does_not_move_time_back() {
    let mut h = Harness::with_queue("q");
    h.advance(10);
    h.tick();
    let later = h.now;
    h.now = START;
    put_delayed(&mut h, "q", "", "m", 5);
    assert_eq!(h.engine.now(), later);
    let meta = &peek(&h, "q")[0];
    assert_eq!(payload(&h, meta).sent_at, later);
    assert_eq!(meta.until, Some(later + 5_000));
    h.now = later + 4_000;
    assert!(h.receive("q", 1).is_empty());
}

#[test]
fn tick_applied_twice_changes_nothing_more() {
    let (mut h, src, _) = with_dlq(false, 2);
    put(&mut h, src, "a");
    put_delayed(&mut h, src, "", "b", 5);
    h.receive_leased(src, 1, 5);
    h.advance(5);
    h.tick();
    let once = h.snapshot();
    assert_eq!(state_counts(&h, src), counts(2, 0, 0, 0));
    h.tick();
    assert_eq!(h.snapshot(), once);
    h.now -= 1_000;
    h.tick();
    assert_eq!(h.snapshot(), once, "a late tick");
}

// ---- restore ----------------------------------------------------------------------------------

/// Rows exported by the build before row format 4: a queue `dlq`, a queue `work` (lease 45 s,
/// redrive to `dlq` after 3 receives) and one message of tenant `tenant` in `work`.
const FORMAT_3_ROWS: [(&str, &str); 4] = [
    ("00", "03e8d795ffbc310203"),
    (
        "0100000001",
        "10000000000000000000000000000000010364657603646c7180d095ffbc31001e00808c15808010000000",
    ),
    (
        "0100000002",
        "10000000000000000000000000000000020364657604776f726b80d095ffbc31002d00808c158080100101030000",
    ),
    ("02000000020000000000000001", "01e8d795ffbc3100000000050000"),
];

#[test]
fn rows_of_format_3_restore_with_their_settings_and_no_retry_backoff() {
    let rows = FORMAT_3_ROWS.iter().map(|(k, v)| {
        let hex = |text: &str| {
            (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
                .collect::<Vec<u8>>()
        };
        (hex(k), hex(v))
    });
    let mut engine = Engine::restore("local", rows).expect("format 3 restores");
    let work = engine.get_queue(ACCOUNT, "work").expect("work");
    assert_eq!(work.lease_seconds, 45);
    assert_eq!(work.retry_backoff, None);
    let policy = work.redrive_policy.expect("redrive policy");
    assert_eq!(
        (
            policy.dead_letter_target.name.as_str(),
            policy.max_receive_count
        ),
        ("dlq", 3)
    );
    let received = engine.apply(Entry {
        now: 1_700_000_002_000,
        command: Command::Receive {
            account: ACCOUNT.into(),
            queue: "work".into(),
            max_messages: Some(10),
            lease_seconds: None,
            attempt_id: None,
        },
    });
    match received.result {
        Ok(Outcome::Received(d)) => assert_eq!(d.len(), 1),
        other => panic!("{other:?}"),
    }
    let meta = engine.row_value(&RowKey::Meta).expect("meta row");
    assert_eq!(
        meta[0],
        raftq_engine::rows::FORMAT_VERSION as u8,
        "the meta row is written in today's format from now on"
    );
}

/// Applies `command` to the harness and to `other` at the harness clock; both must agree.
#[track_caller]
fn both(h: &mut Harness, other: &mut Engine, command: Command) -> Outcome {
    let now = h.now;
    let a = h.apply(command.clone());
    let b = other.apply(Entry { now, command }).result;
    assert_eq!(a, b);
    assert_eq!(h.engine.export_rows(), other.export_rows());
    a.unwrap_or(Outcome::Ticked)
}

#[test]
fn restore_then_same_commands_give_identical_rows_and_outcomes() {
    let (mut h, src, dlq) = with_dlq(true, 2);
    h.create("std");
    for (group, body) in [("a", "a1"), ("a", "a2"), ("b", "b1"), ("c", "c1")] {
        h.send_fifo(src, group, body);
    }
    put_delayed(&mut h, src, "d", "d1", 30);
    put(&mut h, "std", "s1");
    put(&mut h, "std", "s2");
    let held = h.receive(src, 2);
    lapse(&mut h, src);
    let std_lease = h.receive("std", 1);
    h.try_patch(dlq, allow("deny_all", None)).expect("deny");
    h.advance(3);

    let mut restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    assert_eq!(restored.now(), h.engine.now());

    let ack = both(&mut h, &mut restored, ack_cmd(src, &[&held[0].receipt]));
    assert_eq!(acked(Ok(ack)), [Ok(())], "a lease survives the restore");
    both(
        &mut h,
        &mut restored,
        ack_cmd("std", &[&std_lease[0].receipt, "junk"]),
    );
    let resend = msg_for(&mut h, src, "a", "a1");
    match both(&mut h, &mut restored, send_cmd(src, resend)) {
        Outcome::Sent(r) => assert!(r.duplicate, "deduplication survives the restore"),
        other => panic!("unexpected outcome {other:?}"),
    }
    for _ in 0..3 {
        both(&mut h, &mut restored, receive_cmd(src, 10));
        h.advance(31);
        both(&mut h, &mut restored, Command::Tick);
    }
    assert!(states(&h, src).contains(&MessageState::PendingRedrive));
    both(&mut h, &mut restored, receive_cmd("std", 10));
    let fix = queue_cmd(dlq, Op::Patch(Box::new(allow("allow_all", None))));
    both(&mut h, &mut restored, fix);
    assert!(!peek(&h, dlq).is_empty());
    h.advance(301);
    let fresh = msg_for(&mut h, src, "a", "a1");
    match both(&mut h, &mut restored, send_cmd(src, fresh)) {
        Outcome::Sent(r) => assert!(!r.duplicate, "the window ended"),
        other => panic!("unexpected outcome {other:?}"),
    }
    both(&mut h, &mut restored, receive_cmd(dlq, 10));
    let purge = queue_cmd("std", Op::Purge);
    both(&mut h, &mut restored, purge);
    h.advance(4 * 24 * 3600);
    both(&mut h, &mut restored, Command::Tick);
    assert!(peek(&h, src).is_empty() && peek(&h, dlq).is_empty());
}

#[test]
fn ready_count_is_what_a_receive_could_start_from() {
    let mut h = Harness::with_queue("plain");
    for body in ["a", "b", "c"] {
        h.send("plain", body);
    }
    assert_eq!(h.engine.ready_count(ACCOUNT, "plain"), 3);
    assert_eq!(h.receive("plain", 2).len(), 2);
    assert_eq!(h.engine.ready_count(ACCOUNT, "plain"), 1);

    // A FIFO queue counts groups whose head is deliverable: a leased group counts no more.
    h.create("ordered.fifo");
    for (group, body) in [("x", "1"), ("x", "2"), ("x", "3"), ("y", "4")] {
        h.send_fifo("ordered.fifo", group, body);
    }
    assert_eq!(h.engine.ready_count(ACCOUNT, "ordered.fifo"), 2);
    assert_eq!(h.receive("ordered.fifo", 1).len(), 1);
    assert_eq!(h.engine.ready_count(ACCOUNT, "ordered.fifo"), 1);
    assert!(h.engine.has_deliverable(ACCOUNT, "ordered.fifo"));
    assert_eq!(h.engine.ready_count(ACCOUNT, "missing"), 0);
}
