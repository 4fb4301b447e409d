//! A worktree run's change: its diff, and applying its integrated result to the repository.

use super::{check_id, with_run, Out, P};
use crate::rpc::Ctx;
use crew_api::methods::*;
use crew_api::ApiError;
use crew_core::run::RunState;
use std::sync::Arc;

pub(super) async fn diff(ctx: Arc<Ctx>, p: P<TeamDiff>) -> Out<TeamDiff> {
    check_id("runId", &p.run_id)?;
    let limit = match p.limit {
        None => 4 << 20,
        Some(l) if l > 0 => l.min(64 << 20) as usize,
        Some(_) => return Err(ApiError::invalid_params("limit", "must be positive")),
    };
    if p.task_id.is_none() && p.candidate.is_some() {
        return Err(ApiError::invalid_params(
            "candidate",
            "name the step's task (`taskId`) too",
        ));
    }
    let (task, candidate) = (p.task_id.clone(), p.candidate);
    let input = with_run(&ctx, &p.run_id, move |r| {
        let task = match (&task, candidate) {
            (Some(t), Some(k)) => Some(crate::candidates::candidate_in(r, t, k)?),
            (t, _) => t.clone(),
        };
        diff_input(r, task.as_deref())
    })
    .await??;
    crate::workspace::diff(&ctx.shared, input, p.stat.unwrap_or(false), limit).await
}

pub(super) async fn apply(ctx: Arc<Ctx>, p: P<TeamApply>) -> Out<TeamApply> {
    check_id("runId", &p.run_id)?;
    let force = p.force.unwrap_or(false);
    let (ws, integration, goal) = with_run(&ctx, &p.run_id, move |r| {
        let ws = workspace_of(r)?;
        // Nothing to apply comes first: forcing past the judges cannot help a run that has no
        // integrated result.
        let i = integration_of(r, &crate::verdicts::unintegrated_hint(r))?;
        crate::verdicts::apply_allowed(r, force)?;
        Ok::<_, ApiError>((ws, i, r.spec.goal.clone()))
    })
    .await??;
    let (ws_kept, commit) = (ws.clone(), integration.commit.clone());
    let input = crate::workspace::apply::ApplyInput {
        run_id: p.run_id.clone(),
        goal,
        ws,
        integration,
        squash: p.squash.unwrap_or(false),
        from_dir: p.from_dir.as_deref().map(std::path::PathBuf::from),
    };
    let applied = crate::workspace::apply::apply(&ctx.shared, input).await?;
    crate::candidates::mark_applied(&ctx.shared, &p.run_id, &ws_kept, &commit).await;
    Ok(applied)
}

/// What `team.diff` compares: a task's start and result, or the run's base and integration.
fn diff_input(r: &RunState, task: Option<&str>) -> Result<crate::workspace::DiffInput, ApiError> {
    let ws = workspace_of(r)?;
    match task {
        Some(t) => {
            let ts = r.task(t).ok_or_else(|| ApiError::not_found("task", t))?;
            let c = ts.commit().ok_or_else(|| {
                ApiError::invalid_state(format!(
                    "task {t} is {} and has no result commit",
                    ts.status.as_str()
                ))
            })?;
            Ok(crate::workspace::DiffInput {
                branch: c.branch.clone(),
                from: c.start.clone(),
                to: c.commit.clone(),
                ws,
            })
        }
        None => {
            let i = integration_of(r, " (name a task to see its change)")?;
            Ok(crate::workspace::DiffInput {
                branch: i.branch,
                from: ws.base.clone(),
                to: i.commit,
                ws,
            })
        }
    }
}

/// The run's workspace, or why it has none.
fn workspace_of(r: &RunState) -> Result<crew_core::run::WorkspaceSpec, ApiError> {
    r.spec
        .workspace
        .clone()
        .ok_or_else(|| ApiError::invalid_state(format!("run {} is not a worktree run", r.id)))
}

/// The run's integrated result, or why it has none yet (`hint` ends the message).
fn integration_of(r: &RunState, hint: &str) -> Result<crew_core::run::Integration, ApiError> {
    r.integration.clone().ok_or_else(|| {
        ApiError::invalid_state(format!(
            "run {} is {} and has no integrated result yet{hint}",
            r.id,
            r.status.as_str()
        ))
    })
}
