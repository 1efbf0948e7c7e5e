//! Power losses: one node's (`power_loss`) or every member's at once (`power_loss_all`). A
//! `docker kill` alone loses nothing a node wrote, since the host's page cache keeps it; each
//! node runs on powerfs (docs/powerfs.md), whose journal can undo every write and directory
//! operation no completed fsync covered. A power loss arms that undo with a seed, kills the
//! node, and starts it again: the layer reverts a seeded choice of the unsynced changes before
//! the node starts, as a power cut leaves a disk.
//!
//! A node that does not come back healthy is a failure of the run of its own (not an anomaly
//! of the history): its last log lines are printed, and it is replaced by a blank node as an
//! operator would, so that the run goes on.

use std::time::Duration;

use tokio::time::sleep;

use crate::clock::now_ms;
use crate::docker::Compose;
use crate::nodes::Nodes;
use crate::repair::{replace, Done};

/// How long a node that lost power may take to come back healthy (answering, and following the
/// leader most members follow).
const RECOVERY_WAIT: Duration = Duration::from_secs(30);
/// How many of an unrecovered node's last log lines are printed.
const LOG_TAIL: usize = 40;
/// What powerfs logs when it reverted unsynced changes at a start.
const REVERTED: &str = "power loss: unsynced changes reverted";
/// What powerfs logs at a start without an armed power loss.
const NOT_ARMED: &str = "no power loss";

/// Cuts the power of `targets` (each a service with the seed its layer reverts with) at once:
/// arms each one's layer, kills them all with one `docker kill`, starts them with one `docker
/// start` after `hold`, and waits for them to come back. Says what each layer reverted; a node
/// that does not come back is counted, its log printed, and replaced.
pub async fn power_loss(
    compose: &Compose,
    nodes: &Nodes,
    targets: &[(String, u64)],
    hold: Duration,
) -> Done {
    let mut errors = Vec::new();
    for (service, seed) in targets {
        if let Err(e) = compose.arm_power_loss(service, *seed).await {
            errors.push(format!("arming {service}: {e}"));
        }
    }
    // Killed and started even when arming failed: a marker written by an arm whose answer was
    // lost is used now, not by the restart of some later fault.
    let services: Vec<String> = targets.iter().map(|(s, _)| s.clone()).collect();
    let mut done = Done::default();
    let killed = match cut(compose, &services, hold).await {
        Ok(killed) => killed,
        Err(e) => {
            errors.push(e);
            done.error = Some(errors.join("; "));
            return done;
        }
    };
    let restarted = now_ms();
    done.restarted = Some(restarted);
    let ids: Vec<u64> = services.iter().filter_map(|s| node_id(s)).collect();
    let lost = nodes.wait_recovered(&ids, RECOVERY_WAIT).await;
    let mut notes = vec![if lost.is_empty() {
        format!("back in {} ms", now_ms().saturating_sub(restarted))
    } else {
        format!("{} not back within {RECOVERY_WAIT:?}", names(&lost))
    }];
    for (service, seed) in targets {
        let reverted = reverted(compose, service, killed).await;
        notes.push(format!("{service} (seed {seed}): {reverted}"));
    }
    for id in &lost {
        let service = crate::nodes::service(*id);
        print_log_tail(compose, &service).await;
        match replace(compose, nodes, &service).await {
            Ok(note) => notes.push(format!("{service} {note}")),
            Err(e) => errors.push(format!("repairing {service}: {e}")),
        }
        done.unrecovered.push(service);
    }
    done.note = Some(notes.join("; "));
    done.error = (!errors.is_empty()).then(|| errors.join("; "));
    done
}

/// One `docker kill` of `services`, `hold`, one `docker start`; answers when the kill returned
/// (whatever they log after it is their next start's).
async fn cut(compose: &Compose, services: &[String], hold: Duration) -> Result<u64, String> {
    compose.kill_all(services).await?;
    let killed = now_ms();
    sleep(hold).await;
    compose.start_all(services).await?;
    Ok(killed)
}

/// The id of the node of compose service `nodeN`.
fn node_id(service: &str) -> Option<u64> {
    service.strip_prefix("node")?.parse().ok()
}

fn names(ids: &[u64]) -> String {
    let names: Vec<String> = ids.iter().map(|id| crate::nodes::service(*id)).collect();
    names.join(", ")
}

/// What `service`'s layer logged about the power loss when it started after `since` (ms since
/// the Unix epoch): the revert's report, or that it found none armed.
async fn reverted(compose: &Compose, service: &str, since: u64) -> String {
    match compose.log_lines(service, Some(since), None).await {
        Ok(lines) => revert_of(&lines),
        Err(e) => format!("its log could not be read: {e}"),
    }
}

/// The revert a start's log lines report: the report powerfs logged with it (files and sectors
/// with unsynced changes, how many were lost, directory operations pending and lost), or what
/// the start did instead.
fn revert_of(lines: &[String]) -> String {
    if let Some(line) = lines.iter().find(|l| l.contains(REVERTED)) {
        let report = line
            .split_once("report=")
            .map_or(line.as_str(), |(_, report)| report);
        return format!("reverted {}", report.trim());
    }
    if lines.iter().any(|l| l.contains(NOT_ARMED)) {
        return "started without a power loss armed: everything kept".to_string();
    }
    "no revert in its log".to_string()
}

/// Prints the last lines `service` logged, to show why it did not come back.
async fn print_log_tail(compose: &Compose, service: &str) {
    match compose.log_lines(service, None, Some(LOG_TAIL)).await {
        Ok(lines) => {
            println!("{service} did not come back after a power loss; its last log lines:");
            for line in lines {
                println!("    {line}");
            }
        }
        Err(e) => println!("{service} did not come back after a power loss; no log: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[&str]) -> Vec<String> {
        text.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn the_revert_report_is_read_from_the_start_s_log() {
        let log = lines(&[
            "2026-12-05T16:00:00.000000000Z 2026-12-05T16:00:00.000Z  INFO \
             raftq_powerfs::supervise: power loss: unsynced changes reverted seed=7 \
             report=Report { files: 3, sectors: 12, sectors_lost: 5, lengths_changed: 1, \
             operations: 2, operations_lost: 1, failures: 0 }",
            "2026-12-05T16:00:00.100000000Z INFO mounted",
        ]);
        assert_eq!(
            revert_of(&log),
            "reverted Report { files: 3, sectors: 12, sectors_lost: 5, lengths_changed: 1, \
             operations: 2, operations_lost: 1, failures: 0 }"
        );
        let kept = lines(&["t INFO no power loss: everything written is kept"]);
        assert!(revert_of(&kept).starts_with("started without a power loss armed"));
        assert_eq!(revert_of(&[]), "no revert in its log");
    }

    #[test]
    fn a_node_id_is_read_from_its_service_name() {
        assert_eq!(node_id("node3"), Some(3));
        assert_eq!(node_id("all"), None);
        assert_eq!(names(&[1, 3]), "node1, node3");
    }
}
