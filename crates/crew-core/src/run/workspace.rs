//! Workspaces as the core sees them: commit ids as strings. The daemon does the git; the core
//! only records which commit a run started from, which commit each task produced, and which
//! branch holds the run's integrated result. Nothing here needs the daemon's filesystem: a task
//! is "start commit in, result commit out", which a later runtime can ship as git bundles.

use serde::{Deserialize, Serialize};

/// How a run's tasks see the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceMode {
    /// Every task works in the run's cwd (no isolation, no commits).
    #[default]
    Shared,
    /// Every task works in its own git worktree; results are commits.
    Worktree,
}

impl WorkspaceMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceMode::Shared => "shared",
            WorkspaceMode::Worktree => "worktree",
        }
    }
}

/// A `worktree` run's fixed inputs, frozen into `run.created`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceSpec {
    /// The top of the user's work tree.
    pub repo: String,
    /// The run's cwd relative to `repo` (`""` at the top): each task works there in its tree.
    #[serde(default)]
    pub subdir: String,
    /// The commit every task without dependencies starts from.
    pub base: String,
    /// The user's HEAD when the run was made (`None` in a repository without commits).
    #[serde(default)]
    pub head: Option<String>,
    /// The base is a commit of the user's uncommitted changes on top of `head`.
    #[serde(default)]
    pub dirty: bool,
    /// The user's branch at the time (`None` when detached), for `team.apply`'s checks.
    #[serde(default)]
    pub branch: Option<String>,
    /// What a merge of results that conflicts does (issue 31). A journal from before the mode
    /// existed replays as it ran: the manual way.
    #[serde(default, skip_serializing_if = "ConflictMode::is_manual")]
    pub conflicts: ConflictMode,
    /// Who resolves a conflict in `agent` mode, frozen at plan time (the team's `resolver`
    /// role, else the builtin `resolver` agent), so adding the task reads no resource file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver: Option<std::sync::Arc<crate::fanout::RoleTemplate>>,
}

/// `conflicts: agent | manual`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictMode {
    /// A resolve task resolves it; when it cannot, the manual way.
    Agent,
    /// The user resolves it (`workspace/conflict.rs` in crewd gives the commands).
    #[default]
    Manual,
}

impl ConflictMode {
    pub fn is_manual(&self) -> bool {
        *self == ConflictMode::Manual
    }
}

/// What a completed task changed, as a commit on its branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskCommit {
    pub branch: String,
    /// The commit the attempt started from (base, or the merge of its dependencies' results).
    pub start: String,
    /// The result: `start` itself when the task changed nothing.
    pub commit: String,
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
}

impl TaskCommit {
    pub fn changed(&self) -> bool {
        self.commit != self.start
    }
}

/// The run's integrated result: the leaf tasks' commits merged on one branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Integration {
    pub branch: String,
    pub commit: String,
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
}

/// The branch of one task's work. Not `crew/<runId>/<taskId>`: git cannot hold the run's
/// branch `crew/<runId>` and branches below it at once (a ref is a file or a directory).
pub fn task_branch(run_id: &str, task_id: &str) -> String {
    format!("crew/tasks/{run_id}/{task_id}")
}

/// The branch of the run's integrated result.
pub fn run_branch(run_id: &str) -> String {
    format!("crew/{run_id}")
}

/// The ref holding a run's base commit from `team.run` on (crew's reserved name).
pub fn base_ref(run_id: &str) -> String {
    format!("refs/crew/{run_id}/{}", crate::ids::reserved::BASE_REF)
}

/// Where an earlier attempt's tree is kept (not a branch: nothing to check out by accident).
pub fn attempt_ref(run_id: &str, task_id: &str, attempt: u32) -> String {
    format!("refs/crew/{run_id}/{task_id}/attempt-{attempt}")
}

/// The result commit crew recorded for a task's last attempt that made one: its branch's tip
/// is crew's then, even when the agent made the commit (agents commit as the user).
pub fn result_ref(run_id: &str, task_id: &str) -> String {
    format!("refs/crew/{run_id}/{task_id}/result")
}

/// What a task's branch held before `attempt` moved it back to the start (crew's earlier
/// result): kept, never dropped, beside an orphaned attempt's `attempt_ref`.
pub fn before_attempt_ref(run_id: &str, task_id: &str, attempt: u32) -> String {
    format!("refs/crew/{run_id}/{task_id}/before-attempt-{attempt}")
}

/// The start commit recorded for a task (so a retry starts where the first attempt did).
pub fn start_ref(run_id: &str, task_id: &str) -> String {
    format!("refs/crew/{run_id}/{task_id}/start")
}

/// Where crew left a task's branch when the merge of its inputs conflicted (what merged so
/// far): a branch tip other than this one is the user's, and is never moved by crew.
pub fn conflict_ref(run_id: &str, task_id: &str) -> String {
    format!("refs/crew/{run_id}/{task_id}/conflict")
}

/// Where crew left the run's branch when the merge of its leaves conflicted (as
/// [`conflict_ref`] for a task; crew's reserved name, beside `_base`).
pub fn integration_conflict_ref(run_id: &str) -> String {
    format!(
        "refs/crew/{run_id}/{}",
        crate::ids::reserved::INTEGRATION_CONFLICT_REF
    )
}

/// The leaf tasks of a run (no other task depends on them), in plan order: what integration
/// merges.
pub fn leaf_tasks(run: &super::RunState) -> Vec<&super::TaskState> {
    run.tasks
        .iter()
        .filter(|t| {
            !run.tasks
                .iter()
                .any(|o| o.plan.depends_on.iter().any(|d| d == &t.plan.id))
        })
        .collect()
}
