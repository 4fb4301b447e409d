//! `[fake:...]` directives read from the prompt.
//!
//! Earlier tasks' outputs are pasted into a prompt between `<dependency-output` and
//! `</dependency-output>`; they may quote directives meant for another task, so that text is
//! cut out before anything is read.

use std::time::Duration;

const OPEN_DEP: &str = "<dependency-output";
const CLOSE_DEP: &str = "</dependency-output>";
const DIRECTIVE: &str = "[fake:";

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Directives {
    pub sleep: Option<Duration>,
    pub turns: Option<u32>,
    pub tokens: Option<u64>,
    pub fail: bool,
    pub model_error: bool,
    pub crash: bool,
    pub silent: bool,
    pub linger: bool,
    pub ignore_sigterm: bool,
    pub no_final_text: bool,
    pub chatty: Option<u64>,
    /// Stream the answer in deltas of this many characters, as a model does (`deltas=3`);
    /// else in two halves.
    pub deltas: Option<usize>,
    pub invalid_json: bool,
    pub tools: Vec<String>,
    pub ask: Option<String>,
    pub fail_attempts: Option<u32>,
    pub crash_attempts: Option<u32>,
    pub echo_env: Vec<String>,
    /// Put made-up secrets (a PEM private key, a URL with a password, an API key) in the final
    /// text, the question and stderr, for redaction tests.
    pub leak: bool,
    /// While sleeping, print a line this often (a worker that never goes silent).
    pub heartbeat: Option<Duration>,
    /// The user's answer (a line starting with `Answer:`), appended by crew after an ask.
    pub answer: Option<String>,
    /// File changes in the cwd, in order (`write=path:text`, `append=path:text`, `delete=path`).
    pub edits: Vec<Edit>,
    /// Files whose content (read before any edit) the final answer quotes (`cat=path`).
    pub cats: Vec<String>,
    /// Models that are "overloaded": run with `--model` one of them (a `:thinking` suffix
    /// aside), the agent fails as `[fake:model-error]` does (`busy-model=name`).
    pub busy_models: Vec<String>,
    /// A file whose content the final answer ends with, as a ```json fenced block: a
    /// fan-out step's block (`fanout=path`).
    pub fanout: Option<String>,
    /// The same on a repair attempt (the prompt says the last block was refused), if given
    /// (`fanout-repair=path`).
    pub fanout_repair: Option<String>,
    /// A judge's verdict (`verdict=…`, see `crate::verdict`), on a repair attempt
    /// (`verdict-repair=…`), or pass iff a file exists (`verdict-needs=path`), with a finding
    /// title (`finding=…`).
    pub verdict: Option<String>,
    pub verdict_repair: Option<String>,
    pub verdict_needs: Option<String>,
    pub finding: Option<String>,
    /// Edits made only by a fix task crew added (`fix-write=path:text`).
    pub fix_edits: Vec<Edit>,
    /// Edits made only by a resolve task crew added (`resolve-write=path:text`); a resolver
    /// makes no other edit (its prompt quotes the conflicting tasks' texts, directives and
    /// all, which are theirs to act on, not its).
    pub resolve_edits: Vec<Edit>,
    /// Edits made only by crew's candidate `k` of a step (`cand-write=k:path:text`, issue 36):
    /// the candidates of one step get the same prompt, so the task id tells them apart.
    pub cand_edits: Vec<(u32, Edit)>,
    /// Candidates that fail for good, as `[fake:fail]` does (`cand-fail=k`).
    pub cand_fail: Vec<u32>,
    /// How long candidate `k` sleeps (`cand-sleep=k:2s`), in place of `sleep`.
    pub cand_sleep: Vec<(u32, Duration)>,
    /// The verdict a selector's choice block carries (`choice-verdict=fail`; `pass` else).
    pub choice_verdict: Option<String>,
    /// A selector's choice among candidates (`choice=k`).
    pub choice: Option<u32>,
}

/// A change an editing agent makes to its working directory. `\n` in the text is a newline.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    Write(String, String),
    Append(String, String),
    Delete(String),
}

fn path_and_text(v: &str) -> Option<(String, String)> {
    let (path, text) = v.split_once(':')?;
    let path = path.trim();
    (!path.is_empty()).then(|| (path.to_owned(), text.replace("\\n", "\n")))
}

/// The prompt without its dependency-output blocks (an unterminated block runs to the end).
pub fn visible_text(prompt: &str) -> String {
    let mut out = String::with_capacity(prompt.len());
    let mut rest = prompt;
    while let Some(start) = rest.find(OPEN_DEP) {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        rest = match after.find(CLOSE_DEP) {
            Some(end) => &after[end + CLOSE_DEP.len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

pub fn parse(prompt: &str) -> Directives {
    let text = visible_text(prompt);
    let mut d = Directives::default();
    let mut rest = text.as_str();
    while let Some(start) = rest.find(DIRECTIVE) {
        let body_start = &rest[start + DIRECTIVE.len()..];
        let Some(end) = body_start.find(']') else {
            break;
        };
        apply(&mut d, &body_start[..end]);
        rest = &body_start[end + 1..];
    }
    d.answer = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Answer:"))
        .map(|a| a.trim().to_owned())
        .next_back();
    d
}

fn apply(d: &mut Directives, body: &str) {
    let (name, value) = match body.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (body.trim(), None),
    };
    match (name, value) {
        ("sleep", Some(v)) => d.sleep = parse_duration(v),
        ("turns", Some(v)) => d.turns = v.parse().ok().filter(|n| *n > 0),
        ("tokens", Some(v)) => d.tokens = v.parse().ok(),
        ("fail", _) => d.fail = true,
        ("model-error", _) => d.model_error = true,
        ("crash", _) => d.crash = true,
        ("silent", _) => d.silent = true,
        ("linger", _) => d.linger = true,
        ("ignore-sigterm", _) => d.ignore_sigterm = true,
        ("no-final-text", _) => d.no_final_text = true,
        ("chatty", Some(v)) => d.chatty = parse_size(v),
        ("deltas", Some(v)) => d.deltas = v.parse().ok().filter(|n| *n > 0),
        ("invalid-json", _) => d.invalid_json = true,
        ("tool", Some(v)) if !v.is_empty() => d.tools.push(v.to_owned()),
        ("ask", Some(v)) if !v.is_empty() => d.ask = Some(v.to_owned()),
        ("fail-attempts", Some(v)) => d.fail_attempts = v.parse().ok(),
        ("crash-attempts", Some(v)) => d.crash_attempts = v.parse().ok(),
        ("echo-env", Some(v)) if !v.is_empty() => d.echo_env.push(v.to_owned()),
        ("leak", _) => d.leak = true,
        ("heartbeat", Some(v)) => d.heartbeat = parse_duration(v).filter(|d| !d.is_zero()),
        ("write", Some(v)) => d
            .edits
            .extend(path_and_text(v).map(|(p, t)| Edit::Write(p, t))),
        ("append", Some(v)) => d
            .edits
            .extend(path_and_text(v).map(|(p, t)| Edit::Append(p, t))),
        ("delete", Some(v)) if !v.is_empty() => d.edits.push(Edit::Delete(v.to_owned())),
        ("cat", Some(v)) if !v.is_empty() => d.cats.push(v.to_owned()),
        ("busy-model", Some(v)) if !v.is_empty() => d.busy_models.push(v.to_owned()),
        ("fanout", Some(v)) if !v.is_empty() => d.fanout = Some(v.to_owned()),
        ("fanout-repair", Some(v)) if !v.is_empty() => d.fanout_repair = Some(v.to_owned()),
        ("verdict", Some(v)) if !v.is_empty() => d.verdict = Some(v.to_owned()),
        ("verdict-repair", Some(v)) if !v.is_empty() => d.verdict_repair = Some(v.to_owned()),
        ("verdict-needs", Some(v)) if !v.is_empty() => d.verdict_needs = Some(v.to_owned()),
        ("finding", Some(v)) if !v.is_empty() => d.finding = Some(v.to_owned()),
        ("fix-write", Some(v)) => d
            .fix_edits
            .extend(path_and_text(v).map(|(p, t)| Edit::Write(p, t))),
        ("resolve-write", Some(v)) => d
            .resolve_edits
            .extend(path_and_text(v).map(|(p, t)| Edit::Write(p, t))),
        ("cand-write", Some(v)) => {
            if let Some((k, rest)) = v.split_once(':') {
                if let (Ok(k), Some((p, t))) = (k.trim().parse(), path_and_text(rest)) {
                    d.cand_edits.push((k, Edit::Write(p, t)));
                }
            }
        }
        ("cand-fail", Some(v)) => d.cand_fail.extend(v.trim().parse::<u32>().ok()),
        ("choice", Some(v)) => d.choice = v.trim().parse().ok(),
        ("choice-verdict", Some(v)) if !v.is_empty() => d.choice_verdict = Some(v.to_owned()),
        ("cand-sleep", Some(v)) => {
            if let Some((k, dur)) = v.split_once(':') {
                if let (Ok(k), Some(dur)) = (k.trim().parse(), parse_duration(dur)) {
                    d.cand_sleep.push((k, dur));
                }
            }
        }
        _ => {}
    }
}

/// Split `12.5ms` into the number and its unit.
fn split_unit(v: &str) -> Option<(f64, String)> {
    let at = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let n: f64 = v[..at].parse().ok()?;
    (n.is_finite() && n >= 0.0).then(|| (n, v[at..].trim().to_ascii_lowercase()))
}

/// `200ms`, `2s`, `1.5m`; a bare number is milliseconds.
pub fn parse_duration(v: &str) -> Option<Duration> {
    let (n, unit) = split_unit(v)?;
    let ms = match unit.as_str() {
        "" | "ms" => n,
        "s" => n * 1000.0,
        "m" => n * 60_000.0,
        _ => return None,
    };
    Some(Duration::from_micros((ms * 1000.0) as u64))
}

/// `4MB`, `512KB`, `100B`, `100`; K and M are binary (1024).
pub fn parse_size(v: &str) -> Option<u64> {
    let (n, unit) = split_unit(v)?;
    let mult = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        _ => return None,
    };
    Some((n * mult) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_directives() {
        let d = parse(
            "Goal: x [fake:sleep=200ms][fake:turns=3] [fake:tokens=5000]\n[fake:tool=bash] [fake:tool=read]\
             [fake:ask=Which database?][fake:echo-env=HOME][fake:chatty=4MB][fake:fail-attempts=2]\
             [fake:crash-attempts=1][fake:linger][fake:ignore-sigterm][fake:invalid-json][fake:what]\
             [fake:leak][fake:heartbeat=50ms]",
        );
        assert_eq!(d.sleep, Some(Duration::from_millis(200)));
        assert_eq!(d.turns, Some(3));
        assert_eq!(d.tokens, Some(5000));
        assert_eq!(d.tools, ["bash", "read"]);
        assert_eq!(d.ask.as_deref(), Some("Which database?"));
        assert_eq!(d.echo_env, ["HOME"]);
        assert_eq!(d.chatty, Some(4 << 20));
        assert_eq!((d.fail_attempts, d.crash_attempts), (Some(2), Some(1)));
        assert!(d.linger && d.ignore_sigterm && d.invalid_json && d.leak);
        assert_eq!(d.heartbeat, Some(Duration::from_millis(50)));
        assert!(!d.fail && !d.crash && !d.silent && !d.model_error && !d.no_final_text);
        assert_eq!(d.answer, None);
    }

    #[test]
    fn parses_edits() {
        let d = parse(
            "[fake:cat=a.txt][fake:write=src/a.txt:one\\ntwo][fake:append=b:x][fake:delete=c]",
        );
        assert_eq!(
            d.edits,
            [
                Edit::Write("src/a.txt".into(), "one\ntwo".into()),
                Edit::Append("b".into(), "x".into()),
                Edit::Delete("c".into()),
            ]
        );
        assert_eq!(d.cats, ["a.txt"]);
    }

    #[test]
    fn parses_resolve_edits_apart_from_the_others() {
        let d = parse("[fake:write=a:x][fake:resolve-write=src/lib.rs:one\\ntwo]");
        assert_eq!(d.edits, [Edit::Write("a".into(), "x".into())]);
        assert_eq!(
            d.resolve_edits,
            [Edit::Write("src/lib.rs".into(), "one\ntwo".into())]
        );
        assert!(crate::verdict::is_resolve(
            "Resolve every conflict so that …, remove every conflict marker, and run …"
        ));
        assert!(!crate::verdict::is_resolve("do a for the goal"));
    }

    #[test]
    fn ignores_dependency_output() {
        let prompt = "Goal: g\n<dependency-output task=\"a\">\n[fake:fail]\nAnswer: no\n</dependency-output>\n\
                      [fake:tokens=10]\n<dependency-output task=\"b\">[fake:crash]";
        let d = parse(prompt);
        assert!(!d.fail && !d.crash);
        assert_eq!(d.tokens, Some(10));
        assert_eq!(d.answer, None);
        assert_eq!(
            visible_text("a<dependency-output>x</dependency-output>b"),
            "ab"
        );
    }

    #[test]
    fn reads_the_last_answer() {
        let d = parse("[fake:ask=Q?]\nAnswer: first\n  Answer:  Postgres 16 \n");
        assert_eq!(d.answer.as_deref(), Some("Postgres 16"));
    }

    #[test]
    fn durations_and_sizes() {
        let durations = [
            ("200ms", Some(200)),
            ("2s", Some(2000)),
            ("1.5s", Some(1500)),
            ("1m", Some(60_000)),
            ("50", Some(50)),
            ("x", None),
            ("5h", None),
            ("", None),
        ];
        for (v, want) in durations {
            assert_eq!(parse_duration(v), want.map(Duration::from_millis), "{v}");
        }
        let sizes = [
            ("4MB", Some(4 << 20)),
            ("64KB", Some(64 << 10)),
            ("10", Some(10)),
            ("1GB", None),
        ];
        for (v, want) in sizes {
            assert_eq!(parse_size(v), want, "{v}");
        }
    }
}
