//! The fault injector: the seeded schedule's crashes, pauses, partitions, restarts, membership
//! changes, clock jumps, corrupted files and power losses, of the leader or a follower (or of
//! every node), each healed (or repaired as an operator would) before the next.

use std::path::{Path, PathBuf};
use std::time::Duration;

use raftq_check::history::{Event, History};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::Rng;
use tokio::time::{sleep, Instant};

use crate::clock::now_ms;
use crate::docker::{Compose, BACKING_DATA};
use crate::nodes::{service, Nodes};
use crate::power;
use crate::repair::{replace, Done, REPAIR_WAIT};
use crate::schedule::{Planned, Schedule};

/// Which faults a run injects: those of `seed`'s schedule until `until`.
pub struct Plan {
    pub seed: u64,
    pub until: Instant,
}

/// Injects the faults of `plan`, one at a time, healing each.
pub async fn run(compose: Compose, nodes: Nodes, plan: Plan, history: History) {
    let until = plan.until;
    for mut planned in Schedule::new(plan.seed) {
        sleep(planned.gap).await;
        if Instant::now() >= until {
            break;
        }
        let kind = planned.kind;
        let target = target_of(&nodes, kind, &mut planned.rng).await;
        let start = now_ms();
        let result = inject(&compose, &nodes, &target, &mut planned).await;
        if matches!(
            kind,
            "grow" | "shrink" | "replace_node" | "corrupt" | "power_loss" | "power_loss_all"
        ) {
            nodes.sync_members().await;
        }
        history.push(record(&planned, target, start, result));
    }
}

/// The node a fault of `kind` is aimed at (`all` for the faults of every node).
async fn target_of(nodes: &Nodes, kind: &str, rng: &mut StdRng) -> String {
    let leader = nodes.leader().await;
    let follower = nodes.follower(leader, rng);
    match kind {
        "kill_leader" | "pause_leader" | "isolate_leader" => service(leader.unwrap_or(follower)),
        "restart_all" | "rolling_restart" | "grow" | "shrink" | "power_loss_all" => {
            "all".to_string()
        }
        "clock_jump" | "one_way_partition" | "power_loss" if rng.random_bool(0.5) => {
            service(leader.unwrap_or(follower))
        }
        _ => service(follower),
    }
}

/// Prints what a fault did and makes its history event. A fault that failed part-way is
/// recorded under another name: the checker's allowances for a kind of fault must not apply to
/// one that did not happen as described.
fn record(planned: &Planned, target: String, start: u64, result: Result<Done, String>) -> Event {
    let kind = planned.kind;
    let done = match result {
        Ok(done) => done,
        Err(e) => Done {
            error: Some(e),
            ..Done::default()
        },
    };
    if let Some(note) = &done.note {
        println!("fault {kind} on {target}: {note}");
    }
    let recorded = match &done.error {
        None => kind.to_string(),
        Some(e) => {
            println!("fault {kind} on {target} failed: {e}");
            format!("{kind} (failed)")
        }
    };
    Event::Fault {
        kind: recorded,
        target,
        start,
        end: now_ms(),
        restarted: done.restarted,
        seed: kind.starts_with("power_loss").then_some(planned.power_seed),
        unrecovered: done.unrecovered,
    }
}

/// Injects one fault and heals it.
async fn inject(
    compose: &Compose,
    nodes: &Nodes,
    target: &str,
    planned: &mut Planned,
) -> Result<Done, String> {
    let hold = planned.hold;
    match planned.kind {
        "kill_leader" | "kill_follower" => {
            compose.kill(target).await?;
            sleep(hold).await;
            compose.start(target).await?;
            return Ok(restarted_now());
        }
        "pause_leader" => {
            compose.pause(target).await?;
            sleep(hold).await;
            compose.unpause(target).await?;
        }
        "isolate_leader" | "isolate_follower" => {
            let network = compose.disconnect(target).await?;
            sleep(hold).await;
            compose.connect(target, &network).await?;
        }
        "restart_all" => {
            let services = nodes.services();
            compose.kill_all(&services).await?;
            sleep(hold).await;
            compose.start_all(&services).await?;
            return Ok(restarted_now());
        }
        "rolling_restart" => {
            for service in nodes.services() {
                compose.restart(&service).await?;
                nodes.wait_healthy(Duration::from_secs(30)).await;
            }
        }
        "replace_node" => {
            compose.kill(target).await?;
            sleep(hold).await;
            return replace(compose, nodes, target).await.map(Done::noted);
        }
        "grow" => grow(compose, nodes).await?,
        "shrink" => shrink(compose, nodes).await?,
        "clock_jump" => return clock_jump(compose, target, hold, &mut planned.rng).await,
        "one_way_partition" => {
            return one_way_partition(compose, nodes, target, hold, &mut planned.rng).await
        }
        "corrupt" => return corrupt(compose, nodes, target, &mut planned.rng).await,
        "power_loss" => {
            let targets = [(target.to_string(), planned.power_seed)];
            return Ok(power::power_loss(compose, nodes, &targets, hold).await);
        }
        "power_loss_all" => {
            let targets: Vec<(String, u64)> = nodes
                .members()
                .into_iter()
                .map(|id| (service(id), planned.power_seed + id))
                .collect();
            return Ok(power::power_loss(compose, nodes, &targets, hold).await);
        }
        kind => return Err(format!("unknown fault {kind}")),
    }
    Ok(Done::default())
}

/// A fault's outcome whose nodes were all started again just now.
fn restarted_now() -> Done {
    Done {
        restarted: Some(now_ms()),
        ..Done::default()
    }
}

/// Starts the spare nodes and adds each with `raftq cluster add`, under load.
async fn grow(compose: &Compose, nodes: &Nodes) -> Result<(), String> {
    for id in nodes.spares() {
        compose.up(&service(id)).await?;
        nodes.wait_answering(id, REPAIR_WAIT).await?;
        let addr = format!("{}:7000", service(id));
        let id_arg = id.to_string();
        run_cli(
            compose,
            nodes,
            &["cluster", "add", "--id", &id_arg, "--raft-addr", &addr],
        )
        .await?;
        nodes.set_member(id, true);
    }
    nodes.wait_healthy(REPAIR_WAIT).await;
    Ok(())
}

/// Removes the nodes a grow added (the ones the cluster did not start with) with `raftq
/// cluster remove`, and deletes their containers and volumes.
async fn shrink(compose: &Compose, nodes: &Nodes) -> Result<(), String> {
    let grown: Vec<u64> = nodes
        .members()
        .into_iter()
        .filter(|id| compose.is_spare(&service(*id)))
        .collect();
    for id in grown {
        let id_arg = id.to_string();
        run_cli(compose, nodes, &["cluster", "remove", "--id", &id_arg]).await?;
        nodes.set_member(id, false);
        compose.wipe(&service(id)).await?;
    }
    Ok(())
}

/// Moves `target`'s clock an hour forward or back, long enough for the pings to measure the
/// skew and the node to act on it, then puts it back.
async fn clock_jump(
    compose: &Compose,
    target: &str,
    hold: Duration,
    rng: &mut StdRng,
) -> Result<Done, String> {
    let offset = if rng.random_bool(0.5) {
        "+3600"
    } else {
        "-3600"
    };
    compose.set_clock_offset(target, offset).await?;
    sleep(hold + Duration::from_secs(2)).await;
    compose.set_clock_offset(target, "+0").await?;
    Ok(Done::noted(format!("clock {offset} s")))
}

/// Drops every packet another member (chosen by `rng`) sends to `target`'s peer port, for
/// `hold`.
async fn one_way_partition(
    compose: &Compose,
    nodes: &Nodes,
    target: &str,
    hold: Duration,
    rng: &mut StdRng,
) -> Result<Done, String> {
    let others: Vec<String> = nodes
        .services()
        .into_iter()
        .filter(|s| s != target)
        .collect();
    let Some(from) = others.choose(rng) else {
        return Ok(Done::default());
    };
    compose.drop_from(target, from).await?;
    sleep(hold).await;
    compose.undrop(target).await?;
    Ok(Done::noted(format!("packets from {from} dropped")))
}

/// Runs `raftq ARGS` on a member, trying each in turn (the leader first) until one succeeds,
/// twice round at most.
async fn run_cli(compose: &Compose, nodes: &Nodes, args: &[&str]) -> Result<String, String> {
    let mut errors = Vec::new();
    for _ in 0..2 {
        let leader = nodes.leader().await;
        let mut order = nodes.members();
        order.sort_by_key(|id| Some(*id) != leader);
        for id in order {
            match compose.cli(&service(id), args).await {
                Ok(out) => return Ok(out),
                Err(e) => errors.push(format!("on {}: {e}", service(id))),
            }
        }
        sleep(Duration::from_secs(1)).await;
    }
    Err(errors.join("; "))
}

/// Stops `target`, damages one of its data files (bytes flipped in the middle, or the end cut
/// off), and starts it. A node that notices and stops is repaired like a lost disk.
async fn corrupt(
    compose: &Compose,
    nodes: &Nodes,
    target: &str,
    rng: &mut StdRng,
) -> Result<Done, String> {
    compose.stop(target).await?;
    let scratch = std::env::temp_dir().join(format!("raftq-chaos-data-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let damaged = damage_one(compose, target, &scratch, rng).await;
    let _ = std::fs::remove_dir_all(&scratch);
    // Started again whether or not the damage could be done.
    compose.start(target).await?;
    let note = damaged?;
    if nodes.wait_healthy(Duration::from_secs(30)).await {
        return Ok(Done::noted(format!("{note}; the node came back")));
    }
    let repaired = replace(compose, nodes, target).await?;
    Ok(Done::noted(format!(
        "{note}; the node did not come back: {repaired}"
    )))
}

/// Damages one of `target`'s data files, copied through `scratch`; says which and how. The
/// node is stopped, so its files are read and written in its volume, where powerfs keeps them
/// (its `/data` is then an empty mount point); the layer's next start finds no power loss armed
/// and keeps the change.
async fn damage_one(
    compose: &Compose,
    target: &str,
    scratch: &Path,
    rng: &mut StdRng,
) -> Result<String, String> {
    compose.copy_out(target, BACKING_DATA, scratch).await?;
    let files = data_files(scratch);
    let file = files.choose(rng).ok_or("no data file to damage")?;
    let how = damage(file, rng).map_err(|e| format!("damaging {}: {e}", file.display()))?;
    let relative = file.strip_prefix(scratch).map_err(|e| e.to_string())?;
    let inside = format!("{BACKING_DATA}/{}", relative.display());
    compose.copy_in(target, file, &inside).await?;
    Ok(format!("{how} {inside}"))
}

/// The files a node keeps its state in, under `dir` (a copy of its data directory): RocksDB's tables, blob
/// files, write-ahead logs and manifests in `db`, the Raft log's segments in `log`, and the
/// snapshots in `snapshots`.
fn data_files(dir: &Path) -> Vec<PathBuf> {
    let listing = |sub: &str| -> Vec<PathBuf> {
        std::fs::read_dir(dir.join(sub))
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let stored = |path: &PathBuf| {
        let name = path
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().to_string());
        [".sst", ".blob", ".log", ".seg"]
            .iter()
            .any(|ext| name.ends_with(ext))
            || name.starts_with("MANIFEST")
    };
    let mut out: Vec<PathBuf> = listing("db").into_iter().filter(stored).collect();
    out.extend(listing("log").into_iter().filter(stored));
    out.extend(listing("snapshots"));
    out.retain(|p| p.metadata().is_ok_and(|m| m.is_file() && m.len() > 0));
    out.sort();
    out
}

/// Flips eight bytes in the middle of `file`, or cuts off its last quarter; says which. Only
/// tables, blob files and snapshots are cut: a write-ahead log, log segment or manifest cut
/// short reads as a crash during its last write, which nothing can tell from lost acknowledged
/// writes (docs/durability.md), so those are only flipped.
fn damage(file: &Path, rng: &mut StdRng) -> std::io::Result<&'static str> {
    let mut bytes = std::fs::read(file)?;
    let name = file
        .file_name()
        .map_or(String::new(), |n| n.to_string_lossy().to_string());
    let may_cut =
        !(name.ends_with(".log") || name.ends_with(".seg") || name.starts_with("MANIFEST"));
    let how = if !may_cut || rng.random_bool(0.5) {
        let at = bytes.len() / 2;
        for b in bytes.iter_mut().skip(at).take(8) {
            *b ^= 0xff;
        }
        "flipped bytes in"
    } else {
        bytes.truncate(bytes.len() * 3 / 4);
        "truncated"
    };
    std::fs::write(file, bytes)?;
    Ok(how)
}

/// Undoes anything a failed injection may have left: every member started, unpaused, on the
/// network, with no packet filter and its clock right. Most of these fail harmlessly when there
/// was nothing to undo; a clock that cannot be put right is said, since the node then runs
/// jumped to the end of the run (the checker allows for that after a failed clock jump).
pub async fn heal(compose: &Compose, nodes: &Nodes, network: &str) {
    for service in nodes.services() {
        let _ = compose.unpause(&service).await;
        if !compose.running(&service).await {
            let _ = compose.start(&service).await;
        }
        let _ = compose.connect(&service, network).await;
        let _ = compose.undrop(&service).await;
        if let Err(e) = compose.set_clock_offset(&service, "+0").await {
            println!("warning: the clock of {service} could not be put right: {e}");
        }
    }
}
