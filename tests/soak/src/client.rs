//! Talking to crewd: one HTTP POST per call on a fresh connection (nothing to reconnect after a
//! kill), and WebSocket subscriptions through jsonrpsee's client.

use anyhow::Context;
use jsonrpsee::core::client::{Client, ClientBuilder, Subscription, SubscriptionClientT};
use jsonrpsee::core::params::ObjectParams;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

#[derive(Debug)]
pub enum CallError {
    /// The daemon answered with an error object.
    Api { code: i64, message: String },
    /// No answer (daemon killed, socket gone, timeout).
    Transport(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Api { code, message } => write!(f, "{code}: {message}"),
            CallError::Transport(e) => write!(f, "transport: {e}"),
        }
    }
}

pub async fn call(socket: &Path, method: &str, params: Value) -> Result<Value, CallError> {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        .to_string();
    let resp = crew_testkit::post_async(socket, body.as_bytes(), Duration::from_secs(60))
        .await
        .map_err(|e| CallError::Transport(e.to_string()))?;
    if resp.status == 0 {
        return Err(CallError::Transport(format!(
            "no HTTP answer: {:?}",
            resp.body
        )));
    }
    let v: Value = serde_json::from_str(&resp.body)
        .map_err(|e| CallError::Transport(format!("{e}: {}", resp.body)))?;
    if let Some(r) = v.get("result") {
        return Ok(r.clone());
    }
    Err(CallError::Api {
        code: v
            .pointer("/error/code")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        message: v
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

pub async fn ws(socket: &Path) -> anyhow::Result<Client> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .context("connect")?;
    let (tx, rx) = jsonrpsee::client_transport::ws::WsTransportClientBuilder::default()
        .build_with_stream(url::Url::parse("ws://localhost/")?, stream)
        .await
        .context("ws handshake")?;
    Ok(ClientBuilder::default()
        .request_timeout(Duration::from_secs(60))
        .max_buffer_capacity_per_subscription(100_000)
        .build_with_tokio(tx, rx))
}

pub async fn subscribe(
    client: &Client,
    run_id: Option<&str>,
    after_seq: u64,
) -> anyhow::Result<Subscription<Value>> {
    let mut p = ObjectParams::new();
    p.insert("afterSeq", after_seq)?;
    if let Some(r) = run_id {
        p.insert("runId", r)?;
    }
    Ok(client
        .subscribe::<Value, _>("team.subscribe", p, "team.unsubscribe")
        .await?)
}
