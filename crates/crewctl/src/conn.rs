//! The connection: jsonrpsee's WebSocket client over the daemon's Unix socket.

use crew_api::client::{call, CallError};
use crew_api::Method;
use jsonrpsee::client_transport::ws::WsTransportClientBuilder;
use jsonrpsee::core::client::{Client, ClientBuilder};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// No daemon answers on the socket. Exit status 4.
#[derive(Debug)]
pub struct NotRunning {
    pub socket: PathBuf,
    /// True when the socket file exists but nothing accepts on it (a dead daemon's leftover).
    pub stale: bool,
}

impl std::error::Error for NotRunning {}

impl std::fmt::Display for NotRunning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.stale {
            writeln!(
                f,
                "crewd is not running (nothing listens on {}).",
                self.socket.display()
            )?;
        } else {
            writeln!(
                f,
                "crewd is not running (no socket at {}).",
                self.socket.display()
            )?;
        }
        writeln!(f, "Start it with:")?;
        writeln!(f, "  crewd &")?;
        write!(
            f,
            "or, with the systemd user units installed:\n  systemctl --user start crewd"
        )
    }
}

/// A call that failed: the daemon's error, or a broken connection.
#[derive(Debug)]
pub struct Failed(pub CallError);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            CallError::Api(e) => write!(f, "{} (code {})", e.message, e.code),
            CallError::Transport(t) => write!(f, "connection to crewd failed: {t}"),
        }
    }
}

impl std::error::Error for Failed {}

pub struct Conn {
    pub client: Client,
}

/// Replies can be large (artifacts, export bundles): allow well above jsonrpsee's 10 MiB default.
const MAX_MESSAGE: u32 = 256 * 1024 * 1024;

pub async fn connect(socket: &Path) -> anyhow::Result<Conn> {
    let stream = match tokio::net::UnixStream::connect(socket).await {
        Ok(s) => s,
        Err(e) => {
            use std::io::ErrorKind::*;
            return match e.kind() {
                NotFound => Err(NotRunning {
                    socket: socket.to_path_buf(),
                    stale: false,
                }
                .into()),
                ConnectionRefused => Err(NotRunning {
                    socket: socket.to_path_buf(),
                    stale: true,
                }
                .into()),
                _ => Err(anyhow::anyhow!(
                    "cannot connect to {}: {e}",
                    socket.display()
                )),
            };
        }
    };
    let url = url::Url::parse("ws://localhost/")?;
    let (tx, rx) = WsTransportClientBuilder::default()
        .max_request_size(MAX_MESSAGE)
        .max_response_size(MAX_MESSAGE)
        .build_with_stream(url, stream)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "WebSocket handshake with crewd at {} failed: {e}",
                socket.display()
            )
        })?;
    let client = ClientBuilder::default()
        // `team.wait` may legitimately take up to an hour; the daemon bounds every call itself.
        .request_timeout(Duration::from_secs(2 * 3600))
        .max_buffer_capacity_per_subscription(16 * 1024)
        .build_with_tokio(tx, rx);
    Ok(Conn { client })
}

impl Conn {
    pub async fn call<M: Method>(&self, params: &M::Params) -> anyhow::Result<M::Result> {
        call::<M>(&self.client, params)
            .await
            .map_err(|e| Failed(e).into())
    }
}
