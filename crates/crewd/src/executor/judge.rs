//! A judging task's side of an attempt (issue 30): the verdict section of its prompt (what it
//! judges, the block to end with, why its last answer was refused), and which final answers
//! the actor needs to read (a fan-out step's block, a judge's verdict).

use crate::attempt::AttemptSpec;
use crew_core::plan::PlannedTask;

/// The verdict section of a judge's prompt; `None` for any other task.
pub fn prompt_section(spec: &AttemptSpec) -> Option<String> {
    if !spec.plan.judging.judge {
        return None;
    }
    // A judging selector chooses among candidates (issue 36).
    if let Some(section) = crate::candidates::prompt_section(spec) {
        return Some(section);
    }
    let range = spec.judge_base.as_deref().map(|b| (b, "HEAD"));
    Some(crew_core::verdict::prompt_section(
        range,
        spec.verdict_repair.as_deref(),
    ))
}

/// At most how many bytes of the task's final answer the actor is handed: a fan-out step's
/// block or a judge's verdict are read there; `None`: the answer is not needed.
pub fn answer_limit(plan: &PlannedTask) -> Option<u64> {
    match (&plan.expands, plan.judging.judge) {
        (Some(exp), _) => Some(exp.max_answer_bytes),
        (None, true) => Some(crew_core::verdict::MAX_ANSWER_BYTES),
        (None, false) => None,
    }
}
