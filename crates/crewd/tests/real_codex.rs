//! Issue 16: the builtin `default` team on the real Codex CLI (pinned in
//! `tests/agents/package.json`), its model a custom `model_provider` in a temporary
//! `CODEX_HOME` that points at a stub OpenAI Responses server this test runs on 127.0.0.1.
//!
//! Codex is installed by `tests/agents/setup.sh` into `tests/agents/node_modules` (or
//! `$CREW_AGENTS_DIR`). Without that install the tests pass after printing why they did
//! nothing, so `cargo test` works offline.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_cli.rs"]
mod real_cli;

use common::*;
use model_stub::{Reply, Stub, Wire};
use real_cli::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// A `CODEX_HOME` whose only provider is the stub.
fn codex_home(stub: &Stub) -> tempfile::TempDir {
    let home = tempfile::Builder::new()
        .prefix("codex-home")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    std::fs::write(home.path().join("config.toml"), codex_provider_toml(stub)).unwrap();
    home
}

fn start_daemon(home: &tempfile::TempDir, extra_config: &str) -> Option<Daemon> {
    start_daemon_with(home, extra_config, "")
}

/// `runtime_config`: more keys of the `codex` runtime (`rpc = false`).
fn start_daemon_with(
    home: &tempfile::TempDir,
    extra_config: &str,
    runtime_config: &str,
) -> Option<Daemon> {
    let codex = agent_bin("codex")?;
    let env = vec![
        ("CODEX_HOME".to_string(), path_str(home.path()).to_string()),
        (
            "STUB_API_KEY".to_string(),
            "stub-key-not-secret".to_string(),
        ),
    ];
    let config = format!(
        "{extra_config}no_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.codex]\nadapter = \"codex\"\ncommand = [{codex:?}]\n\
         env = [\"CODEX_HOME\", \"STUB_API_KEY\"]\n{runtime_config}",
        codex = codex.display().to_string(),
    );
    Some(Daemon::start_with(Opts { config, env }))
}

/// Live mode (`codex app-server`), the adapter's default.
#[test]
fn default_team_on_the_real_codex_cli() {
    default_team("default_team_on_the_real_codex_cli", "");
}

/// `rpc = false`: `codex exec --json`, one process per prompt.
#[test]
fn default_team_on_codex_exec() {
    default_team("default_team_on_codex_exec", "rpc = false\n");
}

fn default_team(test: &str, runtime_config: &str) {
    // Every role's first request is answered with a shell command that writes `<role>.txt` in
    // the run's cwd; the answer after the command's output is the role's text.
    let stub = Stub::start(Wire::Responses, |e| {
        let role = role_of(e);
        if e.has_tool_result() {
            Reply::Text(stub_answer(role, e.n))
        } else {
            Reply::Tool {
                name: "exec_command".into(),
                input: json!({"cmd": format!("echo written by the {role} > {role}.txt")}),
            }
        }
    });
    let home = codex_home(&stub);
    let Some(d) = start_daemon_with(&home, "max_attempts = 1\n", runtime_config) else {
        not_installed(test, "codex");
    };
    let work = tempfile::tempdir().unwrap();
    let work_dir = work.path().canonicalize().unwrap();
    let goal = long_goal();
    let run_id = run_default_team(&d, &stub, "codex", &work_dir);
    let run = check_team_run(&d, &run_id, &stub.exchanges(), Accounting::Responses);
    // Every worker ran in the mode asked for.
    let live = runtime_config.is_empty();
    let spawned: Vec<serde_json::Value> = d
        .events(Some(&run_id))
        .into_iter()
        .filter(|e| e["type"] == "worker.spawned")
        .map(|e| e["data"]["live"].clone())
        .collect();
    assert_eq!(spawned, vec![json!(live); 4]);

    // The executor's write went through (workspace-write sandbox); the read-only roles' did not.
    assert_eq!(files_in(&work_dir), ["executor.txt"]);
    assert_eq!(
        std::fs::read_to_string(work_dir.join("executor.txt")).unwrap(),
        "written by the executor\n"
    );
    // What the read-only roles' commands got back: the sandbox's refusal.
    for (role, _) in run.first_requests.iter().filter(|(r, _)| r != "executor") {
        let answer = stub
            .exchanges()
            .into_iter()
            .find(|e| role_of(e) == role && e.has_tool_result())
            .unwrap();
        assert!(
            answer.texts().contains("Read-only file system"),
            "{role}: {}",
            answer.texts()
        );
    }

    // The prompt went through stdin: the whole 100,000-character goal reached the model.
    for (role, ex) in &run.first_requests {
        assert!(ex.texts().contains(&goal), "{role}: the goal was cut");
    }
}

#[test]
fn codex_api_errors_are_retried_or_reported() {
    let calls = AtomicU64::new(0);
    let stub = Stub::start(Wire::Responses, move |e| {
        if e.texts().contains("BAD-REQUEST-GOAL") {
            return Reply::Error {
                status: 400,
                message: "STUB-400: max_tokens: field required".into(),
            };
        }
        match calls.fetch_add(1, Ordering::SeqCst) {
            0 => Reply::Error {
                status: 529,
                message: "STUB says the model is busy".into(),
            },
            1 => Reply::Error {
                status: 429,
                message: "STUB says slow down".into(),
            },
            _ => Reply::Text("STUB-REPLY after the retries".into()),
        }
    });
    let home = codex_home(&stub);
    let Some(d) = start_daemon(&home, "max_attempts = 3\n") else {
        not_installed("codex_api_errors_are_retried_or_reported", "codex");
    };
    one_step_team(&d, "solo", "Answer: {goal}", "explorer");
    check_retries_and_400(&d, "codex");
}

/// The start of Codex's own base instructions (a developer message; Codex 0.171 sends no
/// `instructions`).
const CODEX_BASE: &str = "You are a coding agent running in the Codex CLI";

/// What one model request of a one-step run of the `tuned` agent (its own model, effort
/// `high`, system prompt mode `mode`) on codex looked like, live or (`rpc = false`) on
/// `codex exec`: the request's model and reasoning, whether codex's own base instructions and
/// the agent's prompt are among its developer messages, and the task's usage.
fn tuned_request(live: bool, mode: &str) -> Option<(Value, Value, bool, bool, Value)> {
    let stub = Stub::start(Wire::Responses, |_| Reply::Text("TUNED-REPLY".into()));
    let home = codex_home(&stub);
    let runtime_config = if live { "" } else { "rpc = false\n" };
    let d = start_daemon_with(&home, "max_attempts = 1\n", runtime_config)?;
    d.project_file(
        "agents/tuned.md",
        &format!(
            "---\nname: tuned\nmodel: stub-model-tuned\neffort: high\nsystemPromptMode: {mode}\n\
             tools: read, bash\n---\nTUNED-PROMPT: answer in one line.\n"
        ),
    );
    one_step_team(&d, "tuned", "Say hi.", "tuned");
    let work = d.work.canonicalize().unwrap();
    let run_id = d.ok(
        "team.run",
        json!({"goal": "hi", "cwd": path_str(&work), "team": "tuned", "runtime": "codex"}),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(d.wait(&run_id), "completed", "{:#}", d.status(&run_id));
    let spawned = d
        .events(Some(&run_id))
        .into_iter()
        .find(|e| e["type"] == "worker.spawned")
        .unwrap();
    assert_eq!(spawned["data"]["live"], live);
    let ex = stub.exchanges();
    assert_eq!(ex.len(), 1, "{ex:#?}");
    let body = &ex[0].body;
    let developer = |text: &str| {
        body["input"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["role"] == "developer")
            .any(|i| i.to_string().contains(text))
    };
    let st = d.status(&run_id);
    let usage = Daemon::task(&st, "01_only")["usage"].clone();
    Some((
        body["model"].clone(),
        body["reasoning"].clone(),
        developer(CODEX_BASE),
        developer("TUNED-PROMPT"),
        usage,
    ))
}

/// Live mode gives the model what `codex exec` gives it: the agent's model and effort, its
/// system prompt in place of codex's base instructions or after them, and the task's usage is
/// the same.
#[test]
fn live_mode_passes_model_effort_and_system_prompt_as_exec_does() {
    if agent_bin("codex").is_none() {
        not_installed(
            "live_mode_passes_model_effort_and_system_prompt_as_exec_does",
            "codex",
        );
    }
    for mode in ["replace", "append"] {
        let live = tuned_request(true, mode).unwrap();
        let exec = tuned_request(false, mode).unwrap();
        assert_eq!(live, exec, "{mode}");
        let (model, reasoning, codex_base, agent_prompt, _) = live;
        assert_eq!(model, "stub-model-tuned");
        assert_eq!(reasoning["effort"], "high", "{reasoning}");
        assert!(
            agent_prompt,
            "{mode}: the agent's prompt did not reach the model"
        );
        assert_eq!(
            codex_base,
            mode == "append",
            "{mode}: codex's base instructions"
        );
    }
}
