//! Observability of both front ends: every request, REST or gRPC, is logged through `tracing`
//! (protocol, method, path, route, status, latency) and counted and timed by protocol, method,
//! route and status; `GET /metrics` renders those with the node's Raft gauges and per-queue
//! gauges in the Prometheus text format, through the `prometheus-client` encoder.
//!
//! Request counters and latency histograms live for the life of the process. Raft and queue
//! gauges are read at each scrape from this node's own applied state (no Raft round trip), so a
//! follower's figures may trail the leader's by its apply lag, which is exported too.

use std::time::Instant;

use axum::extract::MatchedPath;
use axum::http;
use prometheus_client::encoding::{text, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use raftq_engine::QueueGauges;

use crate::status::RaftStatus;

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

    /// The Prometheus text of the request metrics, the Raft gauges of `raft`, the gauges of
    /// `queues`, how many purged or deleted messages are still to be deleted and how many
    /// receives are parked.
    pub fn render(
        &self,
        raft: &RaftStatus,
        queues: &[QueueGauges],
        reclaiming: u64,
        parked: usize,
    ) -> String {
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
        register_raft(&mut registry, raft);
        register_queues(&mut registry, queues);
        gauge(
            &mut registry,
            "reclaim_backlog_messages",
            "Purged or deleted messages whose rows and payloads are not deleted yet",
            i64::try_from(reclaiming).unwrap_or(i64::MAX),
        );
        gauge(
            &mut registry,
            "parked_receives",
            "Receives with a wait parked in the replicated state, of every node's clients",
            i64::try_from(parked).unwrap_or(i64::MAX),
        );
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = text::encode(&mut out, &registry);
        out
    }
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: i64) {
    let g: Gauge = Gauge::default();
    g.set(value);
    registry.register(name, help, g);
}

fn register_raft(registry: &mut Registry, raft: &RaftStatus) {
    let raft_registry = registry.sub_registry_with_prefix("raft");
    let index = |i: u64| i64::try_from(i).unwrap_or(i64::MAX);
    let gauges = [
        ("node_id", "This node's id", index(raft.node_id)),
        ("term", "The current Raft term", index(raft.term)),
        (
            "leader_id",
            "The leader's node id, -1 when no leader is known",
            raft.leader.map_or(-1, index),
        ),
        (
            "is_leader",
            "1 when this node is the leader",
            (raft.leader == Some(raft.node_id)).into(),
        ),
        (
            "commit_index",
            "The highest log index known committed",
            index(raft.commit_index),
        ),
        (
            "last_applied_index",
            "The highest log index applied to the state machine",
            index(raft.last_applied),
        ),
        (
            "last_log_index",
            "The highest log index appended to this node's log",
            index(raft.last_log_index),
        ),
        (
            "apply_lag",
            "Committed log entries this node has not applied yet",
            index(raft.commit_index.saturating_sub(raft.last_applied)),
        ),
        (
            "members",
            "Members of the cluster (voters and learners)",
            index(raft.nodes.len() as u64),
        ),
        (
            "members_answering",
            "Members, this node included, that answered this node's pings in the last 2 s",
            index(raft.members_answering),
        ),
        (
            "leader_unreachable",
            "1 when the leader's appends reach this node but it does not answer this node's \
             pings: requests to this node are refused at once",
            raft.leader_unreachable.into(),
        ),
    ];
    for (name, help, value) in gauges {
        gauge(raft_registry, name, help, value);
    }
    let held_back = Counter::<u64>::default();
    held_back.inc_by(raft.elections_held_back);
    raft_registry.register(
        "elections_held_back",
        "Elections this node would have stood in had its election gate not held it back",
        held_back,
    );
}

fn register_queues(registry: &mut Registry, queues: &[QueueGauges]) {
    let queue_registry = registry.sub_registry_with_prefix("queue");
    type Figure = fn(&QueueGauges) -> u64;
    let figures: [(&str, &str, Figure); 7] = [
        ("visible_messages", "Messages ready to be received", |g| {
            g.stats.visible
        }),
        ("leased_messages", "Messages under a lease", |g| {
            g.stats.leased
        }),
        (
            "delayed_messages",
            "Messages whose delay has not ended",
            |g| g.stats.delayed,
        ),
        (
            "pending_redrive_messages",
            "Messages waiting to move to a dead-letter queue that refuses them",
            |g| g.stats.pending_redrive,
        ),
        (
            "oldest_message_age_seconds",
            "Age of the queue's oldest message",
            |g| g.stats.oldest_message_age_seconds,
        ),
        (
            "active_tenants",
            "Message group IDs of a standard queue that hold messages",
            |g| g.stats.active_tenants,
        ),
        (
            "largest_tenant_in_flight_messages",
            "The most messages one tenant of a standard queue has leased",
            |g| g.stats.largest_tenant_in_flight,
        ),
    ];
    for (name, help, figure) in figures {
        let family = Family::<QueueLabels, Gauge>::default();
        for g in queues {
            family
                .get_or_create(&labels(g))
                .set(i64::try_from(figure(g)).unwrap_or(i64::MAX));
        }
        queue_registry.register(name, help, family);
    }
    let counters: [(&str, &str, Figure); 3] = [
        (
            "dead_lettered_messages",
            "Messages moved from this queue to its dead-letter queue",
            |g| g.dead_lettered,
        ),
        (
            "sent_messages",
            "Messages sent to this queue since this node loaded it (duplicates not counted)",
            |g| g.sent,
        ),
        (
            "acked_messages",
            "Messages acknowledged on this queue since this node loaded it",
            |g| g.acked,
        ),
    ];
    for (name, help, figure) in counters {
        let family = Family::<QueueLabels, Counter>::default();
        for g in queues {
            family.get_or_create(&labels(g)).inc_by(figure(g));
        }
        queue_registry.register(name, help, family);
    }
}

fn labels(g: &QueueGauges) -> QueueLabels {
    QueueLabels {
        account: g.account.clone(),
        queue: g.name.clone(),
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
    use raftq_engine::QueueStats;

    fn status() -> RaftStatus {
        RaftStatus {
            leader: None,
            nodes: vec![],
            term: 3,
            commit_index: 9,
            node_id: 1,
            region: "local".into(),
            cluster_id: None,
            clock_offset_ms: Some(0),
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
        let queues = [QueueGauges {
            account: "dev".into(),
            name: "orders".into(),
            stats: QueueStats {
                visible: 4,
                leased: 2,
                delayed: 1,
                pending_redrive: 0,
                oldest_message_age_seconds: 30,
                active_tenants: 3,
                largest_tenant_in_flight: 2,
            },
            dead_lettered: 5,
            sent: 11,
            acked: 6,
        }];
        let text = m.render(&status(), &queues, 7, 3);
        let labels = r#"protocol="http",method="GET",route="/v1/queues/{q}",status="404""#;
        for line in [
            format!("raftq_requests_total{{{labels}}} 2\n"),
            format!("raftq_request_duration_seconds_count{{{labels}}} 2\n"),
            format!("raftq_request_duration_seconds_bucket{{le=\"0.0004\",{labels}}} 1\n"),
            format!("raftq_request_duration_seconds_bucket{{le=\"+Inf\",{labels}}} 2\n"),
            "raftq_raft_term 3\n".into(),
            "raftq_raft_leader_id -1\n".into(),
            "raftq_raft_apply_lag 2\n".into(),
            "raftq_raft_members_answering 2\n".into(),
            "raftq_raft_leader_unreachable 1\n".into(),
            "raftq_raft_elections_held_back_total 4\n".into(),
            "raftq_reclaim_backlog_messages 7\n".into(),
            "raftq_parked_receives 3\n".into(),
            "raftq_queue_visible_messages{account=\"dev\",queue=\"orders\"} 4\n".into(),
            "raftq_queue_leased_messages{account=\"dev\",queue=\"orders\"} 2\n".into(),
            "raftq_queue_oldest_message_age_seconds{account=\"dev\",queue=\"orders\"} 30\n".into(),
            "raftq_queue_active_tenants{account=\"dev\",queue=\"orders\"} 3\n".into(),
            "raftq_queue_largest_tenant_in_flight_messages{account=\"dev\",queue=\"orders\"} 2\n"
                .into(),
            "raftq_queue_dead_lettered_messages_total{account=\"dev\",queue=\"orders\"} 5\n".into(),
            "raftq_queue_sent_messages_total{account=\"dev\",queue=\"orders\"} 11\n".into(),
            "raftq_queue_acked_messages_total{account=\"dev\",queue=\"orders\"} 6\n".into(),
        ] {
            assert!(text.contains(&line), "{line}: {text}");
        }
    }
}
