//! `ui_listen`: the web dashboard served by crewd itself on a TCP address, for use over SSH
//! port forwarding. It is the same gateway `crewctl ui` runs (crate `crew-ui`), pointed at this
//! daemon's own socket, so the page stays a client of the public API like any other.

use anyhow::Context as _;
use std::net::SocketAddr;
use std::path::Path;

/// Binds the dashboard and writes its URL (with the token) to `<state>/ui-url`, 0600: the log
/// names the file, never the token. The gateway's credential is made here, its own (not
/// `crewctl ui`'s) and new at every start of crewd.
pub async fn start(
    addr: SocketAddr,
    cfg: &crate::config::Config,
    state_dir: &Path,
    socket: &Path,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    // The token file older versions shared between gateways: nothing reads it any more.
    let _ = std::fs::remove_file(state_dir.join("ui-token"));
    let bound = crew_ui::bind(addr, cfg.ui_allow_remote_without_tls, socket)
        .await
        .context("ui_listen")?;
    let url = bound.url();
    let url_file = state_dir.join("ui-url");
    write_private(&url_file, &url).with_context(|| format!("writing {}", url_file.display()))?;
    tracing::info!(
        address = %bound.local_addr().unwrap_or(addr),
        url_file = %url_file.display(),
        "dashboard is served; its URL (with the token) is in the url file"
    );
    Ok(tokio::spawn(bound.serve(std::future::pending())))
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    // A leftover file (a crash between write and rename) is replaced, never reused: its mode
    // could be wider than 0600, and `mode` applies only to a file the open creates.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.write_all(b"\n")?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leftover temporary file readable by others does not pass its mode on.
    #[test]
    fn the_url_file_is_private_whatever_was_left() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("ui-url");
        let tmp = url.with_extension("tmp");
        std::fs::write(&tmp, "old").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&url, "http://127.0.0.1:1/c-x").unwrap();
        let mode = std::fs::metadata(&url).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            std::fs::read_to_string(&url).unwrap(),
            "http://127.0.0.1:1/c-x\n"
        );
    }
}
