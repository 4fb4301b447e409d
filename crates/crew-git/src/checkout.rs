//! What `team.apply` asks of the user's own checkout: the merge of a run's change made without
//! the work tree (`merge-tree --merge-base`), its commit (`commit-tree`, as the user), the
//! branch moved by compare-and-swap (`update-ref NEW OLD`), and the checkout brought to it in a
//! copy of the index (`read-tree -u`), which the caller puts in place. Each step either happens
//! whole or leaves what was there; the caller orders them (and journals its intent) so that a
//! failure or a crash leaves the checkout at the old commit or the new one, never between.

use crate::{check, parse, GitError, Repo};
use std::ffi::OsString;
use std::path::Path;

/// Whose name a commit carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// crew's fixed identity (`crew <crew@localhost>`), never signed: tasks' commits, merges on
    /// crew's branches, snapshots.
    Crew,
    /// The identity and signing the user's own `git commit` would use in this repository
    /// (config, `GIT_AUTHOR_*` of the daemon's environment, `commit.gpgSign`): commits made on
    /// the user's branch.
    User,
}

/// A git operation the user is in the middle of, during which crew does not move the branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InProgress {
    Merge,
    Rebase,
    CherryPick,
    Revert,
    Bisect,
}

impl InProgress {
    pub fn as_str(self) -> &'static str {
        match self {
            InProgress::Merge => "a merge",
            InProgress::Rebase => "a rebase",
            InProgress::CherryPick => "a cherry-pick",
            InProgress::Revert => "a revert",
            InProgress::Bisect => "a bisect",
        }
    }

    /// The command that ends it, for the refusal's advice.
    pub fn way_out(self) -> &'static str {
        match self {
            InProgress::Merge => "git merge --continue or --abort",
            InProgress::Rebase => "git rebase --continue or --abort",
            InProgress::CherryPick => "git cherry-pick --continue or --abort",
            InProgress::Revert => "git revert --continue or --abort",
            InProgress::Bisect => "git bisect reset",
        }
    }
}

impl Repo {
    /// The operation in progress in this checkout, if any (the files git itself looks at).
    pub async fn in_progress(&self) -> Result<Option<InProgress>, GitError> {
        for (name, what) in [
            ("rebase-merge", InProgress::Rebase),
            ("rebase-apply", InProgress::Rebase),
            ("MERGE_HEAD", InProgress::Merge),
            ("CHERRY_PICK_HEAD", InProgress::CherryPick),
            ("REVERT_HEAD", InProgress::Revert),
            ("BISECT_LOG", InProgress::Bisect),
            ("BISECT_START", InProgress::Bisect),
        ] {
            if tokio::fs::try_exists(self.git_path(name).await?).await? {
                return Ok(Some(what));
            }
        }
        // A cherry-pick or revert of several commits stopped between two of them leaves no
        // CHERRY_PICK_HEAD, only its sequencer's list of what is left.
        let todo = self.git_path("sequencer/todo").await?;
        if let Ok(list) = tokio::fs::read_to_string(&todo).await {
            let first = list
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .unwrap_or_default();
            let what = if first.starts_with("revert") {
                InProgress::Revert
            } else {
                InProgress::CherryPick
            };
            return Ok(Some(what));
        }
        Ok(None)
    }

    /// The full name of the branch HEAD points at (`refs/heads/…`); `None` when detached.
    pub async fn head_ref(&self) -> Result<Option<String>, GitError> {
        let out = self.raw(&["symbolic-ref", "--quiet", "HEAD"], &[]).await?;
        if out.code != Some(0) {
            return Ok(None);
        }
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok((!s.is_empty()).then_some(s))
    }

    /// The tree of `commit`.
    pub async fn tree_of(&self, commit: &str) -> Result<String, GitError> {
        self.oid(&["rev-parse", &format!("{commit}^{{tree}}")], &[])
            .await
    }

    /// The change `base..theirs` merged onto `ours`, three-way with `base` as the merge base
    /// (so exactly that change, whatever else `theirs`' history holds), without a work tree:
    /// `Ok(tree)`, or `Err(paths)` that conflict. Merge drivers and attributes are git's.
    pub async fn merge_onto(
        &self,
        base: &str,
        ours: &str,
        theirs: &str,
    ) -> Result<Result<String, Vec<String>>, GitError> {
        let merge_base = format!("--merge-base={base}");
        let args = [
            "merge-tree",
            "--write-tree",
            "--name-only",
            "-z",
            "--no-messages",
            merge_base.as_str(),
            ours,
            theirs,
        ];
        let out = self.raw(&args, &[]).await?;
        match out.code {
            Some(0) => Ok(Ok(parse::first_z_oid(&args, &out.stdout)?)),
            Some(1) => Ok(Err(parse::conflict_paths(&out.stdout))),
            _ => check(&args, out).map(|_| Err(Vec::new())),
        }
    }

    /// Whether the user's own `git commit` here would find an identity they configured (config
    /// or environment), not one git guesses from the host name.
    pub async fn user_identity_configured(&self) -> Result<bool, GitError> {
        for var in ["GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"] {
            let args = ["-c", "user.useConfigOnly=true", "var", var];
            let out = self.raw_as(&args, &[], None, Identity::User).await?;
            if out.code != Some(0) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A commit of `tree` with `parents` and `message` (given on stdin: it may be long), made
    /// as `who`. As the user it is signed when their config says so; a signing failure is an
    /// error and no commit exists.
    pub async fn commit_tree(
        &self,
        tree: &str,
        parents: &[&str],
        message: &str,
        who: Identity,
    ) -> Result<String, GitError> {
        let mut args = vec!["commit-tree", tree];
        match who {
            Identity::Crew => args.push("--no-gpg-sign"),
            // `commit-tree` does not read `commit.gpgSign` itself, `git commit` does.
            Identity::User if self.signs_commits().await? => args.push("-S"),
            Identity::User => {}
        }
        for p in parents {
            args.extend(["-p", p]);
        }
        args.extend(["-F", "-"]);
        let out = self
            .raw_as(&args, &[], Some(message.as_bytes().to_vec()), who)
            .await?;
        let out = check(&args, out)?;
        parse::oid(&args, &out)
    }

    /// Whether the user's config asks for signed commits (`commit.gpgSign`).
    async fn signs_commits(&self) -> Result<bool, GitError> {
        let args = ["config", "--type=bool", "--get", "commit.gpgSign"];
        let out = self.raw(&args, &[]).await?;
        Ok(out.code == Some(0) && String::from_utf8_lossy(&out.stdout).trim() == "true")
    }

    /// Move `name` (a full ref name; `None`: a detached HEAD) from `old` to `new`, atomically
    /// and only if it still is at `old`: a commit the user made meanwhile is never overwritten.
    pub async fn move_ref(
        &self,
        name: Option<&str>,
        new: &str,
        old: &str,
        reason: &str,
    ) -> Result<(), GitError> {
        let mut args = vec!["update-ref", "-m", reason];
        match name {
            Some(n) => args.push(n),
            None => args.extend(["--no-deref", "HEAD"]),
        }
        args.extend([new, old]);
        self.run(&args, &[]).await.map(|_| ())
    }

    /// Bring the work tree from `from`'s tree to `to`'s, recording it in the index file
    /// `index` (a copy of the real one, put in place by the caller): `read-tree -m -u`, which
    /// changes only the files that differ between the two and refuses before writing when one
    /// of them is not as the index says. Clean/smudge filters run as in the user's own
    /// checkout. A failure after it began writing leaves some files changed: `converge` puts
    /// them back.
    pub async fn check_out(&self, index: &Path, from: &str, to: &str) -> Result<(), GitError> {
        let idx: OsString = index.as_os_str().to_owned();
        let env = [("GIT_INDEX_FILE", &idx)];
        // `read-tree -u` judges a file up to date by its stat data alone: one touched but not
        // changed (a build, an editor saving as it was) since the index last looked was "not
        // uptodate" and the apply failed. Refreshed first, in this copy of the index (`-q`:
        // a file really changed is left for read-tree to refuse).
        self.run(&["update-index", "-q", "--refresh"], &env).await?;
        self.run(&["read-tree", "-m", "-u", from, to], &env)
            .await
            .map(|_| ())
    }

    /// The same in the index file `index` alone, the work tree neither touched nor looked at
    /// (`read-tree -i -m`): after a crash the work tree may hold the new version of files the
    /// index still has at the old (a git that went on writing after crewd died), which plain
    /// `-m` refuses as "not uptodate" at every start; `converge` looks at the files after.
    pub async fn merge_index(&self, index: &Path, from: &str, to: &str) -> Result<(), GitError> {
        let idx: OsString = index.as_os_str().to_owned();
        let env = [("GIT_INDEX_FILE", &idx)];
        self.run(&["read-tree", "-i", "-m", from, to], &env)
            .await
            .map(|_| ())
    }

    /// Whether the index (file `index`, or the checkout's own) holds exactly `commit`'s tree.
    pub async fn index_is(&self, index: Option<&Path>, commit: &str) -> Result<bool, GitError> {
        let idx: Option<OsString> = index.map(|i| i.as_os_str().to_owned());
        let env: Vec<(&str, &OsString)> = idx.iter().map(|i| ("GIT_INDEX_FILE", i)).collect();
        let args = ["diff-index", "--cached", "--quiet", commit, "--"];
        let out = self.raw(&args, &env).await?;
        match out.code {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => check(&args, out).map(|_| false),
        }
    }
}
