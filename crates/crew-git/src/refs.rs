//! What crew needs to know before it deletes one of its own branches: whether any worktree has
//! it checked out, and who moved it last.

use crate::{GitError, Repo};

/// The newest reflog entry of a ref: who wrote it and the commit it set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastMove {
    pub email: String,
    pub commit: String,
}

impl Repo {
    /// The branches (full names) checked out in any worktree of the repository, or being
    /// rebased or bisected in one (git counts those as checked out too).
    pub async fn checked_out_branches(&self) -> Result<Vec<String>, GitError> {
        let out = self
            .run(&["worktree", "list", "--porcelain", "-z"], &[])
            .await?;
        let mut branches: Vec<String> = out
            .split(|b| *b == 0)
            .filter_map(|l| l.strip_prefix(b"branch "))
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect();
        // A worktree mid-rebase or mid-bisect has a detached HEAD; the branch is named in its
        // rebase state (a full name), or in `BISECT_START` (a short one, or a commit id when
        // the bisect started detached): `git bisect reset` checks it out again.
        for path in crate::parse::worktree_paths(&out) {
            let wt = self.git.repo(&path);
            for name in [
                "rebase-merge/head-name",
                "rebase-apply/head-name",
                "BISECT_START",
            ] {
                let Ok(p) = wt.git_path(name).await else {
                    continue;
                };
                let Ok(s) = tokio::fs::read_to_string(&p).await else {
                    continue;
                };
                let s = s.trim();
                let b = if s.starts_with("refs/heads/") {
                    s.to_string()
                } else if name == "BISECT_START" && !s.is_empty() && !crate::is_oid(s) {
                    format!("refs/heads/{s}")
                } else {
                    continue;
                };
                if !branches.contains(&b) {
                    branches.push(b);
                }
            }
        }
        Ok(branches)
    }

    /// The newest reflog entry of `name`; `None` when it has no reflog (reflogs off, or the
    /// ref is not there).
    pub async fn last_move(&self, name: &str) -> Result<Option<LastMove>, GitError> {
        let args = [
            "log",
            "-g",
            "-1",
            "--no-show-signature",
            "--format=%ge%x00%H",
            name,
            "--",
        ];
        let out = self.raw(&args, &[]).await?;
        if out.code != Some(0) {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let Some((email, commit)) = text.trim().split_once('\0') else {
            return Ok(None);
        };
        Ok(Some(LastMove {
            email: email.to_string(),
            commit: commit.to_string(),
        }))
    }
}
