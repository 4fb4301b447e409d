//! `claude -p --output-format stream-json --verbose`: argv and stream parser.
//!
//! Claude Code writes one `assistant` line per content block, all carrying the same message id
//! and that message's usage so far; usage is therefore counted once per message id, by delta.
//! The `result` line is authoritative: final text, aggregate usage and `total_cost_usd`.
//! Text lines may be followed by tool use, so an `assistant` line is never reported as final;
//! `result` (→ `Finished`) is what ends the run.

use super::{
    add_usage, cut_chars, json_cost, json_count, status_retryable, strip_cr, Launch, LaunchSpec,
    Outcome, StdinFrom, StreamParser, WorkerEvent, Writes, ASK_MCP_SERVER, ASK_TOOL,
    TOOL_ARGS_LIMIT,
};
use crate::resource::SystemPromptMode;
use crate::usage::Usage;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// Stand-in stop reason for lines where Claude Code leaves `stop_reason` null (mid-message).
const STOP_REASON_UNKNOWN: &str = "unknown";

/// Claude Code labels its own error notices with this model name.
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// Pending tool ids kept to name `ToolEnd`s; a stream that never closes its tools cannot grow
/// the map without bound.
const MAX_PENDING_TOOLS: usize = 4096;

/// Flags of the user's own command that set the permission policy: crew then leaves it alone.
const PERMISSION_FLAGS: &[&str] = &[
    "--permission-mode",
    "--dangerously-skip-permissions",
    "--allow-dangerously-skip-permissions",
];

/// Claude Code's file-changing tools.
const WRITE_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit"];

/// crew's tool names as Claude Code's. `find` and `ls` are `Glob`; other names (a user's agent
/// may list `WebFetch`) pass as written.
fn claude_tools(tools: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tools {
        let name = match t.as_str() {
            "read" => "Read",
            "edit" => "Edit",
            "write" => "Write",
            "bash" => "Bash",
            "grep" => "Grep",
            "find" | "ls" => "Glob",
            other => other,
        };
        if !out.iter().any(|o| o == name) {
            out.push(name.to_owned());
        }
    }
    out
}

pub(super) fn launch(spec: &LaunchSpec) -> Launch {
    let mut argv = spec.command.clone();
    argv.extend(["-p", "--output-format", "stream-json", "--verbose"].map(String::from));
    // Message starts and deltas as they stream: the `assistant` lines carry a message's usage
    // as of its start (output 1), and the real output count is in its `message_delta`.
    argv.push("--include-partial-messages".into());
    // The answer to a question continues the session that asked (the prompt is the answer).
    if let Some(id) = &spec.session.resume {
        argv.push(format!("--resume={id}"));
    }
    if let Some(model) = &spec.model {
        super::push_value(&mut argv, "--model", model);
    }
    if !spec.fallback_models.is_empty() {
        super::push_value(
            &mut argv,
            "--fallback-model",
            &spec.fallback_models.join(","),
        );
    }
    if let Some(effort) = spec.effort.as_ref().or(spec.thinking.as_ref()) {
        if let Some(level) = claude_effort(effort) {
            argv.push("--effort".into());
            argv.push(level.into());
        }
    }
    // The role's tools are the only built-in tools the session has (`--tools`), all of them
    // pre-approved (`--allowedTools`: print mode cannot ask, so anything else is refused).
    // Both take several values: the `=` form keeps them from taking the prompt too.
    let tools = claude_tools(&spec.tools).join(",");
    argv.push(format!("--tools={tools}"));
    // crew's ask server: an MCP server beside the user's own (not `--strict-mcp-config`), its
    // tool loaded up front (`alwaysLoad`: never deferred behind Claude Code's tool search, which
    // a role's `--tools` may not even have) and pre-approved whatever the role.
    let mut allowed = tools.clone();
    if let Some(server) = &spec.session.ask_server {
        if let Some((command, args)) = server.split_first() {
            let config = serde_json::json!({"mcpServers": {ASK_MCP_SERVER: {
                "type": "stdio", "command": command, "args": args, "alwaysLoad": true,
            }}});
            argv.push(format!("--mcp-config={config}"));
            if !allowed.is_empty() {
                allowed.push(',');
            }
            allowed.push_str(&ask_tool_name());
        }
    }
    if !allowed.is_empty() {
        argv.push(format!("--allowedTools={allowed}"));
    }
    let user_sets_permissions = spec.command.iter().skip(1).any(|a| {
        PERMISSION_FLAGS
            .iter()
            .any(|f| a == f || a.starts_with(&format!("{f}=")))
    });
    if !user_sets_permissions {
        argv.push("--permission-mode".into());
        argv.push(
            if spec.edits_files() {
                "acceptEdits"
            } else {
                "dontAsk"
            }
            .into(),
        );
    }
    // claude takes the system prompt as text, not as a path.
    if !spec.system_prompt.is_empty() {
        argv.push(
            match spec.system_prompt_mode {
                SystemPromptMode::Replace => "--system-prompt",
                SystemPromptMode::Append => "--append-system-prompt",
            }
            .into(),
        );
        argv.push(spec.system_prompt.clone());
    }
    // Live mode: stdin is a pipe the daemon owns, the prompt its first user message and a steer
    // the next (Claude Code takes a message written while it works at its next model call).
    // The replays say when each message was taken: a `result` is the last only once every
    // message written was (see `live_input_is_acknowledged`). No argv prompt, so no argv limit.
    if spec.rpc {
        argv.extend(["--input-format", "stream-json", "--replay-user-messages"].map(String::from));
        return Launch {
            stdin: StdinFrom::Pipe,
            ..Launch::args(argv)
        };
    }
    // A long prompt is `claude -p` 's stdin (a regular file, read to its end): argv has a size
    // limit, stdin has none.
    match &spec.prompt_file {
        Some(file) => Launch {
            stdin: StdinFrom::File(file.clone()),
            ..Launch::args(argv)
        },
        None => {
            argv.push(spec.prompt.clone());
            Launch::args(argv)
        }
    }
}

/// A user message for `--input-format stream-json`: one JSON line, without its `\n`.
pub(super) fn user_message_line(text: &str) -> String {
    serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
    })
    .to_string()
}

/// What Claude Code calls crew's ask tool: `mcp__<server>__<tool>`.
fn ask_tool_name() -> String {
    format!("mcp__{ASK_MCP_SERVER}__{ASK_TOOL}")
}

/// Claude Code's `--effort` levels; pi's thinking levels map onto them.
fn claude_effort(level: &str) -> Option<&'static str> {
    match level {
        "minimal" | "low" => Some("low"),
        "medium" => Some("medium"),
        "high" => Some("high"),
        "xhigh" => Some("xhigh"),
        "max" => Some("max"),
        _ => None,
    }
}

pub(super) fn policy_gaps(tools: &[String]) -> Vec<String> {
    if tools.iter().any(|t| t == "bash") && !super::edits_files(tools) {
        // Such a role (a verifier, a reviewer) runs commands to check the work and is not
        // meant to edit: say that, not that it "may write".
        vec!["claude: a role that runs commands to check the work but is not meant to edit: Claude Code withholds its edit and write tools, but cannot keep Bash from changing files".into()]
    } else {
        Vec::new()
    }
}

#[derive(Debug, Default)]
pub(crate) struct ClaudeParser {
    /// Live usage: Σ over distinct assistant message ids.
    usage: Usage,
    /// The message being streamed and the usage already counted for it.
    current_id: Option<String>,
    current_usage: Usage,
    model: Option<String>,
    last_text: Option<String>,
    result_text: Option<String>,
    error: Option<String>,
    retryable: Option<bool>,
    tools: HashMap<String, String>,
    /// Tool calls already reported as refused (a denial shows up to three times: a `system`
    /// notice, the tool result, the `result` line's list).
    refused: HashSet<String>,
    writes: Writes,
    /// Assistant output since the last `TurnEnd`.
    open_turn: bool,
    finished: bool,
    /// The `session_id` of the init line (`claude -p --resume ID` continues it).
    session_id: Option<String>,
}

impl ClaudeParser {
    /// Count `seen` (a message's usage so far) once per message id, by delta. A message
    /// without an id counts as a new one.
    fn account(&mut self, id: Option<String>, seen: Usage) -> Usage {
        let delta = if id.is_some() && id == self.current_id {
            let delta = seen.tokens_since(&self.current_usage);
            self.current_usage = max_usage(&self.current_usage, &seen);
            delta
        } else {
            self.current_id = id;
            self.current_usage = seen;
            seen
        };
        add_usage(&mut self.usage, &delta);
        delta
    }

    /// `--include-partial-messages` lines: the raw API stream. Only usage is read here; text
    /// and tools come whole in the `assistant` lines.
    fn on_stream_event(&mut self, event: &Map<String, Value>) {
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                if let Some(Value::Object(m)) = event.get("message") {
                    if m.get("model").and_then(Value::as_str) == Some(SYNTHETIC_MODEL) {
                        return;
                    }
                    let id = m.get("id").and_then(Value::as_str).map(str::to_owned);
                    self.account(id, message_usage(m.get("usage")));
                }
            }
            // Cumulative for the message being streamed: the real output count.
            Some("message_delta") if self.current_id.is_some() => {
                let seen = message_usage(event.get("usage"));
                let id = self.current_id.clone();
                self.account(id, seen);
            }
            _ => {}
        }
    }

    fn on_assistant(&mut self, message: &Map<String, Value>) -> Vec<WorkerEvent> {
        let mut events = Vec::new();
        let mut texts = Vec::new();
        let synthetic = message.get("model").and_then(Value::as_str) == Some(SYNTHETIC_MODEL);
        if let Some(Value::Array(parts)) = message.get("content") {
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = part.get("text").and_then(Value::as_str) {
                            texts.push(t);
                        }
                    }
                    Some("tool_use") => {
                        let name = part.get("name").and_then(Value::as_str).unwrap_or_default();
                        let args = part.get("input").map(Value::to_string).unwrap_or_default();
                        if WRITE_TOOLS.contains(&name) {
                            self.writes.tried = self.writes.tried.saturating_add(1);
                        }
                        if let Some(id) = part.get("id").and_then(Value::as_str) {
                            if self.tools.len() < MAX_PENDING_TOOLS {
                                self.tools.insert(id.to_owned(), name.to_owned());
                            }
                        }
                        events.push(WorkerEvent::ToolStart {
                            name: name.to_owned(),
                            args: cut_chars(&args, TOOL_ARGS_LIMIT),
                        });
                        // A call of crew's ask tool is the question (its result only tells
                        // the model to end its turn).
                        if name == ask_tool_name() {
                            let question = part
                                .get("input")
                                .and_then(|i| i.get("question"))
                                .and_then(Value::as_str);
                            if let Some(question) = question {
                                events.push(WorkerEvent::Ask {
                                    question: question.to_owned(),
                                });
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        let text = texts.join("\n");
        let text = (!text.trim().is_empty()).then_some(text);
        let model = message
            .get("model")
            .and_then(Value::as_str)
            .filter(|_| !synthetic)
            .map(str::to_owned);
        if model.is_some() {
            self.model.clone_from(&model);
        }
        if text.is_some() {
            self.last_text.clone_from(&text);
        }
        // Claude Code's own notices (an API error) are no model turn and cost nothing.
        let delta = if synthetic {
            Usage::default()
        } else {
            self.open_turn = true;
            let id = message.get("id").and_then(Value::as_str).map(str::to_owned);
            self.account(id, message_usage(message.get("usage")))
        };
        let stop_reason = message
            .get("stop_reason")
            .and_then(Value::as_str)
            .unwrap_or(STOP_REASON_UNKNOWN)
            .to_owned();
        events.push(WorkerEvent::AssistantMessage {
            text,
            model,
            usage: delta,
            stop_reason: Some(stop_reason),
            error: None,
        });
        events
    }

    /// A refused call of tool `id` (reported once, however many lines say so).
    fn refuse(
        &mut self,
        id: Option<&str>,
        tool: Option<&str>,
        message: &str,
    ) -> Option<WorkerEvent> {
        if let Some(id) = id {
            if self.refused.contains(id) {
                return None;
            }
            if self.refused.len() < MAX_PENDING_TOOLS {
                self.refused.insert(id.to_owned());
            }
        }
        let tool = tool
            .map(str::to_owned)
            .or_else(|| id.and_then(|id| self.tools.get(id).cloned()))
            .unwrap_or_default();
        let write = WRITE_TOOLS.contains(&tool.as_str());
        if write {
            self.writes.refused = self.writes.refused.saturating_add(1);
        }
        Some(WorkerEvent::Refused {
            tool,
            message: cut_chars(message, 500),
            write,
        })
    }

    fn on_user(
        &mut self,
        event: &Map<String, Value>,
        message: &Map<String, Value>,
    ) -> Vec<WorkerEvent> {
        // `--replay-user-messages`: a stdin message, echoed when Claude Code took it.
        if event.get("isReplay").and_then(Value::as_bool) == Some(true) {
            return vec![WorkerEvent::InputTaken];
        }
        let Some(Value::Array(parts)) = message.get("content") else {
            return Vec::new();
        };
        let rejected: HashSet<&str> = match event.get("tool_result_meta") {
            Some(Value::Array(meta)) => meta
                .iter()
                .filter(|m| {
                    m.get("non_execution_kind").and_then(Value::as_str) == Some("user-rejected")
                })
                .filter_map(|m| m.get("id").and_then(Value::as_str))
                .collect(),
            _ => HashSet::new(),
        };
        let mut events = Vec::new();
        for p in parts {
            if p.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let id = p.get("tool_use_id").and_then(Value::as_str);
            let is_error = p.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            if is_error {
                let text = content_text(p.get("content"));
                // A tool the session does not have (`--tools`), or a call the permission
                // policy turned down.
                if text.contains("No such tool available")
                    || id.is_some_and(|id| rejected.contains(id))
                {
                    events.extend(self.refuse(id, None, &text));
                }
            }
            let name = id.and_then(|id| self.tools.remove(id)).unwrap_or_default();
            events.push(WorkerEvent::ToolEnd {
                name,
                ok: !is_error,
            });
        }
        if !events.is_empty() {
            events.push(self.turn_end());
        }
        events
    }

    fn on_result(&mut self, result: &Map<String, Value>) -> Vec<WorkerEvent> {
        let mut events = Vec::new();
        if self.open_turn {
            events.push(self.turn_end());
        }
        if let Some(Value::Array(denials)) = result.get("permission_denials") {
            for d in denials {
                let id = d.get("tool_use_id").and_then(Value::as_str);
                let tool = d.get("tool_name").and_then(Value::as_str);
                let message = format!("{} was denied", tool.unwrap_or("a tool call"));
                events.extend(self.refuse(id, tool, &message));
            }
        }
        let subtype = result
            .get("subtype")
            .and_then(Value::as_str)
            .unwrap_or("success");
        let is_error = result
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if let Some(Value::Object(total)) = result.get("usage") {
            // Some CLI versions report only the last call here; never go below what streamed.
            let total = claude_usage(total);
            let turns = self.usage.turns;
            let cost = self.usage.cost;
            self.usage = max_usage(&self.usage, &total);
            self.usage.turns = turns;
            self.usage.cost = cost;
        }
        if result.get("total_cost_usd").is_some() {
            self.usage.cost = json_cost(result.get("total_cost_usd"));
        }
        // A failed API call still says `num_turns: 1`; only the turns that streamed count then.
        if !is_error {
            let num_turns = json_count(result.get("num_turns"));
            self.usage.turns = self.usage.turns.max(num_turns);
        }

        let text = result
            .get("result")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .map(str::to_owned);
        if is_error || subtype != "success" {
            let detail = errors_text(result.get("errors"));
            let message = match (&text, is_error) {
                // An API failure arrives as `is_error` with the error as the result text.
                (Some(t), true) => t.clone(),
                _ => match detail {
                    Some(d) => format!("claude: {subtype}: {d}"),
                    None => format!("claude: {subtype}"),
                },
            };
            // The API's status decides a retry, whatever its message says.
            self.retryable = match result.get("api_error_status") {
                Some(Value::Number(n)) => n.as_u64().map(status_retryable),
                _ => None,
            };
            self.error = Some(message.clone());
            events.push(WorkerEvent::Error { message });
        } else {
            self.result_text = text;
        }
        if !self.finished {
            self.finished = true;
            events.push(WorkerEvent::Finished);
        }
        events
    }

    fn turn_end(&mut self) -> WorkerEvent {
        self.open_turn = false;
        self.usage.turns = self.usage.turns.saturating_add(1);
        WorkerEvent::TurnEnd
    }
}

impl StreamParser for ClaudeParser {
    fn feed_line(&mut self, line: &str) -> Vec<WorkerEvent> {
        let Ok(Value::Object(event)) = serde_json::from_str::<Value>(strip_cr(line)) else {
            return Vec::new();
        };
        let message = match event.get("message") {
            Some(Value::Object(m)) => Some(m),
            _ => None,
        };
        let subtype = event.get("subtype").and_then(Value::as_str);
        match (event.get("type").and_then(Value::as_str), message) {
            (Some("system"), _) if subtype == Some("init") => {
                // Live mode: a message taken after the last turn starts another, with its
                // own init and `result`, which decides the attempt: an earlier turn's failure
                // is not its outcome.
                if self.finished {
                    self.error = None;
                    self.retryable = None;
                }
                self.finished = false;
                let model = event
                    .get("model")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if self.model.is_none() {
                    self.model.clone_from(&model);
                }
                let session_id = event
                    .get("session_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if session_id.is_some() {
                    self.session_id.clone_from(&session_id);
                }
                vec![WorkerEvent::Started { session_id, model }]
            }
            (Some("system"), _) if subtype == Some("permission_denied") => {
                let str_field = |k: &str| event.get(k).and_then(Value::as_str);
                let message = str_field("message")
                    .unwrap_or("permission denied")
                    .to_owned();
                self.refuse(str_field("tool_use_id"), str_field("tool_name"), &message)
                    .into_iter()
                    .collect()
            }
            (Some("stream_event"), _) => {
                if let Some(Value::Object(e)) = event.get("event") {
                    self.on_stream_event(e);
                }
                Vec::new()
            }
            (Some("assistant"), Some(m)) => self.on_assistant(m),
            (Some("user"), Some(m)) => self.on_user(&event, m),
            (Some("result"), _) => self.on_result(&event),
            _ => Vec::new(),
        }
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn outcome(&self) -> Outcome {
        let final_text = match &self.error {
            // The result text of a failed run is the error, not an answer.
            Some(_) => self.result_text.clone(),
            None => self.result_text.clone().or_else(|| self.last_text.clone()),
        };
        Outcome {
            final_text,
            usage: self.usage,
            model: self.model.clone(),
            error: self.error.clone(),
            retryable: self.retryable,
            writes: self.writes,
            session_id: self.session_id.clone(),
        }
    }

    /// stream-json input: the prompt and each steer are user messages (a steer reaches the
    /// model at its next call, or starts another turn when it comes after the last one).
    fn live_start(&mut self, prompt: &str) -> Vec<String> {
        vec![user_message_line(prompt)]
    }
    fn live_steer(&mut self, message: &str) -> Vec<String> {
        vec![user_message_line(message)]
    }
}

/// A tool result's text: a string, or the text parts of a list.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn message_usage(usage: Option<&Value>) -> Usage {
    match usage {
        Some(Value::Object(u)) => claude_usage(u),
        _ => Usage::default(),
    }
}

fn claude_usage(u: &Map<String, Value>) -> Usage {
    Usage {
        input: json_count(u.get("input_tokens")),
        output: json_count(u.get("output_tokens")),
        cache_read: json_count(u.get("cache_read_input_tokens")),
        cache_write: json_count(u.get("cache_creation_input_tokens")),
        cost: 0.0,
        turns: 0,
    }
}

fn max_usage(a: &Usage, b: &Usage) -> Usage {
    Usage {
        input: a.input.max(b.input),
        output: a.output.max(b.output),
        cache_read: a.cache_read.max(b.cache_read),
        cache_write: a.cache_write.max(b.cache_write),
        cost: a.cost.max(b.cost),
        turns: a.turns.max(b.turns),
    }
}

fn errors_text(errors: Option<&Value>) -> Option<String> {
    let Some(Value::Array(list)) = errors else {
        return None;
    };
    let parts: Vec<String> = list
        .iter()
        .map(|e| match e {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    (!parts.is_empty()).then(|| cut_chars(&parts.join("; "), 2000))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{build_launch, parser, AdapterKind, ARGV_PROMPT_LIMIT};

    fn spec() -> LaunchSpec {
        LaunchSpec {
            command: vec!["claude".into()],
            prompt: "Goal: fix it".into(),
            prompt_file: None,
            system_prompt: String::new(),
            system_prompt_mode: SystemPromptMode::Replace,
            system_prompt_file: Some("/tmp/ignored.md".into()),
            model: None,
            thinking: None,
            tools: vec!["read".into()],
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
        let reader = spec();
        let mut writer = spec();
        writer.model = Some("sonnet".into());
        writer.tools = ["read", "grep", "find", "ls", "bash", "edit", "write"]
            .map(String::from)
            .to_vec();
        writer.system_prompt = "Be terse.".into();
        writer.system_prompt_mode = SystemPromptMode::Append;
        writer.fallback_models = vec!["haiku".into(), "opus".into()];
        writer.thinking = Some("high".into());
        let mut replace = spec();
        replace.system_prompt = "You are a reviewer.".into();
        replace.tools = vec![];
        let mut long = spec();
        long.prompt = "x".repeat(ARGV_PROMPT_LIMIT + 1);
        long.prompt_file = Some("/run/prompts/01_a.md".into());
        let mut own_mode = spec();
        own_mode.command = ["claude", "--permission-mode", "bypassPermissions"]
            .map(String::from)
            .to_vec();
        let ask_server = Some(
            ["/opt/crew/crewctl", "mcp", "--ask"]
                .map(String::from)
                .to_vec(),
        );
        let mut asking = spec();
        asking.session.ask_server = ask_server.clone();
        let mut asking_no_tools = spec();
        asking_no_tools.tools = vec![];
        asking_no_tools.session.ask_server = ask_server.clone();
        let mut resumed = spec();
        resumed.session.ask_server = ask_server;
        resumed.session.resume = Some("1d623514-ea5c-4f75-aa8a-f0d154a0eccf".into());
        resumed.prompt = "x".repeat(ARGV_PROMPT_LIMIT + 1);
        resumed.prompt_file = Some("/run/prompts/01_a.md".into());
        let mut live = spec();
        live.rpc = true;
        let mut live_resumed = resumed.clone();
        live_resumed.rpc = true;
        let mcp_config = r#"--mcp-config={"mcpServers":{"crew_ask":{"alwaysLoad":true,"args":["mcp","--ask"],"command":"/opt/crew/crewctl","type":"stdio"}}}"#;
        let base = [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
        ];
        let table: Vec<(&str, LaunchSpec, Vec<&str>, StdinFrom)> = vec![
            (
                "read-only role",
                reader,
                [
                    &["claude"][..],
                    &base,
                    &[
                        "--tools=Read",
                        "--allowedTools=Read",
                        "--permission-mode",
                        "dontAsk",
                        "Goal: fix it",
                    ],
                ]
                .concat(),
                StdinFrom::Null,
            ),
            (
                "writing role, model, fallbacks, effort, appended system prompt",
                writer,
                [
                    &["claude"][..],
                    &base,
                    &[
                        "--model",
                        "sonnet",
                        "--fallback-model",
                        "haiku,opus",
                        "--effort",
                        "high",
                        "--tools=Read,Grep,Glob,Bash,Edit,Write",
                        "--allowedTools=Read,Grep,Glob,Bash,Edit,Write",
                        "--permission-mode",
                        "acceptEdits",
                        "--append-system-prompt",
                        "Be terse.",
                        "Goal: fix it",
                    ],
                ]
                .concat(),
                StdinFrom::Null,
            ),
            (
                "no tools, replaced system prompt",
                replace,
                [
                    &["claude"][..],
                    &base,
                    &[
                        "--tools=",
                        "--permission-mode",
                        "dontAsk",
                        "--system-prompt",
                        "You are a reviewer.",
                        "Goal: fix it",
                    ],
                ]
                .concat(),
                StdinFrom::Null,
            ),
            (
                "a long prompt is stdin",
                long,
                [
                    &["claude"][..],
                    &base,
                    &[
                        "--tools=Read",
                        "--allowedTools=Read",
                        "--permission-mode",
                        "dontAsk",
                    ],
                ]
                .concat(),
                StdinFrom::File("/run/prompts/01_a.md".into()),
            ),
            (
                "the user's permission mode wins",
                own_mode,
                [
                    &["claude", "--permission-mode", "bypassPermissions"][..],
                    &base,
                    &["--tools=Read", "--allowedTools=Read", "Goal: fix it"],
                ]
                .concat(),
                StdinFrom::Null,
            ),
            (
                "crew's ask server, its tool allowed",
                asking,
                [
                    &["claude"][..],
                    &base,
                    &[
                        "--tools=Read",
                        mcp_config,
                        "--allowedTools=Read,mcp__crew_ask__ask_user",
                        "--permission-mode",
                        "dontAsk",
                        "Goal: fix it",
                    ],
                ]
                .concat(),
                StdinFrom::Null,
            ),
            (
                "no tools but the ask tool",
                asking_no_tools,
                [
                    &["claude"][..],
                    &base,
                    &[
                        "--tools=",
                        mcp_config,
                        "--allowedTools=mcp__crew_ask__ask_user",
                        "--permission-mode",
                        "dontAsk",
                        "Goal: fix it",
                    ],
                ]
                .concat(),
                StdinFrom::Null,
            ),
            (
                "the answer resumes the session, a long answer on stdin",
                resumed,
                [
                    &["claude"][..],
                    &base,
                    &[
                        "--resume=1d623514-ea5c-4f75-aa8a-f0d154a0eccf",
                        "--tools=Read",
                        mcp_config,
                        "--allowedTools=Read,mcp__crew_ask__ask_user",
                        "--permission-mode",
                        "dontAsk",
                    ],
                ]
                .concat(),
                StdinFrom::File("/run/prompts/01_a.md".into()),
            ),
            (
                "live: the prompt is the first message on a pipe crew owns",
                live,
                [
                    &["claude"][..],
                    &base,
                    &[
                        "--tools=Read",
                        "--allowedTools=Read",
                        "--permission-mode",
                        "dontAsk",
                        "--input-format",
                        "stream-json",
                        "--replay-user-messages",
                    ],
                ]
                .concat(),
                StdinFrom::Pipe,
            ),
            (
                "live: the answer resumes the session, a long answer a message too",
                live_resumed,
                [
                    &["claude"][..],
                    &base,
                    &[
                        "--resume=1d623514-ea5c-4f75-aa8a-f0d154a0eccf",
                        "--tools=Read",
                        mcp_config,
                        "--allowedTools=Read,mcp__crew_ask__ask_user",
                        "--permission-mode",
                        "dontAsk",
                        "--input-format",
                        "stream-json",
                        "--replay-user-messages",
                    ],
                ]
                .concat(),
                StdinFrom::Pipe,
            ),
        ];
        for (name, spec, argv, stdin) in table {
            let launch = build_launch(AdapterKind::Claude, &spec);
            assert_eq!(launch.argv, argv, "{name}");
            assert_eq!(launch.stdin, stdin, "{name}");
            assert_eq!(launch.env, vec![], "{name}");
            assert!(
                !launch.argv.iter().any(|a| a.len() > ARGV_PROMPT_LIMIT),
                "{name}: nothing long on argv"
            );
        }
    }

    fn run(stream: &str) -> (Vec<WorkerEvent>, Outcome) {
        let mut p = parser(AdapterKind::Claude);
        let mut events = Vec::new();
        for line in stream.lines() {
            events.extend(p.feed_line(line));
        }
        assert_eq!(p.usage(), p.outcome().usage);
        (events, p.outcome())
    }

    #[test]
    fn parses_recorded_streams() {
        struct Case {
            name: &'static str,
            stream: String,
            final_text: Option<&'static str>,
            tokens: (u64, u64, u64, u64, u64),
            cost: f64,
            model: Option<&'static str>,
            error: Option<&'static str>,
            tools: &'static [(&'static str, bool)],
        }
        let basic = include_str!("fixtures/claude_basic.jsonl");
        let table = vec![
            Case {
                name: "basic",
                stream: basic.to_owned(),
                final_text: Some("All 3 tests pass."),
                tokens: (10, 102, 29200, 1500, 3),
                cost: 0.0213,
                model: Some("claude-sonnet-4-5-20250929"),
                error: None,
                tools: &[("Bash", true), ("Read", false)],
            },
            Case {
                name: "CRLF and garbage lines",
                stream: basic.replace('\n', "\r\nnot json at all\n"),
                final_text: Some("All 3 tests pass."),
                tokens: (10, 102, 29200, 1500, 3),
                cost: 0.0213,
                model: Some("claude-sonnet-4-5-20250929"),
                error: None,
                tools: &[("Bash", true), ("Read", false)],
            },
            Case {
                name: "api error",
                stream: include_str!("fixtures/claude_api_error.jsonl").to_owned(),
                final_text: None,
                // Claude Code's error notice is no model turn.
                tokens: (0, 0, 0, 0, 0),
                cost: 0.0,
                model: Some("claude-opus-4-1-20250805"),
                error: Some("API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"),
                tools: &[],
            },
            Case {
                name: "max turns",
                stream: include_str!("fixtures/claude_max_turns.jsonl").to_owned(),
                final_text: None,
                tokens: (3, 40, 9000, 800, 2),
                cost: 0.011,
                model: Some("claude-sonnet-4-5-20250929"),
                error: Some("claude: error_max_turns"),
                tools: &[("Grep", true)],
            },
        ];
        for case in table {
            let name = case.name;
            let (events, outcome) = run(&case.stream);
            assert_eq!(outcome.final_text.as_deref(), case.final_text, "{name}");
            let u = outcome.usage;
            assert_eq!(
                (u.input, u.output, u.cache_read, u.cache_write, u.turns),
                case.tokens,
                "{name}"
            );
            assert!((u.cost - case.cost).abs() < 1e-9, "{name}: {}", u.cost);
            assert_eq!(outcome.model.as_deref(), case.model, "{name}");
            assert_eq!(outcome.error.as_deref(), case.error, "{name}");
            let starts: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    WorkerEvent::ToolStart { name, .. } => Some(name.as_str()),
                    _ => None,
                })
                .collect();
            let ends: Vec<(&str, bool)> = events
                .iter()
                .filter_map(|e| match e {
                    WorkerEvent::ToolEnd { name, ok } => Some((name.as_str(), *ok)),
                    _ => None,
                })
                .collect();
            assert_eq!(ends, case.tools, "{name}");
            assert_eq!(
                starts,
                case.tools.iter().map(|t| t.0).collect::<Vec<_>>(),
                "{name}"
            );
            assert_eq!(
                events
                    .iter()
                    .filter(|e| matches!(e, WorkerEvent::Finished))
                    .count(),
                1,
                "{name}"
            );
            assert_eq!(
                events.iter().filter(|e| e.is_final()).count(),
                1,
                "{name}: only Finished is final"
            );
            assert_eq!(
                events
                    .iter()
                    .any(|e| matches!(e, WorkerEvent::Error { .. })),
                case.error.is_some(),
                "{name}"
            );
        }
    }

    /// Real Claude Code 2.1.332 streams (stub model): the call of crew's ask tool is the
    /// question, once; the turn ends after its result; the resumed attempt is the same
    /// session, asks nothing, and its result is the answer's.
    #[test]
    fn a_call_of_crews_ask_tool_is_the_question() {
        let (events, outcome) = run(include_str!("fixtures/claude_ask.jsonl"));
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
        let session = Some("1d623514-ea5c-4f75-aa8a-f0d154a0eccf");
        assert_eq!(outcome.session_id.as_deref(), session);
        assert_eq!(
            outcome.final_text.as_deref(),
            Some("STUB-WAITING: I asked the user which database to use.")
        );
        assert_eq!(outcome.error, None);

        let (events, outcome) = run(include_str!("fixtures/claude_resumed.jsonl"));
        assert!(!events.iter().any(|e| matches!(e, WorkerEvent::Ask { .. })));
        assert_eq!(outcome.session_id.as_deref(), session);
        assert_eq!(
            outcome.final_text.as_deref(),
            Some("STUB-FINAL: the service uses Postgres 16.")
        );
        // One model call: the resumed session's earlier ones are not counted again.
        assert_eq!((outcome.usage.input, outcome.usage.output), (1021, 23));

        // A tool of that name from another server, or a question that is no string, asks
        // nothing.
        for name in ["mcp__other__ask_user", "ask_user"] {
            let line = format!(
                r#"{{"type":"assistant","message":{{"id":"m","content":[{{"type":"tool_use","id":"t","name":"{name}","input":{{"question":"q"}}}}]}}}}"#
            );
            let (events, _) = run(&line);
            assert!(
                !events.iter().any(|e| matches!(e, WorkerEvent::Ask { .. })),
                "{name}"
            );
        }
        let (events, _) = run(
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"mcp__crew_ask__ask_user","input":{"question":[1]}}]}}"#,
        );
        assert!(!events.iter().any(|e| matches!(e, WorkerEvent::Ask { .. })));
    }

    #[test]
    fn live_input_is_a_user_message() {
        let mut p = ClaudeParser::default();
        let lines = p.live_steer("say \"hi\"\n");
        let [line] = lines.as_slice() else {
            panic!("{lines:?}")
        };
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "user", "message": {"role": "user",
                "content": [{"type": "text", "text": "say \"hi\"\n"}]}})
        );
        assert_eq!(p.live_start("x"), p.live_steer("x"));
    }

    /// Shaped as Claude Code 2.1 printed it (real_claude_steer.rs): a steer taken after the
    /// last model call is replayed after the first `result` and runs a turn of its own.
    #[test]
    fn a_live_stream_acknowledges_its_inputs_and_may_run_another_turn() {
        let init = r#"{"type":"system","subtype":"init","session_id":"s-1","model":"m"}"#;
        let replay = |t: &str| {
            format!(
                r#"{{"type":"user","message":{{"role":"user","content":[{{"text":"{t}","type":"text"}}]}},"parent_tool_use_id":null,"isReplay":true}}"#
            )
        };
        let text = |id: &str, t: &str| {
            format!(
                r#"{{"type":"assistant","message":{{"id":"{id}","model":"m","content":[{{"type":"text","text":"{t}"}}],"usage":{{"input_tokens":10,"output_tokens":2}}}}}}"#
            )
        };
        let result = |t: &str, turns: u64, cost: f64| {
            format!(
                r#"{{"type":"result","subtype":"success","is_error":false,"num_turns":{turns},"result":"{t}","total_cost_usd":{cost},"usage":{{"input_tokens":10,"output_tokens":2}}}}"#
            )
        };
        let stream = [
            init.to_owned(),
            replay("Goal: fix it"),
            text("msg_1", "FIRST"),
            result("FIRST", 1, 0.5),
            init.to_owned(),
            replay("STEER: also the tests"),
            text("msg_2", "SECOND"),
            result("SECOND", 1, 0.75),
        ]
        .join("\n");
        let (events, outcome) = run(&stream);
        let kinds: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                WorkerEvent::InputTaken => Some("input"),
                WorkerEvent::Finished => Some("finished"),
                _ => None,
            })
            .collect();
        assert_eq!(kinds, ["input", "finished", "input", "finished"]);
        assert_eq!(outcome.final_text.as_deref(), Some("SECOND"));
        assert_eq!((outcome.usage.input, outcome.usage.output), (20, 4));
        assert_eq!(outcome.usage.turns, 2);
        assert_eq!(outcome.usage.cost, 0.75);
        assert_eq!(outcome.error, None);
    }

    #[test]
    fn in_a_live_stream_the_last_result_decides() {
        let init = r#"{"type":"system","subtype":"init","session_id":"s-1","model":"m"}"#;
        let failed = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"num_turns":1,"result":"API Error: 529 overloaded"}"#;
        let ok = r#"{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"SECOND"}"#;
        let (_, outcome) = run(&[init, failed, init, ok].join("\n"));
        assert_eq!(outcome.error, None);
        assert_eq!(outcome.retryable, None);
        assert_eq!(outcome.final_text.as_deref(), Some("SECOND"));
        let (_, outcome) = run(&[init, ok, init, failed].join("\n"));
        assert_eq!(outcome.error.as_deref(), Some("API Error: 529 overloaded"));
        assert_eq!(outcome.retryable, Some(true));
    }

    #[test]
    fn live_usage_counts_each_message_once() {
        let mut p = parser(AdapterKind::Claude);
        let mut sum = Usage::default();
        for line in include_str!("fixtures/claude_basic.jsonl").lines() {
            if line.contains("\"type\":\"result\"") {
                break;
            }
            for e in p.feed_line(line) {
                if let WorkerEvent::AssistantMessage { usage, .. } = e {
                    add_usage(&mut sum, &usage);
                }
            }
        }
        let live = p.usage();
        assert_eq!(
            (live.input, live.output, live.cache_read, live.cache_write),
            (10, 102, 29200, 1500)
        );
        assert_eq!(
            (sum.input, sum.output, sum.cache_read, sum.cache_write),
            (10, 102, 29200, 1500)
        );
        assert_eq!(
            p.outcome().final_text.as_deref(),
            Some("All 3 tests pass."),
            "fallback without result"
        );
    }

    /// A real Claude Code 2.1.332 stream (stub model): a Write refused in the default
    /// permission mode, with `--include-partial-messages`.
    #[test]
    fn a_refused_write_is_reported_once_and_counted() {
        let stream = include_str!("fixtures/claude_denied.jsonl");
        let (events, outcome) = run(stream);
        let refused: Vec<(&str, bool)> = events
            .iter()
            .filter_map(|e| match e {
                WorkerEvent::Refused { tool, write, .. } => Some((tool.as_str(), *write)),
                _ => None,
            })
            .collect();
        // Said three times (system notice, tool result, result line): one refusal.
        assert_eq!(refused, [("Write", true)]);
        assert!(events.iter().any(|e| matches!(e, WorkerEvent::Refused { message, .. } if message.contains("haven't granted"))));
        assert_eq!(
            outcome.writes,
            Writes {
                tried: 1,
                refused: 1
            }
        );
        assert!(outcome.writes.all_refused());
        assert_eq!(outcome.final_text.as_deref(), Some("STUB-REPLY-14"));
        assert_eq!(outcome.error, None);
    }

    #[test]
    fn live_usage_has_the_real_output_before_the_result() {
        let mut p = parser(AdapterKind::Claude);
        for line in include_str!("fixtures/claude_denied.jsonl").lines() {
            if line.contains("\"type\":\"result\"") {
                break;
            }
            p.feed_line(line);
        }
        let u = p.usage();
        // Two messages of 100 input (+7 cache read, +5 cache write) and 30 + 20 output: the
        // `assistant` lines alone say output 1 each.
        assert_eq!(
            (u.input, u.output, u.cache_read, u.cache_write),
            (200, 50, 14, 10)
        );
        assert_eq!(u.turns, 1, "the second turn ends with the result");
    }

    #[test]
    fn api_status_decides_a_retry() {
        let line = |status: &str, text: &str| {
            format!(
                "{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":true,\"num_turns\":1,\"api_error_status\":{status},\"result\":{}}}",
                serde_json::to_string(text).unwrap()
            )
        };
        for (status, text, want) in [
            ("529", "API Error: 529 {\"type\":\"error\"}", Some(true)),
            ("429", "API Error: 429 rate limited", Some(true)),
            ("500", "API Error: 500", Some(true)),
            (
                "400",
                "API Error: 400 prompt is too long: overloaded words",
                Some(false),
            ),
            ("null", "API Error: Overloaded", None),
        ] {
            let (_, outcome) = run(&line(status, text));
            assert_eq!(outcome.retryable, want, "{status}");
            assert_eq!(outcome.error.as_deref(), Some(text));
            assert_eq!(outcome.usage.turns, 0, "{status}");
        }
    }

    #[test]
    fn odd_shapes_never_panic() {
        let mut p = parser(AdapterKind::Claude);
        for line in [
            "",
            "{}",
            r#"{"type":"assistant"}"#,
            r#"{"type":"assistant","message":{"content":"str","usage":[]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use"},{"type":"text","text":7}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":5}]}}"#,
            r#"{"type":"result","usage":"x","total_cost_usd":"y","num_turns":-1,"errors":[1,{"a":2}],"subtype":"error_during_execution"}"#,
            r#"{"type":"result"}"#,
            r#"{"type":"system","subtype":"permission_denied","tool_use_id":[]}"#,
            r#"{"type":"stream_event","event":{"type":"message_delta","usage":"x"}}"#,
            r#"{"type":"stream_event","event":{"type":"message_start","message":{"usage":[1]}}}"#,
            r#"{"type":"user","tool_result_meta":[{"id":1}],"message":{"content":[{"type":"tool_result","is_error":true,"content":[{"text":5}]}]}}"#,
            r#"{"type":"result","permission_denials":[1,{"tool_use_id":2}]}"#,
        ] {
            p.feed_line(line);
        }
        assert_eq!(
            p.outcome().error.as_deref(),
            Some("claude: error_during_execution: 1; {\"a\":2}")
        );
    }
}
