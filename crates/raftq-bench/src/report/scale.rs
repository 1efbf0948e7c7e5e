//! The scale-out report (`report --scale`, written by `scripts/bench-scale`): raftq clusters of
//! several sizes, each with its queues in one Raft group and in many, every node's container
//! capped to the same share of the machine; their rows over many queues side by side, the
//! ratios against the scale-out targets, and every node's CPU per message.

use std::fmt::Write as _;

use super::{fmt_opt, table_head, Results};
use crate::measure::Measurement;

/// How many times the one-group cluster's messages/s over many queues the many-group cluster
/// of the smallest size must carry, on the same caps.
const GROUPS_TARGET: f64 = 1.6;
/// How many times the smallest many-group cluster's messages/s over many queues each larger
/// one must carry.
const NODES_TARGET: f64 = 1.3;
/// How many times the one-group cluster's sends on one queue a many-group cluster of the same
/// size must carry: no slower, within 5%.
const ONE_QUEUE_TARGET: f64 = 0.95;

/// A raftq cluster of the run.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cluster<'a> {
    label: &'a str,
    nodes: usize,
    groups: u32,
    cpus_per_node: Option<f64>,
}

impl Cluster<'_> {
    fn name(&self) -> String {
        format!("{} nodes, G = {}", self.nodes, self.groups)
    }
}

/// How the two clusters of a comparison differ.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// Many groups over one, at one size (`smallest`: the smallest size of the run).
    Groups { smallest: bool },
    /// A larger size over the smallest, the clusters of the most groups.
    NodesMany,
    /// A larger size over the smallest, the one-group clusters.
    NodesOne,
}

impl Step {
    /// The least ratio asked of this step in the rows of `key`: the scale-out targets over many
    /// queues, and no slowdown of one queue's sends at one size.
    fn target(self, key: &str) -> Option<f64> {
        match self {
            Step::Groups { smallest: true } if key.starts_with("spread/") => Some(GROUPS_TARGET),
            Step::NodesMany if key.starts_with("spread/") => Some(NODES_TARGET),
            Step::Groups { .. } if key.starts_with("send/b1/") => Some(ONE_QUEUE_TARGET),
            _ => None,
        }
    }
}

/// Two clusters compared, the first over the second.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Comparison<'a> {
    over: Cluster<'a>,
    under: Cluster<'a>,
    step: Step,
}

/// The comparisons of a run: at each size, its cluster of the most groups over its one-group
/// cluster; then each larger size over the smallest, the clusters of the most groups and the
/// one-group ones.
fn comparisons<'a>(clusters: &[Cluster<'a>]) -> Vec<Comparison<'a>> {
    let mut sizes: Vec<usize> = clusters.iter().map(|c| c.nodes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let one = |nodes: usize| clusters.iter().find(|c| c.nodes == nodes && c.groups == 1);
    let many = |nodes: usize| {
        let many = clusters.iter().filter(|c| c.nodes == nodes && c.groups > 1);
        many.max_by_key(|c| c.groups)
    };
    let mut out = Vec::new();
    for (i, &nodes) in sizes.iter().enumerate() {
        if let (Some(&over), Some(&under)) = (many(nodes), one(nodes)) {
            let step = Step::Groups { smallest: i == 0 };
            out.push(Comparison { over, under, step });
        }
    }
    let Some(&smallest) = sizes.first() else {
        return out;
    };
    for &nodes in sizes.iter().skip(1) {
        if let (Some(&over), Some(&under)) = (many(nodes), many(smallest)) {
            let step = Step::NodesMany;
            out.push(Comparison { over, under, step });
        }
        if let (Some(&over), Some(&under)) = (one(nodes), one(smallest)) {
            let step = Step::NodesOne;
            out.push(Comparison { over, under, step });
        }
    }
    out
}

/// A comparison's ratio and whether it meets its target (`–` without one).
fn verdict(ratio: Option<f64>, target: Option<f64>) -> &'static str {
    match (ratio, target) {
        (_, None) => "–",
        (None, Some(_)) => "not measured",
        (Some(r), Some(t)) if r >= t => "met",
        (Some(_), Some(_)) => "missed",
    }
}

/// What one node used in a row: CPU µs per message and cores (CPU seconds per second).
#[derive(Debug, Clone, Copy, PartialEq)]
struct NodeUse {
    micros_per_message: f64,
    cores: f64,
}

/// Each node's use in `m`, in endpoint order; `None` for one not read, or a row without
/// messages.
fn node_use(m: &Measurement) -> Vec<Option<NodeUse>> {
    m.node_cpu_seconds
        .iter()
        .map(|cpu| {
            let cpu = (*cpu)?;
            (m.messages > 0 && m.seconds > 0.0).then(|| NodeUse {
                micros_per_message: cpu * 1e6 / m.messages as f64,
                cores: cpu / m.seconds,
            })
        })
        .collect()
}

/// The node (index in endpoint order) that used the most CPU in `m`, and its use.
fn busiest(m: &Measurement) -> Option<(usize, NodeUse)> {
    node_use(m)
        .into_iter()
        .enumerate()
        .filter_map(|(i, u)| Some((i, u?)))
        .max_by(|a, b| a.1.cores.total_cmp(&b.1.cores))
}

/// `queues_via_node_N` of a row, in node order: how many of its queues each node served.
fn queues_via_nodes(m: &Measurement) -> String {
    let counts: Vec<String> = (1..=m.node_cpu_seconds.len())
        .map(|n| {
            m.extra
                .get(&format!("queues_via_node_{n}"))
                .map_or("?".into(), |c| format!("{c:.0}"))
        })
        .collect();
    counts.join(" / ")
}

impl Results {
    /// The raftq clusters of the run, in the order they ran.
    fn clusters(&self) -> Vec<Cluster<'_>> {
        self.systems
            .iter()
            .filter(|s| s.system.starts_with("raftq"))
            .map(|s| Cluster {
                label: &s.label,
                nodes: s.replicas,
                groups: s.groups.unwrap_or(1),
                cpus_per_node: s.cpus_per_node,
            })
            .collect()
    }

    /// The scale-out report, naming `json` as where its raw rows are.
    pub fn scale_markdown(&self, json: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# Scale-out: raftq over many Raft groups\n");
        let _ = writeln!(
            out,
            "Written by `scripts/bench-scale`; the raw rows are in `{json}`. Each cluster ran \
             in docker compose on this one machine, one after the other, every node's \
             container capped to the same share of the machine's CPU (`cpus`), as separate \
             machines of one size would be; the load generator (`crates/raftq-bench`) ran on \
             the host, uncapped, and its own CPU is shown.\n"
        );
        self.machine_section(&mut out);
        let _ = writeln!(out);
        let clusters = self.clusters();
        self.clusters_table(&mut out, &clusters);
        self.targets_table(&mut out, &clusters);
        self.rows_tables(&mut out, &clusters);
        self.node_tables(&mut out, &clusters);
        out.push_str(SCALE_METHOD);
        out
    }

    fn clusters_table(&self, out: &mut String, clusters: &[Cluster]) {
        let cores = self.machine.cores as f64;
        let _ = writeln!(out, "## Clusters\n");
        table_head(
            out,
            &[
                "label",
                "nodes",
                "Raft groups",
                "CPUs per node",
                "CPUs of all nodes",
                &format!("left of the {cores:.0} cores"),
            ],
        );
        for c in clusters {
            let (per, all, left) = match c.cpus_per_node {
                Some(cpus) => {
                    let all = cpus * c.nodes as f64;
                    (
                        format!("{cpus}"),
                        format!("{all:.2}"),
                        format!("{:.2}", cores - all),
                    )
                }
                None => ("uncapped".into(), "–".into(), "–".into()),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {per} | {all} | {left} |",
                c.label, c.nodes, c.groups
            );
        }
        let _ = writeln!(out);
    }

    fn targets_table(&self, out: &mut String, clusters: &[Cluster]) {
        let _ = writeln!(out, "## Targets\n");
        let _ = writeln!(
            out,
            "Over many queues, at the smallest size the cluster of many groups must carry at \
             least {GROUPS_TARGET}× the messages/s of the one-group cluster on the same caps; \
             each larger cluster of many groups at least {NODES_TARGET}× the smallest one's. \
             Sends on one queue must be no slower with many groups than with one at the same \
             size (at least {ONE_QUEUE_TARGET}×). Rows without a target are shown for \
             comparison.\n"
        );
        table_head(
            out,
            &[
                "comparison",
                "workload",
                "msg/s",
                "against msg/s",
                "×",
                "target",
                "verdict",
            ],
        );
        for c in comparisons(clusters) {
            for (key, what) in self.keys() {
                let rate = |cluster: Cluster| self.get(cluster.label, key).map(|m| m.per_sec);
                let (over, under) = (rate(c.over), rate(c.under));
                let ratio = match (over, under) {
                    (Some(o), Some(u)) if u > 0.0 => Some(o / u),
                    _ => None,
                };
                let target = c.step.target(key);
                let _ = writeln!(
                    out,
                    "| {} ÷ {} | {what} | {} | {} | {} | {} | {} |",
                    c.over.name(),
                    c.under.name(),
                    over.map_or("–".into(), |v| format!("{v:.0}")),
                    under.map_or("–".into(), |v| format!("{v:.0}")),
                    fmt_opt(ratio),
                    target.map_or("–".into(), |t| format!("≥ {t}×")),
                    verdict(ratio, target),
                );
            }
        }
        let _ = writeln!(out);
    }

    fn rows_tables(&self, out: &mut String, clusters: &[Cluster]) {
        let _ = writeln!(out, "## Every row\n");
        for (key, what) in self.keys() {
            let _ = writeln!(out, "### {what}\n");
            table_head(
                out,
                &[
                    "cluster",
                    "msg/s",
                    "p50 ms",
                    "p99 ms",
                    "errors",
                    "busiest node",
                    "its CPU µs/msg",
                    "its CPU (cores)",
                    "load generator CPU (cores)",
                    "queues via node 1 / 2 / …",
                    "first error",
                ],
            );
            for c in clusters {
                let Some(m) = self
                    .results
                    .iter()
                    .find(|m| m.label == c.label && m.key == key)
                else {
                    continue;
                };
                let busy = busiest(m);
                let _ = writeln!(
                    out,
                    "| {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    c.name(),
                    m.per_sec,
                    fmt_opt(m.latency.map(|l| l.p50_ms)),
                    fmt_opt(m.latency.map(|l| l.p99_ms)),
                    m.errors,
                    busy.map_or("–".into(), |(i, _)| format!("node {}", i + 1)),
                    busy.map_or("–".into(), |(_, u)| format!(
                        "{:.1}",
                        u.micros_per_message
                    )),
                    busy.map_or("–".into(), |(_, u)| format!("{:.2}", u.cores)),
                    fmt_opt((m.seconds > 0.0).then(|| m.client_cpu_seconds / m.seconds)),
                    queues_via_nodes(m),
                    m.note
                        .as_deref()
                        .map_or(String::new(), |n| n.chars().take(120).collect())
                        .replace('|', "/"),
                );
            }
            let _ = writeln!(out);
        }
    }

    /// Per cluster size and workload, each node's CPU per message and cores used, the clusters
    /// of that size side by side; the busiest node of each in bold.
    fn node_tables(&self, out: &mut String, clusters: &[Cluster]) {
        let _ = writeln!(out, "## CPU per message, node by node\n");
        let mut sizes: Vec<usize> = clusters.iter().map(|c| c.nodes).collect();
        sizes.sort_unstable();
        sizes.dedup();
        for nodes in sizes {
            let same: Vec<&Cluster> = clusters.iter().filter(|c| c.nodes == nodes).collect();
            for (key, what) in self.keys() {
                let rows: Vec<(&Cluster, &Measurement)> = same
                    .iter()
                    .filter_map(|c| Some((*c, self.get(c.label, key)?)))
                    .collect();
                if rows.is_empty() {
                    continue;
                }
                let _ = writeln!(out, "### {nodes} nodes: {what}\n");
                let mut columns = vec!["node".to_string()];
                for (c, _) in &rows {
                    columns.push(format!("G = {} µs/msg", c.groups));
                    columns.push(format!("G = {} cores", c.groups));
                }
                table_head(out, &columns.iter().map(String::as_str).collect::<Vec<_>>());
                let uses: Vec<(Vec<Option<NodeUse>>, Option<usize>)> = rows
                    .iter()
                    .map(|(_, m)| (node_use(m), busiest(m).map(|(i, _)| i)))
                    .collect();
                for node in 0..nodes {
                    let mut line = format!("| node {} |", node + 1);
                    for (used, top) in &uses {
                        let bold = if *top == Some(node) { "**" } else { "" };
                        match used.get(node).copied().flatten() {
                            Some(u) => {
                                let _ = write!(
                                    line,
                                    " {bold}{:.1}{bold} | {bold}{:.2}{bold} |",
                                    u.micros_per_message, u.cores
                                );
                            }
                            None => line.push_str(" – | – |"),
                        }
                    }
                    let _ = writeln!(out, "{line}");
                }
                let _ = writeln!(out);
            }
        }
    }
}

/// How the scale-out numbers are made; the end of the report.
const SCALE_METHOD: &str = "## How the numbers are made

- **Clusters**: `docker-compose.yml` (3 nodes) and `docker-compose.five.yml` (5 nodes), TLS on
  the API and mutual TLS between the peers as those files set them up, each node on its own
  volume, with `RAFTQ_GROUPS` = G: a new cluster lays its queues over G Raft groups, group 1 on
  every node and groups 2 to G of 3 replicas each, laid round robin. An override file caps each
  node's container (`cpus`); the load generator runs on the host with no cap. Each cluster
  starts empty and is removed with its volumes after its rows.
- **Workloads**: each run first waits until every group is formed and led and no node leads
  more than its share of them (ceil(G / nodes), as the cluster's balancer spreads them). Then
  *send on one queue*, 1 and 16 closed-loop senders on one fresh queue, talking to the leader of
  its group. Then the queues over many are made (`--spread-queues`, standard queues; the
  cluster places each in one of its groups), and 256 messages are kept in flight over all of them:
  *send* is 256 closed-loop senders, sender i on queue i modulo the queues; *send+receive+ack*
  has at most 256 messages between the start of their send and the return of their ack, the
  senders spread the same way and 32 consumers spread evenly over the queues (at least one a
  queue), each receiving up to 10 and acknowledging them in one call. Every client talks to the
  node that leads its queue's group when the run starts (`GetQueue` names the group,
  `GetCluster` on every node its leader; the cluster's leader while none is known), over gRPC
  on two HTTP/2 connections per node straight to the node's container address, so that no
  proxy of Docker's sits between them. `queues via node` counts the queues whose clients talk
  to each node.
- **Caps**: `cpus` is a CFS quota per 100 ms period: a node that used its share of a period
  waits for the next one, which shows in the latency (p99 especially) more than a slower CPU
  would.
- **CPU**: user + system time of each node's process (the container's only process,
  `/proc/<pid>/stat` of its host pid) over the measured window, divided by the row's messages
  (µs/msg) and by the window (cores, against the node's cap); the busiest node is the one that
  used the most. The load generator's is its own process's. Kernel time spent outside the
  processes (part of the network's softirq work) is in neither.
- **Same machine**: the caps share out the CPU as separate machines would, but the nodes still
  share one disk (every fsync of every node goes to it) and one kernel, and talk over a Docker
  bridge rather than a network.
";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{machine, parse, row};
    use crate::report::{Line, SystemLine};
    use std::time::Duration;

    fn cluster(label: &str, nodes: usize, groups: u32) -> Cluster<'_> {
        Cluster {
            label,
            nodes,
            groups,
            cpus_per_node: Some(0.25),
        }
    }

    #[test]
    fn each_size_compares_its_many_groups_with_one_and_larger_sizes_with_the_smallest() {
        let clusters = [
            cluster("n3-g1", 3, 1),
            cluster("n3-g9", 3, 9),
            cluster("n5-g1", 5, 1),
            cluster("n5-g15", 5, 15),
        ];
        let pairs: Vec<(&str, &str, Step)> = comparisons(&clusters)
            .iter()
            .map(|c| (c.over.label, c.under.label, c.step))
            .collect();
        assert_eq!(
            pairs,
            [
                ("n3-g9", "n3-g1", Step::Groups { smallest: true }),
                ("n5-g15", "n5-g1", Step::Groups { smallest: false }),
                ("n5-g15", "n3-g9", Step::NodesMany),
                ("n5-g1", "n3-g1", Step::NodesOne),
            ]
        );
        // A run of three nodes alone compares its two clusters only.
        let pairs = comparisons(&clusters[..2]);
        assert_eq!(pairs.len(), 1);
        assert!(comparisons(&[]).is_empty());
    }

    #[test]
    fn each_step_asks_its_target_of_its_own_rows() {
        let spread = "spread/send/q18/c256";
        let one_queue = "send/b1/c16";
        let smallest = Step::Groups { smallest: true };
        let larger = Step::Groups { smallest: false };
        assert_eq!(smallest.target(spread), Some(GROUPS_TARGET));
        assert_eq!(larger.target(spread), None);
        assert_eq!(Step::NodesMany.target(spread), Some(NODES_TARGET));
        assert_eq!(Step::NodesOne.target(spread), None);
        assert_eq!(smallest.target(one_queue), Some(ONE_QUEUE_TARGET));
        assert_eq!(larger.target(one_queue), Some(ONE_QUEUE_TARGET));
        assert_eq!(Step::NodesMany.target(one_queue), None);
        assert_eq!(smallest.target("e2e/c16"), None);
    }

    #[test]
    fn verdicts_hold_a_ratio_against_its_target() {
        assert_eq!(verdict(Some(1.7), Some(1.6)), "met");
        assert_eq!(verdict(Some(1.6), Some(1.6)), "met");
        assert_eq!(verdict(Some(1.5), Some(1.6)), "missed");
        assert_eq!(verdict(None, Some(1.6)), "not measured");
        assert_eq!(verdict(Some(0.9), None), "–");
    }

    #[test]
    fn node_use_divides_each_nodes_cpu_by_messages_and_seconds() {
        let mut m = row("n3-g9", "k", 2_000, Duration::from_millis(1));
        m.seconds = 2.0;
        m.node_cpu_seconds = vec![Some(0.5), None, Some(0.1)];
        let used = node_use(&m);
        assert_eq!(
            used[0],
            Some(NodeUse {
                micros_per_message: 250.0,
                cores: 0.25
            })
        );
        assert_eq!(used[1], None);
        assert_eq!(busiest(&m).map(|(i, _)| i), Some(0));
        m.messages = 0;
        assert_eq!(busiest(&m), None);
    }

    fn scale_system(label: &str, nodes: usize, groups: u32) -> Line {
        let Line::System(s) = crate::report::tests::system(label, "raftq-grpc", nodes) else {
            unreachable!("a system line");
        };
        Line::System(SystemLine {
            groups: Some(groups),
            cpus_per_node: Some(0.25),
            ..s
        })
    }

    #[test]
    fn the_report_shows_ratios_verdicts_and_the_busiest_node_of_each_cluster() {
        let result = |label: &str, messages: u64, cpu: [f64; 3]| {
            let mut m = row(
                label,
                "spread/send/q18/c256",
                messages,
                Duration::from_millis(5),
            );
            m.node_cpu_seconds = cpu.iter().map(|c| Some(*c)).collect();
            m.extra.insert("queues_via_node_1".into(), 6.0);
            m.extra.insert("queues_via_node_2".into(), 6.0);
            m.extra.insert("queues_via_node_3".into(), 6.0);
            Line::Result(Box::new(m))
        };
        let md = parse(
            &[
                scale_system("n3-g1", 3, 1),
                scale_system("n3-g9", 3, 9),
                result("n3-g1", 1_000, [0.25, 0.1, 0.1]),
                result("n3-g9", 1_700, [0.2, 0.25, 0.2]),
            ],
            machine(),
        )
        .scale_markdown("docs/benchmarks-scale.json");
        assert!(
            md.contains(
                "| 3 nodes, G = 9 ÷ 3 nodes, G = 1 | spread/send/q18/c256 | 1700 | 1000 | 1.70 | \
                 ≥ 1.6× | met |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| n3-g9 | 3 | 9 | 0.25 | 0.75 | 1.25 |"),
            "{md}"
        );
        assert!(
            md.contains("| 3 nodes, G = 1 | 1000 | 5.00 | 5.00 | 0 | node 1 | 250.0 | 0.25 | 0.50 | 6 / 6 / 6 |  |"),
            "{md}"
        );
        assert!(
            md.contains("| node 1 | **250.0** | **0.25** | 117.6 | 0.20 |"),
            "{md}"
        );
        assert!(
            md.contains("| node 2 | 100.0 | 0.10 | **147.1** | **0.25** |"),
            "{md}"
        );
    }
}
