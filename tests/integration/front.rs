//! One view of the client API over either of its fronts, so that a scenario is written once and
//! run through REST and through gRPC (`api`). An operation ([`Op`]) takes its input and gives its
//! answer as JSON in the REST API's shape; the REST front ([`Rest`]) sends that JSON as it is,
//! the gRPC front ([`Grpc`]) translates it to and from protobuf (`protojson`). A refused call is
//! a [`Refusal`]: the error object in the same shape and what carried it, which [`refused`]
//! checks against the spec's code, the field, and the HTTP status or gRPC code (with the
//! metadata) that each front must answer with.
//!
//! `Rest` and `Grpc` also give the raw access that the tests of one front need (`http`, `grpc`).

use std::fmt::Debug;
use std::sync::Arc;

use prost::Message as _;
use raftq_api::grpc::pb;
use raftq_api::grpc::pb::queues_client::QueuesClient;
use raftq_api::{Keys, CODE_METADATA, ERROR_METADATA, FIELD_METADATA};
use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::Value;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use crate::protojson;
use crate::serving::{bounded, Serving};

/// One operation of the API, with the queue it names (and the task, for `CancelMoveTask`). Its
/// input is the JSON body of the REST request, or for `ListQueues` (`prefix`), `Peek` (`limit`,
/// `after`), `RemoveNode`, `DrainNode` and `UndrainNode` (`id`) the parameters REST puts in the
/// query or the path.
#[derive(Clone, Copy, Debug)]
pub enum Op<'q> {
    CreateQueue,
    ListQueues,
    GetQueue(&'q str),
    PatchQueue(&'q str),
    DeleteQueue(&'q str),
    DeadLetterSources(&'q str),
    Send(&'q str),
    SendBatch(&'q str),
    Receive(&'q str),
    Ack(&'q str),
    ChangeLease(&'q str),
    Peek(&'q str),
    Purge(&'q str),
    Stats(&'q str),
    /// The scheduled messages of a queue: `limit` and `after` as in a peek.
    Scheduled(&'q str),
    /// Cancels the scheduled message of ID `.1`.
    CancelScheduled(&'q str, &'q str),
    StartMoveTask(&'q str),
    MoveTasks(&'q str),
    CancelMoveTask(&'q str, &'q str),
    Cluster,
    AddNode,
    RemoveNode,
    DrainNode,
    UndrainNode,
    Accounts,
}

/// The HTTP status and the gRPC code that answer each of the spec's error codes.
const STATUSES: [(&str, u16, Code); 17] = [
    ("invalid_argument", 400, Code::InvalidArgument),
    ("unauthenticated", 401, Code::Unauthenticated),
    ("permission_denied", 403, Code::PermissionDenied),
    ("queue_not_found", 404, Code::NotFound),
    ("move_task_not_found", 404, Code::NotFound),
    ("move_task_running", 409, Code::FailedPrecondition),
    ("move_task_not_running", 409, Code::FailedPrecondition),
    ("message_not_scheduled", 409, Code::FailedPrecondition),
    ("not_found", 404, Code::Unimplemented),
    ("method_not_allowed", 405, Code::Unimplemented),
    ("queue_exists", 409, Code::AlreadyExists),
    ("queue_in_use", 409, Code::FailedPrecondition),
    ("lease_expired", 409, Code::FailedPrecondition),
    ("membership_conflict", 409, Code::FailedPrecondition),
    ("message_too_large", 413, Code::ResourceExhausted),
    ("unavailable", 503, Code::Unavailable),
    ("unsupported", 501, Code::Unimplemented),
];

/// A refused call: the error object as REST's body has it (`{"code", "message", "field"?,
/// "sources"?}`; over gRPC, decoded from the status's binary metadata), and what carried it.
#[derive(Debug)]
pub struct Refusal {
    pub error: Value,
    transport: Transport,
}

#[derive(Debug)]
enum Transport {
    Http(u16),
    Grpc(Status),
}

impl From<Status> for Refusal {
    fn from(status: Status) -> Refusal {
        let error = status
            .metadata()
            .get_bin(ERROR_METADATA)
            .map_or(Value::Null, |bin| {
                let bytes = bin.to_bytes().expect("binary metadata");
                protojson::error(&pb::Error::decode(bytes).expect("an encoded Error"))
            });
        Refusal {
            error,
            transport: Transport::Grpc(status),
        }
    }
}

/// Checks that a call was refused with the spec's `code` about `field`: the error object says
/// so with a message, REST answered the code's HTTP status, and gRPC its status code with the
/// code and field in text metadata and the same error (and message) in binary metadata.
pub fn refused<T: Debug>(
    result: Result<T, impl Into<Refusal>>,
    code: &str,
    field: Option<&str>,
) -> Refusal {
    let refusal: Refusal = match result {
        Ok(answer) => panic!("expected {code} about {field:?}, got {answer:?}"),
        Err(refusal) => refusal.into(),
    };
    let (_, http, grpc) = STATUSES
        .into_iter()
        .find(|(known, ..)| *known == code)
        .unwrap_or_else(|| panic!("{code}: no status known"));
    let error = &refusal.error;
    match &refusal.transport {
        Transport::Http(status) => assert_eq!(*status, http, "{code}: {error}"),
        Transport::Grpc(status) => {
            assert_eq!(status.code(), grpc, "{status:?}");
            let text = |key: &str| {
                status
                    .metadata()
                    .get(key)
                    .map(|v| v.to_str().expect("ascii"))
            };
            assert_eq!(text(CODE_METADATA), Some(code), "{status:?}");
            assert_eq!(text(FIELD_METADATA), field, "{status:?}");
            assert_eq!(error["message"], status.message(), "{status:?}");
        }
    }
    assert_eq!(error["code"], code, "{error}");
    assert_eq!(error["field"].as_str(), field, "{error}");
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{error}"
    );
    refusal
}

/// Whether `value` is a time as the API writes it: RFC 3339, UTC, with milliseconds.
pub fn is_rfc3339_utc(value: &Value) -> bool {
    value.as_str().is_some_and(|t| {
        t.len() == 24 && t.ends_with('Z') && t.as_bytes()[10] == b'T' && t.starts_with("20")
    })
}

/// The time `seconds` from now, as the API writes times (RFC 3339, UTC, milliseconds).
pub fn rfc3339_in(seconds: u64) -> String {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        + std::time::Duration::from_secs(seconds);
    let (secs, millis) = (since_epoch.as_secs(), since_epoch.subsec_millis());
    // Days to a civil date (proleptic Gregorian), as in H. Hinnant's `civil_from_days`.
    let days = secs / 86_400 + 719_468;
    let era = days / 146_097;
    let day_of_era = days % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    let time = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        time / 3600,
        time / 60 % 60,
        time % 60
    )
}

/// Percent-encodes a path segment or a query value.
fn enc(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Closes a front's `client`, then stops `serving` once the last front over it is gone (a client
/// left open would hold it up).
async fn stop(serving: Arc<Serving>, client: impl Sized) {
    drop(client);
    Arc::into_inner(serving)
        .expect("no copy of the front outlives its test")
        .shutdown()
        .await;
}

/// A front over a served node, which stops the node with it.
pub trait Served: Sized {
    /// Closes the front's client and stops the node.
    async fn shutdown(self);

    /// Runs `test` against this front, bounded in time, then stops it.
    async fn run(self, test: impl AsyncFnOnce(&Self)) {
        bounded(test(&self)).await;
        self.shutdown().await;
    }
}

/// Which front a test goes through.
pub enum Kind {
    Rest,
    Grpc,
}

/// The served node through one front, with the API key it sends.
pub enum Front {
    Rest(Rest),
    Grpc(Grpc),
}

impl Front {
    pub async fn start(kind: Kind, serving: Serving) -> Front {
        match kind {
            Kind::Rest => Front::Rest(Rest::over(serving)),
            Kind::Grpc => Front::Grpc(Grpc::over(serving).await),
        }
    }

    /// The same front sending `key`, or no key.
    pub fn with_key(&self, key: Option<&str>) -> Front {
        match self {
            Front::Rest(rest) => Front::Rest(rest.with_key(key)),
            Front::Grpc(grpc) => Front::Grpc(grpc.with_key(key)),
        }
    }

    pub fn serving(&self) -> &Serving {
        match self {
            Front::Rest(rest) => &rest.serving,
            Front::Grpc(grpc) => &grpc.serving,
        }
    }

    /// Makes the call `op` with `input`: its answer, or why it was refused.
    pub async fn call(&self, op: Op<'_>, input: Value) -> Result<Value, Refusal> {
        match self {
            Front::Rest(rest) => rest.call(op, input).await,
            Front::Grpc(grpc) => grpc.call(op, input).await,
        }
    }

    /// The answer to a call that must succeed.
    pub async fn ok(&self, op: Op<'_>, input: Value) -> Value {
        self.call(op, input)
            .await
            .unwrap_or_else(|refusal| panic!("{op:?}: {refusal:?}"))
    }

    /// Creates a queue and returns its object.
    pub async fn create(&self, body: Value) -> Value {
        self.ok(Op::CreateQueue, body).await
    }

    pub async fn send(&self, queue: &str, body: Value) -> Value {
        self.ok(Op::Send(queue), body).await
    }

    /// The messages a receive delivers.
    pub async fn receive(&self, queue: &str, body: Value) -> Vec<Value> {
        let answer = self.ok(Op::Receive(queue), body).await;
        answer["messages"].as_array().expect("messages").clone()
    }

    pub async fn stats(&self, queue: &str) -> Value {
        self.ok(Op::Stats(queue), Value::Null).await
    }
}

impl Served for Front {
    async fn shutdown(self) {
        match self {
            Front::Rest(rest) => rest.shutdown().await,
            Front::Grpc(grpc) => grpc.shutdown().await,
        }
    }
}

/// A REST response: status, headers, and JSON body (`Null` when empty, a string when not JSON).
pub struct Reply {
    pub status: u16,
    pub body: Value,
    pub headers: HeaderMap,
}

impl Reply {
    pub fn error_field(&self) -> Option<&str> {
        self.body["error"]["field"].as_str()
    }

    pub fn error_code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// The body of a success, or the refusal of any other status.
    pub fn outcome(self) -> Result<Value, Refusal> {
        if (200..300).contains(&self.status) {
            return Ok(self.body);
        }
        Err(Refusal {
            error: self.body["error"].clone(),
            transport: Transport::Http(self.status),
        })
    }
}

/// The served node with a REST client.
#[derive(Clone)]
pub struct Rest {
    serving: Arc<Serving>,
    base: String,
    client: reqwest::Client,
    key: Option<String>,
}

impl Rest {
    pub async fn start(keys: Keys) -> Rest {
        Rest::over(Serving::start(keys).await)
    }

    pub fn over(serving: Serving) -> Rest {
        Rest {
            base: format!("http://{}", serving.addr),
            serving: Arc::new(serving),
            client: reqwest::Client::new(),
            key: None,
        }
    }

    pub fn with_key(&self, key: Option<&str>) -> Rest {
        Rest {
            key: key.map(str::to_string),
            ..self.clone()
        }
    }

    /// Runs `test` against a node served with `keys`, bounded in time; the node is stopped
    /// afterwards.
    pub async fn test(keys: Keys, test: impl AsyncFnOnce(&Rest)) {
        Rest::start(keys).await.run(test).await;
    }

    /// Sends `body` as it is, with `key` if any.
    pub async fn send_raw(
        &self,
        key: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Reply {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Reply {
            status,
            body,
            headers,
        }
    }

    /// A request with `key` and the JSON `body` (none for `Null`).
    pub async fn request_as(
        &self,
        key: Option<&str>,
        method: Method,
        path: &str,
        body: Value,
    ) -> Reply {
        let bytes = (!body.is_null()).then(|| body.to_string().into_bytes());
        self.send_raw(key, method, path, bytes).await
    }

    /// A request with this client's key.
    pub async fn request(&self, method: Method, path: &str, body: Value) -> Reply {
        self.request_as(self.key.as_deref(), method, path, body)
            .await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.request(Method::GET, path, Value::Null).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.request(Method::POST, path, body).await
    }

    /// `op` as its route: the queue percent-encoded in the path, the input as the body, or as
    /// the query or path for the operations that take it there. A success must have the
    /// route's status: `201` for a create, `204` with no body for a delete or purge, else `200`.
    pub async fn call(&self, op: Op<'_>, input: Value) -> Result<Value, Refusal> {
        let queue = |q: &str, tail: &str| format!("/v1/queues/{}{tail}", enc(q));
        let (method, path, body) = match op {
            Op::CreateQueue => (Method::POST, "/v1/queues".to_string(), input),
            Op::ListQueues => (
                Method::GET,
                format!("/v1/queues{}", query(input)),
                Value::Null,
            ),
            Op::GetQueue(q) => (Method::GET, queue(q, ""), no_input(input)),
            Op::PatchQueue(q) => (Method::PATCH, queue(q, ""), input),
            Op::DeleteQueue(q) => (Method::DELETE, queue(q, ""), no_input(input)),
            Op::DeadLetterSources(q) => (
                Method::GET,
                queue(q, "/dead_letter_sources"),
                no_input(input),
            ),
            Op::Send(q) => (Method::POST, queue(q, "/messages"), input),
            Op::SendBatch(q) => (Method::POST, queue(q, "/messages/batch"), input),
            Op::Receive(q) => (Method::POST, queue(q, "/receive"), input),
            Op::Ack(q) => (Method::POST, queue(q, "/ack"), input),
            Op::ChangeLease(q) => (Method::POST, queue(q, "/lease"), input),
            Op::Peek(q) => {
                let path = queue(q, &format!("/messages{}", query(input)));
                (Method::GET, path, Value::Null)
            }
            Op::Purge(q) => (Method::POST, queue(q, "/purge"), no_input(input)),
            Op::Scheduled(q) => {
                let path = queue(q, &format!("/scheduled{}", query(input)));
                (Method::GET, path, Value::Null)
            }
            Op::CancelScheduled(q, id) => {
                let path = queue(q, &format!("/scheduled/{}", enc(id)));
                (Method::DELETE, path, no_input(input))
            }
            Op::Stats(q) => (Method::GET, queue(q, "/stats"), no_input(input)),
            Op::StartMoveTask(q) => (Method::POST, queue(q, "/move_tasks"), input),
            Op::MoveTasks(q) => (Method::GET, queue(q, "/move_tasks"), no_input(input)),
            Op::CancelMoveTask(q, task) => {
                let path = queue(q, &format!("/move_tasks/{}/cancel", enc(task)));
                (Method::POST, path, no_input(input))
            }
            Op::Cluster => (Method::GET, "/v1/cluster".into(), no_input(input)),
            Op::AddNode => (Method::POST, "/v1/cluster/nodes".into(), input),
            Op::RemoveNode => {
                let path = format!("/v1/cluster/nodes/{}", enc(&param(&input["id"])));
                (Method::DELETE, path, Value::Null)
            }
            Op::DrainNode | Op::UndrainNode => {
                let path = format!("/v1/cluster/nodes/{}/drain", enc(&param(&input["id"])));
                let method = match op {
                    Op::DrainNode => Method::POST,
                    _ => Method::DELETE,
                };
                (method, path, Value::Null)
            }
            Op::Accounts => (Method::GET, "/v1/accounts".into(), no_input(input)),
        };
        let reply = self.request(method, &path, body).await;
        if (200..300).contains(&reply.status) {
            let expected = match op {
                Op::CreateQueue | Op::StartMoveTask(_) => 201,
                Op::DeleteQueue(_) | Op::Purge(_) | Op::CancelScheduled(..) => 204,
                _ => 200,
            };
            assert_eq!(reply.status, expected, "{op:?}: {}", reply.body);
            if expected == 204 {
                assert_eq!(reply.body, Value::Null, "{op:?}");
            }
        }
        reply.outcome()
    }
}

impl Served for Rest {
    async fn shutdown(self) {
        stop(self.serving, self.client).await;
    }
}

/// No body, for a route that takes no input.
fn no_input(input: Value) -> Value {
    assert_eq!(input, Value::Null, "this operation takes no input");
    Value::Null
}

/// The fields of `input` as a query string (`null` as an empty value), or none.
fn query(input: Value) -> String {
    let fields = match input {
        Value::Null => return String::new(),
        Value::Object(fields) => fields,
        other => panic!("{other}: not query parameters"),
    };
    let pairs: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("{}={}", enc(name), enc(&param(value))))
        .collect();
    format!("?{}", pairs.join("&"))
}

/// A JSON value as a query or path parameter.
fn param(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Adds `authorization: Bearer <key>` to every call, when it has a key.
#[derive(Clone)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// A client of `raftq.v1.Queues` that sends its front's key.
pub type Client = QueuesClient<InterceptedService<Channel, Bearer>>;

/// The served node with a gRPC channel to it.
#[derive(Clone)]
pub struct Grpc {
    serving: Arc<Serving>,
    channel: Channel,
    key: Option<String>,
}

impl Grpc {
    pub async fn start(keys: Keys) -> Grpc {
        Grpc::over(Serving::start(keys).await).await
    }

    pub async fn over(serving: Serving) -> Grpc {
        let channel = Endpoint::from_shared(format!("http://{}", serving.addr))
            .expect("endpoint")
            .connect()
            .await
            .expect("connect");
        Grpc {
            serving: Arc::new(serving),
            channel,
            key: None,
        }
    }

    pub fn with_key(&self, key: Option<&str>) -> Grpc {
        Grpc {
            key: key.map(str::to_string),
            ..self.clone()
        }
    }

    pub fn serving(&self) -> &Serving {
        &self.serving
    }

    pub fn client(&self) -> Client {
        let bearer = self
            .key
            .as_ref()
            .map(|k| format!("Bearer {k}").parse().expect("metadata"));
        QueuesClient::with_interceptor(self.channel.clone(), Bearer(bearer))
    }

    /// `op` as its rpc, its input and answer translated by `protojson`.
    pub async fn call(&self, op: Op<'_>, input: Value) -> Result<Value, Refusal> {
        Ok(protojson::call(self.client(), op, input).await?)
    }

    /// Runs `test` against a node served with `keys`, bounded in time; the node is stopped
    /// afterwards.
    pub async fn test(keys: Keys, test: impl AsyncFnOnce(&Grpc)) {
        Grpc::start(keys).await.run(test).await;
    }
}

impl Served for Grpc {
    async fn shutdown(self) {
        stop(self.serving, self.channel).await;
    }
}
