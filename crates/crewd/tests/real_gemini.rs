//! Issue 16: the builtin `default` team on the real Gemini CLI (pinned in
//! `tests/agents/package.json`), pointed at a stub Gemini API (`streamGenerateContent`) this
//! test runs on 127.0.0.1 through `GOOGLE_GEMINI_BASE_URL`, with API-key auth chosen in the
//! worker's `~/.gemini/settings.json`.
//!
//! Gemini CLI is installed by `tests/agents/setup.sh` into `tests/agents/node_modules` (or
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

fn start_daemon(stub: &Stub, extra_config: &str) -> Option<Daemon> {
    gemini_daemon(stub, extra_config, json!({}))
}

#[test]
fn default_team_on_the_real_gemini_cli() {
    let work = tempfile::tempdir().unwrap();
    let work_dir = work.path().canonicalize().unwrap();
    let dir = work_dir.display().to_string();
    // Every role's first request is answered with a `write_file` call for `<role>.txt` in the
    // run's cwd; the answer after the call's result is the role's text.
    let stub = Stub::start(Wire::Gemini, move |e| {
        let role = role_of(e);
        if e.has_tool_result() {
            Reply::Text(stub_answer(role, e.n))
        } else {
            Reply::Tool {
                name: "write_file".into(),
                input: json!({"file_path": format!("{dir}/{role}.txt"), "content": format!("written by the {role}\n")}),
            }
        }
    });
    let Some(d) = start_daemon(&stub, "max_attempts = 1\n") else {
        not_installed("default_team_on_the_real_gemini_cli", "gemini");
    };
    let goal = long_goal();
    let run_id = run_default_team(&d, &stub, "gemini", &work_dir);
    let run = check_team_run(&d, &run_id, &stub.exchanges(), Accounting::PerCall);

    // The executor's write went through (its approval mode approves edits); the read-only
    // roles' did not (their session has no write tool) and each got a warning.
    assert_eq!(files_in(&work_dir), ["executor.txt"]);
    assert_eq!(
        std::fs::read_to_string(work_dir.join("executor.txt")).unwrap(),
        "written by the executor\n"
    );
    assert_eq!(
        warned_roles(&d, &run_id, &run),
        ["explorer", "planner", "verifier"]
    );

    // The prompt went through stdin: the whole 100,000-character goal reached the model.
    for (role, ex) in &run.first_requests {
        assert!(ex.texts().contains(&goal), "{role}: the goal was cut");
    }
}

#[test]
fn gemini_bad_requests_fail_with_the_apis_message() {
    let stub = Stub::start(Wire::Gemini, |_| Reply::Error {
        status: 400,
        message: "STUB-400: max_tokens: field required".into(),
    });
    let Some(d) = start_daemon(&stub, "max_attempts = 3\n") else {
        not_installed("gemini_bad_requests_fail_with_the_apis_message", "gemini");
    };
    one_step_team(&d, "solo", "Answer: {goal}", "explorer");
    let run = d.run(
        "BAD-REQUEST-GOAL",
        json!({"team": "solo", "runtime": "gemini", "model": MODEL}),
    );
    assert_eq!(d.wait(&run), "failed");
    let st = d.status(&run);
    let t = &st["tasks"][0];
    assert_eq!(t["attempts"], 1, "a 400 is not retried: {t:#}");
    assert!(
        t["error"]
            .as_str()
            .unwrap_or_default()
            .contains("STUB-400: max_tokens: field required"),
        "the API's message: {t:#}"
    );
}

/// Gemini CLI retries a 429 inside itself (its own backoff: 5 s, with no knob to shorten it, so
/// one case): crew sees one attempt that succeeded, with the answer's usage only.
#[test]
fn gemini_retries_a_rate_limit_itself() {
    let stub = failing_then_ok(Wire::Gemini, None, vec![(429, "STUB says slow down")]);
    let Some(d) = start_daemon(&stub, "max_attempts = 3\n") else {
        not_installed("gemini_retries_a_rate_limit_itself", "gemini");
    };
    one_step_team(&d, "solo", "Answer: {goal}", "explorer");
    check_recovered(&d, &stub, "gemini", MODEL, 1, &[]);
    assert_eq!(stub.exchanges().len(), 2, "one retry by Gemini CLI");
}

/// With Gemini CLI's own retries off (`general.maxAttempts = 1`, as when it has spent them), a
/// 429 and then a 503 (Gemini's overload) end its run: crew retries each, naming the API's
/// message, and the third attempt answers.
#[test]
fn gemini_rate_limits_it_gives_up_on_are_retried_by_crew() {
    let stub = failing_then_ok(
        Wire::Gemini,
        None,
        vec![
            (429, "STUB says slow down"),
            (503, "STUB says the model is overloaded"),
        ],
    );
    let settings = json!({"general": {"maxAttempts": 1}});
    let Some(d) = gemini_daemon(&stub, "max_attempts = 3\n", settings) else {
        not_installed(
            "gemini_rate_limits_it_gives_up_on_are_retried_by_crew",
            "gemini",
        );
    };
    one_step_team(&d, "solo", "Answer: {goal}", "explorer");
    check_recovered(
        &d,
        &stub,
        "gemini",
        MODEL,
        3,
        &["STUB says slow down", "STUB says the model is overloaded"],
    );
}
