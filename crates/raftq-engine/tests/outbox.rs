//! Moves between queues of two Raft groups: redrive to a dead-letter queue of another group,
//! move tasks back to sources or to a destination there, refusals that put a message back, and
//! the lanes that make every message arrive once however its deliveries repeat.

mod support;

use proptest::prelude::*;
use raftq_engine::command::{Arrival, Elsewhere, RemoteQueue};
use raftq_engine::model::AllowPolicy;
use raftq_engine::outbox::MoveResult;
use raftq_engine::{
    Command, Engine, MoveTaskInput, MoveTaskStatus, MoveTaskView, Outcome, QueueType, QueueView,
};
use support::*;

const SOURCE_GROUP: u32 = 2;
const TARGET_GROUP: u32 = 3;
const WORK: &str = "work";
const DLQ: &str = "dlq";

/// Group 2's `work`, whose dead-letter queue is group 3's `dlq` (one receive moves a message).
struct Pair {
    a: Harness,
    b: Harness,
    dlq: QueueView,
}

impl Pair {
    fn new() -> Pair {
        let mut a = Harness::in_group(SOURCE_GROUP);
        let mut b = Harness::in_group(TARGET_GROUP);
        let dlq = b.create(DLQ);
        let queue_id = a.fresh_id();
        let create = Command::CreateQueue {
            account: ACCOUNT.into(),
            queue_id,
            name: WORK.into(),
            attributes: redrive(DLQ, 1),
        };
        let view = a.apply(with_remote(&[remote(&dlq)], false, create));
        assert!(matches!(view, Ok(Outcome::Queue(_))), "{view:?}");
        Pair { a, b, dlq }
    }

    /// Sends `m<i>` for each `i` in `range` to `work` and receives each with a zero-length
    /// lease, which redrives it into group 2's outbox.
    fn dead_letter(&mut self, range: std::ops::Range<usize>) {
        for i in range.clone() {
            self.a.send(WORK, &format!("m{i}"));
        }
        let got = self.a.receive_leased(WORK, 10, 0);
        assert_eq!(got.len(), range.len(), "every message is received");
    }
}

/// How the router describes a queue of another group that a command names by its name.
fn remote(view: &QueueView) -> RemoteQueue {
    RemoteQueue {
        reference: view.name.clone(),
        id: view.id,
        name: view.name.clone(),
        queue_type: view.queue_type,
        redrive_allow_policy: AllowPolicy::AllowAll,
    }
}

fn with_remote(queues: &[RemoteQueue], has_sources: bool, command: Command) -> Command {
    Command::WithRemote {
        elsewhere: Elsewhere {
            queues: queues.to_vec(),
            has_sources,
        },
        command: Box::new(command),
    }
}

/// The outbox of `from` (of group `from_group`) delivered to `to`, its first `count` entries at
/// most, as a group's leader sends it: how `to` took each.
fn deliver(from: &Harness, from_group: u32, to: &mut Harness, count: usize) -> Vec<MoveResult> {
    let arrivals: Vec<Arrival> = from
        .engine
        .outbox()
        .take(count)
        .map(|(seq, outgoing)| Arrival {
            seq,
            outgoing: outgoing.clone(),
            payload: from
                .store
                .payload(outgoing.message.storage_key)
                .expect("an outgoing message keeps its payload"),
        })
        .collect();
    let acked_below = arrivals.first().map_or(0, |a| a.seq);
    match to.apply(Command::InsertMoved {
        from_group,
        acked_below,
        arrivals,
    }) {
        Ok(Outcome::Arrived(results)) => results,
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn done(h: &mut Harness, results: Vec<MoveResult>) {
    let outcome = h.apply(Command::OutboxDone { results });
    assert_eq!(outcome, Ok(Outcome::OutboxDone));
}

fn bodies_of(h: &Harness, queue: &str) -> Vec<String> {
    let peeked = h.engine.peek(ACCOUNT, queue, None, Some(100)).unwrap();
    peeked
        .iter()
        .map(|m| h.store.payload(m.storage_key).expect("payload").body)
        .collect()
}

fn start_task(h: &mut Harness, command: impl FnOnce(Command) -> Command) -> MoveTaskView {
    let task_handle = h.fresh_id();
    let start = Command::StartMoveTask {
        account: ACCOUNT.into(),
        queue: DLQ.into(),
        task_handle,
        task: MoveTaskInput::default(),
    };
    match h.apply(command(start)) {
        Ok(Outcome::MoveTask(view)) => *view,
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn tasks(h: &Harness) -> Vec<MoveTaskView> {
    h.engine.move_tasks(ACCOUNT, DLQ).unwrap()
}

#[test]
fn a_message_redriven_to_a_queue_of_another_group_arrives_there_once() {
    let mut p = Pair::new();
    let view = p.a.engine.get_queue(ACCOUNT, WORK).unwrap();
    let target = view.redrive_policy.expect("a policy").dead_letter_target;
    assert_eq!(target.id, p.dlq.id, "the policy names the queue of group 3");
    p.dead_letter(0..2);
    assert_eq!(p.a.engine.outbox().count(), 2);
    assert!(bodies_of(&p.a, WORK).is_empty(), "they left the source");

    let first = deliver(&p.a, SOURCE_GROUP, &mut p.b, 2);
    assert!(first.iter().all(|r| r.refused.is_none()), "{first:?}");
    let again = deliver(&p.a, SOURCE_GROUP, &mut p.b, 2);
    assert_eq!(again, first, "a repeated delivery answers as the first");
    assert_eq!(bodies_of(&p.b, DLQ), ["m0", "m1"], "each arrived once");
    let arrived = p.b.engine.peek(ACCOUNT, DLQ, None, None).unwrap();
    let source = arrived[0].dead_letter_source.as_ref().expect("a source");
    assert_eq!(source.name, WORK);

    let outgoing_keys = p.a.store.payload_keys();
    assert_eq!(outgoing_keys.len(), 2, "the payloads stay until delivered");
    done(&mut p.a, first);
    assert_eq!(p.a.engine.outbox().count(), 0);
    assert!(p.a.store.payload_keys().is_empty(), "then they go");
    let gauges = p.a.engine.queue_gauges(p.a.now);
    assert_eq!(gauges[0].dead_lettered, 2);
}

#[test]
fn a_refused_arrival_goes_back_to_its_source_pending() {
    let mut p = Pair::new();
    p.dead_letter(0..1);
    p.b.apply(Command::DeleteQueue {
        account: ACCOUNT.into(),
        queue: DLQ.into(),
    })
    .unwrap();
    let results = deliver(&p.a, SOURCE_GROUP, &mut p.b, 1);
    assert!(results[0].refused.is_some(), "{results:?}");
    done(&mut p.a, results);
    let stats = p.a.engine.stats(ACCOUNT, WORK, p.a.now).unwrap();
    assert_eq!(
        stats.pending_redrive, 1,
        "back in its source, waiting for redrive"
    );
    assert_eq!(bodies_of(&p.a, WORK), ["m0"]);
    assert_eq!(p.a.engine.queue_gauges(p.a.now)[0].dead_lettered, 0);
}

#[test]
fn a_move_task_sends_messages_back_to_their_sources_in_another_group() {
    let mut p = Pair::new();
    p.dead_letter(0..3);
    let results = deliver(&p.a, SOURCE_GROUP, &mut p.b, 3);
    done(&mut p.a, results);

    let alone = Command::StartMoveTask {
        account: ACCOUNT.into(),
        queue: DLQ.into(),
        task_handle: p.b.fresh_id(),
        task: MoveTaskInput::default(),
    };
    let refused_alone = p.b.apply(alone);
    refused(refused_alone, "invalid_argument", Some("destination"));
    let task = start_task(&mut p.b, |c| with_remote(&[], true, c));
    assert_eq!(task.to_move, 3);
    p.b.advance(1);
    p.b.tick();
    assert_eq!(p.b.engine.outbox().count(), 3);
    let results = deliver(&p.b, TARGET_GROUP, &mut p.a, 3);
    done(&mut p.b, results);
    assert_eq!(bodies_of(&p.a, WORK), ["m0", "m1", "m2"]);
    let back = p.a.engine.peek(ACCOUNT, WORK, None, None).unwrap();
    assert!(back.iter().all(|m| m.dead_letter_source.is_none()));
    p.b.advance(1);
    p.b.tick();
    let task = &tasks(&p.b)[0];
    assert_eq!((task.status, task.moved), (MoveTaskStatus::Completed, 3));
}

#[test]
fn a_task_whose_destination_refuses_fails_and_keeps_the_message() {
    let mut p = Pair::new();
    let other = p.a.create("other");
    p.dead_letter(0..2);
    let results = deliver(&p.a, SOURCE_GROUP, &mut p.b, 2);
    done(&mut p.a, results);
    let destination = MoveTaskInput {
        destination: Some("other".into()),
        max_messages_per_second: Some(1),
        ..MoveTaskInput::default()
    };
    let task_handle = p.b.fresh_id();
    let start = Command::StartMoveTask {
        account: ACCOUNT.into(),
        queue: DLQ.into(),
        task_handle,
        task: destination,
    };
    p.b.apply(with_remote(&[remote(&other)], false, start))
        .unwrap();
    p.a.apply(Command::DeleteQueue {
        account: ACCOUNT.into(),
        queue: "other".into(),
    })
    .unwrap();
    p.b.advance(1);
    p.b.tick();
    assert_eq!(p.b.engine.outbox().count(), 1, "one message a second");
    let results = deliver(&p.b, TARGET_GROUP, &mut p.a, 1);
    done(&mut p.b, results);
    let task = &tasks(&p.b)[0];
    assert_eq!((task.status, task.moved), (MoveTaskStatus::Failed, 0));
    let reason = task.failure_reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("the destination queue other (id ") && reason.ends_with("was deleted"),
        "{reason}"
    );
    assert_eq!(bodies_of(&p.b, DLQ), ["m1", "m0"], "back at the end");
}

#[test]
fn a_remote_dead_letter_target_is_checked_as_a_local_one() {
    let mut a = Harness::in_group(SOURCE_GROUP);
    let mut b = Harness::in_group(TARGET_GROUP);
    let fifo = b.create("dlq.fifo");
    let dlq = b.create(DLQ);
    a.create(WORK);
    let mut patch = |target: RemoteQueue, reference: &str| {
        let patch = Command::PatchQueue {
            account: ACCOUNT.into(),
            queue: WORK.into(),
            attributes: redrive(reference, 1),
        };
        a.apply(with_remote(&[target], false, patch))
    };
    let field = Some("redrive_policy.dead_letter_target");
    let mut denying = remote(&dlq);
    denying.redrive_allow_policy = AllowPolicy::DenyAll;
    refused(patch(remote(&fifo), "dlq.fifo"), "invalid_argument", field);
    refused(patch(denying, DLQ), "invalid_argument", field);
    refused(patch(remote(&dlq), "elsewhere"), "invalid_argument", field);
    assert!(patch(remote(&dlq), DLQ).is_ok());
    assert_eq!(fifo.queue_type, QueueType::Fifo);
    let sources = a.engine.sources_of_remote(ACCOUNT, dlq.id);
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0].name, WORK);
}

#[test]
fn the_outbox_and_the_lanes_are_restored_from_their_rows() {
    let mut p = Pair::new();
    p.dead_letter(0..2);
    let results = deliver(&p.a, SOURCE_GROUP, &mut p.b, 1);
    let restore = |h: &Harness, group: u32| {
        let engine = Engine::restore("local", h.store.engine_rows()).expect("restores");
        let mut restored = Harness::over(engine.in_group(group), h.now);
        restored.store = h.store.clone();
        restored
    };
    let mut a = restore(&p.a, SOURCE_GROUP);
    let mut b = restore(&p.b, TARGET_GROUP);
    assert_eq!(a.engine.export_rows(), p.a.engine.export_rows());
    assert_eq!(b.engine.export_rows(), p.b.engine.export_rows());
    let again = deliver(&a, SOURCE_GROUP, &mut b, 2);
    assert_eq!(again[0], results[0], "the lane remembers the first");
    done(&mut a, again);
    assert_eq!(bodies_of(&b, DLQ), ["m0", "m1"]);
    assert_eq!(a.engine.outbox().count(), 0);
}

/// One step of a run between two groups whose deliveries may repeat or lose their answers.
#[derive(Debug, Clone)]
enum Step {
    /// Sends and dead-letters this many messages.
    DeadLetter(usize),
    /// Delivers up to this many outbox entries; the answer is applied, or lost.
    Deliver(usize, bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1usize..4).prop_map(Step::DeadLetter),
        (1usize..6, any::<bool>()).prop_map(|(n, kept)| Step::Deliver(n, kept)),
    ]
}

proptest! {
    #[test]
    fn every_message_arrives_once_however_deliveries_repeat(
        steps in prop::collection::vec(step(), 1..30)
    ) {
        let mut p = Pair::new();
        let mut sent = 0;
        for step in steps {
            match step {
                Step::DeadLetter(n) => {
                    p.dead_letter(sent..sent + n);
                    sent += n;
                }
                Step::Deliver(n, kept) => {
                    let results = deliver(&p.a, SOURCE_GROUP, &mut p.b, n);
                    if kept {
                        done(&mut p.a, results);
                    }
                }
            }
        }
        while p.a.engine.outbox().count() > 0 {
            let results = deliver(&p.a, SOURCE_GROUP, &mut p.b, 4);
            done(&mut p.a, results);
        }
        let want: Vec<String> = (0..sent).map(|i| format!("m{i}")).collect();
        prop_assert_eq!(bodies_of(&p.b, DLQ), want);
        prop_assert!(p.a.store.payload_keys().is_empty());
    }
}

#[test]
fn an_arrival_from_this_group_itself_is_refused() {
    let mut h = Harness::in_group(SOURCE_GROUP);
    let outcome = h.apply(Command::InsertMoved {
        from_group: SOURCE_GROUP,
        acked_below: 0,
        arrivals: Vec::new(),
    });
    refused(outcome, "invalid_argument", Some("from_group"));
}
