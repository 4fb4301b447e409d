//! Core records → wire types. The only place the two meet.

use crew_api::types as api;
use crew_core::run::{self as core, RunState, RunSummary, TaskState};
use crew_core::usage::Usage;

pub fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub fn usage(u: &Usage) -> api::Usage {
    api::Usage {
        input: u.input,
        output: u.output,
        cache_read: u.cache_read,
        cache_write: u.cache_write,
        cost: u.cost,
        turns: u.turns,
    }
}

pub fn run_status(s: core::RunStatus) -> api::RunStatus {
    match s {
        core::RunStatus::Queued => api::RunStatus::Queued,
        core::RunStatus::Running => api::RunStatus::Running,
        core::RunStatus::Blocked => api::RunStatus::Blocked,
        core::RunStatus::Completed => api::RunStatus::Completed,
        core::RunStatus::Failed => api::RunStatus::Failed,
        core::RunStatus::Cancelled => api::RunStatus::Cancelled,
    }
}

pub fn task_status(s: core::TaskStatus) -> api::TaskStatus {
    match s {
        core::TaskStatus::Queued => api::TaskStatus::Queued,
        core::TaskStatus::Running => api::TaskStatus::Running,
        core::TaskStatus::Waiting => api::TaskStatus::Waiting,
        core::TaskStatus::Completed => api::TaskStatus::Completed,
        core::TaskStatus::Failed => api::TaskStatus::Failed,
        core::TaskStatus::Cancelled => api::TaskStatus::Cancelled,
        core::TaskStatus::Skipped => api::TaskStatus::Skipped,
        core::TaskStatus::NeedsAttention => api::TaskStatus::NeedsAttention,
    }
}

pub fn run_status_from_api(s: api::RunStatus) -> core::RunStatus {
    match s {
        api::RunStatus::Queued => core::RunStatus::Queued,
        api::RunStatus::Running => core::RunStatus::Running,
        api::RunStatus::Blocked => core::RunStatus::Blocked,
        api::RunStatus::Completed => core::RunStatus::Completed,
        api::RunStatus::Failed => core::RunStatus::Failed,
        api::RunStatus::Cancelled => core::RunStatus::Cancelled,
    }
}

pub fn planned(t: &crew_core::plan::PlannedTask, model: Option<&str>) -> api::PlannedTaskView {
    api::PlannedTaskView {
        id: t.id.to_string(),
        step_id: t.step_id.clone(),
        role: t.role.clone(),
        agent: t.agent.clone(),
        depends_on: t.depends_on.iter().map(ToString::to_string).collect(),
        model: model.map(str::to_string).or_else(|| t.model.clone()),
        runtime: crew_core::run::candidates::runtime_of(t).map(str::to_string),
        writes: t.writes,
        edits: crew_core::stream::edits_files(&t.tools),
        adds_tasks: t.expands.as_ref().map(|e| e.max_tasks),
        select: crew_core::run::candidates::selector(t).map(|(s, _, _)| s.as_str().to_string()),
        skills: t.skills.iter().map(|s| s.name.clone()).collect(),
        missing_skills: t
            .skills
            .iter()
            .filter(|s| s.missing)
            .map(|s| s.name.clone())
            .collect(),
        pre_step: t.checks.pre_step.as_ref().map(|p| p.display()),
        scope: t.scope.clone(),
        verify_commands: verify_commands(t),
        sandbox: None,
        slurm: None,
    }
}

/// The commands a task's checks run after its agent (the plan holds the configured ones too).
fn verify_commands(t: &crew_core::plan::PlannedTask) -> Vec<String> {
    t.checks
        .verify
        .as_ref()
        .map(|v| v.commands.clone())
        .unwrap_or_default()
}

fn duration_ms(
    a: Option<chrono::DateTime<chrono::Utc>>,
    b: Option<chrono::DateTime<chrono::Utc>>,
) -> Option<u64> {
    Some((b? - a?).num_milliseconds().max(0) as u64)
}

pub fn artifact(a: &core::ArtifactRef, task: Option<&str>) -> api::ArtifactInfo {
    api::ArtifactInfo {
        name: a.name.clone(),
        kind: a.kind.to_string(),
        task_id: task.map(str::to_string),
        bytes: a.bytes,
        sha256: a.sha256.to_string(),
    }
}

pub fn task(r: &RunState, t: &TaskState) -> api::TaskView {
    api::TaskView {
        id: t.plan.id.to_string(),
        step_id: t.plan.step_id.clone(),
        role: t.plan.role.clone(),
        agent: t.plan.agent.clone(),
        depends_on: t.plan.depends_on.iter().map(ToString::to_string).collect(),
        status: task_status(t.status),
        attempts: t.attempts,
        started_at: t.started_at.map(time),
        finished_at: t.finished_at.map(time),
        duration_ms: duration_ms(t.started_at, t.finished_at),
        // A step with candidates counts theirs (issue 36).
        usage: usage(&core::candidates::step_usage(r, t)),
        model: t.model.clone(),
        error: t.error.clone(),
        question: t.question().map(str::to_string),
        reused_from: t.reused_from().map(|(r, k)| api::ReusedFromView {
            run_id: r.clone(),
            task_id: k.clone(),
        }),
        progress: api::TaskProgressView {
            current_tool: t.progress.current_tool.clone(),
            turns: t.progress.turns,
            tokens: t.progress.tokens,
        },
        artifacts: t
            .artifacts
            .iter()
            .map(|a| artifact(&a, Some(&t.plan.id)))
            .collect(),
        scope: t.plan.scope.clone(),
        verify_commands: verify_commands(&t.plan),
        verdict: t.verdict().map(verdict),
        fixes: t.plan.judging.fixes.as_ref().map(ToString::to_string),
        candidates: candidates(t),
    }
}

/// A task's part in candidates (issue 36), if any.
fn candidates(t: &TaskState) -> Option<api::CandidatesView> {
    use crew_core::run::candidates as c;
    if let Some((of, index)) = c::candidate_of(&t.plan) {
        return Some(api::CandidatesView {
            of: Some(of.to_string()),
            index: Some(index),
            runtime: c::runtime_of(&t.plan).map(str::to_string),
            failed_checks: t.failed_checks().to_vec(),
            diffstat: t.commit().map(|c| api::CandidateDiffstat {
                files: c.files,
                insertions: c.insertions,
                deletions: c.deletions,
            }),
            ..Default::default()
        });
    }
    let (select, members, _) = c::selector(&t.plan)?;
    Some(api::CandidatesView {
        select: Some(select.as_str().to_string()),
        members: members.iter().map(ToString::to_string).collect(),
        choice: t.choice().map(|ch| api::ChoiceView {
            index: ch.index,
            candidate: ch.candidate.clone(),
            by: ch.by.clone(),
            reason: ch.reason.clone(),
        }),
        own_usage: Some(usage(&t.usage())),
        ..Default::default()
    })
}

pub fn verdict(v: &crew_core::verdict::Verdict) -> api::VerdictView {
    api::VerdictView {
        verdict: v.verdict.as_str().to_string(),
        findings: v
            .findings
            .iter()
            .map(|f| api::FindingView {
                title: f.title.clone(),
                detail: f.detail.clone(),
                paths: f.paths.clone(),
                severity: f.severity.clone(),
            })
            .collect(),
    }
}

pub fn status(r: &RunState) -> api::StatusResult {
    let u = r.usage();
    let spec = &r.spec;
    api::StatusResult {
        run: api::RunView {
            id: r.id.clone(),
            status: run_status(r.status),
            goal: spec.goal.clone(),
            cwd: spec.cwd.clone(),
            team: spec.team.clone(),
            workflow: spec.workflow.clone(),
            runtime: spec.runtime.clone(),
            model: spec.model.clone(),
            concurrency: spec.concurrency,
            failure_policy: match spec.failure_policy {
                core::FailurePolicy::FailFast => api::FailurePolicy::FailFast,
                core::FailurePolicy::Continue => api::FailurePolicy::Continue,
            },
            budget: spec.budget.map(|b| api::BudgetView {
                tokens: b.tokens,
                warn_at: b.warn_at,
                abort_at: b.abort_at,
                used: u.budget_tokens(),
            }),
            approval: serde_json::to_value(r.approval)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            reuse_results: serde_json::to_value(spec.reuse)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            schedule_id: spec.schedule_id.clone(),
            created_at: time(r.created_at),
            started_at: r.started_at.map(time),
            finished_at: r.finished_at.map(time),
            updated_at: time(r.updated_at),
            duration_ms: duration_ms(r.started_at.or(Some(r.created_at)), r.finished_at),
            usage: usage(&u),
            reason: r.reason.clone(),
            verdict: core::run_verdict(r).map(|o| o.as_str().to_string()),
            run_seq: r.run_seq,
        },
        tasks: r.tasks.iter().map(|t| task(r, t)).collect(),
        workspace: crate::workspace::view(r),
        added_tasks: added_tasks(r),
    }
}

/// The tasks fan-out steps added (`team.status`'s plan-style view of them).
fn added_tasks(r: &RunState) -> Vec<api::AddedTaskView> {
    let pending = r.approval == core::Approval::Pending;
    r.tasks
        .iter()
        .filter_map(|t| {
            let by = t.plan.added_by.as_ref()?;
            Some(api::AddedTaskView {
                id: t.plan.id.to_string(),
                added_by: by.to_string(),
                role: t.plan.role.clone(),
                agent: t.plan.agent.clone(),
                title: t.plan.title.clone(),
                depends_on: t.plan.depends_on.iter().map(ToString::to_string).collect(),
                scope: t.plan.scope.clone(),
                writes: t.plan.writes,
                awaiting_approval: pending && t.status == core::TaskStatus::Queued,
                verify_commands: verify_commands(&t.plan),
            })
        })
        .collect()
}

pub fn summary(s: &RunSummary) -> api::RunSummaryView {
    let c = &s.tasks;
    api::RunSummaryView {
        id: s.id.clone(),
        status: run_status(s.status),
        team: s.team.clone(),
        workflow: s.workflow.clone(),
        goal: s.goal.clone(),
        cwd: s.cwd.clone(),
        created_at: time(s.created_at),
        finished_at: s.finished_at.map(time),
        usage: usage(&s.usage),
        tasks: api::TaskCountsView {
            total: c.total,
            queued: c.queued,
            running: c.running,
            waiting: c.waiting,
            completed: c.completed,
            failed: c.failed,
            cancelled: c.cancelled,
            skipped: c.skipped,
            needs_attention: c.needs_attention,
        },
        schedule_id: s.schedule_id.clone(),
        reason: s.reason.clone(),
    }
}
pub use crate::diagnostic::to_api as diagnostic;

pub fn core_error(e: crew_core::run::CoreError) -> crew_api::ApiError {
    match e {
        core::CoreError::NotFound { what, id } => crew_api::ApiError::not_found(what, &id),
        core::CoreError::InvalidState(m) => crew_api::ApiError::invalid_state(m),
        core::CoreError::Invalid { field, message } => {
            crew_api::ApiError::invalid_params(&field, message)
        }
    }
}
