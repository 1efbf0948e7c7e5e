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

/// What the checker needs besides the history.
#[derive(Debug, Default)]
pub struct Final {
    /// Message IDs still in each queue at the end.
    pub remaining: BTreeMap<String, BTreeSet<String>>,
    /// Each member's (last applied index, state digest); `None` for a node that did not answer.
    pub node_states: Vec<Option<(u64, String)>>,
    /// Each member's voters and cluster id as it reports them; `None` for a node that did not
    /// answer or reported no cluster id.
    pub memberships: Vec<Option<(Vec<u64>, String)>>,
    /// The members the faults left (the nodes added and not removed again).
    pub members: Vec<u64>,
    /// Source queue → its dead-letter queue.
    pub dead_letter: BTreeMap<String, String>,
    pub max_receive_count: u64,
}

/// Anomalies per invariant, with a few examples each.
#[derive(Debug, Default)]
pub struct Report {
    pub anomalies: BTreeMap<&'static str, (u64, Vec<String>)>,
    pub unverifiable: BTreeMap<&'static str, u64>,
}

pub const INVARIANTS: [&str; 9] = [
    "1_acknowledged_sends_survive",
    "2_nothing_delivered_unsent",
    "3_fifo_order_per_group",
    "4_no_overlapping_leases",
    "5_no_redelivery_after_ack",
    "6_deduplication",
    "7_dead_letter_exactly_once",
    "8_identical_node_state",
    "9_membership_and_cluster_id_agree",
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
    start: u64,
    end: u64,
}

/// Runs every check.
pub fn check(events: &[Event], fin: &Final) -> Report {
    let mut report = Report::default();
    for name in INVARIANTS {
        report.anomalies.entry(name).or_default();
    }
    let mut deliveries: Vec<Delivery<'_>> = Vec::new();
    let mut acks: HashMap<&str, Vec<(u64, u64, &Outcome)>> = HashMap::new();
    let mut acked_receipts: HashMap<&str, u64> = HashMap::new();
    let mut bodies_sent: BTreeSet<&str> = BTreeSet::new();
    let mut seqs: HashMap<(&str, &str), u64> = HashMap::new();
    let mut group_of: HashMap<&str, &str> = HashMap::new();
    let mut unknown_receives: BTreeSet<&str> = BTreeSet::new();
    for e in events {
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
                bodies_sent.insert(body);
                if let (Outcome::Ok, Some(id)) = (outcome, message_id) {
                    if let Some(g) = group {
                        group_of.insert(id, g);
                    }
                    if let Some(s) = sequence_number {
                        seqs.insert((queue, id), *s);
                    }
                }
            }
            Event::Receive { queue, outcome, .. } => {
                if !matches!(outcome, Outcome::Ok) {
                    unknown_receives.insert(queue);
                }
            }
            Event::Deliver {
                queue,
                message_id,
                body,
                receipt,
                receive_count,
                lease_expires_at,
                sequence_number,
                dead_letter_source,
                moved_at,
                start,
                end,
                ..
            } => {
                if let Some(s) = sequence_number {
                    seqs.insert((queue, message_id), *s);
                }
                deliveries.push(Delivery {
                    queue,
                    id: message_id,
                    receipt,
                    body,
                    receive_count: *receive_count,
                    lease_end: *lease_expires_at,
                    seq: *sequence_number,
                    source: dead_letter_source.as_deref(),
                    moved_at: *moved_at,
                    start: *start,
                    end: *end,
                });
            }
            Event::Ack {
                message_id,
                receipt,
                start,
                end,
                outcome,
                ..
            } => {
                acks.entry(message_id)
                    .or_default()
                    .push((*start, *end, outcome));
                if *outcome == Outcome::Ok {
                    acked_receipts.insert(receipt, *end);
                }
            }
            Event::Fault { .. } => {}
        }
    }
    // An ack whose answer was lost may have been applied: it accounts for a message too.
    let maybe_acked = |id: &str| {
        acks.get(id).is_some_and(|a| {
            a.iter()
                .any(|(_, _, o)| matches!(o, Outcome::Ok | Outcome::Unknown(_)))
        })
    };
    let remaining: BTreeSet<&str> = fin
        .remaining
        .values()
        .flatten()
        .map(String::as_str)
        .collect();

    // 1. Every acknowledged send is delivered-and-acked (or its ack's answer was lost) or still
    // queued (source or DLQ).
    for e in events {
        if let Event::Send {
            outcome: Outcome::Ok,
            duplicate: false,
            message_id: Some(id),
            body,
            ..
        } = e
        {
            if !maybe_acked(id) && !remaining.contains(id.as_str()) {
                report.flag(
                    INVARIANTS[0],
                    format!("{id} ({body}) was acknowledged as sent and is gone"),
                );
            }
        }
    }

    // 2. Nothing delivered that was never sent.
    for d in &deliveries {
        if !bodies_sent.contains(d.body) {
            report.flag(
                INVARIANTS[1],
                format!("{} delivered body {:?} never sent", d.id, d.body),
            );
        }
    }

    let clock_jumps: Vec<(u64, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Fault {
                kind, start, end, ..
            } if kind == "clock_jump" => Some((*start, end + CLOCK_SETTLE_MS)),
            _ => None,
        })
        .collect();
    // How much earlier than the server's stamps the checker's clock may read at `t`.
    let tolerance = |t: u64| {
        if clock_jumps
            .iter()
            .any(|(from, to)| (*from..=*to).contains(&t))
        {
            CLOCK_BOUND_MS
        } else {
            0
        }
    };
    // 3. FIFO: when a message is delivered, every earlier message of its group in that queue was
    // acknowledged (or its ack was under way), moved away, or delivered in the same receive.
    let mut by_group: HashMap<(&str, &str), Vec<(u64, &str)>> = HashMap::new();
    for ((queue, id), seq) in &seqs {
        if let Some(g) = group_of.get(id) {
            by_group.entry((queue, g)).or_default().push((*seq, id));
        }
    }
    for list in by_group.values_mut() {
        list.sort();
    }
    let moved_at: HashMap<&str, u64> = deliveries
        .iter()
        .filter_map(|d| Some((d.id, d.moved_at?)))
        .collect();
    // Indexes, so that the check stays near-linear in the history's length.
    let received_in: HashSet<(&str, &str, u64, u64)> = deliveries
        .iter()
        .map(|o| (o.queue, o.id, o.start, o.end))
        .collect();
    let delivered_ids: HashSet<&str> = deliveries.iter().map(|o| o.id).collect();
    for d in deliveries.iter().filter(|d| d.queue.ends_with(".fifo")) {
        let (Some(seq), Some(group)) = (d.seq, group_of.get(d.id)) else {
            continue;
        };
        let Some(list) = by_group.get(&(d.queue, *group)) else {
            continue;
        };
        for (_, earlier) in list.iter().take_while(|(s, _)| *s < seq) {
            let same_receive = received_in.contains(&(d.queue, *earlier, d.start, d.end));
            let acked_before = acks.get(earlier).is_some_and(|a| {
                a.iter()
                    .any(|(start, _, o)| *start < d.end && !matches!(o, Outcome::Failed(_)))
            });
            let moved_before = moved_at
                .get(earlier)
                .is_some_and(|m| *m < d.end + tolerance(d.end));
            let moved_later_unseen = remaining.contains(earlier)
                && d.source.is_none()
                && fin.dead_letter.contains_key(d.queue)
                && !delivered_ids.contains(earlier);
            if !(same_receive || acked_before || moved_before || moved_later_unseen) {
                report.flag(INVARIANTS[2], format!("{} (seq {seq}) of group {group} in {} delivered while earlier {earlier} was unresolved", d.id, d.queue));
            }
        }
    }

    // 4 and 5. Leases of one message never overlap; nothing is delivered after a successful ack.
    let mut per_message: HashMap<(&str, &str), Vec<&Delivery<'_>>> = HashMap::new();
    for d in &deliveries {
        per_message.entry((d.queue, d.id)).or_default().push(d);
    }
    for list in per_message.values_mut() {
        // The server's order of leases: each one adds one to the receive count (the client's
        // request times need not be in that order when a receive was slow to commit).
        list.sort_by_key(|d| (d.receive_count, d.start));
        for pair in list.windows(2) {
            // An acknowledged lease ends at the ack (what follows it is invariant 5's business).
            let lease_end = acked_receipts
                .get(pair[0].receipt)
                .map_or(pair[0].lease_end, |ack| pair[0].lease_end.min(*ack));
            if pair[1].end + tolerance(pair[1].end) < lease_end {
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
    for d in &deliveries {
        if let Some(list) = acks.get(d.id) {
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

    // 6. Deduplication: every accepted send of one ID in one queue names one message; resends
    // inside the window say duplicate; a deliberate resend never becomes a message.
    let mut by_dedup: HashMap<(&str, &str), Vec<&Event>> = HashMap::new();
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
        let first_accept = sends
            .iter()
            .filter_map(|e| match e {
                Event::Send {
                    duplicate: false,
                    end,
                    ..
                } => Some(*end),
                _ => None,
            })
            .min();
        if let Some(first) = first_accept {
            for e in sends {
                if let Event::Send {
                    duplicate: false,
                    start,
                    ..
                } = e
                {
                    if *start > first && *start < first + DEDUP_WINDOW_MS {
                        report.flag(
                            INVARIANTS[5],
                            format!("{queue}: dedup ID {dedup} accepted twice within the window"),
                        );
                    }
                }
            }
        }
    }
    for d in &deliveries {
        if d.body.starts_with("resend:") {
            report.flag(
                INVARIANTS[5],
                format!("resend {} became a message {}", d.body, d.id),
            );
        }
    }

    // 7. Dead-letter moves: after max_receive_count leases, once, never in both queues.
    let dlqs: BTreeMap<&str, &str> = fin
        .dead_letter
        .iter()
        .map(|(s, d)| (d.as_str(), s.as_str()))
        .collect();
    let mut dlq_seqs: HashMap<(&str, &str), BTreeSet<u64>> = HashMap::new();
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
            if unknown_receives.contains(source) {
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
            for id in a.intersection(b) {
                report.flag(INVARIANTS[6], format!("{id} is in both {source} and {dlq}"));
            }
        }
    }

    // 8. Every node ends with the same state.
    let states: Vec<&Option<(u64, String)>> = fin.node_states.iter().collect();
    if states.iter().any(|s| s.is_none()) || states.windows(2).any(|w| w[0] != w[1]) {
        report.flag(INVARIANTS[7], format!("node states differ: {states:?}"));
    }

    // 9. Every member names the same voters, the members the faults left, and one cluster id.
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
    report
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
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

    fn fin(remaining: &[&str]) -> Final {
        Final {
            remaining: BTreeMap::from([(
                "q.fifo".to_string(),
                remaining.iter().map(|s| s.to_string()).collect(),
            )]),
            node_states: vec![Some((1, "d".into())), Some((1, "d".into()))],
            memberships: vec![
                Some((vec![1, 2], "c".into())),
                Some((vec![1, 2], "c".into())),
            ],
            members: vec![1, 2],
            dead_letter: BTreeMap::new(),
            max_receive_count: 3,
        }
    }

    #[test]
    fn a_clean_history_has_no_anomalies() {
        let events = vec![
            send("a", "A", Some("a"), false, 10),
            send("b", "B", Some("b"), false, 20),
            deliver("A", "a", 10, 1, 100),
            ack("A", 200),
            deliver("B", "b", 20, 1, 300),
            ack("B", 400),
        ];
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
        let events = vec![
            send("a", "A", Some("a"), false, 10),
            send("b", "B", Some("b"), false, 20),
            send("lost", "L", Some("l"), false, 30),
            send("a2", "A2", Some("a"), false, 40),
            deliver("B", "b", 20, 1, 100),
            deliver("A", "a", 10, 1, 150),
            deliver("A", "a", 10, 2, 160),
            ack("B", 170),
            deliver("B", "b", 20, 2, 300),
            deliver("X", "never", 99, 1, 400),
        ];
        let mut f = fin(&["A", "A2", "X"]);
        f.node_states[1] = Some((1, "other".into()));
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
        let jump = Event::Fault {
            kind: "clock_jump".into(),
            target: "node1".into(),
            start: 100,
            end: 1_000,
        };
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
            start: 900,
            end: 905,
        };
        let events = |with_jump: bool| {
            let mut v = vec![
                send("a", "A", Some("a"), false, 10),
                send("b", "B", Some("b"), false, 20),
                moved.clone(),
                deliver("B", "b", 20, 1, 1_000),
            ];
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
    fn a_member_missing_from_the_voters_is_an_anomaly() {
        let mut f = fin(&[]);
        f.members = vec![1, 2, 3];
        let r = check(&[], &f);
        assert_eq!(r.anomalies[INVARIANTS[8]].0, 1);
    }

    #[test]
    fn a_lease_may_end_early_by_the_clock_bound_only_during_a_clock_jump() {
        let jump = Event::Fault {
            kind: "clock_jump".into(),
            target: "node1".into(),
            start: 100,
            end: 1_000,
        };
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
}
