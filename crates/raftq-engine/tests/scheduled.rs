//! Scheduled messages (docs/semantics.md): a send's `deliver_at` keeps the message invisible
//! until that time of the engine's clock, like a delay; scheduled messages are listed in queue
//! order, paged, and can be cancelled by message ID until they are due.

mod support;

use raftq_engine::{Engine, MessageState};
use support::*;
use uuid::Uuid;

const HOUR_MS: u64 = 3_600_000;

/// The bodies of what a receive of up to 10 returns.
fn recv(h: &mut Harness, queue: &str) -> Vec<String> {
    let got = h.receive(queue, 10);
    h.bodies(&got)
}

#[test]
fn a_scheduled_message_is_invisible_until_its_time_then_delivered() {
    let mut h = Harness::with_queue("work");
    let at = h.now + HOUR_MS;
    let sent = h.send_scheduled("work", at, "later");
    h.send("work", "now");
    let now = h.receive("work", 10);
    assert_eq!(h.bodies(&now), ["now"]);
    h.ack("work", &now[0].receipt).expect("ack");
    let listed = h
        .engine
        .scheduled(ACCOUNT, "work", None, None)
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert!(listed[0].scheduled);
    assert_eq!(
        (listed[0].state, listed[0].until),
        (MessageState::Delayed, Some(at))
    );
    let stats = h.engine.stats(ACCOUNT, "work", h.now).expect("stats");
    assert_eq!((stats.scheduled, stats.delayed), (1, 1));

    h.now = at - 1;
    assert!(h.receive("work", 10).is_empty(), "1 ms early is early");
    h.now = at;
    let got = h.receive("work", 10);
    assert_eq!(h.bodies(&got), ["later"]);
    assert!(!got[0].meta.scheduled);
    let payload = h.store.payload(got[0].meta.storage_key).expect("payload");
    assert_eq!(payload.message_id, sent.message_id);
    assert!(h
        .engine
        .scheduled(ACCOUNT, "work", None, None)
        .expect("list")
        .is_empty());
}

#[test]
fn a_deliver_at_not_ahead_is_due_at_once_and_takes_no_default_delay() {
    let mut h = Harness::new();
    h.create_with("work", attrs(&[("delay_seconds", 60)]));
    h.send_scheduled("work", h.now - 5_000, "past");
    h.send_scheduled("work", h.now, "now");
    assert_eq!(recv(&mut h, "work"), ["past", "now"]);
    let stats = h.engine.stats(ACCOUNT, "work", h.now).expect("stats");
    assert_eq!(stats.scheduled, 0);
}

#[test]
fn deliver_at_must_come_before_the_retention_ends_and_excludes_a_delay() {
    let mut h = Harness::new();
    h.create_with("work", attrs(&[("retention_seconds", 3600)]));
    let before = h.snapshot();
    let mut m = h.message("x");
    m.deliver_at = Some((h.now + HOUR_MS) as i64);
    let err = refused(
        h.try_send_msg("work", m),
        "invalid_argument",
        Some("deliver_at"),
    );
    assert!(err.to_string().contains("retention_seconds"), "{err}");
    let mut m = h.message("x");
    m.deliver_at = Some((h.now + 1000) as i64);
    m.delay_seconds = Some(5);
    refused(
        h.try_send_msg("work", m),
        "invalid_argument",
        Some("deliver_at"),
    );
    assert_eq!(h.snapshot(), before);
    h.send_scheduled("work", h.now + HOUR_MS - 1, "just in time");
}

#[test]
fn retention_counts_from_the_send() {
    let mut h = Harness::new();
    h.create_with("work", attrs(&[("retention_seconds", 60)]));
    let sent_at = h.now;
    h.send_scheduled("work", sent_at + 59_000, "late");
    h.now = sent_at + 59_000;
    h.tick();
    assert_eq!(h.engine.stats(ACCOUNT, "work", h.now).unwrap().visible, 1);
    h.now = sent_at + 60_000;
    h.tick();
    assert!(
        h.receive("work", 10).is_empty(),
        "expired 60 s after its send"
    );
    assert!(h.store.payload_keys().is_empty());
}

#[test]
fn scheduled_messages_are_listed_in_queue_order_by_page() {
    let mut h = Harness::with_queue("work");
    let mut ids = Vec::new();
    for i in 0..25u64 {
        h.send("work", "visible");
        ids.push(
            h.send_scheduled("work", h.now + (25 - i) * 1000, "s")
                .message_id,
        );
    }
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let page = h
            .engine
            .scheduled(ACCOUNT, "work", after, Some(10))
            .expect("list");
        after = page.last().map(|m| m.seq);
        let done = page.len() < 10;
        listed.extend(page);
        if done {
            break;
        }
    }
    let listed_ids: Vec<Uuid> = listed
        .iter()
        .map(|m| h.store.payload(m.storage_key).expect("payload").message_id)
        .collect();
    assert_eq!(listed_ids, ids);
    refused(
        h.engine.scheduled(ACCOUNT, "work", None, Some(0)),
        "invalid_argument",
        Some("limit"),
    );
}

#[test]
fn a_scheduled_message_is_cancelled_before_its_time_and_not_after() {
    let mut h = Harness::with_queue("work");
    let cancelled = h.send_scheduled("work", h.now + 10_000, "cancelled");
    let kept = h.send_scheduled("work", h.now + 10_000, "kept");
    h.cancel_scheduled("work", cancelled.message_id)
        .expect("cancel before its time");
    assert_eq!(h.store.payload_keys().len(), 1, "its payload is deleted");
    refused(
        h.cancel_scheduled("work", cancelled.message_id),
        "message_not_scheduled",
        None,
    );
    refused(
        h.cancel_scheduled("work", Uuid::from_u128(u128::MAX)),
        "message_not_scheduled",
        None,
    );
    h.advance(10);
    let err = refused(
        h.cancel_scheduled("work", kept.message_id),
        "message_not_scheduled",
        None,
    );
    assert!(err.to_string().contains("due already"), "{err}");
    // The refused cancel's entry made the message due (its time came) and removed nothing.
    assert_eq!(h.engine.stats(ACCOUNT, "work", h.now).unwrap().visible, 1);
    assert_eq!(h.store.payload_keys().len(), 1);
    assert_eq!(recv(&mut h, "work"), ["kept"]);
}

#[test]
fn on_a_fifo_queue_a_scheduled_message_follows_the_rule_of_a_delay() {
    let mut h = Harness::with_queue("jobs.fifo");
    h.send_fifo("jobs.fifo", "g", "first");
    let mut m = h.message("scheduled").in_group("g").deduplicated_by("s");
    m.deliver_at = Some((h.now + 30_000) as i64);
    h.try_send_msg("jobs.fifo", m).expect("send scheduled");
    h.send_fifo("jobs.fifo", "g", "after");
    let got = h.receive("jobs.fifo", 10);
    assert_eq!(
        h.bodies(&got),
        ["first"],
        "it never blocks the messages before it"
    );
    h.ack("jobs.fifo", &got[0].receipt).expect("ack");
    assert!(
        h.receive("jobs.fifo", 10).is_empty(),
        "as the group's earliest message, it blocks the group until its time"
    );
    h.advance(30);
    assert_eq!(recv(&mut h, "jobs.fifo"), ["scheduled", "after"]);
}

#[test]
fn scheduled_messages_survive_a_restore_and_a_purge_takes_them() {
    let mut h = Harness::with_queue("work");
    let a = h.send_scheduled("work", h.now + 5_000, "a");
    let b = h.send_scheduled("work", h.now + 6_000, "b");
    let restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    h.engine = restored;
    assert_eq!(
        h.engine
            .scheduled(ACCOUNT, "work", None, None)
            .unwrap()
            .len(),
        2
    );
    h.cancel_scheduled("work", a.message_id)
        .expect("a restored schedule is cancelled by ID");
    h.apply(raftq_engine::Command::Purge {
        account: ACCOUNT.into(),
        queue: "work".into(),
    })
    .expect("purge");
    let restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    refused(
        h.cancel_scheduled("work", b.message_id),
        "message_not_scheduled",
        None,
    );
}
