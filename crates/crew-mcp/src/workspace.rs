//! The workspace tools' text: a worktree run's diff (bounded) and what `team.apply` did.

use crate::render::cut;
use crew_api::types::{ApplyResult, DiffResult};
use std::fmt::Write;

/// A patch in a `team_diff` answer is cut to this many characters (head and tail kept); the
/// diffstat is always whole.
pub const DIFF_CHARS: usize = 24_000;

pub fn diff(run_id: &str, task_id: Option<&str>, r: &DiffResult) -> String {
    let what = match task_id {
        Some(t) => format!("Task {t} of run {run_id}"),
        None => format!("Run {run_id}"),
    };
    let mut out = format!(
        "{what}: branch {}, {}..{}: {} file(s) changed, +{} -{}.\n",
        r.branch,
        short(&r.from),
        short(&r.to),
        r.files,
        r.insertions,
        r.deletions
    );
    if r.patch.is_empty() {
        if r.files > 0 {
            out.push_str("(Patch left out: stat only.)\n");
        }
    } else {
        let _ = write!(
            out,
            "\n```diff\n{}\n```\n",
            cut(r.patch.trim_end(), DIFF_CHARS)
        );
        if r.truncated || r.patch.chars().count() > DIFF_CHARS {
            let _ = writeln!(
                out,
                "The patch was cut; `git diff {}..{}` in the repository shows all of it.",
                short(&r.from),
                r.branch
            );
        }
    }
    if task_id.is_none() {
        let _ = write!(
            out,
            "Bring it into your branch with team_apply (runId {run_id}), or merge {} yourself.",
            r.branch
        );
    }
    out
}

pub fn applied(run_id: &str, r: &ApplyResult) -> String {
    let into = r.branch.as_deref().map_or_else(
        || "the detached HEAD".to_string(),
        |b| format!("branch {b}"),
    );
    if r.how == "up_to_date" {
        return format!(
            "Run {run_id}: {into} already has its change (HEAD {}).",
            short(&r.head)
        );
    }
    let into = if r.checkout.is_empty() {
        into
    } else {
        format!("{into} of {}", r.checkout)
    };
    let mut text = format!(
        "Applied run {run_id} into {into} ({}): {} file(s), +{} -{}; HEAD is now {}.",
        r.how.replace('_', "-"),
        r.files,
        r.insertions,
        r.deletions,
        short(&r.head)
    );
    for n in &r.notes {
        text.push_str("\nNote: ");
        text.push_str(n);
    }
    text
}

/// A commit id as people read it.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff_result(patch: &str, truncated: bool) -> DiffResult {
        DiffResult {
            branch: "crew/r1".into(),
            from: "a".repeat(40),
            to: "b".repeat(40),
            files: 1,
            insertions: 2,
            deletions: 0,
            patch: patch.into(),
            truncated,
        }
    }

    #[test]
    fn diff_text_is_bounded_and_says_what_next() {
        let small = diff("r1", None, &diff_result("+++ b/x\n+hello\n", false));
        assert!(
            small.contains("branch crew/r1, aaaaaaaaaaaa..bbbbbbbbbbbb: 1 file(s) changed, +2 -0")
        );
        assert!(small.contains("```diff\n+++ b/x\n+hello\n```") && small.contains("team_apply"));
        let big = diff(
            "r1",
            Some("01_a"),
            &diff_result(&"+x\n".repeat(50_000), true),
        );
        assert!(big.chars().count() < DIFF_CHARS + 1_000, "{}", big.len());
        assert!(big.contains("was cut") && !big.contains("team_apply"));
        assert!(diff("r1", None, &diff_result("", false)).contains("stat only"));
    }

    #[test]
    fn apply_text() {
        let r = ApplyResult {
            branch: Some("main".into()),
            head: "c".repeat(40),
            how: "fast_forward".into(),
            files: 1,
            insertions: 2,
            deletions: 3,
            checkout: "/src/app".into(),
            notes: Vec::new(),
        };
        assert_eq!(
            applied("r1", &r),
            "Applied run r1 into branch main of /src/app (fast-forward): 1 file(s), +2 -3; HEAD is now cccccccccccc."
        );
        let r = ApplyResult {
            how: "up_to_date".into(),
            branch: None,
            ..r
        };
        assert!(applied("r1", &r).contains("detached HEAD already has"));
    }
}
