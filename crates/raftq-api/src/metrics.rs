//! Observability of the HTTP front end: every request is logged through `tracing` (method,
//! path, route, status, latency) and counted by method, route and status; `GET /metrics` renders
//! those counters and the node's Raft gauges as Prometheus text (format 0.0.4). Per-queue gauges
//! are not exported yet.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::status::RaftStatus;
use crate::AppState;

/// The label of requests that matched no route.
const UNMATCHED: &str = "unmatched";

/// Request counters, by (method, route, status).
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), Counter>>,
}

#[derive(Default, Clone, Copy)]
struct Counter {
    count: u64,
    seconds: f64,
}

impl Metrics {
    fn record(&self, method: &str, route: &str, status: u16, seconds: f64) {
        if let Ok(mut requests) = self.requests.lock() {
            let c = requests
                .entry((method.to_string(), route.to_string(), status))
                .or_default();
            c.count += 1;
            c.seconds += seconds;
        }
    }

    /// The Prometheus text of the request counters and the Raft gauges.
    pub fn render(&self, raft: &RaftStatus) -> String {
        let mut out = String::new();
        let requests = self.requests.lock().map(|r| r.clone()).unwrap_or_default();
        header(
            &mut out,
            "raftq_http_requests_total",
            "counter",
            "HTTP requests answered, by method, route and status.",
        );
        for ((method, route, status), c) in &requests {
            let _ = writeln!(
                out,
                "raftq_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {}",
                escape(route),
                c.count
            );
        }
        header(
            &mut out,
            "raftq_http_request_duration_seconds_total",
            "counter",
            "Time spent answering HTTP requests, by method, route and status.",
        );
        for ((method, route, status), c) in &requests {
            let _ = writeln!(
                out,
                "raftq_http_request_duration_seconds_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {}",
                escape(route),
                c.seconds
            );
        }
        let gauges: [(&str, &str, i128); 7] = [
            ("raftq_raft_node_id", "This node's id.", raft.node_id.into()),
            (
                "raftq_raft_term",
                "The current Raft term.",
                raft.term.into(),
            ),
            (
                "raftq_raft_leader_id",
                "The leader's node id, -1 when no leader is known.",
                raft.leader.map_or(-1, i128::from),
            ),
            (
                "raftq_raft_is_leader",
                "1 when this node is the leader.",
                (raft.leader == Some(raft.node_id)).into(),
            ),
            (
                "raftq_raft_commit_index",
                "The highest log index known committed.",
                raft.commit_index.into(),
            ),
            (
                "raftq_raft_last_applied_index",
                "The highest log index applied to the state machine.",
                raft.last_applied.into(),
            ),
            (
                "raftq_raft_last_log_index",
                "The highest log index appended to this node's log.",
                raft.last_log_index.into(),
            ),
        ];
        for (name, help, value) in gauges {
            header(&mut out, name, "gauge", help);
            let _ = writeln!(out, "{name} {value}");
        }
        header(
            &mut out,
            "raftq_raft_members",
            "gauge",
            "Members of the cluster (voters and learners).",
        );
        let _ = writeln!(out, "raftq_raft_members {}", raft.nodes.len());
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Middleware: logs and counts every request.
pub async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED, MatchedPath::as_str)
        .to_string();
    let response = next.run(request).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    state
        .metrics
        .record(method.as_str(), &route, status, elapsed.as_secs_f64());
    tracing::info!(
        method = %method,
        path = %path,
        route = %route,
        status,
        latency_ms = elapsed.as_secs_f64() * 1000.0,
        "http request"
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_shows_counters_and_gauges() {
        let m = Metrics::default();
        m.record("GET", "/v1/queues/{q}", 404, 0.5);
        m.record("GET", "/v1/queues/{q}", 404, 0.25);
        let status = RaftStatus {
            leader: None,
            nodes: vec![],
            term: 3,
            commit_index: 9,
            node_id: 1,
            region: "local".into(),
            last_applied: 9,
            last_log_index: 10,
        };
        let text = m.render(&status);
        assert!(text.contains(
            "raftq_http_requests_total{method=\"GET\",route=\"/v1/queues/{q}\",status=\"404\"} 2"
        ));
        assert!(text.contains("raftq_raft_term 3\n"));
        assert!(text.contains("raftq_raft_leader_id -1\n"));
        assert!(text.contains("raftq_raft_commit_index 9\n"));
    }
}
