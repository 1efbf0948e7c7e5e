//! A tonic transport straight over one HTTP/2 connection (the `h2` crate), for the load
//! generator's gRPC client.
//!
//! tonic's `Channel` hands each call to a buffer task, which hands it to hyper's connection
//! task, which spawns a task per call to pipe its body and another to await its answer: four
//! task hops per call on the machine the servers share. Here the calling task opens the stream,
//! writes the encoded request and reads the answer itself; only the connection's reads and
//! writes run in another task (and, for a streaming call, the writing of its requests). tonic
//! still encodes, decodes and maps the `grpc-status`.
//!
//! It does not reconnect: a call on a broken connection fails, and the workloads count it as an
//! error. Only the failover run breaks a connection, by killing a node that its senders do not
//! use.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use anyhow::{Context as _, Result};
use bytes::Bytes;
use futures_util::FutureExt;
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::net::TcpStream;

/// What a call fails with: the connection's error, or the request body's (tonic's encoder).
type CallError = Box<dyn std::error::Error + Send + Sync>;

/// One HTTP/2 connection; clones share it.
#[derive(Clone)]
pub struct H2Channel {
    send: h2::client::SendRequest<Bytes>,
}

impl H2Channel {
    /// Connects to `authority` (`host:port`), with TCP_NODELAY, and drives the connection in a
    /// task of its own until every clone is dropped.
    pub async fn connect(authority: &str) -> Result<H2Channel> {
        let tcp = TcpStream::connect(authority)
            .await
            .with_context(|| format!("connecting to {authority}"))?;
        tcp.set_nodelay(true)?;
        let (send, connection) = h2::client::handshake(tcp)
            .await
            .with_context(|| format!("HTTP/2 handshake with {authority}"))?;
        // Its end is seen by the calls on it (see the module doc: no reconnection).
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(H2Channel { send })
    }
}

impl tower_service::Service<http::Request<tonic::body::Body>> for H2Channel {
    type Response = http::Response<H2Body>;
    type Error = CallError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, CallError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), CallError>> {
        // Readiness is awaited per call, on the clone that makes it.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let send = self.send.clone();
        Box::pin(async move {
            let (parts, mut body) = request.into_parts();
            // A unary call's body is one encoded message, ready at once: it goes out with the
            // headers. A streaming call's body goes on in a task of its own.
            let mut ready = Vec::new();
            let ended = loop {
                match body.frame().now_or_never() {
                    Some(Some(frame)) => ready.extend(frame?.into_data().ok()),
                    Some(None) => break true,
                    None => break false,
                }
            };
            let mut send = send.ready().await?;
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
        })
    }
}

/// Writes a streaming call's request body as it comes, then ends the stream. Data is buffered
/// by `h2` beyond the flow-control window: the workloads bound what a stream has in flight.
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
