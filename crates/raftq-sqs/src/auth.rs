//! Who an SQS request is made by: the one place where a request's credentials become an
//! account.
//!
//! SQS clients sign their requests with AWS Signature Version 4 rather than sending raftq's
//! `Bearer` API keys. The signature is checked against the secret the key table holds for the
//! access key that made it ([`sigv4::authenticate`]: the credential scope must name service `sqs`
//! and the server's region, the date must be within 15 minutes, the signed headers and the body's
//! hash must match); the access key's account is the caller. Without a key file the server runs
//! in open mode, and any credentials (or none) are the account `dev`, as for REST and gRPC.

use std::time::SystemTime;

use axum::http::request::Parts;
use raftq_api::Keys;

use crate::error::{Kind, SqsError};
use crate::sigv4::{self, SigV4Error, Signed, SignedRequest};

/// The service a signature's credential scope must name.
const SERVICE: &str = "sqs";

/// Who made a request (its head and its whole body, which the signature covers), on a server
/// of `region`.
pub fn requester(
    keys: &Keys,
    region: &str,
    request: &Parts,
    body: &[u8],
) -> Result<Signed, SqsError> {
    let request = SignedRequest::new(SERVICE, region, request, body);
    sigv4::authenticate(keys, &request, SystemTime::now()).map_err(refused)
}

/// SQS's error for a refused signature.
fn refused(e: SigV4Error) -> SqsError {
    let kind = match &e {
        SigV4Error::MissingAuthorization => Kind::MissingAuthenticationToken,
        SigV4Error::Malformed(_) => Kind::IncompleteSignature,
        SigV4Error::UnknownAccessKey(_)
        | SigV4Error::ExpiredAccessKey { .. }
        | SigV4Error::SessionToken => Kind::InvalidClientTokenId,
        SigV4Error::Expired { .. } | SigV4Error::NotYetCurrent { .. } => Kind::RequestExpired,
        _ => Kind::SignatureDoesNotMatch,
    };
    SqsError::new(kind, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(authorization: Option<&str>) -> Parts {
        let mut request = axum::http::Request::post("/").header("host", "localhost");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        request.body(()).unwrap().into_parts().0
    }

    const UNDATED: &str = "AWS4-HMAC-SHA256 Credential=AKIDACME/20260101/local/sqs/aws4_request, SignedHeaders=host, Signature=00";

    const KEYS: &str = "[[keys]]\naccount = \"acme\"\naccess_key_id = \"AKIDACME\"\nsecret_access_key = \"secret\"\n";

    #[test]
    fn open_mode_is_account_dev_whatever_the_credentials() {
        let unsigned = request(None);
        assert_eq!(
            requester(&Keys::open(), "local", &unsigned, b"{}")
                .unwrap()
                .principal
                .account,
            "dev"
        );
        let signed = request(Some(
            "AWS4-HMAC-SHA256 Credential=AKID/20260101/local/sqs/aws4_request, SignedHeaders=host, Signature=00",
        ));
        assert_eq!(
            requester(&Keys::open(), "local", &signed, b"{}")
                .unwrap()
                .principal
                .account,
            "dev"
        );
    }

    #[test]
    fn with_a_key_file_refused_signatures_get_sqs_codes() {
        let keys = Keys::from_toml(KEYS).unwrap();
        let code = |authorization: Option<&str>| {
            requester(&keys, "local", &request(authorization), b"")
                .unwrap_err()
                .code()
        };
        assert_eq!(code(None), "MissingAuthenticationToken");
        assert_eq!(
            code(Some("AWS4-HMAC-SHA256 nonsense")),
            "IncompleteSignature"
        );
        // A missing X-Amz-Date makes a signature incomplete too; unknown keys and wrong
        // secrets are checked with the SDK's real signatures (tests/integration/sqs.rs).
        let e = requester(&keys, "local", &request(Some(UNDATED)), b"").unwrap_err();
        assert_eq!((e.code(), e.kind.status()), ("IncompleteSignature", 400));
    }
}
