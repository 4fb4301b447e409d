//! Worktree mode (issue 15) against real git repositories made here, with the fake agent
//! editing files: isolation, results as commits, integration, conflicts, diff/apply, lifecycle.

mod common;

use common::{
    forged_bundle, git, one_step_team, path_str, run_created, text_replaced, wait_for_file, Daemon,
    Opts,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The daemon's work dir as a repository with one commit; `.crew/` (the test's resources) is
/// excluded so it does not make the tree dirty.
fn repo(d: &Daemon) -> &Path {
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["config", "user.name", "user"]);
    git(w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap();
    std::fs::write(w.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(w.join(".gitignore"), "*.log\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
    w
}

/// Everything of the user's checkout a run must leave alone: every file outside `.git` (bytes),
/// the index (bytes), HEAD, the user's own branches and the stash list.
fn checksum(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".git" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    walk(dir, dir, &mut out);
    out.insert(
        "<index>".into(),
        std::fs::read(dir.join(".git/index")).unwrap(),
    );
    out.insert(
        "<HEAD>".into(),
        git(dir, &["rev-parse", "HEAD"]).into_bytes(),
    );
    let branches = git(
        dir,
        &[
            "for-each-ref",
            "refs/heads",
            "--format=%(refname) %(objectname)",
        ],
    );
    let own: Vec<&str> = branches
        .lines()
        .filter(|l| !l.starts_with("refs/heads/crew/"))
        .collect();
    out.insert("<branches>".into(), own.join("\n").into_bytes());
    out.insert("<stash>".into(), git(dir, &["stash", "list"]).into_bytes());
    out
}

/// A team whose steps are `(id, dependsOn, task text)`, each played by the executor agent.
fn team(d: &Daemon, name: &str, steps: &[(&str, &[&str], &str)]) {
    let mut roles = String::new();
    let mut wf = format!("---\nname: {name}\n---\n\n");
    for (id, deps, task) in steps {
        roles.push_str(&format!("- r{id}: agent=executor\n"));
        wf.push_str(&format!("## {id}\nrole: r{id}\n"));
        if !deps.is_empty() {
            wf.push_str(&format!("dependsOn: {}\n", deps.join(", ")));
        }
        wf.push_str(&format!("\n{task}\n\n"));
    }
    d.project_file(
        &format!("teams/{name}.team.md"),
        &format!("---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n{roles}"),
    );
    d.project_file(&format!("workflows/{name}.workflow.md"), &wf);
}

fn run_wt(d: &Daemon, team_name: &str, extra: Value) -> String {
    let mut p = json!({"team": team_name, "workspace": "worktree"});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    d.run("change things", p)
}

fn show(dir: &Path, rev_path: &str) -> String {
    git(dir, &["show", rev_path])
}

fn worktrees(dir: &Path) -> Vec<String> {
    git(dir, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(str::to_string)
        .collect()
}

fn completed_commit(d: &Daemon, run: &str, task: &str) -> Value {
    d.events(Some(run))
        .into_iter()
        .find(|e| e["type"] == "task.completed" && e["taskId"] == task)
        .unwrap_or_else(|| panic!("no task.completed for {task}"))["data"]["commit"]
        .clone()
}

#[test]
fn parallel_tasks_edit_different_files_and_both_land_on_the_run_branch() {
    let d = Daemon::start();
    let w = repo(&d);
    team(
        &d,
        "par",
        &[
            (
                "one",
                &[],
                "[fake:write=one.txt:from one][fake:sleep=300ms]",
            ),
            (
                "two",
                &[],
                "[fake:write=two.txt:from two][fake:append=a.txt:four\\n][fake:sleep=300ms]",
            ),
        ],
    );
    let before = checksum(w);
    let run = run_wt(&d, "par", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert_eq!(checksum(w), before, "the user's checkout is untouched");

    let branch = format!("crew/{run}");
    assert_eq!(show(w, &format!("{branch}:one.txt")), "from one");
    assert_eq!(show(w, &format!("{branch}:two.txt")), "from two");
    assert_eq!(show(w, &format!("{branch}:a.txt")), "one\ntwo\nthree\nfour");

    let c1 = completed_commit(&d, &run, "01_one");
    assert_eq!(c1["branch"], format!("crew/tasks/{run}/01_one"));
    assert_eq!(
        (c1["files"].as_u64(), c1["insertions"].as_u64()),
        (Some(1), Some(1))
    );
    let c2 = completed_commit(&d, &run, "02_two");
    assert_eq!(c2["files"], 2);
    let author = git(
        w,
        &[
            "log",
            "-1",
            "--format=%an <%ae> %s",
            c2["commit"].as_str().unwrap(),
        ],
    );
    assert_eq!(author, "crew <crew@localhost> crew: 02_two (rtwo)");

    let st = d.status(&run);
    let ws = &st["workspace"];
    assert_eq!(ws["branch"], branch);
    assert_eq!(ws["integrated"]["files"], 3);
    assert_eq!(ws["tasks"]["01_one"]["commit"], c1["commit"]);
    let patch = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "patches/01_one.patch"}),
    );
    assert!(
        patch["content"].as_str().unwrap().contains("+from one"),
        "{patch}"
    );
    assert_eq!(worktrees(w), [path_str(w)], "no worktree left behind");

    let diff = d.ok("team.diff", json!({"runId": run}));
    assert_eq!(diff["files"], 3);
    assert!(diff["patch"].as_str().unwrap().contains("+from two"));
    let one = d.ok(
        "team.diff",
        json!({"runId": run, "taskId": "01_one", "stat": true}),
    );
    assert_eq!(
        (one["files"].as_u64(), one["patch"].as_str()),
        (Some(1), Some(""))
    );
}

#[test]
fn an_integration_conflict_blocks_the_run_until_resolved_on_the_branch() {
    let d = Daemon::start();
    let w = repo(&d);
    team(
        &d,
        "clash",
        &[
            ("left", &[], "[fake:write=a.txt:one\\nLEFT\\nthree\\n]"),
            ("right", &[], "[fake:write=a.txt:one\\nRIGHT\\nthree\\n]"),
        ],
    );
    let before = checksum(w);
    let run = run_wt(&d, "clash", json!({"conflicts": "manual"}));
    assert_eq!(d.wait(&run), "blocked");
    let st = d.status(&run);
    let reason = st["run"]["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("a.txt"), "{reason}");
    assert!(
        reason.contains("01_left") && reason.contains("02_right"),
        "{reason}"
    );
    assert_eq!(checksum(w), before);

    // The user resolves on crew/<run> in a checkout of their own, then resumes.
    let branch = format!("crew/{run}");
    let fix = d.work.parent().unwrap().join("fix");
    git(w, &["worktree", "add", "-q", path_str(&fix), &branch]);
    let right = completed_commit(&d, &run, "02_right")["commit"]
        .as_str()
        .unwrap()
        .to_string();
    let merge = Command::new("git")
        .args(["merge", "-q", "--no-edit", &right])
        .current_dir(&fix)
        .output()
        .unwrap();
    assert!(!merge.status.success(), "the merge conflicts");
    std::fs::write(fix.join("a.txt"), "one\nBOTH\nthree\n").unwrap();
    git(&fix, &["add", "a.txt"]);
    git(&fix, &["commit", "-qm", "resolved"]);
    let resolved = git(&fix, &["rev-parse", "HEAD"]);
    git(w, &["worktree", "remove", path_str(&fix)]);

    d.ok("team.resume", json!({"runId": run}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let st = d.status(&run);
    assert_eq!(st["workspace"]["integrated"]["commit"], resolved);
    assert_eq!(show(w, &format!("{branch}:a.txt")), "one\nBOTH\nthree");
}

#[test]
fn a_dependent_sees_its_dependencys_edit_and_conflicting_dependencies_need_attention() {
    let d = Daemon::start();
    let w = repo(&d);
    team(
        &d,
        "chain",
        &[
            ("first", &[], "[fake:write=new.txt:made by first]"),
            (
                "second",
                &["first"],
                "[fake:cat=new.txt][fake:append=new.txt:\\nand second]",
            ),
        ],
    );
    let run = run_wt(&d, "chain", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let result = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/02_second.txt"}),
    );
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("new.txt: made by first"),
        "{result}"
    );
    assert_eq!(
        show(w, &format!("crew/{run}:new.txt")),
        "made by first\nand second"
    );
    let second = completed_commit(&d, &run, "02_second");
    let first = completed_commit(&d, &run, "01_first");
    assert_eq!(
        second["start"], first["commit"],
        "started from its dependency's result"
    );

    team(
        &d,
        "diamond",
        &[
            ("left", &[], "[fake:write=a.txt:LEFT\\n]"),
            ("right", &[], "[fake:write=a.txt:RIGHT\\n]"),
            ("join", &["left", "right"], "[fake:write=joined.txt:x]"),
        ],
    );
    let run = run_wt(&d, "diamond", json!({"conflicts": "manual"}));
    assert_eq!(d.wait(&run), "blocked");
    let st = d.status(&run);
    let join = Daemon::task(&st, "03_join");
    assert_eq!(join["status"], "needs_attention", "{st}");
    let err = join["error"].as_str().unwrap();
    assert!(err.contains("a.txt") && err.contains("01_left"), "{err}");
    assert_eq!(worktrees(w), [path_str(w)]);
}

#[test]
fn a_dirty_tree_is_the_base_without_being_touched_and_refuse_refuses() {
    let d = Daemon::start();
    let w = repo(&d);
    team(
        &d,
        "look",
        // It writes a file too: an executor that changes nothing needs attention (issue 17).
        &[(
            "look",
            &[],
            "[fake:cat=a.txt][fake:cat=untracked.txt][fake:write=seen.txt:seen]",
        )],
    );
    std::fs::write(w.join("a.txt"), "one\nchanged\nthree\n").unwrap();
    std::fs::write(w.join("untracked.txt"), "new file\n").unwrap();
    std::fs::write(w.join("x.log"), "ignored\n").unwrap();
    let before = checksum(w);

    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": path_str(w), "runtime": "fake", "team": "look",
               "workspace": "worktree", "dirty": "refuse"}),
    );
    assert_eq!(e["code"], 1003, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("uncommitted"),
        "{e}"
    );

    let started = d.ok(
        "team.run",
        json!({"goal": "g", "cwd": path_str(w), "runtime": "fake", "team": "look",
               "workspace": "worktree"}),
    );
    let run = started["runId"].as_str().unwrap().to_string();
    assert!(
        started["notes"].to_string().contains("uncommitted changes"),
        "{started}"
    );
    assert_eq!(d.wait(&run), "completed");
    let text = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/01_look.txt"}),
    )["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("a.txt: one\\nchanged\\nthree"), "{text}");
    assert!(text.contains("untracked.txt: new file"), "{text}");
    assert_eq!(checksum(w), before, "not even the index changed");
    let st = d.status(&run);
    assert_eq!(st["workspace"]["dirtyBase"], true);
    let base = st["workspace"]["base"].as_str().unwrap();
    assert!(git(w, &["ls-tree", "--name-only", base])
        .lines()
        .all(|l| l != "x.log"));
}

/// A repository whose work tree is set apart (`core.worktree` naming another folder): crew
/// runs its git in the work tree, where git finds no repository. Refused, naming why, instead
/// of "cannot read the repository: … not a git repository".
#[test]
fn a_repository_with_its_work_tree_elsewhere_is_refused_naming_core_worktree() {
    let d = Daemon::start();
    team(&d, "solo", &[("only", &[], "[fake:write=x.txt:x]")]);
    let tree = d.work.parent().unwrap().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["config", "core.worktree", path_str(&tree)]);
    std::fs::write(tree.join("a.txt"), "a\n").unwrap();
    git(
        w,
        &["-c", "user.name=u", "-c", "user.email=u@x", "add", "-A"],
    );
    git(
        w,
        &[
            "-c",
            "user.name=u",
            "-c",
            "user.email=u@x",
            "commit",
            "-qm",
            "init",
        ],
    );
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": path_str(w), "runtime": "fake", "team": "solo",
               "workspace": "worktree"}),
    );
    assert_eq!(e["code"], 1003, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("core.worktree"), "{message}");
    assert!(message.contains("shared"), "{message}");
    assert!(
        !message.contains("  "),
        "a broken line in the message: {message}"
    );
}

#[test]
fn worktree_mode_outside_a_repository_is_refused_and_the_team_mode_counts() {
    let d = Daemon::start();
    team(&d, "solo", &[("only", &[], "[fake:write=x.txt:x]")]);
    for method in ["team.run", "team.plan"] {
        let e = d.err(
            method,
            json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "team": "solo",
                   "workspace": "worktree"}),
        );
        assert_eq!(e["code"], 1003, "{method}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("git work tree"),
            "{e}"
        );
    }
    // pi-crew's `workspaceMode: worktree` on the team now means it.
    d.project_file(
        "teams/wtteam.team.md",
        "---\nname: wtteam\ndefaultWorkflow: solo\nworkspaceMode: worktree\n---\n\n- ronly: agent=executor\n",
    );
    let e = d.err(
        "team.run",
        json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "team": "wtteam"}),
    );
    assert_eq!(e["code"], 1003, "{e}");
    let w = repo(&d);
    let run = d.run("g", json!({"team": "wtteam"}));
    assert_eq!(d.wait(&run), "completed");
    assert_eq!(show(w, &format!("crew/{run}:x.txt")), "x");
    assert!(!w.join("x.txt").exists());
}

#[test]
fn apply_refuses_a_dirty_tree_then_brings_the_change_in() {
    let d = Daemon::start();
    let w = repo(&d);
    team(
        &d,
        "edit",
        &[("edit", &[], "[fake:write=b.txt:made][fake:delete=a.txt]")],
    );
    let run = run_wt(&d, "edit", json!({}));
    assert_eq!(d.wait(&run), "completed");

    std::fs::write(w.join("scratch.txt"), "mine\n").unwrap();
    let e = d.err("team.apply", json!({"runId": run}));
    assert_eq!(e["code"], 1002, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("uncommitted"),
        "{e}"
    );
    assert!(w.join("a.txt").exists());
    std::fs::remove_file(w.join("scratch.txt")).unwrap();

    let r = d.ok("team.apply", json!({"runId": run}));
    assert_eq!(r["how"], "fast_forward", "{r}");
    assert_eq!(std::fs::read_to_string(w.join("b.txt")).unwrap(), "made");
    assert!(!w.join("a.txt").exists());
    assert_eq!(git(w, &["status", "--porcelain"]), "");
    let again = d.ok("team.apply", json!({"runId": run}));
    assert_eq!(again["how"], "up_to_date");

    // The user's branch moved in a conflicting way: refused, nothing changed.
    team(
        &d,
        "edit2",
        &[("edit", &[], "[fake:write=b.txt:second run]")],
    );
    let run2 = run_wt(&d, "edit2", json!({}));
    assert_eq!(d.wait(&run2), "completed");
    std::fs::write(w.join("b.txt"), "user's own\n").unwrap();
    git(w, &["commit", "-qam", "user edit"]);
    let head = git(w, &["rev-parse", "HEAD"]);
    let e = d.err("team.apply", json!({"runId": run2}));
    assert_eq!(e["code"], 1002, "{e}");
    assert!(e["message"].as_str().unwrap().contains("b.txt"), "{e}");
    assert_eq!(git(w, &["rev-parse", "HEAD"]), head);

    // A change that does not conflict goes in as one squashed commit.
    team(&d, "edit3", &[("edit", &[], "[fake:write=c.txt:third]")]);
    let run3 = run_wt(&d, "edit3", json!({}));
    assert_eq!(d.wait(&run3), "completed");
    git(w, &["commit", "-q", "--allow-empty", "-m", "user moves on"]);
    let r = d.ok("team.apply", json!({"runId": run3, "squash": true}));
    assert_eq!(r["how"], "squash", "{r}");
    assert_eq!(std::fs::read_to_string(w.join("c.txt")).unwrap(), "third");
    assert_eq!(git(w, &["rev-list", "--count", "HEAD^..HEAD"]), "1");
}

#[test]
fn forget_removes_worktrees_and_branches_but_not_uncommitted_work_without_force() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, "one", &[("edit", &[], "[fake:write=b.txt:x]")]);
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    assert!(!git(w, &["for-each-ref", "refs/heads/crew/"]).is_empty());

    // A worktree of the run holding work nobody committed (the user poked around in it).
    let wt = d.state_dir.join("worktrees").join(&run).join("01_edit");
    git(
        w,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            path_str(&wt),
            &format!("crew/{run}"),
        ],
    );
    std::fs::write(wt.join("wip.txt"), "unsaved\n").unwrap();
    let e = d.err("team.forget", json!({"runId": run}));
    assert_eq!(e["code"], 1002, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("uncommitted"),
        "{e}"
    );
    assert!(wt.join("wip.txt").exists());

    d.ok("team.forget", json!({"runId": run, "force": true}));
    // The git cleanup follows the forget's commit: wait for it by polling git, not time.
    for _ in 0..600 {
        if git(w, &["for-each-ref", "refs/heads/crew/", "refs/crew/"]).is_empty()
            && worktrees(w).len() == 1
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        git(w, &["for-each-ref", "refs/heads/crew/", "refs/crew/"]),
        ""
    );
    assert_eq!(worktrees(w), [path_str(w)]);
    assert!(!d.state_dir.join("worktrees").join(&run).exists());
}

/// Forgetting a run that is still running says so — it used to answer that its worktrees had
/// uncommitted work and to forget with force, which then said the run was running.
#[test]
fn forgetting_a_running_run_says_it_is_running_not_to_force() {
    let d = Daemon::start();
    repo(&d);
    team(
        &d,
        "slow",
        &[("edit", &[], "[fake:write=b.txt:x][fake:sleep=3s]")],
    );
    let run = run_wt(&d, "slow", json!({}));
    let wt = d.state_dir.join("worktrees").join(&run).join("01_edit");
    wait_for_file(&wt.join("b.txt"), "the agent never wrote");
    for force in [false, true] {
        let e = d.err("team.forget", json!({"runId": run, "force": force}));
        assert_eq!(e["code"], 1002, "{e}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.contains("cancel it before forgetting it"),
            "{message}"
        );
        assert!(!message.contains("force"), "{message}");
    }
    assert_eq!(d.wait(&run), "completed");
}

/// crewd killed the instant `run.forgotten` is durable, before it cleaned the repository: the
/// next start removes the run's branches and worktree records, as forget would have, before it
/// answers anyone — and keeps a branch someone committed on, as forget would have.
#[test]
fn a_run_forgotten_just_before_a_crash_leaves_no_branches() {
    let mut d = Daemon::start_with(Opts {
        config: String::new(),
        env: vec![("CREW_TEST_FAULT".into(), "forget-data:kill".into())],
    });
    let w = repo(&d).to_path_buf();
    let w = w.as_path();
    team(
        &d,
        "two",
        &[
            ("edit", &[], "[fake:write=b.txt:x]"),
            ("more", &[], "[fake:write=c.txt:y]"),
        ],
    );
    let run = d.run(
        "change things",
        json!({"team": "two", "workspace": "worktree"}),
    );
    assert_eq!(d.wait(&run), "completed");
    let mine = format!("crew/tasks/{run}/02_more");
    git(w, &["switch", "-q", &mine]);
    git(w, &["commit", "-q", "--allow-empty", "-m", "mine"]);
    git(w, &["switch", "-q", "main"]);
    let dir = d.state_dir.join("worktrees").join(&run);
    assert!(dir.is_dir());
    let _ = d.try_http("team.forget", json!({"runId": run}));
    d.wait_killed_at_fault();
    assert!(!git(w, &["for-each-ref", "refs/heads/crew/"]).is_empty());
    d.spawn(&[]);
    assert_eq!(
        git(
            w,
            &[
                "for-each-ref",
                "--format=%(refname)",
                "refs/heads/crew/",
                "refs/crew/"
            ]
        ),
        format!("refs/heads/{mine}"),
        "{}",
        d.log_text()
    );
    assert_eq!(worktrees(w), [path_str(w)]);
    assert!(!dir.exists());
}

/// A retry moves the task's branch back to its start: crew's earlier result is kept as the
/// earlier attempt's ref; a commit of the user's on the branch, or the branch checked out in a
/// worktree of theirs, stops the retry with the way to keep the work (it was dropped).
#[test]
fn a_retry_never_drops_what_is_on_the_tasks_branch() {
    let d = Daemon::start();
    let w = repo(&d).to_path_buf();
    let w = w.as_path();
    team(&d, "one", &[("edit", &[], "[fake:write=b.txt:x]")]);
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    let branch = format!("crew/tasks/{run}/01_edit");
    let first = git(w, &["rev-parse", &branch]);
    // crew's own result, retried: kept.
    d.ok("team.retry", json!({"runId": run, "taskIds": ["01_edit"]}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert_eq!(
        git(
            w,
            &[
                "rev-parse",
                &format!("refs/crew/{run}/01_edit/before-attempt-2")
            ]
        ),
        first
    );
    // A commit of the user's on the branch.
    let mine = d.dir.path().join("mine");
    git(w, &["worktree", "add", "-q", path_str(&mine), &branch]);
    std::fs::write(mine.join("mine.txt"), "mine\n").unwrap();
    git(&mine, &["add", "mine.txt"]);
    git(&mine, &["commit", "-qm", "mine"]);
    let users = git(w, &["rev-parse", &branch]);
    // Checked out in that worktree: not moved.
    d.ok("team.retry", json!({"runId": run, "taskIds": ["01_edit"]}));
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let st = d.status(&run);
    let error = Daemon::task(&st, "01_edit")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(error.contains("checked out in a worktree of yours"), "{st}");
    assert_eq!(git(w, &["rev-parse", &branch]), users);
    // Not checked out any more, still the user's commit: not moved either.
    git(w, &["worktree", "remove", path_str(&mine)]);
    d.ok("team.resume", json!({"runId": run}));
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let st = d.status(&run);
    let error = Daemon::task(&st, "01_edit")["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("holds a commit crew did not put there"),
        "{st}"
    );
    assert_eq!(git(w, &["rev-parse", &branch]), users);
}

/// The run's branch checked out in the user's checkout is never moved under them by a later
/// integration: the run blocks and says how to go on.
#[test]
fn the_runs_branch_is_not_moved_under_the_users_checkout() {
    let d = Daemon::start();
    let w = repo(&d).to_path_buf();
    let w = w.as_path();
    // The sleep makes the retry's commit a second younger, so its integration differs.
    team(
        &d,
        "one",
        &[("edit", &[], "[fake:write=b.txt:x][fake:sleep=1100ms]")],
    );
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed");
    git(w, &["switch", "-q", &format!("crew/{run}")]);
    let head = git(w, &["rev-parse", "HEAD"]);
    d.ok("team.retry", json!({"runId": run, "taskIds": ["01_edit"]}));
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let reason = d.status(&run)["run"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        reason.contains("checked out in a checkout of yours"),
        "{reason}"
    );
    assert_eq!(git(w, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(w, &["status", "--porcelain"]), "");
    git(w, &["switch", "-q", "main"]);
    d.ok("team.resume", json!({"runId": run}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
}

#[test]
fn a_killed_daemons_retry_starts_from_a_clean_worktree() {
    let mut d = Daemon::start();
    let w = repo(&d).to_path_buf();
    let w = w.as_path();
    team(
        &d,
        "slow",
        &[(
            "edit",
            &[],
            "[fake:cat=half.txt][fake:write=half.txt:half done][fake:sleep=1500ms]",
        )],
    );
    let before = checksum(w);
    let run = run_wt(&d, "slow", json!({}));
    let wt = d.state_dir.join("worktrees").join(&run).join("01_edit");
    // Wait until the first attempt edited its worktree.
    for _ in 0..1200 {
        if wt.join("half.txt").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(wt.join("half.txt").exists(), "the first attempt edits");
    d.kill9();
    d.restart();
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let text = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/01_edit.txt"}),
    )["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.contains("half.txt: <missing>"),
        "the retry starts clean: {text}"
    );
    assert_eq!(worktrees(w), [path_str(w)], "no stale worktree entries");
    // The first attempt's tree is kept as a ref.
    let refs = git(
        w,
        &[
            "for-each-ref",
            "--format=%(refname)",
            &format!("refs/crew/{run}/"),
        ],
    );
    assert!(refs.contains("attempt-1"), "{refs}");
    assert_eq!(checksum(w), before);
}

/// A git call crewd started is still running when crewd is killed (`kill -9` leaves its
/// children): the next crewd of the state dir kills it before its recovery touches the
/// repository, instead of racing it. Here `git worktree add` hangs (a `git` wrapper first on
/// crewd's PATH) while a flag file exists.
#[test]
fn a_git_left_running_by_a_killed_daemon_is_ended_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let real_git = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let flag = dir.path().join("hang");
    let wrapper = dir.path().join("git");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" worktree add \"*) if [ -e '{flag}' ]; then \
             echo $$ > '{flag}.pid'; exec sleep 600; fi;; esac\nexec {real} \"$@\"\n",
            flag = flag.display(),
            real = real_git.trim(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = vec![("PATH".to_string(), path)];
    let mut d = Daemon::start_with(Opts {
        env: env.clone(),
        ..Default::default()
    });
    repo(&d);
    team(&d, "one", &[("edit", &[], "[fake:write=b.txt:b]")]);
    std::fs::write(&flag, "").unwrap();
    let run = run_wt(&d, "one", json!({}));
    let pid_file = dir.path().join("hang.pid");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let pid: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.trim().parse().ok())
        {
            break pid;
        }
        assert!(std::time::Instant::now() < deadline, "git never hung");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // Not left behind if an assertion below fails.
    struct Reap(u32);
    impl Drop for Reap {
        fn drop(&mut self) {
            // Only while it is still that git (its pid may be another process's by now).
            let environ = std::fs::read(format!("/proc/{}/environ", self.0)).unwrap_or_default();
            if !environ.windows(15).any(|w| w == b"CREW_GIT_OWNER=") {
                return;
            }
            let _ = std::process::Command::new("kill")
                .args(["-9", &self.0.to_string()])
                .status();
        }
    }
    let _reap = Reap(pid);
    let running = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| Some(s[s.rfind(')')? + 1..].trim_start().chars().next()? != 'Z'))
            .unwrap_or(false)
    };
    d.kill9();
    assert!(running(pid), "crewd's git outlives a kill -9 of crewd");
    std::fs::remove_file(&flag).unwrap();
    d.spawn(&env);
    assert!(!running(pid), "the git the killed daemon left still runs");
    assert!(
        d.log_text()
            .contains("killed git processes the previous daemon left running"),
        "not said"
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
}

/// A user's sparse checkout: a task writing outside the cone (its worktree is sparse too)
/// completes, its file is in the run's integration, and what the cone leaves out stays.
#[test]
fn a_task_of_a_sparse_checkout_writes_outside_the_cone() {
    let d = Daemon::start();
    let w = repo(&d);
    std::fs::create_dir_all(w.join("src")).unwrap();
    std::fs::create_dir_all(w.join("docs")).unwrap();
    std::fs::write(w.join("src/s.txt"), "s\n").unwrap();
    std::fs::write(w.join("docs/d.txt"), "d\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "dirs"]);
    git(w, &["sparse-checkout", "set", "--cone", "src"]);
    assert!(!w.join("docs").exists());
    team(
        &d,
        "docs",
        &[("write", &[], "[fake:write=docs/new.txt:new]")],
    );
    let run = run_wt(&d, "docs", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let st = d.status(&run);
    let integrated = st["workspace"]["integrated"]["commit"].as_str().unwrap();
    assert_eq!(show(w, &format!("{integrated}:docs/new.txt")), "new");
    assert_eq!(show(w, &format!("{integrated}:docs/d.txt")), "d");
    assert!(
        !w.join("docs").exists(),
        "the user's checkout is left as it was"
    );
}

#[test]
fn submodules_and_filters_behave_clearly() {
    let d = Daemon::start();
    let w = repo(&d);
    // An LFS-style clean/smudge filter from the user's config is honoured by crew's commits.
    git(w, &["config", "filter.upper.clean", "tr a-z A-Z"]);
    git(w, &["config", "filter.upper.smudge", "cat"]);
    std::fs::write(w.join(".gitattributes"), "*.up filter=upper\n").unwrap();
    // A submodule: its gitlink stays as it is; the task sees an empty directory.
    let sub = d.work.parent().unwrap().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q", "-b", "main"]);
    std::fs::write(sub.join("s.txt"), "s\n").unwrap();
    git(&sub, &["add", "-A"]);
    git(&sub, &["commit", "-qm", "s"]);
    git(
        w,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            path_str(&sub),
            "sub",
        ],
    );
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "filter + submodule"]);
    team(
        &d,
        "f",
        &[("edit", &[], "[fake:write=x.up:shout][fake:cat=sub/s.txt]")],
    );
    let before = checksum(w);
    let run = run_wt(&d, "f", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert_eq!(show(w, &format!("crew/{run}:x.up")), "SHOUT");
    let c = completed_commit(&d, &run, "01_edit");
    assert_eq!(
        c["files"], 1,
        "the submodule is not part of the change: {c}"
    );
    assert_eq!(checksum(w), before);
}

/// The cwd a fake agent's attempt ran in: its transcript's session line says.
fn attempt_cwd(d: &Daemon, run: &str, task: &str) -> String {
    let t = d.ok(
        "team.artifact",
        json!({"runId": run, "name": format!("transcripts/{task}.attempt-1.jsonl")}),
    );
    let text = t["content"].as_str().unwrap().to_string();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "session")
        .and_then(|v| v["cwd"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no session line in {text}"))
}

#[test]
fn read_only_tasks_share_one_checkout_per_start_commit() {
    let d = Daemon::start();
    let w = repo(&d);
    d.project_file(
        "teams/readers.team.md",
        "---\nname: readers\ndefaultWorkflow: readers\n---\n\n\
         - look: agent=explorer\n- exec: agent=executor\n",
    );
    // Two explorers at the base at once, an executor after them, a third explorer after the
    // executor (a new start commit: a checkout of its own).
    d.project_file(
        "workflows/readers.workflow.md",
        "---\nname: readers\n---\n\n\
         ## one\nrole: look\n\n[fake:sleep=3s]\n\n\
         ## two\nrole: look\n\n[fake:sleep=3s]\n\n\
         ## edit\nrole: exec\ndependsOn: one, two\n\n[fake:write=b.txt:new]\n\n\
         ## check\nrole: look\ndependsOn: edit\n\n[fake:cat=b.txt]\n\n",
    );
    let before = checksum(w);
    let run = run_wt(&d, "readers", json!({}));
    // Both explorers' workers are running: the repository has one checkout besides the user's.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let spawned = d
            .events(Some(&run))
            .iter()
            .filter(|e| e["type"] == "worker.spawned")
            .count();
        if spawned >= 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", d.status(&run));
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let during = worktrees(w);
    assert_eq!(
        during.len(),
        2,
        "one shared checkout for two readers: {during:?}"
    );
    let base = git(w, &["rev-parse", "HEAD"]);
    assert!(
        during[1].ends_with(&format!("readers-{base}")),
        "{during:?}"
    );

    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert_eq!(checksum(w), before, "the user's checkout is untouched");
    let (one, two) = (
        attempt_cwd(&d, &run, "01_one"),
        attempt_cwd(&d, &run, "02_two"),
    );
    assert_eq!(one, two, "both readers worked in the same checkout");
    assert_ne!(
        attempt_cwd(&d, &run, "03_edit"),
        one,
        "a writer has its own"
    );
    let check = attempt_cwd(&d, &run, "04_check");
    let edit = completed_commit(&d, &run, "03_edit");
    assert!(
        check.ends_with(&format!("readers-{}", edit["commit"].as_str().unwrap())),
        "a reader after the edit starts at its commit: {check}"
    );
    let result = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/04_check.txt"}),
    );
    assert!(
        result["content"].as_str().unwrap().contains("new"),
        "the reader saw the edit: {result}"
    );
    // A reader's result commit is its start, on its own branch.
    let c1 = completed_commit(&d, &run, "01_one");
    assert_eq!(c1["commit"], base);
    assert_eq!(
        (c1["start"].as_str(), c1["files"].as_u64()),
        (Some(base.as_str()), Some(0))
    );
    assert_eq!(
        git(w, &["rev-parse", &format!("crew/tasks/{run}/01_one")]),
        base
    );
    assert_eq!(show(w, &format!("crew/{run}:b.txt")), "new");
    assert_eq!(worktrees(w), [path_str(w)], "no checkout left behind");
}

#[test]
fn a_writing_task_reuses_its_result_commit_only_from_the_same_start_commit() {
    let d = Daemon::start();
    let w = repo(&d);
    team(
        &d,
        "re",
        &[("edit", &[], "[fake:write=c.txt:made once][fake:tokens=500]")],
    );
    let all = json!({"reuseResults": "all"});
    let r1 = run_wt(&d, "re", all.clone());
    assert_eq!(d.wait(&r1), "completed", "{}", d.status(&r1));
    let c1 = completed_commit(&d, &r1, "01_edit");

    // Same prompt, same start commit: the agent does not run, the result commit is taken.
    let before = checksum(w);
    let r2 = run_wt(&d, "re", all.clone());
    assert_eq!(d.wait(&r2), "completed", "{}", d.status(&r2));
    let st = d.status(&r2);
    let t = Daemon::task(&st, "01_edit");
    assert_eq!(t["reusedFrom"]["runId"], r1.as_str(), "{st}");
    let c2 = completed_commit(&d, &r2, "01_edit");
    assert_eq!(c2["commit"], c1["commit"], "the cached result commit");
    assert_eq!(c2["start"], c1["start"]);
    assert_eq!(c2["branch"], format!("crew/tasks/{r2}/01_edit"));
    assert_eq!(
        (c2["files"].as_u64(), c2["insertions"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(show(w, &format!("crew/{r2}:c.txt")), "made once");
    let patch = d.ok(
        "team.artifact",
        json!({"runId": r2, "name": "patches/01_edit.patch"}),
    );
    assert!(
        patch["content"].as_str().unwrap().contains("+made once"),
        "{patch}"
    );
    assert_eq!(checksum(w), before, "the user's checkout is untouched");
    assert_eq!(worktrees(w), [path_str(w)], "no worktree left behind");

    // The user's branch moved: a new start commit, so the agent runs again on it.
    std::fs::write(w.join("a.txt"), "moved\n").unwrap();
    git(w, &["commit", "-qam", "move"]);
    let head = git(w, &["rev-parse", "HEAD"]);
    let r3 = run_wt(&d, "re", all.clone());
    assert_eq!(d.wait(&r3), "completed", "{}", d.status(&r3));
    let st = d.status(&r3);
    assert!(Daemon::task(&st, "01_edit")["reusedFrom"].is_null(), "{st}");
    let c3 = completed_commit(&d, &r3, "01_edit");
    assert_eq!(c3["start"], head.as_str());
    assert_ne!(c3["commit"], c1["commit"]);
    assert_eq!(
        git(
            w,
            &["rev-parse", &format!("{}^", c3["commit"].as_str().unwrap())]
        ),
        head
    );

    // Read-only reuse (the default) never takes a writer's result.
    let r4 = run_wt(&d, "re", json!({"reuseResults": true}));
    assert_eq!(d.wait(&r4), "completed", "{}", d.status(&r4));
    assert!(Daemon::task(&d.status(&r4), "01_edit")["reusedFrom"].is_null());
}

/// A daemon (more config in `extra`) whose runtime `committer` is an agent that commits its
/// own work in the task's worktree (`own.txt`).
fn committer(extra: &str) -> Daemon {
    let script =
        "echo mine > own.txt && git add own.txt && git commit -qm 'own work' && echo OWN-OK";
    Daemon::start_with(Opts {
        config: format!(
            "{extra}[runtimes.committer]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
        ..Opts::default()
    })
}

/// A completed worktree run of the committer's one step (task `01_only`).
fn committed_run(d: &Daemon) -> String {
    one_step_team(d, "own", "Commit your work.", "executor");
    let run = run_wt(d, "own", json!({"runtime": "committer"}));
    assert_eq!(d.wait(&run), "completed", "{:#}", d.status(&run));
    run
}

/// An agent that commits its own work (agents often do; a boxed one may): that commit is the
/// task's result and reaches the integration. Before, a clean tree after the agent's commit
/// read as "nothing changed" and the result was the start, the agent's commit dropped.
#[test]
fn an_agents_own_commit_is_the_tasks_result() {
    let d = committer("");
    let w = repo(&d);
    let run = committed_run(&d);
    let c = completed_commit(&d, &run, "01_only");
    let commit = c["commit"].as_str().unwrap();
    assert_ne!(c["start"].as_str().unwrap(), commit, "{c}");
    assert_eq!(show(w, &format!("{commit}:own.txt")), "mine");
    assert_eq!(git(w, &["log", "-1", "--format=%s", commit]), "own work");
    assert_eq!(c["files"], 1, "{c}");
    let st = d.status(&run);
    let integrated = st["workspace"]["integrated"]["commit"].as_str().unwrap();
    assert_eq!(show(w, &format!("{integrated}:own.txt")), "mine");
}

/// Unboxed, an agent commits on the task's branch itself, as the user: a retry goes on, the
/// tip being the result crew recorded (it stopped as "a commit crew did not put there").
#[test]
fn a_retry_after_an_unboxed_agents_own_commit_goes_on() {
    let d = committer("sandbox = \"off\"\n");
    let w = repo(&d);
    let run = committed_run(&d);
    let branch = format!("crew/tasks/{run}/01_only");
    assert_eq!(
        git(w, &["log", "-g", "-1", "--format=%ge", &branch]),
        "user@example.com",
        "the agent moved the branch"
    );
    d.ok("team.retry", json!({"runId": run, "taskIds": ["01_only"]}));
    assert_eq!(d.wait(&run), "completed", "{:#}", d.status(&run));
}

/// An agent that moves HEAD to a commit without its start (here a new root commit) does not
/// hand that in: its result would drop what the task started from. The task fails naming it,
/// the commit kept under the attempt's ref, the branch back at the start.
#[test]
fn an_agent_that_moves_head_off_its_start_is_refused() {
    let script = "git reset -q --hard \"$(git commit-tree \"$(git mktree </dev/null)\" -m elsewhere)\" && echo MOVED";
    let d = Daemon::start_with(Opts {
        config: format!(
            "[runtimes.mover]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
        ..Opts::default()
    });
    let w = repo(&d);
    one_step_team(&d, "away", "Do it.", "executor");
    let run = run_wt(&d, "away", json!({"runtime": "mover"}));
    assert_eq!(d.wait(&run), "failed", "{:#}", d.status(&run));
    let st = d.status(&run);
    let t = Daemon::task(&st, "01_only");
    let err = t["error"].as_str().unwrap();
    assert!(err.contains("does not contain the task's start"), "{err}");
    let kept = git(
        w,
        &["rev-parse", &format!("refs/crew/{run}/01_only/attempt-1")],
    );
    assert_eq!(git(w, &["log", "-1", "--format=%s", &kept]), "elsewhere");
    let base = git(w, &["rev-parse", "HEAD"]);
    assert_eq!(
        git(
            w,
            &["rev-parse", &format!("refs/heads/crew/tasks/{run}/01_only")]
        ),
        base,
        "the branch is back at the start"
    );
}

/// Import `bundle`; where crewd takes it, resume the run as confirmed and let it end (what a
/// hole would do with it). The import's answer.
fn import_and_resume(d: &Daemon, run: &str, bundle: Value) -> Value {
    let r = d.http("team.import", json!({"bundle": bundle}));
    if r.get("result").is_some() {
        d.ok(
            "team.resume",
            json!({"runId": run, "confirmImported": true}),
        );
        d.wait(run);
    }
    r
}

/// A bundle is someone else's: a worktree run's commit ids are handed to git as arguments
/// (`team.diff` runs `git diff BASE RESULT` on an imported run, unconfirmed). A "commit"
/// `--output=FILE` made that diff an option writing FILE; every commit id of a bundle's
/// worktree run must be a full object id.
#[test]
fn an_imported_worktree_runs_commit_ids_cannot_be_git_options() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, "one", &[("only", &[], "[fake:write=new.txt:made]")]);
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let created = d
        .events(Some(&run))
        .into_iter()
        .find(|e| e["type"] == "run.created")
        .unwrap();
    let base = created["data"]["workspace"]["base"]
        .as_str()
        .unwrap()
        .to_string();
    let victim = d.dir.path().join("victim.txt");
    std::fs::write(&victim, "the user's file\n").unwrap();
    let option = format!("--output={}", path_str(&victim));
    // Everywhere: the run's view says the same as its events.
    let evil = forged_bundle(&d, &run, |b| {
        text_replaced(&b, &base, &option.replace('/', "\\/"))
    });
    let r = d.http("team.import", json!({"bundle": evil}));
    if r.get("result").is_some() {
        // What the hole did: the diff of the imported run rewrote the user's file.
        let _ = d.http("team.diff", json!({"runId": run}));
    }
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the user's file\n",
        "git wrote the user's file"
    );
    assert_eq!(r["error"]["code"], 1003, "{r}");
    assert!(
        r["error"]
            .to_string()
            .contains("base is not a full commit id"),
        "{r}"
    );
    assert!(git(w, &["status", "--porcelain"]).is_empty());
}

/// A worktree run's `subdir` (its cwd in the repository) is joined to the task's worktree to
/// make the agent's cwd, writable in its box: an absolute or `..` one put it anywhere, where
/// the import's confirmation does not show. Refused at import; an honest imported worktree
/// run's confirmation names its repository.
#[test]
fn an_imported_worktree_run_cannot_put_its_agent_outside_its_worktree() {
    let d = Daemon::start();
    let w = repo(&d);
    team(
        &d,
        "one",
        &[("only", &[], "[fake:write=PWNED.txt:x][fake:fail]")],
    );
    let outside = d.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    for subdir in [
        path_str(&outside).to_string(),
        "../../../../../../../../../..".to_string() + path_str(&outside),
    ] {
        let run = run_wt(&d, "one", json!({}));
        assert_eq!(d.wait(&run), "failed", "{}", d.status(&run));
        let evil = forged_bundle(&d, &run, |mut b| {
            run_created(&mut b)["data"]["workspace"]["subdir"] = json!(subdir);
            b
        });
        // What the hole did: the agent ran, and wrote, in `outside`.
        let r = import_and_resume(&d, &run, evil);
        assert!(
            !outside.join("PWNED.txt").exists(),
            "{subdir}: the agent wrote outside its worktree"
        );
        assert_eq!(r["error"]["code"], 1003, "{subdir}: {r}");
        assert!(
            r["error"]
                .to_string()
                .contains("subdir is not a relative path"),
            "{r}"
        );
    }
    // As exported: the confirmation names the repository the worktrees are made from.
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "failed");
    let bundle = forged_bundle(&d, &run, |b| b);
    d.ok("team.import", json!({"bundle": bundle}));
    let e = d.err("team.resume", json!({"runId": run}));
    assert_eq!(e["code"], 1002, "{e}");
    assert_eq!(e["data"]["repo"], path_str(w), "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains(&format!("worktrees of the repository {}", path_str(w))),
        "{e}"
    );
}

/// The same check, for what `team.resume` does with an imported worktree run's base: crew
/// records a task's start with `git update-ref --stdin`, one command a line, so a base
/// `<commit>\ndelete refs/heads/main` would delete the user's branch.
#[test]
fn an_imported_worktree_runs_base_cannot_carry_ref_commands() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, "one", &[("only", &[], "[fake:fail]")]);
    let run = run_wt(&d, "one", json!({}));
    assert_eq!(d.wait(&run), "failed", "{}", d.status(&run));
    let base = git(w, &["rev-parse", "HEAD"]);
    let evil = forged_bundle(&d, &run, |b| {
        text_replaced(&b, &base, &format!("{base}\\ndelete refs/heads/main"))
    });
    // What the hole did: resuming the run deleted the user's branch.
    let r = import_and_resume(&d, &run, evil);
    assert_eq!(
        git(
            w,
            &["for-each-ref", "--format=%(refname)", "refs/heads/main"]
        ),
        "refs/heads/main",
        "the user's branch was deleted"
    );
    assert_eq!(r["error"]["code"], 1003, "{r}");
}

/// The user moves the repository away while a task works: its worktree's content can no longer
/// be saved in the repository, and the worktree used to be deleted all the same, the agent's
/// files with it. They are kept aside under `<state>/unsaved/` now.
#[test]
fn a_worktree_that_cannot_be_saved_is_kept_aside_not_deleted() {
    let d = Daemon::start();
    repo(&d);
    one_step_team(
        &d,
        "slow",
        "Do. [fake:write=b.txt:the agent's work][fake:sleep=2s]",
        "executor",
    );
    let run = d.run("do", json!({"team": "slow", "workspace": "worktree"}));
    let wt = d.state_dir.join("worktrees").join(&run).join("01_only");
    wait_for_file(&wt.join("b.txt"), "the agent never wrote");
    let moved = d.work.with_file_name("moved");
    std::fs::rename(&d.work, &moved).unwrap();
    let end = d.wait(&run);
    assert_ne!(end, "completed", "{}", d.status(&run));
    let kept = d.state_dir.join("unsaved").join(&run).join("01_only-1");
    assert_eq!(
        std::fs::read_to_string(kept.join("b.txt")).unwrap_or_default(),
        "the agent's work",
        "{}",
        d.log_text()
    );
    assert!(d.log_text().contains("its files are kept aside"));
    // Forget names them, and leaves them.
    let r = d.ok("team.forget", json!({"runId": run}));
    assert!(r["notes"].to_string().contains("could not be saved"), "{r}");
    assert!(kept.join("b.txt").exists());
}

/// A task retried just as the run integrates: the integration's sweep of leftover worktrees
/// (held here until the retry's worktree is made) passes over the worktree the retry is
/// working in. It used to take it for a leftover of a killed daemon and retire it under the
/// running agent, whose attempt then failed.
#[test]
fn the_integrations_sweep_leaves_a_retrys_worktree_alone() {
    let root = tempfile::tempdir().unwrap();
    let go = root.path().join("go");
    let d = Daemon::start_with(Opts {
        config: String::new(),
        env: vec![(
            "CREW_TEST_FAULT".into(),
            format!("sweep:wait={}", path_str(&go)),
        )],
    });
    let w = repo(&d).to_path_buf();
    one_step_team(
        &d,
        "slow",
        "Do. [fake:write=b.txt:b][fake:sleep=2s]",
        "executor",
    );
    let run = d.run("do", json!({"team": "slow", "workspace": "worktree"}));
    d.wait_log("fault point holds until the file exists");
    d.ok("team.retry", json!({"runId": run, "taskIds": ["01_only"]}));
    let wt = d.state_dir.join("worktrees").join(&run).join("01_only");
    wait_for_file(&wt.join("b.txt"), "the retry never wrote");
    // The sweep goes on while the retry's agent still runs (it sleeps after its write).
    std::fs::write(&go, "").unwrap();
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let st = d.status(&run);
    let task = Daemon::task(&st, "01_only");
    assert_eq!(task["attempts"], 2, "the retry's one attempt: {task}");
    let refs = git(
        &w,
        &[
            "for-each-ref",
            "--format=%(refname)",
            &format!("refs/crew/{run}/"),
        ],
    );
    assert!(
        !refs.contains("leftover"),
        "the retry's worktree was retired: {refs}"
    );
}

/// A task retried while the run's results are being merged (off the actor): that merge is of
/// the old result, so it is dropped and the run integrates again once the task is done —
/// the run used to complete with the old merge, without the retried task's result.
#[test]
fn a_retry_during_the_integration_makes_it_start_again() {
    let root = tempfile::tempdir().unwrap();
    let go = root.path().join("go");
    let d = Daemon::start_with(Opts {
        config: String::new(),
        env: vec![(
            "CREW_TEST_FAULT".into(),
            format!("integrate:wait={}", path_str(&go)),
        )],
    });
    repo(&d);
    one_step_team(
        &d,
        "slow",
        "Do. [fake:sleep=3s][fake:write=b.txt:b]",
        "executor",
    );
    let run = d.run("do", json!({"team": "slow", "workspace": "worktree"}));
    d.wait_log("fault point holds until the file exists");
    d.ok("team.retry", json!({"runId": run, "taskIds": ["01_only"]}));
    std::fs::write(&go, "").unwrap();
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let last = |kind: &str| {
        evs.iter()
            .rposition(|e| {
                e["type"] == kind && (e["taskId"] == "01_only" || kind == "run.integrated")
            })
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    assert!(
        last("run.integrated") > last("task.completed"),
        "the run was integrated before the retried task's result"
    );
    let done: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "task.completed" && e["taskId"] == "01_only")
        .collect();
    assert_eq!(done.len(), 2);
}
