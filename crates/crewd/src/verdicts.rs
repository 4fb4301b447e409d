//! What the daemon says about a run's verdicts (issue 30): whether `team.apply` may take its
//! result, and the summary's lines.

use crew_api::ApiError;
use crew_core::run::RunState;

/// `team.apply` of a run whose judges did not pass the work is refused unless forced.
pub fn apply_allowed(run: &RunState, force: bool) -> Result<(), ApiError> {
    match crew_core::run::run_verdict(run) {
        Some(v) if !v.passed() && !force => Err(ApiError::invalid_state(format!(
            "run {}'s judges did not pass the work ({}): fix it (crewctl resume grants a fix \
             round), or apply it anyway with force (crewctl apply --force)",
            run.id,
            lines(run).join("; ")
        ))),
        _ => Ok(()),
    }
}

/// `<task>: <verdict>[, n findings]` per judge that gave a verdict, in plan order.
pub fn lines(run: &RunState) -> Vec<String> {
    run.tasks
        .iter()
        .filter_map(|t| Some(format!("{}: {}", t.plan.id, t.verdict()?.headline())))
        .collect()
}
