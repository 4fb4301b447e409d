//! Where a runtime's attempts run. `local` (the default): a process of this daemon, supervised
//! by `executor`. `slurm`: a job on a Slurm cluster running `crew-worker` on a node, handed its
//! input and read back through a staging directory both sides share (`crew_staging`); crewd stays
//! the one durable authority and the job is only ever the attempt's runner.
//!
//! A placement is one module: Kubernetes would be one more next to `slurm` (ARCHITECTURE.md,
//! "Beyond one machine", says what it needs).

use serde::Deserialize;

use crate::attempt::AttemptKey;
use crew_core::run::{RemoteJob, Start};
use futures::future::BoxFuture;

pub mod slurm;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    #[default]
    Local,
    Slurm,
}

/// A remote attempt's input is a start commit and its output a result commit: a runtime
/// placed off this machine needs worktree mode. Refused at `team.run`/`team.plan` (1003).
pub fn check_workspace(
    runtime: &str,
    placement: Placement,
    worktree: bool,
) -> Result<(), crew_api::ApiError> {
    if placement == Placement::Local || worktree {
        return Ok(());
    }
    let message = format!(
        "runtime `{runtime}` runs on Slurm, which needs worktree mode (a task's input is a start \
         commit and its output a result commit); run with --workspace worktree"
    );
    Err(crate::diagnostic::request_refused("workspace", message))
}

/// Why a remote job could not be journaled.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The attempt is no longer the task's running one (cancelled, ended): nothing was
    /// journaled, and no job may run for it.
    #[error("the attempt is no longer running")]
    Refused,
    /// The journal could not make the event durable (it may hold it in memory).
    #[error("{0}")]
    Storage(String),
}

/// How a remote attempt journals its job (`worker.submitting`, then `worker.submitted`): each
/// call resolves once its event is durable, so the attempt submits only after its intent is on
/// disk. The actor implements it; the placement never sees the actor.
pub trait JobLedger: Send + Sync {
    fn submitting(
        &self,
        key: &AttemptKey,
        job: RemoteJob,
    ) -> BoxFuture<'static, Result<(), LedgerError>>;
    fn submitted(
        &self,
        key: &AttemptKey,
        job_id: u64,
    ) -> BoxFuture<'static, Result<(), LedgerError>>;
}

/// Pick the tasks to start now: runs on a local runtime share `max_workers`, runs on a Slurm
/// runtime share `[slurm].max_workers` (a cluster takes more than the machine). `held` tasks
/// wait (a worker of their last attempt is still on its way out: `Core::stopping`).
pub fn dispatch(
    state: &mut crew_core::run::State,
    cfg: &crate::config::Config,
    now: chrono::DateTime<chrono::Utc>,
    held: &dyn Fn(&str, &str) -> bool,
) -> Vec<Start> {
    let Some(slurm) = &cfg.slurm else {
        return state.dispatch_pooled(now, &[cfg.max_workers], &|_| 0, held);
    };
    let remote: Vec<&str> = cfg
        .runtimes
        .iter()
        .filter(|(_, rt)| rt.placement == Placement::Slurm)
        .map(|(name, _)| name.as_str())
        .collect();
    let pool =
        |run: &crew_core::run::RunState| usize::from(remote.contains(&run.spec.runtime.as_str()));
    state.dispatch_pooled(now, &[cfg.max_workers, slurm.max_workers], &pool, held)
}

/// Running tasks on Slurm runtimes (each task's own: a candidate's may differ from its run's)
/// whose current attempt has a journaled job (submitted, or about to be when the daemon
/// died): it may be running (or may have ended) without the daemon. (run id, task id).
pub fn remote_attempts(
    state: &crew_core::run::State,
    cfg: &crate::config::Config,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for id in &state.active {
        let Some(run) = state.run(id) else {
            continue;
        };
        for t in &run.tasks {
            let slurm = || {
                cfg.runtimes
                    .get(crew_core::run::candidates::task_runtime(run, t))
                    .is_some_and(|rt| rt.placement == Placement::Slurm)
            };
            if t.status == crew_core::run::TaskStatus::Running && t.job().is_some() && slurm() {
                out.push((id.clone(), t.plan.id.to_string()));
            }
        }
    }
    out
}
