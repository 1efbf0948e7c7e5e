//! The endpoint on the wire: which requests are SQS's, reading them in either protocol, and
//! writing the answer or the error back in the protocol the request came in.
//!
//! - AWS JSON 1.0: `POST` with `X-Amz-Target: AmazonSQS.<Action>` and `Content-Type:
//!   application/x-amz-json-1.0`, the request a JSON object; answers are JSON objects, errors
//!   `{"__type": ..., "message": ...}` with the `x-amzn-query-error: <code>;<Sender|Receiver>`
//!   header that SDKs read the error code from.
//! - Query: `POST` of a form (`application/x-www-form-urlencoded`) with `Action=<Action>`, or a
//!   `GET` with the same fields in its query string, to `/` or to a queue's URL path; answers
//!   and errors are XML in SQS's 2012-11-05 namespace.
//!
//! Every answer carries its request ID (`x-amzn-RequestId`, and `<RequestId>` in XML).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header::{AsHeaderName, CONTENT_TYPE, RETRY_AFTER};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use raftq_api::ops::Shared;
use raftq_api::{ApiError, Caller, Protocol, Responding, Route, BODY_LIMIT};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::actions;
use crate::auth;
use crate::call::Call;
use crate::error::{Doing, Kind, SqsError};
use crate::names::Names;
use crate::shapes::{self, Action, Form};

/// The JSON protocol's content type.
const JSON_CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// The header that names the JSON protocol's action.
const TARGET: &str = "x-amz-target";
const TARGET_PREFIX: &str = "AmazonSQS.";
const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// The SQS-compatible endpoint, served beside REST and gRPC ([`raftq_api::Front::serving`]);
/// cheap to clone.
#[derive(Clone)]
pub struct Sqs(Arc<Endpoint>);

struct Endpoint {
    ops: Arc<Shared>,
    names: Names,
}

/// Which protocol a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Json,
    Query,
}

impl Sqs {
    /// The endpoint over `ops`, naming queues under the advertised URL `advertised` (the base of
    /// queue URLs), with the account numbers configured in `numbers` (account to number).
    pub fn new(
        ops: Arc<Shared>,
        advertised: &str,
        numbers: std::collections::BTreeMap<String, String>,
    ) -> Sqs {
        let names = Names::new(advertised, &ops.api().region, numbers);
        Sqs(Arc::new(Endpoint { ops, names }))
    }
}

fn header(headers: &HeaderMap, name: impl AsHeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

impl Endpoint {
    /// The protocol of a request, if it is an SQS request: SQS paths are `/` and queue URL
    /// paths, which no REST route has.
    fn wire(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<Wire> {
        let target = header(headers, TARGET);
        let content_type = header(headers, CONTENT_TYPE);
        if target.starts_with(TARGET_PREFIX) && content_type.starts_with(JSON_CONTENT_TYPE) {
            return Some(Wire::Json);
        }
        let form = method == Method::POST && content_type.starts_with(FORM_CONTENT_TYPE);
        let query = method == Method::GET
            && uri
                .query()
                .is_some_and(|q| q.split('&').any(|field| field.starts_with("Action=")));
        // The path last: gRPC calls, the bulk of a loaded node's requests, stop above.
        let path = uri.path();
        let sqs_path = || path == "/" || self.names.queue_path(path).is_some();
        ((form || query) && sqs_path()).then_some(Wire::Query)
    }

    /// Answers one request.
    async fn answer(&self, request: Request) -> Response {
        let request_id = Uuid::new_v4().to_string();
        let (parts, body) = request.into_parts();
        let wire = self
            .wire(&parts.method, &parts.uri, &parts.headers)
            .unwrap_or(Wire::Json);
        let (action, outcome) = self.handle(&parts, body, wire).await;
        render(wire, action, outcome, &request_id)
    }

    /// Reads, authenticates and runs a request: the action it names (when known) and its
    /// result.
    async fn handle(
        &self,
        parts: &Parts,
        body: Body,
        wire: Wire,
    ) -> (Option<&'static Action>, Result<Value, SqsError>) {
        let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
            Ok(bytes) => bytes,
            Err(_) => {
                let e = SqsError::new(
                    Kind::RequestEntityTooLarge,
                    format!("The request body is larger than {BODY_LIMIT} bytes, or broke off."),
                );
                return (None, Err(e));
            }
        };
        let requester =
            match auth::requester(&self.ops.api().keys, self.names.region(), parts, &bytes) {
                Ok(requester) => requester,
                Err(e) => return (None, Err(e)),
            };
        let mut caller = parts
            .extensions
            .get::<Caller>()
            .copied()
            .unwrap_or_default();
        if let Some(key) = requester.key {
            if let Err(e) = self.ops.admit_key(key) {
                return (None, Err(SqsError::from_api(e, Doing::Other)));
            }
            caller.key = Some(key);
        }
        let (action, input) = match read(parts, &bytes, wire) {
            Ok(read) => read,
            Err(e) => return (None, Err(e)),
        };
        let number = self.names.account_number(&requester.principal.account);
        let call = Call {
            ops: &self.ops,
            names: &self.names,
            account: requester.principal.account,
            number,
            caller,
            path: parts.uri.path(),
        };
        (Some(action), actions::run(&call, action.name, input).await)
    }
}

/// The action a request names and its request object.
fn read(parts: &Parts, bytes: &Bytes, wire: Wire) -> Result<(&'static Action, Value), SqsError> {
    let unknown = |name: &str| {
        SqsError::new(
            Kind::InvalidAction,
            format!("The action or operation {name} is not valid for this endpoint."),
        )
    };
    match wire {
        Wire::Json => {
            let target = header(&parts.headers, TARGET);
            let name = target.strip_prefix(TARGET_PREFIX).unwrap_or(target);
            let action = shapes::action(name).ok_or_else(|| unknown(name))?;
            let input = if bytes.iter().all(u8::is_ascii_whitespace) {
                json!({})
            } else {
                serde_json::from_slice(bytes).map_err(|e| {
                    SqsError::new(
                        Kind::SerializationException,
                        format!("The body is not JSON: {e}"),
                    )
                })?
            };
            if !input.is_object() {
                return Err(SqsError::new(
                    Kind::SerializationException,
                    "The body must be a JSON object.",
                ));
            }
            Ok((action, input))
        }
        Wire::Query => {
            let text = if parts.method == Method::GET {
                parts.uri.query().unwrap_or_default().as_bytes()
            } else {
                bytes.as_ref()
            };
            let form = form(text)?;
            let name = form
                .get("Action")
                .ok_or_else(|| SqsError::missing("Action"))?;
            let action = shapes::action(name).ok_or_else(|| unknown(name))?;
            Ok((action, shapes::decode_form(&form, action)?))
        }
    }
}

/// The fields of a form; a field given twice or text that is not UTF-8 is malformed.
fn form(text: &[u8]) -> Result<Form, SqsError> {
    let malformed = |why: String| SqsError::new(Kind::MalformedQueryString, why);
    std::str::from_utf8(text).map_err(|_| malformed("The form is not UTF-8.".into()))?;
    let mut fields = Form::new();
    for (key, value) in form_urlencoded::parse(text) {
        if fields.insert(key.to_string(), value.to_string()).is_some() {
            return Err(malformed(format!(
                "The field {key} is given more than once."
            )));
        }
    }
    Ok(fields)
}

/// The answer in `wire`'s format.
fn render(
    wire: Wire,
    action: Option<&'static Action>,
    outcome: Result<Value, SqsError>,
    request_id: &str,
) -> Response {
    let outcome = match (wire, action, outcome) {
        (Wire::Query, Some(action), Ok(result)) => {
            shapes::write_xml(action, &result, request_id).map(Body::from)
        }
        (Wire::Json, _, Ok(result)) => Ok(Body::from(result.to_string())),
        (_, _, Ok(_)) => Err(SqsError::new(
            Kind::InternalFailure,
            "an answer without its action",
        )),
        (_, _, Err(e)) => Err(e),
    };
    let mut response = match outcome {
        Ok(body) => Response::new(body),
        Err(e) => error_response(wire, &e, request_id),
    };
    let content_type = match wire {
        Wire::Json => JSON_CONTENT_TYPE,
        Wire::Query => "text/xml",
    };
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(id) = HeaderValue::from_str(request_id) {
        headers.insert("x-amzn-requestid", id);
    }
    if let Some(action) = action {
        response.extensions_mut().insert(Route(action.route));
    }
    response
}

/// An error in `wire`'s format, with its status and headers (but the content type).
fn error_response(wire: Wire, e: &SqsError, request_id: &str) -> Response {
    if e.kind.status() >= 500 {
        tracing::warn!(code = e.code(), message = %e.message, "SQS request failed");
    }
    let body = match wire {
        Wire::Json => json!({"__type": e.kind.json_type(), "message": e.message})
            .to_string()
            .into_bytes(),
        Wire::Query if e.kind == Kind::QueueDoesNotExist => {
            // SQS's words for this error in its Query protocol.
            let e = SqsError::new(
                e.kind,
                "The specified queue does not exist for this wsdl version.",
            );
            shapes::write_error_xml(&e, request_id)
        }
        Wire::Query => shapes::write_error_xml(e, request_id),
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(e.kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let fault = if e.kind.sender_fault() {
        "Sender"
    } else {
        "Receiver"
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&format!("{};{fault}", e.code())) {
        headers.insert("x-amzn-query-error", value);
    }
    if let Some(seconds) = e.retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

impl Protocol for Sqs {
    fn claims(&self, request: &Request) -> bool {
        self.0
            .wire(request.method(), request.uri(), request.headers())
            .is_some()
    }

    fn serve(&self, request: Request) -> Responding {
        let endpoint = Arc::clone(&self.0);
        Box::pin(async move { endpoint.answer(request).await })
    }

    fn refuse(&self, request: &Request, refused: ApiError) -> Response {
        let wire = self
            .0
            .wire(request.method(), request.uri(), request.headers())
            .unwrap_or(Wire::Json);
        let e = SqsError::from_api(refused, Doing::Other);
        render(wire, None, Err(e), &Uuid::new_v4().to_string())
    }
}
