//! Samples of every member's own view while a run goes: its leader, term, clock offset, whether
//! it judges its clock skewed or confirmed, and the state machine's time, read from
//! `GET /v1/cluster` every `PERIOD`, one JSON line per node and round, into a file of their own
//! beside the history. The checker does not read them; they are there to explain a run
//! afterwards (who led when, which clock was off, whether the state's time ran ahead).
//!
//! A sampler never holds up the workload: it is a task of its own, each request gives up after
//! `TIMEOUT` (the sample then says so), and the task ends when its [`Sampler`] is dropped.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use futures_util::future::join_all;
use serde::Serialize;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::{interval, timeout, MissedTickBehavior};

use crate::clock::now_ms;
use crate::nodes::Nodes;

/// How often every member is asked.
pub const PERIOD: Duration = Duration::from_millis(250);
/// How long one answer may take; a node that does not answer within it gets an error sample.
pub const TIMEOUT: Duration = Duration::from_millis(200);

/// One node's view at one moment. Fields the node did not report (an older node, or a field it
/// shows to admin keys only) are `null`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// The checker's clock (`clock::now_ms`) when the request was sent and when it ended.
    pub start: u64,
    pub end: u64,
    pub node: u64,
    pub leader: Option<u64>,
    pub term: Option<u64>,
    /// The node's clock minus the cluster's time as the node measures it.
    pub clock_offset_ms: Option<i64>,
    /// Whether the node judges its clock beyond the allowed skew.
    pub clock_skewed: Option<bool>,
    /// Whether the node's last round of pings found a majority of clocks that agree.
    pub clock_confirmed: Option<bool>,
    /// The time of the node's applied state, in milliseconds since the Unix epoch.
    pub state_time_ms: Option<u64>,
    /// Why there is no view: the request failed or timed out.
    pub error: Option<String>,
}

impl Sample {
    /// The sample of node `node` from its `GET /v1/cluster` answer, or the error instead.
    pub fn of(node: u64, start: u64, end: u64, view: Result<Value, String>) -> Sample {
        let (view, error) = match view {
            Ok(v) => (v, None),
            Err(e) => (Value::Null, Some(e)),
        };
        Sample {
            start,
            end,
            node,
            leader: view["leader"].as_u64(),
            term: view["term"].as_u64(),
            clock_offset_ms: view["clock_offset_ms"].as_i64(),
            clock_skewed: view["clock_skewed"].as_bool(),
            clock_confirmed: view["clock_confirmed"].as_bool(),
            state_time_ms: view["state_time_ms"].as_u64(),
            error,
        }
    }
}

/// The running sampler; dropping it stops the task. Every round's lines are flushed before the
/// task waits again, so a stopped sampler leaves only whole lines.
pub struct Sampler {
    task: JoinHandle<()>,
}

impl Sampler {
    /// Starts sampling the members of `nodes` into `path` (created, or emptied).
    pub fn start(nodes: Nodes, path: &Path) -> Result<Sampler, String> {
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let task = tokio::spawn(sample_until_stopped(nodes, BufWriter::new(file)));
        Ok(Sampler { task })
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn sample_until_stopped(nodes: Nodes, mut out: BufWriter<File>) {
    let mut ticks = interval(PERIOD);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(e) = write_lines(&mut out, &round(&nodes).await) {
            println!("warning: writing the node samples failed, sampling stops: {e}");
            return;
        }
    }
}

/// Writes `samples` as JSON lines and flushes them.
fn write_lines(out: &mut impl Write, samples: &[Sample]) -> std::io::Result<()> {
    for s in samples {
        serde_json::to_writer(&mut *out, s)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// One sample of every member, asked at once.
async fn round(nodes: &Nodes) -> Vec<Sample> {
    join_all(nodes.members().into_iter().map(|id| async move {
        let start = now_ms();
        let view = match timeout(TIMEOUT, nodes.client_of(id).cluster()).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {} ms", TIMEOUT.as_millis())),
        };
        Sample::of(id, start, now_ms(), view)
    }))
    .await
}

#[cfg(test)]
mod tests {
    use raftq_client::{Client, Options};
    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// Answers every HTTP/1.1 request on `stream` with `body` as JSON.
    async fn answer(mut stream: TcpStream, body: String) {
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                return;
            }
            request.extend_from_slice(&buf[..n]);
            while let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                request.drain(..end + 4);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if stream.write_all(reply.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }

    /// A node on a port of its own: one that answers `body`, or (for `None`) one that accepts
    /// connections and never answers.
    async fn fake_node(body: Option<&str>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let address = listener.local_addr().expect("bound");
        let body = body.map(str::to_string);
        tokio::spawn(async move {
            let mut silent = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                match &body {
                    Some(b) => drop(tokio::spawn(answer(stream, b.clone()))),
                    None => silent.push(stream),
                }
            }
        });
        format!("http://{address}")
    }

    #[tokio::test]
    async fn samples_every_member_until_dropped_and_a_silent_one_gets_an_error() {
        let answering = fake_node(Some(r#"{"leader": 1, "term": 4, "state_time_ms": 99}"#)).await;
        let silent = fake_node(None).await;
        let clients = [answering, silent]
            .iter()
            .map(|e| Client::connect(e, Options::default()).expect("a client"))
            .collect();
        let path = std::env::temp_dir().join(format!(
            "raftq-chaos-sampler-test-{}.jsonl",
            std::process::id()
        ));
        let sampler = Sampler::start(Nodes::new(clients, 2), &path).expect("started");
        tokio::time::sleep(Duration::from_millis(800)).await;
        drop(sampler);
        let read = || std::fs::read_to_string(&path).expect("the samples file");
        let text = read();
        let samples: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("whole JSON lines only"))
            .collect();
        let of = |node: u64| samples.iter().filter(move |s| s["node"] == node);
        // Rounds start at 0, 250, 500 and 750 ms; the last has not ended when the task stops,
        // and a busy machine may delay a round.
        assert!((2..=4).contains(&of(1).count()), "{text}");
        assert_eq!(of(1).count(), of(2).count(), "{text}");
        assert!(of(1).all(|s| s["term"] == 4 && s["state_time_ms"] == 99 && s["error"].is_null()));
        assert!(of(2).all(|s| s["error"] == "no answer within 200 ms" && s["term"].is_null()));
        assert!(of(2).all(|s| {
            let took = s["end"].as_u64().unwrap_or(0) - s["start"].as_u64().unwrap_or(0);
            (200..2_000).contains(&took)
        }));
        // Stopped: nothing more is written.
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(read(), text);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn reads_the_fields_a_node_reports_and_leaves_the_others_null() {
        let older = json!({"leader": 2, "term": 7, "clock_offset_ms": -3, "clock_skewed": false});
        let s = Sample::of(1, 10, 12, Ok(older));
        assert_eq!(
            (s.leader, s.term, s.clock_offset_ms, s.clock_skewed),
            (Some(2), Some(7), Some(-3), Some(false))
        );
        assert_eq!(
            (s.clock_confirmed, s.state_time_ms, s.error),
            (None, None, None)
        );

        let newer = json!({"leader": null, "term": 8, "clock_offset_ms": 3_600_000,
            "clock_skewed": true, "clock_confirmed": false, "state_time_ms": 1_700_000_000_000u64});
        let s = Sample::of(3, 10, 12, Ok(newer));
        assert_eq!(s.leader, None);
        assert_eq!(s.clock_offset_ms, Some(3_600_000));
        assert_eq!(s.clock_confirmed, Some(false));
        assert_eq!(s.state_time_ms, Some(1_700_000_000_000));
    }

    #[test]
    fn a_node_that_did_not_answer_gives_one_line_with_the_error() {
        let s = Sample::of(2, 10, 210, Err("no answer within 200 ms".into()));
        let mut out = Vec::new();
        write_lines(&mut out, &[s.clone(), s]).expect("writing to memory");
        let text = String::from_utf8(out).expect("JSON is UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(text.ends_with('\n'));
        let line: Value = serde_json::from_str(lines[0]).expect("one JSON object a line");
        assert_eq!(
            line,
            json!({"start": 10, "end": 210, "node": 2, "leader": null, "term": null,
                "clock_offset_ms": null, "clock_skewed": null, "clock_confirmed": null,
                "state_time_ms": null, "error": "no answer within 200 ms"})
        );
    }
}
