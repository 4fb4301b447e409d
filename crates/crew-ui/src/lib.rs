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

use auth::Hosts;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    #[error("dashboard token file {path}: {source}")]
    Token {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What one gateway needs: where crewd is and who may come in.
pub struct Gateway {
    socket: PathBuf,
    token: String,
    hosts: Hosts,
}

impl Gateway {
    /// The URL to open (it carries the token once; the page then lives on the cookie).
    pub fn url(&self) -> String {
        self.hosts.url(&self.token)
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

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serve until `stop` resolves. Connections already open end with the process.
    pub async fn serve(self, stop: impl std::future::Future<Output = ()>) {
        proxy::serve(self.listener, self.gateway, stop).await
    }
}

/// Binds `addr` (refusing a non-loopback one unless `allow_remote` says the user accepted
/// plain HTTP there) and prepares a gateway to `socket` guarded by `token`.
pub async fn bind(
    addr: SocketAddr,
    allow_remote: bool,
    socket: &Path,
    token: String,
) -> Result<Bound, UiError> {
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
            token,
            hosts: Hosts::for_addr(real),
        }),
    })
}

/// The dashboard token kept in `path` (0600), made on first use. Kept across restarts so an
/// open page's cookie still works after crewd or `crewctl ui` comes back.
pub fn load_or_create_token(path: &Path) -> Result<String, UiError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| UiError::Token {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(s) if s.trim().len() == 64 && s.trim().bytes().all(|b| b.is_ascii_hexdigit()) => {
            return Ok(s.trim().to_owned())
        }
        Ok(_) => {} // damaged: replace it
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let token = auth::new_token();
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(token.as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn token_file_is_private_and_stable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/ui-token");
        let a = load_or_create_token(&p).unwrap();
        let b = load_or_create_token(&p).unwrap();
        assert_eq!(a, b);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(&p, "short").unwrap();
        let c = load_or_create_token(&p).unwrap();
        assert_ne!(c, "short");
        assert_eq!(c.len(), 64);
    }

    #[tokio::test]
    async fn non_loopback_needs_acknowledgement() {
        let e = bind(
            "0.0.0.0:0".parse().unwrap(),
            false,
            Path::new("/x"),
            "t".into(),
        )
        .await;
        assert!(matches!(e, Err(UiError::NotLoopback(_))));
    }
}
