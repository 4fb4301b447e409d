//! The git crew's workspaces need, through the user's own `git` CLI.
//!
//! Why the CLI and not gix/git2: the CLI is the one implementation that is complete for what a
//! workspace touches — worktrees, `merge-tree --write-tree`, clean/smudge filters (LFS),
//! `core.autocrlf`, `safe.directory`, includes and conditional config — and it is what the user
//! already trusts on this repository. Every call is a process with a timeout (killed when it runs
//! over), stdin closed, hooks disabled, the environment's `GIT_DIR`-style overrides removed, and
//! optional locks off, so reading the user's repository never rewrites its index.
//!
//! No call starts a program the repository's config names that crew does not need: every call
//! runs with `core.fsmonitor=false` (a repository's fsmonitor hook is a program of its choice),
//! and the diffs crew makes with `--no-ext-diff --no-textconv`. Clean/smudge filters and merge
//! drivers stay honoured: they are what makes crew's commits and merges the user's own.
//!
//! Nothing here touches the user's work tree, index, stash or branches unless a function says so
//! (`checkout.rs` is the part that does, for `team.apply`).

mod checkout;
mod converge;
mod error;
mod markers;
mod objects;
mod parse;
mod refs;
mod worktrees;

pub use checkout::{Identity, InProgress};
pub use markers::Marked;
pub use refs::LastMove;
pub use worktrees::admin_dir;

pub use error::GitError;
pub use parse::{is_oid, Diffstat, MergeOutcome};

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The identity of every commit crew makes (results, merges, snapshots).
/// What every git crew runs is given before its arguments: the repository's hooks and its
/// fsmonitor program (git starts it for every status, add, checkout, read-tree and fetch in a
/// work tree) never run for crew. `Repo`'s own commands add them; a git started elsewhere
/// (a Slurm attempt's bundles) takes them from here.
pub const GUARDS: [&str; 4] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
];

pub const AUTHOR_NAME: &str = "crew";
pub const AUTHOR_EMAIL: &str = "crew@localhost";

/// How to run git: which program, how long one call may take, and what every git process
/// carries in its environment besides (crewd's mark, by which its next start finds the git
/// processes a killed daemon left running).
#[derive(Debug, Clone)]
pub struct Git {
    pub program: PathBuf,
    pub timeout: Duration,
    pub tag: Option<(String, String)>,
}

impl Default for Git {
    fn default() -> Self {
        Git {
            program: PathBuf::from("git"),
            timeout: Duration::from_secs(120),
            tag: None,
        }
    }
}

/// A directory git runs in: the user's checkout, or one of crew's worktrees.
#[derive(Debug, Clone)]
pub struct Repo {
    pub(crate) git: Git,
    dir: PathBuf,
}

/// What one call returned.
struct Out {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Environment variables that would point git at another repository or index than the one
/// asked for; the daemon's own environment may carry them (it was started from a hook, say).
const SCRUBBED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_PREFIX",
    "GIT_NAMESPACE",
];

impl Git {
    pub fn repo(&self, dir: impl Into<PathBuf>) -> Repo {
        Repo {
            git: self.clone(),
            dir: dir.into(),
        }
    }

    /// The top of the work tree `dir` is in; `None` when it is in none (or git says so).
    pub async fn toplevel(&self, dir: &Path) -> Result<Option<PathBuf>, GitError> {
        let r = self.repo(dir);
        let out = r.raw(&["rev-parse", "--show-toplevel"], &[]).await?;
        if out.code != Some(0) {
            return Ok(None);
        }
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok((!s.is_empty()).then(|| PathBuf::from(s)))
    }

    /// The `git --version` line, for diagnostics.
    pub async fn version(&self) -> Result<String, GitError> {
        let out = self.repo(".").ok(&["--version"]).await?;
        Ok(out.trim().to_string())
    }
}

impl Repo {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Run git with `args` in `self.dir`; any exit status is returned.
    async fn raw(&self, args: &[&str], env: &[(&str, &OsString)]) -> Result<Out, GitError> {
        self.raw_in(args, env, None).await
    }

    async fn raw_in(
        &self,
        args: &[&str],
        env: &[(&str, &OsString)],
        stdin: Option<Vec<u8>>,
    ) -> Result<Out, GitError> {
        self.raw_as(args, env, stdin, Identity::Crew).await
    }

    /// The one place a git process is made (but `diff_capped`'s, which streams): hooks and
    /// fsmonitor off, the environment scrubbed, `who` deciding the identity of commits.
    fn command(
        &self,
        args: &[&str],
        env: &[(&str, &OsString)],
        who: Identity,
    ) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.git.program);
        // Hooks of the user's repository never run for crew's commits, merges and checkouts,
        // and neither does its fsmonitor program.
        cmd.args(GUARDS);
        cmd.args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for k in SCRUBBED {
            cmd.env_remove(k);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("LC_ALL", "C");
        if who == Identity::Crew {
            cmd.env("GIT_AUTHOR_NAME", AUTHOR_NAME)
                .env("GIT_AUTHOR_EMAIL", AUTHOR_EMAIL)
                .env("GIT_COMMITTER_NAME", AUTHOR_NAME)
                .env("GIT_COMMITTER_EMAIL", AUTHOR_EMAIL);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some((k, v)) = &self.git.tag {
            cmd.env(k, v);
        }
        cmd
    }

    async fn raw_as(
        &self,
        args: &[&str],
        env: &[(&str, &OsString)],
        stdin: Option<Vec<u8>>,
        who: Identity,
    ) -> Result<Out, GitError> {
        let mut cmd = self.command(args, env, who);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let shown = || args.join(" ");
        let mut child = cmd.spawn().map_err(|source| GitError::Spawn {
            args: shown(),
            source,
        })?;
        if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
            use tokio::io::AsyncWriteExt;
            tokio::spawn(async move {
                let _ = pipe.write_all(&bytes).await;
            });
        }
        match tokio::time::timeout(self.git.timeout, child.wait_with_output()).await {
            Err(_) => Err(GitError::Timeout {
                args: shown(),
                after: self.git.timeout,
            }),
            Ok(Err(source)) => Err(GitError::Spawn {
                args: shown(),
                source,
            }),
            Ok(Ok(o)) => Ok(Out {
                code: o.status.code(),
                stdout: o.stdout,
                stderr: o.stderr,
            }),
        }
    }

    /// Run git; a non-zero exit is an error carrying git's message.
    async fn run(&self, args: &[&str], env: &[(&str, &OsString)]) -> Result<Vec<u8>, GitError> {
        let out = self.raw(args, env).await?;
        check(args, out)
    }

    async fn ok(&self, args: &[&str]) -> Result<String, GitError> {
        let out = self.run(args, &[]).await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// One object id from a command that prints one.
    async fn oid(&self, args: &[&str], env: &[(&str, &OsString)]) -> Result<String, GitError> {
        let out = self.run(args, env).await?;
        parse::oid(args, &out)
    }

    /// The commit `rev` names, `None` when it names none.
    pub async fn resolve(&self, rev: &str) -> Result<Option<String>, GitError> {
        let spec = format!("{rev}^{{commit}}");
        let out = self
            .raw(&["rev-parse", "--verify", "--quiet", &spec], &[])
            .await?;
        if out.code != Some(0) {
            return Ok(None);
        }
        parse::oid(&["rev-parse", &spec], &out.stdout).map(Some)
    }

    /// `HEAD`'s commit; `None` in a repository without commits.
    pub async fn head(&self) -> Result<Option<String>, GitError> {
        self.resolve("HEAD").await
    }

    /// The current branch (`refs/heads/...` short name); `None` when detached.
    pub async fn current_branch(&self) -> Result<Option<String>, GitError> {
        let out = self
            .raw(&["symbolic-ref", "--quiet", "--short", "HEAD"], &[])
            .await?;
        if out.code != Some(0) {
            return Ok(None);
        }
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok((!s.is_empty()).then_some(s))
    }

    /// Paths with uncommitted changes, untracked non-ignored files included (submodules'
    /// insides are not looked at). Empty = clean.
    pub async fn dirty_paths(&self) -> Result<Vec<String>, GitError> {
        let out = self
            .run(
                &[
                    "status",
                    "--porcelain=v1",
                    "-z",
                    "--untracked-files=all",
                    "--no-renames",
                    "--ignore-submodules=dirty",
                ],
                &[],
            )
            .await?;
        Ok(parse::status_paths(&out))
    }

    /// A commit of the work tree as it is now — tracked changes and untracked files that are not
    /// ignored — on top of `HEAD`, made the way `git stash create` makes one: objects only. The
    /// user's index, work tree, stash list and branches are not touched: the staging happens in
    /// a copy of the index in a temporary file. `None` when the tree is clean (HEAD is the base).
    pub async fn snapshot(&self, message: &str) -> Result<Option<String>, GitError> {
        let head = self.head().await?;
        let tree = self.tree_of_worktree().await?;
        let head_tree = match &head {
            Some(h) => Some(
                self.oid(&["rev-parse", &format!("{h}^{{tree}}")], &[])
                    .await?,
            ),
            None => None,
        };
        if head_tree.as_deref() == Some(tree.as_str()) {
            return Ok(None);
        }
        let mut args = vec!["commit-tree", "--no-gpg-sign", tree.as_str(), "-m", message];
        if let Some(h) = &head {
            args.extend(["-p", h.as_str()]);
        }
        self.oid(&args, &[]).await.map(Some)
    }

    /// The tree of everything in the work tree (ignored files excepted), staged in a temporary
    /// index that starts as a copy of the real one, so unchanged files are not hashed again.
    async fn tree_of_worktree(&self) -> Result<String, GitError> {
        let index = self.git_path("index").await?;
        let tmp = tempfile::Builder::new().prefix("crew-index-").tempfile()?;
        match tokio::fs::copy(&index, tmp.path()).await {
            Ok(_) => {}
            // No index yet (a fresh repository): git makes one from nothing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tokio::fs::remove_file(tmp.path()).await?;
            }
            Err(e) => return Err(e.into()),
        }
        let idx: OsString = tmp.path().as_os_str().to_owned();
        let env = [("GIT_INDEX_FILE", &idx)];
        self.add_all(&env).await?;
        self.oid(&["write-tree"], &env).await
    }

    /// A path inside the repository's git directory, as git resolves it (worktrees included).
    pub async fn git_path(&self, name: &str) -> Result<PathBuf, GitError> {
        let s = self
            .ok(&["rev-parse", "--path-format=absolute", "--git-path", name])
            .await?;
        Ok(PathBuf::from(s.trim()))
    }

    /// The repository's common git directory (the same for all its worktrees).
    pub async fn common_dir(&self) -> Result<PathBuf, GitError> {
        let s = self
            .ok(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
            .await?;
        Ok(PathBuf::from(s.trim()))
    }

    /// Whether `a` is an ancestor of (or equal to) `b`.
    pub async fn is_ancestor(&self, a: &str, b: &str) -> Result<bool, GitError> {
        let args = ["merge-base", "--is-ancestor", a, b];
        let out = self.raw(&args, &[]).await?;
        match out.code {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => check(&args, out).map(|_| false),
        }
    }

    /// The best common ancestor of `a` and `b`; `None` when they share no history.
    pub async fn merge_base(&self, a: &str, b: &str) -> Result<Option<String>, GitError> {
        let args = ["merge-base", a, b];
        let out = self.raw(&args, &[]).await?;
        match out.code {
            Some(0) => parse::oid(&args, &out.stdout).map(Some),
            Some(1) => Ok(None),
            _ => check(&args, out).map(|_| None),
        }
    }

    /// One commit holding all of `commits`, made without a work tree (`merge-tree
    /// --write-tree`): the only commit when there is one, a fast-forward when one contains the
    /// others, else merge commits folded left to right. A conflict names its paths and the
    /// commit that brought it in.
    pub async fn merge_all(
        &self,
        commits: &[String],
        message: &str,
    ) -> Result<MergeOutcome, GitError> {
        let Some((first, rest)) = commits.split_first() else {
            return Err(GitError::Parse {
                args: "merge-tree".into(),
                what: "nothing to merge".into(),
            });
        };
        let mut acc = first.clone();
        for next in rest {
            match self.merge_step(&acc, next, message).await? {
                MergeStep::Holds => {}
                MergeStep::Onto(c) => acc = c,
                MergeStep::Conflict { paths, .. } => {
                    return Ok(MergeOutcome::Conflict {
                        paths,
                        with: next.clone(),
                        merged_so_far: acc,
                    })
                }
            }
        }
        Ok(MergeOutcome::Clean(acc))
    }

    /// One step of folding `next` into `acc`: nothing when `acc` holds it, a fast-forward when
    /// `next` holds `acc`, else a merge commit of the two (`merge-tree --write-tree`). A
    /// conflicted merge names its paths and keeps its tree, markers and all, for the caller.
    async fn merge_step(
        &self,
        acc: &str,
        next: &str,
        message: &str,
    ) -> Result<MergeStep, GitError> {
        if self.is_ancestor(next, acc).await? {
            return Ok(MergeStep::Holds);
        }
        if self.is_ancestor(acc, next).await? {
            return Ok(MergeStep::Onto(next.to_string()));
        }
        let args = [
            "merge-tree",
            "--write-tree",
            "--name-only",
            "-z",
            "--no-messages",
            acc,
            next,
        ];
        let out = self.raw(&args, &[]).await?;
        let conflicted = match out.code {
            Some(0) => false,
            Some(1) => true,
            _ => {
                check(&args, out)?;
                return Ok(MergeStep::Holds);
            }
        };
        let tree = parse::first_z_oid(&args, &out.stdout)?;
        if conflicted {
            return Ok(MergeStep::Conflict {
                paths: parse::conflict_paths(&out.stdout),
                tree,
            });
        }
        self.commit_tree(&tree, &[acc, next], message, Identity::Crew)
            .await
            .map(MergeStep::Onto)
    }

    /// Add a worktree at `path` with `branch` made (or reset) to `start` and checked out.
    pub async fn worktree_add(
        &self,
        path: &Path,
        branch: &str,
        start: &str,
    ) -> Result<(), GitError> {
        self.add_then_check_out(path, &["-B", branch], start).await
    }

    /// Add a worktree at `path` with `start` checked out on a detached HEAD (no branch): a
    /// checkout several read-only tasks share.
    pub async fn worktree_add_detached(&self, path: &Path, start: &str) -> Result<(), GitError> {
        self.add_then_check_out(path, &["--detach"], start).await
    }

    /// `git worktree add` reads every other worktree's metadata and fails on one being made
    /// at the same moment ("failed to read .git/worktrees/…/commondir"), so concurrent adds
    /// of one repository fail at random. The metadata is made under the repository's lock
    /// (`--no-checkout`: milliseconds), and the files, which take the time, are checked out
    /// after it, in parallel with other worktrees' (`reset --hard` in the new worktree).
    async fn add_then_check_out(
        &self,
        path: &Path,
        how: &[&str],
        start: &str,
    ) -> Result<(), GitError> {
        let p = path.to_string_lossy();
        {
            let lock = worktree_lock(&self.dir);
            let _held = lock.lock().await;
            let mut args = vec!["worktree", "add", "--quiet", "--no-checkout"];
            args.extend_from_slice(how);
            args.extend([p.as_ref(), start]);
            self.run(&args, &[]).await?;
        }
        self.git
            .repo(path)
            .run(&["reset", "--hard", "--quiet"], &[])
            .await
            .map(|_| ())
    }

    /// Remove the worktree at `path`, whatever is in it (the caller saved what matters).
    pub async fn worktree_remove(&self, path: &Path) -> Result<(), GitError> {
        let p = path.to_string_lossy();
        let lock = worktree_lock(&self.dir);
        let _held = lock.lock().await;
        self.run(&["worktree", "remove", "--force", "--force", &p], &[])
            .await
            .map(|_| ())
    }

    /// The paths of the repository's worktrees (the main one first), as `git worktree list`.
    pub async fn worktree_list(&self) -> Result<Vec<PathBuf>, GitError> {
        let out = self
            .run(&["worktree", "list", "--porcelain", "-z"], &[])
            .await?;
        Ok(parse::worktree_paths(&out))
    }

    /// Stage everything that changed in the whole tree, paths outside a sparse checkout's cone
    /// included (`--sparse`): a worktree of a sparse repository is sparse too, and a file an
    /// agent wrote outside the cone is a change like any other — without the flag git refuses
    /// it and the commit failed. Entries the sparse checkout left out of the tree stay as they
    /// are (not deletions). A git older than 2.34 knows no `--sparse` (nor that refusal):
    /// then without it.
    async fn add_all(&self, env: &[(&str, &OsString)]) -> Result<(), GitError> {
        match self.run(&["add", "--sparse", "-A", "--", ":/"], env).await {
            Err(GitError::Failed { stderr, .. })
                if stderr.contains("unknown option") && stderr.contains("sparse") =>
            {
                self.run(&["add", "-A", "--", ":/"], env).await.map(|_| ())
            }
            r => r.map(|_| ()),
        }
    }

    /// `add_all` until no untracked file is left: one pass can leave one out (with
    /// `core.ignorecase` on where the file system is case-sensitive, a file deleted and one
    /// added whose names differ in case only: the first pass stages the deletion alone, and the
    /// new file was lost with the worktree). A file still untracked after a few passes is an
    /// error, never a commit without it. Tracked files still changing (a writer left running)
    /// are committed as they were staged; submodules are not looked at.
    async fn add_everything(&self) -> Result<(), GitError> {
        const PASSES: usize = 3;
        let mut left = Vec::new();
        for _ in 0..PASSES {
            self.add_all(&[]).await?;
            let args = [
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                "--no-renames",
                "--ignore-submodules=all",
            ];
            let out = self.run(&args, &[]).await?;
            left = parse::untracked_paths(&out);
            if left.is_empty() {
                return Ok(());
            }
        }
        Err(GitError::NotStaged(
            left.iter().take(10).cloned().collect::<Vec<_>>().join(", "),
        ))
    }

    /// In a worktree: commit everything that changed (untracked non-ignored files included) on
    /// the checked-out branch, with crew's identity, no hooks, no signing. `None` when nothing
    /// changed.
    pub async fn commit_all(&self, message: &str) -> Result<Option<String>, GitError> {
        self.add_everything().await?;
        let tree = self.oid(&["write-tree"], &[]).await?;
        let head = self.head().await?;
        if let Some(h) = &head {
            let head_tree = self
                .oid(&["rev-parse", &format!("{h}^{{tree}}")], &[])
                .await?;
            if head_tree == tree {
                return Ok(None);
            }
        }
        let mut args = vec!["commit-tree", "--no-gpg-sign", tree.as_str(), "-m", message];
        if let Some(h) = &head {
            args.extend(["-p", h.as_str()]);
        }
        let commit = self.oid(&args, &[]).await?;
        let mut update = vec![
            "update-ref",
            "-m",
            "crew: task result",
            "HEAD",
            commit.as_str(),
        ];
        if let Some(h) = &head {
            update.push(h.as_str());
        }
        self.run(&update, &[]).await?;
        Ok(Some(commit))
    }

    /// Files changed, lines inserted and deleted from `from` to `to` (renames as delete + add).
    pub async fn diffstat(&self, from: &str, to: &str) -> Result<Diffstat, GitError> {
        let out = self
            .run(
                &[
                    "diff",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--numstat",
                    "-z",
                    "--no-renames",
                    from,
                    to,
                    "--",
                ],
                &[],
            )
            .await?;
        Ok(parse::numstat(&out))
    }

    /// The paths that differ between `from` and `to`.
    pub async fn changed_paths(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        let out = self
            .run(
                &[
                    "diff",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--name-only",
                    "-z",
                    "--no-renames",
                    from,
                    to,
                    "--",
                ],
                &[],
            )
            .await?;
        Ok(parse::nul_list(&out))
    }

    /// The patch from `from` to `to`, binary files included, at most `cap` bytes: git's output
    /// is read as it comes and git stopped once the cap is passed, so a huge file in a change
    /// never sits whole in memory. `true` when cut. When a patch with binary files in full
    /// does not fit, it is made again with binary files summarised ("Binary files … differ"),
    /// which is what a reader of a cut patch can still use (and still reported as cut).
    pub async fn diff(
        &self,
        from: &str,
        to: &str,
        cap: usize,
    ) -> Result<(Vec<u8>, bool), GitError> {
        let (bytes, cut) = self.diff_capped(from, to, cap, true).await?;
        if !cut {
            return Ok((bytes, false));
        }
        drop(bytes);
        // Binary files summarised: not the whole patch either, so it counts as cut.
        let (bytes, _) = self.diff_capped(from, to, cap, false).await?;
        Ok((bytes, true))
    }

    async fn diff_capped(
        &self,
        from: &str,
        to: &str,
        cap: usize,
        binary: bool,
    ) -> Result<(Vec<u8>, bool), GitError> {
        use tokio::io::AsyncReadExt;
        // The patch as git writes it by default whatever the user's config says (prefixes,
        // quoting, a relative diff): a resolver's prompt finds each file's section by its
        // header (crew_core::patch), and `git apply` reads it.
        let mut args = vec![
            "-c",
            "core.quotePath=true",
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
        ];
        if binary {
            args.push("--binary");
        }
        args.extend([from, to, "--"]);
        let shown = || args.join(" ");
        let mut cmd = self.command(&args, &[], Identity::Crew);
        // stderr is not read while stdout streams: git's messages are short, but a pipe that
        // fills would stall it, so they go nowhere.
        cmd.stderr(Stdio::null());
        let mut child = cmd.spawn().map_err(|source| GitError::Spawn {
            args: shown(),
            source,
        })?;
        let Some(mut out) = child.stdout.take() else {
            return Err(GitError::Parse {
                args: shown(),
                what: "no stdout".into(),
            });
        };
        let read = async {
            let mut buf = Vec::new();
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = out.read(&mut chunk).await?;
                if n == 0 {
                    return Ok::<_, std::io::Error>((buf, false));
                }
                let room = cap.saturating_sub(buf.len());
                if n > room {
                    buf.extend_from_slice(chunk.get(..room).unwrap_or_default());
                    return Ok((buf, true));
                }
                buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
            }
        };
        let read = match tokio::time::timeout(self.git.timeout, read).await {
            Err(_) => {
                return Err(GitError::Timeout {
                    args: shown(),
                    after: self.git.timeout,
                })
            }
            Ok(r) => r?,
        };
        if read.1 {
            let _ = child.kill().await;
            return Ok(read);
        }
        let status = child.wait().await?;
        if !status.success() {
            return Err(GitError::Failed {
                args: shown(),
                code: status
                    .code()
                    .map_or_else(|| "killed by a signal".to_string(), |c| format!("exit {c}")),
                stderr: String::new(),
            });
        }
        Ok(read)
    }

    /// Point `name` (a full ref name) at `commit`.
    pub async fn update_ref(&self, name: &str, commit: &str) -> Result<(), GitError> {
        self.run(&["update-ref", name, commit], &[])
            .await
            .map(|_| ())
    }

    /// Full names of the refs under `prefix` (e.g. `refs/heads/crew/r1/`).
    pub async fn refs_under(&self, prefix: &str) -> Result<Vec<String>, GitError> {
        let out = self
            .ok(&["for-each-ref", "--format=%(refname)", prefix])
            .await?;
        Ok(out
            .lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect())
    }

    /// Point refs at commits (`Some`) or delete them (`None`) in one transaction: all of them
    /// change or none does, so a crash between two related refs cannot leave one moved.
    pub async fn update_refs(&self, changes: &[(String, Option<String>)]) -> Result<(), GitError> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut script = String::new();
        for (name, to) in changes {
            one_line(name)?;
            to.as_deref().map(one_line).transpose()?;
            match to {
                Some(c) => script.push_str(&format!("update {name} {c}\n")),
                None => script.push_str(&format!("delete {name}\n")),
            }
        }
        let args = ["update-ref", "--stdin"];
        let out = self.raw_in(&args, &[], Some(script.into_bytes())).await?;
        check(&args, out).map(|_| ())
    }

    /// Delete refs by full name (missing ones are no error), each only while it still points
    /// at the commit given with it (`None`: whatever it points at). All at once when none
    /// moved; else one by one. The names of those that moved, kept.
    pub async fn delete_refs(
        &self,
        refs: &[(String, Option<String>)],
    ) -> Result<Vec<String>, GitError> {
        if refs.is_empty() {
            return Ok(Vec::new());
        }
        let line = |n: &str, old: Option<&str>| -> Result<String, GitError> {
            one_line(n)?;
            Ok(match old {
                Some(o) => {
                    one_line(o)?;
                    format!("delete {n} {o}\n")
                }
                None => format!("delete {n}\n"),
            })
        };
        let mut script = String::new();
        for (n, old) in refs {
            script.push_str(&line(n, old.as_deref())?);
        }
        let args = ["update-ref", "--stdin"];
        let out = self.raw_in(&args, &[], Some(script.into_bytes())).await?;
        if out.code == Some(0) {
            return Ok(Vec::new());
        }
        // One moved (or the batch failed otherwise): each on its own, so the others go.
        let mut moved = Vec::new();
        for (n, old) in refs {
            let out = self
                .raw_in(&args, &[], Some(line(n, old.as_deref())?.into_bytes()))
                .await?;
            if out.code != Some(0) {
                moved.push(n.clone());
            }
        }
        Ok(moved)
    }
}

/// A ref name or commit id for an `update-ref --stdin` script: one command a line, so a line
/// break in one (an imported run's "commit" `<id>\ndelete refs/heads/main`) would add a
/// command of its own.
fn one_line(s: &str) -> Result<(), GitError> {
    if s.contains(['\n', '\r', '\0']) {
        return Err(GitError::Parse {
            args: "update-ref --stdin".into(),
            what: format!("a ref name or commit id with a line break: {s:?}"),
        });
    }
    Ok(())
}

/// One lock per repository (as named by the directory crew opened it at) for the calls that
/// change worktree metadata: git does not guard them against each other.
fn worktree_lock(dir: &Path) -> std::sync::Arc<tokio::sync::Mutex<()>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut map = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    map.entry(dir.to_path_buf()).or_default().clone()
}

fn check(args: &[&str], out: Out) -> Result<Vec<u8>, GitError> {
    if out.code == Some(0) {
        return Ok(out.stdout);
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let stderr = if stderr.is_empty() {
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    } else {
        stderr
    };
    Err(GitError::Failed {
        args: args.join(" "),
        code: out
            .code
            .map_or_else(|| "killed by a signal".to_string(), |c| format!("exit {c}")),
        stderr: parse::cut(&stderr, 4000),
    })
}

/// One input folded into a merge ([`Repo::merge_step`]).
enum MergeStep {
    /// The merge so far already holds the input.
    Holds,
    /// The merge so far moves to this commit (a fast-forward or a clean merge commit).
    Onto(String),
    /// The two conflict in `paths`; `tree` is the merge with its conflict markers.
    Conflict { paths: Vec<String>, tree: String },
}
