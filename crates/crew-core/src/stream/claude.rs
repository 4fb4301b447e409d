//! `claude -p --output-format stream-json --verbose`: argv and stream parser.
//!
//! Claude Code writes one `assistant` line per content block, all carrying the same message id
//! and that message's usage so far; usage is therefore counted once per message id, by delta.
//! The `result` line is authoritative: final text, aggregate usage and `total_cost_usd`.
//! Text lines may be followed by tool use, so an `assistant` line is never reported as final;
//! `result` (→ `Finished`) is what ends the run.

use super::{
    add_usage, cut_chars, json_cost, json_count, strip_cr, LaunchSpec, Outcome, StreamParser,
    WorkerEvent, TOOL_ARGS_LIMIT,
};
use crate::resource::SystemPromptMode;
use crate::usage::Usage;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Stand-in stop reason for lines where Claude Code leaves `stop_reason` null (mid-message).
const STOP_REASON_UNKNOWN: &str = "unknown";

/// Claude Code labels its own error notices with this model name.
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// Pending tool ids kept to name `ToolEnd`s; a stream that never closes its tools cannot grow
/// the map without bound.
const MAX_PENDING_TOOLS: usize = 4096;

pub(super) fn argv(spec: &LaunchSpec) -> Vec<String> {
    let mut argv = spec.command.clone();
    argv.extend(["-p", "--output-format", "stream-json", "--verbose"].map(String::from));
    if let Some(model) = &spec.model {
        argv.push("--model".into());
        argv.push(model.clone());
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
    argv.push(spec.prompt.clone());
    argv
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
    tools: HashMap<String, String>,
    /// Assistant output since the last `TurnEnd`.
    open_turn: bool,
    finished: bool,
}

impl ClaudeParser {
    fn on_assistant(&mut self, message: &Map<String, Value>) -> Vec<WorkerEvent> {
        let mut events = Vec::new();
        let mut texts = Vec::new();
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
                        if let Some(id) = part.get("id").and_then(Value::as_str) {
                            if self.tools.len() < MAX_PENDING_TOOLS {
                                self.tools.insert(id.to_owned(), name.to_owned());
                            }
                        }
                        events.push(WorkerEvent::ToolStart {
                            name: name.to_owned(),
                            args: cut_chars(&args, TOOL_ARGS_LIMIT),
                        });
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
            .filter(|m| *m != SYNTHETIC_MODEL)
            .map(str::to_owned);
        if model.is_some() {
            self.model.clone_from(&model);
        }
        if text.is_some() {
            self.last_text.clone_from(&text);
        }
        let id = message.get("id").and_then(Value::as_str).map(str::to_owned);
        let seen = message_usage(message.get("usage"));
        let delta = if id.is_some() && id == self.current_id {
            let delta = usage_delta(&seen, &self.current_usage);
            self.current_usage = max_usage(&self.current_usage, &seen);
            delta
        } else {
            self.current_id = id;
            self.current_usage = seen;
            seen
        };
        add_usage(&mut self.usage, &delta);
        self.open_turn = true;
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

    fn on_user(&mut self, message: &Map<String, Value>) -> Vec<WorkerEvent> {
        let Some(Value::Array(parts)) = message.get("content") else {
            return Vec::new();
        };
        let mut events: Vec<WorkerEvent> = parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(|p| {
                let name = p
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .and_then(|id| self.tools.remove(id))
                    .unwrap_or_default();
                let ok = !p.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                WorkerEvent::ToolEnd { name, ok }
            })
            .collect();
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
        let num_turns = json_count(result.get("num_turns"));
        self.usage.turns = self.usage.turns.max(num_turns);

        let text = result
            .get("result")
            .and_then(Value::as_str)
            .filter(|t| !t.trim().is_empty())
            .map(str::to_owned);
        let subtype = result
            .get("subtype")
            .and_then(Value::as_str)
            .unwrap_or("success");
        let is_error = result
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
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
        match (event.get("type").and_then(Value::as_str), message) {
            (Some("system"), _) if event.get("subtype").and_then(Value::as_str) == Some("init") => {
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
                vec![WorkerEvent::Started { session_id, model }]
            }
            (Some("assistant"), Some(m)) => self.on_assistant(m),
            (Some("user"), Some(m)) => self.on_user(m),
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
        }
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

fn usage_delta(new: &Usage, old: &Usage) -> Usage {
    Usage {
        input: new.input.saturating_sub(old.input),
        output: new.output.saturating_sub(old.output),
        cache_read: new.cache_read.saturating_sub(old.cache_read),
        cache_write: new.cache_write.saturating_sub(old.cache_write),
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
    use crate::stream::{build_argv, parser, AdapterKind};

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
        }
    }

    #[test]
    fn argv_table() {
        let mut full = spec();
        full.model = Some("sonnet".into());
        full.system_prompt = "Be terse.".into();
        full.system_prompt_mode = SystemPromptMode::Append;
        let mut replace = spec();
        replace.system_prompt = "You are a reviewer.".into();
        let base = [
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
        ];
        let table: Vec<(LaunchSpec, Vec<&str>)> = vec![
            (spec(), [&base[..], &["Goal: fix it"]].concat()),
            (
                full,
                [
                    &base[..],
                    &[
                        "--model",
                        "sonnet",
                        "--append-system-prompt",
                        "Be terse.",
                        "Goal: fix it",
                    ],
                ]
                .concat(),
            ),
            (
                replace,
                [
                    &base[..],
                    &["--system-prompt", "You are a reviewer.", "Goal: fix it"],
                ]
                .concat(),
            ),
        ];
        for (spec, want) in table {
            assert_eq!(build_argv(AdapterKind::Claude, &spec), want);
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
                tokens: (0, 0, 0, 0, 1),
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
        ] {
            p.feed_line(line);
        }
        assert_eq!(
            p.outcome().error.as_deref(),
            Some("claude: error_during_execution: 1; {\"a\":2}")
        );
    }
}
