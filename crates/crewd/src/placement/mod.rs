//! Where a runtime's attempts run. `local` (the default): a process of this daemon, supervised
//! by `executor`. `slurm`: a job on a Slurm cluster running `crew-worker` on a node, handed its
//! input and read back through a staging directory both sides share (`crew_staging`); crewd stays
//! the one durable authority and the job is only ever the attempt's runner.
//!
//! A placement is one module: Kubernetes would be one more next to `slurm` (ARCHITECTURE.md,
//! "Beyond one machine", says what it needs).

use serde::Deserialize;

use crate::actor::Core;
use crew_core::run::Start;

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
    let d = crew_core::resource::Diagnostic::error(
        crew_core::plan::REQUEST,
        None,
        Some("workspace"),
        message.clone(),
    );
    Err(crew_api::ApiError::validation(
        message,
        vec![crate::diagnostic::to_api(&d)],
    ))
}

/// Pick the tasks to start now: runs on a local runtime share `max_workers`, runs on a Slurm
/// runtime share `[slurm].max_workers` (a cluster takes more than the machine).
pub fn dispatch(core: &mut Core, now: chrono::DateTime<chrono::Utc>) -> Vec<Start> {
    let shared = core.shared.clone();
    let cfg = &shared.config;
    let Some(slurm) = &cfg.slurm else {
        return core.state.dispatch(now, cfg.max_workers);
    };
    let remote: Vec<&str> = cfg
        .runtimes
        .iter()
        .filter(|(_, rt)| rt.placement == Placement::Slurm)
        .map(|(name, _)| name.as_str())
        .collect();
    let pool = |run: &crew_core::run::RunState| usize::from(remote.contains(&run.spec.runtime.as_str()));
    core.state
        .dispatch_pooled(now, &[cfg.max_workers, slurm.max_workers], &pool)
}
