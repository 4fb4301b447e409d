//! Follow-ups derived from the state after a change: budget, skips, plan approval, and the run's
//! final status. The daemon calls `settle` until it returns nothing.

use super::event::{EventBody, Pending};
use super::types::{Approval, FailurePolicy, RunState, RunStatus, TaskCounts, TaskStatus};
use super::State;
use chrono::{DateTime, Utc};

impl State {
    pub fn settle(&self, run_id: &str, now: DateTime<Utc>) -> Vec<Pending> {
        match self.runs.get(run_id) {
            Some(run) if !run.status.is_finished() => {
                let counts = self
                    .summaries
                    .get(run_id)
                    .map_or_else(|| run.task_counts(), |s| s.tasks);
                settle_run(run, &counts, now)
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
fn settle_run(run: &RunState, counts: &TaskCounts, now: DateTime<Utc>) -> Vec<Pending> {
    let id = run.id.as_str();
    // Summed where an event needs it: this runs after every change, and a sum is O(tasks).
    let usage = || run.usage();

    // Budget (SPEC §4): tokens = input + output + cacheWrite, checked against live usage.
    // A run whose every task completed is done, whatever its last task cost.
    let all_done = counts.completed == counts.total;
    if let (Some(b), false) = (run.spec.budget, all_done) {
        let used = usage().budget_tokens();
        if !run.halted && used as f64 >= b.abort_at * b.tokens as f64 {
            let mut out = Vec::new();
            // One report can cross both thresholds: the warning still comes first.
            if !run.budget_warned {
                out.push(
                    Pending::run(
                        id,
                        EventBody::RunBudgetWarning {
                            used,
                            total: b.tokens,
                        },
                    )
                    .with_message(format!("budget warning: {used} of {} tokens", b.tokens)),
                );
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
                match t.status {
                    TaskStatus::Running | TaskStatus::Waiting => out.push(Pending::task(
                        id,
                        &t.plan.id,
                        EventBody::TaskCancelled {
                            reason: Some("budget_exceeded".into()),
                        },
                    )),
                    TaskStatus::Queued => out.push(Pending::task(
                        id,
                        &t.plan.id,
                        EventBody::TaskSkipped {
                            reason: "budget_exceeded".into(),
                        },
                    )),
                    _ => {}
                }
            }
            out.push(Pending::run(
                id,
                EventBody::RunFailed {
                    reason: "budget_exceeded".into(),
                    usage: usage(),
                },
            ));
            return out;
        }
        if !run.budget_warned && used as f64 >= b.warn_at * b.tokens as f64 {
            return vec![Pending::run(
                id,
                EventBody::RunBudgetWarning {
                    used,
                    total: b.tokens,
                },
            )
            .with_message(format!("budget warning: {used} of {} tokens", b.tokens))];
        }
    }

    // Candidates (issue 36): a selector whose choice can be made makes it.
    if let Some(out) = super::candidates::settle(run) {
        return out;
    }
    // A candidate's failure is its selector's concern, not the run's.
    let failed: Vec<&str> = if counts.failed == 0 {
        Vec::new()
    } else {
        run.tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Failed && !super::candidates::set_aside(t))
            .map(|t| t.plan.id.as_str())
            .collect()
    };
    // A queued task can only be doomed by a task that failed, was skipped or was cancelled.
    let doomed = counts.failed + counts.skipped + counts.cancelled > 0;

    // Skips. fail-fast: after a final failure nothing new starts; continue: only dependents of
    // what cannot complete any more.
    let mut out = Vec::new();
    let queued = run.tasks.iter().filter(|t| t.status == TaskStatus::Queued);
    for t in queued.filter(|_| doomed) {
        if run.spec.failure_policy == FailurePolicy::FailFast {
            if let Some(f) = failed.first() {
                out.push(Pending::task(
                    id,
                    &t.plan.id,
                    EventBody::TaskSkipped {
                        reason: format!("blocked by failed task {f}"),
                    },
                ));
                continue;
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
        });
        if let Some(d) = dead_dep {
            out.push(Pending::task(
                id,
                &t.plan.id,
                EventBody::TaskSkipped {
                    reason: format!("dependency {d} did not complete"),
                },
            ));
        }
    }
    if !out.is_empty() {
        return out;
    }

    // Plan approval: before the first write-role task starts.
    if run.approval == Approval::Required {
        if let Some(t) = run.tasks.iter().find(|t| {
            t.status == TaskStatus::Queued
                && super::fanout::needs_approval(t)
                && deps_completed(run, &t.plan.depends_on)
        }) {
            return vec![
                Pending::task(
                    id,
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
                    id,
                    EventBody::RunBlocked {
                        reason: format!("plan approval required before {} starts", t.plan.id),
                    },
                ),
            ];
        }
    }

    // Final status once nothing runs and nothing can start.
    if counts.running > 0 {
        return vec![];
    }
    let startable = run.tasks.iter().any(|t| {
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
    });
    let _ = now;
    if startable {
        return vec![];
    }
    if let Some(f) = failed.first() {
        let err = run
            .task(f)
            .and_then(|t| t.error.clone())
            .unwrap_or_default();
        return vec![Pending::run(
            id,
            EventBody::RunFailed {
                reason: format!("task {f} failed: {err}"),
                usage: usage(),
            },
        )];
    }
    if run.approval == Approval::Pending {
        return vec![]; // already blocked by plan.approval_required
    }
    let blocked_reason = if let Some(t) = run.tasks.iter().find(|t| t.status == TaskStatus::Waiting)
    {
        Some(format!(
            "task {} is waiting for an answer: {}",
            t.plan.id,
            t.question().unwrap_or_default()
        ))
    } else {
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
    };
    if let Some(reason) = blocked_reason {
        if run.status == RunStatus::Blocked && run.reason.as_deref() == Some(reason.as_str()) {
            return vec![];
        }
        return vec![Pending::run(id, EventBody::RunBlocked { reason })];
    }
    if run
        .tasks
        .iter()
        .all(|t| t.status == TaskStatus::Completed || super::candidates::set_aside(t))
    {
        // Honest outcomes (issue 30): a run that changed code is done only when its judges
        // passed it.
        if let Some(reason) = super::fixloop::judges_not_passed(run) {
            if run.status == RunStatus::Blocked && run.reason.as_deref() == Some(reason.as_str()) {
                return vec![];
            }
            return vec![Pending::run(id, EventBody::RunBlocked { reason })];
        }
        // A worktree run completes once the daemon merged its results (`run.integrated`);
        // until then it stays running (or blocked, on a conflict).
        if run.spec.workspace.is_some() && run.integration.is_none() {
            return vec![];
        }
        return vec![Pending::run(id, EventBody::RunCompleted { usage: usage() })];
    }
    // Nothing can move any more and something did not complete (skipped or cancelled).
    match run
        .tasks
        .iter()
        .find(|t| t.status != TaskStatus::Completed && !super::candidates::set_aside(t))
    {
        Some(t) => vec![Pending::run(
            id,
            EventBody::RunFailed {
                reason: format!("task {} is {}", t.plan.id, t.status.as_str()),
                usage: usage(),
            },
        )],
        None => vec![],
    }
}
