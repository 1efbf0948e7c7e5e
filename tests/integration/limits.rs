//! The limits against abuse, with `raftq serve` as a process: request rates per API key and per
//! connection and long polls per key answered `429 too_many_requests` with `Retry-After` (over
//! REST and gRPC), headers bounded in size, and a client that sends its headers too slowly cut
//! off.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use raftq_api::grpc::pb;
use raftq_api::grpc::pb::queues_client::QueuesClient;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tempfile::TempDir;

use crate::process::{start, Server};
use crate::serving;

/// A server with the two accounts' keys and `flags`, with its queue `jobs` of account `acme`.
fn serve_limited(dir: &TempDir, flags: &[&str]) -> Server {
    let keys = dir.path().join("keys.toml");
    std::fs::write(&keys, serving::key_file()).expect("write the key file");
    let mut all = vec!["--keys", keys.to_str().expect("utf-8 path")];
    all.extend_from_slice(flags);
    start(&dir.path().join("data"), &all, None)
}

/// Runs `test` against a server of [`serve_limited`] with `flags`, on a runtime of its own.
fn with_limits(flags: &[&str], test: impl AsyncFnOnce(&Server)) {
    let dir = TempDir::new().expect("temp dir");
    let server = serve_limited(&dir, flags);
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(test(&server));
}

/// A client with one connection, reused for every request.
fn one_connection() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .http1_only()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

async fn list(client: &reqwest::Client, server: &Server, key: &str) -> reqwest::Response {
    client
        .get(format!("{}/v1/queues", server.endpoint))
        .bearer_auth(key)
        .send()
        .await
        .expect("an answer")
}

/// Whether `key` may list its queues through `client`.
async fn lists(client: &reqwest::Client, server: &Server, key: &str) -> bool {
    list(client, server, key).await.status().is_success()
}

/// Asserts a `429 too_many_requests` with a `Retry-After` of at least a second, and returns it.
async fn assert_too_many(response: reqwest::Response, about: &str) -> u64 {
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = response.headers()["retry-after"]
        .to_str()
        .expect("text")
        .parse()
        .expect("seconds");
    assert!(retry_after >= 1);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "too_many_requests", "{body}");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains(about), "{message}");
    retry_after
}

#[test]
fn a_key_over_its_rate_gets_429_and_others_go_on() {
    with_limits(&["--rate-limit-per-key", "5"], async |server| {
        let client = reqwest::Client::new();
        // Twenty at once: the burst of five passes, and a few more as tokens come back.
        let answers =
            futures_util::future::join_all((0..20).map(|_| list(&client, server, "acme-key")))
                .await;
        let ok = answers.iter().filter(|r| r.status().is_success()).count();
        assert!(
            (5..20).contains(&ok),
            "{ok} of 20 passed a limit of 5 a second"
        );
        let refused = answers
            .into_iter()
            .find(|r| r.status() == StatusCode::TOO_MANY_REQUESTS)
            .expect("a refusal");
        let retry_after = assert_too_many(refused, "API key").await;
        assert!(lists(&client, server, "globex-key").await);
        // gRPC is counted and refused the same way.
        let mut grpc = QueuesClient::connect(server.endpoint.clone())
            .await
            .expect("gRPC");
        let mut status = None;
        for _ in 0..50 {
            let mut request = tonic::Request::new(pb::ListQueuesRequest::default());
            request
                .metadata_mut()
                .insert("authorization", "Bearer acme-key".parse().expect("value"));
            if let Err(e) = grpc.list_queues(request).await {
                status = Some(e);
                break;
            }
        }
        let status = status.expect("a gRPC refusal");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert_eq!(
            status.metadata().get("raftq-error-code").expect("code"),
            "too_many_requests"
        );
        tokio::time::sleep(Duration::from_secs(retry_after)).await;
        assert!(lists(&client, server, "acme-key").await);
    });
}

#[test]
fn a_connection_over_its_rate_gets_429_and_a_new_one_goes_on() {
    with_limits(&["--rate-limit-per-connection", "3"], async |server| {
        let client = one_connection();
        let mut refused = None;
        for _ in 0..30 {
            let response = list(&client, server, "acme-key").await;
            if response.status() == StatusCode::TOO_MANY_REQUESTS {
                refused = Some(response);
                break;
            }
        }
        assert_too_many(refused.expect("a refusal"), "connection").await;
        let other = one_connection();
        assert!(lists(&other, server, "acme-key").await);
    });
}

#[test]
fn long_polls_over_the_keys_limit_get_429() {
    with_limits(&["--max-long-polls-per-key", "1"], async |server| {
        let client = reqwest::Client::new();
        let create = client
            .post(format!("{}/v1/queues", server.endpoint))
            .bearer_auth("acme-key")
            .json(&json!({"name": "jobs"}))
            .send()
            .await
            .expect("create");
        assert!(create.status().is_success());
        let receive = |wait: u64| {
            client
                .post(format!("{}/v1/queues/jobs/receive", server.endpoint))
                .bearer_auth("acme-key")
                .json(&json!({"wait_seconds": wait}))
                .send()
        };
        // One long poll holds the key's only place; a second is refused. The two race for the
        // place: when the holder lost (it was refused itself), it asks again.
        let mut holder = tokio::spawn(receive(6));
        let deadline = Instant::now() + Duration::from_secs(15);
        let refused = loop {
            let second = receive(1).await.expect("an answer");
            if second.status() == StatusCode::TOO_MANY_REQUESTS {
                break second;
            }
            if holder.is_finished() {
                holder = tokio::spawn(receive(6));
            }
            assert!(
                Instant::now() < deadline,
                "a second long poll was never refused"
            );
        };
        assert_too_many(refused, "long polls").await;
        // A receive that does not wait is no long poll.
        assert!(receive(0).await.expect("an answer").status().is_success());
        let first = holder.await.expect("task").expect("an answer");
        assert!(first.status().is_success());
        // Its place was given back.
        assert!(receive(1).await.expect("an answer").status().is_success());
    });
}

/// The `host:port` of an `http://` endpoint.
fn address(server: &Server) -> String {
    server.endpoint.trim_start_matches("http://").to_string()
}

#[test]
fn headers_too_large_or_too_slow_are_refused() {
    let dir = TempDir::new().expect("temp dir");
    let server = serve_limited(&dir, &[]);
    let mut huge = TcpStream::connect(address(&server)).expect("connect");
    huge.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let filler = "x".repeat(100 * 1024);
    // The server stops reading at the limit and answers 431; a client still writing may see
    // the connection reset instead, before or after it reads the answer.
    let written = write!(
        huge,
        "GET /healthz HTTP/1.1\r\nHost: raftq\r\nX-Filler: {filler}\r\n\r\n"
    );
    let mut answer = Vec::new();
    let read = huge.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let reset = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        )
    };
    assert!(
        answer.starts_with("HTTP/1.1 431")
            || (answer.is_empty()
                && (written.as_ref().is_err_and(reset) || read.as_ref().is_err_and(reset))),
        "headers of 100 KiB: {written:?} {read:?} {answer:.80}"
    );

    let started = Instant::now();
    let mut slow = TcpStream::connect(address(&server)).expect("connect");
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: raftq\r\n")
        .expect("write");
    let mut buffer = [0u8; 256];
    let read = slow.read(&mut buffer);
    let waited = started.elapsed();
    assert!(
        matches!(read, Ok(0)) || read.is_err(),
        "the server answered headers that never ended: {read:?}"
    );
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(25),
        "the connection ended after {waited:?}"
    );
}
