//! Integration: once a run's tasks are done, its leaves' results merged on the run's branch
//! `crew/<runId>`. A branch the user resolved a conflict on is taken as it is (`conflict.rs`); a
//! merge that conflicts blocks the run, for the user or a resolver.

use super::worktree::{empty_trash, retire};
use super::{all_worktrees, conflict, git, worktrees_dir, LEGACY_REPO_FILE, REPO_FILE};
use crate::shared::Shared;
use crew_core::run::workspace::{integration_conflict_ref, run_branch};
use crew_core::run::{Integration, WorkspaceSpec};
use crew_git::{Git, GitError, MergeOutcome, Repo};
use std::sync::Arc;

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
    sweep(&git, &repo, shared, run_id).await;
    // Tests hold the merge here (after the sweep of leftovers, which runs the instant every
    // task is done) and retry a task meanwhile.
    let _ = tokio::task::spawn_blocking(|| crate::executor::fault::hit("integrate")).await;
    let target = Target::new(run_id, leaves);
    let commit = merged(&repo, ws, &target, tasks).await?;
    let stat = repo
        .diffstat(&ws.base, &commit)
        .await
        .map_err(|x| target.failed(x))?;
    Ok(Integration {
        branch: target.branch,
        commit,
        files: stat.files,
        insertions: stat.insertions,
        deletions: stat.deletions,
    })
}

/// Before the merge, clear what a killed daemon left: the run's unfinished worktrees, and the
/// trash with git's metadata of what is in it.
async fn sweep(git: &Git, repo: &Repo, shared: &Shared, run_id: &str) {
    // Tests hold the sweep here and retry a task meanwhile.
    let _ = tokio::task::spawn_blocking(|| crate::executor::fault::hit("sweep")).await;
    cleanup_leftovers(git, repo, shared, run_id).await;
    // Metadata of a worktree moved to the trash by a daemon killed before it dropped it.
    let _ = repo.prune_worktrees_under(&all_worktrees(shared)).await;
    empty_trash(shared);
}

/// The run's branch and what is merged on it, named once for every step of the integration.
struct Target<'a> {
    run_id: &'a str,
    /// `crew/<runId>`.
    branch: String,
    /// The branch's full ref.
    bref: String,
    /// Where crew left a conflict on the branch for the user (`conflict.rs`).
    cref: String,
    /// The leaves' results, in the order they are merged.
    inputs: Vec<conflict::Input>,
}

impl<'a> Target<'a> {
    /// Where its conflict is resolved by hand.
    fn place<'b>(&'b self, ws: &'b WorkspaceSpec) -> conflict::Place<'b> {
        conflict::Place {
            repo: &ws.repo,
            run_id: self.run_id,
            branch: &self.branch,
            task: None,
        }
    }

    fn new(run_id: &'a str, leaves: &[(String, String)]) -> Self {
        let branch = run_branch(run_id);
        Target {
            run_id,
            bref: format!("refs/heads/{branch}"),
            cref: integration_conflict_ref(run_id),
            inputs: leaves
                .iter()
                .map(|(t, c)| conflict::Input {
                    task: t.clone(),
                    commit: c.clone(),
                })
                .collect(),
            branch,
        }
    }

    /// A git failure on the way: the run is blocked, saying on which branch.
    fn failed(&self, e: GitError) -> Blocked {
        Blocked::from(format!(
            "cannot integrate the run's results on {}: {e}",
            self.branch
        ))
    }
}

/// The commit on the run's branch holding every leaf: the branch's tip when it is one (a user's
/// resolution is taken as it is), else a new merge of the leaves.
async fn merged(
    repo: &Repo,
    ws: &WorkspaceSpec,
    t: &Target<'_>,
    tasks: &[(String, String, String)],
) -> Result<String, Blocked> {
    // Resumed after the user resolved a conflict on the branch (or integrated before).
    let tip = conflict::read_tip(repo, &t.bref, &t.cref, &t.inputs, true)
        .await
        .map_err(|x| t.failed(x))?;
    match tip {
        conflict::Tip::Take(tip) => {
            conflict::settled(repo, &t.bref, &tip, &t.cref)
                .await
                .map_err(|x| t.failed(x))?;
            Ok(tip)
        }
        conflict::Tip::Lacks { tip, missing } => {
            Err(conflict::lacks_message(&t.place(ws), &tip, &missing).into())
        }
        conflict::Tip::Markers { tip, found } => {
            Err(conflict::markers_message(&t.place(ws), &tip, &found).into())
        }
        conflict::Tip::Merge => merge_leaves(repo, ws, t, tasks).await,
    }
}

/// The run's branch is not moved to `to` while a checkout of the user's has it: their HEAD
/// would move under them, and their index and files then undo crew's change.
async fn not_under_the_user(repo: &Repo, t: &Target<'_>, to: &str) -> Result<(), Blocked> {
    let at = repo.resolve(&t.bref).await.map_err(|x| t.failed(x))?;
    if at.as_deref() == Some(to) {
        return Ok(());
    }
    let checked_out = repo.checked_out_branches().await.map_err(|x| t.failed(x))?;
    if !checked_out.contains(&t.bref) {
        return Ok(());
    }
    Err(format!(
        "{} is checked out in a checkout of yours (`git worktree list`), and crew would move it \
         under you to the run's new result: switch that checkout to another branch (git switch \
         -), then: crewctl resume {}",
        t.branch, t.run_id
    )
    .into())
}

/// Merge the leaves' results on the run's branch. A conflict leaves what merged so far on the
/// branch for the user and blocks the run, naming the tasks whose changes touched the
/// conflicting paths (for the message, and for a resolver's bounds).
async fn merge_leaves(
    repo: &Repo,
    ws: &WorkspaceSpec,
    t: &Target<'_>,
    tasks: &[(String, String, String)],
) -> Result<String, Blocked> {
    let commits: Vec<String> = t.inputs.iter().map(|i| i.commit.clone()).collect();
    let message = format!(
        "crew: run {}: merge of {}",
        t.run_id,
        t.inputs
            .iter()
            .map(|i| i.task.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (paths, with, merged_so_far) = match repo
        .merge_all(&commits, &message)
        .await
        .map_err(|x| t.failed(x))?
    {
        MergeOutcome::Clean(c) => {
            not_under_the_user(repo, t, &c).await?;
            conflict::settled(repo, &t.bref, &c, &t.cref)
                .await
                .map_err(|x| t.failed(x))?;
            return Ok(c);
        }
        MergeOutcome::Conflict {
            paths,
            with,
            merged_so_far,
        } => (paths, with, merged_so_far),
    };
    not_under_the_user(repo, t, &merged_so_far).await?;
    conflict::leave_for_user(repo, &t.bref, &t.cref, &merged_so_far)
        .await
        .map_err(|x| t.failed(x))?;
    let involved = touched_by(repo, tasks, &paths).await;
    let reason = conflict::manual_message(
        &t.place(ws),
        "the run's tasks",
        &t.inputs,
        &conflict::Stopped {
            with: &with,
            paths: &paths,
            touched_by: &involved,
        },
    );
    Err(Blocked {
        reason,
        conflict: Some(crew_core::run::resolve::Conflict::bounded(
            &paths, &involved,
        )),
    })
}

/// The tasks (id, start, result commit) whose change touched any of `paths`; a change git
/// cannot list counts as touching none.
async fn touched_by(
    repo: &Repo,
    tasks: &[(String, String, String)],
    paths: &[String],
) -> Vec<String> {
    let mut involved = Vec::new();
    for (id, start, commit) in tasks {
        let touched = repo.changed_paths(start, commit).await.unwrap_or_default();
        if touched.iter().any(|p| paths.contains(p)) {
            involved.push(id.clone());
        }
    }
    involved
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
        let path = entry.path();
        // Not a worktree an attempt is using (a task retried while the run integrates), nor a
        // checkout readers are in.
        let retired = shared
            .checkouts
            .if_unused(&path, || retire(git, repo, &path, &keep))
            .await;
        if !retired {
            tracing::debug!(path = %path.display(), "in use: not a leftover");
        }
    }
}
