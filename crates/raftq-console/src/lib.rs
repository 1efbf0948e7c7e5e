//! # raftq-console
//!
//! The web console every node serves at `/console`: one HTML page, its script, its style sheet
//! and its icon, compiled into the binary. The page is a client of the REST API (`/v1/...`) on
//! the same origin, with the API key the operator signs in with kept in the browser's session
//! storage; this crate only serves the files, so every rule of the queues stays in the
//! operations layer behind the API.
//!
//! Every answer carries security headers: a Content-Security-Policy that allows scripts, styles,
//! images and requests from this origin only (no inline script or style, no framing, no form
//! posts), `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`. Files are
//! served with `Cache-Control: no-cache` and an `ETag` of their content, so a browser asks again
//! each time and gets `304 Not Modified` until a new binary serves other files.
//!
//! What the pages do is described in `docs/console.md`.

use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// Where the console is served.
pub const CONSOLE_PATH: &str = "/console";

/// The policy of every console answer: everything from this origin only, no inline script or
/// style, no plug-ins, never inside a frame, no form posts (forms are sent by the script).
pub const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// One file of the console.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// The page itself, served at `/console` and `/console/`.
const PAGE: Asset = Asset {
    name: "index.html",
    content_type: "text/html; charset=utf-8",
    body: include_bytes!("../assets/index.html"),
};

/// The files the page loads, served under `/console/assets/`.
const ASSETS: &[Asset] = &[
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../assets/console.js"),
    },
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../assets/console.css"),
    },
    Asset {
        name: "icon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../assets/icon.svg"),
    },
];

impl Asset {
    /// A strong entity tag of the content: the 64-bit FNV-1a hash of its bytes, in hex.
    fn etag(&self) -> String {
        let hash = self.body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("\"{hash:016x}\"")
    }

    /// The file, or `304 Not Modified` when the browser already holds this content.
    fn answer(&self, request: &HeaderMap) -> Response {
        let etag = self.etag();
        let held = request
            .get(IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
        let headers = [
            (CACHE_CONTROL, "no-cache".to_string()),
            (ETAG, etag),
            (CONTENT_TYPE, self.content_type.to_string()),
        ];
        if held {
            return (StatusCode::NOT_MODIFIED, headers).into_response();
        }
        (headers, self.body).into_response()
    }
}

async fn page(request: HeaderMap) -> Response {
    PAGE.answer(&request)
}

async fn asset(Path(name): Path<String>, request: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => asset.answer(&request),
        None => (
            StatusCode::NOT_FOUND,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            "no such console file",
        )
            .into_response(),
    }
}

/// Adds the security headers to a console answer.
async fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// The console's routes: the page at `/console` and `/console/`, its files under
/// `/console/assets/{name}`.
pub fn router() -> Router {
    Router::new()
        .route(CONSOLE_PATH, get(page))
        .route("/console/", get(page))
        .route("/console/assets/{name}", get(asset))
        .layer(axum::middleware::map_response(secured))
}

#[cfg(test)]
mod tests {
    use axum::body::{to_bytes, Body};
    use axum::http::{Method, Request};
    use tower_service::Service;

    use super::*;

    async fn fetch(method: Method, path: &str, if_none_match: Option<&str>) -> Response {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(tag) = if_none_match {
            request = request.header(IF_NONE_MATCH, tag);
        }
        let request = request.body(Body::empty()).expect("a valid request");
        match router().call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    fn header<'a>(response: &'a Response, name: &str) -> &'a str {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    async fn text(response: Response) -> String {
        let bytes = to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body in memory");
        String::from_utf8(bytes.to_vec()).expect("UTF-8")
    }

    #[tokio::test]
    async fn console_page_is_served_with_and_without_trailing_slash() {
        for path in ["/console", "/console/"] {
            let response = fetch(Method::GET, path, None).await;
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            assert_eq!(
                header(&response, "content-type"),
                "text/html; charset=utf-8"
            );
            let body = text(response).await;
            assert!(body.contains("/console/assets/console.js"), "{path}");
        }
    }

    #[tokio::test]
    async fn every_asset_is_served_with_its_content_type() {
        for asset in ASSETS {
            let response = fetch(
                Method::GET,
                &format!("/console/assets/{}", asset.name),
                None,
            )
            .await;
            assert_eq!(response.status(), StatusCode::OK, "{}", asset.name);
            assert_eq!(header(&response, "content-type"), asset.content_type);
            let body = to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("a body in memory");
            assert_eq!(&body[..], asset.body, "{}", asset.name);
        }
    }

    #[tokio::test]
    async fn page_loads_only_files_the_router_serves() {
        let page = text(fetch(Method::GET, "/console", None).await).await;
        let referenced: Vec<&str> = page
            .split("\"/console/assets/")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert!(!referenced.is_empty());
        for name in referenced {
            assert!(
                ASSETS.iter().any(|a| a.name == name),
                "{name} is not served"
            );
        }
        assert!(
            !page.contains("<script>"),
            "inline scripts are refused by the policy"
        );
        assert!(
            !page.contains("style="),
            "inline styles are refused by the policy"
        );
    }

    #[tokio::test]
    async fn unknown_asset_is_not_found_with_security_headers() {
        let response = fetch(Method::GET, "/console/assets/secret.txt", None).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(header(&response, "content-security-policy"), POLICY);
    }

    #[tokio::test]
    async fn every_answer_carries_the_security_headers() {
        for path in ["/console", "/console/assets/console.js"] {
            let response = fetch(Method::GET, path, None).await;
            let policy = header(&response, "content-security-policy");
            assert_eq!(policy, POLICY);
            assert!(policy.contains("script-src 'self';"), "{policy}");
            assert!(!policy.contains("unsafe-inline"), "{policy}");
            assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
            assert_eq!(header(&response, "x-content-type-options"), "nosniff");
            assert_eq!(header(&response, "referrer-policy"), "no-referrer");
            assert_eq!(header(&response, "x-frame-options"), "DENY");
        }
    }

    #[tokio::test]
    async fn files_are_revalidated_by_their_etag() {
        let response = fetch(Method::GET, "/console/assets/console.css", None).await;
        assert_eq!(header(&response, "cache-control"), "no-cache");
        let etag = header(&response, "etag").to_string();
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && etag.len() == 18,
            "{etag}"
        );

        let again = fetch(Method::GET, "/console/assets/console.css", Some(&etag)).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(header(&again, "etag"), etag);
        assert!(text(again).await.is_empty());

        let listed = format!("\"0000000000000000\", {etag}");
        let among = fetch(Method::GET, "/console/assets/console.css", Some(&listed)).await;
        assert_eq!(among.status(), StatusCode::NOT_MODIFIED);

        let stale = fetch(Method::GET, "/console/assets/console.css", Some("\"0\"")).await;
        assert_eq!(stale.status(), StatusCode::OK);
    }

    #[test]
    fn etags_differ_between_files() {
        let tags: std::collections::BTreeSet<String> = ASSETS.iter().map(Asset::etag).collect();
        assert_eq!(tags.len(), ASSETS.len());
        assert_ne!(PAGE.etag(), ASSETS[0].etag());
    }

    #[tokio::test]
    async fn other_methods_are_refused() {
        let response = fetch(Method::POST, "/console", None).await;
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
