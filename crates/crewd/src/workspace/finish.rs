//! Finishing an attempt: its result becomes a commit on the task's branch with a diffstat and a
//! patch artifact (a reused result's cached commit, or a user's resolution, is taken as it is),
//! or its tree is kept under the attempt's ref; then the worktree goes. A resolve task's result
//! is checked for conflict markers (`check_resolution`).

use super::worktree::{discard, retire};
use super::{failed, git, git_failed, short, Prepared, TaskWorkspace, PATCH_MAX};
use crate::shared::Shared;
use crew_core::checks::VerifyOutcome;
use crew_core::run::workspace::{attempt_ref, conflict_ref, result_ref, task_branch};
use crew_core::run::{ArtifactRef, AttemptResult, ReusedFrom, TaskCommit};
use crew_core::usage::Usage;
use crew_git::{Git, GitError, Repo};
use std::path::Path;

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
        return take_resolution(shared, &repo, &prepared, &tip, result).await;
    }
    match End::of(result) {
        End::Completed(report, Some(cached)) if report.reused_from.is_some() => {
            take_reused(shared, &git, &repo, ws, &prepared, report, &cached.commit).await
        }
        End::Completed(report, _) => commit_work(shared, &git, &repo, ws, &prepared, report).await,
        End::Other(other) => {
            keep_tree(&git, &repo, ws, &prepared).await;
            (other, None)
        }
    }
}

/// What a completed attempt reported besides its commit: carried over unchanged to the result
/// the worktree step makes.
struct Report {
    usage: Usage,
    model: Option<String>,
    artifacts: Vec<ArtifactRef>,
    reused_from: Option<ReusedFrom>,
    verification: Vec<VerifyOutcome>,
}

/// How the attempt ended, as the worktree step sees it.
enum End {
    /// Completed: its report, and the commit it names (a reused result's cached commit).
    Completed(Report, Option<TaskCommit>),
    /// Any other end, handed on as it is.
    Other(AttemptResult),
}

impl End {
    fn of(result: AttemptResult) -> End {
        match result {
            AttemptResult::Completed {
                usage,
                model,
                artifacts,
                reused_from,
                commit,
                verification,
            } => End::Completed(
                Report {
                    usage,
                    model,
                    artifacts,
                    reused_from,
                    verification,
                },
                commit,
            ),
            other => End::Other(other),
        }
    }
}

impl Report {
    /// The completed result, with the commit the worktree step made or took.
    fn completed(self, commit: TaskCommit) -> AttemptResult {
        AttemptResult::Completed {
            usage: self.usage,
            model: self.model,
            artifacts: self.artifacts,
            reused_from: self.reused_from,
            commit: Some(commit),
            verification: self.verification,
        }
    }
}

/// A resolve task whose branch holds the user's resolution (`Prepared::taken`): a completed
/// attempt takes `tip` as the result; any other end is the attempt's, with no worktree to keep
/// (`prepare` made none).
async fn take_resolution(
    shared: &Shared,
    repo: &Repo,
    prepared: &Prepared,
    tip: &str,
    result: AttemptResult,
) -> (AttemptResult, Option<Vec<u8>>) {
    let report = match End::of(result) {
        End::Completed(report, _) => report,
        End::Other(other) => return (other, None),
    };
    match adopt(shared, repo, prepared, tip).await {
        Ok((commit, patch)) => (report.completed(commit), Some(patch)),
        Err(e) => (git_failed("cannot take your resolution", e), None),
    }
}

/// A reused result of a writing task: its cached commit becomes the task's (`adopt`). If that
/// fails, the worktree is kept under the attempt's ref.
async fn take_reused(
    shared: &Shared,
    git: &Git,
    repo: &Repo,
    ws: &TaskWorkspace,
    prepared: &Prepared,
    report: Report,
    cached: &str,
) -> (AttemptResult, Option<Vec<u8>>) {
    match adopt(shared, repo, prepared, cached).await {
        Ok((commit, patch)) => (report.completed(commit), Some(patch)),
        Err(e) => {
            keep_tree(git, repo, ws, prepared).await;
            (git_failed("cannot take the reused result commit", e), None)
        }
    }
}

/// The agent's work committed on the task's branch (`record`), refused when the commit drops
/// the task's start (`off_start`). A failure keeps the attempt's usage; if the commit cannot be
/// made, the worktree is kept under the attempt's ref.
async fn commit_work(
    shared: &Shared,
    git: &Git,
    repo: &Repo,
    ws: &TaskWorkspace,
    prepared: &Prepared,
    report: Report,
) -> (AttemptResult, Option<Vec<u8>>) {
    match record(shared, git, repo, ws, prepared).await {
        Ok((commit, patch)) => match off_start(repo, ws, prepared, &commit).await {
            Some(refused) => (with_usage(refused, report.usage), None),
            None => (report.completed(commit), Some(patch)),
        },
        Err(e) => {
            keep_tree(git, repo, ws, prepared).await;
            let r = git_failed("cannot commit the task's result", e);
            (with_usage(r, report.usage), None)
        }
    }
}

/// Keep what the attempt's worktree holds under the attempt's ref, and remove the worktree.
async fn keep_tree(git: &Git, repo: &Repo, ws: &TaskWorkspace, prepared: &Prepared) {
    let keep = attempt_ref(&ws.run_id, &ws.task_id, ws.attempt);
    retire(git, repo, &prepared.worktree, &keep).await;
}

/// A failure of the worktree step, given the usage of the attempt it ended.
fn with_usage(mut failure: AttemptResult, usage: Usage) -> AttemptResult {
    if let AttemptResult::Failed { usage: u, .. } = &mut failure {
        *u = usage;
    }
    failure
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

/// Commit what the agent left in the worktree on the task's branch, with the diffstat and patch
/// against the task's start; the worktree then goes, its content being on the branch.
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
    // Marked as crew's: the branch's reflog names the agent's identity when it committed.
    repo.update_ref(&result_ref(&ws.run_id, &ws.task_id), &commit)
        .await?;
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
