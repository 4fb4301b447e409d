//! `team.summary`: a markdown report of a run.

use crew_api::types::{StatusResult, TaskStatus};
use std::fmt::Write;
use std::path::Path;

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

pub fn markdown(s: &StatusResult, run_dir: &Path) -> String {
    let r = &s.run;
    let mut out = String::new();
    let _ = writeln!(out, "# Run {}\n", r.id);
    let _ = writeln!(
        out,
        "- **Status**: {}{}",
        r.status.as_str(),
        r.reason
            .as_ref()
            .map(|x| format!(" ({x})"))
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
        "- **Usage**: {} input, {} output, {} cache read, {} cache write tokens; ${:.4}; {} turns\n",
        u.input, u.output, u.cache_read, u.cache_write, u.cost, u.turns
    );
    let _ = writeln!(out, "| task | role | status | attempts | duration | tokens | cost |\n|---|---|---|---|---|---|---|");
    for t in &s.tasks {
        let _ = writeln!(
            out,
            "| {} | {} | {} {} | {} | {} | {} | ${:.4} |",
            t.id,
            t.role,
            mark(t.status),
            t.status.as_str(),
            t.attempts,
            dur(t.duration_ms),
            t.usage.input + t.usage.output,
            t.usage.cost
        );
    }
    let failures: Vec<_> = s
        .tasks
        .iter()
        .filter(|t| t.error.is_some() && t.status != TaskStatus::Completed)
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "\n## Failures\n");
        for t in failures {
            let _ = writeln!(
                out,
                "- **{}** ({}): {}",
                t.id,
                t.status.as_str(),
                t.error.clone().unwrap_or_default()
            );
        }
    }
    let _ = writeln!(out, "\n## Results\n");
    for t in &s.tasks {
        let text = std::fs::read_to_string(run_dir.join("results").join(format!("{}.txt", t.id)))
            .unwrap_or_default();
        if text.is_empty() {
            continue;
        }
        let excerpt = crew_core::prompt::cut_head_tail(text.trim(), 600);
        let _ = writeln!(out, "### {} ({})\n\n{}\n", t.id, t.role, excerpt);
    }
    out
}
