//! The message of a failed verification command (issue 32 item 5). A test suite prints its
//! passing cases first and the failure last, so the start of the kept tail is the least useful
//! part: the message leads with the command, how it ended and its last meaningful line (what a
//! one-line view shows), then the lines that say what failed, then the artifact holding the
//! whole output, and only after a blank line the tail itself, which the next attempt's prompt
//! and a fix task need.

use crate::text::MAX_REASON_CHARS;

/// Lines of the failing part given under the headline, at most.
pub const GIST_LINES: usize = 6;
/// Lines the gist has at least when the output has them, the last ones standing in for
/// missing marked lines.
const FILL_LINES: usize = 3;
/// Characters of one quoted line (the headline's detail, a gist line), at most.
const LINE_CHARS: usize = 160;
/// Characters of the command in the headline, at most.
const COMMAND_CHARS: usize = 100;
/// Characters of the raw tail after the summary, at most (the event bounds the whole message
/// to `MAX_REASON_CHARS`: the tail is fitted inside it, so its end, the failure, is kept).
const TAIL_CHARS: usize = 2000;

/// What marks a line as part of a failure in the output of common test runners and compilers
/// (cargo, pytest, jest/node, go test, make, shells). Matched case-insensitively.
const MARKERS: &[&str] = &[
    "error",
    "fail",
    "panic",
    "assert",
    "expected",
    "traceback",
    "exception",
    "not ok",
    "not found",
    "denied",
    "✗",
    "✕",
];

/// A line that only says something passed, though it names failures ("0 failed").
fn only_passing(lower: &str) -> bool {
    (lower.ends_with(" ok") || lower.contains(" 0 failed") || lower.contains("0 errors"))
        && !lower.contains("fail:")
}

/// A heading such as `failures:` or `=== FAILURES ===`: a marker with nothing else to say.
fn heading_only(lower: &str) -> bool {
    let words: String = lower.chars().filter(|c| c.is_alphanumeric()).collect();
    matches!(words.as_str(), "failures" | "failure" | "errors" | "error")
}

fn meaningful(line: &str) -> bool {
    let lower = line.to_lowercase();
    MARKERS.iter().any(|m| lower.contains(m)) && !only_passing(&lower) && !heading_only(&lower)
}

/// One line, trimmed and cut to `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    match flat.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", flat.get(..at).unwrap_or_default()),
        None => flat.to_string(),
    }
}

/// The lines of `output` that say what failed, in their order, at most [`GIST_LINES`]: the
/// last lines with a failure marker, and when fewer than that, the last non-empty lines.
pub fn failing_lines(output: &str) -> Vec<&str> {
    let lines: Vec<(usize, &str)> = output
        .lines()
        .map(str::trim_end)
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let mut picked: Vec<usize> = lines
        .iter()
        .rev()
        .filter(|(_, l)| meaningful(l))
        .take(GIST_LINES)
        .map(|(i, _)| *i)
        .collect();
    // Too few marked lines (or none: a runner that only exits non-zero): the last lines,
    // where a failure is printed, stand in.
    for (i, _) in lines.iter().rev() {
        if picked.len() >= FILL_LINES {
            break;
        }
        if !picked.contains(i) {
            picked.push(*i);
        }
    }
    picked.sort_unstable();
    lines
        .iter()
        .filter(|(i, _)| picked.contains(i))
        .map(|(_, l)| *l)
        .collect()
}

/// The message of a verification command that failed: `ended` says how ("exited with 101",
/// "timed out after 10m"), `tail` is the end of its output, `artifact` names the kept output.
pub fn failure_message(command: &str, ended: &str, tail: &str, artifact: &str) -> String {
    let gist = failing_lines(tail);
    let last = gist
        .iter()
        .rev()
        .find(|l| meaningful(l))
        .or(gist.last())
        .map(|l| one_line(l, LINE_CHARS));
    let mut out = format!(
        "verification failed: `{}` {ended}",
        one_line(command, COMMAND_CHARS)
    );
    match &last {
        Some(l) => {
            out.push_str(": ");
            out.push_str(l);
        }
        None => out.push_str(" and printed nothing"),
    }
    out.push('\n');
    for l in &gist {
        out.push_str("  ");
        out.push_str(&one_line(l, LINE_CHARS));
        out.push('\n');
    }
    out.push_str("its whole output: ");
    out.push_str(&one_line(artifact, LINE_CHARS));
    out.push('\n');
    let tail = tail.trim_end();
    if !tail.is_empty() {
        const HEADING: &str = "\nthe end of its output:\n";
        let used = out.chars().count() + HEADING.chars().count();
        let room = MAX_REASON_CHARS.saturating_sub(used).min(TAIL_CHARS);
        let count = tail.chars().count();
        out.push_str(HEADING);
        out.extend(tail.chars().skip(count.saturating_sub(room)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The part before the first blank line: what crewctl shows of a reason.
    fn summary(message: &str, max_lines: usize) -> Vec<&str> {
        message
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .take(max_lines)
            .collect()
    }

    fn cargo_output() -> String {
        let mut s = String::new();
        for i in 1..=80 {
            s.push_str(&format!("test case_{i} ... ok\n"));
        }
        s.push_str(
            "test case_81 ... FAILED\n\nfailures:\n\n---- case_81 stdout ----\n\
             thread 'case_81' panicked at src/lib.rs:12:5:\nassertion `left == right` failed\n  left: 3\n right: 4\n\n\
             failures:\n    case_81\n\ntest result: FAILED. 80 passed; 1 failed; 0 ignored\n\n\
             error: test failed, to rerun pass `--lib`\n",
        );
        s
    }

    #[test]
    fn a_cargo_failure_leads_with_what_failed_not_with_passing_tests() {
        let m = failure_message(
            "cargo test",
            "exited with 101",
            &cargo_output(),
            "verify/01_build.attempt-1.1.txt",
        );
        let first = m.lines().next().unwrap_or_default();
        assert_eq!(
            first,
            "verification failed: `cargo test` exited with 101: error: test failed, to rerun pass `--lib`"
        );
        let head = summary(&m, 20);
        assert!(
            head.iter().any(|l| l.contains("panicked at src/lib.rs:12")),
            "{head:?}"
        );
        assert!(
            head.iter().any(|l| l.contains("test result: FAILED")),
            "{head:?}"
        );
        assert!(!head.iter().any(|l| l.contains("... ok")), "{head:?}");
        assert!(head.len() <= GIST_LINES + 2, "{head:?}");
        assert_eq!(
            head.last().copied(),
            Some("its whole output: verify/01_build.attempt-1.1.txt")
        );
        // The tail follows for the next attempt, and its end (the failure) is kept.
        assert!(m.contains("\n\nthe end of its output:\n"), "{m}");
        assert!(m.trim_end().ends_with("to rerun pass `--lib`"), "{m}");
        assert!(m.chars().count() <= MAX_REASON_CHARS, "{}", m.len());
    }

    #[test]
    fn pytest_and_silent_failures() {
        let py = "collected 3 items\n\ntests/test_a.py ..F\n\n=== FAILURES ===\n\
                  E       assert 1 == 2\n\nFAILED tests/test_a.py::test_c - assert 1 == 2\n\
                  === 1 failed, 2 passed in 0.05s ===\n";
        let m = failure_message("pytest -q", "exited with 1", py, "a.txt");
        assert_eq!(
            m.lines().next(),
            Some("verification failed: `pytest -q` exited with 1: === 1 failed, 2 passed in 0.05s ===")
        );
        assert!(summary(&m, 20).contains(&"  FAILED tests/test_a.py::test_c - assert 1 == 2"));

        // No marker at all: the last lines stand in.
        let m = failure_message("./check", "exited with 3", "one\ntwo\nthree\n", "a.txt");
        assert_eq!(
            m.lines().next(),
            Some("verification failed: `./check` exited with 3: three")
        );
        let m = failure_message("./check", "exited with 3", "", "a.txt");
        assert_eq!(
            m,
            "verification failed: `./check` exited with 3 and printed nothing\nits whole output: a.txt\n"
        );
    }

    #[test]
    fn long_lines_and_commands_are_cut_and_the_whole_stays_bounded() {
        let long = "x".repeat(10_000);
        let out = format!("{long}\nerror: {long}\n{long}");
        let m = failure_message(&format!("sh -c '{long}'"), "exited with 1", &out, "a.txt");
        assert!(m.chars().count() <= MAX_REASON_CHARS);
        let first = m.lines().next().unwrap_or_default();
        assert!(first.chars().count() < 320, "{first}");
        assert!(first.contains(": error: xxx"), "{first}");
    }
}
