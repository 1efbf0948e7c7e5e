//! Parked receives: a receive that may wait and finds nothing parks in its queue; the entry that
//! makes a message deliverable delivers it to the receive that parked first, in that entry, by
//! the rules of every receive; deadlines, ends of waits and deletions end waits with nothing;
//! parked receives are rows like the rest of the state.

mod support;

use raftq_engine::{Command, Engine, EngineError, Entry, Outcome, WaitAnswer};
use support::*;
use uuid::Uuid;

fn waiter(n: u128) -> Uuid {
    Uuid::from_u128(0xAAAA_0000 + n)
}

/// The answer of a wait that ended with nothing delivered.
fn ended(id: Uuid) -> WaitAnswer {
    WaitAnswer {
        waiter: id,
        deliveries: vec![],
    }
}

/// Parks a receive of up to `max` messages for `wait_seconds`; it must find nothing.
#[track_caller]
fn park(h: &mut Harness, queue: &str, max: i64, wait_seconds: i64, id: Uuid) {
    let (result, answers) = h.receive_wait(queue, max, wait_seconds, id);
    assert_eq!(result, Ok(Outcome::Parked));
    assert_eq!(answers, []);
}

/// Applies `command` and returns the answers to parked receives its entry gave.
#[track_caller]
fn answers_of(h: &mut Harness, command: Command) -> Vec<WaitAnswer> {
    let applied = h.apply_changes(command);
    applied.result.expect("the command succeeds");
    applied.answers
}

fn send_cmd(h: &mut Harness, queue: &str, body: &str) -> Command {
    Command::Send {
        account: ACCOUNT.into(),
        queue: queue.into(),
        message: h.message(body),
    }
}

fn ack_cmd(queue: &str, receipt: &str) -> Command {
    Command::Ack {
        account: ACCOUNT.into(),
        queue: queue.into(),
        receipts: vec![receipt.into()],
    }
}

#[test]
fn a_send_delivers_to_the_oldest_parked_receive_in_its_own_entry() {
    let mut h = Harness::with_queue("work");
    park(&mut h, "work", 10, 20, waiter(1));
    park(&mut h, "work", 10, 20, waiter(2));
    assert_eq!(h.engine.parked_count(), 2);

    let send = send_cmd(&mut h, "work", "first");
    let answers = answers_of(&mut h, send);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        answers[0].waiter,
        waiter(1),
        "the receive that parked first"
    );
    let first = &answers[0].deliveries;
    assert_eq!(h.bodies(first), ["first"]);
    assert_eq!(first[0].meta.receive_count, 1);
    assert_eq!(
        first[0].lease_expires_at,
        h.now + 30_000,
        "the queue's lease"
    );

    let send = send_cmd(&mut h, "work", "second");
    let answers = answers_of(&mut h, send);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].waiter, waiter(2));
    assert_eq!(h.bodies(&answers[0].deliveries), ["second"]);
    assert_eq!(h.engine.parked_count(), 0);

    let stats = h.engine.stats(ACCOUNT, "work", h.now).expect("stats");
    assert_eq!((stats.visible, stats.leased), (0, 2));
    h.ack("work", &first[0].receipt)
        .expect("a parked receive's receipt acks");
    let send = send_cmd(&mut h, "work", "third");
    assert_eq!(
        answers_of(&mut h, send),
        [],
        "no receive is parked any more"
    );
}

#[test]
fn a_receive_that_finds_messages_does_not_park() {
    let mut h = Harness::with_queue("work");
    h.send("work", "ready");
    let (result, answers) = h.receive_wait("work", 10, 20, waiter(1));
    match result {
        Ok(Outcome::Received(d)) => assert_eq!(h.bodies(&d), ["ready"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(answers, []);
    assert_eq!(h.engine.parked_count(), 0);
}

#[test]
fn an_ack_that_frees_a_fifo_group_delivers_to_a_parked_receive_in_the_ack_s_entry() {
    let mut h = Harness::with_queue("jobs.fifo");
    h.send_fifo("jobs.fifo", "g", "m1");
    h.send_fifo("jobs.fifo", "g", "m2");
    let held = h.receive("jobs.fifo", 1);
    assert_eq!(h.bodies(&held), ["m1"]);
    // The group is locked while m1 is leased: the receive parks.
    park(&mut h, "jobs.fifo", 10, 20, waiter(1));
    park(&mut h, "jobs.fifo", 10, 20, waiter(2));

    let answers = answers_of(&mut h, ack_cmd("jobs.fifo", &held[0].receipt));
    assert_eq!(answers.len(), 1, "one group frees one receive: {answers:?}");
    assert_eq!(answers[0].waiter, waiter(1));
    assert_eq!(h.bodies(&answers[0].deliveries), ["m2"]);
    assert_eq!(h.engine.parked_count(), 1, "the second still waits");
}

#[test]
fn lease_ends_and_delays_deliver_in_the_tick_that_fires_them() {
    let mut h = Harness::with_queue("work");
    h.send("work", "again");
    let first = h.receive_leased("work", 1, 5);
    park(&mut h, "work", 1, 20, waiter(1));
    h.advance(5);
    let answers = answers_of(&mut h, Command::Tick);
    assert_eq!(answers.len(), 1);
    assert_eq!(h.bodies(&answers[0].deliveries), ["again"]);
    assert_eq!(answers[0].deliveries[0].meta.receive_count, 2);
    assert_ne!(answers[0].deliveries[0].receipt, first[0].receipt);

    let mut delayed = h.message("later");
    delayed.delay_seconds = Some(3);
    h.try_send_msg("work", delayed).expect("send");
    park(&mut h, "work", 1, 20, waiter(2));
    h.advance(3);
    let answers = answers_of(&mut h, Command::Tick);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].waiter, waiter(2));
    assert_eq!(h.bodies(&answers[0].deliveries), ["later"]);
}

#[test]
fn a_redrive_delivers_to_a_receive_parked_on_the_dead_letter_queue() {
    let mut h = Harness::with_queue("dlq");
    h.create_with("work", redrive("dlq", 1));
    h.send("work", "poison");
    h.receive_leased("work", 1, 5);
    park(&mut h, "dlq", 1, 20, waiter(1));
    h.advance(5);
    let answers = answers_of(&mut h, Command::Tick);
    assert_eq!(answers.len(), 1);
    let moved = &answers[0].deliveries;
    assert_eq!(h.bodies(moved), ["poison"]);
    assert_eq!(
        moved[0]
            .meta
            .dead_letter_source
            .as_ref()
            .map(|s| s.name.as_str()),
        Some("work")
    );
}

#[test]
fn a_parked_receive_s_deliveries_count_towards_redrive() {
    let mut h = Harness::with_queue("dlq");
    h.create_with("work", redrive("dlq", 2));
    park(&mut h, "work", 1, 20, waiter(1));
    let send = send_cmd(&mut h, "work", "twice");
    let answers = answers_of(&mut h, send);
    assert_eq!(answers[0].deliveries[0].meta.receive_count, 1);
    h.advance(15);
    park(&mut h, "work", 1, 20, waiter(2));
    // The first lease (30 s) ends at 30 s: the tick delivers the message to the second receive.
    h.advance(15);
    let answers = answers_of(&mut h, Command::Tick);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].waiter, waiter(2));
    assert_eq!(answers[0].deliveries[0].meta.receive_count, 2);
    // Its lease ends unacknowledged at max_receive_count: the message moves.
    h.advance(30);
    h.tick();
    let stats = h.engine.stats(ACCOUNT, "dlq", h.now).expect("stats");
    assert_eq!(stats.visible, 1);
}

#[test]
fn a_wait_ends_at_its_deadline_with_nothing() {
    let mut h = Harness::with_queue("work");
    park(&mut h, "work", 1, 5, waiter(1));
    assert_eq!(h.engine.next_due(), Some(h.now + 5_000));
    h.advance_ms(4_999);
    assert_eq!(answers_of(&mut h, Command::Tick), []);
    h.advance_ms(1);
    let answers = answers_of(&mut h, Command::Tick);
    assert_eq!(answers, [ended(waiter(1))]);
    assert_eq!(h.engine.parked_count(), 0);
    assert_eq!(h.engine.next_due(), None);
    let send = send_cmd(&mut h, "work", "late");
    assert_eq!(answers_of(&mut h, send), []);
    let late = h.receive("work", 1);
    assert_eq!(h.bodies(&late), ["late"]);
}

#[test]
fn an_end_of_wait_answers_a_parked_receive_with_nothing() {
    let mut h = Harness::with_queue("work");
    park(&mut h, "work", 1, 20, waiter(1));
    let applied = h.apply_changes(Command::EndWait { waiter: waiter(1) });
    assert_eq!(applied.result, Ok(Outcome::WaitEnded));
    assert_eq!(applied.answers, [ended(waiter(1))]);
    assert_eq!(h.engine.next_due(), None, "its deadline timer is gone");
    let send = send_cmd(&mut h, "work", "kept");
    assert_eq!(answers_of(&mut h, send), []);
}

#[test]
fn an_end_of_wait_after_a_delivery_leaves_the_delivery_to_its_waiter() {
    let mut h = Harness::with_queue("work");
    park(&mut h, "work", 1, 20, waiter(1));
    let send = send_cmd(&mut h, "work", "taken");
    let answers = answers_of(&mut h, send);
    let delivered = answers[0].deliveries.clone();
    // The end comes after the entry that answered the wait: it changes nothing, and the
    // waiter's node returns what that entry delivered.
    let before = h.snapshot();
    let applied = h.apply_changes(Command::EndWait { waiter: waiter(1) });
    assert_eq!(applied.result, Ok(Outcome::WaitEnded));
    assert_eq!(applied.answers, []);
    assert_eq!(h.snapshot(), before);
    h.ack("work", &delivered[0].receipt)
        .expect("the delivery is still the waiter's");
}

#[test]
fn deleting_a_queue_ends_its_waits() {
    let mut h = Harness::with_queue("work");
    park(&mut h, "work", 1, 20, waiter(1));
    let answers = answers_of(
        &mut h,
        Command::DeleteQueue {
            account: ACCOUNT.into(),
            queue: "work".into(),
        },
    );
    assert_eq!(answers, [ended(waiter(1))]);
    assert_eq!(h.engine.parked_count(), 0);
    let rows = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(rows.parked_count(), 0, "no waiter row is left behind");
}

#[test]
fn bad_waits_are_refused_by_field_and_change_nothing() {
    let mut h = Harness::with_queue("work");
    let before = h.snapshot();
    for wait in [0, 21, -1] {
        match h.receive_wait("work", 1, wait, waiter(1)).0 {
            Err(EngineError::InvalidArgument { field, .. }) => assert_eq!(field, "wait_seconds"),
            other => panic!("wait {wait}: {other:?}"),
        }
    }
    assert_eq!(h.snapshot(), before, "a refused wait changes nothing");
    park(&mut h, "work", 1, 20, waiter(1));
    match h.receive_wait("work", 1, 20, waiter(1)).0 {
        Err(EngineError::InvalidArgument { field, .. }) => assert_eq!(field, "waiter"),
        other => panic!("{other:?}"),
    }
    match h.receive_wait("missing", 1, 20, waiter(2)).0 {
        Err(EngineError::QueueNotFound(_)) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(h.engine.parked_count(), 1);
}

#[test]
fn parked_receives_survive_a_restore_and_replicas_agree_entry_by_entry() {
    let mut h = Harness::with_queue("work");
    h.create("jobs.fifo");
    h.send_fifo("jobs.fifo", "g", "m1");
    h.send_fifo("jobs.fifo", "g", "m2");
    let held = h.receive("jobs.fifo", 1);
    park(&mut h, "work", 2, 10, waiter(1));
    park(&mut h, "work", 1, 20, waiter(2));
    park(&mut h, "jobs.fifo", 10, 20, waiter(3));
    park(&mut h, "work", 1, 3, waiter(4));

    let mut restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    assert_eq!(restored.parked_count(), 4);
    assert_eq!(restored.next_due(), h.engine.next_due());

    let steps: Vec<(u64, Command)> = vec![
        (0, send_cmd(&mut h, "work", "a")),
        (3, Command::Tick),
        (0, ack_cmd("jobs.fifo", &held[0].receipt)),
        (0, Command::EndWait { waiter: waiter(9) }),
        (1, send_cmd(&mut h, "work", "b")),
        (1, send_cmd(&mut h, "work", "c")),
        (20, Command::Tick),
    ];
    let mut answered = Vec::new();
    for (secs, command) in steps {
        h.advance(secs);
        let now = h.now;
        let a = h.apply_changes(command.clone());
        let b = restored.apply(Entry { now, command });
        assert_eq!(a.result, b.result);
        assert_eq!(a.answers, b.answers);
        assert_eq!(a.changes, b.changes);
        assert_eq!(restored.export_rows(), h.engine.export_rows());
        answered.extend(
            a.answers
                .into_iter()
                .map(|w| (w.waiter, w.deliveries.len())),
        );
    }
    assert_eq!(
        answered,
        [
            (waiter(1), 1),
            (waiter(4), 0),
            (waiter(3), 1),
            (waiter(2), 1),
        ]
    );
    assert_eq!(h.engine.parked_count(), 0);
    assert_eq!(restored.parked_count(), 0);
}
