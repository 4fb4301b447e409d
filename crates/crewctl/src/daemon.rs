//! `daemon status|stop`, `completions`, `man`.

use crate::cli::{Cli, DaemonCmd};
use crate::conn::NotRunning;
use crate::ctx::{outln, Ctx};
use crate::exit;
use crate::render::resources as view_resources;
use anyhow::Context as _;
use clap::CommandFactory;
use crew_api::methods::{DaemonPing, DaemonShutdown, DaemonStatus_};
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
            let pid = conn.call::<DaemonPing>(&NoParams {}).await?.pid;
            let r = conn.call::<DaemonShutdown>(&NoParams {}).await?;
            // "Stopped" when the process is gone: it closes connections first, then stops its
            // workers, closes the journal and lets go of the state directory, and a `stop &&
            // crewd` must find it free.
            let gone = tokio::time::timeout(STOP_WAIT, exited(pid)).await.is_ok();
            if ctx.json {
                ctx.json(&r)?;
            } else if gone {
                outln("crewd stopped.")?;
            } else {
                outln(&format!(
                    "crewd (pid {pid}) is still shutting down after {}s (finishing in-flight \
                     calls, stopping its workers).",
                    STOP_WAIT.as_secs()
                ))?;
            }
            Ok(exit::SUCCESS)
        }
    }
}

/// How long `daemon stop` waits for crewd to exit.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// Until process `pid` has exited: its pidfd becomes readable then (the daemon is the same
/// user's, on this machine: the socket is a Unix one). Without pidfds (Linux before 5.3), a
/// look at `/proc` every 20 ms.
async fn exited(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else { return };
    // SAFETY: pidfd_open with integer arguments returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0) };
    if let Ok(fd) = i32::try_from(fd) {
        if fd >= 0 {
            use std::os::fd::FromRawFd;
            // SAFETY: `fd` was just returned by pidfd_open and is owned here only.
            let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
            // SAFETY: the OwnedFd stays open, and the same fd, for the AsyncFd's life.
            let registered = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(
                    owned,
                    tokio::io::Interest::READABLE,
                )
            };
            if let Ok(afd) = registered {
                let _ = afd.readable().await;
                return;
            }
        }
    }
    while Path::new(&format!("/proc/{pid}")).exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
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
