//! The service every connection is served by: calls under `/raftq.v1.Queues/` go straight to the
//! tonic server, everything else to the REST router (which answers gRPC calls to other paths
//! `UNIMPLEMENTED`). Both are logged, counted and timed the same way (`metrics`).
//!
//! gRPC calls bypass the router: at thousands of calls per second its route lookup, its boxed
//! per-route service and the middleware's boxed continuation were a visible share of the CPU
//! of each call's task in a profile of a loaded leader.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use axum::Router;
use tower_service::Service;

use crate::grpc;
use crate::metrics::Observation;
use crate::state::AppState;

/// REST and gRPC on one port; cheap to clone (one per connection).
#[derive(Clone)]
pub struct Front {
    rest: Router,
    grpc: grpc::Server,
    state: AppState,
}

impl Front {
    pub(crate) fn new(rest: Router, state: AppState) -> Front {
        Front {
            rest,
            grpc: grpc::server(state.clone()),
            state,
        }
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
        let service_path = grpc::is_service_path(request.uri().path());
        let caller = self.state.throttle.caller(&self.state.api.keys, &request);
        if let Err(refused) = self.state.throttle.admit(&caller) {
            let observation = Observation::start(&request, grpc::is_grpc(request.headers()));
            let response = if service_path {
                tonic::Status::from(refused).into_http::<Body>()
            } else {
                refused.into_response()
            };
            observation.finish(&self.state.metrics, &response);
            return Box::pin(ready(Ok(response)));
        }
        request.extensions_mut().insert(caller);
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
