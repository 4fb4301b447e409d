//! `validate` and the confirmation's preview, on bundles made as an export makes them (or as a
//! forger would: resealed after an edit).

use super::confirm::imported_preview;
use super::*;
use crate::artifacts::sha256_hex;
use crate::rpc::views;
use crew_core::run::{Event, EventBody, Pending, RunState};
use serde_json::{json, Map, Value};
use std::path::Path;

/// A minimal finished run's events, as an export would carry them.
fn sample_events() -> Vec<Value> {
    stamped(sample_pending())
}

/// `sample_events` before they are stamped.
fn sample_pending() -> Vec<Pending> {
    use crew_core::plan::PlannedTask;
    use crew_core::run::AttemptEnd;
    let plan: PlannedTask = serde_json::from_value(json!({
        "id": "01_a", "stepId": "a", "role": "r", "agent": "r", "dependsOn": [],
        "taskTemplate": "t", "output": null, "reads": [], "model": null,
        "systemPrompt": "", "systemPromptMode": "replace", "tools": [],
        "thinking": null, "writes": false
    }))
    .unwrap_or_else(|e| panic!("the PlannedTask fixture needs updating: {e}"));
    let spec = crate::test_support::run_spec(vec![std::sync::Arc::new(plan)]);
    let content = "hello";
    let mut pend = first_attempt_of(spec, "01_a");
    pend.extend([
        Pending::task(
            "team_x",
            "01_a",
            EventBody::TaskCompleted {
                end: AttemptEnd {
                    attempt: 1,
                    artifacts: vec![crew_core::run::ArtifactRef {
                        name: "results/01_a.txt".into(),
                        kind: "result".into(),
                        bytes: content.len() as u64,
                        sha256: sha256_hex(content.as_bytes()).as_str().into(),
                    }],
                    ..Default::default()
                },
                reused_from: None,
                commit: None,
                verification: vec![],
                verdict: None,
            },
        ),
        Pending::run(
            "team_x",
            EventBody::RunCompleted {
                usage: Default::default(),
            },
        ),
    ]);
    pend
}

/// A run of `spec` created and started, and `task`'s first attempt started.
fn first_attempt_of(spec: crew_core::run::RunSpec, task: &str) -> Vec<Pending> {
    vec![
        Pending::run("team_x", EventBody::RunCreated(Box::new(spec))),
        Pending::run("team_x", EventBody::RunStarted {}),
        Pending::task(
            "team_x",
            task,
            EventBody::TaskStarted {
                attempt: 1,
                runtime: "fake".into(),
                model: None,
                artifacts: vec![],
            },
        ),
    ]
}

/// `pend` as a daemon would have journaled them.
fn stamped(pend: Vec<Pending>) -> Vec<Value> {
    use crew_core::run::State;
    let mut st = State::default();
    let t0 = chrono::DateTime::parse_from_rfc3339("2025-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    pend.into_iter()
        .enumerate()
        .map(|(i, p)| {
            let ev = st.stamp(p, i as u64 + 10, t0 + chrono::Duration::seconds(i as i64));
            st.apply(&ev);
            serde_json::to_value(&ev).unwrap()
        })
        .collect()
}

fn sample_bundle() -> Value {
    bundle_of(sample_events())
}

/// A bundle of `events`, consistent and sealed as an export makes one (or a forger who
/// recomputes the view and checksum).
fn bundle_of(events: Vec<Value>) -> Value {
    let evs: Vec<Event> = events
        .iter()
        .map(|v| serde_json::from_value(v.clone()).unwrap())
        .collect();
    let run = crew_core::run::replay_run(evs.iter()).unwrap();
    let mut b = Map::new();
    b.insert("format".into(), json!(FORMAT));
    b.insert("version".into(), json!(1));
    b.insert("exportedAt".into(), json!("2025-01-01T00:00:09Z"));
    b.insert(
        "run".into(),
        serde_json::to_value(views::status(&run)).unwrap(),
    );
    b.insert("events".into(), Value::Array(events));
    b.insert(
        "artifacts".into(),
        json!([{"name": "results/01_a.txt", "kind": "result", "taskId": "01_a",
                "bytes": 5, "sha256": sha256_hex(b"hello"), "content": "hello"}]),
    );
    let sum = checksum(&b);
    b.insert("checksum".into(), json!(sum));
    Value::Object(b)
}

/// Apply `edit`, then (when `reseal`) recompute the checksum like a careful forger would.
fn edited(edit: impl Fn(&mut Map<String, Value>), reseal: bool) -> Value {
    let mut b = sample_bundle();
    let obj = b.as_object_mut().unwrap();
    edit(obj);
    if reseal {
        let sum = checksum(obj);
        obj.insert("checksum".into(), json!(sum));
    }
    b
}

fn events_mut(o: &mut Map<String, Value>) -> &mut Vec<Value> {
    o.get_mut("events").unwrap().as_array_mut().unwrap()
}

#[test]
fn a_good_bundle_validates() {
    let v = validate(&sample_bundle()).unwrap();
    assert_eq!(v.run_id, "team_x");
    assert_eq!(v.events.len(), 5);
    assert_eq!(v.files, vec![("results/01_a.txt".into(), "hello".into())]);
}

/// A bundle whose run "finished" with its task's attempt still in flight: a job on a
/// cluster (its id and staging directory) or a local worker (a pid and its start time).
/// Once imported and resumed, a restart's recovery would follow that job (and cancel it,
/// or take files from that directory) or kill that process group: crewd acting on a job or
/// a process it never started. A run crew exports has no attempt in flight (a run ends
/// only when nothing runs), so such a bundle is refused.
#[test]
fn a_run_with_an_attempt_in_flight_is_refused() {
    let in_flight: [(&str, Vec<EventBody>); 2] = [
        (
            "remote",
            vec![
                EventBody::WorkerSubmitting {
                    attempt: 1,
                    job_name: "crew-team_x-01_a-1".into(),
                    staging: "/home/someone/private".into(),
                },
                EventBody::WorkerSubmitted {
                    attempt: 1,
                    job_id: 4242,
                },
            ],
        ),
        (
            "local",
            vec![EventBody::WorkerSpawned {
                attempt: 1,
                pid: 1,
                pid_start: 1,
                live: false,
            }],
        ),
    ];
    for (what, bodies) in in_flight {
        let mut pend = sample_pending();
        // Keep run.created, run.started, task.started; end the run with the attempt open.
        pend.truncate(3);
        pend.extend(
            bodies
                .into_iter()
                .map(|b| Pending::task("team_x", "01_a", b)),
        );
        pend.push(Pending::run(
            "team_x",
            EventBody::RunFailed {
                reason: "forged".into(),
                usage: Default::default(),
            },
        ));
        let b = bundle_of(stamped(pend));
        let e = match validate(&b) {
            Ok(_) => panic!("{what}: a run with an attempt in flight was accepted"),
            Err(e) => e,
        };
        assert_eq!(e.code, crew_api::codes::VALIDATION_FAILED, "{what}");
        let data = serde_json::to_string(&e.data).unwrap();
        assert!(
            data.contains("01_a") && data.contains("in flight"),
            "{what}: {data}"
        );
    }
}

/// A failed run of `a` (failed, verified by `check a`), `b` (depends on `a`: skipped, verified
/// by `check b`) and `c` (never started: queued), every task an editor, with the project's
/// per-task check `project check`.
fn three_task_failed_run() -> RunState {
    use crew_core::plan::PlannedTask;
    use crew_core::run::AttemptEnd;
    let task = |id: &str, deps: &[&str], verify: Option<&str>| {
        let mut v = json!({
            "id": id, "stepId": id, "role": "r", "agent": "r", "dependsOn": deps,
            "taskTemplate": "t", "output": null, "reads": [], "model": null,
            "systemPrompt": "", "systemPromptMode": "replace", "tools": ["edit"],
            "thinking": null, "writes": true
        });
        if let Some(c) = verify {
            v["checks"] = json!({"verify": {"commands": [c]}});
        }
        let plan: PlannedTask = serde_json::from_value(v)
            .unwrap_or_else(|e| panic!("the PlannedTask fixture needs updating: {e}"));
        std::sync::Arc::new(plan)
    };
    let mut spec = crate::test_support::run_spec(vec![
        task("a", &[], Some("check a")),
        task("b", &["a"], Some("check b")),
        task("c", &[], None),
    ]);
    // `c` a candidate of `a` on another runtime.
    let mut c = spec.tasks[2].as_ref().clone();
    c.candidates = Some(std::sync::Arc::new(
        serde_json::from_value(
            json!({"kind": "candidate", "of": "a", "index": 1, "runtime": "other"}),
        )
        .unwrap_or_else(|e| panic!("the Candidacy fixture needs updating: {e}")),
    ));
    spec.tasks[2] = std::sync::Arc::new(c);
    spec.task_verify_commands = vec!["project check".into()];
    // `a` a judge whose fixer edits.
    let mut a = spec.tasks[0].as_ref().clone();
    a.judging.fix = Some(std::sync::Arc::new(
        serde_json::from_value(json!({
            "fixer": {"role": "fixer", "agent": "fixer-agent", "model": null,
                      "systemPrompt": "fix it", "systemPromptMode": "replace",
                      "tools": ["edit", "bash"], "thinking": null, "writes": true},
            "maxRounds": 1
        }))
        .unwrap_or_else(|e| panic!("the FixPlan fixture needs updating: {e}")),
    ));
    spec.tasks[0] = std::sync::Arc::new(a);
    let mut pend = first_attempt_of(spec, "a");
    pend.extend([
        Pending::task(
            "team_x",
            "a",
            EventBody::TaskFailed {
                end: AttemptEnd {
                    attempt: 1,
                    ..Default::default()
                },
            },
        ),
        Pending::task(
            "team_x",
            "b",
            EventBody::TaskSkipped {
                reason: "a failed".into(),
            },
        ),
        Pending::run(
            "team_x",
            EventBody::RunFailed {
                reason: "a failed".into(),
                usage: Default::default(),
            },
        ),
    ]);
    let events: Vec<Event> = stamped(pend)
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
    crew_core::run::replay_run(events.iter()).unwrap()
}

/// The confirmation of an imported run shows every task that can run once the run runs
/// again, and every command: a queued task starts as soon as it does (a bundle's failed
/// run may hold one), a retry brings back the tasks skipped because of the named ones, and
/// the project's per-task checks (the run's `taskVerifyCommands`, from the bundle) run
/// after every editing task without checks of its own.
#[test]
fn the_preview_shows_every_task_and_command_that_can_run() {
    let run = three_task_failed_run();
    let only = ["a".to_string()];
    for (what, p) in [
        ("resume", imported_preview(&run, None)),
        ("retry a", imported_preview(&run, Some(&only))),
    ] {
        let ids: Vec<&str> = p["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["id"].as_str())
            .collect();
        assert_eq!(ids, ["a", "b", "c"], "{what}: {p}");
        let commands: Vec<&str> = p["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for c in ["a verify: check a", "b verify: check b", "project check"] {
            assert!(
                commands.iter().any(|l| l.contains(c)),
                "{what}: {c} is not shown: {p}"
            );
        }
        assert_eq!(p["taskVerifyCommands"], json!(["project check"]), "{what}");
        assert_eq!(p["tasks"][2]["runtime"], "other", "{what}: {p}");
        assert_eq!(p["addedRoles"][0]["agent"], "fixer-agent", "{what}: {p}");
        assert_eq!(
            p["addedRoles"][0]["tools"],
            json!(["edit", "bash"]),
            "{what}"
        );
    }
}

/// A session file for an attempt the task has not made is the conversation pi would
/// continue on that attempt: refused; one of an attempt made is kept. An attempt's object
/// directory, whose objects a restart takes into the repository, is refused too.
#[test]
fn a_session_of_an_attempt_to_come_is_refused() {
    for (name, ok) in [
        ("sessions/01_a/attempt-1.jsonl", true),
        ("sessions/01_a/attempt-2.jsonl", false),
        ("sessions/02_b/attempt-1.jsonl", false),
        ("objects/01_a.attempt-2/objects/info/alternates", false),
    ] {
        let b = edited(
            |o| {
                let content = "{\"type\":\"session\"}\n";
                o["artifacts"].as_array_mut().unwrap().push(json!({
                    "name": name, "kind": "file", "taskId": "01_a",
                    "bytes": content.len(), "sha256": sha256_hex(content.as_bytes()),
                    "content": content,
                }));
            },
            true,
        );
        match validate(&b) {
            Ok(_) => assert!(ok, "{name} was accepted"),
            Err(e) => {
                assert!(!ok, "{name}: {e:?}");
                let data = serde_json::to_string(&e.data).unwrap();
                assert!(
                    data.contains("has not made") || data.contains("object directory"),
                    "{name}: {data}"
                );
            }
        }
    }
}

/// A task whose last attempt is numbered `u32::MAX`: its next one (`attempts + 1`) would
/// overflow, or wrap to an attempt 0 whose session file the bundle could hold. Refused,
/// even with the run's view made to agree.
#[test]
fn an_attempt_number_at_the_end_of_the_range_is_refused() {
    let mut pend = sample_pending();
    for p in &mut pend {
        match &mut p.body {
            EventBody::TaskStarted { attempt, .. } => *attempt = u32::MAX,
            EventBody::TaskCompleted { end, .. } => end.attempt = u32::MAX,
            _ => {}
        }
    }
    let e = validate(&bundle_of(stamped(pend))).expect_err("accepted");
    let data = serde_json::to_string(&e.data).unwrap();
    assert!(data.contains("4294967295 attempts"), "{data}");
}

/// A selector's choice names the candidate whose `results/<candidate>.txt` its dependents'
/// prompts quote: a forged `../../../../home/you/notes` would have crewd read a file
/// outside the run into a prompt. A choice must name a task of the run.
#[test]
fn a_choice_of_no_task_is_refused() {
    for (candidate, ok) in [("01_a", true), ("../../../../../home/you/notes", false)] {
        let mut pend = sample_pending();
        let done = pend.len() - 1;
        pend.insert(
            done,
            Pending::task(
                "team_x",
                "01_a",
                EventBody::TaskCandidateChosen {
                    end: None,
                    commit: None,
                    choice: crew_core::run::candidates::Choice {
                        index: 1,
                        candidate: candidate.into(),
                        by: "first".into(),
                        reason: "r".into(),
                    },
                    verdict: None,
                },
            ),
        );
        match validate(&bundle_of(stamped(pend))) {
            Ok(_) => assert!(ok, "{candidate} was accepted"),
            Err(e) => {
                assert!(!ok, "{candidate}: {e:?}");
                let data = serde_json::to_string(&e.data).unwrap();
                assert!(data.contains("no task of the run"), "{data}");
            }
        }
    }
}

/// Issue 14.4: the plan inside `run.created` names a task outside the state directory.
#[test]
fn plan_task_ids_are_checked() {
    for evil in ["../../../../x/PWNED", "a/b", ""] {
        let b = edited(
            |o| {
                let ev = &mut events_mut(o)[0];
                ev["data"]["tasks"][0]["id"] = json!(evil);
            },
            true,
        );
        let e = validate(&b).unwrap_err();
        assert_eq!(e.code, crew_api::codes::VALIDATION_FAILED, "{evil}");
        let data = serde_json::to_string(&e.data).unwrap();
        assert!(
            data.contains("events[0]") && data.contains("not a valid id"),
            "{data}"
        );
    }
    if let Ok(dir) = std::env::var("CREW_WRITE_FUZZ_SEED") {
        std::fs::write(
            Path::new(&dir).join("sample.json"),
            serde_json::to_string_pretty(&sample_bundle()).unwrap(),
        )
        .unwrap();
    }
}

#[test]
fn bad_bundles_are_refused_naming_the_field() {
    type Edit = Box<dyn Fn(&mut Map<String, Value>)>;
    let table: Vec<(&str, Edit, bool, &str)> = vec![
        (
            "foreign version",
            Box::new(|o| {
                o.insert("version".into(), json!(2));
            }),
            true,
            "version",
        ),
        (
            "not a bundle",
            Box::new(|o| {
                o.insert("format".into(), json!("zip"));
            }),
            true,
            "format",
        ),
        (
            "no format",
            Box::new(|o| {
                o.remove("format");
            }),
            true,
            "format",
        ),
        (
            "no events",
            Box::new(|o| {
                o.remove("events");
            }),
            false,
            "events",
        ),
        (
            "no artifacts",
            Box::new(|o| {
                o.remove("artifacts");
            }),
            false,
            "artifacts",
        ),
        (
            "events not a list",
            Box::new(|o| {
                o.insert("events".into(), json!({}));
            }),
            false,
            "events",
        ),
        (
            "no checksum",
            Box::new(|o| {
                o.remove("checksum");
            }),
            false,
            "checksum",
        ),
        (
            "tampered goal",
            Box::new(|o| {
                events_mut(o)[0]["data"]["goal"] = json!("rm -rf /");
            }),
            false,
            "checksum",
        ),
        (
            "truncated events",
            Box::new(|o| {
                events_mut(o).pop();
            }),
            false,
            "checksum",
        ),
        (
            "truncated, resealed",
            Box::new(|o| {
                events_mut(o).pop();
            }),
            true,
            "events",
        ),
        (
            "event missing, resealed",
            Box::new(|o| {
                events_mut(o).remove(2);
            }),
            true,
            "events[2]",
        ),
        (
            "unknown event type",
            Box::new(|o| {
                events_mut(o)[1]["type"] = json!("run.teleported");
            }),
            true,
            "events[1]",
        ),
        (
            "foreign run's event",
            Box::new(|o| {
                events_mut(o)[1]["runId"] = json!("team_y");
            }),
            true,
            "events[1]",
        ),
        (
            "not starting with run.created",
            Box::new(|o| {
                events_mut(o).remove(0);
            }),
            true,
            "events[0]",
        ),
        (
            "damaged artifact",
            Box::new(|o| {
                o["artifacts"][0]["content"] = json!("hellO");
            }),
            true,
            "artifacts[0].content",
        ),
        (
            "path traversal",
            Box::new(|o| {
                o["artifacts"][0]["name"] = json!("../../etc/passwd");
            }),
            true,
            "artifacts[0].name",
        ),
        (
            "artifact without content",
            Box::new(|o| {
                o["artifacts"][0].as_object_mut().unwrap().remove("content");
            }),
            true,
            "artifacts[0]",
        ),
        (
            "run disagrees with events",
            Box::new(|o| {
                o["run"]["run"]["status"] = json!("failed");
            }),
            true,
            "run",
        ),
        (
            "a relative cwd",
            Box::new(|o| {
                events_mut(o)[0]["data"]["cwd"] = json!(".");
            }),
            true,
            "events[0]",
        ),
        (
            "an option as a model",
            Box::new(|o| {
                events_mut(o)[0]["data"]["tasks"][0]["model"] = json!("--yolo");
            }),
            true,
            "events[0]",
        ),
        (
            "an option as a fallback model",
            Box::new(|o| {
                events_mut(o)[0]["data"]["tasks"][0]["fallbackModels"] = json!(["m", "--version"]);
            }),
            true,
            "events[0]",
        ),
        (
            "an option as a thinking level",
            Box::new(|o| {
                events_mut(o)[0]["data"]["tasks"][0]["thinking"] = json!("--no-session");
            }),
            true,
            "events[0]",
        ),
        (
            "bad run id",
            Box::new(|o| {
                for e in events_mut(o) {
                    e["runId"] = json!("../x");
                }
            }),
            true,
            "events[0]",
        ),
    ];
    for (what, edit, reseal, field) in table {
        let e = validate(&edited(edit, reseal)).expect_err(what);
        assert_eq!(e.code, 1003, "{what}: {}", e.message);
        let diags = e.data.as_ref().unwrap()["diagnostics"]
            .as_array()
            .unwrap()
            .clone();
        assert!(
            diags.iter().any(|d| d["field"] == field),
            "{what}: expected a diagnostic on {field}, got {diags:?}"
        );
    }
    let e = validate(&json!("a string")).unwrap_err();
    assert_eq!(e.code, -32602);
    assert_eq!(e.data.unwrap()["field"], "bundle");
}
