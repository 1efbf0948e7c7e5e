//! Retry backoff: a message whose lease expired waits `min(max, initial × multiplier^(receive
//! count − 1))` seconds before it is visible again, on the engine's clock; a consumer may ask
//! for a wait when it releases a lease. FIFO order holds while a message waits, and redrive
//! still moves a message at its last receive.

mod support;

use raftq_engine::{EngineError, MessageState, QueueAttributes, RetryBackoff};
use support::*;

fn state_of(h: &Harness, queue: &str) -> (MessageState, Option<u64>) {
    let peeked = h.engine.peek(ACCOUNT, queue, None, Some(1)).expect("peek");
    (peeked[0].state, peeked[0].until)
}

#[test]
fn waits_grow_by_the_multiplier_up_to_the_maximum_exactly() {
    let mut h = Harness::new();
    h.create_with("work", backoff(2, 20, 3.0));
    h.send("work", "job");
    // Waits after receives 1..4: 2 s, 6 s, 18 s, then 20 s (the maximum).
    for wait in [2_000, 6_000, 18_000, 20_000] {
        let got = h.receive_leased("work", 1, 10);
        assert_eq!(got.len(), 1, "deliverable again after its wait");
        let lease_end = got[0].lease_expires_at;
        h.now = lease_end;
        h.tick();
        assert_eq!(
            state_of(&h, "work"),
            (MessageState::Delayed, Some(lease_end + wait))
        );
        h.now = lease_end + wait - 1;
        assert!(
            h.receive("work", 1).is_empty(),
            "visible before its wait ended"
        );
        h.now = lease_end + wait;
    }
    assert_eq!(h.receive("work", 1)[0].meta.receive_count, 5);
}

#[test]
fn wait_of_the_setting_rounds_down_to_milliseconds_and_stops_at_the_maximum() {
    let b = |initial_seconds, max_seconds, multiplier_thousandths| RetryBackoff {
        initial_seconds,
        max_seconds,
        multiplier_thousandths,
    };
    assert_eq!(b(1, 100, 1500).wait_ms(1), 1_000);
    assert_eq!(b(1, 100, 1500).wait_ms(4), 3_375);
    assert_eq!(b(1, 100, 1500).wait_ms(5), 5_062);
    assert_eq!(b(5, 5, 10_000).wait_ms(9), 5_000);
    assert_eq!(b(0, 60, 2000).wait_ms(30), 0, "no initial wait, no wait");
    assert_eq!(b(900, 43_200, 10_000).wait_ms(u32::MAX), 43_200_000);
    assert_eq!(b(3, 60, 1000).wait_ms(1_000), 3_000);
}

#[test]
fn a_released_lease_is_visible_at_once_unless_the_release_asks_for_a_delay() {
    let mut h = Harness::new();
    h.create_with("work", backoff(30, 300, 2.0));
    h.send("work", "job");
    let got = h.receive("work", 1);
    h.change_lease("work", &got[0].receipt, 0).expect("release");
    assert_eq!(state_of(&h, "work").0, MessageState::Visible, "no backoff");
    let got = h.receive("work", 1);
    h.change_lease_with("work", &got[0].receipt, 0, Some(7))
        .expect("release with a delay");
    assert_eq!(
        state_of(&h, "work"),
        (MessageState::Delayed, Some(h.now + 7_000))
    );
    h.advance(7);
    assert_eq!(h.receive("work", 1).len(), 1);
}

#[test]
fn a_release_delay_needs_lease_seconds_0_and_lies_in_range_else_nothing_changes() {
    let mut h = Harness::with_queue("work");
    h.send("work", "job");
    let receipt = h.receive("work", 1)[0].receipt.clone();
    let before = h.snapshot();
    for (secs, delay) in [(10, Some(5)), (0, Some(901)), (0, Some(-1))] {
        let err = h
            .change_lease_with("work", &receipt, secs, delay)
            .expect_err("refused");
        assert_eq!(err.field(), Some("delay_seconds"), "{err}");
    }
    assert_eq!(h.snapshot(), before, "a refused change changes nothing");
    assert_eq!(state_of(&h, "work").0, MessageState::Leased);
}

#[test]
fn a_waiting_message_keeps_blocking_its_fifo_group_and_order_holds() {
    let mut h = Harness::new();
    h.create_with("jobs.fifo", backoff(10, 60, 2.0));
    h.send_fifo("jobs.fifo", "g", "first");
    h.send_fifo("jobs.fifo", "g", "second");
    h.send_fifo("jobs.fifo", "other", "other");
    let got = h.receive_leased("jobs.fifo", 1, 5);
    assert_eq!(h.bodies(&got), ["first"]);
    h.advance(5);
    h.tick();
    // "first" waits 10 s; "second" must not pass it, "other" goes on.
    let during = h.receive("jobs.fifo", 10);
    assert_eq!(h.bodies(&during), ["other"]);
    h.advance(10);
    let after = h.receive("jobs.fifo", 10);
    assert_eq!(h.bodies(&after), ["first", "second"]);
}

#[test]
fn redrive_moves_the_message_at_its_last_receive_without_a_further_wait() {
    let mut h = Harness::with_queue("dlq");
    h.create_with("work", redrive("dlq", 2));
    h.try_patch("work", backoff(4, 4, 1.0)).expect("patch");
    h.send("work", "poison");
    h.receive_leased("work", 1, 1);
    h.advance(1);
    h.tick();
    assert_eq!(
        state_of(&h, "work"),
        (MessageState::Delayed, Some(h.now + 4_000))
    );
    h.advance(4);
    h.receive_leased("work", 1, 1);
    h.advance(1);
    h.tick();
    let moved = h.engine.peek(ACCOUNT, "dlq", None, None).expect("peek");
    assert_eq!(moved.len(), 1, "moved when its second lease expired");
}

#[test]
fn backoff_settings_are_checked_field_by_field_and_null_clears_them() {
    let mut h = Harness::new();
    let cases = [
        (backoff(-1, 10, 2.0), "retry_backoff.initial_seconds"),
        (backoff(901, 1000, 2.0), "retry_backoff.initial_seconds"),
        (backoff(10, 9, 2.0), "retry_backoff.max_seconds"),
        (backoff(10, 43_201, 2.0), "retry_backoff.max_seconds"),
        (backoff(1, 10, 0.99), "retry_backoff.multiplier"),
        (backoff(1, 10, 10.01), "retry_backoff.multiplier"),
        (backoff(1, 10, f64::NAN), "retry_backoff.multiplier"),
    ];
    for (attrs, field) in cases {
        let err = h.try_create("work", attrs).expect_err("refused");
        assert_eq!(err.field(), Some(field), "{err}");
    }
    let mut partial = backoff(1, 10, 2.0);
    if let Some(Some(input)) = &mut partial.retry_backoff {
        input.max_seconds = None;
    }
    let err = h.try_create("work", partial).expect_err("refused");
    assert_eq!(
        err,
        EngineError::invalid("retry_backoff.max_seconds", "is required")
    );
    assert!(
        h.engine.list_queues(ACCOUNT, "").is_empty(),
        "nothing created"
    );

    let q = h.create_with("work", backoff(0, 43_200, 1.25));
    let set = q.retry_backoff.expect("backoff");
    assert_eq!(
        (set.initial_seconds, set.max_seconds, set.multiplier()),
        (0, 43_200, 1.25)
    );
    let cleared = QueueAttributes {
        retry_backoff: Some(None),
        ..Default::default()
    };
    assert_eq!(
        h.try_patch("work", cleared).expect("patch").retry_backoff,
        None
    );
}
