//! The engine's rules for what an SQS-compatible front needs: typed message attributes, queue
//! tags, a queue's default long-poll wait, `modified_at`, FIFO receive attempt IDs and ARNs as
//! queue references; each persisted in rows and kept by a restore.

mod support;

use std::collections::BTreeMap;

use raftq_engine::arn::{account_number, arn};
use raftq_engine::model::{DeduplicationScope, FifoThroughputLimit};
use raftq_engine::rows::FORMAT_VERSION;
use raftq_engine::{
    Attribute, Command, Delivery, Engine, EngineError, Entry, Outcome, QueueAttributes, RowKey,
    SendResult,
};
use support::*;

#[track_caller]
fn invalid<T: std::fmt::Debug>(result: Result<T, EngineError>, field: &str) -> String {
    match result {
        Err(EngineError::InvalidArgument { field: f, rule }) => {
            assert_eq!(f, field, "{rule}");
            rule
        }
        other => panic!("expected invalid {field}, got {other:?}"),
    }
}

fn tags(pairs: &[(&str, Option<&str>)]) -> QueueAttributes {
    QueueAttributes {
        tags: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
        ),
        ..Default::default()
    }
}

fn receive_wait(seconds: i64) -> QueueAttributes {
    QueueAttributes {
        receive_wait_seconds: Some(seconds),
        ..Default::default()
    }
}

// ---- typed attributes -------------------------------------------------------------------------

fn typed() -> BTreeMap<String, Attribute> {
    BTreeMap::from([
        ("plain".to_string(), Attribute::string("hello")),
        ("label".to_string(), Attribute::text("String.label", "x")),
        (
            "price".to_string(),
            Attribute::text("Number.float", "-12.50e3"),
        ),
        (
            "image".to_string(),
            Attribute::bytes("Binary.jpg", vec![0, 255, 0xd8, 0xff]),
        ),
        ("empty".to_string(), Attribute::bytes("Binary", Vec::new())),
    ])
}

#[test]
fn typed_attributes_round_trip_exactly_through_the_store_and_a_restore() {
    let mut h = Harness::with_queue("q");
    let mut m = h.message("body");
    m.attributes = typed();
    h.try_send_msg("q", m).expect("typed attributes are taken");
    let got = h.receive("q", 1);
    let payload = h.store.payload(got[0].meta.storage_key).expect("payload");
    assert_eq!(payload.attributes, typed());

    let restored = Engine::restore("local", h.store.engine_rows()).expect("restores");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
}

#[test]
fn attribute_types_and_number_values_are_checked_and_a_refusal_changes_nothing() {
    let mut h = Harness::with_queue("q");
    let before = h.snapshot();
    let cases = [
        ("n", Attribute::text("Number", "1.2.3"), "attributes.n"),
        (
            "n",
            Attribute::text("Number", "9".repeat(39)),
            "attributes.n",
        ),
        ("n", Attribute::text("Number", "1e126"), "attributes.n"),
        ("t", Attribute::text("Text", "x"), "attribute_types.t"),
        ("t", Attribute::text("String.", "x"), "attribute_types.t"),
        (
            "t",
            Attribute::text(format!("Number.{}", "x".repeat(250)), "1"),
            "attribute_types.t",
        ),
        ("b", Attribute::text("Binary", "x"), "attributes.b"),
        ("s", Attribute::bytes("String", vec![1]), "attributes.s"),
    ];
    for (name, attribute, field) in cases {
        let mut m = h.message("body");
        m.attributes.insert(name.into(), attribute);
        invalid(h.try_send_msg("q", m), field);
    }
    let mut many = h.message("body");
    many.attributes = (0..11)
        .map(|i| (format!("a{i}"), Attribute::text("Number", "1")))
        .collect();
    invalid(h.try_send_msg("q", many), "attributes");
    assert_eq!(h.snapshot(), before);
}

#[test]
fn typed_attributes_count_their_type_toward_the_size_and_plain_ones_do_not() {
    let mut h = Harness::new();
    h.create_with("small", attrs(&[("max_message_bytes", 20)]));
    let sized = |h: &mut Harness, attribute: Attribute| {
        let mut m = h.message("12345");
        m.attributes.insert("n".into(), attribute);
        h.try_send_msg("small", m)
    };
    // 5 (body) + 1 (name) + 8 (value) + 6 (type) = 20.
    sized(&mut h, Attribute::text("Number", "12345678")).expect("exactly 20 bytes");
    sized(&mut h, Attribute::bytes("Binary", vec![7; 8])).expect("exactly 20 bytes");
    let over = sized(&mut h, Attribute::text("Number", "123456789"));
    assert!(
        matches!(over, Err(EngineError::MessageTooLarge { size: 21, .. })),
        "{over:?}"
    );
    // A plain attribute counts its name and value only, as SPEC.md has it.
    sized(&mut h, Attribute::string("12345678901234")).expect("exactly 20 bytes");
}

#[test]
fn a_message_of_one_mebibyte_fits_with_a_binary_attribute_and_a_byte_more_does_not() {
    let mut h = Harness::new();
    h.create_with("big", attrs(&[("max_message_bytes", 1024 * 1024)]));
    let with = |h: &mut Harness, extra: usize| {
        let mut m = h.message(&"x".repeat(512 * 1024));
        let bytes = vec![0xAB; 512 * 1024 - "blob".len() - "Binary".len() + extra];
        m.attributes
            .insert("blob".into(), Attribute::bytes("Binary", bytes));
        h.try_send_msg("big", m)
    };
    with(&mut h, 0).expect("1 MiB fits");
    let over = with(&mut h, 1);
    assert!(
        matches!(
            over,
            Err(EngineError::MessageTooLarge { max: 1_048_576, .. })
        ),
        "{over:?}"
    );
}

// ---- tags -------------------------------------------------------------------------------------

#[test]
fn tags_are_set_merged_removed_and_shown() {
    let mut h = Harness::new();
    let q = h.create_with("q", tags(&[("team", Some("pay")), ("env", Some("prod"))]));
    assert_eq!(q.tags.len(), 2);
    let q = h
        .try_patch(
            "q",
            tags(&[("team", Some("billing")), ("env", None), ("new", Some(""))]),
        )
        .expect("patch tags");
    let expected: BTreeMap<String, String> = [("new", ""), ("team", "billing")]
        .map(|(k, v)| (k.into(), v.into()))
        .into();
    assert_eq!(q.tags, expected);
    let untouched = h.try_patch("q", QueueAttributes::default()).expect("patch");
    assert_eq!(untouched.tags, expected, "a patch without tags keeps them");
    let restored = Engine::restore("local", h.store.engine_rows()).expect("restores");
    assert_eq!(restored.get_queue(ACCOUNT, "q").expect("q").tags, expected);
}

#[test]
fn tag_limits_are_sqs_ones_and_a_refusal_changes_nothing() {
    let mut h = Harness::new();
    let fifty: Vec<(String, Option<&str>)> =
        (0..50).map(|i| (format!("k{i}"), Some("v"))).collect();
    let fifty: Vec<(&str, Option<&str>)> = fifty.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    h.create_with("q", tags(&fifty));
    let before = h.snapshot();
    invalid(h.try_patch("q", tags(&[("one-more", Some("v"))])), "tags");
    invalid(h.try_patch("q", tags(&[("", Some("v"))])), "tags");
    invalid(
        h.try_patch("q", tags(&[(&"k".repeat(129), Some("v"))])),
        "tags",
    );
    invalid(
        h.try_patch("q", tags(&[("k0", Some(&"v".repeat(257)))])),
        "tags.k0",
    );
    invalid(
        h.try_patch("q", tags(&[("aws:cost", Some("v"))])),
        "tags.aws:cost",
    );
    assert_eq!(h.snapshot(), before);
    // Swapping one tag for another keeps the queue at 50.
    let q = h
        .try_patch("q", tags(&[("k0", None), ("one-more", Some("v"))]))
        .expect("swap");
    assert_eq!(q.tags.len(), 50);
    invalid(
        h.try_create("r", tags(&[("aws:x", Some("v"))])),
        "tags.aws:x",
    );
}

// ---- modified_at and receive_wait_seconds -----------------------------------------------------

#[test]
fn modified_at_is_the_time_of_the_entry_that_last_changed_a_setting() {
    let mut h = Harness::new();
    let q = h.create("q");
    assert_eq!((q.created_at, q.modified_at), (START, START));
    h.advance(10);
    let same = attrs(&[("lease_seconds", 30)]);
    assert_eq!(h.try_patch("q", same).expect("patch").modified_at, START);
    assert_eq!(
        h.try_patch("q", tags(&[("t", Some("v"))]))
            .expect("tags")
            .modified_at,
        START,
        "tags are not settings"
    );
    h.advance_ms(1);
    let changed = h.try_patch("q", receive_wait(5)).expect("patch");
    assert_eq!(changed.modified_at, START + 10_001);
    invalid(h.try_patch("q", receive_wait(21)), "receive_wait_seconds");
    let restored = Engine::restore("local", h.store.engine_rows()).expect("restores");
    let q = restored.get_queue(ACCOUNT, "q").expect("q");
    assert_eq!((q.modified_at, q.receive_wait_seconds), (START + 10_001, 5));
}

#[test]
fn receive_wait_seconds_is_0_to_20_and_defaults_to_0() {
    let mut h = Harness::new();
    assert_eq!(h.create("q").receive_wait_seconds, 0);
    assert_eq!(
        h.create_with("w", receive_wait(20)).receive_wait_seconds,
        20
    );
    let engine = &h.engine;
    assert_eq!(engine.receive_wait_seconds(ACCOUNT, "w").ok(), Some(20));
    assert_eq!(engine.receive_wait_seconds(ACCOUNT, "q").ok(), Some(0));
    assert!(engine.receive_wait_seconds(ACCOUNT, "none").is_err());
    let before = h.snapshot();
    invalid(h.try_create("x", receive_wait(21)), "receive_wait_seconds");
    invalid(h.try_create("x", receive_wait(-1)), "receive_wait_seconds");
    assert_eq!(h.snapshot(), before);
}

// ---- receive attempt IDs ----------------------------------------------------------------------

fn receive_attempt(
    h: &mut Harness,
    queue: &str,
    max: i64,
    lease: i64,
    id: &str,
) -> Result<Vec<Delivery>, EngineError> {
    match h.apply(attempt_cmd(queue, max, lease, id))? {
        Outcome::Received(d) => Ok(d),
        other => panic!("{other:?}"),
    }
}

fn attempt_cmd(queue: &str, max: i64, lease: i64, id: &str) -> Command {
    Command::Receive {
        account: ACCOUNT.into(),
        queue: queue.into(),
        max_messages: Some(max),
        lease_seconds: Some(lease),
        attempt_id: Some(id.into()),
    }
}

fn receipts(deliveries: &[Delivery]) -> Vec<&str> {
    deliveries.iter().map(|d| d.receipt.as_str()).collect()
}

/// A FIFO queue `f.fifo` holding `a`, `b`, `c` in group `g`.
fn fifo_with_three(h: &mut Harness) {
    h.create("f.fifo");
    for body in ["a", "b", "c"] {
        h.send_fifo("f.fifo", "g", body);
    }
}

#[test]
fn a_retried_attempt_returns_the_same_messages_and_receipts_and_restarts_their_leases() {
    let mut h = Harness::new();
    fifo_with_three(&mut h);
    let first = receive_attempt(&mut h, "f.fifo", 2, 30, "try-1").expect("receive");
    assert_eq!(h.bodies(&first), ["a", "b"]);
    assert_eq!(first[0].lease_expires_at, START + 30_000);

    h.advance(10);
    let again = receive_attempt(&mut h, "f.fifo", 10, 60, "try-1").expect("retry");
    assert_eq!(receipts(&again), receipts(&first));
    assert_eq!(h.bodies(&again), ["a", "b"]);
    for d in &again {
        assert_eq!(d.meta.receive_count, 1, "a retry is not a new receive");
        assert_eq!(d.lease_expires_at, START + 70_000, "the lease starts again");
        assert_eq!(d.meta.first_received_at, Some(START));
    }
    // The leases really moved: the old end passes, the messages stay leased.
    h.advance(35);
    h.tick();
    assert_eq!(
        h.engine
            .stats(ACCOUNT, "f.fifo", h.now)
            .expect("stats")
            .leased,
        2
    );
    h.ack("f.fifo", &again[0].receipt)
        .expect("the replayed receipt acknowledges");
}

#[test]
fn an_attempt_replays_for_five_minutes_from_its_first_receive() {
    let mut h = Harness::new();
    fifo_with_three(&mut h);
    let first = receive_attempt(&mut h, "f.fifo", 1, 900, "w").expect("receive");
    h.advance_ms(5 * 60 * 1000 - 1);
    let last = receive_attempt(&mut h, "f.fifo", 1, 900, "w").expect("last replay");
    assert_eq!(receipts(&last), receipts(&first));
    h.advance_ms(1);
    // Five minutes on, the same ID is a new receive: the group is blocked by the lease.
    let late = receive_attempt(&mut h, "f.fifo", 1, 900, "w").expect("new receive");
    assert!(late.is_empty(), "{late:?}");
}

#[test]
fn a_retry_after_a_message_was_touched_is_a_new_receive_recorded_again() {
    let mut h = Harness::new();
    fifo_with_three(&mut h);
    let first = receive_attempt(&mut h, "f.fifo", 2, 30, "t").expect("receive");
    h.change_lease("f.fifo", &first[1].receipt, 60)
        .expect("change the second lease");
    // One lease changed: the retry receives anew, and the group is blocked.
    assert!(receive_attempt(&mut h, "f.fifo", 2, 30, "t")
        .expect("retry")
        .is_empty());

    // Both leases end; the next retry takes the messages again, with new receipts.
    h.advance(61);
    let second = receive_attempt(&mut h, "f.fifo", 2, 30, "t").expect("retry");
    assert_eq!(h.bodies(&second), ["a", "b"]);
    assert_ne!(receipts(&second), receipts(&first));
    assert_eq!(second[0].meta.receive_count, 2);
    h.advance(1);
    let replay = receive_attempt(&mut h, "f.fifo", 2, 30, "t").expect("replay");
    assert_eq!(
        receipts(&replay),
        receipts(&second),
        "the new answer replays"
    );

    h.ack("f.fifo", &second[0].receipt).expect("ack");
    let after_ack = receive_attempt(&mut h, "f.fifo", 2, 30, "t").expect("retry");
    assert!(
        after_ack.is_empty(),
        "b still blocks the group: {after_ack:?}"
    );
}

#[test]
fn attempt_ids_are_for_fifo_queues_have_a_form_and_a_refusal_changes_nothing() {
    let mut h = Harness::with_queue("std");
    h.send("std", "x");
    fifo_with_three(&mut h);
    let before = h.snapshot();
    let rule = invalid(
        receive_attempt(&mut h, "std", 1, 30, "a"),
        "receive_attempt_id",
    );
    assert!(rule.contains("FIFO"), "{rule}");
    for bad in ["", "a b", "é", &"x".repeat(129)] {
        invalid(
            receive_attempt(&mut h, "f.fifo", 1, 30, bad),
            "receive_attempt_id",
        );
    }
    assert_eq!(h.snapshot(), before);
    receive_attempt(&mut h, "f.fifo", 1, 30, &"x".repeat(128)).expect("128 characters");
}

#[test]
fn attempt_records_are_rows_that_a_restore_replays_alike_and_pruning_deletes() {
    let mut h = Harness::new();
    fifo_with_three(&mut h);
    let first = receive_attempt(&mut h, "f.fifo", 2, 600, "r").expect("receive");
    let row = RowKey::Attempt(1, "r".into()).encode();
    assert!(h.store.rows.contains_key(&row), "the record is a row");

    let mut restored = Engine::restore("local", h.store.engine_rows()).expect("restores");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    h.advance(20);
    let command = attempt_cmd("f.fifo", 2, 600, "r");
    let on_restored = restored.apply(Entry {
        now: h.now,
        command: command.clone(),
    });
    let original = h.apply(command);
    assert_eq!(on_restored.result, original);
    match original {
        Ok(Outcome::Received(d)) => assert_eq!(receipts(&d), receipts(&first)),
        other => panic!("{other:?}"),
    }
    assert_eq!(restored.export_rows(), h.engine.export_rows());

    // Pruned at the first whole second after the window.
    h.advance(5 * 60 - 20);
    h.tick();
    assert!(!h.store.rows.contains_key(&row), "pruned with its window");
    assert_eq!(
        Engine::restore("local", h.store.engine_rows())
            .expect("restores")
            .export_rows(),
        h.engine.export_rows()
    );
}

#[test]
fn deleting_a_queue_drops_its_attempt_rows() {
    let mut h = Harness::new();
    fifo_with_three(&mut h);
    receive_attempt(&mut h, "f.fifo", 1, 30, "d").expect("receive");
    h.apply(Command::DeleteQueue {
        account: ACCOUNT.into(),
        queue: "f.fifo".into(),
    })
    .expect("delete");
    assert!(
        !h.store.rows.keys().any(|k| k.first() == Some(&6)),
        "no attempt row is left"
    );
}

// ---- ARNs -------------------------------------------------------------------------------------

#[test]
fn arns_name_queues_wherever_names_do() {
    let mut h = Harness::new();
    let dlq = h.create("dlq");
    assert_eq!(dlq.arn, arn("local", ACCOUNT, "dlq"));
    assert_eq!(
        dlq.arn,
        format!("arn:aws:sqs:local:{}:dlq", account_number(ACCOUNT))
    );
    let by_arn = h.engine.get_queue(ACCOUNT, &dlq.arn).expect("found by ARN");
    assert_eq!(by_arn.id, dlq.id);
    h.send(&dlq.arn, "via ARN");
    let src = h
        .try_create("src", redrive(&dlq.arn, 3))
        .expect("an ARN as dead-letter target");
    assert_eq!(
        src.redrive_policy.expect("policy").dead_letter_target.id,
        dlq.id
    );
    let allow = QueueAttributes {
        redrive_allow_policy: Some(raftq_engine::AllowPolicyInput {
            permission: Some("by_queue".into()),
            source_queues: Some(vec![arn("local", ACCOUNT, "src")]),
        }),
        ..Default::default()
    };
    let patched = h
        .try_patch(&dlq.arn, allow)
        .expect("an ARN as allowed source");
    let sources = patched.redrive_allow_policy.source_queues.expect("sources");
    assert_eq!(sources[0].name, "src");
}

#[test]
fn arns_of_another_account_or_region_are_refused_clearly() {
    let mut h = Harness::with_queue("dlq");
    h.create_in("acme", "dlq");
    let theirs = arn("local", "acme", "dlq");
    assert!(matches!(
        h.engine.get_queue(ACCOUNT, &theirs),
        Err(EngineError::QueueNotFound(_))
    ));
    let before = h.snapshot();
    let target = "redrive_policy.dead_letter_target";
    let rule = invalid(h.try_create("src", redrive(&theirs, 3)), target);
    assert!(rule.contains("same account"), "{rule}");
    let elsewhere = arn("eu-west-1", ACCOUNT, "dlq");
    let rule = invalid(h.try_create("src", redrive(&elsewhere, 3)), target);
    assert!(rule.contains("same region"), "{rule}");
    let rule = invalid(
        h.try_create("src", redrive("arn:aws:sqs:local:1:dlq", 3)),
        target,
    );
    assert!(rule.contains("ARN"), "{rule}");
    let allow = QueueAttributes {
        redrive_allow_policy: Some(raftq_engine::AllowPolicyInput {
            permission: Some("by_queue".into()),
            source_queues: Some(vec!["dlq".into(), theirs.clone()]),
        }),
        ..Default::default()
    };
    let rule = invalid(
        h.try_patch("dlq", allow),
        "redrive_allow_policy.source_queues[1]",
    );
    assert!(rule.contains("same account"), "{rule}");
    assert_eq!(h.snapshot(), before);
}

// ---- earlier row formats ----------------------------------------------------------------------

/// Rows as row format 4 wrote them: the meta row and a queue `work` (lease 45 s, retry backoff
/// 5 s to 600 s by 2.0) created at 1,700,000,000,000 ms.
const FORMAT_4_ROWS: [(&str, &str); 2] = [
    ("00", "04e8d795ffbc310102"),
    (
        "0100000001",
        "10000000000000000000000000000000010364657604776f726b80d095ffbc31002d00808c158080100000\
         0105d804d00f00",
    ),
];

#[test]
fn rows_of_format_4_restore_with_no_tags_no_default_wait_and_modified_at_their_creation() {
    let mut engine = restore_hex(&FORMAT_4_ROWS);
    let work = engine.get_queue(ACCOUNT, "work").expect("work");
    assert_eq!(work.lease_seconds, 45);
    assert_eq!(work.retry_backoff.map(|b| b.max_seconds), Some(600));
    assert_eq!(work.modified_at, work.created_at);
    assert_eq!(work.receive_wait_seconds, 0);
    assert!(work.tags.is_empty());
    engine.apply(Entry {
        now: 1_700_000_002_000,
        command: Command::Tick,
    });
    let meta = engine.row_value(&RowKey::Meta).expect("meta row");
    assert_eq!(
        meta[0], FORMAT_VERSION as u8,
        "the meta row is written in today's format from now on"
    );
}

/// Rows as row format 5 wrote them: the meta row (next sequence number 2) and the FIFO queue
/// `jobs.fifo` (default wait 5 s, tag `team` = `core`, changed at 1,700,000,001,000 ms), with
/// the deduplication record of `d` for message 9 (sequence number 1), kept until
/// 1,700,000,300,000 ms.
const FORMAT_5_ROWS: [(&str, &str); 3] = [
    ("00", "05d0df95ffbc310202"),
    (
        "0100000001",
        "100000000000000000000000000000000103646576096a6f62732e6669666f80d095ffbc31001e00808c15\
         8080100000000500e8d795ffbc3101047465616d04636f7265",
    ),
    (
        "030000000164",
        "100000000000000000000000000000000901e0f7a7ffbc31",
    ),
];

#[test]
fn rows_of_format_5_restore_deduplicating_per_queue_with_no_policy() {
    let mut h = Harness::over(restore_hex(&FORMAT_5_ROWS), 1_700_000_003_000);
    let jobs = h.engine.get_queue(ACCOUNT, "jobs.fifo").expect("jobs.fifo");
    assert_eq!(jobs.receive_wait_seconds, 5);
    assert_eq!(jobs.modified_at, 1_700_000_001_000);
    assert_eq!(jobs.tags["team"], "core");
    assert_eq!(jobs.deduplication_scope, DeduplicationScope::Queue);
    assert_eq!(jobs.fifo_throughput_limit, FifoThroughputLimit::PerQueue);
    assert_eq!(jobs.policy, None);
    let resent = h.message("again").in_group("other").deduplicated_by("d");
    let result = h.try_send_msg("jobs.fifo", resent).expect("send");
    assert!(
        result.duplicate,
        "the restored record covers the whole queue"
    );
    assert_eq!(result.message_id, uuid::Uuid::from_u128(9));
}

// ---- deduplication scope, throughput limit, policy, trace header ------------------------------

fn fifo_settings(scope: Option<&str>, limit: Option<&str>) -> QueueAttributes {
    QueueAttributes {
        deduplication_scope: scope.map(str::to_string),
        fifo_throughput_limit: limit.map(str::to_string),
        ..Default::default()
    }
}

fn send_deduplicated(h: &mut Harness, group: &str, id: &str) -> SendResult {
    let m = h.message(group).in_group(group).deduplicated_by(id);
    h.try_send_msg("jobs.fifo", m).expect("send")
}

#[test]
fn a_queue_deduplicating_per_message_group_takes_one_id_once_in_each_group() {
    let mut h = Harness::new();
    let high = fifo_settings(Some("message_group"), Some("per_message_group_id"));
    let view = h.create_with("jobs.fifo", high);
    assert_eq!(view.deduplication_scope, DeduplicationScope::MessageGroup);
    assert_eq!(
        view.fifo_throughput_limit,
        FifoThroughputLimit::PerMessageGroupId
    );
    let first = send_deduplicated(&mut h, "a", "d");
    let other_group = send_deduplicated(&mut h, "b", "d");
    let again = send_deduplicated(&mut h, "a", "d");
    assert!(!first.duplicate && !other_group.duplicate);
    assert_ne!(first.message_id, other_group.message_id);
    assert!(
        again.duplicate,
        "the same ID in the same group is a duplicate"
    );
    assert_eq!(again.message_id, first.message_id);
    assert_eq!(h.receive("jobs.fifo", 10).len(), 2);

    let restored = Engine::restore("local", h.store.engine_rows()).expect("restores");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    h.engine = restored;
    assert!(
        send_deduplicated(&mut h, "b", "d").duplicate,
        "records persist"
    );
    h.advance(5 * 60 + 1);
    h.tick();
    assert!(
        !send_deduplicated(&mut h, "b", "d").duplicate,
        "the window ends"
    );
}

#[test]
fn a_queue_deduplicating_per_queue_takes_one_id_once_in_all_groups() {
    let mut h = Harness::new();
    h.create_with("jobs.fifo", fifo_settings(Some("queue"), None));
    let first = send_deduplicated(&mut h, "a", "d");
    let other_group = send_deduplicated(&mut h, "b", "d");
    assert!(other_group.duplicate);
    assert_eq!(other_group.message_id, first.message_id);
}

#[test]
fn the_per_group_throughput_limit_needs_per_group_deduplication_and_fifo_settings_a_fifo_queue() {
    let mut h = Harness::with_queue("jobs");
    h.create("jobs.fifo");
    let before = h.snapshot();
    let standard = [
        (fifo_settings(Some("queue"), None), "deduplication_scope"),
        (
            fifo_settings(None, Some("per_queue")),
            "fifo_throughput_limit",
        ),
    ];
    for (attributes, field) in standard {
        let rule = invalid(h.try_patch("jobs", attributes.clone()), field);
        assert_eq!(rule, raftq_engine::validate::FIFO_ONLY);
        invalid(h.try_create("other", attributes), field);
    }
    let refused = [
        (fifo_settings(Some("group"), None), "deduplication_scope"),
        (
            fifo_settings(None, Some("per_group")),
            "fifo_throughput_limit",
        ),
        (
            fifo_settings(None, Some("per_message_group_id")),
            "fifo_throughput_limit",
        ),
        (
            fifo_settings(Some("queue"), Some("per_message_group_id")),
            "fifo_throughput_limit",
        ),
    ];
    for (attributes, field) in refused {
        invalid(h.try_patch("jobs.fifo", attributes.clone()), field);
        invalid(h.try_create("new.fifo", attributes), field);
    }
    assert_eq!(h.snapshot(), before, "refusals change nothing");
    let high = fifo_settings(Some("message_group"), Some("per_message_group_id"));
    h.try_patch("jobs.fifo", high).expect("both at once");
    let rule = invalid(
        h.try_patch("jobs.fifo", fifo_settings(Some("queue"), None)),
        "deduplication_scope",
    );
    assert!(rule.contains("per-message-group"), "{rule}");
    let normal = fifo_settings(Some("queue"), Some("per_queue"));
    let view = h.try_patch("jobs.fifo", normal).expect("both back");
    assert_eq!(view.deduplication_scope, DeduplicationScope::Queue);
}

#[test]
fn a_policy_is_kept_as_given_up_to_8192_bytes_and_removed_by_none() {
    let mut h = Harness::new();
    let document = r#"{"Version":"2012-10-17","Statement":[]}"#;
    let with = |policy: Option<String>| QueueAttributes {
        policy: Some(policy),
        ..Default::default()
    };
    let view = h.create_with("q", with(Some(document.into())));
    assert_eq!(view.policy.as_deref(), Some(document));
    let before = h.snapshot();
    invalid(h.try_patch("q", with(Some("x".repeat(8193)))), "policy");
    invalid(h.try_patch("q", with(Some(String::new()))), "policy");
    assert_eq!(h.snapshot(), before);
    let largest = "x".repeat(8192);
    let view = h
        .try_patch("q", with(Some(largest.clone())))
        .expect("8192 bytes");
    assert_eq!(view.policy, Some(largest));
    let restored = Engine::restore("local", h.store.engine_rows()).expect("restores");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    let view = h.try_patch("q", with(None)).expect("removed");
    assert_eq!(view.policy, None);
}

#[test]
fn a_trace_header_is_kept_with_its_message_and_is_not_part_of_its_size() {
    let mut h = Harness::new();
    h.create_with("q", attrs(&[("max_message_bytes", 5)]));
    let header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";
    let mut m = h.message("hello");
    m.trace_header = Some(header.into());
    h.try_send_msg("q", m).expect("a 5-byte body with a header");
    let got = h.receive("q", 1);
    let payload = h.store.payload(got[0].meta.storage_key).expect("payload");
    assert_eq!(payload.trace_header.as_deref(), Some(header));
    let before = h.snapshot();
    for bad in [String::new(), "a\nb".into(), "x".repeat(1025)] {
        let mut m = h.message("hello");
        m.trace_header = Some(bad);
        invalid(h.try_send_msg("q", m), "trace_header");
    }
    assert_eq!(h.snapshot(), before);
}
