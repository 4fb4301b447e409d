//! Verdicts (issue 30): what a judging task (verifier, reviewer, security reviewer, critic, or a
//! step with `verdict: true`) decided about the work before it. Its final answer ends with a
//! ```` ```json ```` block `{"verdict": "pass" | "fail" | "changes_requested", "findings": [...]}`;
//! the forms the builtin prompts asked for before (the verifier's leading `PASS`/`FAIL`, a
//! `Verdict: approve` line, ...) are read as the short form. Pure: the daemon reads the answer
//! (bounded) and hands the text here; parsing bounds everything it keeps.

use serde::{Deserialize, Serialize};

/// Agents that judge whatever the team calls their role.
pub const JUDGE_AGENTS: &[&str] = &["verifier", "reviewer", "security-reviewer", "critic"];
/// The `reason` of the `task.retrying` that asks a judge for a verdict it did not give.
pub const REPAIR_REASON: &str = "verdict_invalid";
/// Fix rounds a judge's failing verdict may start unless param, step, team or config say.
pub const DEFAULT_MAX_FIX_ROUNDS: u32 = 2;
/// The most any of them may allow.
pub const MAX_FIX_ROUNDS_CEILING: u32 = 20;
/// A judge's final answer is read up to this many bytes.
pub const MAX_ANSWER_BYTES: u64 = 1 << 20;
pub const MAX_FINDINGS: usize = 32;
pub const MAX_TITLE_CHARS: usize = 200;
pub const MAX_DETAIL_CHARS: usize = 4000;
pub const MAX_PATHS: usize = 32;
pub const MAX_PATH_CHARS: usize = 256;
pub const MAX_SEVERITY_CHARS: usize = 32;
/// A short-form verdict carries the judge's answer as its one finding, cut to this.
const SHORT_FORM_DETAIL_CHARS: usize = 8000;
/// The heading of the prompt section; the fake agent answers it.
pub const PROMPT_HEADING: &str = "## Output: your verdict";
pub const REPAIR_HEADING: &str = "## Your previous verdict could not be read";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    ChangesRequested,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::ChangesRequested => "changes_requested",
        }
    }
    pub fn passed(self) -> bool {
        self == Outcome::Pass
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub verdict: Outcome,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
}

/// The block as an agent may write it: findings are lenient (a missing detail is fine), the
/// verdict is not.
#[derive(Deserialize)]
struct Block {
    verdict: String,
    #[serde(default)]
    findings: Vec<serde_json::Value>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.verdict.passed()
    }

    /// "fail, 1 finding" / "pass".
    pub fn headline(&self) -> String {
        match self.findings.len() {
            0 => self.verdict.as_str().to_string(),
            1 => format!("{}, 1 finding", self.verdict.as_str()),
            n => format!("{}, {n} findings", self.verdict.as_str()),
        }
    }

    /// The findings as a markdown list, for a fix task's prompt and a blocked run's reason.
    pub fn findings_text(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            out.push_str("- ");
            if let Some(s) = &f.severity {
                out.push_str(&format!("[{s}] "));
            }
            out.push_str(&f.title);
            if !f.paths.is_empty() {
                out.push_str(&format!(" ({})", f.paths.join(", ")));
            }
            out.push('\n');
            for line in f.detail.lines() {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// The verdict of a task judged by its integration checks alone, once they pass.
    pub fn passed_checks() -> Verdict {
        Verdict {
            verdict: Outcome::Pass,
            findings: Vec::new(),
        }
    }

    /// A failed integration check (a verification command) as a verdict: the command's
    /// failure is the finding.
    pub fn from_failed_check(error: &str) -> Verdict {
        Verdict {
            verdict: Outcome::Fail,
            findings: vec![Finding {
                title: "a verification command failed".into(),
                detail: cut(error, SHORT_FORM_DETAIL_CHARS),
                ..Default::default()
            }],
        }
    }
}

/// What a planned task carries about judging, frozen at plan time.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Judging {
    /// The task ends with a verdict.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub judge: bool,
    /// Who fixes what its failing verdict (or failed integration check) found; `None`: its
    /// verdict is the product (a team with no role that can edit has no loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<std::sync::Arc<FixPlan>>,
    /// A fix task: the judge whose findings it fixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixes: Option<crate::ids::SafeId>,
}

impl Judging {
    pub fn is_default(&self) -> bool {
        *self == Judging::default()
    }
}

/// The fixer of a judge: a team role bound to its agent, like a fan-out step's roles, and the
/// rounds its failing verdicts may start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FixPlan {
    pub fixer: crate::fanout::RoleTemplate,
    /// The artifact the fixer's product is (the planner's plan, for a critic of a plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<crate::ids::ArtifactName>,
    pub max_rounds: u32,
    /// `max_rounds` came from the step or the team (the config's default does not apply).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rounds_given: bool,
}

/// Tools that let a role change files by editing (what the no-change guard and the fix loop
/// call *can edit*; `bash` alone does not count).
pub fn can_edit(tools: &[String]) -> bool {
    tools.iter().any(|t| matches!(t.as_str(), "edit" | "write"))
}

/// Whether a task of `agent` judges: a builtin judge, unless its step says `verdict: false`;
/// any agent whose step says `verdict: true`.
pub fn judges(agent: &str, step_says: Option<bool>) -> bool {
    step_says.unwrap_or_else(|| JUDGE_AGENTS.contains(&agent))
}

/// The verdict of a judge's final answer: its last ```` ```json ```` block holding a `verdict`,
/// else the short form. `Err` is a message for the agent's repair attempt.
pub fn parse(answer: &str) -> Result<Verdict, String> {
    if let Some(block) =
        crate::fanout::last_json_fence(answer).filter(|b| b.contains("\"verdict\""))
    {
        return parse_block(block);
    }
    let t = answer.trim();
    if t.starts_with('{') && t.contains("\"verdict\"") {
        return parse_block(t);
    }
    match short_form(answer) {
        Some(outcome) => Ok(Verdict {
            verdict: outcome,
            findings: if outcome.passed() {
                vec![]
            } else {
                vec![Finding {
                    title: "the judge's answer".into(),
                    detail: cut(answer.trim(), SHORT_FORM_DETAIL_CHARS),
                    ..Default::default()
                }]
            },
        }),
        None => Err("no verdict found: end your final answer with a ```json block \
                     {\"verdict\": \"pass\" | \"fail\" | \"changes_requested\", \"findings\": [...]}"
            .into()),
    }
}

fn parse_block(text: &str) -> Result<Verdict, String> {
    let b: Block =
        serde_json::from_str(text).map_err(|e| format!("the verdict block is not valid: {e}"))?;
    let verdict = word(&b.verdict).ok_or_else(|| {
        format!(
            "the verdict `{}` is none of pass, fail, changes_requested",
            cut(&b.verdict, 40)
        )
    })?;
    let findings = b
        .findings
        .iter()
        .take(MAX_FINDINGS)
        .filter_map(finding)
        .collect();
    Ok(Verdict { verdict, findings })
}

/// One finding, bounded; a string is taken as its title, anything without a title is dropped.
fn finding(v: &serde_json::Value) -> Option<Finding> {
    let s = |key: &str, max: usize| v.get(key).and_then(|x| x.as_str()).map(|x| cut(x, max));
    let title = match v.as_str() {
        Some(t) => cut(t, MAX_TITLE_CHARS),
        None => s("title", MAX_TITLE_CHARS)?,
    };
    let paths = v
        .get("paths")
        .and_then(|p| p.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str())
                .take(MAX_PATHS)
                .map(|p| cut(p, MAX_PATH_CHARS))
                .collect()
        })
        .unwrap_or_default();
    Some(Finding {
        title,
        detail: s("detail", MAX_DETAIL_CHARS).unwrap_or_default(),
        paths,
        severity: s("severity", MAX_SEVERITY_CHARS),
    })
}

/// A verdict word of any form the builtin prompts asked for.
fn word(w: &str) -> Option<Outcome> {
    let w: String = w
        .trim()
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_ascii_lowercase()
        .replace(['_', '-'], " ");
    let w = w.trim();
    // Longest first: "unsound" holds "sound", "changes requested" holds nothing shorter.
    const TABLE: &[(&str, Outcome)] = &[
        ("changes requested", Outcome::ChangesRequested),
        ("request changes", Outcome::ChangesRequested),
        ("needs changes", Outcome::ChangesRequested),
        ("unsound", Outcome::Fail),
        ("approve", Outcome::Pass),
        ("approved", Outcome::Pass),
        ("sound", Outcome::Pass),
        ("pass", Outcome::Pass),
        ("passed", Outcome::Pass),
        ("fail", Outcome::Fail),
        ("failed", Outcome::Fail),
    ];
    TABLE
        .iter()
        .find(|(k, _)| {
            w == *k || w.starts_with(&format!("{k} ")) || w.starts_with(&format!("{k}:"))
        })
        .map(|(_, o)| *o)
}

/// The short form: the last `Verdict: ...` line, else a leading `PASS` or `FAIL` (the
/// verifier's). Markdown emphasis and headings around them are ignored.
fn short_form(answer: &str) -> Option<Outcome> {
    let clean = |l: &str| -> String {
        l.trim()
            .trim_start_matches(['#', '>', '-', '*', '_', '`', ' '])
            .replace(['*', '`'], "")
            .trim()
            .to_string()
    };
    let verdict_line = answer.lines().rev().find_map(|l| {
        let c = clean(l);
        let lower = c.to_ascii_lowercase();
        let rest = lower.strip_prefix("verdict")?;
        let rest = rest.trim_start_matches([':', ' ', '-', '—', '=']);
        word(rest)
    });
    if verdict_line.is_some() {
        return verdict_line;
    }
    let first = answer.lines().map(clean).find(|l| !l.is_empty())?;
    let head: String = first
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    match head.as_str() {
        "PASS" => Some(Outcome::Pass),
        "FAIL" => Some(Outcome::Fail),
        _ => None,
    }
}

/// At most `max` characters of `s`.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// The prompt section a judge gets: what it judges (`range`: the commits under review in a
/// worktree run) and the block to end with; after a refused answer, what was wrong.
pub fn prompt_section(range: Option<(&str, &str)>, repair: Option<&str>) -> String {
    let mut out = String::new();
    if let Some((base, head)) = range {
        out.push_str("\n## What you judge\n\n");
        out.push_str(&format!(
            "The work under review is the range `{base}..{head}` of this repository (base \
             commit `{base}`): see it with `git diff {base}..HEAD` and `git log {base}..HEAD`.\n"
        ));
    }
    out.push('\n');
    out.push_str(PROMPT_HEADING);
    out.push_str(
        "\n\nYour verdict decides what happens next: a failing verdict sends the findings to a \
         task that fixes them, then you judge again. End your final answer with one fenced \
         ```json block of this shape:\n\n```json\n{\n  \"verdict\": \"fail\",\n  \"findings\": [\n    \
         {\"title\": \"parse() panics on empty input\", \"detail\": \"What is wrong, the evidence, \
         and the fix.\", \"paths\": [\"src/parse.rs\"], \"severity\": \"high\"}\n  ]\n}\n```\n\n\
         `verdict` is `pass` (nothing blocking remains), `fail` (it does not work or does not \
         achieve the goal) or `changes_requested` (it works but must change before it is \
         taken). List every blocking problem as a finding; a `pass` may have none.\n",
    );
    if let Some(msg) = repair {
        out.push('\n');
        out.push_str(REPAIR_HEADING);
        out.push_str("\n\n");
        out.push_str(msg);
        out.push_str("\n\nAnswer again, ending with the ```json verdict block.\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(a: &str) -> Result<Outcome, String> {
        parse(a).map(|v| v.verdict)
    }

    #[test]
    fn short_forms() {
        let table = [
            ("PASS\nEvidence: cargo test ok", Ok(Outcome::Pass)),
            ("**FAIL**\nEvidence: 2 tests fail", Ok(Outcome::Fail)),
            ("FAILED: x", Err(())),
            ("Verdict: approve\nFindings: none", Ok(Outcome::Pass)),
            (
                "## Verdict: request changes\n",
                Ok(Outcome::ChangesRequested),
            ),
            ("Verdict: sound", Ok(Outcome::Pass)),
            ("Verdict: needs changes", Ok(Outcome::ChangesRequested)),
            ("**Verdict:** unsound — the plan races", Ok(Outcome::Fail)),
            ("Verdict: PASS", Ok(Outcome::Pass)),
            ("Verdict: FAIL (2 high)", Ok(Outcome::Fail)),
            (
                "Verdict: approve\n...\nVerdict: request changes",
                Ok(Outcome::ChangesRequested),
            ),
            ("looks fine to me", Err(())),
            ("", Err(())),
            ("passing thoughts", Err(())),
        ];
        for (answer, want) in table {
            assert_eq!(outcome(answer).map_err(|_| ()), want, "{answer:?}");
        }
    }

    #[test]
    fn json_block_last_counts() {
        let a = "first\n```json\n{\"verdict\": \"pass\"}\n```\nthen\n```json\n{\"verdict\": \"fail\", \
                 \"findings\": [{\"title\": \"t\", \"detail\": \"d\", \"paths\": [\"a.rs\"], \"severity\": \"high\"}, \"bare\", 3]}\n```\n";
        let v = parse(a).unwrap();
        assert_eq!(v.verdict, Outcome::Fail);
        assert_eq!(v.findings.len(), 2);
        assert_eq!(v.findings[0].paths, ["a.rs"]);
        assert_eq!(v.findings[1].title, "bare");
        assert_eq!(v.headline(), "fail, 2 findings");
        // A block wins over a short form in the text.
        let v = parse("PASS\n```json\n{\"verdict\":\"changes_requested\"}\n```").unwrap();
        assert_eq!(v.verdict, Outcome::ChangesRequested);
        // A bare object answer.
        assert_eq!(outcome("{\"verdict\": \"pass\"}"), Ok(Outcome::Pass));
    }

    #[test]
    fn malformed_blocks_are_refused() {
        assert!(parse("```json\n{\"verdict\": \"maybe\"}\n```").is_err());
        assert!(parse("```json\n{\"verdict\": \"pass\",\n```").is_err());
        assert!(parse("```json\n{\"verdict\": 3}\n```").is_err());
        // Another json block is no verdict block: the short form still counts.
        assert_eq!(outcome("PASS\n```json\n{\"a\": 1}\n```"), Ok(Outcome::Pass));
    }

    #[test]
    fn bounded() {
        let many: Vec<String> = (0..100)
            .map(|i| {
                format!(
                    "{{\"title\": \"{}\", \"detail\": \"{}\", \"paths\": [{}]}}",
                    "t".repeat(1000),
                    "d".repeat(10_000),
                    vec![format!("\"{i}\""); 100].join(",")
                )
            })
            .collect();
        let a = format!(
            "```json\n{{\"verdict\":\"fail\",\"findings\":[{}]}}\n```",
            many.join(",")
        );
        let v = parse(&a).unwrap();
        assert_eq!(v.findings.len(), MAX_FINDINGS);
        assert!(v
            .findings
            .iter()
            .all(|f| f.title.chars().count() <= MAX_TITLE_CHARS + 1
                && f.detail.chars().count() <= MAX_DETAIL_CHARS + 1
                && f.paths.len() <= MAX_PATHS));
        let v = parse(&format!("FAIL\n{}", "x".repeat(100_000))).unwrap();
        assert!(v.findings[0].detail.chars().count() <= SHORT_FORM_DETAIL_CHARS + 1);
    }

    #[test]
    fn who_judges() {
        assert!(judges("verifier", None));
        assert!(judges("critic", None));
        assert!(!judges("verifier", Some(false)));
        assert!(judges("executor", Some(true)));
        assert!(!judges("executor", None));
    }
}
