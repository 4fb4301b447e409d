//! crew-git against real repositories made here.

use crew_git::{Git, MergeOutcome};
use std::path::Path;
use std::process::Command;

fn sh(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    sh(d.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(d.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(d.path().join(".gitignore"), "*.log\n").unwrap();
    sh(d.path(), &["add", "-A"]);
    sh(d.path(), &["commit", "-qm", "init"]);
    d
}

/// Everything a run must not change: HEAD, branches, stash, index bytes, work tree status.
fn fingerprint(dir: &Path) -> (String, String, String, Vec<u8>, String) {
    let index = std::fs::read(dir.join(".git/index")).unwrap();
    (
        sh(dir, &["rev-parse", "HEAD"]),
        sh(dir, &["for-each-ref"]),
        sh(dir, &["stash", "list"]),
        index,
        sh(dir, &["status", "--porcelain", "--untracked-files=all"]),
    )
}

#[tokio::test]
async fn snapshot_takes_dirty_and_untracked_files_without_touching_the_checkout() {
    let d = repo();
    let git = Git::default();
    let r = git.repo(d.path());
    assert_eq!(
        r.snapshot("s").await.unwrap(),
        None,
        "clean tree: HEAD is the base"
    );
    std::fs::write(d.path().join("a.txt"), "one\nTWO\nthree\n").unwrap();
    std::fs::write(d.path().join("new.txt"), "untracked\n").unwrap();
    std::fs::write(d.path().join("x.log"), "ignored\n").unwrap();
    sh(d.path(), &["add", "a.txt"]);
    std::fs::write(d.path().join("a.txt"), "one\nTWO\nthree\nfour\n").unwrap();
    let before = fingerprint(d.path());
    let snap = r.snapshot("s").await.unwrap().expect("dirty: a commit");
    assert_eq!(fingerprint(d.path()), before);
    assert_eq!(
        sh(d.path(), &["show", &format!("{snap}:a.txt")]),
        "one\nTWO\nthree\nfour"
    );
    assert_eq!(
        sh(d.path(), &["show", &format!("{snap}:new.txt")]),
        "untracked"
    );
    assert!(sh(d.path(), &["ls-tree", "--name-only", &snap])
        .lines()
        .all(|l| l != "x.log"));
    assert_eq!(sh(d.path(), &["rev-parse", &format!("{snap}^")]), before.0);
    assert!(!r.dirty_paths().await.unwrap().is_empty());
}

#[tokio::test]
async fn worktrees_commit_merge_and_conflict() {
    let d = repo();
    let state = tempfile::tempdir().unwrap();
    let git = Git::default();
    let r = git.repo(d.path());
    let base = r.head().await.unwrap().unwrap();
    let mk = |name: &str| state.path().join(name);
    r.worktree_add(&mk("a"), "crew/t/a", &base).await.unwrap();
    r.worktree_add(&mk("b"), "crew/t/b", &base).await.unwrap();
    r.worktree_add(&mk("c"), "crew/t/c", &base).await.unwrap();
    std::fs::write(mk("a").join("a.txt"), "one\nA\nthree\n").unwrap();
    std::fs::write(mk("b").join("b.txt"), "b\n").unwrap();
    std::fs::write(mk("c").join("a.txt"), "one\nC\nthree\n").unwrap();
    let wa = git.repo(mk("a"));
    let ca = wa.commit_all("a").await.unwrap().unwrap();
    let cb = git.repo(mk("b")).commit_all("b").await.unwrap().unwrap();
    let cc = git.repo(mk("c")).commit_all("c").await.unwrap().unwrap();
    assert_eq!(wa.commit_all("again").await.unwrap(), None);
    let st = r.diffstat(&base, &ca).await.unwrap();
    assert_eq!((st.files, st.insertions, st.deletions), (1, 1, 1));

    let MergeOutcome::Clean(m) = r.merge_all(&[ca.clone(), cb.clone()], "m").await.unwrap() else {
        panic!("a and b touch different files");
    };
    assert!(r.is_ancestor(&ca, &m).await.unwrap() && r.is_ancestor(&cb, &m).await.unwrap());
    assert_eq!(sh(d.path(), &["show", &format!("{m}:b.txt")]), "b");
    match r.merge_all(&[ca.clone(), cc.clone()], "m").await.unwrap() {
        MergeOutcome::Conflict { paths, with, .. } => {
            assert_eq!(paths, ["a.txt"]);
            assert_eq!(with, cc);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Exactly `base..theirs` onto ours, made without a work tree.
    assert_eq!(
        r.merge_onto(&base, &ca, &cc).await.unwrap(),
        Err(vec!["a.txt".to_string()])
    );
    let tree = r.merge_onto(&base, &ca, &cb).await.unwrap().unwrap();
    assert_eq!(sh(d.path(), &["show", &format!("{tree}:b.txt")]), "b");
    // A patch is read no further than asked.
    let (whole, cut) = r.diff(&base, &ca, 1 << 20).await.unwrap();
    assert!(!cut && whole.len() > 10);
    let (part, cut) = r.diff(&base, &ca, 10).await.unwrap();
    assert!(cut && part.len() <= 10);

    for n in ["a", "b", "c"] {
        r.worktree_remove(&mk(n)).await.unwrap();
    }
    assert_eq!(r.worktree_list().await.unwrap().len(), 1);
    let refs = r.refs_under("refs/heads/crew/").await.unwrap();
    assert_eq!(refs.len(), 3);
    // Each deleted only where it still is: one moved since it was looked at is kept, the
    // others go.
    let mut with_tips = Vec::new();
    for n in &refs {
        with_tips.push((n.clone(), r.resolve(n).await.unwrap()));
    }
    let moved = &refs[1];
    sh(d.path(), &["update-ref", moved, &base]);
    assert_eq!(
        r.delete_refs(&with_tips).await.unwrap(),
        vec![moved.to_string()]
    );
    assert_eq!(
        r.refs_under("refs/heads/crew/").await.unwrap(),
        vec![moved.to_string()]
    );
    assert!(r
        .delete_refs(&[(moved.clone(), None)])
        .await
        .unwrap()
        .is_empty());
    assert!(r.refs_under("refs/heads/crew/").await.unwrap().is_empty());
}

#[tokio::test]
async fn failures_carry_gits_message_and_timeouts_kill() {
    let d = repo();
    let git = Git::default();
    let r = git.repo(d.path());
    let e = r
        .worktree_add(&d.path().join("a.txt"), "x", "HEAD")
        .await
        .unwrap_err();
    assert!(
        e.stderr().is_some_and(|s| s.contains("already exists")),
        "{e}"
    );
    assert_eq!(git.toplevel(Path::new("/")).await.unwrap(), None);
    let script = d.path().join("slow-git");
    std::fs::write(&script, "#!/bin/sh\nsleep 5\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let slow = Git {
        program: script,
        timeout: std::time::Duration::from_millis(200),
        ..Default::default()
    };
    let e = slow.repo(d.path()).diffstat("a", "b").await.unwrap_err();
    assert!(matches!(e, crew_git::GitError::Timeout { .. }), "{e}");
}

/// Issue 34: an attempt's own object directory (the repository's objects its alternates) is
/// brought in after the attempt; a file named for one object that holds another is not taken
/// under that name.
#[tokio::test]
async fn an_attempts_objects_are_taken_in_by_their_content() {
    let d = repo();
    let own = tempfile::tempdir().unwrap();
    let objects = own.path().join("objects");
    std::fs::create_dir_all(objects.join("info")).unwrap();
    let real = d.path().join(".git/objects").canonicalize().unwrap();
    std::fs::write(
        objects.join("info/alternates"),
        format!("{}\n", real.display()),
    )
    .unwrap();
    std::fs::write(d.path().join("b.txt"), "mine\n").unwrap();
    // A commit made with the attempt's object directory: its objects land there only.
    let in_own = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(d.path())
            .env("GIT_OBJECT_DIRECTORY", &objects)
            .env("GIT_INDEX_FILE", own.path().join("index"))
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    in_own(&["read-tree", "HEAD"]);
    in_own(&["add", "b.txt"]);
    let tree = in_own(&["write-tree"]);
    let commit = in_own(&["commit-tree", &tree, "-p", "HEAD", "-m", "mine"]);
    let has = |o: &str| {
        Command::new("git")
            .args(["cat-file", "-e", o])
            .current_dir(d.path())
            .status()
            .unwrap()
            .success()
    };
    assert!(!has(&commit), "not in the repository before");
    // And a forged loose object: the name of a blob nobody wrote, holding another blob.
    let forged = sh(d.path(), &["hash-object", "--stdin"]); // the empty blob's name
    let (dir, file) = forged.split_at(2);
    let other = in_own(&["hash-object", "-w", "b.txt"]);
    let (odir, ofile) = other.split_at(2);
    std::fs::create_dir_all(objects.join(dir)).unwrap();
    std::fs::copy(objects.join(odir).join(ofile), objects.join(dir).join(file)).unwrap();
    let git = Git::default();
    let r = git.repo(d.path());
    let taken = r.take_objects(&objects).await;
    // git refuses the forged object outright, or takes in what it holds under its true name:
    // either way the forged name never names the wrong content in the repository.
    if taken.is_ok() {
        assert!(has(&commit) && has(&tree), "the attempt's commit is in");
    }
    assert!(!has(&forged), "the forged name was not taken");
}

#[tokio::test]
async fn conflict_markers_are_found_in_a_commit_and_equals_lines_alone_are_not() {
    let d = repo();
    let w = d.path();
    std::fs::write(
        w.join("a.txt"),
        "one\n<<<<<<< HEAD\nleft\n=======\nright\n>>>>>>> other\nthree\n",
    )
    .unwrap();
    std::fs::write(w.join("doc.md"), "Title\n=======\n\ntext\n").unwrap();
    std::fs::write(w.join("c.txt"), "clean\n").unwrap();
    sh(w, &["add", "-A"]);
    sh(w, &["commit", "-qm", "markers"]);
    let head = sh(w, &["rev-parse", "HEAD"]);
    let repo = Git::default().repo(w);
    let paths: Vec<String> = ["a.txt", "doc.md", "c.txt"].map(String::from).to_vec();
    let found = repo.conflict_markers(&head, &paths).await.unwrap();
    assert_eq!(found, ["a.txt:2", "a.txt:6"]);
    let clean: Vec<String> = ["doc.md", "c.txt"].map(String::from).to_vec();
    assert!(repo
        .conflict_markers(&head, &clean)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_merge_with_markers_holds_every_input_and_leaves_each_conflict_in_its_file() {
    let d = repo();
    let w = d.path();
    let base = sh(w, &["rev-parse", "HEAD"]);
    let mut tips = Vec::new();
    for (name, file, text) in [
        ("left", "a.txt", "one\nLEFT\nthree\n"),
        ("right", "a.txt", "one\nRIGHT\nthree\n"),
        ("notes", "notes.txt", "notes\n"),
    ] {
        sh(w, &["checkout", "-q", "-b", name, &base]);
        std::fs::write(w.join(file), text).unwrap();
        sh(w, &["add", "-A"]);
        sh(w, &["commit", "-qm", name]);
        tips.push(sh(w, &["rev-parse", "HEAD"]));
    }
    let repo = Git::default().repo(w);
    let marked = repo.merge_with_markers(&tips, "crew: merge").await.unwrap();
    for t in &tips {
        assert!(repo.is_ancestor(t, &marked.commit).await.unwrap(), "{t}");
    }
    assert_eq!(
        marked.conflicts,
        [(tips[1].clone(), vec!["a.txt".to_string()])]
    );
    let a = sh(w, &["show", &format!("{}:a.txt", marked.commit)]);
    assert!(
        a.contains("<<<<<<< ") && a.contains("LEFT") && a.contains("RIGHT"),
        "{a}"
    );
    assert_eq!(
        sh(w, &["show", &format!("{}:notes.txt", marked.commit)]),
        "notes"
    );
    let paths = vec!["a.txt".to_string(), "notes.txt".to_string()];
    let found = repo.conflict_markers(&marked.commit, &paths).await.unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
}

#[tokio::test]
async fn a_detached_worktrees_commits_move_its_branch_when_attached() {
    let d = repo();
    let git = Git::default();
    let r = git.repo(d.path());
    let wt = d.path().join("wt");
    let base = sh(d.path(), &["rev-parse", "HEAD"]);
    r.worktree_add(&wt, "task", &base).await.unwrap();
    let w = git.repo(&wt);
    w.detach_head().await.unwrap();
    assert_eq!(w.current_branch().await.unwrap(), None);
    std::fs::write(wt.join("b.txt"), "b\n").unwrap();
    sh(&wt, &["add", "b.txt"]);
    sh(&wt, &["commit", "-qm", "b"]);
    let made = sh(&wt, &["rev-parse", "HEAD"]);
    // The commit moved only the worktree's HEAD.
    assert_eq!(sh(d.path(), &["rev-parse", "task"]), base);
    // The worktree's `.git` file is not what attach reads.
    let admin = crew_git::admin_dir(&wt).unwrap();
    std::fs::write(wt.join(".git"), "gitdir: /nonexistent\n").unwrap();
    assert_eq!(
        w.attach_head(&admin, "refs/heads/task").await.unwrap(),
        made
    );
    assert_eq!(sh(d.path(), &["rev-parse", "task"]), made);
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
    assert_eq!(w.current_branch().await.unwrap().as_deref(), Some("task"));
    // Attached already: attaching again changes nothing.
    assert_eq!(
        w.attach_head(&admin, "refs/heads/task").await.unwrap(),
        made
    );
}

#[tokio::test]
async fn diff_check_finds_markers_and_whitespace_a_change_added_and_nothing_else() {
    let d = repo();
    let w = d.path();
    let base = sh(w, &["rev-parse", "HEAD"]);
    std::fs::write(w.join("a.txt"), "one \n<<<<<<< ours\ntwo\nthree\n").unwrap();
    sh(w, &["commit", "-qam", "bad"]);
    let bad = sh(w, &["rev-parse", "HEAD"]);
    std::fs::write(w.join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    sh(w, &["commit", "-qam", "good"]);
    let good = sh(w, &["rev-parse", "HEAD"]);
    let repo = Git::default().repo(w);
    let found = repo.diff_check(&base, &bad).await.unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("a.txt:1: trailing whitespace"),
        "{found:?}"
    );
    assert!(found[1].contains("leftover conflict marker"), "{found:?}");
    // The fix of them is clean, and so is a change that adds nothing wrong.
    assert!(repo.diff_check(&bad, &good).await.unwrap().is_empty());
    assert!(repo.diff_check(&base, &good).await.unwrap().is_empty());
}

/// A commit id or ref name with a line break never reaches `update-ref --stdin`, where it
/// would be a command of its own (`<id>\ndelete refs/heads/main`).
#[tokio::test]
async fn a_line_break_in_a_ref_update_is_refused_whole() {
    let d = repo();
    let r = Git::default().repo(d.path());
    let head = sh(d.path(), &["rev-parse", "HEAD"]);
    let evil = format!("{head}\ndelete refs/heads/main");
    let e = r
        .update_refs(&[("refs/crew/r/t/start".to_string(), Some(evil.clone()))])
        .await
        .expect_err("accepted");
    assert!(e.to_string().contains("line break"), "{e}");
    assert!(r.delete_refs(&[(evil.clone(), None)]).await.is_err());
    assert!(r
        .delete_refs(&[("refs/heads/main".into(), Some(evil))])
        .await
        .is_err());
    assert_eq!(sh(d.path(), &["rev-parse", "refs/heads/main"]), head);
    assert!(r.resolve("refs/crew/r/t/start").await.unwrap().is_none());
}

/// A change that only makes a file executable (or no longer) is a change converge brings,
/// both ways: forward after a crash, back after a failure. An edit of the user's stays.
#[tokio::test]
async fn converge_brings_the_executable_bit() {
    use std::os::unix::fs::PermissionsExt;
    let d = repo();
    let p = d.path();
    std::fs::write(p.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(p.join("b.txt"), "b\n").unwrap();
    sh(p, &["add", "-A"]);
    sh(p, &["commit", "-qm", "plain"]);
    let old = sh(p, &["rev-parse", "HEAD"]);
    std::fs::set_permissions(p.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(p.join("b.txt"), "B\n").unwrap();
    sh(p, &["add", "run.sh", "b.txt"]);
    sh(p, &["commit", "-qm", "exec"]);
    let new = sh(p, &["rev-parse", "HEAD"]);
    let exec = |name: &str| {
        std::fs::metadata(p.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o111
            != 0
    };
    let index_of = |commit: &str| {
        let index = p.join(".git").join(format!("idx-{commit}"));
        let out = Command::new("git")
            .args(["read-tree", commit])
            .env("GIT_INDEX_FILE", &index)
            .current_dir(p)
            .status()
            .unwrap();
        assert!(out.success());
        index
    };
    let r = Git::default().repo(p);

    // The checkout still at the old version (a crash before git wrote anything): forward.
    sh(p, &["checkout", "-q", &old]);
    assert!(!exec("run.sh"));
    let left = r.converge(&index_of(&new), &old, &new, &[]).await.unwrap();
    assert_eq!(left, Vec::<String>::new());
    assert!(exec("run.sh"), "the change's executable bit is brought");
    assert_eq!(std::fs::read_to_string(p.join("b.txt")).unwrap(), "B\n");

    // And back, with an edit of the user's to b.txt meanwhile, which stays.
    std::fs::write(p.join("b.txt"), "mine\n").unwrap();
    let left = r.converge(&index_of(&old), &new, &old, &[]).await.unwrap();
    assert_eq!(left, ["b.txt"]);
    assert!(!exec("run.sh"), "put back to not executable");
    assert_eq!(std::fs::read_to_string(p.join("b.txt")).unwrap(), "mine\n");

    // Where the checkout does not keep the bit, it is not a difference.
    sh(p, &["config", "core.fileMode", "false"]);
    std::fs::set_permissions(p.join("run.sh"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(p.join("b.txt"), "B\n").unwrap();
    let left = r.converge(&index_of(&new), &old, &new, &[]).await.unwrap();
    assert_eq!(left, Vec::<String>::new());
}

/// What an apply's checkout would lose that `git status` does not show: an ignored file where
/// the change adds one, or where it adds a folder; an ignored file in a folder the change turns
/// into a file; a submodule with files of its own that the change turns into a file.
#[tokio::test]
async fn in_the_way_finds_ignored_files_and_dirty_submodules() {
    let d = repo();
    let p = d.path();
    let sub_src = tempfile::tempdir().unwrap();
    sh(sub_src.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(sub_src.path().join("s.txt"), "s\n").unwrap();
    sh(sub_src.path(), &["add", "-A"]);
    sh(sub_src.path(), &["commit", "-qm", "sub"]);
    std::fs::write(p.join(".gitignore"), "*.log\ncfg/local.conf\n").unwrap();
    std::fs::create_dir(p.join("cfg")).unwrap();
    std::fs::write(p.join("cfg/a.conf"), "a\n").unwrap();
    sh(p, &["add", "-A"]);
    sh(
        p,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            sub_src.path().to_str().unwrap(),
            "sub",
        ],
    );
    sh(p, &["commit", "-qm", "old"]);
    let old = sh(p, &["rev-parse", "HEAD"]);
    // The change: out.log tracked, dbg.log/x tracked, cfg a file, the submodule a file.
    sh(p, &["switch", "-q", "-c", "change"]);
    std::fs::write(p.join(".gitignore"), "cfg/local.conf\n").unwrap();
    std::fs::write(p.join("out.log"), "crew\n").unwrap();
    std::fs::create_dir(p.join("dbg.log")).unwrap();
    std::fs::write(p.join("dbg.log/x"), "x\n").unwrap();
    sh(p, &["rm", "-q", "-r", "cfg"]);
    std::fs::write(p.join("cfg"), "now a file\n").unwrap();
    sh(p, &["rm", "-q", "sub"]);
    std::fs::write(p.join("sub"), "now a file\n").unwrap();
    sh(p, &["add", "-A"]);
    sh(p, &["commit", "-qm", "new"]);
    let new = sh(p, &["rev-parse", "HEAD"]);
    sh(p, &["switch", "-q", "main"]);
    sh(
        p,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "update",
            "-q",
            "--init",
        ],
    );
    let r = Git::default().repo(p);
    assert_eq!(
        r.in_the_way(&old, &new).await.unwrap(),
        Vec::<String>::new()
    );

    // The user's ignored files and the submodule's own work.
    std::fs::write(p.join("out.log"), "precious\n").unwrap();
    std::fs::write(p.join("dbg.log"), "debugging\n").unwrap();
    std::fs::write(p.join("cfg/local.conf"), "mine\n").unwrap();
    std::fs::write(p.join("sub/mine.txt"), "mine\n").unwrap();
    assert_eq!(
        sh(p, &["status", "--porcelain", "--ignore-submodules=dirty"]),
        ""
    );
    let mut found = r.in_the_way(&old, &new).await.unwrap();
    found.sort();
    assert_eq!(
        found,
        [
            "cfg/local.conf",
            "dbg.log",
            "out.log",
            "sub (a submodule with files of its own)"
        ]
    );
}

/// A cherry-pick of several commits, its first one resolved and committed by hand: git has no
/// CHERRY_PICK_HEAD then, but the rest waits in its sequencer: still in progress.
#[tokio::test]
async fn a_cherry_pick_between_its_commits_is_in_progress() {
    let d = repo();
    let p = d.path();
    sh(p, &["switch", "-q", "-c", "side"]);
    std::fs::write(p.join("a.txt"), "side\n").unwrap();
    sh(p, &["commit", "-qam", "side a"]);
    let a = sh(p, &["rev-parse", "HEAD"]);
    std::fs::write(p.join("b.txt"), "b\n").unwrap();
    sh(p, &["add", "b.txt"]);
    sh(p, &["commit", "-qm", "side b"]);
    let b = sh(p, &["rev-parse", "HEAD"]);
    sh(p, &["switch", "-q", "main"]);
    std::fs::write(p.join("a.txt"), "main\n").unwrap();
    sh(p, &["commit", "-qam", "main a"]);
    let r = Git::default().repo(p);
    assert_eq!(r.in_progress().await.unwrap(), None);
    let stopped = Command::new("git")
        .args(["cherry-pick", &a, &b])
        .current_dir(p)
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(!stopped.status.success(), "the first pick conflicts");
    std::fs::write(p.join("a.txt"), "both\n").unwrap();
    sh(p, &["add", "a.txt"]);
    sh(p, &["commit", "-q", "--no-edit"]);
    assert!(!p.join(".git/CHERRY_PICK_HEAD").exists());
    assert_eq!(
        r.in_progress().await.unwrap(),
        Some(crew_git::InProgress::CherryPick)
    );
}

/// A patch reads as git's default whatever the repository's config says: `a/`/`b/` prefixes
/// and quoted odd names (a resolver's prompt finds each file's section by its header), and
/// paths from the top of the repository.
#[tokio::test]
async fn a_patch_is_in_gits_default_form_whatever_the_config() {
    let d = repo();
    let base = sh(d.path(), &["rev-parse", "HEAD"]);
    std::fs::create_dir(d.path().join("sub")).unwrap();
    std::fs::write(d.path().join("sub/café.txt"), "x\n").unwrap();
    sh(d.path(), &["add", "-A"]);
    sh(d.path(), &["commit", "-qm", "odd"]);
    let head = sh(d.path(), &["rev-parse", "HEAD"]);
    for (k, v) in [
        ("diff.noprefix", "true"),
        ("core.quotePath", "false"),
        ("diff.relative", "true"),
        ("diff.mnemonicPrefix", "true"),
    ] {
        sh(d.path(), &["config", k, v]);
    }
    let git = Git::default();
    for dir in [d.path().to_path_buf(), d.path().join("sub")] {
        let (patch, cut) = git.repo(&dir).diff(&base, &head, 1 << 20).await.unwrap();
        let patch = String::from_utf8(patch).unwrap();
        assert!(!cut);
        assert_eq!(
            patch.lines().next(),
            Some("diff --git \"a/sub/caf\\303\\251.txt\" \"b/sub/caf\\303\\251.txt\""),
            "{patch}"
        );
    }
}

/// In a worktree of a sparse checkout (git gives it the repository's sparse-checkout), a file
/// written outside the cone is committed like any other change, and the files the sparse
/// checkout leaves out stay in the commit, untouched. Without `add --sparse` git refused and
/// the task's commit failed.
#[tokio::test]
async fn a_sparse_worktrees_change_outside_the_cone_is_committed() {
    let d = repo();
    for (p, text) in [
        ("src/s.txt", "s\n"),
        ("docs/d.txt", "d\n"),
        ("other/o.txt", "o\n"),
    ] {
        std::fs::create_dir_all(d.path().join(p).parent().unwrap()).unwrap();
        std::fs::write(d.path().join(p), text).unwrap();
    }
    sh(d.path(), &["add", "-A"]);
    sh(d.path(), &["commit", "-qm", "dirs"]);
    sh(d.path(), &["sparse-checkout", "set", "--cone", "src"]);
    let git = Git::default();
    let r = git.repo(d.path());
    let base = r.head().await.unwrap().unwrap();
    let state = tempfile::tempdir().unwrap();
    let wt = state.path().join("t");
    r.worktree_add(&wt, "crew/t/t", &base).await.unwrap();
    assert!(!wt.join("docs").exists(), "the worktree is sparse too");
    std::fs::create_dir_all(wt.join("docs")).unwrap();
    std::fs::write(wt.join("docs/new.txt"), "new\n").unwrap();
    let commit = git.repo(&wt).commit_all("outside").await.unwrap().unwrap();
    let files = sh(d.path(), &["ls-tree", "-r", "--name-only", &commit]);
    for f in [
        "docs/d.txt",
        "docs/new.txt",
        "other/o.txt",
        "src/s.txt",
        "a.txt",
    ] {
        assert!(files.lines().any(|l| l == f), "{f} not in {files}");
    }
    let st = r.diffstat(&base, &commit).await.unwrap();
    assert_eq!((st.files, st.insertions, st.deletions), (1, 1, 0));
}

/// The user's edits to files git is told not to look at are found among the change's files:
/// an assume-unchanged one and a skip-worktree one edited, one flagged but as committed, one
/// whose name starts with `"` (which `hash-object --stdin-paths` would read as C-quoted).
#[tokio::test]
async fn hidden_edits_are_found_whatever_the_name() {
    let d = repo();
    let p = d.path();
    let names = ["a.txt", "b.txt", "c.txt", "\"q.txt", "\"a.txt\""];
    for n in names {
        std::fs::write(p.join(n), format!("{n} v1\n")).unwrap();
    }
    sh(p, &["add", "-A"]);
    sh(p, &["commit", "-qm", "v1"]);
    let old = sh(p, &["rev-parse", "HEAD"]);
    sh(p, &["checkout", "-q", "-b", "next"]);
    for n in names {
        std::fs::write(p.join(n), format!("{n} v2\n")).unwrap();
    }
    sh(p, &["commit", "-qam", "v2"]);
    let new = sh(p, &["rev-parse", "HEAD"]);
    sh(p, &["checkout", "-q", "main"]);
    sh(
        p,
        &[
            "update-index",
            "--assume-unchanged",
            "a.txt",
            "c.txt",
            "\"q.txt",
            "\"a.txt\"",
        ],
    );
    sh(p, &["update-index", "--skip-worktree", "b.txt"]);
    for n in ["a.txt", "b.txt", "\"q.txt", "\"a.txt\""] {
        std::fs::write(p.join(n), "mine\n").unwrap();
    }
    let mut found = Git::default()
        .repo(p)
        .hidden_edits(&old, &new)
        .await
        .unwrap();
    found.sort();
    assert_eq!(found, ["\"a.txt\"", "\"q.txt", "a.txt", "b.txt"]);
}

/// With `core.ignorecase` on a case-sensitive file system (a repository from macOS or
/// Windows), a task that deletes `B.txt` and adds `b.txt`: one `git add -A` stages only the
/// deletion, and the commit lost `b.txt`. Both are in the commit now.
#[tokio::test]
async fn a_case_only_rename_under_ignorecase_is_committed_whole() {
    let d = repo();
    let p = d.path();
    std::fs::write(p.join("B.txt"), "B\n").unwrap();
    sh(p, &["add", "-A"]);
    sh(p, &["commit", "-qm", "B"]);
    sh(p, &["config", "core.ignorecase", "true"]);
    std::fs::remove_file(p.join("B.txt")).unwrap();
    std::fs::write(p.join("b.txt"), "lower\n").unwrap();
    let commit = Git::default()
        .repo(p)
        .commit_all("rename")
        .await
        .unwrap()
        .unwrap();
    let files = sh(p, &["ls-tree", "-r", "--name-only", &commit]);
    assert!(files.lines().any(|l| l == "b.txt"), "{files}");
    assert!(!files.lines().any(|l| l == "B.txt"), "{files}");
}
