//! Starting and steering a run's course: plan, run, cancel, resume, retry, approve, reject.

use super::{change_run, check_id, run_status_now, Out, P};
use crate::launch;
use crate::rpc::{views, Ctx};
use crew_api::methods::*;
use crew_api::types::*;
use std::sync::Arc;

pub(super) async fn plan(ctx: Arc<Ctx>, p: P<TeamPlan>) -> Out<TeamPlan> {
    let prepared = launch::preview(&ctx.shared, &p).await?;
    let model = prepared.spec.model.clone();
    Ok(PlanResult {
        team: prepared.plan.team.clone(),
        workflow: prepared.plan.workflow.clone(),
        concurrency: prepared.spec.concurrency,
        runtime: prepared.spec.runtime.clone(),
        tasks: prepared
            .plan
            .tasks
            .iter()
            .map(|t| api_task_with_box(&ctx, &prepared.spec, t, model.as_deref()))
            .collect(),
        diagnostics: prepared
            .policy_gaps
            .iter()
            .map(|g| crew_api::types::Diagnostic {
                path: format!("runtimes.{}", g.runtime),
                line: None,
                field: g.field(),
                severity: crew_api::types::Severity::Warning,
                message: g.message.clone(),
            })
            .collect(),
    })
}

/// A planned task and the box it would run in (`executor::sandbox::plan_box`).
fn api_task_with_box(
    ctx: &Ctx,
    spec: &crew_core::run::RunSpec,
    t: &crew_core::plan::PlannedTask,
    model: Option<&str>,
) -> PlannedTaskView {
    let mut v = views::planned(t, model);
    v.sandbox = crate::executor::sandbox::plan_box(&ctx.shared, spec, t);
    v.slurm = slurm_job(&ctx.shared.config, spec, t);
    v
}

/// The Slurm job a task would be, when its runtime is placed on Slurm (issue 35).
fn slurm_job(
    cfg: &crate::config::Config,
    spec: &crew_core::run::RunSpec,
    t: &crew_core::plan::PlannedTask,
) -> Option<SlurmJob> {
    let runtime = crew_core::run::candidates::runtime_of(t).unwrap_or(&spec.runtime);
    let rt = &crate::executor::sandbox::in_project(
        cfg,
        cfg.runtimes.get(runtime)?,
        std::path::Path::new(&spec.cwd),
    );
    let slurm = cfg.slurm.as_ref()?;
    if rt.placement != crate::placement::Placement::Slurm {
        return None;
    }
    let shape = crate::placement::slurm::task_shape(cfg, spec, t, runtime);
    let r = slurm.resources(rt.slurm.as_ref()).with_shape(&shape);
    Some(SlurmJob {
        partition: r.partition,
        account: r.account,
        qos: r.qos,
        cpus_per_task: r.cpus_per_task,
        memory_mb: r.memory_mb,
        time_limit_minutes: r.time_limit_minutes,
        sandbox: Some(crate::placement::slurm::node_box(cfg, rt, t)),
    })
}

pub(super) async fn run(ctx: Arc<Ctx>, p: P<TeamRun>) -> Out<TeamRun> {
    let prepared = launch::prepare(&ctx.shared, &p).await?;
    launch::start(&ctx.actor, prepared).await
}

pub(super) async fn cancel(ctx: Arc<Ctx>, p: P<TeamCancel>) -> Out<TeamCancel> {
    let reason = p.reason.clone();
    change_run(
        &ctx,
        &p.run_id,
        move |st, id| st.cancel_run(id, reason.clone()),
        |core, id, ids| {
            // Workers are stopped after this turn (`reconcile_workers`): the ones still
            // registered now are exactly those that get SIGTERM.
            let stopped = ids
                .iter()
                .filter(|t| core.workers.contains_key(&(id.to_string(), t.to_string())))
                .cloned()
                .collect();
            CancelResult {
                status: run_status_now(core, id),
                cancelled_task_ids: ids,
                stopped_task_ids: stopped,
            }
        },
    )
    .await
}

pub(super) async fn resume(ctx: Arc<Ctx>, p: P<TeamResume>) -> Out<TeamResume> {
    let budget = match p.budget_tokens {
        None => None,
        Some(n) if n > 0 => Some(n as u64),
        Some(_) => {
            return Err(crew_api::ApiError::invalid_params(
                "budgetTokens",
                "must be more than 0",
            ))
        }
    };
    crate::bundle::confirm_imported(&ctx, &p.run_id, p.confirm_imported, None).await?;
    change_run(
        &ctx,
        &p.run_id,
        move |st, id| st.resume_run(id, budget),
        |core, id, ids| ResumeResult {
            status: run_status_now(core, id),
            requeued_task_ids: ids,
        },
    )
    .await
}

pub(super) async fn retry(ctx: Arc<Ctx>, p: P<TeamRetry>) -> Out<TeamRetry> {
    for t in &p.task_ids {
        check_id("taskIds", t)?;
    }
    let tasks = p.task_ids.clone();
    crate::bundle::confirm_imported(&ctx, &p.run_id, p.confirm_imported, Some(tasks.clone()))
        .await?;
    let with_dependents = p.with_dependents.unwrap_or(false);
    change_run(
        &ctx,
        &p.run_id,
        move |st, id| {
            if with_dependents {
                st.retry_tasks_with_dependents(id, &tasks)
            } else {
                st.retry_tasks(id, &tasks)
            }
        },
        |_, _, ids| RetryResult {
            requeued_task_ids: ids,
        },
    )
    .await
}

pub(super) async fn approve(ctx: Arc<Ctx>, p: P<TeamApprove>) -> Out<TeamApprove> {
    decide_approval(&ctx, p, crew_core::run::State::approve).await
}

pub(super) async fn reject(ctx: Arc<Ctx>, p: P<TeamReject>) -> Out<TeamReject> {
    decide_approval(&ctx, p, crew_core::run::State::reject).await
}

/// `State::approve` or `State::reject`.
type Decide = fn(
    &crew_core::run::State,
    &str,
    Option<String>,
) -> Result<Vec<crew_core::run::Pending>, crew_core::run::CoreError>;

/// Approve or reject a run waiting for approval.
async fn decide_approval(
    ctx: &Ctx,
    p: ApproveParams,
    decide: Decide,
) -> Result<RunStatusResult, crew_api::ApiError> {
    let reason = p.reason.clone();
    change_run(
        ctx,
        &p.run_id,
        move |st, id| Ok((decide(st, id, reason.clone())?, ())),
        |core, id, ()| RunStatusResult {
            status: run_status_now(core, id),
        },
    )
    .await
}
