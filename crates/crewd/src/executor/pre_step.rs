//! A step's pre-step script (issue 19), run before the worker in the task's workspace (its
//! worktree, or the run's cwd in shared mode) by the runner verification commands use
//! (`verify::run`): its own process group, the workers' filtered environment, stdin
//! `/dev/null`, bounded in time (`preStepTimeout`, pi-crew's 30 s by default) and in output
//! (the last `PRE_STEP_OUTPUT_BYTES`, redacted), killed at once on cancel. The script is run
//! directly, each word quoted (`PreStep::shell_command`), as pi-crew's `execFileSync` did.
//!
//! What it printed (stdout and stderr together, as the runner captures them) joins the prompt
//! as a labelled block. A script that fails (non-zero exit, a signal, its timeout) fails the
//! attempt with reason `pre_step` and the end of its output; the attempt is retryable like
//! any other, so `max_attempts` decides. `preStepOptional: true` turns a failure into a
//! `task.warning` and the agent runs without the block. Only files the user trusts may carry
//! a script: `plan_checks` refuses the rest before a run exists.

use super::{checks, human, verify};
use crate::attempt::{AttemptSpec, Port, WorkerCtl};
use crate::shared::Shared;
use crew_core::checks::{PRE_STEP_FAILED, PRE_STEP_OUTPUT_BYTES};
use crew_core::run::AttemptResult;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;

/// Characters of a failing script's output in the task's error.
const ERROR_TAIL: usize = 2000;

fn failed(error: String, retryable: bool, reason: &str) -> AttemptResult {
    AttemptResult::Failed {
        usage: Default::default(),
        model: None,
        artifacts: Vec::new(),
        error,
        retryable,
        reason: reason.into(),
    }
}

/// Run the task's script, if it has one: `Ok(Some(block))` is the prompt block to append,
/// `Ok(None)` means no script (or an optional one that failed), `Err` ends the attempt.
pub async fn run(
    shared: &Shared,
    port: &std::sync::Arc<dyn Port>,
    spec: &AttemptSpec,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> Result<Option<String>, AttemptResult> {
    let Some(p) = &spec.plan.checks.pre_step else {
        return Ok(None);
    };
    let shown = p.display();
    tracing::info!(script = %shown, "pre-step script");
    let limits = verify::Limits {
        timeout: Duration::from_millis(p.timeout_ms),
        grace: Duration::from_millis(shared.config.kill_grace_ms),
        output_bytes: PRE_STEP_OUTPUT_BYTES,
    };
    let env = checks::task_env(shared, spec);
    let ran = match super::sandbox::command_box(shared, spec) {
        Err(e) => Err(std::io::Error::other(e)),
        Ok(b) => {
            let boxed = b.as_ref().map(|(p, s)| (*p, s));
            verify::run(&p.shell_command(), Path::new(&spec.cwd), boxed, &env, &limits, ctl).await
        }
    };
    let problem = match ran {
        Err(e) => format!("cannot run the pre-step script `{shown}`: {e}"),
        Ok(r) if r.stopped => {
            return Err(failed(
                "stopped while its pre-step script ran".into(),
                false,
                "cancelled",
            ))
        }
        Ok(r) if r.exit_code == Some(0) && !r.timed_out => {
            return Ok(Some(crew_core::prompt::pre_step_section(&shown, &r.output)))
        }
        Ok(r) => {
            let ended = match (r.timed_out, r.exit_code) {
                (true, _) => format!("timed out after {} and was killed", human(limits.timeout)),
                (false, Some(c)) => format!("exited with {c}"),
                (false, None) => "was killed by a signal".to_string(),
            };
            let count = r.output.chars().count();
            let tail: String = r
                .output
                .chars()
                .skip(count.saturating_sub(ERROR_TAIL))
                .collect();
            format!(
                "the pre-step script `{shown}` {ended}; the end of its output:\n{}",
                tail.trim_end()
            )
        }
    };
    if p.optional {
        let message = format!("{problem} (optional: the agent runs without its output)");
        port.warning(&spec.key(), PRE_STEP_FAILED.into(), message);
        return Ok(None);
    }
    Err(failed(problem, true, PRE_STEP_FAILED))
}
