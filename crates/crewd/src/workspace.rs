//! Worktree mode: every task in its own git worktree, results as commits, one integrated branch
//! per run. All of it is git through `crew_git` (the user's CLI, bounded in time), and none of it
//! runs on the actor: the actor hands commit ids out (`TaskWorkspace`) and takes commit ids back
//! (`TaskCommit`, `Integration`). A task's input is a start commit and its output a result
//! commit, so a worker on another machine could do the same with git bundles.
//!
//! The user's checkout is never modified by a run: the base of a dirty tree is made in a
//! temporary index, tasks work under `<state>/worktrees/<runId>/<taskId>`, results go to
//! `crew/tasks/<runId>/<taskId>` and the run's merge to `crew/<runId>`. Only `team.apply`, asked
//! by the user, changes the user's branch.
//!
//! The files follow a run's phases: `plan.rs` (the run's workspace at `team.run`/`team.plan`),
//! `start.rs` (a task's worktree at its start commit), `finish.rs` (the attempt's result
//! committed, or its tree kept) and `integrate.rs` (the leaves' results merged on the run's
//! branch). `worktree.rs` adds and removes worktrees for all of them; `diff.rs` and `view.rs`
//! show a run's changes. Callers name everything through this root (`workspace::prepare`).

use crate::shared::Shared;
use crew_api::ApiError;
use crew_core::run::AttemptResult;
use crew_core::usage::Usage;
use crew_git::{Git, GitError};
use std::path::{Path, PathBuf};

pub mod apply;
pub mod cleanup;
pub mod conflict;
mod diff;
mod finish;
mod integrate;
mod plan;
mod readers;
mod seed;
mod start;
mod view;
mod worktree;
pub use conflict::checked_out_message;
pub use diff::{diff, DiffInput};
pub use finish::{check_resolution, finish_attempt, reused_commit};
pub use integrate::integrate;
pub use plan::{hold_base, plan_run};
pub use readers::Checkouts;
pub use start::{prepare, task_workspace};
pub use view::view;

/// What the worker needs to set a task's worktree up, frozen on the actor.
#[derive(Debug, Clone)]
pub struct TaskWorkspace {
    pub repo: String,
    pub subdir: String,
    pub run_id: String,
    pub task_id: String,
    pub role: String,
    pub attempt: u32,
    /// The base (no dependencies) or the dependencies' result commits, in plan order.
    pub inputs: Vec<String>,
    /// Task ids behind `inputs` (empty for the base), to name them in a conflict.
    pub input_tasks: Vec<String>,
    /// The run's base commit (a Slurm attempt's input bundle holds only what is past it).
    pub base: String,
    pub seed_paths: Vec<String>,
    /// Whether the task's role may edit files; read-only tasks share a checkout
    /// (`readers.rs`).
    pub writes: bool,
    /// A resolve task (issue 31): it starts from the merge of its inputs with the conflicts
    /// left in the files, and a user's resolution on its branch is its result.
    pub resolve: bool,
}

/// A worktree made for one attempt.
#[derive(Debug)]
pub struct Prepared {
    pub cwd: PathBuf,
    pub worktree: PathBuf,
    pub branch: String,
    pub start: String,
    /// A checkout read-only tasks share (`readers.rs`): left, not committed from.
    pub shared: bool,
    /// A resolve task's branch holds the user's resolution (the manual way after the
    /// resolver gave up): this commit is the result, and no agent runs.
    pub taken: Option<String>,
    /// A writing task's hold on its worktree's path until this is dropped, after `finish`
    /// removed it: the integration's sweep of leftovers passes it over meanwhile (a task
    /// retried while the run integrates). `None` for readers (their checkout is leased).
    #[allow(dead_code)] // held for what its drop does
    pub held: Option<readers::Held>,
}

/// The run's repository as the user left it: a folder that is still there. Moved or deleted
/// since the run started, every git call there failed with "cannot run git …: No such file or
/// directory", which reads as if git were not installed.
pub fn repository_there(repo: &str) -> Result<(), ApiError> {
    if Path::new(repo).is_dir() {
        return Ok(());
    }
    Err(ApiError::invalid_state(format!(
        "the run's repository {} is not there any more (moved or deleted since the run \
         started); its branches are in the repository wherever it is now",
        crew_core::text::escape(repo)
    )))
}

/// The commits a request works on (`(what, commit)`) still in the repository: after the user
/// deleted the run's branches and git pruned what they held, git's own "bad object" came back
/// as an internal error.
pub async fn commits_there(
    repo: &crew_git::Repo,
    commits: &[(&str, &str)],
) -> Result<(), ApiError> {
    for (what, commit) in commits {
        match repo.resolve(commit).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(ApiError::invalid_state(format!(
                    "the run's {what} ({}) is no longer in the repository {}: its branches were \
                     deleted and git pruned what they held",
                    short(commit),
                    repo.dir().display()
                )))
            }
            Err(e) => return Err(ApiError::internal(format!("git: {e}"))),
        }
    }
    Ok(())
}

pub fn git(shared: &Shared) -> Git {
    Git {
        program: PathBuf::from("git"),
        timeout: std::time::Duration::from_millis(shared.config.git_timeout_ms.max(1000)),
        tag: Some(crate::git_orphans::tag()),
    }
}

pub fn worktrees_dir(shared: &Shared, run_id: &str) -> PathBuf {
    shared.state_dir.join("worktrees").join(run_id)
}

/// The file in a run's worktrees directory naming its repository, so forget/prune find it
/// without the run's events (crew's reserved scheme: no task id can be it).
const REPO_FILE: &str = crew_core::ids::reserved::REPO_FILE;
/// Its name before the reserved scheme: read when a state dir from then has it.
const LEGACY_REPO_FILE: &str = "repo";

/// The largest patch artifact kept of a task's change: git's output is streamed and cut
/// there (binary files then summarised), so a huge file in a result never sits whole in
/// crewd's memory.
pub const PATCH_MAX: usize = 8 << 20;

/// Where crew's worktrees live: what `prune_worktrees_under` may prune, and nothing else.
fn all_worktrees(shared: &Shared) -> PathBuf {
    shared.state_dir.join("worktrees")
}

pub fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// An attempt ended by the worktree step.
fn failed(error: String, retryable: bool) -> AttemptResult {
    AttemptResult::Failed {
        usage: Usage::default(),
        model: None,
        artifacts: Vec::new(),
        error,
        retryable,
        reason: crew_core::run::FailReason::Workspace.into(),
    }
}

/// An attempt ended by a git failure. Only a timeout or an I/O error is retryable: another try
/// may get past those, but not past git refusing, or git that cannot be started.
fn git_failed(what: &str, e: GitError) -> AttemptResult {
    let retryable = matches!(e, GitError::Timeout { .. } | GitError::Io(_));
    failed(format!("{what}: {e}"), retryable)
}
