//! Fan-out in the run state machine: the decider that turns a fan-out task's completed attempt
//! into `task.expanded` + `task.completed` (or a repair attempt, or `needs_attention`), and
//! the `apply` half that adds the tasks.

use super::decide::{AttemptResult, RetryPolicy};
use super::event::{AttemptEnd, EventBody, Pending};
use super::types::{Approval, RunState, TaskState, TaskStatus};
use super::State;
use crate::plan::PlannedTask;
use chrono::{DateTime, Utc};
use std::sync::Arc;

impl State {
    /// A fan-out task's attempt ended. `answer` is its final answer when the attempt
    /// completed (read by the worker). Any other outcome, a stale report, a task that is no
    /// fan-out step, or one that already added its tasks (a retried fan-out) goes the ordinary
    /// way.
    #[allow(clippy::too_many_arguments)]
    pub fn finish_fan_out(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
        result: AttemptResult,
        answer: Option<&crate::fanout::Answer>,
        now: DateTime<Utc>,
        retry: &RetryPolicy,
        jitter: f64,
    ) -> Vec<Pending> {
        // Not a fan-out: a judge's verdict is read, else the attempt ends the ordinary way.
        let ordinary = |result| {
            self.finish_judged(run_id, task_id, attempt, result, answer, now, retry, jitter)
        };
        let Some(run) = self.runs.get(run_id) else {
            return vec![];
        };
        let Some(t) = run.task(task_id) else {
            return vec![];
        };
        let (Some(exp), AttemptResult::Completed { .. }) = (&t.plan.expands, &result) else {
            return ordinary(result);
        };
        if t.status != TaskStatus::Running || t.attempts != attempt {
            return vec![];
        }
        if already_expanded(run, task_id) {
            return ordinary(result);
        }
        let exists = |id: &str| run.task_index(id).is_some();
        let checked = match answer {
            Some(a) => crate::fanout::check_answer(a, exp, &t.plan, exists),
            None => crate::fanout::parse_and_validate("", exp, &t.plan, exists),
        };
        match checked {
            Ok(tasks) => {
                // Candidates (issue 36) are split here, so the event carries them.
                let tasks = super::candidates::for_added(tasks, exp);
                let ids: Vec<String> = tasks.iter().map(|p| p.id.to_string()).collect();
                let dependents: Vec<String> = run
                    .tasks
                    .iter()
                    .filter(|d| d.plan.depends_on.iter().any(|x| x == task_id))
                    .map(|d| d.plan.id.to_string())
                    .collect();
                let mut out = vec![Pending::task(
                    run_id,
                    task_id,
                    EventBody::TaskExpanded {
                        tasks: tasks.into_iter().map(Arc::new).collect(),
                        dependents,
                    },
                )
                .with_message(format!(
                    "added {} task(s): {}",
                    ids.len(),
                    ids.join(", ")
                ))];
                out.extend(ordinary(result));
                out
            }
            Err(problems) => {
                let AttemptResult::Completed {
                    usage,
                    model,
                    artifacts,
                    ..
                } = result
                else {
                    return vec![];
                };
                let text = problems.join("\n");
                let end = AttemptEnd {
                    attempt,
                    usage,
                    model,
                    artifacts,
                    error: Some(text.clone()),
                };
                if t.fan_out_repair().is_none() {
                    vec![Pending::task(
                        run_id,
                        task_id,
                        EventBody::TaskRetrying {
                            end,
                            reason: crate::fanout::REPAIR_REASON.into(),
                            delay_ms: 0,
                            not_before: now,
                            fallback_model: None,
                        },
                    )
                    .with_message(format!(
                        "the fan-out block was refused; one repair attempt: {}",
                        problems.join("; ")
                    ))]
                } else {
                    let reason = format!(
                        "the fan-out block was refused again after a repair attempt; nothing was added: {}",
                        problems.join("; ")
                    );
                    vec![Pending::task(
                        run_id,
                        task_id,
                        EventBody::TaskNeedsAttention {
                            end,
                            reason: reason.clone(),
                            verdict: None,
                        },
                    )
                    .with_message(reason)]
                }
            }
        }
    }
}

/// Some task of the run was added by `task_id`.
fn already_expanded(run: &RunState, task_id: &str) -> bool {
    run.tasks
        .iter()
        .any(|t| t.plan.added_by.as_deref() == Some(task_id))
}

/// `task.expanded`: append the tasks, make the dependents wait for all of them, and (with
/// `requirePlanApproval`) ask for approval again: the added tasks are the plan to approve.
pub(super) fn apply_expanded(
    run: &mut RunState,
    tasks: &[Arc<PlannedTask>],
    dependents: &[String],
) {
    // A dependent waits for the added steps, not their candidates (a set-aside candidate
    // never completes; its selector is what the dependent needs).
    let added: Vec<crate::ids::SafeId> = tasks
        .iter()
        .filter(|t| super::candidates::candidate_of(t).is_none())
        .map(|t| t.id.clone())
        .collect();
    let tasks = crate::plan::share_prompts(tasks);
    for t in run.tasks.iter_mut() {
        if dependents.iter().any(|d| *d == *t.plan.id) {
            let mut plan = PlannedTask::clone(&t.plan);
            for id in &added {
                if !plan.depends_on.contains(id) {
                    plan.depends_on.push(id.clone());
                }
            }
            let plan = Arc::new(plan);
            if let Some(s) = run.spec.tasks.iter_mut().find(|s| s.id == plan.id) {
                *s = plan.clone();
            }
            t.plan = plan;
        }
    }
    for t in tasks {
        run.spec.tasks.push(t.clone());
        run.tasks.push(TaskState::new(t));
    }
    // Task ids changed: the index is built again on the next lookup.
    run.index = Default::default();
    if run.spec.require_plan_approval {
        run.approval = Approval::Required;
    }
}

/// Whether `t` may start only after the plan was approved: a task that may write, and every
/// task a fan-out step added (they are what the user approves).
pub(crate) fn needs_approval(t: &TaskState) -> bool {
    t.plan.writes || t.plan.added_by.is_some()
}
