//! jsonrpsee answers its limits with codes of its own (-32006 too many subscriptions, -32008
//! answer too large); crewd's error table has one code for every limit, 1005, with the limit
//! named in `data.limit`. This RPC layer puts that in place of jsonrpsee's answer.

use crew_api::ApiError;
use jsonrpsee::core::middleware::{Batch, Notification, RpcServiceT};
use jsonrpsee::server::MethodResponse;
use jsonrpsee::types::error::{OVERSIZED_RESPONSE_CODE, TOO_MANY_SUBSCRIPTIONS_CODE};
use jsonrpsee::types::{ErrorObjectOwned, Request};
use std::future::Future;

#[derive(Clone)]
pub struct LimitCodes<S> {
    inner: S,
    max_subscriptions: u32,
    max_response: usize,
}

impl<S> LimitCodes<S> {
    pub fn new(inner: S, max_subscriptions: u32, max_response: usize) -> Self {
        LimitCodes {
            inner,
            max_subscriptions,
            max_response,
        }
    }
}

impl<S> RpcServiceT for LimitCodes<S>
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
        let id = req.id().into_owned();
        let inner = self.inner.clone();
        let (max_subs, max_response) = (self.max_subscriptions, self.max_response);
        async move {
            let rp = inner.call(req).await;
            let err = match rp.as_error_code() {
                Some(TOO_MANY_SUBSCRIPTIONS_CODE) => ApiError::limit_named(
                    "max_subscriptions_per_connection",
                    u64::from(max_subs),
                    format!("this connection has {max_subs} subscriptions already (max_subscriptions_per_connection)"),
                ),
                Some(OVERSIZED_RESPONSE_CODE) => ApiError::limit_named(
                    "max_response_bytes",
                    max_response as u64,
                    format!("the answer is too large: at most {max_response} bytes"),
                ),
                _ => return rp,
            };
            MethodResponse::error(id, ErrorObjectOwned::from(err))
        }
    }

    fn batch<'a>(&self, requests: Batch<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
        // Batches never reach jsonrpsee: `front.rs` splits them into calls.
        self.inner.batch(requests)
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl Future<Output = MethodResponse> + Send + 'a {
        self.inner.notification(n)
    }
}
