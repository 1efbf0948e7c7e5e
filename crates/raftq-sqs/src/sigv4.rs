//! AWS Signature Version 4: the check of a request signed with an access key pair of raftq's key
//! table ([`Keys`]), as AWS SDKs and the AWS CLI sign them for the SQS-compatible endpoint
//! ([`authenticate`]: who made a request, once its signature holds).
//!
//! A signed request carries `Authorization: AWS4-HMAC-SHA256 Credential=<access key id>/<date>/
//! <region>/<service>/aws4_request, SignedHeaders=<names>, Signature=<hex>` and `X-Amz-Date`. The
//! server rebuilds the canonical request from what arrived (AWS's documented algorithm: the path
//! normalized and URI-encoded once more, the query's parameters decoded, re-encoded and sorted,
//! exactly the signed headers with their values trimmed, the body's SHA-256), derives the signing
//! key from the stored secret and compares the HMAC with the one sent, in constant time.
//! `aws-sigv4`, the AWS SDK for Rust's signer, keeps its canonical request to itself and signs
//! the headers it picks rather than those a request names, so the canonical request is built
//! here; the tests check it against AWS's published test suite and against requests signed by
//! `aws-sigv4` and by botocore.
//!
//! # Rules beyond the algorithm
//! - `X-Amz-Date` must be within 15 minutes ([`DATE_WINDOW_MINUTES`]) of the server's clock,
//!   either way, and the credential scope must name its date, the server's region and the
//!   service.
//! - `host` must be signed (HTTP/2 requests sign their `:authority` under that name).
//! - `X-Amz-Content-Sha256`, when sent, must be the hex SHA-256 of the body: `UNSIGNED-PAYLOAD`
//!   and streaming payloads are refused, so the body is always covered by the signature.
//! - `X-Amz-Security-Token` is refused: raftq issues no session credentials.
//! - Query-string signatures (presigned URLs) and the `Date` header in place of `X-Amz-Date` are
//!   not accepted.
//!
//! Each [`SigV4Error`] says which SQS error code it stands for; `auth` maps them.

use std::time::SystemTime;

use axum::http::header::{AUTHORIZATION, HOST};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName};
use hmac::{Hmac, Mac};
use percent_encoding::{percent_decode, percent_encode, AsciiSet, NON_ALPHANUMERIC};
use raftq_api::{AccessKeyError, KeyDigest, Keys, Principal};
use sha2::{Digest, Sha256};
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

/// How many minutes a request's `X-Amz-Date` may be from the server's clock, before or after it.
const DATE_WINDOW_MINUTES: i64 = 15;

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const TERMINATOR: &str = "aws4_request";
const AMZ_DATE: HeaderName = HeaderName::from_static("x-amz-date");
const CONTENT_SHA256: HeaderName = HeaderName::from_static("x-amz-content-sha256");
const SECURITY_TOKEN: HeaderName = HeaderName::from_static("x-amz-security-token");
/// `X-Amz-Date`'s form (ISO 8601 basic, UTC).
const AMZ_DATE_FORMAT: &[BorrowedFormatItem<'_>] =
    format_description!("[year][month][day]T[hour][minute][second]Z");

/// What SigV4 leaves unencoded in a query parameter: `A-Z a-z 0-9 - _ . ~`.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');
/// The same in a path, which keeps its `/`.
const UNRESERVED_PATH: &AsciiSet = &UNRESERVED.remove(b'/');

type HmacSha256 = Hmac<Sha256>;

/// A request to check, as it arrived, with the service and region its signature must be for.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    /// The service the credential scope must name, e.g. `sqs`.
    pub service: &'a str,
    /// The region the credential scope must name: the server's `--region`.
    pub region: &'a str,
    /// The method, e.g. `POST`.
    pub method: &'a str,
    /// The path as it arrived, still percent-encoded.
    pub path: &'a str,
    /// The query as it arrived, without the `?`; empty when there is none.
    pub query: &'a str,
    /// The URI's authority, which stands for the `host` header in HTTP/2 requests (they have none).
    pub authority: Option<&'a str>,
    /// Every header of the request.
    pub headers: &'a HeaderMap,
    /// The whole body.
    pub body: &'a [u8],
}

impl<'a> SignedRequest<'a> {
    /// The request of `parts` with its whole `body`, to be signed for `service` in `region`.
    pub fn new(service: &'a str, region: &'a str, parts: &'a Parts, body: &'a [u8]) -> Self {
        SignedRequest {
            service,
            region,
            method: parts.method.as_str(),
            path: parts.uri.path(),
            query: parts.uri.query().unwrap_or(""),
            authority: parts.uri.authority().map(|a| a.as_str()),
            headers: &parts.headers,
            body,
        }
    }
}

/// A request whose signature held: who made it, and its access key as the limits count it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub principal: Principal,
    pub key: Option<KeyDigest>,
}

/// Who made `request`, at `now`: the principal of the access key of `keys` that signed it, with
/// the key as the per-key limits count it. In open mode every request, signed or not, is the one
/// principal of open mode (an admin), with no key. The key is known only once the signature
/// holds: a key ID is no secret, so an unchecked one must not use up its owner's requests.
pub fn authenticate(
    keys: &Keys,
    request: &SignedRequest<'_>,
    now: SystemTime,
) -> Result<Signed, SigV4Error> {
    if let Some(principal) = keys.open_principal() {
        return Ok(Signed {
            principal,
            key: None,
        });
    }
    let authorization = read_authorization(request)?;
    let access_key_id = authorization.access_key_id;
    let access = keys.access_key(access_key_id, now).map_err(|e| match e {
        AccessKeyError::Unknown => SigV4Error::UnknownAccessKey(access_key_id.to_string()),
        AccessKeyError::Expired { at } => SigV4Error::ExpiredAccessKey {
            access_key_id: access_key_id.to_string(),
            at,
        },
    })?;
    verify(request, &authorization, access.secret(), now)?;
    Ok(Signed {
        principal: access.principal,
        key: Some(Sha256::digest(format!("sigv4 {access_key_id}").as_bytes()).into()),
    })
}

/// Why a request's signature is refused. Each variant's doc names the SQS error code it maps to;
/// the messages follow AWS's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigV4Error {
    /// No `Authorization` header. SQS: `MissingAuthenticationToken`.
    #[error(
        "Request is missing Authentication Token: sign it with AWS Signature Version 4 in the \
         Authorization header (query-string signatures are not accepted)"
    )]
    MissingAuthorization,
    /// The `Authorization` or `X-Amz-Date` header is malformed; the message says how.
    /// SQS: `IncompleteSignature`.
    #[error("{0}")]
    Malformed(String),
    /// The credential scope names another date than `X-Amz-Date`, another region or another
    /// service. SQS: `SignatureDoesNotMatch`.
    #[error("{0}")]
    Scope(String),
    /// The key table has no such access key id. SQS: `InvalidClientTokenId`.
    #[error("The security token included in the request is invalid: no access key {0} is known")]
    UnknownAccessKey(String),
    /// The access key's `not_after` has passed. SQS: `InvalidClientTokenId`.
    #[error("The security token included in the request is invalid: the access key {access_key_id} expired at {at}")]
    ExpiredAccessKey { access_key_id: String, at: String },
    /// The request carries `X-Amz-Security-Token`: raftq issues no session credentials.
    /// SQS: `InvalidClientTokenId`.
    #[error(
        "The security token included in the request is invalid: this server issues no session \
         tokens; sign with an access key of its key file and without X-Amz-Security-Token"
    )]
    SessionToken,
    /// `X-Amz-Date` is more than 15 minutes ([`DATE_WINDOW_MINUTES`]) before the server's clock.
    /// SQS: `RequestExpired` (AWS sends `SignatureDoesNotMatch` with this message on some APIs).
    #[error("Signature expired: {signed} is now earlier than {earliest} ({now} - {minutes} min.)", minutes = DATE_WINDOW_MINUTES)]
    Expired {
        signed: String,
        earliest: String,
        now: String,
    },
    /// `X-Amz-Date` is more than 15 minutes ([`DATE_WINDOW_MINUTES`]) after the server's clock.
    /// SQS: `RequestExpired`, as [`SigV4Error::Expired`].
    #[error("Signature not yet current: {signed} is still later than {latest} ({now} + {minutes} min.)", minutes = DATE_WINDOW_MINUTES)]
    NotYetCurrent {
        signed: String,
        latest: String,
        now: String,
    },
    /// A header named in `SignedHeaders` is not in the request. SQS: `SignatureDoesNotMatch`.
    #[error("The request signature we calculated does not match the signature you provided: the signed header {0} is not in the request")]
    MissingSignedHeader(String),
    /// `X-Amz-Content-Sha256` is not the SHA-256 of the body. SQS: `SignatureDoesNotMatch`.
    #[error(
        "The provided X-Amz-Content-Sha256 header does not match what was computed: it must be \
         the hex SHA-256 of the body (UNSIGNED-PAYLOAD and streaming payloads are not accepted)"
    )]
    BodyHash,
    /// The signature is not the one the access key's secret gives. SQS: `SignatureDoesNotMatch`.
    #[error(
        "The request signature we calculated does not match the signature you provided. Check \
         your AWS Secret Access Key and signing method. Consult the service documentation for \
         details."
    )]
    SignatureMismatch,
}

fn malformed(message: impl Into<String>) -> SigV4Error {
    SigV4Error::Malformed(message.into())
}

/// The parts of a request's `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authorization<'a> {
    access_key_id: &'a str,
    /// The scope's date, `YYYYMMDD`.
    date: &'a str,
    region: &'a str,
    service: &'a str,
    /// The `SignedHeaders` value as sent: lowercase names in ascending order, `;` between.
    signed_headers: &'a str,
    signature: [u8; 32],
}

/// The `Authorization` header of a request signed with SigV4, refusing session tokens.
fn read_authorization<'a>(request: &SignedRequest<'a>) -> Result<Authorization<'a>, SigV4Error> {
    let mut values = request.headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(SigV4Error::MissingAuthorization)?;
    if values.next().is_some() {
        return Err(malformed(
            "The request has more than one Authorization header",
        ));
    }
    let text = value
        .to_str()
        .map_err(|_| malformed("The Authorization header is not ASCII"))?;
    let authorization = parse_authorization(text)?;
    if request.headers.contains_key(SECURITY_TOKEN) {
        return Err(SigV4Error::SessionToken);
    }
    Ok(authorization)
}

/// `AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...`, in any order of its three
/// parameters.
fn parse_authorization(text: &str) -> Result<Authorization<'_>, SigV4Error> {
    let (algorithm, parameters) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    if algorithm != ALGORITHM {
        return Err(malformed(format!(
            "Unsupported Authorization algorithm '{algorithm}': sign with {ALGORITHM}"
        )));
    }
    let (mut credential, mut signed_headers, mut signature) = (None, None, None);
    for parameter in parameters
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (name, value) = parameter.split_once('=').ok_or_else(|| {
            malformed(format!(
                "Authorization header parameter '{parameter}' is not of the form name=value"
            ))
        })?;
        let slot = match name {
            "Credential" => &mut credential,
            "SignedHeaders" => &mut signed_headers,
            "Signature" => &mut signature,
            _ => {
                return Err(malformed(format!(
                    "Authorization header has an unknown parameter '{name}'"
                )))
            }
        };
        if slot.replace(value).is_some() {
            return Err(malformed(format!(
                "Authorization header gives '{name}' twice"
            )));
        }
    }
    let credential = required(credential, "Credential")?;
    let signed_headers = required(signed_headers, "SignedHeaders")?;
    let signature = required(signature, "Signature")?;
    let [access_key_id, date, region, service, terminator] = credential_parts(credential)?;
    if terminator != TERMINATOR {
        return Err(malformed(format!(
            "Credential should be scoped with a valid terminator: '{TERMINATOR}', not \
             '{terminator}'"
        )));
    }
    check_signed_headers(signed_headers)?;
    Ok(Authorization {
        access_key_id,
        date,
        region,
        service,
        signed_headers,
        signature: parse_signature(signature)?,
    })
}

fn required<'a>(value: Option<&'a str>, name: &str) -> Result<&'a str, SigV4Error> {
    value.ok_or_else(|| malformed(format!("Authorization header requires '{name}' parameter")))
}

/// `<access key id>/<date>/<region>/<service>/aws4_request`, each part non-empty.
fn credential_parts(credential: &str) -> Result<[&str; 5], SigV4Error> {
    let parts: Vec<&str> = credential.split('/').collect();
    match <[&str; 5]>::try_from(parts) {
        Ok(parts) if parts.iter().all(|p| !p.is_empty()) => Ok(parts),
        _ => Err(malformed(format!(
            "Credential '{credential}' must be <access key id>/<YYYYMMDD>/<region>/<service>/\
             {TERMINATOR}"
        ))),
    }
}

/// Lowercase header names in ascending order, `;` between, `host` among them.
fn check_signed_headers(signed_headers: &str) -> Result<(), SigV4Error> {
    let names: Vec<&str> = signed_headers.split(';').collect();
    let well_formed = names.iter().all(|name| {
        !name.is_empty()
            && HeaderName::from_bytes(name.as_bytes()).is_ok_and(|h| h.as_str() == *name)
    }) && names.windows(2).all(|pair| pair[0] < pair[1]);
    if !well_formed {
        return Err(malformed(format!(
            "SignedHeaders '{signed_headers}' must be lowercase header names in ascending order, \
             each once, separated by ';'"
        )));
    }
    if !names.contains(&HOST.as_str()) {
        return Err(malformed("SignedHeaders must include host"));
    }
    Ok(())
}

fn parse_signature(signature: &str) -> Result<[u8; 32], SigV4Error> {
    let lowercase = signature.bytes().all(|b| !b.is_ascii_uppercase());
    hex::decode(signature)
        .ok()
        .filter(|_| lowercase)
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| {
            malformed(format!(
                "Signature '{signature}' must be 64 lowercase hex digits"
            ))
        })
}

/// Checks the request's date, scope, signed headers, body hash and signature against `secret`,
/// the secret access key of `authorization`'s access key id, at `now`.
fn verify(
    request: &SignedRequest<'_>,
    authorization: &Authorization<'_>,
    secret: &str,
    now: SystemTime,
) -> Result<(), SigV4Error> {
    let amz_date = check_date(request, authorization.date, now)?;
    check_scope(request, authorization)?;
    let payload_hash = payload_hash(request)?;
    let canonical = canonical_request(request, authorization.signed_headers, &payload_hash)?;
    let scope = format!(
        "{}/{}/{}/{TERMINATOR}",
        authorization.date, authorization.region, authorization.service
    );
    let string_to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        hex::encode(Sha256::digest(&canonical))
    );
    let key = signing_key(secret, authorization);
    let mut mac = new_mac(&key);
    mac.update(string_to_sign.as_bytes());
    mac.verify_slice(&authorization.signature)
        .map_err(|_| SigV4Error::SignatureMismatch)
}

/// The request's `X-Amz-Date`, checked against the scope's date and the window around `now`.
fn check_date<'a>(
    request: &SignedRequest<'a>,
    scope_date: &str,
    now: SystemTime,
) -> Result<&'a str, SigV4Error> {
    let text = request
        .headers
        .get(AMZ_DATE)
        .ok_or_else(|| malformed("Authorization header requires the X-Amz-Date header"))?
        .to_str()
        .map_err(|_| malformed("X-Amz-Date is not ASCII"))?;
    let signed = PrimitiveDateTime::parse(text, AMZ_DATE_FORMAT)
        .map_err(|_| {
            malformed(format!(
                "X-Amz-Date '{text}' must be an ISO 8601 basic UTC time, e.g. 20150830T123600Z"
            ))
        })?
        .assume_utc();
    if !text.starts_with(scope_date) || scope_date.len() != 8 {
        return Err(SigV4Error::Scope(format!(
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from \
             HTTP: '{scope_date}' != '{}'",
            text.get(..8).unwrap_or(text)
        )));
    }
    let now = OffsetDateTime::from(now);
    let window = time::Duration::minutes(DATE_WINDOW_MINUTES);
    let show = |at: OffsetDateTime| {
        at.format(AMZ_DATE_FORMAT)
            .unwrap_or_else(|_| at.to_string())
    };
    if signed < now - window {
        return Err(SigV4Error::Expired {
            signed: text.to_string(),
            earliest: show(now - window),
            now: show(now),
        });
    }
    if signed > now + window {
        return Err(SigV4Error::NotYetCurrent {
            signed: text.to_string(),
            latest: show(now + window),
            now: show(now),
        });
    }
    Ok(text)
}

fn check_scope(
    request: &SignedRequest<'_>,
    authorization: &Authorization<'_>,
) -> Result<(), SigV4Error> {
    if authorization.region != request.region {
        return Err(SigV4Error::Scope(format!(
            "Credential should be scoped to a valid region, not '{}': this server's region is \
             '{}'",
            authorization.region, request.region
        )));
    }
    if authorization.service != request.service {
        return Err(SigV4Error::Scope(format!(
            "Credential should be scoped to correct service: '{}', not '{}'",
            request.service, authorization.service
        )));
    }
    Ok(())
}

/// The hex SHA-256 of the body, which `X-Amz-Content-Sha256` must be when it is sent.
fn payload_hash(request: &SignedRequest<'_>) -> Result<String, SigV4Error> {
    let hash = hex::encode(Sha256::digest(request.body));
    match request.headers.get(CONTENT_SHA256) {
        Some(sent) if sent.as_bytes() != hash.as_bytes() => Err(SigV4Error::BodyHash),
        _ => Ok(hash),
    }
}

/// The canonical request: method, canonical URI, canonical query, the signed headers with their
/// values, the signed header names and the payload's hash, a line each.
fn canonical_request(
    request: &SignedRequest<'_>,
    signed_headers: &str,
    payload_hash: &str,
) -> Result<Vec<u8>, SigV4Error> {
    let mut out = Vec::with_capacity(256 + request.query.len());
    for line in [
        request.method,
        &canonical_uri(request.path),
        &canonical_query(request.query),
    ] {
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    for name in signed_headers.split(';') {
        out.extend_from_slice(name.as_bytes());
        out.push(b':');
        canonical_header_value(request, name, &mut out)?;
        out.push(b'\n');
    }
    out.push(b'\n');
    out.extend_from_slice(signed_headers.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(payload_hash.as_bytes());
    Ok(out)
}

/// The path without empty, `.` and `..` segments (a trailing `/` kept), URI-encoded: what every
/// AWS service but S3 signs. The path arrives percent-encoded, so its `%` are encoded again, as
/// the SDKs do when they sign it.
fn canonical_uri(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            _ => segments.push(segment),
        }
    }
    let mut normalized = format!("/{}", segments.join("/"));
    if path.ends_with('/') && !segments.is_empty() {
        normalized.push('/');
    }
    percent_encode(normalized.as_bytes(), UNRESERVED_PATH).to_string()
}

/// The query's parameters decoded (`+` is a space), URI-encoded and sorted by name, then value;
/// a parameter without `=` has an empty value.
fn canonical_query(query: &str) -> String {
    let encode = |text: &str| {
        let spaced = text.replace('+', " ");
        let decoded: Vec<u8> = percent_decode(spaced.as_bytes()).collect();
        percent_encode(&decoded, UNRESERVED).to_string()
    };
    let mut parameters: Vec<(String, String)> = query
        .split('&')
        .filter(|parameter| !parameter.is_empty())
        .map(|parameter| {
            let (name, value) = parameter.split_once('=').unwrap_or((parameter, ""));
            (encode(name), encode(value))
        })
        .collect();
    parameters.sort();
    parameters
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Every value of header `name`, in the order they came, each trimmed with its runs of spaces and
/// tabs made one space, `,` between them. `host` falls back on the URI's authority.
fn canonical_header_value(
    request: &SignedRequest<'_>,
    name: &str,
    out: &mut Vec<u8>,
) -> Result<(), SigV4Error> {
    let mut values: Vec<&[u8]> = request
        .headers
        .get_all(name)
        .iter()
        .map(|value| value.as_bytes())
        .collect();
    if values.is_empty() && name == HOST.as_str() {
        values.extend(request.authority.map(str::as_bytes));
    }
    if values.is_empty() {
        return Err(SigV4Error::MissingSignedHeader(name.to_string()));
    }
    for (index, value) in values.into_iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let words = value
            .split(|b| matches!(b, b' ' | b'\t'))
            .filter(|word| !word.is_empty());
        for (position, word) in words.enumerate() {
            if position > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(word);
        }
    }
    Ok(())
}

/// `HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request")`.
fn signing_key(secret: &str, authorization: &Authorization<'_>) -> [u8; 32] {
    let date_key = hmac(format!("AWS4{secret}").as_bytes(), authorization.date);
    let region_key = hmac(&date_key, authorization.region);
    let service_key = hmac(&region_key, authorization.service);
    hmac(&service_key, TERMINATOR)
}

fn hmac(key: &[u8], data: &str) -> [u8; 32] {
    let mut mac = new_mac(key);
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().into()
}

fn new_mac(key: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(key).expect("HMAC-SHA256 takes keys of any length")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::Credentials;
    use aws_sigv4::http_request::{
        sign, PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings,
    };
    use aws_sigv4::sign::v4;
    use axum::http::HeaderValue;
    use raftq_api::Role;
    use time::macros::datetime;

    /// A request as it arrives: method, target (path and query), headers and body.
    struct Sent {
        method: String,
        target: String,
        headers: HeaderMap,
        body: Vec<u8>,
    }

    impl Sent {
        /// `METHOD target`, then `Name:value` lines, then an empty line and the body.
        fn parse(text: &str) -> Sent {
            let (head, body) = text.split_once("\n\n").unwrap_or((text, ""));
            let mut lines = head.lines();
            let (method, target) = lines.next().unwrap().split_once(' ').unwrap();
            let mut headers = HeaderMap::new();
            for line in lines {
                let (name, value) = line.split_once(':').unwrap();
                let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
                headers.append(name, HeaderValue::from_str(value).unwrap());
            }
            Sent {
                method: method.to_string(),
                target: target.to_string(),
                headers,
                body: body.as_bytes().to_vec(),
            }
        }

        fn add(&mut self, name: &str, value: &str) {
            let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
            self.headers
                .append(name, HeaderValue::from_str(value).unwrap());
        }

        fn set(&mut self, name: &str, value: &str) {
            let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
            self.headers
                .insert(name, HeaderValue::from_str(value).unwrap());
        }

        fn request<'a>(&'a self, service: &'a str, region: &'a str) -> SignedRequest<'a> {
            let (path, query) = self.target.split_once('?').unwrap_or((&self.target, ""));
            SignedRequest {
                service,
                region,
                method: &self.method,
                path,
                query,
                authority: None,
                headers: &self.headers,
                body: &self.body,
            }
        }

        /// The request to the SQS-compatible endpoint of a server in region `local`.
        fn sqs(&self) -> SignedRequest<'_> {
            self.request("sqs", "local")
        }
    }

    /// Who signed `request` at `now`, as [`authenticate`] finds it.
    fn principal_of(
        keys: &Keys,
        request: &SignedRequest<'_>,
        now: SystemTime,
    ) -> Result<Principal, SigV4Error> {
        authenticate(keys, request, now).map(|signed| signed.principal)
    }

    const SUITE_KEY_ID: &str = "AKIDEXAMPLE";
    const SUITE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    /// AWS's SigV4 test suite (as aws-c-auth keeps it, `v4`): every request whose path is
    /// normalized, as for every service but S3, except the one with an obsolete folded header
    /// line, which HTTP/1.1 parsers refuse. Each is signed at 2015-08-30T12:36:00Z in
    /// `us-east-1` for service `service` with the suite's key; the request without its
    /// `X-Amz-Date` and `Authorization`, its `SignedHeaders`, and the suite's signature.
    const SUITE: &[(&str, &str, &str, &str)] = &[
        ("get-header-key-duplicate", "GET /\nHost:example.amazonaws.com\nMy-Header1:value2\nMy-Header1:value2\nMy-Header1:value1", "host;my-header1;x-amz-date", "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"),
        ("get-header-value-order", "GET /\nHost:example.amazonaws.com\nMy-Header1:value4\nMy-Header1:value1\nMy-Header1:value3\nMy-Header1:value2", "host;my-header1;x-amz-date", "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"),
        ("get-header-value-trim", "GET /\nHost:example.amazonaws.com\nMy-Header1: value1\nMy-Header2: \"a   b   c\"", "host;my-header1;my-header2;x-amz-date", "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
        ("get-relative-normalized", "GET /example/..\nHost:example.amazonaws.com", "host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        ("get-relative-relative-normalized", "GET /example1/example2/../..\nHost:example.amazonaws.com", "host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        ("get-slash-dot-slash-normalized", "GET /./\nHost:example.amazonaws.com", "host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        ("get-slash-normalized", "GET //\nHost:example.amazonaws.com", "host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        ("get-slash-pointless-dot-normalized", "GET /./example\nHost:example.amazonaws.com", "host;x-amz-date", "ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5"),
        ("get-slashes-normalized", "GET //example//\nHost:example.amazonaws.com", "host;x-amz-date", "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84"),
        ("get-space-normalized", "GET /example space/\nHost:example.amazonaws.com", "host;x-amz-date", "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"),
        ("get-unreserved", "GET /-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\nHost:example.amazonaws.com", "host;x-amz-date", "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
        ("get-utf8", "GET /\u{1234}\nHost:example.amazonaws.com", "host;x-amz-date", "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"),
        ("get-vanilla-empty-query-key", "GET /?Param1=value1\nHost:example.amazonaws.com", "host;x-amz-date", "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"),
        ("get-vanilla-query-order-encoded", "GET /?Param-3=Value3&Param=Value2&%E1%88%B4=Value1\nHost:example.amazonaws.com", "host;x-amz-date", "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac"),
        ("get-vanilla-query-order-key-case", "GET /?Param2=value2&Param1=value1\nHost:example.amazonaws.com", "host;x-amz-date", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
        ("get-vanilla-query-unreserved", "GET /?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\nHost:example.amazonaws.com", "host;x-amz-date", "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"),
        ("get-vanilla-query", "GET /\nHost:example.amazonaws.com", "host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        ("get-vanilla-utf8-query", "GET /?\u{1234}=bar\nHost:example.amazonaws.com", "host;x-amz-date", "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"),
        ("get-vanilla", "GET /\nHost:example.amazonaws.com", "host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        ("post-header-key-case", "POST /\nHost:example.amazonaws.com", "host;x-amz-date", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
        ("post-header-key-sort", "POST /\nHost:example.amazonaws.com\nMy-Header1:value1", "host;my-header1;x-amz-date", "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"),
        ("post-header-value-case", "POST /\nHost:example.amazonaws.com\nMy-Header1:VALUE1", "host;my-header1;x-amz-date", "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"),
        ("post-vanilla-empty-query-value", "POST /?Param1=value1\nHost:example.amazonaws.com", "host;x-amz-date", "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"),
        ("post-vanilla-query", "POST /?Param1=value1\nHost:example.amazonaws.com", "host;x-amz-date", "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"),
        ("post-vanilla", "POST /\nHost:example.amazonaws.com", "host;x-amz-date", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
        ("post-x-www-form-urlencoded-parameters", "POST /\nContent-Type:application/x-www-form-urlencoded; charset=utf-8\nHost:example.amazonaws.com\nContent-Length:13\nx-amz-content-sha256:9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e\n\nParam1=value1", "content-length;content-type;host;x-amz-content-sha256;x-amz-date", "328d1b9eaadca9f5818ef05e8392801e091653bafec24fcab71e7344e7f51422"),
        ("post-x-www-form-urlencoded", "POST /\nContent-Type:application/x-www-form-urlencoded\nHost:example.amazonaws.com\nContent-Length:13\nx-amz-content-sha256:9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e\n\nParam1=value1", "content-length;content-type;host;x-amz-content-sha256;x-amz-date", "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b"),
    ];

    /// The suite's requests with a session token (signed, or added after signing).
    const SUITE_WITH_TOKENS: &[(&str, &str, &str, &str)] = &[
        ("get-vanilla-with-session-token", "GET /\nHost:example.amazonaws.com\nX-Amz-Security-Token:6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267", "host;x-amz-date;x-amz-security-token", "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"),
        ("post-sts-header-after", "POST /\nHost:example.amazonaws.com\nX-Amz-Security-Token:AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==", "host;x-amz-date", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    ];

    const SUITE_TIME: OffsetDateTime = datetime!(2015-08-30 12:36:00 UTC);

    fn suite_keys() -> Keys {
        Keys::from_toml(&format!(
            "[[keys]]\naccount = \"suite\"\naccess_key_id = \"{SUITE_KEY_ID}\"\n\
             secret_access_key = \"{SUITE_SECRET}\"\n"
        ))
        .unwrap()
    }

    /// A suite request with its date and the suite's `Authorization` header.
    fn suite_request(request: &str, signed_headers: &str, signature: &str) -> Sent {
        let mut sent = Sent::parse(request);
        sent.add("x-amz-date", "20150830T123600Z");
        sent.add(
            "authorization",
            &format!(
                "AWS4-HMAC-SHA256 Credential={SUITE_KEY_ID}/20150830/us-east-1/service/\
                 aws4_request, SignedHeaders={signed_headers}, Signature={signature}"
            ),
        );
        sent
    }

    /// The signature with its first hex digit changed.
    fn tampered(signature: &str) -> String {
        let first = if signature.starts_with('0') { "1" } else { "0" };
        format!("{first}{}", &signature[1..])
    }

    /// Who a request of the test suite signed with `signature` comes from, at the suite's time.
    fn suite_principal(
        keys: &Keys,
        request: &str,
        signed_headers: &str,
        signature: &str,
    ) -> Result<Principal, SigV4Error> {
        let sent = suite_request(request, signed_headers, signature);
        principal_of(
            keys,
            &sent.request("service", "us-east-1"),
            SUITE_TIME.into(),
        )
    }

    #[test]
    fn the_aws_test_suite_verifies_and_a_changed_signature_does_not() {
        let keys = suite_keys();
        let suite = Principal {
            account: "suite".into(),
            role: Role::Account,
        };
        for (name, request, signed_headers, signature) in SUITE {
            let verified = suite_principal(&keys, request, signed_headers, signature);
            assert_eq!(verified, Ok(suite.clone()), "{name}");
            let refused = suite_principal(&keys, request, signed_headers, &tampered(signature));
            assert_eq!(refused, Err(SigV4Error::SignatureMismatch), "{name}");
        }
    }

    #[test]
    fn session_tokens_are_refused_even_with_a_valid_signature() {
        let keys = suite_keys();
        for (name, request, signed_headers, signature) in SUITE_WITH_TOKENS {
            let refused = suite_principal(&keys, request, signed_headers, signature);
            assert_eq!(refused, Err(SigV4Error::SessionToken), "{name}");
        }
    }

    #[test]
    fn canonical_requests_are_the_test_suites() {
        let cases = [
            (
                "GET /?Param-3=Value3&Param=Value2&%E1%88%B4=Value1\n\
                 Host:example.amazonaws.com\nX-Amz-Date:20150830T123600Z",
                "host;x-amz-date",
                "GET\n/\n%E1%88%B4=Value1&Param=Value2&Param-3=Value3\n\
                 host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n\
                 host;x-amz-date\n\
                 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                "GET /\nHost:example.amazonaws.com\nMy-Header1: value1\n\
                 My-Header2: \"a   b   c\"\nX-Amz-Date:20150830T123600Z",
                "host;my-header1;my-header2;x-amz-date",
                "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\n\
                 my-header2:\"a b c\"\nx-amz-date:20150830T123600Z\n\n\
                 host;my-header1;my-header2;x-amz-date\n\
                 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                "GET /example space/\nHost:example.amazonaws.com\nX-Amz-Date:20150830T123600Z",
                "host;x-amz-date",
                "GET\n/example%20space/\n\nhost:example.amazonaws.com\n\
                 x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\
                 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
        ];
        for (request, signed_headers, canonical) in cases {
            let sent = Sent::parse(request);
            let request = sent.request("service", "us-east-1");
            let hash = payload_hash(&request).unwrap();
            let built = canonical_request(&request, signed_headers, &hash).unwrap();
            assert_eq!(String::from_utf8(built).unwrap(), canonical);
        }
    }

    #[test]
    fn paths_are_normalized_and_encoded_once_more() {
        let cases = [
            ("", "/"),
            ("/", "/"),
            ("/a/./b/../c/", "/a/c/"),
            ("/a//b", "/a/b"),
            ("/../a", "/a"),
            ("/123456789012/orders", "/123456789012/orders"),
            ("/a%20b/c%2Fd", "/a%2520b/c%252Fd"),
            ("/a+b:c", "/a%2Bb%3Ac"),
        ];
        for (path, canonical) in cases {
            assert_eq!(canonical_uri(path), canonical, "{path}");
        }
    }

    #[test]
    fn query_parameters_are_decoded_encoded_and_sorted() {
        let cases = [
            ("", ""),
            ("b=2&a=1&a=0", "a=0&a=1&b=2"),
            ("flag&x=", "flag=&x="),
            ("q=a+b%20c", "q=a%20b%20c"),
            ("q=%2b%7E%41", "q=%2B~A"),
            ("url=http://h/p?x", "url=http%3A%2F%2Fh%2Fp%3Fx"),
            ("a=1&&b=2", "a=1&b=2"),
        ];
        for (query, canonical) in cases {
            assert_eq!(canonical_query(query), canonical, "{query}");
        }
    }

    const SIGNED_AT: OffsetDateTime = datetime!(2025-06-01 12:00:00 UTC);
    const KEY_ID: &str = "AKIAACME0001";
    const SECRET: &str = "acme/secret+KEY0123456789abcdefghijklmno";

    fn acme_keys() -> Keys {
        Keys::from_toml(&format!(
            "[[keys]]\naccount = \"acme\"\nkey = \"bearer\"\n\
             [[keys]]\naccount = \"acme\"\naccess_key_id = \"{KEY_ID}\"\n\
             secret_access_key = \"{SECRET}\"\nrole = \"admin\"\n\
             [[keys]]\naccount = \"old\"\naccess_key_id = \"AKIAOLD\"\n\
             secret_access_key = \"{SECRET}\"\nnot_after = 2025-06-01T11:00:00Z\n"
        ))
        .unwrap()
    }

    fn acme() -> Principal {
        Principal {
            account: "acme".into(),
            role: Role::Admin,
        }
    }

    /// How a test signs with aws-sigv4, the signer of the AWS SDK for Rust.
    struct Signer<'a> {
        key_id: &'a str,
        secret: &'a str,
        session_token: Option<&'a str>,
        region: &'a str,
        service: &'a str,
        at: OffsetDateTime,
        content_sha256: bool,
    }

    impl Default for Signer<'_> {
        fn default() -> Self {
            Signer {
                key_id: KEY_ID,
                secret: SECRET,
                session_token: None,
                region: "local",
                service: "sqs",
                at: SIGNED_AT,
                content_sha256: false,
            }
        }
    }

    impl Signer<'_> {
        /// `request` (as [`Sent::parse`] reads it, with a `Host` header) with the headers
        /// aws-sigv4 adds to sign it.
        fn sign(&self, request: &str) -> Sent {
            let mut sent = Sent::parse(request);
            let host = sent.headers[HOST].to_str().unwrap().to_string();
            let url = format!("http://{host}{}", sent.target);
            let credentials = Credentials::new(
                self.key_id,
                self.secret,
                self.session_token.map(str::to_string),
                None,
                "test",
            );
            let identity = credentials.into();
            let mut settings = SigningSettings::default();
            if self.content_sha256 {
                settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
            }
            let params = v4::SigningParams::builder()
                .identity(&identity)
                .region(self.region)
                .name(self.service)
                .time(self.at.into())
                .settings(settings)
                .build()
                .unwrap()
                .into();
            let headers: Vec<(String, String)> = sent
                .headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_string()))
                .collect();
            let signable = SignableRequest::new(
                &sent.method,
                url,
                headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
                SignableBody::Bytes(&sent.body),
            )
            .unwrap();
            let (instructions, _) = sign(signable, &params).unwrap().into_parts();
            let added: Vec<(String, String)> = instructions
                .headers()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            for (name, value) in added {
                sent.set(&name, &value);
            }
            sent
        }
    }

    /// A SendMessage of SQS's JSON protocol, as the SDKs send it.
    const SEND_JSON: &str = "POST /\nHost:127.0.0.1:8080\n\
        Content-Type:application/x-amz-json-1.0\nX-Amz-Target:AmazonSQS.SendMessage\n\
        X-Amzn-Query-Mode:true\nContent-Length:75\n\n\
        {\"QueueUrl\":\"http://127.0.0.1:8080/123456789012/orders\",\"MessageBody\":\"hi\"}";

    /// The same in the Query protocol, posted to the queue's URL.
    const SEND_QUERY: &str = "POST /123456789012/orders\nHost:127.0.0.1:8080\n\
        Content-Type:application/x-www-form-urlencoded; charset=utf-8\n\n\
        Action=SendMessage&Version=2012-11-05&MessageBody=hello+world%21";

    /// The Query protocol with its parameters in the URL, some of them encoded.
    const SEND_GET: &str = "GET /123456789012/orders?Action=SendMessage&Version=2012-11-05\
        &MessageBody=caf%C3%A9%20au%20lait%2B%2F%3D&QueueUrl=http%3A%2F%2F127.0.0.1%3A8080\
        %2F123456789012%2Forders\nHost:127.0.0.1:8080";

    #[test]
    fn requests_signed_by_aws_sigv4_verify() {
        let keys = acme_keys();
        let now = SIGNED_AT.into();
        let checksummed = Signer {
            content_sha256: true,
            ..Signer::default()
        };
        let odd_path = "POST /a%20b/c~d\nHost:localhost\nContent-Type:text/plain\n\nx";
        for (signer, request) in [
            (&Signer::default(), SEND_JSON),
            (&Signer::default(), SEND_QUERY),
            (&Signer::default(), SEND_GET),
            (&Signer::default(), odd_path),
            (&checksummed, SEND_JSON),
            (&checksummed, SEND_QUERY),
        ] {
            let sent = signer.sign(request);
            assert_eq!(
                principal_of(&keys, &sent.sqs(), now),
                Ok(acme()),
                "{request}"
            );
        }
    }

    /// Requests botocore 1.44.8 (under boto3 and the AWS CLI) signed with the acme pair at
    /// 2025-06-01T12:00:00Z: a boto3 SendMessage as sent, and the Query protocol's form POST and
    /// GET signed by its `SigV4Auth`. `Host` is the header its HTTP client adds when sending.
    const BOTOCORE: &[(&str, &str)] = &[
        ("boto3-send-message", "POST /\nHost:127.0.0.1:8080\nX-Amz-Target:AmazonSQS.SendMessage\nContent-Type:application/x-amz-json-1.0\nx-amzn-query-mode:true\nX-Amz-Date:20250601T120000Z\nAuthorization:AWS4-HMAC-SHA256 Credential=AKIAACME0001/20250601/local/sqs/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target;x-amzn-query-mode, Signature=23819e690a587132efb5ed2e82676608f07ca028e6d963d3a611330371533061\namz-sdk-request:attempt=1; max=3\nContent-Length:171\n\n{\"QueueUrl\": \"http://127.0.0.1:8080/123456789012/orders\", \"MessageBody\": \"caf\\u00e9 \\u2713\", \"MessageAttributes\": {\"Color\": {\"DataType\": \"String\", \"StringValue\": \"blue\"}}}"),
        ("botocore-query-post", "POST /123456789012/orders\nHost:127.0.0.1:8080\nContent-Type:application/x-www-form-urlencoded; charset=utf-8\nX-Amz-Date:20250601T120000Z\nAuthorization:AWS4-HMAC-SHA256 Credential=AKIAACME0001/20250601/local/sqs/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=b21998fdf9b828261d6089fc4a49be833c4632c7c4dcae9c7e6fd451052812f4\nContent-Length:64\n\nAction=SendMessage&Version=2012-11-05&MessageBody=hello+world%21"),
        ("botocore-query-get", "GET /123456789012/orders?Action=SendMessage&Version=2012-11-05&MessageBody=caf%C3%A9+au+lait%2B%2F%3D+~%2A&QueueUrl=http%3A%2F%2F127.0.0.1%3A8080%2F123456789012%2Forders\nHost:127.0.0.1:8080\nX-Amz-Date:20250601T120000Z\nAuthorization:AWS4-HMAC-SHA256 Credential=AKIAACME0001/20250601/local/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=56f606ccd648526983fae6d76b5b6d627329c84a08c9d9965eaa8ad35e318955"),
    ];

    #[test]
    fn requests_signed_by_botocore_verify() {
        let keys = acme_keys();
        for (name, request) in BOTOCORE {
            let sent = Sent::parse(request);
            assert_eq!(
                principal_of(&keys, &sent.sqs(), SIGNED_AT.into()),
                Ok(acme()),
                "{name}"
            );
        }
    }

    #[test]
    fn an_http2_request_signs_its_authority_as_host() {
        let keys = acme_keys();
        let mut sent = Signer::default().sign(SEND_JSON);
        sent.headers.remove(HOST);
        let request = sent.sqs();
        assert_eq!(
            principal_of(&keys, &request, SIGNED_AT.into()),
            Err(SigV4Error::MissingSignedHeader("host".into()))
        );
        let request = SignedRequest {
            authority: Some("127.0.0.1:8080"),
            ..request
        };
        assert_eq!(principal_of(&keys, &request, SIGNED_AT.into()), Ok(acme()));
    }

    /// What a test changes in a request, and how.
    type Change = (&'static str, fn(&mut Sent));

    #[test]
    fn a_request_changed_after_signing_is_refused() {
        let keys = acme_keys();
        let now = SIGNED_AT.into();
        let changes: [Change; 6] = [
            ("body", |sent| sent.body.push(b' ')),
            ("method", |sent| sent.method = "PUT".into()),
            ("path", |sent| sent.target = "/123456789012/other".into()),
            ("query", |sent| sent.target.push_str("?Extra=1")),
            ("signed header", |sent| {
                sent.set("x-amz-target", "AmazonSQS.DeleteQueue")
            }),
            ("date", |sent| sent.set("x-amz-date", "20250601T120001Z")),
        ];
        for (what, change) in changes {
            let mut sent = Signer::default().sign(SEND_JSON);
            change(&mut sent);
            assert_eq!(
                principal_of(&keys, &sent.sqs(), now),
                Err(SigV4Error::SignatureMismatch),
                "{what}"
            );
        }
        let mut sent = Signer::default().sign(SEND_JSON);
        sent.set("user-agent", "not signed, so free to change");
        assert_eq!(principal_of(&keys, &sent.sqs(), now), Ok(acme()));
        let wrong_secret = Signer {
            secret: "another secret",
            ..Signer::default()
        };
        let sent = wrong_secret.sign(SEND_JSON);
        assert_eq!(
            principal_of(&keys, &sent.sqs(), now),
            Err(SigV4Error::SignatureMismatch)
        );
    }

    #[test]
    fn the_date_must_be_within_fifteen_minutes_of_the_clock() {
        let keys = acme_keys();
        let sent = Signer::default().sign(SEND_JSON);
        let window = time::Duration::minutes(15);
        let second = time::Duration::seconds(1);
        for now in [SIGNED_AT - window, SIGNED_AT, SIGNED_AT + window] {
            assert_eq!(principal_of(&keys, &sent.sqs(), now.into()), Ok(acme()));
        }
        let late = principal_of(&keys, &sent.sqs(), (SIGNED_AT + window + second).into());
        let late = late.unwrap_err();
        assert!(matches!(late, SigV4Error::Expired { .. }), "{late:?}");
        assert_eq!(
            late.to_string(),
            "Signature expired: 20250601T120000Z is now earlier than 20250601T120001Z \
             (20250601T121501Z - 15 min.)"
        );
        let early = principal_of(&keys, &sent.sqs(), (SIGNED_AT - window - second).into());
        let early = early.unwrap_err();
        assert!(
            matches!(early, SigV4Error::NotYetCurrent { .. }),
            "{early:?}"
        );
        assert_eq!(
            early.to_string(),
            "Signature not yet current: 20250601T120000Z is still later than 20250601T115959Z \
             (20250601T114459Z + 15 min.)"
        );
    }

    #[test]
    fn the_scope_must_name_the_date_region_and_service() {
        let keys = acme_keys();
        let now = SIGNED_AT.into();
        for (signer, expected) in [
            (
                Signer {
                    region: "us-east-1",
                    ..Signer::default()
                },
                "Credential should be scoped to a valid region, not 'us-east-1': this server's \
                 region is 'local'",
            ),
            (
                Signer {
                    service: "sns",
                    ..Signer::default()
                },
                "Credential should be scoped to correct service: 'sqs', not 'sns'",
            ),
        ] {
            let sent = signer.sign(SEND_JSON);
            let refused = principal_of(&keys, &sent.sqs(), now);
            assert_eq!(refused, Err(SigV4Error::Scope(expected.into())));
        }
        let mut sent = Signer::default().sign(SEND_JSON);
        let authorization = sent.headers[AUTHORIZATION].to_str().unwrap();
        let other_day = authorization.replace("/20250601/", "/20250602/");
        sent.set("authorization", &other_day);
        let refused = principal_of(&keys, &sent.sqs(), now).unwrap_err();
        assert!(matches!(refused, SigV4Error::Scope(_)), "{refused:?}");
    }

    #[test]
    fn a_signed_header_must_be_in_the_request() {
        let keys = acme_keys();
        let mut sent = Signer::default().sign(SEND_JSON);
        sent.headers.remove("x-amz-target");
        assert_eq!(
            principal_of(&keys, &sent.sqs(), SIGNED_AT.into()),
            Err(SigV4Error::MissingSignedHeader("x-amz-target".into()))
        );
    }

    #[test]
    fn the_content_sha256_header_must_be_the_bodys() {
        let keys = acme_keys();
        let now = SIGNED_AT.into();
        let signer = Signer {
            content_sha256: true,
            ..Signer::default()
        };
        let mut sent = signer.sign(SEND_JSON);
        sent.body.push(b' ');
        assert_eq!(
            principal_of(&keys, &sent.sqs(), now),
            Err(SigV4Error::BodyHash)
        );
        let mut sent = Signer::default().sign(SEND_JSON);
        sent.set("x-amz-content-sha256", "UNSIGNED-PAYLOAD");
        assert_eq!(
            principal_of(&keys, &sent.sqs(), now),
            Err(SigV4Error::BodyHash)
        );
    }

    #[test]
    fn session_credentials_are_refused() {
        let signer = Signer {
            session_token: Some("FwoGZXIvYXdzEXAMPLE"),
            ..Signer::default()
        };
        let sent = signer.sign(SEND_JSON);
        assert_eq!(
            principal_of(&acme_keys(), &sent.sqs(), SIGNED_AT.into()),
            Err(SigV4Error::SessionToken)
        );
    }

    #[test]
    fn unknown_and_expired_access_keys_are_refused() {
        let keys = acme_keys();
        let now = SIGNED_AT.into();
        let unknown = Signer {
            key_id: "AKIANOBODY",
            ..Signer::default()
        };
        let sent = unknown.sign(SEND_JSON);
        let refused = principal_of(&keys, &sent.sqs(), now);
        assert_eq!(
            refused,
            Err(SigV4Error::UnknownAccessKey("AKIANOBODY".into()))
        );
        let bearer_key_as_access_key = Signer {
            key_id: "bearer",
            ..Signer::default()
        };
        let sent = bearer_key_as_access_key.sign(SEND_JSON);
        let refused = principal_of(&keys, &sent.sqs(), now);
        assert_eq!(refused, Err(SigV4Error::UnknownAccessKey("bearer".into())));
        let expired = Signer {
            key_id: "AKIAOLD",
            ..Signer::default()
        };
        let sent = expired.sign(SEND_JSON);
        assert_eq!(
            principal_of(&keys, &sent.sqs(), now),
            Err(SigV4Error::ExpiredAccessKey {
                access_key_id: "AKIAOLD".into(),
                at: "2025-06-01T11:00:00Z".into()
            })
        );
    }

    #[test]
    fn a_missing_or_malformed_authorization_is_refused_with_its_reason() {
        let keys = acme_keys();
        let now = SIGNED_AT.into();
        let mut sent = Signer::default().sign(SEND_JSON);
        let good = sent.headers[AUTHORIZATION].to_str().unwrap().to_string();
        sent.headers.remove(AUTHORIZATION);
        assert_eq!(
            principal_of(&keys, &sent.sqs(), now),
            Err(SigV4Error::MissingAuthorization)
        );
        let signature = good.split("Signature=").nth(1).unwrap().to_string();
        let credential = format!("Credential={KEY_ID}/20250601/local/sqs/aws4_request");
        let cases = [
            (
                "Bearer abc".to_string(),
                "Unsupported Authorization algorithm 'Bearer'",
            ),
            ("AWS4-HMAC-SHA256".into(), "requires 'Credential' parameter"),
            (
                format!("AWS4-HMAC-SHA256 {credential}, Signature={signature}"),
                "requires 'SignedHeaders' parameter",
            ),
            (
                format!("AWS4-HMAC-SHA256 {credential}, SignedHeaders=host;x-amz-date"),
                "requires 'Signature' parameter",
            ),
            (
                format!("AWS4-HMAC-SHA256 {credential}, {credential}"),
                "gives 'Credential' twice",
            ),
            (
                format!("AWS4-HMAC-SHA256 {credential}, Region=x"),
                "unknown parameter 'Region'",
            ),
            (
                "AWS4-HMAC-SHA256 Credential=AKIA/20250601/local/sqs, SignedHeaders=host, \
                 Signature=00"
                    .into(),
                "must be <access key id>/<YYYYMMDD>/<region>/<service>/aws4_request",
            ),
            (
                format!(
                    "AWS4-HMAC-SHA256 Credential={KEY_ID}/20250601/local/sqs/aws5_request, \
                     SignedHeaders=host, Signature={signature}"
                ),
                "valid terminator: 'aws4_request', not 'aws5_request'",
            ),
            (
                format!(
                    "AWS4-HMAC-SHA256 {credential}, SignedHeaders=x-amz-date;host, \
                     Signature={signature}"
                ),
                "in ascending order",
            ),
            (
                format!(
                    "AWS4-HMAC-SHA256 {credential}, SignedHeaders=Host;x-amz-date, \
                     Signature={signature}"
                ),
                "must be lowercase header names",
            ),
            (
                format!(
                    "AWS4-HMAC-SHA256 {credential}, SignedHeaders=x-amz-date, \
                     Signature={signature}"
                ),
                "SignedHeaders must include host",
            ),
            (
                format!(
                    "AWS4-HMAC-SHA256 {credential}, SignedHeaders=host, \
                     Signature={}",
                    signature.to_uppercase()
                ),
                "must be 64 lowercase hex digits",
            ),
            (
                format!("AWS4-HMAC-SHA256 {credential}, SignedHeaders=host, Signature=abc"),
                "must be 64 lowercase hex digits",
            ),
        ];
        for (authorization, reason) in cases {
            sent.set("authorization", &authorization);
            match principal_of(&keys, &sent.sqs(), now) {
                Err(SigV4Error::Malformed(message)) => {
                    assert!(message.contains(reason), "{authorization}: {message}")
                }
                other => panic!("{authorization}: {other:?}"),
            }
        }
        sent.set("authorization", &good);
        sent.add("authorization", &good);
        let refused = principal_of(&keys, &sent.sqs(), now).unwrap_err();
        assert!(matches!(refused, SigV4Error::Malformed(_)), "{refused:?}");
    }

    #[test]
    fn the_date_header_is_required_in_its_basic_form() {
        let keys = acme_keys();
        let now = SIGNED_AT.into();
        let mut sent = Signer::default().sign(SEND_JSON);
        for date in [
            "2025-06-01T12:00:00Z",
            "20250601T120000",
            "Sun, 01 Jun 2025 12:00:00 GMT",
        ] {
            sent.set("x-amz-date", date);
            match principal_of(&keys, &sent.sqs(), now) {
                Err(SigV4Error::Malformed(message)) => {
                    assert!(message.contains("X-Amz-Date"), "{message}")
                }
                other => panic!("{date}: {other:?}"),
            }
        }
        sent.headers.remove("x-amz-date");
        let refused = principal_of(&keys, &sent.sqs(), now).unwrap_err();
        assert_eq!(
            refused,
            SigV4Error::Malformed("Authorization header requires the X-Amz-Date header".into())
        );
    }

    #[test]
    fn a_reload_takes_effect_on_the_next_request() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("keys.toml");
        let file = |secret: &str| {
            format!(
                "[[keys]]\naccount = \"acme\"\nrole = \"admin\"\naccess_key_id = \"{KEY_ID}\"\n\
                 secret_access_key = \"{secret}\"\n"
            )
        };
        std::fs::write(&path, file(SECRET)).unwrap();
        let keys = raftq_api::load_keys(&path).unwrap();
        let now = SIGNED_AT.into();
        let old = Signer::default().sign(SEND_JSON);
        assert_eq!(principal_of(&keys, &old.sqs(), now), Ok(acme()));
        std::fs::write(&path, file("rotated")).unwrap();
        keys.reload(&path).unwrap();
        assert_eq!(
            principal_of(&keys, &old.sqs(), now),
            Err(SigV4Error::SignatureMismatch)
        );
        let rotated = Signer {
            secret: "rotated",
            ..Signer::default()
        };
        let new = rotated.sign(SEND_JSON);
        assert_eq!(principal_of(&keys, &new.sqs(), now), Ok(acme()));
        std::fs::write(&path, "[[keys]]\naccount = \"acme\"\nkey = \"bearer\"\n").unwrap();
        keys.reload(&path).unwrap();
        assert_eq!(
            principal_of(&keys, &new.sqs(), now),
            Err(SigV4Error::UnknownAccessKey(KEY_ID.into()))
        );
    }

    #[test]
    fn open_mode_takes_any_credentials_or_none() {
        let keys = Keys::open();
        let dev = Principal {
            account: raftq_api::OPEN_ACCOUNT.into(),
            role: Role::Admin,
        };
        let signed = Signer::default().sign(SEND_JSON);
        let mut unsigned = Signer::default().sign(SEND_JSON);
        unsigned.headers.remove(AUTHORIZATION);
        let mut garbage = Signer::default().sign(SEND_JSON);
        garbage.set("authorization", "whatever");
        for sent in [&signed, &unsigned, &garbage] {
            assert_eq!(
                authenticate(&keys, &sent.sqs(), SystemTime::UNIX_EPOCH),
                Ok(Signed {
                    principal: dev.clone(),
                    key: None
                })
            );
        }
    }

    #[test]
    fn the_limits_count_a_request_by_the_access_key_that_signed_it() {
        let keys = Keys::from_toml(&format!(
            "[[keys]]\naccount = \"acme\"\naccess_key_id = \"{KEY_ID}\"\n\
             secret_access_key = \"{SECRET}\"\n\
             [[keys]]\naccount = \"acme\"\naccess_key_id = \"AKIAACME0002\"\n\
             secret_access_key = \"{SECRET}\"\n"
        ))
        .unwrap();
        let now = SIGNED_AT.into();
        let key_of = |signer: &Signer| {
            let sent = signer.sign(SEND_JSON);
            authenticate(&keys, &sent.sqs(), now).unwrap().key.unwrap()
        };
        let first = key_of(&Signer::default());
        assert_eq!(first, key_of(&Signer::default()));
        let second = Signer {
            key_id: "AKIAACME0002",
            ..Signer::default()
        };
        assert_ne!(first, key_of(&second));
    }

    #[test]
    fn a_request_of_parts_keeps_its_raw_path_query_and_authority() {
        let (parts, ()) =
            axum::http::Request::post("http://127.0.0.1:8080/123456789012/a%20b?Action=X&B=%2F")
                .body(())
                .unwrap()
                .into_parts();
        let request = SignedRequest::new("sqs", "local", &parts, b"body");
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/123456789012/a%20b");
        assert_eq!(request.query, "Action=X&B=%2F");
        assert_eq!(request.authority, Some("127.0.0.1:8080"));
        assert_eq!(request.body, b"body");
    }
}
