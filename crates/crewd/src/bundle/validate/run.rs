//! The run a bundle's events make, checked as crew makes runs: finished with nothing in
//! flight, and naming nothing crew would hand to an agent's command line, git or a path that
//! crew itself never makes; its parts agreeing with each other.

use super::{diag, refuse, refuse_any, Files, MAX_LISTED};
use crate::bundle::canonical::agrees;
use crate::rpc::views;
use crew_api::types::Diagnostic;
use crew_api::ApiError;
use crew_core::run::{Event, EventBody, RunState};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Attempts one task of an imported run may have made (far above any real run's).
const MAX_ATTEMPTS: u32 = 1 << 20;

/// The run the events replay to: finished (completed, failed or cancelled).
pub(super) fn finished_run(events: &[Event]) -> Result<RunState, ApiError> {
    let Some(run) = crew_core::run::replay_run(events.iter()) else {
        return Err(refuse(
            "the events do not make a run",
            vec![diag("events", "replaying them gives no run")],
        ));
    };
    if !run.status.is_finished() {
        return Err(refuse(
            format!(
                "the bundle's run is {} (truncated?); only a finished run can be imported",
                run.status.as_str()
            ),
            vec![diag(
                "events",
                format!(
                    "end with the run {}, not completed, failed or cancelled",
                    run.status.as_str()
                ),
            )],
        ));
    }
    Ok(run)
}

/// A run ends only once nothing of it runs: an attempt still in flight (a running task,
/// with a worker's pid or not, or a job on a cluster) in a finished run was never exported
/// by crew. Imported and resumed, it would have the next restart's recovery follow that
/// job, cancel it or take files from its staging directory, or kill that process group:
/// crewd acting on a job or a process it never started. (A waiting task is no attempt in
/// flight: its attempt ended with its question, and a failed run may keep one.)
pub(super) fn nothing_in_flight(run: &RunState) -> Result<(), ApiError> {
    let in_flight: Vec<Diagnostic> = run
        .tasks
        .iter()
        .filter_map(|t| {
            use crew_core::run::TaskStatus;
            let what = if t.rare().job.is_some() {
                "a job on a cluster".to_string()
            } else if t.status == TaskStatus::Running {
                format!("running (attempt {})", t.attempts)
            } else {
                return None;
            };
            Some(diag(
                "events",
                format!(
                    "task {} has an attempt in flight in a finished run: {what}",
                    t.plan.id
                ),
            ))
        })
        .take(MAX_LISTED)
        .collect();
    refuse_any(
        "the bundle's run has attempts in flight; crew exports finished runs only",
        in_flight,
    )
}

/// No value crew puts on an agent's command line after an option is an option itself
/// ([`ARGV_VALUES`]).
pub(super) fn no_options(events: &[Event]) -> Result<(), ApiError> {
    let Some(Event {
        body: EventBody::RunCreated(spec),
        ..
    }) = events.first()
    else {
        return Ok(());
    };
    let mut found = Vec::new();
    option_like(
        &serde_json::to_value(spec).unwrap_or(Value::Null),
        "spec",
        &mut found,
    );
    refuse_any(
        "the bundle's run would put options on an agent's command line",
        found
            .into_iter()
            .take(MAX_LISTED)
            .map(|f| diag("events[0]", format!("{f} starts with `-`")))
            .collect(),
    )
}

/// The agent's cwd (writable in its box in shared mode) as the confirmation shows it: a
/// relative one would be relative to wherever crewd runs. `team.run` takes absolute ones.
pub(super) fn absolute_cwd(run: &RunState) -> Result<(), ApiError> {
    let cwd = &run.spec.cwd;
    if !(cwd.starts_with('/') || cwd == "~" || cwd.starts_with("~/")) {
        return Err(refuse(
            "the bundle's run has a relative cwd",
            vec![diag("events[0]", "the run's cwd is not an absolute path")],
        ));
    }
    Ok(())
}

/// Where the bundle's parts contradict each other or what crew would make, every such place:
/// the tasks' attempt counts and choices, files the run would take for its own, the files the
/// tasks name, and the run view beside the events.
pub(super) fn contradictions(
    obj: &Map<String, Value>,
    run: &RunState,
    files: &Files,
) -> Vec<Diagnostic> {
    let mut diags = too_many_attempts(run);
    diags.extend(astray_choices(run));
    diags.extend(planted_files(run, &files.files));
    diags.extend(differing_files(run, &files.digests));
    diags.extend(stale_view(obj, run));
    diags
}

/// The next attempt is numbered one past a task's last (`t.attempts + 1`): a forged
/// `u32::MAX` would overflow it, or wrap to an attempt 0 whose session file the bundle
/// placed. No task makes anywhere near this many attempts.
fn too_many_attempts(run: &RunState) -> Vec<Diagnostic> {
    run.tasks
        .iter()
        .filter(|t| t.attempts > MAX_ATTEMPTS)
        .take(MAX_LISTED)
        .map(|t| {
            diag(
                "events",
                format!(
                    "task {} has made {} attempts; a run crew exports has at most {MAX_ATTEMPTS}",
                    t.plan.id, t.attempts
                ),
            )
        })
        .collect()
}

/// A selector's choice names the candidate whose result its dependents read
/// (`results/<candidate>.txt`, `actor::workers::sources`): a task of the run, never a path.
fn astray_choices(run: &RunState) -> Vec<Diagnostic> {
    run.tasks
        .iter()
        .filter_map(|t| Some((t, t.choice()?)))
        .filter(|(_, ch)| run.task(&ch.candidate).is_none())
        .take(MAX_LISTED)
        .map(|(t, ch)| {
            diag(
                "events",
                format!(
                    "task {} chose {:?}, which is no task of the run",
                    t.plan.id,
                    crew_core::text::bound(ch.candidate.clone(), 200)
                ),
            )
        })
        .collect()
}

/// Files that would not stay mere records once placed: what a restart or the next attempt
/// would take as the run's own.
fn planted_files(run: &RunState, files: &[(String, String)]) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    // pi continues the session file crew names for an attempt (`executor::session`): one
    // the bundle placed for an attempt yet to come would be the next attempt's conversation,
    // which no confirmation shows.
    for (name, _) in files {
        // An attempt's own object directory (`executor::sandbox::own_objects`) is no artifact:
        // a restart takes what one holds into the run's repository.
        if name.starts_with("objects/") {
            diags.push(diag(
                "artifacts",
                format!("{name} is in an attempt's object directory, which no export holds"),
            ));
        }
        if let Some((task, n)) = session_attempt(name) {
            if run.task(task).is_none_or(|t| n > t.attempts) {
                diags.push(diag(
                    "artifacts",
                    format!("{name} is the session of an attempt task {task} has not made"),
                ));
            }
        }
    }
    diags
}

/// Files whose content is not what the task naming them recorded.
fn differing_files(run: &RunState, digests: &BTreeMap<String, String>) -> Vec<Diagnostic> {
    let mut diags = Vec::new();
    for t in &run.tasks {
        for a in &t.artifacts {
            if digests.get(&a.name).is_some_and(|d| a.sha256 != *d) {
                diags.push(diag(
                    "artifacts",
                    format!("{} differs from the file task {} names", a.name, t.plan.id),
                ));
            }
        }
    }
    diags
}

/// The bundle's `run` beside what the events replay to.
fn stale_view(obj: &Map<String, Value>, run: &RunState) -> Option<Diagnostic> {
    let status = serde_json::to_value(views::status(run)).unwrap_or(Value::Null);
    if obj.get("run").is_some_and(|r| agrees(r, &status)) {
        return None;
    }
    Some(diag("run", "does not match what the events replay to"))
}

/// `(task, attempt)` of a session file crew names for an attempt:
/// `sessions/<task>/attempt-<n>.<ext>`.
fn session_attempt(name: &str) -> Option<(&str, u32)> {
    let (task, file) = name.strip_prefix("sessions/")?.split_once('/')?;
    let n = file.strip_prefix("attempt-")?.split('.').next()?;
    Some((task, n.parse().ok()?))
}

/// Fields of a run's plan (its tasks, and the roles of the tasks crew adds: fix, resolve,
/// fan-out, candidates) whose values crew puts on an agent CLI's command line after an option
/// (`--model X`, `--fallback-model X`, pi's `--thinking X` and `--tools X`, opencode's
/// `--variant X`). Gemini CLI and opencode read `--model --yolo` as two options.
const ARGV_VALUES: &[&str] = &["model", "thinking", "effort", "fallbackModels", "tools"];

/// Where, under `at`, a value of an [`ARGV_VALUES`] field starts with `-` (no model, level
/// or tool name does).
fn option_like(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, item) in map {
                let here = format!("{at}.{k}");
                if ARGV_VALUES.contains(&k.as_str()) {
                    let strings: Vec<&str> = match item {
                        Value::String(s) => vec![s],
                        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    if strings.iter().any(|s| s.starts_with('-')) {
                        out.push(here.clone());
                    }
                }
                option_like(item, &here, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                option_like(item, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// A worktree run's values that crew hands to git or joins to a path, checked as crew makes
/// them: commit ids are full object ids (a `--output=FILE` "commit" would be an option of
/// `git diff`, which `team.diff` runs with no confirmation, and writes that file), the run's
/// cwd in its repository is a relative path inside it (an absolute or `..` one would put the
/// agent's cwd, writable in its box, outside its worktree, where the confirmation does not
/// show), and the repository is an absolute path.
/// Every task the run holds has an id crew could have given it: one of crew's own names
/// (`_repo`, a `_readers-…` checkout, a `_system-…` prompt) would be a task whose worktree,
/// result or prompt is crew's file. The events' `taskId`s are checked with the history; these
/// are the ids inside them (the plan of `run.created`, the tasks a fan-out, a fix or a resolve
/// added).
pub(super) fn task_id_diags(run: &RunState) -> Vec<Diagnostic> {
    run.tasks
        .iter()
        .map(|t| t.plan.id.as_str())
        .filter(|id| !crew_core::ids::reserved::task_id_allowed_in_import(id))
        .take(MAX_LISTED)
        .map(|id| {
            diag(
                "events",
                format!(
                    "task {id:?} is in crew's reserved scheme (`_…`) but not a task id crew makes"
                ),
            )
        })
        .collect()
}

pub(super) fn workspace_diags(run: &RunState) -> Vec<Diagnostic> {
    let Some(ws) = &run.spec.workspace else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut bad = |what: String, why: &str| {
        // A forged run may have thousands of tasks.
        if out.len() < MAX_LISTED {
            out.push(diag("events", format!("{what} {why}")));
        }
    };
    let oid = "is not a full commit id";
    if !(ws.repo.starts_with('/') || ws.repo == "~" || ws.repo.starts_with("~/")) {
        bad("the workspace's repo".into(), "is not an absolute path");
    }
    let inside = Path::new(&ws.subdir)
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside {
        bad(
            "the workspace's subdir".into(),
            "is not a relative path inside the repository",
        );
    }
    if !crew_git::is_oid(&ws.base) {
        bad("the workspace's base".into(), oid);
    }
    if ws.head.as_deref().is_some_and(|h| !crew_git::is_oid(h)) {
        bad("the workspace's head".into(), oid);
    }
    for t in &run.tasks {
        if let Some(c) = t.commit() {
            let id = &t.plan.id;
            if !crew_git::is_oid(&c.commit) {
                bad(format!("task {id}'s result commit"), oid);
            }
            // A reused result's start may be empty; never anything but a commit id.
            if !c.start.is_empty() && !crew_git::is_oid(&c.start) {
                bad(format!("task {id}'s start commit"), oid);
            }
        }
    }
    if let Some(i) = &run.integration {
        if !crew_git::is_oid(&i.commit) {
            bad("the run's integrated commit".into(), oid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_files_name_their_task_and_attempt() {
        for (name, want) in [
            ("sessions/01_a/attempt-2.jsonl", Some(("01_a", 2))),
            ("sessions/01_a/attempt-2", Some(("01_a", 2))),
            ("sessions/01_a/attempt-x.jsonl", None),
            ("sessions/01_a.jsonl", None),
            ("results/01_a.txt", None),
        ] {
            assert_eq!(session_attempt(name), want, "{name}");
        }
    }
}
