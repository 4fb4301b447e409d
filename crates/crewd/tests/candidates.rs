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
    // Each candidate's usage is its own.
    for k in 1..=3 {
        let c = Daemon::task(&st, &format!("_cand-01_build-{k}"));
        assert!(c["usage"]["turns"].as_u64().unwrap() >= 1, "{c}");
    }
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

#[test]
fn a_person_picks_before_and_after_dependents_started() {
    let d = Daemon::start();
    repo(&d);
    let base = d.home.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join("teams/picky.team.md"),
        "---\nname: picky\ndefaultWorkflow: picky\n---\n\n- executor: agent=executor\n",
    )
    .unwrap();
    // `after` needs `build` (3 candidates) and `slow`, so it starts well after the choice.
    std::fs::write(
        base.join("workflows/picky.workflow.md"),
        "---\nname: picky\n---\n\n## build\nrole: executor\ncandidates: 3\nselect: smallest\nverifyCommands: test -f ok.txt\n\n\
         [fake:cand-write=1:ok.txt:one\\n][fake:cand-write=2:ok.txt:two\\n][fake:cand-write=2:more.txt:m\\n][fake:cand-write=3:ok.txt:three\\n][fake:cand-write=3:more.txt:m\\nm\\n]\n\n\
         ## slow\nrole: executor\n\n[fake:sleep=4s][fake:append=slow.txt:s\\n]\n\n\
         ## after\nrole: executor\ndependsOn: build, slow\n\nthen [fake:append=after.txt:after\\n]\n",
    )
    .unwrap();
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
}
