//! The daemon's side of candidates (issue 36): at `team.run`, the run's `candidates` param
//! and the steps' asks become candidate tasks and selectors (`crew_core::run::candidates::
//! expand`), each candidate's runtime is checked, and shared mode is refused; in a worker, a
//! judging selector's prompt gets every candidate's diff. The choice itself is the core's.

use crate::shared::Shared;
use crew_api::error::ApiError;
use crew_api::types::RunParams;
use crew_core::plan::Plan;
use crew_core::run::candidates::{self as core, Ask, Select};
use std::path::Path;

/// Split the plan's candidate asks, the run's `candidates` param included (before the plan's
/// checks are filled in, so a candidate's verification retries stay the step's own).
pub fn expand(
    catalog: &crew_core::resource::Catalog,
    team: Option<&str>,
    skills: &crew_core::skills::RunSkills,
    p: &RunParams,
    plan: &mut Plan,
) -> Result<(), ApiError> {
    let select = match p.select.as_deref() {
        None => None,
        Some(s) => Some(Select::parse(s).ok_or_else(|| {
            ApiError::invalid_params("select", "must be `smallest`, `first` or `judge`")
        })?),
    };
    let run_contenders = match p.candidates {
        None => vec![],
        Some(n) => {
            let n = u32::try_from(n)
                .ok()
                .filter(|n| (1..=core::MAX_CANDIDATES).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid_params(
                        "candidates",
                        format!("must be between 1 and {}", core::MAX_CANDIDATES),
                    )
                })?;
            Ask::Count(n)
                .contenders()
                .map_err(|e| ApiError::invalid_params("candidates", e))?
        }
    };
    let judge = team
        .and_then(|t| catalog.team(t))
        .map(|t| crew_core::plan::role_templates(catalog, t, skills))
        .and_then(|roles| core::judge_template(&roles, None));
    let tasks = std::mem::take(&mut plan.tasks);
    let run_ask = (!run_contenders.is_empty()).then_some(core::RunAsk {
        contenders: &run_contenders,
        select,
        judge: judge.as_ref(),
    });
    // A fan-out step keeps the run's ask, for the tasks it adds at run time.
    let tasks: Vec<_> = tasks
        .into_iter()
        .map(|mut t| {
            if let (Some(exp), Some(a)) = (t.expands.as_mut(), run_ask) {
                std::sync::Arc::make_mut(exp).candidates = Some(core::RunAskFrozen::of(a));
            }
            t
        })
        .collect();
    plan.tasks = core::expand(tasks, run_ask);
    Ok(())
}

/// Candidates need worktree mode, and every candidate's runtime must be configured and
/// installed (checked here, so a run does not fail a candidate later for it).
pub fn check(shared: &Shared, plan: &Plan, worktree: bool, cwd: &Path) -> Result<(), ApiError> {
    let has = plan.tasks.iter().any(|t| {
        core::selector(t).is_some() || t.expands.as_deref().is_some_and(core::added_may_have)
    });
    if has && !worktree {
        return Err(ApiError::invalid_params(
            "candidates",
            "candidates need worktree mode, where each one works in its own git worktree from \
             the same start commit: run with --workspace worktree (or drop `candidates`)",
        ));
    }
    let path = std::env::var_os("PATH");
    for t in &plan.tasks {
        let Some(rt) = core::runtime_of(t) else {
            continue;
        };
        let Some(cfg) = shared.config.runtime(rt) else {
            return Err(ApiError::invalid_params(
                "candidates",
                format!(
                    "{} names runtime `{rt}`, which is not configured (known: {})",
                    t.id,
                    shared.config.runtime_names().join(", ")
                ),
            ));
        };
        if let Err(why) =
            crate::launch::command_installed(&cfg.command.argv(), cwd, path.as_deref())
        {
            return Err(ApiError::invalid_params(
                "candidates",
                format!("{} names runtime `{rt}`, which cannot start: {why}", t.id),
            ));
        }
    }
    Ok(())
}

/// The selection section of a judging selector's prompt, each passing candidate's patch read
/// from its artifact (bounded); `None` for any other task.
pub fn prompt_section(spec: &crate::attempt::AttemptSpec) -> Option<String> {
    if spec.candidates.is_empty() {
        return None;
    }
    let read = |dir: &str, file: String, max: usize| -> String {
        match read_bounded(&spec.run_dir.join(dir).join(file), max) {
            Ok(text) => text,
            Err(e) => format!("(it could not be read: {e})"),
        }
    };
    let diff = |s: &core::Shown, max: usize| read("patches", format!("{}.patch", s.task_id), max);
    let answer = |s: &core::Shown, max: usize| read("results", format!("{}.txt", s.task_id), max);
    Some(core::prompt_section(
        &spec.candidates,
        &answer,
        &diff,
        spec.verdict_repair.as_deref(),
    ))
}

/// At most `max` characters of a file, redacted: a candidate's patch is what a worker wrote.
pub(crate) fn read_bounded(path: &Path, max: usize) -> std::io::Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    f.take(u64::try_from(max.saturating_mul(4)).unwrap_or(u64::MAX))
        .read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    Ok(crew_core::text::bound(
        crew_core::redact::redact_str(&text),
        max,
    ))
}

/// The ref (under `refs/crew/<runId>/`, crew's reserved scheme) `team.apply` leaves on the
/// commit it brought into the user's branch: `team.pick` is refused once it exists.
fn applied_ref(run_id: &str) -> String {
    format!(
        "refs/crew/{run_id}/{}",
        crew_core::ids::reserved::APPLIED_REF
    )
}

/// After `team.apply` moved the user's branch: mark the run applied. A failure is logged: it
/// only loses `team.pick`'s refusal.
pub async fn mark_applied(
    shared: &Shared,
    run_id: &str,
    ws: &crew_core::run::WorkspaceSpec,
    commit: &str,
) {
    let repo = crate::workspace::git(shared).repo(Path::new(&ws.repo));
    if let Err(e) = repo.update_ref(&applied_ref(run_id), commit).await {
        tracing::warn!(error = %e, run = run_id, "cannot mark the run as applied");
    }
}

/// Whether `team.apply` brought the run into the user's branch.
pub async fn was_applied(
    shared: &Shared,
    run_id: &str,
    ws: &crew_core::run::WorkspaceSpec,
) -> bool {
    let repo = crate::workspace::git(shared).repo(Path::new(&ws.repo));
    matches!(repo.resolve(&applied_ref(run_id)).await, Ok(Some(_)))
}

/// `team.diff`'s `candidate`: the id of candidate `k` of step task `task`.
/// Candidate `k` of step `task` in `run`, named so a person can act: the task is not there,
/// has no candidates, or has fewer than `k`.
pub fn candidate_in(
    run: &crew_core::run::RunState,
    task: &str,
    k: i64,
) -> Result<String, ApiError> {
    let id = candidate_task(task, k)?;
    let t = run
        .task(task)
        .ok_or_else(|| ApiError::not_found("task", task))?;
    let Some((_, members, _)) = core::selector(&t.plan) else {
        return Err(ApiError::invalid_params(
            "candidate",
            format!("task {task} has no candidates"),
        ));
    };
    if !members.iter().any(|m| m.as_str() == id) {
        return Err(ApiError::invalid_params(
            "candidate",
            format!("task {task} has candidates 1 to {}, not {k}", members.len()),
        ));
    }
    Ok(id)
}

pub fn candidate_task(task: &str, k: i64) -> Result<String, ApiError> {
    let k = u32::try_from(k)
        .ok()
        .filter(|k| (1..=core::MAX_CANDIDATES).contains(k))
        .ok_or_else(|| {
            ApiError::invalid_params(
                "candidate",
                format!("must be between 1 and {}", core::MAX_CANDIDATES),
            )
        })?;
    Ok(
        crew_core::ids::reserved::task_id(crew_core::ids::reserved::TaskKind::Candidate, task, k)
            .to_string(),
    )
}
