//! `apply`: the only code that mutates state. It replays what deciders decided, for live events
//! and for journal replay alike, so it never validates and never fails.

use super::apply_task::apply_task_event;
use super::event::{Event, EventBody};
use super::types::{Approval, RunState, RunStatus, RunSummary, TaskState, TaskStatus};
use super::State;
use crate::usage::Usage;
use chrono::{DateTime, Utc};

impl State {
    pub fn apply(&mut self, ev: &Event) {
        self.last_seq = self.last_seq.max(ev.seq);
        match &ev.body {
            EventBody::RunCreated(created) => {
                let Some(id) = &ev.run_id else { return };
                let mut spec = (**created).clone();
                spec.tasks = crate::plan::share_prompts(&spec.tasks);
                let run = RunState {
                    id: id.clone(),
                    status: RunStatus::Queued,
                    created_at: ev.time,
                    started_at: None,
                    finished_at: None,
                    updated_at: ev.time,
                    tasks: spec.tasks.iter().cloned().map(TaskState::new).collect(),
                    run_seq: ev.run_seq,
                    approval: if spec.require_plan_approval {
                        Approval::Required
                    } else {
                        Approval::NotRequired
                    },
                    budget_warned: false,
                    reason: None,
                    halted: false,
                    integration: None,
                    index: Default::default(),
                    backoff: Default::default(),
                    spec,
                };
                self.summaries.insert(id.clone(), run.summary());
                self.active.insert(id.clone());
                self.runs.insert(id.clone(), run);
            }
            EventBody::ScheduleAdded(job) | EventBody::ScheduleUpdated(job) => {
                self.schedules.insert(job.id.clone(), (**job).clone());
            }
            EventBody::ScheduleRemoved { id, .. } => {
                self.schedules.remove(id);
            }
            EventBody::ScheduleFired {
                id,
                at,
                run_id,
                manual,
            } => {
                if let Some(job) = self.schedules.get_mut(id) {
                    if *manual {
                        job.last_manual_fire_at = Some(*at);
                    } else {
                        job.last_fire_at = Some(*at);
                        job.last_skip = None;
                    }
                    job.fire_count += 1;
                    job.last_run_id = Some(run_id.clone());
                    job.run_ids.push(run_id.clone());
                    let excess = job
                        .run_ids
                        .len()
                        .saturating_sub(super::jobs::JOB_RUN_IDS_KEPT);
                    job.run_ids.drain(..excess);
                }
            }
            EventBody::ScheduleSkipped { id, at, reason } => {
                if let Some(job) = self.schedules.get_mut(id) {
                    job.last_fire_at = Some(*at);
                    job.last_skip = Some(super::jobs::JobSkip {
                        at: *at,
                        reason: reason.clone(),
                    });
                }
            }
            EventBody::RunForgotten {} => {
                if let Some(id) = &ev.run_id {
                    self.runs.remove(id);
                    self.summaries.remove(id);
                    self.active.remove(id);
                }
            }
            EventBody::DaemonStarted { .. } | EventBody::DaemonRecovered { .. } => {}
            _ => {
                let Some(id) = &ev.run_id else { return };
                let Some(run) = self.runs.get_mut(id) else {
                    return;
                };
                let before = TaskBefore::of(run, ev);
                apply_run_event(run, ev);
                if run.status.is_finished() {
                    self.active.remove(id);
                } else {
                    self.active.insert(id.clone());
                }
                match self.summaries.get_mut(id) {
                    Some(s) => refresh_summary(s, run, before),
                    None => {
                        self.summaries.insert(id.clone(), run.summary());
                    }
                }
            }
        }
    }
}

/// The one task an event is about, as it was before the event.
enum TaskBefore {
    One {
        idx: usize,
        status: TaskStatus,
        usage: Usage,
    },
    /// A run-level event: it may change any task (cancel, resume).
    Any,
}

impl TaskBefore {
    fn of(run: &RunState, ev: &Event) -> Self {
        // Adds tasks: every count may change.
        if matches!(
            ev.body,
            EventBody::TaskExpanded { .. }
                | EventBody::TaskFixAdded { .. }
                | EventBody::TaskResolveAdded { .. }
        ) {
            return TaskBefore::Any;
        }
        match ev.task_id.as_deref().and_then(|t| run.task_index(t)) {
            Some(idx) => run
                .tasks
                .get(idx)
                .map_or(TaskBefore::Any, |t| TaskBefore::One {
                    idx,
                    status: t.status,
                    usage: t.usage(),
                }),
            None => TaskBefore::Any,
        }
    }
}

/// Bring a run's summary up to date after one event. An event about one task moves one count
/// and adds the change of that task's usage: rebuilding the whole summary on every event made a
/// run of n tasks cost O(n²). Token counts stay exact; the cost (a float) may drift by a few
/// ulps while the run goes on, and is summed afresh by the run-level event that finishes it.
fn refresh_summary(s: &mut RunSummary, run: &RunState, before: TaskBefore) {
    s.status = run.status;
    s.finished_at = run.finished_at;
    if s.reason != run.reason {
        s.reason.clone_from(&run.reason);
    }
    match before {
        TaskBefore::One { idx, status, usage } => {
            if let Some(t) = run.tasks.get(idx) {
                s.tasks.moved(status, t.status);
                let now = t.usage();
                if now != usage {
                    s.usage.replace_part(&usage, &now);
                }
            }
        }
        TaskBefore::Any => {
            s.tasks = run.task_counts();
            s.usage = run.usage();
        }
    }
}

/// Apply one event to one run. Public so an evicted run can be rebuilt from its own events.
pub fn apply_run_event(run: &mut RunState, ev: &Event) {
    run.run_seq = run.run_seq.max(ev.run_seq);
    run.updated_at = ev.time;
    let task_idx = ev.task_id.as_deref().and_then(|t| run.task_index(t));
    if !apply_run_level(run, ev) {
        let task = task_idx.and_then(|i| run.tasks.get_mut(i));
        let found = task.is_some();
        if let Some(t) = task {
            apply_task_event(t, &ev.body, ev.time);
        }
        after_task_event(run, ev, found);
    }
    run.sync_backoff(task_idx);
}

/// Apply a run or plan event, including those that add tasks to the run. `false`: the event
/// is about one task, for `apply_task_event` and `after_task_event`.
fn apply_run_level(run: &mut RunState, ev: &Event) -> bool {
    match &ev.body {
        EventBody::RunStarted {} => {
            run.status = RunStatus::Running;
            run.started_at.get_or_insert(ev.time);
        }
        EventBody::RunBlocked { reason } => {
            run.status = RunStatus::Blocked;
            run.reason = Some(reason.clone());
        }
        EventBody::RunIntegrated(i) => run.integration = Some((**i).clone()),
        EventBody::RunCompleted { .. } => end_run(run, RunStatus::Completed, ev.time, None),
        EventBody::RunFailed { reason, .. } => {
            end_run(run, RunStatus::Failed, ev.time, Some(reason.clone()));
        }
        EventBody::RunCancelled {
            reason,
            cancelled_task_ids,
        } => apply_cancelled(run, reason.as_ref(), cancelled_task_ids, ev.time),
        EventBody::RunResumed {
            requeued_task_ids,
            budget_tokens,
        } => {
            if let Some(tokens) = budget_tokens {
                raise_budget(run, *tokens);
            }
            apply_resumed(run, requeued_task_ids)
        }
        EventBody::RunBudgetWarning { .. } => run.budget_warned = true,
        EventBody::RunBudgetExceeded { .. } => run.halted = true,
        EventBody::PlanApprovalRequired { .. } => run.approval = Approval::Pending,
        EventBody::PlanApproved { .. } => {
            run.approval = Approval::Approved;
            if run.status == RunStatus::Blocked {
                run.status = RunStatus::Running;
                run.reason = None;
            }
        }
        EventBody::PlanRejected { .. } => run.approval = Approval::Rejected,
        EventBody::TaskExpanded { tasks, dependents } => {
            super::fanout::apply_expanded(run, tasks, dependents);
        }
        EventBody::TaskFixAdded { task, .. } => {
            if let Some(judge) = &ev.task_id {
                super::fixloop::apply_fix_added(run, judge, task);
            }
        }
        EventBody::TaskResolveAdded { task, .. } => {
            super::resolve::apply_resolve_added(run, ev.task_id.as_deref(), task);
        }
        EventBody::TaskQueued { .. }
        | EventBody::TaskStarted { .. }
        | EventBody::WorkerSpawned { .. }
        | EventBody::WorkerSubmitting { .. }
        | EventBody::WorkerSubmitted { .. }
        | EventBody::TaskProgress { .. }
        | EventBody::TaskCompleted { .. }
        | EventBody::TaskFailed { .. }
        | EventBody::TaskRetrying { .. }
        | EventBody::TaskNeedsAttention { .. }
        | EventBody::TaskWaiting { .. }
        | EventBody::TaskCancelled { .. }
        | EventBody::TaskSkipped { .. }
        | EventBody::TaskSteered { .. }
        | EventBody::TaskCandidateChosen { .. }
        | EventBody::TaskWarning { .. } => return false,
        // Handled at the State level.
        EventBody::RunCreated(_)
        | EventBody::RunForgotten {}
        | EventBody::ScheduleAdded(_)
        | EventBody::ScheduleUpdated(_)
        | EventBody::ScheduleRemoved { .. }
        | EventBody::ScheduleFired { .. }
        | EventBody::ScheduleSkipped { .. }
        | EventBody::DaemonStarted { .. }
        | EventBody::DaemonRecovered { .. } => {}
    }
    true
}

/// The run ends as `status`: completed, failed or cancelled.
fn end_run(run: &mut RunState, status: RunStatus, time: DateTime<Utc>, reason: Option<String>) {
    run.status = status;
    run.finished_at = Some(time);
    run.reason = reason;
}

/// `run.cancelled`: the run ends, and with it the tasks it names (those not finished yet).
fn apply_cancelled(
    run: &mut RunState,
    reason: Option<&String>,
    ids: &[String],
    time: DateTime<Utc>,
) {
    for t in run.tasks.iter_mut() {
        if ids.iter().any(|c| *c == t.plan.id) {
            t.cancel_with_run(time);
        }
    }
    let reason = reason.cloned().unwrap_or_else(|| "cancelled".into());
    end_run(run, RunStatus::Cancelled, time, Some(reason));
}

/// `run.resumed`: the named tasks go back to the queue, and the stopped run goes on.
/// The run's budget is `tokens` from now on (its fractions kept, or the defaults where it had
/// none); its warning may come again.
fn raise_budget(run: &mut RunState, tokens: u64) {
    let mut b = run.spec.budget.unwrap_or(super::types::Budget::of(tokens));
    b.tokens = tokens;
    run.spec.budget = Some(b);
    run.budget_warned = false;
}

fn apply_resumed(run: &mut RunState, requeued: &[String]) {
    if !requeued.is_empty() {
        run.integration = None;
    }
    for t in run.tasks.iter_mut() {
        if requeued.iter().any(|c| *c == t.plan.id) {
            t.requeue(true);
        }
    }
    // A pending or rejected approval is asked for again before a write-role task starts.
    if matches!(run.approval, Approval::Rejected | Approval::Pending) {
        run.approval = Approval::Required;
    }
    go_on(run);
}

/// What a task event changes in its run, after the task itself. `found`: the event's task is
/// one of the run's.
fn after_task_event(run: &mut RunState, ev: &Event, found: bool) {
    match &ev.body {
        EventBody::TaskQueued { .. } => {
            if found {
                run.integration = None;
            }
            // A pending approval is asked for again (by `settle`) before a write-role task starts.
            if run.approval == Approval::Pending {
                run.approval = Approval::Required;
            }
            reopen(run);
        }
        EventBody::TaskStarted { .. } if run.status == RunStatus::Queued => {
            run.status = RunStatus::Running;
            run.started_at.get_or_insert(ev.time);
        }
        // A person's pick (`team.pick`) changes a result the run may have merged: it is merged
        // again, and a finished run goes on (as `task.queued` reopens it).
        EventBody::TaskCandidateChosen { choice, .. }
            if choice.by == super::candidates::BY_PERSON =>
        {
            run.integration = None;
            reopen(run);
        }
        _ => {}
    }
}

/// A run that is not running (finished, blocked) goes on; a running one is left as it is.
fn reopen(run: &mut RunState) {
    if run.status != RunStatus::Running {
        go_on(run);
    }
}

/// The run is running again, with nothing left of how it stopped: no finish time, no reason,
/// no budget halt.
fn go_on(run: &mut RunState) {
    run.status = RunStatus::Running;
    run.finished_at = None;
    run.reason = None;
    run.halted = false;
}

/// A task crew adds to a running run (a fix task, a resolve task) joins it, and `waiting` (a
/// judge, the task whose inputs conflicted; `None`: nothing but the integration) depends on it
/// and is queued again. `carry_usage`: the waiting task's current attempt ended without a
/// result, and what it spent moves to its earlier attempts'. Once per task id (a replay).
pub(super) fn add_awaited(
    run: &mut RunState,
    waiting: Option<&str>,
    task: &std::sync::Arc<crate::plan::PlannedTask>,
    carry_usage: bool,
) {
    if run.task_index(&task.id).is_some() {
        return;
    }
    if let Some(waiting) = waiting {
        let Some(j) = run.task_index(waiting).and_then(|i| run.tasks.get_mut(i)) else {
            return;
        };
        let mut plan = crate::plan::PlannedTask::clone(&j.plan);
        plan.depends_on.push(task.id.clone());
        let plan = std::sync::Arc::new(plan);
        if let Some(s) = run.spec.tasks.iter_mut().find(|s| s.id == plan.id) {
            *s = plan.clone();
        }
        j.plan = plan;
        if carry_usage {
            j.keep_spent_usage();
        }
        j.requeue(true);
    }
    run.spec.tasks.push(task.clone());
    run.tasks.push(TaskState::new(task.clone()));
    // Task ids changed: the index is built again on the next lookup.
    run.index = Default::default();
    run.integration = None;
}
