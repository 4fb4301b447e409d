//! Secret redaction for transcripts, events and logs (SPEC §11).
//!
//! Two layers, as in pi-crew: JSON lines are redacted structurally first (a value under a
//! secret-looking key becomes `"***"`), then every string goes through pattern redaction.
//! All patterns run on the `regex` crate, which matches in linear time, so a hostile line cannot
//! stall the daemon. Usage counters (`input_tokens`, `totalTokens`, …) are never touched.

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

/// `name=value`: counters such as `max_tokens=4096` are not secrets.
fn mask_assignment(c: &Captures) -> String {
    let (key, value) = (group(c, 1), group(c, 3));
    let counter = key.to_ascii_lowercase().contains("tokens") && value.parse::<f64>().is_ok();
    if counter || value == MASK {
        group(c, 0).to_owned()
    } else {
        format!("{key}{}{MASK}", group(c, 2))
    }
}

const RULES: &[Rule] = &[
    // PEM private keys; an unterminated block (a cut transcript) is masked to the end.
    Rule {
        pattern: r"(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY-----|.*)",
        rewrite: mask_pem,
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
            // untouched
            (
                "input_tokens=120 max_tokens: 4096".into(),
                "input_tokens=120 max_tokens: 4096".into(),
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
        for input in inputs {
            let _ = redact_str(&input);
            let _ = redact_json_line(&input);
        }
    }
}
