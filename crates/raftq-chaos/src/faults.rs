//! The fault injector: a seeded random schedule of crashes, pauses, partitions and restarts of
//! the leader or a follower, each healed before the next.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::time::{sleep, Instant};

use crate::docker::Compose;
use crate::history::{now_ms, Event, History};
use crate::nodes::Nodes;

/// The kinds of fault.
pub const KINDS: [&str; 7] = [
    "kill_leader",
    "kill_follower",
    "pause_leader",
    "isolate_leader",
    "isolate_follower",
    "restart_all",
    "rolling_restart",
];

/// Injects faults from `seed` until `until`, one at a time, healing each.
pub async fn run(compose: Compose, nodes: Nodes, seed: u64, until: Instant, history: History) {
    let mut rng = StdRng::seed_from_u64(seed);
    // Every kind once per round, in a seeded order, so a short run still sees each kind.
    let mut round: Vec<&str> = Vec::new();
    while Instant::now() < until {
        sleep(Duration::from_millis(rng.random_range(2_000..5_000))).await;
        if Instant::now() >= until {
            break;
        }
        if round.is_empty() {
            round = KINDS.to_vec();
            round.shuffle(&mut rng);
        }
        let Some(kind) = round.pop() else {
            break;
        };
        let leader = nodes.leader_service().await;
        let follower = nodes.follower_service(leader.as_deref(), &mut rng);
        let target = match kind {
            "kill_leader" | "pause_leader" | "isolate_leader" => leader.unwrap_or(follower),
            "restart_all" | "rolling_restart" => "all".to_string(),
            _ => follower,
        };
        let hold = Duration::from_millis(rng.random_range(1_500..4_000));
        let start = now_ms();
        let result = inject(&compose, &nodes, kind, &target, hold).await;
        if let Err(e) = result {
            println!("fault {kind} on {target} failed: {e}");
        }
        history.push(Event::Fault {
            kind: kind.to_string(),
            target,
            start,
            end: now_ms(),
        });
    }
}

async fn inject(
    compose: &Compose,
    nodes: &Nodes,
    kind: &str,
    target: &str,
    hold: Duration,
) -> Result<(), String> {
    match kind {
        "kill_leader" | "kill_follower" => {
            compose.kill(target).await?;
            sleep(hold).await;
            compose.start(target).await
        }
        "pause_leader" => {
            compose.pause(target).await?;
            sleep(hold).await;
            compose.unpause(target).await
        }
        "isolate_leader" | "isolate_follower" => {
            let network = compose.disconnect(target).await?;
            sleep(hold).await;
            compose.connect(target, &network).await
        }
        "restart_all" => {
            for service in nodes.services() {
                compose.kill(&service).await?;
            }
            sleep(hold).await;
            for service in nodes.services() {
                compose.start(&service).await?;
            }
            Ok(())
        }
        _ => {
            for service in nodes.services() {
                compose.restart(&service).await?;
                nodes.wait_healthy(Duration::from_secs(30)).await;
            }
            Ok(())
        }
    }
}

/// Undoes anything a failed injection may have left: every node started, unpaused and on the
/// network.
pub async fn heal(compose: &Compose, nodes: &Nodes, network: &str) {
    for service in nodes.services() {
        let _ = compose.unpause(&service).await;
        if !compose.running(&service).await {
            let _ = compose.start(&service).await;
        }
        let _ = compose.connect(&service, network).await;
    }
}
