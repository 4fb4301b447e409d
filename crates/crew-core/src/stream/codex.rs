//! `codex exec --json`: argv and stream parser.
//!
//! Codex reports usage per turn (`turn.completed`), no cost and no model. The counts are the
//! thread's totals so far: a `codex exec resume` reports the resumed session's earlier turns
//! again, so a turn's usage is the totals less the thread's totals before it (`thread_total`,
//! from the earlier attempt's stream for a resumed one). Its `input_tokens` include the cached
//! ones, so `input` here is the uncached part and `cacheRead` the cached
//! part, the way pi counts them. An `agent_message` may be a preamble before more commands, so
//! it is never reported as final; `turn.completed` (→ `Finished`) ends the run.

use super::{
    add_usage, cut_chars, json_count, strip_cr, Launch, LaunchSpec, Outcome, StdinFrom,
    StreamParser, WorkerEvent, Writes, ASK_MCP_SERVER, ASK_TOOL, TOOL_ARGS_LIMIT,
};
use crate::resource::SystemPromptMode;
use crate::usage::Usage;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Stop reason given to `agent_message` items: codex does not say which one is the last.
const AGENT_MESSAGE: &str = "agent_message";

/// Started items remembered to avoid a second `ToolStart` at completion; bounded.
const MAX_OPEN_ITEMS: usize = 4096;

/// Flags of the user's own command that set the sandbox: crew then leaves it alone.
const SANDBOX_FLAGS: &[&str] = &[
    "-s",
    "--sandbox",
    "--full-auto",
    "--dangerously-bypass-approvals-and-sandbox",
];

/// What a command's output says when the sandbox kept it from writing.
const SANDBOX_REFUSALS: &[&str] = &["Read-only file system", "Operation not permitted"];

pub(super) fn launch(spec: &LaunchSpec) -> Launch {
    if spec.rpc {
        return super::codex_app::launch(spec);
    }
    let mut argv = spec.command.clone();
    if !names_exec(&spec.command) {
        argv.push("exec".into());
    }
    argv.push("--json".into());
    if let Some(model) = &spec.model {
        super::push_value(&mut argv, "--model", model);
    }
    argv.push("--skip-git-repo-check".into());
    if let Some(sandbox) = sandbox(spec) {
        argv.push("--sandbox".into());
        argv.push(sandbox.into());
    }
    argv.extend(config_args(spec));
    // The answer to a question continues the session that asked: `exec resume ID PROMPT`,
    // after exec's own options (its subcommand takes fewer of them: no `--sandbox`).
    if let Some(id) = &spec.session.resume {
        argv.push("resume".into());
        argv.push(id.clone());
    }
    // A long prompt is stdin (`-`), a regular file codex reads to its end.
    match &spec.prompt_file {
        Some(file) => {
            argv.push("-".into());
            Launch {
                stdin: StdinFrom::File(file.clone()),
                ..Launch::args(argv)
            }
        }
        None => {
            argv.push(spec.prompt.clone());
            Launch::args(argv)
        }
    }
}

/// The sandbox crew gives the worker, `None` when the user's own command sets one (live mode:
/// `app-server` takes no sandbox flags; `-c sandbox_mode=...` sets it there, and in exec mode
/// too: crewd sets it so inside its own box). The role's
/// write permission is the sandbox: codex's shell cannot be taken away, so a role that may not
/// edit files runs read-only.
pub(super) fn sandbox(spec: &LaunchSpec) -> Option<&'static str> {
    let user_sets_sandbox = spec.command.iter().skip(1).any(|a| {
        SANDBOX_FLAGS
            .iter()
            .any(|f| a == f || a.starts_with(&format!("{f}=")))
            || a.starts_with("sandbox_mode=")
    });
    if user_sets_sandbox {
        None
    } else if spec.edits_files() {
        Some("workspace-write")
    } else {
        Some("read-only")
    }
}

/// The `-c` overrides both modes pass (`codex exec` and `codex app-server`): effort, the
/// system prompt, crew's ask server.
pub(super) fn config_args(spec: &LaunchSpec) -> Vec<String> {
    let mut argv = Vec::new();
    if let Some(effort) = spec.effort.as_ref().or(spec.thinking.as_ref()) {
        if let Some(level) = codex_effort(effort) {
            argv.push("-c".into());
            argv.push(format!("model_reasoning_effort={}", toml_string(level)));
        }
    }
    // `replace` swaps codex's base instructions for the agent's (a file); `append` adds them
    // as a developer message after codex's own.
    if !spec.system_prompt.is_empty() {
        argv.push("-c".into());
        argv.push(match (spec.system_prompt_mode, &spec.system_prompt_file) {
            (SystemPromptMode::Replace, Some(file)) => {
                format!("model_instructions_file={}", toml_string(file))
            }
            _ => format!(
                "developer_instructions={}",
                toml_string(&spec.system_prompt)
            ),
        });
    }
    // crew's ask server, beside the user's own MCP servers, its one tool approved (`codex
    // exec` runs with approval policy `never`: a tool that needs an approval fails).
    if let Some((command, args)) = spec
        .session
        .ask_server
        .as_ref()
        .and_then(|s| s.split_first())
    {
        let key = format!("mcp_servers.{ASK_MCP_SERVER}");
        let args: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
        argv.extend([
            "-c".into(),
            format!("{key}.command={}", toml_string(command)),
            "-c".into(),
            format!("{key}.args=[{}]", args.join(", ")),
            "-c".into(),
            format!("{key}.tools.{ASK_TOOL}.approval_mode=\"approve\""),
        ]);
    }
    argv
}

/// True when the user's command names codex's `exec` subcommand.
pub(super) fn names_exec(command: &[String]) -> bool {
    command.iter().skip(1).any(|a| a == "exec")
}

/// codex's `model_reasoning_effort` values; pi's thinking levels map onto them.
fn codex_effort(level: &str) -> Option<&'static str> {
    match level {
        "off" | "none" => Some("none"),
        "minimal" => Some("minimal"),
        "low" => Some("low"),
        "medium" => Some("medium"),
        "high" => Some("high"),
        "xhigh" | "max" => Some("xhigh"),
        _ => None,
    }
}

/// `s` as a TOML basic string (a `-c key=value` value is parsed as TOML).
pub(super) fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(super) fn policy_gaps(tools: &[String]) -> Vec<String> {
    if tools.iter().any(|t| t == "bash") {
        Vec::new()
    } else {
        vec![format!(
            "codex: its shell cannot be turned off, so the role's tool list ({}) is not enforced; only its sandbox is ({})",
            if tools.is_empty() { "none".to_owned() } else { tools.join(", ") },
            if super::edits_files(tools) { "workspace-write" } else { "read-only" },
        )]
    }
}

#[derive(Debug, Default)]
pub(crate) struct CodexParser {
    usage: Usage,
    writes: Writes,
    last_text: Option<String>,
    turn_failed: Option<String>,
    stream_error: Option<String>,
    completed: bool,
    open_items: HashSet<String>,
    /// The `thread_id` of `thread.started` (`codex exec resume ID` continues it).
    session_id: Option<String>,
    /// The thread's usage totals as of its last `turn.completed` (before this stream: those
    /// of the attempt it resumes).
    thread_total: Usage,
}

impl CodexParser {
    /// The last non-empty agent message so far.
    pub(super) fn last_text(&self) -> Option<&String> {
        self.last_text.as_ref()
    }
    /// The file-changing calls seen so far.
    pub(super) fn writes(&self) -> Writes {
        self.writes
    }
    /// A parser for an attempt that resumes a thread whose totals were `before`.
    pub(crate) fn resuming(before: Usage) -> CodexParser {
        CodexParser {
            thread_total: before,
            ..Default::default()
        }
    }
}

/// The thread's usage totals a codex stream ended with (its last `turn.completed`): what an
/// attempt that resumes the thread starts from.
pub(crate) fn thread_total(stream: &str) -> Usage {
    let mut p = CodexParser::default();
    for line in stream.lines() {
        p.feed_line(line);
    }
    p.thread_total
}

impl CodexParser {
    pub(super) fn on_item(
        &mut self,
        item: &Map<String, Value>,
        completed: bool,
    ) -> Vec<WorkerEvent> {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind == "agent_message" {
            if !completed {
                return Vec::new();
            }
            let text = item
                .get("text")
                .and_then(Value::as_str)
                .filter(|t| !t.trim().is_empty())
                .map(str::to_owned);
            if text.is_some() {
                self.last_text.clone_from(&text);
            }
            return vec![WorkerEvent::AssistantMessage {
                text,
                model: None,
                usage: Usage::default(),
                stop_reason: Some(AGENT_MESSAGE.to_owned()),
                error: None,
            }];
        }
        let Some((name, args)) = tool_of(kind, item) else {
            return Vec::new();
        };
        let id = item.get("id").and_then(Value::as_str).map(str::to_owned);
        let mut events = Vec::new();
        let was_open = id.as_ref().is_some_and(|id| self.open_items.remove(id));
        if !was_open {
            events.push(WorkerEvent::ToolStart {
                name: name.clone(),
                args: cut_chars(&args, TOOL_ARGS_LIMIT),
            });
            events.extend(ask_of(kind, item));
        }
        if completed {
            if kind == "file_change" {
                self.writes.tried = self.writes.tried.saturating_add(1);
            }
            if let Some((message, write)) = refusal(kind, item) {
                if write {
                    if kind != "file_change" {
                        self.writes.tried = self.writes.tried.saturating_add(1);
                    }
                    self.writes.refused = self.writes.refused.saturating_add(1);
                }
                events.push(WorkerEvent::Refused {
                    tool: name.clone(),
                    message,
                    write,
                });
            }
            events.push(WorkerEvent::ToolEnd {
                name,
                ok: item_ok(item),
            });
        } else if let Some(id) = id {
            if self.open_items.len() < MAX_OPEN_ITEMS {
                self.open_items.insert(id);
            }
        }
        events
    }
}

/// The tool-like items: their display name and arguments.
fn tool_of(kind: &str, item: &Map<String, Value>) -> Option<(String, String)> {
    let text = |key: &str| match item.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    match kind {
        "command_execution" => Some((kind.to_owned(), text("command"))),
        "file_change" => Some((kind.to_owned(), text("changes"))),
        "web_search" => Some((kind.to_owned(), text("query"))),
        "mcp_tool_call" => {
            let tool = item.get("tool").and_then(Value::as_str).unwrap_or(kind);
            Some((tool.to_owned(), text("arguments")))
        }
        _ => None,
    }
}

/// A call of crew's ask tool (an `mcp_tool_call` of its server) is the question; its result
/// only tells the model to end its turn.
fn ask_of(kind: &str, item: &Map<String, Value>) -> Option<WorkerEvent> {
    let str_of = |k: &str| item.get(k).and_then(Value::as_str);
    if kind != "mcp_tool_call" || str_of("server") != Some(ASK_MCP_SERVER) {
        return None;
    }
    if str_of("tool") != Some(ASK_TOOL) {
        return None;
    }
    // The arguments as an object, or as the JSON text of one.
    let question = match item.get("arguments")? {
        Value::String(s) => serde_json::from_str::<Value>(s)
            .ok()?
            .get("question")?
            .as_str()?
            .to_owned(),
        args => args.get("question")?.as_str()?.to_owned(),
    };
    Some(WorkerEvent::Ask { question })
}

/// A completed item that codex's policy turned down: a declined or failed file change, a
/// declined command, or a command the sandbox kept from writing. `(message, is a write)`.
fn refusal(kind: &str, item: &Map<String, Value>) -> Option<(String, bool)> {
    let status = item
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match (kind, status) {
        ("file_change", "failed") => Some(("the file change failed".into(), true)),
        ("file_change", "declined") => Some(("the file change was declined".into(), true)),
        ("command_execution", "declined") => Some(("the command was declined".into(), false)),
        ("command_execution", _) => {
            let output = item
                .get("aggregated_output")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let line = output
                .lines()
                .find(|l| SANDBOX_REFUSALS.iter().any(|r| l.contains(r)))?;
            Some((cut_chars(line.trim(), 500), true))
        }
        _ => None,
    }
}

fn item_ok(item: &Map<String, Value>) -> bool {
    let status_ok = matches!(
        item.get("status").and_then(Value::as_str),
        None | Some("completed")
    );
    let exit_ok = match item.get("exit_code") {
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        _ => true,
    };
    status_ok && exit_ok && item.get("error").is_none_or(Value::is_null)
}

pub(super) fn error_message(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => match o.get("message") {
            Some(Value::String(s)) => s.clone(),
            _ => Value::Object(o.clone()).to_string(),
        },
        Some(other) => other.to_string(),
        None => "codex reported an error".to_owned(),
    }
}

impl StreamParser for CodexParser {
    fn feed_line(&mut self, line: &str) -> Vec<WorkerEvent> {
        let Ok(Value::Object(event)) = serde_json::from_str::<Value>(strip_cr(line)) else {
            return Vec::new();
        };
        let item = match event.get("item") {
            Some(Value::Object(item)) => Some(item),
            _ => None,
        };
        match (
            event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            item,
        ) {
            ("thread.started", _) => {
                let session_id = event
                    .get("thread_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if session_id.is_some() {
                    self.session_id.clone_from(&session_id);
                }
                vec![WorkerEvent::Started {
                    session_id,
                    model: None,
                }]
            }
            ("item.started", Some(item)) => self.on_item(item, false),
            ("item.completed", Some(item)) => self.on_item(item, true),
            ("turn.completed", _) => {
                let u = event.get("usage");
                let field = |k: &str| json_count(u.and_then(|u| u.get(k)));
                let total = thread_usage(
                    field("input_tokens"),
                    field("cached_input_tokens"),
                    field("cache_write_input_tokens"),
                    field("output_tokens"),
                );
                let turn = Usage {
                    turns: 1,
                    ..total.tokens_since(&self.thread_total)
                };
                self.thread_total = total;
                add_usage(&mut self.usage, &turn);
                self.completed = true;
                vec![WorkerEvent::TurnEnd, WorkerEvent::Finished]
            }
            ("turn.failed", _) => {
                let message = error_message(event.get("error"));
                self.turn_failed = Some(message.clone());
                vec![WorkerEvent::Error { message }]
            }
            ("error", _) => {
                let message = error_message(event.get("message"));
                self.stream_error = Some(message.clone());
                vec![WorkerEvent::Error { message }]
            }
            _ => Vec::new(),
        }
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn outcome(&self) -> Outcome {
        // A stream `error` may be a transient reconnect notice; it is the outcome only when the
        // turn never completed.
        let error = self.turn_failed.clone().or_else(|| {
            (!self.completed)
                .then(|| self.stream_error.clone())
                .flatten()
        });
        // A message before a failed turn is a preamble, not an answer.
        let final_text = match self.turn_failed {
            Some(_) => None,
            None => self.last_text.clone(),
        };
        Outcome {
            final_text,
            usage: self.usage,
            model: None,
            error,
            retryable: None,
            writes: self.writes,
            session_id: self.session_id.clone(),
        }
    }
}

/// A codex thread's token totals as crew counts them: codex's input holds the cached and the
/// cache-written tokens (counted apart here), its output the reasoning ones. The same in
/// `codex exec`'s `turn.completed` and the app-server's token-usage notification.
pub(super) fn thread_usage(input: u64, cached: u64, cache_write: u64, output: u64) -> Usage {
    Usage {
        input: input.saturating_sub(cached).saturating_sub(cache_write),
        output,
        cache_read: cached,
        cache_write,
        cost: 0.0,
        turns: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::SystemPromptMode;
    use crate::stream::{build_launch, parser, AdapterKind, ARGV_PROMPT_LIMIT};

    fn spec(command: &[&str], model: Option<&str>) -> LaunchSpec {
        LaunchSpec {
            command: command.iter().map(|s| s.to_string()).collect(),
            prompt: "Goal: fix it".into(),
            prompt_file: None,
            system_prompt: "You are a reviewer.".into(),
            system_prompt_mode: SystemPromptMode::Replace,
            system_prompt_file: None,
            model: model.map(str::to_owned),
            thinking: None,
            tools: vec!["read".into(), "bash".into()],
            rpc: false,
            prompt_via: Default::default(),
            effort: None,
            fallback_models: vec![],
            skill_dirs: Vec::new(),
            session: Default::default(),
            cwd: "/work/repo".into(),
        }
    }

    #[test]
    fn argv_table() {
        let mut writer = spec(&["codex"], Some("gpt-5-codex"));
        writer.tools = ["read", "bash", "edit", "write"].map(String::from).to_vec();
        writer.system_prompt_file = Some("/run/prompts/system-ab.md".into());
        writer.thinking = Some("high".into());
        let mut append = spec(&["codex", "exec", "--full-auto"], None);
        append.system_prompt = "Be \"terse\".\nReally.".into();
        append.system_prompt_mode = SystemPromptMode::Append;
        let mut long = spec(&["codex"], None);
        long.prompt = "x".repeat(ARGV_PROMPT_LIMIT + 1);
        long.prompt_file = Some("/run/prompts/01_a.md".into());
        long.system_prompt = String::new();
        let ask_server = Some(
            ["/opt/crew/crewctl", "mcp", "--ask"]
                .map(String::from)
                .to_vec(),
        );
        let mut asking = spec(&["codex"], None);
        asking.system_prompt = String::new();
        asking.session.ask_server = ask_server.clone();
        let mut resumed = spec(&["codex"], Some("gpt-5-codex"));
        resumed.system_prompt = String::new();
        resumed.tools = ["read", "bash", "edit"].map(String::from).to_vec();
        resumed.prompt = "x".repeat(ARGV_PROMPT_LIMIT + 1);
        resumed.prompt_file = Some("/run/prompts/01_a.md".into());
        resumed.session.ask_server = ask_server;
        resumed.session.resume = Some("01a2380a-e5d4-7e81-af46-4210bd8b4cf3".into());
        let table: Vec<(&str, LaunchSpec, Vec<&str>, StdinFrom)> = vec![
            (
                "read-only role, no system prompt file",
                spec(&["codex"], None),
                vec![
                    "codex",
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "--sandbox",
                    "read-only",
                    "-c",
                    "developer_instructions=\"You are a reviewer.\"",
                    "Goal: fix it",
                ],
                StdinFrom::Null,
            ),
            (
                "writing role, model, effort, replaced base instructions",
                writer,
                vec![
                    "codex",
                    "exec",
                    "--json",
                    "--model",
                    "gpt-5-codex",
                    "--skip-git-repo-check",
                    "--sandbox",
                    "workspace-write",
                    "-c",
                    "model_reasoning_effort=\"high\"",
                    "-c",
                    "model_instructions_file=\"/run/prompts/system-ab.md\"",
                    "Goal: fix it",
                ],
                StdinFrom::Null,
            ),
            (
                "the user's sandbox wins; appended system prompt as TOML",
                append,
                vec![
                    "codex",
                    "exec",
                    "--full-auto",
                    "--json",
                    "--skip-git-repo-check",
                    "-c",
                    "developer_instructions=\"Be \\\"terse\\\".\\nReally.\"",
                    "Goal: fix it",
                ],
                StdinFrom::Null,
            ),
            (
                "a long prompt is stdin",
                long,
                vec![
                    "codex",
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "--sandbox",
                    "read-only",
                    "-",
                ],
                StdinFrom::File("/run/prompts/01_a.md".into()),
            ),
            (
                "crew's ask server",
                asking,
                vec![
                    "codex",
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "--sandbox",
                    "read-only",
                    "-c",
                    "mcp_servers.crew_ask.command=\"/opt/crew/crewctl\"",
                    "-c",
                    "mcp_servers.crew_ask.args=[\"mcp\", \"--ask\"]",
                    "-c",
                    "mcp_servers.crew_ask.tools.ask_user.approval_mode=\"approve\"",
                    "Goal: fix it",
                ],
                StdinFrom::Null,
            ),
            (
                "the answer resumes the session: `resume ID` after exec's options, a long answer on stdin",
                resumed,
                vec![
                    "codex",
                    "exec",
                    "--json",
                    "--model",
                    "gpt-5-codex",
                    "--skip-git-repo-check",
                    "--sandbox",
                    "workspace-write",
                    "-c",
                    "mcp_servers.crew_ask.command=\"/opt/crew/crewctl\"",
                    "-c",
                    "mcp_servers.crew_ask.args=[\"mcp\", \"--ask\"]",
                    "-c",
                    "mcp_servers.crew_ask.tools.ask_user.approval_mode=\"approve\"",
                    "resume",
                    "01a2380a-e5d4-7e81-af46-4210bd8b4cf3",
                    "-",
                ],
                StdinFrom::File("/run/prompts/01_a.md".into()),
            ),
        ];
        for (name, spec, argv, stdin) in table {
            let launch = build_launch(AdapterKind::Codex, &spec);
            assert_eq!(launch.argv, argv, "{name}");
            assert_eq!(launch.stdin, stdin, "{name}");
            assert!(launch.env.is_empty(), "{name}");
        }
    }

    #[test]
    fn toml_strings_round_trip() {
        for s in [
            "plain",
            "q\"uo\\te",
            "line\nbreak\ttab\r",
            "ctl\u{1}\u{7f}",
            "ünï 🦀",
        ] {
            let v: toml_check::Value = toml_check::parse(&toml_string(s));
            assert_eq!(v, s);
        }
    }

    /// Just enough of a TOML basic-string reader to check `toml_string` (crew-core has no
    /// TOML dependency).
    mod toml_check {
        pub type Value = String;
        pub fn parse(s: &str) -> Value {
            let inner = s
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .unwrap();
            let mut out = String::new();
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                assert!(c != '"' && !c.is_control(), "unescaped {c:?} in {s}");
                if c != '\\' {
                    out.push(c);
                    continue;
                }
                match chars.next().unwrap() {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    'u' => {
                        let hex: String = chars.by_ref().take(4).collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                    }
                    other => panic!("bad escape {other}"),
                }
            }
            out
        }
    }

    #[test]
    fn sandbox_refusals_are_reported() {
        let stream = [
            r#"{"type":"item.completed","item":{"id":"1","type":"command_execution","command":"bash -lc 'echo hi > a.txt'","aggregated_output":"bash: line 1: a.txt: Read-only file system\n","exit_code":1,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"2","type":"file_change","changes":[{"path":"b.txt","kind":"add"}],"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"3","type":"command_execution","command":"cargo test","aggregated_output":"test failed","exit_code":101,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"4","type":"agent_message","text":"could not write"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":10,"cache_write_input_tokens":5,"output_tokens":20,"reasoning_output_tokens":6}}"#,
        ]
        .join("\n");
        let (events, outcome) = run(&stream);
        let refused: Vec<(&str, &str, bool)> = events
            .iter()
            .filter_map(|e| match e {
                WorkerEvent::Refused {
                    tool,
                    message,
                    write,
                } => Some((tool.as_str(), message.as_str(), *write)),
                _ => None,
            })
            .collect();
        assert_eq!(
            refused,
            [
                (
                    "command_execution",
                    "bash: line 1: a.txt: Read-only file system",
                    true
                ),
                ("file_change", "the file change failed", true),
            ]
        );
        assert_eq!(
            outcome.writes,
            Writes {
                tried: 2,
                refused: 2
            }
        );
        let u = outcome.usage;
        // Codex's input holds the cached and the cache-written tokens; output holds reasoning.
        assert_eq!(
            (u.input, u.output, u.cache_read, u.cache_write),
            (85, 20, 10, 5)
        );
    }

    fn run(stream: &str) -> (Vec<WorkerEvent>, Outcome) {
        let mut p = parser(AdapterKind::Codex);
        let mut events = Vec::new();
        for line in stream.lines() {
            events.extend(p.feed_line(line));
        }
        assert_eq!(p.usage(), p.outcome().usage);
        (events, p.outcome())
    }

    /// A real Codex 0.171.0 stream (stub model): the call of crew's ask tool is the question,
    /// once; the turn then ends with the agent's reply.
    #[test]
    fn a_call_of_crews_ask_tool_is_the_question() {
        let (events, outcome) = run(include_str!("fixtures/codex_ask.jsonl"));
        let asks: Vec<&WorkerEvent> = events
            .iter()
            .filter(|e| matches!(e, WorkerEvent::Ask { .. }))
            .collect();
        assert_eq!(
            asks,
            [&WorkerEvent::Ask {
                question: "Which database should the service use?".into()
            }]
        );
        assert_eq!(
            outcome.session_id.as_deref(),
            Some("01a2380a-e5d4-7e81-af46-4210bd8b4cf3")
        );
        assert_eq!(
            outcome.final_text.as_deref(),
            Some("STUB-WAITING: I asked the user which database to use.")
        );
        // Another server's `ask_user`, or another tool of crew's server, asks nothing.
        for item in [
            r#"{"type":"item.started","item":{"id":"i","type":"mcp_tool_call","server":"other","tool":"ask_user","arguments":{"question":"q"}}}"#,
            r#"{"type":"item.started","item":{"id":"i","type":"mcp_tool_call","server":"crew_ask","tool":"other","arguments":{"question":"q"}}}"#,
            r#"{"type":"item.started","item":{"id":"i","type":"mcp_tool_call","server":"crew_ask","tool":"ask_user","arguments":{"question":5}}}"#,
        ] {
            let (events, _) = run(item);
            assert!(
                !events.iter().any(|e| matches!(e, WorkerEvent::Ask { .. })),
                "{item}"
            );
        }
        // Arguments as JSON text, and an item seen only completed, still ask once.
        let (events, _) = run(
            r#"{"type":"item.completed","item":{"id":"i","type":"mcp_tool_call","server":"crew_ask","tool":"ask_user","arguments":"{\"question\":\"q?\"}"}}"#,
        );
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, WorkerEvent::Ask { question } if question == "q?"))
                .count(),
            1
        );
    }

    /// `codex exec resume` reports the thread's totals, the asked attempt's turns included:
    /// the resumed attempt counts only its own (stub: 1021 uncached input, 3 cached, 23 out).
    #[test]
    fn a_resumed_thread_counts_only_its_own_usage() {
        let asked = include_str!("fixtures/codex_ask.jsonl");
        let resumed = include_str!("fixtures/codex_resumed.jsonl");
        let mut p = crate::stream::resuming_parser(AdapterKind::Codex, asked);
        for line in resumed.lines() {
            p.feed_line(line);
        }
        let u = p.outcome().usage;
        assert_eq!((u.input, u.output, u.cache_read, u.turns), (1021, 23, 3, 1));
        assert_eq!(
            p.outcome().final_text.as_deref(),
            Some("STUB-FINAL: the service uses Postgres 16.")
        );
        assert_eq!(
            p.outcome().session_id.as_deref(),
            Some("01a2380a-e5d4-7e81-af46-4210bd8b4cf3"),
            "the same thread"
        );
        // Read fresh, the resumed stream would count the asked attempt's turns again.
        let (_, fresh) = run(resumed);
        assert_eq!(fresh.usage.input, 3042);
        // Recovery reads a dead worker's transcript the same way, given the asked stream.
        let recovered =
            crate::stream::transcript_usage(AdapterKind::Codex, false, resumed, Some(asked));
        assert_eq!((recovered.input, recovered.output), (1021, 23));
    }

    #[test]
    fn parses_recorded_streams() {
        struct Case {
            name: &'static str,
            stream: String,
            final_text: Option<&'static str>,
            tokens: (u64, u64, u64, u64),
            error: Option<&'static str>,
            tools: &'static [(&'static str, bool)],
            errors: usize,
            finished: usize,
        }
        let basic = include_str!("fixtures/codex_basic.jsonl");
        let table = vec![
            Case {
                name: "basic",
                stream: basic.to_owned(),
                final_text: Some("Fixed the loop bound; `cargo test` passes now."),
                tokens: (315, 122, 24448, 1),
                error: None,
                tools: &[
                    ("command_execution", true),
                    ("command_execution", false),
                    ("file_change", true),
                    ("read_file", true),
                ],
                errors: 1,
                finished: 1,
            },
            Case {
                name: "CRLF, garbage and a huge line",
                stream: basic.replace('\n', "\r\n{{{ not json\r\n")
                    + &format!("{{\"type\":\"item.completed\",\"item\":{{\"id\":\"x\",\"type\":\"reasoning\",\"text\":\"{}\"}}}}\n", "r".repeat(2 << 20)),
                final_text: Some("Fixed the loop bound; `cargo test` passes now."),
                tokens: (315, 122, 24448, 1),
                error: None,
                tools: &[
                    ("command_execution", true),
                    ("command_execution", false),
                    ("file_change", true),
                    ("read_file", true),
                ],
                errors: 1,
                finished: 1,
            },
            Case {
                name: "turn failed",
                stream: include_str!("fixtures/codex_failed.jsonl").to_owned(),
                final_text: None,
                tokens: (0, 0, 0, 0),
                error: Some("exceeded retry limit, last status: 429 Too Many Requests"),
                tools: &[],
                errors: 2,
                finished: 0,
            },
            Case {
                name: "error without turn end",
                stream: "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n{\"type\":\"error\",\"message\":\"unexpected status 401 Unauthorized\"}\n".to_owned(),
                final_text: None,
                tokens: (0, 0, 0, 0),
                error: Some("unexpected status 401 Unauthorized"),
                tools: &[],
                errors: 1,
                finished: 0,
            },
        ];
        for case in table {
            let name = case.name;
            let (events, outcome) = run(&case.stream);
            assert_eq!(outcome.final_text.as_deref(), case.final_text, "{name}");
            let u = outcome.usage;
            assert_eq!(
                (u.input, u.output, u.cache_read, u.turns),
                case.tokens,
                "{name}"
            );
            assert_eq!(u.cost, 0.0, "{name}");
            assert_eq!(outcome.model, None, "{name}");
            assert_eq!(outcome.error.as_deref(), case.error, "{name}");
            let ends: Vec<(&str, bool)> = events
                .iter()
                .filter_map(|e| match e {
                    WorkerEvent::ToolEnd { name, ok } => Some((name.as_str(), *ok)),
                    _ => None,
                })
                .collect();
            assert_eq!(ends, case.tools, "{name}");
            let starts = events
                .iter()
                .filter(|e| matches!(e, WorkerEvent::ToolStart { .. }))
                .count();
            assert_eq!(starts, case.tools.len(), "{name}");
            assert_eq!(
                events
                    .iter()
                    .filter(|e| matches!(e, WorkerEvent::Error { .. }))
                    .count(),
                case.errors,
                "{name}"
            );
            assert_eq!(
                events
                    .iter()
                    .filter(|e| matches!(e, WorkerEvent::Finished))
                    .count(),
                case.finished,
                "{name}"
            );
            assert_eq!(
                events.iter().filter(|e| e.is_final()).count(),
                case.finished,
                "{name}"
            );
        }
    }

    #[test]
    fn odd_shapes_never_panic() {
        let mut p = parser(AdapterKind::Codex);
        for line in [
            "",
            "{}",
            r#"{"type":"item.completed","item":"x"}"#,
            r#"{"type":"item.completed","item":{"type":"command_execution","exit_code":"zero","id":7}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":9}}"#,
            r#"{"type":"turn.failed","error":[1]}"#,
            r#"{"type":"error"}"#,
        ] {
            p.feed_line(line);
        }
        assert_eq!((p.usage().input, p.usage().cache_read), (0, 9));
        assert_eq!(p.outcome().error.as_deref(), Some("[1]"));
    }
}
