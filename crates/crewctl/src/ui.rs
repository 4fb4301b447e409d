//! `crewctl ui`: the web dashboard on a loopback address, for as long as this command runs.
//!
//! The gateway (crate `crew-ui`) forwards the page's JSON-RPC calls to the daemon's socket. Its
//! credential is its own, made when it starts and gone when it stops: a browser signed in here
//! is signed out by Ctrl-C, and crewd's `ui_listen` has another.
//!
//! The browser is started with nothing secret on its command line (which every local user can
//! read in `/proc/<pid>/cmdline` while the browser runs): it opens a 0600 file that redirects
//! to a one-time sign-in code.

use crate::ctx::Ctx;
use anyhow::Context as _;
use crew_api::methods::DaemonStatus_;
use crew_api::types::NoParams;
use std::io::Write as _;
use std::net::SocketAddr;

pub struct UiArgs {
    pub listen: SocketAddr,
    pub no_open: bool,
    pub allow_remote_without_tls: bool,
}

pub async fn ui(ctx: &Ctx, args: UiArgs) -> anyhow::Result<u8> {
    let status = ctx
        .connect()
        .await?
        .call::<DaemonStatus_>(&NoParams {})
        .await?;
    let state_dir = std::path::Path::new(&status.state_dir);
    let bound = crew_ui::bind(args.listen, args.allow_remote_without_tls, &ctx.socket).await?;
    let url = bound.url();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{url}")?;
        out.flush()?;
    }
    eprintln!(
        "crew dashboard for crewd at {}; Ctrl-C stops it.",
        ctx.socket.display()
    );
    let desktop =
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    let mut opener = None;
    if desktop && !args.no_open {
        // Best effort: without xdg-open the printed URL is the way in.
        match open_file(state_dir, &bound.one_time_url()) {
            Ok(file) => {
                let _ = std::process::Command::new("xdg-open")
                    .arg(format!("file://{}", file.display()))
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn();
                opener = Some(file);
            }
            Err(e) => eprintln!("cannot write the page that opens the dashboard: {e:#}"),
        }
    }
    bound
        .serve(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    if let Some(f) = opener {
        let _ = std::fs::remove_file(f);
    }
    Ok(0)
}

/// A page (0600, in a 0700 directory of the state dir) that sends the browser to `url`: the
/// file's name is all a command line shows.
fn open_file(state_dir: &std::path::Path, url: &str) -> anyhow::Result<std::path::PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let dir = state_dir.join("ui-open");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    let file = dir.join(format!("open-{}.html", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .with_context(|| format!("creating {}", file.display()))?;
    // The URL is ours (hex and a loopback address): nothing to escape in it.
    writeln!(
        f,
        "<!doctype html><meta charset=\"utf-8\"><meta name=\"referrer\" content=\"no-referrer\">\
         <meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>crew</title>\
         <a href=\"{url}\">Open the crew dashboard</a>"
    )?;
    Ok(file)
}

/// `--listen`'s parser: an address, or a bare port on 127.0.0.1.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse()
        .with_context(|| format!("{s:?} is neither a port nor an address like 127.0.0.1:7070"))
        .map_err(|e| format!("{e:#}"))
}
