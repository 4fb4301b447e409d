//! What a plain HTTP POST cannot do: subscribe. jsonrpsee answers a subscription over HTTP with
//! a bare `-32603 Internal error`, which tells an editor extension nothing; crewd says that the
//! method needs a WebSocket on the same socket.
//!
//! The HTTP layer marks each request that is not a WebSocket upgrade (`PlainHttp`); jsonrpsee
//! copies the HTTP request's extensions into every JSON-RPC request it carries, where the RPC
//! layer looks for the mark. Calls inside a batch pass through unchanged (jsonrpsee's batch path
//! does not go through a middleware's `call`); a subscription in an HTTP batch still gets the
//! bare error.

use jsonrpsee::core::middleware::{Batch, Notification, RpcServiceT};
use jsonrpsee::server::ws::is_upgrade_request;
use jsonrpsee::server::MethodResponse;
use jsonrpsee::types::{ErrorObjectOwned, Request};
use std::future::Future;

/// Set on requests that arrived as a plain HTTP POST.
#[derive(Clone, Copy, Debug)]
pub struct PlainHttp;

/// The HTTP-side half: mark requests that are not upgrades.
pub fn mark<B>(mut req: jsonrpsee::server::HttpRequest<B>) -> jsonrpsee::server::HttpRequest<B> {
    if !is_upgrade_request(&req) {
        req.extensions_mut().insert(PlainHttp);
    }
    req
}

/// The RPC-side half: refuse subscription methods on marked requests with a clear error.
#[derive(Clone)]
pub struct NeedsWebSocket<S> {
    inner: S,
}

impl<S> NeedsWebSocket<S> {
    pub fn new(inner: S) -> Self {
        NeedsWebSocket { inner }
    }
}

fn needs_websocket(method: &str) -> bool {
    use crew_api::methods::TeamSubscribe;
    method == TeamSubscribe::NAME || method == TeamSubscribe::UNSUBSCRIBE
}

impl<S> RpcServiceT for NeedsWebSocket<S>
where
    S: RpcServiceT<
            MethodResponse = MethodResponse,
            BatchResponse = MethodResponse,
            NotificationResponse = MethodResponse,
        > + Clone
        + Send
        + Sync
        + 'static,
{
    type MethodResponse = MethodResponse;
    type BatchResponse = MethodResponse;
    type NotificationResponse = MethodResponse;

    fn call<'a>(&self, req: Request<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
        let refuse =
            req.extensions().get::<PlainHttp>().is_some() && needs_websocket(req.method_name());
        let inner = self.inner.clone();
        async move {
            if refuse {
                let err = ErrorObjectOwned::owned::<()>(
                    jsonrpsee::types::error::INVALID_REQUEST_CODE,
                    format!(
                        "{} needs a WebSocket connection: upgrade a connection to the same socket (GET with `Upgrade: websocket`) and call it there",
                        req.method_name()
                    ),
                    None,
                );
                MethodResponse::error(req.id(), err)
            } else {
                inner.call(req).await
            }
        }
    }

    fn batch<'a>(&self, requests: Batch<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
        self.inner.batch(requests)
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl Future<Output = MethodResponse> + Send + 'a {
        self.inner.notification(n)
    }
}
