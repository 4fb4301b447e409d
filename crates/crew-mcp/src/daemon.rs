//! The connection to crewd: made by the embedding binary's connector (crewctl's, so the socket
//! discovery and the "crewd is not running" advice are the CLI's), on first use, and again
//! after it broke.

use crate::error::ToolError;
use crew_api::client::{call, CallError, ObjectParams};
use crew_api::methods::TeamSubscribe;
use crew_api::Method;
use jsonrpsee::core::client::{Client, Subscription, SubscriptionClientT};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A connection attempt; the error is shown to the model as the tool's error.
pub type ConnectFuture = Pin<Box<dyn Future<Output = Result<Client, String>> + Send>>;
/// Opens a new connection to crewd (a jsonrpsee client over the daemon's WebSocket).
pub type Connector = Arc<dyn Fn() -> ConnectFuture + Send + Sync>;

pub(crate) struct Daemon {
    connector: Connector,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
}

impl Daemon {
    pub(crate) fn new(connector: Connector) -> Daemon {
        Daemon {
            connector,
            client: tokio::sync::Mutex::new(None),
        }
    }

    async fn client(&self) -> Result<Arc<Client>, ToolError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| c.is_connected()) {
            return Ok(c.clone());
        }
        let c = Arc::new((self.connector)().await.map_err(ToolError::Connect)?);
        *slot = Some(c.clone());
        Ok(c)
    }

    pub(crate) async fn call<M: Method>(&self, params: &M::Params) -> Result<M::Result, ToolError> {
        let client = self.client().await?;
        call::<M>(&*client, params).await.map_err(|e| match e {
            CallError::Api(e) => ToolError::Api(e),
            CallError::Transport(t) => ToolError::Transport(t),
        })
    }

    /// The run's events from `after_seq` on, then live ones.
    pub(crate) async fn subscribe(
        &self,
        run_id: &str,
        after_seq: u64,
    ) -> Result<Subscription<serde_json::Value>, ToolError> {
        let client = self.client().await?;
        let params = serde_json::json!({ "runId": run_id, "afterSeq": after_seq });
        client
            .subscribe::<serde_json::Value, _>(
                TeamSubscribe::NAME,
                ObjectParams(params),
                TeamSubscribe::UNSUBSCRIBE,
            )
            .await
            .map_err(|e| match e {
                jsonrpsee::core::client::Error::Call(obj) => ToolError::Api(obj.into()),
                other => ToolError::Transport(other.to_string()),
            })
    }
}
