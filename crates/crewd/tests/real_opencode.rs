//! Issue 16: the builtin `default` team on the real opencode CLI (pinned in
//! `tests/agents/package.json`), its model a custom OpenAI-compatible provider (in a config
//! file named by `OPENCODE_CONFIG`) that points at a stub chat completions server this test
//! runs on 127.0.0.1.
//!
//! opencode is installed by `tests/agents/setup.sh` into `tests/agents/node_modules` (or
//! `$CREW_AGENTS_DIR`). Without that install the tests pass after printing why they did
//! nothing. opencode fetches its plugin SDK from the npm registry into the worker's
//! `~/.config/opencode` when it starts.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_cli.rs"]
mod real_cli;

use common::*;
use model_stub::{Reply, Stub, Wire};
use real_cli::*;
use serde_json::json;

/// opencode honours an error's `retry-after-ms` instead of its own backoff (2 s, doubling):
/// the stub's errors say 1 ms.
const RETRY_AFTER_MS: Option<u64> = Some(1);

/// `provider/model`, as opencode names a model.
fn model() -> String {
    format!("stub/{MODEL}")
}

fn start_daemon(config: &tempfile::TempDir, extra_config: &str) -> Option<Daemon> {
    let opencode = agent_bin("opencode")?;
    let env = opencode_env(config);
    let config = format!(
        "{extra_config}no_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.opencode]\nadapter = \"opencode\"\ncommand = [{opencode:?}]\n\
         env = [\"OPENCODE_CONFIG\", \"OPENCODE_DISABLE_MODELS_FETCH\"]\n",
        opencode = opencode.display().to_string(),
    );
    let d = Daemon::start_with(Opts { config, env });
    seed_opencode_plugin_dir(&d.home);
    Some(d)
}

#[test]
fn default_team_on_the_real_opencode_cli() {
    let work = tempfile::tempdir().unwrap();
    let work_dir = work.path().canonicalize().unwrap();
    let dir = work_dir.display().to_string();
    // Every role's first request is answered with a `write` call for `<role>.txt` in the run's
    // cwd; the answer after the call's result is the role's text.
    let stub = Stub::start(Wire::Chat, move |e| {
        let role = role_of(e);
        if e.has_tool_result() {
            Reply::Text(stub_answer(role, e.n))
        } else {
            Reply::Tool {
                name: "write".into(),
                input: json!({"filePath": format!("{dir}/{role}.txt"), "content": format!("written by the {role}\n")}),
            }
        }
    });
    let config = opencode_config(&stub);
    let Some(d) = start_daemon(&config, "max_attempts = 1\n") else {
        not_installed("default_team_on_the_real_opencode_cli", "opencode");
    };
    let goal = long_goal();
    let run_id = run_default_team_on(&d, &stub, "opencode", &work_dir, &model());
    let run = check_team_run(&d, &run_id, &stub.exchanges(), Accounting::PerCall);

    // The executor's write went through; the read-only roles' agents have no write tool.
    assert_eq!(files_in(&work_dir), ["executor.txt"]);
    assert_eq!(
        std::fs::read_to_string(work_dir.join("executor.txt")).unwrap(),
        "written by the executor\n"
    );
    assert_eq!(
        warned_roles(&d, &run_id, &run),
        ["explorer", "planner", "verifier"]
    );
    for (role, ex) in &run.first_requests {
        assert!(ex.texts().contains(&goal), "{role}: the goal was cut");
    }
}

#[test]
fn opencode_bad_requests_fail_with_the_apis_message() {
    let stub = Stub::start(Wire::Chat, |_| Reply::Error {
        status: 400,
        message: "STUB-400: max_tokens: field required".into(),
    });
    let config = opencode_config(&stub);
    let Some(d) = start_daemon(&config, "max_attempts = 3\n") else {
        not_installed(
            "opencode_bad_requests_fail_with_the_apis_message",
            "opencode",
        );
    };
    one_step_team(&d, "solo", "Answer: {goal}", "explorer");
    let run = d.run(
        "BAD-REQUEST-GOAL",
        json!({"team": "solo", "runtime": "opencode", "model": model()}),
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

/// opencode retries a 429 and a 529 inside itself: crew sees one attempt that succeeded, with
/// the answer's usage only.
#[test]
fn opencode_retries_rate_limits_and_overloads_itself() {
    let stub = failing_then_ok(
        Wire::Chat,
        RETRY_AFTER_MS,
        vec![
            (429, "STUB says slow down"),
            (529, "STUB says the model is overloaded"),
        ],
    );
    let config = opencode_config(&stub);
    let Some(d) = start_daemon(&config, "max_attempts = 3\n") else {
        not_installed(
            "opencode_retries_rate_limits_and_overloads_itself",
            "opencode",
        );
    };
    one_step_team(&d, "solo", "Answer: {goal}", "explorer");
    check_recovered(&d, &stub, "opencode", &model(), 1, &[]);
    assert_eq!(stub.exchanges().len(), 3, "two retries by opencode");
}

/// opencode gives up after its own retries (five): the 429 that ends its run is retried by
/// crew, naming the API's message, and crew's second attempt answers.
#[test]
fn opencode_rate_limits_it_gives_up_on_are_retried_by_crew() {
    let stub = failing_then_ok(
        Wire::Chat,
        RETRY_AFTER_MS,
        vec![(429, "STUB says slow down"); OPENCODE_TRIES],
    );
    let config = opencode_config(&stub);
    let Some(d) = start_daemon(&config, "max_attempts = 3\n") else {
        not_installed(
            "opencode_rate_limits_it_gives_up_on_are_retried_by_crew",
            "opencode",
        );
    };
    one_step_team(&d, "solo", "Answer: {goal}", "explorer");
    check_recovered(&d, &stub, "opencode", &model(), 2, &["STUB says slow down"]);
}

/// Requests opencode makes for one model call before it gives up: the first and five retries.
const OPENCODE_TRIES: usize = 6;

/// A short prompt reaches the model as written: `opencode run` wraps a message argument that
/// holds a space in quotes and escapes the quotes inside, so crew never puts it on argv.
#[test]
fn opencode_gets_a_short_prompt_as_written() {
    let stub = Stub::start(Wire::Chat, |_| Reply::Text("STUB-OK".into()));
    let config = opencode_config(&stub);
    let Some(d) = start_daemon(&config, "max_attempts = 1\n") else {
        not_installed("opencode_gets_a_short_prompt_as_written", "opencode");
    };
    one_step_team(&d, "solo", "Answer: {goal}", "explorer");
    let goal = r#"say "hi" now"#;
    let run = d.run(
        goal,
        json!({"team": "solo", "runtime": "opencode", "model": model()}),
    );
    assert_eq!(d.wait(&run), "completed");
    let exchanges = stub.exchanges();
    let texts = exchanges[0].texts();
    assert!(
        texts.contains(&format!("Answer: {goal}")),
        "the prompt as written: {texts}"
    );
    assert!(!texts.contains(r#"\"hi\""#), "quoted by opencode: {texts}");
}
