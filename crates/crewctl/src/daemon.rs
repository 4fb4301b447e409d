//! `daemon status|stop`, `completions`, `man`.

use crate::cli::{Cli, DaemonCmd};
use crate::conn::NotRunning;
use crate::ctx::{outln, Ctx};
use crate::exit;
use crate::render::resources as view_resources;
use anyhow::Context as _;
use clap::CommandFactory;
use crew_api::methods::{DaemonShutdown, DaemonStatus_};
use crew_api::types::NoParams;
use std::path::Path;
use std::time::Duration;

pub async fn dispatch(ctx: &Ctx, cmd: DaemonCmd) -> anyhow::Result<u8> {
    match cmd {
        DaemonCmd::Status => {
            let conn = ctx.connect().await?;
            let s = conn.call::<DaemonStatus_>(&NoParams {}).await?;
            if ctx.json {
                ctx.json(&s)?;
            } else {
                outln(&view_resources::daemon_status(&ctx.view(), &s))?;
            }
            Ok(exit::SUCCESS)
        }
        DaemonCmd::Stop => {
            let conn = match ctx.connect().await {
                Ok(c) => c,
                // Stopping a stopped daemon is not an error (as with systemctl stop).
                Err(e) if e.downcast_ref::<NotRunning>().is_some() => {
                    eprintln!("crewd is not running.");
                    return Ok(exit::SUCCESS);
                }
                Err(e) => return Err(e),
            };
            let r = conn.call::<DaemonShutdown>(&NoParams {}).await?;
            // The daemon closes connections once in-flight calls are done.
            let closed = tokio::time::timeout(Duration::from_secs(30), conn.client.on_disconnect())
                .await
                .is_ok();
            if ctx.json {
                ctx.json(&r)?;
            } else if closed {
                outln("crewd stopped.")?;
            } else {
                outln("crewd is shutting down (still finishing in-flight calls).")?;
            }
            Ok(exit::SUCCESS)
        }
    }
}

pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "crewctl", &mut buf);
    crate::ctx::out(&String::from_utf8_lossy(&buf))?;
    Ok(exit::SUCCESS)
}

/// Writes `crewctl.1` and one page per subcommand (`crewctl-run.1`, ...).
pub fn man(dir: &Path) -> anyhow::Result<u8> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("cannot write man pages to {}", dir.display()))?;
    eprintln!("Wrote man pages to {}.", dir.display());
    Ok(exit::SUCCESS)
}
