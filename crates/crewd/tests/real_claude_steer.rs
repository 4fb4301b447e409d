//! Issue 16 item 7: `team.steer` reaches a task running on the real Claude Code CLI, whose
//! adapter runs it live by default (`claude -p --input-format stream-json`, the prompt and each
//! steer a user message on stdin). The stub model holds one answer until the test has steered;
//! the next request must carry the steer.
//!
//! Claude Code is installed by `tests/agents/setup.sh` into `tests/agents/node_modules` (or
//! `$CREW_AGENTS_DIR`). Without that install the tests pass after printing why they did
//! nothing.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_cli.rs"]
mod real_cli;

use common::*;
use model_stub::{Reply, Stub, Wire};
use real_cli::*;
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const STEER: &str = "STEER-7: also list the file's headings";
const STEER_2: &str = "STEER-8: and count its lines";

/// Start crew on the claude runtime (no `rpc` key: live is the adapter's default) and run a
/// one-step explorer team. For each `(n, message)` of `steers`: once request `n` arrived, steer
/// the task with `message` (it must go live), and let the request go once crew wrote it to
/// claude's stdin. Then wait for the run. Returns the daemon, the run id and the stub.
fn steered_run(test: &str, steers: &[(u64, &str)]) -> Option<(Daemon, String, Stub)> {
    let Some(claude) = agent_bin("claude") else {
        not_installed(test, "claude")
    };
    // The README is in the daemon's project directory, known once the daemon is up.
    let readme = Arc::new(Mutex::new(PathBuf::new()));
    let held = steers.iter().map(|(n, _)| *n).collect();
    let file = readme.clone();
    let held = Held::start(Wire::Anthropic, held, move || Reply::Tool {
        name: "Read".into(),
        input: json!({"file_path": file.lock().unwrap().display().to_string()}),
    });
    let env = claude_env(&held.stub);
    let names: Vec<String> = env.iter().map(|(k, _)| format!("{k:?}")).collect();
    let config = format!(
        "max_attempts = 1\nno_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.claude]\nadapter = \"claude\"\ncommand = [{claude:?}]\nenv = [{}]\n",
        names.join(", "),
        claude = claude.display().to_string(),
    );
    let d = Daemon::start_with(Opts { config, env });
    let work = d.work.canonicalize().unwrap();
    std::fs::write(work.join("README.md"), "# Hello\n\nA greeting.\n").unwrap();
    *readme.lock().unwrap() = work.join("README.md");
    one_step_team(
        &d,
        "look",
        "Read README.md and say what it holds.",
        "explorer",
    );
    let run_id = d.ok(
        "team.run",
        json!({
            "goal": "Describe the README", "cwd": path_str(&work), "team": "look",
            "runtime": "claude", "model": MODEL,
        }),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    held.steer(&d, &run_id, "claude", steers);
    wait_completed(&d, &run_id, &held.stub);
    Some((d, run_id, held.stub))
}

/// The worker was live, heard the steer live, and ended by itself once crew closed its stdin
/// after its last `result`: exit 0, no final drain, no process left.
fn ended_by_itself(d: &Daemon, run_id: &str) {
    d.live_worker_ended_by_itself(run_id, "01_only");
    let st = d.status(run_id);
    let t = Daemon::task(&st, "01_only");
    assert_eq!(
        (&t["status"], &t["attempts"]),
        (&json!("completed"), &json!(1))
    );
}

/// Steered while its first model call is out: the steer reaches the model at its next call,
/// beside the tool result, and the task ends with that call's answer.
#[test]
fn steer_reaches_the_real_claude_at_its_next_model_call() {
    let Some((d, run_id, stub)) = steered_run(
        "steer_reaches_the_real_claude_at_its_next_model_call",
        &[(1, STEER)],
    ) else {
        return;
    };
    let ex = stub.exchanges();
    assert_eq!(ex.len(), 2, "requests: {ex:#?}");
    assert!(!ex[0].texts().contains(STEER), "{}", ex[0].texts());
    assert!(ex[0]
        .texts()
        .contains("Read README.md and say what it holds."));
    assert!(
        ex[1].texts().contains(STEER) && ex[1].has_tool_result(),
        "the request after the tool call lacks the steer: {:#}",
        ex[1].body
    );
    let result = only_result(&d, &run_id);
    assert!(result.contains("FINAL-2: the README greets"), "{result}");
    // Claude Code's usage: the stub's, summed over both calls.
    let st = d.status(&run_id);
    let t = Daemon::task(&st, "01_only");
    let u = &t["usage"];
    let sum = |f: fn(&model_stub::Sent) -> u64| ex.iter().map(|e| f(&e.sent)).sum::<u64>();
    assert_eq!(
        (u["input"].as_u64(), u["output"].as_u64()),
        (Some(sum(|s| s.input)), Some(sum(|s| s.output))),
        "{u}"
    );
    ended_by_itself(&d, &run_id);
}

/// Steered while its last model call is out: Claude Code prints that turn's `result`, then
/// takes the steer and runs a turn for it. crew waits for it (a `result` that came with a
/// message not yet taken is not the last): a second steer during that turn still goes live,
/// and gets a turn too. The task ends with the last turn's answer.
#[test]
fn a_steer_during_the_last_model_call_gets_a_turn_of_its_own() {
    let Some((d, run_id, stub)) = steered_run(
        "a_steer_during_the_last_model_call_gets_a_turn_of_its_own",
        &[(2, STEER), (3, STEER_2)],
    ) else {
        return;
    };
    let ex = stub.exchanges();
    assert_eq!(ex.len(), 4, "requests: {ex:#?}");
    assert!(!ex[1].texts().contains(STEER), "{}", ex[1].texts());
    assert!(
        ex[2].texts().contains(STEER) && !ex[2].texts().contains(STEER_2),
        "the turn after the answer lacks the steer: {:#}",
        ex[2].body
    );
    assert!(
        ex[3].texts().contains(STEER_2),
        "the last turn lacks the second steer: {:#}",
        ex[3].body
    );
    let result = only_result(&d, &run_id);
    assert!(result.contains("FINAL-4: the README greets"), "{result}");
    ended_by_itself(&d, &run_id);
}
