//! Property tests of priorities and scheduled messages: random command sequences, checked after
//! every step. Under strict order a receive never takes a lower level while a higher one has a
//! visible message; under `priority_weights` the levels are served in ratio (within 5% over
//! 10,000 deliveries); a scheduled message is never delivered before its `deliver_at` by the
//! state's clock, and none is lost across a restore of the state from its rows.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use raftq_engine::{Command, Delivery, Engine, MessageState, Outcome, QueueAttributes};
use support::*;
use uuid::Uuid;

#[derive(Debug, Clone)]
enum Op {
    Send {
        priority: i64,
        tenant: u8,
        /// 0: none; else the ms ahead (or, when negative, behind) of `deliver_at`.
        schedule_ms: i64,
    },
    Receive {
        max: i64,
        lease: i64,
    },
    Ack {
        pick: usize,
    },
    Cancel {
        pick: usize,
    },
    Advance {
        ms: u64,
    },
    /// An entry stamped earlier than the last one (a new leader with a slower clock).
    Backward {
        ms: u64,
    },
    Restore,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..10i64, 0..3u8, prop_oneof![Just(0i64), -5_000..60_000i64])
            .prop_map(|(priority, tenant, schedule_ms)| Op::Send { priority, tenant, schedule_ms }),
        5 => (1..5i64, prop_oneof![Just(0i64), 1..40i64])
            .prop_map(|(max, lease)| Op::Receive { max, lease }),
        3 => any::<usize>().prop_map(|pick| Op::Ack { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        3 => (0..30_000u64).prop_map(|ms| Op::Advance { ms }),
        1 => (0..5_000u64).prop_map(|ms| Op::Backward { ms }),
        1 => Just(Op::Restore),
    ]
}

/// What the checker knows of the history.
#[derive(Default)]
struct Model {
    /// Accepted sends: message ID → its `deliver_at`, if it had one.
    sent: BTreeMap<Uuid, Option<u64>>,
    cancelled: BTreeSet<Uuid>,
    acked: BTreeSet<Uuid>,
    /// Receipts handed out, with their message IDs.
    receipts: Vec<(String, Uuid)>,
}

/// The ID of a delivered message, from its payload.
fn id_of(h: &Harness, d: &Delivery) -> Uuid {
    h.store
        .payload(d.meta.storage_key)
        .expect("a delivered message has its payload")
        .message_id
}

/// The priorities of the queue's visible messages (the receive's entry fires nothing more:
/// the caller ticked at the same time first).
fn visible_levels(h: &Harness) -> BTreeMap<u8, usize> {
    let mut levels = BTreeMap::new();
    let mut after = None;
    loop {
        let page = h.engine.peek(ACCOUNT, "q", after, Some(100)).expect("peek");
        after = page.last().map(|m| m.seq);
        for m in page.iter().filter(|m| m.state == MessageState::Visible) {
            *levels.entry(m.priority.expect("a priority")).or_default() += 1;
        }
        if page.len() < 100 {
            return levels;
        }
    }
}

fn send(h: &mut Harness, model: &mut Model, priority: i64, tenant: u8, schedule_ms: i64) {
    let mut m = h.message("m").in_group(format!("t{tenant}"));
    m.priority = Some(priority);
    let deliver_at = (schedule_ms != 0).then(|| h.now as i64 + schedule_ms);
    m.deliver_at = deliver_at;
    let id = m.message_id;
    h.try_send_msg("q", m).expect("a valid send");
    let due = deliver_at
        .map(|at| at as u64)
        .filter(|&at| at > h.engine.now());
    model.sent.insert(id, due);
}

/// A receive, checked: each message it takes is of the highest level visible then, and none
/// is taken before its `deliver_at`.
fn receive(h: &mut Harness, model: &mut Model, max: i64, lease: i64) {
    h.tick();
    let mut levels = visible_levels(h);
    let got = h.receive_leased("q", max, lease);
    let now = h.engine.now();
    for d in &got {
        let priority = d.meta.priority.expect("a priority");
        let (&highest, _) = levels
            .last_key_value()
            .expect("a delivery with nothing visible");
        assert_eq!(priority, highest, "a lower level went before a higher one");
        let left = levels.get_mut(&priority).expect("its level");
        *left -= 1;
        if *left == 0 {
            levels.remove(&priority);
        }
        let id = id_of(h, d);
        if let Some(Some(at)) = model.sent.get(&id) {
            assert!(now >= *at, "delivered at {now}, before its deliver_at {at}");
        }
        assert!(
            !model.cancelled.contains(&id),
            "a cancelled message was delivered"
        );
        model.receipts.push((d.receipt.clone(), id));
    }
}

/// A cancel of a message sent with a `deliver_at`, checked: it succeeds exactly while the
/// state's clock is before that time (and the message was not cancelled already).
fn cancel(h: &mut Harness, model: &mut Model, pick: usize) {
    let scheduled: Vec<(Uuid, u64)> = model
        .sent
        .iter()
        .filter_map(|(&id, at)| Some((id, (*at)?)))
        .collect();
    let Some(&(id, at)) = scheduled.get(pick % scheduled.len().max(1)) else {
        return;
    };
    let result = h.apply(Command::CancelScheduled {
        account: ACCOUNT.into(),
        queue: "q".into(),
        id,
    });
    let now = h.engine.now();
    let cancellable = now < at && !model.cancelled.contains(&id);
    assert_eq!(
        result.is_ok(),
        cancellable,
        "cancel at {now} of one due {at}"
    );
    if result.is_ok() {
        model.cancelled.insert(id);
    }
}

fn step(h: &mut Harness, model: &mut Model, op: &Op) {
    match *op {
        Op::Send {
            priority,
            tenant,
            schedule_ms,
        } => send(h, model, priority, tenant, schedule_ms),
        Op::Receive { max, lease } => receive(h, model, max, lease),
        Op::Ack { pick } => {
            let picked = model.receipts.get(pick % model.receipts.len().max(1));
            if let Some((receipt, id)) = picked.cloned() {
                if h.ack("q", &receipt).is_ok() {
                    model.acked.insert(id);
                }
            }
        }
        Op::Cancel { pick } => cancel(h, model, pick),
        Op::Advance { ms } => h.advance_ms(ms),
        Op::Backward { ms } => h.now = h.now.saturating_sub(ms),
        Op::Restore => {
            let restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
            assert_eq!(restored.export_rows(), h.engine.export_rows());
            h.engine = restored;
        }
    }
}

/// Runs `ops`, then lets every schedule fall due and drains the queue: every message sent and
/// not cancelled is delivered, and acknowledged, in the end.
fn run(ops: &[Op]) {
    let mut h = Harness::with_queue("q");
    let mut model = Model::default();
    for op in ops {
        step(&mut h, &mut model, op);
    }
    h.now = h.now.max(h.engine.now()) + 120_000;
    for _ in 0..ops.len() + 1 {
        receive(&mut h, &mut model, 10, 30);
        let receipts = std::mem::take(&mut model.receipts);
        for (receipt, id) in receipts {
            if h.ack("q", &receipt).is_ok() {
                model.acked.insert(id);
            }
        }
    }
    let kept: BTreeSet<Uuid> = model
        .sent
        .keys()
        .filter(|id| !model.cancelled.contains(id))
        .copied()
        .collect();
    assert_eq!(
        model.acked, kept,
        "every message not cancelled is delivered"
    );
}

/// Serves `levels` (distinct priorities) of a queue with `weights` 10,000 times, one message a
/// receive, keeping every level non-empty; returns the deliveries per priority.
fn serve_weighted(levels: &[i64], weights: &[i64]) -> HashMap<u8, u32> {
    let mut h = Harness::new();
    h.create_with(
        "q",
        QueueAttributes {
            priority_weights: Some(Some(weights.to_vec())),
            ..Default::default()
        },
    );
    for &p in levels {
        for _ in 0..3 {
            h.send_at_priority("q", p, "m");
        }
    }
    let mut served: HashMap<u8, u32> = HashMap::new();
    for _ in 0..10_000 {
        let got = h.receive("q", 1);
        let priority = got[0].meta.priority.expect("a priority");
        *served.entry(priority).or_default() += 1;
        h.ack("q", &got[0].receipt).expect("ack");
        h.send_at_priority("q", i64::from(priority), "m");
    }
    served
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn priorities_never_invert_and_schedules_are_kept(
        ops in prop::collection::vec(op(), 1..120),
    ) {
        run(&ops);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn weighted_levels_are_served_within_5_percent_of_their_ratio(
        levels in prop::sample::subsequence((0..10i64).collect::<Vec<_>>(), 2..5),
        weights in prop::collection::vec(1..20i64, 1..11),
    ) {
        let served = serve_weighted(&levels, &weights);
        let weight = |p: i64| {
            let at = (p as usize).min(weights.len() - 1);
            weights[at] as f64
        };
        let total: f64 = levels.iter().map(|&p| weight(p)).sum();
        for &p in &levels {
            let expected = 10_000.0 * weight(p) / total;
            let got = f64::from(served.get(&(p as u8)).copied().unwrap_or(0));
            prop_assert!(
                (got - expected).abs() <= 0.05 * expected,
                "priority {p}: {got} deliveries, expected {expected:.0}"
            );
        }
    }
}

#[test]
fn an_outcome_of_a_cancel_is_its_own() {
    let mut h = Harness::with_queue("q");
    let sent = h.send_scheduled("q", h.now + 1_000, "m");
    let outcome = h.apply(Command::CancelScheduled {
        account: ACCOUNT.into(),
        queue: "q".into(),
        id: sent.message_id,
    });
    assert_eq!(outcome, Ok(Outcome::ScheduledCancelled));
}
