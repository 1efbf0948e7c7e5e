//! # raftq-h2
//!
//! A tonic transport straight over one HTTP/2 connection (the `h2` crate), for calls between
//! nodes and for the load generator's gRPC client.
//!
//! tonic's `Channel` hands each call to a buffer task, which hands it to hyper's connection
//! task, which spawns a task per call to pipe its body and another to await its answer: four
//! task hops per call, each a wake-up on machines where the nodes share few cores. Here the
//! calling task opens the stream, writes the encoded request and reads the answer itself; only
//! the connection's reads and writes run in another task (and, for a streaming call, the writing
//! of its requests). tonic still encodes, decodes and maps the `grpc-status`.
//!
//! The connection is made on the first call, over TCP with `TCP_NODELAY` and, when a TLS
//! configuration is given, TLS. It is made again by the first call after it broke. The
//! connecting runs in a task of its own, so a call that gives up waiting for it does not undo
//! it for the next one. A call has no deadline of its own: the caller bounds it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use http_body::Frame;
use http_body_util::BodyExt;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

/// Where and how a channel connects.
#[derive(Debug, Clone)]
pub struct Target {
    /// `host:port`.
    pub authority: String,
    /// TLS on the connection, with this configuration; `None`: plaintext HTTP/2.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// How long each step of making the connection (TCP, then TLS) may take.
    pub connect_timeout: Duration,
    /// HTTP/2 flow-control window of each stream and of the connection; `None`: h2's default.
    pub window: Option<u32>,
}

impl Target {
    /// Plaintext HTTP/2 to `authority`, with a connect timeout of `connect_timeout` and h2's
    /// default windows.
    pub fn plain(authority: impl Into<String>, connect_timeout: Duration) -> Target {
        Target {
            authority: authority.into(),
            tls: None,
            connect_timeout,
            window: None,
        }
    }
}

/// Why a call failed before its answer's status could be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No connection could be made (TCP or TLS): nothing of the call was sent.
    #[error("connecting to {authority}: {source}")]
    Connect {
        authority: String,
        #[source]
        source: io::Error,
    },
    /// The connection failed or was refused at the HTTP/2 level, or broke during the call: the
    /// request may have been received.
    #[error("HTTP/2: {0}")]
    H2(#[from] h2::Error),
    /// tonic could not encode the request.
    #[error("request body: {0}")]
    Body(#[source] tonic::Status),
}

/// One HTTP/2 connection at a time to a target; clones share it.
#[derive(Debug, Clone)]
pub struct H2Channel {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    target: Target,
    slot: Mutex<Slot>,
    /// Numbers connections, so that the end of one does not clear its successor.
    generations: AtomicU64,
}

#[derive(Debug)]
enum Slot {
    Idle,
    Connecting(
        JoinHandle<Result<h2::client::SendRequest<Bytes>, Error>>,
        u64,
    ),
    Live(h2::client::SendRequest<Bytes>, u64),
}

impl H2Channel {
    /// A channel to `target`; it connects on its first call.
    pub fn new(target: Target) -> H2Channel {
        H2Channel {
            shared: Arc::new(Shared {
                target,
                slot: Mutex::new(Slot::Idle),
                generations: AtomicU64::new(0),
            }),
        }
    }

    /// Connects now, unless connected: to learn at once whether the target can be reached.
    pub async fn connect(&self) -> Result<(), Error> {
        self.sender().await.map(|_| ())
    }

    /// A handle on the live connection, made first when there is none.
    async fn sender(&self) -> Result<(h2::client::SendRequest<Bytes>, u64), Error> {
        let mut slot = self.shared.slot.lock().await;
        if let Slot::Idle = *slot {
            let generation = self.shared.generations.fetch_add(1, Ordering::Relaxed);
            let connecting = tokio::spawn(connect(
                self.shared.target.clone(),
                Arc::downgrade(&self.shared),
                generation,
            ));
            *slot = Slot::Connecting(connecting, generation);
        }
        if let Slot::Connecting(connecting, generation) = &mut *slot {
            let generation = *generation;
            // Cancelling this call leaves the task and its handle in the slot for the next one.
            let made = connecting.await;
            *slot = Slot::Idle;
            let send = match made {
                Ok(made) => made?,
                Err(e) => {
                    return Err(Error::Connect {
                        authority: self.shared.target.authority.clone(),
                        source: io::Error::other(e),
                    })
                }
            };
            *slot = Slot::Live(send, generation);
        }
        match &*slot {
            Slot::Live(send, generation) => Ok((send.clone(), *generation)),
            Slot::Idle | Slot::Connecting(..) => Err(Error::Connect {
                authority: self.shared.target.authority.clone(),
                source: io::Error::other("the connection was not made"),
            }),
        }
    }
}

impl Shared {
    /// Forgets connection `generation`, which broke, if it is still the one in use.
    async fn forget(&self, generation: u64) {
        let mut slot = self.slot.lock().await;
        if matches!(*slot, Slot::Live(_, g) if g == generation) {
            *slot = Slot::Idle;
        }
    }
}

/// Makes the connection to `target` and spawns the task that drives it; when it ends, the
/// channel forgets it.
async fn connect(
    target: Target,
    shared: Weak<Shared>,
    generation: u64,
) -> Result<h2::client::SendRequest<Bytes>, Error> {
    let failed = |source: io::Error| Error::Connect {
        authority: target.authority.clone(),
        source,
    };
    let tcp = tokio::time::timeout(
        target.connect_timeout,
        TcpStream::connect(&target.authority),
    )
    .await
    .map_err(|_| failed(io::ErrorKind::TimedOut.into()))?
    .map_err(failed)?;
    tcp.set_nodelay(true).map_err(failed)?;
    let mut builder = h2::client::Builder::new();
    if let Some(window) = target.window {
        builder
            .initial_window_size(window)
            .initial_connection_window_size(window);
    }
    match &target.tls {
        None => handshake(builder, tcp, shared, generation).await,
        Some(config) => {
            let host = target
                .authority
                .rsplit_once(':')
                .map_or(target.authority.as_str(), |(host, _)| host)
                .trim_start_matches('[')
                .trim_end_matches(']');
            let name = ServerName::try_from(host.to_string())
                .map_err(|e| failed(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
            let tls = tokio::time::timeout(
                target.connect_timeout,
                TlsConnector::from(Arc::clone(config)).connect(name, tcp),
            )
            .await
            .map_err(|_| failed(io::ErrorKind::TimedOut.into()))?
            .map_err(failed)?;
            handshake(builder, tls, shared, generation).await
        }
    }
}

/// The HTTP/2 handshake over `io`, then the connection driven in a task of its own.
async fn handshake<T>(
    builder: h2::client::Builder,
    io: T,
    shared: Weak<Shared>,
    generation: u64,
) -> Result<h2::client::SendRequest<Bytes>, Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, connection) = builder.handshake(io).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "HTTP/2 connection ended");
        }
        if let Some(shared) = shared.upgrade() {
            shared.forget(generation).await;
        }
    });
    Ok(send)
}

/// What a call fails with, as tonic takes it.
type CallError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<http::Request<tonic::body::Body>> for H2Channel {
    type Response = http::Response<H2Body>;
    type Error = CallError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, CallError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), CallError>> {
        // Readiness is awaited per call, on the connection the call is made on.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let channel = self.clone();
        Box::pin(async move { Ok(channel.send(request).await?) })
    }
}

impl H2Channel {
    async fn send(
        &self,
        request: http::Request<tonic::body::Body>,
    ) -> Result<http::Response<H2Body>, Error> {
        let (parts, mut body) = request.into_parts();
        // A unary call's body is one encoded message, ready at once: it goes out with the
        // headers. A streaming call's body goes on in a task of its own.
        let mut ready = Vec::new();
        let ended = loop {
            match body.frame().now_or_never() {
                Some(Some(frame)) => ready.extend(frame.map_err(Error::Body)?.into_data().ok()),
                Some(None) => break true,
                None => break false,
            }
        };
        let (send, generation) = self.sender().await?;
        let mut send = match send.ready().await {
            Ok(send) => send,
            Err(e) => {
                self.shared.forget(generation).await;
                return Err(e.into());
            }
        };
        let (response, mut stream) =
            send.send_request(http::Request::from_parts(parts, ()), false)?;
        if ended {
            let data = match ready.len() {
                1 => ready.swap_remove(0),
                _ => ready.concat().into(),
            };
            stream.send_data(data, true)?;
        } else {
            for data in ready {
                stream.send_data(data, false)?;
            }
            tokio::spawn(pump(body, stream));
        }
        Ok(response.await?.map(H2Body))
    }
}

/// Writes a streaming call's request body as it comes, then ends the stream. Data is buffered
/// by `h2` beyond the flow-control window: callers bound what a stream has in flight.
async fn pump(mut body: tonic::body::Body, mut stream: h2::SendStream<Bytes>) {
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            if stream.send_data(data, false).is_err() {
                return;
            }
        }
    }
    let _ = stream.send_data(Bytes::new(), true);
}

/// An answer's body: its data frames, then its trailers (where gRPC puts the status).
pub struct H2Body(h2::RecvStream);

impl http_body::Body for H2Body {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let stream = &mut self.0;
        if let Some(data) = ready!(stream.poll_data(cx)) {
            let data = data?;
            // Reading the data frees as much of the flow-control window for the server.
            stream.flow_control().release_capacity(data.len())?;
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(
            ready!(stream.poll_trailers(cx))
                .transpose()
                .map(|t| t.map(Frame::trailers)),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;
    use tower_service::Service;

    /// Answers every request on every connection `listener` accepts with an empty `200`.
    /// Aborting the task closes the connections too: they run in its `JoinSet`.
    fn serve(listener: TcpListener) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                connections.spawn(async move {
                    let Ok(mut connection) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    while let Some(Ok((_, mut respond))) = connection.accept().await {
                        let _ = respond.send_response(http::Response::new(()), true);
                    }
                });
            }
        })
    }

    /// A server (see [`serve`]) on a free loopback port, and a channel to it: the server's
    /// address and task, and the channel.
    async fn served() -> (std::net::SocketAddr, JoinHandle<()>, H2Channel) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = serve(listener);
        let channel = H2Channel::new(Target::plain(addr.to_string(), Duration::from_secs(5)));
        (addr, server, channel)
    }

    fn request() -> http::Request<tonic::body::Body> {
        http::Request::builder()
            .uri("http://raftq.test/ping")
            .body(tonic::body::Body::empty())
            .expect("request")
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = closed.local_addr().expect("addr").to_string();
        drop(closed);
        let channel = H2Channel::new(Target::plain(addr, Duration::from_secs(5)));
        match channel.connect().await {
            Err(Error::Connect { source, .. }) => {
                assert_eq!(source.kind(), io::ErrorKind::ConnectionRefused);
            }
            other => panic!("expected a connect error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn calls_share_one_connection_and_a_broken_one_is_made_again() {
        let (addr, server, mut channel) = served().await;
        for _ in 0..3 {
            let answer = channel.call(request()).await.expect("answered");
            assert_eq!(answer.status(), http::StatusCode::OK);
        }
        assert_eq!(channel.shared.generations.load(Ordering::Relaxed), 1);

        // The server goes away with its connections, and comes back on the same port.
        server.abort();
        let _ = server.await;
        let listener = TcpListener::bind(addr).await.expect("bind again");
        let _server = serve(listener);
        let mut answered = None;
        for _ in 0..50 {
            if let Ok(answer) = channel.call(request()).await {
                answered = Some(answer.status());
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(answered, Some(http::StatusCode::OK));
        assert!(channel.shared.generations.load(Ordering::Relaxed) >= 2);
    }

    #[tokio::test]
    async fn a_call_given_up_while_connecting_leaves_the_connection_to_the_next() {
        let (_, _server, mut channel) = served().await;
        // Given up at its first poll, before the connection could be made.
        assert!(channel.call(request()).now_or_never().is_none());
        let answer = channel.call(request()).await.expect("answered");
        assert_eq!(answer.status(), http::StatusCode::OK);
        assert_eq!(channel.shared.generations.load(Ordering::Relaxed), 1);
    }
}
