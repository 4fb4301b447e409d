//! Issue 19: crew's MCP server (`crewctl mcp`) inside the real Claude Code and Codex CLIs
//! (pinned in `tests/agents/package.json`), each pointed at a stub model server on 127.0.0.1.
//! The stub's first answer is a call of crew's run tool; crewd runs the `default` team on the
//! fake runtime; the stub's next request must carry the tool result holding the run's result,
//! and the CLI's final text is the stub's last answer.
//!
//! The CLIs are installed by `tests/agents/setup.sh` into `tests/agents/node_modules` (or
//! `$CREW_AGENTS_DIR`). Without that install the tests pass after printing why they did
//! nothing, so `cargo test` works offline.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_cli.rs"]
mod real_cli;

use common::*;
use model_stub::{Exchange, Reply, Stub, Wire};
use real_cli::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const GOAL: &str = "Add a greeting to the README";
const FINAL: &str = "STUB-FINAL: the crew team has finished";
const PROMPT: &str = "Have the crew team do: add a greeting to the README.";

/// What the stub model does, for both CLIs, decided from the request alone (a CLI also sends
/// requests on the side, e.g. for a title):
/// - after crew's run tool answered: the final text;
/// - when crew's run tool is offered: a call of it (wait, fake runtime, the `default` team);
/// - when it is only named as a deferred tool (Claude Code's tool search): a `ToolSearch` that
///   loads it, as a real model does;
/// - else a plain answer.
fn script(work: PathBuf) -> impl Fn(&Exchange) -> Reply + Send + Sync + 'static {
    move |e| {
        if last_call(&e.body).is_some_and(|n| n.ends_with("team_run")) {
            return Reply::Text(FINAL.into());
        }
        let offered = offered_tools(&e.body);
        let input = json!({
            "goal": GOAL, "cwd": path_str(&work), "team": "default", "runtime": "fake",
            "wait": true,
        });
        match offered.iter().find(|(_, n)| n.ends_with("team_run")) {
            Some((Some(namespace), name)) => {
                return Reply::NamespacedTool {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    input,
                }
            }
            Some((None, name)) => {
                return Reply::Tool {
                    name: name.clone(),
                    input,
                }
            }
            None => {}
        }
        let searchable = offered.iter().any(|(_, n)| n == "ToolSearch")
            && last_call(&e.body).as_deref() != Some("ToolSearch");
        if searchable && e.texts().contains("mcp__crew__team_run") {
            return Reply::Tool {
                name: "ToolSearch".into(),
                input: json!({"query": "select:mcp__crew__team_run"}),
            };
        }
        Reply::Text("STUB-SIDE-ANSWER".into())
    }
}

/// Runs `cmd` with the prompt on stdin, killing it after `limit`.
fn run_cli(mut cmd: Command, prompt: &str, limit: Duration) -> Output {
    use std::io::Write;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn the CLI");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(prompt.as_bytes())
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if rx.recv_timeout(limit).is_err() {
            // Still running at the limit: kill it so the test fails with its output.
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    });
    let out = child.wait_with_output().unwrap();
    let _ = tx.send(());
    let _ = guard.join();
    out
}

/// The one run crewd has: completed, the `default` team on the fake runtime, in `work`, with the
/// goal the stub's tool call gave. Returns its status.
fn check_crewd_side(d: &Daemon, work: &Path) -> Value {
    let runs = d.ok("team.list", json!({}))["runs"].clone();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:#?}");
    let id = runs[0]["id"].as_str().unwrap();
    let st = d.status(id);
    let run = &st["run"];
    assert_eq!(run["status"], "completed", "{st:#}");
    assert_eq!(run["runtime"], "fake", "{st:#}");
    assert_eq!(run["team"], "default", "{st:#}");
    assert_eq!(run["goal"], GOAL, "{st:#}");
    assert_eq!(run["cwd"], path_str(work), "{st:#}");
    let tasks = st["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 4, "{st:#}");
    assert!(tasks.iter().all(|t| t["status"] == "completed"), "{st:#}");
    st
}

/// The text of the result of the model's `team_run` call as the CLI sent it back to the
/// model: the tool result (Anthropic `tool_result`, Responses `function_call_output`) whose id
/// is the call's. None when no request carried one.
fn run_tool_result(ex: &[Exchange]) -> Option<String> {
    ex.iter().find_map(|e| {
        let ids = find_all(&e.body, &|o| {
            let name = o.get("name")?.as_str()?;
            if !name.ends_with("team_run") {
                return None;
            }
            let id = match o.get("type")?.as_str()? {
                "tool_use" => o.get("id")?,
                "function_call" => o.get("call_id")?,
                _ => return None,
            };
            id.as_str().map(str::to_owned)
        });
        let id = ids.first()?;
        let results = find_all(&e.body, &|o| {
            let of = o.get("tool_use_id").or_else(|| o.get("call_id"))?;
            let ty = o.get("type")?.as_str()?;
            (of == id.as_str() && matches!(ty, "tool_result" | "function_call_output")).then(
                || {
                    let mut text = Exchange {
                        body: o.get("content").or_else(|| o.get("output")).cloned()?,
                        ..e.clone()
                    }
                    .texts();
                    text.truncate(text.trim_end().len());
                    Some(text)
                },
            )?
        });
        results.into_iter().next()
    })
}

/// The tool result holds the run's result as `team_run` renders it: the summary report (this
/// run's id, team and runtime) and the final task's answer from the fake agent.
fn check_tool_result(ex: &[Exchange], st: &Value) -> String {
    let text = run_tool_result(ex)
        .unwrap_or_else(|| panic!("no request carried team_run's result: {ex:#?}"));
    let id = st["run"]["id"].as_str().unwrap();
    assert!(text.contains(&format!("# Run {id}\n")), "{text}");
    assert!(text.contains("- **Status**: completed"), "{text}");
    assert!(
        text.contains("default / default on runtime `fake`"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "## Final results\n\n### 04_verify (verifier)\n\nfake-agent: done with \"Goal: {GOAL}\""
        )),
        "the final task's answer is not in the tool result:\n{text}"
    );
    text
}

/// The run tool as the model was offered it: crew's description and input schema made it
/// through the CLI.
fn check_offered_schema(ex: &[Exchange], name: &str) {
    let offered = ex
        .iter()
        .flat_map(|e| {
            find_all(e.body.get("tools").unwrap_or(&Value::Null), &|o| {
                (o.get("name")?.as_str()? == name).then(|| Value::Object(o.clone()))
            })
        })
        .next()
        .unwrap_or_else(|| panic!("{name} was never offered"));
    let schema = offered
        .get("input_schema")
        .or_else(|| offered.get("parameters"))
        .unwrap_or_else(|| panic!("no schema: {offered:#}"));
    for field in ["goal", "cwd", "team", "runtime", "wait", "timeoutMs"] {
        assert!(
            schema["properties"].get(field).is_some(),
            "{field} missing from {name}'s schema: {schema:#}"
        );
    }
    assert_eq!(schema["required"], json!(["goal", "cwd"]), "{schema:#}");
    assert!(
        offered["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Hand a goal to a crew team")),
        "{offered:#}"
    );
}

/// One `claude -p` session with crew's MCP server (and no other) in its MCP config; with
/// `allow`, `--allowedTools mcp__crew__team_run` lets the model call the run tool without a
/// permission prompt (`-p` has nobody to ask). The CLI's output and the daemon.
fn claude_session(allow: bool) -> Option<(Daemon, Stub, Output)> {
    let claude = agent_bin("claude")?;
    let d = Daemon::start();
    let work = d.work.canonicalize().unwrap();
    let stub = Stub::start(Wire::Anthropic, script(work.clone()));
    let mcp_config = d.dir.path().join("mcp.json");
    std::fs::write(
        &mcp_config,
        json!({"mcpServers": {"crew": {
            "command": crewctl_bin(),
            "args": ["--socket", d.socket, "mcp"],
        }}})
        .to_string(),
    )
    .unwrap();
    let mut cmd = Command::new(&claude);
    cmd.args(["-p", "--output-format", "json", "--model", MODEL])
        .arg("--mcp-config")
        .arg(&mcp_config)
        // Only the servers of that file: nothing from the user's or the project's settings.
        .arg("--strict-mcp-config")
        .current_dir(&work)
        .env("HOME", &d.home)
        .env("XDG_CONFIG_HOME", d.home.join(".config"))
        .envs(claude_env(&stub));
    if allow {
        cmd.args(["--allowedTools", "mcp__crew__team_run"]);
    }
    let out = run_cli(cmd, PROMPT, Duration::from_secs(180));
    Some((d, stub, out))
}

/// A CLI's exit and output, for a failed assertion's message.
fn shown(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn claude_code_runs_a_team_through_crews_mcp_server() {
    let Some((d, stub, out)) = claude_session(true) else {
        not_installed("claude_code_runs_a_team_through_crews_mcp_server", "claude");
    };
    assert!(out.status.success(), "{}", shown(&out));
    let ex = stub.exchanges();
    assert!(stub.errors().is_empty(), "{:?}", stub.errors());
    // Claude Code defers MCP tools behind its tool search: the model loads crew's run tool
    // first, and what it then gets offered is crew's own description and schema.
    assert!(
        ex.iter()
            .any(|e| last_call(&e.body).as_deref() == Some("ToolSearch")),
        "the tool search was skipped: {}",
        shown(&out)
    );
    check_offered_schema(&ex, "mcp__crew__team_run");
    let st = check_crewd_side(&d, &d.work.canonicalize().unwrap());
    let text = check_tool_result(&ex, &st);
    // Claude Code passes crew's text on as it is: the tool result is the summary, first line on.
    assert!(text.starts_with("# Run "), "{text}");
    // Claude Code's answer is the stub's text after the tool result.
    let answer: Value = serde_json::from_slice(&out.stdout).expect("claude's JSON output");
    assert_eq!(answer["result"], FINAL, "{answer:#}");
    assert_eq!(answer["is_error"], false, "{answer:#}");
    assert_eq!(answer["permission_denials"], json!([]), "{answer:#}");
}

/// Without the allow, `claude -p` refuses the call (there is nobody to ask): the model is told
/// so, and crewd never sees a run.
#[test]
fn claude_code_without_allowed_tools_refuses_the_call() {
    let Some((d, stub, out)) = claude_session(false) else {
        not_installed(
            "claude_code_without_allowed_tools_refuses_the_call",
            "claude",
        );
    };
    assert!(out.status.success(), "{}", shown(&out));
    let answered = run_tool_result(&stub.exchanges()).expect("the refusal as the tool result");
    assert!(
        answered.contains("requested permissions to use mcp__crew__team_run"),
        "{answered}"
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("claude's JSON output");
    assert_eq!(
        answer["permission_denials"][0]["tool_name"], "mcp__crew__team_run",
        "{answer:#}"
    );
    let runs = d.ok("team.list", json!({}))["runs"].clone();
    assert_eq!(runs, json!([]), "crewd got a run");
}

/// A `CODEX_HOME` whose only model provider is the stub and whose one MCP server is `crewctl
/// mcp` on the daemon's socket. With `approve`, crew's run tool is approved in the config:
/// `codex exec` runs with approval policy `never`, so a tool call that needs an approval fails.
fn codex_home(stub: &Stub, d: &Daemon, approve: bool) -> tempfile::TempDir {
    let home = tempfile::Builder::new()
        .prefix("codex-home")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let toml = |s: &str| serde_json::to_string(s).unwrap();
    let mut config = format!(
        "{}\n[mcp_servers.crew]\ncommand = {}\nargs = [\"--socket\", {}, \"mcp\"]\n\
         tool_timeout_sec = 120\n",
        codex_provider_toml(stub),
        toml(path_str(&crewctl_bin())),
        toml(path_str(&d.socket)),
    );
    if approve {
        config.push_str("\n[mcp_servers.crew.tools.team_run]\napproval_mode = \"approve\"\n");
    }
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    home
}

/// One `codex exec` session with crew's MCP server; its output and the daemon.
fn codex_session(approve: bool) -> Option<(Daemon, Stub, Output)> {
    let codex = agent_bin("codex")?;
    let d = Daemon::start();
    let work = d.work.canonicalize().unwrap();
    let stub = Stub::start(Wire::Responses, script(work.clone()));
    let home = codex_home(&stub, &d, approve);
    let mut cmd = Command::new(&codex);
    cmd.args([
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--model",
        MODEL,
        "-",
    ])
    .current_dir(&work)
    .env("HOME", &d.home)
    .env("CODEX_HOME", home.path())
    .env("STUB_API_KEY", "stub-key-not-secret");
    let out = run_cli(cmd, PROMPT, Duration::from_secs(180));
    Some((d, stub, out))
}

/// The `mcp_tool_call` items of `codex exec --json`'s output, once completed.
fn codex_mcp_calls(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "mcp_tool_call")
        .map(|e| e["item"].clone())
        .collect()
}

/// Codex's final message: the last `agent_message` item.
fn codex_answer(out: &Output) -> Option<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
        .filter_map(|e| e["item"]["text"].as_str().map(str::to_owned))
        .next_back()
}

#[test]
fn codex_runs_a_team_through_crews_mcp_server() {
    let Some((d, stub, out)) = codex_session(true) else {
        not_installed("codex_runs_a_team_through_crews_mcp_server", "codex");
    };
    assert!(out.status.success(), "{}", shown(&out));
    let ex = stub.exchanges();
    assert!(stub.errors().is_empty(), "{:?}", stub.errors());
    // Codex offers an MCP server's tools in a Responses API namespace `mcp__<server>` under
    // their own names; the stub read both from the request and called `team_run` in it.
    let call = ex
        .iter()
        .find_map(|e| match &e.reply {
            Reply::NamespacedTool {
                namespace, name, ..
            } => Some((namespace.clone(), name.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the stub never called team_run: {}", shown(&out)));
    assert_eq!(call, ("mcp__crew".to_string(), "team_run".to_string()));
    check_offered_schema(&ex, "team_run");
    let st = check_crewd_side(&d, &d.work.canonicalize().unwrap());
    check_tool_result(&ex, &st);
    // Codex's own record of the call: crew's server, the run tool, crew's text as the result.
    let calls = codex_mcp_calls(&out);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(
        (&calls[0]["server"], &calls[0]["tool"], &calls[0]["status"]),
        (&json!("crew"), &json!("team_run"), &json!("completed")),
        "{calls:#?}"
    );
    let id = st["run"]["id"].as_str().unwrap();
    assert!(
        calls[0]["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with(&format!("# Run {id}"))),
        "{calls:#?}"
    );
    assert_eq!(
        codex_answer(&out).as_deref(),
        Some(FINAL),
        "{}",
        shown(&out)
    );
}

/// Without the approval in the config, `codex exec` (approval policy `never`) fails the call
/// with its message, and crewd never sees a run.
#[test]
fn codex_without_approval_fails_the_call() {
    let Some((d, stub, out)) = codex_session(false) else {
        not_installed("codex_without_approval_fails_the_call", "codex");
    };
    assert!(out.status.success(), "{}", shown(&out));
    let calls = codex_mcp_calls(&out);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0]["status"], "failed", "{calls:#?}");
    assert_eq!(
        calls[0]["error"]["message"],
        "MCP tool call requires approval, but approval policy is never",
        "{calls:#?}"
    );
    let answered = run_tool_result(&stub.exchanges()).expect("the refusal as the tool result");
    assert!(answered.contains("requires approval"), "{answered}");
    let runs = d.ok("team.list", json!({}))["runs"].clone();
    assert_eq!(runs, json!([]), "crewd got a run");
}
