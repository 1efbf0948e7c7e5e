//! Message move tasks: their pace under given times, the order and uniqueness of the moves,
//! cancelling, failing when a destination goes, one running task per queue, dry runs, filters,
//! the history of 10, and a restore in the middle of a task.

mod support;

use std::collections::BTreeSet;

use raftq_engine::model::limits::MOVE_TASKS_KEPT;
use raftq_engine::{
    Command, Engine, EngineError, Entry, MessageMeta, MoveFilter, MoveTaskInput, MoveTaskStatus,
    MoveTaskView, Outcome, QueueAttributes,
};
use support::*;
use uuid::Uuid;

const DLQ: &str = "dlq";
const WORK: &str = "work";

/// A harness with `work`, whose dead-letter queue is `dlq`, and `count` messages `m0`, `m1`...
/// sent to `work` and moved to `dlq` (each received once with a zero-length lease).
fn with_dead_letters(count: usize) -> Harness {
    let mut h = Harness::with_queue(DLQ);
    h.create_with(WORK, redrive(DLQ, 1));
    dead_letter(&mut h, WORK, 0..count);
    h
}

/// Sends `m<i>` for each `i` of `range` to `queue` and moves them to its dead-letter queue.
fn dead_letter(h: &mut Harness, queue: &str, range: std::ops::Range<usize>) {
    for i in range.clone() {
        h.send(queue, &format!("m{i}"));
    }
    let mut left = range.len();
    while left > 0 {
        let got = h.receive_leased(queue, 10, 0).len();
        assert!(got > 0, "every message is received");
        left -= got;
    }
}

fn try_start(
    h: &mut Harness,
    queue: &str,
    task: MoveTaskInput,
) -> Result<MoveTaskView, EngineError> {
    let task_handle = h.fresh_id();
    match h.apply(Command::StartMoveTask {
        account: ACCOUNT.into(),
        queue: queue.into(),
        task_handle,
        task,
    })? {
        Outcome::MoveTask(view) => Ok(*view),
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn start(h: &mut Harness, queue: &str, task: MoveTaskInput) -> MoveTaskView {
    try_start(h, queue, task).expect("start a move task")
}

/// A task at `rate` messages a second, back to each message's source.
fn at_rate(rate: i64) -> MoveTaskInput {
    MoveTaskInput {
        max_messages_per_second: Some(rate),
        ..MoveTaskInput::default()
    }
}

/// `task`, run dry: it counts the messages it would move and moves none.
fn dry_run(task: MoveTaskInput) -> MoveTaskInput {
    MoveTaskInput {
        dry_run: true,
        ..task
    }
}

fn try_cancel(
    h: &mut Harness,
    queue: Option<&str>,
    handle: &str,
) -> Result<MoveTaskView, EngineError> {
    match h.apply(Command::CancelMoveTask {
        account: ACCOUNT.into(),
        queue: queue.map(str::to_string),
        task_handle: handle.into(),
    })? {
        Outcome::MoveTask(view) => Ok(*view),
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn tasks(h: &Harness, queue: &str) -> Vec<MoveTaskView> {
    h.engine
        .move_tasks(ACCOUNT, queue)
        .expect("list move tasks")
}

/// The queue's newest task.
fn newest(h: &Harness, queue: &str) -> MoveTaskView {
    tasks(h, queue).remove(0)
}

fn peek_all(h: &Harness, queue: &str) -> Vec<MessageMeta> {
    h.engine
        .peek(ACCOUNT, queue, None, Some(100))
        .expect("peek")
}

/// The bodies of a queue's messages, in queue order.
fn bodies(h: &Harness, queue: &str) -> Vec<String> {
    peek_all(h, queue)
        .iter()
        .map(|m| h.store.payload(m.storage_key).expect("payload").body)
        .collect()
}

/// Ticks at each due time of the engine until `until`, returning how many messages the task of
/// `queue` had moved after each tick, with the tick's time.
fn tick_until(h: &mut Harness, queue: &str, until: u64) -> Vec<(u64, u64)> {
    let mut seen = Vec::new();
    while let Some(due) = h.engine.next_due().filter(|&d| d <= until) {
        h.now = due;
        h.tick();
        seen.push((due, newest(h, queue).moved));
    }
    h.now = until;
    seen
}

/// Whether nothing is due within the next hour (the queues' retention timers are days away).
fn no_step_due(h: &Harness) -> bool {
    h.engine
        .next_due()
        .is_none_or(|due| due > h.now + 3_600_000)
}

fn names(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("m{i}")).collect()
}

#[test]
fn the_pace_is_exact_under_the_times_given() {
    let mut h = with_dead_letters(25);
    let t0 = h.now;
    let task = start(&mut h, DLQ, at_rate(10));
    assert_eq!(task.status, MoveTaskStatus::Running);
    assert_eq!(task.to_move, 25);
    assert_eq!(task.started_at, t0);
    assert_eq!(
        h.engine.next_due(),
        Some(t0 + 100),
        "one message each 100 ms"
    );

    h.now = t0 + 99;
    h.tick();
    assert_eq!(newest(&h, DLQ).moved, 0, "nothing before its time");

    let seen = tick_until(&mut h, DLQ, t0 + 1000);
    let expected: Vec<(u64, u64)> = (1..=10).map(|k| (t0 + 100 * k, k)).collect();
    assert_eq!(seen, expected, "10 messages a second, one at each 100 ms");

    // A tick that comes late (the leader changed, say) does not catch up in a burst.
    h.now = t0 + 5000;
    h.tick();
    assert_eq!(newest(&h, DLQ).moved, 11);
    let seen = tick_until(&mut h, DLQ, t0 + 7000);
    assert_eq!(seen.len(), 14, "the rest at the pace: {seen:?}");
    assert_eq!(seen.last(), Some(&(t0 + 5000 + 1400, 25)));
    let done = newest(&h, DLQ);
    assert_eq!(done.status, MoveTaskStatus::Completed);
    assert_eq!(done.ended_at, Some(t0 + 6400));
    assert!(no_step_due(&h), "no timer once complete");
}

#[test]
fn fast_tasks_move_a_tenth_of_their_rate_every_tenth_of_a_second() {
    let mut h = with_dead_letters(120);
    let t0 = h.now;
    start(&mut h, DLQ, MoveTaskInput::default());
    assert_eq!(newest(&h, DLQ).max_messages_per_second, 500, "the default");
    let seen = tick_until(&mut h, DLQ, t0 + 1000);
    assert_eq!(
        seen,
        [(t0 + 100, 50), (t0 + 200, 100), (t0 + 240, 120)],
        "the last 20 wait only for their own 40 ms"
    );
    assert_eq!(newest(&h, DLQ).status, MoveTaskStatus::Completed);
}

#[test]
fn each_message_goes_back_to_its_source_once_oldest_first_as_a_new_message() {
    let mut h = with_dead_letters(15);
    h.create_with("other", redrive(DLQ, 1));
    dead_letter(&mut h, "other", 15..20);
    let before = peek_all(&h, DLQ);
    assert!(before.iter().all(|m| m.dead_letter_source.is_some()));
    let keys: BTreeSet<u64> = before.iter().map(|m| m.storage_key).collect();
    start(&mut h, DLQ, at_rate(20));
    let t0 = h.now;
    tick_until(&mut h, DLQ, t0 + 2000);
    let done = newest(&h, DLQ);
    assert_eq!(
        (done.status, done.moved, done.skipped, done.to_move),
        (MoveTaskStatus::Completed, 20, 0, 20)
    );
    assert!(peek_all(&h, DLQ).is_empty());
    assert_eq!(bodies(&h, WORK), names(0..15), "oldest first");
    assert_eq!(bodies(&h, "other"), names(15..20));
    let moved: Vec<MessageMeta> = [peek_all(&h, WORK), peek_all(&h, "other")].concat();
    let moved_keys: BTreeSet<u64> = moved.iter().map(|m| m.storage_key).collect();
    assert_eq!(moved_keys, keys, "every message once, none lost or copied");
    assert_eq!(h.store.payload_keys(), keys);
    for m in &moved {
        assert_eq!(m.receive_count, 0, "a new message");
        assert_eq!(m.dead_letter_source, None, "not a dead letter any more");
        assert!(m.enqueued_at > t0, "its retention counts from the move");
    }
    let gauges = h.engine.queue_gauges(h.now);
    let work = gauges.iter().find(|g| g.name == WORK).expect("work");
    assert_eq!(work.dead_lettered, 15, "moving back is no dead-lettering");
}

#[test]
fn a_destination_of_the_same_type_takes_every_message_and_fifo_keeps_groups() {
    let mut h = Harness::with_queue("dlq.fifo");
    h.create_with("work.fifo", redrive("dlq.fifo", 1));
    h.create("retry.fifo");
    for i in 0..3 {
        h.send_fifo("work.fifo", &format!("g{i}"), &format!("m{i}"));
    }
    assert_eq!(
        h.receive_leased("work.fifo", 10, 0).len(),
        3,
        "one of each group"
    );
    let task = MoveTaskInput {
        destination: Some("retry.fifo".into()),
        ..at_rate(100)
    };
    let view = start(&mut h, "dlq.fifo", task);
    assert_eq!(
        view.destination.as_ref().map(|d| d.name.as_str()),
        Some("retry.fifo")
    );
    let t0 = h.now;
    tick_until(&mut h, "dlq.fifo", t0 + 1000);
    assert_eq!(newest(&h, "dlq.fifo").moved, 3);
    assert_eq!(bodies(&h, "retry.fifo"), names(0..3));
    let got = h.receive("retry.fifo", 10);
    let groups: Vec<Option<String>> = got
        .iter()
        .map(|d| {
            h.store
                .payload(d.meta.storage_key)
                .and_then(|p| p.message_group_id)
        })
        .collect();
    assert_eq!(
        groups,
        [Some("g0".into()), Some("g1".into()), Some("g2".into())]
    );
}

#[test]
fn a_cancel_stops_the_task_and_only_a_running_task_is_cancelled() {
    let mut h = with_dead_letters(10);
    let t0 = h.now;
    let task = start(&mut h, DLQ, at_rate(10));
    tick_until(&mut h, DLQ, t0 + 300);
    let handle = task.task_handle.to_string();
    let cancelled = try_cancel(&mut h, None, &handle).expect("cancel by handle alone");
    assert_eq!(cancelled.status, MoveTaskStatus::Cancelled);
    assert_eq!(cancelled.moved, 3);
    assert_eq!(cancelled.ended_at, Some(t0 + 300));
    assert!(no_step_due(&h), "its timer is gone");
    h.advance(10);
    h.tick();
    assert_eq!(newest(&h, DLQ).moved, 3, "nothing moves after a cancel");
    assert_eq!(peek_all(&h, DLQ).len(), 7);

    let before = h.snapshot();
    refused(
        try_cancel(&mut h, Some(DLQ), &handle),
        "move_task_not_running",
        None,
    );
    refused(
        try_cancel(&mut h, Some(WORK), &handle),
        "move_task_not_found",
        None,
    );
    refused(
        try_cancel(&mut h, None, &Uuid::max().to_string()),
        "move_task_not_found",
        None,
    );
    refused(
        try_cancel(&mut h, None, "not a handle"),
        "move_task_not_found",
        None,
    );
    refused(
        try_cancel(&mut h, Some("nope"), &handle),
        "queue_not_found",
        None,
    );
    assert_eq!(h.snapshot(), before, "refusals change nothing");
}

#[test]
fn a_deleted_destination_fails_the_task_with_its_reason() {
    let mut h = with_dead_letters(10);
    h.create("retry");
    let t0 = h.now;
    let task = MoveTaskInput {
        destination: Some("retry".into()),
        ..at_rate(10)
    };
    start(&mut h, DLQ, task);
    tick_until(&mut h, DLQ, t0 + 200);
    h.apply(Command::DeleteQueue {
        account: ACCOUNT.into(),
        queue: "retry".into(),
    })
    .expect("a destination can be deleted");
    tick_until(&mut h, DLQ, t0 + 1000);
    let failed = newest(&h, DLQ);
    assert_eq!(failed.status, MoveTaskStatus::Failed);
    assert_eq!(failed.moved, 2);
    assert_eq!(failed.ended_at, Some(t0 + 300));
    let reason = failed.failure_reason.expect("a reason");
    assert!(reason.contains("destination queue retry"), "{reason}");
    assert!(reason.contains("was deleted"), "{reason}");
    assert_eq!(peek_all(&h, DLQ).len(), 8, "the rest stay");
    assert!(no_step_due(&h));
}

#[test]
fn a_deleted_dead_letter_source_fails_the_task() {
    let mut h = with_dead_letters(3);
    h.create_with("other", redrive(DLQ, 1));
    let t0 = h.now;
    start(&mut h, DLQ, at_rate(10));
    h.apply(Command::DeleteQueue {
        account: ACCOUNT.into(),
        queue: WORK.into(),
    })
    .expect("a source can be deleted");
    tick_until(&mut h, DLQ, t0 + 1000);
    let failed = newest(&h, DLQ);
    assert_eq!((failed.status, failed.moved), (MoveTaskStatus::Failed, 0));
    let reason = failed.failure_reason.expect("a reason");
    assert!(reason.contains("dead-letter source work"), "{reason}");
}

#[test]
fn one_task_runs_per_queue() {
    let mut h = with_dead_letters(5);
    let first = start(&mut h, DLQ, at_rate(1));
    let before = h.snapshot();
    let err = try_start(&mut h, DLQ, at_rate(1)).expect_err("a second task");
    assert_eq!(err.code(), "move_task_running");
    assert!(
        err.to_string().contains(&first.task_handle.to_string()),
        "{err}"
    );
    assert_eq!(h.snapshot(), before);
    try_cancel(&mut h, Some(DLQ), &first.task_handle.to_string()).expect("cancel");
    let second = start(&mut h, DLQ, at_rate(1));
    assert_eq!(second.status, MoveTaskStatus::Running);
    let listed: Vec<(Uuid, MoveTaskStatus)> = tasks(&h, DLQ)
        .iter()
        .map(|t| (t.task_handle, t.status))
        .collect();
    assert_eq!(
        listed,
        [
            (second.task_handle, MoveTaskStatus::Running),
            (first.task_handle, MoveTaskStatus::Cancelled)
        ]
    );
}

#[test]
fn bad_input_is_refused_naming_the_field_and_changes_nothing() {
    let mut h = with_dead_letters(2);
    h.create("plain");
    h.create("other.fifo");
    h.tick();
    let before = h.snapshot();
    let to = |destination: &str| MoveTaskInput {
        destination: Some(destination.into()),
        ..MoveTaskInput::default()
    };
    let field = Some("destination");
    refused(
        try_start(&mut h, DLQ, to("other.fifo")),
        "invalid_argument",
        field,
    );
    refused(try_start(&mut h, DLQ, to(DLQ)), "invalid_argument", field);
    refused(
        try_start(&mut h, DLQ, to("nope")),
        "invalid_argument",
        field,
    );
    let no_dlq = try_start(&mut h, "plain", MoveTaskInput::default());
    refused(no_dlq, "invalid_argument", field);
    for rate in [0, -1, 501] {
        let bad = try_start(&mut h, DLQ, at_rate(rate));
        refused(bad, "invalid_argument", Some("max_messages_per_second"));
    }
    let backwards = MoveTaskInput {
        filter: Some(MoveFilter {
            moved_since: Some(20),
            moved_before: Some(20),
            ..MoveFilter::default()
        }),
        ..MoveTaskInput::default()
    };
    let bad = try_start(&mut h, DLQ, backwards);
    refused(bad, "invalid_argument", Some("filter.moved_before"));
    let too_many = MoveTaskInput {
        filter: Some(MoveFilter {
            message_ids: (0..101).map(Uuid::from_u128).collect(),
            ..MoveFilter::default()
        }),
        ..MoveTaskInput::default()
    };
    let bad = try_start(&mut h, DLQ, too_many);
    refused(bad, "invalid_argument", Some("filter.message_ids"));
    refused(
        try_start(&mut h, "nope", MoveTaskInput::default()),
        "queue_not_found",
        None,
    );
    assert_eq!(h.snapshot(), before, "refusals change nothing");
    assert!(tasks(&h, DLQ).is_empty());
    assert!(start(&mut h, "plain", to("work")).status == MoveTaskStatus::Completed);
}

#[test]
fn a_dry_run_counts_and_moves_nothing() {
    let mut h = with_dead_letters(7);
    h.send(DLQ, "sent here directly");
    let leased = h.receive(DLQ, 1);
    assert_eq!(leased.len(), 1);
    let before = peek_all(&h, DLQ);
    let dry = start(&mut h, DLQ, dry_run(MoveTaskInput::default()));
    assert!(dry.dry_run);
    assert_eq!(dry.status, MoveTaskStatus::Completed);
    assert_eq!(
        dry.to_move, 6,
        "7 dead letters, one leased; the direct send has no source"
    );
    assert_eq!((dry.moved, dry.skipped), (0, 0));
    assert_eq!(dry.ended_at, Some(h.now));
    h.advance(5);
    h.tick();
    assert_eq!(peek_all(&h, DLQ).len(), before.len());
    assert!(peek_all(&h, WORK).is_empty());
    let with_destination = dry_run(MoveTaskInput {
        destination: Some(WORK.into()),
        ..MoveTaskInput::default()
    });
    assert_eq!(start(&mut h, DLQ, with_destination).to_move, 7);
}

#[test]
fn leased_messages_and_messages_without_a_source_are_skipped() {
    let mut h = with_dead_letters(4);
    h.send(DLQ, "direct");
    let leased = h.receive_leased(DLQ, 1, 600);
    assert_eq!(h.bodies(&leased), ["m0"]);
    let t0 = h.now;
    let task = start(&mut h, DLQ, at_rate(100));
    assert_eq!(task.to_move, 3);
    tick_until(&mut h, DLQ, t0 + 1000);
    let done = newest(&h, DLQ);
    assert_eq!(
        (done.status, done.moved, done.skipped),
        (MoveTaskStatus::Completed, 3, 2)
    );
    assert_eq!(bodies(&h, DLQ), ["m0", "direct"]);
    assert_eq!(bodies(&h, WORK), names(1..4));
    h.ack(DLQ, &leased[0].receipt)
        .expect("the consumer's lease still holds");
}

#[test]
fn messages_sent_after_the_start_are_not_the_task_s() {
    let mut h = with_dead_letters(3);
    let t0 = h.now;
    start(&mut h, DLQ, at_rate(100));
    dead_letter(&mut h, WORK, 3..5);
    tick_until(&mut h, DLQ, t0 + 1000);
    assert_eq!(newest(&h, DLQ).moved, 3);
    assert_eq!(bodies(&h, DLQ), names(3..5));
}

#[test]
fn filters_take_named_messages_or_those_moved_within_a_time_range() {
    let mut h = with_dead_letters(6);
    let first = h.now;
    h.advance(60);
    let second = h.now;
    dead_letter(&mut h, WORK, 6..9);
    let metas = peek_all(&h, DLQ);
    let chosen = [&metas[1], &metas[4], &metas[7]];
    let ids: Vec<Uuid> = chosen
        .iter()
        .map(|m| h.store.payload(m.storage_key).expect("payload").message_id)
        .collect();
    let by_id = MoveTaskInput {
        filter: Some(MoveFilter {
            message_ids: [ids.clone(), vec![Uuid::max()]].concat(),
            storage_keys: chosen.iter().rev().map(|m| m.storage_key).collect(),
            ..MoveFilter::default()
        }),
        ..at_rate(100)
    };
    let task = start(&mut h, DLQ, by_id);
    assert_eq!(task.to_move, 3);
    let t0 = h.now;
    tick_until(&mut h, DLQ, t0 + 1000);
    assert_eq!(newest(&h, DLQ).moved, 3);
    assert_eq!(bodies(&h, WORK), ["m1", "m4", "m7"]);

    let by_time = MoveTaskInput {
        filter: Some(MoveFilter {
            moved_since: Some(second),
            ..MoveFilter::default()
        }),
        ..at_rate(100)
    };
    assert!(second > first);
    let task = start(&mut h, DLQ, by_time);
    assert_eq!(task.to_move, 2, "m6 and m8: moved at the second time");
    let t0 = h.now;
    tick_until(&mut h, DLQ, t0 + 1000);
    assert_eq!(bodies(&h, DLQ), ["m0", "m2", "m3", "m5"]);
    let before_second = dry_run(MoveTaskInput {
        filter: Some(MoveFilter {
            moved_before: Some(second),
            ..MoveFilter::default()
        }),
        ..MoveTaskInput::default()
    });
    assert_eq!(start(&mut h, DLQ, before_second).to_move, 4);
}

#[test]
fn the_last_ten_tasks_are_kept_newest_first() {
    let mut h = with_dead_letters(1);
    let handles: Vec<Uuid> = (0..12)
        .map(|_| start(&mut h, DLQ, dry_run(MoveTaskInput::default())).task_handle)
        .collect();
    let listed: Vec<Uuid> = tasks(&h, DLQ).iter().map(|t| t.task_handle).collect();
    let expected: Vec<Uuid> = handles
        .iter()
        .rev()
        .take(MOVE_TASKS_KEPT)
        .copied()
        .collect();
    assert_eq!(listed, expected);
    let restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    let after: Vec<Uuid> = restored
        .move_tasks(ACCOUNT, DLQ)
        .expect("list")
        .iter()
        .map(|t| t.task_handle)
        .collect();
    assert_eq!(after, expected, "the history is in the rows");
}

#[test]
fn a_restore_in_the_middle_of_a_task_takes_the_same_steps() {
    let mut h = with_dead_letters(30);
    let t0 = h.now;
    start(&mut h, DLQ, at_rate(20));
    tick_until(&mut h, DLQ, t0 + 250);
    let mut restored = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    assert_eq!(
        restored.next_due(),
        h.engine.next_due(),
        "the timer is re-armed"
    );
    while let Some(due) = h.engine.next_due().filter(|&due| due <= t0 + 10_000) {
        h.now = due;
        let a = h.apply_changes(Command::Tick);
        let b = restored.apply(Entry {
            now: due,
            command: Command::Tick,
        });
        assert_eq!(a, b);
    }
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    assert_eq!(newest(&h, DLQ).moved, 30);
}

#[test]
fn deleting_the_queue_drops_its_tasks() {
    let mut h = with_dead_letters(3);
    h.create("retry");
    start(
        &mut h,
        "retry",
        dry_run(MoveTaskInput {
            destination: Some(DLQ.into()),
            ..MoveTaskInput::default()
        }),
    );
    start(
        &mut h,
        DLQ,
        MoveTaskInput {
            destination: Some("retry".into()),
            ..at_rate(1)
        },
    );
    h.apply(Command::PatchQueue {
        account: ACCOUNT.into(),
        queue: WORK.into(),
        attributes: QueueAttributes {
            redrive_policy: Some(None),
            ..QueueAttributes::default()
        },
    })
    .expect("detach");
    h.apply(Command::DeleteQueue {
        account: ACCOUNT.into(),
        queue: DLQ.into(),
    })
    .expect("delete the dead-letter queue");
    assert_eq!(
        h.engine.next_due(),
        Some(h.now),
        "only its messages' reclaim is left"
    );
    let rows = Engine::restore("local", h.store.rows.clone()).expect("restore");
    assert!(rows.move_tasks(ACCOUNT, DLQ).is_err());
    assert_eq!(rows.move_tasks(ACCOUNT, "retry").expect("list").len(), 1);
}
