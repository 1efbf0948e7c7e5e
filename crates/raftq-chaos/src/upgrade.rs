//! A rolling upgrade under the workload, in place of the fault schedule (`--upgrade-to IMAGE`):
//! one node at a time is stopped with SIGTERM (a leader hands over first), its container
//! replaced by one of `IMAGE` on the same data volume, and started. Followers go first and the
//! leader last: a node of the later build reads the entries a leader of the earlier one writes,
//! where the reverse may not hold (docs/operations.md, "Upgrades"). The replacements are spread
//! so that the cluster serves with nodes of both builds for at least the mixed time, from the
//! start of the first replaced node to the stop of the last earlier one. Each replacement is a
//! fault of kind `upgrade` in the history.

use std::path::Path;
use std::time::Duration;

use raftq_check::history::{Event, History};
use tokio::time::{sleep_until, Instant};

use crate::clock::now_ms;
use crate::docker::Compose;
use crate::nodes::{service, Nodes};

/// How long a replaced node has to come back and follow the leader the others name.
const BACK_WITHIN: Duration = Duration::from_secs(90);

/// Upgrades every node of `nodes` to `image`, the cluster mixed for at least `mixed`; the
/// compose file that names the replaced nodes' image is written in `dir`.
pub async fn run(
    compose: &Compose,
    nodes: &Nodes,
    image: &str,
    mixed: Duration,
    dir: &Path,
    history: &History,
) -> Result<(), String> {
    let file = dir.join("upgrade.yml");
    let steps = nodes.services().len();
    let mut upgraded: Vec<String> = Vec::new();
    let mut first_back: Option<Instant> = None;
    let mut mixed_until = None;
    for step in 0..steps {
        if let Some(first) = first_back {
            sleep_until(first + mixed * step as u32 / (steps as u32 - 1).max(1)).await;
        }
        let target = next(nodes, &upgraded).await;
        if step + 1 == steps {
            mixed_until = Some(Instant::now());
        }
        upgraded.push(target.clone());
        let start = now_ms();
        let result = replace(compose, &target, &upgraded, image, &file).await;
        let restarted = now_ms();
        first_back.get_or_insert_with(Instant::now);
        let back = nodes.wait_healthy(BACK_WITHIN).await;
        let leader = nodes.leader().await.map_or("none".into(), service);
        println!(
            "upgrade of {target}: {}; back after {} ms, leader {leader}",
            result.as_ref().map_or_else(|e| e.as_str(), |()| "replaced"),
            now_ms() - start,
        );
        history.push(Event::Fault {
            kind: if result.is_ok() {
                "upgrade"
            } else {
                "upgrade (failed)"
            }
            .into(),
            target,
            start,
            end: now_ms(),
            restarted: Some(restarted),
            seed: None,
            unrecovered: Vec::new(),
        });
        result?;
        if !back {
            return Err(format!(
                "the cluster had no leader within {BACK_WITHIN:?} of step {step}"
            ));
        }
    }
    if let (Some(first), Some(until)) = (first_back, mixed_until) {
        let seconds = until.saturating_duration_since(first).as_secs_f64();
        println!("upgrade: the cluster served with nodes of both builds for {seconds:.0} s");
    }
    Ok(())
}

/// The next node to replace: a follower not yet replaced, or the leader once it is the last.
async fn next(nodes: &Nodes, upgraded: &[String]) -> String {
    let leader = nodes.leader().await.map(service);
    let left: Vec<String> = nodes
        .services()
        .into_iter()
        .filter(|s| !upgraded.contains(s))
        .collect();
    left.iter()
        .find(|s| Some(*s) != leader.as_ref())
        .unwrap_or(&left[0])
        .clone()
}

/// Stops `target` (SIGTERM, a leader hands over) and starts it again from `image`, which the
/// compose file `file` now names for every service in `upgraded`.
async fn replace(
    compose: &Compose,
    target: &str,
    upgraded: &[String],
    image: &str,
    file: &Path,
) -> Result<(), String> {
    std::fs::write(file, override_file(upgraded, image))
        .map_err(|e| format!("{}: {e}", file.display()))?;
    compose.stop(target).await?;
    compose.with_file(file).recreate(target).await
}

/// A compose file that gives `services` the image `image`.
fn override_file(services: &[String], image: &str) -> String {
    let mut text = String::from("services:\n");
    for s in services {
        text.push_str(&format!("  {s}:\n    image: {image}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_override_names_the_image_of_every_upgraded_service() {
        let text = override_file(&["node2".into(), "node3".into()], "raftq:new");
        assert_eq!(
            text,
            "services:\n  node2:\n    image: raftq:new\n  node3:\n    image: raftq:new\n"
        );
    }
}
