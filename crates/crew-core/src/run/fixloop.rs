//! The fix loop in the run state machine (issue 30): a judge's attempt ends with a verdict;
//! a failing one (or a failed integration check on a task that cannot edit) adds a fix task
//! that starts from what was judged, and the judge runs again after it. Like fan-out, the
//! addition is one journaled event (`task.fix_added`), so a replay adds the task exactly once.

use super::decide::{AttemptResult, RetryPolicy};
use super::event::{AttemptEnd, EventBody, Pending};
use super::types::{RunState, TaskState, TaskStatus};
use super::State;
use crate::fanout::Answer;
use crate::ids::{ArtifactName, SafeId};
use crate::plan::PlannedTask;
use crate::verdict::{self, FixPlan, Verdict};
use chrono::{DateTime, Utc};
use std::sync::Arc;

/// The id of the `n`th task crew adds to fix what the judge `of` found: `_fix-<of>-<n>`, in
/// crew's reserved id scheme (`ids::reserved`), which no workflow, fan-out or bundle id meets.
pub fn fix_task_id(of: &str, n: usize) -> String {
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    crate::ids::reserved::task_id(crate::ids::reserved::TaskKind::Fix, of, n)
        .as_str()
        .to_string()
}

impl State {
    /// A task's attempt ended and it is no fan-out step. A judge's verdict is read from
    /// `answer`; a failed integration check on a task that cannot edit starts the fix loop;
    /// anything else ends the ordinary way.
    #[allow(clippy::too_many_arguments)]
    pub fn finish_judged(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
        result: AttemptResult,
        answer: Option<&Answer>,
        now: DateTime<Utc>,
        retry: &RetryPolicy,
        jitter: f64,
    ) -> Vec<Pending> {
        let Some((run, t)) = self.running_attempt(run_id, task_id, attempt) else {
            return vec![];
        };
        let ordinary =
            |result| self.finish_attempt(run_id, task_id, attempt, result, now, retry, jitter);
        let ended = |usage, model, artifacts| AttemptEnd {
            attempt,
            usage,
            model,
            artifacts,
            error: None,
        };
        // A judging selector (issue 36) answers a choice, not a fix loop.
        if super::candidates::selector(&t.plan).is_some() {
            return match result {
                AttemptResult::Completed {
                    usage,
                    model,
                    artifacts,
                    ..
                } => {
                    let end = ended(usage, model, artifacts);
                    let text = match answer {
                        Some(Answer::Text(s)) => Ok(s.as_str()),
                        None => Ok(""),
                        Some(Answer::TooLarge { bytes }) => Err(format!(
                            "the final answer is {bytes} bytes, more than a judge's answer may be"
                        )),
                        Some(Answer::Unreadable(e)) => {
                            Err(format!("the final answer could not be read: {e}"))
                        }
                    };
                    match text.and_then(|s| super::candidates::judged(run, t, end.clone(), s)) {
                        Ok(chosen) => vec![chosen],
                        Err(problem) => unreadable(run_id, t, end, problem, now),
                    }
                }
                other => ordinary(other),
            };
        }
        match result {
            // The integration checks failed where nobody can fix them: the loop, not a retry
            // of the task (a verifier "does not fix problems").
            AttemptResult::Failed {
                usage,
                model,
                artifacts,
                error,
                reason,
                ..
            } if reason == crate::checks::VERIFY_FAILED
                && t.plan.judging.fix.is_some()
                && !verdict::can_edit(&t.plan.tools) =>
            {
                let end = ended(usage, model, artifacts);
                let v = Verdict::from_failed_check(&error);
                judged(run, t, end, None, None, vec![], v)
            }
            AttemptResult::Completed {
                usage,
                model,
                artifacts,
                reused_from,
                commit,
                verification,
            } if t.plan.judging.judge => {
                let end = ended(usage, model, artifacts);
                let parsed = match answer {
                    Some(Answer::Text(s)) => verdict::parse(s),
                    None => verdict::parse(""),
                    Some(Answer::TooLarge { bytes }) => Err(format!(
                        "the final answer is {bytes} bytes, more than a judge's answer may be ({}); \
                         answer briefly and end with the ```json verdict block",
                        verdict::MAX_ANSWER_BYTES
                    )),
                    Some(Answer::Unreadable(e)) => {
                        Err(format!("the final answer could not be read: {e}"))
                    }
                };
                match parsed {
                    Ok(v) => judged(run, t, end, reused_from, commit, verification, v),
                    Err(problem) => unreadable(run_id, t, end, problem, now),
                }
            }
            // A task judged by its integration checks alone (it cannot edit, does not judge):
            // they failed before, which was its verdict and started a fix round; they pass now.
            AttemptResult::Completed {
                usage,
                model,
                artifacts,
                reused_from,
                commit,
                verification,
            } if t.verdict().is_some_and(|v| !v.passed()) => {
                let end = ended(usage, model, artifacts);
                let v = Verdict::passed_checks();
                judged(run, t, end, reused_from, commit, verification, v)
            }
            other => ordinary(other),
        }
    }

    /// `team.resume` of a run blocked by a judge whose fix rounds were spent: one more round,
    /// for every such judge (the fix task is added and the judge waits for it). The events,
    /// and what runs again: each fix task, then its judge.
    pub(super) fn granted_rounds(&self, run: &RunState) -> (Vec<Pending>, Vec<String>) {
        let mut out = Vec::new();
        let mut judges = Vec::new();
        let mut added = 0usize;
        for t in &run.tasks {
            let (Some(v), Some(fix)) = (t.verdict(), &t.plan.judging.fix) else {
                continue;
            };
            // Only a judge blocked because its rounds were spent (that end's reason says so)
            // gets one: one that needs attention for another reason (no readable verdict) runs
            // again, since its last verdict may be from before a fix.
            let spent = t.error.as_deref().is_some_and(is_spent_reason);
            if t.status != TaskStatus::NeedsAttention || v.passed() || !spent {
                continue;
            }
            let headline = v.headline();
            let (event, fix_id) = fix_added(run, t, fix, v.clone(), added);
            // Said as a round the loop adds is: its line names the judge, the verdict and
            // the fix task that runs.
            out.push(event.with_message(format!(
                "{}: {headline} → {fix_id} (a round granted by resume)",
                t.plan.id
            )));
            judges.push(fix_id);
            judges.push(t.plan.id.to_string());
            added += 1;
        }
        (out, judges)
    }
}

/// The judge's attempt ended with verdict `v`: completed when it passed or nobody can fix (its
/// verdict is the product); else completed and a fix task added, or, with its rounds spent,
/// needs attention with the findings.
fn judged(
    run: &RunState,
    t: &TaskState,
    end: AttemptEnd,
    reused_from: Option<super::event::ReusedFrom>,
    commit: Option<super::workspace::TaskCommit>,
    verification: Vec<crate::checks::VerifyOutcome>,
    v: Verdict,
) -> Vec<Pending> {
    let id = t.plan.id.as_str();
    let headline = v.headline();
    let completed = |v: Verdict| {
        Pending::task(
            &run.id,
            id,
            EventBody::TaskCompleted {
                end: end.clone(),
                reused_from: reused_from.clone(),
                commit: commit.clone(),
                verification: verification.clone(),
                verdict: Some(v),
            },
        )
    };
    let Some(fix) = t.plan.judging.fix.as_ref().filter(|_| !v.passed()) else {
        return vec![completed(v).with_message(format!("verdict: {headline}"))];
    };
    let rounds = rounds_of(run, id);
    if rounds >= fix.max_rounds as usize {
        let reason = format!(
            "verdict {headline} after {rounds} {SPENT} {}); resume grants one more round:\n{}",
            fix.max_rounds,
            v.findings_text()
        );
        return vec![Pending::task(
            &run.id,
            id,
            EventBody::TaskNeedsAttention {
                end,
                reason: crate::prompt::cut_head_tail(&reason, 4000),
                verdict: Some(v),
            },
        )
        .with_message(format!("{id}: {headline}, fix rounds spent → blocked"))];
    }
    let (fix_event, fix_id) = fix_added(run, t, fix, v.clone(), 0);
    vec![
        completed(v).with_message(format!("verdict: {headline}")),
        fix_event.with_message(format!("{id}: {headline} → {fix_id}")),
    ]
}

/// In the reason a judge needs attention with once its fix rounds are spent (and only there).
const SPENT: &str = "fix round(s) (maxFixRounds";

/// Whether a judge's reason for needing attention is that its fix rounds were spent.
fn is_spent_reason(reason: &str) -> bool {
    reason.starts_with("verdict ") && reason.contains(SPENT)
}

/// No readable verdict: one repair attempt, then the task needs attention.
fn unreadable(
    run_id: &str,
    t: &TaskState,
    end: AttemptEnd,
    problem: String,
    now: DateTime<Utc>,
) -> Vec<Pending> {
    let end = AttemptEnd {
        error: Some(problem.clone()),
        ..end
    };
    let id = t.plan.id.as_str();
    if t.verdict_repair().is_none() {
        return vec![Pending::task(
            run_id,
            id,
            EventBody::TaskRetrying {
                end,
                reason: verdict::REPAIR_REASON.into(),
                delay_ms: 0,
                not_before: now,
                fallback_model: None,
            },
        )
        .with_message(format!(
            "no readable verdict; one repair attempt: {problem}"
        ))];
    }
    let reason = format!("no readable verdict after a repair attempt: {problem}");
    vec![Pending::task(
        run_id,
        id,
        EventBody::TaskNeedsAttention {
            end,
            reason: reason.clone(),
            verdict: None,
        },
    )
    .with_message(reason)]
}

/// Fix tasks added for judge `judge` so far (its rounds).
fn rounds_of(run: &RunState, judge: &str) -> usize {
    run.tasks
        .iter()
        .filter(|t| t.plan.judging.fixes.as_deref() == Some(judge))
        .count()
}

/// The `task.fix_added` for judge `t` and its id. `earlier` fix tasks are added before it in
/// the same job (a resume granting rounds to several judges).
fn fix_added(
    run: &RunState,
    t: &TaskState,
    fix: &FixPlan,
    v: Verdict,
    earlier: usize,
) -> (Pending, String) {
    let fixes_so_far = run
        .tasks
        .iter()
        .filter(|x| x.plan.judging.fixes.is_some())
        .count();
    let mut n = fixes_so_far + earlier + 1;
    // An id a fan-out block already took is passed over (bounded: each step passes one task).
    let mut id = fix_task_id(&t.plan.id, n);
    for _ in 0..=run.tasks.len() {
        if run.task_index(&id).is_none() {
            break;
        }
        n += 1;
        id = fix_task_id(&t.plan.id, n);
    }
    let round = rounds_of(run, &t.plan.id) as u32 + 1;
    let mut task = fix_task(t, fix, &v, &id, round);
    task.checks.verify = integration_checks(run, t);
    // A fix that finds nothing to change (a flaky check, a wrong finding) is an answer: the
    // judge runs again and says whether it stands. The no-change guard would block the run
    // on it instead, with no step to set `allowNoChange` on.
    task.checks.allow_no_change = Some(true);
    (
        Pending::task(
            &run.id,
            &t.plan.id,
            EventBody::TaskFixAdded {
                task: Arc::new(task),
                round,
                verdict: v,
            },
        ),
        id,
    )
}

/// The integration checks a fix for `judge` runs, when the judge does not run them itself:
/// those of the nearest task it depends on that has them. A fix changes code they passed
/// before, and that task does not run again (only the judge does): without them on the fix, a
/// later judge's fix that breaks the build could end the run completed. A judge with checks
/// of its own runs them again after the fix; the fix keeps the per-task checks.
fn integration_checks(run: &RunState, judge: &TaskState) -> Option<crate::checks::Verify> {
    if judge.plan.checks.verify.is_some() {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    let mut next = std::collections::VecDeque::new();
    let mut t = judge;
    // Breadth first over dependencies, each task once: bounded by the run's size.
    loop {
        for d in &t.plan.depends_on {
            if seen.insert(d.as_str()) {
                next.extend(run.task(d));
            }
        }
        t = next.pop_front()?;
        if let Some(v) = &t.plan.checks.verify {
            return Some(v.clone());
        }
    }
}

/// The fix task: the fixer role's template, starting from what `judge` judged (its
/// dependencies), told the findings.
fn fix_task(judge: &TaskState, fix: &FixPlan, v: &Verdict, id: &str, round: u32) -> PlannedTask {
    let r = &fix.fixer;
    let jp = &judge.plan;
    let product = match &fix.output {
        Some(name) => format!("Revise `{name}` (your earlier result, below) so that"),
        None => "Change the code so that".to_string(),
    };
    let text = format!(
        "Fix what the {role} ({judge}) found in the work for: {{goal}}\n\n\
         Its verdict: {headline} (fix round {round}).\n\nFindings:\n{findings}\n\
         {product} these problems are gone, keeping the change minimal, and run the relevant \
         build and tests. {judge} judges the result again after you.",
        role = jp.role,
        judge = jp.id,
        headline = v.headline(),
        findings = v.findings_text(),
    );
    let safe_id = SafeId::new(id).unwrap_or_else(|_| jp.id.clone());
    let output = fix
        .output
        .clone()
        .or_else(|| ArtifactName::new(format!("{id}.md")).ok());
    PlannedTask::from(crate::plan::FlatTask {
        output,
        reads: jp.reads.clone(),
        judging: verdict::Judging {
            fixes: Some(jp.id.clone()),
            ..Default::default()
        },
        title: Some(format!("fix {}'s findings (round {round})", jp.id)),
        ..r.task(safe_id, "fix".into(), jp.depends_on.clone(), text)
            .into_flat()
    })
}

/// `task.fix_added`: the fix task joins the run, and the judge waits for it and runs again.
pub(super) fn apply_fix_added(run: &mut RunState, judge: &str, task: &Arc<PlannedTask>) {
    super::apply::add_awaited(run, Some(judge), task, false);
}

/// Why a run whose tasks all completed is not done: it has tasks that edit, and a judge's
/// last verdict did not pass. `None`: nothing stands in the way.
pub(super) fn judges_not_passed(run: &RunState) -> Option<String> {
    if !run.tasks.iter().any(|t| verdict::can_edit(&t.plan.tools)) {
        return None;
    }
    let failing: Vec<String> = run
        .tasks
        .iter()
        .filter_map(|t| Some((t, gating_verdict(t).filter(|v| !v.passed())?)))
        .map(|(t, v)| format!("{}: {}", t.plan.id, v.headline()))
        .collect();
    (!failing.is_empty()).then(|| {
        format!(
            "the judges did not pass the work ({}); resume grants a fix round",
            failing.join("; ")
        )
    })
}

/// A task's last verdict where it decides the run's. A judging selector's does not: its
/// product is the choice among candidates that passed their checks, and nothing could fix or
/// resume it.
fn gating_verdict(t: &TaskState) -> Option<&Verdict> {
    t.verdict()
        .filter(|_| super::candidates::selector(&t.plan).is_none())
}

/// The run-level verdict: the worst last verdict of its judges (`None`: no judge gave one).
pub fn run_verdict(run: &RunState) -> Option<verdict::Outcome> {
    use verdict::Outcome;
    let mut worst: Option<Outcome> = None;
    for v in run.tasks.iter().filter_map(gating_verdict) {
        worst = Some(match (worst, v.verdict) {
            (Some(Outcome::Fail), _) | (_, Outcome::Fail) => Outcome::Fail,
            (Some(Outcome::ChangesRequested), _) | (_, Outcome::ChangesRequested) => {
                Outcome::ChangesRequested
            }
            _ => Outcome::Pass,
        });
    }
    worst
}
