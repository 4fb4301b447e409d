//! Issue 16: the builtin `default` team on the real Claude Code CLI (pinned in
//! `tests/agents/package.json`), its model a stub Anthropic Messages server this test runs on
//! 127.0.0.1.
//!
//! Claude Code is installed by `tests/agents/setup.sh` into `tests/agents/node_modules` (or
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
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};

fn start_daemon(stub: &Stub, extra_config: &str) -> Option<Daemon> {
    start_daemon_with(stub, extra_config, &[])
}

fn start_daemon_with(stub: &Stub, extra_config: &str, more_env: &[(&str, &str)]) -> Option<Daemon> {
    let claude = agent_bin("claude")?;
    let mut env = claude_env(stub);
    env.extend(more_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let names: Vec<String> = env.iter().map(|(k, _)| format!("{k:?}")).collect();
    let config = format!(
        "{extra_config}no_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.claude]\nadapter = \"claude\"\ncommand = [{claude:?}]\nenv = [{}]\n",
        names.join(", "),
        claude = claude.display().to_string(),
    );
    Some(Daemon::start_with(Opts { config, env }))
}

#[test]
fn default_team_on_the_real_claude_cli() {
    let work = tempfile::tempdir().unwrap();
    let work_dir = work.path().canonicalize().unwrap();
    let target = work_dir.clone();
    // Every role's first request is answered with a Write of `<role>.txt`; the answer after the
    // tool result is the role's text.
    let stub = Stub::start(Wire::Anthropic, move |e| {
        let role = role_of(e);
        if e.has_tool_result() {
            Reply::Text(stub_answer(role, e.n))
        } else {
            Reply::Tool {
                name: "Write".into(),
                input: json!({
                    "file_path": target.join(format!("{role}.txt")).display().to_string(),
                    "content": format!("written by the {role}\n"),
                }),
            }
        }
    });
    let Some(d) = start_daemon(&stub, "max_attempts = 1\n") else {
        not_installed("default_team_on_the_real_claude_cli", "claude");
    };
    let goal = long_goal();
    let run_id = run_default_team(&d, &stub, "claude", &work_dir);
    let run = check_team_run(&d, &run_id, &stub.exchanges(), Accounting::Anthropic);

    // The executor's write went through; no read-only role's did.
    assert_eq!(files_in(&work_dir), ["executor.txt"]);
    assert_eq!(
        std::fs::read_to_string(work_dir.join("executor.txt")).unwrap(),
        "written by the executor\n"
    );
    // Each refused write is a warning on its task; the executor has none.
    let warned = warned_roles(&d, &run_id, &run);
    assert_eq!(
        warned,
        ["explorer", "planner", "verifier"],
        "warnings by role"
    );

    // The prompt went through stdin: the whole 100,000-character goal reached the model.
    for (role, ex) in &run.first_requests {
        assert!(ex.texts().contains(&goal), "{role}: the goal was cut");
    }
}

#[test]
fn claude_api_errors_are_retried_or_reported() {
    let calls = AtomicU64::new(0);
    let stub = Stub::start(Wire::Anthropic, move |e| {
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
    let Some(d) = start_daemon(&stub, "max_attempts = 3\n") else {
        not_installed("claude_api_errors_are_retried_or_reported", "claude");
    };
    one_step_team(&d, "solo", "Answer: {goal}", "explorer");
    check_retries_and_400(&d, "claude");
}

/// Issue 34, item 8: Claude Code's own sandbox (bubblewrap around Bash), turned on in the
/// user's settings with no way around it, cannot work nested in crew's box (a second `/proc`
/// is refused there). crew turns it off for the session — crew's box holds Bash — so a Bash
/// command of the model runs.
#[test]
fn claude_codes_own_sandbox_is_off_inside_crews_box() {
    let stub = Stub::start(Wire::Anthropic, move |e| {
        if e.has_tool_result() {
            Reply::Text("STUB-DONE".into())
        } else {
            Reply::Tool {
                name: "Bash".into(),
                input: json!({
                    "command": "echo from-bash > bash.txt",
                    "description": "Write a file",
                }),
            }
        }
    });
    // Passed through, the variable that forces the sandbox whatever the settings say.
    let Some(d) = start_daemon_with(
        &stub,
        "max_attempts = 1\nallow_no_change = true\n",
        &[("CLAUDE_CODE_SUBPROCESS_ENV_SCRUB", "1")],
    ) else {
        not_installed("claude_codes_own_sandbox_is_off_inside_crews_box", "claude");
    };
    std::fs::create_dir_all(d.home.join(".claude")).unwrap();
    std::fs::write(
        d.home.join(".claude/settings.json"),
        r#"{"sandbox":{"enabled":true,"failIfUnavailable":true,"allowUnsandboxedCommands":false,"autoAllowBashIfSandboxed":true}}"#,
    )
    .unwrap();
    one_step_team(&d, "b", "Run it: {goal}", "executor");
    let work_dir = d.work.clone();
    let run = d.ok(
        "team.run",
        json!({"goal": "g", "cwd": path_str(&work_dir), "team": "b", "runtime": "claude", "model": MODEL}),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let end = d.wait(&run);
    let st = d.status(&run);
    assert_eq!(
        end,
        "completed",
        "{st:#}\nstub errors: {:?}\ndaemon log tail:\n{}",
        stub.errors(),
        tail(&d.log_text(), 6000)
    );
    assert_eq!(
        std::fs::read_to_string(work_dir.join("bash.txt")).unwrap_or_default(),
        "from-bash\n",
        "{st:#}"
    );
}
