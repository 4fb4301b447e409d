//! The node's side of the commits: the start commit checked out from the input bundle, and the
//! agent's changes committed and bundled as the result.
//!
//! The checkout is a linked worktree of a scratch repository (`repo/`, `work/`), as a local
//! task's is of the user's: the box treats its `.git` exactly as a local one's
//! (`crew_attempt::sandbox`: the repository read-only, the worktree's own metadata writable, its
//! objects in a directory of the attempt's own).

use anyhow::{bail, Context, Result};
use crew_attempt::sandbox::Worktree;
use crew_staging::{Launch, Staging};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The node's checkout of the start commit.
#[derive(Debug, Clone)]
pub struct Checkout {
    /// The scratch repository (its own work tree empty).
    pub repo: PathBuf,
    /// The task's worktree: the agent's cwd.
    pub work: PathBuf,
    pub worktree: Worktree,
}

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "crew")
        .env("GIT_AUTHOR_EMAIL", "crew@localhost")
        .env("GIT_COMMITTER_NAME", "crew")
        .env("GIT_COMMITTER_EMAIL", "crew@localhost")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("git {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The ref the base commit is kept under in the scratch repository: a thin input bundle's
/// prerequisite must be reachable from a ref there, not only present.
const BASE_REF: &str = "refs/crew/base";

/// The start commit, checked out detached in a linked worktree (`root/work`) of a fresh
/// repository (`root/repo`). A thin input bundle (`launch.base`) needs the base first: it is
/// fetched from `base.bundle`, then the input bundle's objects on top of it (git refuses a
/// bundle whose prerequisites the repository lacks, naming them).
pub fn checkout(staging: &Staging, launch: &Launch, root: &Path) -> Result<Checkout> {
    let repo = root.join("repo");
    let work = root.join("work");
    make_private(root)?;
    std::fs::create_dir(&repo).with_context(|| format!("create {}", repo.display()))?;
    git(&repo, &["init", "-q"])?;
    if let Some(base) = &launch.base {
        let bundle = staging.base_bundle().display().to_string();
        git(&repo, &["fetch", "-q", &bundle, base]).context("take the run's base bundle")?;
        git(&repo, &["update-ref", BASE_REF, base])?;
    }
    // By id: the bundle's ref names are crewd's business (`HEAD` of a worktree, or a ref of
    // the run's).
    let bundle = staging.input_bundle().display().to_string();
    git(&repo, &["fetch", "-q", &bundle, &launch.start]).context("take the input bundle")?;
    let at = work.display().to_string();
    git(
        &repo,
        &["worktree", "add", "-q", "--detach", &at, &launch.start],
    )?;
    let admin = crew_git::admin_dir(&work)
        .with_context(|| format!("{} is not a linked worktree", work.display()))?;
    Ok(Checkout {
        repo,
        worktree: Worktree {
            root: work.clone(),
            admin,
        },
        work,
    })
}

/// `root`, made new and private (0700): its parent is a shared `/tmp` where the job has no
/// `TMPDIR` of its own, and its name can be learnt by another user of the node (`ps` shows the
/// worker's pid and staging directory). A directory already there is someone else's (or an
/// earlier worker's of this very pid): refused, never used, as its repository's config could
/// name programs git runs (a smudge filter on checkout).
fn make_private(root: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = root.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(root) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "the scratch directory {} already exists (made by another process): refused",
            root.display()
        ),
        Err(e) => Err(e).with_context(|| format!("create {}", root.display())),
    }
}

/// Commit what the agent left uncommitted on top of where it left HEAD (its own commits are
/// its result, as locally) and bundle the result: `None` when nothing changed. A HEAD that no
/// longer contains the start commit (a reset, a checkout elsewhere) would drop the task's
/// inputs: refused.
pub fn commit(staging: &Staging, launch: &Launch, work: &Path) -> Result<Option<String>> {
    git(work, &["add", "-A"])?;
    if !git(work, &["status", "--porcelain"])?.is_empty() {
        git(
            work,
            &["commit", "-q", "--no-verify", "-m", &launch.message],
        )?;
    }
    let head = git(work, &["rev-parse", "--verify", "HEAD^{commit}"])?;
    if head == launch.start {
        return Ok(None);
    }
    if git(work, &["merge-base", "--is-ancestor", &launch.start, &head]).is_err() {
        bail!(
            "the agent left HEAD at {head}, which does not contain the task's start {}",
            launch.start
        );
    }
    git(work, &["update-ref", crew_staging::RESULT_REF, &head])?;
    let tmp = staging.dir.join("result.bundle.tmp");
    let tmp_s = tmp.display().to_string();
    let not_start = format!("^{}", launch.start);
    git(
        work,
        &[
            "bundle",
            "create",
            "-q",
            &tmp_s,
            crew_staging::RESULT_REF,
            &not_start,
        ],
    )?;
    std::fs::rename(&tmp, staging.result_bundle()).context("rename the result bundle")?;
    Ok(Some(head))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(start: &str) -> Launch {
        Launch {
            version: crew_staging::VERSION,
            token: "t".into(),
            run_id: "r".into(),
            task_id: "a".into(),
            attempt: 1,
            start: start.into(),
            base: None,
            commit: true,
            message: "crew: a".into(),
            checks: Default::default(),
            sandbox: crew_staging::BoxRules {
                mode: Default::default(),
                network: true,
                verify_network: true,
                runtime_env: vec![],
                read: vec![],
                write: vec![],
            },
            pre_step: None,
        }
    }

    /// A source repository of one commit (`a.txt`) and a staging directory whose input bundle
    /// holds it: (the temp dir holding both, the start commit, the staging).
    fn staged_start() -> (tempfile::TempDir, String, Staging) {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        git(&src, &["init", "-q"]).unwrap();
        std::fs::write(src.join("a.txt"), "a\n").unwrap();
        git(&src, &["add", "-A"]).unwrap();
        git(&src, &["commit", "-qm", "start"]).unwrap();
        let start = git(&src, &["rev-parse", "HEAD"]).unwrap();
        let staging = Staging::new(t.path().join("staging"));
        staging.create().unwrap();
        let bundle = staging.input_bundle().display().to_string();
        git(&src, &["bundle", "create", "-q", &bundle, "HEAD"]).unwrap();
        (t, start, staging)
    }

    /// The checkout is a linked worktree (the box treats its `.git` as a local one's); the
    /// agent's own commits are the result, with what it left uncommitted on top; a HEAD
    /// without the start commit is refused.
    #[test]
    fn the_agents_own_commits_are_its_result() {
        let (t, start, staging) = staged_start();
        let l = launch(&start);

        let co = checkout(&staging, &l, &t.path().join("root")).unwrap();
        let w = &co.work;
        assert_eq!(std::fs::read_to_string(w.join("a.txt")).unwrap(), "a\n");
        assert!(co
            .worktree
            .admin
            .starts_with(co.repo.join(".git/worktrees")));
        assert_eq!(commit(&staging, &l, w).unwrap(), None, "nothing changed");

        std::fs::write(w.join("b.txt"), "b\n").unwrap();
        git(w, &["add", "b.txt"]).unwrap();
        git(w, &["commit", "-qm", "own"]).unwrap();
        std::fs::write(w.join("c.txt"), "c\n").unwrap();
        let head = commit(&staging, &l, w).unwrap().expect("a result");
        let files = git(w, &["ls-tree", "--name-only", &head]).unwrap();
        assert_eq!(
            files.lines().collect::<Vec<_>>(),
            ["a.txt", "b.txt", "c.txt"]
        );
        let parent = git(w, &["log", "-1", "--format=%s", &format!("{head}^")]).unwrap();
        assert_eq!(parent, "own");
        assert!(staging.result_bundle().exists());

        git(w, &["checkout", "-q", "--orphan", "elsewhere"]).unwrap();
        git(w, &["commit", "-qm", "elsewhere"]).unwrap();
        let e = commit(&staging, &l, w).unwrap_err().to_string();
        assert!(e.contains("does not contain the task's start"), "{e}");
    }

    /// A thin input bundle (the start commit without the run's base) with the base bundle
    /// beside it checks out the start commit's tree: the base is taken first, then what the
    /// node lacked. The thin bundle alone is refused (its prerequisite is missing), so the
    /// base bundle is what made it work.
    #[test]
    fn a_thin_input_bundle_on_the_base_bundle_checks_out_the_start_tree() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        git(&src, &["init", "-q"]).unwrap();
        for i in 0..5 {
            std::fs::write(src.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
            git(&src, &["add", "-A"]).unwrap();
            git(&src, &["commit", "-qm", &format!("c{i}")]).unwrap();
        }
        let base = git(&src, &["rev-parse", "HEAD~2"]).unwrap();
        git(&src, &["update-ref", "refs/crew/r/_base", &base]).unwrap();
        std::fs::remove_file(src.join("f0.txt")).unwrap();
        std::fs::write(src.join("f1.txt"), "changed\n").unwrap();
        git(&src, &["commit", "-qam", "start"]).unwrap();
        let start = git(&src, &["rev-parse", "HEAD"]).unwrap();
        let staging = Staging::new(t.path().join("staging"));
        staging.create().unwrap();
        let path = |p: PathBuf| p.display().to_string();
        git(
            &src,
            &[
                "bundle",
                "create",
                "-q",
                &path(staging.base_bundle()),
                "refs/crew/r/_base",
            ],
        )
        .unwrap();
        git(
            &src,
            &[
                "bundle",
                "create",
                "-q",
                &path(staging.input_bundle()),
                "HEAD",
                &format!("^{base}"),
            ],
        )
        .unwrap();
        // Thin indeed: the base is its prerequisite.
        let listed = git(&src, &["bundle", "verify", &path(staging.input_bundle())]).unwrap();
        assert!(listed.contains(&base), "{listed}");

        let mut l = launch(&start);
        let alone = checkout(&staging, &l, &t.path().join("alone")).unwrap_err();
        assert!(format!("{alone:#}").contains("prerequisite"), "{alone:#}");

        l.base = Some(base.clone());
        let co = checkout(&staging, &l, &t.path().join("root")).unwrap();
        assert_eq!(git(&co.work, &["rev-parse", "HEAD"]).unwrap(), start);
        let files = git(&co.work, &["ls-files"]).unwrap();
        assert_eq!(
            files.lines().collect::<Vec<_>>(),
            ["f1.txt", "f2.txt", "f3.txt", "f4.txt"]
        );
        assert_eq!(
            std::fs::read_to_string(co.work.join("f1.txt")).unwrap(),
            "changed\n"
        );
        assert_eq!(git(&co.work, &["status", "--porcelain"]).unwrap(), "");
        // The whole history is there (the agent may read it), the base under a ref.
        assert_eq!(
            git(&co.repo, &["rev-list", "--count", &start]).unwrap(),
            "6"
        );
        assert_eq!(git(&co.repo, &["rev-parse", BASE_REF]).unwrap(), base);
    }

    /// The scratch directory is under a shared `/tmp` (where the job has no `TMPDIR` of its
    /// own) at a name another user of the node can learn (`ps` shows crew-worker's pid and its
    /// staging directory): one who made it first, with a repository whose config names a
    /// smudge filter, had that filter run as the user by the checkout. The directory is made
    /// new and private, or the checkout is refused.
    #[test]
    fn a_scratch_directory_made_by_someone_else_is_refused() {
        let (t, start, staging) = staged_start();

        // Planted before the worker starts: a repository whose filter runs on checkout.
        let root = t.path().join("root");
        let planted = root.join("repo");
        std::fs::create_dir_all(&planted).unwrap();
        git(&planted, &["init", "-q"]).unwrap();
        let ran = t.path().join("filter-ran");
        git(
            &planted,
            &[
                "config",
                "filter.x.smudge",
                &format!("touch {}; cat", ran.display()),
            ],
        )
        .unwrap();
        std::fs::write(planted.join(".git/info/attributes"), "* filter=x\n").unwrap();

        let got = checkout(&staging, &launch(&start), &root);
        assert!(!ran.exists(), "the planted filter ran");
        let e = got.unwrap_err().to_string();
        assert!(e.contains("already exists"), "{e}");
    }
}
