//! `opencode run --format json`: argv and stream parser.
//!
//! opencode writes one JSON line per finished part of the session: `step_start`, `text` (a whole
//! text part), `tool_use` (a call with its final state), `step_finish` (the step's reason and
//! token counts; a step is one model call) and `error` (the API's error with its status).
//! A `step_finish` with reason `stop` ends the answer: its step's text is final.
//!
//! The role reaches opencode as an agent of its own, `crew`, defined in `OPENCODE_CONFIG_CONTENT`
//! (merged over the user's configuration): its prompt is the agent's system prompt file, its
//! tools are the role's, its permissions allow edits and the shell only to roles that have
//! them, and subagents (`task`) and web fetches are off, so nothing runs outside the role.
//!
//! crew's ask server (`crewctl mcp --ask`) is a local MCP server of that configuration, its one
//! tool on and allowed whatever the role; a call of it is the question. opencode keeps its
//! sessions under the user's data directory, and `--session=ID` continues the one that asked.

use super::{
    add_usage, cut_chars, json_cost, json_count, status_retryable, strip_cr, Launch, LaunchSpec,
    Outcome, StdinFrom, StreamParser, WorkerEvent, Writes, ASK_MCP_SERVER, ASK_TOOL,
    TOOL_ARGS_LIMIT,
};
use crate::usage::Usage;
use serde_json::{json, Map, Value};

/// The environment variable whose JSON opencode merges over its configuration.
pub const ENV_CONFIG_CONTENT: &str = "OPENCODE_CONFIG_CONTENT";

/// The agent crew defines for its workers.
const AGENT: &str = "crew";

/// opencode's file-changing tools.
const WRITE_TOOLS: &[&str] = &["write", "edit", "patch", "multiedit"];

/// opencode's tools, each with the crew tool that grants it (`None`: never granted).
const TOOL_GRANTS: &[(&str, Option<&str>)] = &[
    ("read", Some("read")),
    ("grep", Some("grep")),
    ("glob", Some("find")),
    ("list", Some("ls")),
    ("bash", Some("bash")),
    ("edit", Some("edit")),
    ("patch", Some("edit")),
    ("multiedit", Some("edit")),
    ("write", Some("write")),
    ("webfetch", None),
    ("task", None),
];

pub(super) fn launch(spec: &LaunchSpec) -> Launch {
    if spec.rpc {
        return live_launch(spec);
    }
    let mut argv = spec.command.clone();
    if !spec.command.iter().skip(1).any(|a| a == "run") {
        argv.push("run".into());
    }
    // `--pure`: no external plugins, as pi runs without the user's extensions. `--title`: a
    // title of our own, or opencode asks the model for one in an extra request.
    argv.extend(
        [
            "--format", "json", "--pure", "--agent", AGENT, "--title", AGENT,
        ]
        .map(String::from),
    );
    // The answer to a question continues the session that asked (the prompt is the answer).
    if let Some(id) = &spec.session.resume {
        argv.push(format!("--session={id}"));
    }
    if let Some(model) = &spec.model {
        super::push_value(&mut argv, "--model", model);
    }
    if let Some(effort) = spec.effort.as_ref().or(spec.thinking.as_ref()) {
        if effort != "off" {
            super::push_value(&mut argv, "--variant", effort);
        }
    }
    let env = vec![(
        ENV_CONFIG_CONTENT.to_owned(),
        agent_config(spec).to_string(),
    )];
    match &spec.prompt_file {
        // The prompt is stdin (a regular file, read to its end): crewd always gives opencode
        // one (`prompt_through_file`), as `run` quotes a message argument with a space in it.
        Some(file) => Launch {
            argv,
            env,
            stdin: StdinFrom::File(file.clone()),
        },
        None => {
            // `--`: a prompt that starts with `-` is still the message.
            argv.push("--".into());
            argv.push(spec.prompt.clone());
            Launch {
                argv,
                env,
                stdin: StdinFrom::Null,
            }
        }
    }
}

/// `opencode acp`: the same `crew` agent as `run` (its tools, permissions, system prompt and
/// crew's ask server in `OPENCODE_CONFIG_CONTENT`), made the default agent, with the model;
/// the prompt and the session to continue go in the protocol ([`super::acp`]) on a stdin pipe.
/// opencode's title agent is off: `run --title` spares the extra model request, ACP has no
/// title to give.
fn live_launch(spec: &LaunchSpec) -> Launch {
    let mut argv = spec.command.clone();
    if !spec.command.iter().skip(1).any(|a| a == "acp") {
        argv.push("acp".into());
    }
    argv.push("--pure".into());
    let mut config = agent_config(spec);
    config["default_agent"] = json!(AGENT);
    config["agent"]["title"] = json!({"disable": true});
    if let Some(model) = &spec.model {
        config["model"] = json!(model);
    }
    Launch {
        argv,
        env: vec![(ENV_CONFIG_CONTENT.to_owned(), config.to_string())],
        stdin: StdinFrom::Pipe,
    }
}

/// The `crew` agent for this role.
fn agent_config(spec: &LaunchSpec) -> Value {
    let has = |t: &str| spec.tools.iter().any(|x| x == t);
    let allow = |yes: bool| if yes { "allow" } else { "deny" };
    let tools: Map<String, Value> = TOOL_GRANTS
        .iter()
        .map(|(tool, grant)| ((*tool).to_owned(), json!(grant.is_some_and(&has))))
        .collect();
    let mut agent = json!({
        "mode": "primary",
        "tools": tools,
        "permission": {
            "edit": allow(spec.edits_files()),
            "bash": allow(has("bash")),
            "webfetch": "deny",
        },
    });
    // opencode reads `{file:PATH}` in its configuration; the agent's prompt replaces
    // opencode's own.
    if let (Some(file), false) = (&spec.system_prompt_file, spec.system_prompt.is_empty()) {
        agent["prompt"] = json!(format!("{{file:{file}}}"));
    }
    let mut config = json!({ "agent": { AGENT: agent } });
    // crew's ask server writes nothing: its tool is on and allowed for every role, named
    // outright so that a user's `"*": "deny"` or `"*": false` does not take it away.
    if let Some(command) = &spec.session.ask_server {
        let tool = ask_tool_name();
        config["agent"][AGENT]["tools"][&tool] = json!(true);
        config["agent"][AGENT]["permission"][&tool] = json!("allow");
        config["mcp"] = json!({
            ASK_MCP_SERVER: { "type": "local", "command": command, "enabled": true },
        });
    }
    config
}

/// What opencode calls crew's ask tool: `<server>_<tool>`.
fn ask_tool_name() -> String {
    format!("{ASK_MCP_SERVER}_{ASK_TOOL}")
}

#[derive(Debug, Default)]
pub(crate) struct OpencodeParser {
    usage: Usage,
    /// Text parts of the step being streamed.
    step_text: Vec<String>,
    last_text: Option<String>,
    final_text: Option<String>,
    error: Option<String>,
    retryable: Option<bool>,
    writes: Writes,
    /// The `sessionID` of the stream (`opencode run --session=ID` continues it).
    session_id: Option<String>,
    started: bool,
    finished: bool,
}

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str)
}

fn obj<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    m.get(key).and_then(Value::as_object)
}

impl OpencodeParser {
    fn on_tool(&mut self, part: &Map<String, Value>) -> Vec<WorkerEvent> {
        let tool = str_of(part, "tool").unwrap_or_default();
        let state = obj(part, "state");
        let input = state.and_then(|s| obj(s, "input"));
        let status = state.and_then(|s| str_of(s, "status")).unwrap_or_default();
        // A call of a tool the agent does not have comes back as the `invalid` tool.
        let (name, refused) = match (tool, input.and_then(|i| str_of(i, "tool"))) {
            ("invalid", Some(wanted)) => (wanted, true),
            _ => (tool, false),
        };
        let write = WRITE_TOOLS.contains(&name);
        if write {
            self.writes.tried = self.writes.tried.saturating_add(1);
        }
        let message = state
            .and_then(|s| str_of(s, "error").or_else(|| str_of(s, "output")))
            .or_else(|| input.and_then(|i| str_of(i, "error")))
            .unwrap_or_default();
        // A call the agent's permissions turned down.
        let denied = status == "error"
            && ["permission", "denied", "rejected"]
                .iter()
                .any(|w| message.to_ascii_lowercase().contains(w));
        let args = input.map(|i| Value::Object(i.clone()).to_string());
        let mut events = vec![WorkerEvent::ToolStart {
            name: name.to_owned(),
            args: cut_chars(&args.unwrap_or_default(), TOOL_ARGS_LIMIT),
        }];
        // A call of crew's ask tool that went through is the question: its result told the
        // model to end its turn.
        if name == ask_tool_name() && status == "completed" {
            if let Some(question) = input.and_then(|i| str_of(i, "question")) {
                events.push(WorkerEvent::Ask {
                    question: question.to_owned(),
                });
            }
        }
        if refused || denied {
            if write {
                self.writes.refused = self.writes.refused.saturating_add(1);
            }
            events.push(WorkerEvent::Refused {
                tool: name.to_owned(),
                message: cut_chars(message, 500),
                write,
            });
        }
        events.push(WorkerEvent::ToolEnd {
            name: name.to_owned(),
            ok: status == "completed" && !refused,
        });
        events
    }

    fn on_step_finish(&mut self, part: &Map<String, Value>) -> Vec<WorkerEvent> {
        let mut delta = Usage {
            turns: 1,
            cost: json_cost(part.get("cost")),
            ..Usage::default()
        };
        if let Some(tokens) = obj(part, "tokens") {
            delta.input = json_count(tokens.get("input"));
            // The API's completion count holds the reasoning tokens; opencode splits them out.
            delta.output = json_count(tokens.get("output"))
                .saturating_add(json_count(tokens.get("reasoning")));
            if let Some(cache) = obj(tokens, "cache") {
                delta.cache_read = json_count(cache.get("read"));
                delta.cache_write = json_count(cache.get("write"));
            }
        }
        add_usage(&mut self.usage, &delta);
        let reason = str_of(part, "reason").unwrap_or("unknown").to_owned();
        let text = std::mem::take(&mut self.step_text).join("\n");
        let text = (!text.trim().is_empty()).then_some(text);
        if text.is_some() {
            self.last_text.clone_from(&text);
        }
        if reason == "stop" {
            self.final_text.clone_from(&text);
        }
        let mut events = vec![
            WorkerEvent::AssistantMessage {
                text,
                model: None,
                usage: delta,
                stop_reason: Some(reason.clone()),
                error: None,
            },
            WorkerEvent::TurnEnd,
        ];
        if reason == "stop" && !self.finished {
            self.finished = true;
            events.push(WorkerEvent::Finished);
        }
        events
    }

    fn on_error(&mut self, event: &Map<String, Value>) -> Vec<WorkerEvent> {
        let err = obj(event, "error");
        let data = err.and_then(|e| obj(e, "data"));
        let message = data
            .and_then(|d| str_of(d, "message"))
            .or_else(|| err.and_then(|e| str_of(e, "name")))
            .unwrap_or("opencode: the run failed")
            .to_owned();
        self.retryable = match data.and_then(|d| d.get("statusCode")) {
            Some(Value::Number(n)) => n.as_u64().map(status_retryable),
            _ => data
                .and_then(|d| d.get("isRetryable"))
                .and_then(Value::as_bool),
        };
        self.error = Some(message.clone());
        vec![WorkerEvent::Error { message }]
    }
}

impl StreamParser for OpencodeParser {
    fn feed_line(&mut self, line: &str) -> Vec<WorkerEvent> {
        let Ok(Value::Object(event)) = serde_json::from_str::<Value>(strip_cr(line)) else {
            return Vec::new();
        };
        let part = obj(&event, "part");
        let mut events = Vec::new();
        if self.session_id.is_none() {
            self.session_id = str_of(&event, "sessionID").map(str::to_owned);
        }
        if !self.started {
            self.started = true;
            events.push(WorkerEvent::Started {
                session_id: self.session_id.clone(),
                model: None,
            });
        }
        match (str_of(&event, "type"), part) {
            (Some("text"), Some(p)) => {
                if let Some(t) = str_of(p, "text") {
                    self.step_text.push(t.to_owned());
                }
            }
            (Some("tool_use"), Some(p)) => events.extend(self.on_tool(p)),
            (Some("step_finish"), Some(p)) => events.extend(self.on_step_finish(p)),
            (Some("error"), _) => events.extend(self.on_error(&event)),
            _ => {}
        }
        events
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn outcome(&self) -> Outcome {
        let pending = self.step_text.join("\n");
        let pending = (!pending.trim().is_empty()).then_some(pending);
        let final_text = match &self.error {
            Some(_) => None,
            None => self
                .final_text
                .clone()
                .or(pending)
                .or_else(|| self.last_text.clone()),
        };
        Outcome {
            final_text,
            usage: self.usage,
            model: None,
            error: self.error.clone(),
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
            prompt: "-Goal: fix it".into(),
            prompt_file: None,
            system_prompt: "You are a reviewer.".into(),
            system_prompt_mode: SystemPromptMode::Append,
            system_prompt_file: Some("/run/prompts/system-ab.md".into()),
            model: None,
            thinking: None,
            tools: tools.iter().map(|s| s.to_string()).collect(),
            rpc: false,
            prompt_via: Default::default(),
            skill_dirs: Vec::new(),
            session: Default::default(),
            cwd: "/work/repo".into(),
            effort: None,
            fallback_models: vec![],
        }
    }

    const BASE: [&str; 10] = [
        "opencode", "run", "--format", "json", "--pure", "--agent", "crew", "--title", "crew", "",
    ];

    fn argv(tail: &[&str]) -> Vec<String> {
        BASE[..9]
            .iter()
            .chain(tail)
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn argv_table() {
        let mut writer = spec(&["opencode"], &["read", "bash", "edit", "write"]);
        writer.model = Some("stub/stub-model".into());
        writer.thinking = Some("high".into());
        let mut long = spec(&["opencode", "run"], &["read"]);
        long.prompt = "x".repeat(ARGV_PROMPT_LIMIT + 1);
        long.prompt_file = Some("/run/prompts/01_a.md".into());
        let mut resumed = spec(&["opencode"], &["read"]);
        resumed.model = Some("stub/stub-model".into());
        resumed.session.resume = Some("ses_dc78caf69fferM3beKNCcXjSBG".into());
        resumed.session.ask_server = Some(ask_server());
        let mut resumed_long = resumed.clone();
        resumed_long.prompt = "x".repeat(ARGV_PROMPT_LIMIT + 1);
        resumed_long.prompt_file = Some("/run/prompts/01_a.md".into());
        let table = [
            (
                "read-only role",
                spec(&["opencode"], &["read", "grep", "find"]),
                argv(&["--", "-Goal: fix it"]),
                StdinFrom::Null,
            ),
            (
                "writing role with model and effort",
                writer,
                argv(&[
                    "--model",
                    "stub/stub-model",
                    "--variant",
                    "high",
                    "--",
                    "-Goal: fix it",
                ]),
                StdinFrom::Null,
            ),
            (
                "long prompt on stdin; the user's `run` is kept",
                long,
                argv(&[]),
                StdinFrom::File("/run/prompts/01_a.md".into()),
            ),
            (
                "the answer continues the session that asked",
                resumed,
                argv(&[
                    "--session=ses_dc78caf69fferM3beKNCcXjSBG",
                    "--model",
                    "stub/stub-model",
                    "--",
                    "-Goal: fix it",
                ]),
                StdinFrom::Null,
            ),
            (
                "a long answer on stdin",
                resumed_long,
                argv(&[
                    "--session=ses_dc78caf69fferM3beKNCcXjSBG",
                    "--model",
                    "stub/stub-model",
                ]),
                StdinFrom::File("/run/prompts/01_a.md".into()),
            ),
        ];
        for (name, spec, want, stdin) in table {
            let l = build_launch(AdapterKind::Opencode, &spec);
            assert_eq!(l.argv, want, "{name}");
            assert_eq!(l.stdin, stdin, "{name}");
            assert_eq!(l.env.len(), 1, "{name}");
        }
    }

    #[test]
    fn the_role_becomes_an_opencode_agent() {
        let config = |tools: &[&str]| {
            let l = build_launch(AdapterKind::Opencode, &spec(&["opencode"], tools));
            let (k, v) = &l.env[0];
            assert_eq!(k, ENV_CONFIG_CONTENT);
            serde_json::from_str::<Value>(v).unwrap()["agent"]["crew"].clone()
        };
        let reader = config(&["read", "grep", "find", "ls"]);
        assert_eq!(reader["prompt"], "{file:/run/prompts/system-ab.md}");
        assert_eq!(
            reader["permission"],
            json!({"edit": "deny", "bash": "deny", "webfetch": "deny"})
        );
        let on: Vec<&str> = TOOL_GRANTS
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| reader["tools"][t] == true)
            .collect();
        assert_eq!(on, ["read", "grep", "glob", "list"]);
        let writer = config(&["read", "bash", "edit", "write"]);
        assert_eq!(
            writer["permission"],
            json!({"edit": "allow", "bash": "allow", "webfetch": "deny"})
        );
        assert_eq!(
            writer["tools"]["task"], false,
            "no subagent outside the role"
        );
        assert_eq!(writer["tools"]["patch"], true);
        assert!(crate::stream::policy_gaps(AdapterKind::Opencode, &["bash".into()]).is_empty());
    }

    fn ask_server() -> Vec<String> {
        ["/opt/crew/crewctl", "mcp", "--ask"]
            .map(String::from)
            .to_vec()
    }

    fn config_of(spec: &LaunchSpec) -> Value {
        let l = build_launch(AdapterKind::Opencode, spec);
        serde_json::from_str(&l.env[0].1).unwrap()
    }

    #[test]
    fn crews_ask_server_is_a_local_mcp_server_its_tool_allowed_for_every_role() {
        for tools in [
            &[][..],
            &["read", "grep"],
            &["read", "bash", "edit", "write"],
        ] {
            let mut s = spec(&["opencode"], tools);
            s.session.ask_server = Some(ask_server());
            let config = config_of(&s);
            assert_eq!(
                config["mcp"],
                json!({"crew_ask": {
                    "type": "local",
                    "command": ["/opt/crew/crewctl", "mcp", "--ask"],
                    "enabled": true,
                }}),
                "{tools:?}"
            );
            let agent = &config["agent"]["crew"];
            assert_eq!(agent["tools"]["crew_ask_ask_user"], true, "{tools:?}");
            assert_eq!(
                agent["permission"]["crew_ask_ask_user"], "allow",
                "{tools:?}"
            );
        }
        // Without an ask server, no MCP server and no such tool.
        let config = config_of(&spec(&["opencode"], &["read"]));
        assert_eq!(config.get("mcp"), None);
        assert_eq!(
            config["agent"]["crew"]["tools"].get("crew_ask_ask_user"),
            None
        );
    }

    /// Real opencode 1.18.33 streams (stub model, crew's ask server): the completed call of
    /// `crew_ask_ask_user` is the question, once; the turn ends with the model's reply after
    /// its result; the stream's `sessionID` is what the answer continues, and the resumed run
    /// (`--session=ID`) is the same session, asks nothing and counts only its own model call.
    #[test]
    fn a_call_of_crews_ask_tool_is_the_question() {
        let session = Some("ses_dc78caf69fferM3beKNCcXjSBG");
        let (events, out) = feed(include_str!("fixtures/opencode_ask.jsonl"));
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
        assert_eq!(out.session_id.as_deref(), session);
        assert_eq!(
            out.final_text.as_deref(),
            Some("STUB-WAITING: I asked the user which database to use.")
        );
        assert_eq!((out.usage.turns, out.writes.tried), (2, 0));

        let (events, out) = feed(include_str!("fixtures/opencode_resumed.jsonl"));
        assert!(!events.iter().any(|e| matches!(e, WorkerEvent::Ask { .. })));
        assert_eq!(out.session_id.as_deref(), session);
        assert_eq!(
            out.final_text.as_deref(),
            Some("STUB-FINAL: the service uses Postgres 16.")
        );
        assert_eq!(
            (out.usage.input, out.usage.output, out.usage.turns),
            (100, 9, 1)
        );

        // Another tool of that name, a call that failed, or a question that is no string,
        // asks nothing.
        for line in [
            r#"{"type":"tool_use","part":{"tool":"ask_user","state":{"status":"completed","input":{"question":"q"}}}}"#,
            r#"{"type":"tool_use","part":{"tool":"other_ask_user","state":{"status":"completed","input":{"question":"q"}}}}"#,
            r#"{"type":"tool_use","part":{"tool":"crew_ask_ask_user","state":{"status":"error","input":{"question":"q"},"error":"MCP error"}}}"#,
            r#"{"type":"tool_use","part":{"tool":"crew_ask_ask_user","state":{"status":"completed","input":{"question":5}}}}"#,
        ] {
            let (events, _) = feed(line);
            assert!(
                !events.iter().any(|e| matches!(e, WorkerEvent::Ask { .. })),
                "{line}"
            );
        }
    }

    fn feed(stream: &str) -> (Vec<WorkerEvent>, Outcome) {
        let mut p = parser(AdapterKind::Opencode);
        let events = stream.lines().flat_map(|l| p.feed_line(l)).collect();
        (events, p.outcome())
    }

    #[test]
    fn parses_recorded_streams() {
        // Recorded from opencode 1.18.33 against a stub chat completions server.
        let (events, out) = feed(include_str!("fixtures/opencode_basic.jsonl"));
        assert_eq!(
            out.final_text.as_deref(),
            Some("Hello from the opencode stub.")
        );
        assert_eq!(
            (
                out.usage.input,
                out.usage.output,
                out.usage.cache_read,
                out.usage.turns
            ),
            (100, 9, 30, 1)
        );
        assert!(matches!(events.first(), Some(WorkerEvent::Started { .. })));
        assert_eq!(events.iter().filter(|e| e.is_final()).count(), 2);
        assert_eq!(events.last(), Some(&WorkerEvent::Finished));

        let (events, out) = feed(include_str!("fixtures/opencode_tool.jsonl"));
        assert_eq!((out.writes.tried, out.writes.refused), (1, 0));
        assert_eq!(out.usage.turns, 2);
        assert!(events.contains(&WorkerEvent::ToolEnd {
            name: "write".into(),
            ok: true
        }));

        let (events, out) = feed(include_str!("fixtures/opencode_refused.jsonl"));
        assert!(out.writes.all_refused());
        assert!(events.iter().any(|e| matches!(
            e,
            WorkerEvent::Refused { tool, write: true, message } if tool == "write" && message.contains("unavailable tool")
        )));
        assert_eq!(
            out.final_text.as_deref(),
            Some("Hello from the opencode stub.")
        );

        let (_, out) = feed(include_str!("fixtures/opencode_api_error.jsonl"));
        assert_eq!(out.final_text, None);
        assert_eq!(
            out.error.as_deref(),
            Some("stub says 400: the request is bad")
        );
        assert_eq!(out.retryable, Some(false));
    }

    #[test]
    fn statuses_decide_retries() {
        let (_, out) = feed(
            r#"{"type":"error","error":{"name":"APIError","data":{"message":"slow down","statusCode":429}}}"#,
        );
        assert_eq!(out.retryable, Some(true));
        let (_, out) = feed(
            r#"{"type":"error","error":{"name":"UnknownError","data":{"message":"x","isRetryable":true}}}"#,
        );
        assert_eq!(out.retryable, Some(true));
        let (_, out) = feed(r#"{"type":"error","error":{"name":"ProviderAuthError"}}"#);
        assert_eq!(
            (out.error.as_deref(), out.retryable),
            (Some("ProviderAuthError"), None)
        );
    }

    #[test]
    fn odd_shapes_never_panic() {
        let mut p = parser(AdapterKind::Opencode);
        for line in [
            "",
            "null",
            "{\"type\":\"text\"}",
            "{\"type\":\"text\",\"part\":{\"text\":7}}",
            "{\"type\":\"tool_use\",\"part\":{\"tool\":\"invalid\",\"state\":[]}}",
            "{\"type\":\"step_finish\",\"part\":{\"tokens\":{\"input\":-1,\"cache\":3},\"cost\":\"x\"}}",
            "{\"type\":\"error\",\"error\":{\"data\":{\"statusCode\":1e40}}}",
        ] {
            p.feed_line(line);
        }
        let _ = p.outcome();
    }

    #[test]
    fn live_mode_is_opencode_acp_with_the_same_agent() {
        let mut live = spec(&["opencode"], &["read", "edit"]);
        live.rpc = true;
        live.model = Some("stub/stub-model".into());
        live.prompt_file = Some("/run/prompts/01_a.md".into());
        live.session.resume = Some("ses_dc78caf69fferM3beKNCcXjSBG".into());
        live.session.ask_server = Some(ask_server());
        let l = build_launch(AdapterKind::Opencode, &live);
        assert_eq!(l.argv, ["opencode", "acp", "--pure"]);
        assert_eq!(l.stdin, StdinFrom::Pipe);
        let (name, config) = &l.env[0];
        assert_eq!(name, ENV_CONFIG_CONTENT);
        let config: Value = serde_json::from_str(config).unwrap();
        // The `run` mode's agent, made the default, with the model; no title request.
        let mut run = live.clone();
        run.rpc = false;
        let mut want = agent_config(&run);
        want["default_agent"] = json!("crew");
        want["model"] = json!("stub/stub-model");
        want["agent"]["title"] = json!({"disable": true});
        assert_eq!(config, want);
        assert_eq!(config["agent"]["crew"]["permission"]["edit"], "allow");
        assert_eq!(config["agent"]["crew"]["permission"]["bash"], "deny");
        assert!(config["mcp"]["crew_ask"].is_object());
        let mut own = spec(&["opencode", "acp"], &["read"]);
        own.rpc = true;
        assert_eq!(
            build_launch(AdapterKind::Opencode, &own).argv,
            ["opencode", "acp", "--pure"]
        );
    }
}
