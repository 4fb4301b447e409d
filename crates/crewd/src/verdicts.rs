//! What the daemon says about a run's verdicts (issue 30): whether `team.apply` may take its
//! result, and the summary's lines.

use crew_api::ApiError;
use crew_core::run::RunState;

/// `team.apply` of a run whose judges did not pass the work is refused unless forced.
pub fn apply_allowed(run: &RunState, force: bool) -> Result<(), ApiError> {
    match crew_core::run::run_verdict(run) {
        Some(v) if !v.passed() && !force => Err(ApiError::invalid_state(format!(
            "run {}'s judges did not pass the work ({}): {}, or apply it anyway with force \
             (crewctl apply --force)",
            run.id,
            lines(run).join("; "),
            if resumable(run) {
                "fix it (crewctl resume grants a fix round)".to_string()
            } else {
                // Completed with the verdict (a team with no fixer: the verdict is its
                // product): there is no round to grant.
                format!("read their findings (crewctl status {})", run.id)
            }
        ))),
        _ => Ok(()),
    }
}

/// Whether `crewctl resume` can grant the run a fix round: it is stopped, not completed.
fn resumable(run: &RunState) -> bool {
    use crew_core::run::RunStatus;
    matches!(
        run.status,
        RunStatus::Blocked | RunStatus::Failed | RunStatus::Cancelled
    )
}

/// How the message of a run with no integrated result to apply ends: when its judges did not
/// pass the work, what to do instead (forcing cannot help: there is nothing to apply yet).
pub fn unintegrated_hint(run: &RunState) -> String {
    // Resume is for a stopped run; a running one may be in its fix round now, a completed
    // one has nothing to resume.
    match crew_core::run::run_verdict(run) {
        Some(v) if !v.passed() && resumable(run) => format!(
            "; its judges did not pass the work ({}): crewctl resume grants a fix round, and \
             crewctl diff {} <task> shows a task's change",
            lines(run).join("; "),
            run.id
        ),
        _ => String::new(),
    }
}

/// `<task>: <verdict>[, n findings]` per judge that gave a verdict, in plan order.
pub fn lines(run: &RunState) -> Vec<String> {
    run.tasks
        .iter()
        .filter_map(|t| Some(format!("{}: {}", t.plan.id, t.verdict()?.headline())))
        .collect()
}

/// The fix rounds each judge of a plan may start: the run's `maxFixRounds`, else the step's or
/// team's, else the config's `max_fix_rounds`.
pub fn set_fix_rounds(
    tasks: &mut [crew_core::plan::PlannedTask],
    param: Option<u32>,
    configured: u32,
) {
    for t in tasks.iter_mut() {
        let Some(fix) = &t.judging.fix else { continue };
        let rounds = match (param, fix.rounds_given) {
            (Some(n), _) => n,
            (None, true) => continue,
            (None, false) => configured,
        };
        if rounds != fix.max_rounds {
            let mut f = crew_core::verdict::FixPlan::clone(fix);
            f.max_rounds = rounds;
            t.judging.fix = Some(std::sync::Arc::new(f));
        }
    }
}
