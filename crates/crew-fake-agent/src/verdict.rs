//! A judge's verdict and a fix task's edits (crew issue 30). crew's prompt tells a judge to end
//! with a verdict under [`HEADING`]; the fake answers `pass` unless `[fake:verdict=…]` says
//! otherwise, in the JSON block or any short form the builtin prompts asked for:
//! `pass`, `fail`, `changes_requested` (JSON block); `PASS`, `FAIL` (leading word);
//! `approve`, `request-changes`, `sound`, `needs-changes`, `unsound` (a `Verdict:` line);
//! `missing` (none), `malformed` (an invalid block). `[fake:verdict-repair=…]` is the answer
//! on the repair attempt; `[fake:verdict-needs=path]` fails naming `path` while it is not in
//! the working directory, then passes (or answers as `verdict=` says, when given). `[fake:fix-write=path:text]` is an edit
//! made only by a fix task crew added; `[fake:resolve-write=path:text]` only by a resolve
//! task (which makes no other edit).

/// crew's verdict prompt section (`crew_core::verdict::PROMPT_HEADING`).
pub const HEADING: &str = "## Output: your verdict";
/// crew's repair section (`crew_core::verdict::REPAIR_HEADING`).
pub const REPAIR_HEADING: &str = "## Your previous verdict could not be read";
/// The end of a fix task's text (`crew_core::run` fix tasks).
pub const FIX_MARK: &str = "judges the result again after you";

/// In a resolve task's text (`crew_core::run::resolve`).
pub const RESOLVE_MARK: &str = "remove every conflict marker";

/// Where the verdict goes in the final text.
pub enum Placed {
    /// Before everything else (the verifier's leading `PASS`/`FAIL`).
    First(String),
    Last(String),
    None,
}

/// The verdict a judge answers, if `prompt` (its visible text) asks for one.
pub fn answer(
    visible: &str,
    verdict: Option<&str>,
    repair: Option<&str>,
    needs: Option<&str>,
    finding: Option<&str>,
) -> Placed {
    if !visible.contains(HEADING) {
        return Placed::None;
    }
    let repairing = visible.contains(REPAIR_HEADING);
    let (form, missing_path) = match (repair.filter(|_| repairing), needs) {
        (Some(r), _) => (r.to_string(), None),
        (None, Some(path)) if std::path::Path::new(path).exists() => {
            (verdict.unwrap_or("pass").to_string(), None)
        }
        (None, Some(path)) => ("fail".to_string(), Some(path)),
        (None, None) => (verdict.unwrap_or("pass").to_string(), None),
    };
    let title = match (finding, missing_path) {
        (Some(t), _) => t.to_string(),
        (None, Some(p)) => format!("{p} is missing"),
        (None, None) => "the fake judge found a problem".to_string(),
    };
    let paths: Vec<&str> = missing_path.into_iter().collect();
    let block = |v: &str| {
        let findings = if v == "pass" {
            serde_json::json!([])
        } else {
            serde_json::json!([{"title": title, "detail": "as the directive said", "paths": paths, "severity": "high"}])
        };
        format!(
            "```json\n{}\n```",
            serde_json::json!({"verdict": v, "findings": findings})
        )
    };
    match form.as_str() {
        "pass" | "fail" | "changes_requested" => Placed::Last(block(&form)),
        "PASS" | "FAIL" => Placed::First(format!("{form}\nEvidence: the fake judge looked.")),
        "approve" | "request-changes" | "sound" | "needs-changes" | "unsound" => {
            Placed::Last(format!("Verdict: {}", form.replace('-', " ")))
        }
        "malformed" => Placed::Last("```json\n{\"verdict\": \"maybe\"\n```".into()),
        _ => Placed::None,
    }
}

/// A resolve task's prompt.
pub fn is_resolve(visible: &str) -> bool {
    visible.contains(RESOLVE_MARK)
}

/// A fix task's prompt.
pub fn is_fix(visible: &str) -> bool {
    visible.contains(FIX_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_are_crews() {
        assert_eq!(HEADING, crew_core::verdict::PROMPT_HEADING);
        assert_eq!(REPAIR_HEADING, crew_core::verdict::REPAIR_HEADING);
    }

    #[test]
    fn every_form_reads_back_as_crew_reads_it() {
        use crew_core::verdict::{parse, Outcome};
        let ask = format!("task\n{HEADING}\n");
        let table = [
            ("pass", Outcome::Pass),
            ("fail", Outcome::Fail),
            ("changes_requested", Outcome::ChangesRequested),
            ("PASS", Outcome::Pass),
            ("FAIL", Outcome::Fail),
            ("approve", Outcome::Pass),
            ("request-changes", Outcome::ChangesRequested),
            ("sound", Outcome::Pass),
            ("needs-changes", Outcome::ChangesRequested),
            ("unsound", Outcome::Fail),
        ];
        for (form, want) in table {
            let text = match answer(&ask, Some(form), None, None, None) {
                Placed::First(t) => format!("{t}\nfake-agent: done"),
                Placed::Last(t) => format!("fake-agent: done\n{t}"),
                Placed::None => panic!("{form}"),
            };
            assert_eq!(parse(&text).map(|v| v.verdict), Ok(want), "{form}");
        }
        for form in ["missing", "malformed"] {
            let text = match answer(&ask, Some(form), None, None, None) {
                Placed::Last(t) => format!("fake-agent: done\n{t}"),
                _ => "fake-agent: done".into(),
            };
            assert!(parse(&text).is_err(), "{form}");
        }
        assert!(matches!(
            answer("no heading", None, None, None, None),
            Placed::None
        ));
    }
}
