//! What the tools say, as text for a model: short, bounded whatever the run's size, and ending
//! with the next step where there is one (answer, approve, resume, wait again).

use crew_api::types::{RunStarted, RunStatus, RunView, StatusResult, TaskStatus, TaskView};
use std::fmt::Write;

/// `team.summary`'s markdown is cut to this many characters (head and tail kept).
pub const SUMMARY_CHARS: usize = 12_000;
/// Each final task's result (a task nothing depends on: the run's deliverable).
pub const FINAL_RESULT_CHARS: usize = 8_000;
/// All final results together; the rest are named, not shown.
pub const FINAL_TOTAL_CHARS: usize = 16_000;
/// One task's result asked for by `taskId`.
pub const TASK_RESULT_CHARS: usize = 32_000;
/// Task lines in a status; the rest are counted by status.
pub const MAX_TASK_LINES: usize = 100;
/// A goal, question or error inside a line.
const LINE_CHARS: usize = 300;

/// `s` cut to at most `max` characters, keeping its head and tail around a marker.
pub fn cut(s: &str, max: usize) -> String {
    let total = s.chars().count();
    if total <= max {
        return s.to_string();
    }
    let marker = format!("\n[… {} characters cut …]\n", total.saturating_sub(max));
    let keep = max.saturating_sub(marker.chars().count());
    let head_n = keep / 2;
    let tail_n = keep.saturating_sub(head_n);
    let head: String = s.chars().take(head_n).collect();
    let tail: String = s.chars().skip(total.saturating_sub(tail_n)).collect();
    format!("{head}{marker}{tail}")
}

/// A text of `bytes` bytes known only by its `head` and `tail` (its middle never read), cut
/// to at most about `max` characters around a marker that says how many bytes are left out.
pub fn cut_ends(head: &str, tail: &str, bytes: u64, max: usize) -> String {
    let marker = |n: u64| format!("\n[… {n} bytes cut …]\n");
    let keep = max.saturating_sub(marker(bytes).chars().count());
    let head: String = head.chars().take(keep / 2).collect();
    let tail_n = keep.saturating_sub(head.chars().count());
    let tail_total = tail.chars().count();
    let tail: String = tail
        .chars()
        .skip(tail_total.saturating_sub(tail_n))
        .collect();
    let shown = (head.len().saturating_add(tail.len())) as u64;
    format!("{head}{}{tail}", marker(bytes.saturating_sub(shown)))
}

/// One line, bounded.
fn flat(s: &str, max: usize) -> String {
    cut(&s.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

pub fn started(r: &RunStarted) -> String {
    let mut out = format!(
        "Run {} started ({}), {} task(s):\n",
        r.run_id,
        r.status.as_str(),
        r.tasks.len()
    );
    for t in r.tasks.iter().take(MAX_TASK_LINES) {
        let _ = write!(out, "- {} [{}]", t.id, t.role);
        if !t.depends_on.is_empty() {
            let _ = write!(out, " after {}", t.depends_on.join(", "));
        }
        out.push('\n');
    }
    if r.tasks.len() > MAX_TASK_LINES {
        let _ = writeln!(out, "- … {} more", r.tasks.len() - MAX_TASK_LINES);
    }
    for n in &r.notes {
        let _ = writeln!(out, "Note: {n}");
    }
    let _ = write!(
        out,
        "Wait for it with team_wait {{\"runId\": \"{}\"}}; read its result with team_result.",
        r.run_id
    );
    out
}

fn task_line(out: &mut String, t: &TaskView) {
    let _ = write!(out, "- {} [{}] {}", t.id, t.role, t.status.as_str());
    if t.attempts > 1 {
        let _ = write!(out, " (attempt {})", t.attempts);
    }
    if let Some(tool) = t
        .progress
        .current_tool
        .as_deref()
        .filter(|_| t.status == TaskStatus::Running)
    {
        let _ = write!(out, ", running {tool}");
    }
    if let Some(q) = t
        .question
        .as_deref()
        .filter(|_| t.status == TaskStatus::Waiting)
    {
        let _ = write!(out, ": asks {}", flat(q, LINE_CHARS));
    } else if let Some(e) = t
        .error
        .as_deref()
        .filter(|_| t.status != TaskStatus::Completed)
    {
        let _ = write!(out, ": {}", flat(e, LINE_CHARS));
    }
    out.push('\n');
}

fn run_header(out: &mut String, r: &RunView) {
    let _ = write!(out, "Run {}: {}", r.id, r.status.as_str());
    if let Some(reason) = &r.reason {
        let _ = write!(out, " ({})", flat(reason, LINE_CHARS));
    }
    let _ = writeln!(
        out,
        "\nTeam {} / workflow {} on runtime {}; goal: {}",
        r.team,
        r.workflow,
        r.runtime,
        flat(&r.goal, LINE_CHARS)
    );
    let u = &r.usage;
    let _ = write!(
        out,
        "Usage: {} input, {} output tokens; ${:.4}",
        u.input, u.output, u.cost
    );
    if let Some(b) = &r.budget {
        let _ = write!(out, "; budget {} of {} tokens", b.used, b.tokens);
    }
    out.push('\n');
}

pub fn status(s: &StatusResult) -> String {
    let mut out = String::new();
    run_header(&mut out, &s.run);
    let _ = writeln!(out, "Tasks ({}):", s.tasks.len());
    for t in s.tasks.iter().take(MAX_TASK_LINES) {
        task_line(&mut out, t);
    }
    if s.tasks.len() > MAX_TASK_LINES {
        let mut rest: std::collections::BTreeMap<&str, usize> = Default::default();
        for t in &s.tasks[MAX_TASK_LINES..] {
            *rest.entry(t.status.as_str()).or_default() += 1;
        }
        let counts: Vec<String> = rest.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(out, "- … and {}", counts.join(", "));
    }
    out.push_str(&next_step(s));
    out
}

/// What the caller can do next with a run in this state.
pub fn next_step(s: &StatusResult) -> String {
    let id = &s.run.id;
    let waiting: Vec<&TaskView> = s
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Waiting)
        .collect();
    if let Some(t) = waiting.first() {
        return format!(
            "Task {} is waiting for an answer: reply with team_respond {{\"runId\": \"{id}\", \"taskId\": \"{}\", \"message\": …}}.",
            t.id, t.id
        );
    }
    match s.run.status {
        RunStatus::Blocked if s.run.approval == "pending" => format!(
            "The run waits for plan approval: team_approve or team_reject {{\"runId\": \"{id}\"}}."
        ),
        // A run its budget stopped goes on only with a larger one.
        RunStatus::Failed if s.run.reason.as_deref() == Some("budget_exceeded") => format!(
            "Its token budget is spent: continue it with team_resume {{\"runId\": \"{id}\", \"budgetTokens\": N}}, N more than it used{}.",
            s.run
                .budget
                .as_ref()
                .map(|b| format!(" ({} tokens)", b.used))
                .unwrap_or_default()
        ),
        RunStatus::Blocked | RunStatus::Failed | RunStatus::Cancelled => format!(
            "Continue it with team_resume {{\"runId\": \"{id}\"}} (re-queues failed, cancelled, skipped and needs-attention tasks)."
        ),
        RunStatus::Queued | RunStatus::Running => {
            format!("Still going: team_wait {{\"runId\": \"{id}\"}} waits for it.")
        }
        RunStatus::Completed => String::new(),
    }
}

/// The tasks nothing depends on: what the run delivers.
pub fn final_tasks(s: &StatusResult) -> Vec<&TaskView> {
    let needed: std::collections::HashSet<&str> = s
        .tasks
        .iter()
        .flat_map(|t| t.depends_on.iter().map(String::as_str))
        .collect();
    s.tasks
        .iter()
        .filter(|t| !needed.contains(t.id.as_str()))
        .collect()
}

pub fn result_name(t: &TaskView) -> Option<&str> {
    t.artifacts
        .iter()
        .find(|a| a.kind == "result")
        .map(|a| a.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed_run(reason: &str) -> StatusResult {
        let usage = serde_json::json!({"input": 3100, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1});
        serde_json::from_value(serde_json::json!({
            "run": {
                "id": "r-1", "status": "failed", "goal": "g", "cwd": "/w",
                "team": "default", "workflow": "default", "runtime": "fake", "model": null,
                "concurrency": 4, "failurePolicy": "fail-fast",
                "budget": {"tokens": 3000, "warnAt": 0.8, "abortAt": 1.0, "used": 3100},
                "approval": "not_required", "reuseResults": "off", "scheduleId": null,
                "createdAt": "2026-03-10T11:55:00Z", "startedAt": "2026-03-10T11:55:00Z",
                "finishedAt": "2026-03-10T11:55:09Z", "updatedAt": "2026-03-10T11:55:09Z",
                "durationMs": 9000, "usage": usage, "reason": reason,
            },
            "tasks": [],
        }))
        .expect("a status")
    }

    #[test]
    fn a_run_its_budget_stopped_is_told_to_resume_with_more() {
        let hint = next_step(&failed_run("budget_exceeded"));
        assert!(
            hint.contains("\"budgetTokens\": N") && hint.contains("3100 tokens"),
            "{hint}"
        );
        let hint = next_step(&failed_run("task 01_a failed"));
        assert!(
            hint.contains("team_resume") && !hint.contains("budgetTokens"),
            "{hint}"
        );
    }

    #[test]
    fn cut_keeps_head_and_tail_within_the_bound() {
        assert_eq!(cut("short", 10), "short");
        let long: String = "é".repeat(500) + &"z".repeat(500);
        let c = cut(&long, 200);
        assert!(c.chars().count() <= 200, "{}", c.chars().count());
        assert!(c.starts_with('é') && c.ends_with('z') && c.contains("characters cut"));
    }
}
