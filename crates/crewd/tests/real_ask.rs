//! Issue 16 item 8 on Claude Code, Codex, Gemini CLI and opencode (pinned in
//! `tests/agents/package.json`), each pointed at a stub model server on 127.0.0.1: the agent
//! asks through crew's ask server (`crewctl mcp --ask`, which crewd gives each CLI), the task
//! goes `waiting` with the question, `team.respond` answers, and the answer continues the CLI's
//! own session (`claude -p --resume`, `codex exec resume`, `gemini --resume`, `opencode run
//! --session`): the stub's request after the answer carries the earlier conversation (the task
//! prompt once, the question, the agent's reply after the ask tool's result) and the answer;
//! the task completes with the stub's final text.
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

const QUESTION: &str = "Which database should the service use?";
const WAITING: &str = "STUB-WAITING: I asked the user which database to use.";
const ANSWER: &str = "Postgres, version 16";
const FINAL: &str = "STUB-FINAL: the service uses Postgres 16.";
/// In the task's text, so the resumed request can be told to carry the first prompt.
const TASK_MARK: &str = "Pick the storage for the service (mark-7f3a).";

/// A name of crew's ask tool in a request: `ask_user` (Gemini CLI: `ask_question`) with the
/// CLI's prefix for crew's ask server (Codex: a namespace of its own).
fn is_ask(name: &str) -> bool {
    [
        "mcp__crew_ask__ask_user",
        "mcp_crew_ask_ask_question",
        "crew_ask_ask_user",
        "ask_user",
    ]
    .contains(&name)
}

/// The offered ask tool, as the stub must call it.
fn ask_tool(e: &Exchange) -> Option<(Option<String>, String)> {
    offered_tools(&e.body)
        .into_iter()
        .find(|(ns, n)| is_ask(n) && (n != "ask_user" || ns.is_some()))
}

/// The model: asks first; after the ask tool's result, ends its turn saying so; once the answer
/// came, gives the final text.
fn script(e: &Exchange) -> Reply {
    if e.texts().contains(ANSWER) {
        return Reply::Text(FINAL.into());
    }
    if last_call(&e.body).is_some_and(|n| is_ask(&n)) {
        return Reply::Text(WAITING.into());
    }
    let input = json!({"question": QUESTION});
    match ask_tool(e) {
        Some((Some(namespace), name)) => Reply::NamespacedTool {
            namespace,
            name,
            input,
        },
        Some((None, name)) => Reply::Tool { name, input },
        None => Reply::Text("STUB-SIDE-ANSWER".into()),
    }
}

/// The stub saw: the ask call, the turn's end after its result, and one request after the
/// answer that carries the whole earlier conversation, the task prompt only once.
fn check_resumed(exchanges: &[Exchange]) {
    let replies: Vec<&Reply> = exchanges.iter().map(|e| &e.reply).collect();
    assert_eq!(exchanges.len(), 3, "requests: {exchanges:#?}");
    assert!(
        matches!(
            replies[0],
            Reply::Tool { .. } | Reply::NamespacedTool { .. }
        ),
        "{replies:?}"
    );
    assert_eq!(replies[1], &Reply::Text(WAITING.into()));
    assert_eq!(replies[2], &Reply::Text(FINAL.into()));
    assert!(
        exchanges[0].texts().contains(TASK_MARK),
        "{:#}",
        exchanges[0].body
    );
    let texts = exchanges[2].texts();
    for (what, needle) in [
        ("the answer", ANSWER),
        ("the first prompt", TASK_MARK),
        ("the question (the tool call)", QUESTION),
        ("the agent's reply after the ask", WAITING),
    ] {
        assert!(
            texts.contains(needle),
            "the resumed request lacks {what}: {:#}",
            exchanges[2].body
        );
    }
    // The same conversation: the task prompt is there once, not rendered again with the answer.
    assert_eq!(
        texts.matches(TASK_MARK).count(),
        1,
        "a fresh prompt, not the session: {texts}"
    );
}

/// The worker's stdout of each attempt (`team.logs`), for a failed assertion's message.
fn transcripts(d: &Daemon, run: &str) -> String {
    let dir = d.state_dir.join("runs").join(run).join("transcripts");
    let mut out = String::new();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        out.push_str(&format!("== {}\n", entry.path().display()));
        out.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    out
}

/// The task took two attempts (the ask, the answer), ends with the stub's final text, and its
/// usage is what the stub sent: the resumed session's earlier turns are not counted again.
/// `turns`: Claude Code counts a turn per model call, Codex one per `codex exec`.
fn check_task(d: &Daemon, run: &str, st: &Value, exchanges: &[Exchange], turns: u64) {
    let t = Daemon::task(st, "01_only");
    assert_eq!(t["attempts"], 2, "{st:#}\n{}", transcripts(d, run));
    assert_eq!(result_text(d, run, t).trim(), FINAL);
    let sum = |f: fn(&model_stub::Sent) -> u64| exchanges.iter().map(|e| f(&e.sent)).sum::<u64>();
    let u = &t["usage"];
    assert_eq!(
        (
            u["input"].as_u64().unwrap(),
            u["output"].as_u64().unwrap(),
            u["cacheRead"].as_u64().unwrap(),
            u["turns"].as_u64().unwrap(),
        ),
        (
            sum(|s| s.input),
            sum(|s| s.output),
            sum(|s| s.cache_read),
            turns
        ),
        "usage {u}\n{}",
        transcripts(d, run)
    );
}

/// The one-step team on `params`' runtime asks, is answered and goes on (`ask_and_answer`);
/// the stub was offered crew's ask tool as `tool` and saw the session resumed; the task's
/// attempts, result and usage are checked with `turns` (see [`check_task`]).
fn asks_and_resumes(
    d: &Daemon,
    stub: &Stub,
    params: Value,
    tool: Option<(Option<String>, String)>,
    turns: u64,
) {
    let (run, st) = ask_and_answer(d, stub, params, TASK_MARK, QUESTION, ANSWER);
    let exchanges = stub.exchanges();
    assert!(stub.errors().is_empty(), "stub errors: {:?}", stub.errors());
    assert_eq!(ask_tool(&exchanges[0]), tool, "{:#}", exchanges[0].body);
    check_resumed(&exchanges);
    check_task(d, &run, &st, &exchanges, turns);
}

fn claude_daemon(stub: &Stub) -> Option<Daemon> {
    let claude = agent_bin("claude")?;
    crewctl_next_to_crewd();
    let env = claude_env(stub);
    let names: Vec<String> = env.iter().map(|(k, _)| format!("{k:?}")).collect();
    let config = format!(
        "no_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.claude]\nadapter = \"claude\"\ncommand = [{claude:?}]\nenv = [{}]\n",
        names.join(", "),
        claude = claude.display().to_string(),
    );
    Some(Daemon::start_with(Opts { config, env }))
}

#[test]
fn claude_code_asks_and_the_answer_resumes_its_session() {
    let stub = Stub::start(Wire::Anthropic, script);
    let Some(d) = claude_daemon(&stub) else {
        not_installed(
            "claude_code_asks_and_the_answer_resumes_its_session",
            "claude",
        );
    };
    // The ask tool is offered up front, not deferred behind Claude Code's tool search.
    asks_and_resumes(
        &d,
        &stub,
        json!({"runtime": "claude", "model": MODEL}),
        Some((None, "mcp__crew_ask__ask_user".into())),
        3,
    );
}

fn codex_daemon(home: &tempfile::TempDir) -> Option<Daemon> {
    let codex = agent_bin("codex")?;
    crewctl_next_to_crewd();
    let env = vec![
        ("CODEX_HOME".to_string(), path_str(home.path()).to_string()),
        (
            "STUB_API_KEY".to_string(),
            "stub-key-not-secret".to_string(),
        ),
    ];
    let config = format!(
        "no_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
         [runtimes.codex]\nadapter = \"codex\"\ncommand = [{codex:?}]\n\
         env = [\"CODEX_HOME\", \"STUB_API_KEY\"]\n",
        codex = codex.display().to_string(),
    );
    Some(Daemon::start_with(Opts { config, env }))
}

#[test]
fn codex_asks_and_the_answer_resumes_its_session() {
    let stub = Stub::start(Wire::Responses, script);
    // A `CODEX_HOME` whose only provider is the stub: crew adds its ask server on the command
    // line, nothing in the config names it.
    let home = tempfile::Builder::new()
        .prefix("codex-home")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    std::fs::write(home.path().join("config.toml"), codex_provider_toml(&stub)).unwrap();
    let Some(d) = codex_daemon(&home) else {
        not_installed("codex_asks_and_the_answer_resumes_its_session", "codex");
    };
    asks_and_resumes(
        &d,
        &stub,
        json!({"runtime": "codex", "model": MODEL}),
        Some((Some("mcp__crew_ask".into()), "ask_user".into())),
        2,
    );
}

#[test]
fn gemini_cli_asks_and_the_answer_resumes_its_session() {
    let stub = Stub::start(Wire::Gemini, script);
    crewctl_next_to_crewd();
    // No MCP server is named in the workers' settings: crew adds its ask server in a Gemini
    // home of its own (GEMINI_CLI_HOME).
    let Some(d) = gemini_daemon(&stub, "", json!({})) else {
        not_installed(
            "gemini_cli_asks_and_the_answer_resumes_its_session",
            "gemini",
        );
    };
    asks_and_resumes(
        &d,
        &stub,
        json!({"runtime": "gemini", "model": MODEL}),
        Some((None, "mcp_crew_ask_ask_question".into())),
        3,
    );
}

#[test]
fn opencode_asks_and_the_answer_resumes_its_session() {
    let stub = Stub::start(Wire::Chat, script);
    let config = opencode_config(&stub);
    // The user's own configuration denies every tool: crew's ask tool is allowed by name.
    let file = config.path().join("opencode.json");
    let mut user: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    user["permission"] = json!({"*": "deny"});
    std::fs::write(&file, user.to_string()).unwrap();
    let Some(opencode) = agent_bin("opencode") else {
        not_installed(
            "opencode_asks_and_the_answer_resumes_its_session",
            "opencode",
        );
    };
    crewctl_next_to_crewd();
    let d = Daemon::start_with(Opts {
        config: format!(
            "no_output_timeout_ms = 60000\ntask_timeout_ms = 180000\n\
             [runtimes.opencode]\nadapter = \"opencode\"\ncommand = [{opencode:?}]\n\
             env = [\"OPENCODE_CONFIG\", \"OPENCODE_DISABLE_MODELS_FETCH\"]\n",
            opencode = opencode.display().to_string(),
        ),
        env: opencode_env(&config),
    });
    seed_opencode_plugin_dir(&d.home);
    // opencode counts a turn per model call.
    asks_and_resumes(
        &d,
        &stub,
        json!({"runtime": "opencode", "model": format!("stub/{MODEL}")}),
        Some((None, "crew_ask_ask_user".into())),
        3,
    );
}
