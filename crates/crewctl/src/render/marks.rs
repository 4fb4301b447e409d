//! One mark and tone per status, used by tables, progress lines and event lines alike.

use crate::style::Tone;
use crew_api::types::{RunStatus, TaskStatus};

pub fn task(s: TaskStatus) -> (&'static str, Tone) {
    match s {
        TaskStatus::Queued => ("○", Tone::Dim),
        TaskStatus::Running => ("●", Tone::Active),
        TaskStatus::Waiting => ("?", Tone::Warn),
        TaskStatus::Completed => ("✓", Tone::Ok),
        TaskStatus::Failed => ("✗", Tone::Bad),
        TaskStatus::Cancelled => ("⊘", Tone::Warn),
        TaskStatus::Skipped => ("⊘", Tone::Dim),
        TaskStatus::NeedsAttention => ("!", Tone::Warn),
    }
}

/// A task's mark, where a completed task whose own judgement went against the work — a
/// judge's failing verdict, a candidate ruled out by its checks — is not shown as a success.
pub fn task_judged(s: TaskStatus, against: bool) -> (&'static str, Tone) {
    if s == TaskStatus::Completed && against {
        ("✗", Tone::Warn)
    } else {
        task(s)
    }
}

pub fn run(s: RunStatus) -> (&'static str, Tone) {
    match s {
        RunStatus::Queued => ("○", Tone::Dim),
        RunStatus::Running => ("●", Tone::Active),
        RunStatus::Blocked => ("‖", Tone::Warn),
        RunStatus::Completed => ("✓", Tone::Ok),
        RunStatus::Failed => ("✗", Tone::Bad),
        RunStatus::Cancelled => ("⊘", Tone::Warn),
    }
}

/// Task status as a word for humans (`needs attention` rather than `needs_attention`).
pub fn task_word(s: TaskStatus) -> &'static str {
    match s {
        TaskStatus::NeedsAttention => "needs attention",
        other => other.as_str(),
    }
}
