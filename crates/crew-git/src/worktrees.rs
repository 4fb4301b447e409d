//! Removing the metadata of crew's own worktrees only. `git worktree prune` drops every entry
//! whose directory is absent at that moment, the user's too (an unmounted drive, a directory
//! being moved), so crew never runs it: it removes the entry of a worktree it moved aside by
//! name, and prunes only entries whose directory lies under its own state directory.

use crate::{worktree_lock, GitError, Repo};
use std::path::{Path, PathBuf};

/// The repository's metadata directory of the worktree at `worktree` (`.git/worktrees/<x>`),
/// read from the worktree's `.git` file; `None` when it is not a linked worktree.
pub fn admin_dir(worktree: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(worktree.join(".git")).ok()?;
    let dir = text.trim().strip_prefix("gitdir:")?.trim();
    Some(PathBuf::from(dir))
}

impl Repo {
    /// Drop the metadata `admin` (from [`admin_dir`]) of crew's worktree that was at
    /// `worktree` and has been moved away or deleted. Only an entry whose `gitdir` names
    /// `worktree` is touched.
    pub async fn forget_worktree(&self, worktree: &Path, admin: &Path) -> Result<(), GitError> {
        let lock = worktree_lock(&self.dir);
        let _held = lock.lock().await;
        let common = self.common_dir().await?;
        if admin.parent() != Some(common.join("worktrees").as_path()) {
            return Ok(());
        }
        let names = std::fs::read_to_string(admin.join("gitdir")).unwrap_or_default();
        if !same_place(Path::new(names.trim()), &worktree.join(".git")) {
            return Ok(());
        }
        match tokio::fs::remove_dir_all(admin).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// Drop the metadata of worktrees whose directory is gone and lay under `under` (crew's
    /// state directory): what a daemon killed between moving a worktree aside and dropping its
    /// entry left. Entries elsewhere, the user's, are never touched.
    pub async fn prune_worktrees_under(&self, under: &Path) -> Result<(), GitError> {
        let lock = worktree_lock(&self.dir);
        let _held = lock.lock().await;
        let dir = self.common_dir().await?.join("worktrees");
        let Ok(mut rd) = tokio::fs::read_dir(&dir).await else {
            return Ok(());
        };
        while let Some(entry) = rd.next_entry().await? {
            let admin = entry.path();
            let Ok(names) = tokio::fs::read_to_string(admin.join("gitdir")).await else {
                continue;
            };
            let gitfile = PathBuf::from(names.trim());
            let canon_under = under.canonicalize().unwrap_or_else(|_| under.to_path_buf());
            let ours = gitfile.starts_with(under) || gitfile.starts_with(&canon_under);
            if !ours || tokio::fs::try_exists(&gitfile).await? {
                continue;
            }
            if tokio::fs::try_exists(admin.join("locked")).await? {
                continue;
            }
            if let Err(e) = tokio::fs::remove_dir_all(&admin).await {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }
}

/// Whether `a` and `b` name the same entry, judged by their parents' real paths (git records
/// real paths; the entry itself may be gone).
fn same_place(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    let real = |p: &Path| -> Option<PathBuf> {
        Some(p.parent()?.canonicalize().ok()?.join(p.file_name()?))
    };
    matches!((real(a), real(b)), (Some(x), Some(y)) if x == y)
}

/// A boxed attempt's worktree (issue 34): every ref is read-only in the box, so its HEAD is
/// detached for the attempt — the agent's own commits then move only that HEAD, which lives in
/// the worktree's metadata directory — and put back on the task's branch after it.
impl Repo {
    /// In a linked worktree: detach HEAD at the commit it is on (the branch stays where it is).
    pub async fn detach_head(&self) -> Result<(), GitError> {
        let args = [
            "update-ref",
            "--no-deref",
            "-m",
            "crew: boxed attempt",
            "HEAD",
            "HEAD",
        ];
        self.run(&args, &[]).await.map(|_| ())
    }

    /// Each worktree of the repository on a branch: its path and the branch (full name).
    pub async fn worktree_branches(&self) -> Result<Vec<(std::path::PathBuf, String)>, GitError> {
        let out = self
            .run(&["worktree", "list", "--porcelain", "-z"], &[])
            .await?;
        Ok(crate::parse::worktree_branches(&out))
    }

    /// The commit HEAD is at in the linked worktree whose metadata directory is `admin`.
    pub async fn head_at(&self, admin: &Path) -> Result<String, GitError> {
        let dir = admin.as_os_str().to_owned();
        let env = [("GIT_DIR", &dir)];
        let rev = ["rev-parse", "--verify", "--end-of-options", "HEAD^{commit}"];
        self.oid(&rev, &env).await
    }

    /// In a linked worktree whose metadata directory is `admin`: move `branch` (a full ref
    /// name) to the commit HEAD is at, and HEAD back onto `branch`; that commit. git reads
    /// the worktree through `admin` (the one crew made, not what the worktree's `.git` file
    /// says after the attempt).
    pub async fn attach_head(&self, admin: &Path, branch: &str) -> Result<String, GitError> {
        let dir = admin.as_os_str().to_owned();
        let env = [("GIT_DIR", &dir)];
        let rev = ["rev-parse", "--verify", "--end-of-options", "HEAD^{commit}"];
        let head = self.oid(&rev, &env).await?;
        let update = [
            "update-ref",
            "-m",
            "crew: the boxed attempt's commits",
            branch,
            head.as_str(),
        ];
        self.run(&update, &env).await?;
        let attach = ["symbolic-ref", "-m", "crew: boxed attempt", "HEAD", branch];
        self.run(&attach, &env).await?;
        Ok(head)
    }
}
