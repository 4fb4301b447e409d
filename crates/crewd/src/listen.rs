//! The socket: bound with SPEC §11's permissions, or passed by systemd socket activation.

use anyhow::{bail, Context};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A listener plus whether we own (and must remove) its file.
pub struct Listener {
    pub std: std::os::unix::net::UnixListener,
    pub owned: bool,
}

/// `LISTEN_FDS` from systemd (checked against our pid), if any.
pub fn from_systemd() -> anyhow::Result<Option<Listener>> {
    let fds = sd_notify::listen_fds().context("reading LISTEN_FDS")?;
    let mut it = fds;
    let Some(fd) = it.next() else { return Ok(None) };
    // SAFETY: systemd passed us this descriptor (LISTEN_PID matched); we take ownership once.
    let owned = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let std = std::os::unix::net::UnixListener::from(owned);
    std.set_nonblocking(true)?;
    Ok(Some(Listener { std, owned: false }))
}

/// Directory 0700; a live daemon on the socket is an error; a stale file is replaced; the
/// socket is bound, chmod 0600, then listened on (nobody can connect in between).
pub fn bind(path: &Path) -> anyhow::Result<Listener> {
    let dir = path.parent().context("socket path has no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("chmod 0700 {}", dir.display()))?;
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!("another crewd is already serving {}", path.display());
        }
        tracing::info!(socket = %path.display(), "replacing a stale socket file");
        std::fs::remove_file(path).with_context(|| format!("removing stale {}", path.display()))?;
    }
    use nix::sys::socket::{
        bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr,
    };
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .context("creating the socket")?;
    let addr = UnixAddr::new(path).context("socket address")?;
    bind(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr)
        .with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .context("chmod 0600 on the socket")?;
    listen(&fd, Backlog::new(1024).unwrap_or(Backlog::MAXCONN)).context("listen")?;
    Ok(Listener {
        std: std::os::unix::net::UnixListener::from(fd),
        owned: true,
    })
}
