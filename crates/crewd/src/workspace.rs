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

use crate::shared::Shared;
use crew_api::types as api;
use crew_api::ApiError;
use crew_core::run::workspace::{
    attempt_ref, conflict_ref, integration_conflict_ref, run_branch, start_ref, task_branch,
};
use crew_core::run::{AttemptResult, Integration, TaskCommit, WorkspaceMode, WorkspaceSpec};
use crew_core::usage::Usage;
use crew_git::{Git, GitError, MergeOutcome, Repo};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod apply;
pub mod cleanup;
pub mod conflict;
mod readers;
mod seed;
pub use readers::Checkouts;

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

/// An attempt that ended before its worker could start.
#[derive(Debug)]
pub struct NotStarted {
    pub result: AttemptResult,
    /// The merge of the task's inputs conflicts: for the actor to hand to a resolver.
    pub conflict: Option<crew_core::run::resolve::Conflict>,
}

impl From<AttemptResult> for NotStarted {
    fn from(result: AttemptResult) -> Self {
        NotStarted {
            result,
            conflict: None,
        }
    }
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
}

pub fn git(shared: &Shared) -> Git {
    Git {
        program: PathBuf::from("git"),
        timeout: std::time::Duration::from_millis(shared.config.git_timeout_ms.max(1000)),
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

fn validation(field: &str, message: String) -> ApiError {
    let d = crew_core::resource::Diagnostic::error(
        crew_core::plan::REQUEST,
        None,
        Some(field),
        message.clone(),
    );
    ApiError::validation(message, vec![crate::diagnostic::to_api(&d)])
}

/// The run's workspace at `team.run`/`team.plan`: `None` for `shared`. Refuses (1003) a
/// `worktree` run outside a git work tree, or with a dirty tree under `dirty: "refuse"`.
pub async fn plan_run(
    shared: &Shared,
    params: &api::RunParams,
    team_mode: Option<WorkspaceMode>,
    preview: bool,
    notes: &mut Vec<String>,
) -> Result<Option<WorkspaceSpec>, ApiError> {
    let mode = match params.workspace {
        Some(api::WorkspaceMode::Worktree) => WorkspaceMode::Worktree,
        Some(api::WorkspaceMode::Shared) => WorkspaceMode::Shared,
        None => team_mode.unwrap_or(shared.config.default_workspace),
    };
    if mode == WorkspaceMode::Shared {
        return Ok(None);
    }
    let git = git(shared);
    let cwd = Path::new(&params.cwd);
    let top = git
        .toplevel(cwd)
        .await
        .map_err(|e| validation("workspace", format!("worktree mode needs git: {e}")))?;
    let Some(top) = top else {
        return Err(validation(
            "workspace",
            format!(
                "worktree mode needs the run's cwd inside a git work tree, and {} is not in one \
                 (use `workspace: \"shared\"`, or `git init` it)",
                params.cwd
            ),
        ));
    };
    let repo = git.repo(&top);
    let fail = |e: GitError| validation("workspace", format!("cannot read the repository: {e}"));
    let head = repo.head().await.map_err(fail)?;
    refuse_clashing_branches(&repo, &top).await?;
    let dirty = repo.dirty_paths().await.map_err(fail)?;
    let branch = repo.current_branch().await.map_err(fail)?;
    let base = if dirty.is_empty() {
        head.clone()
    } else {
        if params.dirty == Some(api::DirtyPolicy::Refuse) {
            let shown: Vec<&str> = dirty.iter().take(10).map(String::as_str).collect();
            return Err(validation(
                "dirty",
                format!(
                    "{} has uncommitted changes ({} path(s): {}{}) and `dirty` is \"refuse\"",
                    top.display(),
                    dirty.len(),
                    shown.join(", "),
                    if dirty.len() > shown.len() {
                        ", …"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if preview && head.is_none() {
            return Err(validation(
                "workspace",
                format!(
                    "{} has no commit yet: commit something first, worktree mode starts from a \
                     commit",
                    top.display()
                ),
            ));
        }
        if preview {
            // A preview writes nothing to the repository: the snapshot is made by `team.run`.
            notes.push(format!(
                "the run will start from your uncommitted changes too ({} path(s)), committed \
                 when it starts without touching your tree, index or stash",
                dirty.len()
            ));
            return Ok(Some(WorkspaceSpec {
                repo: top.to_string_lossy().into_owned(),
                subdir: subdir_of(cwd, &top),
                base: head.clone().unwrap_or_default(),
                head,
                dirty: true,
                branch,
                conflicts: Default::default(),
                resolver: None,
            }));
        }
        let snap = repo
            .snapshot("crew: the uncommitted changes a run started from")
            .await
            .map_err(fail)?;
        notes.push(format!(
            "the run starts from your uncommitted changes too ({} path(s)), committed as {} \
             without touching your tree, index or stash",
            dirty.len(),
            snap.as_deref().map_or("", short)
        ));
        snap.or(head.clone())
    };
    let Some(base) = base else {
        return Err(validation(
            "workspace",
            format!(
                "{} has no commit yet: commit something first, worktree mode starts from a commit",
                top.display()
            ),
        ));
    };
    Ok(Some(WorkspaceSpec {
        repo: top.to_string_lossy().into_owned(),
        subdir: subdir_of(cwd, &top),
        base,
        head,
        dirty: !dirty.is_empty(),
        branch,
        conflicts: Default::default(),
        resolver: None,
    }))
}

/// The run's cwd relative to the top of its work tree.
fn subdir_of(cwd: &Path, top: &Path) -> String {
    cwd.strip_prefix(top)
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
        .or_else(|| {
            // The cwd may reach the repository through a symlink: compare canonical paths.
            let c = std::fs::canonicalize(cwd).ok()?;
            let t = std::fs::canonicalize(top).ok()?;
            c.strip_prefix(t)
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        })
        .unwrap_or_default()
}

/// A branch of the user's that takes the place of crew's branch directories (`crew`, or
/// `crew/tasks`): git cannot hold `crew/<runId>` beside it (a ref is a file or a directory),
/// so every task would fail at its first git call. Refused now, with the way out.
async fn refuse_clashing_branches(repo: &Repo, top: &Path) -> Result<(), ApiError> {
    for name in ["crew", "crew/tasks"] {
        let full = format!("refs/heads/{name}");
        let found = repo
            .resolve(&full)
            .await
            .map_err(|e| validation("workspace", format!("cannot read the repository: {e}")))?;
        if found.is_some() {
            return Err(validation(
                "workspace",
                format!(
                    "{} has a branch named `{name}`, and worktree mode keeps its branches under \
                     `crew/`, which git cannot hold beside it: rename yours (git branch -m \
                     {name} <new-name>) or use `workspace: \"shared\"`",
                    top.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Keep the run's base reachable from `team.run` on (`refs/crew/<runId>/_base`): a dirty
/// tree's snapshot is referenced by nothing else until a task starts, and `git gc` would drop
/// it while the run waits.
pub async fn hold_base(shared: &Shared, run_id: &str, ws: &WorkspaceSpec) {
    let git = git(shared);
    let name = crew_core::run::workspace::base_ref(run_id);
    if let Err(e) = git.repo(&ws.repo).update_ref(&name, &ws.base).await {
        tracing::warn!(run = run_id, error = %e, "cannot keep a ref to the run's base");
    }
}

pub fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The task's workspace inputs, on the actor.
pub fn task_workspace(
    run: &crew_core::run::RunState,
    task: &crew_core::run::TaskState,
    attempt: u32,
) -> Option<TaskWorkspace> {
    let ws = run.spec.workspace.as_ref()?;
    let mut inputs = Vec::new();
    let mut input_tasks = Vec::new();
    // A resolve task's result holds every other input: merged first, the rest are already in
    // it (merged in plan order, the conflict it resolved would stop the merge again).
    let is_resolve = |d: &&crew_core::ids::SafeId| {
        run.task(d)
            .is_some_and(|t| crew_core::run::resolve::is_resolve(&t.plan))
    };
    let deps = task
        .plan
        .depends_on
        .iter()
        .filter(is_resolve)
        .chain(task.plan.depends_on.iter().filter(|d| !is_resolve(d)));
    for d in deps {
        // A selector starts where its candidates did, never from a merge of them (issue 36).
        if crew_core::run::candidates::is_own_candidate(&task.plan, d) {
            continue;
        }
        if let Some(c) = run.task(d).and_then(|t| t.commit()) {
            if !inputs.contains(&c.commit) {
                inputs.push(c.commit.clone());
                input_tasks.push(d.to_string());
            }
        }
    }
    if inputs.is_empty() {
        inputs.push(ws.base.clone());
    }
    Some(TaskWorkspace {
        repo: ws.repo.clone(),
        subdir: ws.subdir.clone(),
        run_id: run.id.clone(),
        task_id: task.plan.id.to_string(),
        role: task.plan.role.clone(),
        attempt,
        inputs,
        input_tasks,
        base: ws.base.clone(),
        seed_paths: task.plan.seed_paths.clone(),
        writes: task.plan.writes,
        resolve: crew_core::run::resolve::is_resolve(&task.plan),
    })
}

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

fn git_failed(what: &str, e: GitError) -> AttemptResult {
    let retryable = matches!(e, GitError::Timeout { .. } | GitError::Io(_));
    failed(format!("{what}: {e}"), retryable)
}

async fn all_contained(repo: &Repo, inputs: &[String], tip: &str) -> Result<bool, GitError> {
    for i in inputs {
        if !repo.is_ancestor(i, tip).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Save what a worktree holds (if anything changed) under the attempt's ref, then remove it.
async fn retire(git: &Git, repo: &Repo, path: &Path, keep_as: &str) {
    if path.join(".git").exists() {
        let wt = git.repo(path);
        match wt.snapshot("crew: an earlier attempt's tree").await {
            Ok(Some(c)) => {
                if let Err(e) = repo.update_ref(keep_as, &c).await {
                    tracing::warn!(error = %e, "cannot keep an earlier attempt's tree");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot save an earlier attempt's tree"),
        }
        if let Err(e) = repo.worktree_remove(path).await {
            tracing::warn!(error = %e, path = %path.display(), "git worktree remove failed; removing the directory");
        }
    }
    if path.exists() {
        let p = path.to_path_buf();
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(p)).await;
    }
    if let Some(under) = path.parent().and_then(Path::parent) {
        let _ = repo.prune_worktrees_under(under).await;
    }
}

/// Make the attempt's worktree: clean, at the task's start commit. `Err` is the attempt's end
/// (a git failure, or dependencies whose results conflict).
pub async fn prepare(shared: &Shared, ws: &TaskWorkspace) -> Result<Prepared, NotStarted> {
    let git = git(shared);
    let repo = git.repo(&ws.repo);
    let dir = worktrees_dir(shared, &ws.run_id);
    if let Err(e) = tokio::fs::create_dir_all(&dir).await {
        return Err(failed(format!("cannot create {}: {e}", dir.display()), true).into());
    }
    let repo_file = dir.join(REPO_FILE);
    if !repo_file.exists() {
        let _ = tokio::fs::write(&repo_file, ws.repo.as_bytes()).await;
    }
    if !ws.writes {
        return prepare_reader(shared, ws, &git, &repo, &dir).await;
    }
    let branch = task_branch(&ws.run_id, &ws.task_id);
    let path = dir.join(&ws.task_id);
    // Left by an attempt that did not end (crewd was killed): kept as a ref, then gone.
    if path.exists() {
        let keep = attempt_ref(&ws.run_id, &ws.task_id, ws.attempt.saturating_sub(1));
        retire(&git, &repo, &path, &keep).await;
    }
    let start = if ws.resolve {
        match resolve_start(&repo, ws, &branch).await {
            Ok(ResolveStart::At(s)) => s,
            Ok(ResolveStart::Taken { mark, tip }) => {
                return Ok(Prepared {
                    cwd: path_in(&path, &ws.subdir),
                    worktree: path,
                    branch,
                    start: mark,
                    shared: false,
                    taken: Some(tip),
                })
            }
            Ok(ResolveStart::Refused(r)) => return Err((*r).into()),
            Err(e) => return Err(git_failed("cannot make the resolver's start", e).into()),
        }
    } else {
        match start_commit(&repo, ws, &branch).await {
            Ok(Ok(s)) => s,
            Ok(Err(not_started)) => return Err(not_started),
            Err(e) => return Err(git_failed("cannot find the task's start commit", e).into()),
        }
    };
    if let Err(e) = add_worktree(&repo, &path, |p| repo.worktree_add(p, &branch, &start)).await {
        return Err(git_failed("cannot create the task's worktree", e).into());
    }
    if let Err(e) = seed(Path::new(&ws.repo), &path, &ws.seed_paths).await {
        return Err(failed(format!("cannot copy seedPaths: {e}"), false).into());
    }
    Ok(Prepared {
        cwd: path_in(&path, &ws.subdir),
        worktree: path,
        branch,
        start,
        shared: false,
        taken: None,
    })
}

/// A read-only task joins the run's checkout at its start commit (made if nobody is in it);
/// its branch points at the start commit, which is also its result.
async fn prepare_reader(
    shared: &Shared,
    ws: &TaskWorkspace,
    git: &Git,
    repo: &Repo,
    dir: &Path,
) -> Result<Prepared, NotStarted> {
    let branch = task_branch(&ws.run_id, &ws.task_id);
    let start = match start_commit(repo, ws, &branch).await {
        Ok(Ok(s)) => s,
        Ok(Err(not_started)) => return Err(not_started),
        Err(e) => return Err(git_failed("cannot find the task's start commit", e).into()),
    };
    if let Err(e) = repo
        .update_ref(&format!("refs/heads/{branch}"), &start)
        .await
    {
        return Err(git_failed("cannot make the task's branch", e).into());
    }
    let path = readers::checkout_path(dir, &start);
    let from = Path::new(&ws.repo);
    let joined = shared
        .checkouts
        .join(git, repo, &ws.run_id, &path, &start, || {
            seed(from, &path, &ws.seed_paths)
        })
        .await;
    if let Err(e) = joined {
        return Err(git_failed("cannot create the read-only tasks' checkout", e).into());
    }
    Ok(Prepared {
        cwd: path_in(&path, &ws.subdir),
        worktree: path,
        branch,
        start,
        shared: true,
        taken: None,
    })
}

/// `add` a worktree at `path`; after a failure, what it left (a half-made checkout, stale
/// metadata of a directory removed behind git's back) is removed and it is tried once more,
/// unless it ran out of time (another try would too: the attempt fails, retryably).
async fn add_worktree<'a, F, Fut>(repo: &Repo, path: &'a Path, add: F) -> Result<(), GitError>
where
    F: Fn(&'a Path) -> Fut,
    Fut: std::future::Future<Output = Result<(), GitError>>,
{
    let Err(first) = add(path).await else {
        return Ok(());
    };
    let _ = repo.worktree_remove(path).await;
    if tokio::fs::try_exists(path).await.unwrap_or(true) {
        let p = path.to_path_buf();
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(p)).await;
    }
    if let Some(under) = path.parent().and_then(Path::parent) {
        let _ = repo.prune_worktrees_under(under).await;
    }
    if matches!(first, GitError::Timeout { .. }) {
        return Err(first);
    }
    add(path).await
}

/// Remove a worktree whose content is recorded (its commit is on its branch): the directory is
/// renamed into `<state>/worktrees/.trash/` and git's metadata of it pruned at once, and the
/// files are deleted in the background, so a task's end does not wait for thousands of
/// unlinks. If the rename fails, `git worktree remove` does it all now.
async fn discard(shared: &Shared, repo: &Repo, path: &Path) {
    let trash = trash_dir(shared);
    let name = format!(
        "{}-{}",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        uuid::Uuid::new_v4().simple()
    );
    let to = trash.join(name);
    let admin = crew_git::admin_dir(path);
    let moved = match tokio::fs::create_dir_all(&trash).await {
        Ok(()) => tokio::fs::rename(path, &to).await,
        Err(e) => Err(e),
    };
    match moved {
        Ok(()) => {
            // This worktree's entry only: a repository-wide prune would also drop the user's
            // worktrees whose directory happens to be absent.
            if let Some(admin) = admin {
                if let Err(e) = repo.forget_worktree(path, &admin).await {
                    tracing::warn!(error = %e, "cannot drop a finished worktree's git metadata");
                }
            }
            tokio::task::spawn_blocking(move || {
                // `empty_trash` may be at the same directory: what it took is not an error.
                if let Err(e) = std::fs::remove_dir_all(&to).or_else(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e)
                    }
                }) {
                    tracing::warn!(error = %e, path = %to.display(), "cannot delete a finished worktree");
                }
            });
        }
        Err(e) => {
            tracing::debug!(error = %e, "cannot move a finished worktree aside; removing it in place");
            if let Err(e) = repo.worktree_remove(path).await {
                tracing::warn!(error = %e, "cannot remove a finished task's worktree");
            }
        }
    }
}

/// Where finished worktrees wait for deletion (outside every run's directory, so nothing
/// there is taken for a task's worktree).
fn trash_dir(shared: &Shared) -> PathBuf {
    shared.state_dir.join("worktrees").join(".trash")
}

/// Delete what a killed daemon left in the trash, in the background.
fn empty_trash(shared: &Shared) {
    let trash = trash_dir(shared);
    tokio::task::spawn_blocking(move || {
        let Ok(rd) = std::fs::read_dir(&trash) else {
            return;
        };
        for e in rd.flatten() {
            // Another deleter may be at the same directory: its errors are not ours.
            let _ = std::fs::remove_dir_all(e.path());
        }
    });
}

/// The attempt's cwd: the run's subdirectory of the worktree.
fn path_in(worktree: &Path, subdir: &str) -> PathBuf {
    if subdir.is_empty() {
        worktree.to_path_buf()
    } else {
        worktree.join(subdir)
    }
}

fn needs_attention(reason: String) -> AttemptResult {
    AttemptResult::NeedsAttention {
        usage: Usage::default(),
        model: None,
        artifacts: Vec::new(),
        reason,
    }
}

/// Where a resolve task starts.
enum ResolveStart {
    /// The merge of its inputs with the conflicts left in the files.
    At(String),
    /// The user resolved on its branch (from `mark`, where crew left it): `tip` is the result.
    Taken { mark: String, tip: String },
    /// The user's resolution is not one (lacks inputs, keeps markers): the attempt's end.
    Refused(Box<AttemptResult>),
}

/// A resolve task's start (issue 31): the merge of its inputs with every conflict left in the
/// files, made once and marked with the conflict ref (so a commit of the user's is told from
/// crew's). A branch the user moved on from the mark is their resolution (the manual way
/// after the resolver gave up): taken when it holds every input and no conflict markers,
/// refused otherwise and left as they made it.
async fn resolve_start(
    repo: &Repo,
    ws: &TaskWorkspace,
    branch: &str,
) -> Result<ResolveStart, GitError> {
    let bref = format!("refs/heads/{branch}");
    let cref = conflict_ref(&ws.run_id, &ws.task_id);
    let inputs = conflict::inputs(&ws.inputs, &ws.input_tasks);
    if let Some(mark) = repo.resolve(&cref).await? {
        let refused = |reason| Ok(ResolveStart::Refused(Box::new(needs_attention(reason))));
        return match conflict::read_tip(repo, &bref, &cref, &inputs, false).await? {
            conflict::Tip::Take(tip) if tip != mark => {
                let found = resolution_markers(repo, &ws.inputs, &mark, &tip).await?;
                if !found.is_empty() {
                    refused(conflict::markers_message(&ws.run_id, branch, &tip, &found))
                } else if repo.checked_out_branches().await?.contains(&bref) {
                    refused(conflict::checked_out_message(&ws.run_id, branch))
                } else {
                    Ok(ResolveStart::Taken { mark, tip })
                }
            }
            conflict::Tip::Lacks { tip, missing } => {
                refused(conflict::lacks_message(&ws.run_id, branch, &tip, &missing))
            }
            conflict::Tip::Markers { tip, found } => {
                refused(conflict::markers_message(&ws.run_id, branch, &tip, &found))
            }
            // Where crew left it (or the branch is gone): the resolver starts there again.
            _ => Ok(ResolveStart::At(mark)),
        };
    }
    let message = format!(
        "crew: conflicts of {} for {} (run {}), left for a resolver",
        ws.input_tasks.join(", "),
        ws.task_id,
        ws.run_id
    );
    let marked = repo.merge_with_markers(&ws.inputs, &message).await?;
    conflict::leave_for_user(repo, &bref, &cref, &marked.commit).await?;
    Ok(ResolveStart::At(marked.commit))
}

/// Conflict markers left in `commit`, a resolution of `inputs` made from `from`: in every
/// file the merge brought in (changed since the first input; a file the resolver never
/// opened still has the markers the merge wrote), and what `git diff --check` finds in the
/// change.
pub async fn resolution_markers(
    repo: &Repo,
    inputs: &[String],
    from: &str,
    commit: &str,
) -> Result<Vec<String>, GitError> {
    let first = inputs.first().map_or(from, String::as_str);
    let paths = repo.changed_paths(first, commit).await?;
    let mut found = repo.conflict_markers(commit, &paths).await?;
    if found.is_empty() {
        found = repo
            .diff_check(from, commit)
            .await?
            .into_iter()
            .filter(|l| l.contains("conflict marker"))
            .collect();
    }
    Ok(found)
}

/// After a resolve task's attempt (issue 31). Completed: its result must hold no conflict
/// markers, else the attempt fails as a failed check, retried once with what is wrong (the
/// core's verify retries), its commit kept under the attempt's ref. Any other end: the branch
/// goes back where crew left the conflicts (the agent may have committed on it), so the next
/// attempt, or the user, starts from them.
pub async fn check_resolution(
    shared: &Shared,
    ws: &TaskWorkspace,
    result: AttemptResult,
) -> AttemptResult {
    if !ws.resolve {
        return result;
    }
    let repo = git(shared).repo(&ws.repo);
    let bref = format!("refs/heads/{}", task_branch(&ws.run_id, &ws.task_id));
    let cref = conflict_ref(&ws.run_id, &ws.task_id);
    let AttemptResult::Completed {
        commit: Some(c), ..
    } = &result
    else {
        if let Ok(Some(mark)) = repo.resolve(&cref).await {
            if let Err(e) = repo.update_ref(&bref, &mark).await {
                tracing::warn!(error = %e, "cannot put the resolver's branch back at the conflicts");
            }
        }
        return result;
    };
    let found = match resolution_markers(&repo, &ws.inputs, &c.start, &c.commit).await {
        Ok(f) => f,
        Err(e) => return git_failed("cannot check the resolution for conflict markers", e),
    };
    if found.is_empty() {
        // Resolved: a later run of this task (a retry with dependents) merges afresh.
        if let Err(e) = repo.update_refs(&[(cref, None)]).await {
            tracing::warn!(error = %e, "cannot drop the resolver's conflict mark");
        }
        return result;
    }
    let keep = attempt_ref(&ws.run_id, &ws.task_id, ws.attempt);
    let back = repo
        .update_refs(&[
            (keep, Some(c.commit.clone())),
            (bref, Some(c.start.clone())),
        ])
        .await;
    if let Err(e) = back {
        tracing::warn!(error = %e, "cannot put the resolver's branch back at the conflicts");
    }
    let error = format!(
        "the resolution still has conflict markers at {}: resolve each conflict (keep what \
         every side intended) and remove every `<<<<<<< `, `=======` and `>>>>>>> ` line",
        found.join(", ")
    );
    let (usage, model, artifacts) = match result {
        AttemptResult::Completed {
            usage,
            model,
            artifacts,
            ..
        } => (usage, model, artifacts),
        _ => Default::default(),
    };
    AttemptResult::Failed {
        usage,
        model,
        artifacts,
        error,
        retryable: true,
        reason: crew_core::checks::VERIFY_FAILED.into(),
    }
}

/// Where the attempt starts: the start recorded for the task when its inputs did not change
/// (a retry starts where the first attempt did), the task's branch when the user resolved a
/// conflict there, else the merge of the inputs (recorded now).
async fn start_commit(
    repo: &Repo,
    ws: &TaskWorkspace,
    branch: &str,
) -> Result<Result<String, NotStarted>, GitError> {
    let sref = start_ref(&ws.run_id, &ws.task_id);
    if let Some(s) = repo.resolve(&sref).await? {
        if all_contained(repo, &ws.inputs, &s).await? {
            return Ok(Ok(s));
        }
    }
    let bref = format!("refs/heads/{branch}");
    let cref = conflict_ref(&ws.run_id, &ws.task_id);
    let inputs = conflict::inputs(&ws.inputs, &ws.input_tasks);
    let attention = |reason: String| Ok(Err(needs_attention(reason).into()));
    match conflict::read_tip(repo, &bref, &cref, &inputs, false).await? {
        conflict::Tip::Take(tip) => {
            // crew's worktree checks the branch out; git refuses while the user's has it.
            if repo.checked_out_branches().await?.contains(&bref) {
                return attention(conflict::checked_out_message(&ws.run_id, branch));
            }
            conflict::settled(repo, &sref, &tip, &cref).await?;
            return Ok(Ok(tip));
        }
        conflict::Tip::Lacks { tip, missing } => {
            return attention(conflict::lacks_message(&ws.run_id, branch, &tip, &missing));
        }
        conflict::Tip::Markers { tip, found } => {
            return attention(conflict::markers_message(&ws.run_id, branch, &tip, &found));
        }
        conflict::Tip::Merge => {}
    }
    let message = format!(
        "crew: start of {} (run {}): merge of {}",
        ws.task_id,
        ws.run_id,
        ws.input_tasks.join(", ")
    );
    match repo.merge_all(&ws.inputs, &message).await? {
        MergeOutcome::Clean(s) => {
            conflict::settled(repo, &sref, &s, &cref).await?;
            Ok(Ok(s))
        }
        MergeOutcome::Conflict {
            paths,
            with,
            merged_so_far,
        } => {
            // The branch holds what merged so far, for the user to finish the merge on.
            conflict::leave_for_user(repo, &bref, &cref, &merged_so_far).await?;
            let sides = conflict::sides(repo, &inputs, &with, &merged_so_far, &paths).await;
            let reason = conflict::manual_message(
                &ws.repo,
                &ws.run_id,
                branch,
                Some(ws.task_id.as_str()),
                "its dependencies",
                &inputs,
                &conflict::Stopped {
                    with: &with,
                    paths: &paths,
                    touched_by: &sides,
                },
            );
            // The manual message stands unless the actor hands the conflict to a resolver.
            let conflict = crew_core::run::resolve::Conflict::bounded(&paths, &sides);
            Ok(Err(NotStarted {
                result: needs_attention(reason),
                conflict: Some(conflict),
            }))
        }
    }
}

/// Copy the step's `seedPaths` from the user's tree into the worktree (`seed.rs`: never
/// through a link, never outside either tree).
async fn seed(from: &Path, to: &Path, paths: &[String]) -> std::io::Result<()> {
    if paths.is_empty() {
        return Ok(());
    }
    let (from, to, paths) = (from.to_path_buf(), to.to_path_buf(), paths.to_vec());
    tokio::task::spawn_blocking(move || seed::copy(&from, &to, &paths))
        .await
        .map_err(std::io::Error::other)?
        .map_err(std::io::Error::other)
}

/// After the attempt: a completed attempt's changes become a commit on the task's branch, with
/// a diffstat and a patch; any other end keeps the tree as the attempt's ref. The worktree goes
/// either way (the branch stays).
pub async fn finish(
    shared: &Shared,
    ws: &TaskWorkspace,
    prepared: Prepared,
    result: AttemptResult,
) -> (AttemptResult, Option<Vec<u8>>) {
    let git = git(shared);
    let repo = git.repo(&ws.repo);
    if prepared.shared {
        shared
            .checkouts
            .leave(&git, &repo, &ws.run_id, &prepared.worktree, &prepared.start)
            .await;
        return (reader_result(&prepared, result), None);
    }
    // The user's resolution of a resolve task: the result as they made it, never moved.
    if let Some(tip) = prepared.taken.clone() {
        let AttemptResult::Completed {
            usage,
            model,
            artifacts,
            reused_from,
            verification,
            ..
        } = result
        else {
            return (result, None);
        };
        return match adopt(shared, &repo, &prepared, &tip).await {
            Ok((commit, patch)) => (
                AttemptResult::Completed {
                    usage,
                    model,
                    artifacts,
                    reused_from,
                    commit: Some(commit),
                    verification,
                },
                Some(patch),
            ),
            Err(e) => (git_failed("cannot take your resolution", e), None),
        };
    }
    match result {
        AttemptResult::Completed {
            usage,
            model,
            artifacts,
            reused_from: Some(from),
            commit: Some(cached),
            verification,
        } => match adopt(shared, &repo, &prepared, &cached.commit).await {
            Ok((commit, patch)) => (
                AttemptResult::Completed {
                    usage,
                    model,
                    artifacts,
                    reused_from: Some(from),
                    commit: Some(commit),
                    verification,
                },
                Some(patch),
            ),
            Err(e) => {
                let keep = attempt_ref(&ws.run_id, &ws.task_id, ws.attempt);
                retire(&git, &repo, &prepared.worktree, &keep).await;
                (git_failed("cannot take the reused result commit", e), None)
            }
        },
        AttemptResult::Completed {
            usage,
            model,
            artifacts,
            reused_from,
            commit: _,
            verification,
        } => match record(shared, &git, &repo, ws, &prepared).await {
            Ok((commit, patch)) => match off_start(&repo, ws, &prepared, &commit).await {
                Some(mut refused) => {
                    if let AttemptResult::Failed { usage: u, .. } = &mut refused {
                        *u = usage;
                    }
                    (refused, None)
                }
                None => (
                    AttemptResult::Completed {
                        usage,
                        model,
                        artifacts,
                        reused_from,
                        commit: Some(commit),
                        verification,
                    },
                    Some(patch),
                ),
            },
            Err(e) => {
                let keep = attempt_ref(&ws.run_id, &ws.task_id, ws.attempt);
                retire(&git, &repo, &prepared.worktree, &keep).await;
                let mut r = git_failed("cannot commit the task's result", e);
                if let AttemptResult::Failed { usage: u, .. } = &mut r {
                    *u = usage;
                }
                (r, None)
            }
        },
        other => {
            let keep = attempt_ref(&ws.run_id, &ws.task_id, ws.attempt);
            retire(&git, &repo, &prepared.worktree, &keep).await;
            (other, None)
        }
    }
}

/// An agent that left its worktree's HEAD at a commit without the task's start (a `git reset`
/// to an older commit, a checkout of another) would hand in a result that drops what the task
/// started from (its dependencies' work, silently lost at the next merge): refused, its commit
/// kept under the attempt's ref and the branch back at the start.
async fn off_start(
    repo: &Repo,
    ws: &TaskWorkspace,
    prepared: &Prepared,
    c: &TaskCommit,
) -> Option<AttemptResult> {
    match repo.is_ancestor(&prepared.start, &c.commit).await {
        Ok(true) => None,
        Ok(false) => {
            let keep = attempt_ref(&ws.run_id, &ws.task_id, ws.attempt);
            let bref = format!("refs/heads/{}", prepared.branch);
            let back = repo
                .update_refs(&[
                    (keep.clone(), Some(c.commit.clone())),
                    (bref, Some(prepared.start.clone())),
                ])
                .await;
            if let Err(e) = back {
                tracing::warn!(error = %e, "cannot put the task's branch back at its start");
            }
            Some(failed(
                format!(
                    "the agent left HEAD at {}, which does not contain the task's start {} \
                     (a reset or checkout to another commit): its result would drop what the \
                     task started from, so it was not taken; it is kept as {keep}",
                    short(&c.commit),
                    short(&prepared.start)
                ),
                false,
            ))
        }
        Err(e) => Some(git_failed(
            "cannot check the task's result against its start",
            e,
        )),
    }
}

/// A read-only task changes nothing: a completed one's result commit is its start commit.
fn reader_result(prepared: &Prepared, result: AttemptResult) -> AttemptResult {
    match result {
        AttemptResult::Completed {
            usage,
            model,
            artifacts,
            reused_from,
            commit: _,
            verification,
        } => AttemptResult::Completed {
            usage,
            model,
            artifacts,
            reused_from,
            verification,
            commit: Some(TaskCommit {
                branch: prepared.branch.clone(),
                start: prepared.start.clone(),
                commit: prepared.start.clone(),
                files: 0,
                insertions: 0,
                deletions: 0,
            }),
        },
        other => other,
    }
}

/// `finish`, then the patch as the artifact `patches/<taskId>.patch`, durable before the
/// event that names it (like every artifact).
pub async fn finish_attempt(
    shared: &Shared,
    ws: &TaskWorkspace,
    prepared: Prepared,
    result: AttemptResult,
    run_dir: &Path,
) -> AttemptResult {
    let (mut result, patch) = finish(shared, ws, prepared, result).await;
    let Some(patch) = patch else {
        return result;
    };
    let dir = run_dir.to_path_buf();
    let name = format!("patches/{}.patch", ws.task_id);
    let written = tokio::task::spawn_blocking(move || {
        let a = crate::artifacts::put(&dir, &name, "patch", &patch)?;
        crate::artifacts::make_durable(&dir)?;
        Ok::<_, std::io::Error>(a)
    })
    .await;
    match written {
        Ok(Ok(a)) => {
            if let AttemptResult::Completed { artifacts, .. } = &mut result {
                artifacts.push(a);
            }
        }
        Ok(Err(e)) => tracing::warn!(error = %e, "cannot write the task's patch artifact"),
        Err(e) => tracing::warn!(error = %e, "cannot write the task's patch artifact"),
    }
    result
}

/// The marker a reused result carries from the executor to `finish`: the cached result commit.
pub fn reused_commit(commit: String) -> TaskCommit {
    TaskCommit {
        branch: String::new(),
        start: String::new(),
        commit,
        files: 0,
        insertions: 0,
        deletions: 0,
    }
}

/// A reused result of a writing task: the cached commit (made on the same start commit, as
/// the fingerprint says) becomes the task's branch, diffstat and patch, as if just made.
async fn adopt(
    shared: &Shared,
    repo: &Repo,
    prepared: &Prepared,
    commit: &str,
) -> Result<(TaskCommit, Vec<u8>), GitError> {
    repo.update_ref(&format!("refs/heads/{}", prepared.branch), commit)
        .await?;
    let stat = repo.diffstat(&prepared.start, commit).await?;
    let (patch, _) = repo.diff(&prepared.start, commit, PATCH_MAX).await?;
    discard(shared, repo, &prepared.worktree).await;
    Ok((
        TaskCommit {
            branch: prepared.branch.clone(),
            start: prepared.start.clone(),
            commit: commit.to_string(),
            files: stat.files,
            insertions: stat.insertions,
            deletions: stat.deletions,
        },
        patch,
    ))
}

async fn record(
    shared: &Shared,
    git: &Git,
    repo: &Repo,
    ws: &TaskWorkspace,
    prepared: &Prepared,
) -> Result<(TaskCommit, Vec<u8>), GitError> {
    let wt = git.repo(&prepared.worktree);
    let message = format!(
        "crew: {} ({})\n\nrun {}, attempt {}\n",
        ws.task_id, ws.role, ws.run_id, ws.attempt
    );
    // Nothing left uncommitted: the result is where the agent's own commits (agents often
    // commit their work) left HEAD, which is the start when it made none; taking the start
    // would drop those commits (a resolver's resolution then read as the markers it started
    // from). With uncommitted work, `commit_all` builds on HEAD just the same.
    let commit = match wt.commit_all(&message).await? {
        Some(c) => c,
        None => wt.head().await?.unwrap_or_else(|| prepared.start.clone()),
    };
    let stat = repo.diffstat(&prepared.start, &commit).await?;
    let patch = if commit == prepared.start {
        Vec::new()
    } else {
        repo.diff(&prepared.start, &commit, PATCH_MAX).await?.0
    };
    // The commit is on the branch: the worktree has nothing left that is not in it.
    discard(shared, repo, &prepared.worktree).await;
    Ok((
        TaskCommit {
            branch: prepared.branch.clone(),
            start: prepared.start.clone(),
            commit,
            files: stat.files,
            insertions: stat.insertions,
            deletions: stat.deletions,
        },
        patch,
    ))
}

// ---- integration ------------------------------------------------------------------------

/// Why a run's integration could not be made.
#[derive(Debug)]
pub struct Blocked {
    /// What the user reads (the manual way, for a conflict).
    pub reason: String,
    /// The leaves' results conflict: for the actor to hand to a resolver.
    pub conflict: Option<crew_core::run::resolve::Conflict>,
}

impl From<String> for Blocked {
    fn from(reason: String) -> Self {
        Blocked {
            reason,
            conflict: None,
        }
    }
}

/// Merge the leaves' commits on `crew/<runId>`. `Err` is why the run is blocked.
pub async fn integrate(
    shared: &Arc<Shared>,
    run_id: &str,
    ws: &WorkspaceSpec,
    leaves: &[(String, String)],
    tasks: &[(String, String, String)],
) -> Result<Integration, Blocked> {
    let git = git(shared);
    let repo = git.repo(&ws.repo);
    cleanup_leftovers(&git, &repo, shared, run_id).await;
    // Metadata of a worktree moved to the trash by a daemon killed before it dropped it.
    let _ = repo.prune_worktrees_under(&all_worktrees(shared)).await;
    empty_trash(shared);
    let branch = run_branch(run_id);
    let bref = format!("refs/heads/{branch}");
    let commits: Vec<String> = leaves.iter().map(|(_, c)| c.clone()).collect();
    let e = |e: GitError| format!("cannot integrate the run's results on {branch}: {e}");
    let cref = integration_conflict_ref(run_id);
    let inputs: Vec<conflict::Input> = leaves
        .iter()
        .map(|(t, c)| conflict::Input {
            task: t.clone(),
            commit: c.clone(),
        })
        .collect();
    // Resumed after the user resolved a conflict on the branch (or integrated before).
    let tip = conflict::read_tip(&repo, &bref, &cref, &inputs, true)
        .await
        .map_err(|x| Blocked::from(e(x)))?;
    let commit = match tip {
        conflict::Tip::Take(t) => {
            conflict::settled(&repo, &bref, &t, &cref)
                .await
                .map_err(|x| Blocked::from(e(x)))?;
            t
        }
        conflict::Tip::Lacks { tip, missing } => {
            return Err(conflict::lacks_message(run_id, &branch, &tip, &missing).into());
        }
        conflict::Tip::Markers { tip, found } => {
            return Err(conflict::markers_message(run_id, &branch, &tip, &found).into());
        }
        conflict::Tip::Merge => {
            let message = format!(
                "crew: run {run_id}: merge of {}",
                leaves
                    .iter()
                    .map(|(t, _)| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            match repo
                .merge_all(&commits, &message)
                .await
                .map_err(|x| Blocked::from(e(x)))?
            {
                MergeOutcome::Clean(c) => {
                    conflict::settled(&repo, &bref, &c, &cref)
                        .await
                        .map_err(|x| Blocked::from(e(x)))?;
                    c
                }
                MergeOutcome::Conflict {
                    paths,
                    with,
                    merged_so_far,
                } => {
                    conflict::leave_for_user(&repo, &bref, &cref, &merged_so_far)
                        .await
                        .map_err(|x| Blocked::from(e(x)))?;
                    let mut involved = Vec::new();
                    for (id, start, commit) in tasks {
                        let touched = repo.changed_paths(start, commit).await.unwrap_or_default();
                        if touched.iter().any(|p| paths.contains(p)) {
                            involved.push(id.clone());
                        }
                    }
                    let reason = conflict::manual_message(
                        &ws.repo,
                        run_id,
                        &branch,
                        None,
                        "the run's tasks",
                        &inputs,
                        &conflict::Stopped {
                            with: &with,
                            paths: &paths,
                            touched_by: &involved,
                        },
                    );
                    return Err(Blocked {
                        reason,
                        conflict: Some(crew_core::run::resolve::Conflict::bounded(
                            &paths, &involved,
                        )),
                    });
                }
            }
        }
    };
    let stat = repo
        .diffstat(&ws.base, &commit)
        .await
        .map_err(|x| Blocked::from(e(x)))?;
    Ok(Integration {
        branch,
        commit,
        files: stat.files,
        insertions: stat.insertions,
        deletions: stat.deletions,
    })
}

/// Worktrees of the run that no attempt will finish (crewd was killed between a task's commit
/// and its worktree's removal): kept as refs if they hold anything, then removed.
async fn cleanup_leftovers(git: &Git, repo: &Repo, shared: &Shared, run_id: &str) {
    let dir = worktrees_dir(shared, run_id);
    let Ok(mut rd) = tokio::fs::read_dir(&dir).await else {
        return;
    };
    while let Ok(Some(entry)) = rd.next_entry().await {
        let name = entry.file_name().to_string_lossy().into_owned();
        let legacy_file = name == LEGACY_REPO_FILE && !entry.path().is_dir();
        if name == REPO_FILE || legacy_file || !crew_core::ids::is_safe_id(&name) {
            continue;
        }
        let keep = format!("refs/crew/{run_id}/{name}/leftover");
        retire(git, repo, &entry.path(), &keep).await;
    }
}

// ---- team.diff ---------------------------------------------------------------------------

pub struct DiffInput {
    pub ws: WorkspaceSpec,
    pub branch: String,
    pub from: String,
    pub to: String,
}

pub async fn diff(
    shared: &Shared,
    input: DiffInput,
    stat_only: bool,
    limit: usize,
) -> Result<api::DiffResult, ApiError> {
    let git = git(shared);
    let repo = git.repo(&input.ws.repo);
    let internal = |e: GitError| ApiError::internal(format!("git: {e}"));
    let stat = repo
        .diffstat(&input.from, &input.to)
        .await
        .map_err(internal)?;
    let (patch, truncated) = if stat_only {
        (String::new(), false)
    } else {
        // At most `limit` bytes are read from git: a huge file is never held whole.
        let (bytes, truncated) = repo
            .diff(&input.from, &input.to, limit)
            .await
            .map_err(internal)?;
        (String::from_utf8_lossy(&bytes).into_owned(), truncated)
    };
    Ok(api::DiffResult {
        branch: input.branch,
        from: input.from,
        to: input.to,
        files: stat.files,
        insertions: stat.insertions,
        deletions: stat.deletions,
        patch,
        truncated,
    })
}

/// The status view of a worktree run.
pub fn view(run: &crew_core::run::RunState) -> Option<api::RunWorkspaceView> {
    let ws = run.spec.workspace.as_ref()?;
    let commit_view = |c: &TaskCommit| api::TaskCommitView {
        branch: c.branch.clone(),
        start: c.start.clone(),
        commit: c.commit.clone(),
        files: c.files,
        insertions: c.insertions,
        deletions: c.deletions,
    };
    Some(api::RunWorkspaceView {
        mode: api::WorkspaceMode::Worktree,
        repo: ws.repo.clone(),
        base: ws.base.clone(),
        dirty_base: ws.dirty,
        branch: run_branch(&run.id),
        integrated: run.integration.as_ref().map(|i| api::TaskCommitView {
            branch: i.branch.clone(),
            start: ws.base.clone(),
            commit: i.commit.clone(),
            files: i.files,
            insertions: i.insertions,
            deletions: i.deletions,
        }),
        tasks: run
            .tasks
            .iter()
            .filter_map(|t| Some((t.plan.id.to_string(), commit_view(t.commit()?))))
            .collect(),
    })
}
