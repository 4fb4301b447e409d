//! Events: every state change, as journaled and as clients see it (SPEC §6).

use super::jobs::ScheduleJob;
use super::types::{ArtifactRef, RunSpec};
use crate::usage::Usage;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A journaled event. Serialized as `{seq, runSeq, time, type, runId?, taskId?, message?, data}`,
/// the wire shape of SPEC §6, so one serialization serves journal and clients. Deserialize is
/// written by hand (event_de.rs) for replay speed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub seq: u64,
    pub run_seq: u64,
    pub time: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub message: Option<String>,
    #[serde(flatten)]
    pub body: EventBody,
}

/// An event before the journal gave it a position.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub run_id: Option<String>,
    pub task_id: Option<String>,
    pub message: Option<String>,
    pub body: EventBody,
}

impl Pending {
    pub fn run(run_id: &str, body: EventBody) -> Self {
        Pending {
            run_id: Some(run_id.to_string()),
            task_id: None,
            message: None,
            body,
        }
    }
    pub fn task(run_id: &str, task_id: &str, body: EventBody) -> Self {
        Pending {
            run_id: Some(run_id.to_string()),
            task_id: Some(task_id.to_string()),
            message: None,
            body,
        }
    }
    pub fn global(body: EventBody) -> Self {
        Pending {
            run_id: None,
            task_id: None,
            message: None,
            body,
        }
    }
    pub fn with_message(mut self, m: impl Into<String>) -> Self {
        self.message = Some(m.into());
        self
    }

    /// This event with its message, reasons, errors and questions cut to
    /// `text::MAX_REASON_CHARS` (what a user typed, an answer or a steer, is left as it is).
    pub(crate) fn bounded(mut self) -> Self {
        fn cut(s: &mut String) {
            if s.len() > crate::text::MAX_REASON_CHARS {
                *s = crate::text::bound(std::mem::take(s), crate::text::MAX_REASON_CHARS);
            }
        }
        fn cut_opt(s: &mut Option<String>) {
            if let Some(s) = s {
                cut(s);
            }
        }
        fn cut_name(s: &mut Option<String>) {
            if let Some(s) = s {
                if s.len() > crate::text::MAX_NAME_CHARS {
                    *s = crate::text::bound(std::mem::take(s), crate::text::MAX_NAME_CHARS);
                }
            }
        }
        cut_opt(&mut self.message);
        // The model and the tool are named by the agent's stream (or a remote worker's record).
        match &mut self.body {
            EventBody::TaskCompleted { end, .. }
            | EventBody::TaskFailed { end }
            | EventBody::TaskRetrying { end, .. }
            | EventBody::TaskNeedsAttention { end, .. }
            | EventBody::TaskWaiting { end, .. }
            | EventBody::TaskCandidateChosen { end: Some(end), .. } => {
                cut_name(&mut end.model);
                cut_opt(&mut end.error);
            }
            EventBody::TaskStarted { model, .. } => cut_name(model),
            EventBody::TaskProgress { current_tool, .. } => cut_name(current_tool),
            _ => {}
        }
        match &mut self.body {
            EventBody::RunBlocked { reason }
            | EventBody::RunFailed { reason, .. }
            | EventBody::TaskSkipped { reason }
            | EventBody::TaskQueued { reason, .. }
            | EventBody::ScheduleSkipped { reason, .. } => cut(reason),
            EventBody::RunCancelled { reason, .. }
            | EventBody::PlanApproved { reason }
            | EventBody::PlanRejected { reason }
            | EventBody::TaskCancelled { reason } => cut_opt(reason),
            EventBody::TaskCompleted { end, .. } | EventBody::TaskFailed { end } => {
                cut_opt(&mut end.error)
            }
            EventBody::TaskRetrying { end, reason, .. }
            | EventBody::TaskNeedsAttention { end, reason, .. } => {
                cut_opt(&mut end.error);
                cut(reason);
            }
            EventBody::TaskWaiting { end, question, .. } => {
                cut_opt(&mut end.error);
                cut(question);
            }
            EventBody::TaskCandidateChosen { choice, .. } => cut(&mut choice.reason),
            EventBody::TaskWarning { tool, message, .. } => {
                cut(tool);
                cut(message);
            }
            _ => {}
        }
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct AttemptEnd {
    pub attempt: u32,
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<ArtifactRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum EventBody {
    #[serde(rename = "run.created")]
    RunCreated(Box<RunSpec>),
    #[serde(rename = "run.started")]
    RunStarted {},
    #[serde(rename = "run.blocked")]
    RunBlocked { reason: String },
    /// `worktree` mode: the leaf tasks' results are merged on the run's branch.
    #[serde(rename = "run.integrated")]
    RunIntegrated(Box<super::workspace::Integration>),
    #[serde(rename = "run.completed")]
    RunCompleted { usage: Usage },
    #[serde(rename = "run.failed")]
    RunFailed { reason: String, usage: Usage },
    #[serde(rename = "run.cancelled")]
    RunCancelled {
        reason: Option<String>,
        #[serde(rename = "cancelledTaskIds")]
        cancelled_task_ids: Vec<String>,
    },
    #[serde(rename = "run.resumed")]
    RunResumed {
        #[serde(rename = "requeuedTaskIds")]
        requeued_task_ids: Vec<String>,
        /// The run's token budget from now on, when the resume raised it (a run its budget
        /// stopped goes on only with a larger one).
        #[serde(
            rename = "budgetTokens",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        budget_tokens: Option<u64>,
    },
    #[serde(rename = "run.budget_warning")]
    RunBudgetWarning { used: u64, total: u64 },
    #[serde(rename = "run.budget_exceeded")]
    RunBudgetExceeded { used: u64, total: u64 },
    #[serde(rename = "plan.approval_required")]
    PlanApprovalRequired {
        #[serde(rename = "taskId")]
        task_id: String,
    },
    #[serde(rename = "plan.approved")]
    PlanApproved { reason: Option<String> },
    #[serde(rename = "plan.rejected")]
    PlanRejected { reason: Option<String> },
    /// A task goes (back) to the queue by hand: retry, respond.
    #[serde(rename = "task.queued")]
    TaskQueued {
        reason: String,
        answer: Option<String>,
    },
    #[serde(rename = "task.started")]
    TaskStarted {
        attempt: u32,
        runtime: String,
        model: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        artifacts: Vec<ArtifactRef>,
    },
    /// The worker process exists: its pid and start time, for recovery after a crash.
    #[serde(rename = "worker.spawned")]
    WorkerSpawned {
        attempt: u32,
        pid: u32,
        #[serde(rename = "pidStart")]
        pid_start: u64,
        live: bool,
    },
    /// A remote attempt's job is about to be submitted (Slurm placement): the name crew gives
    /// it and its staging directory. Durable before the submission: a daemon killed after it
    /// finds the job by name instead of submitting twice. Never the token its worker must echo
    /// (events are served and exported): crewd derives that again from a key of its own.
    #[serde(rename = "worker.submitting")]
    WorkerSubmitting {
        attempt: u32,
        #[serde(rename = "jobName")]
        job_name: String,
        staging: String,
    },
    /// The remote attempt's job was submitted: its id in the cluster, by which a restarted
    /// daemon follows it again.
    #[serde(rename = "worker.submitted")]
    WorkerSubmitted {
        attempt: u32,
        #[serde(rename = "jobId")]
        job_id: u64,
    },
    #[serde(rename = "task.progress")]
    TaskProgress {
        attempt: u32,
        usage: Usage,
        #[serde(rename = "currentTool")]
        current_tool: Option<String>,
    },
    #[serde(rename = "task.completed")]
    TaskCompleted {
        #[serde(flatten)]
        end: AttemptEnd,
        #[serde(
            rename = "reusedFrom",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        reused_from: Option<ReusedFrom>,
        /// `worktree` mode: the commit holding what the task changed, with its diffstat.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<super::workspace::TaskCommit>,
        /// The step's verification commands, each with its exit code and output tail.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        verification: Vec<crate::checks::VerifyOutcome>,
        /// A judge's verdict and findings (issue 30).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verdict: Option<crate::verdict::Verdict>,
    },
    #[serde(rename = "task.failed")]
    TaskFailed {
        #[serde(flatten)]
        end: AttemptEnd,
    },
    #[serde(rename = "task.retrying")]
    TaskRetrying {
        #[serde(flatten)]
        end: AttemptEnd,
        reason: String,
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        #[serde(rename = "notBefore")]
        not_before: DateTime<Utc>,
        /// The retries on the attempt's model ran out on a rate limit or an overload: the next
        /// attempt uses this model, the next of the task's `fallbackModels`.
        #[serde(
            rename = "fallbackModel",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        fallback_model: Option<String>,
    },
    #[serde(rename = "task.needs_attention")]
    TaskNeedsAttention {
        #[serde(flatten)]
        end: AttemptEnd,
        reason: String,
        /// A judge whose failing verdict spent its fix rounds: that verdict.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verdict: Option<crate::verdict::Verdict>,
    },
    #[serde(rename = "task.waiting")]
    TaskWaiting {
        #[serde(flatten)]
        end: AttemptEnd,
        question: String,
        /// The agent CLI's session that asked, for the answer to continue (absent in older
        /// journals, and for a CLI without one: the answer then starts a fresh attempt).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
    },
    #[serde(rename = "task.cancelled")]
    TaskCancelled { reason: Option<String> },
    #[serde(rename = "task.skipped")]
    TaskSkipped { reason: String },
    /// A fan-out task's answer added tasks to the run (`crate::fanout`): they come after it,
    /// and `dependents` (the tasks that depended on it) now depend on all of them too. One
    /// event, so a replay adds exactly these tasks once.
    #[serde(rename = "task.expanded")]
    TaskExpanded {
        tasks: Vec<std::sync::Arc<crate::plan::PlannedTask>>,
        dependents: Vec<String>,
    },
    /// A judge's failing verdict (or failed integration check) added a fix task (issue 30):
    /// `task` starts from what was judged, and the judge (the event's task) waits for it and
    /// runs again. One event, so a replay adds exactly this task once.
    #[serde(rename = "task.fix_added")]
    TaskFixAdded {
        task: std::sync::Arc<crate::plan::PlannedTask>,
        round: u32,
        verdict: crate::verdict::Verdict,
    },
    /// The merge of a task's inputs (the event's task), or of the run's leaves (no task),
    /// conflicted and a resolve task was added (issue 31): `task` starts from the merge with
    /// its conflicts left in the files, and the needing task waits for it. One event, so a
    /// replay adds exactly this task once.
    #[serde(rename = "task.resolve_added")]
    TaskResolveAdded {
        task: std::sync::Arc<crate::plan::PlannedTask>,
        conflict: super::resolve::Conflict,
    },
    /// A selector chose among its candidates (issue 36): the chosen one's commit is its
    /// result. `end` ends a judging selector's attempt; a choice made by crew (`smallest`,
    /// `first`, the one that passed) or by a person (`team.pick`) has none. One event, so the
    /// choice is made once across replay.
    #[serde(rename = "task.candidate_chosen")]
    TaskCandidateChosen {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<AttemptEnd>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<super::workspace::TaskCommit>,
        choice: super::candidates::Choice,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verdict: Option<crate::verdict::Verdict>,
    },
    /// The worker's CLI refused a tool call: a permission denial, a tool the role does not
    /// have, a write its sandbox blocked. Changes no state; says what the task could not do.
    #[serde(rename = "task.warning")]
    TaskWarning {
        attempt: u32,
        tool: String,
        message: String,
    },
    #[serde(rename = "task.steered")]
    TaskSteered {
        message: String,
        delivered: Delivery,
    },
    #[serde(rename = "schedule.added")]
    ScheduleAdded(Box<ScheduleJob>),
    #[serde(rename = "schedule.updated")]
    ScheduleUpdated(Box<ScheduleJob>),
    #[serde(rename = "schedule.removed")]
    ScheduleRemoved {
        id: String,
        #[serde(rename = "cancelledRunIds")]
        cancelled_run_ids: Vec<String>,
    },
    #[serde(rename = "schedule.fired")]
    ScheduleFired {
        id: String,
        at: DateTime<Utc>,
        #[serde(rename = "runId")]
        run_id: String,
        manual: bool,
    },
    #[serde(rename = "schedule.skipped")]
    ScheduleSkipped {
        id: String,
        at: DateTime<Utc>,
        reason: String,
    },
    #[serde(rename = "daemon.started")]
    DaemonStarted { version: String, pid: u32 },
    #[serde(rename = "daemon.recovered")]
    DaemonRecovered {
        #[serde(rename = "requeuedTasks")]
        requeued_tasks: Vec<String>,
        /// Processes of the previous daemon found alive at recovery, every one ended by it
        /// (killed, or gone with the worker box it was in).
        #[serde(rename = "killedWorkers")]
        killed_workers: Vec<u32>,
        #[serde(rename = "activeRuns")]
        active_runs: usize,
    },
    /// A run's details and events were removed (`team.forget`/`team.prune`).
    #[serde(rename = "run.forgotten")]
    RunForgotten {},
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReusedFrom {
    pub run_id: String,
    pub task_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    Live,
    Queued,
}

impl EventBody {
    /// The SPEC §6 type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventBody::RunCreated(_) => "run.created",
            EventBody::RunStarted {} => "run.started",
            EventBody::RunBlocked { .. } => "run.blocked",
            EventBody::RunIntegrated(_) => "run.integrated",
            EventBody::RunCompleted { .. } => "run.completed",
            EventBody::RunFailed { .. } => "run.failed",
            EventBody::RunCancelled { .. } => "run.cancelled",
            EventBody::RunResumed { .. } => "run.resumed",
            EventBody::RunBudgetWarning { .. } => "run.budget_warning",
            EventBody::RunBudgetExceeded { .. } => "run.budget_exceeded",
            EventBody::PlanApprovalRequired { .. } => "plan.approval_required",
            EventBody::PlanApproved { .. } => "plan.approved",
            EventBody::PlanRejected { .. } => "plan.rejected",
            EventBody::TaskQueued { .. } => "task.queued",
            EventBody::TaskStarted { .. } => "task.started",
            EventBody::WorkerSpawned { .. } => "worker.spawned",
            EventBody::WorkerSubmitting { .. } => "worker.submitting",
            EventBody::WorkerSubmitted { .. } => "worker.submitted",
            EventBody::TaskProgress { .. } => "task.progress",
            EventBody::TaskCompleted { .. } => "task.completed",
            EventBody::TaskFailed { .. } => "task.failed",
            EventBody::TaskRetrying { .. } => "task.retrying",
            EventBody::TaskNeedsAttention { .. } => "task.needs_attention",
            EventBody::TaskWaiting { .. } => "task.waiting",
            EventBody::TaskCancelled { .. } => "task.cancelled",
            EventBody::TaskSkipped { .. } => "task.skipped",
            EventBody::TaskExpanded { .. } => "task.expanded",
            EventBody::TaskFixAdded { .. } => "task.fix_added",
            EventBody::TaskResolveAdded { .. } => "task.resolve_added",
            EventBody::TaskCandidateChosen { .. } => "task.candidate_chosen",
            EventBody::TaskWarning { .. } => "task.warning",
            EventBody::TaskSteered { .. } => "task.steered",
            EventBody::ScheduleAdded(_) => "schedule.added",
            EventBody::ScheduleUpdated(_) => "schedule.updated",
            EventBody::ScheduleRemoved { .. } => "schedule.removed",
            EventBody::ScheduleFired { .. } => "schedule.fired",
            EventBody::ScheduleSkipped { .. } => "schedule.skipped",
            EventBody::DaemonStarted { .. } => "daemon.started",
            EventBody::DaemonRecovered { .. } => "daemon.recovered",
            EventBody::RunForgotten {} => "run.forgotten",
        }
    }
}
