//! crew's web dashboard: a loopback HTTP gateway that serves the compiled-in page and forwards
//! its JSON-RPC calls (HTTP POST and WebSocket, byte for byte) to crewd's Unix socket.
//!
//! The dashboard is a client of the public API only: the gateway adds no endpoint of its own
//! beyond the static assets, so whatever the page does an editor extension can do too. It is
//! used twice: `crewctl ui` runs it in the foreground, and crewd runs it in process when the
//! config names `ui_listen` (for SSH port forwarding). Either way it proxies to a socket path,
//! so it depends on nothing of crewd's.

pub mod assets;
pub mod auth;
mod proxy;

use auth::{Credential, Hosts};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections the gateway serves at once (a WebSocket counts until it closes). More are
/// accepted and closed at once: idle connections cannot use up the descriptors of the process
/// (crewd's, for `ui_listen`) and with them its Unix socket.
pub const MAX_CONNECTIONS: usize = 128;
/// How long a connection may take to send a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a one-time sign-in code stays good (it also ends on first use).
pub const CODE_TTL: Duration = Duration::from_secs(120);
/// One-time codes outstanding at once; the oldest goes first.
const MAX_CODES: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error(
        "dashboard address {0} is not loopback; serving it there needs TLS, which crew does not \
         provide: use SSH port forwarding to a loopback address, or set \
         ui_allow_remote_without_tls = true to accept that anyone on the path can read the token"
    )]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// What one gateway needs: where crewd is and who may come in. The credential is made when
/// the gateway is, so each gateway has its own and a restart signs its browsers out.
pub struct Gateway {
    socket: PathBuf,
    cred: Credential,
    hosts: Hosts,
    /// One-time sign-in codes and when each was made.
    codes: Mutex<Vec<(String, Instant)>>,
    conns: Arc<tokio::sync::Semaphore>,
}

impl Gateway {
    /// The URL that signs a browser in with the token (printed, or written to a 0600 file:
    /// never put on a command line).
    pub fn url(&self) -> String {
        self.hosts.url(&format!(
            "{}/?token={}",
            self.cred.prefix(),
            self.cred.token()
        ))
    }

    /// A URL that signs in once, within `CODE_TTL`: what may be handed to a browser process
    /// whose command line other local users can read.
    pub fn one_time_url(&self) -> String {
        let code = auth::new_token();
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        codes.retain(|(_, at)| at.elapsed() < CODE_TTL);
        if codes.len() >= MAX_CODES {
            codes.remove(0);
        }
        codes.push((code.clone(), Instant::now()));
        self.hosts
            .url(&format!("{}/?code={code}", self.cred.prefix()))
    }

    /// Whether `code` is an outstanding one-time code; it is used up either way.
    pub(crate) fn redeem(&self, code: &str) -> bool {
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        codes.retain(|(_, at)| at.elapsed() < CODE_TTL);
        match codes.iter().position(|(c, _)| auth::token_eq(c, code)) {
            Some(i) => {
                codes.remove(i);
                true
            }
            None => false,
        }
    }
}

/// A bound dashboard, not yet serving.
pub struct Bound {
    listener: tokio::net::TcpListener,
    gateway: Arc<Gateway>,
}

impl Bound {
    pub fn url(&self) -> String {
        self.gateway.url()
    }

    pub fn one_time_url(&self) -> String {
        self.gateway.one_time_url()
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serve until `stop` resolves. Connections already open end with the process.
    pub async fn serve(self, stop: impl std::future::Future<Output = ()>) {
        proxy::serve(self.listener, self.gateway, stop).await
    }
}

/// Binds `addr` (refusing a non-loopback one unless `allow_remote` says the user accepted
/// plain HTTP there) and prepares a gateway to `socket` with a credential of its own.
pub async fn bind(addr: SocketAddr, allow_remote: bool, socket: &Path) -> Result<Bound, UiError> {
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(UiError::NotLoopback(addr));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| UiError::Bind { addr, source })?;
    // Port 0 picks a free one: the hosts we answer to are those of the real address.
    let real = listener.local_addr().unwrap_or(addr);
    Ok(Bound {
        listener,
        gateway: Arc::new(Gateway {
            socket: socket.to_path_buf(),
            cred: Credential::new(),
            hosts: Hosts::for_addr(real),
            codes: Mutex::new(Vec::new()),
            conns: Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS)),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn non_loopback_needs_acknowledgement() {
        let e = bind("0.0.0.0:0".parse().unwrap(), false, Path::new("/x")).await;
        assert!(matches!(e, Err(UiError::NotLoopback(_))));
    }

    #[tokio::test]
    async fn a_code_signs_in_once_and_gateways_differ() {
        let a = bind("127.0.0.1:0".parse().unwrap(), false, Path::new("/x"))
            .await
            .unwrap();
        let b = bind("127.0.0.1:0".parse().unwrap(), false, Path::new("/x"))
            .await
            .unwrap();
        let url = a.one_time_url();
        let code = url.rsplit_once("code=").unwrap().1.to_string();
        assert!(!url.contains(a.gateway.cred.token()));
        assert!(!b.gateway.redeem(&code), "another gateway's code");
        assert!(a.gateway.redeem(&code));
        assert!(!a.gateway.redeem(&code), "used up");
        assert_ne!(a.gateway.cred.token(), b.gateway.cred.token());
    }
}
