//! The service every connection is served by: calls under `/raftq.v1.Queues/` go straight to the
//! tonic server, requests a further [`Protocol`] claims (the SQS-compatible endpoint) to it,
//! everything else to the REST router, beside which further pages (the web console) may be
//! merged (it answers gRPC calls to other paths `UNIMPLEMENTED`). All of them pass the same
//! limits (`throttle`) first and are logged, counted and timed the same way (`metrics`).
//!
//! gRPC calls bypass the router: at thousands of calls per second its route lookup, its boxed
//! per-route service and the middleware's boxed continuation were a visible share of the CPU
//! of each call's task in a profile of a loaded leader.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use axum::Router;
use tower_service::Service;

use crate::error::ApiError;
use crate::grpc;
use crate::metrics::Observation;
use crate::shared::{AppState, Shared};

/// A response on its way.
pub type Responding = Pin<Box<dyn Future<Output = Response> + Send>>;

/// A further protocol on the port of REST and gRPC, over the same operations ([`crate::ops`]):
/// it claims its requests by their method, path and headers, before their body is read.
pub trait Protocol: Send + Sync + 'static {
    /// Whether `request` is one of this protocol's.
    fn claims(&self, request: &Request) -> bool;
    /// Answers `request`; every failure is an answer in the protocol's own error format.
    fn serve(&self, request: Request) -> Responding;
    /// The answer to a claimed request that the limits refused before it was served.
    fn refuse(&self, request: &Request, refused: ApiError) -> Response;
}

/// REST and gRPC (and a further [`Protocol`], if any) on one port; cheap to clone (one per
/// connection).
#[derive(Clone)]
pub struct Front {
    rest: Router,
    grpc: grpc::Server,
    state: AppState,
    protocol: Option<Arc<dyn Protocol>>,
}

impl Front {
    pub(crate) fn new(rest: Router, state: AppState) -> Front {
        Front {
            rest,
            grpc: grpc::server(state.clone()),
            state,
            protocol: None,
        }
    }

    /// This front with the protocol that `make` builds over the operations layer served too.
    pub fn serving<P: Protocol>(mut self, make: impl FnOnce(Arc<Shared>) -> P) -> Front {
        self.protocol = Some(Arc::new(make(Arc::clone(&self.state))));
        self
    }

    /// This front with `pages` (routes that answer no API call, such as the web console) served
    /// beside the REST routes, throttled, logged, counted and timed as they are.
    pub fn with_pages(mut self, pages: Router) -> Front {
        let observed = pages.layer(axum::middleware::from_fn_with_state(
            self.state.clone(),
            observe,
        ));
        self.rest = self.rest.merge(observed);
        self
    }
}

impl Service<Request> for Front {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Both inner services are always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let protocol = self
            .protocol
            .as_ref()
            .filter(|p| p.claims(&request))
            .map(Arc::clone);
        let service_path = protocol.is_none() && grpc::is_service_path(request.uri().path());
        let caller = self.state.throttle.caller(&self.state.api.keys, &request);
        if let Err(refused) = self.state.throttle.admit(&caller) {
            let observation = Observation::start(&request, grpc::is_grpc(request.headers()));
            let response = match &protocol {
                Some(protocol) => protocol.refuse(&request, refused),
                None if service_path => tonic::Status::from(refused).into_http::<Body>(),
                None => refused.into_response(),
            };
            observation.finish(&self.state.metrics, &response);
            return Box::pin(ready(Ok(response)));
        }
        request.extensions_mut().insert(caller);
        if let Some(protocol) = protocol {
            let observation = Observation::start(&request, false);
            let state = self.state.clone();
            return Box::pin(async move {
                let response = protocol.serve(request).await;
                observation.finish(&state.metrics, &response);
                Ok(response)
            });
        }
        if !service_path {
            return Box::pin(self.rest.call(request));
        }
        let observation = Observation::start(&request, grpc::is_grpc(request.headers()));
        let call = self.grpc.call(request);
        let state = self.state.clone();
        Box::pin(async move {
            let response = call.await?.map(Body::new);
            observation.finish(&state.metrics, &response);
            Ok(response)
        })
    }
}

/// What `axum::serve` needs: the service for each accepted connection.
impl<L: Listener> Service<IncomingStream<'_, L>> for Front {
    type Response = Front;
    type Error = Infallible;
    type Future = Ready<Result<Front, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _connection: IncomingStream<'_, L>) -> Self::Future {
        ready(Ok(self.clone()))
    }
}

/// Middleware of the REST routes: logs, counts and times every request.
pub async fn observe(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let observation = Observation::start(&request, grpc::is_grpc(request.headers()));
    let response = next.run(request).await;
    observation.finish(&state.metrics, &response);
    response
}
