//! Follow-ups derived from the state after a change: budget, skips, plan approval, and the run's
//! final status. The daemon calls `settle` until it returns nothing.

use super::event::{EventBody, Pending};
use super::types::{
    Approval, Budget, FailurePolicy, RunState, RunStatus, TaskCounts, TaskState, TaskStatus,
};
use super::State;

impl State {
    pub fn settle(&self, run_id: &str) -> Vec<Pending> {
        match self.runs.get(run_id) {
            Some(run) if !run.status.is_finished() => {
                let counts = self
                    .summaries
                    .get(run_id)
                    .map_or_else(|| run.task_counts(), |s| s.tasks);
                settle_run(run, &counts)
            }
            _ => vec![],
        }
    }
}

fn deps_completed(run: &RunState, deps: &[crate::ids::SafeId]) -> bool {
    deps.iter().all(|d| {
        run.task(d)
            .is_some_and(|t| t.status == TaskStatus::Completed)
    })
}

/// `counts` are the run's task counts (kept by `apply`): this runs after every change, so the
/// common cases (something still running, nothing failed) are answered without a pass over the
/// tasks.
///
/// The rules in the order they apply: the first one with something to say decides. Each says
/// `None` to leave the run to the next, or `Some` of its events (none at all: nothing to do yet).
fn settle_run(run: &RunState, counts: &TaskCounts) -> Vec<Pending> {
    budget(run, counts)
        // Candidates (issue 36): a selector whose choice can be made makes it.
        .or_else(|| super::candidates::settle(run))
        .or_else(|| skips(run, counts))
        .or_else(|| approval(run))
        .or_else(|| final_status(run, counts))
        .unwrap_or_default()
}

/// Budget (SPEC §4): tokens = input + output + cacheWrite, checked against live usage.
/// A run whose every task completed is done, whatever its last task cost.
fn budget(run: &RunState, counts: &TaskCounts) -> Option<Vec<Pending>> {
    let b = run
        .spec
        .budget
        .filter(|_| counts.completed != counts.total)?;
    // Summed only here and where an event carries it: this runs after every change, and a sum
    // is O(tasks).
    let used = run.usage().budget_tokens();
    if !run.halted && b.spent(used) {
        return Some(budget_exceeded(run, b, used));
    }
    (!run.budget_warned && used as f64 >= b.warn_at * b.tokens as f64)
        .then(|| vec![budget_warning(run, b, used)])
}

/// The budget is spent: what runs is cancelled, what waits in the queue is skipped, and the
/// run fails.
fn budget_exceeded(run: &RunState, b: Budget, used: u64) -> Vec<Pending> {
    let id = run.id.as_str();
    let mut out = Vec::new();
    // One report can cross both thresholds: the warning still comes first.
    if !run.budget_warned {
        out.push(budget_warning(run, b, used));
    }
    out.push(
        Pending::run(
            id,
            EventBody::RunBudgetExceeded {
                used,
                total: b.tokens,
            },
        )
        .with_message(format!("budget exceeded: {used} of {} tokens", b.tokens)),
    );
    for t in &run.tasks {
        let body = match t.status {
            TaskStatus::Running | TaskStatus::Waiting => EventBody::TaskCancelled {
                reason: Some("budget_exceeded".into()),
            },
            TaskStatus::Queued => EventBody::TaskSkipped {
                reason: "budget_exceeded".into(),
            },
            _ => continue,
        };
        out.push(Pending::task(id, &t.plan.id, body));
    }
    out.push(run_failed(run, "budget_exceeded".into()));
    out
}

fn budget_warning(run: &RunState, b: Budget, used: u64) -> Pending {
    Pending::run(
        &run.id,
        EventBody::RunBudgetWarning {
            used,
            total: b.tokens,
        },
    )
    .with_message(format!("budget warning: {used} of {} tokens", b.tokens))
}

/// Skips. fail-fast: after a final failure nothing new starts; continue: only dependents of
/// what cannot complete any more.
fn skips(run: &RunState, counts: &TaskCounts) -> Option<Vec<Pending>> {
    // A queued task can only be doomed by a task that failed, was skipped or was cancelled.
    if counts.failed + counts.skipped + counts.cancelled == 0 {
        return None;
    }
    let failed = first_failed(run, counts);
    let out: Vec<Pending> = run
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Queued)
        .filter_map(|t| {
            let reason = skip_reason(run, t, failed)?;
            Some(Pending::task(
                &run.id,
                &t.plan.id,
                EventBody::TaskSkipped { reason },
            ))
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

/// Why queued task `t` can never start, if it can't. `failed`: the run's first failed task.
fn skip_reason(run: &RunState, t: &TaskState, failed: Option<&str>) -> Option<String> {
    if run.spec.failure_policy == FailurePolicy::FailFast {
        if let Some(f) = failed {
            return Some(format!("blocked by failed task {f}"));
        }
    }
    let dead_dep = t.plan.depends_on.iter().find(|d| {
        !super::candidates::is_own_candidate(&t.plan, d)
            && run.task(d).is_some_and(|dt| {
                matches!(
                    dt.status,
                    TaskStatus::Failed | TaskStatus::Skipped | TaskStatus::Cancelled
                )
            })
    })?;
    Some(format!("dependency {dead_dep} did not complete"))
}

/// A task that failed for good and so fails the run. A candidate's failure is its selector's
/// concern, not the run's: it neither fails the run nor stops the other tasks' retries.
pub(super) fn failed_for_the_run(t: &TaskState) -> bool {
    t.status == TaskStatus::Failed && !super::candidates::set_aside(t)
}

/// The first task that failed for good, by plan order.
fn first_failed<'a>(run: &'a RunState, counts: &TaskCounts) -> Option<&'a str> {
    if counts.failed == 0 {
        return None;
    }
    run.tasks
        .iter()
        .find(|t| failed_for_the_run(t))
        .map(|t| t.plan.id.as_str())
}

/// Plan approval: before the first write-role task starts.
fn approval(run: &RunState) -> Option<Vec<Pending>> {
    if run.approval != Approval::Required {
        return None;
    }
    let t = run.tasks.iter().find(|t| {
        t.status == TaskStatus::Queued
            && super::fanout::needs_approval(t)
            && deps_completed(run, &t.plan.depends_on)
    })?;
    Some(vec![
        Pending::task(
            &run.id,
            &t.plan.id,
            EventBody::PlanApprovalRequired {
                task_id: t.plan.id.to_string(),
            },
        )
        .with_message(format!(
            "approve the plan before {} ({}) starts",
            t.plan.id, t.plan.role
        )),
        Pending::run(
            &run.id,
            EventBody::RunBlocked {
                reason: format!("plan approval required before {} starts", t.plan.id),
            },
        ),
    ])
}

/// Final status once nothing runs and nothing can start, again as rules in order: a failed
/// task fails the run, a pending approval has blocked it already, a task that waits for
/// someone blocks it, all done completes it, and anything else that did not complete fails it.
fn final_status(run: &RunState, counts: &TaskCounts) -> Option<Vec<Pending>> {
    if counts.running > 0 || any_startable(run) {
        return None;
    }
    failure(run, counts)
        // Already blocked by plan.approval_required.
        .or_else(|| (run.approval == Approval::Pending).then(Vec::new))
        .or_else(|| blocked_reason(run).map(|reason| block(run, reason)))
        .or_else(|| completion(run))
        .or_else(|| incomplete(run))
}

/// Whether a queued task can start now or once a worker is free: its dependencies are settled,
/// its candidates' rules let it, and no plan approval holds it back.
fn any_startable(run: &RunState) -> bool {
    run.tasks.iter().any(|t| {
        t.status == TaskStatus::Queued
            && t.plan.depends_on.iter().all(|d| {
                run.task(d).is_some_and(|dt| {
                    dt.status == TaskStatus::Completed
                        || super::candidates::dep_settled(&t.plan, dt)
                })
            })
            && super::candidates::may_start(run, t)
            && !(super::fanout::needs_approval(t)
                && matches!(
                    run.approval,
                    Approval::Pending | Approval::Required | Approval::Rejected
                ))
    })
}

/// The run's first failed task fails the run, with that task's error.
fn failure(run: &RunState, counts: &TaskCounts) -> Option<Vec<Pending>> {
    let f = first_failed(run, counts)?;
    let err = run
        .task(f)
        .and_then(|t| t.error.clone())
        .unwrap_or_default();
    Some(vec![run_failed(run, format!("task {f} failed: {err}"))])
}

/// A task waits for an answer or needs attention (the first waiting one comes first): why the
/// run is blocked.
fn blocked_reason(run: &RunState) -> Option<String> {
    if let Some(t) = run.tasks.iter().find(|t| t.status == TaskStatus::Waiting) {
        return Some(format!(
            "task {} is waiting for an answer: {}",
            t.plan.id,
            t.question().unwrap_or_default()
        ));
    }
    run.tasks
        .iter()
        .find(|t| t.status == TaskStatus::NeedsAttention)
        .map(|t| {
            format!(
                "task {} needs attention: {}",
                t.plan.id,
                t.error.clone().unwrap_or_default()
            )
        })
}

/// Every task completed (or, a candidate, was set aside): the run completes, once its judges
/// passed it and its results are merged. `None`: something did not complete.
fn completion(run: &RunState) -> Option<Vec<Pending>> {
    if !run
        .tasks
        .iter()
        .all(|t| t.status == TaskStatus::Completed || super::candidates::set_aside(t))
    {
        return None;
    }
    // Honest outcomes (issue 30): a run that changed code is done only when its judges
    // passed it.
    if let Some(reason) = super::fixloop::judges_not_passed(run) {
        return Some(block(run, reason));
    }
    // A worktree run completes once the daemon merged its results (`run.integrated`);
    // until then it stays running (or blocked, on a conflict).
    if run.spec.workspace.is_some() && run.integration.is_none() {
        return Some(vec![]);
    }
    Some(vec![Pending::run(
        &run.id,
        EventBody::RunCompleted { usage: run.usage() },
    )])
}

/// Nothing can move any more and something did not complete (skipped or cancelled).
fn incomplete(run: &RunState) -> Option<Vec<Pending>> {
    let t = run
        .tasks
        .iter()
        .find(|t| t.status != TaskStatus::Completed && !super::candidates::set_aside(t))?;
    Some(vec![run_failed(
        run,
        format!("task {} is {}", t.plan.id, t.status.as_str()),
    )])
}

/// Block the run for `reason`; nothing to do when it is blocked for that reason already.
fn block(run: &RunState, reason: String) -> Vec<Pending> {
    if run.status == RunStatus::Blocked && run.reason.as_deref() == Some(reason.as_str()) {
        return vec![];
    }
    vec![Pending::run(&run.id, EventBody::RunBlocked { reason })]
}

fn run_failed(run: &RunState, reason: String) -> Pending {
    Pending::run(
        &run.id,
        EventBody::RunFailed {
            reason,
            usage: run.usage(),
        },
    )
}
