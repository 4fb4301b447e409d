//! How crew adds and removes the worktrees its tasks work in. A worktree that may hold
//! unrecorded work is retired (its tree kept under a ref first); one whose content is on its
//! branch is discarded (moved to the trash and deleted in the background).

use crate::shared::Shared;
use crew_git::{Git, GitError, Repo};
use std::path::{Path, PathBuf};

/// Save what a worktree holds (if anything changed) under the attempt's ref, then remove it.
/// One whose content could not be saved because its repository is gone (moved or deleted) is
/// not removed: its files are moved aside to `<state>/unsaved/` and the log says where.
pub(super) async fn retire(git: &Git, repo: &Repo, path: &Path, keep_as: &str) {
    if path.join(".git").exists() {
        let wt = git.repo(path);
        let saved = match wt.snapshot("crew: an earlier attempt's tree").await {
            Ok(Some(c)) => repo.update_ref(keep_as, &c).await,
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        // Set aside only when the repository itself is gone (moved, deleted): a passing
        // failure (a timeout, a ref lock) must not pile up copies of worktrees.
        let gone = match &saved {
            Ok(()) => false,
            Err(_) => !tokio::fs::try_exists(repo.dir()).await.unwrap_or(true),
        };
        if let (Err(e), false) = (&saved, gone) {
            tracing::warn!(error = %e, "cannot save an earlier attempt's tree");
        }
        if let (Err(e), true) = (&saved, gone) {
            match set_aside(path).await {
                Ok(to) => tracing::warn!(
                    error = %e, path = %path.display(), kept = %to.display(),
                    "cannot save a worktree's content in its repository: its files are kept aside"
                ),
                Err(m) => tracing::warn!(
                    error = %e, path = %path.display(), move_error = %m,
                    "cannot save a worktree's content in its repository, nor move it aside: left in place"
                ),
            }
            return;
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

/// Move a worktree whose content could not be saved to `<state>/unsaved/<run>/<name>-<n>`
/// (`path` is `<state>/worktrees/<run>/<name>`), out of the way of the next attempt's and of
/// every sweep: only the user removes it.
async fn set_aside(path: &Path) -> std::io::Result<PathBuf> {
    let missing = || std::io::Error::other("not under <state>/worktrees/<run>/");
    let name = path.file_name().ok_or_else(missing)?.to_os_string();
    let run_dir = path.parent().ok_or_else(missing)?;
    let run = run_dir.file_name().ok_or_else(missing)?;
    let state = run_dir
        .parent()
        .and_then(Path::parent)
        .ok_or_else(missing)?;
    let into = state.join("unsaved").join(run);
    tokio::fs::create_dir_all(&into).await?;
    for n in 1..=1000u32 {
        let mut to_name = name.clone();
        to_name.push(format!("-{n}"));
        let to = into.join(to_name);
        if tokio::fs::try_exists(&to).await.unwrap_or(true) {
            continue;
        }
        tokio::fs::rename(path, &to).await?;
        return Ok(to);
    }
    Err(std::io::Error::other(
        "too many kept worktrees of this task",
    ))
}

/// `add` a worktree at `path`; after a failure, what it left (a half-made checkout, stale
/// metadata of a directory removed behind git's back) is removed and it is tried once more,
/// unless it ran out of time (another try would too: the attempt fails, retryably).
pub(super) async fn add_worktree<'a, F, Fut>(
    repo: &Repo,
    path: &'a Path,
    add: F,
) -> Result<(), GitError>
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
pub(super) async fn discard(shared: &Shared, repo: &Repo, path: &Path) {
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
        // No worktree was made (a resolution or a reused result taken as it is): nothing to
        // remove, and git would only say it is not a working tree.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && matches!(tokio::fs::try_exists(path).await, Ok(false)) => {}
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
pub(super) fn empty_trash(shared: &Shared) {
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
