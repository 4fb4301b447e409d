//! `crewctl ui`: the web dashboard on a loopback address, for as long as this command runs.
//!
//! The gateway (crate `crew-ui`) forwards the page's JSON-RPC calls to the daemon's socket; the
//! token lives in the daemon's state directory (`ui-token`, 0600), shared with crewd's own
//! `ui_listen`, so one cookie works for both and survives restarts of either.

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
    let token_path = std::path::Path::new(&status.state_dir).join("ui-token");
    let token = crew_ui::load_or_create_token(&token_path)?;
    let bound = crew_ui::bind(
        args.listen,
        args.allow_remote_without_tls,
        &ctx.socket,
        token,
    )
    .await?;
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
    if desktop && !args.no_open {
        // Best effort: without xdg-open the printed URL is the way in.
        let _ = std::process::Command::new("xdg-open")
            .arg(&url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    bound
        .serve(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    Ok(0)
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
