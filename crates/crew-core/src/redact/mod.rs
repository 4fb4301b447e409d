//! Secret redaction (SPEC §11).
//!
//! The daemon redacts what a worker produces where it enters (`StreamRedactor`, one per stdout
//! and one per stderr of each attempt), before anything reads it: the transcript, the stream
//! parser and through it results, shared outputs, questions, errors, events, summaries and
//! bundles only ever see the redacted text. `redact_str` and `redact_json_line` are the same
//! rules without memory, for text that is not a stream.
//!
//! Two layers, as in pi-crew: JSON lines are redacted structurally first (a value under a
//! secret-looking key becomes `"***"`), then every string goes through pattern redaction.
//! All patterns run on the `regex` crate, which matches in linear time, so a hostile line cannot
//! stall the daemon. Usage counters (`input_tokens`, `totalTokens`, …) are never touched.
//!
//! A private key spans lines: printed by a program it is one line each, streamed by a model it
//! arrives in deltas, each a JSON line of its own. A block opened on one line and not closed
//! there keeps the redactor masking what follows (see `StreamRedactor`).

mod deltas;

use regex::{Captures, Regex, RegexSet};
use serde_json::Value;
use std::sync::OnceLock;

const MASK: &str = "***";

/// How a match is rewritten.
type Rewrite = fn(&Captures) -> String;

/// One pattern and how to rewrite a match of it.
struct Rule {
    pattern: &'static str,
    rewrite: Rewrite,
}

fn mask_all(_: &Captures) -> String {
    MASK.to_owned()
}

fn mask_pem(_: &Captures) -> String {
    "[REDACTED PRIVATE KEY]".to_owned()
}

fn keep_prefix(c: &Captures) -> String {
    format!("{}{}{MASK}", group(c, 1), group(c, 2))
}

fn group<'a>(c: &'a Captures, i: usize) -> &'a str {
    c.get(i).map_or("", |m| m.as_str())
}

/// A bare `sk-…` key: random, so it has digits. Hyphenated words (`sk-learn-…`) stay.
fn mask_sk(c: &Captures) -> String {
    let s = group(c, 0);
    if s.bytes().any(|b| b.is_ascii_digit()) {
        MASK.to_owned()
    } else {
        s.to_owned()
    }
}

/// `name=value`: counters such as `max_tokens=4096` are not secrets, and neither is what an
/// API says about them (`max_tokens: field required`): a plural `tokens` names a count.
fn mask_assignment(c: &Captures) -> String {
    let (key, value) = (group(c, 1), group(c, 3));
    let counter = key.to_ascii_lowercase().contains("tokens");
    if counter || value == MASK {
        group(c, 0).to_owned()
    } else {
        format!("{key}{}{MASK}", group(c, 2))
    }
}

/// `scheme://user:PASSWORD@host`: the password goes, the rest stays readable.
fn mask_url_password(c: &Captures) -> String {
    format!("{}{MASK}@", group(c, 1))
}

const RULES: &[Rule] = &[
    // PEM private keys; an unterminated block (a cut transcript) is masked to the end.
    Rule {
        pattern: r"(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY-----|.*)",
        rewrite: mask_pem,
    },
    // Credentials in a URL (`git remote -v`, a printed `DATABASE_URL`). The password runs to
    // the last `@` of the authority, so one holding an unescaped `@` goes whole.
    Rule {
        pattern: r#"(?i)(?-u:\b)([a-z][a-z0-9+.-]*://[^\s:/?#@"'<>\\]*:)([^\s/?#"'<>\\]+)@"#,
        rewrite: mask_url_password,
    },
    Rule {
        pattern: r#"(?i)(?-u:\b)((?:proxy-|x-)?authorization)(\\?["']?\s*[:=]\s*\\?["']?)[^\r\n"'\\]+"#,
        rewrite: keep_prefix,
    },
    Rule {
        pattern: r"(?i)(?-u:\b)(bearer)(\s+)[A-Za-z0-9._~+/=-]{8,}",
        rewrite: keep_prefix,
    },
    Rule {
        pattern: r"(?-u:\b)eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
        rewrite: mask_all,
    },
    Rule {
        pattern: r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        rewrite: mask_all,
    },
    Rule {
        pattern: r"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
        rewrite: mask_all,
    },
    Rule {
        pattern: r"(?-u:\b)xox[baprs]-[A-Za-z0-9-]{10,}",
        rewrite: mask_all,
    },
    Rule {
        pattern: r"(?-u:\b)AIza[0-9A-Za-z_-]{35}",
        rewrite: mask_all,
    },
    Rule {
        pattern: r"(?-u:\b)[sr]k_(?:live|test)_[0-9A-Za-z]{24,}",
        rewrite: mask_all,
    },
    // OpenAI / Anthropic keys (`sk-…`, `sk-proj-…`, `sk-ant-…`), which pi-crew missed.
    Rule {
        pattern: r"(?-u:\b)sk-[A-Za-z0-9_-]{20,}",
        rewrite: mask_sk,
    },
    Rule {
        pattern: r#"(?i)(?-u:\b)([A-Za-z0-9_.-]*(?:secret|token|passwd|password|passphrase|api[_-]?key|access[_-]?key|private[_-]?key|credentials?)[A-Za-z0-9_.-]*)(\\?["']?\s*[:=]\s*\\?["']?)([^\s"'\\,;&}\])]+)"#,
        rewrite: mask_assignment,
    },
];

struct Compiled {
    set: RegexSet,
    rules: Vec<(Regex, Rewrite)>,
}

fn compiled() -> Option<&'static Compiled> {
    static CELL: OnceLock<Option<Compiled>> = OnceLock::new();
    CELL.get_or_init(|| {
        let set = RegexSet::new(RULES.iter().map(|r| r.pattern)).ok()?;
        let rules = RULES
            .iter()
            .map(|r| Regex::new(r.pattern).ok().map(|re| (re, r.rewrite)))
            .collect::<Option<Vec<_>>>()?;
        Some(Compiled { set, rules })
    })
    .as_ref()
}

/// Where the rules match in `s` (before any rewrite). Without the rules, all of it.
fn match_spans(s: &str) -> Vec<(usize, usize)> {
    let Some(c) = compiled() else {
        return vec![(0, s.len())];
    };
    let hits = c.set.matches(s);
    c.rules
        .iter()
        .enumerate()
        .filter(|(i, _)| hits.matched(*i))
        .flat_map(|(_, (re, _))| re.find_iter(s).map(|m| (m.start(), m.end())))
        .collect()
}

/// What the rules change in `s`: (start, end, the rewrite), for each match a rule rewrites
/// (`max_tokens: 4096`, a `sk-` word without digits, a password already `***` are matched
/// and left as they are). Without the rules, all of it masked.
fn rewrites(s: &str) -> Vec<(usize, usize, String)> {
    let Some(c) = compiled() else {
        return vec![(0, s.len(), MASK.to_owned())];
    };
    let hits = c.set.matches(s);
    let mut out = Vec::new();
    for (_, (re, rewrite)) in c.rules.iter().enumerate().filter(|(i, _)| hits.matched(*i)) {
        for caps in re.captures_iter(s) {
            let Some(m) = caps.get(0) else { continue };
            let r = rewrite(&caps);
            if r != m.as_str() {
                out.push((m.start(), m.end(), r));
            }
        }
    }
    out
}

/// Whether a private key block is left open at the end of `s` (its last marker a BEGIN).
fn leaves_block_open(s: &str) -> bool {
    pem_markers()
        .and_then(|m| m.captures_iter(s).last())
        .and_then(|c| c.get(1))
        .is_some_and(|m| m.as_str() == "BEGIN")
}

/// Mask secrets (private keys, authorization headers, bearer tokens, JWTs, provider API keys,
/// `name=value` secrets) in free text.
pub fn redact_str(s: &str) -> String {
    let Some(c) = compiled() else {
        // Unreachable with the constant patterns (a test compiles them); fail closed anyway.
        return MASK.to_owned();
    };
    let hits = c.set.matches(s);
    if !hits.matched_any() {
        return s.to_owned();
    }
    let mut out = s.to_owned();
    for (i, (re, rewrite)) in c.rules.iter().enumerate() {
        if hits.matched(i) {
            out = re
                .replace_all(&out, |caps: &Captures| rewrite(caps))
                .into_owned();
        }
    }
    out
}

/// Redact one stdout/transcript line: structurally when it is JSON, as text otherwise. A line
/// with nothing to redact comes back byte for byte.
pub fn redact_json_line(line: &str) -> String {
    let Ok(mut value) = serde_json::from_str::<Value>(line) else {
        return redact_str(line);
    };
    if redact_value(&mut value, false) {
        value.to_string()
    } else {
        line.to_owned()
    }
}

/// Redact in place; true when anything changed. `secret` is set under a secret-looking key,
/// where every string is masked.
fn redact_value(value: &mut Value, secret: bool) -> bool {
    match value {
        Value::String(s) => {
            let new = if secret {
                if s.is_empty() || s == MASK {
                    return false;
                }
                MASK.to_owned()
            } else {
                redact_str(s)
            };
            let changed = new != *s;
            *s = new;
            changed
        }
        Value::Array(items) => {
            let mut changed = false;
            for item in items {
                changed |= redact_value(item, secret);
            }
            changed
        }
        Value::Object(map) => {
            let mut changed = false;
            for (key, item) in map.iter_mut() {
                changed |= redact_value(item, secret || is_secret_key(key));
            }
            changed
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// How much of an unterminated private key block the redactor masks before it gives up on
/// the block (a stray `BEGIN` line must not blank a whole transcript). An RSA 16384 key is
/// about 13 KiB.
const PEM_OPEN_MAX: usize = 64 << 10;

/// Where a private key block begins or ends in a string.
fn pem_markers() -> Option<&'static Regex> {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    CELL.get_or_init(|| Regex::new(r"-----(BEGIN|END)[A-Z0-9 ]*PRIVATE KEY-----").ok())
        .as_ref()
}

/// What a key's body is made of (base64 and line breaks).
fn is_body_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b' ' | b'\t' | b'\r' | b'\n')
}

/// `Proc-Type: 4,ENCRYPTED`, `DEK-Info: …`: the headers of an encrypted key, inside its block.
fn is_pem_header(s: &str) -> bool {
    s.split_once(": ").is_some_and(|(name, _)| {
        name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    })
}

/// JSON fields that name things rather than carry text: never masked as part of a key block,
/// so the stream stays parseable while a block is open (`"type":"text"` looks like base64).
fn is_structural_key(key: &str) -> bool {
    const NAMES: &[&str] = &[
        "type",
        "subtype",
        "role",
        "stopreason",
        "stop_reason",
        "status",
        "model",
        "api",
        "provider",
        "name",
        "toolname",
        "tool",
        "id",
    ];
    let lower = key.to_ascii_lowercase();
    NAMES.contains(&lower.as_str()) || lower.ends_with("_id") || key.ends_with("Id")
}

/// Secret redaction of a stream (a worker's stdout or stderr), line by line. Each line is
/// redacted as `redact_json_line` does, and a private key block that a line opens and does not
/// close keeps being masked on the lines after it: body lines (or, in JSON lines, body-like
/// strings outside structural fields) are masked up to and including the `END` line. A line
/// that cannot be part of a key (other text) ends the block, and so does `PEM_OPEN_MAX`. An
/// agent's stdout goes through `push`, which also holds text deltas to redact them joined.
#[derive(Debug, Default, Clone)]
pub struct StreamRedactor {
    /// Bytes masked so far in a block opened on an earlier line.
    open: Option<usize>,
    /// Deltas not passed on yet (`push`).
    held: Option<deltas::Held>,
}

/// What one string did to an open block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockEffect {
    /// Nothing of a block in it (or only masked body): the state carries on.
    None,
    Opened,
    Closed,
}

impl StreamRedactor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a key block is open (the next lines are taken as its continuation).
    pub fn in_block(&self) -> bool {
        self.open.is_some()
    }

    /// Redact one line (without its newline). A line with nothing to redact comes back as it
    /// is. Each line on its own (but for a key block): for a stream whose text may arrive in
    /// deltas, `push`.
    pub fn line(&mut self, line: &str) -> String {
        self.redact_line(line, serde_json::from_str::<Value>(line).ok())
    }

    /// Redact one line of an agent's stream (without its newline) into `out`: zero, one or
    /// more lines to pass on. Text an agent streams in deltas (pi's `text_delta`, Claude Code's
    /// `content_block_delta`, Gemini CLI's `delta` messages, ACP's `*_chunk`, Codex's
    /// `…/delta`) is held until other output comes, and the rules run on the deltas' joined
    /// text, so a secret split between two deltas (a model streams a few characters at a
    /// time) is masked whole and no piece of it is kept (`deltas`). A long run of deltas is
    /// passed on in pieces cut outside anything a rule matches. `finish` passes on what is
    /// held when the stream ends.
    pub fn push(&mut self, line: &str, out: &mut Vec<String>) {
        let parsed = serde_json::from_str::<Value>(line).ok();
        if let (Some(held), Some(v)) = (self.held.as_mut(), parsed.as_ref()) {
            if deltas::passes_through(v) {
                held.push_other(line);
                return;
            }
        }
        let Some(delta) = parsed.as_ref().and_then(deltas::Delta::of) else {
            self.finish(out);
            out.push(self.redact_line(line, parsed));
            return;
        };
        if self.held.as_ref().is_some_and(|h| h.kind != delta.kind) {
            self.finish(out);
        }
        let held = self
            .held
            .get_or_insert_with(|| deltas::Held::new(delta.kind.clone()));
        held.push(line, delta);
        let ready = held.ready();
        self.pass_on(ready, out);
    }

    /// The stream ended (or other output came): what is held is passed on.
    pub fn finish(&mut self, out: &mut Vec<String>) {
        if let Some(mut held) = self.held.take() {
            let all = held.take_all();
            self.pass_on(all, out);
        }
    }

    /// Released deltas through the line rules; a key block their joined text left open (its
    /// BEGIN masked with the rest, so no line shows it) stays open for the lines after them.
    fn pass_on(&mut self, released: deltas::Released, out: &mut Vec<String>) {
        for l in released.lines {
            out.push(self.line(&l));
        }
        if released.block_open {
            self.open = Some(0);
        }
    }

    /// `line` redacted; `parsed`: the line as JSON, when it is.
    fn redact_line(&mut self, line: &str, parsed: Option<Value>) -> String {
        let open = self.open.is_some();
        let mut effect = BlockEffect::None;
        let mut masked = 0usize;
        let out = match parsed {
            Some(mut value) if matches!(value, Value::Object(_) | Value::Array(_)) => {
                let mut changed = false;
                walk(&mut value, None, false, &mut |s, key, secret| {
                    if secret {
                        if s.is_empty() || s == MASK {
                            return;
                        }
                        *s = MASK.to_owned();
                        changed = true;
                        return;
                    }
                    let structural = key.is_some_and(is_structural_key);
                    let (new, e, m) = redact_piece(s, open && !structural);
                    effect = combine(effect, e);
                    masked = masked.saturating_add(m);
                    if new != *s {
                        *s = new;
                        changed = true;
                    }
                });
                if changed {
                    value.to_string()
                } else {
                    line.to_owned()
                }
            }
            _ => {
                let (new, e, m) = redact_piece(line, open);
                effect = e;
                masked = m;
                new
            }
        };
        self.open = match (effect, self.open) {
            (BlockEffect::Opened, _) => Some(0),
            (BlockEffect::Closed, _) => None,
            (BlockEffect::None, Some(n)) => {
                Some(n.saturating_add(masked)).filter(|n| *n <= PEM_OPEN_MAX)
            }
            (BlockEffect::None, None) => None,
        };
        out
    }
}

/// Opened wins (a line that leaves any block open leaves the stream in one), then Closed.
fn combine(a: BlockEffect, b: BlockEffect) -> BlockEffect {
    match (a, b) {
        (BlockEffect::Opened, _) | (_, BlockEffect::Opened) => BlockEffect::Opened,
        (BlockEffect::Closed, _) | (_, BlockEffect::Closed) => BlockEffect::Closed,
        _ => BlockEffect::None,
    }
}

/// Every string of a JSON value with the nearest object key above it, and whether it sits
/// under a secret-looking key. Iterative: a line's nesting depth is the worker's to choose.
fn walk(
    value: &mut Value,
    key: Option<&str>,
    secret: bool,
    f: &mut dyn FnMut(&mut String, Option<&str>, bool),
) {
    let mut stack: Vec<(&mut Value, Option<String>, bool)> =
        vec![(value, key.map(str::to_owned), secret)];
    while let Some((v, key, secret)) = stack.pop() {
        match v {
            Value::String(s) => f(s, key.as_deref(), secret),
            Value::Array(items) => {
                for item in items.iter_mut().rev() {
                    stack.push((item, key.clone(), secret));
                }
            }
            Value::Object(map) => {
                let mut children: Vec<(&mut Value, Option<String>, bool)> =
                    Vec::with_capacity(map.len());
                for (k, item) in map.iter_mut() {
                    let secret = secret || is_secret_key(k);
                    children.push((item, Some(k.clone()), secret));
                }
                stack.extend(children.into_iter().rev());
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// One string of a stream: (redacted, what it did to a key block, bytes masked as block
/// continuation). `open`: a block was open before this string.
fn redact_piece(s: &str, open: bool) -> (String, BlockEffect, usize) {
    let Some(markers) = pem_markers() else {
        return (MASK.to_owned(), BlockEffect::None, 0);
    };
    let first = markers.captures(s);
    let first_is_end = first
        .as_ref()
        .and_then(|c| c.get(1))
        .is_some_and(|m| m.as_str() == "END");
    let (head, rest, effect) = match (first, first_is_end) {
        // A block's end with no beginning before it here: what precedes it is the block's
        // body (all of it when a block is open, else the body-like run before the marker).
        (Some(c), true) => {
            let Some(m) = c.get(0) else {
                return (redact_str(s), BlockEffect::None, 0);
            };
            let start = if open {
                0
            } else {
                s[..m.start()]
                    .bytes()
                    .rposition(|b| !is_body_byte(b))
                    .map_or(0, |i| i + 1)
            };
            let head = format!("{}{MASK}", &s[..start]);
            (Some(head), &s[m.end()..], BlockEffect::Closed)
        }
        (Some(_), false) => (None, s, BlockEffect::None),
        (None, _) if open => {
            if s.bytes().all(is_body_byte) || is_pem_header(s) {
                let masked = if s.trim().is_empty() {
                    s.to_owned()
                } else {
                    MASK.to_owned()
                };
                return (masked, BlockEffect::None, s.len());
            }
            (None, s, BlockEffect::Closed)
        }
        (None, _) => (None, s, BlockEffect::None),
    };
    // Whatever follows: the stateless rules (a whole block, or one cut at the end, goes), and
    // whether a block is left open at the end.
    let last_open = markers
        .captures_iter(rest)
        .last()
        .and_then(|c| c.get(1))
        .map(|m| m.as_str() == "BEGIN");
    let effect = match last_open {
        Some(true) => BlockEffect::Opened,
        Some(false) => BlockEffect::Closed,
        None => effect,
    };
    let tail = redact_str(rest);
    let out = match head {
        Some(h) => h + &tail,
        None => tail,
    };
    (out, effect, 0)
}

/// Whole words (split at separators and camelCase humps) that mark a key as secret. Plural
/// `tokens` is absent on purpose: `input_tokens`, `totalTokens` are usage counters.
const SECRET_WORDS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
    "authorization",
    "auth",
    "apikey",
    "key",
    "private",
    "privatekey",
    "cookie",
];

fn is_secret_key(key: &str) -> bool {
    key_words(key).any(|w| SECRET_WORDS.contains(&w.as_str()))
}

/// `OPENAI_API_KEY` → openai, api, key; `accessToken` → access, token.
fn key_words(key: &str) -> impl Iterator<Item = String> + '_ {
    key.split(|c: char| !c.is_alphanumeric()).flat_map(|part| {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut prev_lower = false;
        for ch in part.chars() {
            if ch.is_uppercase() && prev_lower && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
            word.extend(ch.to_lowercase());
        }
        if !word.is_empty() {
            words.push(word);
        }
        words
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patterns_compile() {
        assert!(compiled().is_some());
    }

    #[test]
    fn redacts_strings() {
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc=\n-----END RSA PRIVATE KEY-----";
        let gh = format!("ghp_{}", "a1B2".repeat(9));
        let table: Vec<(String, String)> = vec![
            (
                format!("key:\n{pem}\nafter"),
                "key:\n[REDACTED PRIVATE KEY]\nafter".into(),
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA".into(),
                "[REDACTED PRIVATE KEY]".into(),
            ),
            (
                "Authorization: Bearer abcdefghijklmnop".into(),
                "Authorization: ***".into(),
            ),
            (
                "curl -H 'authorization: token abc123' -H 'Proxy-Authorization: Basic dXNlcg==' x"
                    .into(),
                "curl -H 'authorization: ***' -H 'Proxy-Authorization: ***' x".into(),
            ),
            (
                "X-Authorization=secretvalue\nnext".into(),
                "X-Authorization=***\nnext".into(),
            ),
            (
                "got bearer abcdefgh12345678 back".into(),
                "got bearer *** back".into(),
            ),
            ("Bearer short".into(), "Bearer short".into()),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sflKxwRJSMeKKF2QT4fwpM done".into(),
                "jwt *** done".into(),
            ),
            (format!("push with {gh}."), "push with ***.".into()),
            (format!("github_pat_{}", "A".repeat(40)), "***".into()),
            (
                "aws AKIAIOSFODNN7EXAMPLE here".into(),
                "aws *** here".into(),
            ),
            (
                "slack xoxb-123456789012-abcdefABCDEF".into(),
                "slack ***".into(),
            ),
            (format!("g AIza{}", "Sy".repeat(17) + "x"), "g ***".into()),
            (
                format!("stripe sk_live_{}", "4eC39HqLyjWDarjtT1zdp7dc"),
                "stripe ***".into(),
            ),
            (
                format!("anthropic sk-ant-api03-{}-AA", "x1".repeat(20)),
                "anthropic ***".into(),
            ),
            (
                "openai sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t".into(),
                "openai ***".into(),
            ),
            ("sk-1234567890abcdefghijABCD".into(), "***".into()),
            (
                "export OPENAI_API_KEY=abc123 && run".into(),
                "export OPENAI_API_KEY=*** && run".into(),
            ),
            ("password: hunter2".into(), "password: ***".into()),
            (
                "db_password='p@ss' user=bob".into(),
                "db_password='***' user=bob".into(),
            ),
            (
                r#"{\"client_secret\": \"s3cr3t\"}"#.into(),
                r#"{\"client_secret\": \"***\"}"#.into(),
            ),
            ("GITHUB_TOKEN=ghs_x".into(), "GITHUB_TOKEN=***".into()),
            // Credentials in URLs.
            (
                "origin\thttps://bob:ghs_Secret123@github.com/o/r.git (fetch)".into(),
                "origin\thttps://bob:***@github.com/o/r.git (fetch)".into(),
            ),
            (
                "DATABASE_URL=postgres://app:s3cr%40t@db.internal:5432/app".into(),
                "DATABASE_URL=postgres://app:***@db.internal:5432/app".into(),
            ),
            (
                "redis://:p@ss:word@cache:6379/0 and ftp://u:x@h".into(),
                "redis://:***@cache:6379/0 and ftp://u:***@h".into(),
            ),
            (
                r#"{"url":"https://u:pw@h/x"}"#.into(),
                r#"{"url":"https://u:***@h/x"}"#.into(),
            ),
            // untouched: no password, a port, an address in a path
            (
                "https://bob@github.com http://localhost:8080/a@b mailto:a@b.c".into(),
                "https://bob@github.com http://localhost:8080/a@b mailto:a@b.c".into(),
            ),
            // untouched
            (
                "input_tokens=120 max_tokens: 4096".into(),
                "input_tokens=120 max_tokens: 4096".into(),
            ),
            (
                "API Error: 400 max_tokens: field required".into(),
                "API Error: 400 max_tokens: field required".into(),
            ),
            (
                "the task-runner module".into(),
                "the task-runner module".into(),
            ),
            (
                "pip install sk-learn-preprocessing-tools".into(),
                "pip install sk-learn-preprocessing-tools".into(),
            ),
            (
                "héllo wörld — ünïcode ✓".into(),
                "héllo wörld — ünïcode ✓".into(),
            ),
            ("".into(), "".into()),
        ];
        for (input, want) in table {
            assert_eq!(redact_str(&input), want, "{input:?}");
        }
    }

    #[test]
    fn redacts_json_lines() {
        let line = json!({
            "type": "tool_execution_start",
            "args": {"command": "curl -H 'Authorization: Bearer abcdefghijkl' https://x"},
            "api_key": "abc",
            "apiKey": "def",
            "accessToken": "ghi",
            "env": {"OPENAI_API_KEY": "sk-whatever", "HOME": "/root"},
            "credentials": ["one", {"user": "bob"}],
            "private": true,
            "tokenCount": 5,
            "usage": {"input_tokens": 5, "output_tokens": 7, "totalTokens": 12, "cache_read_input_tokens": 1},
            "api": "anthropic-messages",
            "text": "my key is sk-ant-api03-AbCdEf0123456789AbCdEf",
        })
        .to_string();
        let out: Value = serde_json::from_str(&redact_json_line(&line)).unwrap();
        assert_eq!(
            out,
            json!({
                "type": "tool_execution_start",
                "args": {"command": "curl -H 'Authorization: ***' https://x"},
                "api_key": "***",
                "apiKey": "***",
                "accessToken": "***",
                "env": {"OPENAI_API_KEY": "***", "HOME": "/root"},
                "credentials": ["***", {"user": "***"}],
                "private": true,
                "tokenCount": 5,
                "usage": {"input_tokens": 5, "output_tokens": 7, "totalTokens": 12, "cache_read_input_tokens": 1},
                "api": "anthropic-messages",
                "text": "my key is ***",
            })
        );
    }

    #[test]
    fn clean_lines_come_back_unchanged() {
        let table = [
            r#"{"z":1,"a":{"usage":{"input":1,"cost":{"total":0.00030000}}},"text":"fine"}"#,
            "not json at all",
            "",
            "{broken",
            "[1,2,3]",
        ];
        for line in table {
            assert_eq!(redact_json_line(line), line);
        }
        assert_eq!(
            redact_json_line("{broken password=x"),
            "{broken password=***"
        );
    }

    #[test]
    fn secret_keys() {
        let table = [
            ("api_key", true),
            ("OPENAI_API_KEY", true),
            ("apiKey", true),
            ("x-api-key", true),
            ("accessToken", true),
            ("refresh_token", true),
            ("Authorization", true),
            ("client_secret", true),
            ("password", true),
            ("privateKey", true),
            ("input_tokens", false),
            ("totalTokens", false),
            ("cache_creation_input_tokens", false),
            ("api", false),
            ("keyboard", false),
            ("author", false),
            ("monkey", false),
        ];
        for (key, want) in table {
            assert_eq!(is_secret_key(key), want, "{key}");
        }
    }

    /// Runs lines through one stream redactor.
    fn stream(lines: &[&str]) -> Vec<String> {
        let mut r = StreamRedactor::new();
        lines.iter().map(|l| r.line(l)).collect()
    }

    const KEY_BODY: [&str; 3] = [
        "MIIEowIBAAKCAQEA7bq9Vd3kZx2yq8hJk0Lm",
        "aGVsbG8gd29ybGQgdGhpcyBpcyBhIGtleQ+/",
        "Zm9vYmFy==",
    ];

    #[test]
    fn a_key_printed_over_lines_goes_whole() {
        let mut lines = vec!["cat id_rsa", "-----BEGIN RSA PRIVATE KEY-----"];
        lines.extend(KEY_BODY);
        lines.extend(["-----END RSA PRIVATE KEY-----", "done, see above"]);
        assert_eq!(
            stream(&lines),
            [
                "cat id_rsa",
                "[REDACTED PRIVATE KEY]",
                "***",
                "***",
                "***",
                "***",
                "done, see above"
            ]
        );
        // Encrypted keys carry headers; blank lines stay blank.
        let enc = [
            "-----BEGIN ENCRYPTED PRIVATE KEY-----",
            "Proc-Type: 4,ENCRYPTED",
            "",
            KEY_BODY[0],
            "-----END ENCRYPTED PRIVATE KEY----- trailing",
        ];
        let out = stream(&enc);
        assert!(!out.iter().any(|l| l.contains(KEY_BODY[0])), "{out:?}");
        assert_eq!(out[4], "*** trailing");
    }

    #[test]
    fn a_key_streamed_in_deltas_goes_whole() {
        // pi's text deltas: the block is split across JSON lines (the fake agent splits a final
        // text at its middle), then the whole text comes again in one string.
        let text = format!(
            "Here it is:\n-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n{}\n-----END OPENSSH PRIVATE KEY-----\nKeep it safe.",
            KEY_BODY[0], KEY_BODY[1]
        );
        let mid = text.find(KEY_BODY[1]).unwrap() + 5;
        let delta = |d: &str| {
            json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": d}}).to_string()
        };
        let end = json!({"type": "message_end", "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "stopReason": "stop", "usage": {"input": 3}}}).to_string();
        let lines = [
            delta(&text[..mid]),
            delta(&text[mid..]),
            json!({"type": "message_update", "assistantMessageEvent": {"type": "text_end", "content": text}}).to_string(),
            end,
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let out = stream(&refs);
        for l in &out {
            for body in &KEY_BODY[..2] {
                assert!(!l.contains(&body[6..20]), "{l}");
            }
            assert!(!l.contains("-----END"), "{l}");
        }
        let parsed: Vec<Value> = out
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            parsed[0]["assistantMessageEvent"]["delta"],
            "Here it is:\n[REDACTED PRIVATE KEY]"
        );
        assert_eq!(
            parsed[1]["assistantMessageEvent"]["delta"],
            "***\nKeep it safe."
        );
        assert_eq!(parsed[1]["type"], "message_update");
        assert_eq!(
            parsed[3]["message"]["content"][0]["text"],
            "Here it is:\n[REDACTED PRIVATE KEY]\nKeep it safe."
        );
        assert_eq!(parsed[3]["message"]["content"][0]["type"], "text");
        assert_eq!(parsed[3]["message"]["role"], "assistant");
    }

    #[test]
    fn an_open_block_ends_on_other_text_or_at_the_cap() {
        // A stray BEGIN: the next line of prose is not a key's body.
        let out = stream(&["-----BEGIN PRIVATE KEY-----", "Done.", "plain"]);
        assert_eq!(out, ["[REDACTED PRIVATE KEY]", "Done.", "plain"]);
        // Structural JSON fields are never taken for a body, so the stream stays parseable.
        let out = stream(&[
            "-----BEGIN PRIVATE KEY-----",
            r#"{"type":"text","role":"assistant","toolCallId":"abc"}"#,
            KEY_BODY[0],
        ]);
        assert_eq!(
            out[1],
            r#"{"type":"text","role":"assistant","toolCallId":"abc"}"#
        );
        assert_eq!(out[2], "***");
        // Past the cap the redactor gives up on the block.
        let body = "QUJD".repeat(16);
        let mut lines = vec!["-----BEGIN PRIVATE KEY-----".to_string()];
        lines.extend(std::iter::repeat_n(
            body.clone(),
            PEM_OPEN_MAX / body.len() + 2,
        ));
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let out = stream(&refs);
        assert_eq!(out.last().unwrap(), &body);
        assert_eq!(out[1], "***");
        // An END with no BEGIN (a transcript cut inside a key): the body before it goes.
        assert_eq!(
            stream(&[&format!(
                "{} {}-----END PRIVATE KEY----- ok",
                "x:", KEY_BODY[1]
            )]),
            ["x:*** ok"]
        );
    }

    #[test]
    fn the_stream_redactor_keeps_clean_lines_and_applies_every_rule() {
        let clean = [
            r#"{"z":1,"a":{"usage":{"input":1,"cost":{"total":0.00030000}}},"text":"fine"}"#,
            "not json at all",
            "",
            "{broken",
            "[1,2,3]",
        ];
        let mut r = StreamRedactor::new();
        for line in clean {
            assert_eq!(r.line(line), line);
        }
        assert_eq!(r.line("{broken password=x"), "{broken password=***");
        assert_eq!(
            r.line(r#"{"api_key":"abc","text":"see https://u:pw@h","usage":{"input_tokens":5}}"#),
            r#"{"api_key":"***","text":"see https://u:***@h","usage":{"input_tokens":5}}"#
        );
        assert!(!r.in_block());
    }

    /// `text` streamed as deltas of `size` characters in `format`'s lines, then the turn's end.
    fn deltas(format: &str, text: &str, size: usize) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut lines: Vec<String> = chars
            .chunks(size)
            .enumerate()
            .map(|(i, piece)| {
                let d: String = piece.iter().collect();
                match format {
                    "pi" => json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": d}}),
                    "claude" => json!({"type": "stream_event", "uuid": format!("u{i}"), "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}}}),
                    "gemini" => json!({"type": "message", "timestamp": format!("t{i}"), "role": "assistant", "content": d, "delta": true}),
                    "acp" => json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": d}}}}),
                    _ => json!({"jsonrpc": "2.0", "method": "item/agentMessage/delta", "params": {"itemId": "m1", "delta": d}}),
                }
                .to_string()
            })
            .collect();
        lines.push(r#"{"type":"turn_end"}"#.to_string());
        lines
    }

    /// The text of the delta lines among `lines`, joined.
    fn delta_text(lines: &[String]) -> String {
        lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| deltas::Delta::of(&v).map(|d| d.text))
            .collect()
    }

    fn pushed(lines: &[String]) -> Vec<String> {
        let mut r = StreamRedactor::new();
        let mut out = Vec::new();
        for l in lines {
            r.push(l, &mut out);
        }
        r.finish(&mut out);
        out
    }

    const TOKEN: &str = "ghp_Zq9Xw8Vu7Ts6Rp5On4Ml3Kj2Ih1Gf0EdCbAz";

    #[test]
    fn a_secret_split_between_deltas_goes_whole() {
        let text =
            format!("The token is {TOKEN} and the key sk-proj-A1b2C3d4E5f6G7h8I9j0Kk, done.");
        for format in ["pi", "claude", "gemini", "acp", "codex"] {
            for size in [1, 2, 3, 7, 16, 40] {
                let out = pushed(&deltas(format, &text, size));
                for l in &out {
                    for piece in [
                        &TOKEN[4..10],
                        &TOKEN[20..26],
                        &TOKEN[34..],
                        "A1b2C3",
                        "I9j0Kk",
                    ] {
                        assert!(
                            !l.contains(piece),
                            "{format} by {size}: `{piece}` kept in {l}"
                        );
                    }
                }
                assert_eq!(
                    delta_text(&out),
                    "The token is *** and the key ***, done.",
                    "{format} by {size}"
                );
                assert_eq!(out.last().unwrap(), r#"{"type":"turn_end"}"#, "{format}");
            }
        }
    }

    #[test]
    fn deltas_pass_on_in_order_and_whole() {
        // Lines without a secret come back byte for byte, one for one, in order: another kind
        // of text, any other line and the stream's end pass on what is held.
        let text = r#"{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hi "}}"#;
        let think = r#"{"type":"message_update","assistantMessageEvent":{"type":"thinking_delta","contentIndex":1,"delta":"hm"}}"#;
        let tool =
            r#"{"type":"tool_execution_start","toolCallId":"t","toolName":"bash","args":{}}"#;
        let lines: Vec<String> = [text, think, text, text, tool, text]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut r = StreamRedactor::new();
        let mut out = Vec::new();
        r.push(text, &mut out);
        assert!(out.is_empty(), "held: {out:?}");
        r.push(think, &mut out);
        assert_eq!(out, [text]);
        assert_eq!(pushed(&lines), lines);
    }

    #[test]
    fn what_no_rule_rewrites_streams_through_unchanged() {
        // Matched by a rule's pattern, left as it is by its rewrite: a counter, a word, a
        // password already masked.
        for text in [
            "Set max_tokens: 4096 here.",
            "usage input_tokens=120 ok",
            "Run pip install sk-learn-preprocessing-tools now.",
            "already https://u:***@h/x redacted",
        ] {
            for size in [1, 3, 7, 100] {
                let out = pushed(&deltas("pi", text, size));
                assert_eq!(delta_text(&out), redact_str(text), "{text} by {size}");
                assert_eq!(delta_text(&out), text, "{text} by {size}");
            }
        }
    }

    #[test]
    fn a_key_block_split_by_other_output_stays_masked() {
        // Other output between two deltas passes on the first run (its BEGIN masked with the
        // rest): the block stays open for what follows, up to its END.
        let pi = |d: &str| {
            json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": d}}).to_string()
        };
        let think = json!({"type": "message_update", "assistantMessageEvent": {"type": "thinking_delta", "contentIndex": 1, "delta": "hm"}}).to_string();
        let lines = vec![
            pi(&format!(
                "Here:\n-----BEGIN RSA PRIVATE KEY-----\n{}",
                &KEY_BODY[0][..20]
            )),
            think,
            pi(&format!("{}\n{}", &KEY_BODY[0][20..], KEY_BODY[1])),
            pi("\n-----END RSA PRIVATE KEY-----\nBye."),
        ];
        let out = pushed(&lines);
        assert_eq!(out.len(), 4, "{out:#?}");
        for l in &out {
            for body in &KEY_BODY[..2] {
                assert!(!l.contains(&body[..8]) && !l.contains(&body[20..28]), "{l}");
            }
        }
        assert!(out[0].contains("[REDACTED PRIVATE KEY]"), "{}", out[0]);
        assert!(out[3].contains("Bye."), "{}", out[3]);
    }

    #[test]
    fn a_keep_alive_inside_a_streamed_secret_waits_behind_it() {
        // Claude Code forwards the API's pings: one may fall inside a secret being streamed.
        let delta = |i: usize, d: &str| {
            json!({"type": "stream_event", "uuid": format!("u{i}"), "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}}}).to_string()
        };
        let ping = r#"{"type":"stream_event","event":{"type":"ping"}}"#.to_string();
        let lines = vec![
            delta(0, &format!("key {}", &TOKEN[..15])),
            ping.clone(),
            delta(1, &format!("{} ok", &TOKEN[15..])),
            r#"{"type":"stream_event","event":{"type":"content_block_stop","index":0}}"#
                .to_string(),
        ];
        let out = pushed(&lines);
        assert_eq!(out.len(), 4, "{out:#?}");
        assert_eq!(out[1], ping, "in its place");
        assert_eq!(delta_text(&out), "key *** ok");
        for l in &out {
            assert!(
                !l.contains(&TOKEN[4..12]) && !l.contains(&TOKEN[20..28]),
                "{l}"
            );
        }
    }

    #[test]
    fn held_lines_are_bounded_by_their_size_too() {
        // Deltas of one character on lines of 100 KiB each: passed on long before 16,384 of
        // them are held.
        let pad = "p".repeat(100 << 10);
        let line = json!({"type": "message", "delta": true, "role": "assistant", "content": "a", "pad": pad}).to_string();
        let mut r = StreamRedactor::new();
        let mut out = Vec::new();
        for _ in 0..100 {
            r.push(&line, &mut out);
        }
        assert!(!out.is_empty(), "100 lines of 100 KiB held");
    }

    #[test]
    fn streamed_in_any_pieces_the_text_is_redacted_as_one() {
        // Pseudo-random texts of words, multi-byte characters and secrets, in pseudo-random
        // pieces: the pieces joined are the text redacted at once, one line per delta.
        let words = [
            "the",
            "é",
            "日本語",
            "🙂",
            "x",
            " ",
            "\n",
            TOKEN,
            "password=hunter2",
            "Authorization: Bearer abcdefghijkl",
            "https://u:pw@h/x",
            "max_tokens=10",
            "sk-proj-A1b2C3d4E5f6G7h8I9j0Kk",
            "AKIAABCDEFGHIJKLMNOP",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..300 {
            let mut text = String::new();
            for _ in 0..next(60) {
                text.push_str(words[next(words.len())]);
                text.push(' ');
            }
            let chars: Vec<char> = text.chars().collect();
            let mut lines = Vec::new();
            let mut i = 0;
            while i < chars.len() {
                let n = 1 + next(6);
                let d: String = chars[i..(i + n).min(chars.len())].iter().collect();
                lines.push(json!({"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": d}}).to_string());
                i += n;
            }
            lines.push(r#"{"type":"turn_end"}"#.to_string());
            let out = pushed(&lines);
            assert_eq!(out.len(), lines.len());
            assert_eq!(delta_text(&out), redact_str(&text), "{text:?}");
        }
    }

    #[test]
    fn old_pis_text_so_far_is_left_out_of_its_deltas() {
        // Old pi sends the message so far with each delta: at a cut it may end inside a
        // secret the held rest completes.
        let mut text = "y".repeat(8180);
        text.push(' ');
        text.push_str(TOKEN);
        text.push_str(" done");
        let chars: Vec<char> = text.chars().collect();
        let mut so_far = String::new();
        let lines: Vec<String> = chars
            .chunks(4)
            .map(|c| {
                let d: String = c.iter().collect();
                so_far.push_str(&d);
                json!({"type": "message_update", "message": {"content": [{"type": "text", "text": so_far}]},
                       "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": d, "partial": {"text": so_far}}})
                .to_string()
            })
            .collect();
        let out = pushed(&lines);
        for l in &out {
            assert!(
                !l.contains(&TOKEN[..8]),
                "{}",
                &l[l.len().saturating_sub(200)..]
            );
            assert!(!l.contains("\"partial\"") && !l.contains("\"message\""));
        }
        assert!(delta_text(&out).ends_with(" *** done"));
    }

    #[test]
    fn a_long_token_still_streaming_is_not_cut() {
        // A JWT matches only once whole (two dots): while its payload streams nothing matches,
        // and a cut inside it would leave two halves no rule knows.
        let mut text = "word ".repeat(1340);
        let jwt = format!("eyJhbGciOiJIUzI1NiJ9.{}.c2lnbmF0dXJl", "QUJD".repeat(500));
        text.push_str(&jwt);
        text.push_str(" end");
        let out = pushed(&deltas("pi", &text, 5));
        let joined = delta_text(&out);
        assert!(
            !joined.contains("QUJDQUJD") && !joined.contains("eyJhbGci"),
            "{}",
            joined.len()
        );
        assert!(joined.ends_with("word *** end"));
    }

    #[test]
    fn a_long_answer_passes_on_in_pieces_cut_outside_secrets() {
        // 40 KiB in deltas of 5 characters, a secret every ~700 bytes: passed on in pieces
        // before the answer ends, and joined they are the whole text redacted at once.
        let mut text = String::new();
        let mut n = 0;
        while text.len() < 40 << 10 {
            n += 1;
            text.push_str(&format!(
                "line {n} of the answer says nothing much at all; "
            ));
            if n % 13 == 0 {
                text.push_str(&format!("password={TOKEN} then "));
            }
        }
        let lines = deltas("pi", &text, 5);
        let mut r = StreamRedactor::new();
        let mut out = Vec::new();
        for l in &lines[..lines.len() - 1] {
            r.push(l, &mut out);
        }
        assert!(out.len() >= 4, "held to the end: {} lines", out.len());
        r.finish(&mut out);
        let joined = delta_text(&out);
        assert!(!joined.contains(&TOKEN[4..12]));
        assert_eq!(joined, redact_str(&text));
    }

    #[test]
    fn hostile_input_is_linear() {
        let inputs = [
            "Bearer ".repeat(100_000),
            "-----BEGIN PRIVATE KEY-----".repeat(20_000),
            "a_token".repeat(100_000),
            "password=".repeat(100_000),
            "sk-".repeat(100_000) + &"a".repeat(100_000),
            "eyJabcde.".repeat(100_000),
            "authorization:".repeat(50_000),
            "[".repeat(200_000),
            "{\"a\":".repeat(200_000),
        ];
        let mut stream = StreamRedactor::new();
        let mut out = Vec::new();
        for input in inputs {
            let _ = redact_str(&input);
            let _ = redact_json_line(&input);
            let _ = stream.line(&input);
            stream.push(&input, &mut out);
        }
        // One delta run whose every byte is inside one match (`token=` and no end): passed on
        // whole once past HOLD_MAX, masked.
        let long = format!("token={}", "a".repeat(300 << 10));
        let mut lines = deltas("pi", &long, 4096);
        lines.pop();
        let mut out = Vec::new();
        for l in &lines {
            stream.push(l, &mut out);
        }
        assert!(!out.is_empty(), "held past HOLD_MAX");
        assert!(delta_text(&out[..1]).starts_with("token=***"));
    }
}
