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

use crate::human;
use crate::outcome::Failure;
use crate::port::{AttemptKey, Port, WorkerCtl};
use crate::verify;
use crew_core::checks::{PreStep, PRE_STEP_FAILED, PRE_STEP_OUTPUT_BYTES};
use crew_core::run::FailReason;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;

/// Characters of a failing script's output in the task's error.
const ERROR_TAIL: usize = 2000;

/// Run `script` in `cwd`: `Ok(Some(block))` is the prompt block to append, `Ok(None)` means
/// an optional script failed (told to `port` as a warning), `Err` ends the attempt.
pub async fn run(
    script: &PreStep,
    cwd: &Path,
    env: &[(OsString, OsString)],
    grace: Duration,
    port: &dyn Port,
    key: &AttemptKey,
    ctl: &mut mpsc::UnboundedReceiver<WorkerCtl>,
) -> Result<Option<String>, Failure> {
    let shown = script.display();
    tracing::info!(script = %shown, "pre-step script");
    let limits = verify::Limits {
        timeout: Duration::from_millis(script.timeout_ms),
        grace,
        output_bytes: PRE_STEP_OUTPUT_BYTES,
    };
    let ran = verify::run(&script.shell_command(), cwd, env, &limits, ctl).await;
    let problem = match ran {
        Err(e) => format!("cannot run the pre-step script `{shown}`: {e}"),
        Ok(r) if r.stopped => {
            return Err(Failure::new(
                "stopped while its pre-step script ran".into(),
                false,
                FailReason::Cancelled,
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
    if script.optional {
        let message = format!("{problem} (optional: the agent runs without its output)");
        port.warning(key, PRE_STEP_FAILED.into(), message);
        return Ok(None);
    }
    Err(Failure::new(problem, true, FailReason::PreStep))
}
