//! Property tests: random command sequences with random (sometimes backward) timestamps, checked
//! after every step against the invariants of SPEC.md §2, for determinism, and for restore. The
//! source queues retry with a backoff, and the standard one serves its tenants fairly. FIFO
//! receives sometimes carry one of a few attempt IDs, so that retries replay their answer.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use raftq_engine::{
    AllowPolicyInput, Command, Engine, EngineError, MessageMeta, MessageState, Outcome,
    QueueAttributes,
};
use support::*;
use uuid::Uuid;

const QUEUES: [&str; 4] = ["std", "std-dlq", "f.fifo", "f-dlq.fifo"];
const RETENTION: i64 = 240;

#[derive(Debug, Clone)]
enum Op {
    Send {
        queue: usize,
        group: u8,
        dedup: u8,
        delay: i64,
    },
    Receive {
        queue: usize,
        max: i64,
        lease: i64,
        /// FIFO queues: the receive attempt ID `a<n>`.
        attempt: Option<u8>,
    },
    Ack {
        pick: usize,
    },
    ChangeLease {
        pick: usize,
        secs: i64,
        /// The wait of a release (`secs` 0).
        delay: Option<i64>,
    },
    Advance {
        ms: u64,
    },
    /// An entry stamped earlier than the last one (a new leader with a slower clock).
    Backward {
        ms: u64,
    },
    Tick,
    ToggleAllow {
        queue: usize,
        deny: bool,
    },
    Purge {
        queue: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4usize, 0..3u8, 0..12u8, prop_oneof![Just(0i64), 1..20i64])
            .prop_map(|(queue, group, dedup, delay)| Op::Send { queue, group, dedup, delay }),
        5 => (0..4usize, 1..5i64, prop_oneof![Just(0i64), 1..40i64], prop::option::weighted(0.7, 0..2u8))
            .prop_map(|(queue, max, lease, attempt)| Op::Receive { queue, max, lease, attempt }),
        // Receives of the FIFO source under a few attempt IDs, with leases long enough to be
        // retried while they hold.
        3 => (1..5i64, 30..120i64, 0..2u8).prop_map(|(max, lease, n)| Op::Receive {
            queue: 2,
            max,
            lease,
            attempt: Some(n),
        }),
        4 => any::<usize>().prop_map(|pick| Op::Ack { pick }),
        1 => (any::<usize>(), 0..30i64, prop::option::of(0..20i64))
            .prop_map(|(pick, secs, delay)| Op::ChangeLease { pick, secs, delay }),
        4 => (0..70_000u64).prop_map(|ms| Op::Advance { ms }),
        1 => (0..5_000u64).prop_map(|ms| Op::Backward { ms }),
        1 => Just(Op::Tick),
        1 => (prop_oneof![Just(1usize), Just(3usize)], any::<bool>())
            .prop_map(|(queue, deny)| Op::ToggleAllow { queue, deny }),
        1 => (0..4usize).prop_map(|queue| Op::Purge { queue }),
    ]
}

fn setup() -> Harness {
    let mut h = Harness::new();
    let retention = |mut a: QueueAttributes| {
        a.retention_seconds = Some(RETENTION);
        a
    };
    h.create_with("std-dlq", retention(QueueAttributes::default()));
    let retried = |target: &str, retry: QueueAttributes| QueueAttributes {
        retry_backoff: retry.retry_backoff,
        ..retention(redrive(target, 3))
    };
    h.create_with("std", retried("std-dlq", backoff(1, 8, 2.0)));
    h.create_with("f-dlq.fifo", retention(QueueAttributes::default()));
    h.create_with("f.fifo", retried("f-dlq.fifo", backoff(2, 10, 1.5)));
    h
}

/// Turns an op into a command at the harness clock (the stream of commands is what two
/// engines must agree on).
fn command(h: &mut Harness, op: &Op, receipts: &[(usize, String)]) -> Option<Command> {
    let account = ACCOUNT.to_string();
    Some(match *op {
        Op::Send {
            queue,
            group,
            dedup,
            delay,
        } => {
            let mut m = h.message(&format!("body-{}", h.now % 997));
            m.delay_seconds = Some(delay);
            m.message_group_id = Some(format!("g{group}"));
            if queue >= 2 {
                m.message_deduplication_id = Some(format!("d{dedup}"));
            }
            Command::Send {
                account,
                queue: QUEUES[queue].into(),
                message: m,
            }
        }
        Op::Receive {
            queue,
            max,
            lease,
            attempt,
        } => Command::Receive {
            account,
            queue: QUEUES[queue].into(),
            max_messages: Some(max),
            lease_seconds: Some(lease),
            attempt_id: attempt
                .filter(|_| QUEUES[queue].ends_with(".fifo"))
                .map(|n| format!("a{n}")),
        },
        Op::Ack { pick } => {
            let (queue, receipt) = receipts.get(pick % receipts.len().max(1))?.clone();
            Command::Ack {
                account,
                queue: QUEUES[queue].into(),
                receipts: vec![receipt],
            }
        }
        Op::ChangeLease { pick, secs, delay } => {
            let (queue, receipt) = receipts.get(pick % receipts.len().max(1))?.clone();
            Command::ChangeLease {
                account,
                queue: QUEUES[queue].into(),
                receipt,
                lease_seconds: secs,
                delay_seconds: delay.filter(|_| secs == 0),
            }
        }
        Op::Advance { .. } | Op::Backward { .. } | Op::Tick => Command::Tick,
        Op::ToggleAllow { queue, deny } => Command::PatchQueue {
            account,
            queue: QUEUES[queue].into(),
            attributes: QueueAttributes {
                redrive_allow_policy: Some(AllowPolicyInput {
                    permission: Some(if deny { "deny_all" } else { "allow_all" }.into()),
                    source_queues: None,
                }),
                ..Default::default()
            },
        },
        Op::Purge { queue } => Command::Purge {
            account,
            queue: QUEUES[queue].into(),
        },
    })
}

/// Every message of a queue, paging through peek.
fn all_messages(engine: &Engine, queue: &str) -> Vec<MessageMeta> {
    let mut out: Vec<MessageMeta> = Vec::new();
    loop {
        let after = out.last().map(|m| m.seq);
        let page = engine.peek(ACCOUNT, queue, after, Some(100)).expect("peek");
        let done = page.len() < 100;
        out.extend(page);
        if done {
            return out;
        }
    }
}

/// What the checker knows of the history.
#[derive(Default)]
struct Model {
    /// Accepted (non-duplicate) sends: message ID → queue index.
    sent: HashMap<Uuid, usize>,
    acked: BTreeSet<Uuid>,
    purged: BTreeSet<Uuid>,
    /// Where and when each message was last seen: (queue, enqueued_at).
    last_seen: HashMap<Uuid, (usize, u64)>,
    /// Leases by message ID: receipt and lease end (active while the end is after now).
    leases: HashMap<Uuid, (String, u64)>,
    /// Receipts handed out: (queue, receipt), message ID.
    receipts: Vec<(usize, String)>,
    receipt_ids: HashMap<String, Uuid>,
}

fn run(ops: &[Op], restore_at: Option<usize>) -> (Vec<String>, BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut h = setup();
    let mut model = Model::default();
    let mut log = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        if restore_at == Some(step) {
            h.engine = Engine::restore("local", h.store.rows.clone()).expect("restore");
        }
        match op {
            Op::Advance { ms } => h.advance_ms(*ms),
            Op::Backward { ms } => h.now = h.now.saturating_sub(*ms),
            _ => {}
        }
        let Some(cmd) = command(&mut h, op, &model.receipts) else {
            continue;
        };
        if let Op::Purge { queue } = op {
            // Fire what is due first, so the messages collected are the ones the purge removes.
            h.tick();
            for m in all_messages(&h.engine, QUEUES[*queue]) {
                if let Some(p) = h.store.payload(m.storage_key) {
                    model.purged.insert(p.message_id);
                }
            }
        }
        let before_receive = match op {
            Op::Receive { queue, .. } => {
                // Fire what is due first, so the listing is what the receive starts from.
                h.tick();
                all_messages(&h.engine, QUEUES[*queue])
            }
            _ => Vec::new(),
        };
        let before_now = h.engine.now();
        let result = h.apply(cmd.clone());
        log.push(format!("{result:?}"));
        let now = h.engine.now();
        assert!(now >= before_now, "time went backwards");
        // Leases the engine has ended by now.
        model.leases.retain(|_, (_, until)| *until > now);
        check_outcome(&h, &mut model, op, &cmd, result, &before_receive);
        check_state(&h, &mut model);
    }
    (log, h.snapshot())
}

fn check_outcome(
    h: &Harness,
    model: &mut Model,
    op: &Op,
    cmd: &Command,
    result: Result<Outcome, EngineError>,
    before_receive: &[MessageMeta],
) {
    let now = h.engine.now();
    match (op, result) {
        (Op::Send { queue, .. }, Ok(Outcome::Sent(r))) => {
            if r.duplicate {
                assert!(
                    model.sent.contains_key(&r.message_id),
                    "duplicate of unknown"
                );
            } else {
                assert!(model.sent.insert(r.message_id, *queue).is_none());
            }
        }
        (Op::Receive { queue, .. }, Ok(Outcome::Received(ds)))
            if !ds.is_empty()
                && ds
                    .iter()
                    .all(|d| model.receipt_ids.contains_key(&d.receipt)) =>
        {
            // Receipts already handed out: a replay of an attempt, whose every message must
            // still be under that very lease; the leases start again.
            for d in &ds {
                let id = model.receipt_ids[&d.receipt];
                let lease = model.leases.get(&id);
                assert!(
                    lease.is_some_and(|(receipt, _)| *receipt == d.receipt),
                    "a replay of a touched lease"
                );
                if d.lease_expires_at > now {
                    model
                        .leases
                        .insert(id, (d.receipt.clone(), d.lease_expires_at));
                } else {
                    model.leases.remove(&id);
                }
            }
            assert!(
                QUEUES[*queue].ends_with(".fifo"),
                "a replay on a standard queue"
            );
        }
        (Op::Receive { queue, .. }, Ok(Outcome::Received(ds))) => {
            for d in &ds {
                let p = h
                    .store
                    .payload(d.meta.storage_key)
                    .expect("payload of delivery");
                assert!(model.sent.contains_key(&p.message_id), "delivered unsent");
                assert!(
                    !model.acked.contains(&p.message_id),
                    "redelivered after ack"
                );
                assert!(
                    !model.leases.contains_key(&p.message_id),
                    "two active leases on one message"
                );
                if d.lease_expires_at > now {
                    model
                        .leases
                        .insert(p.message_id, (d.receipt.clone(), d.lease_expires_at));
                }
                model.receipts.push((*queue, d.receipt.clone()));
                model.receipt_ids.insert(d.receipt.clone(), p.message_id);
            }
            if QUEUES[*queue].ends_with(".fifo") {
                check_fifo_prefix(h, before_receive, &ds);
            } else {
                check_fair_choices(h, before_receive, &ds);
            }
        }
        (Op::Ack { .. }, Ok(Outcome::Acked(results))) => {
            for r in results {
                let id = model.receipt_ids.get(&r.receipt).copied();
                match (r.result, id) {
                    (Ok(()), Some(id)) => {
                        let lease = model.leases.remove(&id);
                        assert!(
                            lease.is_some_and(|(receipt, until)| receipt == r.receipt
                                && until > now),
                            "ack of inactive lease"
                        );
                        model.acked.insert(id);
                    }
                    (Err(e @ (EngineError::LeaseExpired | EngineError::MessageGone)), Some(id)) => {
                        let active = model
                            .leases
                            .get(&id)
                            .is_some_and(|(receipt, until)| *receipt == r.receipt && *until > now);
                        assert!(!active, "active lease refused");
                        if model.acked.contains(&id) {
                            assert_eq!(e, EngineError::MessageGone, "an acked message is gone");
                        }
                    }
                    (other, _) => panic!("unexpected ack result {other:?}"),
                }
            }
        }
        (Op::ChangeLease { secs, .. }, Ok(Outcome::LeaseChanged { receipt, .. })) => {
            let id = model.receipt_ids[&receipt];
            if *secs == 0 {
                model.leases.remove(&id);
            } else {
                model
                    .leases
                    .insert(id, (receipt, now + *secs as u64 * 1000));
            }
        }
        (Op::ChangeLease { .. }, Err(EngineError::LeaseExpired | EngineError::MessageGone)) => {}
        (_, Ok(_)) => {}
        (_, Err(e)) => panic!("unexpected refusal of {cmd:?}: {e:?}"),
    }
}

/// The delivered messages of each group are the oldest messages of that group that were in the
/// queue when the receive started, in order: nothing earlier was leased, waiting or skipped.
fn check_fifo_prefix(h: &Harness, present: &[MessageMeta], deliveries: &[raftq_engine::Delivery]) {
    let group_of = |key: u64| h.store.payload(key).and_then(|p| p.message_group_id);
    let mut by_group: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for d in deliveries {
        if let Some(g) = group_of(d.meta.storage_key) {
            by_group.entry(g).or_default().push(d.meta.seq);
        }
    }
    for (group, delivered) in by_group {
        let in_group: Vec<u64> = present
            .iter()
            .filter(|m| group_of(m.storage_key).as_deref() == Some(group.as_str()))
            .map(|m| m.seq)
            .collect();
        assert_eq!(
            &in_group[..delivered.len().min(in_group.len())],
            &delivered[..],
            "FIFO order broken in group {group}"
        );
    }
}

fn check_state(h: &Harness, model: &mut Model) {
    let now = h.engine.now();
    let mut present: HashMap<Uuid, usize> = HashMap::new();
    let mut keys = BTreeSet::new();
    for (qi, name) in QUEUES.iter().enumerate() {
        let msgs = all_messages(&h.engine, name);
        let stats = h.engine.stats(ACCOUNT, name, now).expect("stats");
        let count = |s: MessageState| msgs.iter().filter(|m| m.state == s).count() as u64;
        assert_eq!(stats.visible, count(MessageState::Visible), "visible count");
        assert_eq!(stats.leased, count(MessageState::Leased), "leased count");
        assert_eq!(stats.delayed, count(MessageState::Delayed), "delayed count");
        assert_eq!(
            stats.pending_redrive,
            count(MessageState::PendingRedrive),
            "pending count"
        );
        for m in msgs {
            keys.insert(m.storage_key);
            let p = h
                .store
                .payload(m.storage_key)
                .expect("payload of a queued message");
            assert!(
                present.insert(p.message_id, qi).is_none(),
                "message in two queues"
            );
            if m.state == MessageState::Leased {
                let until = model.leases.get(&p.message_id).map(|(_, u)| *u);
                assert_eq!(until, m.until, "lease end");
            } else {
                assert!(!model.leases.contains_key(&p.message_id), "lease not ended");
            }
            model.last_seen.insert(p.message_id, (qi, m.enqueued_at));
        }
    }
    // Purge and retention end leases with the message.
    model.leases.retain(|id, _| present.contains_key(id));
    // Nothing vanishes: every accepted send is queued, acked, purged, or expired by retention.
    for id in model.sent.keys() {
        if present.contains_key(id) || model.acked.contains(id) || model.purged.contains(id) {
            continue;
        }
        let (_, enqueued) = model.last_seen[id];
        assert!(
            enqueued + RETENTION as u64 * 1000 <= now,
            "message {id} vanished"
        );
    }
    // The persisted rows are exactly the engine's state; payloads exactly the queued messages
    // and the purged ones not yet reclaimed.
    assert_eq!(
        h.store.engine_rows(),
        h.engine.export_rows(),
        "rows drifted"
    );
    let stored = h.store.payload_keys();
    assert!(stored.is_superset(&keys), "payloads drifted");
    assert_eq!(
        stored.len() as u64,
        keys.len() as u64 + h.engine.reclaim_backlog(),
        "payloads drifted"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_histories_keep_every_invariant(ops in prop::collection::vec(op(), 1..120)) {
        run(&ops, None);
    }

    #[test]
    fn the_same_history_gives_byte_identical_snapshots(ops in prop::collection::vec(op(), 1..80)) {
        let (log_a, rows_a) = run(&ops, None);
        let (log_b, rows_b) = run(&ops, None);
        prop_assert_eq!(log_a, log_b);
        prop_assert_eq!(rows_a, rows_b);
    }

    #[test]
    fn restoring_a_snapshot_then_continuing_equals_continuing(
        ops in prop::collection::vec(op(), 2..100),
        split in any::<prop::sample::Index>(),
    ) {
        let at = split.index(ops.len());
        let (log_a, rows_a) = run(&ops, None);
        let (log_b, rows_b) = run(&ops, Some(at));
        prop_assert_eq!(log_a, log_b);
        prop_assert_eq!(rows_a, rows_b);
    }
}
