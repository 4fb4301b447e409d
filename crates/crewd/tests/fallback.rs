//! An agent's `fallbackModels` through the real daemon and the fake agent: a model that stays
//! overloaded through a task's retries gives way to the next fallback model, and each attempt's
//! `task.started` names the model it ran on.

mod common;

use common::*;
use serde_json::{json, Value};

fn of_task<'a>(events: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    events
        .iter()
        .filter(move |e| e["type"] == kind && e["taskId"] == "01_only")
}

#[test]
fn an_overloaded_model_gives_way_to_the_agents_fallback_models() {
    let d = Daemon::start_with(Opts {
        config: "max_attempts = 1\nkill_grace_ms = 500\nfinal_drain_ms = 1500\nfinal_drain_quiet_ms = 200\n".into(),
        ..Default::default()
    });
    d.project_file(
        "agents/busy.md",
        "---\nname: busy\nmodel: fake/busy\nfallbackModels: fake/busy2, fake/spare\nthinking: high\ntools: read\n---\nYou answer.\n",
    );
    one_step_team(
        &d,
        "fallback",
        "[fake:busy-model=fake/busy] [fake:busy-model=fake/busy2] answer {goal}",
        "busy",
    );
    let run = d.run("fall back", json!({"team": "fallback"}));
    assert_eq!(d.wait(&run), "completed", "{}", d.status(&run));

    let events = d.events(Some(&run));
    let started: Vec<&str> = of_task(&events, "task.started")
        .map(|e| e["data"]["model"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(started, ["fake/busy", "fake/busy2", "fake/spare"]);
    let fallbacks: Vec<&str> = of_task(&events, "task.retrying")
        .map(|e| e["data"]["fallbackModel"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(fallbacks, ["fake/busy2", "fake/spare"]);
    let note = of_task(&events, "task.retrying")
        .next()
        .and_then(|e| e["message"].as_str())
        .unwrap_or_default();
    assert!(
        note.contains("429") && note.contains("next attempt on fallback model fake/busy2"),
        "{note}"
    );
    let status = d.status(&run);
    let task = Daemon::task(&status, "01_only");
    assert_eq!(task["attempts"], 3, "{task}");
    assert_eq!(task["status"], "completed");
}

#[test]
fn without_fallback_models_an_overloaded_model_fails_the_task() {
    let d = Daemon::start_with(Opts {
        config: "max_attempts = 1\n".into(),
        ..Default::default()
    });
    d.project_file(
        "agents/busy.md",
        "---\nname: busy\nmodel: fake/busy\ntools: read\n---\nYou answer.\n",
    );
    one_step_team(
        &d,
        "nofallback",
        "[fake:busy-model=fake/busy] answer",
        "busy",
    );
    let run = d.run("no fallback", json!({"team": "nofallback"}));
    assert_eq!(d.wait(&run), "failed");
    let events = d.events(Some(&run));
    assert_eq!(of_task(&events, "task.started").count(), 1);
    assert_eq!(of_task(&events, "task.retrying").count(), 0);
}
