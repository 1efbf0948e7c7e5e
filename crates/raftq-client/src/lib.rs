//! # raftq-client
//!
//! A thin client for raftq's REST API (SPEC.md §3): one method per endpoint, JSON in and out,
//! errors carrying the API's `code`, `message` and `field`. The `raftq` command-line client,
//! the chaos checker and the benchmarks use it.

use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde_json::{json, Value};

/// How long a request may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// An error answered by the API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub field: Option<String>,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("cannot reach the server: {}", causes(.0))]
    Transport(#[from] reqwest::Error),
    #[error("--ca-cert: {0}")]
    CaCert(String),
    #[error("--client-cert, --client-key: {0}")]
    Identity(String),
    #[error("invalid endpoint: {0}")]
    Endpoint(String),
    /// The request cannot be made as given.
    #[error("{0}")]
    Usage(String),
    /// What the server sent could not be written where it was to go.
    #[error("cannot write the answer: {0}")]
    Output(#[from] std::io::Error),
}

impl ClientError {
    /// The API error code, when the server answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api(e) => Some(&e.code),
            _ => None,
        }
    }
}

/// `error` and its sources, joined by `: ` (reqwest alone says only "error sending request",
/// while the cause, such as an untrusted certificate, is what a user needs).
fn causes(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// How long a backup may take to arrive whole: it streams the whole state.
const BACKUP_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// How a [`Client`] connects, besides its endpoint.
#[derive(Debug, Clone)]
pub struct Options {
    /// API key, when the server runs with keys.
    pub key: Option<String>,
    /// How long a request may take before the client gives up (connecting: 2 s at most).
    pub timeout: Duration,
    /// PEM certificates of the CAs an `https://` endpoint's certificate may come from, besides
    /// the public web's.
    pub ca_cert: Option<Vec<u8>>,
    /// A client certificate and its private key in one PEM text, for a server that asks for
    /// one (`--tls-client-ca`).
    pub identity: Option<Vec<u8>>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            key: None,
            timeout: DEFAULT_TIMEOUT,
            ca_cert: None,
            identity: None,
        }
    }
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// A connection to one raftq node (any node: followers forward to the leader).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    endpoint: Url,
    key: Option<String>,
}

impl Client {
    /// A client for `endpoint` (e.g. `http://127.0.0.1:8080`), with an API key when keys are on.
    /// A request gives up after 30 s (longer than the longest long poll, 20 s).
    pub fn new(endpoint: &str, key: Option<String>) -> Result<Client> {
        Self::connect(
            endpoint,
            Options {
                key,
                ..Options::default()
            },
        )
    }

    /// A client for `endpoint` (`http://` or `https://`) as `options` say.
    pub fn connect(endpoint: &str, options: Options) -> Result<Client> {
        let endpoint = Url::parse(endpoint).map_err(|e| ClientError::Endpoint(e.to_string()))?;
        if endpoint.cannot_be_a_base() {
            return Err(ClientError::Endpoint(format!(
                "{endpoint} cannot be a base URL"
            )));
        }
        let mut http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(options.timeout);
        if let Some(pem) = &options.ca_cert {
            let bundle = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| ClientError::CaCert(e.to_string()))?;
            if bundle.is_empty() {
                return Err(ClientError::CaCert("holds no PEM certificate".into()));
            }
            for certificate in bundle {
                http = http.add_root_certificate(certificate);
            }
        }
        if let Some(pem) = &options.identity {
            let identity = reqwest::Identity::from_pem(pem)
                .map_err(|e| ClientError::Identity(e.to_string()))?;
            http = http.identity(identity);
        }
        Ok(Client {
            http: http.build()?,
            endpoint,
            key: options.key,
        })
    }

    /// The URL of `segments` under the endpoint, each segment percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.endpoint.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            path.extend(segments);
        }
        url
    }

    /// Sends a request; `Value::Null` for an empty answer (204).
    pub async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value> {
        let mut request = self.http.request(method, self.url(segments));
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await?;
        let status = response.status();
        let text = response.text().await?;
        let value: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(value);
        }
        Err(api_error(status, &value).into())
    }

    /// Sends a request to `/v1/queues/{queue}` followed by the segments of `tail`, without a
    /// query.
    async fn on_queue(
        &self,
        method: Method,
        queue: &str,
        tail: &[&str],
        body: Option<&Value>,
    ) -> Result<Value> {
        let mut segments = vec!["v1", "queues", queue];
        segments.extend_from_slice(tail);
        self.call(method, &segments, &[], body).await
    }

    /// A page of `queue`'s messages of the listing `listing` (`messages`, `scheduled`): at most
    /// `limit` of them, those after the sequence number `after`.
    async fn page_of(
        &self,
        queue: &str,
        listing: &str,
        limit: Option<u64>,
        after: Option<u64>,
    ) -> Result<Value> {
        let query = page(limit, after);
        self.call(Method::GET, &["v1", "queues", queue, listing], &query, None)
            .await
    }

    pub async fn create_queue(&self, name: &str, attributes: &Value) -> Result<Value> {
        let mut body = attributes.clone();
        if let Some(map) = body.as_object_mut() {
            map.insert("name".into(), json!(name));
        } else {
            body = json!({ "name": name });
        }
        self.call(Method::POST, &["v1", "queues"], &[], Some(&body))
            .await
    }

    pub async fn list_queues(&self, prefix: Option<&str>) -> Result<Value> {
        let query: Vec<(&str, String)> = prefix
            .map(|p| ("prefix", p.to_string()))
            .into_iter()
            .collect();
        self.call(Method::GET, &["v1", "queues"], &query, None)
            .await
    }

    pub async fn get_queue(&self, queue: &str) -> Result<Value> {
        self.on_queue(Method::GET, queue, &[], None).await
    }

    pub async fn patch_queue(&self, queue: &str, patch: &Value) -> Result<Value> {
        self.on_queue(Method::PATCH, queue, &[], Some(patch)).await
    }

    pub async fn delete_queue(&self, queue: &str) -> Result<Value> {
        self.on_queue(Method::DELETE, queue, &[], None).await
    }

    pub async fn dead_letter_sources(&self, queue: &str) -> Result<Value> {
        self.on_queue(Method::GET, queue, &["dead_letter_sources"], None)
            .await
    }

    /// Starts a message move task on `queue`; `task` holds the optional `destination`,
    /// `max_messages_per_second`, `filter` and `dry_run`.
    pub async fn start_move_task(&self, queue: &str, task: &Value) -> Result<Value> {
        self.on_queue(Method::POST, queue, &["move_tasks"], Some(task))
            .await
    }

    /// The last move tasks of `queue`, the newest first.
    pub async fn move_tasks(&self, queue: &str) -> Result<Value> {
        self.on_queue(Method::GET, queue, &["move_tasks"], None)
            .await
    }

    /// Cancels the running move task `task` of `queue`.
    pub async fn cancel_move_task(&self, queue: &str, task: &str) -> Result<Value> {
        self.on_queue(Method::POST, queue, &["move_tasks", task, "cancel"], None)
            .await
    }

    /// Sends one message; `message` holds `body` and the optional send fields.
    pub async fn send(&self, queue: &str, message: &Value) -> Result<Value> {
        self.on_queue(Method::POST, queue, &["messages"], Some(message))
            .await
    }

    pub async fn send_batch(&self, queue: &str, entries: &Value) -> Result<Value> {
        let body = json!({ "entries": entries });
        self.on_queue(Method::POST, queue, &["messages", "batch"], Some(&body))
            .await
    }

    /// Receives; `options` may hold `max_messages`, `lease_seconds`, `wait_seconds`.
    pub async fn receive(&self, queue: &str, options: &Value) -> Result<Value> {
        self.on_queue(Method::POST, queue, &["receive"], Some(options))
            .await
    }

    pub async fn ack(&self, queue: &str, receipts: &[String]) -> Result<Value> {
        let body = json!({ "receipts": receipts });
        self.on_queue(Method::POST, queue, &["ack"], Some(&body))
            .await
    }

    pub async fn change_lease(
        &self,
        queue: &str,
        receipt: &str,
        lease_seconds: u64,
    ) -> Result<Value> {
        self.lease(
            queue,
            json!({ "receipt": receipt, "lease_seconds": lease_seconds }),
        )
        .await
    }

    /// Ends a lease without an ack: the message is visible again after `delay_seconds` (at
    /// once without one).
    pub async fn release(
        &self,
        queue: &str,
        receipt: &str,
        delay_seconds: Option<u64>,
    ) -> Result<Value> {
        let mut body = json!({ "receipt": receipt, "lease_seconds": 0 });
        if let Some(d) = delay_seconds {
            body["delay_seconds"] = d.into();
        }
        self.lease(queue, body).await
    }

    async fn lease(&self, queue: &str, body: Value) -> Result<Value> {
        self.on_queue(Method::POST, queue, &["lease"], Some(&body))
            .await
    }

    pub async fn peek(&self, queue: &str, limit: Option<u64>, after: Option<u64>) -> Result<Value> {
        self.page_of(queue, "messages", limit, after).await
    }

    /// A page of the messages scheduled by a `deliver_at` still ahead.
    pub async fn scheduled(
        &self,
        queue: &str,
        limit: Option<u64>,
        after: Option<u64>,
    ) -> Result<Value> {
        self.page_of(queue, "scheduled", limit, after).await
    }

    /// Cancels the scheduled message `message_id` before its time.
    pub async fn cancel_scheduled(&self, queue: &str, message_id: &str) -> Result<Value> {
        self.on_queue(Method::DELETE, queue, &["scheduled", message_id], None)
            .await
    }

    pub async fn purge(&self, queue: &str) -> Result<Value> {
        self.on_queue(Method::POST, queue, &["purge"], None).await
    }

    pub async fn stats(&self, queue: &str) -> Result<Value> {
        self.on_queue(Method::GET, queue, &["stats"], None).await
    }

    pub async fn cluster(&self) -> Result<Value> {
        self.call(Method::GET, &["v1", "cluster"], &[], None).await
    }

    /// Every account that holds queues, with how many (an admin key's call).
    pub async fn accounts(&self) -> Result<Value> {
        self.call(Method::GET, &["v1", "accounts"], &[], None).await
    }

    /// Adds node `id` (peer address `raft_addr`) as a voter; answers the cluster after the change.
    pub async fn add_node(&self, id: u64, raft_addr: &str) -> Result<Value> {
        let body = json!({ "id": id, "raft_addr": raft_addr });
        self.call(Method::POST, &["v1", "cluster", "nodes"], &[], Some(&body))
            .await
    }

    /// Removes node `id`; answers the cluster after the change.
    pub async fn remove_node(&self, id: u64) -> Result<Value> {
        let id = id.to_string();
        self.call(Method::DELETE, &["v1", "cluster", "nodes", &id], &[], None)
            .await
    }

    /// Drains node `id` (`on`: it hands over every group it leads) or ends its drain; answers
    /// the cluster after the change.
    pub async fn drain_node(&self, id: u64, on: bool) -> Result<Value> {
        let id = id.to_string();
        let method = if on { Method::POST } else { Method::DELETE };
        let path = ["v1", "cluster", "nodes", &id, "drain"];
        self.call(method, &path, &[], None).await
    }

    /// This node's applied index and state digest (answered by the node itself).
    pub async fn cluster_state(&self) -> Result<Value> {
        self.call(Method::GET, &["v1", "cluster", "state"], &[], None)
            .await
    }

    /// Streams a backup of the cluster's state (`GET /v1/cluster/backup`, admin keys) into
    /// `out` as it arrives, calling `progress` with the bytes received so far after each chunk;
    /// returns their count. Only a whole backup ends in `Ok`: the file checks itself on restore.
    pub async fn backup(
        &self,
        out: &mut impl std::io::Write,
        mut progress: impl FnMut(u64),
    ) -> Result<u64> {
        let mut request = self
            .http
            .get(self.url(&["v1", "cluster", "backup"]))
            .timeout(BACKUP_TIMEOUT);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let mut response = request.send().await?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await?;
            let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
            return Err(api_error(status, &value).into());
        }
        let mut received = 0u64;
        while let Some(chunk) = response.chunk().await? {
            out.write_all(&chunk)?;
            received += chunk.len() as u64;
            progress(received);
        }
        out.flush()?;
        Ok(received)
    }

    pub async fn health(&self) -> Result<Value> {
        self.call(Method::GET, &["healthz"], &[], None).await
    }
}

fn api_error(status: StatusCode, value: &Value) -> ApiError {
    let error = &value["error"];
    let text = |k: &str| error[k].as_str().map(str::to_string);
    ApiError {
        status: status.as_u16(),
        code: text("code").unwrap_or_else(|| "unknown".into()),
        message: text("message").unwrap_or_else(|| value.to_string()),
        field: text("field"),
    }
}

/// The query of a page of messages: its size and the sequence number it starts after.
fn page(limit: Option<u64>, after: Option<u64>) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    if let Some(l) = limit {
        query.push(("limit", l.to_string()));
    }
    if let Some(a) = after {
        query.push(("after", a.to_string()));
    }
    query
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_references_are_percent_encoded_in_paths() {
        let c = Client::new("http://127.0.0.1:8080", None).unwrap();
        let crn = "crn:v1:raftq:public:queues:local:a/dev:x::";
        let url = c.url(&["v1", "queues", crn, "stats"]);
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8080/v1/queues/crn:v1:raftq:public:queues:local:a%2Fdev:x::/stats"
        );
    }

    #[test]
    fn error_bodies_become_api_errors() {
        let v = json!({"error": {"code": "invalid_argument", "message": "bad", "field": "name"}});
        let e = api_error(StatusCode::BAD_REQUEST, &v);
        assert_eq!(e.status, 400);
        assert_eq!(e.code, "invalid_argument");
        assert_eq!(e.field.as_deref(), Some("name"));
    }
}
