//! A task's start: the inputs the actor freezes for it (`task_workspace`), then, on the worker,
//! its worktree at its start commit (`prepare`). The start commit is the merge of the task's
//! inputs, recorded so a retry starts where the first attempt did; a conflict there, or in a
//! resolve task's inputs, is handed to the user or a resolver (`conflict.rs`). Read-only tasks
//! join a shared checkout instead (`readers.rs`).

use super::finish::resolution_markers;
use super::worktree::{add_worktree, retire};
use super::{
    conflict, failed, git, git_failed, readers, seed, short, worktrees_dir, Prepared,
    TaskWorkspace, REPO_FILE,
};
use crate::shared::Shared;
use crew_core::run::workspace::{
    attempt_ref, before_attempt_ref, conflict_ref, result_ref, start_ref, task_branch,
};
use crew_core::run::AttemptResult;
use crew_core::usage::Usage;
use crew_git::{Git, GitError, MergeOutcome, Repo};
use std::path::{Path, PathBuf};

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
    let held = shared.checkouts.hold(&path).await;
    // Left by an attempt that did not end (crewd was killed): kept as a ref, then gone.
    let orphaned = path.exists();
    if orphaned {
        let keep = attempt_ref(&ws.run_id, &ws.task_id, ws.attempt.saturating_sub(1));
        retire(&git, &repo, &path, &keep).await;
    }
    if ws.resolve && orphaned {
        // What moved the resolver's branch was that attempt's agent (its worktree had the
        // branch checked out, so no worktree of the user's could): not the user's resolution,
        // which only comes after the resolver gave up. Back to the conflicts, where the next
        // attempt starts; the agent's commits stay under the attempt's ref.
        reset_to_mark(&repo, ws, &branch).await;
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
                    held: Some(held),
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
    if !ws.resolve {
        keep_branch_tip(&repo, ws, &branch, &start).await?;
    }
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
        held: Some(held),
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
        held: None,
    })
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
            return attention(conflict::lacks_message(&place(ws, branch), &tip, &missing));
        }
        conflict::Tip::Markers { tip, found } => {
            return attention(conflict::markers_message(&place(ws, branch), &tip, &found));
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
                &place(ws, branch),
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

async fn all_contained(repo: &Repo, inputs: &[String], tip: &str) -> Result<bool, GitError> {
    for i in inputs {
        if !repo.is_ancestor(i, tip).await? {
            return Ok(false);
        }
    }
    Ok(true)
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
                    refused(conflict::markers_message(&place(ws, branch), &tip, &found))
                } else if repo.checked_out_branches().await?.contains(&bref) {
                    refused(conflict::checked_out_message(&ws.run_id, branch))
                } else {
                    Ok(ResolveStart::Taken { mark, tip })
                }
            }
            conflict::Tip::Lacks { tip, missing } => {
                refused(conflict::lacks_message(&place(ws, branch), &tip, &missing))
            }
            conflict::Tip::Markers { tip, found } => {
                refused(conflict::markers_message(&place(ws, branch), &tip, &found))
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

/// A resolve task's branch back at the conflict mark crew left, if there is one.
async fn reset_to_mark(repo: &Repo, ws: &TaskWorkspace, branch: &str) {
    let cref = conflict_ref(&ws.run_id, &ws.task_id);
    if let Ok(Some(mark)) = repo.resolve(&cref).await {
        if let Err(e) = repo
            .update_ref(&format!("refs/heads/{branch}"), &mark)
            .await
        {
            tracing::warn!(error = %e, "cannot put the resolver's branch back at the conflicts");
        }
    }
}

/// Before the task's branch is moved to `start` (`worktree add -B`): what it holds that a
/// retry or a resume would drop. Crew's own earlier result is kept
/// (`refs/crew/<run>/<task>/before-attempt-<n>`); a branch checked out in a worktree of the
/// user's, or holding a commit crew did not put there, is not moved: the task needs attention
/// and says how to keep the work.
async fn keep_branch_tip(
    repo: &Repo,
    ws: &TaskWorkspace,
    branch: &str,
    start: &str,
) -> Result<(), NotStarted> {
    let bref = format!("refs/heads/{branch}");
    let tip = match repo.resolve(&bref).await {
        Ok(Some(t)) if t != start => t,
        Ok(_) => return Ok(()),
        Err(e) => return Err(git_failed("cannot read the task's branch", e).into()),
    };
    let checked_out = repo.checked_out_branches().await.unwrap_or_default();
    if checked_out.contains(&bref) {
        return Err(needs_attention(conflict::checked_out_message(&ws.run_id, branch)).into());
    }
    // The result crew recorded last: crew's, though an agent's own commit is made as the user.
    let rref = result_ref(&ws.run_id, &ws.task_id);
    let recorded = repo.resolve(&rref).await.ok().flatten().as_deref() == Some(tip.as_str());
    if !recorded {
        match repo.last_move(&bref).await {
            // No reflog to tell by (`core.logAllRefUpdates` off): crew's, as before it looked.
            Ok(None) => {}
            Ok(Some(m)) if m.email == crew_git::AUTHOR_EMAIL && m.commit == tip => {}
            _ => return Err(moved_by_someone(ws, branch, &tip, start)),
        }
    }
    let keep = before_attempt_ref(&ws.run_id, &ws.task_id, ws.attempt);
    if let Err(e) = repo.update_ref(&keep, &tip).await {
        return Err(git_failed("cannot keep the task's earlier result", e).into());
    }
    Ok(())
}

/// A task branch holding a commit crew did not put there: how to keep it and go on.
fn moved_by_someone(ws: &TaskWorkspace, branch: &str, tip: &str, start: &str) -> NotStarted {
    needs_attention(format!(
        "{branch} holds a commit crew did not put there ({}: yours?); the task starts over \
         from {} and would drop it from the branch. Keep it on a branch of your own (git \
         branch <name> {}), then move crew's back (git branch -f {branch} {}), then: crewctl \
         resume {}",
        short(tip),
        short(start),
        short(tip),
        short(start),
        ws.run_id
    ))
    .into()
}

fn needs_attention(reason: String) -> AttemptResult {
    AttemptResult::NeedsAttention {
        usage: Usage::default(),
        model: None,
        artifacts: Vec::new(),
        reason,
    }
}

/// The attempt's cwd: the run's subdirectory of the worktree.
fn path_in(worktree: &Path, subdir: &str) -> PathBuf {
    if subdir.is_empty() {
        worktree.to_path_buf()
    } else {
        worktree.join(subdir)
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

/// Where a conflict of `ws`'s inputs is resolved by hand: its branch, in a worktree named for
/// the task.
fn place<'a>(ws: &'a TaskWorkspace, branch: &'a str) -> conflict::Place<'a> {
    conflict::Place {
        repo: &ws.repo,
        run_id: &ws.run_id,
        branch,
        task: Some(ws.task_id.as_str()),
    }
}
