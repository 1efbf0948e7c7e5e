//! One simulated run, as the director plays it: wait for a leader, create the queues, start the
//! workers, inject faults for a while, heal, drain every queue, read the final state, and judge
//! the history with the chaos checker.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::future::join_all;
use raftq_check::checker::{self, Final, NodeState, Report};
use raftq_check::history::{Event, History};
use raftq_check::workers;
use raftq_engine::{Command, QueueAttributes, RedrivePolicyInput, RetryBackoffInput};
use raftq_node::{NodeId, Query, QueryResult};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::{sleep, Instant};
use uuid::Uuid;

use crate::api::{Reply, Request};
use crate::faults::{self, Cluster};
use crate::workload::{self, Switches, ACCOUNT, LEASE_SECONDS};
use crate::world::Control;

const MAX_RECEIVE_COUNT: u64 = 3;

/// What a run found.
#[derive(Debug)]
pub struct Judged {
    pub events: Vec<Event>,
    pub report: Report,
    /// Nodes that did not start again after a fault, and why.
    pub unrecovered: Vec<String>,
    /// What went wrong outside the invariants (no leader, a queue never drained).
    pub problems: Vec<String>,
}

/// Plays the run of `seed` with `faults_for` of faults.
pub async fn play(control: Control, seed: u64, faults_for: Duration) -> Judged {
    let mut rng = StdRng::seed_from_u64(seed);
    let history = History::default();
    let mut problems = Vec::new();
    let switches = Switches::default();
    let members: Vec<NodeId> = vec![1, 2, 3];
    *switches
        .members
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = members.clone();
    if !leader_within(&control, &members, Duration::from_secs(30)).await {
        problems.push("no leader within 30 s of the start".into());
    }
    let dead_letter = match create_queues(&control, &members).await {
        Ok(pairs) => pairs,
        Err(e) => {
            problems.push(e);
            return Judged {
                events: history.events(),
                report: Report::default(),
                unrecovered: Vec::new(),
                problems,
            };
        }
    };
    switches.workers.ack_per_mille.store(600, Ordering::SeqCst);
    let workers = workers::start(
        &dead_letter,
        rng.random(),
        |queue, id, seed| {
            workload::produce(
                control.clone(),
                history.clone(),
                queue,
                id,
                switches.clone(),
                seed,
            )
        },
        |queue, seed| {
            workload::consume(
                control.clone(),
                history.clone(),
                queue,
                switches.clone(),
                seed,
            )
        },
    );
    let mut cluster = Cluster {
        switches: switches.clone(),
        next_id: 4,
        unrecovered: Vec::new(),
    };
    faults::run(
        &control,
        &mut cluster,
        &history,
        &mut rng,
        Instant::now() + faults_for,
    )
    .await;
    let ending = Ending {
        history,
        dead_letter,
        workers,
        problems,
    };
    ending.settle(&control, cluster).await
}

/// What a run has when its faults end: its history, its queues, the workers still at work and
/// the problems found so far.
struct Ending {
    history: History,
    /// Each source queue's dead-letter queue.
    dead_letter: BTreeMap<String, String>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    problems: Vec<String>,
}

impl Ending {
    /// Heals every fault, lets the consumers drain the queues acknowledging every receive, stops
    /// the workers, and judges the history against the state the members end with.
    async fn settle(mut self, control: &Control, cluster: Cluster) -> Judged {
        let switches = &cluster.switches;
        let members = switches
            .members
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default();
        faults::heal(control, &members);
        if !leader_within(control, &members, Duration::from_secs(30)).await {
            self.problems
                .push("no leader within 30 s of healing".into());
        }
        switches.workers.begin_drain();
        if !drain(
            control,
            &members,
            &self.dead_letter,
            Duration::from_secs(60),
        )
        .await
        {
            self.problems
                .push("queues were not empty 60 s after healing".into());
        }
        switches.workers.stop_consumers();
        for worker in self.workers {
            let _ = worker.await;
        }
        let remaining = remaining(control, &members, &self.dead_letter)
            .await
            .unwrap_or_else(|e| {
                self.problems.push(e);
                BTreeMap::new()
            });
        let fin = Final {
            remaining,
            node_states: node_states(control, &members).await,
            memberships: faults::memberships(control, &members).await,
            members: members.clone(),
            dead_letter: self.dead_letter,
            max_receive_count: MAX_RECEIVE_COUNT,
            strict_priority_queues: BTreeSet::from([workload::PRIORITY_QUEUE.to_string()]),
            leaders: BTreeMap::new(),
            outboxes: outboxes(control, &members).await,
        };
        let events = self.history.events();
        let report = checker::check(&events, &fin);
        Judged {
            events,
            report,
            unrecovered: cluster.unrecovered,
            problems: self.problems,
        }
    }
}

/// Waits until the members agree on a leader among them.
async fn leader_within(control: &Control, members: &[NodeId], limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if faults::leader(control, members).await.is_some() {
            return true;
        }
        sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Two standard source queues (one for strict priorities) and a FIFO one, with their
/// dead-letter queues; all retry with a backoff.
async fn create_queues(
    control: &Control,
    members: &[NodeId],
) -> Result<BTreeMap<String, String>, String> {
    let mut pairs = BTreeMap::new();
    for suffix in ["", "-prio", ".fifo"] {
        let source = format!("sim{suffix}");
        let dlq = format!("sim-dlq{suffix}");
        create(control, members, &dlq, QueueAttributes::default()).await?;
        let attributes = QueueAttributes {
            lease_seconds: Some(LEASE_SECONDS),
            redrive_policy: Some(Some(RedrivePolicyInput {
                dead_letter_target: Some(dlq.clone()),
                max_receive_count: Some(MAX_RECEIVE_COUNT as i64),
            })),
            retry_backoff: Some(Some(RetryBackoffInput {
                initial_seconds: Some(1),
                max_seconds: Some(4),
                multiplier: Some(2.0),
            })),
            ..QueueAttributes::default()
        };
        create(control, members, &source, attributes).await?;
        pairs.insert(source, dlq);
    }
    Ok(pairs)
}

async fn create(
    control: &Control,
    members: &[NodeId],
    name: &str,
    attributes: QueueAttributes,
) -> Result<(), String> {
    for attempt in 0..50 {
        let command = Command::CreateQueue {
            account: ACCOUNT.into(),
            queue_id: Uuid::from_u128(u128::from(attempt as u64) << 64 | name.len() as u128),
            name: name.into(),
            attributes: attributes.clone(),
        };
        let id = members[attempt % members.len()];
        match workload::write(control, id, command).await {
            Ok(Reply::Write(Ok(response))) => match response.result {
                Some(Ok(_)) => return Ok(()),
                Some(Err(e)) if e.code() == "queue_exists" => return Ok(()),
                _ => {}
            },
            _ => sleep(Duration::from_millis(200)).await,
        }
    }
    Err(format!("could not create {name}"))
}

/// A linearizable read through the members in turn; `None` when none answers.
async fn read(control: &Control, members: &[NodeId], query: Query) -> Option<QueryResult> {
    for id in members {
        if let Ok(Reply::Read(Ok(Ok(result)))) =
            control.api.call(*id, Request::Read(query.clone())).await
        {
            return Some(result);
        }
    }
    None
}

/// Waits until every queue is empty twice in a row, up to `limit`.
async fn drain(
    control: &Control,
    members: &[NodeId],
    dead_letter: &BTreeMap<String, String>,
    limit: Duration,
) -> bool {
    workers::drain(limit, move || async move {
        let mut total = 0;
        for queue in dead_letter.iter().flat_map(|(s, d)| [s, d]) {
            let query = Query::Stats {
                account: ACCOUNT.into(),
                queue: queue.clone(),
            };
            total += match read(control, members, query).await {
                Some(QueryResult::Stats(s)) => s.visible + s.leased + s.delayed + s.pending_redrive,
                _ => 1,
            };
        }
        total
    })
    .await
}

/// The messages left in every queue, each with when it was moved to that dead-letter queue,
/// read through whichever member answers.
async fn remaining(
    control: &Control,
    members: &[NodeId],
    dead_letter: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, BTreeMap<String, Option<u64>>>, String> {
    workers::remaining(dead_letter, |queue, after| async move {
        let query = Query::Peek {
            account: ACCOUNT.into(),
            queue,
            after,
            limit: i64::try_from(workers::PAGE).ok(),
        };
        let Some(QueryResult::Messages(page)) = read(control, members, query).await else {
            return None;
        };
        let next = page.last().map(|(meta, _)| meta.seq);
        let messages = page
            .into_iter()
            .map(|(meta, payload)| (payload.message_id.to_string(), meta.moved_at))
            .collect();
        Some((messages, next))
    })
    .await
}

/// The messages each group's outbox holds at the end, the most any member's replica shows.
async fn outboxes(control: &Control, members: &[NodeId]) -> BTreeMap<u32, u64> {
    let asked = members
        .iter()
        .map(|id| control.api.call(*id, Request::Digests));
    let replies = join_all(asked).await.into_iter();
    let replicas = replies.filter_map(|reply| match reply {
        Ok(Reply::Digests(Ok(replicas))) => Some(replicas),
        _ => None,
    });
    let readings = replicas.flatten().map(|r| (r.group.0, r.outbox as u64));
    checker::most_per_group(readings)
}

/// Every member's replicas (each group's applied index and state digest), once they agree or
/// after 30 s. All asked at once: the timers keep proposing ticks, and nodes read one after the
/// other would each be read at another entry.
async fn node_states(control: &Control, members: &[NodeId]) -> Vec<Option<NodeState>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let states: Vec<Option<NodeState>> = join_all(
            members
                .iter()
                .map(|id| control.api.call(*id, Request::Digests)),
        )
        .await
        .into_iter()
        .map(|reply| match reply {
            Ok(Reply::Digests(Ok(digests))) => digests
                .into_iter()
                .map(|r| Some((r.group.0, (r.applied_index?, r.state_digest))))
                .collect(),
            _ => None,
        })
        .collect();
        if checker::state_differences(&states).is_empty() || Instant::now() >= deadline {
            return states;
        }
        sleep(Duration::from_millis(50)).await;
    }
}
