//! Candidates: a step tries N solutions at once and keeps the one that proves best. The fake
//! agent tells its candidates apart by task id (`[fake:cand-write=k:path:text]` is made only by
//! candidate k) and a judging selector answers `[fake:choice=k]`.

mod common;

use common::{git, path_str, Daemon};
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

/// A user team (trusted: its verification commands run) with an executor and a reviewer, and
/// a workflow `build` (with `config` lines and `task`) then `after`, which depends on it.
fn team(d: &Daemon, name: &str, config: &str, task: &str) {
    let base = d.home.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join(format!("teams/{name}.team.md")),
        format!(
            "---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n- executor: agent=executor\n- reviewer: agent=reviewer\n"
        ),
    )
    .unwrap();
    std::fs::write(
        base.join(format!("workflows/{name}.workflow.md")),
        format!(
            "---\nname: {name}\n---\n\n## build\nrole: executor\n{config}\n\n{task}\n\n## after\nrole: executor\ndependsOn: build\n\nthen [fake:append=after.txt:after\\n]\n"
        ),
    )
    .unwrap();
}

/// Candidate 1 writes a small passing change, candidate 2 a larger passing one, candidate 3
/// fails the verification command (no `ok.txt`).
const THREE: &str = "[fake:cand-write=1:ok.txt:one\\n][fake:cand-write=2:ok.txt:two\\n][fake:cand-write=2:more.txt:a\\nb\\nc\\nd\\n][fake:cand-write=3:bad.txt:bad\\n]";

fn of<'a>(evs: &'a [Value], kind: &str, task: &str) -> Vec<&'a Value> {
    evs.iter()
        .filter(|e| e["type"] == kind && e["taskId"] == task)
        .collect()
}

fn run_in(d: &Daemon, team: &str, extra: Value) -> String {
    let mut p = json!({"goal": "make it", "cwd": path_str(&d.work), "runtime": "fake", "team": team, "workspace": "worktree"});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    d.ok("team.run", p)["runId"].as_str().unwrap().to_string()
}

/// The chosen candidate's commit is the selector's result, `after` starts from it, the others
/// stay as their branches, and the applied result is the chosen one's.
fn chosen_and_continued(d: &Daemon, run: &str, want: u32) -> Value {
    assert_eq!(d.wait(run), "completed", "{}", d.status(run));
    let evs = d.events(Some(run));
    let chosen = of(&evs, "task.candidate_chosen", "01_build");
    assert_eq!(chosen.len(), 1, "the choice is made once");
    let choice = &chosen[0]["data"]["choice"];
    assert_eq!(choice["index"], want, "{choice}");
    let cand = format!("_cand-01_build-{want}");
    let done = of(&evs, "task.completed", &cand);
    assert_eq!(done.len(), 1);
    let commit = done[0]["data"]["commit"]["commit"].as_str().unwrap();
    assert_eq!(chosen[0]["data"]["commit"]["commit"], commit);
    let after = of(&evs, "task.completed", "02_after");
    assert_eq!(
        after[0]["data"]["commit"]["start"], commit,
        "after goes on from the choice"
    );
    // Candidate 3 failed its check and is out, its commit kept.
    let three = of(&evs, "task.completed", "_cand-01_build-3");
    assert_eq!(three.len(), 1, "a candidate's failing check is not retried");
    assert_ne!(three[0]["data"]["verification"][0]["exitCode"], 0);
    for k in 1..=3 {
        let branch = format!("crew/tasks/{run}/_cand-01_build-{k}");
        let sha = git(&d.work, &["rev-parse", &branch]);
        assert!(!sha.trim().is_empty(), "{branch} kept");
    }
    d.ok("team.apply", json!({"runId": run}));
    let ok = std::fs::read_to_string(d.work.join("ok.txt")).unwrap();
    assert_eq!(ok, if want == 1 { "one\n" } else { "two\n" });
    assert!(!d.work.join("bad.txt").exists());
    d.status(run)
}

#[test]
fn smallest_passing_candidate_is_chosen() {
    let d = Daemon::start();
    repo(&d);
    team(
        &d,
        "cands",
        "candidates: 3\nselect: smallest\nverifyCommands: test -f ok.txt",
        THREE,
    );
    let run = run_in(&d, "cands", json!({}));
    let st = chosen_and_continued(&d, &run, 1);
    let evs = d.events(Some(&run));
    for k in 1..=3 {
        assert_eq!(
            of(&evs, "task.started", &format!("_cand-01_build-{k}")).len(),
            1
        );
    }
    let sel = Daemon::task(&st, "01_build");
    assert_eq!(sel["status"], "completed");
    // Each candidate's usage is its own, and counts in the step's: the selector's row sums
    // its candidates' and its own (none: it chose without a judge); the run counts each once.
    let mut sum = (0u64, 0u64, 0f64);
    for k in 1..=3 {
        let c = Daemon::task(&st, &format!("_cand-01_build-{k}"));
        assert!(c["usage"]["turns"].as_u64().unwrap() >= 1, "{c}");
        assert!(
            c["candidates"]["diffstat"]["files"].as_u64().unwrap() >= 1,
            "{c}"
        );
        sum.0 += c["usage"]["turns"].as_u64().unwrap();
        sum.1 += c["usage"]["input"].as_u64().unwrap();
        sum.2 += c["usage"]["cost"].as_f64().unwrap();
    }
    assert_eq!(sel["candidates"]["ownUsage"]["turns"], 0, "{sel}");
    assert_eq!(sel["usage"]["turns"].as_u64().unwrap(), sum.0, "{sel}");
    assert_eq!(sel["usage"]["input"].as_u64().unwrap(), sum.1, "{sel}");
    assert!(
        (sel["usage"]["cost"].as_f64().unwrap() - sum.2).abs() < 1e-9,
        "{sel}"
    );
    let after = Daemon::task(&st, "02_after")["usage"]["input"]
        .as_u64()
        .unwrap();
    assert_eq!(
        st["run"]["usage"]["input"].as_u64().unwrap(),
        sum.1 + after,
        "{st}"
    );
}

#[test]
fn the_judge_chooses_by_its_verdict() {
    let d = Daemon::start();
    repo(&d);
    // No `select:`: the team has a reviewer, so it judges.
    team(
        &d,
        "judged",
        "candidates: 3\nverifyCommands: test -f ok.txt",
        &format!("{THREE}[fake:choice=2]"),
    );
    let run = run_in(&d, "judged", json!({}));
    chosen_and_continued(&d, &run, 2);
    let evs = d.events(Some(&run));
    let chosen = of(&evs, "task.candidate_chosen", "01_build");
    assert_eq!(chosen[0]["data"]["choice"]["by"], "judge");
    assert!(chosen[0]["data"]["choice"]["reason"]
        .as_str()
        .unwrap()
        .contains("chose candidate 2"));
    // The judge ran once, as the reviewer, shown both passing diffs and not the third's.
    let started = of(&evs, "task.started", "01_build");
    assert_eq!(started.len(), 1);
    let prompt = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "prompts/01_build.md"}),
    )["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.contains("### Candidate 3") && prompt.contains("OUT"),
        "{prompt}"
    );
    assert!(prompt.contains("+two"), "{prompt}");
}

/// A judging selector that chooses but calls the work a failure: the choice is its product
/// (among candidates that passed their checks), so the run goes on and completes — it used to
/// block on that verdict, with nothing `resume` could do.
#[test]
fn a_choosing_judges_failing_verdict_does_not_block_the_run() {
    let d = Daemon::start();
    repo(&d);
    team(
        &d,
        "grumpy",
        "candidates: 3\nverifyCommands: test -f ok.txt",
        &format!("{THREE}[fake:choice=2][fake:choice-verdict=fail]"),
    );
    let run = run_in(&d, "grumpy", json!({}));
    chosen_and_continued(&d, &run, 2);
}

#[test]
fn first_to_pass_is_chosen_and_the_others_set_aside() {
    let d = Daemon::start();
    repo(&d);
    team(
        &d,
        "quick",
        "candidates: 3\nselect: first\nverifyCommands: test -f ok.txt",
        "[fake:cand-write=1:ok.txt:one\\n][fake:cand-write=2:ok.txt:two\\n][fake:cand-write=3:ok.txt:three\\n][fake:cand-sleep=1:20s][fake:cand-sleep=3:20s]",
    );
    let run = run_in(&d, "quick", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let chosen = of(&evs, "task.candidate_chosen", "01_build");
    assert_eq!(chosen.len(), 1);
    assert_eq!(chosen[0]["data"]["choice"]["index"], 2);
    assert_eq!(chosen[0]["data"]["choice"]["by"], "first");
    for k in [1, 3] {
        let c = format!("_cand-01_build-{k}");
        assert_eq!(of(&evs, "task.cancelled", &c).len(), 1, "{c} set aside");
        // Its tree is kept under its attempt's ref.
        let r = format!("refs/crew/{run}/{c}/attempt-1");
        let sha = git(&d.work, &["rev-parse", "--verify", "-q", &r]);
        assert!(!sha.trim().is_empty(), "{r}");
    }
    d.ok("team.apply", json!({"runId": run}));
    assert_eq!(
        std::fs::read_to_string(d.work.join("ok.txt")).unwrap(),
        "two\n"
    );
}

#[test]
fn the_run_param_gives_every_writing_task_candidates() {
    let d = Daemon::start();
    repo(&d);
    team(&d, "plain", "", "[fake:append=work.txt:w\\n]");
    let run = run_in(&d, "plain", json!({"candidates": 2, "select": "smallest"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    for step in ["01_build", "02_after"] {
        assert_eq!(of(&evs, "task.candidate_chosen", step).len(), 1, "{step}");
        for k in 1..=2 {
            let c = format!("_cand-{step}-{k}");
            assert_eq!(of(&evs, "task.completed", &c).len(), 1, "{c}");
        }
    }
    // N candidates of one model are N results: with reuse on, a second run reuses each
    // candidate's own result, not one result for all.
    let again = run_in(
        &d,
        "plain",
        json!({"candidates": 2, "select": "smallest", "reuseResults": "all"}),
    );
    assert_eq!(d.wait(&again), "completed", "{}", d.status(&again));
}

#[test]
fn candidates_are_refused_in_shared_mode_and_bounded() {
    let d = Daemon::start();
    repo(&d);
    team(&d, "cands", "candidates: 2", THREE);
    let e = d.err(
        "team.run",
        json!({"goal": "x", "cwd": path_str(&d.work), "runtime": "fake", "team": "cands", "workspace": "shared"}),
    );
    assert!(e["message"].as_str().unwrap().contains("worktree"), "{e}");
    let e = d.err(
        "team.run",
        json!({"goal": "x", "cwd": path_str(&d.work), "runtime": "fake", "team": "cands", "workspace": "worktree", "candidates": 9}),
    );
    assert!(
        e["message"].as_str().unwrap().contains("between 1 and 8"),
        "{e}"
    );
}

#[test]
fn two_runtimes_compete_and_the_budget_stops_further_candidates() {
    let d = Daemon::start();
    repo(&d);
    team(
        &d,
        "mixed",
        "candidates: [fake, fake-rpc/some-model]\nselect: smallest\nverifyCommands: test -f ok.txt",
        "[fake:cand-write=1:ok.txt:one\\n][fake:cand-write=1:x.txt:1\\n2\\n3\\n][fake:cand-write=2:ok.txt:two\\n]",
    );
    let run = run_in(&d, "mixed", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let s1 = of(&evs, "task.started", "_cand-01_build-1");
    let s2 = of(&evs, "task.started", "_cand-01_build-2");
    assert_eq!(s1[0]["data"]["runtime"], "fake");
    assert_eq!(s2[0]["data"]["runtime"], "fake-rpc");
    assert_eq!(s2[0]["data"]["model"], "some-model");
    let chosen = of(&evs, "task.candidate_chosen", "01_build");
    assert_eq!(chosen[0]["data"]["choice"]["index"], 2, "the smaller one");

    // The budget: each candidate spends more than the run may; with one at a time the
    // first one's usage stops the others from starting.
    team(
        &d,
        "costly",
        "candidates: 3\nselect: smallest",
        "[fake:tokens=5000][fake:cand-write=1:a.txt:a\\n][fake:cand-write=2:b.txt:b\\n][fake:cand-write=3:c.txt:c\\n]",
    );
    let run = run_in(
        &d,
        "costly",
        json!({"concurrency": 1, "budget": {"tokens": 3000}}),
    );
    assert_eq!(d.wait(&run), "failed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let started: usize = (1..=3)
        .map(|k| of(&evs, "task.started", &format!("_cand-01_build-{k}")).len())
        .sum();
    assert_eq!(started, 1, "no further candidate after the budget ran out");
    assert!(evs.iter().any(|e| e["type"] == "run.budget_exceeded"));
}

/// A candidate that fails for good is its selector's concern, not the run's: under the default
/// fail-fast policy the other candidates and later tasks are still retried.
#[test]
fn a_failed_candidate_does_not_stop_the_other_candidates_retries() {
    let d = Daemon::start();
    repo(&d);
    team(
        &d,
        "flaky",
        "candidates: 2\nselect: smallest",
        "[fake:cand-fail=1][fake:fail-attempts=1][fake:cand-write=2:ok.txt:two\\n]",
    );
    // One at a time: candidate 1 has failed for good when candidate 2's first attempt fails.
    let run = run_in(&d, "flaky", json!({"concurrency": 1}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let pos = |kind: &str, task: &str| {
        evs.iter()
            .position(|e| e["type"] == kind && e["taskId"] == task)
            .unwrap_or_else(|| panic!("no {kind} of {task}"))
    };
    assert!(
        pos("task.failed", "_cand-01_build-1") < pos("task.retrying", "_cand-01_build-2"),
        "candidate 1 failed first"
    );
    assert!(of(&evs, "task.failed", "_cand-01_build-2").is_empty());
    let chosen = of(&evs, "task.candidate_chosen", "01_build");
    assert_eq!(chosen[0]["data"]["choice"]["index"], 2);
}

#[test]
fn no_candidate_passing_enters_the_fix_loop_from_the_best() {
    let d = Daemon::start();
    repo(&d);
    // Each candidate fails the check (one file each of the two it needs); only a fix task
    // crew adds writes the second file.
    team(
        &d,
        "fixit",
        "candidates: 2\nselect: smallest\nverifyCommands: test -f a.txt && test -f b.txt",
        "[fake:cand-write=1:a.txt:a\\n][fake:cand-write=2:b.txt:b\\nb\\n][fake:fix-write=b.txt:fixed]",
    );
    let run = run_in(&d, "fixit", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let added = of(&evs, "task.fix_added", "01_build");
    assert_eq!(added.len(), 1);
    let fix = &added[0]["data"]["task"];
    assert_eq!(fix["id"], "_fix-01_build-1");
    assert_eq!(
        fix["dependsOn"],
        json!(["_cand-01_build-1"]),
        "the smaller of two equally failing"
    );
    let findings = added[0]["data"]["verdict"]["findings"].to_string();
    assert!(
        findings.contains("candidate 1") && findings.contains("candidate 2"),
        "{findings}"
    );
    let chosen = of(&evs, "task.candidate_chosen", "01_build");
    assert_eq!(chosen.len(), 1);
    assert_eq!(chosen[0]["data"]["choice"]["by"], "fix");
    let fixed = of(&evs, "task.completed", "_fix-01_build-1");
    let commit = &fixed[0]["data"]["commit"]["commit"];
    assert_eq!(&chosen[0]["data"]["commit"]["commit"], commit);
    let after = of(&evs, "task.completed", "02_after");
    assert_eq!(&after[0]["data"]["commit"]["start"], commit);
}

/// Candidates on two runtimes, none passing: the fix starts from the best one on that one's
/// runtime and model; and the run's `model` is for the run's runtime, not a contender's.
#[test]
fn a_fix_of_a_candidate_runs_on_that_candidates_runtime() {
    let d = Daemon::start();
    repo(&d);
    team(
        &d,
        "mixfix",
        "candidates: [fake, fake-rpc/some-model]\nselect: smallest\nverifyCommands: test -f a.txt && test -f b.txt",
        "[fake:cand-write=1:a.txt:a\\n][fake:cand-write=1:x.txt:1\\n2\\n3\\n][fake:cand-write=2:b.txt:b\\n][fake:fix-write=a.txt:fixed]",
    );
    let run = run_in(&d, "mixfix", json!({"model": "run-model"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let s2 = of(&evs, "task.started", "_cand-01_build-2");
    assert_eq!(
        s2[0]["data"]["model"], "some-model",
        "the contender's model"
    );
    let added = of(&evs, "task.fix_added", "01_build");
    assert_eq!(
        added[0]["data"]["task"]["dependsOn"],
        json!(["_cand-01_build-2"])
    );
    let fix = of(&evs, "task.started", "_fix-01_build-1");
    assert_eq!(fix[0]["data"]["runtime"], "fake-rpc", "{}", fix[0]);
    assert_eq!(fix[0]["data"]["model"], "some-model", "{}", fix[0]);
}

#[test]
fn kill_9_while_candidates_and_the_judge_run() {
    let mut d = Daemon::start();
    repo(&d);
    team(
        &d,
        "slow",
        "candidates: 3\nverifyCommands: test -f ok.txt",
        &format!("{THREE}[fake:sleep=1500ms][fake:choice=2]"),
    );
    let run = run_in(&d, "slow", json!({"concurrency": 1}));
    // Kill while the second candidate runs (the first has finished).
    wait_event(&d, &run, "task.started", "_cand-01_build-2");
    d.kill9();
    d.restart();
    // Kill again while the judge runs.
    wait_event(&d, &run, "task.started", "01_build");
    d.kill9();
    d.restart();
    chosen_and_continued(&d, &run, 2);
    let evs = d.events(Some(&run));
    assert_eq!(
        of(&evs, "task.started", "_cand-01_build-1").len(),
        1,
        "a finished candidate is not run again"
    );
    // The one running at the kill ran again (its attempt never ended), the third once.
    assert_eq!(of(&evs, "task.started", "_cand-01_build-3").len(), 1);
    assert!(!evs.iter().any(|e| e["type"] == "task.completed"
        && e["taskId"] == "_cand-01_build-2"
        && e["data"]["attempt"] == 1));
    for k in 1..=3 {
        assert_eq!(
            of(&evs, "task.completed", &format!("_cand-01_build-{k}")).len(),
            1
        );
    }
}

fn wait_event(d: &Daemon, run: &str, kind: &str, task: &str) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let evs = d.events(Some(run));
        if !of(&evs, kind, task).is_empty() {
            return;
        }
        assert!(std::time::Instant::now() < until, "no {kind} of {task}");
        let _ = d.ok("team.wait", json!({"runId": run, "timeoutMs": 100}));
    }
}

/// The user's team `picky` (one executor) and its workflow, whose body (after the
/// frontmatter) is `steps`.
fn picky(d: &Daemon, steps: &str) {
    let base = d.home.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join("teams/picky.team.md"),
        "---\nname: picky\ndefaultWorkflow: picky\n---\n\n- executor: agent=executor\n",
    )
    .unwrap();
    std::fs::write(
        base.join("workflows/picky.workflow.md"),
        format!("---\nname: picky\n---\n\n{steps}"),
    )
    .unwrap();
}

#[test]
fn a_person_picks_before_and_after_dependents_started() {
    let d = Daemon::start();
    repo(&d);
    // `after` needs `build` (3 candidates) and `slow`, so it starts well after the choice.
    picky(
        &d,
        "## build\nrole: executor\ncandidates: 3\nselect: smallest\nverifyCommands: test -f ok.txt\n\n\
         [fake:cand-write=1:ok.txt:one\\n][fake:cand-write=2:ok.txt:two\\n][fake:cand-write=2:more.txt:m\\n][fake:cand-write=3:ok.txt:three\\n][fake:cand-write=3:more.txt:m\\nm\\n]\n\n\
         ## slow\nrole: executor\n\n[fake:sleep=4s][fake:append=slow.txt:s\\n]\n\n\
         ## after\nrole: executor\ndependsOn: build, slow\n\nthen [fake:append=after.txt:after\\n]\n",
    );
    let run = run_in(&d, "picky", json!({}));
    wait_event(&d, &run, "task.candidate_chosen", "01_build");
    // Before `after` started: only the choice changes.
    let r = d.ok(
        "team.pick",
        json!({"runId": run, "taskId": "01_build", "candidate": 2}),
    );
    assert_eq!(r["chosen"], "_cand-01_build-2");
    assert_eq!(r["requeuedTaskIds"], json!([]), "{r}");
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let commit_of = |k: u32| -> String {
        let evs = d.events(Some(&run));
        of(&evs, "task.completed", &format!("_cand-01_build-{k}"))[0]["data"]["commit"]["commit"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let after_start = |n: usize| -> String {
        let evs = d.events(Some(&run));
        of(&evs, "task.completed", "03_after")[n]["data"]["commit"]["start"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let contains = |anc: &str, of: &str| {
        std::process::Command::new("git")
            .args(["merge-base", "--is-ancestor", anc, of])
            .current_dir(&d.work)
            .status()
            .unwrap()
            .success()
    };
    assert!(
        contains(&commit_of(2), &after_start(0)),
        "after built on candidate 2"
    );
    // After: `after` runs again from the new choice, and the run is merged again.
    let r = d.ok(
        "team.pick",
        json!({"runId": run, "taskId": "01_build", "candidate": 3}),
    );
    assert_eq!(r["requeuedTaskIds"], json!(["03_after"]), "{r}");
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert!(
        contains(&commit_of(3), &after_start(1)),
        "after built on candidate 3"
    );
    let st = d.status(&run);
    let sel = Daemon::task(&st, "01_build");
    assert_eq!(sel["candidates"]["choice"]["index"], 3, "{sel}");
    assert_eq!(sel["candidates"]["choice"]["by"], "person");
    // A candidate that does not exist, and the same choice again, are refused.
    d.err(
        "team.pick",
        json!({"runId": run, "taskId": "01_build", "candidate": 4}),
    );
    d.ok("team.apply", json!({"runId": run}));
    assert_eq!(
        std::fs::read_to_string(d.work.join("ok.txt")).unwrap(),
        "three\n"
    );
    let e = d.err(
        "team.pick",
        json!({"runId": run, "taskId": "01_build", "candidate": 1}),
    );
    assert!(e["message"].as_str().unwrap().contains("applied"), "{e}");
    // `crewctl diff --candidate` reads the same candidate's change.
    let diff = d.ok(
        "team.diff",
        json!({"runId": run, "taskId": "01_build", "candidate": 1}),
    );
    assert!(diff["patch"].as_str().unwrap().contains("+one"), "{diff}");
    // A candidate that is not there, of a step with candidates or of one without, is named
    // for what it is (not "task not found: _cand-…").
    for (task, k, says) in [
        ("01_build", 4, "task 01_build has candidates 1 to 3, not 4"),
        ("03_after", 1, "task 03_after has no candidates"),
    ] {
        let e = d.err(
            "team.diff",
            json!({"runId": run, "taskId": task, "candidate": k}),
        );
        assert!(e["message"].as_str().unwrap().contains(says), "{e}");
    }
}

/// A person changing their mind: two picks in a row after the run completed, a few times. The first queues
/// the dependent again, which starts at once; the second stops that attempt and queues it once
/// more. Its next attempt waits for the stopped one's end: both would work in its one
/// worktree (seen as git failing in the middle of an attempt, or as a false "checked out in a
/// worktree of yours"). The run completes from the last pick.
#[test]
fn two_picks_in_a_row_run_the_dependent_once_more_from_the_last() {
    let d = Daemon::start();
    repo(&d);
    picky(
        &d,
        "## build\nrole: executor\ncandidates: 3\nselect: smallest\n\n\
         [fake:cand-write=1:ok.txt:one\\n][fake:cand-write=2:ok.txt:two\\n][fake:cand-write=2:more.txt:m\\n][fake:cand-write=3:ok.txt:three\\n][fake:cand-write=3:more.txt:m\\nm\\n]\n\n\
         ## after\nrole: executor\ndependsOn: build\n\nthen [fake:append=after.txt:after\\n]\n",
    );
    let run = run_in(&d, "picky", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    // The second pick lands wherever the restarted attempt is (preparing its worktree, its
    // agent, committing): a few rounds to meet more of those moments.
    for _ in 0..3 {
        for k in [3, 2] {
            d.ok(
                "team.pick",
                json!({"runId": run, "taskId": "01_build", "candidate": k}),
            );
        }
        assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    }
    let evs = d.events(Some(&run));
    let done = of(&evs, "task.completed", "02_after");
    let start = done.last().unwrap()["data"]["commit"]["start"]
        .as_str()
        .unwrap()
        .to_string();
    let two = of(&evs, "task.completed", "_cand-01_build-2")[0]["data"]["commit"]["commit"]
        .as_str()
        .unwrap()
        .to_string();
    let built_on_two = std::process::Command::new("git")
        .args(["merge-base", "--is-ancestor", &two, &start])
        .current_dir(&d.work)
        .status()
        .unwrap()
        .success();
    assert!(
        built_on_two,
        "after's last attempt did not start from candidate 2"
    );
}

/// Candidates run at once: a one-agent run's default concurrency (1) is raised to the
/// candidates asked for; an explicit `concurrency` stays as asked.
#[test]
fn a_one_agent_runs_candidates_run_at_once() {
    let d = Daemon::start();
    repo(&d);
    let run = |extra: Value| {
        let mut p = json!({"goal": "make it [fake:cand-write=1:a.txt:a\\n][fake:cand-write=2:b.txt:b\\n][fake:cand-write=3:c.txt:c\\n]",
            "cwd": path_str(&d.work), "runtime": "fake", "agent": "executor",
            "workspace": "worktree", "candidates": 3});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        let id = d.ok("team.run", p)["runId"].as_str().unwrap().to_string();
        assert_eq!(d.wait(&id), "completed", "{}", d.status(&id));
        d.status(&id)["run"]["concurrency"].clone()
    };
    assert_eq!(run(json!({})), 3);
    assert_eq!(run(json!({"concurrency": 1})), 1);
}

/// A person may pick a candidate its checks ruled out; the choice says so (status, diff,
/// dashboard), and `crewctl pick` says so where the person sees it.
#[test]
fn picking_a_candidate_that_failed_its_checks_says_so() {
    let d = Daemon::start();
    repo(&d);
    picky(
        &d,
        "## build\nrole: executor\ncandidates: 2\nselect: smallest\nverifyCommands: test -f ok.txt\n\n\
         [fake:cand-write=1:ok.txt:one\\n][fake:cand-write=2:bad.txt:bad\\n]\n",
    );
    // The plan says how the step chooses.
    let plan = d.ok(
        "team.plan",
        json!({"goal": "make it", "cwd": path_str(&d.work), "runtime": "fake", "team": "picky", "workspace": "worktree"}),
    );
    let sel = plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "01_build")
        .unwrap();
    assert_eq!(sel["select"], "smallest", "{plan:#}");
    let crewctl = d.bin.with_file_name("crewctl");
    let shown = std::process::Command::new(&crewctl)
        .args([
            "--socket",
            path_str(&d.socket),
            "plan",
            "make it",
            "--team",
            "picky",
        ])
        .args([
            "--runtime",
            "fake",
            "--workspace",
            "worktree",
            "--cwd",
            path_str(&d.work),
        ])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("01_build tries 2 candidates at once and keeps the smallest change"),
        "{shown}"
    );
    let run = run_in(&d, "picky", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let out = std::process::Command::new(&crewctl)
        .args([
            "--socket",
            path_str(&d.socket),
            "pick",
            &run,
            "01_build",
            "2",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("note: its checks failed: `test -f ok.txt` exited with 1"),
        "{said}"
    );
    let st = d.status(&run);
    let reason = Daemon::task(&st, "01_build")["candidates"]["choice"]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.contains("although its checks failed: `test -f ok.txt`"),
        "{reason}"
    );
}

/// A user team `name` whose planner fans out (answering the block in `block`), with the
/// `executor` line as given, then `integrate` reading the added tasks' files.
fn fan_team(d: &Daemon, name: &str, executor: &str, block: &Value) {
    let file = d.fixture_path(&format!("{name}-block.json"));
    std::fs::write(&file, serde_json::to_string_pretty(block).unwrap()).unwrap();
    let base = d.home.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join(format!("teams/{name}.team.md")),
        format!(
            "---\nname: {name}\ndefaultWorkflow: {name}\nmaxConcurrency: 4\n---\n\n- planner: agent=planner\n- {executor}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        base.join(format!("workflows/{name}.workflow.md")),
        format!(
            "---\nname: {name}\n---\n\n## plan\nrole: planner\nexpands: tasks\n\nSplit it. [fake:fanout={}]\n\n## integrate\nrole: executor\ndependsOn: plan\n\n[fake:cat=one.txt][fake:cat=two.txt][fake:append=done.txt:d\\n]\n",
            path_str(&file)
        ),
    )
    .unwrap();
}

/// Two added executor tasks, `two` after `one`; candidate 1 of each writes less than 2.
fn fan_block(sleep: &str) -> Value {
    json!({"tasks": [
        {"id": "one", "role": "executor", "title": "one", "scope": ["one.txt"],
         "task": format!("[fake:cand-write=1:one.txt:1\\n][fake:cand-write=2:one.txt:2\\n2\\n2\\n]{sleep}")},
        {"id": "two", "role": "executor", "title": "two", "scope": ["two.txt"], "dependsOn": ["one"],
         "task": "[fake:cand-write=1:two.txt:1\\n][fake:cand-write=2:two.txt:2\\n2\\n2\\n]"}
    ]})
}

/// The run's `candidates` (and a role's `candidates=N`) reach the tasks a fan-out step adds at
/// run time: the one `task.expanded` carries the candidates and selectors, `kill -9` while
/// they run neither loses nor repeats one, and the run goes on from each choice.
#[test]
fn fan_out_tasks_get_candidates_from_the_run_and_the_role() {
    let mut d = Daemon::start();
    repo(&d);
    fan_team(
        &d,
        "fanc",
        "executor: agent=executor",
        &fan_block("[fake:cand-sleep=2:3s]"),
    );
    let run = run_in(&d, "fanc", json!({"candidates": 2, "select": "smallest"}));
    wait_event(&d, &run, "task.started", "_cand-one-2");
    d.kill9();
    d.restart();
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    let expanded: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "task.expanded")
        .collect();
    assert_eq!(
        expanded.len(),
        1,
        "one event adds the tasks and their candidates"
    );
    let ids: Vec<&str> = expanded[0]["data"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "_cand-one-1",
            "_cand-one-2",
            "one",
            "_cand-two-1",
            "_cand-two-2",
            "two"
        ]
    );
    for step in ["one", "two"] {
        let chosen = of(&evs, "task.candidate_chosen", step);
        assert_eq!(chosen.len(), 1, "{step} chose once");
        assert_eq!(
            chosen[0]["data"]["choice"]["index"], 1,
            "{step}: the smaller"
        );
        for k in 1..=2 {
            let c = format!("_cand-{step}-{k}");
            assert_eq!(
                of(&evs, "task.completed", &c).len(),
                1,
                "{c} completed once"
            );
        }
    }
    // `two`'s candidates start from `one`'s choice; `integrate` waits for the steps.
    let one = &of(&evs, "task.candidate_chosen", "one")[0]["data"]["commit"]["commit"];
    let two1 = &of(&evs, "task.completed", "_cand-two-1")[0]["data"]["commit"]["start"];
    assert_eq!(one, two1);
    // `integrate` (its candidates too) waits for the added steps, not their candidates.
    let st = d.status(&run);
    for t in ["02_integrate", "_cand-02_integrate-1"] {
        let deps = Daemon::task(&st, t)["dependsOn"].to_string();
        assert!(
            deps.contains("\"one\"") && !deps.contains("_cand-one") && !deps.contains("_cand-two"),
            "{t}: {deps}"
        );
    }
    d.ok("team.apply", json!({"runId": run}));
    assert_eq!(
        std::fs::read_to_string(d.work.join("one.txt")).unwrap(),
        "1\n"
    );

    // A role's `candidates=2` alone does the same, without the run param.
    fan_team(
        &d,
        "fanr",
        "executor: agent=executor candidates=2",
        &fan_block(""),
    );
    let run = run_in(&d, "fanr", json!({"select": "smallest"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    for step in ["one", "two"] {
        assert_eq!(of(&evs, "task.candidate_chosen", step).len(), 1, "{step}");
    }
}

/// The fan-out cap counts agents: under `--candidates 2` the block's two executor tasks would
/// start four, over a cap of 3, so the block is refused (one repair attempt, then the planner
/// needs attention) saying why, and nothing is added.
#[test]
fn the_fan_out_cap_counts_the_candidates_of_added_tasks() {
    let d = Daemon::start();
    repo(&d);
    fan_team(&d, "fancap", "executor: agent=executor", &fan_block(""));
    let run = run_in(
        &d,
        "fancap",
        json!({"candidates": 2, "select": "smallest", "maxFanOutTasks": 3}),
    );
    assert_eq!(d.wait(&run), "blocked", "{}", d.status(&run));
    let st = d.status(&run);
    let plan = Daemon::task(&st, "01_plan");
    assert_eq!(plan["status"], "needs_attention", "{st}");
    let error = plan["error"].as_str().unwrap();
    assert!(
        error.contains("adds 2 tasks that would start 4 agents")
            && error.contains("each `executor` task runs 2 candidates")
            && error.contains("at most 3 agents"),
        "{error}"
    );
    let evs = d.events(Some(&run));
    assert!(
        evs.iter().all(|e| e["type"] != "task.expanded"),
        "nothing was added"
    );
    // A cap that one added task alone is over is said when the run starts.
    let start = |n: u32| {
        d.ok(
            "team.run",
            json!({"goal": "make it", "cwd": path_str(&d.work), "runtime": "fake",
                   "team": "fancap", "workspace": "worktree", "candidates": n,
                   "maxFanOutTasks": 3, "requirePlanApproval": true}),
        )
    };
    let started = start(4);
    let notes = started["notes"].to_string();
    assert!(
        notes.contains("each `executor` task it adds would run 4 candidates")
            && notes.contains("it can add no `executor` task"),
        "{notes}"
    );
    let started = start(3);
    assert!(
        !started["notes"].to_string().contains("can add no"),
        "{started}"
    );
}

/// `verifyRetries` on a candidate step: each candidate's verify failure is retried as the step
/// says, and once the retries are spent the candidate completes with its failure recorded (its
/// commit kept), so the fix loop still starts from the best of them.
#[test]
fn verify_retries_on_a_candidate_step_then_it_completes_ruled_out() {
    let d = Daemon::start();
    repo(&d);
    team(
        &d,
        "retried",
        "candidates: 2\nselect: smallest\nverifyRetries: 1\nverifyCommands: test -f a.txt && test -f b.txt",
        "[fake:cand-write=1:a.txt:a\\n][fake:cand-write=2:b.txt:b\\nb\\n][fake:fix-write=b.txt:fixed]",
    );
    let run = run_in(&d, "retried", json!({}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let evs = d.events(Some(&run));
    for k in 1..=2 {
        let c = format!("_cand-01_build-{k}");
        let retried = of(&evs, "task.retrying", &c);
        assert_eq!(retried.len(), 1, "{c}: one verify retry, as the step says");
        assert_eq!(retried[0]["data"]["reason"], "verify");
        assert_eq!(of(&evs, "task.failed", &c).len(), 0, "{c} is not failed");
        let done = of(&evs, "task.completed", &c);
        assert_eq!(done.len(), 1, "{c} completes with its failure");
        assert_eq!(done[0]["data"]["attempt"], 2);
        assert!(
            done[0]["data"]["commit"]["commit"].is_string(),
            "{c} keeps its commit"
        );
        assert_ne!(done[0]["data"]["verification"][0]["exitCode"], 0);
    }
    let added = of(&evs, "task.fix_added", "01_build");
    assert_eq!(added.len(), 1);
    assert_eq!(
        added[0]["data"]["task"]["dependsOn"],
        json!(["_cand-01_build-1"])
    );
    assert_eq!(
        of(&evs, "task.candidate_chosen", "01_build")[0]["data"]["choice"]["by"],
        "fix"
    );
}

/// The chosen candidate's `output:` is the step's artifact: a dependent's `reads:` of that
/// name gets the chosen candidate's answer (not the judge's, not another candidate's), and
/// `team.artifact` of `shared/<name>` reads the same.
#[test]
fn the_chosen_candidates_output_is_the_steps_artifact() {
    let d = Daemon::start();
    repo(&d);
    let base = d.home.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join("teams/art.team.md"),
        "---\nname: art\ndefaultWorkflow: art\n---\n\n- executor: agent=executor\n- reviewer: agent=reviewer\n",
    )
    .unwrap();
    std::fs::write(
        base.join("workflows/art.workflow.md"),
        format!(
            "---\nname: art\n---\n\n## build\nrole: executor\ncandidates: 3\noutput: design.md\nverifyCommands: test -f ok.txt\n\n\
             {THREE}[fake:choice=2][fake:echo-env=CREW_TASK_ID]\n\n\
             ## after\nrole: executor\ndependsOn: build\nreads: design.md\n\n[fake:append=after.txt:after\\n]\n"
        ),
    )
    .unwrap();
    let run = run_in(&d, "art", json!({}));
    chosen_and_continued(&d, &run, 2);
    let prompt = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "prompts/02_after.md"}),
    )["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        prompt.contains("CREW_TASK_ID=_cand-01_build-2"),
        "the dependent reads the chosen candidate's artifact: {prompt}"
    );
    // Its dependency output is the chosen candidate's result too, not the judge's answer.
    assert!(!prompt.contains("CREW_TASK_ID=01_build"), "{prompt}");
    assert!(
        prompt.contains("<dependency-output task=\"01_build\" role=\"executor\">"),
        "{prompt}"
    );
    let shared = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "shared/design.md"}),
    )["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(shared.contains("CREW_TASK_ID=_cand-01_build-2"), "{shared}");
}
