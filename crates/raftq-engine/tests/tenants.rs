//! Fair standard queues: the message group ID of a standard queue names a tenant, and a receive
//! serves the tenant with the fewest messages in flight first, its oldest visible message first
//! (docs/semantics.md). A queue without group IDs delivers oldest first, as it always did.

mod support;

use raftq_engine::Delivery;
use support::*;

/// The tenant of each delivery, from its payload.
fn tenants_of(h: &Harness, deliveries: &[Delivery]) -> Vec<String> {
    deliveries
        .iter()
        .map(|d| h.tenant(d.meta.storage_key))
        .collect()
}

/// A queue's tenants with a message, and the most messages one of them has in flight.
fn tenant_counts(h: &Harness, queue: &str) -> (u64, u64) {
    let stats = h.engine.stats(ACCOUNT, queue, h.now).expect("stats");
    (stats.active_tenants, stats.largest_tenant_in_flight)
}

#[test]
fn a_quiet_tenant_is_served_before_a_noisy_tenant_s_backlog() {
    let mut h = Harness::with_queue("work");
    for i in 0..100 {
        h.send_as("work", "noisy", &format!("n{i}"));
    }
    for t in 0..9 {
        h.send_as("work", &format!("quiet-{t}"), &format!("q{t}"));
    }
    // The first receive takes one message of every tenant: each then has one in flight.
    let first = h.receive("work", 10);
    let mut tenants = tenants_of(&h, &first);
    tenants.sort();
    let mut expected: Vec<String> = (0..9).map(|t| format!("quiet-{t}")).collect();
    expected.insert(0, "noisy".into());
    assert_eq!(tenants, expected);
    assert_eq!(
        h.bodies(&first[..1]),
        ["n0"],
        "equal in flight: oldest first"
    );

    // A quiet tenant's next message goes ahead of the noisy backlog while it has fewer in
    // flight; the noisy tenant gets what no one else wants.
    for d in &first[1..] {
        h.ack("work", &d.receipt).expect("ack");
    }
    h.send_as("work", "quiet-3", "q3-again");
    let next = h.receive("work", 3);
    assert_eq!(h.bodies(&next), ["q3-again", "n1", "n2"]);
    assert_eq!(tenant_counts(&h, "work"), (2, 3));
}

#[test]
fn messages_without_a_group_id_are_one_tenant_and_alone_keep_oldest_first() {
    let mut h = Harness::with_queue("plain");
    for i in 0..5 {
        h.send("plain", &format!("m{i}"));
    }
    let got = h.receive("plain", 3);
    assert_eq!(h.bodies(&got), ["m0", "m1", "m2"]);
    assert_eq!(tenant_counts(&h, "plain"), (0, 0));

    // Beside a named tenant, the unnamed messages count as one tenant of their own.
    h.send_as("plain", "t", "t0");
    let got = h.receive("plain", 2);
    assert_eq!(h.bodies(&got), ["t0", "m3"]);
}

#[test]
fn a_tenant_is_forgotten_when_its_last_message_goes_and_counts_again_when_it_returns() {
    let mut h = Harness::with_queue("work");
    for (tenant, body) in [("a", "a0"), ("b", "b0")] {
        h.send_as("work", tenant, body);
    }
    let got = h.receive("work", 2);
    assert_eq!(tenant_counts(&h, "work"), (2, 1));
    for d in &got {
        h.ack("work", &d.receipt).expect("ack");
    }
    assert_eq!(tenant_counts(&h, "work"), (0, 0));
    h.send_as("work", "b", "b1");
    assert_eq!(tenant_counts(&h, "work"), (1, 0));
}

#[test]
fn an_expired_lease_gives_the_message_back_to_its_tenant_in_its_old_place() {
    let mut h = Harness::with_queue("work");
    for (tenant, body) in [("a", "a0"), ("a", "a1"), ("b", "b0")] {
        h.send_as("work", tenant, body);
    }
    let first = h.receive_leased("work", 1, 5);
    assert_eq!(h.bodies(&first), ["a0"]);
    h.advance(6);
    h.tick();
    // a0 is visible again and the oldest; a has nothing in flight, like b.
    let again = h.receive("work", 3);
    assert_eq!(h.bodies(&again), ["a0", "b0", "a1"]);
    assert_eq!(again[0].meta.receive_count, 2);
}

/// The rule holds at every step of a long mixed history: before each message a receive takes,
/// no tenant with a visible message has fewer messages in flight than the chosen one, and among
/// those with as few, none has an older visible message; within the tenant it is the oldest.
#[test]
fn every_choice_is_the_fewest_in_flight_then_oldest_over_a_long_history() {
    let mut h = Harness::with_queue("work");
    let mut receipts = Vec::new();
    // A deterministic interleaving of skewed sends, receives, acks and expiries.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for step in 0..3_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match x % 10 {
            0..=4 => {
                // Tenant 0 sends as much as the other seven together.
                let t = if x.is_multiple_of(2) {
                    0
                } else {
                    1 + (x >> 8) % 7
                };
                h.send_as("work", &format!("t{t}"), &format!("s{step}"));
            }
            5..=7 => {
                let before = h
                    .engine
                    .peek(ACCOUNT, "work", None, Some(100))
                    .expect("peek");
                if before.len() == 100 {
                    // Keep the whole queue within one peek page.
                    let d = h.receive("work", 10);
                    receipts.extend(d.into_iter().map(|d| d.receipt));
                    continue;
                }
                let got = h.receive_leased("work", 1 + (x >> 8) as i64 % 4, 20);
                check_fair_choices(&h, &before, &got);
                receipts.extend(got.into_iter().map(|d| d.receipt));
            }
            8 => {
                if let Some(r) = receipts.pop() {
                    let _ = h.ack("work", &r);
                }
            }
            _ => h.advance(3),
        }
    }
}
