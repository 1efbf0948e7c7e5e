//! The history checker: the invariants of a replicated queue, each counted over the recorded
//! history and the final state read after the cluster healed and every queue was drained.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::history::{Event, Outcome};

/// How long a deduplication ID suppresses resends.
const DEDUP_WINDOW_MS: u64 = 5 * 60 * 1000;
/// How far a leader's stamps may run ahead of real time: the nodes' `--max-clock-skew-ms`, which
/// the chaos cluster leaves at its default. While one node's clock is jumped, a lease may end
/// that much early by the checker's clock.
const CLOCK_BOUND_MS: u64 = 500;
/// How long after a clock jump ends the state machine's time may still be ahead: until real
/// time catches up with the last stamp.
const CLOCK_SETTLE_MS: u64 = 2_000;
/// How far a leader of a build before peer clocks were taken as read at a ping's answer may
/// stamp ahead of real time: it took them as read halfway through the round trip, and a ping
/// may take up to 250 ms, so one measurement could err by half of that. Nodes of such a build
/// run until the last upgrade of a rolling upgrade (`raftq-chaos --upgrade-to`).
const EARLIER_BUILD_MS: u64 = 125;

/// A replica's last applied index and state digest.
pub type Replica = (u64, String);

/// A node's replicas at the end, by Raft group.
pub type NodeState = BTreeMap<u32, Replica>;

/// Where the nodes' replicas differ (invariant 8): each answer missing or without group 1, and
/// each group whose replicas differ, with the replicas; none when every node answered and the
/// replicas of each group, on whichever nodes hold it, are alike.
pub fn state_differences(states: &[Option<NodeState>]) -> Vec<String> {
    let mut differences = Vec::new();
    let mut groups: BTreeMap<u32, Vec<(usize, &Replica)>> = BTreeMap::new();
    for (node, state) in states.iter().enumerate() {
        match state {
            Some(state) if state.contains_key(&1) => {
                for (group, replica) in state {
                    groups.entry(*group).or_default().push((node, replica));
                }
            }
            Some(_) => differences.push(format!("member #{node} holds no replica of group 1")),
            None => differences.push(format!("member #{node} did not answer")),
        }
    }
    for (group, replicas) in groups {
        if replicas.windows(2).any(|w| w[0].1 != w[1].1) {
            differences.push(format!("group {group}: replicas differ: {replicas:?}"));
        }
    }
    differences
}

#[derive(Debug, Default)]
pub struct Final {
    /// The messages still in each queue at the end: queue → message ID → when it was moved to
    /// that dead-letter queue (`None` for a message that was not moved), as a peek shows them.
    pub remaining: BTreeMap<String, BTreeMap<String, Option<u64>>>,
    /// Each member's replicas; `None` for a node that did not answer.
    pub node_states: Vec<Option<NodeState>>,
    /// Each member's voters and cluster id as it reports them; `None` for a node that did not
    /// answer or reported no cluster id.
    pub memberships: Vec<Option<(Vec<u64>, String)>>,
    /// The members the faults left (the nodes added and not removed again).
    pub members: Vec<u64>,
    /// Source queue → its dead-letter queue.
    pub dead_letter: BTreeMap<String, String>,
    pub max_receive_count: u64,
    /// Queues whose producers send priorities and whose levels are served in strict order
    /// (the default), for invariant 10.
    pub strict_priority_queues: BTreeSet<String>,
    /// Each Raft group's leader at the end (`None`: no leader), as a member reports them; empty
    /// where the cluster runs one group (invariant 12 then holds as it is).
    pub leaders: BTreeMap<u32, Option<u64>>,
    /// The messages each group's outbox held at the end (on their way to a queue of another
    /// group), the most any member's replica of it showed; empty where no member answered.
    pub outboxes: BTreeMap<u32, u64>,
}

/// Anomalies per invariant, with a few examples each.
#[derive(Debug, Default)]
pub struct Report {
    pub anomalies: BTreeMap<&'static str, (u64, Vec<String>)>,
    pub unverifiable: BTreeMap<&'static str, u64>,
}

pub const INVARIANTS: [&str; 13] = [
    "1_acknowledged_sends_survive",
    "2_nothing_delivered_unsent",
    "3_fifo_order_per_group",
    "4_no_overlapping_leases",
    "5_no_redelivery_after_ack",
    "6_deduplication",
    "7_dead_letter_exactly_once",
    "8_identical_node_state",
    "9_membership_and_cluster_id_agree",
    "10_no_lower_priority_while_a_higher_was_visible",
    "11_no_delivery_before_deliver_at",
    "12_leaders_spread",
    "13_outboxes_drain",
];

impl Report {
    fn flag(&mut self, invariant: &'static str, example: String) {
        let entry = self.anomalies.entry(invariant).or_default();
        entry.0 += 1;
        if entry.1.len() < 3 {
            entry.1.push(example);
        }
    }

    pub fn total(&self) -> u64 {
        self.anomalies.values().map(|(n, _)| n).sum()
    }
}

/// One message handed out by a receive.
struct Delivery<'a> {
    queue: &'a str,
    id: &'a str,
    receipt: &'a str,
    body: &'a str,
    receive_count: u64,
    lease_end: u64,
    seq: Option<u64>,
    source: Option<&'a str>,
    moved_at: Option<u64>,
    priority: Option<u8>,
    first_received_at: Option<u64>,
    start: u64,
    end: u64,
}

impl<'a> Delivery<'a> {
    fn of(event: &'a Event) -> Option<Delivery<'a>> {
        let Event::Deliver {
            queue,
            message_id,
            body,
            receipt,
            receive_count,
            lease_expires_at,
            sequence_number,
            dead_letter_source,
            moved_at,
            priority,
            first_received_at,
            start,
            end,
        } = event
        else {
            return None;
        };
        Some(Delivery {
            queue,
            id: message_id,
            receipt,
            body,
            receive_count: *receive_count,
            lease_end: *lease_expires_at,
            seq: *sequence_number,
            source: dead_letter_source.as_deref(),
            moved_at: *moved_at,
            priority: *priority,
            first_received_at: *first_received_at,
            start: *start,
            end: *end,
        })
    }
}

/// What the invariants look up, gathered from the history and the final state in one pass.
#[derive(Default)]
struct Index<'a> {
    deliveries: Vec<Delivery<'a>>,
    /// Message ID → every ack of it: (start, end, outcome).
    acks: HashMap<&'a str, Vec<(u64, u64, &'a Outcome)>>,
    /// Receipt → the end of its successful ack.
    acked_receipts: HashMap<&'a str, u64>,
    bodies_sent: BTreeSet<&'a str>,
    /// (queue, message ID) → sequence number, from sends and deliveries.
    seqs: HashMap<(&'a str, &'a str), u64>,
    /// Message ID → its group, for accepted sends.
    group_of: HashMap<&'a str, &'a str>,
    /// Queues with a receive whose outcome was not a success.
    unknown_receives: BTreeSet<&'a str>,
    /// Message IDs still in some queue at the end.
    remaining: BTreeSet<&'a str>,
    /// When the state's time may run ahead of the checker's clock, and by how much at most:
    /// (from, to, ms) by the checker's clock.
    clock_windows: Vec<(u64, u64, u64)>,
}

impl<'a> Index<'a> {
    fn new(events: &'a [Event], fin: &'a Final) -> Index<'a> {
        let mut index = Index {
            remaining: fin
                .remaining
                .values()
                .flat_map(BTreeMap::keys)
                .map(String::as_str)
                .collect(),
            clock_windows: clock_windows(events),
            ..Index::default()
        };
        for e in events {
            index.add(e);
        }
        index
    }

    fn add(&mut self, e: &'a Event) {
        if let Some(d) = Delivery::of(e) {
            if let Some(s) = d.seq {
                self.seqs.insert((d.queue, d.id), s);
            }
            self.deliveries.push(d);
            return;
        }
        match e {
            Event::Send {
                queue,
                body,
                group,
                outcome,
                message_id,
                sequence_number,
                ..
            } => {
                self.bodies_sent.insert(body);
                if let (Outcome::Ok, Some(id)) = (outcome, message_id) {
                    if let Some(g) = group {
                        self.group_of.insert(id, g);
                    }
                    if let Some(s) = sequence_number {
                        self.seqs.insert((queue, id), *s);
                    }
                }
            }
            Event::Receive { queue, outcome, .. } => {
                if !matches!(outcome, Outcome::Ok) {
                    self.unknown_receives.insert(queue);
                }
            }
            Event::Ack {
                message_id,
                receipt,
                start,
                end,
                outcome,
                ..
            } => {
                self.acks
                    .entry(message_id)
                    .or_default()
                    .push((*start, *end, outcome));
                if *outcome == Outcome::Ok {
                    self.acked_receipts.insert(receipt, *end);
                }
            }
            Event::Deliver { .. } | Event::Fault { .. } => {}
        }
    }

    /// Whether message `id` may have been acknowledged: an ack whose answer was lost may have
    /// been applied, so it accounts for a message too.
    fn maybe_acked(&self, id: &str) -> bool {
        self.acks.get(id).is_some_and(|a| {
            a.iter()
                .any(|(_, _, o)| matches!(o, Outcome::Ok | Outcome::Unknown(_)))
        })
    }

    /// How much earlier than the server's stamps the checker's clock may read at `t`.
    fn tolerance(&self, t: u64) -> u64 {
        self.clock_windows
            .iter()
            .filter(|(from, to, _)| (*from..=*to).contains(&t))
            .map(|(_, _, ms)| *ms)
            .max()
            .unwrap_or(0)
    }
}

/// The stretches of the checker's clock in which the state machine's time may run ahead of the
/// checker's, with how far.
///
/// While some node's clock may have been jumped, up to `CLOCK_BOUND_MS`: a clock jump that was
/// put back opens a window from its start until `CLOCK_SETTLE_MS` after its end. One recorded as
/// failed may have left the node's clock jumped (its put-back failed, or the jump itself did),
/// so its window lasts to the end of the run: the heal after the faults does set every member's
/// clock back, but it ignores a failure to do so and leaves no time in the history, so the
/// checker cannot tell when, or whether, the clock came back.
///
/// During a rolling upgrade, up to `EARLIER_BUILD_MS`, from the start until `CLOCK_SETTLE_MS`
/// after the last node's upgrade: until then a node of the earlier build may lead.
fn clock_windows(events: &[Event]) -> Vec<(u64, u64, u64)> {
    let mut windows: Vec<(u64, u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Fault {
                kind, start, end, ..
            } => match kind.as_str() {
                "clock_jump" => Some((*start, end + CLOCK_SETTLE_MS, CLOCK_BOUND_MS)),
                "clock_jump (failed)" => Some((*start, u64::MAX, CLOCK_BOUND_MS)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let upgraded = events
        .iter()
        .filter_map(|e| match e {
            Event::Fault { kind, end, .. } if kind == "upgrade" => Some(*end),
            _ => None,
        })
        .max();
    if let Some(last) = upgraded {
        windows.push((0, last + CLOCK_SETTLE_MS, EARLIER_BUILD_MS));
    }
    windows
}

/// Runs every check.
pub fn check(events: &[Event], fin: &Final) -> Report {
    let mut report = Report::default();
    for name in INVARIANTS {
        report.anomalies.entry(name).or_default();
    }
    let index = Index::new(events, fin);
    acknowledged_sends_survive(events, &index, &mut report);
    nothing_delivered_unsent(&index, &mut report);
    fifo_order_per_group(&index, fin, &mut report);
    leases_and_acks(&index, &mut report);
    deduplication(events, &index, &mut report);
    dead_letter_exactly_once(&index, fin, &mut report);
    identical_node_state(fin, &mut report);
    membership_and_cluster_id(fin, &mut report);
    strict_priority_order(events, &index, fin, &mut report);
    no_delivery_before_deliver_at(events, &index, &mut report);
    leaders_spread(fin, &mut report);
    outboxes_drain(fin, &mut report);
    report
}

/// A message sent to a queue of strict priorities: its priority, when its send started and
/// ended, and its ID.
struct Prioritized<'a> {
    priority: u8,
    start: u64,
    end: u64,
    id: &'a str,
}

/// The messages sent to `queue` with a priority, as their sends answered.
fn prioritized<'a>(events: &'a [Event], queue: &str) -> Vec<Prioritized<'a>> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Send {
                queue: q,
                outcome: Outcome::Ok,
                duplicate: false,
                message_id: Some(id),
                priority: Some(priority),
                start,
                end,
                ..
            } if q == queue => Some(Prioritized {
                priority: *priority,
                start: *start,
                end: *end,
                id,
            }),
            _ => None,
        })
        .collect()
}

/// Invariant 10, strict priorities: on a queue that serves its levels in strict order, no
/// delivery of a level while a message of a higher level was surely visible: sent (committed)
/// before the receive started, and not leased by any receive that may have applied before this
/// one ended (one that delivered it, or one whose outcome is unknown, which makes the case
/// unverifiable). A lease no recorded receive shows (a parked receive answered after its
/// client had gone, say) is known by the message's `first_received_at`, the state's time of its
/// first lease: the message counts as leased from then, less what the state's clock may run
/// ahead of the checker's. The producers of such a queue send without delays.
fn strict_priority_order(events: &[Event], index: &Index<'_>, fin: &Final, report: &mut Report) {
    for queue in &fin.strict_priority_queues {
        let sent = prioritized(events, queue);
        let deliveries: Vec<&Delivery<'_>> = index
            .deliveries
            .iter()
            .filter(|d| d.queue == queue)
            .collect();
        let mut first_leased: HashMap<&str, u64> = HashMap::new();
        for d in &deliveries {
            let stamped = d
                .first_received_at
                .map(|at| at.saturating_sub(index.tolerance(at)));
            let earliest = stamped.map_or(d.start, |at| at.min(d.start));
            let first = first_leased.entry(d.id).or_insert(earliest);
            *first = (*first).min(earliest);
        }
        let unknown: Vec<(u64, u64)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Receive {
                    queue: q,
                    outcome: Outcome::Unknown(_),
                    start,
                    end,
                } if q == queue => Some((*start, *end)),
                _ => None,
            })
            .collect();
        for d in &deliveries {
            let Some(level) = d.priority else {
                continue;
            };
            let waiting = sent.iter().filter(|m| {
                m.priority > level
                    && m.end < d.start
                    && first_leased.get(m.id).is_none_or(|first| *first >= d.end)
            });
            for m in waiting {
                if unknown.iter().any(|(s, e)| *s < d.end && *e > m.start) {
                    *report.unverifiable.entry(INVARIANTS[9]).or_default() += 1;
                    continue;
                }
                report.flag(
                    INVARIANTS[9],
                    format!(
                        "{} (priority {level}) delivered from {queue} while {} (priority {}) was \
                         visible",
                        d.id, m.id, m.priority
                    ),
                );
            }
        }
    }
}

/// Invariant 11, scheduled messages: a message sent with a `deliver_at` is first leased at or
/// after that time by the state's clock (its `first_received_at`, stamped by the leader). A
/// `deliver_at` the state's clock had passed at the send is due at once, and the rule holds too.
fn no_delivery_before_deliver_at(events: &[Event], index: &Index<'_>, report: &mut Report) {
    let due: HashMap<&str, u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Send {
                outcome: Outcome::Ok,
                message_id: Some(id),
                deliver_at: Some(at),
                ..
            } => Some((id.as_str(), *at)),
            _ => None,
        })
        .collect();
    for d in &index.deliveries {
        let (Some(at), Some(first)) = (due.get(d.id), d.first_received_at) else {
            continue;
        };
        if first < *at {
            report.flag(
                INVARIANTS[10],
                format!(
                    "{} delivered from {} at {first} by the state's clock, before its deliver_at \
                     {at}",
                    d.id, d.queue
                ),
            );
        }
    }
}

/// Invariant 1: every acknowledged send is delivered-and-acked (or its ack's answer was lost)
/// or still queued (source or DLQ).
fn acknowledged_sends_survive(events: &[Event], index: &Index<'_>, report: &mut Report) {
    for e in events {
        if let Event::Send {
            outcome: Outcome::Ok,
            duplicate: false,
            message_id: Some(id),
            body,
            ..
        } = e
        {
            if !index.maybe_acked(id) && !index.remaining.contains(id.as_str()) {
                report.flag(
                    INVARIANTS[0],
                    format!("{id} ({body}) was acknowledged as sent and is gone"),
                );
            }
        }
    }
}

/// Invariant 2: nothing delivered that was never sent.
fn nothing_delivered_unsent(index: &Index<'_>, report: &mut Report) {
    for d in &index.deliveries {
        if !index.bodies_sent.contains(d.body) {
            report.flag(
                INVARIANTS[1],
                format!("{} delivered body {:?} never sent", d.id, d.body),
            );
        }
    }
}

/// Invariant 3, FIFO: when a message is delivered, every earlier message of its group in that
/// queue was acknowledged (or its ack was under way), moved away, or delivered in the same
/// receive.
fn fifo_order_per_group(index: &Index<'_>, fin: &Final, report: &mut Report) {
    let mut by_group: BTreeMap<(&str, &str), Vec<(u64, &str)>> = BTreeMap::new();
    for ((queue, id), seq) in &index.seqs {
        if let Some(g) = index.group_of.get(id) {
            by_group.entry((queue, g)).or_default().push((*seq, id));
        }
    }
    for list in by_group.values_mut() {
        list.sort();
    }
    let moved_at = moves(index, fin);
    // Indexes, so that the check stays near-linear in the history's length.
    let received_in: HashSet<(&str, &str, u64, u64)> = index
        .deliveries
        .iter()
        .map(|o| (o.queue, o.id, o.start, o.end))
        .collect();
    let delivered_ids: HashSet<&str> = index.deliveries.iter().map(|o| o.id).collect();
    for d in index
        .deliveries
        .iter()
        .filter(|d| d.queue.ends_with(".fifo"))
    {
        let (Some(seq), Some(group)) = (d.seq, index.group_of.get(d.id)) else {
            continue;
        };
        let Some(list) = by_group.get(&(d.queue, *group)) else {
            continue;
        };
        for (_, earlier) in list.iter().take_while(|(s, _)| *s < seq) {
            let same_receive = received_in.contains(&(d.queue, *earlier, d.start, d.end));
            let acked_before = index.acks.get(earlier).is_some_and(|a| {
                a.iter()
                    .any(|(start, _, o)| *start < d.end && !matches!(o, Outcome::Failed(_)))
            });
            let moved_before = moved_at
                .get(earlier)
                .is_some_and(|m| *m < d.end + index.tolerance(d.end));
            let moved_later_unseen = index.remaining.contains(earlier)
                && d.source.is_none()
                && fin.dead_letter.contains_key(d.queue)
                && !delivered_ids.contains(earlier);
            if !(same_receive || acked_before || moved_before || moved_later_unseen) {
                report.flag(INVARIANTS[2], format!("{} (seq {seq}) of group {group} in {} delivered while earlier {earlier} was unresolved", d.id, d.queue));
            }
        }
    }
}

/// When each message that was moved to a dead-letter queue got there, by the server's stamp:
/// from its deliveries out of that queue, and from the final peek for a message still in it
/// (one whose move no consumer saw: the drain did not reach it).
fn moves<'a>(index: &Index<'a>, fin: &'a Final) -> HashMap<&'a str, u64> {
    let mut moved_at: HashMap<&str, u64> = fin
        .remaining
        .values()
        .flatten()
        .filter_map(|(id, moved)| Some((id.as_str(), (*moved)?)))
        .collect();
    moved_at.extend(
        index
            .deliveries
            .iter()
            .filter_map(|d| Some((d.id, d.moved_at?))),
    );
    moved_at
}

/// Invariants 4 and 5: leases of one message never overlap; nothing is delivered after a
/// successful ack.
fn leases_and_acks(index: &Index<'_>, report: &mut Report) {
    let mut per_message: BTreeMap<(&str, &str), Vec<&Delivery<'_>>> = BTreeMap::new();
    for d in &index.deliveries {
        per_message.entry((d.queue, d.id)).or_default().push(d);
    }
    for list in per_message.values_mut() {
        // The server's order of leases: each one adds one to the receive count (the client's
        // request times need not be in that order when a receive was slow to commit).
        list.sort_by_key(|d| (d.receive_count, d.start));
        for pair in list.windows(2) {
            // An acknowledged lease ends at the ack (what follows it is invariant 5's business).
            let lease_end = index
                .acked_receipts
                .get(pair[0].receipt)
                .map_or(pair[0].lease_end, |ack| pair[0].lease_end.min(*ack));
            if pair[1].end + index.tolerance(pair[1].end) < lease_end {
                report.flag(
                    INVARIANTS[3],
                    format!(
                        "{} leased again at or before {} while its lease ran to {}",
                        pair[1].id, pair[1].end, pair[0].lease_end
                    ),
                );
            }
        }
    }
    for d in &index.deliveries {
        if let Some(list) = index.acks.get(d.id) {
            if list
                .iter()
                .any(|(_, end, o)| **o == Outcome::Ok && *end < d.start)
            {
                report.flag(
                    INVARIANTS[4],
                    format!("{} delivered from {} after a successful ack", d.id, d.queue),
                );
            }
        }
    }
}

/// Invariant 6, deduplication: every accepted send of one ID in one queue names one message;
/// resends inside the window say duplicate; a deliberate resend never becomes a message.
fn deduplication(events: &[Event], index: &Index<'_>, report: &mut Report) {
    let mut by_dedup: BTreeMap<(&str, &str), Vec<&Event>> = BTreeMap::new();
    for e in events {
        if let Event::Send {
            queue,
            dedup: Some(dedup),
            outcome: Outcome::Ok,
            ..
        } = e
        {
            by_dedup.entry((queue, dedup)).or_default().push(e);
        }
    }
    for ((queue, dedup), sends) in &by_dedup {
        let ids: BTreeSet<&str> = sends
            .iter()
            .filter_map(|e| match e {
                Event::Send { message_id, .. } => message_id.as_deref(),
                _ => None,
            })
            .collect();
        if ids.len() > 1 {
            report.flag(
                INVARIANTS[5],
                format!("{queue}: dedup ID {dedup} named {} messages", ids.len()),
            );
        }
        // Accepted (not `duplicate`) sends: (start, end).
        let accepted: Vec<(u64, u64)> = sends
            .iter()
            .filter_map(|e| match e {
                Event::Send {
                    duplicate: false,
                    start,
                    end,
                    ..
                } => Some((*start, *end)),
                _ => None,
            })
            .collect();
        if let Some(first) = accepted.iter().map(|(_, end)| *end).min() {
            for (start, _) in &accepted {
                if *start > first && *start < first + DEDUP_WINDOW_MS {
                    report.flag(
                        INVARIANTS[5],
                        format!("{queue}: dedup ID {dedup} accepted twice within the window"),
                    );
                }
            }
        }
    }
    for d in &index.deliveries {
        if d.body.starts_with("resend:") {
            report.flag(
                INVARIANTS[5],
                format!("resend {} became a message {}", d.body, d.id),
            );
        }
    }
}

/// Invariant 7, dead-letter moves: after `max_receive_count` leases, once, never in both
/// queues.
fn dead_letter_exactly_once(index: &Index<'_>, fin: &Final, report: &mut Report) {
    let dlqs: BTreeMap<&str, &str> = fin
        .dead_letter
        .iter()
        .map(|(s, d)| (d.as_str(), s.as_str()))
        .collect();
    let deliveries = &index.deliveries;
    let mut dlq_seqs: BTreeMap<(&str, &str), BTreeSet<u64>> = BTreeMap::new();
    for d in deliveries.iter().filter(|d| dlqs.contains_key(d.queue)) {
        if let Some(s) = d.seq {
            dlq_seqs.entry((d.queue, d.id)).or_default().insert(s);
        }
        let source = dlqs[d.queue];
        if let Some(moved) = d.moved_at {
            if deliveries
                .iter()
                .any(|o| o.queue == source && o.id == d.id && o.start > moved)
            {
                report.flag(
                    INVARIANTS[6],
                    format!("{} delivered from {source} after its move", d.id),
                );
            }
        }
        let seen = deliveries
            .iter()
            .filter(|o| o.queue == source && o.id == d.id)
            .map(|o| o.receive_count)
            .max()
            .unwrap_or(0);
        if seen < fin.max_receive_count {
            if index.unknown_receives.contains(source) {
                *report.unverifiable.entry(INVARIANTS[6]).or_default() += 1;
            } else {
                report.flag(
                    INVARIANTS[6],
                    format!("{} moved after {seen} observed leases", d.id),
                );
            }
        }
    }
    for ((queue, id), s) in &dlq_seqs {
        if s.len() > 1 {
            report.flag(
                INVARIANTS[6],
                format!("{id} entered {queue} {} times", s.len()),
            );
        }
    }
    for (source, dlq) in &fin.dead_letter {
        if let (Some(a), Some(b)) = (fin.remaining.get(source), fin.remaining.get(dlq)) {
            for id in a.keys().filter(|id| b.contains_key(*id)) {
                report.flag(INVARIANTS[6], format!("{id} is in both {source} and {dlq}"));
            }
        }
    }
}

/// Invariant 8: every group's replicas end with the same state.
fn identical_node_state(fin: &Final, report: &mut Report) {
    for difference in state_differences(&fin.node_states) {
        report.flag(INVARIANTS[7], difference);
    }
}

/// Invariant 9: every member names the same voters, the members the faults left, and one
/// cluster id.
fn membership_and_cluster_id(fin: &Final, report: &mut Report) {
    let expected = &fin.members;
    if fin.memberships.iter().any(|m| {
        m.as_ref().is_none_or(|(voters, id)| {
            voters != expected
                || fin.memberships[0]
                    .as_ref()
                    .is_none_or(|(_, first)| first != id)
        })
    }) {
        report.flag(
            INVARIANTS[8],
            format!(
                "members {expected:?}, but the nodes report {:?}",
                fin.memberships
            ),
        );
    }
}

/// Invariant 12: in a cluster of several groups, every group has a leader at the end and no
/// member leads more than its share, ceil(G / N) of the G groups over the N members.
fn leaders_spread(fin: &Final, report: &mut Report) {
    for example in unspread(&fin.leaders, fin.members.len()) {
        report.flag(INVARIANTS[11], example);
    }
}

/// Invariant 13: once the queues are drained, no group's outbox holds a message (each message
/// moved to a queue of another group reached it).
fn outboxes_drain(fin: &Final, report: &mut Report) {
    for (group, held) in fin.outboxes.iter().filter(|(_, held)| **held > 0) {
        let example = format!("group {group}'s outbox still holds {held} messages");
        report.flag(INVARIANTS[12], example);
    }
}

/// The most each group shows among `readings` (group, count), one per member's replica: what
/// [`Final::outboxes`] holds.
pub fn most_per_group(readings: impl IntoIterator<Item = (u32, u64)>) -> BTreeMap<u32, u64> {
    let mut most = BTreeMap::new();
    for (group, count) in readings {
        let slot = most.entry(group).or_insert(0);
        *slot = count.max(*slot);
    }
    most
}

/// What breaks invariant 12 in `leaders` (each group's leader) over `members` nodes: each group
/// without a leader and each node above its share; none for one group.
pub fn unspread(leaders: &BTreeMap<u32, Option<u64>>, members: usize) -> Vec<String> {
    if leaders.len() <= 1 {
        return Vec::new();
    }
    let cap = leaders.len().div_ceil(members.max(1));
    let mut led: BTreeMap<u64, usize> = BTreeMap::new();
    let mut broken = Vec::new();
    for (group, leader) in leaders {
        match leader {
            Some(node) => *led.entry(*node).or_default() += 1,
            None => broken.push(format!("group {group} has no leader")),
        }
    }
    for (node, count) in led.iter().filter(|(_, count)| **count > cap) {
        broken.push(format!(
            "node {node} leads {count} groups, more than {cap}: {led:?}"
        ));
    }
    broken
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fault of `kind` on node 1 from `start` to `end`, with no restart.
    fn fault(kind: &str, start: u64, end: u64) -> Event {
        Event::Fault {
            kind: kind.into(),
            target: "node1".into(),
            start,
            end,
            restarted: None,
            seed: None,
            unrecovered: Vec::new(),
        }
    }

    fn send(body: &str, id: &str, dedup: Option<&str>, duplicate: bool, t: u64) -> Event {
        Event::Send {
            queue: "q.fifo".into(),
            body: body.into(),
            group: Some("g".into()),
            dedup: dedup.map(str::to_string),
            start: t,
            end: t + 1,
            outcome: Outcome::Ok,
            message_id: Some(id.into()),
            duplicate,
            sequence_number: Some(t),
            priority: None,
            deliver_at: None,
        }
    }

    /// A (body `a`) and then B (body `b`) sent to one group, at 10 and 20.
    fn a_then_b() -> Vec<Event> {
        vec![
            send("a", "A", Some("a"), false, 10),
            send("b", "B", Some("b"), false, 20),
        ]
    }

    fn deliver(id: &str, body: &str, seq: u64, count: u64, t: u64) -> Event {
        Event::Deliver {
            queue: "q.fifo".into(),
            message_id: id.into(),
            body: body.into(),
            receipt: format!("r-{id}-{count}"),
            receive_count: count,
            lease_expires_at: t + 2_000,
            sequence_number: Some(seq),
            dead_letter_source: None,
            moved_at: None,
            priority: None,
            first_received_at: None,
            start: t,
            end: t + 5,
        }
    }

    fn ack(id: &str, t: u64) -> Event {
        Event::Ack {
            queue: "q.fifo".into(),
            message_id: id.into(),
            receipt: format!("r-{id}-1"),
            start: t,
            end: t + 1,
            outcome: Outcome::Ok,
        }
    }

    /// Replicas of the groups `digests` names, each at index 1.
    fn replicas(digests: &[(u32, &str)]) -> NodeState {
        (digests.iter())
            .map(|(group, digest)| (*group, (1, digest.to_string())))
            .collect()
    }

    #[test]
    fn the_replicas_of_each_group_are_compared_on_the_nodes_that_hold_it() {
        let alike = [
            Some(replicas(&[(1, "a"), (2, "b")])),
            Some(replicas(&[(1, "a"), (3, "c")])),
            Some(replicas(&[(1, "a"), (2, "b"), (3, "c")])),
        ];
        assert_eq!(state_differences(&alike), Vec::<String>::new());
        let mut apart = alike.clone();
        apart[1] = Some(replicas(&[(1, "a"), (3, "d")]));
        let found = state_differences(&apart);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("group 3"), "{found:?}");
        apart[0] = Some(replicas(&[(2, "b")]));
        apart[2] = None;
        let found = state_differences(&apart);
        assert_eq!(found.len(), 2, "no group 1, no answer: {found:?}");
    }

    fn fin(remaining: &[&str]) -> Final {
        Final {
            remaining: BTreeMap::from([(
                "q.fifo".to_string(),
                remaining.iter().map(|s| (s.to_string(), None)).collect(),
            )]),
            node_states: vec![Some(replicas(&[(1, "d")])), Some(replicas(&[(1, "d")]))],
            memberships: vec![
                Some((vec![1, 2], "c".into())),
                Some((vec![1, 2], "c".into())),
            ],
            members: vec![1, 2],
            dead_letter: BTreeMap::new(),
            max_receive_count: 3,
            strict_priority_queues: BTreeSet::new(),
            leaders: BTreeMap::new(),
            outboxes: BTreeMap::new(),
        }
    }

    #[test]
    fn a_node_leading_more_than_its_share_or_a_group_without_a_leader_is_an_anomaly() {
        let spread = |leaders: &[(u32, Option<u64>)]| {
            let mut f = fin(&[]);
            f.members = vec![1, 2, 3];
            f.leaders = leaders.iter().copied().collect();
            check(&[], &f).anomalies[INVARIANTS[11]].0
        };
        // Four groups over three nodes: at most two each.
        assert_eq!(
            spread(&[(1, Some(1)), (2, Some(2)), (3, Some(3)), (4, Some(1))]),
            0
        );
        assert_eq!(
            spread(&[(1, Some(1)), (2, Some(1)), (3, Some(1)), (4, Some(2))]),
            1
        );
        assert_eq!(
            spread(&[(1, Some(1)), (2, None), (3, Some(3)), (4, Some(2))]),
            1
        );
        // One group: nothing to spread.
        assert_eq!(spread(&[(1, Some(1))]), 0);
    }

    #[test]
    fn a_message_left_in_an_outbox_is_an_anomaly() {
        let left = |outboxes: &[(u32, u64)]| {
            let mut f = fin(&[]);
            f.outboxes = outboxes.iter().copied().collect();
            check(&[], &f).anomalies[INVARIANTS[12]].0
        };
        assert_eq!(left(&[(1, 0), (2, 0)]), 0);
        assert_eq!(left(&[(1, 0), (2, 3), (3, 1)]), 2);
        let most = most_per_group([(2, 0), (2, 3), (1, 0), (2, 1)]);
        assert_eq!(most, BTreeMap::from([(1, 0), (2, 3)]));
    }

    #[test]
    fn a_clean_history_has_no_anomalies() {
        let mut events = a_then_b();
        events.extend([
            deliver("A", "a", 10, 1, 100),
            ack("A", 200),
            deliver("B", "b", 20, 1, 300),
            ack("B", 400),
        ]);
        assert_eq!(check(&events, &fin(&[])).total(), 0);
    }

    #[test]
    fn leases_are_ordered_by_receive_count_not_by_request_time() {
        let slow = Event::Deliver {
            queue: "q.fifo".into(),
            message_id: "A".into(),
            body: "a".into(),
            receipt: "r-A-2".into(),
            receive_count: 2,
            lease_expires_at: 4_300,
            sequence_number: Some(10),
            dead_letter_source: None,
            moved_at: None,
            priority: None,
            first_received_at: None,
            start: 100,
            end: 2_305,
        };
        let mut fast = deliver("A", "a", 10, 1, 200);
        if let Event::Deliver {
            lease_expires_at, ..
        } = &mut fast
        {
            *lease_expires_at = 2_200;
        }
        let events = vec![send("a", "A", Some("a"), false, 10), slow, fast];
        let r = check(&events, &fin(&["A"]));
        assert_eq!(r.anomalies[INVARIANTS[3]].0, 0);
    }

    #[test]
    fn each_broken_invariant_is_counted() {
        let mut events = a_then_b();
        events.extend([
            send("lost", "L", Some("l"), false, 30),
            send("a2", "A2", Some("a"), false, 40),
            deliver("B", "b", 20, 1, 100),
            deliver("A", "a", 10, 1, 150),
            deliver("A", "a", 10, 2, 160),
            ack("B", 170),
            deliver("B", "b", 20, 2, 300),
            deliver("X", "never", 99, 1, 400),
        ]);
        let mut f = fin(&["A", "A2", "X"]);
        f.node_states[1] = Some(replicas(&[(1, "other")]));
        f.memberships[1] = Some((vec![1, 2], "another cluster".into()));
        let r = check(&events, &f);
        let count = |i: usize| r.anomalies[INVARIANTS[i]].0;
        assert_eq!(count(0), 1, "L lost");
        assert_eq!(count(1), 1, "X never sent");
        assert!(count(2) >= 1, "B before A");
        assert_eq!(count(3), 1, "A leased twice within its lease");
        assert_eq!(count(4), 1, "B after its ack");
        assert!(count(5) >= 1, "dedup a accepted twice");
        assert_eq!(count(7), 1, "states differ");
        assert_eq!(count(8), 1, "cluster ids differ");
    }

    #[test]
    fn a_move_stamped_ahead_during_a_clock_jump_frees_the_group() {
        let jump = fault("clock_jump", 100, 1_000);
        // A moved away (stamped 1 300 by a leader running ahead), then B delivered at 1 005 by
        // the checker's clock.
        let moved = Event::Deliver {
            queue: "dlq.fifo".into(),
            message_id: "A".into(),
            body: "a".into(),
            receipt: "r-A-dlq".into(),
            receive_count: 1,
            lease_expires_at: 2_900,
            sequence_number: Some(1),
            dead_letter_source: Some("q.fifo".into()),
            moved_at: Some(1_300),
            priority: None,
            first_received_at: None,
            start: 900,
            end: 905,
        };
        let events = |with_jump: bool| {
            let mut v = a_then_b();
            v.extend([moved.clone(), deliver("B", "b", 20, 1, 1_000)]);
            if with_jump {
                v.push(jump.clone());
            }
            v
        };
        let mut f = fin(&[]);
        f.dead_letter = BTreeMap::from([("q.fifo".to_string(), "dlq.fifo".to_string())]);
        let unordered = |events: &[Event]| check(events, &f).anomalies[INVARIANTS[2]].0;
        assert_eq!(unordered(&events(false)), 1);
        assert_eq!(unordered(&events(true)), 0);
    }

    #[test]
    fn a_move_seen_only_in_the_final_peek_frees_the_group() {
        // A leased three times and never acknowledged, then moved to the dead-letter queue by
        // the server without any consumer seeing it there; B, after A in its group, delivered
        // at 7 000. The final peek finds A in the dead-letter queue, moved at `moved`.
        let mut events = a_then_b();
        events.extend([
            deliver("A", "a", 10, 1, 100),
            deliver("A", "a", 10, 2, 2_200),
            deliver("A", "a", 10, 3, 4_300),
            deliver("B", "b", 20, 1, 7_000),
            ack("B", 7_100),
        ]);
        let check_with = |moved: u64| {
            let mut f = fin(&[]);
            f.dead_letter = BTreeMap::from([("q.fifo".to_string(), "dlq.fifo".to_string())]);
            f.remaining.insert(
                "dlq.fifo".to_string(),
                BTreeMap::from([("A".to_string(), Some(moved))]),
            );
            check(&events, &f)
        };
        let moved_before = check_with(6_400);
        assert_eq!(moved_before.anomalies[INVARIANTS[2]].0, 0);
        assert_eq!(moved_before.total(), 0);
        // Moved only after B's delivery: A was still unresolved when B came.
        assert_eq!(check_with(7_500).anomalies[INVARIANTS[2]].0, 1);
    }

    /// A send to the standard queue `prio` at `priority`, from `t` to `t + 1`.
    fn send_at(id: &str, priority: u8, t: u64) -> Event {
        Event::Send {
            queue: "prio".into(),
            body: id.into(),
            group: None,
            dedup: None,
            start: t,
            end: t + 1,
            outcome: Outcome::Ok,
            message_id: Some(id.into()),
            duplicate: false,
            sequence_number: None,
            priority: Some(priority),
            deliver_at: None,
        }
    }

    /// The delivery of `id` from `prio` at `priority` by a receive from `t` to `t + 5`, first
    /// leased at `first` by the state's clock.
    fn deliver_at_level(id: &str, priority: u8, t: u64, first: u64) -> Event {
        Event::Deliver {
            queue: "prio".into(),
            message_id: id.into(),
            body: id.into(),
            receipt: format!("r-{id}"),
            receive_count: 1,
            lease_expires_at: t + 2_000,
            sequence_number: None,
            dead_letter_source: None,
            moved_at: None,
            priority: Some(priority),
            first_received_at: Some(first),
            start: t,
            end: t + 5,
        }
    }

    fn receive_of(outcome: Outcome, t: u64) -> Event {
        Event::Receive {
            queue: "prio".into(),
            start: t,
            end: t + 5,
            outcome,
        }
    }

    fn prio_fin() -> Final {
        let mut f = fin(&[]);
        f.strict_priority_queues = BTreeSet::from(["prio".to_string()]);
        f
    }

    #[test]
    fn a_lower_level_delivered_while_a_higher_one_was_visible_is_an_anomaly() {
        let inverted = |f: &Final, events: &[Event]| check(events, f).anomalies[INVARIANTS[9]].0;
        let fin = prio_fin();
        // H (priority 9) was sent before L's receive and leased only afterwards.
        let late = [
            send_at("L", 1, 10),
            send_at("H", 9, 20),
            deliver_at_level("L", 1, 100, 100),
            deliver_at_level("H", 9, 200, 200),
        ];
        assert_eq!(inverted(&fin, &late), 1);
        // Delivered in the same receive, or sent while the receive ran: no anomaly.
        let fine = [
            send_at("L", 1, 10),
            send_at("H", 9, 99),
            deliver_at_level("H", 9, 100, 100),
            deliver_at_level("L", 1, 100, 100),
            send_at("H2", 9, 101),
            deliver_at_level("L", 1, 102, 102),
        ];
        assert_eq!(inverted(&fin, &fine), 0);
        // H leased at 50 by the state's clock, by a receive no one saw (its delivery at 200 is
        // its second): it was not visible while L was delivered.
        let mut unseen = late.to_vec();
        unseen[3] = deliver_at_level("H", 9, 200, 50);
        assert_eq!(inverted(&fin, &unseen), 0);
        // A receive whose outcome is unknown may have leased H: unverifiable, not an anomaly.
        let mut unknown = late.to_vec();
        unknown.push(receive_of(Outcome::Unknown("timeout".into()), 50));
        let report = check(&unknown, &fin);
        assert_eq!(report.anomalies[INVARIANTS[9]].0, 0);
        assert_eq!(report.unverifiable[INVARIANTS[9]], 1);
        // On a queue that is not served in strict order, nothing is checked.
        assert_eq!(inverted(&super::tests::fin(&[]), &late), 0);
    }

    #[test]
    fn a_delivery_before_deliver_at_by_the_state_s_clock_is_an_anomaly() {
        let scheduled = |at: u64| {
            let mut send = send_at("S", 0, 10);
            if let Event::Send { deliver_at, .. } = &mut send {
                *deliver_at = Some(at);
            }
            send
        };
        let early = |at: u64, first: u64| {
            let events = [scheduled(at), deliver_at_level("S", 0, 900, first)];
            check(&events, &fin(&[])).anomalies[INVARIANTS[10]].0
        };
        assert_eq!(early(1_000, 999), 1, "1 ms early by the state's clock");
        assert_eq!(
            early(1_000, 1_000),
            0,
            "at its time, whatever the client's clock said"
        );
    }

    #[test]
    fn a_member_missing_from_the_voters_is_an_anomaly() {
        let mut f = fin(&[]);
        f.members = vec![1, 2, 3];
        let r = check(&[], &f);
        assert_eq!(r.anomalies[INVARIANTS[8]].0, 1);
    }

    #[test]
    fn a_lease_may_end_early_by_the_clock_bound_only_during_a_clock_jump() {
        let jump = fault("clock_jump", 100, 1_000);
        // Leased at 150 until 2 150; leased again at 1 705, 445 ms early.
        let events = |with_jump: bool| {
            let mut v = vec![
                send("a", "A", Some("a"), false, 10),
                deliver("A", "a", 10, 1, 150),
                deliver("A", "a", 10, 2, 1_700),
            ];
            if with_jump {
                v.push(jump.clone());
            }
            v
        };
        let early = |events: &[Event]| check(events, &fin(&["A"])).anomalies[INVARIANTS[3]].0;
        assert_eq!(early(&events(false)), 1);
        assert_eq!(early(&events(true)), 0);
    }

    #[test]
    fn the_same_history_gives_the_same_report_to_the_letter() {
        // Five messages each leased twice while the first lease still ran: five examples of one
        // invariant, of which the report keeps three, always the same three in the same order.
        let ids = ["A", "B", "C", "D", "E"];
        let mut events = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let seq = i as u64 + 1;
            events.push(send(id, id, Some(id), false, seq));
            events.push(deliver(id, id, seq, 1, 100));
            events.push(deliver(id, id, seq, 2, 200));
        }
        let report = |events: &[Event]| format!("{:?}", check(events, &fin(&ids)));
        let first = report(&events);
        assert!(first.contains("leased again"), "{first}");
        for _ in 0..20 {
            assert_eq!(report(&events), first);
        }
    }

    #[test]
    fn a_failed_clock_jump_allows_early_leases_to_the_end_of_the_run() {
        // The put-back failed at 1 000: the node's clock may stay jumped for the rest of the run.
        let jump = |kind: &str| fault(kind, 100, 1_000);
        // Leased at 50 000 until 52 000; leased again at 51 605, 395 ms early, long after the
        // fault's end and its settling time.
        let events = |kind: &str| {
            vec![
                send("a", "A", Some("a"), false, 10),
                jump(kind),
                deliver("A", "a", 10, 1, 50_000),
                deliver("A", "a", 10, 2, 51_600),
            ]
        };
        let early = |events: &[Event]| check(events, &fin(&["A"])).anomalies[INVARIANTS[3]].0;
        assert_eq!(early(&events("clock_jump")), 1, "a jump put back has ended");
        assert_eq!(early(&events("clock_jump (failed)")), 0);
    }

    #[test]
    fn a_lease_may_end_early_by_an_earlier_build_s_error_only_until_the_upgrade_ends() {
        let upgrade = |end: u64| fault("upgrade", end - 5_000, end);
        // Leased at 50 000 until 52 000; leased again at 51 900 (answered at 51 905), 95 ms
        // early, or at 51 800, 195 ms early.
        let events = |last_upgrade: u64, again: u64| {
            vec![
                send("a", "A", Some("a"), false, 10),
                upgrade(last_upgrade),
                deliver("A", "a", 10, 1, 50_000),
                deliver("A", "a", 10, 2, again),
            ]
        };
        let early = |events: &[Event]| check(events, &fin(&["A"])).anomalies[INVARIANTS[3]].0;
        assert_eq!(
            early(&events(60_000, 51_900)),
            0,
            "an earlier build may still lead"
        );
        assert_eq!(
            early(&events(60_000, 51_800)),
            1,
            "beyond one measurement's error"
        );
        assert_eq!(
            early(&events(10_000, 51_900)),
            1,
            "every node runs the new build"
        );
    }

    #[test]
    fn a_power_loss_excuses_no_lost_send() {
        // A acknowledged as sent, then a power loss of one node and one of all; A is gone.
        let power = |kind: &str, seed: u64, start: u64| Event::Fault {
            kind: kind.into(),
            target: "node1".into(),
            start,
            end: start + 5_000,
            restarted: Some(start + 3_000),
            seed: Some(seed),
            unrecovered: vec!["node1".into()],
        };
        for faults in [
            vec![],
            vec![power("power_loss", 7, 100)],
            vec![
                power("power_loss", 7, 100),
                power("power_loss_all", 9, 6_000),
            ],
        ] {
            let mut events = vec![send("a", "A", Some("a"), false, 10)];
            events.extend(faults);
            let r = check(&events, &fin(&[]));
            assert_eq!(r.anomalies[INVARIANTS[0]].0, 1, "{events:?}");
            assert_eq!(r.total(), 1);
        }
    }
}
