//! The fault injector: a seeded random schedule of crashes, pauses, partitions, restarts,
//! membership changes, clock jumps and corrupted files, of the leader or a follower, each
//! healed (or repaired as an operator would) before the next.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use tokio::time::{sleep, Instant};

use crate::docker::Compose;
use crate::history::{now_ms, Event, History};
use crate::nodes::{service, Nodes};

/// The kinds of fault.
pub const KINDS: [&str; 13] = [
    "kill_leader",
    "kill_follower",
    "pause_leader",
    "isolate_leader",
    "isolate_follower",
    "restart_all",
    "rolling_restart",
    "replace_node",
    "grow",
    "shrink",
    "clock_jump",
    "one_way_partition",
    "corrupt",
];

/// How long a repaired or added node may take to catch up and answer.
const REPAIR_WAIT: Duration = Duration::from_secs(60);

/// Injects faults from `seed` until `until`, one at a time, healing each.
pub async fn run(compose: Compose, nodes: Nodes, seed: u64, until: Instant, history: History) {
    let mut rng = StdRng::seed_from_u64(seed);
    // Every kind once per round, in a seeded order, so a short run still sees each kind; a
    // round grows the cluster before it shrinks it.
    let mut round: Vec<&str> = Vec::new();
    while Instant::now() < until {
        sleep(Duration::from_millis(rng.random_range(2_000..5_000))).await;
        if Instant::now() >= until {
            break;
        }
        if round.is_empty() {
            round = KINDS.to_vec();
            round.shuffle(&mut rng);
            let at = |k: &str, round: &[&str]| round.iter().position(|x| *x == k);
            if let (Some(grow), Some(shrink)) = (at("grow", &round), at("shrink", &round)) {
                // Popped from the back: grow must sit after shrink in the vector.
                if grow < shrink {
                    round.swap(grow, shrink);
                }
            }
        }
        let Some(kind) = round.pop() else {
            break;
        };
        let leader = nodes.leader().await;
        let follower = nodes.follower(leader, &mut rng);
        let target = match kind {
            "kill_leader" | "pause_leader" | "isolate_leader" => {
                service(leader.unwrap_or(follower))
            }
            "restart_all" | "rolling_restart" | "grow" | "shrink" => "all".to_string(),
            "clock_jump" | "one_way_partition" if rng.random_bool(0.5) => {
                service(leader.unwrap_or(follower))
            }
            _ => service(follower),
        };
        let hold = Duration::from_millis(rng.random_range(1_500..4_000));
        let start = now_ms();
        let result = inject(&compose, &nodes, kind, &target, hold, &mut rng).await;
        // A fault that failed part-way is recorded under another name: the checker's allowances
        // for a kind of fault must not apply to one that did not happen as described.
        let recorded = match result {
            Ok(Some(note)) => {
                println!("fault {kind} on {target}: {note}");
                kind.to_string()
            }
            Ok(None) => kind.to_string(),
            Err(e) => {
                println!("fault {kind} on {target} failed: {e}");
                format!("{kind} (failed)")
            }
        };
        if matches!(kind, "grow" | "shrink" | "replace_node" | "corrupt") {
            nodes.sync_members().await;
        }
        history.push(Event::Fault {
            kind: recorded,
            target,
            start,
            end: now_ms(),
        });
    }
}

/// Injects one fault and heals it; may return a note on what the cluster did.
async fn inject(
    compose: &Compose,
    nodes: &Nodes,
    kind: &str,
    target: &str,
    hold: Duration,
    rng: &mut StdRng,
) -> Result<Option<String>, String> {
    match kind {
        "kill_leader" | "kill_follower" => {
            compose.kill(target).await?;
            sleep(hold).await;
            compose.start(target).await?;
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
            return replace(compose, nodes, target).await.map(Some);
        }
        "grow" => {
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
        }
        "shrink" => {
            // The nodes a grow added: the ones the cluster did not start with.
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
        }
        "clock_jump" => {
            let offset = if rng.random_bool(0.5) {
                "+3600"
            } else {
                "-3600"
            };
            compose.set_clock_offset(target, offset).await?;
            // Long enough for the pings to measure the skew and the node to act on it.
            sleep(hold + Duration::from_secs(2)).await;
            compose.set_clock_offset(target, "+0").await?;
            return Ok(Some(format!("clock {offset} s")));
        }
        "one_way_partition" => {
            let others: Vec<String> = nodes
                .services()
                .into_iter()
                .filter(|s| s != target)
                .collect();
            let Some(from) = others.choose(rng) else {
                return Ok(None);
            };
            compose.drop_from(target, from).await?;
            sleep(hold).await;
            compose.undrop(target).await?;
            return Ok(Some(format!("packets from {from} dropped")));
        }
        "corrupt" => return corrupt(compose, nodes, target, rng).await.map(Some),
        _ => return Err(format!("unknown fault {kind}")),
    }
    Ok(None)
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

/// Wipes `target`'s data, starts it blank, and repairs the cluster with `raftq cluster
/// replace`, as docs/operations.md tells an operator.
async fn replace(compose: &Compose, nodes: &Nodes, target: &str) -> Result<String, String> {
    compose.wipe(target).await?;
    compose.up(target).await?;
    let id = target.trim_start_matches("node");
    if let Ok(n) = id.parse() {
        nodes.wait_answering(n, REPAIR_WAIT).await?;
    }
    let members: Vec<String> = nodes
        .services()
        .into_iter()
        .filter(|s| s != target)
        .collect();
    // The address is given, as an operator who knows it would: a replace that removed the
    // node and then failed to add it is finished by the next try.
    let addr = format!("{target}:7000");
    let mut errors = Vec::new();
    for service in &members {
        match compose
            .cli(
                service,
                &["cluster", "replace", "--id", id, "--raft-addr", &addr],
            )
            .await
        {
            Ok(_) => {
                nodes.wait_healthy(REPAIR_WAIT).await;
                return Ok("replaced with a blank node".into());
            }
            Err(e) => errors.push(format!("on {service}: {e}")),
        }
    }
    Err(format!("raftq cluster replace: {}", errors.join("; ")))
}

/// Stops `target`, damages one of its data files (bytes flipped in the middle, or the end cut
/// off), and starts it. A node that notices and stops is repaired like a lost disk.
async fn corrupt(
    compose: &Compose,
    nodes: &Nodes,
    target: &str,
    rng: &mut StdRng,
) -> Result<String, String> {
    compose.stop(target).await?;
    let scratch = std::env::temp_dir().join(format!("raftq-chaos-data-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let damaged = damage_one(compose, target, &scratch, rng).await;
    let _ = std::fs::remove_dir_all(&scratch);
    // Started again whether or not the damage could be done.
    compose.start(target).await?;
    let note = damaged?;
    if nodes.wait_healthy(Duration::from_secs(30)).await {
        return Ok(format!("{note}; the node came back"));
    }
    let repaired = replace(compose, nodes, target).await?;
    Ok(format!("{note}; the node did not come back: {repaired}"))
}

/// Damages one of `target`'s data files, copied through `scratch`; says which and how.
async fn damage_one(
    compose: &Compose,
    target: &str,
    scratch: &Path,
    rng: &mut StdRng,
) -> Result<String, String> {
    compose.copy_out(target, "/data", scratch).await?;
    let files = data_files(scratch);
    let file = files.choose(rng).ok_or("no data file to damage")?;
    let how = damage(file, rng).map_err(|e| format!("damaging {}: {e}", file.display()))?;
    let relative = file.strip_prefix(scratch).map_err(|e| e.to_string())?;
    let inside = format!("/data/{}", relative.display());
    compose.copy_in(target, file, &inside).await?;
    Ok(format!("{how} {inside}"))
}

/// The files a node keeps its state in, under `dir` (its `/data`): RocksDB's tables, blob
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
/// network, with no packet filter and its clock right.
pub async fn heal(compose: &Compose, nodes: &Nodes, network: &str) {
    for service in nodes.services() {
        let _ = compose.unpause(&service).await;
        if !compose.running(&service).await {
            let _ = compose.start(&service).await;
        }
        let _ = compose.connect(&service, network).await;
        let _ = compose.undrop(&service).await;
        let _ = compose.set_clock_offset(&service, "+0").await;
    }
}
