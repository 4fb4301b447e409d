//! Issue 16, item 4: a tool call the agent's CLI refused is visible in the task. The worker is
//! a real Claude Code stream, recorded (a Write refused in the default permission mode) and
//! replayed by `sh` through the `claude` adapter.

mod common;
use common::*;
use serde_json::{json, Value};

fn daemon() -> Daemon {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crew-core/src/stream/fixtures/claude_denied.jsonl")
        .canonicalize()
        .unwrap();
    // The flags the adapter appends land in `$0`, `$1`, ... of the script, which ignores them.
    let config = format!(
        "max_attempts = 1\n[runtimes.replay]\nadapter = \"claude\"\n\
         command = [\"/bin/sh\", \"-c\", \"cat {0}\"]\nsandbox_read = [\"{0}\"]\n",
        fixture.display()
    );
    Daemon::start_with(Opts {
        config,
        env: vec![],
    })
}

fn run_one(d: &Daemon, agent: &str) -> (Value, Vec<Value>) {
    one_step_team(d, agent, "Write out.txt for: {goal}", agent);
    let id = d.run("write a file", json!({"team": agent, "runtime": "replay"}));
    d.wait(&id);
    let st = d.status(&id);
    (st["tasks"][0].clone(), d.events(Some(&id)))
}

fn warnings(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "task.warning")
        .map(|e| {
            (
                e["data"]["tool"].as_str().unwrap().to_string(),
                e["data"]["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_writing_role_whose_every_write_was_refused_needs_attention() {
    let d = daemon();
    let (task, events) = run_one(&d, "executor");
    assert_eq!(task["status"], "needs_attention", "{task:#}");
    let w = warnings(&events);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].0, "Write");
    assert!(w[0].1.contains("haven't granted"), "{w:?}");
    let attention = events
        .iter()
        .find(|e| e["type"] == "task.needs_attention")
        .unwrap();
    assert!(
        attention["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("every file change the agent tried was refused"),
        "{attention:#}"
    );
    // The warning comes before the task's end, while it runs.
    let pos = |t: &str| events.iter().position(|e| e["type"] == t).unwrap();
    assert!(pos("task.warning") < pos("task.needs_attention"));
}

#[test]
fn a_read_only_role_whose_write_was_refused_completes_with_a_warning() {
    let d = daemon();
    let (task, events) = run_one(&d, "explorer");
    assert_eq!(task["status"], "completed", "{task:#}");
    assert_eq!(warnings(&events).len(), 1);
}

#[test]
fn team_plan_and_run_say_what_a_runtime_cannot_enforce() {
    let d = Daemon::start_with(Opts {
        // Any installed program will do: only the plan is looked at, and `team.plan` refuses
        // a runtime whose command is not installed. Unboxed: in crew's box there is no gap to
        // name (tests/sandbox.rs).
        config: "sandbox = \"off\"\n[runtimes.claude]\nadapter = \"claude\"\ncommand = \"true\"\n\
                 [runtimes.codex]\nadapter = \"codex\"\ncommand = \"true\"\n"
            .into(),
        env: vec![],
    });
    let gaps = |runtime: &str| -> Vec<(String, String)> {
        let plan = d.ok(
            "team.plan",
            json!({"goal": "g", "cwd": path_str(&d.work), "team": "default", "runtime": runtime}),
        );
        plan["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                assert_eq!(g["severity"], "warning", "{g}");
                assert_eq!(g["path"], format!("runtimes.{runtime}"), "{g}");
                (
                    g["field"].as_str().unwrap().to_string(),
                    g["message"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // Claude Code withholds the edit tools, but Bash can still write: the verifier.
    let claude = gaps("claude");
    assert_eq!(claude.len(), 1, "{claude:?}");
    assert_eq!(claude[0].0, "agent verifier");
    // In words that match what a verifier is for: it checks, it is not a writer.
    assert!(
        claude[0]
            .1
            .contains("runs commands to check the work but is not meant to edit")
            && claude[0].1.contains("cannot keep Bash from changing files"),
        "{claude:?}"
    );
    // A team whose reviewer and verifier both run Bash hears it once, naming both.
    let review = d.ok(
        "team.plan",
        json!({"goal": "g", "cwd": path_str(&d.work), "team": "review", "runtime": "claude"}),
    );
    let bash: Vec<&Value> = review["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["message"].as_str().unwrap().contains("Bash"))
        .collect();
    assert_eq!(bash.len(), 1, "{bash:?}");
    assert_eq!(
        bash[0]["field"],
        "agents reviewer, security-reviewer, verifier"
    );
    // Codex always has a shell: the roles without bash get only the sandbox.
    let codex = gaps("codex");
    let agents: Vec<&str> = codex.iter().map(|(a, _)| a.as_str()).collect();
    // Their tool lists are the same: one gap naming both.
    assert_eq!(agents, ["agents explorer, planner"], "{codex:?}");
    assert!(codex[0].1.contains("read-only"), "{codex:?}");
    // pi enforces the tool list.
    assert_eq!(gaps("fake"), vec![]);

    // team.run says it too.
    let started = d.ok(
        "team.run",
        json!({"goal": "g", "cwd": path_str(&d.work), "team": "default", "runtime": "codex",
               "requirePlanApproval": true}),
    );
    let notes: Vec<&str> = started["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with(
            "runtime `codex`, agents explorer, planner: codex: its shell cannot be turned off"
        )),
        "{notes:?}"
    );
    // Each gap is said once per run, naming every agent it concerns (issue 32 item 6).
    let mut seen = std::collections::HashSet::new();
    for n in &notes {
        let gap = n.split_once(": ").map_or(*n, |(_, m)| m);
        assert!(seen.insert(gap), "said twice: {gap} in {notes:?}");
    }
}

/// Claude Code, Codex and opencode workers ask through `crewctl mcp --ask`: a crewd with no
/// crewctl next to it or on its PATH says that their workers cannot ask, in team.plan and
/// team.run.
#[test]
fn a_crewd_without_crewctl_says_its_mcp_asking_workers_cannot_ask() {
    let mut d = Daemon::start_with(Opts {
        config: "[runtimes.claude]\nadapter = \"claude\"\ncommand = \"/bin/true\"\n\
                 [runtimes.codex]\nadapter = \"codex\"\ncommand = \"/bin/true\"\n\
                 [runtimes.gemini]\nadapter = \"gemini\"\ncommand = \"/bin/true\"\n\
                 [runtimes.opencode]\nadapter = \"opencode\"\ncommand = \"/bin/true\"\n"
            .into(),
        env: vec![],
    });
    let plan = |d: &Daemon, runtime: &str| {
        d.ok(
            "team.plan",
            json!({"goal": "g", "cwd": path_str(&d.work), "team": "default", "runtime": runtime}),
        )["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["message"].as_str().unwrap().contains("crewctl mcp --ask"))
            .cloned()
            .collect::<Vec<_>>()
    };
    // The workspace's crewd has crewctl beside it.
    assert_eq!(plan(&d, "claude"), Vec::<serde_json::Value>::new());

    // A copy of crewd alone in a directory, with a PATH that has no crewctl.
    let lone = d.dir.path().join("lone");
    let empty = d.dir.path().join("empty-path");
    std::fs::create_dir_all(&lone).unwrap();
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::copy(&d.bin, lone.join("crewd")).unwrap();
    d.kill9();
    d.bin = lone.join("crewd");
    d.spawn(&[("PATH".into(), path_str(&empty).to_string())]);
    for runtime in ["claude", "codex", "gemini", "opencode"] {
        let gaps = plan(&d, runtime);
        assert_eq!(gaps.len(), 1, "{runtime}: {gaps:?}");
        assert_eq!(gaps[0]["path"], format!("runtimes.{runtime}"));
        assert_eq!(gaps[0]["field"], serde_json::Value::Null);
        assert_eq!(gaps[0]["severity"], "warning");
    }
    let started = d.ok(
        "team.run",
        json!({"goal": "g", "cwd": path_str(&d.work), "team": "default", "runtime": "claude",
               "requirePlanApproval": true}),
    );
    assert!(
        started["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("runtime `claude`: crew's ask server")),
        "{started}"
    );
}

/// Issue 29's class, for cost: a cost is what a worker says it is. Two tasks whose Claude Code
/// stream each reports the largest finite `total_cost_usd` (1e308, accepted as finite) made the
/// run's cost infinite, which JSON writes as `null`: `team.list` and `team.status` answered a
/// usage no client reads back (crew-api's `Usage::cost` is an `f64`), for the whole daemon's
/// list. The sum stays a finite number.
#[test]
fn a_workers_huge_cost_keeps_the_runs_usage_readable() {
    let script = "printf '%s\\n' '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\
                  \"num_turns\":1,\"result\":\"done\",\"total_cost_usd\":1e308,\
                  \"usage\":{\"input_tokens\":10,\"output_tokens\":2}}'";
    let d = Daemon::start_with(Opts {
        config: format!(
            "max_attempts = 1\n[runtimes.replay]\nadapter = \"claude\"\n\
             command = [\"/bin/sh\", \"-c\", {script:?}]\n"
        ),
        env: vec![],
    });
    d.project_file(
        "teams/two.team.md",
        "---\nname: two\ndefaultWorkflow: two\n---\n\n- explorer: agent=explorer\n",
    );
    d.project_file(
        "workflows/two.workflow.md",
        "---\nname: two\n---\n\n## a\nrole: explorer\n\nLook: {goal}\n\n\
         ## b\nrole: explorer\n\nLook again: {goal}\n",
    );
    let id = d.run("look", json!({"team": "two", "runtime": "replay"}));
    d.wait(&id);
    let st = d.status(&id);
    assert_eq!(st["run"]["status"], "completed", "{st:#}");
    let usage: crew_api::types::Usage = serde_json::from_value(st["run"]["usage"].clone())
        .unwrap_or_else(|e| panic!("the run's usage reads back: {e}: {st:#}"));
    assert!(usage.cost.is_finite(), "{st:#}");
    let list = d.ok("team.list", json!({}));
    let runs: Vec<crew_api::types::RunSummaryView> = serde_json::from_value(list["runs"].clone())
        .unwrap_or_else(|e| panic!("team.list reads back: {e}: {list:#}"));
    assert_eq!(runs.len(), 1);
}

/// Issue 29's class, for the model's name: the agent's stream names its model, and that name
/// was kept whole in the events that end an attempt (`task.completed`'s `model`) and in the
/// task's status. A stream naming a 64 KiB model keeps at most a bounded name.
#[test]
fn a_streams_huge_model_name_is_kept_bounded() {
    let model = "m".repeat(64 << 10);
    let assistant = format!(
        "{{\"type\":\"assistant\",\"message\":{{\"model\":\"{model}\",\"content\":[{{\"type\":\"text\",\"text\":\"done\"}}],\
         \"usage\":{{\"input_tokens\":1,\"output_tokens\":1}}}}}}"
    );
    let result = "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"num_turns\":1,\
                  \"result\":\"done\",\"total_cost_usd\":0.001,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}";
    let lines = stream_file(&[&assistant, result]);
    let d = Daemon::start_with(Opts {
        config: format!(
            "max_attempts = 1\n[runtimes.replay]\nadapter = \"claude\"\n\
             command = [\"/bin/sh\", \"-c\", {:?}]\nsandbox_read = [{:?}]\n",
            format!("cat {}", lines.display()),
            lines.display().to_string()
        ),
        env: vec![],
    });
    one_step_team(&d, "explorer", "Look: {goal}", "explorer");
    let id = d.run("look", json!({"team": "explorer", "runtime": "replay"}));
    d.wait(&id);
    let st = d.status(&id);
    assert_eq!(
        st["run"]["status"],
        "completed",
        "{}",
        &st.to_string()[..2000]
    );
    for e in d.events(Some(&id)) {
        if let Some(m) = e["data"]["model"].as_str() {
            assert!(
                m.len() <= 1024,
                "{} keeps a {}-byte model",
                e["type"],
                m.len()
            );
        }
    }
    let kept = st["tasks"][0]["model"].as_str().unwrap_or_default();
    assert!(
        kept.len() <= 1024,
        "the task keeps a {}-byte model",
        kept.len()
    );
}

/// `lines` in a file of their own (the runtime's `sandbox_read` lets a boxed replay read it).
fn stream_file(lines: &[&str]) -> std::path::PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    let p = dir.join("stream.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}
