//! A resolve task in the run state machine (issue 31): when the merge of a task's inputs
//! conflicts, crew adds a task that resolves the conflict, and the task that needed the merge
//! waits for it and starts from its result. Like a fix task, the addition is one journaled
//! event (`task.resolve_added`) holding the whole task, so a replay (or a restart after
//! `kill -9`) adds it exactly once.
//!
//! The resolve task depends on every input of the needing task, so its start is their merge;
//! the needing task then depends on it too, and since its result descends from every other
//! input, the needing task's start is the resolver's commit.

use super::event::{EventBody, Pending};
use super::types::RunState;
use crate::fanout::RoleTemplate;
use crate::ids::{reserved, ArtifactName, SafeId};
use crate::plan::PlannedTask;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The step id every resolve task carries: how a resolve task is told from the others.
pub const RESOLVE_STEP: &str = "resolve";

/// At most this many conflicting paths are kept in the event (enough to say where).
const PATHS_KEPT: usize = 50;
/// A path (from git, possibly a user's odd file name) is cut to this many bytes.
const PATH_MAX: usize = 512;
/// Each side's task text is cut to this many bytes in the resolver's prompt.
const TEXT_MAX: usize = 4000;

/// A merge that conflicted, as the daemon found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    /// The conflicting paths.
    pub paths: Vec<String>,
    /// The tasks whose results conflict there (the sides), in plan order.
    pub sides: Vec<String>,
}

impl Conflict {
    /// Bounded: the paths come from files a worker made.
    pub fn bounded(paths: &[String], sides: &[String]) -> Self {
        Conflict {
            paths: paths
                .iter()
                .take(PATHS_KEPT)
                .map(|p| crate::prompt::cut_head_tail(p, PATH_MAX))
                .collect(),
            sides: sides.to_vec(),
        }
    }

    /// `src/lib.rs (a × b)`, for messages and the follow view.
    pub fn headline(&self) -> String {
        let by = if self.sides.len() > 1 {
            format!(" ({})", self.sides.join(" × "))
        } else {
            String::new()
        };
        format!("{}{by}", self.paths.join(", "))
    }
}

/// The id of the `n`th task crew adds to resolve a conflict in the inputs of `of` (a task id,
/// or the run's id for the integration): `_resolve-<of>-<n>`.
pub fn resolve_task_id(of: &str, n: usize) -> String {
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    reserved::task_id(reserved::TaskKind::Resolve, of, n)
        .as_str()
        .to_string()
}

/// Whether `t` is a task crew added to resolve a conflict: by its id, which only crew mints (a
/// fan-out task the planner named `resolve` has that step id too).
pub fn is_resolve(t: &PlannedTask) -> bool {
    t.step_id == RESOLVE_STEP
        && t.added_by.is_some()
        && reserved::kind_of(t.id.as_str()) == Some(reserved::TaskKind::Resolve)
}

/// The `task.resolve_added` for a conflict in the merge of `needing`'s inputs (`None`: of the
/// run's leaves, into the integration), with `resolver` doing it, and the new task's id.
pub fn resolve_added(
    run: &RunState,
    needing: Option<&str>,
    conflict: &Conflict,
    resolver: &RoleTemplate,
) -> Option<(Pending, String)> {
    let (of, inputs): (&str, Vec<SafeId>) = match needing {
        Some(id) => {
            let t = run.task(id)?;
            (id, t.plan.depends_on.clone())
        }
        None => (run.id.as_str(), leaves(run)),
    };
    if inputs.is_empty() {
        return None;
    }
    let earlier = run.tasks.iter().filter(|t| is_resolve(&t.plan)).count();
    let mut n = earlier.saturating_add(1);
    let mut id = resolve_task_id(of, n);
    // An id already taken (by a fan-out block's task) is passed over; bounded by the run.
    for _ in 0..=run.tasks.len() {
        if run.task_index(&id).is_none() {
            break;
        }
        n = n.saturating_add(1);
        id = resolve_task_id(of, n);
    }
    let task = resolve_task(run, of, inputs, conflict, resolver, &id)?;
    let body = EventBody::TaskResolveAdded {
        task: Arc::new(task),
        conflict: conflict.clone(),
    };
    let headline = conflict.headline();
    let p = match needing {
        Some(t) => Pending::task(&run.id, t, body),
        None => Pending::run(&run.id, body),
    };
    let what = needing.unwrap_or("integration");
    Some((
        p.with_message(format!("{what}: conflict in {headline} → {id}")),
        id,
    ))
}

/// The tasks nobody depends on: what the integration merges.
fn leaves(run: &RunState) -> Vec<SafeId> {
    super::workspace::leaf_tasks(run)
        .iter()
        .map(|t| t.plan.id.clone())
        .collect()
}

/// Where a message suggests the user's own worktree for resolving on the branch of `task` in
/// run `run` (`None`: the run's integration): beside the repository, so it is never inside
/// crew's state or the user's checkout, and named by run and task as crew's own task worktrees
/// are (`<runId>/<taskId>` under its state): `<repo>-resolve-<runId>.<taskId>`. Ids hold no
/// `.`, so no two (run, task) pairs share a path (`<repo>-resolve-<task>` was one path for a
/// task id in every run, and for a run's integration and a task named like the run); and a
/// flat name leaves no directory behind after `git worktree remove`.
pub fn worktree_path(repo: &str, run: &str, task: Option<&str>) -> String {
    let task = task.unwrap_or(reserved::INTEGRATION);
    format!("{}-resolve-{run}.{task}", repo.trim_end_matches('/'))
}

/// The manual way after a resolver gave up: its branch holds every input merged, with the
/// conflicts left in the files (crewd puts it back there after a failed attempt), so the
/// user resolves there and resumes; `crewd`'s workspace takes a resolution that holds every
/// input and no markers as the resolve task's result, without running the agent again.
pub fn manual_hint(run: &RunState, task_id: &str) -> String {
    let Some(ws) = run.spec.workspace.as_ref() else {
        return String::new();
    };
    let repo = ws.repo.as_str();
    let branch = super::workspace::task_branch(&run.id, task_id);
    let wt = worktree_path(repo, &run.id, Some(task_id));
    format!(
        "The resolver could not resolve the conflict; resolve it by hand. Its branch holds \
         every input merged, with the conflicts left in the files (between `<<<<<<< ` and \
         `>>>>>>> ` lines). In a worktree of your own (your checkout is not touched):\n  \
         git -C {repo} worktree add {wt} {branch}\n  cd {wt}\n  \
         # fix the files, remove the markers, then: git add -A && git commit\n  \
         cd {repo}\n  git worktree remove {wt}\nthen: crewctl resume {run}",
        run = run.id
    )
}

/// The resolve task: the resolver's template, starting from the merge of `inputs` with every
/// conflict left in the files, told what each side was for.
fn resolve_task(
    run: &RunState,
    of: &str,
    inputs: Vec<SafeId>,
    conflict: &Conflict,
    r: &RoleTemplate,
    id: &str,
) -> Option<PlannedTask> {
    let safe_id = SafeId::new(id).ok()?;
    let added_by = SafeId::new(of).ok();
    let mut sides = String::new();
    for s in &conflict.sides {
        let Some(t) = run.task(s) else { continue };
        let title = t.plan.title.as_deref().unwrap_or(t.plan.step_id.as_str());
        // The commits are in the resolver's repository (every side is an ancestor of its
        // start), so the exact change of each side is one command away.
        let diff = t
            .commit()
            .map(|c| format!("Its change: `git diff {} {}`\n", c.start, c.commit))
            .unwrap_or_default();
        sides.push_str(&format!(
            "\n### {} ({title})\nIts task:\n{}\n{diff}",
            t.plan.id,
            crate::prompt::cut_head_tail(&t.plan.task_template, TEXT_MAX),
        ));
    }
    let text = format!(
        "The results of parallel tasks in the work for {{goal}} conflict when merged. Your \
         working tree holds the merge of all of them with every conflict left in the files \
         (between `<<<<<<< ` and `>>>>>>> ` lines). They are committed in the commit you start \
         from, so `git status` shows a clean tree and no merge in progress; the labels after \
         the markers are commit ids: each side's commit is the last one in its `git diff` \
         below.\n\nConflicting paths: {paths}\n\n\
         What each side was for:\n{sides}\n\
         Resolve every conflict so that the result does what each side intended (both, not \
         one of them), remove every conflict marker, and run the relevant build and tests. \
         Change nothing else.",
        paths = conflict.paths.join(", "),
    );
    Some(PlannedTask::from(crate::plan::FlatTask {
        output: ArtifactName::new(format!("{id}.md")).ok(),
        added_by,
        title: Some(format!("resolve the conflict in {}", conflict.headline())),
        resolves: Some(std::sync::Arc::new(conflict.clone())),
        ..r.task(safe_id, RESOLVE_STEP.into(), inputs, text)
            .into_flat()
    }))
}

/// `task.resolve_added`: the resolve task joins the run; the needing task (`None`: the
/// integration) waits for it and starts again from its result.
pub(super) fn apply_resolve_added(
    run: &mut RunState,
    needing: Option<&str>,
    task: &Arc<PlannedTask>,
) {
    // Once per task id (a replayed or repeated event changes nothing).
    let fresh = run.task_index(&task.id).is_none();
    // The attempt that found the conflict ended there: what it spent stays counted.
    super::apply::add_awaited(run, needing, task, true);
    // It ran no agent (the merge of its inputs stopped it before one started): it is given
    // back, so the needing task counts only the attempts that ran, and its next one takes
    // its number (nothing of an attempt is written before its merge succeeds).
    let needing = needing.and_then(|n| run.task_index(n));
    if let Some(t) = needing.filter(|_| fresh).and_then(|i| run.tasks.get_mut(i)) {
        t.attempts = t.attempts.saturating_sub(1);
    }
}

impl super::State {
    /// A merge of inputs conflicted: of `task_id`'s dependencies (`Some`, its attempt
    /// `attempt` could not start), or of the run's leaves into the integration (`None`). In a
    /// run whose conflicts go to an agent, a resolve task is added (one event); empty when the
    /// run resolves by hand, or an agent resolved these inputs before (the manual way then).
    pub fn on_conflict(
        &self,
        run_id: &str,
        task_id: Option<&str>,
        attempt: u32,
        conflict: &Conflict,
    ) -> Vec<Pending> {
        let Some(run) = self.runs.get(run_id) else {
            return vec![];
        };
        let Some(ws) = run.spec.workspace.as_ref() else {
            return vec![];
        };
        let Some(resolver) = ws.resolver.as_deref().filter(|_| !ws.conflicts.is_manual()) else {
            return vec![];
        };
        match task_id {
            Some(t) => self.resolve_conflict(run_id, t, attempt, conflict, resolver),
            None => self.resolve_integration(run_id, conflict, resolver),
        }
    }

    /// The merge of the run's leaves conflicts: a resolve task over them becomes the only
    /// leaf, so its result is the integration. Not when a leaf is already such a resolve task
    /// (its result did not hold: the manual way).
    pub fn resolve_integration(
        &self,
        run_id: &str,
        conflict: &Conflict,
        resolver: &RoleTemplate,
    ) -> Vec<Pending> {
        let Some(run) = self.runs.get(run_id) else {
            return vec![];
        };
        if run.status != super::RunStatus::Running || run.integration.is_some() {
            return vec![];
        }
        let resolved_before = super::workspace::leaf_tasks(run).iter().any(|t| {
            is_resolve(&t.plan)
                && t.plan
                    .added_by
                    .as_ref()
                    .is_some_and(|a| a.as_str() == run.id)
        });
        if resolved_before {
            return vec![];
        }
        resolve_added(run, None, conflict, resolver)
            .map(|(p, _)| vec![p])
            .unwrap_or_default()
    }

    /// The attempt of `task_id` could not start: the merge of its inputs conflicts. A resolve
    /// task is added and the task waits for it, unless one already resolved its inputs (a
    /// conflict again means the resolver's result did not hold; the manual way then). Empty:
    /// not added (the attempt ends the ordinary way, with the manual message).
    pub fn resolve_conflict(
        &self,
        run_id: &str,
        task_id: &str,
        attempt: u32,
        conflict: &Conflict,
        resolver: &RoleTemplate,
    ) -> Vec<Pending> {
        let Some((run, t)) = self.running_attempt(run_id, task_id, attempt) else {
            return vec![];
        };
        let resolved_before = t
            .plan
            .depends_on
            .iter()
            .filter_map(|d| run.task(d))
            .any(|d| is_resolve(&d.plan));
        if resolved_before {
            return vec![];
        }
        resolve_added(run, Some(task_id), conflict, resolver)
            .map(|(p, _)| vec![p])
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::worktree_path;
    use std::collections::HashSet;

    /// Issue 31: the user's worktree is one per run and task. `<repo>-resolve-<task>` was the
    /// same for a task of the same id in two runs, and a run's integration took the name of a
    /// task called like the run.
    #[test]
    fn the_users_worktree_is_one_per_run_and_task() {
        let pairs: &[(&str, Option<&str>)] = &[
            ("r1", Some("03_x")),
            ("r2", Some("03_x")),
            ("r1", Some("resolve-03_x")),
            ("r1", None),
            ("r1", Some("r1")),
            ("r2", Some("r1")),
            ("r-1", Some("x")),
            ("r", Some("1-x")),
        ];
        let paths: HashSet<String> = pairs
            .iter()
            .map(|(run, task)| worktree_path("/src/p/", run, *task))
            .collect();
        assert_eq!(paths.len(), pairs.len(), "{paths:?}");
        assert_eq!(
            worktree_path("/src/p", "team_1_ab", Some("03_x")),
            "/src/p-resolve-team_1_ab.03_x"
        );
        assert_eq!(
            worktree_path("/src/p", "team_1_ab", None),
            "/src/p-resolve-team_1_ab._integration"
        );
    }
}
