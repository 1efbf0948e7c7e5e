//! A state restored into a new cluster: the leases and parked receives of the old cluster's
//! clients end, and nothing else changes.

mod support;

use raftq_engine::{Engine, EngineError};
use support::*;
use uuid::Uuid;

/// The engine rebuilt from the harness's persisted rows, as a restore reads them.
fn restored(h: &Harness) -> Engine {
    Engine::restore("local", h.snapshot()).expect("restore")
}

#[test]
fn leases_end_as_released_and_parked_receives_end() {
    let mut h = Harness::with_queue("work");
    h.create("orders.fifo");
    h.create("idle");
    for body in ["a", "b", "c"] {
        h.send("work", body);
    }
    h.send_fifo("orders.fifo", "g", "o1");
    h.send_fifo("orders.fifo", "g", "o2");
    let leased = h.receive_leased("work", 2, 600);
    let first_order = h.receive_leased("orders.fifo", 1, 600);
    assert_eq!(h.receive("orders.fifo", 1), [], "the group waits for o1");
    let (_, answers) = h.receive_wait("idle", 1, 20, Uuid::from_u128(7));
    assert_eq!(answers, []);
    assert_eq!(h.engine.parked_count(), 1);

    let mut engine = restored(&h);
    assert_eq!(engine.end_leases_and_waits(), 3);
    assert_eq!(engine.parked_count(), 0);
    h.engine = engine;
    let again = h.receive("work", 10);
    let mut bodies = h.bodies(&again);
    bodies.sort();
    assert_eq!(bodies, ["a", "b", "c"]);
    assert!(again.iter().all(|d| d.meta.receive_count >= 1));
    assert!(matches!(
        h.ack("work", &leased[0].receipt),
        Err(EngineError::LeaseExpired | EngineError::MessageGone)
    ));
    let orders = h.receive("orders.fifo", 1);
    assert_eq!(
        h.bodies(&orders),
        ["o1"],
        "o1 comes first again, its group free"
    );
    assert_eq!(orders[0].meta.receive_count, 2);
    assert_ne!(orders[0].receipt, first_order[0].receipt);
}

#[test]
fn a_state_without_leases_or_waits_comes_out_row_for_row_the_same() {
    let mut h = Harness::with_queue("work");
    h.send("work", "kept");
    let delivered = h.receive_leased("work", 1, 30);
    h.ack("work", &delivered[0].receipt).expect("ack");
    h.send("work", "waiting");
    let mut engine = restored(&h);
    let before = engine.export_rows();
    assert_eq!(engine.end_leases_and_waits(), 0);
    assert_eq!(engine.export_rows(), before);
}
