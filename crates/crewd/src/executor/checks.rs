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

use super::{blocking, env, human, process, verify};
use crate::attempt::{AttemptSpec, Port, WorkerCtl};
use crate::shared::Shared;
use crew_core::checks::{ScopePolicy, VerifyOutcome, VERIFY_FAILED};
use crew_core::run::AttemptResult;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;

/// Characters of a command's output in `task.completed` and in the retry's feedback.
const EVENT_TAIL: usize = 2000;
/// Paths named in a scope violation, at most.
const PATHS_SHOWN: usize = 20;

fn char_tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    s.chars().skip(count.saturating_sub(n)).collect()
}

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
            verification.push(failed_check(check, reason));
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

/// A check that is no command (scope, no-change guard, a command that could not run) as a
/// failing outcome.
fn failed_check(check: &str, reason: String) -> VerifyOutcome {
    VerifyOutcome {
        command: check.to_string(),
        exit_code: Some(1),
        timed_out: false,
        duration_ms: 0,
        tail: char_tail(&reason, EVENT_TAIL),
        output_bytes: 0,
        artifact: String::new(),
    }
}

fn no_change_reason(spec: &AttemptSpec) -> String {
    format!(
        "{} changed nothing: its role may edit files, yet the attempt left the code as it was \
         (set `allowNoChange: true` on the step if that is fine)",
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

/// Run the task's verification commands after a completed attempt.
pub async fn verify(
    shared: &Shared,
    spec: &AttemptSpec,
    result: AttemptResult,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> AttemptResult {
    // The step's own (integration) checks, else the project's per-task checks on a task
    // that can edit (fan-out and fix tasks included).
    let task_checks;
    let v = match &spec.plan.checks.verify {
        Some(v) => v,
        None if !spec.task_verify_commands.is_empty()
            && crew_core::verdict::can_edit(&spec.plan.tools) =>
        {
            task_checks = crew_core::checks::Verify {
                commands: spec.task_verify_commands.clone(),
                retries: Some(shared.config.verify_retries),
            };
            &task_checks
        }
        None => return result,
    };
    let AttemptResult::Completed {
        usage,
        model,
        mut artifacts,
        reused_from,
        commit,
        ..
    } = result
    else {
        return result;
    };
    let cfg = &shared.config;
    let env = task_env(shared, spec);
    let limits = verify::Limits {
        timeout: Duration::from_millis(cfg.verify_timeout_ms),
        grace: Duration::from_millis(cfg.kill_grace_ms),
        output_bytes: usize::try_from(cfg.verify_output_bytes).unwrap_or(usize::MAX),
    };
    let mut outcomes: Vec<VerifyOutcome> = Vec::new();
    let mut failure: Option<String> = None;
    let cwd = Path::new(&spec.cwd);
    for (k, command) in v.commands.iter().enumerate() {
        tracing::info!(command = %command, "verification command");
        let ran = match super::sandbox::command_box(shared, spec) {
            Err(e) => Err(std::io::Error::other(e)),
            Ok(boxed) => {
                let launcher = super::contain::Contained {
                    boxed,
                    reaper: false,
                };
                verify::run(command, cwd, &env, &limits, &launcher, ctl).await
            }
        };
        let ran = match ran {
            Ok(r) => r,
            Err(e) => {
                failure = Some(format!("cannot run verification command `{command}`: {e}"));
                break;
            }
        };
        if ran.stopped {
            return AttemptResult::Failed {
                usage,
                model,
                artifacts,
                error: "stopped while verifying".into(),
                retryable: false,
                reason: crew_core::run::FailReason::Cancelled.into(),
            };
        }
        let name = format!(
            "verify/{}.attempt-{}.{}.txt",
            spec.task_id,
            spec.attempt,
            k + 1
        );
        let ended = match (ran.timed_out, ran.exit_code) {
            (true, _) => format!("timed out after {}", human(limits.timeout)),
            (false, Some(c)) => format!("exited with {c}"),
            (false, None) => "was killed by a signal".to_string(),
        };
        let text = format!(
            "$ {command}\n{}\n[{ended} after {}; {} bytes of output]\n",
            ran.output.trim_end(),
            human(ran.duration),
            ran.output_bytes
        );
        match blocking(|| crate::artifacts::put(&spec.run_dir, &name, "verify", text.as_bytes())) {
            Ok(a) => artifacts.push(a),
            Err(e) => tracing::warn!(error = %e, "cannot keep a verification command's output"),
        }
        let outcome = VerifyOutcome {
            command: command.clone(),
            exit_code: ran.exit_code,
            timed_out: ran.timed_out,
            duration_ms: u64::try_from(ran.duration.as_millis()).unwrap_or(u64::MAX),
            tail: char_tail(&ran.output, EVENT_TAIL),
            output_bytes: ran.output_bytes,
            artifact: name,
        };
        let passed = outcome.passed();
        if !passed {
            failure = Some(format!(
                "verification failed: `{command}` {ended}; the end of its output:\n{}",
                outcome.tail.trim_end()
            ));
        }
        outcomes.push(outcome);
        if !passed {
            break;
        }
    }
    if let Err(e) = blocking(|| crate::artifacts::make_durable(&spec.run_dir)) {
        return AttemptResult::Failed {
            usage,
            model,
            artifacts: Vec::new(),
            error: format!("cannot make the task's files durable: {e}"),
            retryable: true,
            reason: crew_core::run::FailReason::Storage.into(),
        };
    }
    // A candidate's failing command rules it out rather than failing it (issue 36); with
    // `verifyRetries` on its step it is retried as any task while retries remain, which the
    // core decides, so only the default (no retries) completes here.
    let candidate_completes = crew_core::run::candidates::candidate_of(&spec.plan).is_some()
        && v.retries.unwrap_or(0) == 0;
    if let (Some(error), true) = (&failure, candidate_completes) {
        if outcomes.iter().all(VerifyOutcome::passed) {
            outcomes.push(failed_check("(verification)", error.clone()));
        }
        return AttemptResult::Completed {
            usage,
            model,
            artifacts,
            reused_from,
            commit,
            verification: outcomes,
        };
    }
    match failure {
        None => AttemptResult::Completed {
            usage,
            model,
            artifacts,
            reused_from,
            commit,
            verification: outcomes,
        },
        Some(error) => AttemptResult::Failed {
            usage,
            model,
            artifacts,
            error,
            retryable: true,
            reason: VERIFY_FAILED.into(),
        },
    }
}
