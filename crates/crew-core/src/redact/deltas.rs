//! Text an agent streams in pieces. A model answers a few characters at a time and the agent
//! CLIs print each piece as a JSON line of its own, so a secret in an answer arrives split
//! between lines, and no rule, which sees one string at a time, matches either half. The
//! stream redactor holds such deltas and joins them (`Joined`) until other output comes; the
//! joined text is redacted as one string.

use serde_json::Value;

/// Held text is passed on in pieces once it is longer than this (a long answer is not held to
/// its end)…
const CUT_AT: usize = 8 << 10;
/// …keeping at least this much of its end held: longer than any secret a rule recognises by
/// its shape, so one that continues in the next delta is still whole when it is redacted.
const KEEP: usize = 1 << 10;
/// Held text with no cut outside a match (one match this long, a `token=` and an unbroken
/// value) is passed on whole past this.
const HOLD_MAX: usize = 256 << 10;

/// One delta: which stream of text it continues and its piece of text.
#[derive(Debug)]
pub(super) struct Delta {
    /// The format, the kind of text (answer, thinking, a tool call's arguments) and its block:
    /// deltas of one kind are joined.
    pub(super) kind: String,
    pub(super) text: String,
    /// Where the text is in the line (a JSON pointer).
    pointer: &'static str,
}

impl Delta {
    /// The delta `line` carries, if it is one (the formats of the agent CLIs crew runs).
    pub(super) fn of(line: &Value) -> Option<Delta> {
        let s = |p: &str| line.pointer(p).and_then(Value::as_str);
        let n = |p: &str| line.pointer(p).map(Value::to_string).unwrap_or_default();
        let (pointer, kind) = match s("/type") {
            // pi: `message_update` with a `*_delta` event.
            Some("message_update") => {
                let kind = s("/assistantMessageEvent/type")?;
                if !kind.ends_with("_delta") {
                    return None;
                }
                let index = n("/assistantMessageEvent/contentIndex");
                ("/assistantMessageEvent/delta", format!("pi {kind} {index}"))
            }
            // Claude Code with partial messages.
            Some("stream_event") if s("/event/type") == Some("content_block_delta") => {
                let kind = s("/event/delta/type")?;
                let pointer = match kind {
                    "text_delta" => "/event/delta/text",
                    "thinking_delta" => "/event/delta/thinking",
                    "input_json_delta" => "/event/delta/partial_json",
                    _ => return None,
                };
                (pointer, format!("claude {kind} {}", n("/event/index")))
            }
            // Gemini CLI's `stream-json`.
            Some("message") if line.get("delta") == Some(&Value::Bool(true)) => {
                ("/content", format!("gemini {}", n("/role")))
            }
            _ => match s("/method") {
                // ACP (`gemini --experimental-acp`, `opencode acp`).
                Some("session/update") => {
                    let kind = s("/params/update/sessionUpdate")?;
                    if !kind.ends_with("_chunk") {
                        return None;
                    }
                    ("/params/update/content/text", format!("acp {kind}"))
                }
                // Codex's app server (`item/agentMessage/delta`, …).
                Some(method) if method.ends_with("/delta") => (
                    "/params/delta",
                    format!("codex {method} {}", n("/params/itemId")),
                ),
                _ => return None,
            },
        };
        let text = s(pointer)?.to_owned();
        Some(Delta {
            kind,
            text,
            pointer,
        })
    }
}

/// Deltas of one kind, held: the latest line (a CLI that also sends the message so far sends
/// the most of it last) with the text of all of them.
#[derive(Debug, Clone)]
pub(super) struct Joined {
    pub(super) kind: String,
    value: Value,
    pointer: &'static str,
    text: String,
    /// The line as it came, while it is one delta whole: passed on byte for byte.
    line: Option<String>,
}

impl Joined {
    pub(super) fn new(line: &str, value: Value, delta: Delta) -> Joined {
        Joined {
            kind: delta.kind,
            value,
            pointer: delta.pointer,
            text: delta.text,
            line: Some(line.to_owned()),
        }
    }

    /// One more delta of this kind.
    pub(super) fn push(&mut self, value: Value, delta: &Delta) {
        self.text.push_str(&delta.text);
        self.value = value;
        self.line = None;
    }

    /// (what can be passed on now, what stays held). Held text longer than `CUT_AT` is cut at
    /// the last place at least `KEEP` before its end that is inside no match of a rule (in
    /// the joined text), so every secret is whole on one side.
    pub(super) fn cut(mut self) -> (Option<Joined>, Option<Joined>) {
        if self.text.len() <= CUT_AT {
            return (None, Some(self));
        }
        let spans = super::match_spans(&self.text);
        let mut at = floor_char_boundary(&self.text, self.text.len().saturating_sub(KEEP));
        while let Some(&(start, _)) = spans.iter().find(|(s, e)| *s < at && at < *e) {
            at = start;
        }
        if at == 0 {
            return if self.text.len() > HOLD_MAX {
                (Some(self), None)
            } else {
                (None, Some(self))
            };
        }
        let rest = self.text.split_off(at);
        let ready = Joined {
            line: None,
            ..self.clone()
        };
        let held = Joined {
            text: rest,
            line: None,
            ..self
        };
        (Some(ready), Some(held))
    }

    /// The line to pass on, and it parsed.
    pub(super) fn into_line(mut self) -> (String, Value) {
        if let Some(line) = self.line.take() {
            return (line, self.value);
        }
        if let Some(Value::String(s)) = self.value.pointer_mut(self.pointer) {
            *s = std::mem::take(&mut self.text);
        }
        (self.value.to_string(), self.value)
    }
}

/// The largest char boundary of `s` at or below `i`.
fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
