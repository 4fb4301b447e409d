//! Deciders: given the state and a request, the events that should happen (or why not).
//! None of these mutate; see `apply`.

use super::event::{AttemptEnd, Delivery, EventBody, Pending, ReusedFrom};
use super::types::{
    Approval, ArtifactRef, Budget, RunSpec, RunState, RunStatus, TaskState, TaskStatus,
};
use super::{not_found, CoreError, State};
use crate::usage::Usage;
use chrono::{DateTime, Duration, Utc};

/// How a worker attempt ended, as the executor saw it. Serializable: a remote worker hands
/// it back in its final record (`crew_staging::Final`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AttemptResult {
    Completed {
        usage: Usage,
        model: Option<String>,
        artifacts: Vec<ArtifactRef>,
        reused_from: Option<ReusedFrom>,
        commit: Option<super::workspace::TaskCommit>,
        /// The verification commands run after the agent, all passed.
        verification: Vec<crate::checks::VerifyOutcome>,
    },
    /// Exited cleanly but said nothing final.
    NoFinalText {
        usage: Usage,
        model: Option<String>,
        artifacts: Vec<ArtifactRef>,
    },
    /// The task cannot go on without someone: its dependencies' results conflict, or it
    /// answered but every write it tried was refused.
    NeedsAttention {
        usage: Usage,
        model: Option<String>,
        artifacts: Vec<ArtifactRef>,
        reason: String,
    },
    Failed {
        usage: Usage,
        model: Option<String>,
        artifacts: Vec<ArtifactRef>,
        error: String,
        retryable: bool,
        reason: String,
    },
    Asked {
        usage: Usage,
        model: Option<String>,
        artifacts: Vec<ArtifactRef>,
        question: String,
        /// The CLI session that asked (pi's session file, claude's or codex's session id).
        session: Option<String>,
    },
}

impl AttemptResult {
    /// What every outcome carries: its usage, model and named files.
    pub fn parts(&self) -> (Usage, Option<&str>, &[ArtifactRef]) {
        match self {
            AttemptResult::Completed {
                usage,
                model,
                artifacts,
                ..
            }
            | AttemptResult::NoFinalText {
                usage,
                model,
                artifacts,
            }
            | AttemptResult::NeedsAttention {
                usage,
                model,
                artifacts,
                ..
            }
            | AttemptResult::Failed {
                usage,
                model,
                artifacts,
                ..
            }
            | AttemptResult::Asked {
                usage,
                model,
                artifacts,
                ..
            } => (*usage, model.as_deref(), artifacts),
        }
    }
}

/// Exponential backoff with jitter for retryable failures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    pub base_ms: u64,
    pub factor: u32,
    pub max_ms: u64,
    pub jitter_ratio: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base_ms: 1000,
            factor: 2,
            max_ms: 60_000,
            jitter_ratio: 0.3,
        }
    }
}

impl RetryPolicy {
    /// Delay before attempt `n + 1` after `n` failed attempts; `jitter` in [0, 1) from the caller.
    pub fn delay_ms(&self, failed_attempts: u32, jitter: f64) -> u64 {
        let exp = self
            .factor
            .saturating_pow(failed_attempts.saturating_sub(1)) as u64;
        let base = self.base_ms.saturating_mul(exp).min(self.max_ms);
        let j = (base as f64 * self.jitter_ratio * jitter.clamp(0.0, 1.0)) as u64;
        base + j
    }
}

impl State {
    /// The run and task of `attempt` while it is the task's running attempt; `None` for a late
    /// or repeated report (a stale attempt, a task that has moved on), which changes nothing.
    pub(super) fn running_attempt(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
    ) -> Option<(&RunState, &TaskState)> {
        let run = self.runs.get(run_id)?;
        let t = run.task(task_id)?;
        (t.status == TaskStatus::Running && t.attempts == attempt).then_some((run, t))
    }

    fn active_run(&self, run_id: &str) -> Result<&super::RunState, CoreError> {
        self.runs
            .get(run_id)
            .ok_or_else(|| not_found("run", run_id))
    }

    pub fn create_run(&self, run_id: &str, spec: RunSpec) -> Result<Vec<Pending>, CoreError> {
        if self.summaries.contains_key(run_id) {
            return Err(CoreError::InvalidState(format!(
                "run {run_id} already exists"
            )));
        }
        if spec.tasks.is_empty() {
            return Err(CoreError::Invalid {
                field: "workflow".into(),
                message: "the workflow has no steps".into(),
            });
        }
        Ok(vec![
            Pending::run(run_id, EventBody::RunCreated(Box::new(spec))),
            Pending::run(run_id, EventBody::RunStarted {}),
        ])
    }

    /// Cancel a run: every unfinished task is cancelled (the daemon stops running workers).
    pub fn cancel_run(
        &self,
        run_id: &str,
        reason: Option<String>,
    ) -> Result<(Vec<Pending>, Vec<String>), CoreError> {
        let run = self.active_run(run_id)?;
        if run.status.is_finished() {
            return Err(CoreError::InvalidState(format!(
                "run {run_id} is already {}",
                run.status.as_str()
            )));
        }
        let ids: Vec<String> = run
            .tasks
            .iter()
            .filter(|t| {
                matches!(
                    t.status,
                    TaskStatus::Queued | TaskStatus::Running | TaskStatus::Waiting
                )
            })
            .map(|t| t.plan.id.to_string())
            .collect();
        let ev = Pending::run(
            run_id,
            EventBody::RunCancelled {
                reason,
                cancelled_task_ids: ids.clone(),
            },
        );
        Ok((vec![ev], ids))
    }

    /// Re-queue failed, cancelled, skipped and needs_attention tasks of a run that stopped.
    /// `budget_tokens`: the run's token budget from now on (a run its budget stopped goes on
    /// only with a larger one).
    pub fn resume_run(
        &self,
        run_id: &str,
        budget_tokens: Option<u64>,
    ) -> Result<(Vec<Pending>, Vec<String>), CoreError> {
        let run = self.active_run(run_id)?;
        if budget_tokens == Some(0) {
            return Err(CoreError::Invalid {
                field: "budgetTokens".into(),
                message: "must be more than 0".into(),
            });
        }
        match run.status {
            RunStatus::Queued | RunStatus::Running => {
                return Err(CoreError::InvalidState(format!(
                    "run {run_id} is {}; only a stopped run can be resumed",
                    run.status.as_str()
                )))
            }
            RunStatus::Blocked if run.approval == Approval::Pending => {
                return Err(CoreError::InvalidState(format!(
                    "run {run_id} is waiting for plan approval: use team.approve or team.reject"
                )))
            }
            _ => {}
        }
        spent_budget(run, budget_tokens)?;
        // A judge whose fix rounds were spent gets one more round instead of judging again.
        let (fixes, judges) = self.granted_rounds(run);
        let ids: Vec<String> = run
            .tasks
            .iter()
            .filter(|t| {
                matches!(
                    t.status,
                    TaskStatus::Failed
                        | TaskStatus::Cancelled
                        | TaskStatus::Skipped
                        | TaskStatus::NeedsAttention
                ) && !judges.iter().any(|j| *j == t.plan.id)
            })
            .map(|t| t.plan.id.to_string())
            .collect();
        if ids.is_empty() && fixes.is_empty() && run.status == RunStatus::Completed {
            return Err(CoreError::InvalidState(format!(
                "run {run_id} completed; there is nothing to resume"
            )));
        }
        let mut out = vec![Pending::run(
            run_id,
            EventBody::RunResumed {
                requeued_task_ids: ids.clone(),
                budget_tokens,
            },
        )];
        out.extend(fixes);
        let mut all = ids;
        all.extend(judges);
        Ok((out, all))
    }

    /// Run named tasks again with a new attempt; tasks skipped because of them come back too.
    pub fn retry_tasks(
        &self,
        run_id: &str,
        task_ids: &[String],
    ) -> Result<(Vec<Pending>, Vec<String>), CoreError> {
        let run = self.active_run(run_id)?;
        if task_ids.is_empty() {
            return Err(CoreError::Invalid {
                field: "taskIds".into(),
                message: "name at least one task".into(),
            });
        }
        for id in task_ids {
            let t = run.task(id).ok_or_else(|| not_found("task", id))?;
            if matches!(t.status, TaskStatus::Running | TaskStatus::Waiting) {
                return Err(CoreError::InvalidState(format!(
                    "task {id} is {}",
                    t.status.as_str()
                )));
            }
            if t.status == TaskStatus::Queued {
                return Err(CoreError::InvalidState(format!(
                    "task {id} is already queued"
                )));
            }
            // Exact readiness: a task may not run again under a dependent using its output.
            if let Some(d) = dependents(run, id).into_iter().find(|d| {
                run.task(d).is_some_and(|dt| {
                    matches!(dt.status, TaskStatus::Running | TaskStatus::Waiting)
                })
            }) {
                return Err(CoreError::InvalidState(format!(
                    "task {d} depends on {id} and is still running"
                )));
            }
        }
        if run.status == RunStatus::Blocked && run.approval == Approval::Pending {
            return Err(CoreError::InvalidState(format!(
                "run {run_id} is waiting for plan approval"
            )));
        }
        spent_budget(run, None)?;
        // Named tasks plus their transitive dependents that were skipped (they were skipped
        // only because something upstream failed) and, in a cancelled run, cancelled (by the
        // run's cancel or a rejected plan: the run goes on now, and they are its rest) — but
        // not a candidate its selector set aside when it chose another.
        let cancelled_run = run.status == RunStatus::Cancelled;
        let set_aside = |t: &TaskState| {
            matches!(
                t.plan.candidates.as_deref(),
                Some(super::candidates::Candidacy::Candidate { of, .. })
                    if run.task(of.as_str()).is_some_and(|s| s.status == TaskStatus::Completed)
            )
        };
        let comes_back = |t: &TaskState| {
            t.status == TaskStatus::Skipped
                || (cancelled_run && t.status == TaskStatus::Cancelled && !set_aside(t))
        };
        let mut ids: Vec<String> = task_ids.to_vec();
        // Under fail-fast every task the failure skipped comes back, not only dependents.
        if run.spec.failure_policy == super::FailurePolicy::FailFast {
            for t in &run.tasks {
                if t.status == TaskStatus::Skipped && !ids.iter().any(|i| *i == t.plan.id) {
                    ids.push(t.plan.id.to_string());
                }
            }
        }
        let mut changed = true;
        while changed {
            changed = false;
            for t in &run.tasks {
                if comes_back(t)
                    && !ids.iter().any(|i| *i == t.plan.id)
                    && t.plan.depends_on.iter().any(|d| ids.iter().any(|i| i == d))
                {
                    ids.push(t.plan.id.to_string());
                    changed = true;
                }
            }
        }
        let events = if run.status == RunStatus::Running {
            ids.iter()
                .map(|id| {
                    Pending::task(
                        run_id,
                        id,
                        EventBody::TaskQueued {
                            reason: "retry".into(),
                            answer: None,
                        },
                    )
                })
                .collect()
        } else {
            vec![Pending::run(
                run_id,
                EventBody::RunResumed {
                    requeued_task_ids: ids.clone(),
                    budget_tokens: None,
                },
            )]
        };
        Ok((events, ids))
    }

    /// `retry_tasks` of the named tasks and of every task downstream of them that finished
    /// (completed, failed, cancelled, needs attention): their inputs are about to change, so
    /// their results would be stale. Skipped ones come back anyway; queued ones wait as they are.
    pub fn retry_tasks_with_dependents(
        &self,
        run_id: &str,
        task_ids: &[String],
    ) -> Result<(Vec<Pending>, Vec<String>), CoreError> {
        let run = self.active_run(run_id)?;
        let mut downstream: Vec<String> = Vec::new();
        for id in task_ids {
            run.task(id).ok_or_else(|| not_found("task", id))?;
            for d in dependents(run, id) {
                if !downstream.contains(&d) {
                    downstream.push(d);
                }
            }
        }
        let mut ids: Vec<String> = task_ids.to_vec();
        // In plan order, so the answer lists them as the run does.
        for t in &run.tasks {
            let finished = matches!(
                t.status,
                TaskStatus::Completed
                    | TaskStatus::Failed
                    | TaskStatus::Cancelled
                    | TaskStatus::NeedsAttention
            );
            if finished
                && downstream.iter().any(|d| *d == t.plan.id)
                && !ids.iter().any(|i| *i == t.plan.id)
            {
                ids.push(t.plan.id.to_string());
            }
        }
        self.retry_tasks(run_id, &ids)
    }

    pub fn approve(&self, run_id: &str, reason: Option<String>) -> Result<Vec<Pending>, CoreError> {
        let run = self.active_run(run_id)?;
        if run.approval != Approval::Pending {
            return Err(CoreError::InvalidState(format!(
                "run {run_id} is not awaiting plan approval"
            )));
        }
        Ok(vec![Pending::run(
            run_id,
            EventBody::PlanApproved { reason },
        )])
    }

    pub fn reject(&self, run_id: &str, reason: Option<String>) -> Result<Vec<Pending>, CoreError> {
        let run = self.active_run(run_id)?;
        if run.approval != Approval::Pending {
            return Err(CoreError::InvalidState(format!(
                "run {run_id} is not awaiting plan approval"
            )));
        }
        let (mut cancel, _) = self.cancel_run(
            run_id,
            Some(reason.clone().unwrap_or_else(|| "plan rejected".into())),
        )?;
        let mut out = vec![Pending::run(run_id, EventBody::PlanRejected { reason })];
        out.append(&mut cancel);
        Ok(out)
    }

    /// Steer a task. `live` = the daemon can deliver it to the running worker right now.
    pub fn steer(
        &self,
        run_id: &str,
        task_id: &str,
        message: &str,
        live: bool,
    ) -> Result<(Pending, Delivery), CoreError> {
        let run = self.active_run(run_id)?;
        let t = run
            .task(task_id)
            .ok_or_else(|| not_found("task", task_id))?;
        if message.trim().is_empty() {
            return Err(CoreError::Invalid {
                field: "message".into(),
                message: "must not be empty".into(),
            });
        }
        let delivered = match t.status {
            TaskStatus::Running if live => Delivery::Live,
            TaskStatus::Running | TaskStatus::Queued => Delivery::Queued,
            s => {
                return Err(CoreError::InvalidState(format!(
                    "task {task_id} is {}; only a queued or running task can be steered",
                    s.as_str()
                )))
            }
        };
        Ok((
            Pending::task(
                run_id,
                task_id,
                EventBody::TaskSteered {
                    message: message.to_string(),
                    delivered,
                },
            ),
            delivered,
        ))
    }

    pub fn respond(
        &self,
        run_id: &str,
        task_id: &str,
        message: &str,
    ) -> Result<Vec<Pending>, CoreError> {
        let run = self.active_run(run_id)?;
        let t = run
            .task(task_id)
            .ok_or_else(|| not_found("task", task_id))?;
        // An empty answer would be sent to the agent as its answer (issue 32: a page once
        // sent one from a wiped text box); refused as steer refuses an empty message.
        if message.trim().is_empty() {
            return Err(CoreError::Invalid {
                field: "message".into(),
                message: "must not be empty".into(),
            });
        }
        if t.status != TaskStatus::Waiting {
            return Err(CoreError::InvalidState(format!(
                "task {task_id} is {}, not waiting for an answer",
                t.status.as_str()
            )));
        }
        Ok(vec![Pending::task(
            run_id,
            task_id,
            EventBody::TaskQueued {
                reason: "answered".into(),
                answer: Some(message.to_string()),
            },
        )])
    }

    /// Live usage of a running attempt. `None` when the attempt is not the current one.
    pub fn progress(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
        usage: Usage,
        current_tool: Option<String>,
    ) -> Option<Pending> {
        let t = self.runs.get(run_id)?.task(task_id)?;
        (t.status == TaskStatus::Running && t.attempts == attempt).then(|| {
            Pending::task(
                run_id,
                task_id,
                EventBody::TaskProgress {
                    attempt,
                    usage,
                    current_tool,
                },
            )
        })
    }

    /// A refused tool call of a running attempt. `None` when the attempt is not the current one.
    pub fn warning(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
        tool: String,
        message: String,
    ) -> Option<Pending> {
        let t = self.runs.get(run_id)?.task(task_id)?;
        (t.status == TaskStatus::Running && t.attempts == attempt).then(|| {
            let text = match tool.as_str() {
                "" => format!("refused: {message}"),
                tool => format!("{tool} refused: {message}"),
            };
            Pending::task(
                run_id,
                task_id,
                EventBody::TaskWarning {
                    attempt,
                    tool,
                    message,
                },
            )
            .with_message(text)
        })
    }

    pub fn worker_spawned(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
        pid: u32,
        pid_start: u64,
        live: bool,
    ) -> Option<Pending> {
        let t = self.runs.get(run_id)?.task(task_id)?;
        (t.status == TaskStatus::Running && t.attempts == attempt).then(|| {
            Pending::task(
                run_id,
                task_id,
                EventBody::WorkerSpawned {
                    attempt,
                    pid,
                    pid_start,
                    live,
                },
            )
        })
    }

    /// A remote attempt's job is about to be submitted: `None` (nothing to journal, nothing to
    /// submit) unless `attempt` is the task's running attempt and has no job yet.
    pub fn worker_submitting(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
        job_name: String,
        staging: String,
    ) -> Option<Pending> {
        let t = self.runs.get(run_id)?.task(task_id)?;
        (t.status == TaskStatus::Running && t.attempts == attempt && t.job().is_none()).then(|| {
            Pending::task(
                run_id,
                task_id,
                EventBody::WorkerSubmitting {
                    attempt,
                    job_name,
                    staging,
                },
            )
        })
    }

    /// The running attempt's job was submitted as `job_id`: `None` unless its intent is the
    /// task's current one and names no job yet.
    pub fn worker_submitted(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
        job_id: u64,
    ) -> Option<Pending> {
        let t = self.runs.get(run_id)?.task(task_id)?;
        let job = t.job()?;
        (t.status == TaskStatus::Running && t.attempts == attempt && job.id.is_none()).then(|| {
            Pending::task(
                run_id,
                task_id,
                EventBody::WorkerSubmitted { attempt, job_id },
            )
        })
    }

    /// A worker attempt ended. Stale results (a cancelled task, an older attempt) are dropped.
    #[allow(clippy::too_many_arguments)]
    pub fn finish_attempt(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
        result: AttemptResult,
        now: DateTime<Utc>,
        retry: &RetryPolicy,
        jitter: f64,
    ) -> Vec<Pending> {
        let Some((run, t)) = self.running_attempt(run_id, task_id, attempt) else {
            return vec![];
        };
        let ev = |body| vec![Pending::task(run_id, task_id, body)];
        let end = |usage, model, artifacts, error| AttemptEnd {
            attempt,
            usage,
            model,
            artifacts,
            error,
        };
        match result {
            AttemptResult::Completed {
                usage,
                model,
                artifacts,
                reused_from,
                commit,
                verification,
            } => ev(EventBody::TaskCompleted {
                end: end(usage, model, artifacts, None),
                reused_from,
                commit,
                verification,
                verdict: None,
            }),
            AttemptResult::NoFinalText {
                usage,
                model,
                artifacts,
            } => ev(EventBody::TaskNeedsAttention {
                end: end(usage, model, artifacts, None),
                reason: "the worker exited cleanly without a final answer".into(),
                verdict: None,
            }),
            AttemptResult::NeedsAttention {
                usage,
                model,
                artifacts,
                reason,
            } => vec![Pending::task(
                run_id,
                task_id,
                EventBody::TaskNeedsAttention {
                    end: end(usage, model, artifacts, Some(reason.clone())),
                    reason: reason.clone(),
                    verdict: None,
                },
            )
            .with_message(reason)],
            AttemptResult::Asked {
                usage,
                model,
                artifacts,
                question,
                session,
            } => ev(EventBody::TaskWaiting {
                end: end(usage, model, artifacts, None),
                question,
                session,
            }),
            AttemptResult::Failed {
                usage,
                model,
                artifacts,
                error,
                retryable,
                reason,
            } => {
                let failure = Failure {
                    run_id,
                    task_id,
                    run,
                    t,
                    end: end(usage, model, artifacts, Some(error.clone())),
                    error,
                    reason,
                };
                let clock = RetryClock { now, retry, jitter };
                vec![failure.follow_up(retryable, &clock)]
            }
        }
    }

    /// After a daemon restart: every task the journal says is running lost its worker. Each goes
    /// back to the queue as a retry with reason `daemon_restarted` (not counted against
    /// `maxAttempts`: the worker did not fail).
    pub fn requeue_orphans(&self, now: DateTime<Utc>) -> Vec<Pending> {
        self.requeue_orphans_except(now, &|_, _| false, &|_, _, _| None)
    }

    /// `requeue_orphans`, leaving running the tasks `alive(run, task)` names: those whose
    /// worker outlives the daemon on purpose (a job on a cluster), which the daemon follows
    /// again instead of starting another attempt. `seen(run, task, attempt)`: what an orphaned
    /// attempt's transcript shows it spent — the worker went on after the last progress the
    /// daemon held, and that spending counts in the task, the run and the budget; the larger of
    /// the two (by budget tokens, then cost) is the attempt's usage.
    pub fn requeue_orphans_except(
        &self,
        now: DateTime<Utc>,
        alive: &dyn Fn(&RunState, &TaskState) -> bool,
        seen: &dyn Fn(&str, &str, u32) -> Option<Usage>,
    ) -> Vec<Pending> {
        let mut out = Vec::new();
        for id in &self.active {
            let Some(run) = self.runs.get(id) else {
                continue;
            };
            for t in &run.tasks {
                if t.status == TaskStatus::Running && !alive(run, t) {
                    out.push(Pending::task(
                        id,
                        &t.plan.id,
                        EventBody::TaskRetrying {
                            end: AttemptEnd {
                                attempt: t.attempts,
                                usage: match seen(id, &t.plan.id, t.attempts) {
                                    Some(u)
                                        if (u.budget_tokens(), u.cost)
                                            > (
                                                t.attempt_usage().budget_tokens(),
                                                t.attempt_usage().cost,
                                            ) =>
                                    {
                                        u
                                    }
                                    _ => t.attempt_usage(),
                                },
                                ..Default::default()
                            },
                            reason: "daemon_restarted".into(),
                            delay_ms: 0,
                            not_before: now,
                            fallback_model: None,
                        },
                    ));
                }
            }
        }
        out
    }

    pub fn forget(&self, run_id: &str) -> Result<Vec<Pending>, CoreError> {
        let s = self
            .summaries
            .get(run_id)
            .ok_or_else(|| not_found("run", run_id))?;
        if !s.status.is_finished() {
            return Err(CoreError::InvalidState(format!(
                "run {run_id} is {}; cancel it before forgetting it",
                s.status.as_str()
            )));
        }
        Ok(vec![Pending::run(run_id, EventBody::RunForgotten {})])
    }

    /// Finished runs to remove: all but the newest `keep`, and (if given) only those finished
    /// before `older_than`. Refuses while any run is active, so a prune never races a run.
    pub fn prune(
        &self,
        keep: usize,
        older_than: Option<DateTime<Utc>>,
    ) -> Result<Vec<String>, CoreError> {
        // Active runs (blocked ones too) are passed over, not a reason to refuse: `keep`
        // counts finished runs only.
        Ok(self
            .summaries
            .values()
            .rev()
            .filter(|s| s.status.is_finished())
            .skip(keep)
            .filter(|s| match (older_than, s.finished_at) {
                (Some(limit), Some(f)) => f < limit,
                (Some(_), None) => false,
                (None, _) => true,
            })
            .map(|s| s.id.clone())
            .collect())
    }
}

/// A run whose token budget (`raised` from now on, when given) is spent would stop again at
/// once: refused, saying how much it takes to go on. A run whose tasks all completed is done
/// whatever it cost (`settle`).
fn spent_budget(run: &RunState, raised: Option<u64>) -> Result<(), CoreError> {
    let budget = match (run.spec.budget, raised) {
        (Some(b), Some(tokens)) => Budget { tokens, ..b },
        (None, Some(tokens)) => Budget::of(tokens),
        (Some(b), None) => b,
        (None, None) => return Ok(()),
    };
    let used = run.usage().budget_tokens();
    if !budget.spent(used) {
        return Ok(());
    }
    let id = &run.id;
    let need = budget.least_above(used);
    Err(CoreError::InvalidState(match raised {
        // A fraction below 1 stops the run before its budget is used up: say where.
        Some(tokens) if budget.abort_at != 1.0 => format!(
            "run {id} has used {used} tokens: a budget of {tokens} is spent already (the run \
             stops at {} of it); give at least {need}",
            budget.abort_at
        ),
        Some(tokens) => format!(
            "run {id} has used {used} tokens: a budget of {tokens} is spent already; give at \
             least {need}"
        ),
        None => format!(
            "run {id} spent its token budget ({used} of {} tokens) and would stop again at \
             once: resume it with a larger one (crewctl resume {id} --budget-tokens N, at least \
             {need})",
            budget.tokens
        ),
    }))
}

/// A failed attempt of task `t` (of `run`), about to say what comes next.
struct Failure<'a> {
    run_id: &'a str,
    task_id: &'a str,
    run: &'a RunState,
    t: &'a TaskState,
    end: AttemptEnd,
    error: String,
    reason: String,
}

/// When a retry may start: `now`, plus the policy's delay with its jitter.
struct RetryClock<'a> {
    now: DateTime<Utc>,
    retry: &'a RetryPolicy,
    jitter: f64,
}

impl Failure<'_> {
    /// The task is retried on its model while its attempts last, then on a fallback model if
    /// its model ran out of capacity; a resolver that gave up waits for the user, and any
    /// other task fails. `retryable`: what the executor said of the attempt.
    fn follow_up(self, retryable: bool, clock: &RetryClock) -> Pending {
        let (run, t) = (self.run, self.t);
        let fail_fast_stopped = run.spec.failure_policy == super::FailurePolicy::FailFast
            && run.tasks.iter().any(super::settle::failed_for_the_run);
        // A failed verification is retried only as often as the step allows (once by
        // default), with its failure in the next prompt.
        let retryable = retryable
            && (self.reason != crate::checks::VERIFY_FAILED
                || t.rare().verify_retries < t.plan.checks.verify_retries());
        // No worker ran (its start could not be journaled): not one of the task's attempts.
        let ran = self.reason != super::FailReason::NotJournaled.as_str();
        if retryable
            && (t.attempts_in_window < self.attempts_allowed() || !ran)
            && !run.halted
            && !fail_fast_stopped
        {
            return self.retrying(clock, t.attempts_in_window, None);
        }
        if let Some(next) = run.next_fallback(t).filter(|_| {
            // Retries on this model ran out on its capacity: another model may answer.
            retryable
                && crate::stream::is_capacity_message(&self.error)
                && !run.halted
                && !fail_fast_stopped
        }) {
            // A fresh model starts a fresh window, after the first retry's delay.
            return self.retrying(clock, 1, Some(next));
        }
        if super::resolve::is_resolve(&t.plan) {
            return self.left_to_the_user();
        }
        Pending::task(
            self.run_id,
            self.task_id,
            EventBody::TaskFailed { end: self.end },
        )
        .with_message(self.error)
    }

    /// A resolver gets its one retry, told what is wrong, whatever `maxAttempts` says (issue
    /// 31: then the manual way).
    fn attempts_allowed(&self) -> u32 {
        if super::resolve::is_resolve(&self.t.plan) {
            self.run.spec.max_attempts.max(2)
        } else {
            self.run.spec.max_attempts
        }
    }

    /// `task.retrying` after the delay the policy gives `failed_attempts`, on `fallback_model`
    /// when there is one.
    fn retrying(
        self,
        clock: &RetryClock,
        failed_attempts: u32,
        fallback_model: Option<&str>,
    ) -> Pending {
        let delay_ms = clock.retry.delay_ms(failed_attempts, clock.jitter);
        let not_before = clock.now + Duration::milliseconds(delay_ms as i64);
        let message = match fallback_model {
            Some(next) => format!("{}; next attempt on fallback model {next}", self.error),
            None => self.error,
        };
        Pending::task(
            self.run_id,
            self.task_id,
            EventBody::TaskRetrying {
                end: self.end,
                reason: self.reason,
                delay_ms,
                not_before,
                fallback_model: fallback_model.map(str::to_owned),
            },
        )
        .with_message(message)
    }

    /// A resolver that gave up leaves the conflict to the user (issue 31): the run waits,
    /// resumable, instead of failing.
    fn left_to_the_user(self) -> Pending {
        // The way out first: views show a reason's first paragraph, and a failed check's
        // output (blank lines and all) would push it out of sight. The error is cut, never
        // the way out.
        let reason = format!(
            "{}\nIts last attempt: {}",
            super::resolve::manual_hint(self.run, self.task_id),
            crate::text::bound(self.error, crate::text::MAX_REASON_CHARS / 2),
        );
        Pending::task(
            self.run_id,
            self.task_id,
            EventBody::TaskNeedsAttention {
                end: self.end,
                reason: reason.clone(),
                verdict: None,
            },
        )
        .with_message(reason)
    }
}

/// Tasks that depend on `id`, directly or not.
fn dependents(run: &super::RunState, id: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut frontier = vec![id.to_string()];
    while let Some(cur) = frontier.pop() {
        for t in &run.tasks {
            if t.plan.depends_on.iter().any(|d| *d == cur) && !out.iter().any(|o| *o == t.plan.id) {
                out.push(t.plan.id.to_string());
                frontier.push(t.plan.id.to_string());
            }
        }
    }
    out
}
