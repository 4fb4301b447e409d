//! `pi --mode json -p` (and `--mode rpc`): argv and stream parser.
//!
//! Usage is summed over every assistant `message_end` (pi-crew's last-wins merge undercounts),
//! and `usage.cost` is an object whose `total` is the USD amount. pi exits 0 in JSON mode even
//! when the model failed, so a model error is read from `stopReason: "error"` + `errorMessage`.

use super::{
    add_usage, cut_chars, json_cost, json_count, strip_cr, LaunchSpec, Outcome, StreamParser,
    WorkerEvent, ASK_TOOL, TOOL_ARGS_LIMIT,
};
use crate::resource::SystemPromptMode;
use crate::usage::Usage;
use serde_json::{json, Map, Value};

/// pi's thinking levels, as accepted in a `--model id:level` suffix.
const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

pub(super) fn argv(spec: &LaunchSpec) -> Vec<String> {
    let mut argv = spec.command.clone();
    if spec.rpc {
        argv.extend(["--mode".into(), "rpc".into()]);
    } else {
        argv.extend(["--mode".into(), "json".into(), "-p".into()]);
    }
    // A session file crew names keeps the conversation for an answer to continue (it works in
    // json and rpc mode alike); without one, nothing is saved.
    match &spec.session.file {
        Some(file) => argv.extend(["--session".into(), file.clone()]),
        None => argv.push("--no-session".into()),
    }
    // The user's own extensions and skills (`~/.pi/agent/...`) would widen what a role may do.
    argv.push("--no-extensions".into());
    // crew's own extension is loaded even so: it gives the agent `ask_user`.
    if let Some(ext) = &spec.session.ask_extension {
        argv.extend(["--extension".into(), ext.clone()]);
    }
    argv.push("--no-skills".into());
    // pi loads an explicit `--skill` even with `--no-skills`: only the task's own.
    for dir in &spec.skill_dirs {
        argv.push("--skill".into());
        argv.push(dir.clone());
    }
    match (&spec.model, &spec.thinking) {
        (Some(model), thinking) => {
            super::push_value(&mut argv, "--model", &model_arg(model, thinking.as_deref()));
        }
        (None, Some(thinking)) => {
            super::push_value(&mut argv, "--thinking", thinking);
        }
        (None, None) => {}
    }
    // `--tools` is an allowlist of every tool, extension tools included: `ask_user` must be in
    // it; a role without tools keeps only the extension's (`--no-builtin-tools`).
    let ask = spec.session.ask_extension.is_some();
    match (spec.tools.is_empty(), ask) {
        (true, false) => argv.push("--no-tools".into()),
        (true, true) => argv.push("--no-builtin-tools".into()),
        (false, _) => {
            let mut tools = spec.tools.join(",");
            if ask && !spec.tools.iter().any(|t| t == ASK_TOOL) {
                tools.push(',');
                tools.push_str(ASK_TOOL);
            }
            argv.extend(["--tools".into(), tools]);
        }
    }
    let system = spec
        .system_prompt_file
        .clone()
        .or_else(|| (!spec.system_prompt.is_empty()).then(|| spec.system_prompt.clone()));
    if let Some(system) = system {
        argv.push(
            match spec.system_prompt_mode {
                SystemPromptMode::Replace => "--system-prompt",
                SystemPromptMode::Append => "--append-system-prompt",
            }
            .into(),
        );
        argv.push(system);
    }
    // rpc mode rejects a prompt argument: the prompt goes on stdin (`rpc_prompt_line`).
    if !spec.rpc {
        match &spec.prompt_file {
            Some(file) => argv.push(format!("@{file}")),
            // Too long and no file: argv is the only way left; the caller should have written one.
            None => argv.push(format!("Task: {}", spec.prompt)),
        }
    }
    argv
}

/// `model[:thinking]`, unless the model already carries a valid thinking suffix.
fn model_arg(model: &str, thinking: Option<&str>) -> String {
    let has_suffix = model
        .rsplit_once(':')
        .is_some_and(|(_, level)| THINKING_LEVELS.contains(&level));
    match thinking {
        Some(level) if !has_suffix && !level.is_empty() => format!("{model}:{level}"),
        _ => model.to_owned(),
    }
}

/// The rpc `prompt` command: one JSON line, without its `\n` (the writer adds it).
pub(super) fn rpc_prompt_line(prompt: &str) -> String {
    rpc_line(json!({"type": "prompt", "message": prompt}))
}

/// The rpc `steer` command: one JSON line, without its `\n`.
pub(super) fn rpc_steer_line(message: &str) -> String {
    rpc_line(json!({"type": "steer", "message": message}))
}

fn rpc_line(v: Value) -> String {
    // serde_json escapes control characters, so a prompt's newlines cannot split the line.
    v.to_string()
}

#[derive(Debug, Default)]
pub(crate) struct PiParser {
    usage: Usage,
    model: Option<String>,
    last_text: Option<String>,
    /// The last `errorMessage` of an assistant message that stopped with an error (or aborted).
    last_error: Option<String>,
    /// `agent_end` already reported; reset by `agent_start` (rpc mode may run again).
    finished: bool,
}

impl PiParser {
    fn on_message_end(&mut self, message: &Map<String, Value>) -> Option<WorkerEvent> {
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            return None;
        }
        let text = assistant_text(message.get("content"));
        let model = message
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let usage = message_usage(message.get("usage"));
        let stop_reason = message
            .get("stopReason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let error_message = message
            .get("errorMessage")
            .and_then(Value::as_str)
            .filter(|m| !m.trim().is_empty())
            .map(str::to_owned);
        let error = match (stop_reason.as_deref(), error_message) {
            (_, Some(msg)) => Some(msg),
            (Some(reason @ ("error" | "aborted")), None) => {
                Some(format!("model stopped: {reason}"))
            }
            _ => None,
        };
        add_usage(&mut self.usage, &usage);
        if model.is_some() {
            self.model.clone_from(&model);
        }
        if text.is_some() {
            self.last_text.clone_from(&text);
        }
        if matches!(stop_reason.as_deref(), Some("error" | "aborted")) {
            self.last_error.clone_from(&error);
        }
        Some(WorkerEvent::AssistantMessage {
            text,
            model,
            usage,
            stop_reason,
            error,
        })
    }

    fn finish(&mut self) -> Vec<WorkerEvent> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        vec![WorkerEvent::Finished]
    }
}

impl StreamParser for PiParser {
    fn feed_line(&mut self, line: &str) -> Vec<WorkerEvent> {
        let Ok(Value::Object(event)) = serde_json::from_str::<Value>(strip_cr(line)) else {
            return Vec::new();
        };
        let str_field = |key: &str| event.get(key).and_then(Value::as_str).map(str::to_owned);
        match event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "session" => vec![WorkerEvent::Started {
                session_id: str_field("id"),
                model: None,
            }],
            "agent_start" => {
                self.finished = false;
                Vec::new()
            }
            "message_end" => match event.get("message") {
                Some(Value::Object(message)) => self.on_message_end(message).into_iter().collect(),
                _ => Vec::new(),
            },
            "tool_execution_start" => {
                let name = str_field("toolName").unwrap_or_default();
                let args = event.get("args").cloned().unwrap_or(Value::Null);
                let mut events = vec![WorkerEvent::ToolStart {
                    name: name.clone(),
                    args: cut_chars(&args_text(&args), TOOL_ARGS_LIMIT),
                }];
                if name == ASK_TOOL {
                    if let Some(question) = args.get("question").and_then(Value::as_str) {
                        events.push(WorkerEvent::Ask {
                            question: question.to_owned(),
                        });
                    }
                }
                events
            }
            "tool_execution_end" => {
                let ok = !event
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                vec![WorkerEvent::ToolEnd {
                    name: str_field("toolName").unwrap_or_default(),
                    ok,
                }]
            }
            "turn_end" => {
                self.usage.turns = self.usage.turns.saturating_add(1);
                vec![WorkerEvent::TurnEnd]
            }
            // Newer pi says `willRetry: true` when it is about to retry by itself.
            "agent_end" if event.get("willRetry").and_then(Value::as_bool) == Some(true) => {
                Vec::new()
            }
            "agent_end" | "agent_settled" => self.finish(),
            // rpc `response` lines, message_update deltas, session bookkeeping: nothing to report.
            _ => Vec::new(),
        }
    }

    fn usage(&self) -> Usage {
        self.usage
    }

    fn outcome(&self) -> Outcome {
        Outcome {
            final_text: self.last_text.clone(),
            usage: self.usage,
            model: self.model.clone(),
            error: match self.last_text {
                Some(_) => None,
                None => self.last_error.clone(),
            },
            ..Outcome::default()
        }
    }

    /// rpc mode: a `prompt` command, then a `steer` command per steer (pi takes it at the
    /// agent's next step).
    fn live_start(&mut self, prompt: &str) -> Vec<String> {
        vec![rpc_prompt_line(prompt)]
    }
    fn live_steer(&mut self, message: &str) -> Vec<String> {
        vec![rpc_steer_line(message)]
    }
}

fn args_text(args: &Value) -> String {
    match args {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The text parts of an assistant message, joined; `None` when there is no visible text.
fn assistant_text(content: Option<&Value>) -> Option<String> {
    let text = match content? {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

fn message_usage(usage: Option<&Value>) -> Usage {
    let Some(usage) = usage else {
        return Usage::default();
    };
    let cost = match usage.get("cost") {
        Some(obj @ Value::Object(_)) => json_cost(obj.get("total")),
        // Not pi's shape, but cheap to accept.
        other => json_cost(other),
    };
    Usage {
        input: json_count(usage.get("input")),
        output: json_count(usage.get("output")),
        cache_read: json_count(usage.get("cacheRead")),
        cache_write: json_count(usage.get("cacheWrite")),
        cost,
        turns: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{build_argv, parser, prompt_needs_file, AdapterKind, ARGV_PROMPT_LIMIT};

    fn spec() -> LaunchSpec {
        LaunchSpec {
            command: vec!["pi".into()],
            prompt: "Goal: fix it".into(),
            prompt_file: None,
            system_prompt: String::new(),
            system_prompt_mode: SystemPromptMode::Replace,
            system_prompt_file: None,
            model: None,
            thinking: None,
            tools: vec![],
            rpc: false,
            prompt_via: Default::default(),
            effort: None,
            fallback_models: vec![],
            skill_dirs: Vec::new(),
            session: Default::default(),
            cwd: "/work/repo".into(),
        }
    }

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn argv_table() {
        let mut full = spec();
        full.command = vec!["node".into(), "pi.js".into()];
        full.model = Some("anthropic/claude-sonnet-4".into());
        full.thinking = Some("high".into());
        full.tools = vec!["read".into(), "bash".into()];
        full.system_prompt = "You are terse.".into();
        full.system_prompt_file = Some("/tmp/sys.md".into());
        full.system_prompt_mode = SystemPromptMode::Append;

        let mut suffixed = spec();
        suffixed.model = Some("openai/gpt-5:low".into());
        suffixed.thinking = Some("high".into());

        let mut thinking_only = spec();
        thinking_only.thinking = Some("medium".into());
        thinking_only.system_prompt = "Be brief.".into();

        let mut file = spec();
        file.prompt = "x".repeat(ARGV_PROMPT_LIMIT + 1);
        file.prompt_file = Some("/tmp/task.md".into());

        let mut rpc = spec();
        rpc.rpc = true;
        rpc.tools = vec!["read".into()];

        let mut skills = spec();
        skills.skill_dirs = vec!["/run/skills/safe-bash".into(), "/run/skills/x".into()];

        let mut session = spec();
        session.tools = vec!["read".into()];
        session.session.file = Some("/run/sessions/t.attempt-1.jsonl".into());
        session.session.ask_extension = Some("/run/extensions/crew-ask.ts".into());

        let mut session_rpc = session.clone();
        session_rpc.rpc = true;
        session_rpc.tools = vec![];

        let table: Vec<(&str, LaunchSpec, Vec<String>)> = vec![
            (
                "minimal",
                spec(),
                args(&[
                    "pi",
                    "--mode",
                    "json",
                    "-p",
                    "--no-session",
                    "--no-extensions",
                    "--no-skills",
                    "--no-tools",
                    "Task: Goal: fix it",
                ]),
            ),
            (
                "full",
                full,
                args(&[
                    "node",
                    "pi.js",
                    "--mode",
                    "json",
                    "-p",
                    "--no-session",
                    "--no-extensions",
                    "--no-skills",
                    "--model",
                    "anthropic/claude-sonnet-4:high",
                    "--tools",
                    "read,bash",
                    "--append-system-prompt",
                    "/tmp/sys.md",
                    "Task: Goal: fix it",
                ]),
            ),
            (
                "model with suffix keeps it",
                suffixed,
                args(&[
                    "pi",
                    "--mode",
                    "json",
                    "-p",
                    "--no-session",
                    "--no-extensions",
                    "--no-skills",
                    "--model",
                    "openai/gpt-5:low",
                    "--no-tools",
                    "Task: Goal: fix it",
                ]),
            ),
            (
                "thinking without model, system text",
                thinking_only,
                args(&[
                    "pi",
                    "--mode",
                    "json",
                    "-p",
                    "--no-session",
                    "--no-extensions",
                    "--no-skills",
                    "--thinking",
                    "medium",
                    "--no-tools",
                    "--system-prompt",
                    "Be brief.",
                    "Task: Goal: fix it",
                ]),
            ),
            (
                "prompt file",
                file,
                args(&[
                    "pi",
                    "--mode",
                    "json",
                    "-p",
                    "--no-session",
                    "--no-extensions",
                    "--no-skills",
                    "--no-tools",
                    "@/tmp/task.md",
                ]),
            ),
            (
                "rpc has no prompt arg",
                rpc,
                args(&[
                    "pi",
                    "--mode",
                    "rpc",
                    "--no-session",
                    "--no-extensions",
                    "--no-skills",
                    "--tools",
                    "read",
                ]),
            ),
            (
                "skills: each after --no-skills",
                skills,
                args(&[
                    "pi",
                    "--mode",
                    "json",
                    "-p",
                    "--no-session",
                    "--no-extensions",
                    "--no-skills",
                    "--skill",
                    "/run/skills/safe-bash",
                    "--skill",
                    "/run/skills/x",
                    "--no-tools",
                    "Task: Goal: fix it",
                ]),
            ),
            (
                "session file and the ask extension",
                session,
                args(&[
                    "pi",
                    "--mode",
                    "json",
                    "-p",
                    "--session",
                    "/run/sessions/t.attempt-1.jsonl",
                    "--no-extensions",
                    "--extension",
                    "/run/extensions/crew-ask.ts",
                    "--no-skills",
                    "--tools",
                    "read,ask_user",
                    "Task: Goal: fix it",
                ]),
            ),
            (
                "rpc with a session, no tools but ask_user",
                session_rpc,
                args(&[
                    "pi",
                    "--mode",
                    "rpc",
                    "--session",
                    "/run/sessions/t.attempt-1.jsonl",
                    "--no-extensions",
                    "--extension",
                    "/run/extensions/crew-ask.ts",
                    "--no-skills",
                    "--no-builtin-tools",
                ]),
            ),
        ];
        for (name, spec, want) in table {
            assert_eq!(build_argv(AdapterKind::Pi, &spec), want, "{name}");
        }
        assert!(prompt_needs_file(&"x".repeat(ARGV_PROMPT_LIMIT + 1)));
        assert!(!prompt_needs_file("short"));
    }

    #[test]
    fn rpc_lines_are_json_commands() {
        let line = rpc_prompt_line("say \"hi\"\nplease");
        assert!(!line.contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            json!({"type": "prompt", "message": "say \"hi\"\nplease"})
        );
        let v: Value = serde_json::from_str(&rpc_steer_line("focus")).unwrap();
        assert_eq!(v, json!({"type": "steer", "message": "focus"}));
    }

    struct Case {
        name: &'static str,
        stream: String,
        final_text: Option<&'static str>,
        usage: Usage,
        model: Option<&'static str>,
        error: Option<&'static str>,
        tools: &'static [&'static str],
        asks: &'static [&'static str],
        finished: usize,
    }

    fn run(stream: &str) -> (Vec<WorkerEvent>, Outcome) {
        let mut p = parser(AdapterKind::Pi);
        let mut events = Vec::new();
        for line in stream.split('\n') {
            events.extend(p.feed_line(line));
        }
        assert_eq!(p.usage(), p.outcome().usage);
        (events, p.outcome())
    }

    fn usage(
        input: u64,
        output: u64,
        cache_read: u64,
        cache_write: u64,
        cost: f64,
        turns: u64,
    ) -> Usage {
        Usage {
            input,
            output,
            cache_read,
            cache_write,
            cost,
            turns,
        }
    }

    #[test]
    fn parses_recorded_streams() {
        let basic = include_str!("fixtures/pi_basic.jsonl");
        let big = "y".repeat(3 * 1024 * 1024);
        let huge = basic.replace("All tests pass.", &big);
        let table = vec![
            Case {
                name: "basic: tools, two turns, summed usage",
                stream: basic.to_owned(),
                final_text: Some("Fixed the off-by-one in src/lib.rs. All tests pass."),
                usage: usage(1500, 180, 4000, 300, 0.0123, 2),
                model: Some("claude-sonnet-4-5"),
                error: None,
                tools: &["read", "bash"],
                asks: &[],
                finished: 1,
            },
            Case {
                name: "CRLF line endings",
                stream: basic.replace('\n', "\r\n"),
                final_text: Some("Fixed the off-by-one in src/lib.rs. All tests pass."),
                usage: usage(1500, 180, 4000, 300, 0.0123, 2),
                model: Some("claude-sonnet-4-5"),
                error: None,
                tools: &["read", "bash"],
                asks: &[],
                finished: 1,
            },
            Case {
                name: "huge line",
                stream: huge,
                final_text: None, // checked by length below
                usage: usage(1500, 180, 4000, 300, 0.0123, 2),
                model: Some("claude-sonnet-4-5"),
                error: None,
                tools: &["read", "bash"],
                asks: &[],
                finished: 1,
            },
            Case {
                name: "model error with exit 0",
                stream: include_str!("fixtures/pi_model_error.jsonl").to_owned(),
                final_text: None,
                usage: usage(0, 0, 0, 0, 0.0, 1),
                model: Some("gpt-5"),
                error: Some("429 rate_limit_error: overloaded"),
                tools: &[],
                asks: &[],
                finished: 1,
            },
            Case {
                name: "retried after an error: text wins",
                stream: include_str!("fixtures/pi_retry_then_ok.jsonl").to_owned(),
                final_text: Some("Done after retry."),
                usage: usage(210, 12, 0, 0, 0.002, 2),
                model: Some("gpt-5"),
                error: None,
                tools: &[],
                asks: &[],
                finished: 1,
            },
            Case {
                name: "ask_user, invalid JSON lines, rpc responses",
                stream: include_str!("fixtures/pi_rpc_ask.jsonl").to_owned(),
                final_text: None,
                usage: usage(90, 15, 0, 0, 0.0004, 1),
                model: Some("fake-1"),
                error: None,
                tools: &["ask_user"],
                asks: &["Which database should I use?"],
                finished: 1,
            },
            Case {
                name: "no final text",
                stream: include_str!("fixtures/pi_no_final_text.jsonl").to_owned(),
                final_text: None,
                usage: usage(100, 20, 10, 5, 0.00035, 2),
                model: Some("fake-1"),
                error: None,
                tools: &["read"],
                asks: &[],
                finished: 1,
            },
            Case {
                name: "empty",
                stream: String::new(),
                final_text: None,
                usage: Usage::default(),
                model: None,
                error: None,
                tools: &[],
                asks: &[],
                finished: 0,
            },
        ];
        for case in table {
            let (events, outcome) = run(&case.stream);
            let name = case.name;
            if name == "huge line" {
                assert!(
                    outcome.final_text.as_deref().unwrap_or_default().len() > big.len(),
                    "{name}"
                );
            } else {
                assert_eq!(outcome.final_text.as_deref(), case.final_text, "{name}");
            }
            let got = outcome.usage;
            assert_eq!(
                (
                    got.input,
                    got.output,
                    got.cache_read,
                    got.cache_write,
                    got.turns
                ),
                (
                    case.usage.input,
                    case.usage.output,
                    case.usage.cache_read,
                    case.usage.cache_write,
                    case.usage.turns
                ),
                "{name}"
            );
            assert!(
                (got.cost - case.usage.cost).abs() < 1e-9,
                "{name}: cost {}",
                got.cost
            );
            assert_eq!(outcome.model.as_deref(), case.model, "{name}");
            assert_eq!(outcome.error.as_deref(), case.error, "{name}");
            let tools: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    WorkerEvent::ToolStart { name, .. } => Some(name.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(tools, case.tools, "{name}");
            let tool_ends = events
                .iter()
                .filter(|e| matches!(e, WorkerEvent::ToolEnd { .. }))
                .count();
            assert_eq!(tool_ends, case.tools.len(), "{name}");
            let asks: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    WorkerEvent::Ask { question } => Some(question.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(asks, case.asks, "{name}");
            let finished = events
                .iter()
                .filter(|e| matches!(e, WorkerEvent::Finished))
                .count();
            assert_eq!(finished, case.finished, "{name}");
            let turn_ends = events
                .iter()
                .filter(|e| matches!(e, WorkerEvent::TurnEnd))
                .count() as u64;
            assert_eq!(turn_ends, got.turns, "{name}");
            // Σ of per-message usage equals the total: AssistantMessage usage is not cumulative.
            let mut sum = Usage::default();
            for e in &events {
                if let WorkerEvent::AssistantMessage { usage, .. } = e {
                    add_usage(&mut sum, usage);
                }
            }
            assert_eq!((sum.input, sum.output), (got.input, got.output), "{name}");
        }
    }

    #[test]
    fn event_details() {
        let (events, _) = run(include_str!("fixtures/pi_basic.jsonl"));
        assert_eq!(
            events.first(),
            Some(&WorkerEvent::Started {
                session_id: Some("0f9a7c4e-5d1b-4c1e-9a55-2b7d1e0c3f11".into()),
                model: None
            })
        );
        let finals: Vec<bool> = events
            .iter()
            .filter(|e| matches!(e, WorkerEvent::AssistantMessage { .. }))
            .map(WorkerEvent::is_final)
            .collect();
        assert_eq!(finals, [false, true], "only the stop message is final");
        assert!(events.contains(&WorkerEvent::ToolEnd {
            name: "bash".into(),
            ok: false
        }));
        assert!(events.contains(&WorkerEvent::ToolEnd {
            name: "read".into(),
            ok: true
        }));
    }

    #[test]
    fn tool_args_are_cut() {
        let long = "z".repeat(10_000);
        let line = json!({"type": "tool_execution_start", "toolCallId": "t", "toolName": "write",
            "args": {"path": "a", "content": long}})
        .to_string();
        let events = parser(AdapterKind::Pi).feed_line(&line);
        match events.as_slice() {
            [WorkerEvent::ToolStart { name, args }] => {
                assert_eq!(name, "write");
                assert!(
                    args.chars().count() <= TOOL_ARGS_LIMIT + 1,
                    "{}",
                    args.len()
                );
                assert!(args.starts_with("{\"content\":\"zzz"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn error_outcomes() {
        let end = |m: Value| json!({"type": "message_end", "message": m}).to_string();
        let table: &[(&[String], Option<&str>)] = &[
            (
                &[end(json!({"role": "assistant", "stopReason": "error"}))],
                Some("model stopped: error"),
            ),
            (
                &[end(
                    json!({"role": "assistant", "stopReason": "aborted", "errorMessage": "Request was aborted"}),
                )],
                Some("Request was aborted"),
            ),
            (
                &[
                    end(json!({"role": "assistant", "stopReason": "error", "errorMessage": "503"})),
                    end(
                        json!({"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": "ok"}]}),
                    ),
                ],
                None,
            ),
            (
                &[end(
                    json!({"role": "assistant", "stopReason": "length", "content": []}),
                )],
                None,
            ),
            (
                &[end(
                    json!({"role": "user", "stopReason": "error", "errorMessage": "not mine"}),
                )],
                None,
            ),
        ];
        for (lines, want) in table {
            let mut p = parser(AdapterKind::Pi);
            for line in lines.iter() {
                p.feed_line(line);
            }
            assert_eq!(p.outcome().error.as_deref(), *want, "{lines:?}");
        }
    }

    #[test]
    fn will_retry_is_not_finished() {
        let mut p = parser(AdapterKind::Pi);
        assert!(p
            .feed_line(r#"{"type":"agent_end","messages":[],"willRetry":true}"#)
            .is_empty());
        assert_eq!(
            p.feed_line(r#"{"type":"agent_end","messages":[],"willRetry":false}"#),
            [WorkerEvent::Finished]
        );
        assert!(
            p.feed_line(r#"{"type":"agent_settled"}"#).is_empty(),
            "one Finished per run"
        );
        p.feed_line(r#"{"type":"agent_start"}"#);
        assert_eq!(
            p.feed_line(r#"{"type":"agent_settled"}"#),
            [WorkerEvent::Finished]
        );
    }

    #[test]
    fn odd_shapes_never_panic() {
        let lines = [
            "",
            "\r",
            "null",
            "[]",
            "42",
            "\"str\"",
            "{",
            "{}",
            r#"{"type":42}"#,
            r#"{"type":"message_end"}"#,
            r#"{"type":"message_end","message":[]}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":7,"usage":"lots"}}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":[1,null,{"type":"text"}],"usage":{"input":-5,"output":1e300,"cost":{"total":"free"}}}}"#,
            r#"{"type":"message_end","message":{"role":"assistant","usage":{"input":18446744073709551615,"cost":{"total":1e308}}}}"#,
            r#"{"type":"message_end","message":{"role":"assistant","usage":{"input":18446744073709551615,"cost":{"total":1e308}}}}"#,
            r#"{"type":"tool_execution_start","toolName":"ask_user","args":{"question":5}}"#,
            r#"{"type":"tool_execution_start","toolName":null,"args":"raw"}"#,
            r#"{"type":"tool_execution_end"}"#,
            "\u{feff}{\"type\":\"turn_end\"}",
            &"[".repeat(100_000),
            &"{\"a\":".repeat(100_000),
        ];
        let mut p = parser(AdapterKind::Pi);
        for line in lines {
            p.feed_line(line);
        }
        let u = p.usage();
        assert_eq!(u.input, u64::MAX);
        assert!(u.cost.is_finite());
    }

    /// JSON values built from the keys and type names the parsers look at, so random input
    /// actually reaches the deep branches.
    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let keys = prop::sample::select(vec![
            "type",
            "message",
            "role",
            "content",
            "usage",
            "cost",
            "total",
            "input",
            "output",
            "cacheRead",
            "stopReason",
            "errorMessage",
            "model",
            "toolName",
            "args",
            "question",
            "isError",
            "item",
            "text",
            "status",
            "exit_code",
            "result",
            "is_error",
            "subtype",
            "input_tokens",
            "id",
            "tool_use_id",
            "willRetry",
            "error",
            "total_cost_usd",
        ]);
        let words = prop::sample::select(vec![
            "assistant",
            "user",
            "text",
            "toolCall",
            "tool_use",
            "tool_result",
            "message_end",
            "tool_execution_start",
            "tool_execution_end",
            "turn_end",
            "agent_end",
            "session",
            "ask_user",
            "error",
            "stop",
            "assistant",
            "result",
            "system",
            "init",
            "item.completed",
            "item.started",
            "agent_message",
            "command_execution",
            "turn.completed",
            "turn.failed",
            "success",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            words.prop_map(Value::from),
            ".{0,20}".prop_map(Value::from),
        ];
        leaf.prop_recursive(5, 64, 8, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((keys.clone(), inner), 0..8).prop_map(|kv| Value::Object(
                    kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                )),
            ]
        })
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        #[test]
        fn no_adapter_panics_on_any_line(
            lines in proptest::collection::vec(
                proptest::prop_oneof![".{0,80}", json_value().prop_map(|v| v.to_string())],
                0..24,
            )
        ) {
            for kind in [AdapterKind::Pi, AdapterKind::Claude, AdapterKind::Codex, AdapterKind::Command] {
                let mut p = parser(kind);
                for line in &lines {
                    for event in p.feed_line(line) {
                        let _ = event.is_final();
                    }
                }
                let outcome = p.outcome();
                proptest::prop_assert!(outcome.usage.cost.is_finite());
                proptest::prop_assert_eq!(p.usage(), outcome.usage);
            }
        }
    }
}
