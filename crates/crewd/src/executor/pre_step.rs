//! The step's pre-step script (`crew_attempt::pre_step`), in the task's environment.

use super::checks;
use crate::attempt::{AttemptSpec, Port, WorkerCtl};
use crate::shared::Shared;
use crew_core::run::AttemptResult;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;

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
    let env = checks::task_env(shared, spec);
    let grace = Duration::from_millis(shared.config.kill_grace_ms);
    crew_attempt::pre_step::run(
        p,
        Path::new(&spec.cwd),
        &env,
        grace,
        port.as_ref(),
        &spec.key(),
        ctl,
    )
    .await
    .map_err(|f| f.into_result(Default::default(), None, Vec::new()))
}
