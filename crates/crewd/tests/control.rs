//! Run control through the real daemon and the fake agent: resume, retry, plan approval,
//! respond, steer (live and queued), budgets (live, after resume, after a restart), summary,
//! forget, prune, export/import, the `command` adapter, and every refusal changing nothing.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Short timeouts so tests do not wait on defaults meant for real agents.
const FAST: &str = "kill_grace_ms = 500\nfinal_drain_ms = 1500\nfinal_drain_quiet_ms = 200\n";

fn daemon(extra: &str) -> Daemon {
    Daemon::start_with(Opts {
        config: format!("{FAST}{extra}"),
        ..Default::default()
    })
}

fn code(e: &Value) -> i64 {
    e["code"].as_i64().unwrap_or(0)
}

/// Poll the run's stored events until one satisfies `pred` (a condition, not a guess).
fn wait_event(d: &Daemon, run: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(e) = d.events(Some(run)).into_iter().find(|e| pred(e)) {
            return e;
        }
        assert!(
            Instant::now() < deadline,
            "no {what} in run {run}: {:#?}",
            d.events(Some(run))
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn is(e: &Value, kind: &str, task: &str) -> bool {
    e["type"] == kind && (task.is_empty() || e["taskId"] == task)
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect()
}

fn pos(events: &[Value], kind: &str, task: &str) -> Option<usize> {
    events.iter().position(|e| is(e, kind, task))
}

fn artifact(d: &Daemon, run: &str, name: &str) -> String {
    d.ok("team.artifact", json!({"runId": run, "name": name}))["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn list(d: &Daemon) -> Value {
    d.ok("team.list", json!({}))
}

/// A two-step team `pair`: `a` (task text `a_text`), then `b` after it.
fn pair_team(d: &Daemon, a_text: &str) {
    d.project_file(
        "teams/pair.team.md",
        "---\nname: pair\ndefaultWorkflow: pair\n---\n\n- explorer: agent=explorer\n",
    );
    d.project_file(
        "workflows/pair.workflow.md",
        &format!(
            "---\nname: pair\n---\n\n## a\nrole: explorer\n\n{a_text}\n\n## b\nrole: explorer\ndependsOn: a\n\nstep b\n"
        ),
    );
}

/// A refused call: its code, and the run and list exactly as before.
fn refused(d: &Daemon, run: &str, method: &str, params: Value, want: i64) -> Value {
    let (status, runs) = (d.status(run), list(d));
    let e = d.err(method, params.clone());
    assert_eq!(code(&e), want, "{method} {params}: {e}");
    assert_eq!(d.status(run), status, "{method} changed the run");
    assert_eq!(list(d), runs, "{method} changed the list");
    e
}

#[test]
fn export_forget_import_gives_back_the_same_run() {
    let d = daemon("");
    let run = d.run("[fake:tokens=1200] export me", json!({}));
    assert_eq!(d.wait(&run), "completed");
    let before = d.status(&run);
    let arts = d.ok("team.artifacts", json!({"runId": run}))["artifacts"].clone();
    assert!(arts.as_array().unwrap().len() >= 8, "{arts}");
    let contents: Vec<(String, String)> = arts
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let n = a["name"].as_str().unwrap().to_string();
            let c = artifact(&d, &run, &n);
            (n, c)
        })
        .collect();
    let events = d.events(Some(&run));
    // Every artifact is described by what is on disk (the transcript's digest is taken while it
    // is written, the others' from their bytes).
    for (a, (name, content)) in arts.as_array().unwrap().iter().zip(&contents) {
        use sha2::Digest;
        assert_eq!(a["bytes"], content.len() as u64, "bytes of {name}");
        assert_eq!(
            a["sha256"].as_str().unwrap(),
            hex::encode(sha2::Sha256::digest(content.as_bytes())),
            "sha256 of {name}"
        );
    }
    assert!(contents.iter().any(|(n, _)| n.starts_with("transcripts/")));

    let bundle = d.ok("team.export", json!({"runId": run}))["bundle"].clone();
    assert_eq!(bundle["format"], "crew-run-bundle");
    assert_eq!(bundle["version"], 1);
    assert_eq!(bundle["checksum"].as_str().unwrap().len(), 64);
    assert!(bundle["exportedAt"].is_string());
    assert_eq!(bundle["run"], before);
    assert_eq!(bundle["events"].as_array().unwrap().len(), events.len());
    for a in arts.as_array().unwrap() {
        let b = bundle["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == a["name"])
            .unwrap_or_else(|| panic!("{} not in the bundle", a["name"]));
        for k in ["kind", "taskId", "bytes", "sha256"] {
            // A system prompt file serves every task with that prompt: `team.artifacts` names
            // the first, the bundle none.
            if k == "taskId" && a["kind"] == "system-prompt" {
                continue;
            }
            assert_eq!(b[k], a[k], "{k} of {}", a["name"]);
        }
    }

    d.ok("team.forget", json!({"runId": run}));
    assert_eq!(code(&d.err("team.status", json!({"runId": run}))), 1001);
    assert!(!d.state_dir.join("runs").join(&run).exists());
    // Only the record that the run was forgotten remains.
    assert!(d
        .events(None)
        .iter()
        .all(|e| e["runId"] != run.as_str() || e["type"] == "run.forgotten"));

    // Refused bundles: a clear 1003 naming the field, and nothing imported.
    let mut foreign = bundle.clone();
    foreign["version"] = json!(2);
    let mut tampered = bundle.clone();
    tampered["artifacts"][0]["content"] = json!("something else");
    let mut truncated = bundle.clone();
    truncated["events"].as_array_mut().unwrap().truncate(5);
    let mut incomplete = bundle.clone();
    incomplete.as_object_mut().unwrap().remove("artifacts");
    let runs = list(&d);
    for (what, b, field) in [
        ("foreign version", foreign, "version"),
        ("tampered", tampered, "checksum"),
        ("truncated", truncated, "checksum"),
        ("incomplete", incomplete, "artifacts"),
    ] {
        let e = d.err("team.import", json!({"bundle": b}));
        assert_eq!(code(&e), 1003, "{what}: {e}");
        let diags = e["data"]["diagnostics"].as_array().unwrap();
        assert!(diags.iter().any(|x| x["field"] == field), "{what}: {e}");
        assert_eq!(list(&d), runs, "{what} changed the list");
        assert!(!d.state_dir.join("runs").join(&run).exists(), "{what}");
    }
    let e = d.err("team.import", json!({"bundle": "not a bundle"}));
    assert_eq!(
        (code(&e), e["data"]["field"].clone()),
        (-32602, json!("bundle"))
    );

    let r = d.ok("team.import", json!({"bundle": bundle}));
    assert_eq!(r["runId"], run.as_str());
    assert_eq!(d.status(&run), before);
    assert_eq!(
        d.ok("team.artifacts", json!({"runId": run}))["artifacts"],
        arts
    );
    for (n, c) in &contents {
        assert_eq!(&artifact(&d, &run, n), c, "{n}");
    }
    let again = d.events(Some(&run));
    assert_eq!(again.len(), events.len());
    for (a, b) in events.iter().zip(&again) {
        let mut b = b.clone();
        // The one difference: an imported run is marked as such (its resume needs confirming).
        if b["type"] == "run.created" {
            assert_eq!(b["data"]["imported"], true);
            b["data"].as_object_mut().unwrap().remove("imported");
        }
        for k in [
            "runSeq", "time", "type", "runId", "taskId", "message", "data",
        ] {
            assert_eq!(a[k], b[k], "{k} of {a}");
        }
    }
    assert!(list(&d)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["id"] == run.as_str()));

    // The same run twice: refused, nothing changed.
    refused(&d, &run, "team.import", json!({"bundle": bundle}), 1002);
    // Survives a restart (it is in the journal, not only in memory).
    let mut d = d;
    d.restart();
    assert_eq!(d.status(&run), before);
}

#[test]
fn export_redacts_secrets_and_shortens_home() {
    let d = daemon("");
    let proj = d.home.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    one_step_team(&d, "solo", "Look around. [fake:tokens=100]", "explorer");
    std::fs::create_dir_all(proj.join(".crew")).unwrap();
    copy_dir(&d.work.join(".crew"), &proj.join(".crew"));
    let secret = "hunter2hunter2hunter2";
    let run = d.ok(
        "team.run",
        json!({"goal": format!("deploy with password={secret}"), "cwd": path_str(&proj),
               "runtime": "fake", "team": "solo"}),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(d.wait(&run), "completed");
    // The agent sees the goal and quotes it in its answer; what it answers is redacted as it
    // enters the daemon (issue 14, item 10), so the result is clean already, and the bundle too.
    let result = artifact(&d, &run, "results/01_only.txt");
    assert!(
        !result.contains(secret) && result.contains("password=***"),
        "{result}"
    );
    let bundle = d.ok("team.export", json!({"runId": run}))["bundle"].clone();
    let text = bundle.to_string();
    assert!(!text.contains(secret), "secret in the bundle");
    let home = path_str(&d.home);
    assert!(!text.contains(home), "home path in the bundle");
    assert_eq!(bundle["run"]["run"]["cwd"], "~/proj");

    d.ok("team.forget", json!({"runId": run}));
    d.ok("team.import", json!({"bundle": bundle}));
    let st = d.status(&run);
    // The cwd is this daemon's home again; the goal stays redacted.
    assert_eq!(st["run"]["cwd"], path_str(&proj));
    assert!(!st["run"]["goal"].as_str().unwrap().contains(secret));
    assert!(!artifact(&d, &run, "results/01_only.txt").contains(secret));
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn plan_approval_blocks_the_first_write_task_and_approve_continues_at_once() {
    let d = daemon("");
    let run = d.run("approve me", json!({"requirePlanApproval": true}));
    assert_eq!(d.wait(&run), "blocked");
    let st = d.status(&run);
    assert_eq!(st["run"]["approval"], "pending");
    for (t, s) in [
        ("01_explore", "completed"),
        ("02_plan", "completed"),
        ("03_execute", "queued"),
        ("04_verify", "queued"),
    ] {
        assert_eq!(Daemon::task(&st, t)["status"], s, "{t}");
    }
    let evs = d.events(Some(&run));
    let asked = pos(&evs, "plan.approval_required", "").unwrap();
    assert_eq!(evs[asked]["data"]["taskId"], "03_execute");
    assert!(pos(&evs, "task.completed", "02_plan").unwrap() < asked);
    assert!(pos(&evs, "task.started", "03_execute").is_none());
    assert_eq!(evs[asked + 1]["type"], "run.blocked");

    // Resume is not the way out of an approval.
    refused(&d, &run, "team.resume", json!({"runId": run}), 1002);

    let r = d.ok(
        "team.approve",
        json!({"runId": run, "reason": "looks good"}),
    );
    assert_eq!(r["status"], "running");
    assert_eq!(d.wait(&run), "completed");
    let evs = d.events(Some(&run));
    assert!(
        pos(&evs, "plan.approved", "").unwrap() < pos(&evs, "task.started", "03_execute").unwrap()
    );
    assert!(pos(&evs, "run.resumed", "").is_none(), "{:?}", types(&evs));

    // Not awaiting approval any more.
    refused(&d, &run, "team.approve", json!({"runId": run}), 1002);
    refused(&d, &run, "team.reject", json!({"runId": run}), 1002);

    let run2 = d.run("reject me", json!({"requirePlanApproval": true}));
    assert_eq!(d.wait(&run2), "blocked");
    let r = d.ok(
        "team.reject",
        json!({"runId": run2, "reason": "wrong plan"}),
    );
    assert_eq!(r["status"], "cancelled");
    let st = d.status(&run2);
    assert_eq!(st["run"]["status"], "cancelled");
    assert_eq!(Daemon::task(&st, "03_execute")["status"], "cancelled");
    let evs = d.events(Some(&run2));
    assert!(pos(&evs, "plan.rejected", "").is_some());
    assert!(pos(&evs, "task.started", "03_execute").is_none());
}

#[test]
fn respond_answers_a_waiting_task() {
    let d = daemon("");
    one_step_team(
        &d,
        "asker",
        "Pick a database. [fake:ask=Which DB?]",
        "explorer",
    );
    let run = d.run("choose storage", json!({"team": "asker"}));
    assert_eq!(d.wait(&run), "blocked");
    let st = d.status(&run);
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["status"], "waiting");
    assert_eq!(t["question"], "Which DB?");
    assert!(st["run"]["reason"].as_str().unwrap().contains("Which DB?"));

    // Steering a waiting task is refused too.
    refused(
        &d,
        &run,
        "team.steer",
        json!({"runId": run, "taskId": "01_only", "message": "x"}),
        1002,
    );
    let r = d.ok(
        "team.respond",
        json!({"runId": run, "taskId": "01_only", "message": "Postgres"}),
    );
    assert!(r["status"] == "queued" || r["status"] == "running", "{r}");
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    assert_eq!(Daemon::task(&st, "01_only")["attempts"], 2);
    let result = artifact(&d, &run, "results/01_only.txt");
    assert!(result.contains("Answer: Postgres"), "{result}");

    refused(
        &d,
        &run,
        "team.respond",
        json!({"runId": run, "taskId": "01_only", "message": "again"}),
        1002,
    );
    refused(
        &d,
        &run,
        "team.respond",
        json!({"runId": run, "taskId": "99_nope", "message": "x"}),
        1001,
    );
}

#[test]
fn steer_is_live_in_rpc_mode_and_queued_otherwise() {
    let d = daemon("");
    one_step_team(
        &d,
        "long",
        "Work slowly. [fake:sleep=3s] [fake:turns=3]",
        "explorer",
    );
    let run = d.run("steer me", json!({"team": "long", "runtime": "fake-rpc"}));
    wait_event(&d, &run, "worker.spawned", |e| {
        is(e, "worker.spawned", "01_only")
    });
    let r = d.ok(
        "team.steer",
        json!({"runId": run, "taskId": "01_only", "message": "use the small index"}),
    );
    assert_eq!(r["delivered"], "live");
    assert_eq!(r.get("note"), None, "{r}");
    assert_eq!(d.wait(&run), "completed");
    let result = artifact(&d, &run, "results/01_only.txt");
    assert!(result.contains("Steered: use the small index"), "{result}");
    let evs = d.events(Some(&run));
    let steered = &evs[pos(&evs, "task.steered", "01_only").unwrap()];
    assert_eq!(steered["data"]["delivered"], "live");
    // After `agent_end` crew closes the rpc worker's stdin and it exits by itself, as pi does:
    // no final drain, no SIGTERM.
    let pid = evs[pos(&evs, "worker.spawned", "01_only").unwrap()]["data"]["pid"].clone();
    let log = d.log_text();
    let ended = log
        .lines()
        .find(|l| l.contains("worker ended") && l.contains(&format!("pid={pid}")))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        ended.contains("code=0") && ended.contains("drained=false"),
        "{ended}"
    );

    // A finished task cannot be steered.
    refused(
        &d,
        &run,
        "team.steer",
        json!({"runId": run, "taskId": "01_only", "message": "too late"}),
        1002,
    );

    // Plain json mode: queued for the next attempt (this one crashes and is retried).
    one_step_team(
        &d,
        "crashy",
        "Work, crash once. [fake:sleep=1500ms] [fake:crash-attempts=1]",
        "explorer",
    );
    let run = d.run("steer later", json!({"team": "crashy"}));
    wait_event(&d, &run, "worker.spawned", |e| {
        is(e, "worker.spawned", "01_only")
    });
    let r = d.ok(
        "team.steer",
        json!({"runId": run, "taskId": "01_only", "message": "mind the cache"}),
    );
    assert_eq!(r["delivered"], "queued");
    // The answer says the running worker will not hear it.
    let note = r["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("runtime `fake` cannot take a message while its worker runs"),
        "{r}"
    );
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    assert_eq!(Daemon::task(&st, "01_only")["attempts"], 2);
    let prompt = artifact(&d, &run, "prompts/01_only.md");
    assert!(prompt.contains("mind the cache"), "{prompt}");
}

/// Issue 16 item 7: a runtime out of its live mode cannot take a live message, and the answer
/// to `team.steer` says so for each adapter (for gemini and opencode, that `rpc = true` makes
/// them live). The workers are `sh` scripts that sleep (the adapter's flags land in `$0`, `$1`,
/// ... and are ignored).
#[test]
fn steer_says_when_a_runtime_cannot_take_it_live() {
    let adapters = ["claude", "codex", "gemini", "opencode", "command"];
    let mut config = String::from("max_attempts = 1\n");
    for a in adapters {
        config.push_str(&format!(
            "[runtimes.{a}-x]\nadapter = \"{a}\"\ncommand = [\"/bin/sh\", \"-c\", \"sleep 30\"]\n"
        ));
        // Claude Code and Codex out of their live mode, as a user may run them.
        if a == "claude" || a == "codex" {
            config.push_str("rpc = false\n");
        }
    }
    // A pi runtime that asks for json mode cannot be steered live either.
    config.push_str(&format!(
        "[runtimes.pi-json]\nadapter = \"pi\"\ncommand = [{:?}]\nrpc = false\n",
        crewd_bin()
            .with_file_name("crew-fake-agent")
            .display()
            .to_string()
    ));
    let d = daemon(&config);
    for runtime in adapters
        .iter()
        .map(|a| format!("{a}-x"))
        .chain(["pi-json".to_string()])
    {
        let task = if runtime == "pi-json" {
            "Take a nap. [fake:sleep=30s]"
        } else {
            "Take a nap."
        };
        one_step_team(&d, "nap", task, "explorer");
        let run = d.run("nap", json!({"team": "nap", "runtime": runtime}));
        let spawned = wait_event(&d, &run, "worker.spawned", |e| {
            is(e, "worker.spawned", "01_only")
        });
        assert_eq!(spawned["data"]["live"], false, "{runtime}: {spawned}");
        let r = d.ok(
            "team.steer",
            json!({"runId": run, "taskId": "01_only", "message": "wake up"}),
        );
        assert_eq!(r["delivered"], "queued", "{runtime}: {r}");
        let note = r["note"].as_str().unwrap_or_default();
        assert!(
            note.contains(&format!(
                "runtime `{runtime}` cannot take a message while its worker runs"
            )),
            "{runtime}: {r}"
        );
        // Gemini CLI and opencode have a live mode a runtime turns on.
        if runtime == "gemini-x" || runtime == "opencode-x" {
            assert!(note.contains("`rpc = true`"), "{runtime}: {r}");
        }
        d.ok("team.cancel", json!({"runId": run}));
        d.wait(&run);
    }
}

/// 1000 tokens a turn, one turn every 2 s: a worker stopped at its budget ends seconds before
/// it would have by itself (16 s), a margin no loaded machine eats up.
fn spender(d: &Daemon) {
    one_step_team(
        d,
        "spender",
        "Spend. [fake:sleep=16s] [fake:turns=8] [fake:tokens=8000]",
        "explorer",
    );
}

fn ms_between(a: &Value, b: &Value) -> i64 {
    let t = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    t(b) - t(a)
}

#[test]
fn budget_stops_a_run_mid_task_and_holds_after_resume() {
    let mut d = daemon("");
    spender(&d);
    let runs = list(&d);
    for bad in [json!({"tokens": 0}), json!({"tokens": -5})] {
        let e = d.err(
            "team.run",
            json!({"goal": "g", "cwd": path_str(&d.work), "runtime": "fake", "team": "spender",
                   "budget": bad}),
        );
        assert_eq!(code(&e), -32602, "{e}");
        assert_eq!(e["data"]["field"], "budget.tokens", "{e}");
    }
    assert_eq!(list(&d), runs);

    let run = d.run(
        "spend",
        json!({"team": "spender", "budget": {"tokens": 3000}}),
    );
    assert_eq!(d.wait(&run), "failed");
    let st = d.status(&run);
    assert_eq!(st["run"]["reason"], "budget_exceeded");
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["status"], "cancelled");
    let took = ms_between(&t["startedAt"], &t["finishedAt"]);
    assert!(took < 12_000, "the worker ran {took} ms of its 16 s");
    let evs = d.events(Some(&run));
    let exceeded = pos(&evs, "run.budget_exceeded", "").expect("budget exceeded");
    assert!(st["run"]["budget"]["used"].as_u64().unwrap() >= 3000);

    // The budget is part of the run: a resume without a larger one is refused (the run would
    // stop again at once), saying how much it takes; so is one its usage already spends.
    let before = evs.len();
    let used = st["run"]["budget"]["used"].as_u64().unwrap();
    let e = d.err("team.resume", json!({"runId": run}));
    assert_eq!(code(&e), 1002, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("--budget-tokens") && message.contains(&format!("at least {}", used + 1)),
        "{message}"
    );
    let e = d.err("team.resume", json!({"runId": run, "budgetTokens": used}));
    assert_eq!(code(&e), 1002, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("spent already"),
        "{e}"
    );
    let e = d.err("team.resume", json!({"runId": run, "budgetTokens": 0}));
    assert_eq!(code(&e), -32602, "{e}");
    assert_eq!(
        d.events(Some(&run)).len(),
        before,
        "a refused resume journals nothing"
    );
    assert_eq!(d.status(&run)["run"]["status"], "failed");

    // With a larger one the run goes on: its task runs again under the new budget, which a
    // restart keeps (it is in the journaled `run.resumed`).
    d.ok(
        "team.resume",
        json!({"runId": run, "budgetTokens": 1_000_000}),
    );
    wait_event(&d, &run, "the task runs again", |e| {
        is(e, "task.started", "01_only") && e["data"]["attempt"] == 2
    });
    let after = &d.events(Some(&run))[before..];
    assert_eq!(after[0]["type"], "run.resumed", "{:?}", types(after));
    assert_eq!(after[0]["data"]["budgetTokens"], 1_000_000, "{}", after[0]);
    assert_eq!(d.status(&run)["run"]["budget"]["tokens"], 1_000_000);
    d.restart();
    assert_eq!(d.status(&run)["run"]["budget"]["tokens"], 1_000_000);
    d.ok("team.cancel", json!({"runId": run}));
    assert_eq!(d.wait(&run), "cancelled");

    // Checked last so everything above runs either way. Usage goes 1000, 2000, 3000 here: it
    // passes the warning (2400) and the abort (3000) in one step, and the warning must still be
    // sent, before the abort.
    let spent: Vec<String> = evs
        .iter()
        .map(|e| match e["type"].as_str() {
            Some("task.progress") => format!("progress {}", e["data"]["usage"]),
            other => other.unwrap_or("").to_string(),
        })
        .collect();
    let warned = pos(&evs, "run.budget_warning", "")
        .unwrap_or_else(|| panic!("no budget warning: {spent:#?}"));
    assert!(warned < exceeded, "{:?}", types(&evs));
}

#[test]
fn budget_holds_across_a_daemon_restart() {
    let mut d = daemon("");
    spender(&d);
    let run = d.run(
        "spend",
        json!({"team": "spender", "budget": {"tokens": 3000}}),
    );
    wait_event(&d, &run, "spent tokens", |e| {
        is(e, "task.progress", "01_only") && e["data"]["usage"]["input"].as_u64().unwrap_or(0) > 0
    });
    d.restart();
    assert_eq!(d.wait(&run), "failed");
    let st = d.status(&run);
    assert_eq!(st["run"]["reason"], "budget_exceeded");
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["attempts"], 2, "{t}");
    let evs = d.events(Some(&run));
    let requeued = evs
        .iter()
        .position(|e| {
            is(e, "task.retrying", "01_only") && e["data"]["reason"] == "daemon_restarted"
        })
        .expect("the orphan is re-queued");
    assert!(pos(&evs, "run.budget_exceeded", "").unwrap() > requeued);
    // The second attempt was stopped early too: well under another 16 s of work.
    let took = ms_between(&t["startedAt"], &t["finishedAt"]);
    assert!(took < 12_000, "the second attempt ran {took} ms");
}

#[test]
fn resume_retry_summary_forget_and_prune() {
    let d = daemon("max_attempts = 1\n");
    pair_team(&d, "Step a. [fake:fail-attempts=1] [fake:tokens=500]");
    let run = d.run("pair up", json!({"team": "pair"}));
    assert_eq!(d.wait(&run), "failed");
    let st = d.status(&run);
    assert_eq!(Daemon::task(&st, "01_a")["status"], "failed");
    assert_eq!(Daemon::task(&st, "02_b")["status"], "skipped");

    // The summary of a failed run: statuses, durations, usage and cost, failures, excerpts.
    let md = d.ok("team.summary", json!({"runId": run}))["markdown"]
        .as_str()
        .unwrap()
        .to_string();
    let err = Daemon::task(&st, "01_a")["error"]
        .as_str()
        .unwrap()
        .to_string();
    for want in [
        run.as_str(),
        "failed",
        "| 01_a | explorer | ✗ failed | 1 |",
        "| 02_b | explorer | ⊘ skipped | 0 |",
        "## Failures",
        err.as_str(),
        "Usage",
        "$",
    ] {
        assert!(md.contains(want), "summary lacks {want:?}:\n{md}");
    }

    refused(
        &d,
        &run,
        "team.retry",
        json!({"runId": run, "taskIds": ["09_nope"]}),
        1001,
    );

    let r = d.ok("team.resume", json!({"runId": run}));
    assert_eq!(r["requeuedTaskIds"], json!(["01_a", "02_b"]));
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    assert_eq!(Daemon::task(&st, "01_a")["attempts"], 2);
    assert_eq!(Daemon::task(&st, "02_b")["attempts"], 1);
    let md = d.ok("team.summary", json!({"runId": run}))["markdown"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(md.contains("## Results") && md.contains("### 02_b"), "{md}");
    assert!(!md.contains("## Failures"), "{md}");

    // Nothing left to resume.
    refused(&d, &run, "team.resume", json!({"runId": run}), 1002);

    let r = d.ok("team.retry", json!({"runId": run, "taskIds": ["01_a"]}));
    assert_eq!(r["requeuedTaskIds"], json!(["01_a"]));
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    assert_eq!(Daemon::task(&st, "01_a")["attempts"], 3);
    let evs = d.events(Some(&run));
    let last_start = evs
        .iter()
        .rev()
        .find(|e| is(e, "task.started", "01_a"))
        .unwrap();
    assert_eq!(last_start["data"]["attempt"], 3);

    // needs_attention comes back with resume.
    one_step_team(&d, "mute", "Say nothing. [fake:no-final-text]", "explorer");
    let quiet = d.run("be quiet", json!({"team": "mute"}));
    assert_eq!(d.wait(&quiet), "blocked");
    assert_eq!(
        Daemon::task(&d.status(&quiet), "01_only")["status"],
        "needs_attention"
    );
    let r = d.ok("team.resume", json!({"runId": quiet}));
    assert_eq!(r["requeuedTaskIds"], json!(["01_only"]));
    assert_eq!(d.wait(&quiet), "blocked");
    assert_eq!(Daemon::task(&d.status(&quiet), "01_only")["attempts"], 2);

    // A running run: resume, forget and prune are refused and change nothing.
    one_step_team(&d, "hang", "Hang. [fake:silent]", "explorer");
    let busy = d.run("hang around", json!({"team": "hang"}));
    wait_event(&d, &busy, "worker.spawned", |e| {
        is(e, "worker.spawned", "01_only")
    });
    refused(&d, &busy, "team.resume", json!({"runId": busy}), 1002);
    refused(&d, &busy, "team.forget", json!({"runId": busy}), 1002);
    // Prune passes over active runs (it removes finished ones only).
    let (st, runs) = (d.status(&busy), list(&d));
    assert_eq!(d.ok("team.prune", json!({"keep": 5}))["removed"], json!([]));
    assert_eq!((d.status(&busy), list(&d)), (st, runs));
    refused(&d, &busy, "team.export", json!({"runId": busy}), 1002);
    refused(
        &d,
        &busy,
        "team.export",
        json!({"runId": "team_nope"}),
        1001,
    );
    refused(
        &d,
        &busy,
        "team.steer",
        json!({"runId": busy, "taskId": "01_only", "message": "   "}),
        -32602,
    );

    // Cancelled tasks come back with resume too.
    d.ok("team.cancel", json!({"runId": busy}));
    assert_eq!(d.wait(&busy), "cancelled");
    let r = d.ok("team.resume", json!({"runId": busy}));
    assert_eq!(r["requeuedTaskIds"], json!(["01_only"]));
    wait_event(&d, &busy, "second attempt", |e| {
        is(e, "worker.spawned", "01_only") && e["data"]["attempt"] == 2
    });
    d.ok("team.cancel", json!({"runId": busy}));
    assert_eq!(d.wait(&busy), "cancelled");
    // The blocked run is active as well.
    refused(&d, &quiet, "team.forget", json!({"runId": quiet}), 1002);
    d.ok("team.cancel", json!({"runId": quiet}));
    assert_eq!(d.wait(&quiet), "cancelled");

    // Forget: gone from list and status, its artifacts and events with it.
    d.ok("team.forget", json!({"runId": busy}));
    assert_eq!(code(&d.err("team.status", json!({"runId": busy}))), 1001);
    assert_eq!(code(&d.err("team.forget", json!({"runId": busy}))), 1001);
    assert!(!d.state_dir.join("runs").join(&busy).exists());
    assert!(d
        .events(None)
        .iter()
        .all(|e| e["runId"] != busy.as_str() || e["type"] == "run.forgotten"));
    let ids = |d: &Daemon| -> Vec<String> {
        list(d)["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    // Run ids order by the second they were created in, then at random (reported to the lead), so
    // "newest" is the list's own order here.
    let order = ids(&d);
    let mut sorted = order.clone();
    sorted.sort();
    let mut want = vec![quiet.clone(), run.clone()];
    want.sort();
    assert_eq!(sorted, want);

    // Prune keeps the newest N.
    let r = d.ok("team.prune", json!({"keep": 1}));
    assert_eq!(r["removed"], json!([order[1].clone()]));
    assert_eq!(r["kept"], 1);
    assert_eq!(ids(&d), vec![order[0].clone()]);
    assert!(!d.state_dir.join("runs").join(&order[1]).exists());
    assert!(d.state_dir.join("runs").join(&order[0]).exists());
    assert_eq!(code(&d.err("team.prune", json!({"keep": -1}))), -32602);
}

#[test]
fn command_adapter_runs_end_to_end() {
    let d = daemon(
        "[runtimes.echo]\nadapter = \"command\"\ncommand = [\"/bin/sh\", \"-c\", \"echo ran: \\\"$1\\\" | head -c 200\", \"sh\"]\n",
    );
    one_step_team(&d, "solo", "Say hello.", "explorer");
    let run = d.run("greet", json!({"team": "solo", "runtime": "echo"}));
    assert_eq!(d.wait(&run), "completed");
    let st = d.status(&run);
    assert_eq!(st["run"]["runtime"], "echo");
    let result = artifact(&d, &run, "results/01_only.txt");
    assert!(result.starts_with("ran: "), "{result}");
    assert!(result.len() <= 200, "{result}");
    let prompt = artifact(&d, &run, "prompts/01_only.md");
    let head: String = prompt.chars().take(20).collect();
    assert!(result.contains(head.trim()), "{result} vs {prompt}");
}

/// After an rpc worker's `agent_end` its stdin is closed: a steer that comes while it is still
/// on its way out is queued and the answer says why, not reported as delivered live.
#[test]
fn a_steer_after_the_final_answer_is_queued_and_says_so() {
    // The lingering worker is stopped at the end of the drain: long enough to steer it.
    let d = Daemon::start_with(Opts {
        config: "kill_grace_ms = 500\nfinal_drain_ms = 20000\nfinal_drain_quiet_ms = 200\n".into(),
        ..Default::default()
    });
    one_step_team(&d, "linger", "Answer, then stay. [fake:linger]", "explorer");
    let run = d.run(
        "steer too late",
        json!({"team": "linger", "runtime": "fake-rpc"}),
    );
    d.wait_log("rpc worker finished; its stdin is closed so it exits");
    let r = d.ok(
        "team.steer",
        json!({"runId": run, "taskId": "01_only", "message": "one more thing"}),
    );
    assert_eq!(r["delivered"], "queued", "{r}");
    assert!(
        r["note"]
            .as_str()
            .is_some_and(|n| n.contains("already given its final answer")),
        "{r}"
    );
    assert_eq!(d.wait(&run), "completed");
}

/// A live Claude Code worker that never says it took a steer (no replay of it) still ends with
/// its last answer once the final-drain time passed, instead of waiting for the no-output
/// watchdog (which failed the task here before). The worker is an `sh` script speaking Claude
/// Code's stream-json: it echoes the prompt, reads the steer without echoing it, answers and
/// waits for its stdin to end.
#[test]
fn a_steer_the_live_worker_never_takes_does_not_hold_the_task() {
    let script = r#"read -r prompt
echo '{"type":"system","subtype":"init","session_id":"s-1","model":"m"}'
echo '{"type":"user","message":{"role":"user","content":[{"type":"text","text":"p"}]},"isReplay":true}'
read -r steer
echo '{"type":"result","subtype":"success","is_error":false,"result":"DONE: the answer","session_id":"s-1","num_turns":1}'
cat > /dev/null"#;
    let d = daemon(&format!(
        "max_attempts = 1\nno_output_timeout_ms = 30000\n\
         [runtimes.mute]\nadapter = \"claude\"\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\n"
    ));
    one_step_team(&d, "mute", "Answer once steered.", "explorer");
    let run = d.run(
        "steer a mute worker",
        json!({"team": "mute", "runtime": "mute"}),
    );
    let spawned = wait_event(&d, &run, "worker.spawned", |e| {
        is(e, "worker.spawned", "01_only")
    });
    assert_eq!(spawned["data"]["live"], true, "{spawned}");
    let r = d.ok(
        "team.steer",
        json!({"runId": run, "taskId": "01_only", "message": "also this"}),
    );
    assert_eq!(r["delivered"], "live", "{r}");
    assert_eq!(d.wait(&run), "completed", "{}", d.log_text());
    let st = d.status(&run);
    assert_eq!(Daemon::task(&st, "01_only")["attempts"], 1, "{st:#}");
    assert!(artifact(&d, &run, "results/01_only.txt").contains("DONE: the answer"));
    let log = d.log_text();
    assert!(
        log.contains("the live worker did not take the messages written to it"),
        "{log}"
    );
    assert!(log.contains("rpc worker finished; its stdin is closed so it exits"));
}

/// `crewctl daemon stop` says "stopped" once crewd has exited, so `stop && crewd` finds the
/// state directory free (it printed at once while crewd, stopping its workers, still held it).
#[test]
fn daemon_stop_returns_once_crewd_is_gone() {
    let mut d = daemon("");
    one_step_team(&d, "slow", "Take time. [fake:sleep=20s]", "explorer");
    let runs: Vec<String> = (0..3)
        .map(|_| d.run("slow", json!({"team": "slow"})))
        .collect();
    d.wait_log_n("worker started", 3);
    // The workspace's crewd has crewctl beside it (`cargo build --workspace --bins`).
    let crewctl = d.bin.with_file_name("crewctl");
    assert!(crewctl.exists(), "no crewctl beside {}", d.bin.display());
    let out = std::process::Command::new(&crewctl)
        .args(["--socket", d.socket.to_str().unwrap(), "daemon", "stop"])
        .output()
        .expect("crewctl daemon stop");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains("crewd stopped."), "{said}");
    let gone = d.child.as_mut().unwrap().try_wait().unwrap();
    assert!(
        gone.is_some(),
        "crewctl said stopped while crewd runs: {said}"
    );
    // And a new one starts on the same state at once.
    d.spawn(&[]);
    for run in &runs {
        assert_ne!(d.status(run)["run"]["status"], "completed");
    }
}

/// A crewctl turned away because crewd is at its connection limit tries again for a few
/// seconds: a short burst of clients (a script's parallel calls) does not fail its calls.
#[test]
fn crewctl_waits_out_a_full_connection_limit() {
    let d = daemon("max_connections = 2\n");
    // Two clients that stay connected fill the limit.
    let held: Vec<std::os::unix::net::UnixStream> = (0..2)
        .map(|_| std::os::unix::net::UnixStream::connect(&d.socket).unwrap())
        .collect();
    let crewctl = d.bin.with_file_name("crewctl");
    assert!(crewctl.exists(), "no crewctl beside {}", d.bin.display());
    let call = std::process::Command::new(&crewctl)
        .args(["--socket", d.socket.to_str().unwrap(), "ls"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Turned away at least once before one of them leaves.
    d.wait_log("connection limit reached");
    drop(held);
    let out = call.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
