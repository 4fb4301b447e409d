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
        // The daemon must listen where this client looks: a socket of one's own choosing is
        // passed on, and the systemd units (which listen on the default) apply only there.
        if self.socket == crew_api::paths::default_socket() {
            writeln!(f, "  crewd &")?;
            write!(
                f,
                "or, with the systemd user units installed:\n  systemctl --user start crewd"
            )
        } else {
            write!(f, "  crewd --socket {} &", shell_word(&self.socket))
        }
    }
}

/// The socket path is something else: a directory, a regular file. Exit status 64 (usage):
/// no daemon can listen there, so "start crewd" would be the wrong advice.
#[derive(Debug)]
pub struct NotASocket {
    pub socket: PathBuf,
    /// `a directory`, `a regular file`, `a symbolic link loop`...
    pub what: &'static str,
}

impl std::error::Error for NotASocket {}

impl std::fmt::Display for NotASocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is {}, not crewd's socket.",
            self.socket.display(),
            self.what
        )?;
        if self.what == "a directory" {
            let inside = self.socket.join("crewd.sock");
            write!(
                f,
                "\nA socket in it would be named like {} (--socket takes the socket's own path).",
                inside.display()
            )?;
        }
        Ok(())
    }
}

/// What is at `path` when it is not a socket (`None`: a socket, or nothing at all).
fn not_a_socket(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).ok()?.file_type();
    if t.is_socket() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_file() {
        Some("a regular file")
    } else if t.is_fifo() {
        Some("a named pipe")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else {
        Some("not a socket")
    }
}

/// `path` as one word a shell reads back unchanged (quoted only when it needs to be).
fn shell_word(path: &Path) -> String {
    let s = path.to_string_lossy();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
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

/// How often a connection crewd turned away for its limit (`max_connections`, 429) is tried again,
/// waiting 50 ms, then twice as long each time (about 6 s in all).
const BUSY_TRIES: u32 = 8;

pub async fn connect(socket: &Path) -> anyhow::Result<Conn> {
    let mut wait = Duration::from_millis(50);
    for _ in 1..BUSY_TRIES {
        match connect_once(socket).await {
            Err(Handshake::Busy(_)) => {
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
            other => return other.map_err(Handshake::into_error),
        }
    }
    connect_once(socket).await.map_err(|e| match e {
        Handshake::Busy(why) => anyhow::anyhow!(
            "crewd at {} turned the connection away {BUSY_TRIES} times in a row ({why}): it \
             is at its connection limit (`max_connections` in its config) with clients that \
             stay connected; try again when fewer are",
            socket.display()
        ),
        other => other.into_error(),
    })
}

/// Why a connection was not made: crewd at its connection limit (refused with 429), or
/// anything else.
enum Handshake {
    Busy(String),
    Other(anyhow::Error),
}

impl Handshake {
    fn into_error(self) -> anyhow::Error {
        match self {
            Handshake::Busy(why) => anyhow::anyhow!("{why}"),
            Handshake::Other(e) => e,
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for Handshake {
    fn from(e: E) -> Self {
        Handshake::Other(e.into())
    }
}

async fn connect_once(socket: &Path) -> Result<Conn, Handshake> {
    let stream = match tokio::net::UnixStream::connect(socket).await {
        Ok(s) => s,
        Err(e) => {
            use std::io::ErrorKind::*;
            // connect(2) says ECONNREFUSED for any non-socket: look before calling it stale.
            if let Some(what) = not_a_socket(socket) {
                return Err(NotASocket {
                    socket: socket.to_path_buf(),
                    what,
                }
                .into());
            }
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
                _ => Err(anyhow::anyhow!("cannot connect to {}: {e}", socket.display()).into()),
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
            let text = format!(
                "WebSocket handshake with crewd at {} failed: {e}",
                socket.display()
            );
            if is_busy(&e) {
                Handshake::Busy(text)
            } else if is_forbidden(&e) {
                Handshake::Other(anyhow::anyhow!(
                    "crewd at {} refused the connection: it serves only the user it runs as \
                     (run crewctl as that user)",
                    socket.display()
                ))
            } else {
                Handshake::Other(anyhow::anyhow!(text))
            }
        })?;
    let client = ClientBuilder::default()
        // `team.wait` may legitimately take up to an hour; the daemon bounds every call itself.
        .request_timeout(Duration::from_secs(2 * 3600))
        .max_buffer_capacity_per_subscription(16 * 1024)
        .build_with_tokio(tx, rx);
    Ok(Conn { client })
}

/// crewd turned the connection away for its limit: 429, from its accept loop or jsonrpsee's.
fn is_busy(e: &jsonrpsee::client_transport::ws::WsHandshakeError) -> bool {
    rejected_with(e, 429)
}

/// crewd turned the connection away because the client is another user: 403.
fn is_forbidden(e: &jsonrpsee::client_transport::ws::WsHandshakeError) -> bool {
    rejected_with(e, 403)
}

fn rejected_with(e: &jsonrpsee::client_transport::ws::WsHandshakeError, status: u16) -> bool {
    use jsonrpsee::client_transport::ws::WsHandshakeError as W;
    match e {
        W::Rejected { status_code, .. } => *status_code == status,
        // soketto's answers come as text.
        other => other
            .to_string()
            .contains(&format!("status code: {status}")),
    }
}

impl Conn {
    pub async fn call<M: Method>(&self, params: &M::Params) -> anyhow::Result<M::Result> {
        call::<M>(&self.client, params)
            .await
            .map_err(|e| Failed(e).into())
    }
}
