//! Issue 28 ("Your repository stays yours") and issue 29 item 4: the places where crew writes
//! to the user's repository — seeds, forget/prune, apply, worktree bookkeeping — against real
//! repositories made here, with the real crewd driven over its socket as a user would.

mod common;

use common::{git, path_str, Daemon, Opts};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The daemon's work dir as a repository with one commit (`.crew/` excluded).
fn repo(d: &Daemon) -> &Path {
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["config", "user.name", "user"]);
    git(w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap();
    std::fs::write(w.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
    w
}

/// A one-step team `name` whose executor task is `task` (more workflow fields in `fields`).
fn team(d: &Daemon, name: &str, fields: &str, task: &str) {
    d.project_file(
        &format!("teams/{name}.team.md"),
        &format!("---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n- ex: agent=executor\n"),
    );
    d.project_file(
        &format!("workflows/{name}.workflow.md"),
        &format!("---\nname: {name}\n---\n\n## edit\nrole: ex\n{fields}\n{task}\n"),
    );
}

fn run_wt(d: &Daemon, team_name: &str, extra: Value) -> String {
    let mut p = json!({"team": team_name, "workspace": "worktree"});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    d.run("change things", p)
}

/// A completed worktree run whose one task changed a.txt (team `edit`).
fn edited_run(d: &Daemon) -> String {
    team(d, "edit", "", "[fake:write=a.txt:crew a]");
    let run = run_wt(d, "edit", json!({}));
    assert_eq!(d.wait(&run), "completed");
    run
}

/// `team.apply` and `team.diff` of `run` both refused (1002) with a message saying `why`.
fn apply_and_diff_refused(d: &Daemon, run: &str, why: &str) {
    for method in ["team.apply", "team.diff"] {
        let e = d.err(method, json!({"runId": run}));
        assert_eq!(e["code"], 1002, "{method}: {e}");
        let message = e["message"].as_str().unwrap();
        assert!(message.contains(why), "{method}: {message}");
    }
}

fn trusted(d: &Daemon) -> String {
    format!("trusted_projects = [\"{}\"]\n", path_str(&d.work))
}

/// The daemon restarted with `config` (the work dir's path is only known once it exists).
fn with_config(config: impl Fn(&Daemon) -> String) -> Daemon {
    let mut d = Daemon::start();
    std::fs::write(&d.config, config(&d)).unwrap();
    d.restart();
    d
}

fn status_of(d: &Daemon, run: &str, task: &str) -> Value {
    Daemon::task(&d.status(run), task).clone()
}

fn branches(w: &Path, prefix: &str) -> String {
    git(w, &["for-each-ref", "--format=%(refname)", prefix])
}

fn files_of(w: &Path, rev: &str) -> Vec<String> {
    git(w, &["ls-tree", "-r", "--name-only", rev])
        .lines()
        .map(str::to_string)
        .collect()
}

// ---- 1. seeds ---------------------------------------------------------------------------

#[test]
fn a_seed_through_a_committed_link_is_refused_and_the_file_outside_keeps_its_bytes() {
    let d = with_config(trusted);
    let w = repo(&d);
    let home = d.dir.path().join("ssh");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("id_ed25519"), "PRIVATE KEY BYTES").unwrap();
    std::os::unix::fs::symlink(&home, w.join("cfg")).unwrap();
    git(w, &["add", "cfg"]);
    git(w, &["commit", "-qm", "a link"]);
    team(
        &d,
        "seedy",
        "seedPaths: cfg/id_ed25519\n",
        "[fake:write=x.txt:x]",
    );
    let run = run_wt(&d, "seedy", json!({}));
    let status = d.wait(&run);
    assert_eq!(
        std::fs::read_to_string(home.join("id_ed25519")).unwrap(),
        "PRIVATE KEY BYTES"
    );
    assert_ne!(status, "completed");
    let t = status_of(&d, &run, "01_edit");
    assert!(
        t["error"].as_str().unwrap_or("").contains("seedPaths"),
        "{t}"
    );

    // A real file seeds as before.
    std::fs::write(w.join(".env"), "A=1\n").unwrap();
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n.env\n").unwrap();
    team(&d, "seeded", "seedPaths: .env\n", "[fake:write=y.txt:y]");
    let run = run_wt(&d, "seeded", json!({}));
    assert_eq!(d.wait(&run), "completed");
}

#[test]
fn an_untrusted_projects_seed_paths_are_refused() {
    let d = Daemon::start();
    repo(&d);
    team(&d, "seedy", "seedPaths: .env\n", "[fake:write=x.txt:x]");
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "team": "seedy",
               "workspace": "worktree"}),
    );
    assert_eq!(e["code"], 1003, "{e}");
    assert!(e.to_string().contains("seedPaths"), "{e}");
}

// ---- 2, 3, 12. forget / prune -----------------------------------------------------------

/// A run branch the user is bisecting (detached HEAD, the branch named in `BISECT_START`) is
/// kept by forget: `git bisect reset` goes back to it.
#[test]
fn forget_keeps_a_branch_being_bisected() {
    let d = Daemon::start();
    let w = repo(&d);
    // History enough that the bisect checks out a commit in the middle (HEAD detached).
    for n in 0..4 {
        std::fs::write(w.join("h.txt"), format!("{n}\n")).unwrap();
        git(w, &["add", "h.txt"]);
        git(w, &["commit", "-qm", &format!("history {n}")]);
    }
    team(&d, "one", "", "[fake:write=b.txt:x]");
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    let branch = format!("crew/{run}");
    git(w, &["switch", "-q", &branch]);
    git(w, &["bisect", "start"]);
    git(w, &["bisect", "bad"]);
    git(w, &["bisect", "good", "HEAD~4"]);
    assert_eq!(
        git(w, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "HEAD",
        "detached"
    );
    let r = d.ok("team.forget", json!({"runId": run}));
    assert!(r["notes"].to_string().contains(&branch), "{r}");
    assert!(!branches(w, &format!("refs/heads/{branch}")).is_empty());
    git(w, &["bisect", "reset"]);
    assert_eq!(git(w, &["rev-parse", "--abbrev-ref", "HEAD"]), branch);
}

#[test]
fn forget_and_prune_keep_the_branches_the_user_is_on_or_committed_on() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, "one", "", "[fake:write=b.txt:x]");
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    // The user follows crew's advice and works on the run's branch.
    git(w, &["switch", "-q", &format!("crew/{run}")]);
    std::fs::write(w.join("mine.txt"), "my work\n").unwrap();
    git(w, &["add", "mine.txt"]);
    git(w, &["commit", "-qm", "my commit"]);
    let mine = git(w, &["rev-parse", "HEAD"]);

    let r = d.ok("team.forget", json!({"runId": run}));
    let notes = r["notes"].to_string();
    assert!(notes.contains(&format!("crew/{run}")), "{r}");
    // Answered when done: the task's branch is gone now, not seconds later.
    assert_eq!(branches(w, &format!("refs/heads/crew/tasks/{run}/")), "");
    assert_eq!(git(w, &["rev-parse", "HEAD"]), mine);
    assert_eq!(git(w, &["status", "--porcelain"]), "");
    git(w, &["switch", "-q", "main"]);

    // A task branch checked out in a worktree of the user's, and a run branch someone
    // committed on without it being checked out: prune keeps both and says so.
    let run2 = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run2), "completed");
    let side = d.dir.path().join("side");
    let task_branch = format!("crew/tasks/{run2}/01_edit");
    git(w, &["worktree", "add", "-q", path_str(&side), &task_branch]);
    let run3 = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run3), "completed");
    let other = d.dir.path().join("other");
    git(
        w,
        &[
            "worktree",
            "add",
            "-q",
            path_str(&other),
            &format!("crew/{run3}"),
        ],
    );
    std::fs::write(other.join("c.txt"), "c\n").unwrap();
    git(&other, &["add", "c.txt"]);
    git(&other, &["commit", "-qm", "on crew's branch"]);
    git(w, &["worktree", "remove", path_str(&other)]);

    let r = d.ok("team.prune", json!({"keep": 0}));
    let notes = r["notes"].to_string();
    assert!(notes.contains(&task_branch), "{r}");
    assert!(notes.contains(&format!("crew/{run3}")), "{r}");
    assert!(!branches(w, &format!("refs/heads/{task_branch}")).is_empty());
    assert!(!branches(w, &format!("refs/heads/crew/{run3}")).is_empty());
    assert_eq!(git(&side, &["status", "--porcelain"]), "");
}

#[test]
fn the_users_worktree_whose_directory_is_briefly_absent_keeps_its_metadata() {
    let d = Daemon::start();
    let w = repo(&d);
    let mine = d.dir.path().join("mine");
    git(
        w,
        &["worktree", "add", "-q", "-b", "feature", path_str(&mine)],
    );
    // An unmounted drive, a directory being moved: absent while crew works.
    let away = d.dir.path().join("away");
    std::fs::rename(&mine, &away).unwrap();
    team(&d, "one", "", "[fake:write=b.txt:x]");
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    d.ok("team.forget", json!({"runId": run}));
    std::fs::rename(&away, &mine).unwrap();
    let list = git(w, &["worktree", "list", "--porcelain"]);
    assert!(list.contains(path_str(&mine)), "{list}");
    assert_eq!(
        git(&mine, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "feature"
    );
}

// ---- 4. apply brings exactly the reviewed change ------------------------------------------

#[test]
fn apply_of_a_dirty_base_run_brings_its_own_change_never_the_snapshot() {
    let d = Daemon::start();
    let w = repo(&d);
    std::fs::write(w.join("a.txt"), "uncommitted edit\n").unwrap();
    std::fs::write(w.join("scratch.txt"), "password=hunter2\n").unwrap();
    team(&d, "one", "", "[fake:write=b.txt:made]");
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    // The user reverts the edit and deletes the scratch file.
    git(w, &["checkout", "--", "a.txt"]);
    std::fs::remove_file(w.join("scratch.txt")).unwrap();
    let before = git(w, &["rev-parse", "HEAD"]);
    let diff = d.ok("team.diff", json!({"runId": run, "stat": true}));
    assert_eq!(diff["files"], 1, "{diff}");

    let r = d.ok("team.apply", json!({"runId": run}));
    assert_ne!(r["how"], "fast_forward", "{r}");
    assert_eq!(r["checkout"], path_str(w), "{r}");
    let changed = git(w, &["diff", "--name-only", &before, "HEAD"]);
    assert_eq!(changed, "b.txt");
    assert!(!w.join("scratch.txt").exists());
    assert_eq!(
        git(w, &["log", "--format=%H", "HEAD", "--", "scratch.txt"]),
        ""
    );
    assert_eq!(git(w, &["status", "--porcelain"]), "");
}

#[test]
fn apply_after_the_user_dropped_a_commit_does_not_bring_it_back() {
    let d = Daemon::start();
    let w = repo(&d);
    std::fs::write(w.join("bad.txt"), "bad\n").unwrap();
    git(w, &["add", "bad.txt"]);
    git(w, &["commit", "-qm", "a bad commit"]);
    let bad = git(w, &["rev-parse", "HEAD"]);
    team(&d, "one", "", "[fake:write=b.txt:made]");
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    git(w, &["reset", "-q", "--hard", "HEAD~1"]);
    let before = git(w, &["rev-parse", "HEAD"]);

    let r = d.ok("team.apply", json!({"runId": run}));
    assert_eq!(
        git(w, &["diff", "--name-only", &before, "HEAD"]),
        "b.txt",
        "{r}"
    );
    assert!(!w.join("bad.txt").exists());
    let ancestors = git(w, &["rev-list", "HEAD"]);
    assert!(!ancestors.contains(&bad), "{r}");
}

// ---- 5. concurrent applies ----------------------------------------------------------------

#[test]
fn concurrent_applies_each_bring_their_own_commit_once() {
    let d = Daemon::start();
    let w = repo(&d);
    let mut runs = Vec::new();
    for i in 0..3 {
        team(
            &d,
            &format!("t{i}"),
            "",
            &format!("[fake:write=f{i}.txt:run {i}]"),
        );
        let run = run_wt(&d, &format!("t{i}"), json!({}));
        assert_eq!(d.wait(&run), "completed");
        runs.push(run);
    }
    let before = git(w, &["rev-parse", "HEAD"]);
    let answers: Vec<Value> = std::thread::scope(|s| {
        let hs: Vec<_> = runs
            .iter()
            .enumerate()
            .map(|(i, run)| {
                let d = &d;
                s.spawn(move || d.http("team.apply", json!({"runId": run, "squash": i == 2})))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, a) in answers.iter().enumerate() {
        let r = &a["result"];
        assert!(r.is_object(), "apply {i}: {a}");
        let head = r["head"].as_str().unwrap();
        assert!(files_of(w, head).contains(&format!("f{i}.txt")), "{a}");
    }
    assert_eq!(
        git(w, &["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    let new_commits = git(
        w,
        &["rev-list", "--first-parent", &format!("{before}..HEAD")],
    );
    assert_eq!(new_commits.lines().count(), 3, "{answers:?}");
    // Each commit on the branch brings exactly one run's file.
    for c in new_commits.lines() {
        let changed = git(w, &["diff", "--name-only", &format!("{c}^1"), c]);
        assert_eq!(changed.lines().count(), 1, "{c}: {changed}");
    }
    let ff = answers
        .iter()
        .filter(|a| a["result"]["how"] == "fast_forward")
        .count();
    assert!(ff <= 1, "{answers:?}");
}

// ---- 6. all or nothing ------------------------------------------------------------------

/// HEAD, index bytes, every file outside .git, and git's operation files.
fn snapshot(w: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![
        (
            "HEAD".to_string(),
            git(w, &["rev-parse", "HEAD"]).into_bytes(),
        ),
        (
            "index".to_string(),
            std::fs::read(w.join(".git/index")).unwrap(),
        ),
    ];
    for f in ["MERGE_HEAD", "SQUASH_MSG", "MERGE_MSG", "index.lock"] {
        out.push((f.into(), vec![u8::from(w.join(".git").join(f).exists())]));
    }
    let mut files: Vec<String> = git(w, &["ls-files", "-co", "--exclude-standard"])
        .lines()
        .map(str::to_string)
        .collect();
    files.sort();
    for f in files {
        let bytes = std::fs::read(w.join(&f)).unwrap_or_default();
        out.push((f, bytes));
    }
    out
}

#[test]
fn a_signing_failure_refuses_the_apply_and_leaves_the_checkout_exactly_as_it_was() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, "one", "", "[fake:write=b.txt:made]");
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    git(
        w,
        &["commit", "-q", "--allow-empty", "-m", "the user moves on"],
    );
    git(w, &["config", "commit.gpgsign", "true"]);
    git(w, &["config", "gpg.program", "/bin/false"]);
    let before = snapshot(w);
    for squash in [true, false] {
        let e = d.err("team.apply", json!({"runId": run, "squash": squash}));
        assert_eq!(e["code"], 1002, "{e}");
        assert!(e["message"].as_str().unwrap().contains("gpgSign"), "{e}");
        assert_eq!(snapshot(w), before);
    }
    // git's stderr is in the refusal, which crewd logs: its newlines are escaped there, so every
    // line of the log is one of crewd's (a line of git's could pass for one).
    let log = d.log_text();
    assert!(log.contains("gpg failed to sign the data"), "{log}");
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        // Each of crewd's lines starts with its time: `2026-12-07T10:52:37.703185Z  INFO …`.
        let stamped = line.get(..30).is_some_and(|head| {
            head.starts_with("20") && head.as_bytes().get(10) == Some(&b'T') && head.contains("Z ")
        });
        assert!(stamped, "a line crewd did not write: {line:?}\n{log}");
    }
}

/// The checkout fails after git began writing it (a required smudge filter that fails on one
/// file): the files it changed are put back, the branch too, and the answer says so only
/// when it is true.
#[test]
fn a_checkout_that_fails_midway_is_put_back() {
    let d = Daemon::start();
    let w = repo(&d);
    std::fs::write(w.join(".gitattributes"), "*.dat filter=picky\n").unwrap();
    git(w, &["add", ".gitattributes"]);
    git(w, &["commit", "-qm", "attributes"]);
    team(
        &d,
        "dats",
        "",
        "[fake:write=a.txt:changed\n][fake:write=one.dat:1][fake:write=two.dat:2][fake:write=z.txt:new\n]",
    );
    let run = run_wt(&d, "dats", json!({}));
    assert_eq!(d.wait(&run), "completed");
    // A smudge filter that fails on `two.dat`'s content, and must not be skipped.
    let script = d.dir.path().join("smudge.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nc=$(cat)\n[ \"$c\" = 2 ] && exit 1\nprintf %s \"$c\"\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", path_str(&script)])
        .status()
        .unwrap();
    git(w, &["config", "filter.picky.smudge", path_str(&script)]);
    git(w, &["config", "filter.picky.clean", "cat"]);
    git(w, &["config", "filter.picky.required", "true"]);
    // The files rewritten on the way back have new times, so the index's bytes may differ
    // (git refreshes them); what it holds may not.
    let without_index = |w: &Path| {
        let mut s = snapshot(w);
        s.retain(|(name, _)| name != "index");
        s.push(("staged".into(), git(w, &["ls-files", "-s"]).into_bytes()));
        s
    };
    let before = without_index(w);
    let head = git(w, &["rev-parse", "HEAD"]);
    let e = d.err("team.apply", json!({"runId": run, "squash": true}));
    assert_eq!(e["code"], 1002, "{e}");
    assert_eq!(git(w, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(w, &["status", "--porcelain"]), "", "{e}");
    assert_eq!(without_index(w), before, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("as they were"),
        "{e}"
    );
}

#[test]
fn kill_9_during_apply_leaves_the_old_commit_or_the_new_never_a_mix() {
    kill_9_during_apply(true);
}

/// The same, but the git crewd ran outlives it and writes every file of the change: the index
/// is at the old commit, the files at the new. The next start finishes the apply (it failed
/// with "not uptodate" at every start, the intent and the checkout stuck).
#[test]
fn a_git_that_outlives_a_killed_apply_is_finished_after() {
    kill_9_during_apply(false);
}

/// An ignored file of the user's where the change puts a tracked one (the run un-ignored it):
/// not in `git status`, so not a dirty tree, but an apply would write over it. Refused.
#[test]
fn an_ignored_file_in_the_way_refuses_the_apply() {
    let d = Daemon::start();
    let w = repo(&d);
    std::fs::write(w.join(".gitignore"), "*.log\n").unwrap();
    git(w, &["add", ".gitignore"]);
    git(w, &["commit", "-qm", "ignore logs"]);
    team(
        &d,
        "unignore",
        "",
        "[fake:write=.gitignore:nothing][fake:write=out.log:crew-log]",
    );
    let run = run_wt(&d, "unignore", json!({}));
    assert_eq!(d.wait(&run), "completed");
    std::fs::write(w.join("out.log"), "precious\n").unwrap();
    let head = git(w, &["rev-parse", "HEAD"]);
    let e = d.err("team.apply", json!({"runId": run}));
    assert_eq!(e["code"], 1002, "{e}");
    assert!(e["message"].as_str().unwrap().contains("out.log"), "{e}");
    assert_eq!(
        std::fs::read_to_string(w.join("out.log")).unwrap(),
        "precious\n"
    );
    assert_eq!(git(w, &["rev-parse", "HEAD"]), head);
    // Moved aside, it applies.
    std::fs::remove_file(w.join("out.log")).unwrap();
    d.ok("team.apply", json!({"runId": run}));
    assert_eq!(
        std::fs::read_to_string(w.join("out.log")).unwrap(),
        "crew-log"
    );
}

/// Forget after the user deleted crew's worktrees folder of the run (the file naming its
/// repository went with it): the run's branches and refs still go — they used to stay, with
/// no word. And with the repository moved away, forget says what it kept and where to find it.
#[test]
fn forget_cleans_up_without_crews_worktrees_folder_and_says_when_the_repository_moved() {
    let d = Daemon::start();
    let w = repo(&d).to_path_buf();
    let run = edited_run(&d);
    std::fs::remove_dir_all(d.state_dir.join("worktrees").join(&run)).unwrap();
    d.ok("team.forget", json!({"runId": run}));
    assert_eq!(
        branches(&w, "refs/heads/crew/"),
        "",
        "the run's branches stay"
    );
    assert_eq!(
        git(&w, &["for-each-ref", &format!("refs/crew/{run}/")]),
        "",
        "the run's refs stay"
    );

    let run2 = edited_run(&d);
    std::fs::rename(&w, w.with_file_name("moved")).unwrap();
    let r = d.ok("team.forget", json!({"runId": run2}));
    let notes = r["notes"].to_string();
    assert!(notes.contains("is not there any more"), "{r}");
    assert!(notes.contains(&format!("refs/crew/{run2}")), "{r}");
}

/// Prune, like forget, cleans a run's branches and refs after the user deleted crew's worktrees
/// folder of it (it went by that folder's file alone, and left them).
#[test]
fn prune_cleans_up_without_crews_worktrees_folder() {
    let d = Daemon::start();
    let w = repo(&d).to_path_buf();
    let run = edited_run(&d);
    std::fs::remove_dir_all(d.state_dir.join("worktrees").join(&run)).unwrap();
    let r = d.ok("team.prune", json!({"keep": 0}));
    assert_eq!(r["removed"], json!([run]), "{r}");
    assert_eq!(branches(&w, "refs/heads/crew/"), "", "{r}");
    assert_eq!(git(&w, &["for-each-ref", &format!("refs/crew/{run}/")]), "");
}

/// The user moved their repository after the run: apply and diff say the run's repository is
/// not there any more, where they answered an internal error, "cannot run git …: No such file
/// or directory", which reads as if git were missing.
#[test]
fn apply_and_diff_of_a_moved_repository_say_it_moved() {
    let d = Daemon::start();
    repo(&d);
    let run = edited_run(&d);
    std::fs::rename(&d.work, d.work.with_file_name("moved")).unwrap();
    apply_and_diff_refused(&d, &run, "is not there any more");
}

/// The user deleted every crew branch and ref and let git prune what they held: apply and
/// diff say the run's result is no longer in the repository, where they answered git's raw
/// "bad object" as an internal error.
#[test]
fn apply_and_diff_of_a_pruned_result_say_it_is_gone() {
    let d = Daemon::start();
    let w = repo(&d);
    let run = edited_run(&d);
    let refs = git(
        w,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads/crew/",
            "refs/crew/",
        ],
    );
    for r in refs.lines() {
        git(w, &["update-ref", "-d", r]);
    }
    git(w, &["reflog", "expire", "--expire=now", "--all"]);
    git(w, &["gc", "-q", "--prune=now"]);
    apply_and_diff_refused(&d, &run, "no longer in the repository");
}

/// A task that made a file whose name is not UTF-8 (git takes it; crew's paths are text): the
/// apply is refused as the run's to merge by hand, with nothing changed, where it was an
/// internal error about git's output.
#[test]
fn a_change_with_a_name_that_is_not_utf8_is_refused_for_merging_by_hand() {
    let script = "printf c > \"$(printf 'caf\\351.txt')\"; echo done";
    let d = Daemon::start_with(Opts {
        config: format!(
            "sandbox = \"off\"\n[runtimes.sh]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
        env: vec![],
    });
    let w = repo(&d);
    team(&d, "latin1", "", "Make the file.");
    let run = run_wt(&d, "latin1", json!({"runtime": "sh"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let head = git(w, &["rev-parse", "HEAD"]);
    let e = d.err("team.apply", json!({"runId": run}));
    assert_eq!(e["code"], 1002, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("not UTF-8") && message.contains("by hand"),
        "{message}"
    );
    assert_eq!(git(w, &["rev-parse", "HEAD"]), head, "nothing was changed");
    assert_eq!(git(w, &["status", "--porcelain"]), "");
}

/// A file of the change touched but not changed since the index last looked at it (a build,
/// an editor saving it as it was): the apply brings the change. `read-tree -u` judges by stat
/// data alone, so it used to fail with "not uptodate" (crew's own `git status` runs without
/// taking the index's lock, so it never refreshes it).
#[test]
fn a_touched_but_unchanged_file_does_not_stop_the_apply() {
    let d = Daemon::start();
    let w = repo(&d);
    let run = edited_run(&d);
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(w.join("a.txt"))
        .unwrap()
        .set_modified(later)
        .unwrap();
    d.ok("team.apply", json!({"runId": run}));
    assert_eq!(std::fs::read_to_string(w.join("a.txt")).unwrap(), "crew a");
    assert_eq!(git(w, &["status", "--porcelain"]), "");
}

/// The user edited files git is told not to look at (`--assume-unchanged`, `--skip-worktree`):
/// `git status` is clean, so the dirty-tree refusal let the apply through, the checkout then
/// stopped at them ("not uptodate") after the branch had moved, and the message blamed git
/// for "files it had begun to write". Now the apply is refused up front, naming them, with
/// nothing changed; once they are shown to git and restored, it applies.
#[test]
fn edits_git_does_not_look_at_refuse_the_apply_up_front() {
    let d = Daemon::start();
    let w = repo(&d);
    std::fs::write(w.join("b.txt"), "b\n").unwrap();
    git(w, &["add", "b.txt"]);
    git(w, &["commit", "-qm", "b"]);
    team(
        &d,
        "both",
        "",
        "[fake:write=a.txt:crew a][fake:write=b.txt:crew b]",
    );
    let run = run_wt(&d, "both", json!({}));
    assert_eq!(d.wait(&run), "completed");
    git(w, &["update-index", "--assume-unchanged", "a.txt"]);
    git(w, &["update-index", "--skip-worktree", "b.txt"]);
    std::fs::write(w.join("a.txt"), "my a\n").unwrap();
    std::fs::write(w.join("b.txt"), "my b\n").unwrap();
    assert_eq!(
        git(w, &["status", "--porcelain"]),
        "",
        "hidden from git status"
    );
    let head = git(w, &["rev-parse", "HEAD"]);
    let e = d.err("team.apply", json!({"runId": run}));
    assert_eq!(e["code"], 1002, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("git is told not to look at") && message.contains("a.txt"),
        "{message}"
    );
    assert!(message.contains("b.txt"), "{message}");
    assert!(!message.contains("begun to write"), "{message}");
    assert!(
        !message.contains("  "),
        "a broken line in the message: {message}"
    );
    assert_eq!(git(w, &["rev-parse", "HEAD"]), head, "nothing was changed");
    assert_eq!(std::fs::read_to_string(w.join("a.txt")).unwrap(), "my a\n");
    assert_eq!(std::fs::read_to_string(w.join("b.txt")).unwrap(), "my b\n");
    // Shown to git again and restored, the apply goes through.
    git(w, &["update-index", "--no-skip-worktree", "b.txt"]);
    git(w, &["update-index", "--no-assume-unchanged", "a.txt"]);
    std::fs::write(w.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(w.join("b.txt"), "b\n").unwrap();
    d.ok("team.apply", json!({"runId": run}));
    assert_eq!(std::fs::read_to_string(w.join("a.txt")).unwrap(), "crew a");
    assert_eq!(std::fs::read_to_string(w.join("b.txt")).unwrap(), "crew b");
}

/// crewd killed while the apply signs its commit (a pinentry can take minutes), before it
/// recorded any intent: the checkout's `index.lock` it held is gone at the next start, and the
/// user's git works (the lock stayed for good, every `git commit` failing).
#[test]
fn a_kill_before_the_apply_changed_anything_leaves_no_index_lock() {
    let mut d = Daemon::start();
    let w = repo(&d).to_path_buf();
    let w = w.as_path();
    team(&d, "one", "", "[fake:write=b.txt:made]");
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    let mark = d.dir.path().join("signing");
    let script = d.dir.path().join("sign.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > {}\nsleep 5\nexit 1\n",
            path_str(&mark)
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", path_str(&script)])
        .status()
        .unwrap();
    git(w, &["config", "commit.gpgSign", "true"]);
    git(w, &["config", "gpg.program", path_str(&script)]);
    std::thread::scope(|s| {
        let d = &d;
        let h = s.spawn(move || d.try_http("team.apply", json!({"runId": run, "squash": true})));
        for _ in 0..600 {
            if mark.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(mark.exists(), "the signing never started");
        assert!(
            w.join(".git/index.lock").exists(),
            "the apply holds the lock"
        );
        std::process::Command::new("kill")
            .args(["-9", &d.pid().to_string()])
            .status()
            .unwrap();
        let _ = h.join();
    });
    d.restart();
    assert!(!w.join(".git/index.lock").exists(), "{}", d.log_text());
    git(w, &["config", "commit.gpgSign", "false"]);
    git(w, &["commit", "-q", "--allow-empty", "-m", "mine"]);
    assert_eq!(git(w, &["status", "--porcelain"]), "");
}

fn kill_9_during_apply(kill_git: bool) {
    let mut d = Daemon::start();
    let w = repo(&d).to_path_buf();
    let w = w.as_path();
    std::fs::write(w.join(".gitattributes"), "*.dat filter=slow\n").unwrap();
    std::fs::write(w.join("zero.dat"), "0").unwrap();
    git(w, &["add", ".gitattributes", "zero.dat"]);
    git(w, &["commit", "-qm", "attributes"]);
    team(
        &d,
        "dats",
        "",
        "[fake:write=zero.dat:0new][fake:write=one.dat:1][fake:write=two.dat:2][fake:write=three.dat:3]",
    );
    let run = run_wt(&d, "dats", json!({}));
    assert_eq!(d.wait(&run), "completed");
    let old = git(w, &["rev-parse", "HEAD"]);
    git(w, &["commit", "-q", "--allow-empty", "-m", "moved on"]);
    let old_moved = git(w, &["rev-parse", "HEAD"]);
    assert_ne!(old, old_moved);
    // A smudge filter that says who runs it, then takes its time: the window to kill in.
    let mark = d.dir.path().join("smudging");
    let fast = d.dir.path().join("fast");
    let script = d.dir.path().join("smudge.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $PPID >> {m}\n[ -e {f} ] || sleep 5\nexec cat\n",
            m = path_str(&mark),
            f = path_str(&fast)
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", path_str(&script)])
        .status()
        .unwrap();
    git(w, &["config", "filter.slow.smudge", path_str(&script)]);
    git(w, &["config", "filter.slow.clean", "cat"]);

    let (socket_user, git_pid) = std::thread::scope(|s| {
        let d = &d;
        let h = s.spawn(move || d.try_http("team.apply", json!({"runId": run, "squash": true})));
        // Wait for git to be inside the checkout, then kill crewd and the git it ran.
        for _ in 0..600 {
            if std::fs::read_to_string(&mark).is_ok_and(|s| !s.trim().is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let pid: i32 = std::fs::read_to_string(&mark)
            .expect("the smudge filter never ran")
            .lines()
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut doomed = vec![d.pid().to_string()];
        if kill_git {
            doomed.push(pid.to_string());
        }
        std::process::Command::new("kill")
            .arg("-9")
            .args(&doomed)
            .status()
            .unwrap();
        (h.join().unwrap(), pid)
    });
    assert!(socket_user.is_err() || socket_user.unwrap().get("error").is_some());
    std::fs::write(&fast, "").unwrap();
    if !kill_git {
        // The orphaned git goes on until it has written the change's files.
        wait_until_gone(git_pid);
    }
    // While crewd is down the user edits a file the apply does not change: recovery finishes
    // the apply's files only, and the edit stays.
    std::fs::write(w.join("a.txt"), "one\ntwo\nthree\nmine\n").unwrap();
    d.restart();
    let head = git(w, &["rev-parse", "HEAD"]);
    assert!(!w.join(".git/index.lock").exists());
    assert_eq!(
        std::fs::read_to_string(w.join("a.txt")).unwrap(),
        "one\ntwo\nthree\nmine\n"
    );
    assert_eq!(
        git(w, &["status", "--porcelain"]),
        " M a.txt",
        "HEAD {head}"
    );
    // The filter runs while the checkout follows the branch, which had moved: recovery
    // finished the checkout (the other outcome, the old commit, is a kill before the move).
    assert_eq!(git(w, &["rev-parse", "HEAD^"]), old_moved, "HEAD {head}");
    for (f, c) in [
        ("zero.dat", "0new"),
        ("one.dat", "1"),
        ("two.dat", "2"),
        ("three.dat", "3"),
    ] {
        assert_eq!(std::fs::read_to_string(w.join(f)).unwrap(), c);
    }
    assert!(!d
        .state_dir
        .join("applies")
        .read_dir()
        .unwrap()
        .any(|_| true));
}

// ---- 7. refusals ------------------------------------------------------------------------

#[test]
fn apply_is_refused_during_a_bisect_or_a_rebase_and_a_branch_named_crew_is_refused() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, "one", "", "[fake:write=b.txt:made]");
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    git(w, &["commit", "-q", "--allow-empty", "-m", "second"]);
    git(w, &["bisect", "start"]);
    git(w, &["bisect", "bad"]);
    git(w, &["bisect", "good", "HEAD~1"]);
    let head = git(w, &["rev-parse", "HEAD"]);
    let e = d.err("team.apply", json!({"runId": run}));
    assert!(e["message"].as_str().unwrap().contains("bisect"), "{e}");
    assert_eq!(git(w, &["rev-parse", "HEAD"]), head);
    git(w, &["bisect", "reset"]);

    // A rebase stopped on a conflict.
    git(w, &["switch", "-q", "-c", "side", "HEAD~1"]);
    std::fs::write(w.join("a.txt"), "side\n").unwrap();
    git(w, &["commit", "-qam", "side edit"]);
    git(w, &["switch", "-q", "main"]);
    std::fs::write(w.join("a.txt"), "main\n").unwrap();
    git(w, &["commit", "-qam", "main edit"]);
    git(w, &["switch", "-q", "side"]);
    let stopped = std::process::Command::new("git")
        .args(["rebase", "main"])
        .current_dir(w)
        .output()
        .unwrap();
    assert!(!stopped.status.success());
    let e = d.err("team.apply", json!({"runId": run}));
    assert!(e["message"].as_str().unwrap().contains("rebase"), "{e}");
    git(w, &["rebase", "--abort"]);
    // A merge and a cherry-pick stopped on the same conflict.
    let tip = git(w, &["rev-parse", "HEAD"]);
    for (what, args) in [
        ("merge", ["merge", "main"]),
        ("cherry-pick", ["cherry-pick", "main"]),
    ] {
        let stopped = std::process::Command::new("git")
            .args(args)
            .current_dir(w)
            .output()
            .unwrap();
        assert!(!stopped.status.success(), "{what} conflicts");
        let e = d.err("team.apply", json!({"runId": run}));
        assert!(e["message"].as_str().unwrap().contains(what), "{what}: {e}");
        assert_eq!(
            git(w, &["rev-parse", "HEAD"]),
            tip,
            "{what}: nothing changed"
        );
        git(w, &[what, "--abort"]);
    }
    git(w, &["switch", "-q", "main"]);

    // crew's own branches are gone once the run is forgotten; then the user makes `crew`.
    d.ok("team.forget", json!({"runId": run}));
    git(w, &["branch", "crew"]);
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": path_str(w), "runtime": "fake", "team": "one",
               "workspace": "worktree"}),
    );
    assert_eq!(e["code"], 1003, "{e}");
    assert!(e["message"].as_str().unwrap().contains("`crew`"), "{e}");
    // `crew/tasks` (a branch whose name crew's task branches would need as a folder) too,
    // and `team.plan` refuses as `team.run` does.
    git(w, &["branch", "-D", "crew"]);
    git(w, &["branch", "crew/tasks"]);
    for method in ["team.run", "team.plan"] {
        let e = d.err(
            method,
            json!({"goal": "g", "cwd": path_str(w), "runtime": "fake", "team": "one",
                   "workspace": "worktree"}),
        );
        assert_eq!(e["code"], 1003, "{method}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("crew/tasks"),
            "{method}: {e}"
        );
    }
}

// ---- 8. identity and message ------------------------------------------------------------

#[test]
fn apply_commits_as_the_user_with_the_goal_and_tasks_keep_crews_identity() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, "one", "", "[fake:write=b.txt:made]");
    let run = d.run(
        "Add the b file\n\nIt is needed for the thing.",
        json!({"team": "one", "workspace": "worktree"}),
    );
    assert_eq!(d.wait(&run), "completed");
    git(w, &["commit", "-q", "--allow-empty", "-m", "user moves on"]);
    let r = d.ok("team.apply", json!({"runId": run, "squash": true}));
    assert_eq!(r["how"], "squash");
    let who = git(w, &["log", "-1", "--format=%an <%ae>|%cn <%ce>|%s"]);
    assert_eq!(
        who,
        "user <user@example.com>|user <user@example.com>|Add the b file"
    );
    let body = git(w, &["log", "-1", "--format=%b"]);
    assert!(
        body.contains(&run) && body.contains("needed for the thing"),
        "{body}"
    );
    let task = git(
        w,
        &[
            "log",
            "-1",
            "--format=%an <%ae>",
            &format!("crew/tasks/{run}/01_edit"),
        ],
    );
    assert_eq!(task, "crew <crew@localhost>");
    assert_eq!(r["checkout"], path_str(w));

    // A merge (the user's branch moved on, no squash) is the user's commit too.
    team(&d, "two", "", "[fake:write=c.txt:made]");
    let run = d.run(
        "Add the c file",
        json!({"team": "two", "workspace": "worktree"}),
    );
    assert_eq!(d.wait(&run), "completed");
    git(
        w,
        &["commit", "-q", "--allow-empty", "-m", "user moves on again"],
    );
    let r = d.ok("team.apply", json!({"runId": run}));
    assert_eq!(r["how"], "merge", "{r}");
    let who = git(w, &["log", "-1", "--format=%an <%ae>|%cn <%ce>|%s|%p"]);
    let parts: Vec<&str> = who.split('|').collect();
    assert_eq!(
        parts[..2],
        ["user <user@example.com>", "user <user@example.com>"],
        "{who}"
    );
    assert!(parts[2].contains("Add the c file"), "{who}");
    assert_eq!(parts[3].split(' ').count(), 2, "a merge commit: {who}");

    // No identity configured anywhere: crew's, and the answer says so.
    git(w, &["config", "--unset", "user.name"]);
    git(w, &["config", "--unset", "user.email"]);
    team(&d, "three", "", "[fake:write=d.txt:made]");
    let run = d.run(
        "Add the d file",
        json!({"team": "three", "workspace": "worktree"}),
    );
    assert_eq!(d.wait(&run), "completed");
    std::fs::write(w.join("moved.txt"), "x\n").unwrap();
    git(w, &["add", "moved.txt"]);
    git(
        w,
        &[
            "-c",
            "user.name=u",
            "-c",
            "user.email=u@x",
            "commit",
            "-qm",
            "moves on",
        ],
    );
    let r = d.ok("team.apply", json!({"runId": run, "squash": true}));
    let who = git(w, &["log", "-1", "--format=%an <%ae>"]);
    assert_eq!(who, "crew <crew@localhost>", "{r}");
    assert!(
        r.to_string().contains("no git identity is configured"),
        "{r}"
    );
}

// ---- 9. a big file ----------------------------------------------------------------------

fn peak_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_200_mib_result_file_does_not_take_crewds_memory() {
    let d = Daemon::start_with(Opts {
        config: "[runtimes.big]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", \
                 \"head -c 209715200 /dev/urandom > big.bin && echo wrote it\"]\n"
            .into(),
        ..Default::default()
    });
    repo(&d);
    team(&d, "one", "", "Write a big file.");
    let run = run_wt(&d, "one", json!({"runtime": "big"}));
    assert_eq!(d.wait(&run), "completed");
    let diff = d.ok("team.diff", json!({"runId": run, "limit": 1_000_000}));
    assert_eq!(diff["truncated"], true);
    let patch = d
        .state_dir
        .join("runs")
        .join(&run)
        .join("patches/01_edit.patch");
    let patch_len = std::fs::metadata(&patch).unwrap().len();
    let peak = peak_rss_kib(d.pid());
    eprintln!("crewd peak RSS {peak} KiB, patch artifact {patch_len} bytes");
    assert!(patch_len <= 8 << 20, "{patch_len}");
    assert!(peak < 120 * 1024, "crewd's peak RSS {peak} KiB");
}

// ---- 10. reserved names -----------------------------------------------------------------

#[test]
fn fan_out_tasks_named_like_crews_files_run() {
    let d = Daemon::start();
    repo(&d);
    let block = json!({"tasks": [
        {"id": "repo", "role": "ex", "title": "repo", "task": "[fake:write=r.txt:r]", "scope": ["r.txt"]},
        {"id": "readers-0123456789012345678901234567890123456789", "role": "ex", "title": "rd",
         "task": "[fake:write=s.txt:s]", "scope": ["s.txt"]},
        {"id": "system-0123456789abcdef", "role": "ex", "title": "sys",
         "task": "[fake:write=t.txt:t]", "scope": ["t.txt"]}
    ]});
    let b = d.fixture_path("block.json");
    std::fs::write(&b, block.to_string()).unwrap();
    d.project_file(
        "teams/fan.team.md",
        "---\nname: fan\ndefaultWorkflow: fan\n---\n\n- planner: agent=planner\n- ex: agent=executor\n",
    );
    d.project_file(
        "workflows/fan.workflow.md",
        &format!(
            "---\nname: fan\n---\n\n## plan\nrole: planner\nexpands: tasks\n\nSplit. [fake:fanout={}]\n",
            path_str(&b)
        ),
    );
    let run = d.run("g", json!({"team": "fan", "workspace": "worktree"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
}

// ---- 11. the base while waiting; a preview writes nothing ---------------------------------

fn objects(w: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(w.join(".git/objects")).unwrap().flatten() {
        if e.path().is_dir() {
            for f in std::fs::read_dir(e.path()).unwrap().flatten() {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_waiting_runs_dirty_base_survives_gc_and_team_plan_writes_nothing() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, "one", "", "[fake:write=b.txt:made]");
    std::fs::write(w.join("wip.txt"), "not committed\n").unwrap();
    let before = objects(w);
    d.ok(
        "team.plan",
        json!({"goal": "g", "cwd": path_str(w), "team": "one", "workspace": "worktree",
               "runtime": "fake"}),
    );
    assert_eq!(objects(w), before, "team.plan wrote objects");

    let run = run_wt(&d, "one", json!({"requirePlanApproval": true}));
    let base = d.status(&run)["workspace"]["base"]
        .as_str()
        .unwrap()
        .to_string();
    let base_ref = format!("refs/crew/{run}/_base");
    for _ in 0..600 {
        if !branches(w, &base_ref).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    git(w, &["gc", "-q", "--prune=now"]);
    git(w, &["cat-file", "-e", &format!("{base}^{{commit}}")]);
    d.ok("team.approve", json!({"runId": run}));
    assert_eq!(d.wait(&run), "completed");
}

// ---- issue 29, 4: fsmonitor -------------------------------------------------------------

#[test]
fn a_repositorys_fsmonitor_program_is_never_started_by_a_run_or_an_apply() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, "one", "", "[fake:write=b.txt:made]");
    let mark = d.dir.path().join("fsmonitor-ran");
    let hook = d.dir.path().join("fsmonitor.sh");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\necho \"$@\" >> {}\nexit 1\n", path_str(&mark)),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", path_str(&hook)])
        .status()
        .unwrap();
    // Proof the hook is one git starts, for a plain `git status` of the user.
    git(w, &["config", "core.fsmonitor", path_str(&hook)]);
    git(w, &["status", "--porcelain"]);
    assert!(mark.exists(), "git itself did not start the fsmonitor hook");
    std::fs::remove_file(&mark).unwrap();

    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    d.ok("team.diff", json!({"runId": run}));
    d.ok("team.apply", json!({"runId": run}));
    assert!(
        !mark.exists(),
        "crew started the fsmonitor hook: {}",
        std::fs::read_to_string(&mark).unwrap_or_default()
    );
}

/// Until process `pid` is gone (an orphan reparented away from us: not ours to wait for).
fn wait_until_gone(pid: i32) {
    for _ in 0..600 {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("process {pid} still runs");
}

/// `crewctl apply` from a folder the change empties and fills again (its one file deleted, a
/// new one added): the files are brought along from the caller's folder (`fromDir`), which
/// git keeps, so the user's shell is still in it afterwards, not in a removed directory.
#[test]
fn apply_keeps_the_callers_folder_when_the_change_empties_and_refills_it() {
    use std::os::unix::fs::MetadataExt;
    let d = Daemon::start();
    let w = repo(&d);
    std::fs::create_dir(w.join("sub")).unwrap();
    std::fs::write(w.join("sub/keep.txt"), "s\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "sub"]);
    team(
        &d,
        "swap",
        "",
        "[fake:write=sub/in-sub.txt:x] [fake:delete=sub/keep.txt]",
    );
    let run = run_wt(&d, "swap", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let sub = w.join("sub");
    let before = std::fs::metadata(&sub).unwrap().ino();
    let r = d.ok(
        "team.apply",
        json!({"runId": run, "fromDir": path_str(&sub)}),
    );
    assert_eq!(r["files"], 2, "{r}");
    assert!(sub.join("in-sub.txt").exists() && !sub.join("keep.txt").exists());
    assert_eq!(
        std::fs::metadata(&sub).unwrap().ino(),
        before,
        "the folder was removed and made anew"
    );
    assert_eq!(git(w, &["status", "--porcelain"]), "");
    // Somewhere not in the checkout: ignored, the apply goes on from its top.
    let elsewhere = d.dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    git(&elsewhere, &["init", "-q"]);
    team(&d, "more", "", "[fake:write=c.txt:c]");
    let run = run_wt(&d, "more", json!({}));
    assert_eq!(d.wait(&run), "completed");
    d.ok(
        "team.apply",
        json!({"runId": run, "fromDir": path_str(&elsewhere)}),
    );
    assert!(w.join("c.txt").exists() && !elsewhere.join("c.txt").exists());
}
