//! Issue 16 item 7: `team.steer` reaches a task running on the real Codex CLI, whose adapter
//! runs it live by default (`codex app-server`, JSON-RPC on stdin/stdout; a steer is
//! `turn/steer`, or the next `turn/start` once the turn is over). The stub model (OpenAI Responses) holds one answer
//! until the test has steered; the next request must carry the steer.
//!
//! Codex is installed by `tests/agents/setup.sh` into `tests/agents/node_modules` (or
//! `$CREW_AGENTS_DIR`). Without that install the tests pass after printing why they did
//! nothing.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_cli.rs"]
mod real_cli;

use common::*;
use model_stub::{Exchange, Reply, Stub, Wire};
use real_cli::*;
use serde_json::json;

const STEER: &str = "STEER-7: also list the file's headings";
const STEER_2: &str = "STEER-8: and count its lines";

/// A `CODEX_HOME` whose only provider is the stub.
fn codex_home(stub: &Stub) -> tempfile::TempDir {
    let home = tempfile::Builder::new()
        .prefix("codex-home")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    std::fs::write(home.path().join("config.toml"), codex_provider_toml(stub)).unwrap();
    home
}

/// Start crew on a codex runtime (no `rpc` key: live is the adapter's default) and run a one-step explorer team. For each
/// `(n, message)` of `steers`: once request `n` arrived, steer the task with `message` (it must
/// go live), and let the request go once crew wrote it to codex's stdin. Then wait for the
/// run. Returns the daemon, the run id and the stub (and the home, kept until the end).
fn steered_run(
    test: &str,
    steers: &[(u64, &str)],
) -> Option<(Daemon, String, Stub, tempfile::TempDir)> {
    let Some(codex) = agent_bin("codex") else {
        not_installed(test, "codex")
    };
    let held = steers.iter().map(|(n, _)| *n).collect();
    let held = Held::start(Wire::Responses, held, || Reply::Tool {
        name: "exec_command".into(),
        input: json!({"cmd": "cat README.md"}),
    });
    let home = codex_home(&held.stub);
    let env = vec![
        ("CODEX_HOME".to_string(), path_str(home.path()).to_string()),
        (
            "STUB_API_KEY".to_string(),
            "stub-key-not-secret".to_string(),
        ),
    ];
    let config = format!(
        "max_attempts = 1\nno_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.codex]\nadapter = \"codex\"\ncommand = [{codex:?}]\n\
         env = [\"CODEX_HOME\", \"STUB_API_KEY\"]\n",
        codex = codex.display().to_string(),
    );
    let d = Daemon::start_with(Opts { config, env });
    let work = d.work.canonicalize().unwrap();
    std::fs::write(work.join("README.md"), "# Hello\n\nA greeting.\n").unwrap();
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
            "runtime": "codex", "model": MODEL,
        }),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();
    held.steer(&d, &run_id, "codex", steers);
    wait_completed(&d, &run_id, &held.stub);
    Some((d, run_id, held.stub, home))
}

/// The transcript of the task's one attempt: codex's stdout, one JSON message a line.
fn transcript(d: &Daemon, run_id: &str) -> Vec<serde_json::Value> {
    d.ok(
        "team.artifact",
        json!({"runId": run_id, "name": "transcripts/01_only.attempt-1.jsonl"}),
    )["content"]
        .as_str()
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .collect()
}

/// True when codex took the answer of `e`: request 1's command ran, a `FINAL-<n>` is one of
/// its agent messages. A steer that comes while a model call is out may make codex drop that
/// call and call again with the steer, never showing the dropped call's answer.
fn taken(stream: &[serde_json::Value], e: &Exchange) -> bool {
    let mut items = stream
        .iter()
        .filter(|m| m["method"] == "item/completed")
        .map(|m| &m["params"]["item"]);
    match &e.reply {
        Reply::Tool { .. } => items.any(|i| i["type"] == "commandExecution"),
        Reply::Text(text) => {
            items.any(|i| i["type"] == "agentMessage" && i["text"] == text.as_str())
        }
        _ => false,
    }
}

/// The requests codex counted (each `thread/tokenUsage/updated` that moves the thread's totals:
/// its `last` is one model call),
/// each matched to the stub's exchange that sent those counts. Codex counts a dropped call too
/// when its answer had come in full.
fn counted<'a>(stream: &[serde_json::Value], ex: &'a [Exchange]) -> Vec<&'a Exchange> {
    let mut out: Vec<&Exchange> = Vec::new();
    let mut total = &serde_json::Value::Null;
    for m in stream
        .iter()
        .filter(|m| m["method"] == "thread/tokenUsage/updated")
    {
        // Codex may tell the same totals again (no new call).
        if m["params"]["tokenUsage"]["total"] == *total {
            continue;
        }
        total = &m["params"]["tokenUsage"]["total"];
        let last = &m["params"]["tokenUsage"]["last"];
        let e = ex
            .iter()
            .find(|e| {
                last["inputTokens"].as_u64() == Some(e.sent.input + e.sent.cache_read)
                    && last["cachedInputTokens"].as_u64() == Some(e.sent.cache_read)
                    && last["outputTokens"].as_u64() == Some(e.sent.output)
            })
            .unwrap_or_else(|| panic!("codex counted a call the stub did not answer: {last}"));
        assert!(
            !out.iter().any(|o| o.n == e.n),
            "request {} counted twice",
            e.n
        );
        out.push(e);
    }
    out
}

/// The task's usage is the stub's, summed over the requests codex counted, every answer it
/// took among them (the Responses API has no cache writes; codex's input counts hold the
/// cached tokens, crew's do not), in `turns` turns.
fn usage_is_the_stubs(d: &Daemon, run_id: &str, ex: &[Exchange], turns: u64) {
    let stream = transcript(d, run_id);
    let counted = counted(&stream, ex);
    for e in ex.iter().filter(|e| taken(&stream, e)) {
        assert!(
            counted.iter().any(|c| c.n == e.n),
            "request {} was taken but not counted",
            e.n
        );
    }
    assert!(!counted.is_empty(), "codex counted no call");
    let st = d.status(run_id);
    let t = Daemon::task(&st, "01_only");
    let u = &t["usage"];
    let sum = |f: fn(&model_stub::Sent) -> u64| counted.iter().map(|e| f(&e.sent)).sum::<u64>();
    assert_eq!(
        (
            u["input"].as_u64(),
            u["output"].as_u64(),
            u["cacheRead"].as_u64(),
            u["cacheWrite"].as_u64(),
            u["turns"].as_u64(),
        ),
        (
            Some(sum(|s| s.input)),
            Some(sum(|s| s.output)),
            Some(sum(|s| s.cache_read)),
            Some(0),
            Some(turns),
        ),
        "{u}"
    );
}

/// The worker was live, heard the steer live, and ended by itself once crew closed its stdin
/// after its last turn: exit 0, no final drain, no process left.
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
/// beside the command's output, and the task ends with that call's answer.
#[test]
fn steer_reaches_the_real_codex_at_its_next_model_call() {
    let Some((d, run_id, stub, _home)) = steered_run(
        "steer_reaches_the_real_codex_at_its_next_model_call",
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
        ex[1].texts().contains(STEER),
        "the request after the steer lacks it: {:#}",
        ex[1].body
    );
    // Codex either took the held answer (the command ran: its output goes with the steer) or
    // dropped it for a call with the steer (no command).
    let stream = transcript(&d, &run_id);
    if taken(&stream, &ex[0]) {
        assert!(
            ex[1].has_tool_result() && ex[1].texts().contains("A greeting."),
            "the command's output: {}",
            ex[1].texts()
        );
    } else {
        assert!(!ex[1].has_tool_result(), "{:#}", ex[1].body);
    }
    let result = only_result(&d, &run_id);
    assert!(result.contains("FINAL-2: the README greets"), "{result}");
    usage_is_the_stubs(&d, &run_id, &ex, 1);
    ended_by_itself(&d, &run_id);
}

/// Steered while its last model call is out, then again during the call the steer caused:
/// each steer reaches a model call of its own after the answer it came during, and the task
/// ends with the last call's answer.
#[test]
fn a_steer_during_the_last_model_call_gets_a_call_of_its_own() {
    let Some((d, run_id, stub, _home)) = steered_run(
        "a_steer_during_the_last_model_call_gets_a_call_of_its_own",
        &[(2, STEER), (3, STEER_2)],
    ) else {
        return;
    };
    let ex = stub.exchanges();
    assert_eq!(ex.len(), 4, "requests: {ex:#?}");
    assert!(!ex[1].texts().contains(STEER), "{}", ex[1].texts());
    assert!(
        ex[2].texts().contains(STEER) && !ex[2].texts().contains(STEER_2),
        "the call after the answer lacks the steer: {:#}",
        ex[2].body
    );
    assert!(
        ex[3].texts().contains(STEER_2),
        "the last call lacks the second steer: {:#}",
        ex[3].body
    );
    let result = only_result(&d, &run_id);
    assert!(result.contains("FINAL-4: the README greets"), "{result}");
    let st = d.status(&run_id);
    let turns = Daemon::task(&st, "01_only")["usage"]["turns"]
        .as_u64()
        .unwrap();
    // Codex runs a steer that came during a model call in the same turn, or (when the turn
    // ended first) crew starts another: one to three turns.
    assert!((1..=3).contains(&turns), "{turns}");
    usage_is_the_stubs(&d, &run_id, &ex, turns);
    ended_by_itself(&d, &run_id);
}
