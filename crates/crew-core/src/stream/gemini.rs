//! `gemini -p … --output-format stream-json` (Gemini CLI): argv and stream parser.
//!
//! Gemini CLI writes `init` (session id, model), `message` lines (the user's prompt, then the
//! assistant's text in `delta` pieces), `tool_use` / `tool_result` pairs, non-fatal `error`
//! notices, and one `result` with the run's status and token counts. Usage arrives only with
//! `result`: live progress shows tools and turns, tokens only at the end. An assistant text may
//! be followed by tool calls, so no message is final; `result` (→ `Finished`) ends the run.

use super::{
    add_usage, cut_chars, json_count, status_retryable, strip_cr, Launch, LaunchSpec, Outcome,
    StdinFrom, StreamParser, WorkerEvent, Writes, ASK_MCP_SERVER, TOOL_ARGS_LIMIT,
};
use crate::usage::Usage;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The environment variable naming a file that replaces Gemini CLI's system prompt.
pub const ENV_SYSTEM_MD: &str = "GEMINI_SYSTEM_MD";

/// The environment variable naming the home Gemini CLI keeps its `.gemini` folder in (its
/// user settings, credentials and sessions).
pub const ENV_HOME: &str = "GEMINI_CLI_HOME";

/// Flags of the user's own command that set the approval mode: crew then leaves it alone.
const APPROVAL_FLAGS: &[&str] = &["--approval-mode", "-y", "--yolo"];

/// Gemini CLI's file-changing tools.
const WRITE_TOOLS: &[&str] = &["write_file", "replace", "edit"];

/// Pending tool ids kept to name `ToolEnd`s; bounded.
const MAX_PENDING_TOOLS: usize = 4096;

/// Error types of a `tool_result` that mean the CLI would not run the call (a tool the session
/// does not have in its approval mode, a policy denial).
const REFUSAL_TYPES: &[&str] = &["tool_not_registered", "policy", "denied", "permission"];

pub(super) fn launch(spec: &LaunchSpec) -> Launch {
    if spec.rpc {
        return live_launch(spec);
    }
    let mut argv = spec.command.clone();
    // Trust the run's cwd for this session: an untrusted folder forces the approval mode back
    // to `default`, and a writing role could not write.
    argv.extend(["--output-format", "stream-json", "--skip-trust"].map(String::from));
    // The answer to a question continues the session that asked (the prompt is the answer).
    if let Some(id) = &spec.session.resume {
        argv.push("--resume".into());
        argv.push(id.clone());
    }
    if let Some(model) = &spec.model {
        super::push_value(&mut argv, "--model", model);
    }
    if !user_sets_approval(spec) {
        argv.push("--approval-mode".into());
        argv.push(approval_mode(&spec.tools).into());
    }
    let env = env(spec);
    // `-p` is appended to stdin: a long prompt is stdin (a regular file, read to its end) and
    // `-p` stays empty.
    argv.push("-p".into());
    match &spec.prompt_file {
        Some(file) => {
            argv.push(String::new());
            Launch {
                argv,
                env,
                stdin: StdinFrom::File(file.clone()),
            }
        }
        None => {
            argv.push(spec.prompt.clone());
            Launch {
                argv,
                env,
                stdin: StdinFrom::Null,
            }
        }
    }
}

/// `gemini --acp`: the same configuration as `-p` (model, approval mode, system prompt, the
/// home holding crew's ask server), the prompt and the session to continue in the protocol
/// ([`super::acp`]) on a stdin pipe.
fn live_launch(spec: &LaunchSpec) -> Launch {
    let mut argv = spec.command.clone();
    argv.extend(["--acp", "--skip-trust"].map(String::from));
    if let Some(model) = &spec.model {
        super::push_value(&mut argv, "--model", model);
    }
    if !user_sets_approval(spec) {
        argv.push("--approval-mode".into());
        argv.push(approval_mode(&spec.tools).into());
    }
    Launch {
        argv,
        env: env(spec),
        stdin: StdinFrom::Pipe,
    }
}

fn user_sets_approval(spec: &LaunchSpec) -> bool {
    spec.command.iter().skip(1).any(|a| {
        APPROVAL_FLAGS
            .iter()
            .any(|f| a == f || a.starts_with(&format!("{f}=")))
    })
}

/// The system prompt is a file named by the environment (replace; Gemini CLI cannot append),
/// and crew's home for Gemini CLI holds its ask server.
fn env(spec: &LaunchSpec) -> Vec<(String, String)> {
    let mut env = match (&spec.system_prompt_file, spec.system_prompt.is_empty()) {
        (Some(file), false) => vec![(ENV_SYSTEM_MD.to_owned(), file.clone())],
        _ => Vec::new(),
    };
    if let Some(home) = &spec.session.ask_config {
        env.push((ENV_HOME.to_owned(), home.clone()));
    }
    env
}

/// The name crew's ask server gives its tool for Gemini CLI (`crewctl mcp --ask --tool`):
/// headless Gemini CLI removes every tool named like its own interactive `ask_user`, an MCP
/// server's too.
pub const ASK_TOOL: &str = "ask_question";

/// What Gemini CLI calls crew's ask tool: `mcp_<server>_<tool>`.
fn ask_tool_name() -> String {
    format!("mcp_{ASK_MCP_SERVER}_{ASK_TOOL}")
}

/// Why crew's ask server cannot be added to the user's Gemini CLI settings.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AskSettingsError {
    #[error("the settings are not a JSON object: {0}")]
    NotAnObject(String),
    #[error("the settings' `mcpServers` is not an object")]
    ServersNotAnObject,
    #[error("no ask server command")]
    NoCommand,
}

/// The user's Gemini CLI settings (`base`, if they have any) with crew's ask server (`server`:
/// program first, `crewctl mcp --ask`; its tool named [`ASK_TOOL`]) added under
/// [`ASK_MCP_SERVER`]; `trust` lets a headless session call the
/// tool without the confirmation it cannot ask for.
pub fn ask_settings(base: Option<&str>, server: &[String]) -> Result<String, AskSettingsError> {
    let (command, args) = server.split_first().ok_or(AskSettingsError::NoCommand)?;
    let mut settings = match base {
        // Gemini CLI reads its settings with comments stripped; so does crew.
        Some(text) if !text.trim().is_empty() => {
            match serde_json::from_str::<Value>(&super::jsonc::strip_comments(text)) {
                Ok(Value::Object(m)) => m,
                Ok(_) => return Err(AskSettingsError::NotAnObject("not an object".into())),
                Err(e) => return Err(AskSettingsError::NotAnObject(e.to_string())),
            }
        }
        _ => Map::new(),
    };
    let servers = settings
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(servers) = servers else {
        return Err(AskSettingsError::ServersNotAnObject);
    };
    let mut args = args.to_vec();
    args.extend(["--tool".to_owned(), ASK_TOOL.to_owned()]);
    servers.insert(
        ASK_MCP_SERVER.to_owned(),
        serde_json::json!({"command": command, "args": args, "trust": true}),
    );
    Ok(Value::Object(settings).to_string())
}

/// The approval mode that gives a role its write permission. A headless run denies every call
/// that would ask: in `default` the write tools are not even registered and the shell is
/// refused; `auto_edit` approves edits (the shell still asks, so is refused); `yolo` approves
/// everything, the shell included.
fn approval_mode(tools: &[String]) -> &'static str {
    let bash = tools.iter().any(|t| t == "bash");
    match (super::edits_files(tools), bash) {
        (true, true) => "yolo",
        (true, false) => "auto_edit",
        (false, _) => "default",
    }
}

pub(super) fn policy_gaps(tools: &[String]) -> Vec<String> {
    let mut gaps = vec![
        "gemini: its read-only tools (read, search, list, web fetch) are always there; only writes and the shell follow the role".to_owned(),
    ];
    if tools.iter().any(|t| t == "bash") && !super::edits_files(tools) {
        gaps.push("gemini: a headless Gemini CLI cannot run the shell without approving every tool, so this read-only role gets no shell".into());
    }
    gaps
}

#[derive(Debug, Default)]
pub(crate) struct GeminiParser {
    usage: Usage,
    model: Option<String>,
    /// The assistant text being streamed (delta pieces since the last tool call).
    text: String,
    last_text: Option<String>,
    error: Option<String>,
    /// A non-fatal `error` notice, kept for a stream that ends without `result`.
    notice: Option<String>,
    retryable: Option<bool>,
    tools: HashMap<String, String>,
    writes: Writes,
    /// The `session_id` of the `init` line (`gemini --resume ID` continues it).
    session_id: Option<String>,
    open_turn: bool,
    finished: bool,
}

impl GeminiParser {
    /// The assistant text streamed so far becomes one message.
    fn close_text(&mut self) -> Option<WorkerEvent> {
        if self.text.is_empty() {
            return None;
        }
        let text = std::mem::take(&mut self.text);
        let text = (!text.trim().is_empty()).then_some(text);
        if text.is_some() {
            self.last_text.clone_from(&text);
        }
        Some(WorkerEvent::AssistantMessage {
            text,
            model: self.model.clone(),
            usage: Usage::default(),
            stop_reason: Some("message".into()),
            error: None,
        })
    }

    fn turn_end(&mut self) -> WorkerEvent {
        self.open_turn = false;
        self.usage.turns = self.usage.turns.saturating_add(1);
        WorkerEvent::TurnEnd
    }

    fn on_tool_use(&mut self, event: &Map<String, Value>) -> Vec<WorkerEvent> {
        let mut events: Vec<WorkerEvent> = self.close_text().into_iter().collect();
        self.open_turn = true;
        let name = str_of(event, "tool_name").unwrap_or_default().to_owned();
        if WRITE_TOOLS.contains(&name.as_str()) {
            self.writes.tried = self.writes.tried.saturating_add(1);
        }
        if let Some(id) = str_of(event, "tool_id") {
            if self.tools.len() < MAX_PENDING_TOOLS {
                self.tools.insert(id.to_owned(), name.clone());
            }
        }
        let args = event
            .get("parameters")
            .map(Value::to_string)
            .unwrap_or_default();
        // A call of crew's ask tool is the question (its result only tells the model to end
        // its turn).
        let question = (name == ask_tool_name())
            .then(|| event.get("parameters")?.get("question")?.as_str())
            .flatten()
            .map(str::to_owned);
        events.push(WorkerEvent::ToolStart {
            name,
            args: cut_chars(&args, TOOL_ARGS_LIMIT),
        });
        if let Some(question) = question {
            events.push(WorkerEvent::Ask { question });
        }
        events
    }

    fn on_tool_result(&mut self, event: &Map<String, Value>) -> Vec<WorkerEvent> {
        let name = str_of(event, "tool_id")
            .and_then(|id| self.tools.remove(id))
            .unwrap_or_default();
        let ok = str_of(event, "status") == Some("success");
        let mut events = Vec::new();
        if let Some(Value::Object(err)) = event.get("error") {
            let kind = str_of(err, "type").unwrap_or_default();
            if REFUSAL_TYPES.iter().any(|r| kind.contains(r)) {
                let write = WRITE_TOOLS.contains(&name.as_str());
                if write {
                    self.writes.refused = self.writes.refused.saturating_add(1);
                }
                let message = str_of(err, "message").unwrap_or(kind);
                events.push(WorkerEvent::Refused {
                    tool: name.clone(),
                    message: cut_chars(message, 500),
                    write,
                });
            }
        }
        events.push(WorkerEvent::ToolEnd { name, ok });
        // The call's answer goes back to the model: that model turn is over.
        if self.open_turn && self.tools.is_empty() {
            events.push(self.turn_end());
        }
        events
    }

    fn on_result(&mut self, event: &Map<String, Value>) -> Vec<WorkerEvent> {
        let mut events: Vec<WorkerEvent> = self.close_text().into_iter().collect();
        self.open_turn = true;
        events.push(self.turn_end());
        if let Some(Value::Object(stats)) = event.get("stats") {
            let total = json_count(stats.get("input_tokens"));
            let cached = json_count(stats.get("cached"));
            let usage = Usage {
                // `input_tokens` counts the cached ones too; `input` is the uncached part.
                input: match stats.get("input") {
                    Some(v) => json_count(Some(v)),
                    None => total.saturating_sub(cached),
                },
                output: json_count(stats.get("output_tokens")),
                cache_read: cached,
                ..Usage::default()
            };
            add_usage(&mut self.usage, &usage);
            if let Some(Value::Object(models)) = stats.get("models") {
                if let Some(m) = models.keys().next() {
                    self.model = Some(m.clone());
                }
            }
        }
        if str_of(event, "status") != Some("success") {
            let message = match event.get("error") {
                Some(Value::Object(err)) => str_of(err, "message")
                    .or_else(|| str_of(err, "type"))
                    .unwrap_or("gemini: the run failed")
                    .to_owned(),
                _ => "gemini: the run failed".to_owned(),
            };
            let (message, status) = match rate_limited(&message) {
                Some(api) => (format!("{api} (HTTP 429: rate limited)"), Some(429)),
                None => {
                    let status = api_status(&message);
                    (message, status)
                }
            };
            self.retryable = status.map(status_retryable);
            self.error = Some(message.clone());
            events.push(WorkerEvent::Error { message });
        }
        if !self.finished {
            self.finished = true;
            events.push(WorkerEvent::Finished);
        }
        events
    }
}

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

/// The starts of what Gemini CLI appends to the message of a 429 it gave up on
/// (`getRateLimitMessage`: API-key and Vertex auth, then the rest). The line carries no status
/// of its own; this advice is how a 429 shows.
const RATE_LIMIT_ADVICE: &[&str] = &[
    "Please wait and try again later.",
    "Possible quota limitations in place",
];

/// The API's part of a 429's message (`[API Error: …]`), without Gemini CLI's advice to its
/// interactive user ("switch to another /auth method", which would read as an auth failure,
/// never retryable).
fn rate_limited(message: &str) -> Option<&str> {
    let (api, advice) = message.rsplit_once("]\n")?;
    let advice = advice.trim_start();
    RATE_LIMIT_ADVICE
        .iter()
        .any(|a| advice.starts_with(a))
        .then(|| message.get(..api.len().saturating_add(1)))
        .flatten()
}

/// The HTTP status in an API error message: Gemini CLI quotes the API's JSON body
/// (`[API Error: {"error":{"code":400,…}}]`).
pub(super) fn api_status(message: &str) -> Option<u64> {
    let body = message.get(message.find('{')?..message.rfind('}')? + 1)?;
    let v: Value = serde_json::from_str(body).ok()?;
    v.get("error")?.get("code")?.as_u64()
}

impl StreamParser for GeminiParser {
    fn feed_line(&mut self, line: &str) -> Vec<WorkerEvent> {
        let Ok(Value::Object(event)) = serde_json::from_str::<Value>(strip_cr(line)) else {
            return Vec::new();
        };
        match str_of(&event, "type") {
            Some("init") => {
                let model = str_of(&event, "model").map(str::to_owned);
                if self.model.is_none() {
                    self.model.clone_from(&model);
                }
                let session_id = str_of(&event, "session_id").map(str::to_owned);
                if session_id.is_some() {
                    self.session_id.clone_from(&session_id);
                }
                vec![WorkerEvent::Started { session_id, model }]
            }
            Some("message") if str_of(&event, "role") == Some("assistant") => {
                if let Some(t) = str_of(&event, "content") {
                    self.open_turn = true;
                    // Bounded like a line: a stream of deltas cannot grow it past what stdout
                    // lines could hold in total, and the final text is cut downstream.
                    self.text.push_str(t);
                }
                Vec::new()
            }
            Some("tool_use") => self.on_tool_use(&event),
            Some("tool_result") => self.on_tool_result(&event),
            Some("error") => {
                if let Some(m) = str_of(&event, "message") {
                    self.notice = Some(cut_chars(m, 2000));
                }
                Vec::new()
            }
            Some("result") => self.on_result(&event),
            _ => Vec::new(),
        }
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn outcome(&self) -> Outcome {
        let streamed = (!self.text.trim().is_empty()).then(|| self.text.clone());
        let final_text = match &self.error {
            Some(_) => None,
            None => streamed.or_else(|| self.last_text.clone()),
        };
        let error = match (&self.error, self.finished) {
            (Some(e), _) => Some(e.clone()),
            // No `result`: the notice, if any, says why.
            (None, false) if final_text.is_none() => self.notice.clone(),
            _ => None,
        };
        Outcome {
            final_text,
            usage: self.usage,
            model: self.model.clone(),
            error,
            retryable: self.retryable,
            writes: self.writes,
            session_id: self.session_id.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::SystemPromptMode;
    use crate::stream::{build_launch, parser, AdapterKind, ARGV_PROMPT_LIMIT};

    fn spec(command: &[&str], tools: &[&str]) -> LaunchSpec {
        LaunchSpec {
            command: command.iter().map(|s| s.to_string()).collect(),
            prompt: "Goal: fix it".into(),
            prompt_file: None,
            system_prompt: "You are a reviewer.".into(),
            system_prompt_mode: SystemPromptMode::Replace,
            system_prompt_file: Some("/run/prompts/system-ab.md".into()),
            model: None,
            thinking: Some("high".into()),
            tools: tools.iter().map(|s| s.to_string()).collect(),
            rpc: false,
            prompt_via: Default::default(),
            skill_dirs: Vec::new(),
            session: Default::default(),
            cwd: "/work/repo".into(),
            effort: None,
            fallback_models: vec!["gemini-2.5-flash".into()],
        }
    }

    /// name, spec, argv, extra environment, stdin
    type Case<'a> = (
        &'a str,
        LaunchSpec,
        Vec<&'a str>,
        Vec<(String, String)>,
        StdinFrom,
    );

    #[test]
    fn argv_table() {
        let mut writer = spec(&["gemini"], &["read", "edit", "write"]);
        writer.model = Some("gemini-2.5-pro".into());
        let mut long = spec(&["gemini"], &["read", "bash", "edit"]);
        long.prompt = "x".repeat(ARGV_PROMPT_LIMIT + 1);
        long.prompt_file = Some("/run/prompts/01_a.md".into());
        long.system_prompt = String::new();
        let sys = vec![(
            ENV_SYSTEM_MD.to_string(),
            "/run/prompts/system-ab.md".to_string(),
        )];
        let mut resumed = spec(&["gemini"], &["read"]);
        resumed.session.resume = Some("75b821e0-ce86-4aab-aba4-8e7c622f1e0d".into());
        resumed.session.ask_config = Some("/state/gemini-home".into());
        let table: Vec<Case> = vec![
            (
                "read-only role: default approval, system prompt file in the environment",
                spec(&["gemini"], &["read", "grep"]),
                vec![
                    "gemini",
                    "--output-format",
                    "stream-json",
                    "--skip-trust",
                    "--approval-mode",
                    "default",
                    "-p",
                    "Goal: fix it",
                ],
                sys.clone(),
                StdinFrom::Null,
            ),
            (
                "writing role without the shell: edits approved",
                writer,
                vec![
                    "gemini",
                    "--output-format",
                    "stream-json",
                    "--skip-trust",
                    "--model",
                    "gemini-2.5-pro",
                    "--approval-mode",
                    "auto_edit",
                    "-p",
                    "Goal: fix it",
                ],
                sys.clone(),
                StdinFrom::Null,
            ),
            (
                "writing role with the shell, long prompt on stdin, no system prompt",
                long,
                vec![
                    "gemini",
                    "--output-format",
                    "stream-json",
                    "--skip-trust",
                    "--approval-mode",
                    "yolo",
                    "-p",
                    "",
                ],
                vec![],
                StdinFrom::File("/run/prompts/01_a.md".into()),
            ),
            (
                "the answer resumes the session, in crew's Gemini home",
                resumed,
                vec![
                    "gemini",
                    "--output-format",
                    "stream-json",
                    "--skip-trust",
                    "--resume",
                    "75b821e0-ce86-4aab-aba4-8e7c622f1e0d",
                    "--approval-mode",
                    "default",
                    "-p",
                    "Goal: fix it",
                ],
                vec![
                    sys[0].clone(),
                    (ENV_HOME.to_string(), "/state/gemini-home".to_string()),
                ],
                StdinFrom::Null,
            ),
            (
                "the user's approval mode wins",
                spec(&["gemini", "--yolo"], &["read"]),
                vec![
                    "gemini",
                    "--yolo",
                    "--output-format",
                    "stream-json",
                    "--skip-trust",
                    "-p",
                    "Goal: fix it",
                ],
                sys,
                StdinFrom::Null,
            ),
        ];
        for (name, spec, argv, env, stdin) in table {
            let l = build_launch(AdapterKind::Gemini, &spec);
            assert_eq!(l.argv, argv, "{name}");
            assert_eq!(l.env, env, "{name}");
            assert_eq!(l.stdin, stdin, "{name}");
        }
    }

    #[test]
    fn policy_gaps_name_what_gemini_cannot_withhold() {
        let tools = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            crate::stream::policy_gaps(AdapterKind::Gemini, &tools(&["read"])).len(),
            1
        );
        let gaps = crate::stream::policy_gaps(AdapterKind::Gemini, &tools(&["read", "bash"]));
        assert_eq!(gaps.len(), 2);
        assert!(gaps[1].contains("no shell"), "{gaps:?}");
    }

    fn feed(stream: &str) -> (Vec<WorkerEvent>, Outcome) {
        let mut p = parser(AdapterKind::Gemini);
        let events = stream.lines().flat_map(|l| p.feed_line(l)).collect();
        (events, p.outcome())
    }

    #[test]
    fn parses_recorded_streams() {
        // Recorded from Gemini CLI 0.61.0 against a stub model server.
        let (events, out) = feed(include_str!("fixtures/gemini_basic.jsonl"));
        assert_eq!(
            out.final_text.as_deref(),
            Some("Hello from the gemini stub.")
        );
        assert_eq!(out.model.as_deref(), Some("gemini-stub-1"));
        assert_eq!(
            (
                out.usage.input,
                out.usage.output,
                out.usage.cache_read,
                out.usage.turns
            ),
            (100, 7, 20, 1)
        );
        assert_eq!(out.error, None);
        assert!(
            matches!(events.first(), Some(WorkerEvent::Started { model: Some(m), .. }) if m == "gemini-stub-1")
        );
        assert_eq!(events.iter().filter(|e| e.is_final()).count(), 1);
        assert_eq!(events.last(), Some(&WorkerEvent::Finished));

        let (events, out) = feed(include_str!("fixtures/gemini_tool.jsonl"));
        assert_eq!(out.final_text.as_deref(), Some("Done after the tool."));
        assert_eq!((out.writes.tried, out.writes.refused), (1, 0));
        assert_eq!(out.usage.turns, 2);
        assert!(events.contains(&WorkerEvent::ToolEnd {
            name: "write_file".into(),
            ok: true
        }));

        let (events, out) = feed(include_str!("fixtures/gemini_refused.jsonl"));
        assert_eq!((out.writes.tried, out.writes.refused), (1, 1));
        assert!(out.writes.all_refused());
        assert!(events.iter().any(|e| matches!(
            e,
            WorkerEvent::Refused { tool, write: true, message } if tool == "write_file" && message.contains("not found")
        )));

        let (_, out) = feed(include_str!("fixtures/gemini_api_error.jsonl"));
        assert_eq!(out.final_text, None);
        let err = out.error.unwrap_or_default();
        assert!(err.contains("stub says 400: the request is bad"), "{err}");
        assert_eq!(out.retryable, Some(false), "a 400 is not retried");
    }

    #[test]
    fn a_call_of_crews_ask_tool_is_the_question() {
        // Recorded from Gemini CLI 0.61.0 in real_ask.rs (the task prompt shortened): the ask,
        // then the attempt that resumed the session with the answer.
        let (events, out) = feed(include_str!("fixtures/gemini_ask.jsonl"));
        let asks: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, WorkerEvent::Ask { .. }))
            .collect();
        assert_eq!(
            asks,
            [&WorkerEvent::Ask {
                question: "Which database should the service use?".into()
            }]
        );
        let session = Some("75b821e0-ce86-4aab-aba4-8e7c622f1e0d");
        assert_eq!(out.session_id.as_deref(), session);
        let (events, out) = feed(include_str!("fixtures/gemini_resumed.jsonl"));
        assert!(!events.iter().any(|e| matches!(e, WorkerEvent::Ask { .. })));
        assert_eq!(out.session_id.as_deref(), session);
        assert_eq!(
            out.final_text.as_deref(),
            Some("STUB-FINAL: the service uses Postgres 16.")
        );
        // Another tool's `question`, or crew's tool without a string one, asks nothing.
        for line in [
            r#"{"type":"tool_use","tool_name":"mcp_other_ask_question","tool_id":"a","parameters":{"question":"q"}}"#,
            r#"{"type":"tool_use","tool_name":"mcp_crew_ask_ask_question","tool_id":"b","parameters":{"question":7}}"#,
            r#"{"type":"tool_use","tool_name":"ask_user","tool_id":"c","parameters":{"question":"q"}}"#,
        ] {
            let (events, _) = feed(line);
            assert!(
                !events.iter().any(|e| matches!(e, WorkerEvent::Ask { .. })),
                "{line}"
            );
        }
    }

    #[test]
    fn crews_ask_server_joins_the_users_settings() {
        let server = ["/opt/crew/crewctl", "mcp", "--ask"].map(String::from);
        let parse = |s: String| serde_json::from_str::<Value>(&s).unwrap();
        let fresh = parse(ask_settings(None, &server).unwrap());
        assert_eq!(
            fresh,
            serde_json::json!({"mcpServers": {"crew_ask": {
                "command": "/opt/crew/crewctl",
                "args": ["mcp", "--ask", "--tool", "ask_question"],
                "trust": true,
            }}})
        );
        let theirs = parse(
            ask_settings(
                Some(r#"{"mcpServers": {"db": {"command": "x"}}, "model": {"name": "m"}}"#),
                &server,
            )
            .unwrap(),
        );
        assert_eq!(theirs["mcpServers"]["db"]["command"], "x");
        assert_eq!(theirs["model"]["name"], "m");
        assert_eq!(theirs["mcpServers"]["crew_ask"]["trust"], true);
        assert_eq!(parse(ask_settings(Some(" "), &server).unwrap()), fresh);
        // Comments, which Gemini CLI accepts in its settings (crew's copy is plain JSON).
        let commented = parse(
            ask_settings(
                Some("// my settings\n{\"model\": {\"name\": \"m\"} /* pinned */}\n"),
                &server,
            )
            .unwrap(),
        );
        assert_eq!(commented["model"]["name"], "m");
        assert_eq!(commented["mcpServers"]["crew_ask"]["trust"], true);
        for bad in ["[]", "{", r#"{"mcpServers": 3}"#] {
            assert!(ask_settings(Some(bad), &server).is_err(), "{bad}");
        }
        assert_eq!(ask_settings(None, &[]), Err(AskSettingsError::NoCommand));
    }

    #[test]
    fn api_statuses_decide_retries() {
        for (msg, want) in [
            (
                r#"[API Error: {"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}]"#,
                Some(429),
            ),
            (r#"[API Error: {"error":{"code":503}}]"#, Some(503)),
            ("[API Error: no body]", None),
            ("}{", None),
            ("", None),
        ] {
            assert_eq!(api_status(msg), want, "{msg}");
        }
        for (msg, want) in [
            (
                "[API Error: busy]\nPossible quota limitations in place or slow response times detected. Switching to the gemini-2.5-flash model for the rest of this session.",
                Some("[API Error: busy]"),
            ),
            (
                "[API Error: busy]\nPlease wait and try again later. To increase your limits, request a quota increase through Vertex, or switch to another /auth method",
                Some("[API Error: busy]"),
            ),
            ("[API Error: invalid API key]\nswitch to another /auth method", None),
            ("[API Error: busy]", None),
            ("]\n", None),
        ] {
            assert_eq!(rate_limited(msg), want, "{msg}");
        }
        let (_, out) = feed(
            r#"{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":429}}]"}}"#,
        );
        assert_eq!(out.retryable, Some(true));
    }

    #[test]
    fn rate_limits_it_gave_up_on_are_retried() {
        // Recorded from Gemini CLI 0.61.0 with `general.maxAttempts = 1` against a stub that
        // answered 429: the line has no status, only the API's message and Gemini CLI's advice
        // for a 429 (which names "/auth", a never-retryable word).
        let (events, out) = feed(include_str!("fixtures/gemini_rate_limited.jsonl"));
        let err = out.error.unwrap_or_default();
        assert_eq!(out.retryable, Some(true), "{err}");
        assert!(
            err.contains("Resource has been exhausted (e.g. check quota)."),
            "the API's message: {err}"
        );
        assert!(
            !err.contains("/auth"),
            "advice for Gemini CLI's user: {err}"
        );
        assert!(
            crate::stream::is_capacity_message(&err),
            "a fallback model may answer: {err}"
        );
        assert!(events.contains(&WorkerEvent::Error { message: err }));

        // A 503 (overload): its message alone says so.
        let (_, out) = feed(include_str!("fixtures/gemini_overloaded.jsonl"));
        let err = out.error.unwrap_or_default();
        assert_eq!(out.retryable, None);
        assert!(crate::stream::is_retryable_message(&err), "{err}");
        assert!(err.contains("The model is overloaded."), "{err}");
    }

    #[test]
    fn a_stream_cut_short_keeps_the_text_or_the_notice() {
        let (_, out) = feed(
            "{\"type\":\"message\",\"role\":\"assistant\",\"content\":\"partial\",\"delta\":true}",
        );
        assert_eq!(out.final_text.as_deref(), Some("partial"));
        let (_, out) = feed(r#"{"type":"error","severity":"error","message":"quota exceeded"}"#);
        assert_eq!(out.error.as_deref(), Some("quota exceeded"));
    }

    #[test]
    fn odd_shapes_never_panic() {
        let mut p = parser(AdapterKind::Gemini);
        for line in [
            "",
            "null",
            "[]",
            "{\"type\":3}",
            "{\"type\":\"result\",\"stats\":[]}",
            "{\"type\":\"result\",\"stats\":{\"input_tokens\":-4,\"cached\":1e300,\"models\":3}}",
            "{\"type\":\"tool_use\",\"tool_id\":7}",
            "{\"type\":\"tool_result\",\"error\":\"x\"}",
            "{\"type\":\"message\",\"role\":\"assistant\",\"content\":{}}",
            "{\"type\":\"init\",\"model\":[]}",
        ] {
            p.feed_line(line);
        }
        let _ = p.outcome();
    }

    #[test]
    fn live_mode_is_gemini_acp_with_the_same_configuration() {
        for (tools, mode) in [
            (&["read"][..], "default"),
            (&["read", "edit"][..], "auto_edit"),
            (&["read", "bash", "edit"][..], "yolo"),
        ] {
            let mut live = spec(&["gemini"], tools);
            live.rpc = true;
            live.model = Some("gemini-2.5-pro".into());
            live.prompt_file = Some("/run/prompts/01_a.md".into());
            live.session.resume = Some("5fff27e8-27bf-46fd-b9a5-8f46031191c8".into());
            live.session.ask_config = Some("/run/gemini-home".into());
            let l = build_launch(AdapterKind::Gemini, &live);
            assert_eq!(
                l.argv,
                [
                    "gemini",
                    "--acp",
                    "--skip-trust",
                    "--model",
                    "gemini-2.5-pro",
                    "--approval-mode",
                    mode
                ],
                "{tools:?}"
            );
            // The prompt and the session go in the protocol; the system prompt and the home
            // as in `-p`.
            assert_eq!(l.stdin, StdinFrom::Pipe);
            assert_eq!(
                l.env,
                [
                    (
                        ENV_SYSTEM_MD.to_owned(),
                        "/run/prompts/system-ab.md".to_owned()
                    ),
                    (ENV_HOME.to_owned(), "/run/gemini-home".to_owned()),
                ]
            );
        }
        let mut own = spec(&["gemini", "--yolo"], &["read"]);
        own.rpc = true;
        assert_eq!(
            build_launch(AdapterKind::Gemini, &own).argv,
            ["gemini", "--yolo", "--acp", "--skip-trust"]
        );
    }
}
