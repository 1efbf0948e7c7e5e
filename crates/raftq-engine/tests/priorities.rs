//! Message priorities on standard queues (docs/semantics.md): strict order between levels by
//! default, a queue's `priority_weights` serving levels in ratio, fairness between tenants
//! within a level, priorities kept by retries and dead-letter moves, the counts per level, and
//! FIFO queues refusing priorities.

mod support;

use raftq_engine::{Command, Delivery, Engine, LevelStats, QueueAttributes};
use support::*;

/// Attributes with `priority_weights`.
fn weighted(weights: &[i64]) -> QueueAttributes {
    QueueAttributes {
        priority_weights: Some(Some(weights.to_vec())),
        ..Default::default()
    }
}

fn priorities(deliveries: &[Delivery]) -> Vec<u8> {
    deliveries
        .iter()
        .map(|d| {
            d.meta
                .priority
                .expect("a standard queue's message has a priority")
        })
        .collect()
}

#[test]
fn strict_order_serves_the_highest_level_first_and_oldest_first_within_it() {
    let mut h = Harness::with_queue("work");
    for (priority, body) in [(0, "low"), (5, "mid-1"), (9, "top"), (5, "mid-2")] {
        h.send_at_priority("work", priority, body);
    }
    h.send("work", "default");
    let got = h.receive("work", 10);
    assert_eq!(h.bodies(&got), ["top", "mid-1", "mid-2", "low", "default"]);
    assert_eq!(priorities(&got), [9, 5, 5, 0, 0]);
}

#[test]
fn a_queue_s_default_priority_applies_to_messages_sent_without_one() {
    let mut h = Harness::new();
    let view = h.create_with(
        "work",
        QueueAttributes {
            default_priority: Some(4),
            ..Default::default()
        },
    );
    assert_eq!(view.default_priority, 4);
    h.send_at_priority("work", 3, "explicit-3");
    h.send("work", "default-4");
    let got = h.receive("work", 10);
    assert_eq!(h.bodies(&got), ["default-4", "explicit-3"]);
    assert_eq!(priorities(&got), [4, 3]);
}

#[test]
fn bad_priorities_and_weights_are_refused_naming_the_field_and_change_nothing() {
    let mut h = Harness::with_queue("work");
    h.create("jobs.fifo");
    let before = h.snapshot();
    let mut m = h.message("x");
    m.priority = Some(10);
    refused(
        h.try_send_msg("work", m),
        "invalid_argument",
        Some("priority"),
    );
    let mut m = h.message("x");
    m.priority = Some(-1);
    refused(
        h.try_send_msg("work", m),
        "invalid_argument",
        Some("priority"),
    );
    let mut m = h.message("x").in_group("g").deduplicated_by("d");
    m.priority = Some(0);
    let err = refused(
        h.try_send_msg("jobs.fifo", m),
        "invalid_argument",
        Some("priority"),
    );
    assert!(err.to_string().contains("standard queues"), "{err}");
    for (weights, field) in [
        (vec![], "priority_weights"),
        (vec![1; 11], "priority_weights"),
        (vec![4, 0], "priority_weights[1]"),
        (vec![1001], "priority_weights[0]"),
    ] {
        refused(
            h.try_patch("work", weighted(&weights)),
            "invalid_argument",
            Some(field),
        );
    }
    refused(
        h.try_patch("jobs.fifo", weighted(&[1, 2])),
        "invalid_argument",
        Some("priority_weights"),
    );
    let default_priority = |p| QueueAttributes {
        default_priority: Some(p),
        ..Default::default()
    };
    refused(
        h.try_patch("jobs.fifo", default_priority(1)),
        "invalid_argument",
        Some("default_priority"),
    );
    refused(
        h.try_patch("work", default_priority(10)),
        "invalid_argument",
        Some("default_priority"),
    );
    assert_eq!(h.snapshot(), before);
}

#[test]
fn weights_serve_levels_in_their_ratio_and_a_short_list_repeats_its_last_weight() {
    let mut h = Harness::new();
    // Priority 0 weighs 1, priority 1 weighs 2, priorities 2-9 weigh 4 each.
    h.create_with("work", weighted(&[1, 2, 4]));
    for i in 0..400 {
        for p in [0, 1, 2, 9] {
            h.send_at_priority("work", p, &format!("p{p}-{i}"));
        }
    }
    let mut served = [0u32; 10];
    for _ in 0..(11 * 20) {
        let got = h.receive("work", 1);
        served[usize::from(priorities(&got)[0])] += 1;
    }
    // 1 + 2 + 4 + 4 = 11: every 11 deliveries serve each level its weight, exactly.
    assert_eq!(
        (served[0], served[1], served[2], served[9]),
        (20, 40, 80, 80)
    );
}

#[test]
fn weights_never_starve_a_level_and_a_lone_level_takes_every_receive() {
    let mut h = Harness::new();
    h.create_with("work", weighted(&[1, 1000]));
    h.send_at_priority("work", 0, "low");
    for i in 0..1001 {
        h.send_at_priority("work", 1, &format!("high-{i}"));
    }
    let got: Vec<Delivery> = (0..1001).flat_map(|_| h.receive("work", 1)).collect();
    assert!(
        h.bodies(&got).contains(&"low".to_string()),
        "the low level is served within one round of the weights"
    );
    assert_eq!(got.len(), 1001);
    assert_eq!(h.receive("work", 10).len(), 1, "the last high message");
}

#[test]
fn within_a_level_tenants_stay_fair() {
    let mut h = Harness::with_queue("work");
    for i in 0..5 {
        let mut m = h.message(&format!("noisy-{i}")).in_group("noisy");
        m.priority = Some(5);
        h.try_send_msg("work", m).expect("send");
    }
    let mut m = h.message("quiet").in_group("quiet");
    m.priority = Some(5);
    h.try_send_msg("work", m).expect("send");
    let mut m = h.message("low").in_group("quiet");
    m.priority = Some(1);
    h.try_send_msg("work", m).expect("send");
    let got = h.receive("work", 3);
    assert_eq!(h.bodies(&got), ["noisy-0", "quiet", "noisy-1"]);
    let rest = h.receive("work", 10);
    assert_eq!(
        h.bodies(&rest),
        ["noisy-2", "noisy-3", "noisy-4", "low"],
        "the lower level waits for the higher one, whatever its tenant's count in flight"
    );
}

#[test]
fn retries_and_dead_letter_moves_keep_the_priority() {
    let mut h = Harness::with_queue("dlq");
    h.create_with("work", redrive("dlq", 2));
    h.send_at_priority("work", 7, "urgent");
    h.send_at_priority("work", 2, "routine");
    let first = h.receive_leased("work", 1, 1);
    assert_eq!(h.bodies(&first), ["urgent"]);
    h.advance(2);
    h.tick();
    let again = h.receive_leased("work", 1, 1);
    assert_eq!(h.bodies(&again), ["urgent"], "a retry keeps its level");
    assert_eq!(priorities(&again), [7]);
    h.advance(2);
    h.tick();
    let moved = h.receive("dlq", 10);
    assert_eq!(h.bodies(&moved), ["urgent"]);
    assert_eq!(
        priorities(&moved),
        [7],
        "a dead-letter move keeps its level"
    );
}

#[test]
fn stats_count_each_level_by_state() {
    let mut h = Harness::with_queue("work");
    h.send_at_priority("work", 9, "a");
    h.send_at_priority("work", 9, "b");
    h.send_at_priority("work", 3, "c");
    let mut m = h.message("d");
    m.priority = Some(3);
    m.delay_seconds = Some(60);
    h.try_send_msg("work", m).expect("send");
    h.receive("work", 1);
    let stats = h.engine.stats(ACCOUNT, "work", h.now).expect("stats");
    let level = |visible, leased, delayed| LevelStats {
        visible,
        leased,
        delayed,
        pending_redrive: 0,
    };
    assert_eq!(stats.by_priority[9], level(1, 1, 0));
    assert_eq!(stats.by_priority[3], level(1, 0, 1));
    assert!(stats.by_priority[0].is_empty());
    assert_eq!((stats.visible, stats.leased, stats.delayed), (2, 1, 1));
}

/// Applies a command to two engines and checks they answer alike.
fn both(h: &mut Harness, other: &mut Engine, command: Command) -> Vec<Delivery> {
    let entry = raftq_engine::Entry {
        now: h.now,
        command: command.clone(),
    };
    let theirs = other.apply(entry).result;
    let ours = h.apply(command);
    assert_eq!(ours, theirs, "a restored engine answers as the original");
    match ours {
        Ok(raftq_engine::Outcome::Received(d)) => d,
        _ => Vec::new(),
    }
}

#[test]
fn priorities_and_the_round_robin_s_credits_survive_a_restore() {
    let mut h = Harness::new();
    h.create_with("work", weighted(&[1, 3]));
    for i in 0..20 {
        h.send_at_priority("work", i % 2, &format!("m{i}"));
    }
    h.receive("work", 3);
    let mut restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    let receive = Command::Receive {
        account: ACCOUNT.into(),
        queue: "work".into(),
        max_messages: Some(1),
        lease_seconds: None,
        attempt_id: None,
    };
    let got: Vec<Delivery> = (0..17)
        .flat_map(|_| both(&mut h, &mut restored, receive.clone()))
        .collect();
    assert_eq!(got.len(), 17);
    assert_eq!(restored.export_rows(), h.engine.export_rows());
}

/// The rows of an engine of row format 6: its meta row, the queue `work` (45 s lease) and one
/// message delayed 5 s, in group `g`, sent at 1,700,000,000,000 ms.
const ROWS_FORMAT_6: [(&str, &str); 3] = [
    ("00", "0680d095ffbc310202"),
    (
        "0100000001",
        "10000000000000000000000000000000020364657604776f726b80d095ffbc31002d00808c15808010000000\
         000000000080d095ffbc3100",
    ),
    (
        "02000000010000000000000001",
        "0180d095ffbc310188f795ffbc3100000501016700",
    ),
];

#[test]
fn an_engine_of_row_format_6_restores_at_priority_0_in_strict_order() {
    let mut h = Harness::over(restore_hex(&ROWS_FORMAT_6), START);
    let view = h.engine.get_queue(ACCOUNT, "work").expect("queue");
    assert_eq!((view.lease_seconds, view.default_priority), (45, 0));
    assert_eq!(view.priority_weights, None);
    h.send_at_priority("work", 1, "new");
    h.advance(5);
    let got = h.receive("work", 10);
    assert_eq!(priorities(&got), [1, 0], "the old message is at priority 0");
}
