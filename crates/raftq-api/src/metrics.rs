//! Observability of both front ends: every request, REST or gRPC, is logged through `tracing`
//! (protocol, method, path, route, status, latency) and counted and timed by protocol, method,
//! route and status; `GET /metrics` renders those with the node's Raft gauges and per-queue
//! gauges in the Prometheus text format, through the `prometheus-client` encoder.
//!
//! Request counters and latency histograms live for the life of the process. Raft and queue
//! gauges are read at each scrape from this node's own applied state (no Raft round trip), so a
//! follower's figures may trail the leader's by its apply lag, which is exported too. So are the
//! clock's offset, the data directory's free space and the Raft log's fsync times.
//!
//! Per-queue series (labelled `account` and `queue`) grow with the queues; with
//! [`MetricsOptions::per_queue`] off each queue figure is one series summed (or, for ages and
//! maxima, the largest) over every queue instead.

use std::path::PathBuf;
use std::time::Instant;

use axum::extract::MatchedPath;
use axum::http;
use prometheus_client::encoding::{text, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use raftq_engine::QueueGauges;
pub(crate) use raftq_node::Filesystem;
use raftq_node::{Refusing, SyncTimesReading};

use crate::status::{Group, RaftStatus};

/// The route label of requests that matched no route.
const UNMATCHED: &str = "unmatched";

/// The gRPC status code `UNIMPLEMENTED`: an rpc that does not exist.
const GRPC_UNIMPLEMENTED: &str = "12";

/// gRPC status codes that mean the server failed, not the request: `UNKNOWN`,
/// `DEADLINE_EXCEEDED`, `INTERNAL`, `UNAVAILABLE`, `DATA_LOSS`.
const GRPC_SERVER_FAILURES: &[&str] = &["2", "4", "13", "14", "15"];

/// What a request is counted by.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// `http` or `grpc`.
    protocol: &'static str,
    /// The HTTP method (`POST` for every gRPC call).
    method: String,
    /// The route pattern, or the gRPC method path (`/raftq.v1.Queues/SendMessage`).
    route: String,
    /// The HTTP status, or the gRPC status code.
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    account: String,
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    /// The Raft group's number.
    group: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLabels {
    /// The member's node id.
    member: String,
}

/// What `GET /metrics` shows besides the request metrics, chosen by `raftq serve`'s flags.
#[derive(Debug, Clone)]
pub struct MetricsOptions {
    /// Series for each queue (labelled `account` and `queue`); when off, each queue figure is
    /// one series over every queue, so the number of series no longer grows with the queues.
    pub per_queue: bool,
    /// The node's data directory, whose file system's free and total bytes are shown.
    pub data_dir: Option<PathBuf>,
}

impl Default for MetricsOptions {
    fn default() -> MetricsOptions {
        MetricsOptions {
            per_queue: true,
            data_dir: None,
        }
    }
}

/// One reading of the node, rendered by [`Metrics::render`].
pub(crate) struct Reading<'a> {
    pub(crate) raft: &'a RaftStatus,
    pub(crate) queues: &'a [QueueGauges],
    /// Purged or deleted messages still to be deleted.
    pub(crate) reclaiming: u64,
    /// Receives parked in the replicated state.
    pub(crate) parked: usize,
    pub(crate) filesystem: Option<Filesystem>,
    pub(crate) log_syncs: SyncTimesReading,
    /// Which writes the node refuses for want of space.
    pub(crate) refusing: Refusing,
    /// Appends of the log that had to wait for room for a new segment, since the node started.
    pub(crate) log_room_waits: u64,
}

fn latency_histogram() -> Histogram {
    // 0.1 ms to ~6.5 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

/// Request counters and latency histograms.
pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
        }
    }
}

impl Metrics {
    fn record(&self, labels: RequestLabels, seconds: f64) {
        self.latency.get_or_create(&labels).observe(seconds);
        self.requests.get_or_create(&labels).inc();
    }

    /// The Prometheus text of the request metrics and of `reading`, with a series per queue
    /// when `per_queue`.
    pub(crate) fn render(&self, reading: &Reading, per_queue: bool) -> String {
        let mut registry = Registry::with_prefix("raftq");
        registry.register(
            "requests",
            "Requests answered, by protocol, method, route and status",
            self.requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time to answer a request, by protocol, method, route and status",
            self.latency.clone(),
        );
        register_raft(&mut registry, reading.raft);
        register_clock(&mut registry, reading.raft);
        register_queues(&mut registry, reading.queues, per_queue);
        gauge(
            &mut registry,
            "reclaim_backlog_messages",
            "Purged or deleted messages whose rows and payloads are not deleted yet",
            signed(reading.reclaiming),
        );
        gauge(
            &mut registry,
            "parked_receives",
            "Receives with a wait parked in the replicated state, of every node's clients",
            signed(reading.parked),
        );
        if let Some(filesystem) = reading.filesystem {
            gauge(
                &mut registry,
                "data_filesystem_avail_bytes",
                "Bytes the node may still write on the file system of its data directory",
                signed(filesystem.avail_bytes),
            );
            gauge(
                &mut registry,
                "data_filesystem_size_bytes",
                "Size of the file system of the node's data directory",
                signed(filesystem.size_bytes),
            );
        }
        register_space(&mut registry, reading);
        registry.register(
            "log_fsync_duration_seconds",
            "Time of each fsync of the Raft log's files and directory (an append is acknowledged \
             after its fsync)",
            FixedHistogram(reading.log_syncs.clone()),
        );
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = text::encode(&mut out, &registry);
        out
    }
}

/// What the node refuses for want of space, and the log's waits for room.
fn register_space(registry: &mut Registry, reading: &Reading) {
    gauge(
        registry,
        "storage_refusing_writes",
        "Client writes this node refuses for want of space while it leads: 0 none, 1 those that \
         add data (free space below --min-free-bytes), 2 every one (the log has no room)",
        match reading.refusing {
            Refusing::Nothing => 0,
            Refusing::AddingData => 1,
            Refusing::Everything => 2,
        },
    );
    let waits: Counter = Counter::default();
    waits.inc_by(reading.log_room_waits);
    registry.register(
        "log_room_waits",
        "Appends of the Raft log that waited for room on the disk for a new segment",
        waits,
    );
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: i64) {
    let g: Gauge = Gauge::default();
    g.set(value);
    registry.register(name, help, g);
}

/// A histogram counted elsewhere (the store's fsync times), rendered as it was read.
#[derive(Debug)]
struct FixedHistogram(SyncTimesReading);

impl EncodeMetric for FixedHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // The encoder writes `+Inf` for `f64::MAX`.
        let buckets: Vec<(f64, u64)> = self
            .0
            .buckets
            .iter()
            .map(|&(bound, n)| (if bound.is_finite() { bound } else { f64::MAX }, n))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(self.0.sum_seconds, self.0.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The clock's offset from the cluster's time and the node's verdicts on it.
fn register_clock(registry: &mut Registry, raft: &RaftStatus) {
    let clock = registry.sub_registry_with_prefix("clock");
    if let Some(offset) = raft.clock_offset_ms {
        let g = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        g.set(offset as f64 / 1000.0);
        clock.register(
            "offset_seconds",
            "This node's clock minus the median of the voters' clocks",
            g,
        );
    }
    if let Some(skewed) = raft.clock_skewed {
        gauge(
            clock,
            "skewed",
            "1 when the offset is beyond --max-clock-skew-ms: the node does not stand for election",
            skewed.into(),
        );
    }
    if let Some(confirmed) = raft.clock_confirmed {
        gauge(
            clock,
            "confirmed",
            "1 when a majority of the voters' clocks agreed on the cluster's time at the last \
             round of pings",
            confirmed.into(),
        );
    }
}

fn register_raft(registry: &mut Registry, raft: &RaftStatus) {
    let raft_registry = registry.sub_registry_with_prefix("raft");
    for (name, help, value) in raft_gauges(raft) {
        gauge(raft_registry, name, help, value);
    }
    let held_back = Counter::<u64>::default();
    held_back.inc_by(raft.elections_held_back);
    raft_registry.register(
        "elections_held_back",
        "Elections this node would have stood in had its election gate not held it back",
        held_back,
    );
    register_members(raft_registry, raft);
    register_groups(registry, raft);
}

/// One figure of a Raft group: its series name, its help text, and how it is read off the
/// group (`None`: no series for that group).
type GroupFigure = (&'static str, &'static str, fn(&Group) -> Option<i64>);

/// Per Raft group (labelled `group`): its leader, its queues and, where this node holds a
/// replica, how far that replica has come; and how many groups this node leads.
fn register_groups(registry: &mut Registry, raft: &RaftStatus) {
    let groups = registry.sub_registry_with_prefix("group");
    let figures: [GroupFigure; 6] = [
        (
            "leader_id",
            "The group's leader's node id, -1 when no leader is known",
            |g| Some(g.leader.map_or(-1, signed)),
        ),
        ("queues", "Queues the group holds", |g| {
            Some(signed(g.queues))
        }),
        (
            "commit_index",
            "The highest index of the group's log this node knows committed (replicas only)",
            |g| g.commit_index.map(signed),
        ),
        (
            "last_applied_index",
            "The last index of the group's log this node applied (replicas only)",
            |g| g.applied_index.map(signed),
        ),
        (
            "apply_lag",
            "Committed entries of the group this node has not applied yet (replicas only)",
            |g| Some(signed(g.commit_index?.saturating_sub(g.applied_index?))),
        ),
        (
            "outbox_messages",
            "Messages in the group's outbox on their way to queues of other groups, as this \
             node applied it (replicas only)",
            |g| g.outbox.map(signed),
        ),
    ];
    for (name, help, value_of) in figures {
        let family = Family::<GroupLabels, Gauge>::default();
        for group in &raft.groups {
            if let Some(value) = value_of(group) {
                let labels = GroupLabels {
                    group: group.group.to_string(),
                };
                family.get_or_create(&labels).set(value);
            }
        }
        groups.register(name, help, family);
    }
    let led = raft
        .groups
        .iter()
        .filter(|g| g.leader == Some(raft.node_id));
    gauge(
        registry,
        "groups_led",
        "Raft groups this node leads",
        signed(led.count()),
    );
}

/// A log index, a count or a size as a gauge's value (saturating: a gauge is signed).
fn signed(i: impl TryInto<i64>) -> i64 {
    i.try_into().unwrap_or(i64::MAX)
}

/// The node's Raft figures: name, help and value of each gauge.
fn raft_gauges(raft: &RaftStatus) -> [(&'static str, &'static str, i64); 11] {
    [
        ("node_id", "This node's id", signed(raft.node_id)),
        ("term", "The current Raft term", signed(raft.term)),
        (
            "leader_id",
            "The leader's node id, -1 when no leader is known",
            raft.leader.map_or(-1, signed),
        ),
        (
            "is_leader",
            "1 when this node is the leader",
            (raft.leader == Some(raft.node_id)).into(),
        ),
        (
            "commit_index",
            "The highest log index known committed",
            signed(raft.commit_index),
        ),
        (
            "last_applied_index",
            "The highest log index applied to the state machine",
            signed(raft.last_applied),
        ),
        (
            "last_log_index",
            "The highest log index appended to this node's log",
            signed(raft.last_log_index),
        ),
        (
            "apply_lag",
            "Committed log entries this node has not applied yet",
            signed(raft.commit_index.saturating_sub(raft.last_applied)),
        ),
        (
            "members",
            "Members of the cluster (voters and learners)",
            signed(raft.nodes.len()),
        ),
        (
            "members_answering",
            "Members, this node included, that answered this node's pings in the last 2 s",
            signed(raft.members_answering),
        ),
        (
            "leader_unreachable",
            "1 when the leader's appends reach this node but it does not answer this node's \
             pings: requests to this node are refused at once",
            raft.leader_unreachable.into(),
        ),
    ]
}

/// Per member: whether it answers this node's pings and, on the leader, how far it lags.
fn register_members(raft_registry: &mut Registry, raft: &RaftStatus) {
    let answering = Family::<MemberLabels, Gauge>::default();
    let lag = Family::<MemberLabels, Gauge>::default();
    for member in &raft.nodes {
        let labels = MemberLabels {
            member: member.id.to_string(),
        };
        answering
            .get_or_create(&labels)
            .set(member.answering.into());
        // Only a leader knows what each member holds.
        if let Some(matched) = member.matched_index {
            lag.get_or_create(&labels)
                .set(signed(raft.last_log_index.saturating_sub(matched)));
        }
    }
    raft_registry.register(
        "member_answering",
        "1 when the member answered this node's pings in the last 2 s",
        answering,
    );
    raft_registry.register(
        "member_replication_lag_entries",
        "On the leader: entries of its log the member is not known to hold",
        lag,
    );
}

/// How the figures of several queues make one, when the series are not per queue.
#[derive(Clone, Copy)]
enum Together {
    Sum,
    Max,
}

/// One figure of a queue: its series name, its help text, how it is read off the queue's gauges
/// and how the figures of several queues make one.
struct QueueFigure {
    name: &'static str,
    help: &'static str,
    value: fn(&QueueGauges) -> u64,
    together: Together,
}

/// The queue figures exported as gauges.
const QUEUE_GAUGES: [QueueFigure; 7] = [
    QueueFigure {
        name: "visible_messages",
        help: "Messages ready to be received",
        value: |g| g.stats.visible,
        together: Together::Sum,
    },
    QueueFigure {
        name: "leased_messages",
        help: "Messages under a lease",
        value: |g| g.stats.leased,
        together: Together::Sum,
    },
    QueueFigure {
        name: "delayed_messages",
        help: "Messages whose delay has not ended",
        value: |g| g.stats.delayed,
        together: Together::Sum,
    },
    QueueFigure {
        name: "pending_redrive_messages",
        help: "Messages waiting to move to a dead-letter queue that refuses them",
        value: |g| g.stats.pending_redrive,
        together: Together::Sum,
    },
    QueueFigure {
        name: "oldest_message_age_seconds",
        help: "Age of the queue's oldest message",
        value: |g| g.stats.oldest_message_age_seconds,
        together: Together::Max,
    },
    QueueFigure {
        name: "active_tenants",
        help: "Message group IDs of a standard queue that hold messages",
        value: |g| g.stats.active_tenants,
        together: Together::Sum,
    },
    QueueFigure {
        name: "largest_tenant_in_flight_messages",
        help: "The most messages one tenant of a standard queue has leased",
        value: |g| g.stats.largest_tenant_in_flight,
        together: Together::Max,
    },
];

/// The queue figures exported as counters (every one sums over queues).
const QUEUE_COUNTERS: [QueueFigure; 3] = [
    QueueFigure {
        name: "dead_lettered_messages",
        help: "Messages moved from this queue to its dead-letter queue",
        value: |g| g.dead_lettered,
        together: Together::Sum,
    },
    QueueFigure {
        name: "sent_messages",
        help: "Messages sent to this queue since this node loaded it (duplicates not counted)",
        value: |g| g.sent,
        together: Together::Sum,
    },
    QueueFigure {
        name: "acked_messages",
        help: "Messages acknowledged on this queue since this node loaded it",
        value: |g| g.acked,
        together: Together::Sum,
    },
];

fn register_queues(registry: &mut Registry, queues: &[QueueGauges], per_queue: bool) {
    let queue_registry = registry.sub_registry_with_prefix("queue");
    for figure in &QUEUE_GAUGES {
        if per_queue {
            let family = Family::<QueueLabels, Gauge>::default();
            for g in queues {
                family
                    .get_or_create(&labels(g))
                    .set(signed((figure.value)(g)));
            }
            queue_registry.register(figure.name, figure.help, family);
        } else if let Some(value) = all_together(queues, figure) {
            gauge(queue_registry, figure.name, figure.help, signed(value));
        }
    }
    for figure in &QUEUE_COUNTERS {
        if per_queue {
            let family = Family::<QueueLabels, Counter>::default();
            for g in queues {
                family.get_or_create(&labels(g)).inc_by((figure.value)(g));
            }
            queue_registry.register(figure.name, figure.help, family);
        } else if let Some(value) = all_together(queues, figure) {
            let counter = Counter::<u64>::default();
            counter.inc_by(value);
            queue_registry.register(figure.name, figure.help, counter);
        }
    }
}

fn labels(g: &QueueGauges) -> QueueLabels {
    QueueLabels {
        account: g.account.clone(),
        queue: g.name.clone(),
    }
}

/// One figure of every queue together; `None` when there is no queue.
fn all_together(queues: &[QueueGauges], figure: &QueueFigure) -> Option<u64> {
    let values = queues.iter().map(figure.value);
    match figure.together {
        Together::Sum if !queues.is_empty() => Some(values.fold(0, u64::saturating_add)),
        Together::Sum => None,
        Together::Max => values.max(),
    }
}

/// The gRPC status of a response: in its headers when the call failed before any message
/// (trailers-only), otherwise in trailers that are not waited for, where a unary call
/// that sent a message carries `OK`.
fn grpc_status<B>(response: &http::Response<B>) -> String {
    response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("0")
        .to_string()
}

/// The route label of a response that a further protocol ([`crate::Protocol`]) answered, set
/// by it in the response's extensions: one of a fixed set (e.g. `AmazonSQS.SendMessage`), so
/// that labels cannot grow without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route(pub &'static str);

/// One request being answered: what it is counted and logged by, and since when.
pub(crate) struct Observation {
    started: Instant,
    method: String,
    path: String,
    is_grpc: bool,
    matched: Option<String>,
}

impl Observation {
    /// Starts timing `request`, a gRPC call when `is_grpc`.
    pub(crate) fn start<B>(request: &http::Request<B>, is_grpc: bool) -> Observation {
        Observation {
            started: Instant::now(),
            method: request.method().to_string(),
            path: request.uri().path().to_string(),
            is_grpc,
            matched: request
                .extensions()
                .get::<MatchedPath>()
                .map(|m| m.as_str().to_string()),
        }
    }

    /// Logs, counts and times the request, answered with `response`.
    pub(crate) fn finish<B>(self, metrics: &Metrics, response: &http::Response<B>) {
        let Observation {
            started,
            method,
            path,
            is_grpc,
            matched,
        } = self;
        let elapsed = started.elapsed();
        let (protocol, status, route) = if is_grpc {
            let status = grpc_status(response);
            // Paths of rpcs that do not exist are not labels: they would grow without bound.
            let route = if status == GRPC_UNIMPLEMENTED {
                UNMATCHED.to_string()
            } else {
                path.clone()
            };
            ("grpc", status, route)
        } else {
            let route = matched
                .or_else(|| {
                    response
                        .extensions()
                        .get::<Route>()
                        .map(|r| r.0.to_string())
                })
                .unwrap_or_else(|| UNMATCHED.to_string());
            ("http", response.status().as_u16().to_string(), route)
        };
        let latency_ms = elapsed.as_secs_f64() * 1000.0;
        let server_failed = if is_grpc {
            GRPC_SERVER_FAILURES.contains(&status.as_str())
        } else {
            response.status().is_server_error()
        };
        // A line per request at thousands per second is a visible share of a loaded node's CPU:
        // requests log at `debug`, failures of the server at `warn`.
        if server_failed {
            tracing::warn!(protocol, method, path, route, status, latency_ms, "request");
        } else {
            tracing::debug!(protocol, method, path, route, status, latency_ms, "request");
        }
        metrics.record(
            RequestLabels {
                protocol,
                method,
                route,
                status,
            },
            elapsed.as_secs_f64(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Member;
    use raftq_engine::QueueStats;

    fn status() -> RaftStatus {
        RaftStatus {
            leader: None,
            nodes: vec![],
            term: 3,
            commit_index: 9,
            node_id: 1,
            region: "local".into(),
            groups: vec![
                Group {
                    group: 1,
                    members: vec![1, 2, 3],
                    leader: Some(1),
                    formed: true,
                    queues: 4,
                    role: Some("leader"),
                    term: Some(3),
                    commit_index: Some(9),
                    applied_index: Some(7),
                    last_log_index: Some(10),
                    outbox: Some(6),
                },
                Group {
                    group: 2,
                    members: vec![2, 3, 4],
                    leader: None,
                    formed: false,
                    queues: 0,
                    role: None,
                    term: None,
                    commit_index: None,
                    applied_index: None,
                    last_log_index: None,
                    outbox: None,
                },
            ],
            cluster_id: None,
            clock_offset_ms: Some(-250),
            clock_skewed: Some(false),
            clock_confirmed: Some(true),
            state_time_ms: Some(1_800_000_000_000),
            last_applied: 7,
            last_log_index: 10,
            members_answering: 2,
            leader_unreachable: true,
            elections_held_back: 4,
        }
    }

    fn queue(account: &str, name: &str, visible: u64, age: u64, dead_lettered: u64) -> QueueGauges {
        QueueGauges {
            account: account.into(),
            name: name.into(),
            stats: QueueStats {
                visible,
                leased: 2,
                delayed: 1,
                pending_redrive: 0,
                oldest_message_age_seconds: age,
                active_tenants: 3,
                largest_tenant_in_flight: 2,
                ..QueueStats::default()
            },
            dead_lettered,
            sent: 11,
            acked: 6,
        }
    }

    fn syncs() -> SyncTimesReading {
        SyncTimesReading {
            buckets: vec![(0.0001, 3), (0.0002, 1), (f64::INFINITY, 1)],
            count: 5,
            sum_seconds: 2.5,
        }
    }

    fn reading<'a>(raft: &'a RaftStatus, queues: &'a [QueueGauges]) -> Reading<'a> {
        Reading {
            raft,
            queues,
            reclaiming: 7,
            parked: 3,
            filesystem: Some(Filesystem {
                avail_bytes: 1_000,
                size_bytes: 4_000,
            }),
            log_syncs: syncs(),
            refusing: Refusing::AddingData,
            log_room_waits: 2,
        }
    }

    fn assert_lines(text: &str, lines: &[String]) {
        for line in lines {
            assert!(text.contains(line.as_str()), "{line}: {text}");
        }
    }

    #[test]
    fn render_shows_counters_histograms_and_gauges() {
        let m = Metrics::default();
        let labels = RequestLabels {
            protocol: "http",
            method: "GET".into(),
            route: "/v1/queues/{q}".into(),
            status: "404".into(),
        };
        m.record(labels.clone(), 0.5);
        m.record(labels, 0.00025);
        let raft = status();
        let queues = [queue("dev", "orders", 4, 30, 5)];
        let text = m.render(&reading(&raft, &queues), true);
        let labels = r#"protocol="http",method="GET",route="/v1/queues/{q}",status="404""#;
        assert_lines(
            &text,
            &[
                format!("raftq_requests_total{{{labels}}} 2\n"),
                format!("raftq_request_duration_seconds_count{{{labels}}} 2\n"),
                format!("raftq_request_duration_seconds_bucket{{le=\"0.0004\",{labels}}} 1\n"),
                format!("raftq_request_duration_seconds_bucket{{le=\"+Inf\",{labels}}} 2\n"),
                "raftq_raft_term 3\n".into(),
                "raftq_raft_leader_id -1\n".into(),
                "raftq_raft_apply_lag 2\n".into(),
                "raftq_raft_members_answering 2\n".into(),
                "raftq_raft_leader_unreachable 1\n".into(),
                "raftq_group_leader_id{group=\"1\"} 1\n".into(),
                "raftq_group_leader_id{group=\"2\"} -1\n".into(),
                "raftq_group_queues{group=\"1\"} 4\n".into(),
                "raftq_group_apply_lag{group=\"1\"} 2\n".into(),
                "raftq_group_outbox_messages{group=\"1\"} 6\n".into(),
                "raftq_groups_led 1\n".into(),
                "raftq_raft_elections_held_back_total 4\n".into(),
                "raftq_reclaim_backlog_messages 7\n".into(),
                "raftq_parked_receives 3\n".into(),
                "raftq_queue_visible_messages{account=\"dev\",queue=\"orders\"} 4\n".into(),
                "raftq_queue_leased_messages{account=\"dev\",queue=\"orders\"} 2\n".into(),
                "raftq_queue_oldest_message_age_seconds{account=\"dev\",queue=\"orders\"} 30\n"
                    .into(),
                "raftq_queue_active_tenants{account=\"dev\",queue=\"orders\"} 3\n".into(),
                "raftq_queue_largest_tenant_in_flight_messages{account=\"dev\",queue=\"orders\"} 2\n"
                    .into(),
                "raftq_queue_dead_lettered_messages_total{account=\"dev\",queue=\"orders\"} 5\n"
                    .into(),
                "raftq_queue_sent_messages_total{account=\"dev\",queue=\"orders\"} 11\n".into(),
                "raftq_queue_acked_messages_total{account=\"dev\",queue=\"orders\"} 6\n".into(),
            ],
        );
        // A group this node holds no replica of has no index of its own to show.
        assert!(
            !text.contains("raftq_group_commit_index{group=\"2\"}"),
            "{text}"
        );
    }

    #[test]
    fn render_shows_the_clock_the_disk_its_refusals_and_the_log_fsyncs() {
        let raft = status();
        let text = Metrics::default().render(&reading(&raft, &[]), true);
        assert_lines(
            &text,
            &[
                "# TYPE raftq_clock_offset_seconds gauge\n".into(),
                "raftq_clock_offset_seconds -0.25\n".into(),
                "raftq_clock_skewed 0\n".into(),
                "raftq_clock_confirmed 1\n".into(),
                "raftq_data_filesystem_avail_bytes 1000\n".into(),
                "raftq_data_filesystem_size_bytes 4000\n".into(),
                "raftq_storage_refusing_writes 1\n".into(),
                "# TYPE raftq_log_room_waits counter\n".into(),
                "raftq_log_room_waits_total 2\n".into(),
                "# TYPE raftq_log_fsync_duration_seconds histogram\n".into(),
                "raftq_log_fsync_duration_seconds_sum 2.5\n".into(),
                "raftq_log_fsync_duration_seconds_count 5\n".into(),
                // Cumulative, as Prometheus reads buckets.
                "raftq_log_fsync_duration_seconds_bucket{le=\"0.0001\"} 3\n".into(),
                "raftq_log_fsync_duration_seconds_bucket{le=\"0.0002\"} 4\n".into(),
                "raftq_log_fsync_duration_seconds_bucket{le=\"+Inf\"} 5\n".into(),
            ],
        );
        // A node that cannot read its file system's space shows no figure rather than a zero
        // that would raise a full-disk alert.
        let unread = Reading {
            filesystem: None,
            ..reading(&raft, &[])
        };
        let text = Metrics::default().render(&unread, true);
        assert!(!text.contains("raftq_data_filesystem"), "{text}");
    }

    #[test]
    fn the_leader_shows_each_members_lag_and_every_node_who_answers() {
        let member = |id, answering, matched_index| Member {
            id,
            raft_addr: format!("node{id}:7000"),
            role: "follower",
            answering,
            matched_index,
            last_log_index: None,
            commit_index: None,
            applied_index: None,
        };
        let raft = RaftStatus {
            leader: Some(1),
            nodes: vec![
                member(1, true, Some(10)),
                member(2, true, Some(4)),
                member(3, false, None),
            ],
            ..status()
        };
        let text = Metrics::default().render(&reading(&raft, &[]), true);
        assert_lines(
            &text,
            &[
                "raftq_raft_member_answering{member=\"2\"} 1\n".into(),
                "raftq_raft_member_answering{member=\"3\"} 0\n".into(),
                "raftq_raft_member_replication_lag_entries{member=\"1\"} 0\n".into(),
                "raftq_raft_member_replication_lag_entries{member=\"2\"} 6\n".into(),
            ],
        );
        // Member 3 was not matched yet: no figure rather than a made-up one.
        assert!(
            !text.contains("raftq_raft_member_replication_lag_entries{member=\"3\"}"),
            "{text}"
        );
    }

    #[test]
    fn without_per_queue_series_each_figure_is_one_series_over_every_queue() {
        let raft = status();
        let queues = [
            queue("dev", "orders", 4, 30, 5),
            queue("ops", "jobs", 6, 90, 1),
        ];
        let text = Metrics::default().render(&reading(&raft, &queues), false);
        assert!(!text.contains("queue=\""), "{text}");
        assert_lines(
            &text,
            &[
                "raftq_queue_visible_messages 10\n".into(),
                "raftq_queue_oldest_message_age_seconds 90\n".into(),
                "raftq_queue_largest_tenant_in_flight_messages 2\n".into(),
                "raftq_queue_dead_lettered_messages_total 6\n".into(),
                "raftq_queue_sent_messages_total 22\n".into(),
            ],
        );
        let text = Metrics::default().render(&reading(&raft, &[]), false);
        assert!(!text.contains("raftq_queue_visible_messages "), "{text}");
    }

    /// The names of the samples in a rendering: `raftq_requests_total`, `..._bucket`, ...
    fn sample_names(text: &str) -> std::collections::BTreeSet<String> {
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split(['{', ' ']).next())
            .map(String::from)
            .collect()
    }

    #[test]
    fn every_metric_the_alerts_and_the_dashboard_use_is_rendered() {
        let m = Metrics::default();
        m.record(
            RequestLabels {
                protocol: "grpc",
                method: "POST".into(),
                route: "/raftq.v1.Queues/SendMessage".into(),
                status: "0".into(),
            },
            0.001,
        );
        let member = Member {
            id: 2,
            raft_addr: "node2:7000".into(),
            role: "follower",
            answering: true,
            matched_index: Some(3),
            last_log_index: None,
            commit_index: None,
            applied_index: None,
        };
        let raft = RaftStatus {
            leader: Some(1),
            nodes: vec![member],
            ..status()
        };
        let queues = [queue("dev", "orders", 4, 30, 5)];
        let rendered = sample_names(&m.render(&reading(&raft, &queues), true));
        // `up` is Prometheus' own.
        let files = [
            (
                "alerts.yml",
                include_str!("../../../deploy/prometheus/alerts.yml"),
            ),
            (
                "raftq.json",
                include_str!("../../../deploy/grafana/raftq.json"),
            ),
        ];
        for (file, text) in files {
            let mut used = 0;
            for (at, _) in text.match_indices("raftq_") {
                let name: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                used += 1;
                assert!(
                    rendered.contains(&name),
                    "{file} uses {name}, which GET /metrics does not show: {rendered:?}"
                );
            }
            assert!(used > 10, "{file} names {used} metrics");
        }
    }
}
