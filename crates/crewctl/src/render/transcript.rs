//! A task's transcript (the worker's raw JSON stream, redacted) made readable: assistant text,
//! tool calls with their arguments cut, tool failures and model errors highlighted. pi's JSON
//! mode is the main format; Claude Code's stream-json and Codex's exec JSON are understood too,
//! and anything else is shown as it is.

use super::units::{cost, cut, tokens};
use super::View;
use crate::style::Tone;
use serde_json::Value;
use std::fmt::Write as _;

/// What a transcript line means, independent of the agent CLI that wrote it.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Session(String),
    Prompt(String),
    Text(String),
    Thinking(String),
    ToolCall {
        name: String,
        args: String,
    },
    ToolResult {
        name: String,
        text: String,
        error: bool,
    },
    Error(String),
    Retry(String),
    Usage {
        tokens: u64,
        cost: f64,
        model: Option<String>,
    },
    Raw(String),
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn n(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// Text of a content value: a string, or the `text` parts of a content array.
fn content_text(c: &Value) -> String {
    match c {
        Value::String(t) => t.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| s(p, "text"))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn compact_json(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(t) => t.clone(),
        other => other.to_string(),
    }
}

pub fn parse_line(line: &str) -> Vec<Entry> {
    let line = line.trim_end_matches('\r');
    if line.trim().is_empty() {
        return vec![];
    }
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(_) => return vec![Entry::Raw(line.to_string())],
    };
    let Some(kind) = s(&v, "type") else {
        return vec![Entry::Raw(line.to_string())];
    };
    match kind {
        // pi
        "session" => vec![Entry::Session(format!(
            "session {} · cwd {}",
            s(&v, "id").unwrap_or("?"),
            s(&v, "cwd").unwrap_or("?")
        ))],
        "message_end" => v.get("message").map(pi_message).unwrap_or_default(),
        "tool_execution_end" => {
            let error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
            let text = v
                .get("result")
                .and_then(|r| r.get("content"))
                .map(content_text)
                .unwrap_or_default();
            vec![Entry::ToolResult {
                name: s(&v, "toolName").unwrap_or("?").to_string(),
                text,
                error,
            }]
        }
        "auto_retry_start" => vec![Entry::Retry(format!(
            "retry {}/{} in {}ms: {}",
            n(&v, "attempt"),
            n(&v, "maxAttempts"),
            n(&v, "delayMs"),
            s(&v, "errorMessage").unwrap_or("")
        ))],
        "extension_error" => vec![Entry::Error(compact_json(v.get("error").unwrap_or(&v)))],
        // Claude Code
        "system" if s(&v, "subtype") == Some("init") => {
            vec![Entry::Session(format!(
                "claude session · model {} · cwd {}",
                s(&v, "model").unwrap_or("?"),
                s(&v, "cwd").unwrap_or("?")
            ))]
        }
        "assistant" => v.get("message").map(claude_assistant).unwrap_or_default(),
        "user" => v
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| s(p, "type") == Some("tool_result"))
                    .map(|p| Entry::ToolResult {
                        name: "tool".into(),
                        text: p.get("content").map(content_text).unwrap_or_default(),
                        error: p.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        "result" => {
            let mut out = vec![];
            if v.get("is_error").and_then(Value::as_bool).unwrap_or(false) {
                out.push(Entry::Error(
                    s(&v, "result")
                        .or(s(&v, "subtype"))
                        .unwrap_or("error")
                        .to_string(),
                ));
            }
            if let Some(c) = v.get("total_cost_usd").and_then(Value::as_f64) {
                out.push(Entry::Usage {
                    tokens: 0,
                    cost: c,
                    model: None,
                });
            }
            out
        }
        // Codex
        "item.completed" => v.get("item").map(codex_item).unwrap_or_default(),
        "error" => vec![Entry::Error(
            s(&v, "message").unwrap_or("error").to_string(),
        )],
        "turn.failed" => vec![Entry::Error(
            v.get("error")
                .map(compact_json)
                .unwrap_or_else(|| "turn failed".into()),
        )],
        _ => vec![],
    }
}

fn pi_message(m: &Value) -> Vec<Entry> {
    let mut out = vec![];
    match s(m, "role") {
        Some("user") => {
            let t = m.get("content").map(content_text).unwrap_or_default();
            if !t.is_empty() {
                out.push(Entry::Prompt(t));
            }
        }
        Some("assistant") => {
            for part in m
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match s(part, "type") {
                    Some("text") => {
                        out.push(Entry::Text(s(part, "text").unwrap_or("").to_string()))
                    }
                    Some("thinking") => out.push(Entry::Thinking(
                        s(part, "thinking").unwrap_or("").to_string(),
                    )),
                    Some("toolCall") => out.push(Entry::ToolCall {
                        name: s(part, "name").unwrap_or("?").to_string(),
                        args: part.get("arguments").map(compact_json).unwrap_or_default(),
                    }),
                    _ => {}
                }
            }
            if s(m, "stopReason") == Some("error") || s(m, "errorMessage").is_some() {
                out.push(Entry::Error(
                    s(m, "errorMessage").unwrap_or("model error").to_string(),
                ));
            }
            if let Some(u) = m.get("usage") {
                let tok = n(u, "input") + n(u, "output") + n(u, "cacheWrite");
                let c = u
                    .get("cost")
                    .and_then(|c| {
                        c.get("total")
                            .and_then(Value::as_f64)
                            .or_else(|| c.as_f64())
                    })
                    .unwrap_or(0.0);
                if tok > 0 || c > 0.0 {
                    out.push(Entry::Usage {
                        tokens: tok,
                        cost: c,
                        model: s(m, "model").map(String::from),
                    });
                }
            }
        }
        _ => {}
    }
    out
}

fn claude_assistant(m: &Value) -> Vec<Entry> {
    let mut out = vec![];
    for part in m
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match s(part, "type") {
            Some("text") => out.push(Entry::Text(s(part, "text").unwrap_or("").to_string())),
            Some("thinking") => out.push(Entry::Thinking(
                s(part, "thinking").unwrap_or("").to_string(),
            )),
            Some("tool_use") => out.push(Entry::ToolCall {
                name: s(part, "name").unwrap_or("?").to_string(),
                args: part.get("input").map(compact_json).unwrap_or_default(),
            }),
            _ => {}
        }
    }
    out
}

fn codex_item(item: &Value) -> Vec<Entry> {
    match s(item, "type") {
        Some("agent_message") => vec![Entry::Text(s(item, "text").unwrap_or("").to_string())],
        Some("reasoning") => vec![Entry::Thinking(s(item, "text").unwrap_or("").to_string())],
        Some("command_execution") => {
            let code = item.get("exit_code").and_then(Value::as_i64);
            vec![
                Entry::ToolCall {
                    name: "command".into(),
                    args: s(item, "command").unwrap_or("").to_string(),
                },
                Entry::ToolResult {
                    name: "command".into(),
                    text: s(item, "aggregated_output").unwrap_or("").to_string(),
                    error: code.is_some_and(|c| c != 0) || s(item, "status") == Some("failed"),
                },
            ]
        }
        Some("mcp_tool_call") => vec![Entry::ToolCall {
            name: format!(
                "{}.{}",
                s(item, "server").unwrap_or("?"),
                s(item, "tool").unwrap_or("?")
            ),
            args: item.get("arguments").map(compact_json).unwrap_or_default(),
        }],
        Some("file_change") => {
            let paths: Vec<String> = item
                .get("changes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{} {}",
                        s(c, "kind").unwrap_or("?"),
                        s(c, "path").unwrap_or("?")
                    )
                })
                .collect();
            vec![Entry::ToolCall {
                name: "patch".into(),
                args: paths.join(", "),
            }]
        }
        Some("error") => vec![Entry::Error(
            s(item, "message").unwrap_or("error").to_string(),
        )],
        _ => vec![],
    }
}

pub fn parse(text: &str) -> Vec<Entry> {
    text.split('\n').flat_map(parse_line).collect()
}

/// Renders a transcript. `verbose` keeps the prompt, thinking and full tool output.
pub fn render(view: &View, text: &str, verbose: bool) -> String {
    let mut out = String::new();
    for e in &parse(text) {
        entry(&mut out, view, e, verbose);
    }
    if out.is_empty() && !text.trim().is_empty() {
        // An unknown format: better the raw stream than nothing.
        return text.to_string();
    }
    out
}

/// One entry's lines.
fn entry(out: &mut String, view: &View, e: &Entry, verbose: bool) {
    let bar = view.p(Tone::Dim, "│");
    match e {
        Entry::Session(s) => {
            let _ = writeln!(out, "{}", view.p(Tone::Dim, format!("── {s}")));
        }
        Entry::Prompt(p) => {
            let shown = if verbose {
                p.clone()
            } else {
                first_lines(p, 3)
            };
            let _ = writeln!(out, "{}", view.p(Tone::Dim, "prompt:"));
            for l in shown.lines() {
                let line = format!("{bar} {}", view.p(Tone::Dim, l));
                let _ = writeln!(out, "{}", line.trim_end());
            }
        }
        Entry::Text(t) => {
            if !t.trim().is_empty() {
                let _ = writeln!(out, "{}", t.trim_end());
            }
        }
        Entry::Thinking(t) => {
            if !t.trim().is_empty() {
                let shown = if verbose { t.clone() } else { cut(t, 160) };
                let _ = writeln!(out, "{}", view.p(Tone::Dim, format!("(thinking) {shown}")));
            }
        }
        Entry::ToolCall { name, args } => {
            let args = if verbose {
                args.clone()
            } else {
                cut(args, 120)
            };
            let _ = writeln!(
                out,
                "{} {}",
                view.p(Tone::Accent, format!("▸ {name}")),
                args
            );
        }
        Entry::ToolResult { name, text, error } => {
            tool_result(out, view, name, text, *error, verbose);
        }
        Entry::Error(e) => {
            let _ = writeln!(out, "{}", view.p(Tone::Bad, format!("✗ error: {e}")));
        }
        Entry::Retry(r) => {
            let _ = writeln!(out, "{}", view.p(Tone::Warn, format!("↻ {r}")));
        }
        Entry::Usage {
            tokens: t,
            cost: c,
            model,
        } => {
            let mut u = if *t > 0 {
                format!("· {} tok · {}", tokens(*t), cost(*c))
            } else {
                format!("· total {}", cost(*c))
            };
            if let Some(m) = model {
                let _ = write!(u, " · {m}");
            }
            let _ = writeln!(out, "{}", view.p(Tone::Dim, u));
        }
        Entry::Raw(r) => {
            let _ = writeln!(out, "{}", view.p(Tone::Dim, r));
        }
    }
}

/// A tool's result: a failure with its text; else its first line and how many follow, or
/// every line when `verbose`.
fn tool_result(out: &mut String, view: &View, name: &str, text: &str, error: bool, verbose: bool) {
    if error {
        let shown = if verbose {
            text.to_string()
        } else {
            cut(text, 300)
        };
        let _ = writeln!(
            out,
            "  {}",
            view.p(Tone::Bad, format!("✗ {name} failed: {shown}"))
        );
        return;
    }
    if verbose {
        let bar = view.p(Tone::Dim, "│");
        for l in text.lines() {
            let line = format!("  {bar} {}", view.p(Tone::Dim, l));
            let _ = writeln!(out, "{}", line.trim_end());
        }
        return;
    }
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let more = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
        .saturating_sub(1);
    let tail = if more > 0 {
        format!(" (+{more} lines)")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  {}",
        view.p(Tone::Dim, format!("↳ {}{tail}", cut(first, 120)))
    );
}

fn first_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let mut out = lines.iter().take(n).copied().collect::<Vec<_>>().join("\n");
    if lines.len() > n {
        let _ = write!(
            out,
            "\n… {}",
            super::units::count(lines.len() - n, "more line")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::view;

    const PI: &str = include_str!("../../tests/fixtures/pi_transcript.jsonl");
    const CLAUDE: &str = include_str!("../../tests/fixtures/claude_transcript.jsonl");
    const CODEX: &str = include_str!("../../tests/fixtures/codex_transcript.jsonl");

    #[test]
    fn pi_transcript_snapshot() {
        insta::assert_snapshot!(render(&view(100), PI, false));
    }

    #[test]
    fn claude_and_codex_transcripts_snapshot() {
        let v = view(100);
        insta::assert_snapshot!(format!(
            "{}\n{}",
            render(&v, CLAUDE, false),
            render(&v, CODEX, false)
        ));
    }

    #[test]
    fn unknown_lines() {
        assert_eq!(parse_line("not json"), vec![Entry::Raw("not json".into())]);
        assert_eq!(
            parse_line("{\"no\":\"type\"}"),
            vec![Entry::Raw("{\"no\":\"type\"}".into())]
        );
        assert_eq!(parse_line("{\"type\":\"turn_start\"}"), vec![]);
        assert_eq!(
            render(&view(80), "{\"type\":\"mystery\"}\n", false),
            "{\"type\":\"mystery\"}\n"
        );
    }

    #[test]
    fn model_error_is_an_error_entry() {
        let line = r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"429 rate_limit_error"}}"#;
        assert_eq!(
            parse_line(line),
            vec![Entry::Error("429 rate_limit_error".into())]
        );
    }
}
