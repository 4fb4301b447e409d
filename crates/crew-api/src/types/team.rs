use super::{Diagnostic, Usage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
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

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
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

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FailurePolicy {
    #[default]
    FailFast,
    Continue,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BudgetParams {
    /// Token budget (input + output + cacheWrite); must be > 0.
    pub tokens: i64,
    /// Fraction at which `run.budget_warning` is sent (default 0.8).
    pub warn_at: Option<f64>,
    /// Fraction at which the run is stopped (default 1.0).
    pub abort_at: Option<f64>,
}

/// Which tasks may reuse an earlier result: `true` = read-only roles, `"all"` = every role.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum ReuseResults {
    Bool(bool),
    Mode(String),
}

/// The run's `skills`: names added to every task's skills, `false` for no skills at all,
/// `true` (or absent) for what each task's role, agent, team and step select.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum RunSkillsParam {
    Bool(bool),
    Names(Vec<String>),
}

/// Params of `team.run` and `team.plan`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunParams {
    pub goal: String,
    /// Working directory of the run's workers (absolute).
    pub cwd: String,
    pub team: Option<String>,
    pub workflow: Option<String>,
    pub runtime: Option<String>,
    pub model: Option<String>,
    pub concurrency: Option<i64>,
    pub failure_policy: Option<FailurePolicy>,
    pub budget: Option<BudgetParams>,
    pub require_plan_approval: Option<bool>,
    pub reuse_results: Option<ReuseResults>,
    /// `shared` or `worktree`; default: the team's `workspaceMode`, else config
    /// `default_workspace`.
    pub workspace: Option<super::WorkspaceMode>,
    /// `worktree` runs: `snapshot` (default) or `refuse` when the cwd has uncommitted changes.
    pub dirty: Option<super::DirtyPolicy>,
    /// `worktree` runs: `agent` or `manual` when the merge of results conflicts; default: the
    /// team's `conflicts`, else config `conflicts` (`agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<super::ConflictMode>,
    /// Tasks one fan-out step (`expands: tasks`) may add (1-256); default: config
    /// `max_fan_out_tasks` (16).
    pub max_fan_out_tasks: Option<i64>,
    /// Fix rounds a judge's failing verdicts may start (0-20); default: the step's or team's
    /// `maxFixRounds`, else config `max_fix_rounds` (2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fix_rounds: Option<i64>,
    /// `true`: every task of the run may complete without changing files (what a step's
    /// `allowNoChange: true` says for its tasks), for a run whose work may rightly be none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_no_change: Option<bool>,
    /// Candidates (1-8) for every writing task, fan-out tasks excepted: each runs N attempts at
    /// once in worktrees of its own and keeps the one that proves best (worktree mode only).
    /// A step's or role's own `candidates` wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<i64>,
    /// How `candidates` choose: `smallest`, `first` or `judge` (default: `judge` when the team
    /// has a reviewer or verifier, else `smallest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
    /// Skills for every task: a list adds to each task's selection, `false` gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<RunSkillsParam>,
    /// Run this one agent as a one-step team, without a team file (team `direct-<agent>`,
    /// workflow `direct-agent`, one task whose text is the goal). Not with `team`,
    /// `workflow` or `chain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The role of an `agent` run's task (default: the agent's name; it picks the role's
    /// default skills).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Run these teams (each with its default workflow) one after another as one run: the
    /// first tasks of each team depend on the last tasks of the one before and read its
    /// shared outputs. Cancel, resume and the budget act on the whole chain. Not with
    /// `team`, `workflow` or `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlannedTaskView {
    pub id: String,
    pub step_id: String,
    pub role: String,
    pub agent: String,
    pub depends_on: Vec<String>,
    pub model: Option<String>,
    /// A candidate's own runtime, when its step races runtimes (`candidates: [a, b/model]`);
    /// absent: the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The role may write (its tools include edit, write or bash): what plan approval and
    /// result reuse go by.
    pub writes: bool,
    /// The role is meant to change files (an edit or write tool). A role with only bash (a
    /// reviewer, a verifier) runs commands to check the work and is not.
    #[serde(default)]
    pub edits: bool,
    /// A fan-out step: its answer adds up to this many tasks to the run, which run before
    /// the tasks that depend on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adds_tasks: Option<u32>,
    /// A step with candidates (issue 36): how it chooses among them (`smallest`, `first` or
    /// `judge`); absent: not such a step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
    /// The task's skills, in prompt order (a name not installed is listed with a `?` suffix
    /// in crewctl; see `missingSkills`).
    #[serde(default)]
    pub skills: Vec<String>,
    /// Skills selected for the task that were not installed when it was planned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_skills: Vec<String>,
    /// The step's pre-step script and its arguments, run in the task's workspace before its
    /// agent (its output joins the prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_step: Option<String>,
    /// Paths or globs (relative to the run's cwd) the task may change; absent: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
    /// The verification commands run (each as `sh -c`) in the task's workspace after its
    /// agent finished, the project's configured ones included; absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify_commands: Vec<String>,
    /// `team.plan`: the box the task's agent would run in (`sandbox`); absent: unboxed, or
    /// not a plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<TaskBox>,
    /// `team.plan`: the Slurm job the task's attempts would ask for, its runtime being placed
    /// on Slurm; absent: a local task, or not a plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmJob>,
}

/// A Slurm job's shape: partition, account and QOS from the runtime (else `[slurm]`); CPUs,
/// memory and time limit from the step, else the team role, else the runtime, else `[slurm]`.
/// Absent fields are Slurm's defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SlurmJob {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_per_task: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_minutes: Option<u32>,
    /// `team.plan`: the box the node will try for the task's pre-step script, agent and
    /// checks. Absent: not a plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<NodeBox>,
}

/// The box a Slurm node will try for a task (issue 35): the runtime's settings crewd stages
/// with the job. The node lays the box out on its own paths (its scratch checkout, its
/// `$HOME`, the staging directory as it mounts it) by the same rules as a local attempt's
/// box, and only it knows whether it can box at all, so no paths are shown here.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeBox {
    /// The runtime's `sandbox` (else the daemon's): `auto` (boxed where the node can, else
    /// unboxed with a `task.warning`), `required` (a node that cannot box fails the attempt,
    /// retryably), or `off`.
    pub mode: String,
    /// The agent's network (the runtime's `network`); `false`: none at all, loopback included.
    pub network: bool,
    /// The verify commands' and pre-step script's network (`verify_network`).
    pub verify_network: bool,
    /// The runtime's `sandbox_read` and `sandbox_write`: paths as the nodes see them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
}

/// What a boxed task sees. Paths as they are at plan time; `{run}` stands for the run's id.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskBox {
    /// Writable in the box (`AT (from SOURCE)` for a directory seen in another's place).
    pub writable: Vec<String>,
    /// Seen read-only.
    pub read_only: Vec<String>,
    /// Not there at all (nothing unlisted is there either; these are the ones that matter).
    pub hidden: Vec<String>,
    /// The network is shared; `false`: none at all, loopback included.
    pub network: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlanResult {
    pub team: String,
    pub workflow: String,
    pub concurrency: u32,
    pub runtime: String,
    pub tasks: Vec<PlannedTaskView>,
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunStarted {
    pub run_id: String,
    pub status: RunStatus,
    pub tasks: Vec<PlannedTaskView>,
    /// Notes about the run's settings, e.g. why result reuse is off.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunIdParams {
    pub run_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactInfo {
    /// Relative path under the run's artifact directory, e.g. `results/01_explore.txt`.
    pub name: String,
    /// `prompt`, `result`, `transcript`, `shared`, `stderr`, `patch`, or `system-prompt` (the
    /// agent's system prompt as the workers got it, shared by the tasks of one agent; its
    /// `taskId` is the first of them).
    pub kind: String,
    pub task_id: Option<String>,
    pub bytes: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskProgressView {
    pub current_tool: Option<String>,
    pub turns: u64,
    pub tokens: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    pub id: String,
    pub step_id: String,
    pub role: String,
    pub agent: String,
    pub depends_on: Vec<String>,
    pub status: TaskStatus,
    pub attempts: u32,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub duration_ms: Option<u64>,
    pub usage: Usage,
    pub model: Option<String>,
    pub error: Option<String>,
    pub question: Option<String>,
    pub reused_from: Option<ReusedFromView>,
    pub progress: TaskProgressView,
    pub artifacts: Vec<ArtifactInfo>,
    /// Paths or globs the task may change; absent: any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
    /// The verification commands run after the task's agent; absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify_commands: Vec<String>,
    /// A judging task's last verdict and its findings; absent: none yet, or not a judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<VerdictView>,
    /// A fix task crew added: the judge whose findings it fixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixes: Option<String>,
    /// Candidates (issue 36): this task is one candidate of a step, or the step's selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<CandidatesView>,
}

/// A task's part in candidates: a candidate (`of`, `index`, its `runtime` when not the run's,
/// the checks it failed) or a selector (`select`, its `members`, the `choice`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CandidatesView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// A completed candidate's failing checks (empty: it passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<String>,
    /// `smallest`, `first` or `judge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<ChoiceView>,
    /// A selector's own usage (a judge's); the task's `usage` is the step's: this plus every
    /// candidate's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_usage: Option<Usage>,
    /// A candidate's commit: files changed, lines added and removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diffstat: Option<CandidateDiffstat>,
}

/// The size of a candidate's change.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CandidateDiffstat {
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
}

/// The candidate a selector chose, by whom (`smallest`, `first`, `judge`, `only`, `fix`,
/// `person`) and why.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChoiceView {
    pub index: u32,
    pub candidate: String,
    pub by: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PickParams {
    pub run_id: String,
    /// The step's task (the selector).
    pub task_id: String,
    /// The candidate to take instead (1-based).
    pub candidate: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PickResult {
    /// The chosen candidate's task id.
    pub chosen: String,
    /// Dependents that had started or ended and run again from the new choice.
    pub requeued_task_ids: Vec<String>,
}

/// A judge's verdict (`pass`, `fail` or `changes_requested`) and findings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VerdictView {
    pub verdict: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<FindingView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FindingView {
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReusedFromView {
    pub run_id: String,
    pub task_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BudgetView {
    pub tokens: u64,
    pub warn_at: f64,
    pub abort_at: f64,
    pub used: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub id: String,
    pub status: RunStatus,
    pub goal: String,
    pub cwd: String,
    pub team: String,
    pub workflow: String,
    pub runtime: String,
    pub model: Option<String>,
    pub concurrency: u32,
    pub failure_policy: FailurePolicy,
    pub budget: Option<BudgetView>,
    /// `not_required`, `required`, `pending`, `approved` or `rejected`.
    pub approval: String,
    pub reuse_results: String,
    pub schedule_id: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub updated_at: String,
    pub duration_ms: Option<u64>,
    pub usage: Usage,
    pub reason: Option<String>,
    /// The run's verdict: the worst last verdict of its judges (`pass`, `changes_requested`,
    /// `fail`); absent: no judge gave one. For a team with no role that can edit (the `review`
    /// team) it is the run's product.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The `runSeq` of the last event this view includes: a subscription to the run replays
    /// its events from the first, and those up to this one are already in the view.
    #[serde(default)]
    pub run_seq: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    pub run: RunView,
    pub tasks: Vec<TaskView>,
    /// `worktree` runs: base, branches, per-task commits, the integration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<super::RunWorkspaceView>,
    /// Tasks that fan-out steps (`expands: tasks`) added to the run, as `team.plan` shows
    /// planned tasks. With `requirePlanApproval` they are the plan `team.approve` lets start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_tasks: Vec<AddedTaskView>,
}

/// A task a fan-out step added.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AddedTaskView {
    pub id: String,
    /// The fan-out task whose answer added it.
    pub added_by: String,
    pub role: String,
    pub agent: String,
    pub title: Option<String>,
    pub depends_on: Vec<String>,
    /// Paths or globs (relative to the repository's top) the task may change; empty: any.
    pub scope: Vec<String>,
    /// The role may write (its tools include edit, write or bash).
    pub writes: bool,
    /// The run waits for `team.approve` before this task may start.
    pub awaiting_approval: bool,
    /// The verification commands run after this task's agent; absent: none (an added task
    /// runs none of its own: the workflow's later steps, which wait for it, verify).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify_commands: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListParams {
    pub status: Option<RunStatus>,
    /// Default 50, at most 1000.
    pub limit: Option<i64>,
    /// Cursor: list runs older than this run id (from `next`).
    pub before: Option<String>,
    /// Only runs of this team (exact name).
    pub team: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskCountsView {
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

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunSummaryView {
    pub id: String,
    pub status: RunStatus,
    pub team: String,
    pub workflow: String,
    pub goal: String,
    pub cwd: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub usage: Usage,
    pub tasks: TaskCountsView,
    pub schedule_id: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ListResult {
    pub runs: Vec<RunSummaryView>,
    pub next: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelParams {
    pub run_id: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CancelResult {
    pub status: RunStatus,
    /// Every task the cancel ended: running, waiting for an answer, or queued.
    pub cancelled_task_ids: Vec<String>,
    /// The tasks among them whose worker process was running and is being stopped (SIGTERM,
    /// then SIGKILL after the grace period).
    #[serde(default)]
    pub stopped_task_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResumeResult {
    pub status: RunStatus,
    pub requeued_task_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryParams {
    pub run_id: String,
    pub task_ids: Vec<String>,
    /// Also run again every task downstream of the named ones that already finished
    /// (completed, failed, cancelled, needs attention), since its inputs change. Skipped
    /// dependents come back in any case. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_dependents: Option<bool>,
    /// Required for a run imported with `team.import`: its system prompts, tools, runtime and
    /// cwd came from someone else's bundle. Without it the call fails with 1002 and the error's
    /// `data` shows what would run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_imported: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeParams {
    pub run_id: String,
    /// Required for a run imported with `team.import` (see `team.retry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_imported: Option<bool>,
    /// The run's token budget from now on (> 0; a run without one gets one, with the default
    /// fractions). A run its budget stopped is resumed only with one its usage does not spend:
    /// without it the call fails with 1002, saying how much it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RetryResult {
    pub requeued_task_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApproveParams {
    pub run_id: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunStatusResult {
    pub status: RunStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskMessageParams {
    pub run_id: String,
    pub task_id: String,
    pub message: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Delivered {
    Live,
    Queued,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SteerResult {
    pub delivered: Delivered,
    /// Set when the task is running but its runtime cannot take a message mid-run: the
    /// message waits for the task's next attempt, which a task that succeeds never has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RespondResult {
    pub status: TaskStatus,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitParams {
    pub run_id: String,
    /// Give up after this long (default: wait until the run stops; at most 1 hour).
    #[schemars(range(min = 0, max = 3_600_000))]
    pub timeout_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WaitResult {
    pub status: RunStatus,
    /// True when the run stopped (finished or blocked); false on timeout.
    pub finished: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArtifactParams {
    pub run_id: String,
    pub name: String,
    pub offset: Option<i64>,
    /// Default 1 MiB, at most 8 MiB.
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactsResult {
    pub artifacts: Vec<ArtifactInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactResult {
    pub content: String,
    /// Total size of the artifact.
    pub bytes: u64,
    pub truncated: bool,
    /// Bytes of the file this page holds: the next page's `offset` is this page's plus this.
    /// (`content` is text: a byte that is not UTF-8 reads as U+FFFD, so its length may
    /// differ; a character the page's end would cut is left for the next page.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SummaryResult {
    pub markdown: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PruneParams {
    /// Keep this many newest finished runs (default 20).
    pub keep: Option<i64>,
    pub older_than_ms: Option<i64>,
    /// Also delete worktrees that hold uncommitted work (kept otherwise).
    pub force: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PruneResult {
    pub removed: Vec<String>,
    pub kept: u64,
    /// What was kept in the repositories of the removed runs and why (as `team.forget`'s).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExportResult {
    pub bundle: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportParams {
    /// The bundle itself (what `team.export` answered). It must fit in `max_request_bytes`;
    /// give `path` instead for a bigger one. Exactly one of `bundle` and `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<serde_json::Value>,
    /// Absolute path of a bundle file the daemon reads itself (client and daemon are the same
    /// user on the same machine): any bundle `team.export` makes imports this way whatever
    /// `max_request_bytes` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImportResult {
    pub run_id: String,
}
