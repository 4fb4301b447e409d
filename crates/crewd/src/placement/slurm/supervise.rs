//! One attempt as a Slurm job: stage, submit (or re-attach), follow, finish. One file a
//! phase: `stage` writes the staging directory, `submit` gets the job, `follow` follows it
//! until it ends (passing on the worker's `notes`) and `take` brings back what the worker left.

mod follow;
mod notes;
mod stage;
mod submit;
mod take;

use crate::attempt::{AttemptSpec, Port, WorkerCtl};
use crate::placement::{JobLedger, LedgerError};
use crate::shared::Shared;
use crew_core::run::{ArtifactRef, AttemptResult};
use crew_core::usage::Usage;
use std::sync::Arc;
use submit::SubmitError;
use tokio::sync::mpsc;

fn failed(
    artifacts: Vec<ArtifactRef>,
    error: String,
    retryable: bool,
    reason: &str,
) -> AttemptResult {
    AttemptResult::Failed {
        usage: Usage::default(),
        model: None,
        artifacts,
        error,
        retryable,
        reason: reason.into(),
    }
}

/// Run `spec` as a Slurm job in the worktree at `start` (`spec.cwd`), or follow the job an
/// earlier crewd submitted for this very attempt.
pub async fn attempt(
    shared: &Arc<Shared>,
    port: &Arc<dyn Port>,
    ledger: &Arc<dyn JobLedger>,
    spec: &AttemptSpec,
    start: &str,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> AttemptResult {
    let Some(cfg) = shared.config.slurm.clone() else {
        return failed(
            vec![],
            format!(
                "runtime `{}` is placed on Slurm but the config has no [slurm] section",
                spec.runtime_name
            ),
            false,
            "spawn",
        );
    };
    let client = super::backend(&cfg);
    let mut artifacts = Vec::new();
    let staged = match stage::stage(shared, &cfg, spec, start, &mut artifacts).await {
        Ok(s) => s,
        Err(e) => return failed(artifacts, e, true, "staging"),
    };
    let job_id = match submit::submit_or_attach(
        &client,
        &cfg,
        ledger,
        spec,
        &staged.staging.dir,
        &staged.tag,
    )
    .await
    {
        Ok(id) => id,
        Err(SubmitError::Slurm(e)) => {
            let retryable = e.is_transient();
            return failed(
                artifacts,
                format!("cannot submit the Slurm job: {e}"),
                retryable,
                "slurm_submit",
            );
        }
        Err(SubmitError::Ledger(LedgerError::Refused)) => {
            return failed(
                artifacts,
                "the attempt ended before its Slurm job was submitted".into(),
                false,
                "cancelled",
            )
        }
        Err(SubmitError::Ledger(LedgerError::Storage(e))) => {
            return failed(
                artifacts,
                format!("cannot journal the Slurm job: {e}"),
                true,
                "storage",
            )
        }
    };
    tracing::info!(job_id, staging = %staged.staging.dir.display(), "Slurm job submitted");
    let mut result = follow::follow(
        shared,
        port,
        spec,
        &cfg,
        &client,
        job_id,
        staged,
        ctl,
        &mut artifacts,
    )
    .await;
    // Named files must be durable before the event naming them, as for local attempts. An
    // attempt that names none (its pre-step script failed on the node) has nothing to sync,
    // and the run's directory may not exist.
    if result.parts().2.is_empty() {
        return result;
    }
    let run_dir = spec.run_dir.clone();
    if let Err(e) = tokio::task::spawn_blocking(move || crate::artifacts::make_durable(&run_dir))
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    {
        result = failed(
            vec![],
            format!("cannot make the task's files durable: {e}"),
            true,
            "storage",
        );
    }
    result
}

fn bound(s: &str) -> String {
    let s = crew_core::redact::redact_str(s);
    match s.char_indices().nth(2000) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
fn mkfifo(path: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}
