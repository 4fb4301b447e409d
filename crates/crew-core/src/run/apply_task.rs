//! `apply` for the events about one task: how each moves the task's own state. What a task
//! event changes in its run (the run's status, its approval, its integration) is
//! `apply::after_task_event`; both are replayed from the journal, so neither validates or fails.

use super::candidates::Choice;
use super::event::{AttemptEnd, Delivery, EventBody, ReusedFrom};
use super::types::{Rare, RemoteJob, TaskState, TaskStatus};
use super::workspace::TaskCommit;
use crate::checks::VerifyOutcome;
use crate::usage::Usage;
use crate::verdict::Verdict;
use chrono::{DateTime, Utc};

/// Apply a task event to its task. `time` is the event's.
pub(super) fn apply_task_event(t: &mut TaskState, body: &EventBody, time: DateTime<Utc>) {
    match body {
        EventBody::TaskQueued { answer, .. } => t.queue(answer.as_ref()),
        EventBody::TaskStarted { attempt, model, .. } => t.start(*attempt, model.as_ref(), time),
        EventBody::WorkerSpawned { pid, pid_start, .. } => t.set_worker(*pid, *pid_start),
        EventBody::WorkerSubmitting {
            attempt,
            job_name,
            staging,
        } => t.set_job(RemoteJob {
            attempt: *attempt,
            name: job_name.clone(),
            staging: staging.clone(),
            id: None,
        }),
        EventBody::WorkerSubmitted { attempt, job_id } => t.set_job_id(*attempt, *job_id),
        EventBody::TaskProgress {
            usage,
            current_tool,
            ..
        } => t.record_progress(*usage, current_tool.as_ref()),
        EventBody::TaskCompleted {
            end,
            reused_from,
            commit,
            verdict,
            verification,
        } => {
            t.complete(end, verification, time);
            t.keep_result(verdict.as_ref(), commit.as_ref(), reused_from.as_ref());
        }
        EventBody::TaskFailed { end } => t.fail(end, time),
        EventBody::TaskRetrying {
            end,
            not_before,
            reason,
            fallback_model,
            ..
        } => t.retry(end, time, reason, *not_before, fallback_model.as_ref()),
        EventBody::TaskNeedsAttention {
            end,
            reason,
            verdict,
        } => t.need_attention(end, time, reason, verdict.as_ref()),
        EventBody::TaskWaiting {
            end,
            question,
            session,
        } => t.wait(end, time, question, session.as_ref()),
        EventBody::TaskCancelled { reason } => t.cancel(time, reason.as_ref()),
        EventBody::TaskSkipped { reason } => t.skip(time, reason),
        // Only a queued steer waits for the next attempt's prompt: one delivered live reached
        // the running worker already.
        EventBody::TaskSteered {
            message,
            delivered: Delivery::Queued,
        } => t.edit_rare(|r| r.pending_steers.push(message.clone())),
        EventBody::TaskCandidateChosen {
            end,
            commit,
            choice,
            verdict,
        } => t.choose_candidate(
            end.as_ref(),
            time,
            commit.as_ref(),
            choice,
            verdict.as_ref(),
        ),
        // A warning is a notice only, and a steer delivered live changes nothing here. Run and
        // plan events are `apply::apply_run_level`'s.
        _ => {}
    }
}

impl TaskState {
    /// `task.queued`: back to the queue by hand, as a retry (no answer) or with the answer to
    /// the question the task asked.
    fn queue(&mut self, answer: Option<&String>) {
        let window = self.attempts_in_window;
        // An answer continues the task on the model it was on; a retry starts over from its own
        // model.
        self.requeue(answer.is_none());
        if let Some(a) = answer {
            self.edit_rare(|r| r.answers.push(a.clone()));
            // An answer continues the task: it neither uses up nor refills its retry budget
            // (the attempt that asked was already given back at task.waiting).
            self.attempts_in_window = window;
        }
    }

    /// `task.started`: attempt `attempt` runs, on `model` if the event names one.
    fn start(&mut self, attempt: u32, model: Option<&String>, time: DateTime<Utc>) {
        self.status = TaskStatus::Running;
        self.attempts = attempt;
        self.attempts_in_window += 1;
        self.started_at = Some(time);
        self.finished_at = None;
        self.error = None;
        self.model = model.cloned().or(self.model.take());
        self.clear_rare(|r| {
            r.not_before = None;
            // Queued steers are part of this attempt's prompt now.
            r.pending_steers.clear();
            r.job = None;
        });
    }

    /// `worker.spawned`: the running attempt's process.
    fn set_worker(&mut self, pid: u32, pid_start: u64) {
        self.edit_rare(|r| {
            r.pid = Some(pid);
            r.pid_start = Some(pid_start);
        });
    }

    /// `worker.submitting`: the running attempt's job, not submitted yet.
    fn set_job(&mut self, job: RemoteJob) {
        self.edit_rare(|r| r.job = Some(job));
    }

    /// `worker.submitted`: the cluster's id for the job of `attempt`; a job of another attempt
    /// keeps its own.
    fn set_job_id(&mut self, attempt: u32, job_id: u64) {
        self.clear_rare(|r| {
            if let Some(j) = r.job.as_mut().filter(|j| j.attempt == attempt) {
                j.id = Some(job_id);
            }
        });
    }

    /// `task.progress`: the running attempt's usage so far and the tool it is in.
    fn record_progress(&mut self, usage: Usage, current_tool: Option<&String>) {
        self.set_attempt_usage(usage);
        self.progress.current_tool = current_tool.cloned();
        // The event carries the attempt's usage; the task's progress is all of its attempts
        // (earlier, failed ones included), as its usage is.
        let total = self.usage();
        self.progress.turns = total.turns;
        self.progress.tokens = total.budget_tokens();
    }

    /// `task.completed`: the attempt ended with a result, and what the last failure left for
    /// a repair attempt is gone.
    fn complete(&mut self, end: &AttemptEnd, verification: &[VerifyOutcome], time: DateTime<Utc>) {
        // A candidate's failing checks do not fail it: they rule it out (issue 36).
        if super::candidates::candidate_of(&self.plan).is_some() {
            let failing = super::candidates::failing(verification);
            self.edit_rare(|x| x.failed_checks = failing);
        }
        self.end_attempt(end, time);
        self.status = TaskStatus::Completed;
        self.error = None;
        self.clear_rare(|x| {
            x.feedback = None;
            x.verdict_repair = None;
        });
    }

    /// What a completed task's result is: a judge's verdict (kept when there is no new one),
    /// its commit and the earlier result it reused (each cleared when absent).
    fn keep_result(
        &mut self,
        verdict: Option<&Verdict>,
        commit: Option<&TaskCommit>,
        reused_from: Option<&ReusedFrom>,
    ) {
        if let Some(v) = verdict {
            self.edit_rare(|x| x.verdict = Some(v.clone()));
        }
        match commit {
            Some(c) => self.edit_rare(|x| x.commit = Some(c.clone())),
            None => self.clear_rare(|x| x.commit = None),
        }
        match reused_from {
            Some(r) => {
                self.edit_rare(|x| x.reused_from = Some((r.run_id.clone(), r.task_id.clone())))
            }
            None => self.clear_rare(|x| x.reused_from = None),
        }
    }

    /// `task.failed`: the attempt ended, and the task with it.
    fn fail(&mut self, end: &AttemptEnd, time: DateTime<Utc>) {
        self.end_attempt(end, time);
        self.status = TaskStatus::Failed;
        self.error = end.error.clone();
    }

    /// `task.retrying`: the attempt ended, and the task waits in the queue until `not_before`,
    /// on `fallback_model` if the event names one.
    fn retry(
        &mut self,
        end: &AttemptEnd,
        time: DateTime<Utc>,
        reason: &str,
        not_before: DateTime<Utc>,
        fallback_model: Option<&String>,
    ) {
        // The worker did not fail, the daemon did (it restarted, or could not journal the
        // start, so no worker ran): that attempt does not count, and a session it was to
        // continue (an answer's) is continued by the next one.
        let daemons =
            reason == "daemon_restarted" || reason == super::FailReason::NotJournaled.as_str();
        let session = self.rare().session.clone().filter(|_| daemons);
        self.end_attempt(end, time);
        if daemons {
            self.attempts_in_window = self.attempts_in_window.saturating_sub(1);
        }
        if let Some(s) = session {
            self.edit_rare(|r| r.session = Some(s));
        }
        if let Some(m) = fallback_model {
            self.move_to_fallback(m);
        }
        self.status = TaskStatus::Queued;
        self.error = end.error.clone();
        self.edit_rare(|r| {
            r.not_before = Some(not_before);
            keep_retry_feedback(r, reason, end.error.as_ref());
        });
        self.finished_at = None;
    }

    /// On to a fallback model: its attempts are counted afresh. A model the plan does not list
    /// changes nothing.
    fn move_to_fallback(&mut self, model: &str) {
        if let Some(pos) = self.plan.fallback_models.iter().position(|f| f == model) {
            self.attempts_in_window = 0;
            let n = u32::try_from(pos).unwrap_or(u32::MAX).saturating_add(1);
            self.edit_rare(|r| r.fallback = n);
        }
    }

    /// `task.needs_attention`: the attempt ended, and the task waits for someone.
    fn need_attention(
        &mut self,
        end: &AttemptEnd,
        time: DateTime<Utc>,
        reason: &str,
        verdict: Option<&Verdict>,
    ) {
        self.end_attempt(end, time);
        self.status = TaskStatus::NeedsAttention;
        self.error = Some(reason.to_owned());
        if let Some(v) = verdict {
            self.edit_rare(|x| x.verdict = Some(v.clone()));
        }
    }

    /// `task.waiting`: the attempt ended with a question; `session` is what the answer
    /// continues.
    fn wait(
        &mut self,
        end: &AttemptEnd,
        time: DateTime<Utc>,
        question: &str,
        session: Option<&String>,
    ) {
        self.end_attempt(end, time);
        self.edit_rare(|r| r.session = session.cloned());
        self.finished_at = None;
        self.status = TaskStatus::Waiting;
        // Asking is not failing: the attempt does not count against max_attempts.
        self.attempts_in_window = self.attempts_in_window.saturating_sub(1);
        self.edit_rare(|r| r.question = Some(question.to_owned()));
    }

    /// `task.cancelled`: the task alone is cancelled, its worker and job with it.
    fn cancel(&mut self, time: DateTime<Utc>, reason: Option<&String>) {
        self.stop_cancelled(time);
        self.error = reason.cloned();
        self.clear_rare(|r| {
            r.job = None;
            r.pid = None;
        });
    }

    /// One of the tasks `run.cancelled` names. Unlike `cancel`, this leaves the task's error and
    /// its worker's pid as they were.
    pub(super) fn cancel_with_run(&mut self, time: DateTime<Utc>) {
        self.stop_cancelled(time);
        self.clear_rare(|r| r.job = None);
    }

    fn stop_cancelled(&mut self, time: DateTime<Utc>) {
        self.keep_spent_usage();
        self.status = TaskStatus::Cancelled;
        self.finished_at = Some(time);
    }

    /// The running attempt ended without a result: its usage was spent, so it moves to the
    /// earlier attempts'.
    pub(super) fn keep_spent_usage(&mut self) {
        let spent = self.take_attempt_usage();
        self.prior_usage.add(&spent);
    }

    /// `task.skipped`: the task will not run.
    fn skip(&mut self, time: DateTime<Utc>, reason: &str) {
        self.status = TaskStatus::Skipped;
        self.finished_at = Some(time);
        self.error = Some(reason.to_owned());
    }

    /// `task.candidate_chosen`: a selector completes with the candidate it chose. A choice
    /// made without an attempt (by crew's rule, or by a person) only stamps the time.
    fn choose_candidate(
        &mut self,
        end: Option<&AttemptEnd>,
        time: DateTime<Utc>,
        commit: Option<&TaskCommit>,
        choice: &Choice,
        verdict: Option<&Verdict>,
    ) {
        match end {
            Some(end) => self.end_attempt(end, time),
            None => self.finished_at = Some(time),
        }
        self.status = TaskStatus::Completed;
        self.error = None;
        self.edit_rare(|x| {
            x.commit = commit.cloned();
            x.choice = Some(choice.clone());
            x.verdict_repair = None;
            if let Some(v) = verdict {
                x.verdict = Some(v.clone());
            }
        });
    }

    /// What every ended attempt does to its task, whatever the outcome.
    fn end_attempt(&mut self, end: &AttemptEnd, time: DateTime<Utc>) {
        self.prior_usage.add(&end.usage);
        self.set_attempt_usage(Usage::default());
        self.finished_at = Some(time);
        self.progress.current_tool = None;
        // The task's progress counts every attempt: a failed attempt's turns stay counted.
        self.progress.turns = self.prior_usage.turns;
        self.progress.tokens = self.prior_usage.budget_tokens();
        // A session is resumed by the one attempt after the answer: whatever that attempt did,
        // a later one starts over (`task.waiting` sets it again when it asks again).
        // The attempt's job (a remote attempt) is over with it.
        self.clear_rare(|r| {
            r.session = None;
            r.job = None;
            r.pid = None;
            r.pid_start = None;
        });
        if end.model.is_some() {
            self.model = end.model.clone();
        }
        // The newest artifact of a name replaces the older one (e.g. result of a retry).
        self.artifacts.upsert(&end.artifacts);
    }

    /// Back to the queue with a fresh retry window. `own_model`: a retry by hand or by policy,
    /// which starts over on the task's own model; `false` for an answer, which continues on
    /// the model and in the session the task was in.
    pub(super) fn requeue(&mut self, own_model: bool) {
        self.status = TaskStatus::Queued;
        self.error = None;
        self.finished_at = None;
        self.attempts_in_window = 0;
        self.clear_rare(|r| {
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
}

/// What a retry's next attempt is told about why this one was refused: a failed verification
/// (which also counts against the step's verification retries), a refused fan-out block or an
/// unreadable verdict.
fn keep_retry_feedback(r: &mut Rare, reason: &str, error: Option<&String>) {
    if reason == crate::checks::VERIFY_FAILED {
        r.feedback = error.cloned();
        r.verify_retries = r.verify_retries.saturating_add(1);
    }
    if reason == crate::fanout::REPAIR_REASON {
        r.fan_out_repair = Some(error.cloned().unwrap_or_default());
    }
    if reason == crate::verdict::REPAIR_REASON {
        r.verdict_repair = Some(error.cloned().unwrap_or_default());
    }
}
