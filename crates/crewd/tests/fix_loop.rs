//! The team's judgement decides (issue 30): verdicts, fix loops, honest outcomes, the
//! no-change guard where change is not the point, per-task and integration checks. The fake
//! agent judges with `[fake:verdict…]` and fixes with `[fake:fix-write=…]` (only a fix task
//! crew added makes that edit).

mod common;

use common::{git, path_str, Daemon, Opts};
use serde_json::{json, Value};

fn repo(d: &Daemon) {
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    git(w, &["config", "user.name", "user"]);
    git(w, &["config", "user.email", "user@example.com"]);
    std::fs::write(w.join(".git/info/exclude"), ".crew/\n").unwrap();
    std::fs::write(w.join("base.txt"), "base\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
}

fn of_type<'a>(evs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == kind).collect()
}

fn of_task<'a>(evs: &'a [Value], kind: &str, task: &str) -> Vec<&'a Value> {
    evs.iter()
        .filter(|e| e["type"] == kind && e["taskId"] == task)
        .collect()
}

/// Every editing task appends a line (so the no-change guard sees a change); the verifier
/// passes once `fixed.txt` exists, which only a fix task writes.
const FIXABLE: &str =
    "make it work [fake:append=work.txt:x\\n][fake:verdict-needs=fixed.txt][fake:fix-write=fixed.txt:ok]";

fn fail_fix_pass(workspace: &str) {
    let d = Daemon::start();
    repo(&d);
    let run = d.run(FIXABLE, json!({"workspace": workspace}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let added = of_type(&evs, "task.fix_added");
    assert_eq!(added.len(), 1, "one fix round");
    assert_eq!(added[0]["taskId"], "04_verify");
    assert_eq!(
        added[0]["message"], "04_verify: fail, 1 finding → _fix-04_verify-1",
        "the follow view's line"
    );
    assert_eq!(added[0]["data"]["task"]["id"], "_fix-04_verify-1");
    assert_eq!(added[0]["data"]["task"]["role"], "executor");
    let judged = of_task(&evs, "task.completed", "04_verify");
    let verdicts: Vec<&Value> = judged
        .iter()
        .map(|e| &e["data"]["verdict"]["verdict"])
        .collect();
    assert_eq!(verdicts, [&json!("fail"), &json!("pass")]);
    assert_eq!(
        judged[0]["data"]["verdict"]["findings"][0]["paths"],
        json!(["fixed.txt"])
    );
    // fail → _fix-04_verify-1 → judge again → pass, in that order.
    let seq = |e: &Value| e["seq"].as_u64().unwrap();
    let fix_done = of_task(&evs, "task.completed", "_fix-04_verify-1");
    assert_eq!(fix_done.len(), 1);
    assert!(seq(judged[0]) < seq(added[0]) && seq(added[0]) < seq(fix_done[0]));
    assert!(seq(fix_done[0]) < seq(judged[1]));
    let st = d.status(&run);
    assert_eq!(st["run"]["verdict"], "pass");
    let fix = Daemon::task(&st, "_fix-04_verify-1");
    assert_eq!(fix["fixes"], "04_verify");
    assert_eq!(fix["dependsOn"], json!(["03_execute"]));
    assert_eq!(
        Daemon::task(&st, "04_verify")["dependsOn"],
        json!(["03_execute", "_fix-04_verify-1"])
    );
    // The fix task was told the findings.
    let prompt = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "prompts/_fix-04_verify-1.md"}),
    );
    assert!(prompt["content"]
        .as_str()
        .unwrap()
        .contains("fixed.txt is missing"));
    // Both of the judge's attempts kept their prompt.
    for n in [1, 2] {
        d.ok(
            "team.artifact",
            json!({"runId": run, "name": format!("prompts/04_verify.attempt-{n}.md")}),
        );
    }
    if workspace == "worktree" {
        // The judge was told the range under review.
        let p = d.ok(
            "team.artifact",
            json!({"runId": run, "name": "prompts/04_verify.attempt-1.md"}),
        );
        assert!(p["content"].as_str().unwrap().contains("git diff "), "{p}");
        let applied = d.ok("team.apply", json!({"runId": run}));
        assert!(applied.is_object());
        assert_eq!(
            std::fs::read_to_string(d.work.join("fixed.txt")).unwrap(),
            "ok"
        );
    } else {
        assert!(d.work.join("fixed.txt").exists());
    }
}

#[test]
fn a_failing_verdict_is_fixed_and_judged_again_shared() {
    fail_fix_pass("shared");
}

#[test]
fn a_failing_verdict_is_fixed_and_judged_again_worktree() {
    fail_fix_pass("worktree");
}

#[test]
fn spent_rounds_block_the_run_and_resume_grants_one_more() {
    let d = Daemon::start();
    repo(&d);
    let run = d.run(
        "never good [fake:append=work.txt:x\\n][fake:verdict=fail][fake:finding=the tests fail]",
        json!({"workspace": "worktree"}),
    );
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let st = d.status(&run);
    let reason = st["run"]["reason"].as_str().unwrap();
    assert!(reason.contains("the tests fail"), "{reason}");
    assert!(reason.contains("fix round"), "{reason}");
    assert_eq!(st["run"]["verdict"], "fail");
    assert_eq!(Daemon::task(&st, "04_verify")["status"], "needs_attention");
    let evs = d.events(Some(&run));
    assert_eq!(of_type(&evs, "task.fix_added").len(), 2, "maxFixRounds 2");
    assert!(of_type(&evs, "run.completed").is_empty());
    let r = d.ok("team.resume", json!({"runId": run}));
    // What runs again: the granted round's fix, then its judge.
    assert_eq!(
        r["requeuedTaskIds"],
        json!(["_fix-04_verify-3", "04_verify"]),
        "{r}"
    );
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let added = of_type(&evs, "task.fix_added");
    assert_eq!(added.len(), 3, "one more round");
    let said = added[2]["message"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("04_verify: fail") && said.contains("→ _fix-04_verify-3"),
        "{said}"
    );
    assert!(Daemon::task(&d.status(&run), "_fix-04_verify-3")["status"] == "completed");
    // team.apply refuses a run whose judges did not pass. Blocked, it has nothing to apply
    // yet, forced or not: the message says what helps, and not to force.
    for force in [false, true] {
        let e = d.err("team.apply", json!({"runId": run, "force": force}));
        let m = e["message"].as_str().unwrap();
        assert!(
            m.contains("did not pass") && m.contains("crewctl resume"),
            "{e}"
        );
        assert!(!m.contains("--force"), "{e}");
    }
}

#[test]
fn a_missing_verdict_gets_one_repair_then_needs_attention() {
    let d = Daemon::start();
    let run = d.run(
        "judge it [fake:verdict=missing]",
        json!({"agent": "verifier"}),
    );
    let status = d.wait(&run);
    let st = d.status(&run);
    // A one-agent run is no team: the agent judges only in a team's step.
    assert_eq!(status, "completed", "{st}");

    // In a team: missing → repair (still missing) → needs attention.
    let run = d.run("judge it [fake:verdict=missing]", json!({"team": "review"}));
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let retried: Vec<&Value> = of_type(&evs, "task.retrying")
        .into_iter()
        .filter(|e| e["data"]["reason"] == "verdict_invalid")
        .collect();
    assert!(!retried.is_empty());
    assert!(!of_type(&evs, "task.needs_attention").is_empty());

    // malformed, then a readable verdict on the repair attempt: completes.
    let run = d.run(
        "judge it [fake:verdict=malformed][fake:verdict-repair=approve]",
        json!({"team": "review"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert_eq!(d.status(&run)["run"]["verdict"], "pass");
}

#[test]
fn the_review_team_s_changes_requested_verdict_is_its_product() {
    let d = Daemon::start();
    repo(&d);
    let run = d.run(
        "review it [fake:verdict=request-changes]",
        json!({"team": "review", "workspace": "worktree"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let st = d.status(&run);
    assert_eq!(st["run"]["verdict"], "changes_requested");
    assert_eq!(
        Daemon::task(&st, "02_code-review")["verdict"]["verdict"],
        "changes_requested"
    );
    let evs = d.events(Some(&run));
    assert!(of_type(&evs, "task.fix_added").is_empty(), "no loop");
    let summary = d.ok("team.summary", json!({"runId": run}));
    let text = summary.to_string();
    assert!(text.contains("changes_requested"), "{text}");
    // Applying it is refused unless forced, pointing at the findings: a completed run has no
    // fix round to resume.
    let e = d.err("team.apply", json!({"runId": run}));
    let msg = e["message"].as_str().unwrap_or_default();
    assert!(msg.contains("crewctl apply --force"), "{e}");
    assert!(!msg.contains("resume"), "{e}");
}

/// A fix task gets the skills a task of its role gets: in its prompt, and (pi) as the
/// `--skill <dir>` its attempt is started with. The runtime is the fake agent behind a shell
/// that first writes its argv to `<dir>/<task id>.<pid>` (unboxed: only the argv is looked at).
#[test]
fn a_fix_task_is_handed_its_role_s_skill_files() {
    let argv_dir = tempfile::tempdir().unwrap();
    let fake = common::crewd_bin().with_file_name("crew-fake-agent");
    let script = format!(
        "printf '%s\\n' \"$@\" > \"{}/$CREW_TASK_ID.$$\"; exec {} \"$@\"",
        argv_dir.path().display(),
        fake.display()
    );
    let d = Daemon::start_with(Opts {
        config: format!(
            "[runtimes.fake-argv]\nadapter = \"pi\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}, \"sh\"]\n\
             rpc = false\nsandbox = \"off\"\n"
        ),
        ..Default::default()
    });
    repo(&d);
    let run = d.run(
        FIXABLE,
        json!({"workspace": "shared", "runtime": "fake-argv"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let fix = "_fix-04_verify-1";
    let mut argvs: Vec<Vec<String>> = std::fs::read_dir(argv_dir.path())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{fix}."))
        })
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect()
        })
        .collect();
    assert_eq!(argvs.len(), 1, "one attempt of the fix task");
    let argv = argvs.remove(0);
    let skill_dirs: Vec<&String> = argv
        .windows(2)
        .filter(|w| w[0] == "--skill")
        .map(|w| &w[1])
        .collect();
    let names: Vec<String> = skill_dirs
        .iter()
        .map(|p| {
            std::path::Path::new(p.as_str())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names,
        ["safe-bash", "verification-before-done"],
        "the executor's skills: {argv:?}"
    );
    for dir in skill_dirs {
        let text = std::fs::read_to_string(std::path::Path::new(dir).join("SKILL.md")).unwrap();
        assert!(text.starts_with("---\nname: "), "{text}");
    }
    let prompt = d.ok(
        "team.artifact",
        json!({"runId": run, "name": format!("prompts/{fix}.md")}),
    );
    let prompt = prompt["content"].as_str().unwrap();
    assert!(
        prompt.contains("## Skills") && prompt.contains("### safe-bash"),
        "{prompt}"
    );
}

#[test]
fn kill_9_right_after_a_fix_task_was_added_keeps_it_once() {
    let mut d = Daemon::start();
    repo(&d);
    let run = d.run(&format!("{FIXABLE}[fake:sleep=300ms]"), json!({}));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if !of_type(&d.events(Some(&run)), "task.fix_added").is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no fix task");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    d.kill9();
    d.restart();
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    assert_eq!(of_type(&evs, "task.fix_added").len(), 1);
    let st = d.status(&run);
    let fixes = st["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["fixes"].is_string())
        .count();
    assert_eq!(fixes, 1);
    assert_eq!(of_task(&evs, "task.completed", "_fix-04_verify-1").len(), 1);
}

/// An integration check that fails at the verify step starts the fix loop (the verifier is
/// not retried with the failure); a per-task check runs on the tasks a fan-out step added.
#[test]
fn integration_checks_start_the_loop_and_task_checks_run_on_added_tasks() {
    let mut d = Daemon::start_with(Opts::default());
    repo(&d);
    std::fs::write(
        &d.config,
        format!(
            "[projects.\"{}\"]\nverify_commands = [\"test -f fixed.txt || (echo fixed.txt is missing; exit 1)\"]\n\
             task_verify_commands = [\"echo task-check-ran\"]\n",
            path_str(&d.work)
        ),
    )
    .unwrap();
    d.restart();
    let run = d.run(
        "make it work [fake:append=work.txt:x\\n][fake:fix-write=fixed.txt:ok]",
        json!({"team": "fast-fix"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let added = of_type(&evs, "task.fix_added");
    assert_eq!(added.len(), 1, "the failed check went to a fixer");
    assert!(added[0]["data"]["verdict"]["findings"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("fixed.txt is missing"));
    assert!(of_type(&evs, "task.retrying")
        .iter()
        .all(|e| e["taskId"] != "03_verify"));
    // The executor and the fix task ran the per-task check; the verifier did not.
    for task in ["02_execute", "_fix-03_verify-1"] {
        let done = of_task(&evs, "task.completed", task);
        assert_eq!(
            done.last().unwrap()["data"]["verification"][0]["command"],
            "echo task-check-ran",
            "{task}"
        );
    }
}

/// Every builtin team completes its ordinary path in a git repository on the fake runtime
/// with the default config.
#[test]
fn every_builtin_team_completes_in_a_git_repository() {
    let d = Daemon::start();
    repo(&d);
    let block = d.fixture_path("block.json");
    std::fs::write(
        &block,
        json!({"tasks": [
            {"id": "one", "role": "executor", "title": "one", "task": "[fake:append=one.txt:1\\n]", "scope": ["one.txt"]},
            {"id": "two", "role": "executor", "title": "two", "task": "[fake:append=two.txt:2\\n]", "scope": ["two.txt"]}
        ]})
        .to_string(),
    )
    .unwrap();
    for team in [
        "default",
        "fast-fix",
        "research",
        "review",
        "parallel-research",
        "implement",
    ] {
        let goal = match team {
            // Executors stay guarded: they change something.
            "default" | "fast-fix" => "do it [fake:append=notes.txt:x\\n]".to_string(),
            "implement" => format!("do it [fake:fanout={}]", path_str(&block)),
            _ => "look into it".to_string(),
        };
        let run = d.run(&goal, json!({"team": team}));
        assert_eq!(d.wait(&run), "completed", "{team}: {}", d.status(&run));
    }
}

/// A fix a later judge asked for changes code the integration checks passed before: the fix
/// runs them again, so a fix that breaks them cannot end the run "completed". Here the
/// checks pass on the executor's work, the reviewer asks for `reviewed.txt`, and the fix
/// writes it and `broken.txt`, which the checks refuse.
#[test]
fn a_later_judges_fix_runs_the_integration_checks_again() {
    let mut d = Daemon::start_with(Opts::default());
    repo(&d);
    d.user_team(
        "checked",
        "- executor: agent=executor\n- reviewer: agent=reviewer\n",
        "## build\nrole: executor\nverify: true\n\nbuild {goal}\n\n\
         ## review\nrole: reviewer\ndependsOn: build\n\nreview {goal}\n",
    );
    std::fs::write(
        &d.config,
        format!(
            "max_attempts = 1\nverify_retries = 0\n[projects.\"{}\"]\nverify_commands = [\"test ! -f broken.txt || (echo broken.txt is there; exit 1)\"]\n",
            path_str(&d.work)
        ),
    )
    .unwrap();
    d.restart();
    let run = d.run(
        "it [fake:append=work.txt:x\\n][fake:verdict-needs=reviewed.txt][fake:fix-write=reviewed.txt:ok][fake:fix-write=broken.txt:bad]",
        json!({"team": "checked"}),
    );
    let status = d.wait(&run);
    let evs = d.events(Some(&run));
    assert_eq!(
        of_type(&evs, "task.fix_added").len(),
        1,
        "{}",
        d.status(&run)
    );
    let fix = "_fix-02_review-1";
    let ended = evs
        .iter()
        .rfind(|e| {
            e["taskId"] == fix && (e["type"] == "task.completed" || e["type"] == "task.failed")
        })
        .unwrap();
    assert_eq!(ended["type"], "task.failed", "{ended}");
    assert!(
        ended["data"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("broken.txt is there"),
        "{ended}"
    );
    assert_ne!(status, "completed", "{}", d.status(&run));
}

/// A read-only step that does not judge (`verdict: false`) but runs the integration checks: a
/// failed check starts a fix round; once the checks pass on its next run, the failure is
/// behind it and the run completes (the old failing verdict stayed and blocked the run, and
/// `resume` had nothing to grant).
#[test]
fn checks_that_pass_after_a_fix_clear_a_non_judges_failure() {
    let mut d = Daemon::start_with(Opts::default());
    repo(&d);
    d.user_team(
        "gate",
        "- executor: agent=executor\n- verifier: agent=verifier\n",
        "## build\nrole: executor\n\nbuild {goal}\n\n\
         ## check\nrole: verifier\ndependsOn: build\nverify: true\nverdict: false\n\ncheck {goal}\n",
    );
    std::fs::write(
        &d.config,
        format!(
            "[projects.\"{}\"]\nverify_commands = [\"test -f fixed.txt || (echo fixed.txt is missing; exit 1)\"]\n",
            path_str(&d.work)
        ),
    )
    .unwrap();
    d.restart();
    let run = d.run(
        "it [fake:append=work.txt:x\\n][fake:fix-write=fixed.txt:ok]",
        json!({"team": "gate"}),
    );
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    assert_eq!(of_type(&evs, "task.fix_added").len(), 1);
    assert_eq!(of_task(&evs, "task.started", "02_check").len(), 2);
}

/// A fix round where nothing needs changing (a flaky check, a wrong finding): the fixer may
/// change nothing, and the judge runs again — the no-change guard made the fix task need
/// attention, which blocked the run, and `resume` ran the same fix again.
#[test]
fn a_fix_that_changes_nothing_lets_the_judge_run_again() {
    let mut d = Daemon::start_with(Opts::default());
    repo(&d);
    d.user_team(
        "flaky",
        "- executor: agent=executor\n- verifier: agent=verifier\n",
        "## build\nrole: executor\nallowNoChange: true\n\nbuild {goal}\n\n\
         ## check\nrole: verifier\ndependsOn: build\nverify: true\n\ncheck {goal}\n",
    );
    // Fails on the judge's first attempt only (the box keeps no file between attempts).
    std::fs::write(
        &d.config,
        format!(
            "[projects.\"{}\"]\nverify_commands = [\"test \\\"$CREW_ATTEMPT\\\" != 1 || (echo flaky; exit 1)\"]\n",
            path_str(&d.work),
        ),
    )
    .unwrap();
    d.restart();
    let run = d.run("it", json!({"team": "flaky"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    assert_eq!(of_type(&evs, "task.fix_added").len(), 1);
    assert_eq!(of_task(&evs, "task.completed", "_fix-02_check-1").len(), 1);
    assert_eq!(of_task(&evs, "task.started", "02_check").len(), 2);
}

/// A judge failed, its fix ran, and then it gave no readable verdict (after its repair
/// attempt): it needs attention, with rounds left. `resume` runs the judge again on the fixed
/// code — it used to take the judge's verdict from before the fix for a current one and add a
/// second fix round for findings already fixed.
#[test]
fn resume_after_an_unreadable_verdict_runs_the_judge_not_a_stale_fix() {
    resume_runs_the_judge_again(json!({}));
}

/// The same with the rounds spent (`maxFixRounds: 1`): the judge's need for attention is its
/// unreadable verdict, not its rounds, so `resume` runs it again rather than a second fix for
/// findings the first one fixed.
#[test]
fn resume_after_an_unreadable_verdict_with_rounds_spent_runs_the_judge() {
    resume_runs_the_judge_again(json!({"maxFixRounds": 1}));
}

/// A judge fails, its fix runs, and then it gives no readable verdict (even after its repair
/// attempt), so the run blocks; `resume` (with run params `extra`) runs the judge again and
/// adds no second fix.
fn resume_runs_the_judge_again(extra: Value) {
    let d = Daemon::start();
    repo(&d);
    let mut params = json!({"team": "fast-fix"});
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let run = d.run(
        "it [fake:append=work.txt:x\\n][fake:verdict-needs=fixed.txt][fake:verdict=missing][fake:fix-write=fixed.txt:ok]",
        params,
    );
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let judge_starts =
        |d: &Daemon| of_task(&d.events(Some(&run)), "task.started", "03_verify").len();
    let before = judge_starts(&d);
    d.ok("team.resume", json!({"runId": run}));
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    assert_eq!(
        of_type(&evs, "task.fix_added").len(),
        1,
        "no second round for fixed findings"
    );
    assert!(judge_starts(&d) > before, "the judge ran again");
}
