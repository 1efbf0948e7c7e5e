//! The client listener: REST and gRPC on one port, in plaintext or over TLS, HTTP/1.1 and
//! HTTP/2 on the same connection type (ALPN over TLS, the HTTP/2 preface in plaintext). Over TLS
//! the certificate is reloaded when its files change or on `SIGHUP`: connections already open
//! keep the certificate they started with, new ones get the new one.
//!
//! Headers are bounded before they are read whole, and must arrive in time: a client that
//! sends them slower (a slowloris) loses its connection. HTTP/2 connections are pinged, so a
//! peer that vanished is found. Every request carries its connection's remote address, which
//! the per-connection limits count by.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum_server::accept::{TcpConfigAcceptor, TcpSocketConfig};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use axum_server::Handle;

/// How long a client has to send a request's headers (HTTP/1.1); TLS handshakes have as long.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The most header bytes one request may send (HTTP/1.1's read buffer, HTTP/2's header list).
const HEADER_BYTES: usize = 64 * 1024;

/// How often an idle HTTP/2 connection is pinged, and how long its answer may take.
const PING_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// The client listener's certificate and, when clients must show one, their CA: the files they
/// came from and what they held at the start.
pub struct ClientTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
    pub config: Arc<rustls::ServerConfig>,
}

impl ClientTls {
    /// Reads `cert`, `key` and `client_ca`.
    pub fn load(
        cert: PathBuf,
        key: PathBuf,
        client_ca: Option<PathBuf>,
    ) -> Result<ClientTls, crate::tls::TlsError> {
        let config = crate::tls::server_config(&cert, &key, client_ca.as_deref())?;
        Ok(ClientTls {
            cert,
            key,
            client_ca,
            config,
        })
    }

    /// The configuration new connections use, swapped whenever the files change.
    fn live(self) -> RustlsConfig {
        let live = RustlsConfig::from_config(self.config);
        let swapped = live.clone();
        let (cert, key, client_ca) = (self.cert, self.key, self.client_ca);
        let mut files = vec![cert.clone(), key.clone()];
        files.extend(client_ca.clone());
        crate::watch::spawn(files, move || {
            match crate::tls::server_config(&cert, &key, client_ca.as_deref()) {
                Ok(config) => {
                    swapped.reload_from_config(config);
                    tracing::info!(cert = %cert.display(), "TLS certificate reloaded");
                }
                Err(e) => tracing::error!(
                    error = %e,
                    "TLS certificate not reloaded: the one loaded before stays in use"
                ),
            }
        });
        live
    }
}

/// Serves `app` on `listener` until `stop` resolves, then lets the requests under way finish.
pub async fn serve(
    listener: std::net::TcpListener,
    app: raftq_api::Front,
    tls: Option<ClientTls>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let handle: Handle<SocketAddr> = Handle::new();
    let stopping = handle.clone();
    tokio::spawn(async move {
        stop.await;
        stopping.graceful_shutdown(None);
    });
    // No Nagle delays on small answers (gRPC writes headers, message and trailers apart).
    let tcp = TcpConfigAcceptor::new(TcpSocketConfig::new().nodelay(true));
    let mut server = axum_server::from_tcp(listener)?.handle(handle);
    let http = server.http_builder();
    http.http1()
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(HEADER_BYTES);
    http.http2()
        .max_header_list_size(HEADER_BYTES as u32)
        .keep_alive_interval(PING_INTERVAL)
        .keep_alive_timeout(PING_TIMEOUT);
    let app = axum::Router::new()
        .fallback_service(app)
        .into_make_service_with_connect_info::<SocketAddr>();
    match tls {
        None => server.acceptor(tcp).serve(app).await,
        Some(tls) => {
            let acceptor = RustlsAcceptor::new(tls.live())
                .handshake_timeout(HEADER_TIMEOUT)
                .acceptor(tcp);
            server.acceptor(acceptor).serve(app).await
        }
    }
}
