//! Through the real daemon and the fake agent: `team.retry` with `withDependents`, what
//! `team.cancel` says it stopped, and the system prompt files in `team.artifacts`.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const FAST: &str = "kill_grace_ms = 500\nfinal_drain_ms = 1500\nfinal_drain_quiet_ms = 200\n";

fn daemon() -> Daemon {
    Daemon::start_with(Opts {
        config: FAST.into(),
        ..Default::default()
    })
}

/// `chain`: a, then b after a, then c after b; and d on its own.
fn chain_team(d: &Daemon) {
    d.project_file(
        "teams/chain.team.md",
        "---\nname: chain\ndefaultWorkflow: chain\n---\n\n- explorer: agent=explorer\n- verifier: agent=verifier\n",
    );
    d.project_file(
        "workflows/chain.workflow.md",
        "---\nname: chain\n---\n\n## a\nrole: explorer\n\nstep a\n\n## b\nrole: explorer\ndependsOn: a\n\nstep b\n\n## c\nrole: verifier\ndependsOn: b\n\nstep c\n\n## d\nrole: explorer\n\nstep d\n",
    );
}

fn attempts(d: &Daemon, run: &str) -> Vec<(String, u64)> {
    d.status(run)["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_string(),
                t["attempts"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn retry_with_dependents_runs_the_finished_downstream_tasks_again() {
    let d = daemon();
    chain_team(&d);
    let run = d.run("chain it", json!({"team": "chain"}));
    assert_eq!(d.wait(&run), "completed");
    let ids: Vec<String> = attempts(&d, &run).into_iter().map(|(id, _)| id).collect();
    let [a, b, c, dd] = [&ids[0], &ids[1], &ids[2], &ids[3]];

    // Without the flag: the named task alone.
    let r = d.ok("team.retry", json!({"runId": run, "taskIds": [b]}));
    assert_eq!(r["requeuedTaskIds"], json!([b]));
    assert_eq!(d.wait(&run), "completed");
    // With it: a, and b and c downstream of it; d is not downstream.
    let r = d.ok(
        "team.retry",
        json!({"runId": run, "taskIds": [a], "withDependents": true}),
    );
    assert_eq!(r["requeuedTaskIds"], json!([a, b, c]));
    assert_eq!(d.wait(&run), "completed");
    let got = attempts(&d, &run);
    assert_eq!(
        got,
        vec![
            (a.clone(), 2),
            (b.clone(), 3),
            (c.clone(), 2),
            (dd.clone(), 1)
        ]
    );
    // Exact readiness held: each started after what it depends on completed again.
    let evs = d.events(Some(&run));
    let last = |kind: &str, task: &str| {
        evs.iter()
            .rposition(|e| e["type"] == kind && e["taskId"] == json!(task))
            .unwrap()
    };
    assert!(last("task.completed", a) < last("task.started", b));
    assert!(last("task.completed", b) < last("task.started", c));
}

#[test]
fn cancel_says_which_workers_it_stopped_and_artifacts_list_system_prompts() {
    let d = daemon();
    one_step_team(&d, "nap", "Take a nap. [fake:sleep=20s]", "explorer");
    let run = d.run("nap a while", json!({"team": "nap"}));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !d
        .events(Some(&run))
        .iter()
        .any(|e| e["type"] == "worker.spawned")
    {
        assert!(Instant::now() < deadline, "no worker.spawned");
        std::thread::sleep(Duration::from_millis(50));
    }
    let task = d.status(&run)["tasks"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = d.ok("team.cancel", json!({"runId": run}));
    assert_eq!(r["cancelledTaskIds"], json!([task]));
    assert_eq!(r["stoppedTaskIds"], json!([task]), "{r}");
    assert_eq!(d.wait(&run), "cancelled");

    // A run blocked on plan approval has no worker: nothing is stopped.
    one_step_team(&d, "hold", "Change things.", "executor");
    let held = d.run("hold", json!({"team": "hold", "requirePlanApproval": true}));
    assert_eq!(d.wait(&held), "blocked");
    let r = d.ok("team.cancel", json!({"runId": held}));
    assert_eq!(r["stoppedTaskIds"], json!([]), "{r}");
    assert_eq!(r["cancelledTaskIds"].as_array().unwrap().len(), 1, "{r}");

    // The system prompt the worker got is listed, with its size and digest.
    let arts: Vec<Value> = d.ok("team.artifacts", json!({"runId": run}))["artifacts"]
        .as_array()
        .unwrap()
        .clone();
    let sys: Vec<&Value> = arts
        .iter()
        .filter(|a| a["kind"] == "system-prompt")
        .collect();
    assert_eq!(sys.len(), 1, "{arts:?}");
    let name = sys[0]["name"].as_str().unwrap();
    assert!(
        name.starts_with("prompts/_system-") && name.ends_with(".md"),
        "{name}"
    );
    assert_eq!(sys[0]["taskId"], json!(task));
    let content = d.ok("team.artifact", json!({"runId": run, "name": name}))["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!content.is_empty());
    assert_eq!(sys[0]["bytes"], json!(content.len()));
    // The held run's task never started: no system prompt file was written for it.
    let held_arts = d.ok("team.artifacts", json!({"runId": held}))["artifacts"].clone();
    assert!(
        !held_arts
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "system-prompt"),
        "{held_arts}"
    );
}
