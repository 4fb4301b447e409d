//! Run and task records and their statuses.

pub use super::artifact::{ArtifactKind, ArtifactRef, Sha256};
pub use super::artifact_list::ArtifactList;
use crate::plan::PlannedTask;
use crate::usage::Usage;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    Blocked,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    /// Finished runs take no more work unless resumed. `blocked` is not finished: it waits for
    /// someone (approval, an answer, attention), and it is "active" for forget/prune.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Blocked => "blocked",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Queued,
    Running,
    Waiting,
    Completed,
    Failed,
    Cancelled,
    Skipped,
    NeedsAttention,
}

impl TaskStatus {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed
                | TaskStatus::Failed
                | TaskStatus::Cancelled
                | TaskStatus::Skipped
                | TaskStatus::NeedsAttention
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::Waiting => "waiting",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Skipped => "skipped",
            TaskStatus::NeedsAttention => "needs_attention",
        }
    }
}

/// The legal task status moves. `apply` never checks this (it replays what was decided); the
/// deciders only produce these, and the property tests hold them to it.
pub fn task_transition_allowed(from: TaskStatus, to: TaskStatus) -> bool {
    use TaskStatus::*;
    matches!(
        (from, to),
        (Queued, Running | Cancelled | Skipped)
            // A step's selector whose choice needs no judge completes without running
            // (`task.candidate_chosen`, issue 36).
            | (Queued, Completed)
            | (
                Running,
                Completed | Failed | Cancelled | Queued | Waiting | NeedsAttention
            )
            | (Waiting, Queued | Cancelled)
            | (Completed, Queued)
            | (Failed, Queued)
            | (Cancelled, Queued)
            | (Skipped, Queued)
            | (NeedsAttention, Queued)
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FailurePolicy {
    #[default]
    FailFast,
    Continue,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    pub tokens: u64,
    pub warn_at: f64,
    pub abort_at: f64,
}

impl Budget {
    pub const DEFAULT_WARN_AT: f64 = 0.8;
    pub const DEFAULT_ABORT_AT: f64 = 1.0;

    /// `tokens` with the default fractions.
    pub fn of(tokens: u64) -> Budget {
        Budget {
            tokens,
            warn_at: Self::DEFAULT_WARN_AT,
            abort_at: Self::DEFAULT_ABORT_AT,
        }
    }

    /// Whether `used` tokens reach the point where the run is stopped.
    pub fn spent(&self, used: u64) -> bool {
        used as f64 >= self.abort_at * self.tokens as f64
    }

    /// The least budget that `used` tokens do not spend.
    pub fn least_above(&self, used: u64) -> u64 {
        let guess = (used as f64 / self.abort_at).floor();
        if !(guess.is_finite() && guess < u64::MAX as f64) {
            return u64::MAX;
        }
        // The division rounds: from just below it, step to the first budget `spent` (the
        // same arithmetic) says is not spent.
        let mut need = (guess as u64).saturating_sub(2);
        for _ in 0..8 {
            if !(Budget {
                tokens: need,
                ..*self
            })
            .spent(used)
            {
                return need;
            }
            need = need.saturating_add(1);
        }
        need
    }
}

/// Which tasks may take a cached result (SPEC §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Reuse {
    #[default]
    Off,
    ReadOnly,
    All,
}

/// Everything a run was created with, frozen into `run.created` so a replay never depends on
/// resource files or config that may have changed since.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSpec {
    pub goal: String,
    pub cwd: String,
    pub team: String,
    pub workflow: String,
    pub runtime: String,
    pub model: Option<String>,
    pub concurrency: u32,
    pub failure_policy: FailurePolicy,
    pub budget: Option<Budget>,
    pub require_plan_approval: bool,
    pub reuse: Reuse,
    pub max_attempts: u32,
    pub schedule_id: Option<String>,
    /// Made by `team.import` from someone else's bundle: its prompts, tools, runtime and cwd
    /// are not this user's, so resuming or retrying it needs an explicit confirmation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub imported: bool,
    /// `Some` in `worktree` mode: the repository and base commit the tasks start from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<super::workspace::WorkspaceSpec>,
    /// The project's per-task checks (`task_verify_commands`, issue 30): run after every task
    /// that can edit and has no verification of its own, fan-out and fix tasks included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_verify_commands: Vec<String>,
    /// Each cluster-placed runtime the run's tasks use, by name: its job resources over the
    /// cluster's (`[runtimes.NAME.slurm]` over `[slurm]`), frozen when the run is created so
    /// that every attempt, after a replay or a `kill -9` too, asks for the same job
    /// (`crate::job_shape`; a task's own step and role resources go over it).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub job_shapes: std::collections::BTreeMap<String, crate::job_shape::JobShape>,
    /// Shared with `TaskState::plan` of the run's tasks: one copy per task, not two.
    pub tasks: Vec<Arc<PlannedTask>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    #[default]
    NotRequired,
    Required,
    Pending,
    Approved,
    Rejected,
}

/// Live progress of a running task (from `task.progress`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub current_tool: Option<String>,
    pub turns: u64,
    pub tokens: u64,
}

/// Serialized by hand (task_serde.rs) as one flat object, `Rare`'s fields included.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    pub plan: Arc<PlannedTask>,
    pub status: TaskStatus,
    /// Attempts started so far (the running attempt included).
    pub attempts: u32,
    /// Attempts counted against `max_attempts` since the last manual resume/retry.
    pub attempts_in_window: u32,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Usage of attempts that ended.
    pub prior_usage: Usage,
    pub error: Option<String>,
    pub artifacts: ArtifactList,
    pub model: Option<String>,
    /// What most tasks never set, boxed: a finished task stays in memory as long as its run
    /// is resident. `None` when every field is empty.
    pub(super) rare: Option<Box<Rare>>,
    pub progress: Progress,
}

/// The fields of `TaskState` that are usually empty.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rare {
    /// Usage of the running attempt so far (zero once it ended: `TaskState::take_attempt_usage`).
    pub attempt_usage: Usage,
    /// The running attempt's worker process (`worker.spawned`), cleared when it ends.
    pub pid: Option<u32>,
    /// Process start time (clock ticks since boot, from /proc) so a reused pid is never killed.
    pub pid_start: Option<u64>,
    /// Not to be started before this instant (retry backoff).
    pub not_before: Option<DateTime<Utc>>,
    pub pending_steers: Vec<String>,
    pub question: Option<String>,
    pub answers: Vec<String>,
    /// The agent CLI's session of the attempt that asked (`question`): the answer continues
    /// it (pi's session file, claude's or codex's session id). Set by `task.waiting`, cleared
    /// when the next attempt ends.
    pub session: Option<String>,
    /// `(runId, taskId)` whose result this task reused.
    pub reused_from: Option<(String, String)>,
    /// The result commit of a completed task in `worktree` mode.
    pub commit: Option<super::workspace::TaskCommit>,
    /// Why the last attempt's work was refused (its verification failed), for the next
    /// attempt's prompt. Cleared when the task completes or is requeued by hand.
    pub feedback: Option<String>,
    /// Verification failures retried since the last manual resume/retry.
    pub verify_retries: u32,
    /// How far down its plan's `fallback_models` the task has moved: 0 = its own model,
    /// n = `fallback_models[n - 1]` (see `RunState::attempt_model`).
    pub fallback: u32,
    /// A fan-out task whose block was refused: the problems, fed back on its repair attempt.
    /// Set once per window: a second refused block makes the task need attention.
    pub fan_out_repair: Option<String>,
    /// A judge's last verdict (issue 30): kept when it runs again, replaced by its next one.
    pub verdict: Option<crate::verdict::Verdict>,
    /// A judge whose answer held no readable verdict: the problem, fed back on its repair
    /// attempt. Set once per window, like `fan_out_repair`.
    pub verdict_repair: Option<String>,
    /// The running attempt's job on a cluster (`worker.submitting`, `worker.submitted`):
    /// what a restarted daemon follows again. Cleared when the attempt ends.
    pub job: Option<RemoteJob>,
    /// A candidate (issue 36) that completed: the checks it failed (empty: it passed).
    pub failed_checks: Vec<String>,
    /// A selector (issue 36): the candidate chosen and why.
    pub choice: Option<super::candidates::Choice>,
}

/// A remote attempt's job, as journaled: submitted (`id`) or about to be (`None`: a daemon
/// that died in between looks it up by `name`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteJob {
    pub attempt: u32,
    /// The name crew gave the job, unique per attempt.
    pub name: String,
    /// The attempt's staging directory.
    pub staging: String,
    /// The cluster's id for the job, once submitted.
    pub id: Option<u64>,
}

impl Rare {
    fn is_empty(&self) -> bool {
        self.attempt_usage == Usage::default()
            && self.pid.is_none()
            && self.pid_start.is_none()
            && self.not_before.is_none()
            && self.pending_steers.is_empty()
            && self.question.is_none()
            && self.answers.is_empty()
            && self.session.is_none()
            && self.reused_from.is_none()
            && self.commit.is_none()
            && self.feedback.is_none()
            && self.verify_retries == 0
            && self.fallback == 0
            && self.fan_out_repair.is_none()
            && self.verdict.is_none()
            && self.verdict_repair.is_none()
            && self.job.is_none()
            && self.failed_checks.is_empty()
            && self.choice.is_none()
    }
}

static NO_RARE: Rare = Rare {
    attempt_usage: Usage {
        input: 0,
        output: 0,
        cache_read: 0,
        cache_write: 0,
        cost: 0.0,
        turns: 0,
    },
    pid: None,
    pid_start: None,
    not_before: None,
    pending_steers: Vec::new(),
    question: None,
    answers: Vec::new(),
    session: None,
    reused_from: None,
    commit: None,
    feedback: None,
    verify_retries: 0,
    fallback: 0,
    fan_out_repair: None,
    verdict: None,
    verdict_repair: None,
    job: None,
    failed_checks: Vec::new(),
    choice: None,
};

impl TaskState {
    pub fn new(plan: Arc<PlannedTask>) -> Self {
        TaskState {
            plan,
            status: TaskStatus::Queued,
            attempts: 0,
            attempts_in_window: 0,
            started_at: None,
            finished_at: None,
            prior_usage: Usage::default(),
            error: None,
            artifacts: ArtifactList::new(),
            model: None,
            rare: None,
            progress: Progress::default(),
        }
    }

    /// The running attempt's worker process, as `worker.spawned` journaled it.
    pub fn pid(&self) -> Option<u32> {
        self.rare().pid
    }
    pub fn pid_start(&self) -> Option<u64> {
        self.rare().pid_start
    }
    /// Usage of the running attempt so far.
    pub fn attempt_usage(&self) -> Usage {
        self.rare().attempt_usage
    }
    pub fn set_attempt_usage(&mut self, usage: Usage) {
        if usage == Usage::default() {
            self.clear_rare(|r| r.attempt_usage = usage);
        } else {
            self.edit_rare(|r| r.attempt_usage = usage);
        }
    }
    /// The running attempt's usage, now zero: what an ended attempt spent.
    pub fn take_attempt_usage(&mut self) -> Usage {
        let spent = self.attempt_usage();
        self.set_attempt_usage(Usage::default());
        spent
    }

    /// The usually empty fields (all empty when none is set).
    pub fn rare(&self) -> &Rare {
        self.rare.as_deref().unwrap_or(&NO_RARE)
    }
    pub fn not_before(&self) -> Option<DateTime<Utc>> {
        self.rare().not_before
    }
    pub fn pending_steers(&self) -> &[String] {
        &self.rare().pending_steers
    }
    pub fn question(&self) -> Option<&str> {
        self.rare().question.as_deref()
    }
    pub fn answers(&self) -> &[String] {
        &self.rare().answers
    }
    /// The CLI session the next attempt resumes with the latest answer, if any.
    pub fn session(&self) -> Option<&str> {
        self.rare().session.as_deref()
    }
    pub fn reused_from(&self) -> Option<&(String, String)> {
        self.rare().reused_from.as_ref()
    }
    pub fn commit(&self) -> Option<&super::workspace::TaskCommit> {
        self.rare().commit.as_ref()
    }
    pub fn feedback(&self) -> Option<&str> {
        self.rare().feedback.as_deref()
    }
    /// How many fallback models the task has moved on (0: none).
    pub fn fallback(&self) -> u32 {
        self.rare().fallback
    }
    pub fn fan_out_repair(&self) -> Option<&str> {
        self.rare().fan_out_repair.as_deref()
    }
    /// A judge's last verdict.
    pub fn verdict(&self) -> Option<&crate::verdict::Verdict> {
        self.rare().verdict.as_ref()
    }
    pub fn verdict_repair(&self) -> Option<&str> {
        self.rare().verdict_repair.as_deref()
    }
    /// The running attempt's job on a cluster, as journaled.
    pub fn job(&self) -> Option<&RemoteJob> {
        self.rare()
            .job
            .as_ref()
            .filter(|j| j.attempt == self.attempts)
    }
    /// A completed candidate's failing checks (issue 36).
    pub fn failed_checks(&self) -> &[String] {
        &self.rare().failed_checks
    }
    /// A selector's choice (issue 36).
    pub fn choice(&self) -> Option<&super::candidates::Choice> {
        self.rare().choice.as_ref()
    }

    /// Change the usually empty fields; their box is made when needed and dropped once they
    /// are all empty again.
    pub fn edit_rare(&mut self, f: impl FnOnce(&mut Rare)) {
        let rare = self.rare.get_or_insert_with(Box::default);
        f(rare);
        if rare.is_empty() {
            self.rare = None;
        }
    }

    /// Clear some of the usually empty fields: nothing to do (and nothing allocated) when none
    /// is set.
    pub fn clear_rare(&mut self, f: impl FnOnce(&mut Rare)) {
        if self.rare.is_some() {
            self.edit_rare(f);
        }
    }

    pub(super) fn set_rare(&mut self, rare: Rare) {
        self.rare = (!rare.is_empty()).then(|| Box::new(rare));
    }

    pub fn id(&self) -> &str {
        &self.plan.id
    }

    /// Usage over every attempt, the running one included.
    pub fn usage(&self) -> Usage {
        let mut u = self.prior_usage;
        u.add(&self.rare().attempt_usage);
        u
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    pub id: String,
    pub spec: RunSpec,
    pub status: RunStatus,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub tasks: Vec<TaskState>,
    pub run_seq: u64,
    pub approval: Approval,
    pub budget_warned: bool,
    /// Why the run failed / was cancelled / is blocked.
    pub reason: Option<String>,
    /// Set when the budget is exceeded: no new task may start and no retry is scheduled.
    pub halted: bool,
    /// `worktree` mode: the leaf tasks' results merged, once the daemon did it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integration: Option<super::workspace::Integration>,
    #[serde(skip)]
    pub(crate) index: TaskIndex,
    #[serde(skip)]
    pub(crate) backoff: Backoff,
}

/// The run's queued tasks that wait out a retry backoff, by position, with the instant each may
/// start. The daemon asks for the next such instant on every turn of its loop: reading every
/// task of every active run there made dispatching a run of n tasks cost O(n²). Built from the
/// tasks on the first read (a run just created or read from a snapshot), kept up to date by
/// `apply_run_event` after that.
#[derive(Clone, Default)]
pub(crate) struct Backoff(std::sync::OnceLock<BTreeMap<usize, DateTime<Utc>>>);

/// When a task waiting out a backoff may start; `None` for any other task.
fn backoff_of(t: &TaskState) -> Option<DateTime<Utc>> {
    if t.status == TaskStatus::Queued {
        t.not_before()
    } else {
        None
    }
}

/// Derived data, like `TaskIndex`.
impl PartialEq for Backoff {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Backoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Backoff")
    }
}

/// Runs up to this many tasks find a task by scanning: cheaper than building an index.
const SCAN_TASKS: usize = 16;

/// A run's task positions ordered by task id, built on the first lookup (a run's task list
/// changes only by `task.expanded` and a fix loop's task, which drop the index). Every event
/// and every dependency check looks a task up by id: with a scan, a run of n tasks cost O(n²)
/// to dispatch. Also whether any task is a candidates selector (issue 36): the settle phase,
/// which runs after every change, looked for one among all queued tasks, O(n) per event.
#[derive(Clone, Default)]
pub(crate) struct TaskIndex(std::sync::OnceLock<Box<[u32]>>, std::sync::OnceLock<bool>);

impl TaskIndex {
    fn get(&self, tasks: &[TaskState]) -> &[u32] {
        self.0.get_or_init(|| {
            let mut order: Vec<u32> = (0..tasks.len() as u32).collect();
            order.sort_by(|&a, &b| task_id_at(tasks, a).cmp(task_id_at(tasks, b)));
            order.into_boxed_slice()
        })
    }

    fn has_selector(&self, tasks: &[TaskState]) -> bool {
        *self.1.get_or_init(|| {
            tasks
                .iter()
                .any(|t| super::candidates::selector(&t.plan).is_some())
        })
    }
}

fn task_id_at(tasks: &[TaskState], i: u32) -> &str {
    tasks.get(i as usize).map_or("", |t| t.plan.id.as_str())
}

/// Derived data: two runs are equal whatever their indexes hold.
impl PartialEq for TaskIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for TaskIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskIndex")
    }
}

impl RunState {
    /// The model `t`'s next attempt runs on: the run's model, else the task's, until the task
    /// moved on to one of its fallback models.
    pub fn attempt_model(&self, t: &TaskState) -> Option<String> {
        match t.fallback().checked_sub(1) {
            // A task on a runtime of its own (a contender's, or the fix of one) runs the model
            // named with it, else that runtime's default: the run's model is for the run's.
            None if super::candidates::runtime_of(&t.plan).is_some() => t.plan.model.clone(),
            None => self.spec.model.clone().or_else(|| t.plan.model.clone()),
            Some(i) => t.plan.fallback_models.get(i as usize).cloned(),
        }
    }

    /// The fallback models after the one `t` runs on now, in order (what an agent CLI with a
    /// fallback of its own may switch to within an attempt).
    pub fn later_fallbacks<'a>(&self, t: &'a TaskState) -> &'a [String] {
        let current = self.attempt_model(t);
        let rest = t
            .plan
            .fallback_models
            .get(t.fallback() as usize..)
            .unwrap_or_default();
        match rest.split_first() {
            Some((first, tail)) if Some(first) == current.as_ref() => tail,
            _ => rest,
        }
    }

    /// The fallback model `t` moves on to when its retries on the current model ran out: the
    /// next one of its plan's list that differs from the current model.
    pub fn next_fallback<'a>(&self, t: &'a TaskState) -> Option<&'a str> {
        let current = self.attempt_model(t);
        t.plan
            .fallback_models
            .get(t.fallback() as usize..)?
            .iter()
            .find(|m| Some(*m) != current.as_ref())
            .map(String::as_str)
    }

    /// The earliest instant strictly after `after` at which one of its backed-off tasks may
    /// start.
    pub(crate) fn next_backoff_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.backoff
            .0
            .get_or_init(|| {
                self.tasks
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| Some((i, backoff_of(t)?)))
                    .collect()
            })
            .values()
            .copied()
            .filter(|at| *at > after)
            .min()
    }

    /// Brings the backoff entries up to date after an event about `task` (or about the run).
    pub(crate) fn sync_backoff(&mut self, task: Option<usize>) {
        let tasks = &self.tasks;
        // Not built yet: the first read builds it from the tasks as they are then.
        let Some(map) = self.backoff.0.get_mut() else {
            return;
        };
        // Other tasks the event changed too (a cancel, a resume) lose their entries here.
        map.retain(|i, at| tasks.get(*i).and_then(backoff_of) == Some(*at));
        if let Some(i) = task {
            match tasks.get(i).and_then(backoff_of) {
                Some(at) => map.insert(i, at),
                None => map.remove(&i),
            };
        }
    }

    /// Whether one of the run's tasks is a candidates selector (derived from the plans, which
    /// change only where the index is dropped).
    pub(crate) fn has_selector(&self) -> bool {
        self.index.has_selector(&self.tasks)
    }

    pub fn task(&self, id: &str) -> Option<&TaskState> {
        self.task_index(id).and_then(|i| self.tasks.get(i))
    }
    pub fn task_index(&self, id: &str) -> Option<usize> {
        if self.tasks.len() <= SCAN_TASKS {
            return self.tasks.iter().position(|t| t.plan.id == id);
        }
        let order = self.index.get(&self.tasks);
        let at = order
            .binary_search_by(|&i| task_id_at(&self.tasks, i).cmp(id))
            .ok()?;
        order.get(at).map(|&i| i as usize)
    }
    pub fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for t in &self.tasks {
            u.add(&t.usage());
        }
        u
    }
    pub fn running_count(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Running)
            .count()
    }
    pub fn task_counts(&self) -> TaskCounts {
        let mut counts = TaskCounts::default();
        for t in &self.tasks {
            counts.bump(t.status);
        }
        counts
    }
    pub fn summary(&self) -> RunSummary {
        RunSummary {
            id: self.id.clone(),
            status: self.status,
            team: self.spec.team.clone(),
            workflow: self.spec.workflow.clone(),
            goal: crate::prompt::cut_head_tail(&self.spec.goal, 200),
            cwd: self.spec.cwd.clone(),
            created_at: self.created_at,
            finished_at: self.finished_at,
            usage: self.usage(),
            tasks: self.task_counts(),
            schedule_id: self.spec.schedule_id.clone(),
            reason: self.reason.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskCounts {
    pub total: u32,
    pub queued: u32,
    pub running: u32,
    pub waiting: u32,
    pub completed: u32,
    pub failed: u32,
    pub cancelled: u32,
    pub skipped: u32,
    pub needs_attention: u32,
}

impl TaskCounts {
    fn bump(&mut self, s: TaskStatus) {
        self.total += 1;
        *self.count_mut(s) += 1;
    }

    /// One task went from `from` to `to`.
    pub(crate) fn moved(&mut self, from: TaskStatus, to: TaskStatus) {
        if from != to {
            let c = self.count_mut(from);
            *c = c.saturating_sub(1);
            *self.count_mut(to) += 1;
        }
    }

    fn count_mut(&mut self, s: TaskStatus) -> &mut u32 {
        match s {
            TaskStatus::Queued => &mut self.queued,
            TaskStatus::Running => &mut self.running,
            TaskStatus::Waiting => &mut self.waiting,
            TaskStatus::Completed => &mut self.completed,
            TaskStatus::Failed => &mut self.failed,
            TaskStatus::Cancelled => &mut self.cancelled,
            TaskStatus::Skipped => &mut self.skipped,
            TaskStatus::NeedsAttention => &mut self.needs_attention,
        }
    }
}

/// What stays in memory for every run, resident or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    pub id: String,
    pub status: RunStatus,
    pub team: String,
    pub workflow: String,
    pub goal: String,
    pub cwd: String,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub usage: Usage,
    pub tasks: TaskCounts,
    pub schedule_id: Option<String>,
    pub reason: Option<String>,
}
