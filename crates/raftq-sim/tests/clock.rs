//! The leader's clock in the simulation: a leader whose wall clock jumps an hour ahead while it
//! leads, just after it lost touch with one follower, stamps no entry ahead of the true time by
//! more than the bound: that follower's last answer, from before the jump, still counts for a
//! while, and must not be read against the jumped clock.

use std::time::Duration;

use raftq_engine::{Command, NewMessage, Outcome, QueueAttributes};
use raftq_node::NodeId;
use raftq_sim::api::{Reply, Request};
use raftq_sim::faults::leader;
use raftq_sim::workload::write;
use raftq_sim::world::{Control, World};
use tokio::time::sleep;
use uuid::Uuid;

const HOUR_MS: i64 = 3_600_000;
const BOUND_MS: u64 = 500;
const LEASE_SECONDS: i64 = 2;

/// The lease ends a receive through `id` stamped, with the true time it was asked at.
async fn receive(control: &Control, id: NodeId) -> Vec<(u64, u64)> {
    let asked = control.clock.now_ms();
    let command = Command::Receive {
        account: "sim".into(),
        queue: "q".into(),
        max_messages: Some(10),
        lease_seconds: Some(LEASE_SECONDS),
        attempt_id: None,
    };
    match write(control, id, command).await {
        Ok(Reply::Write(Ok(response))) => match response.result {
            Some(Ok(Outcome::Received(deliveries))) => deliveries
                .iter()
                .map(|d| (asked, d.lease_expires_at))
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

async fn jump_the_leaders_clock(control: Control) -> Result<usize, String> {
    let members = [1, 2, 3];
    let mut first = None;
    for _ in 0..300 {
        first = leader(&control, &members).await;
        if first.is_some() {
            break;
        }
        sleep(Duration::from_millis(100)).await;
    }
    let first = first.ok_or("no leader")?;
    let create = Command::CreateQueue {
        account: "sim".into(),
        queue_id: Uuid::from_u128(1),
        name: "q".into(),
        attributes: QueueAttributes::default(),
    };
    write(&control, first, create)
        .await
        .map_err(|e| e.to_string())?;
    let mut seen = 0;
    for round in 0..40u128 {
        let message = NewMessage::new(Uuid::from_u128(100 + round), format!("m{round}"));
        let send = Command::Send {
            account: "sim".into(),
            queue: "q".into(),
            message,
        };
        let _ = write(&control, first, send).await;
        if round == 10 {
            let cut_off = members.iter().copied().find(|id| *id != first).unwrap_or(1);
            control.net.partition(first, cut_off, true);
            control.skew(first, HOUR_MS);
        }
        for (asked, lease_end) in receive(&control, first).await {
            seen += 1;
            let latest = asked + LEASE_SECONDS as u64 * 1000 + BOUND_MS;
            if lease_end > latest {
                return Err(format!(
                    "round {round}: a lease asked for at {asked} ends at {lease_end}, {} ms \
                     past the bound",
                    lease_end - latest
                ));
            }
        }
        sleep(Duration::from_millis(75)).await;
    }
    if let Ok(Reply::Status(status)) = control.api.call(first, Request::Status).await {
        assert!(
            status.clock_skewed || status.leader != Some(first),
            "the jumped leader knows"
        );
    }
    Ok(seen)
}

#[test]
fn a_leader_whose_clock_jumps_ahead_stamps_nothing_past_the_bound() {
    raftq_store::random::seed(Some(5));
    let world = World::new(5, 3).expect("world");
    let (result, tally) = world
        .run(Duration::from_secs(120), jump_the_leaders_clock)
        .expect("the scenario ends");
    assert!(tally.start_failures.is_empty(), "{tally:?}");
    let seen = result.expect("no lease past the bound");
    assert!(seen >= 20, "only {seen} deliveries");
}
