//! `apply`: the only code that mutates state. It replays what deciders decided, for live events
//! and for journal replay alike, so it never validates and never fails.

use super::event::{AttemptEnd, Event, EventBody};
use super::types::{Approval, RemoteJob, RunState, RunStatus, RunSummary, TaskState, TaskStatus};
use super::State;
use crate::usage::Usage;

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
            EventBody::ScheduleSkipped { id, at, .. } => {
                if let Some(job) = self.schedules.get_mut(id) {
                    job.last_fire_at = Some(*at);
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

fn end_attempt(t: &mut TaskState, end: &AttemptEnd, ev: &Event) {
    t.prior_usage.add(&end.usage);
    t.set_attempt_usage(Usage::default());
    t.finished_at = Some(ev.time);
    t.progress.current_tool = None;
    // The task's progress counts every attempt: a failed attempt's turns stay counted.
    t.progress.turns = t.prior_usage.turns;
    t.progress.tokens = t.prior_usage.budget_tokens();
    // A session is resumed by the one attempt after the answer: whatever that attempt did,
    // a later one starts over (`task.waiting` sets it again when it asks again).
    // The attempt's job (a remote attempt) is over with it.
    t.clear_rare(|r| {
        r.session = None;
        r.job = None;
        r.pid = None;
        r.pid_start = None;
    });
    if end.model.is_some() {
        t.model = end.model.clone();
    }
    // The newest artifact of a name replaces the older one (e.g. result of a retry).
    t.artifacts.upsert(&end.artifacts);
}

/// Apply one event to one run. Public so an evicted run can be rebuilt from its own events.
pub fn apply_run_event(run: &mut RunState, ev: &Event) {
    run.run_seq = run.run_seq.max(ev.run_seq);
    run.updated_at = ev.time;
    let task_idx = ev.task_id.as_deref().and_then(|t| run.task_index(t));
    match &ev.body {
        EventBody::RunStarted {} => {
            run.status = RunStatus::Running;
            run.started_at.get_or_insert(ev.time);
        }
        EventBody::RunBlocked { reason } => {
            run.status = RunStatus::Blocked;
            run.reason = Some(reason.clone());
        }
        EventBody::RunIntegrated(i) => {
            run.integration = Some((**i).clone());
        }
        EventBody::RunCompleted { .. } => {
            run.status = RunStatus::Completed;
            run.finished_at = Some(ev.time);
            run.reason = None;
        }
        EventBody::RunFailed { reason, .. } => {
            run.status = RunStatus::Failed;
            run.finished_at = Some(ev.time);
            run.reason = Some(reason.clone());
        }
        EventBody::RunCancelled {
            reason,
            cancelled_task_ids,
        } => {
            for t in run.tasks.iter_mut() {
                if cancelled_task_ids.iter().any(|c| *c == t.plan.id) {
                    // The running attempt's usage was spent: keep it.
                    let spent = t.take_attempt_usage();
                    t.prior_usage.add(&spent);
                    t.status = TaskStatus::Cancelled;
                    t.finished_at = Some(ev.time);
                    t.clear_rare(|r| r.job = None);
                }
            }
            run.status = RunStatus::Cancelled;
            run.finished_at = Some(ev.time);
            run.reason = Some(reason.clone().unwrap_or_else(|| "cancelled".into()));
        }
        EventBody::RunResumed { requeued_task_ids } => {
            if !requeued_task_ids.is_empty() {
                run.integration = None;
            }
            for t in run.tasks.iter_mut() {
                if requeued_task_ids.iter().any(|c| *c == t.plan.id) {
                    requeue(t, true);
                }
            }
            // A pending or rejected approval is asked for again before a write-role task starts.
            if matches!(run.approval, Approval::Rejected | Approval::Pending) {
                run.approval = Approval::Required;
            }
            run.status = RunStatus::Running;
            run.finished_at = None;
            run.reason = None;
            run.halted = false;
        }
        EventBody::RunBudgetWarning { .. } => run.budget_warned = true,
        EventBody::RunBudgetExceeded { .. } => run.halted = true,
        EventBody::PlanApprovalRequired { .. } => {
            run.approval = Approval::Pending;
        }
        EventBody::PlanApproved { .. } => {
            run.approval = Approval::Approved;
            if run.status == RunStatus::Blocked {
                run.status = RunStatus::Running;
                run.reason = None;
            }
        }
        EventBody::PlanRejected { .. } => run.approval = Approval::Rejected,
        EventBody::TaskQueued { answer, .. } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                let window = t.attempts_in_window;
                // An answer continues the task on the model it was on; a retry starts over
                // from its own model.
                requeue(t, answer.is_none());
                if let Some(a) = answer {
                    t.edit_rare(|r| r.answers.push(a.clone()));
                    // An answer continues the task: it neither uses up nor refills its retry
                    // budget (the attempt that asked was already given back at task.waiting).
                    t.attempts_in_window = window;
                }
                run.integration = None;
            }
            if run.approval == Approval::Pending {
                run.approval = Approval::Required;
            }
            if run.status != RunStatus::Running {
                run.status = RunStatus::Running;
                run.finished_at = None;
                run.reason = None;
                run.halted = false;
            }
        }
        EventBody::TaskStarted { attempt, model, .. } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                t.status = TaskStatus::Running;
                t.attempts = *attempt;
                t.attempts_in_window += 1;
                t.started_at = Some(ev.time);
                t.finished_at = None;
                t.error = None;
                t.model = model.clone().or(t.model.take());
                t.clear_rare(|r| {
                    r.not_before = None;
                    // Queued steers are part of this attempt's prompt now.
                    r.pending_steers.clear();
                    r.job = None;
                });
            }
            if run.status == RunStatus::Queued {
                run.status = RunStatus::Running;
                run.started_at.get_or_insert(ev.time);
            }
        }
        EventBody::WorkerSpawned { pid, pid_start, .. } => {
            if let Some(i) = task_idx {
                run.tasks[i].edit_rare(|r| {
                    r.pid = Some(*pid);
                    r.pid_start = Some(*pid_start);
                });
            }
        }
        EventBody::WorkerSubmitting {
            attempt,
            job_name,
            staging,
        } => {
            if let Some(i) = task_idx {
                let job = RemoteJob {
                    attempt: *attempt,
                    name: job_name.clone(),
                    staging: staging.clone(),
                    id: None,
                };
                run.tasks[i].edit_rare(|r| r.job = Some(job));
            }
        }
        EventBody::WorkerSubmitted { attempt, job_id } => {
            if let Some(i) = task_idx {
                run.tasks[i].clear_rare(|r| {
                    if let Some(j) = r.job.as_mut().filter(|j| j.attempt == *attempt) {
                        j.id = Some(*job_id);
                    }
                });
            }
        }
        EventBody::TaskProgress {
            usage,
            current_tool,
            ..
        } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                t.set_attempt_usage(*usage);
                t.progress.current_tool = current_tool.clone();
                // The event carries the attempt's usage; the task's progress is all of its
                // attempts (earlier, failed ones included), as its usage is.
                let total = t.usage();
                t.progress.turns = total.turns;
                t.progress.tokens = total.budget_tokens();
            }
        }
        EventBody::TaskCompleted {
            end,
            reused_from,
            commit,
            verdict,
            verification,
        } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                // A candidate's failing checks do not fail it: they rule it out (issue 36).
                if super::candidates::candidate_of(&t.plan).is_some() {
                    let failing = super::candidates::failing(verification);
                    t.edit_rare(|x| x.failed_checks = failing);
                }
                end_attempt(t, end, ev);
                t.status = TaskStatus::Completed;
                t.error = None;
                t.clear_rare(|x| {
                    x.feedback = None;
                    x.verdict_repair = None;
                });
                if let Some(v) = verdict {
                    t.edit_rare(|x| x.verdict = Some(v.clone()));
                }
                match commit {
                    Some(c) => t.edit_rare(|x| x.commit = Some(c.clone())),
                    None => t.clear_rare(|x| x.commit = None),
                }
                match reused_from {
                    Some(r) => {
                        t.edit_rare(|x| x.reused_from = Some((r.run_id.clone(), r.task_id.clone())))
                    }
                    None => t.clear_rare(|x| x.reused_from = None),
                }
            }
        }
        EventBody::TaskFailed { end } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                end_attempt(t, end, ev);
                t.status = TaskStatus::Failed;
                t.error = end.error.clone();
            }
        }
        EventBody::TaskRetrying {
            end,
            not_before,
            reason,
            fallback_model,
            ..
        } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                end_attempt(t, end, ev);
                // The worker did not fail, the daemon did: that attempt does not count.
                if reason == "daemon_restarted" {
                    t.attempts_in_window = t.attempts_in_window.saturating_sub(1);
                }
                // On to a fallback model: its attempts are counted afresh.
                if let Some(pos) = fallback_model
                    .as_ref()
                    .and_then(|m| t.plan.fallback_models.iter().position(|f| f == m))
                {
                    t.attempts_in_window = 0;
                    let n = u32::try_from(pos).unwrap_or(u32::MAX).saturating_add(1);
                    t.edit_rare(|r| r.fallback = n);
                }
                t.status = TaskStatus::Queued;
                t.error = end.error.clone();
                let verify_failed = reason == crate::checks::VERIFY_FAILED;
                let repair = (reason == crate::fanout::REPAIR_REASON)
                    .then(|| end.error.clone().unwrap_or_default());
                let verdict_repair = (reason == crate::verdict::REPAIR_REASON)
                    .then(|| end.error.clone().unwrap_or_default());
                t.edit_rare(|r| {
                    r.not_before = Some(*not_before);
                    // The next attempt is told what failed, and it counts against the step's
                    // verification retries.
                    if verify_failed {
                        r.feedback = end.error.clone();
                        r.verify_retries = r.verify_retries.saturating_add(1);
                    }
                    if repair.is_some() {
                        r.fan_out_repair = repair;
                    }
                    if verdict_repair.is_some() {
                        r.verdict_repair = verdict_repair;
                    }
                });
                t.finished_at = None;
            }
        }
        EventBody::TaskNeedsAttention {
            end,
            reason,
            verdict,
        } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                end_attempt(t, end, ev);
                t.status = TaskStatus::NeedsAttention;
                t.error = Some(reason.clone());
                if let Some(v) = verdict {
                    t.edit_rare(|x| x.verdict = Some(v.clone()));
                }
            }
        }
        EventBody::TaskWaiting {
            end,
            question,
            session,
        } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                end_attempt(t, end, ev);
                t.edit_rare(|r| r.session.clone_from(session));
                t.finished_at = None;
                t.status = TaskStatus::Waiting;
                // Asking is not failing: the attempt does not count against max_attempts.
                t.attempts_in_window = t.attempts_in_window.saturating_sub(1);
                t.edit_rare(|r| r.question = Some(question.clone()));
            }
        }
        EventBody::TaskCancelled { reason } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                // The running attempt's usage was spent: keep it.
                let spent = t.take_attempt_usage();
                t.prior_usage.add(&spent);
                t.status = TaskStatus::Cancelled;
                t.finished_at = Some(ev.time);
                t.error = reason.clone();
                t.clear_rare(|r| {
                    r.job = None;
                    r.pid = None;
                });
            }
        }
        EventBody::TaskSkipped { reason } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                t.status = TaskStatus::Skipped;
                t.finished_at = Some(ev.time);
                t.error = Some(reason.clone());
            }
        }
        EventBody::TaskSteered { message, delivered } => {
            if let Some(i) = task_idx {
                if *delivered == super::event::Delivery::Queued {
                    run.tasks[i].edit_rare(|r| r.pending_steers.push(message.clone()));
                }
            }
        }
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
        EventBody::TaskCandidateChosen {
            end,
            commit,
            choice,
            verdict,
        } => {
            if let Some(i) = task_idx {
                let t = &mut run.tasks[i];
                match end {
                    Some(end) => end_attempt(t, end, ev),
                    None => t.finished_at = Some(ev.time),
                }
                t.status = TaskStatus::Completed;
                t.error = None;
                t.edit_rare(|x| {
                    x.commit = commit.clone();
                    x.choice = Some(choice.clone());
                    x.verdict_repair = None;
                    if let Some(v) = verdict {
                        x.verdict = Some(v.clone());
                    }
                });
            }
            // A person's pick (`team.pick`) changes a result the run may have merged: it is
            // merged again, and a finished run goes on (as `task.queued` reopens it).
            if choice.by == super::candidates::BY_PERSON {
                run.integration = None;
                if run.status != RunStatus::Running {
                    run.status = RunStatus::Running;
                    run.finished_at = None;
                    run.reason = None;
                    run.halted = false;
                }
            }
        }
        // A notice only.
        EventBody::TaskWarning { .. } => {}
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
    run.sync_backoff(task_idx);
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
            let spent = j.take_attempt_usage();
            j.prior_usage.add(&spent);
        }
        requeue(j, true);
    }
    run.spec.tasks.push(task.clone());
    run.tasks.push(TaskState::new(task.clone()));
    // Task ids changed: the index is built again on the next lookup.
    run.index = Default::default();
    run.integration = None;
}

pub(super) fn requeue(t: &mut TaskState, own_model: bool) {
    t.status = TaskStatus::Queued;
    t.error = None;
    t.finished_at = None;
    t.attempts_in_window = 0;
    t.clear_rare(|r| {
        r.not_before = None;
        r.question = None;
        if own_model {
            // A retry by hand or by policy starts a fresh conversation.
            r.session = None;
        }
        r.commit = None;
        r.feedback = None;
        r.verify_retries = 0;
        if own_model {
            r.fallback = 0;
        }
        r.fan_out_repair = None;
        r.verdict_repair = None;
        r.job = None;
        r.pid = None;
        r.pid_start = None;
    });
}
