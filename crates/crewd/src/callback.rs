//! `on_run_end`: a command run when a run ends (completed, failed or cancelled), as pueue's
//! callback is. It learns which run and how from its environment (`CREW_RUN_ID`,
//! `CREW_RUN_STATUS`, `CREW_RUN_REASON`). It reads published events, so it fires only for what
//! is durable, and it runs off the actor; its output is discarded and its exit is only logged.

use crate::config::CommandSpec;
use crate::shared::Shared;
use std::process::Stdio;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;

/// Starts watching for run ends when a callback is configured.
pub fn start(shared: &Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    let command = shared.config.on_run_end.clone()?;
    let mut rx = shared.bus.subscribe();
    Some(tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(p) => {
                    if let Some((run, status, reason)) = run_end(&p.json) {
                        fire(&command, &run, &status, &reason);
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(
                        skipped = n,
                        "on_run_end fell behind; some run ends were not reported"
                    )
                }
                Err(RecvError::Closed) => return,
            }
        }
    }))
}

/// `(run id, status, reason)` when the event ends a run.
fn run_end(json: &str) -> Option<(String, String, String)> {
    // Cheap test first: nearly every event is something else.
    if !(json.contains("run.completed")
        || json.contains("run.failed")
        || json.contains("run.cancelled"))
    {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let status = v.get("type")?.as_str()?.strip_prefix("run.")?;
    if !matches!(status, "completed" | "failed" | "cancelled") {
        return None;
    }
    let run = v.get("runId")?.as_str()?.to_string();
    let reason = v
        .get("data")
        .and_then(|d| d.get("reason"))
        .and_then(|r| r.as_str())
        .unwrap_or_default()
        .to_string();
    Some((run, status.to_string(), reason))
}

fn fire(command: &CommandSpec, run: &str, status: &str, reason: &str) {
    let argv = command.argv();
    let Some((program, args)) = argv.split_first() else {
        return;
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env("CREW_RUN_ID", run)
        .env("CREW_RUN_STATUS", status)
        .env("CREW_RUN_REASON", crew_core::redact::redact_str(reason))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Nothing but stdio reaches the callback: a copy of an fd crewd is handing to an attempt
    // at this instant (a box's stdout, `crew_box::spawn::StdoutPipe`) would stay open as long
    // as the callback runs, and that attempt's output would not end with it. A callback is
    // rare, so the fork a `pre_exec` costs (std cannot `posix_spawn` then) does not matter.
    // SAFETY: the closure makes one async-signal-safe syscall and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            close_on_exec_from_3();
            Ok(())
        });
    }
    match cmd.spawn() {
        Ok(mut child) => {
            let run = run.to_string();
            tokio::spawn(async move {
                match child.wait().await {
                    Ok(s) if s.success() => {}
                    Ok(s) => tracing::warn!(%run, status = %s, "on_run_end exited unsuccessfully"),
                    Err(e) => {
                        tracing::warn!(%run, error = %e, "on_run_end could not be waited for")
                    }
                }
            });
        }
        Err(e) => {
            tracing::warn!(%run, error = %e, program = %program, "on_run_end could not start")
        }
    }
}

/// Every fd from 3 up close-on-exec (`close_range`, Linux 5.11; elsewhere nothing changes).
fn close_on_exec_from_3() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range with integer arguments only sets flags on this process's fds.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        );
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// An fd left inheritable in crewd (one being handed to an attempt) does not reach the
    /// callback.
    #[tokio::test]
    async fn the_callback_inherits_only_stdio() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("fds");
        // SAFETY: F_DUPFD of stdin gives a new fd without close-on-exec, owned here.
        let stray = unsafe { OwnedFd::from_raw_fd(libc::fcntl(0, libc::F_DUPFD, 3)) };
        let n = stray.as_raw_fd();
        let script = format!(
            "ls /proc/$$/fd > {o}.tmp && mv {o}.tmp {o}",
            o = out.display()
        );
        let spec = CommandSpec::Argv(vec!["/bin/sh".into(), "-c".into(), script]);
        fire(&spec, "r", "completed", "");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !out.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the callback never ran"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let fds = std::fs::read_to_string(&out).unwrap();
        assert!(
            !fds.lines().any(|l| l.trim() == n.to_string()),
            "fd {n} reached the callback: {fds}"
        );
        drop(stray);
    }

    use super::*;

    #[test]
    fn recognises_run_ends() {
        let e =
            r#"{"seq":3,"type":"run.failed","runId":"team_1","data":{"reason":"task x failed"}}"#;
        assert_eq!(
            run_end(e),
            Some(("team_1".into(), "failed".into(), "task x failed".into()))
        );
        assert_eq!(
            run_end(r#"{"type":"run.blocked","runId":"r","data":{}}"#),
            None
        );
        assert_eq!(
            run_end(r#"{"type":"task.completed","runId":"r","data":{"note":"run.completed"}}"#),
            None
        );
        assert_eq!(run_end("not json run.completed"), None);
    }
}
