//! What happens between the agent's answer and the attempt's report (issue 17), all of it off
//! the actor, in the worker's task:
//!
//! - **Verification**: a task whose plan carries commands runs them, one after another, in its
//!   workspace (the worktree before its result is committed, or the run's cwd); each one's
//!   exit code and output tail go into `task.completed` and an artifact
//!   `verify/<task>.attempt-<n>.<k>.txt`. The first failing one fails the attempt with reason
//!   `verify`; the core retries it as often as the step allows, with the failure as the next
//!   prompt's feedback.
//! - **No-change guard**: a task whose role may edit files (`edit`/`write` tools: the notion of
//!   the refused-writes check; a bash-only verifier or reviewer changes nothing by design) and
//!   that changed nothing needs attention, unless its step or the config allows it. Worktree
//!   mode reads the result commit; shared mode compares the cwd's git state (HEAD, a hash of
//!   the uncommitted diff and untracked files) before and after the attempt. A cwd outside a
//!   git work tree cannot tell, and is not guarded. In shared mode a parallel task's edits
//!   count as a change: the guard then stays silent rather than accuse wrongly.
//! - **Scope**: in worktree mode the result commit may touch only the task's scope; other
//!   paths make it need attention, naming them, or (policy `warn`) a `task.warning`.

use super::{blocking, env, process, verify};
use crate::attempt::{AttemptSpec, Port, WorkerCtl};
use crate::shared::Shared;
use crew_core::checks::ScopePolicy;
use crew_core::run::AttemptResult;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;

/// Paths named in a scope violation, at most.
const PATHS_SHOWN: usize = 20;

/// The guard applies to this task: it may edit files and nothing allows it to change nothing.
fn guarded(shared: &Shared, spec: &AttemptSpec) -> bool {
    crew_core::stream::edits_files(&spec.plan.tools)
        && !crew_core::checks::product_is_artifact(&spec.plan)
        && !spec
            .plan
            .checks
            .allow_no_change
            .unwrap_or(shared.config.allow_no_change)
}

fn attention(result: AttemptResult, reason: String) -> AttemptResult {
    match result {
        AttemptResult::Completed {
            usage,
            model,
            artifacts,
            ..
        } => AttemptResult::NeedsAttention {
            usage,
            model,
            artifacts,
            reason,
        },
        other => other,
    }
}

/// A candidate (issue 36) is not failed by a check: it completes, its commit kept, with the
/// failed check recorded as a failing outcome, and its selector leaves it out. Any other task
/// needs attention.
fn ruled_out(
    spec: &AttemptSpec,
    result: AttemptResult,
    check: &str,
    reason: String,
) -> AttemptResult {
    if crew_core::run::candidates::candidate_of(&spec.plan).is_none() {
        return attention(result, reason);
    }
    match result {
        AttemptResult::Completed {
            usage,
            model,
            artifacts,
            reused_from,
            commit,
            mut verification,
        } => {
            verification.push(verify::failed_check(check, reason));
            AttemptResult::Completed {
                usage,
                model,
                artifacts,
                reused_from,
                commit,
                verification,
            }
        }
        other => other,
    }
}

fn no_change_reason(spec: &AttemptSpec) -> String {
    format!(
        "{} changed nothing: its role may edit files, yet the attempt left the code as it was \
         (if that is fine: `allowNoChange: true` on the step, or a run started with \
         `--allow-no-change`, the run param `allowNoChange`; resuming this run asks the agent \
         again)",
        spec.plan.role
    )
}

/// Shared mode, before the attempt: the cwd's git state, when the guard applies to the task.
pub async fn shared_before(shared: &Shared, spec: &AttemptSpec) -> Option<String> {
    if !guarded(shared, spec) {
        return None;
    }
    crate::results::git_state(&spec.cwd).await
}

/// Shared mode, after the attempt (and its verification).
pub async fn shared_after(
    spec: &AttemptSpec,
    before: Option<String>,
    result: AttemptResult,
) -> AttemptResult {
    let Some(before) = before else {
        return result;
    };
    if !matches!(
        result,
        AttemptResult::Completed {
            reused_from: None,
            ..
        }
    ) {
        return result;
    }
    match crate::results::git_state(&spec.cwd).await {
        Some(after) if after == before => attention(result, no_change_reason(spec)),
        _ => result,
    }
}

/// Worktree mode, after the result commit: the no-change guard and the scope.
pub async fn worktree_after(
    shared: &Shared,
    port: &std::sync::Arc<dyn Port>,
    spec: &AttemptSpec,
    ws: &crate::workspace::TaskWorkspace,
    result: AttemptResult,
) -> AttemptResult {
    let AttemptResult::Completed {
        commit: Some(c),
        reused_from,
        ..
    } = &result
    else {
        return result;
    };
    if !c.changed() {
        return if guarded(shared, spec) && reused_from.is_none() {
            let reason = no_change_reason(spec);
            ruled_out(spec, result, "(no-change guard)", reason)
        } else {
            result
        };
    }
    let scope = crew_core::scope::Scope::new(&spec.plan.scope);
    if scope.is_unrestricted() {
        return result;
    }
    let repo = crate::workspace::git(shared).repo(&ws.repo);
    let changed = match repo.changed_paths(&c.start, &c.commit).await {
        Ok(p) => p,
        Err(e) => {
            return AttemptResult::Failed {
                usage: Default::default(),
                model: None,
                artifacts: Vec::new(),
                error: format!("cannot read what the task changed to check its scope: {e}"),
                retryable: true,
                reason: crew_core::run::FailReason::Workspace.into(),
            }
        }
    };
    // The scope is relative to the run's cwd; the commit's paths to the repository's top.
    let prefix = if ws.subdir.is_empty() {
        String::new()
    } else {
        format!("{}/", ws.subdir.trim_end_matches('/'))
    };
    let outside: Vec<String> = changed
        .iter()
        .filter(|p| match p.strip_prefix(&prefix) {
            Some(rel) => !scope.covers(rel),
            None => true,
        })
        .cloned()
        .collect();
    if outside.is_empty() {
        return result;
    }
    let shown: Vec<&str> = outside
        .iter()
        .take(PATHS_SHOWN)
        .map(String::as_str)
        .collect();
    let more = outside.len().saturating_sub(shown.len());
    let message = format!(
        "changed {} path(s) outside its scope ({}): {}{}",
        outside.len(),
        spec.plan.scope.join(", "),
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    );
    let policy = spec
        .plan
        .checks
        .scope_policy
        .unwrap_or(shared.config.scope_policy);
    match policy {
        ScopePolicy::NeedsAttention => {
            let reason = format!(
                "{message}. Its commit is on {}; resume to run it again, or widen the step's scope",
                c.branch
            );
            ruled_out(spec, result, "(scope)", reason)
        }
        ScopePolicy::Warn => {
            port.warning(&spec.key(), "scope".into(), message);
            result
        }
    }
}

/// The environment the task's commands (verification, pre-step script) get: the workers'.
pub fn task_env(
    shared: &Shared,
    spec: &AttemptSpec,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut extra = shared.config.env_passthrough.clone();
    extra.extend(spec.runtime.env.iter().cloned());
    env::worker_env(
        &extra,
        &[
            (process::ENV_RUN_ID, spec.run_id.clone()),
            (process::ENV_TASK_ID, spec.task_id.clone()),
            (process::ENV_ATTEMPT, spec.attempt.to_string()),
        ],
    )
}

/// The task's verification: the step's own (integration) checks, else the project's per-task
/// checks on a task that can edit (fan-out and fix tasks included).
pub fn verify_commands(shared: &Shared, spec: &AttemptSpec) -> Option<crew_core::checks::Verify> {
    match &spec.plan.checks.verify {
        Some(v) => Some(v.clone()),
        None if !spec.task_verify_commands.is_empty()
            && crew_core::verdict::can_edit(&spec.plan.tools) =>
        {
            Some(crew_core::checks::Verify {
                commands: spec.task_verify_commands.clone(),
                // A candidate's other candidates are its retries (issue 36).
                retries: Some(
                    if crew_core::run::candidates::candidate_of(&spec.plan).is_some() {
                        0
                    } else {
                        shared.config.verify_retries
                    },
                ),
            })
        }
        None => None,
    }
}

/// Run the task's verification commands after a completed attempt.
pub async fn verify(
    shared: &Shared,
    spec: &AttemptSpec,
    result: AttemptResult,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> AttemptResult {
    let Some(v) = verify_commands(shared, spec) else {
        return result;
    };
    if !matches!(result, AttemptResult::Completed { .. }) {
        return result;
    }
    let cfg = &shared.config;
    let env = task_env(shared, spec);
    let limits = verify::Limits {
        timeout: Duration::from_millis(cfg.verify_timeout_ms),
        grace: Duration::from_millis(cfg.kill_grace_ms),
        output_bytes: usize::try_from(cfg.verify_output_bytes).unwrap_or(usize::MAX),
    };
    let launcher = || -> Result<Box<dyn crew_attempt::spawn::Launcher>, String> {
        let boxed = super::sandbox::command_box(shared, spec)?;
        Ok(Box::new(super::contain::Contained {
            boxed,
            reaper: false,
        }))
    };
    let checked = verify::run_all(
        &v.commands,
        Path::new(&spec.cwd),
        &env,
        &limits,
        &launcher,
        ctl,
        &spec.run_dir,
        &spec.key(),
    )
    .await;
    if !checked.stopped {
        if let Err(e) = blocking(|| crate::artifacts::make_durable(&spec.run_dir)) {
            let (usage, model) = match &result {
                AttemptResult::Completed { usage, model, .. } => (*usage, model.clone()),
                _ => Default::default(),
            };
            return AttemptResult::Failed {
                usage,
                model,
                artifacts: Vec::new(),
                error: format!("cannot make the task's files durable: {e}"),
                retryable: true,
                reason: crew_core::run::FailReason::Storage.into(),
            };
        }
    }
    // A candidate's failing command rules it out rather than failing it (issue 36); with
    // `verifyRetries` on its step it is retried as any task while retries remain (the core
    // decides), and once they are spent it completes with the failure recorded, so it stays
    // a possible base of the fix when no candidate passes.
    let mut checked = checked;
    if failure_completes(spec, &v) {
        checked.rule_out();
    }
    verify::settle(result, checked)
}

/// A candidate whose verification retries are spent completes with its failing checks
/// recorded (`Checked::rule_out`), here and on a Slurm node (`Launch::checks`).
pub fn failure_completes(spec: &AttemptSpec, v: &crew_core::checks::Verify) -> bool {
    crew_core::run::candidates::candidate_of(&spec.plan).is_some()
        && spec.verify_retries_used >= v.retries.unwrap_or(0)
}
