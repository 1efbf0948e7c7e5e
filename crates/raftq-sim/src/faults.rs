//! The simulation's faults, one at a time, each healed before the next, from the seed's source:
//! partitions (both ways and one way), clock jumps both ways, crashes, power losses of one node
//! and of every node at once, failed fsyncs, and membership changes (a new node added, an added
//! one removed).
//! A fault aimed at "the leader" finds it by asking the members.

use std::time::Duration;

use raftq_check::history::{Event, History};
use raftq_node::{Change, NodeId, Role};
use rand::rngs::StdRng;
use rand::Rng;
use tokio::time::{sleep, Instant};

use crate::api::{Reply, Request};
use crate::workload::Switches;
use crate::world::{address, Action, Control};

/// How far a jumped clock goes, either way.
const JUMP_MS: i64 = 3_600_000;

/// The kinds of fault, each with its weight in the draw.
const KINDS: [(&str, u32); 11] = [
    ("partition", 3),
    ("one_way_partition", 3),
    ("clock_jump", 3),
    ("crash", 3),
    ("crash_leader", 2),
    ("power_loss", 2),
    // The case the Raft core's startup rule guards against: a leader that loses entries it had
    // replicated before its own fsync of them ended.
    ("power_loss_leader", 2),
    ("power_loss_all", 1),
    // A disk that fails fsyncs: the node must not answer for what they should have made
    // durable; it is then restarted after a power loss, which draws what those fsyncs left.
    ("fsync_failure", 2),
    ("grow", 1),
    ("shrink", 1),
];

/// What the faults know of the cluster.
pub struct Cluster {
    /// The workers' switches, with the voters as the faults left them.
    pub switches: Switches,
    /// The next id a new node gets.
    pub next_id: NodeId,
    /// Nodes that did not start again after a fault.
    pub unrecovered: Vec<String>,
}

impl Cluster {
    fn members(&self) -> Vec<NodeId> {
        self.switches
            .members
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    fn set_members(&self, members: Vec<NodeId>) {
        if let Ok(mut m) = self.switches.members.lock() {
            *m = members;
        }
    }
}

/// Injects faults until `until`, one at a time, healing each.
pub async fn run(
    control: &Control,
    cluster: &mut Cluster,
    history: &History,
    rng: &mut StdRng,
    until: Instant,
) {
    let total: u32 = KINDS.iter().map(|(_, w)| w).sum();
    loop {
        sleep(Duration::from_millis(rng.random_range(300..1_500))).await;
        if Instant::now() >= until {
            return;
        }
        let mut draw = rng.random_range(0..total);
        let kind = KINDS
            .iter()
            .find(|(_, weight)| match draw.checked_sub(*weight) {
                Some(rest) => {
                    draw = rest;
                    false
                }
                None => true,
            })
            .map_or("partition", |(kind, _)| *kind);
        let hold = Duration::from_millis(rng.random_range(500..4_000));
        let start = control.clock.now_ms();
        let (target, result) = inject(control, cluster, kind, hold, rng).await;
        let recorded = match &result {
            Ok(()) => kind.to_string(),
            Err(_) => format!("{kind} (failed)"),
        };
        let unrecovered = match result {
            Err(Failure::Unrecovered(why)) => vec![why],
            _ => Vec::new(),
        };
        cluster.unrecovered.extend(unrecovered.iter().cloned());
        history.push(Event::Fault {
            kind: recorded,
            target,
            start,
            end: control.clock.now_ms(),
            restarted: None,
            seed: None,
            unrecovered,
        });
    }
}

/// Why a fault did not happen as described.
#[derive(Debug)]
enum Failure {
    /// It could not be done (a membership change refused): nothing was harmed.
    Refused,
    /// A node did not start again.
    Unrecovered(String),
}

/// The leader the members name, if any of them answers.
pub async fn leader(control: &Control, members: &[NodeId]) -> Option<NodeId> {
    for id in members {
        if let Ok(Reply::Status(status)) = control.api.call(*id, Request::Status).await {
            if status.role == Role::Leader {
                return Some(*id);
            }
            if let Some(leader) = status.leader.filter(|l| members.contains(l)) {
                return Some(leader);
            }
        }
    }
    None
}

async fn inject(
    control: &Control,
    cluster: &mut Cluster,
    kind: &str,
    hold: Duration,
    rng: &mut StdRng,
) -> (String, Result<(), Failure>) {
    let members = cluster.members();
    let any = members[rng.random_range(0..members.len())];
    match kind {
        "power_loss_all" => return ("all".into(), power_loss_all(control, &members, hold).await),
        "grow" => return ("all".into(), grow(control, cluster).await),
        "shrink" => return ("all".into(), shrink(control, cluster, &members).await),
        _ => {}
    }
    let target = match kind {
        "crash_leader" | "power_loss_leader" => leader(control, &members).await.unwrap_or(any),
        _ => any,
    };
    let others: Vec<NodeId> = members.iter().copied().filter(|id| *id != target).collect();
    let result = match kind {
        "partition" => {
            isolate(control, target, &others, hold, |other| {
                control.net.partition(target, other, true)
            })
            .await
        }
        "one_way_partition" => {
            let outgoing = rng.random_bool(0.5);
            isolate(control, target, &others, hold, |other| match outgoing {
                true => control.net.cut(target, other, true),
                false => control.net.cut(other, target, true),
            })
            .await
        }
        "clock_jump" => {
            let jump = if rng.random_bool(0.5) {
                JUMP_MS
            } else {
                -JUMP_MS
            };
            control.skew(target, jump);
            sleep(hold).await;
            control.skew(target, 0);
            Ok(())
        }
        _ => stop_node(control, kind, target, hold, rng).await,
    };
    (format!("node{target}"), result)
}

/// Cuts `target` off from each of `others` with `cut` for `hold`, then heals every link both
/// ways.
async fn isolate(
    control: &Control,
    target: NodeId,
    others: &[NodeId],
    hold: Duration,
    cut: impl Fn(NodeId),
) -> Result<(), Failure> {
    for other in others {
        cut(*other);
    }
    sleep(hold).await;
    for other in others {
        control.net.partition(target, *other, false);
    }
    Ok(())
}

/// The faults that stop one node (a crash, a power loss, failing fsyncs then a power loss), held
/// for `hold`, after which the node starts again on what its disk kept.
async fn stop_node(
    control: &Control,
    kind: &str,
    target: NodeId,
    hold: Duration,
    rng: &mut StdRng,
) -> Result<(), Failure> {
    match kind {
        "crash" | "crash_leader" => {
            let _ = control.act(Action::Crash(target)).await;
            sleep(hold).await;
        }
        "power_loss" | "power_loss_leader" => {
            let _ = control.act(Action::PowerLoss(target)).await;
            sleep(hold).await;
        }
        "fsync_failure" => {
            let count = rng.random_range(1..=3);
            let _ = control.act(Action::FailSyncs { id: target, count }).await;
            sleep(hold).await;
            let _ = control.act(Action::PowerLoss(target)).await;
        }
        _ => return Ok(()),
    }
    start(control, target).await
}

/// Cuts every node's power at once, holds, and starts them all again.
async fn power_loss_all(
    control: &Control,
    members: &[NodeId],
    hold: Duration,
) -> Result<(), Failure> {
    for id in members {
        let _ = control.act(Action::PowerLoss(*id)).await;
    }
    sleep(hold).await;
    let mut result = Ok(());
    for id in members {
        result = result.and(start(control, *id).await);
    }
    result
}

/// Starts node `id` again on what its disk holds, with the flags it had.
async fn start(control: &Control, id: NodeId) -> Result<(), Failure> {
    started(control.act(Action::Start { id, join: None }).await, id)
}

fn started(result: Result<(), String>, id: NodeId) -> Result<(), Failure> {
    result.map_err(|why| Failure::Unrecovered(format!("node{id}: {why}")))
}

/// Adds a new node: started to join through a member, then added as a voter through any member.
async fn grow(control: &Control, cluster: &mut Cluster) -> Result<(), Failure> {
    let members = cluster.members();
    let id = cluster.next_id;
    cluster.next_id += 1;
    let join = Some(address(members[0]));
    started(control.act(Action::Start { id, join }).await, id)?;
    let change = Change::Add {
        id,
        raft_addr: address(id),
    };
    if change_through(control, &members, change).await {
        let mut grown = members;
        grown.push(id);
        cluster.set_members(grown);
        Ok(())
    } else {
        let _ = control.act(Action::Crash(id)).await;
        Err(Failure::Refused)
    }
}

/// Removes the node added last (never one of the first three), then stops it.
async fn shrink(
    control: &Control,
    cluster: &mut Cluster,
    members: &[NodeId],
) -> Result<(), Failure> {
    let Some(id) = members.iter().copied().filter(|id| *id > 3).max() else {
        return Err(Failure::Refused);
    };
    let rest: Vec<NodeId> = members.iter().copied().filter(|m| *m != id).collect();
    if !change_through(control, &rest, Change::Remove { id }).await {
        return Err(Failure::Refused);
    }
    cluster.set_members(rest);
    let _ = control.act(Action::Crash(id)).await;
    Ok(())
}

/// Asks each of `members` in turn for `change` until one commits it, for up to 10 s; a change
/// whose answer was lost is looked for in the members' view.
async fn change_through(control: &Control, members: &[NodeId], change: Change) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        for id in members {
            if let Ok(Reply::Change(Ok(_))) =
                control.api.call(*id, Request::Change(change.clone())).await
            {
                return true;
            }
        }
        if voters(control, members)
            .await
            .is_some_and(|v| done(&change, &v))
        {
            return true;
        }
        sleep(Duration::from_millis(200)).await;
    }
    false
}

fn done(change: &Change, voters: &[NodeId]) -> bool {
    match change {
        Change::Add { id, .. } => voters.contains(id),
        Change::Remove { id } => !voters.contains(id),
    }
}

/// The voters the leader among `members` reports.
pub async fn voters(control: &Control, members: &[NodeId]) -> Option<Vec<NodeId>> {
    let leader = leader(control, members).await?;
    match control.api.call(leader, Request::Status).await {
        Ok(Reply::Status(status)) => Some(
            status
                .members
                .iter()
                .filter(|m| m.role != Role::Learner)
                .map(|m| m.id)
                .collect(),
        ),
        _ => None,
    }
}

/// Heals everything a fault may have left: every link, every clock.
pub fn heal(control: &Control, members: &[NodeId]) {
    for a in members {
        control.skew(*a, 0);
        for b in members {
            control.net.partition(*a, *b, false);
        }
    }
}

/// Every member's voters and cluster id as it reports them.
pub async fn memberships(control: &Control, members: &[NodeId]) -> Vec<Option<(Vec<u64>, String)>> {
    let mut out = Vec::new();
    for id in members {
        out.push(match control.api.call(*id, Request::Status).await {
            Ok(Reply::Status(status)) => status.cluster_id.map(|cluster| {
                let voters = status
                    .members
                    .iter()
                    .filter(|m| m.role != Role::Learner)
                    .map(|m| m.id)
                    .collect();
                (voters, cluster.to_string())
            }),
            _ => None,
        });
    }
    out
}
