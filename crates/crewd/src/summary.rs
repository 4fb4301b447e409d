//! `team.summary`: a markdown report of a run: per-task status, durations, usage and cost,
//! failures with their reasons, open questions, and result excerpts.

use crew_api::types::{StatusResult, TaskStatus};
use std::fmt::Write;
use std::path::Path;

/// Characters of each result shown (head and tail kept).
const EXCERPT_CHARS: usize = 600;
/// Characters of a failure reason shown (stderr tails can be long).
const REASON_CHARS: usize = 400;

fn mark(s: TaskStatus) -> &'static str {
    match s {
        TaskStatus::Completed => "✓",
        TaskStatus::Failed => "✗",
        TaskStatus::Cancelled | TaskStatus::Skipped => "⊘",
        TaskStatus::NeedsAttention | TaskStatus::Waiting => "!",
        TaskStatus::Queued | TaskStatus::Running => "…",
    }
}

fn dur(ms: Option<u64>) -> String {
    match ms {
        None => "–".into(),
        Some(ms) if ms < 1000 => format!("{ms} ms"),
        Some(ms) if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        Some(ms) => format!("{}m {:02}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// One line, bounded: reasons go in list items and table cells.
fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    crew_core::prompt::cut_head_tail(&flat, max)
}

pub fn markdown(s: &StatusResult, run_dir: &Path) -> String {
    let mut out = String::new();
    header(&mut out, s);
    verdicts(&mut out, s);
    task_table(&mut out, s);
    failures(&mut out, s);
    waiting(&mut out, s);
    results(&mut out, s, run_dir);
    out
}

/// The run's id, status, goal, team, duration, usage, budget.
fn header(out: &mut String, s: &StatusResult) {
    let r = &s.run;
    let _ = writeln!(out, "# Run {}\n", r.id);
    let _ = writeln!(
        out,
        "- **Status**: {}{}",
        r.status.as_str(),
        r.reason
            .as_ref()
            .map(|x| format!(" ({})", one_line(x, REASON_CHARS)))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "- **Goal**: {}", r.goal.lines().next().unwrap_or(""));
    let _ = writeln!(
        out,
        "- **Team / workflow**: {} / {} on runtime `{}`",
        r.team, r.workflow, r.runtime
    );
    let _ = writeln!(out, "- **Duration**: {}", dur(r.duration_ms));
    let u = &r.usage;
    let _ = writeln!(
        out,
        "- **Usage**: {} input, {} output, {} cache read, {} cache write tokens; ${:.4}; {} turns",
        u.input, u.output, u.cache_read, u.cache_write, u.cost, u.turns
    );
    if let Some(b) = &r.budget {
        let _ = writeln!(out, "- **Budget**: {} of {} tokens", b.used, b.tokens);
    }
}

/// The run's verdict and each judge's, with its findings' titles.
fn verdicts(out: &mut String, s: &StatusResult) {
    let Some(v) = &s.run.verdict else {
        return;
    };
    let _ = writeln!(out, "- **Verdict**: {v}");
    for t in &s.tasks {
        let Some(tv) = &t.verdict else { continue };
        let titles: Vec<String> = tv
            .findings
            .iter()
            .map(|f| one_line(&f.title, 120))
            .collect();
        let _ = writeln!(
            out,
            "  - {}: {}{}",
            t.id,
            tv.verdict,
            if titles.is_empty() {
                String::new()
            } else {
                format!(" — {}", titles.join("; "))
            }
        );
    }
}

fn task_table(out: &mut String, s: &StatusResult) {
    let _ = writeln!(
        out,
        "\n| task | role | status | attempts | duration | tokens in / out | cost |\n|---|---|---|---|---|---|---|"
    );
    for t in &s.tasks {
        let _ = writeln!(
            out,
            "| {} | {} | {} {} | {} | {} | {} / {} | ${:.4} |",
            t.id,
            t.role,
            mark(t.status),
            t.status.as_str(),
            t.attempts,
            dur(t.duration_ms),
            t.usage.input,
            t.usage.output,
            t.usage.cost
        );
    }
}

/// Tasks that did not complete and say why.
fn failures(out: &mut String, s: &StatusResult) {
    let failed: Vec<_> = s
        .tasks
        .iter()
        .filter(|t| t.error.is_some() && t.status != TaskStatus::Completed)
        .collect();
    if failed.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n## Failures\n");
    for t in failed {
        let _ = writeln!(
            out,
            "- **{}** ({}): {}",
            t.id,
            t.status.as_str(),
            one_line(t.error.as_deref().unwrap_or_default(), REASON_CHARS)
        );
    }
}

/// Open questions, with how to answer them.
fn waiting(out: &mut String, s: &StatusResult) {
    let asking: Vec<_> = s
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Waiting)
        .collect();
    if asking.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n## Waiting for an answer\n");
    for t in asking {
        let _ = writeln!(
            out,
            "- **{}** asks: {} (answer with `team.respond`)",
            t.id,
            one_line(t.question.as_deref().unwrap_or_default(), REASON_CHARS)
        );
    }
}

/// An excerpt of each task's result file (head and tail kept).
fn results(out: &mut String, s: &StatusResult, run_dir: &Path) {
    let mut results = String::new();
    for t in &s.tasks {
        let text = std::fs::read_to_string(run_dir.join("results").join(format!("{}.txt", t.id)))
            .unwrap_or_default();
        if text.trim().is_empty() {
            continue;
        }
        let excerpt = crew_core::prompt::cut_head_tail(text.trim(), EXCERPT_CHARS);
        let _ = writeln!(results, "### {} ({})\n\n{}\n", t.id, t.role, excerpt);
    }
    if !results.is_empty() {
        let _ = writeln!(out, "\n## Results\n");
        out.push_str(&results);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(id: &str, status: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut t = json!({
            "id": id, "stepId": id, "role": "explorer", "agent": "explorer", "dependsOn": [],
            "status": status, "attempts": 1, "durationMs": 1500,
            "usage": {"input": 800, "output": 200, "cacheRead": 0, "cacheWrite": 0,
                      "cost": 0.0125, "turns": 1},
            "progress": {"turns": 1, "tokens": 1000}, "artifacts": []
        });
        for (k, v) in extra.as_object().unwrap() {
            t[k] = v.clone();
        }
        t
    }

    #[test]
    fn summary_has_every_part() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("results")).unwrap();
        std::fs::write(dir.path().join("results/01_a.txt"), "Found the parser.\n").unwrap();
        let status: StatusResult = serde_json::from_value(json!({
            "run": {
                "id": "team_x", "status": "blocked", "goal": "fix it\nmore", "cwd": "/w",
                "team": "t", "workflow": "w", "runtime": "fake", "concurrency": 2,
                "failurePolicy": "continue", "approval": "not_required", "reuseResults": "off",
                "createdAt": "2025-01-01T00:00:00Z", "updatedAt": "2025-01-01T00:00:00Z",
                "durationMs": 61000,
                "budget": {"tokens": 9000, "warnAt": 0.8, "abortAt": 1.0, "used": 2000},
                "usage": {"input": 1600, "output": 400, "cacheRead": 0, "cacheWrite": 0,
                          "cost": 0.025, "turns": 2},
                "reason": "task 03_c is waiting for an answer: Which DB?"
            },
            "tasks": [
                task("01_a", "completed", json!({})),
                task("02_b", "failed", json!({"attempts": 3, "error": "exit 1:\nboom\n  trace"})),
                task("03_c", "waiting", json!({"question": "Which DB?"})),
            ]
        }))
        .unwrap();
        let md = markdown(&status, dir.path());
        let table = [
            "# Run team_x",
            "- **Status**: blocked (task 03_c is waiting for an answer: Which DB?)",
            "- **Goal**: fix it\n",
            "- **Duration**: 1m 01s",
            "$0.0250; 2 turns",
            "- **Budget**: 2000 of 9000 tokens",
            "| 01_a | explorer | ✓ completed | 1 | 1.5 s | 800 / 200 | $0.0125 |",
            "| 02_b | explorer | ✗ failed | 3 |",
            "- **02_b** (failed): exit 1: boom trace",
            "- **03_c** asks: Which DB?",
            "### 01_a (explorer)\n\nFound the parser.",
        ];
        for want in table {
            assert!(md.contains(want), "lacks {want:?}:\n{md}");
        }
        assert!(!md.contains("### 02_b"), "{md}");
    }
}
