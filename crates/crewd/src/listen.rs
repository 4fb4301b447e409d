//! The socket: bound with SPEC §11's permissions, or passed by systemd socket activation.
//!
//! What is at the socket path, and the directory it is in, may belong to someone else (a typo
//! in `--socket`, `CREW_SOCKET` pointing at the wrong file, `/tmp` itself): crewd replaces only a
//! stale socket of its own kind and changes the mode only of a directory it created.

use anyhow::{bail, Context};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// A listener plus whether we own (and must remove) its file.
pub struct Listener {
    pub std: std::os::unix::net::UnixListener,
    /// The socket file we bound (device, inode): removed at shutdown only while it is still
    /// that file, never a socket someone else put there since.
    pub owned: Option<(u64, u64)>,
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
    Ok(Some(Listener { std, owned: None }))
}

/// The socket's directory: created 0700 when missing (only then is its mode ours to set); an
/// existing one keeps its mode and must not let another user replace our socket.
fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(meta) => check_existing_dir(dir, &meta),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("creating {}", dir.display()))?;
            // The umask may have taken bits away; 0700 is what SPEC §11 asks of our directory.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("chmod 0700 {}", dir.display()))
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", dir.display())),
    }
}

/// Refuse a directory where someone else could remove or replace the socket: not a directory,
/// owned by another user (root excepted: `/tmp`, `/run`), or writable by group or others
/// without the sticky bit. The socket's 0600 and the peer uid check do the rest.
fn check_existing_dir(dir: &Path, meta: &std::fs::Metadata) -> anyhow::Result<()> {
    if !meta.is_dir() {
        bail!(
            "the socket's directory {} exists and is not a directory",
            dir.display()
        );
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        bail!(
            "the socket's directory {} belongs to uid {}, not to this user ({me}): choose another --socket",
            dir.display(),
            meta.uid()
        );
    }
    let mode = meta.mode();
    let sticky = mode & 0o1000 != 0;
    if mode & 0o022 != 0 && !sticky {
        bail!(
            "the socket's directory {} is writable by other users (mode {:04o}) without the sticky bit, so anyone could replace the socket: choose another --socket or fix the mode",
            dir.display(),
            mode & 0o7777
        );
    }
    Ok(())
}

/// What is at the socket path before we bind: nothing, or a socket nobody listens on (left by
/// a crewd that died), which is removed. Anything else is an error that leaves it alone.
fn clear_stale(path: &Path) -> anyhow::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let kind = meta.file_type();
    if !kind.is_socket() {
        let what = if kind.is_symlink() {
            "a symbolic link"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_file() {
            "a regular file"
        } else {
            "not a socket"
        };
        bail!(
            "{} exists and is {what}; crewd replaces only a stale socket and left it alone: remove it or choose another --socket",
            path.display()
        );
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => bail!("another process is already serving {}", path.display()),
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
            tracing::info!(socket = %path.display(), "replacing a stale socket file");
            std::fs::remove_file(path)
                .with_context(|| format!("removing the stale socket {}", path.display()))
        }
        Err(e) => bail!(
            "{} is a socket crewd cannot probe ({e}); left alone",
            path.display()
        ),
    }
}

/// The socket is bound, chmod 0600, then listened on (nobody can connect in between).
pub fn bind(path: &Path) -> anyhow::Result<Listener> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    prepare_dir(dir)?;
    clear_stale(path)?;
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
    let meta = std::fs::symlink_metadata(path).context("reading the bound socket")?;
    listen(&fd, Backlog::new(1024).unwrap_or(Backlog::MAXCONN)).context("listen")?;
    Ok(Listener {
        std: std::os::unix::net::UnixListener::from(fd),
        owned: Some((meta.dev(), meta.ino())),
    })
}

/// Remove the socket file at shutdown if it is still the one we bound.
pub fn remove_owned(path: &Path, owned: Option<(u64, u64)>) {
    let Some((dev, ino)) = owned else { return };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() && m.dev() == dev && m.ino() == ino => {
            let _ = std::fs::remove_file(path);
        }
        _ => tracing::info!(socket = %path.display(), "the socket file was replaced; left alone"),
    }
}
