//! Text an agent streams in pieces. A model answers a few characters at a time and the agent
//! CLIs print each piece as a JSON line of its own, so a secret in an answer arrives split
//! between lines, and no rule, which sees one string at a time, matches either half. The
//! stream redactor holds such deltas (`Held`) until other output comes, finds what the rules
//! match in their joined text, and masks it in the lines it spans: the lines stay as they came
//! (parsers match a replayed message by its chunk, `stream::acp`), only a secret's pieces
//! change (the mask in the line where it starts, nothing of it in the others).

use serde_json::Value;

/// Held text is passed on in pieces once it is longer than this (a long answer is not held to
/// its end)…
const CUT_AT: usize = 8 << 10;
/// …keeping at least this much of its end held: longer than any secret a rule recognises by
/// its shape, so one that continues in the next delta is still whole when it is redacted.
const KEEP: usize = 1 << 10;
/// Held text with no place to cut (one match this long, or one unbroken run of a token's
/// characters) is passed on whole past this, and so are this many held lines.
const HOLD_MAX: usize = 256 << 10;
const LINES_MAX: usize = 16 << 10;
/// …and the held lines themselves past this (a line may carry much more than its delta).
const RAW_MAX: usize = 4 << 20;

/// Lines passed on, redacted, and whether their joined text left a private key block open
/// (its BEGIN masked with the rest: the lines after it are the block's continuation).
#[derive(Debug, Default)]
pub(super) struct Released {
    pub(super) lines: Vec<String>,
    pub(super) block_open: bool,
}

/// One delta: which stream of text it continues and its piece of text.
#[derive(Debug)]
pub(super) struct Delta {
    /// The format, the kind of text (answer, thinking, a tool call's arguments, a command's
    /// output), its block and its session: deltas of one kind are joined.
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
            // Claude Code with partial messages (a subagent's have their parent tool use).
            Some("stream_event") if s("/event/type") == Some("content_block_delta") => {
                let kind = s("/event/delta/type")?;
                let pointer = match kind {
                    "text_delta" => "/event/delta/text",
                    "thinking_delta" => "/event/delta/thinking",
                    "input_json_delta" => "/event/delta/partial_json",
                    _ => return None,
                };
                let of = format!("{} {}", n("/parent_tool_use_id"), n("/session_id"));
                (pointer, format!("claude {kind} {} {of}", n("/event/index")))
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
                    let session = n("/params/sessionId");
                    (
                        "/params/update/content/text",
                        format!("acp {kind} {session}"),
                    )
                }
                // Codex's app server: `item/agentMessage/delta`, a command's or a file
                // change's `outputDelta`, reasoning's `…Delta`.
                Some(method) if method.ends_with("/delta") || method.ends_with("Delta") => (
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

/// Whether `line` carries no text and may wait behind held deltas instead of passing them on:
/// a keep-alive or a usage report that can come in the middle of a streamed text (Claude
/// Code's `ping`, Codex's token usage), which would otherwise split a secret it falls inside.
pub(super) fn passes_through(line: &Value) -> bool {
    let s = |p: &str| line.pointer(p).and_then(Value::as_str);
    (s("/type") == Some("stream_event") && s("/event/type") == Some("ping"))
        || s("/method") == Some("thread/tokenUsage/updated")
}

/// One held line: as it came, where its delta's text is, and how long that text is.
#[derive(Debug, Clone)]
struct Line {
    raw: String,
    pointer: &'static str,
    len: usize,
}

/// Deltas of one kind, held, with their text joined.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) kind: String,
    lines: Vec<Line>,
    text: String,
    /// Bytes of the held lines.
    raw: usize,
    /// No place to cut was found below this length: not looked for again before it (so a
    /// long match does not cost a search per delta).
    next_look: usize,
    /// Searches for a place to cut so far.
    looked: u32,
}

impl Held {
    pub(super) fn new(kind: String) -> Held {
        Held {
            kind,
            lines: Vec::new(),
            text: String::new(),
            raw: 0,
            next_look: CUT_AT,
            looked: 0,
        }
    }

    /// A line without text (`passes_through`) waits in order behind the held deltas.
    pub(super) fn push_other(&mut self, raw: &str) {
        self.raw = self.raw.saturating_add(raw.len());
        self.lines.push(Line {
            raw: raw.to_owned(),
            pointer: "",
            len: 0,
        });
    }

    /// One more delta of this kind, `raw` its line. Old pi's text so far (`message`, the
    /// event's `partial`: it may end inside a secret the next delta completes, and it makes a
    /// held line as long as the answer) is left out of the line.
    pub(super) fn push(&mut self, raw: &str, delta: Delta) {
        let raw = if delta.pointer == PI
            && (raw.contains("\"message\"") || raw.contains("\"partial\""))
        {
            without_text_so_far(raw)
        } else {
            raw.to_owned()
        };
        self.text.push_str(&delta.text);
        self.raw = self.raw.saturating_add(raw.len());
        self.lines.push(Line {
            raw,
            pointer: delta.pointer,
            len: delta.text.len(),
        });
    }

    /// The lines that can be passed on now, their text redacted (`lines`), keeping held what
    /// a secret may still continue into. Held text longer than `CUT_AT` is cut at the last
    /// line boundary at least `KEEP` before its end that is inside no match of a rule and
    /// not inside a run of a token's characters (a JWT still streaming matches nothing yet).
    pub(super) fn ready(&mut self) -> Released {
        let long = self.text.len() > HOLD_MAX || self.lines.len() > LINES_MAX || self.raw > RAW_MAX;
        if !long && (self.text.len() <= CUT_AT || self.text.len() < self.next_look) {
            return Released::default();
        }
        self.looked = self.looked.saturating_add(1);
        let spans = super::match_spans(&self.text);
        let limit = self.text.len().saturating_sub(KEEP);
        let mut at = 0;
        let mut count = 0;
        let mut end = 0;
        for (i, l) in self.lines.iter().enumerate() {
            end += l.len;
            if end > limit {
                break;
            }
            if cuttable(&self.text, end, &spans) {
                (at, count) = (end, i + 1);
            }
        }
        if count == 0 {
            if long {
                return self.take_all();
            }
            self.next_look = self.text.len().saturating_mul(2);
            return Released::default();
        }
        let rest = self.text.split_off(at);
        let head = std::mem::replace(&mut self.text, rest);
        let lines: Vec<Line> = self.lines.drain(..count).collect();
        let released: usize = lines.iter().map(|l| l.raw.len()).sum();
        self.raw = self.raw.saturating_sub(released);
        self.next_look = CUT_AT;
        redacted_lines(&head, &lines)
    }

    /// Every held line, redacted: the stream ended, or other output came.
    pub(super) fn take_all(&mut self) -> Released {
        let text = std::mem::take(&mut self.text);
        let lines = std::mem::take(&mut self.lines);
        self.raw = 0;
        self.next_look = CUT_AT;
        redacted_lines(&text, &lines)
    }
}

/// A token's characters (base64, JWT, keys): a cut between two of them may split a secret no
/// rule recognises yet.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'+' | b'/' | b'=' | b'-')
}

/// Whether the text may be cut at `at` (a line boundary): outside every match, and not
/// between two of a token's characters.
fn cuttable(text: &str, at: usize, spans: &[(usize, usize)]) -> bool {
    let bytes = text.as_bytes();
    let inside_token = at > 0
        && bytes.get(at - 1).copied().is_some_and(is_token_byte)
        && bytes.get(at).copied().is_some_and(is_token_byte);
    !inside_token && !spans.iter().any(|(s, e)| *s < at && at < *e)
}

/// Where pi's delta text is.
const PI: &str = "/assistantMessageEvent/delta";

/// `lines`, whose delta texts joined are `text`, with what the rules change in `text` changed:
/// a rewrite goes in the line where its match starts, the match's other pieces are dropped.
fn redacted_lines(text: &str, lines: &[Line]) -> Released {
    let spans = merged(text, super::rewrites(text));
    let mut out = Vec::with_capacity(lines.len());
    let mut start = 0usize;
    for l in lines {
        let end = start.saturating_add(l.len).min(text.len());
        let piece = text.get(start..end).unwrap_or_default();
        let new = masked(text, start, end, &spans);
        if new == piece {
            out.push(l.raw.clone());
        } else {
            out.push(rewrite(&l.raw, l.pointer, new));
        }
        start = end;
    }
    Released {
        lines: out,
        block_open: super::leaves_block_open(text),
    }
}

/// The piece `start..end` of `text` with the rewrites that start in it, and the parts of
/// those that started before it left out.
fn masked(text: &str, start: usize, end: usize, spans: &[(usize, usize, String)]) -> String {
    let mut out = String::new();
    let mut pos = start;
    for (s, e, r) in spans {
        let (s, e) = (*s, *e);
        if e <= pos || s >= end {
            continue;
        }
        if s > pos {
            out.push_str(text.get(pos..s).unwrap_or_default());
        }
        if s >= start {
            out.push_str(r);
        }
        pos = e.min(end);
    }
    if pos < end {
        out.push_str(text.get(pos..end).unwrap_or_default());
    }
    out
}

/// Overlapping rewrites (of different rules) as one, in order: the text they cover redacted
/// as a whole (masked, if that changes nothing).
fn merged(text: &str, mut spans: Vec<(usize, usize, String)>) -> Vec<(usize, usize, String)> {
    spans.sort_unstable_by_key(|(s, e, _)| (*s, *e));
    let mut out: Vec<(usize, usize, String)> = Vec::with_capacity(spans.len());
    let mut overlapped = false;
    for (s, e, r) in spans {
        match out.last_mut() {
            Some(last) if s < last.1 => {
                last.1 = last.1.max(e);
                overlapped = true;
            }
            _ => out.push((s, e, r)),
        }
    }
    if overlapped {
        for (s, e, r) in &mut out {
            let covered = text.get(*s..*e).unwrap_or_default();
            let whole = super::redact_str(covered);
            *r = if whole == covered {
                super::MASK.to_owned()
            } else {
                whole
            };
        }
    }
    out
}

/// `raw` with its delta text replaced by `text`.
fn rewrite(raw: &str, pointer: &str, text: String) -> String {
    edited(raw, |value| {
        if let Some(Value::String(s)) = value.pointer_mut(pointer) {
            *s = text;
        }
    })
}

/// An old pi delta line without the text so far (`message`, the event's `partial`).
fn without_text_so_far(raw: &str) -> String {
    edited(raw, |value| {
        if let Some(o) = value.as_object_mut() {
            o.remove("message");
        }
        if let Some(o) = value
            .get_mut("assistantMessageEvent")
            .and_then(Value::as_object_mut)
        {
            o.remove("partial");
        }
    })
}

/// JSON line `raw` changed by `edit` (as it is, when it is not JSON).
fn edited(raw: &str, edit: impl FnOnce(&mut Value)) -> String {
    let Ok(mut value) = serde_json::from_str::<Value>(raw) else {
        return raw.to_owned();
    };
    edit(&mut value);
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(text: &str) -> (String, Delta) {
        let raw = serde_json::json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": text}}).to_string();
        let v: Value = serde_json::from_str(&raw).unwrap_or_default();
        let d = Delta::of(&v).expect("a delta");
        (raw, d)
    }

    #[test]
    fn a_match_that_stays_open_is_not_searched_per_delta() {
        // An unterminated key block matches to the end of the text: no place to cut, ever.
        // Searched again only each time the text doubled, and passed on whole at LINES_MAX
        // lines (64 KiB of these 4-byte deltas): a handful of searches per 64 KiB, not one
        // per delta (77,000 here).
        let mut held = Held::new("k".into());
        let (raw, d) = delta("-----BEGIN RSA PRIVATE KEY-----\n");
        held.push(&raw, d);
        let mut out = 0;
        let mut pushed = 0;
        while pushed < 300 << 10 {
            let (raw, d) = delta("QUJD");
            held.push(&raw, d);
            pushed += 4;
            out += held.ready().lines.len();
        }
        assert!(held.looked <= 30, "searched {} times", held.looked);
        assert!(out > 0, "passed on past HOLD_MAX");
    }
}
