//! Issue 19 item 6: a step's `preStepScript` runs before its worker, in the task's workspace,
//! bounded in time and output, and its output joins the prompt; only for the user's own or a
//! trusted project's workflows. A script that fails or outlives its `preStepTimeout` fails the
//! task; a cancel kills it.

mod common;

use common::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A one-step team + workflow in the user's config dir; `config` goes under the step heading.
fn user_team(d: &Daemon, name: &str, config: &str, task: &str) {
    let base = d.home.join(".config/crew");
    std::fs::create_dir_all(base.join("teams")).unwrap();
    std::fs::create_dir_all(base.join("workflows")).unwrap();
    std::fs::write(
        base.join(format!("teams/{name}.team.md")),
        format!("---\nname: {name}\ndefaultWorkflow: {name}\n---\n\n- exec: agent=executor\n"),
    )
    .unwrap();
    std::fs::write(
        base.join(format!("workflows/{name}.workflow.md")),
        format!("---\nname: {name}\n---\n\n## only\nrole: exec\n{config}\n\n{task}\n"),
    )
    .unwrap();
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn artifact(d: &Daemon, run: &str, name: &str) -> String {
    d.ok("team.artifact", json!({"runId": run, "name": name}))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn a_user_workflows_script_output_reaches_the_agents_prompt() {
    let d = Daemon::start_with(Opts {
        config: "max_attempts = 1\n".into(),
        env: vec![],
    });
    script(
        &d.work,
        "ctx.sh",
        "echo \"PRE-STEP-MARKER args=[$1][$2] cwd=$(pwd) task=$CREW_TASK_ID\"",
    );
    user_team(
        &d,
        "ctx",
        "preStepScript: ./ctx.sh\npreStepArgs: one two, three",
        "Use the context.",
    );
    let params = json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "team": "ctx"});
    let plan = d.ok("team.plan", params.clone());
    assert_eq!(
        plan["tasks"][0]["preStep"], "./ctx.sh one two three",
        "team.plan shows the script: {plan}"
    );
    let started = d.ok("team.run", params);
    let notes = started["notes"].to_string();
    assert!(notes.contains("pre-step script"), "{notes}");
    let run = started["runId"].as_str().unwrap().to_string();
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));

    let want = format!(
        "PRE-STEP-MARKER args=[one two][three] cwd={} task=01_only",
        d.work.canonicalize().unwrap().display()
    );
    // The agent got it: the fake agent's transcript holds the prompt it was given.
    let transcript = artifact(&d, &run, "transcripts/01_only.attempt-1.jsonl");
    assert!(transcript.contains(&want), "{want}\nnot in\n{transcript}");
    let prompt = artifact(&d, &run, "prompts/01_only.md");
    assert!(
        prompt.contains("## Pre-step script output") && prompt.contains("<pre-step-output>"),
        "{prompt}"
    );
}

#[test]
fn in_worktree_mode_the_script_runs_in_the_tasks_worktree() {
    let d = Daemon::start_with(Opts {
        config: "max_attempts = 1\n".into(),
        env: vec![],
    });
    let w = d.work.as_path();
    git(w, &["init", "-q", "-b", "main"]);
    script(w, "ctx.sh", "echo \"WT-MARKER cwd=$(pwd)\"");
    git(w, &["add", "-A"]);
    git(w, &["commit", "-qm", "init"]);
    user_team(
        &d,
        "wt",
        "preStepScript: ./ctx.sh",
        "[fake:write=out.txt:x]",
    );
    let run = d.run("g", json!({"team": "wt", "workspace": "worktree"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let prompt = artifact(&d, &run, "prompts/01_only.md");
    let line = prompt
        .lines()
        .find(|l| l.starts_with("WT-MARKER cwd="))
        .unwrap_or_else(|| panic!("no marker in {prompt}"));
    let state = d.state_dir.canonicalize().unwrap();
    assert!(
        line.contains(&format!("{}/worktrees/{run}/", state.display())),
        "the script ran in the task's worktree: {line}"
    );
}

#[test]
fn an_untrusted_projects_script_is_refused_and_never_runs() {
    let mut d = Daemon::start();
    let ran = d.work.join("script-ran.txt");
    script(&d.work, "touch.sh", "echo yes > script-ran.txt");
    d.project_file(
        "teams/proj.team.md",
        "---\nname: proj\ndefaultWorkflow: proj\n---\n\n- exec: agent=executor\n",
    );
    let wf = d.project_file(
        "workflows/proj.workflow.md",
        "---\nname: proj\n---\n\n## build\nrole: exec\npreStepScript: ./touch.sh\n\nDo it.\n",
    );
    let params = json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "team": "proj"});
    for method in ["team.plan", "team.run"] {
        let e = d.err(method, params.clone());
        assert_eq!(e["code"], 1003, "{method}: {e}");
        let diag = &e["data"]["diagnostics"][0];
        assert_eq!(diag["field"], "preStepScript", "{e}");
        assert_eq!(diag["path"], path_str(&wf), "{e}");
        assert_eq!(diag["line"], 5, "{e}");
        assert!(
            e["message"].as_str().unwrap().contains("not trusted"),
            "{e}"
        );
    }
    // In a chain, after a builtin team, the project's workflow is judged all the same.
    let chained = json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "chain": ["default", "proj"]});
    for method in ["team.plan", "team.run"] {
        let e = d.err(method, chained.clone());
        assert_eq!(e["code"], 1003, "{method} of a chain: {e}");
        assert_eq!(e["data"]["diagnostics"][0]["field"], "preStepScript", "{e}");
    }
    assert!(!ran.exists(), "the script never ran");
    assert!(d.ok("team.list", json!({}))["runs"]
        .as_array()
        .is_none_or(|r| r.is_empty()));

    // Trusted, the same file runs its script (so the check above could fail).
    std::fs::write(
        &d.config,
        format!("trusted_projects = [\"{}\"]\n", path_str(&d.work)),
    )
    .unwrap();
    d.restart();
    let run = d.run("g", json!({"team": "proj"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    assert!(ran.exists(), "a trusted project's script runs");
}

#[test]
fn a_script_past_its_timeout_is_killed_and_fails_the_task() {
    let d = Daemon::start_with(Opts {
        config: "max_attempts = 1\nkill_grace_ms = 200\n".into(),
        env: vec![],
    });
    script(
        &d.work,
        "slow.sh",
        "echo before-sleep; sleep 30; echo never-printed",
    );
    user_team(
        &d,
        "slow",
        "preStepScript: ./slow.sh\npreStepTimeout: 500",
        "Never reached.",
    );
    let started = Instant::now();
    let run = d.run("g", json!({"team": "slow"}));
    assert_eq!(d.wait(&run), "failed", "{}", d.status(&run));
    assert!(started.elapsed() < Duration::from_secs(20));
    let st = d.status(&run);
    let t = Daemon::task(&st, "01_only");
    let error = t["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("pre-step script `./slow.sh` timed out")
            && error.contains("before-sleep")
            && !error.contains("never-printed"),
        "{t:#}"
    );
    let events = d.events(Some(&run));
    assert!(
        of_type(&events, "worker.spawned").is_empty(),
        "no agent ran"
    );

    // Optional, the same failure is a warning and the agent runs without the output.
    user_team(
        &d,
        "opt",
        "preStepScript: ./fails.sh\npreStepOptional: true",
        "Go on anyway.",
    );
    script(&d.work, "fails.sh", "echo broken; exit 3");
    let run = d.run("g", json!({"team": "opt"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));
    let events = d.events(Some(&run));
    let warnings = of_type(&events, "task.warning");
    assert!(
        warnings
            .iter()
            .any(|w| w.to_string().contains("exited with 3")),
        "{warnings:?}"
    );
}

#[test]
fn a_cancel_during_the_script_kills_it() {
    // Unboxed: a box has a /proc of its own, where the script's pid is another number.
    let d = Daemon::start_with(Opts {
        config: "sandbox = \"off\"\n".into(),
        env: vec![],
    });
    script(
        &d.work,
        "hang.sh",
        // Its pid as the test sees it: crew's init runs it in a PID namespace, where `$$`
        // is another number; /proc (the host's) read by the shell itself names it.
        "read pid _ < /proc/self/stat; echo $pid > script.pid; sleep 60; echo late > late.txt",
    );
    user_team(
        &d,
        "hang",
        "preStepScript: ./hang.sh\npreStepTimeout: 120000",
        "Never reached.",
    );
    let run = d.run("g", json!({"team": "hang"}));
    let pid_file = d.work.join("script.pid");
    wait_for("the script to start", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    });
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let started = Instant::now();
    d.ok("team.cancel", json!({"runId": run}));
    assert_eq!(d.wait(&run), "cancelled", "{}", d.status(&run));
    assert!(started.elapsed() < Duration::from_secs(20));
    // The script's process (the runner `exec`s it) is gone, or a zombie awaiting its reaper.
    wait_for(
        "the script to be killed",
        || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with(['Z', 'X'])),
        },
    );
    let events = d.events(Some(&run));
    assert!(
        of_type(&events, "worker.spawned").is_empty(),
        "no agent ran"
    );
    assert!(!d.work.join("late.txt").exists());
}
