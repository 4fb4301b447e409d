//! The accept loop: one jsonrpsee service per connection, HTTP POST and WebSocket on the same
//! Unix socket, peers of another uid refused, a connection idle between requests closed
//! (`conn.rs`). Every body and message passes `front.rs` (the
//! JSON-RPC envelope, judged by `envelope.rs`) before jsonrpsee.

use crate::rpc::Ctx;
use jsonrpsee::server::{BatchRequestConfig, ServerConfig, StopHandle};
use jsonrpsee::RpcModule;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

mod conn;
mod envelope;
mod front;
mod limits;
mod plain_http;

/// A connection turned away says why, as HTTP (`status`), so a client can tell "busy, try
/// again" (429) from "not yours" (403). Its request head is read first (briefly, bounded):
/// closing with it unread made the client's write fail before it could read the answer.
async fn refuse(mut stream: tokio::net::UnixStream, status: &'static str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(n @ 1..) => head.extend_from_slice(buf.get(..n).unwrap_or_default()),
                _ => break,
            }
        }
    })
    .await;
    let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The largest answer crewd sends (a bundle, a page of events).
pub const MAX_RESPONSE_BYTES: usize = 32 << 20;

pub fn spawn(
    listener: tokio::net::UnixListener,
    module: RpcModule<Ctx>,
    stop: StopHandle,
    cfg: &crate::config::Config,
) -> tokio::task::JoinHandle<()> {
    let limits = Arc::new(front::Limits {
        max_request: cfg.max_request_bytes as usize,
        max_batch: cfg.max_batch as usize,
        max_response: MAX_RESPONSE_BYTES,
    });
    let server_cfg = ServerConfig::builder()
        // `front.rs` enforces the limits on what the client sent; jsonrpsee sees it rewritten.
        .max_request_body_size(cfg.max_request_bytes.saturating_add(front::REWRITE_SLACK))
        .max_response_body_size(MAX_RESPONSE_BYTES as u32)
        .max_connections(cfg.max_connections)
        .max_subscriptions_per_connection(cfg.max_subscriptions_per_connection)
        .set_batch_request_config(BatchRequestConfig::Limit(cfg.max_batch))
        .set_message_buffer_capacity(1024)
        .build();
    let max_subs = cfg.max_subscriptions_per_connection;
    let builder = jsonrpsee::server::Server::builder()
        .set_config(server_cfg)
        .set_http_middleware(
            tower::ServiceBuilder::new()
                .layer(front::FrontLayer::new(limits, stop.clone()))
                .layer(tower::util::MapRequestLayer::new(plain_http::mark)),
        )
        .set_rpc_middleware(
            jsonrpsee::server::middleware::rpc::RpcServiceBuilder::new()
                .layer_fn(plain_http::NeedsWebSocket::new)
                .layer_fn(move |s| limits::LimitCodes::new(s, max_subs, MAX_RESPONSE_BYTES)),
        )
        .to_service_builder();
    let methods: jsonrpsee::Methods = module.into();
    let my_uid = nix::unistd::geteuid().as_raw();
    let max_conns = cfg.max_connections as usize;
    let open = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, _)) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = stop.clone().shutdown() => break,
            };
            let cred = match stream.peer_cred() {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read peer credentials; connection refused");
                    continue;
                }
            };
            if cred.uid() != my_uid {
                tracing::warn!(peer_uid = cred.uid(), peer_pid = ?cred.pid(), "connection from another user refused");
                tokio::spawn(refuse(stream, "403 Forbidden"));
                continue;
            }
            if open.load(Ordering::Relaxed) >= max_conns {
                tracing::warn!(max_conns, "connection limit reached; connection refused");
                tokio::spawn(refuse(stream, "429 Too Many Requests"));
                continue;
            }
            let svc = builder.clone().build(methods.clone(), stop.clone());
            let open2 = open.clone();
            open2.fetch_add(1, Ordering::Relaxed);
            let stop2 = stop.clone();
            let pid = cred.pid();
            tokio::spawn(async move {
                if let Err(e) = conn::serve(stream, svc, stop2.shutdown(), conn::HEAD_IDLE).await {
                    tracing::debug!(peer_pid = ?pid, error = %e, "connection ended with an error");
                }
                open2.fetch_sub(1, Ordering::Relaxed);
            });
        }
    })
}
