//! Issue 16 item 7: `team.steer` reaches a task running on the real opencode CLI in its live
//! mode (`rpc = true`: `opencode acp`, crew the Agent Client Protocol's client). opencode
//! queues a `session/prompt` that comes while one runs into the running turn: crew sends a
//! steer at once, and the model gets it at its next call, beside the tool results.
//!
//! opencode is installed by `tests/agents/setup.sh` into `tests/agents/node_modules` (or
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
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const STEER: &str = "STEER-7: also list the file's headings";
const TASK: &str = "Read README.md and say what it holds.";

/// `provider/model`, as opencode names a model.
fn model() -> String {
    format!("stub/{MODEL}")
}

/// A crewd whose `opencode` runtime runs the real opencode live, its one provider the stub.
fn live_opencode_daemon(config: &tempfile::TempDir) -> Option<Daemon> {
    let opencode = agent_bin("opencode")?;
    let env = opencode_env(config);
    let config = format!(
        "max_attempts = 3\nno_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.opencode]\nadapter = \"opencode\"\ncommand = [{opencode:?}]\nrpc = true\n\
         env = [\"OPENCODE_CONFIG\", \"OPENCODE_DISABLE_MODELS_FETCH\"]\n",
        opencode = opencode.display().to_string(),
    );
    let d = Daemon::start_with(Opts { config, env });
    seed_opencode_plugin_dir(&d.home);
    Some(d)
}

fn run_one(d: &Daemon, task: &str, agent: &str) -> String {
    let work = d.work.canonicalize().unwrap();
    one_step_team(d, "look", task, agent);
    d.ok(
        "team.run",
        json!({
            "goal": "Describe the README", "cwd": path_str(&work), "team": "look",
            "runtime": "opencode", "model": model(),
        }),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Steered while its first model call (a `read` call) is out: a later request carries the
/// steer beside the task's prompt and the tool's result (the next one when opencode took the
/// message before that step began), the task ends with the last answer, and the worker ends by
/// itself once crew closed its stdin. Usage is what opencode's ACP answer carries: the turn's
/// last model call's, the stub's counts for it.
#[test]
fn steer_reaches_the_real_opencode_at_its_next_model_call() {
    let test = "steer_reaches_the_real_opencode_at_its_next_model_call";
    let readme = Arc::new(Mutex::new(PathBuf::new()));
    let file = readme.clone();
    let held = Held::start(Wire::Chat, vec![1], move || Reply::Tool {
        name: "read".into(),
        input: json!({"filePath": file.lock().unwrap().display().to_string()}),
    });
    let stub = &held.stub;
    let config = opencode_config(stub);
    let Some(d) = live_opencode_daemon(&config) else {
        not_installed(test, "opencode");
    };
    let work = d.work.canonicalize().unwrap();
    std::fs::write(work.join("README.md"), "# Hello\n\nA greeting.\n").unwrap();
    *readme.lock().unwrap() = work.join("README.md");
    let run_id = run_one(&d, TASK, "explorer");
    held.steer(&d, &run_id, "opencode", &[(1, STEER)]);

    let st = wait_completed(&d, &run_id, stub);
    let ex = stub.exchanges();
    // opencode adds a queued message to the history its next step reads: the step after the
    // tool call when the message was in before that step began, else a step of its own after
    // the turn's answer. Which one is a race between crew's write and the stub's answer.
    assert!(
        ex.len() == 2 || ex.len() == 3,
        "requests (no title request): {ex:#?}"
    );
    assert!(ex[0].texts().contains(TASK), "{}", ex[0].texts());
    assert!(!ex[0].texts().contains(STEER), "{}", ex[0].texts());
    assert!(
        ex[0].texts().contains("You are a codebase explorer."),
        "the role's system prompt"
    );
    assert_eq!(ex[0].body["model"], MODEL);
    let last = ex.last().unwrap();
    assert!(
        last.texts().contains(STEER) && last.texts().contains(TASK) && last.has_tool_result(),
        "the last request lacks the steer or the history: {:#}",
        last.body
    );
    let result = only_result(&d, &run_id);
    let want = format!("FINAL-{}: the README greets", ex.len());
    assert!(result.contains(&want), "{result}");
    let t = Daemon::task(&st, "01_only");
    let u = &t["usage"];
    let last = last.sent;
    assert_eq!(
        (
            u["input"].as_u64(),
            u["output"].as_u64(),
            u["cacheRead"].as_u64()
        ),
        (Some(last.input), Some(last.output), Some(last.cache_read)),
        "{u}"
    );
    d.live_worker_ended_by_itself(&run_id, "01_only");
    assert_eq!(
        (&t["status"], &t["attempts"]),
        (&json!("completed"), &json!(1))
    );
}

/// A read-only role's write in live mode: the `crew` agent has no write tool, the call is
/// refused, the file is not written, the task is warned and completes with the model's answer.
#[test]
fn a_read_only_roles_write_is_refused_in_live_mode() {
    let test = "a_read_only_roles_write_is_refused_in_live_mode";
    let target = Arc::new(Mutex::new(PathBuf::new()));
    let file = target.clone();
    let stub = Stub::start(Wire::Chat, move |e: &Exchange| {
        if e.has_tool_result() {
            Reply::Text("STUB-DONE: could not write".into())
        } else {
            Reply::Tool {
                name: "write".into(),
                input: json!({"filePath": file.lock().unwrap().display().to_string(), "content": "no\n"}),
            }
        }
    });
    let config = opencode_config(&stub);
    let Some(d) = live_opencode_daemon(&config) else {
        not_installed(test, "opencode");
    };
    let work = d.work.canonicalize().unwrap();
    *target.lock().unwrap() = work.join("written.txt");
    let run_id = run_one(&d, "Write written.txt.", "explorer");
    let status = d.wait(&run_id);
    let st = d.status(&run_id);
    assert_eq!(status, "completed", "{st:#}\n{}", tail(&d.log_text(), 6000));
    assert!(!work.join("written.txt").exists(), "the write went through");
    let warned = d
        .events(Some(&run_id))
        .iter()
        .any(|e| e["type"] == "task.warning" && e["taskId"] == "01_only");
    assert!(warned, "no warning: {:#?}", d.events(Some(&run_id)));
    assert_eq!(
        only_result(&d, &run_id).trim(),
        "STUB-DONE: could not write"
    );
    let spawned = d
        .events(Some(&run_id))
        .into_iter()
        .find(|e| e["type"] == "worker.spawned")
        .unwrap();
    assert_eq!(spawned["data"]["live"], true, "{spawned}");
}

/// A 400 in live mode: opencode answers the prompt with a JSON-RPC internal error holding the
/// API's message (no status); the task fails on its first attempt with that message.
#[test]
fn opencode_bad_requests_fail_with_the_apis_message_in_live_mode() {
    let test = "opencode_bad_requests_fail_with_the_apis_message_in_live_mode";
    let stub = Stub::start(Wire::Chat, |_| Reply::Error {
        status: 400,
        message: "STUB-400: max_tokens: field required".into(),
    });
    let config = opencode_config(&stub);
    let Some(d) = live_opencode_daemon(&config) else {
        not_installed(test, "opencode");
    };
    let run_id = run_one(&d, "Answer: {goal}", "explorer");
    assert_eq!(d.wait(&run_id), "failed");
    let st = d.status(&run_id);
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["attempts"], 1, "a 400 is not retried: {t:#}");
    let error = t["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("STUB-400: max_tokens: field required") && !error.contains("Internal error"),
        "the API's message: {t:#}"
    );
}

const QUESTION: &str = "Which database should the service use?";
const WAITING: &str = "STUB-WAITING: I asked the user which database to use.";
const ANSWER: &str = "Postgres, version 16";
const FINAL: &str = "STUB-FINAL: the service uses Postgres 16.";
const TASK_MARK: &str = "Pick the storage for the service (mark-7f3a).";

/// The model: calls crew's ask tool first; after its result, ends its turn saying so; once the
/// answer came, gives the final text.
fn ask_script(e: &Exchange) -> Reply {
    if e.texts().contains(ANSWER) {
        return Reply::Text(FINAL.into());
    }
    if last_call(&e.body).as_deref() == Some("crew_ask_ask_user") {
        return Reply::Text(WAITING.into());
    }
    Reply::Tool {
        name: "crew_ask_ask_user".into(),
        input: json!({"question": QUESTION}),
    }
}

/// In live mode the agent asks through crew's ask server, the task waits with the question,
/// and the answer's attempt loads the same session (`session/load`): the request after the
/// answer carries the earlier conversation, the task's prompt once.
#[test]
fn opencode_asks_and_the_answer_loads_its_session_in_live_mode() {
    let test = "opencode_asks_and_the_answer_loads_its_session_in_live_mode";
    let stub = Stub::start(Wire::Chat, ask_script);
    let config = opencode_config(&stub);
    crewctl_next_to_crewd();
    let Some(d) = live_opencode_daemon(&config) else {
        not_installed(test, "opencode");
    };
    let (run, st) = ask_and_answer(
        &d,
        &stub,
        json!({"runtime": "opencode", "model": model()}),
        TASK_MARK,
        QUESTION,
        ANSWER,
    );
    let ex = stub.exchanges();
    assert!(stub.errors().is_empty(), "{:?}", stub.errors());
    let replies: Vec<&Reply> = ex.iter().map(|e| &e.reply).collect();
    assert_eq!(ex.len(), 3, "requests: {replies:?}");
    assert_eq!(replies[1], &Reply::Text(WAITING.into()));
    let texts = ex[2].texts();
    for needle in [ANSWER, TASK_MARK, QUESTION, WAITING] {
        assert!(
            texts.contains(needle),
            "the resumed request lacks {needle:?}: {texts}"
        );
    }
    assert_eq!(
        texts.matches(TASK_MARK).count(),
        1,
        "a fresh prompt: {texts}"
    );
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["attempts"], 2, "{st:#}");
    assert_eq!(real_cli::result_text(&d, &run, t).trim(), FINAL);
}

/// The executor role writes in live mode: its write goes through without a refusal.
#[test]
fn the_executor_writes_in_live_mode() {
    let test = "the_executor_writes_in_live_mode";
    let target = Arc::new(Mutex::new(PathBuf::new()));
    let file = target.clone();
    let stub = Stub::start(Wire::Chat, move |e: &Exchange| {
        if e.has_tool_result() {
            Reply::Text("STUB-DONE: written".into())
        } else {
            Reply::Tool {
                name: "write".into(),
                input: json!({"filePath": file.lock().unwrap().display().to_string(), "content": "yes\n"}),
            }
        }
    });
    let config = opencode_config(&stub);
    let Some(d) = live_opencode_daemon(&config) else {
        not_installed(test, "opencode");
    };
    let work = d.work.canonicalize().unwrap();
    *target.lock().unwrap() = work.join("written.txt");
    let run_id = run_one(&d, "Write written.txt.", "executor");
    let status = d.wait(&run_id);
    let st = d.status(&run_id);
    assert_eq!(status, "completed", "{st:#}\n{}", tail(&d.log_text(), 6000));
    assert_eq!(
        std::fs::read_to_string(work.join("written.txt")).unwrap_or_default(),
        "yes\n"
    );
    let warned = d
        .events(Some(&run_id))
        .iter()
        .any(|e| e["type"] == "task.warning" && e["taskId"] == "01_only");
    assert!(!warned, "{:#?}", d.events(Some(&run_id)));
    assert_eq!(only_result(&d, &run_id).trim(), "STUB-DONE: written");
}
