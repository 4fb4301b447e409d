//! Workspaces on the wire: modes, per-task commits, the run's integrated branch, `team.diff`
//! and `team.apply`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `team.run`'s `workspace`: where tasks work.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceMode {
    /// Every task in the run's cwd.
    Shared,
    /// Every task in its own git worktree; results are commits.
    Worktree,
}

/// `team.run`'s `dirty`: what a `worktree` run does with uncommitted changes in the cwd.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum DirtyPolicy {
    /// The base is a commit of the uncommitted and untracked (not ignored) changes.
    #[default]
    Snapshot,
    /// Refuse to start.
    Refuse,
}

/// `team.run`'s `conflicts`: what a `worktree` run does when the merge of results conflicts.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ConflictMode {
    /// A resolve task (the team's `resolver` role, else the builtin `resolver` agent)
    /// resolves it; when it cannot, the manual way.
    Agent,
    /// The run blocks with the commands to resolve it by hand, then `crewctl resume`.
    Manual,
}

/// What a task changed, as a commit on its branch.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskCommitView {
    pub branch: String,
    pub start: String,
    pub commit: String,
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
}

/// A `worktree` run's workspace.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunWorkspaceView {
    pub mode: WorkspaceMode,
    pub repo: String,
    pub base: String,
    /// The base is a commit of the user's uncommitted changes.
    pub dirty_base: bool,
    /// The run's branch (`crew/<runId>`).
    pub branch: String,
    /// Set once the leaf tasks' results are merged on `branch`.
    pub integrated: Option<TaskCommitView>,
    /// Per task id, completed tasks only.
    pub tasks: std::collections::BTreeMap<String, TaskCommitView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiffParams {
    pub run_id: String,
    /// One task's change (from its start commit); the whole run's otherwise.
    pub task_id: Option<String>,
    /// Leave the patch out (diffstat only).
    pub stat: Option<bool>,
    /// At most this many bytes of patch (default 4 MiB).
    pub limit: Option<i64>,
    /// With `taskId`: that step's candidate `k` (1-based) instead of its chosen result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DiffResult {
    pub branch: String,
    pub from: String,
    pub to: String,
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
    pub patch: String,
    pub truncated: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplyParams {
    pub run_id: String,
    /// One new commit of the whole change instead of merging the run's branch.
    pub squash: Option<bool>,
    /// Apply a run whose judges did not pass the work (a failing or changes-requested
    /// verdict): refused without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    /// The caller's directory (`crewctl apply` sends its own). When it is in the checkout's
    /// work tree the files are brought along from there, so a directory the change empties
    /// and fills again stays the one the caller's shell is in (git keeps the directory it
    /// runs in); ignored anywhere else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_dir: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApplyResult {
    /// The user's branch the change went into (`None`: detached HEAD).
    pub branch: Option<String>,
    /// The user's HEAD afterwards.
    pub head: String,
    /// `fast_forward`, `merge`, `squash` (one commit) or `up_to_date`.
    pub how: String,
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
    /// The checkout the change went into: the run's own repository, whichever directory the
    /// call came from.
    #[serde(default)]
    pub checkout: String,
    /// What the caller should know: why a merge went in as one commit, whose identity the
    /// commit carries when none is configured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ForgetResult {
    /// What was kept in the repository and why (a branch checked out or committed on, a
    /// worktree with uncommitted work). The answer comes once the cleanup is done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForgetParams {
    pub run_id: String,
    /// Also delete worktrees of the run that hold uncommitted work.
    pub force: Option<bool>,
}
