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

#[cfg(test)]
mod tests {
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
