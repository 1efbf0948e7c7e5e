//! The placement of the metadata group applied through the engine: its commands' outcomes and
//! refusals, its rows among the engine's, and its state read back from them.

mod support;

use std::collections::BTreeMap;

use raftq_engine::placement::{PlacementCommand, PlacementError, PlacementOutcome};
use raftq_engine::{Command, Engine, EngineError, Outcome};
use support::*;
use uuid::Uuid;

fn place(change: PlacementCommand) -> Command {
    Command::Place { change }
}

fn bootstrap() -> Command {
    place(PlacementCommand::Bootstrap {
        groups: 3,
        replicas: 3,
        nodes: BTreeMap::from([(1, "a:1".into()), (2, "b:1".into()), (3, "c:1".into())]),
    })
}

/// Records that the data groups of [`bootstrap`] were formed.
fn form_data_groups(h: &mut Harness) {
    for group in [2, 3] {
        let formed = place(PlacementCommand::GroupFormed { group });
        assert_eq!(h.apply(formed), Ok(Outcome::Placed(PlacementOutcome::Done)));
    }
}

fn reserve(name: &str, id: u128) -> Command {
    place(PlacementCommand::Reserve {
        account: "dev".into(),
        name: name.into(),
        id: Uuid::from_u128(id),
        group: None,
    })
}

#[test]
fn placement_commands_apply_through_the_engine_and_their_rows_restore_it() {
    let mut h = Harness::new();
    h.create("queue-beside-the-placement");
    assert_eq!(
        h.apply(bootstrap()),
        Ok(Outcome::Placed(PlacementOutcome::Done))
    );
    form_data_groups(&mut h);
    for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
        match h.apply(reserve(name, i as u128 + 101)) {
            Ok(Outcome::Placed(PlacementOutcome::Reserved { entry, existing })) => {
                assert!(!existing);
                assert_eq!(entry.group, [2, 3, 1, 2][i], "{name}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let confirm = place(PlacementCommand::Confirm {
        id: Uuid::from_u128(102),
    });
    assert_eq!(
        h.apply(confirm),
        Ok(Outcome::Placed(PlacementOutcome::Done))
    );
    assert_eq!(h.engine.export_rows(), h.store.engine_rows());
    let restored = Engine::restore("local", h.store.engine_rows()).expect("restore");
    assert_eq!(restored.placement(), h.engine.placement());
    assert_eq!(restored.export_rows(), h.engine.export_rows());
    assert_eq!(restored.placement().queue_count(1), 2);
}

#[test]
fn a_refused_placement_command_changes_no_placement_row() {
    let mut h = Harness::new();
    let before = h.store.engine_rows();
    let refused = h.apply(reserve("early", 1));
    assert_eq!(
        refused,
        Err(EngineError::Placement(PlacementError::NotBootstrapped))
    );
    assert_eq!(refused.map_err(|e| e.code()), Err("placement_refused"));
    let placement_rows = |rows: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<(Vec<u8>, Vec<u8>)> {
        rows.into_iter()
            .filter(|(k, _)| (11..=14).contains(&k[0]))
            .collect()
    };
    assert_eq!(
        placement_rows(h.store.engine_rows()),
        placement_rows(before)
    );
    assert_eq!(h.engine.placement(), &Default::default());
}

#[test]
fn the_bootstrap_adopts_the_queues_the_group_held_and_restores_with_them() {
    let mut h = Harness::new();
    let held = h.create("made-before-groups");
    assert_eq!(
        h.apply(bootstrap()),
        Ok(Outcome::Placed(PlacementOutcome::Done))
    );
    form_data_groups(&mut h);
    let entry = h
        .engine
        .placement()
        .queue("dev", "made-before-groups")
        .expect("adopted")
        .clone();
    assert_eq!((entry.id, entry.group), (held.id, 1));
    match h.apply(reserve("made-after", 9)) {
        Ok(Outcome::Placed(PlacementOutcome::Reserved { entry, .. })) => {
            assert_eq!(entry.group, 2, "group 1 holds a queue already")
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(h.engine.export_rows(), h.store.engine_rows());
    let restored = Engine::restore("local", h.store.engine_rows()).expect("restore");
    assert_eq!(restored.placement(), h.engine.placement());
}

#[test]
fn a_queue_is_located_in_the_directory_by_name_id_crn_and_arn_of_its_account() {
    let mut h = Harness::new();
    h.apply(bootstrap()).expect("bootstrap");
    h.apply(reserve("jobs", 7)).expect("reserve");
    let id = Uuid::from_u128(7);
    let crn = raftq_engine::model::crn("local", "dev", id);
    let arn = raftq_engine::arn::arn("local", "dev", "jobs");
    for reference in ["jobs", &id.to_string(), &crn, &arn] {
        let entry = h.engine.locate("dev", reference);
        assert_eq!(entry.map(|e| e.id), Some(id), "{reference}");
    }
    let elsewhere = raftq_engine::model::crn("other-region", "dev", id);
    for (account, reference) in [
        ("ops", "jobs"),
        ("ops", &id.to_string()),
        ("dev", &elsewhere),
    ] {
        assert!(
            h.engine.locate(account, reference).is_none(),
            "{account}: {reference}"
        );
    }
    assert!(h.engine.locate("dev", "missing").is_none());
}

#[test]
fn a_command_on_a_queue_tells_its_queue_and_takes_another_reference() {
    let mut send = Command::Purge {
        account: "dev".into(),
        queue: "jobs".into(),
    };
    let (account, queue) = send.queue_mut().expect("a queue");
    assert_eq!((account, queue.as_str()), ("dev", "jobs"));
    *queue = Uuid::from_u128(7).to_string();
    assert_eq!(
        send,
        Command::Purge {
            account: "dev".into(),
            queue: Uuid::from_u128(7).to_string()
        }
    );
    assert!(Command::Tick.queue_mut().is_none());
    let cancel = |queue: Option<&str>| Command::CancelMoveTask {
        account: "dev".into(),
        queue: queue.map(str::to_string),
        task_handle: "h".into(),
    };
    assert!(cancel(None).queue_mut().is_none());
    assert!(cancel(Some("jobs")).queue_mut().is_some());
}

#[test]
fn after_the_bootstrap_the_metadata_group_creates_only_reserved_queues() {
    let mut h = Harness::new();
    h.apply(bootstrap()).expect("bootstrap");
    let create = |id: u128, name: &str| Command::CreateQueue {
        account: "dev".into(),
        queue_id: Uuid::from_u128(id),
        name: name.into(),
        attributes: Default::default(),
    };
    let before = h.store.engine_rows();
    assert_eq!(
        h.apply(create(5, "around")),
        Err(EngineError::Placement(PlacementError::Unreserved(
            Uuid::from_u128(5)
        )))
    );
    assert_eq!(h.store.engine_rows(), before, "a refusal changes nothing");
    let elsewhere = place(PlacementCommand::Reserve {
        account: "dev".into(),
        name: "elsewhere".into(),
        id: Uuid::from_u128(7),
        group: Some(2),
    });
    h.apply(elsewhere).expect("reserve in group 2");
    assert_eq!(
        h.apply(create(7, "elsewhere")),
        Err(EngineError::Placement(PlacementError::Unreserved(
            Uuid::from_u128(7)
        ))),
        "a queue reserved for another group is not created here"
    );
    h.apply(reserve("through", 6)).expect("reserve");
    assert!(matches!(
        h.apply(create(6, "through")),
        Ok(Outcome::Queue(_))
    ));
}

#[test]
fn a_queue_shows_the_group_whose_state_holds_it() {
    let mut h = Harness::new();
    assert_eq!(h.create("in-the-first").group, 1);
    h.engine = std::mem::replace(&mut h.engine, Engine::new("local")).in_group(3);
    assert_eq!(h.engine.group(), 3);
    assert_eq!(h.create("in-the-third").group, 3);
    let first = h
        .engine
        .get_queue(ACCOUNT, "in-the-first")
        .expect("the queue");
    assert_eq!(first.group, 3, "the state is group 3's now");
}
