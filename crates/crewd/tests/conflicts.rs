//! Conflicting results (issue 31). An agent resolves (the default): a resolve task between the
//! conflicting tasks and the one that needed them, its result checked for markers, retried
//! once, then the manual way on its branch. The manual way (`conflicts: manual`): crew's
//! message followed literally by the test (a worktree of the user's own, one `git merge` per
//! input left, commit, `crewctl resume`), and a resolution that lacks an input refused with the
//! branch left as the user made it.

mod common;

use common::{git, path_str, Daemon, Opts};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Three parallel tasks and one that needs all of them: `01_left` and `02_right` change the
/// same line, `03_notes` another file, so merging the join's inputs stops at the second of
/// three.
fn three_into_one(d: &Daemon) {
    team(d, true)
}

/// `01_left`, `02_right` and `03_notes`, then (with `join`) `04_join` needing all three.
fn team(d: &Daemon, join: bool) {
    team_with(d, join, "")
}

/// What a fake resolver writes: both sides' lines.
const RESOLVES: &str = "[fake:resolve-write=a.txt:one\\nLEFT\\nRIGHT\\nthree\\n]";

/// `team`, with `resolver` in the left task's text: the resolver's prompt quotes each side's
/// task, and only a resolve task acts on a `resolve-write`.
fn team_with(d: &Daemon, join: bool, resolver: &str) {
    let left = format!("[fake:write=a.txt:one\\nLEFT\\nthree\\n]{resolver}");
    let mut steps: Vec<(&str, &[&str], &str)> = vec![
        ("left", &[], left.as_str()),
        ("right", &[], "[fake:write=a.txt:one\\nRIGHT\\nthree\\n]"),
        ("notes", &[], "[fake:write=notes.txt:notes\\n]"),
    ];
    if join {
        steps.push((
            "join",
            &["left", "right", "notes"],
            "[fake:cat=a.txt][fake:write=joined.txt:joined\\n]",
        ));
    }
    let mut roles = String::new();
    let mut wf = "---\nname: clash\n---\n\n".to_string();
    for (id, deps, task) in steps {
        roles.push_str(&format!("- r{id}: agent=executor\n"));
        wf.push_str(&format!("## {id}\nrole: r{id}\n"));
        if !deps.is_empty() {
            wf.push_str(&format!("dependsOn: {}\n", deps.join(", ")));
        }
        wf.push_str(&format!("\n{task}\n\n"));
    }
    d.project_file(
        "teams/clash.team.md",
        &format!("---\nname: clash\ndefaultWorkflow: clash\n---\n\n{roles}"),
    );
    d.project_file("workflows/clash.workflow.md", &wf);
}

/// A run that resolves conflicts by hand.
fn start(d: &Daemon) -> String {
    d.run(
        "change things",
        json!({"team": "clash", "workspace": "worktree", "conflicts": "manual"}),
    )
}

/// A run with the default: an agent resolves.
fn start_agent(d: &Daemon) -> String {
    d.run(
        "change things",
        json!({"team": "clash", "workspace": "worktree"}),
    )
}

fn commit_of(d: &Daemon, run: &str, task: &str) -> String {
    d.events(Some(run))
        .into_iter()
        .find(|e| e["type"] == "task.completed" && e["taskId"] == task)
        .unwrap_or_else(|| panic!("no task.completed for {task}"))["data"]["commit"]["commit"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The join's message once the run blocked on it.
fn blocked_message(d: &Daemon, run: &str) -> String {
    assert_eq!(d.wait(run), "blocked", "{}", d.status(run));
    let st = d.status(run);
    let join = Daemon::task(&st, "04_join");
    assert_eq!(join["status"], "needs_attention", "{st}");
    join["error"].as_str().unwrap().to_string()
}

/// The commands in crew's message, in order, as the user would type them: comments dropped.
fn commands(message: &str) -> Vec<Vec<String>> {
    message
        .lines()
        .map(|l| l.split("   #").next().unwrap_or_default().trim())
        .map(|l| l.strip_prefix("then: ").unwrap_or(l))
        .filter(|l| l.starts_with("git ") || l.starts_with("cd ") || l.starts_with("crewctl "))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// Run `git args` in `dir`; whether it succeeded.
fn git_may_fail(dir: &Path, args: &[String]) -> bool {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "user")
        .env("GIT_AUTHOR_EMAIL", "user@example.com")
        .env("GIT_COMMITTER_NAME", "user")
        .env("GIT_COMMITTER_EMAIL", "user@example.com")
        .output()
        .unwrap()
        .status
        .success()
}

/// Follow the message literally, up to `crewctl resume` (returned, not run). A merge that
/// conflicts is resolved keeping both lines; merges of the inputs named in `skip` are left
/// out (a user who missed one). Returns the resume command and the user's worktree.
fn follow(w: &Path, message: &str, skip: &[String]) -> (Vec<String>, PathBuf) {
    let mut cwd = w.to_path_buf();
    let mut worktree = PathBuf::new();
    for c in commands(message) {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        match args.as_slice() {
            ["cd", to] => {
                cwd = PathBuf::from(to);
                if worktree.as_os_str().is_empty() {
                    worktree = cwd.clone();
                }
            }
            ["crewctl", "resume", _] => return (c, worktree),
            ["git", "merge", .., commit] if skip.iter().any(|s| s == commit) => {}
            ["git", "merge", ..] => {
                if !git_may_fail(&cwd, &c[1..]) {
                    std::fs::write(cwd.join("a.txt"), "one\nLEFT\nRIGHT\nthree\n").unwrap();
                    git(&cwd, &["add", "-A"]);
                    git(&cwd, &["commit", "-q", "--no-edit"]);
                }
            }
            ["git", ..] => assert!(git_may_fail(&cwd, &c[1..]), "{c:?} failed"),
            other => panic!("a command the test does not know: {other:?}"),
        }
    }
    panic!("the message gives no `crewctl resume`: {message}")
}

fn resume(d: &Daemon, cmd: &[String]) {
    assert_eq!(cmd.first().map(String::as_str), Some("crewctl"));
    d.ok("team.resume", json!({"runId": cmd[2]}));
}

fn branch_tip(w: &Path, branch: &str) -> String {
    git(w, &["rev-parse", &format!("refs/heads/{branch}")])
}

#[test]
fn the_manual_way_followed_literally_completes_with_the_users_commit() {
    let d = Daemon::start();
    let w = repo(&d);
    three_into_one(&d);
    let head_before = git(w, &["rev-parse", "HEAD"]);
    let run = start(&d);
    let message = blocked_message(&d, &run);
    // Every input named, and how far the merge got: it stopped at the second of three.
    assert!(
        message.starts_with("conflict in a.txt (01_left × 02_right)")
            && message.contains("merged 01_left; merging 02_right into that conflicts")
            && message.contains("not merged yet: 03_notes")
            && message.contains("a.txt"),
        "{message}"
    );
    assert!(!message.contains("git switch"), "{message}");
    let st = d.status(&run);
    assert!(
        st["run"]["reason"]
            .as_str()
            .unwrap()
            .contains("04_join needs attention"),
        "{st}"
    );

    let (resume_cmd, worktree) = follow(w, &message, &[]);
    // The user's checkout never left its branch.
    assert_eq!(git(w, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
    assert_eq!(git(w, &["rev-parse", "HEAD"]), head_before);
    assert!(
        !worktree.exists(),
        "the message's commands remove the worktree"
    );
    let branch = format!("crew/tasks/{run}/04_join");
    let resolved = branch_tip(w, &branch);
    resume(&d, &resume_cmd);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));

    // The join started from the user's commit, which is still on its branch, under the result.
    let st = d.status(&run);
    let join = &st["workspace"]["tasks"]["04_join"];
    assert_eq!(join["start"], resolved.as_str(), "{st}");
    let result = commit_of(&d, &run, "04_join");
    git(w, &["merge-base", "--is-ancestor", &resolved, &result]);
    git(
        w,
        &[
            "merge-base",
            "--is-ancestor",
            &resolved,
            &branch_tip(w, &branch),
        ],
    );
    let integrated = st["workspace"]["integrated"]["commit"].as_str().unwrap();
    git(w, &["merge-base", "--is-ancestor", &resolved, integrated]);
    assert_eq!(
        git(w, &["show", &format!("{integrated}:a.txt")]),
        "one\nLEFT\nRIGHT\nthree"
    );
    assert_eq!(
        git(w, &["show", &format!("{integrated}:notes.txt")]),
        "notes"
    );
}

#[test]
fn a_resolution_lacking_an_input_is_refused_naming_it_and_the_branch_is_untouched() {
    let d = Daemon::start();
    let w = repo(&d);
    three_into_one(&d);
    let run = start(&d);
    let message = blocked_message(&d, &run);
    let notes = commit_of(&d, &run, "03_notes");
    let (resume_cmd, _) = follow(w, &message, std::slice::from_ref(&notes));
    let branch = format!("crew/tasks/{run}/04_join");
    let users = branch_tip(w, &branch);
    resume(&d, &resume_cmd);

    let refused = blocked_message(&d, &run);
    assert!(
        refused.contains("lacks the result of 03_notes") && !refused.contains("01_left"),
        "{refused}"
    );
    assert_eq!(
        branch_tip(w, &branch),
        users,
        "the branch is as the user left it"
    );

    // Following the refusal's commands literally, from the repository where the first
    // message left the shell, completes the run; the user's checkout stays as it was.
    let head = git(w, &["rev-parse", "HEAD"]);
    let (resume_cmd, _) = follow(w, &refused, &[]);
    assert_eq!(
        git(w, &["rev-parse", "HEAD"]),
        head,
        "the user's checkout moved"
    );
    assert_eq!(git(w, &["rev-parse", "--abbrev-ref", "HEAD"]), "main");
    let finished = branch_tip(w, &branch);
    resume(&d, &resume_cmd);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let st = d.status(&run);
    assert_eq!(
        st["workspace"]["tasks"]["04_join"]["start"],
        finished.as_str()
    );
    git(w, &["merge-base", "--is-ancestor", &users, &finished]);
}

#[test]
fn a_resolution_still_checked_out_is_named_not_broken() {
    let d = Daemon::start();
    let w = repo(&d);
    three_into_one(&d);
    let run = start(&d);
    let message = blocked_message(&d, &run);
    // Everything but the worktree's removal.
    let kept: String = message
        .lines()
        .filter(|l| !l.contains("worktree remove"))
        .collect::<Vec<_>>()
        .join("\n");
    let (resume_cmd, worktree) = follow(w, &kept, &[]);
    let branch = format!("crew/tasks/{run}/04_join");
    let users = branch_tip(w, &branch);
    resume(&d, &resume_cmd);
    let again = blocked_message(&d, &run);
    assert!(again.contains("checked out in a worktree"), "{again}");
    assert_eq!(branch_tip(w, &branch), users);
    git(w, &["worktree", "remove", path_str(&worktree)]);
    resume(&d, &resume_cmd);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let _: Value = d.status(&run);
}

#[test]
fn an_integration_resolution_lacking_a_result_is_refused_and_one_holding_all_is_taken() {
    let d = Daemon::start();
    let w = repo(&d);
    team(&d, false);
    let run = start(&d);
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let message = d.status(&run)["run"]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("conflict in a.txt (01_left × 02_right)")
            && message.contains("not merged yet: 03_notes")
            && message.contains(&format!(
                "worktree add {}-resolve-{run}._integration crew/{run}",
                path_str(w)
            )),
        "{message}"
    );
    let notes = commit_of(&d, &run, "03_notes");
    let (resume_cmd, _) = follow(w, &message, std::slice::from_ref(&notes));
    let branch = format!("crew/{run}");
    let users = branch_tip(w, &branch);
    resume(&d, &resume_cmd);
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let refused = d.status(&run)["run"]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        refused.contains("lacks the result of 03_notes"),
        "{refused}"
    );
    assert_eq!(
        branch_tip(w, &branch),
        users,
        "the branch is as the user left it"
    );

    let head = git(w, &["rev-parse", "HEAD"]);
    let (resume_cmd, _) = follow(w, &refused, &[]);
    assert_eq!(
        git(w, &["rev-parse", "HEAD"]),
        head,
        "the user's checkout moved"
    );
    let finished = branch_tip(w, &branch);
    resume(&d, &resume_cmd);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let st = d.status(&run);
    assert_eq!(st["workspace"]["integrated"]["commit"], finished.as_str());
    assert_eq!(branch_tip(w, &branch), finished, "never moved");
}

#[test]
fn a_resolution_with_conflict_markers_left_is_refused() {
    let d = Daemon::start();
    let w = repo(&d);
    three_into_one(&d);
    let run = start(&d);
    let message = blocked_message(&d, &run);
    let branch = format!("crew/tasks/{run}/04_join");
    let wt = d.work.parent().unwrap().join("careless");
    git(w, &["worktree", "add", "-q", path_str(&wt), &branch]);
    let right = commit_of(&d, &run, "02_right");
    let notes = commit_of(&d, &run, "03_notes");
    assert!(!git_may_fail(
        &wt,
        &["merge".into(), "--no-edit".into(), right]
    ));
    // Committed as git left it, markers and all.
    git(&wt, &["commit", "-qam", "resolved?"]);
    git(&wt, &["merge", "-q", "--no-edit", &notes]);
    git(w, &["worktree", "remove", path_str(&wt)]);
    let users = branch_tip(w, &branch);
    let (resume_cmd, _) = (commands(&message).pop().unwrap(), ());
    resume(&d, &resume_cmd);
    let refused = blocked_message(&d, &run);
    assert!(
        refused.contains("still has conflict markers at a.txt:2"),
        "{refused}"
    );
    assert_eq!(branch_tip(w, &branch), users);
}

fn of_type(evs: &[Value], ty: &str) -> Vec<Value> {
    evs.iter().filter(|e| e["type"] == ty).cloned().collect()
}

fn file_at(w: &Path, commit: &str, path: &str) -> String {
    git(w, &["show", &format!("{commit}:{path}")])
}

#[test]
fn an_agent_resolves_the_conflict_and_the_run_goes_on_from_its_result() {
    let d = Daemon::start();
    let w = repo(&d);
    // The left side also adds a file of its own, which merges cleanly.
    team_with(
        &d,
        true,
        &format!("{RESOLVES}[fake:write=left-only.txt:ONLY-LEFT\\n]"),
    );
    let run = start_agent(&d);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let added = of_type(&evs, "task.resolve_added");
    assert_eq!(added.len(), 1, "one resolve task");
    assert_eq!(added[0]["taskId"], "04_join");
    assert_eq!(
        added[0]["message"],
        "04_join: conflict in a.txt (01_left × 02_right) → _resolve-04_join-1"
    );
    // Told what each side was for, its change included (issue 31: title, task text and diff).
    let prompt = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "prompts/_resolve-04_join-1.md"}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        prompt.contains("## What each side changed in the conflicting files"),
        "{prompt}"
    );
    let quoted = |task: &str| {
        let at = prompt
            .find(&format!("### {task}\n<dependency-output kind=\"patch\""))
            .unwrap_or_else(|| panic!("no section of {task}: {prompt}"));
        let rest = &prompt[at..];
        rest[..rest.find("</dependency-output>").unwrap_or(rest.len())].to_string()
    };
    for (side, line) in [("01_left", "+LEFT"), ("02_right", "+RIGHT")] {
        let q = quoted(side);
        assert!(q.contains("diff --git a/a.txt b/a.txt"), "{side}: {q}");
        assert!(q.contains(line), "{side}: {q}");
    }
    // Only the conflicting file of a side is quoted; an input that merged cleanly is named.
    assert!(!quoted("01_left").contains("ONLY-LEFT"), "{prompt}");
    assert!(
        prompt.contains("### 03_notes\n(merged without conflict: not quoted"),
        "{prompt}"
    );
    assert!(!prompt.contains("+notes"), "{prompt}");
    // The resolver started from every input merged, markers and all, and left none.
    let st = d.status(&run);
    let r = &st["workspace"]["tasks"]["_resolve-04_join-1"];
    let (start, resolved) = (r["start"].as_str().unwrap(), r["commit"].as_str().unwrap());
    assert!(file_at(w, start, "a.txt").contains("<<<<<<< "), "{st}");
    assert_eq!(file_at(w, resolved, "a.txt"), "one\nLEFT\nRIGHT\nthree");
    for input in ["01_left", "02_right", "03_notes"] {
        git(
            w,
            &[
                "merge-base",
                "--is-ancestor",
                &commit_of(&d, &run, input),
                resolved,
            ],
        );
    }
    // The join started from the resolution; the integration holds both intents.
    assert_eq!(
        st["workspace"]["tasks"]["04_join"]["start"], resolved,
        "{st}"
    );
    let integrated = st["workspace"]["integrated"]["commit"].as_str().unwrap();
    assert_eq!(file_at(w, integrated, "a.txt"), "one\nLEFT\nRIGHT\nthree");
    assert_eq!(file_at(w, integrated, "notes.txt"), "notes");
    // Between the conflicting tasks and the one that needed them; the join's one attempt
    // that ran (the one that found the conflict ran no agent, and is not counted).
    let join = Daemon::task(&st, "04_join");
    assert_eq!(join["attempts"], 1, "{join}");
    let deps: Vec<&str> = join["dependsOn"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(deps.contains(&"_resolve-04_join-1"), "{join}");
}

/// A resolver whose resolution fails the project's per-task checks gets its one retry, then
/// the manual way, as one that leaves markers does (issue 31): not a bare "verification
/// failed", after which resume ran the agent again to the same end.
#[test]
fn a_resolver_failing_the_task_checks_is_retried_once_then_left_to_the_user() {
    let mut d = Daemon::start();
    let w = repo(&d).to_path_buf();
    std::fs::write(
        &d.config,
        format!(
            "[projects.{:?}]\ntask_verify_commands = [\"test ! -f bad.txt\"]\n",
            w.display().to_string()
        ),
    )
    .unwrap();
    d.restart();
    // A join's inputs, and the run's leaves into its integration.
    for join in [true, false] {
        team_with(
            &d,
            join,
            &format!("{RESOLVES}[fake:resolve-write=bad.txt:oops\\n]"),
        );
        let run = start_agent(&d);
        let id = if join {
            "_resolve-04_join-1".to_string()
        } else {
            format!("_resolve-{run}-1")
        };
        resolver_left_to_the_user(&d, &run, &id);
    }
}

fn resolver_left_to_the_user(d: &Daemon, run: &str, id: &str) {
    assert_eq!(d.wait(run), "blocked", "{}", d.status(run));
    let st = d.status(run);
    let r = Daemon::task(&st, id);
    assert_eq!(r["status"], "needs_attention", "{st}");
    assert_eq!(r["attempts"], 2, "one retry: {st}");
    let message = r["error"].as_str().unwrap_or_default();
    assert!(message.contains("test ! -f bad.txt"), "{message}");
    // In the first paragraph, the part every view shows (the check's output below it has
    // blank lines of its own).
    let first = message.split("\n\n").next().unwrap_or_default();
    assert!(first.contains("resolve it by hand"), "{message}");
    assert!(
        first.contains(&format!("crewctl resume {run}")),
        "{message}"
    );
    assert!(
        message.contains(&format!("crew/tasks/{run}/{id}")),
        "the branch to resolve on: {message}"
    );
}

#[test]
fn a_resolver_that_leaves_markers_is_retried_once_then_the_user_resolves_on_its_branch() {
    let d = Daemon::start();
    let w = repo(&d);
    three_into_one(&d);
    let run = start_agent(&d);
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let st = d.status(&run);
    let id = "_resolve-04_join-1";
    let r = Daemon::task(&st, id);
    assert_eq!(r["status"], "needs_attention", "{st}");
    let evs = d.events(Some(&run));
    // One retry, told what is wrong.
    let retries: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "task.retrying" && e["taskId"] == id)
        .collect();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert!(
        retries[0]["message"]
            .as_str()
            .unwrap()
            .contains("still has conflict markers at a.txt:2"),
        "{retries:?}"
    );
    let message = r["error"].as_str().unwrap().to_string();
    assert!(message.contains("resolve it by hand"), "{message}");
    assert_eq!(Daemon::task(&st, "04_join")["status"], "queued", "{st}");
    // The join's attempt that found the conflict ran no agent: none is shown.
    assert_eq!(Daemon::task(&st, "04_join")["attempts"], 0, "{st}");
    assert_eq!(r["attempts"], 2, "{st}");

    // The hint followed literally: the branch holds every input with the markers.
    let branch = format!("crew/tasks/{run}/{id}");
    let mut cwd = w.to_path_buf();
    let mut resumed = false;
    for c in commands(&message) {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        match args.as_slice() {
            ["cd", to] => {
                cwd = PathBuf::from(to);
                if cwd != w {
                    assert!(file_at(&cwd, "HEAD", "a.txt").contains("<<<<<<< "));
                    std::fs::write(cwd.join("a.txt"), "one\nLEFT\nRIGHT\nthree\n").unwrap();
                    git(&cwd, &["commit", "-qam", "resolved by hand"]);
                }
            }
            ["crewctl", "resume", _] => {
                resume(&d, &c);
                resumed = true;
            }
            ["git", ..] => assert!(git_may_fail(&cwd, &c[1..]), "{c:?} failed"),
            other => panic!("a command the test does not know: {other:?}"),
        }
    }
    assert!(resumed, "{message}");
    let users = branch_tip(w, &branch);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let st = d.status(&run);
    // Taken as it is, no agent ran again, the join started from it.
    assert_eq!(
        st["workspace"]["tasks"][id]["commit"],
        users.as_str(),
        "{st}"
    );
    assert_eq!(branch_tip(w, &branch), users, "never moved");
    assert_eq!(st["workspace"]["tasks"]["04_join"]["start"], users.as_str());
    let started = d
        .events(Some(&run))
        .iter()
        .filter(|e| e["type"] == "task.started" && e["taskId"] == id)
        .count();
    assert_eq!(started, 3, "two agent attempts, then the taken resolution");
    assert_eq!(Daemon::task(&st, "04_join")["attempts"], 1, "{st}");
    // Taking it made no worktree, so there was none to remove and nothing to warn about.
    let log = d.log_text();
    assert!(
        !log.contains("cannot remove a finished task's worktree"),
        "{log}"
    );
    let integrated = st["workspace"]["integrated"]["commit"].as_str().unwrap();
    git(w, &["merge-base", "--is-ancestor", &users, integrated]);
}

#[test]
fn a_conflict_of_the_leaves_is_resolved_into_the_integration() {
    let d = Daemon::start();
    let w = repo(&d);
    team_with(&d, false, RESOLVES);
    let run = start_agent(&d);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let added = of_type(&evs, "task.resolve_added");
    assert_eq!(added.len(), 1, "{added:?}");
    let id = format!("_resolve-{run}-1");
    let st = d.status(&run);
    let resolved = st["workspace"]["tasks"][&id]["commit"].as_str().unwrap();
    assert_eq!(st["workspace"]["integrated"]["commit"], resolved, "{st}");
    assert_eq!(file_at(w, resolved, "a.txt"), "one\nLEFT\nRIGHT\nthree");
    assert_eq!(file_at(w, resolved, "notes.txt"), "notes");
}

/// An integration conflict whose side is not a leaf: `02_after` (a leaf) holds `01_left`'s
/// change to a.txt, which conflicts with `03_right`'s. The resolver's prompt quotes the sides,
/// `01_left` and `03_right`, though only `02_after` and `03_right` are its inputs, and names
/// `02_after` as merged cleanly (it changed nothing of a.txt itself).
#[test]
fn an_integration_resolver_is_shown_a_side_that_is_not_a_leaf() {
    let d = Daemon::start();
    let w = repo(&d);
    d.project_file(
        "teams/clash.team.md",
        "---\nname: clash\ndefaultWorkflow: clash\n---\n\n- rleft: agent=executor\n\
         - rafter: agent=executor\n- rright: agent=executor\n",
    );
    d.project_file(
        "workflows/clash.workflow.md",
        &format!(
            "---\nname: clash\n---\n\n## left\nrole: rleft\n\n\
             [fake:write=a.txt:one\\nLEFT\\nthree\\n]{RESOLVES}\n\n\
             ## after\nrole: rafter\ndependsOn: left\n\n[fake:write=after.txt:after\\n]\n\n\
             ## right\nrole: rright\n\n[fake:write=a.txt:one\\nRIGHT\\nthree\\n]\n"
        ),
    );
    let run = start_agent(&d);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let id = format!("_resolve-{run}-1");
    let prompt = d.ok(
        "team.artifact",
        json!({"runId": run, "name": format!("prompts/{id}.md")}),
    )["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for (side, line) in [("01_left", "+LEFT"), ("03_right", "+RIGHT")] {
        let at = prompt
            .find(&format!("### {side}\n<dependency-output kind=\"patch\""))
            .unwrap_or_else(|| panic!("{side} not quoted: {prompt}"));
        let rest = &prompt[at..];
        let block = &rest[..rest.find("</dependency-output>").unwrap_or(rest.len())];
        assert!(block.contains("diff --git a/a.txt b/a.txt"), "{block}");
        assert!(block.contains(line), "{block}");
    }
    assert!(
        prompt.contains("### 02_after\n(merged without conflict: not quoted"),
        "{prompt}"
    );
    let st = d.status(&run);
    let integrated = st["workspace"]["integrated"]["commit"].as_str().unwrap();
    assert_eq!(file_at(w, integrated, "a.txt"), "one\nLEFT\nRIGHT\nthree");
    assert_eq!(file_at(w, integrated, "after.txt"), "after");
}

#[test]
fn kill_9_right_after_a_resolve_task_was_added_keeps_it_once() {
    let mut d = Daemon::start();
    repo(&d);
    team_with(&d, true, &format!("{RESOLVES}[fake:sleep=300ms]"));
    let run = start_agent(&d);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while of_type(&d.events(Some(&run)), "task.resolve_added").is_empty() {
        assert!(std::time::Instant::now() < deadline, "no resolve task");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    d.kill9();
    d.restart();
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    assert_eq!(of_type(&evs, "task.resolve_added").len(), 1);
    let completed = evs
        .iter()
        .filter(|e| e["type"] == "task.completed" && e["taskId"] == "_resolve-04_join-1")
        .count();
    assert_eq!(completed, 1);
}

/// crewd killed while an unboxed resolver had committed part of its resolution on its branch:
/// that commit is the killed attempt's, not the user's resolution (which only comes after the
/// resolver gave up, in a worktree of the user's). The next attempt starts again from the
/// conflicts and runs the agent — the partial commit used to be taken as resolved by hand.
#[test]
fn kill_9_during_an_unboxed_resolver_runs_it_again_not_taking_its_commit() {
    let root = tempfile::tempdir().unwrap();
    let mark = root.path().join("committed");
    let script = format!(
        "case \"$CREW_TASK_ID\" in \
           _resolve-*) if [ \"$CREW_ATTEMPT\" = 1 ]; then \
               printf 'one\\nLEFT\\nthree\\n' > a.txt; \
               git -c user.name=a -c user.email=b commit -qam partial && touch {m}; sleep 300; \
             else printf 'one\\nLEFT\\nRIGHT\\nthree\\n' > a.txt; fi;; \
           *left) printf 'one\\nLEFT\\nthree\\n' > a.txt;; \
           *right) printf 'one\\nRIGHT\\nthree\\n' > a.txt;; \
           *notes) echo notes > notes.txt;; \
           *join) echo joined > joined.txt;; \
         esac; echo done",
        m = path_str(&mark)
    );
    let mut d = Daemon::start_with(Opts {
        config: format!(
            "sandbox = \"off\"\n[runtimes.sh]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
        env: vec![],
    });
    let w = repo(&d).to_path_buf();
    team(&d, true);
    let run = d.run(
        "change things",
        json!({"team": "clash", "workspace": "worktree", "runtime": "sh"}),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !mark.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the resolver never committed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    d.kill9();
    d.restart();
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let st = d.status(&run);
    let resolved = st["workspace"]["tasks"]["_resolve-04_join-1"]["commit"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(file_at(&w, &resolved, "a.txt"), "one\nLEFT\nRIGHT\nthree");
    let evs = d.events(Some(&run));
    let starts = evs
        .iter()
        .filter(|e| e["type"] == "task.started" && e["taskId"] == "_resolve-04_join-1")
        .count();
    assert_eq!(starts, 2, "the agent ran again");
}

/// A join that changes nothing takes the user's resolution as its result: the branch's tip is
/// the user's commit, which crew adopted. After a restart the finished run is no longer
/// resident; `prune` still knows the tip is the task's result and removes the branch, as
/// `forget` does, instead of keeping it as "someone committed on it".
#[test]
fn prune_after_a_restart_removes_a_branch_whose_adopted_resolution_is_the_result() {
    let mut d = Daemon::start_with(Opts {
        config: "allow_no_change = true\n".into(),
        env: vec![],
    });
    let w = repo(&d).to_path_buf();
    let w = w.as_path();
    d.project_file(
        "teams/clash.team.md",
        "---\nname: clash\ndefaultWorkflow: clash\n---\n\n- rl: agent=executor\n- rr: agent=executor\n- rj: agent=executor\n",
    );
    d.project_file(
        "workflows/clash.workflow.md",
        "---\nname: clash\n---\n\n## left\nrole: rl\n\n[fake:write=a.txt:one\\nLEFT\\nthree\\n]\n\n\
         ## right\nrole: rr\n\n[fake:write=a.txt:one\\nRIGHT\\nthree\\n]\n\n\
         ## join\nrole: rj\ndependsOn: left, right\n\n[fake:cat=a.txt]\n",
    );
    let run = start(&d);
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let st = d.status(&run);
    let message = Daemon::task(&st, "03_join")["error"]
        .as_str()
        .unwrap()
        .to_string();
    let (resume_cmd, _) = follow(w, &message, &[]);
    let branch = format!("crew/tasks/{run}/03_join");
    let resolved = branch_tip(w, &branch);
    resume(&d, &resume_cmd);
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert_eq!(commit_of(&d, &run, "03_join"), resolved);

    // A clean stop (`crewctl daemon stop`): the next start reads its snapshot, with the
    // finished run not resident.
    d.stop();
    d.spawn(&[]);
    let r = d.ok("team.prune", json!({"keep": 0}));
    assert!(!r["notes"].to_string().contains(&branch), "{r}");
    assert_eq!(
        git(
            w,
            &["for-each-ref", &format!("refs/heads/crew/tasks/{run}/")]
        ),
        "",
        "{r}"
    );
}
