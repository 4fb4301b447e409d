//! Planning a run's workspace, at `team.run` and `team.plan`: the mode it runs in, the work tree
//! its cwd is in, and the commit its tasks start from. A dirty tree's changes become a snapshot
//! commit (made by `team.run` only: a preview writes nothing), so the user's tree, index and
//! stash are never touched.

use super::{git, short};
use crate::diagnostic::request_refused;
use crate::shared::Shared;
use crew_api::types as api;
use crew_api::ApiError;
use crew_core::run::{WorkspaceMode, WorkspaceSpec};
use crew_git::{Git, GitError, Repo};
use std::path::{Path, PathBuf};

/// The run's workspace at `team.run`/`team.plan`: `None` for `shared`. Refuses (1003) a
/// `worktree` run outside a git work tree, or with a dirty tree under `dirty: "refuse"`.
pub async fn plan_run(
    shared: &Shared,
    params: &api::RunParams,
    team_mode: Option<WorkspaceMode>,
    preview: bool,
    notes: &mut Vec<String>,
) -> Result<Option<WorkspaceSpec>, ApiError> {
    if mode(shared, params, team_mode) == WorkspaceMode::Shared {
        return Ok(None);
    }
    let git = git(shared);
    let cwd = Path::new(&params.cwd);
    let top = work_tree(&git, params).await?;
    let repo = git.repo(&top);
    let found = read_repository(&repo, &top).await?;
    let base = if found.dirty.is_empty() {
        found.head.clone()
    } else {
        refuse_dirty(params, &top, &found.dirty)?;
        if preview {
            return preview_dirty(cwd, &top, found, notes).map(Some);
        }
        snapshot_dirty(&repo, &found, notes).await?
    };
    let Some(base) = base else {
        return Err(no_commit(&top));
    };
    Ok(Some(spec(cwd, &top, base, found)))
}

/// The run's workspace mode: its own parameter, else the team's, else the daemon's default.
fn mode(
    shared: &Shared,
    params: &api::RunParams,
    team_mode: Option<WorkspaceMode>,
) -> WorkspaceMode {
    match params.workspace {
        Some(api::WorkspaceMode::Worktree) => WorkspaceMode::Worktree,
        Some(api::WorkspaceMode::Shared) => WorkspaceMode::Shared,
        None => team_mode.unwrap_or(shared.config.default_workspace),
    }
}

/// The top of the git work tree the run's cwd is in. Refused when git cannot say, or when the
/// cwd is in no work tree.
async fn work_tree(git: &Git, params: &api::RunParams) -> Result<PathBuf, ApiError> {
    let top = git
        .toplevel(Path::new(&params.cwd))
        .await
        .map_err(|e| request_refused("workspace", format!("worktree mode needs git: {e}")))?;
    let Some(top) = top else {
        return Err(request_refused(
            "workspace",
            format!(
                "worktree mode needs the run's cwd inside a git work tree, and {} is not in one \
                 (use `workspace: \"shared\"`, or `git init` it)",
                params.cwd
            ),
        ));
    };
    // A repository whose work tree is set apart from its `.git` (`core.worktree`): git finds
    // no repository from that work tree, where crew runs every git of the run.
    match git.toplevel(&top).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(request_refused(
                "workspace",
                format!(
                    "worktree mode needs the repository's work tree to find its .git, and {} \
                     is the work tree of a repository elsewhere (`core.worktree`): use \
                     `workspace: \"shared\"`",
                    top.display()
                ),
            ))
        }
        Err(e) => {
            return Err(request_refused(
                "workspace",
                format!("worktree mode needs git: {e}"),
            ))
        }
    }
    Ok(top)
}

/// What the user's repository holds when the run is planned.
struct Found {
    /// `None` in a repository without commits.
    head: Option<String>,
    /// Paths with uncommitted changes (empty: the tree is clean).
    dirty: Vec<String>,
    /// The user's branch (`None` when detached).
    branch: Option<String>,
}

/// Read the repository at `top`, refusing branches that would clash with crew's.
async fn read_repository(repo: &Repo, top: &Path) -> Result<Found, ApiError> {
    let head = repo.head().await.map_err(unreadable)?;
    refuse_clashing_branches(repo, top).await?;
    let dirty = repo.dirty_paths().await.map_err(unreadable)?;
    let branch = repo.current_branch().await.map_err(unreadable)?;
    Ok(Found {
        head,
        dirty,
        branch,
    })
}

/// A git failure reading the user's repository: the run is refused with it.
fn unreadable(e: GitError) -> ApiError {
    request_refused("workspace", format!("cannot read the repository: {e}"))
}

/// Refuse a dirty tree when the run says `dirty: "refuse"`, naming the first ten paths.
fn refuse_dirty(params: &api::RunParams, top: &Path, dirty: &[String]) -> Result<(), ApiError> {
    if params.dirty != Some(api::DirtyPolicy::Refuse) {
        return Ok(());
    }
    let shown: Vec<&str> = dirty.iter().take(10).map(String::as_str).collect();
    Err(request_refused(
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
    ))
}

/// The workspace a preview (`team.plan`) of a run from a dirty tree shows: the run will start
/// from a snapshot of the tree, which `team.run` makes, so the base shown is `HEAD`.
fn preview_dirty(
    cwd: &Path,
    top: &Path,
    found: Found,
    notes: &mut Vec<String>,
) -> Result<WorkspaceSpec, ApiError> {
    if found.head.is_none() {
        return Err(no_commit(top));
    }
    // A preview writes nothing to the repository: the snapshot is made by `team.run`.
    notes.push(format!(
        "the run will start from your uncommitted changes too ({} path(s)), committed \
         when it starts without touching your tree, index or stash",
        found.dirty.len()
    ));
    let base = found.head.clone().unwrap_or_default();
    Ok(spec(cwd, top, base, found))
}

/// The base of a run from a dirty tree: a snapshot of the tree committed on top of `HEAD`
/// (`Repo::snapshot`: the user's tree, index and stash untouched), told to the user in a note.
async fn snapshot_dirty(
    repo: &Repo,
    found: &Found,
    notes: &mut Vec<String>,
) -> Result<Option<String>, ApiError> {
    let snap = repo
        .snapshot("crew: the uncommitted changes a run started from")
        .await
        .map_err(unreadable)?;
    notes.push(format!(
        "the run starts from your uncommitted changes too ({} path(s)), committed as {} \
         without touching your tree, index or stash",
        found.dirty.len(),
        snap.as_deref().map_or("", short)
    ));
    Ok(snap.or(found.head.clone()))
}

/// Worktree mode starts from a commit, and the repository has none.
fn no_commit(top: &Path) -> ApiError {
    request_refused(
        "workspace",
        format!(
            "{} has no commit yet: commit something first, worktree mode starts from a commit",
            top.display()
        ),
    )
}

/// The run's workspace, starting from `base`.
fn spec(cwd: &Path, top: &Path, base: String, found: Found) -> WorkspaceSpec {
    WorkspaceSpec {
        repo: top.to_string_lossy().into_owned(),
        subdir: subdir_of(cwd, top),
        base,
        head: found.head,
        dirty: !found.dirty.is_empty(),
        branch: found.branch,
        conflicts: Default::default(),
        resolver: None,
    }
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
        let found = repo.resolve(&full).await.map_err(|e| {
            request_refused("workspace", format!("cannot read the repository: {e}"))
        })?;
        if found.is_some() {
            return Err(request_refused(
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
