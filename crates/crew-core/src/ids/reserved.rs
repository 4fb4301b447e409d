//! crew's own names: one reserved scheme for everything crew names for itself next to names
//! made from task ids — files and directories beside task worktrees, artifact names, git refs —
//! and for the ids of tasks crew itself adds to a run (fix, resolve and candidate tasks).
//!
//! **The rule: a name of crew's own begins with `_`, and no task id from a user's source
//! does.** Workflow steps become `NN_<slug>` (a digit first, [`super::task_id`]), a fan-out
//! block's ids must begin with a letter or digit (`fanout::validate`), and an imported bundle
//! may carry a `_` id only when it is one of the task ids minted here ([`is_task_id`]). So a
//! task's worktree, branch, refs and artifacts can never take the place of crew's own.
//!
//! After the `_` comes a word saying what the name is, so names of different kinds never meet:
//! `_repo`, `_readers-<commit>`, `_system-<digest>`, `_base`, and for tasks `_fix-…`,
//! `_resolve-…`, `_cand-…`.
//!
//! **Minting a task id** (for code that adds tasks to a running run): call
//! [`task_id`]`(TaskKind::Fix, of, n)` with the task it is about and a counter starting at 1;
//! if the run already has that id (an earlier fix of the same task, or a long `of` cut to the
//! same prefix), take the next `n`. The result is a [`SafeId`] (it reaches paths) and passes
//! [`is_task_id`].

use super::SafeId;

/// The first character of every name of crew's own.
pub const MARK: char = '_';

/// Whether `name` is in crew's reserved scheme (begins with [`MARK`]).
pub fn is_reserved(name: &str) -> bool {
    name.starts_with(MARK)
}

/// The file beside a run's task worktrees naming the run's repository.
pub const REPO_FILE: &str = "_repo";

/// The ref (under `refs/crew/<runId>/`) holding a run's base commit from `team.run` on, so a
/// dirty tree's snapshot survives `git gc` while the run waits.
pub const BASE_REF: &str = "_base";

/// The ref (under `refs/crew/<runId>/`) `team.apply` leaves on what it applied (issue 36:
/// `team.pick` is refused after it).
pub const APPLIED_REF: &str = "_applied";

/// The ref (under `refs/crew/<runId>/`) marking where crew left the run's branch when its
/// integration conflicted, so the user's resolution commit is told from crew's own.
pub const INTEGRATION_CONFLICT_REF: &str = "_conflict";

/// What stands for the run's integration where a name is made of a run id and a task id (the
/// user's worktree for resolving a conflict of the run's results,
/// `run::resolve::worktree_path`).
pub const INTEGRATION: &str = "_integration";

/// The directory beside task worktrees where read-only tasks starting at `commit` share one
/// checkout (also the name of its leftover ref's directory, with a short commit).
pub fn readers_dir(commit: &str) -> String {
    format!("{MARK}readers-{commit}")
}

/// A system prompt file's name in a run's `prompts/` (tasks' prompts are `prompts/<taskId>.md`).
pub fn system_prompt_file(digest: &str) -> String {
    format!("{MARK}system-{digest}.md")
}

/// The kinds of tasks crew adds to a run by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    /// A task that fixes what a failed check found.
    Fix,
    /// A task that resolves a merge conflict between results.
    Resolve,
    /// One of several candidates for the same step.
    Candidate,
}

impl TaskKind {
    pub const ALL: [TaskKind; 3] = [TaskKind::Fix, TaskKind::Resolve, TaskKind::Candidate];

    pub fn word(self) -> &'static str {
        match self {
            TaskKind::Fix => "fix",
            TaskKind::Resolve => "resolve",
            TaskKind::Candidate => "cand",
        }
    }
}

/// The id of the `n`th task of `kind` crew adds about task `of`: `_<kind>-<of>-<n>`, `of` cut
/// so that the id stays within [`SafeId`]'s 128 characters (check the run for the id and take
/// the next `n` if it is taken). Characters of `of` outside the safe alphabet become `-`.
pub fn task_id(kind: TaskKind, of: &str, n: u32) -> SafeId {
    let head = format!("{MARK}{}-", kind.word());
    let tail = format!("-{n}");
    let room = 128usize.saturating_sub(head.len() + tail.len());
    let of: String = of
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(room)
        .collect();
    let id = format!("{head}{of}{tail}");
    // Built from the safe alphabet within the length: cannot fail; the fallback keeps the
    // function total all the same.
    SafeId::new(id).unwrap_or_else(|_| SafeId(format!("{head}{n}").into_boxed_str()))
}

/// The kind of task crew added whose id [`task_id`] minted: `_<kind>-…` of a known kind, a
/// safe id. A planner's or a user's task cannot have one (reserved names are refused).
pub fn kind_of(id: &str) -> Option<TaskKind> {
    if !super::is_safe_id(id) {
        return None;
    }
    TaskKind::ALL.into_iter().find(|k| {
        id.strip_prefix(MARK)
            .and_then(|r| r.strip_prefix(k.word()))
            .is_some_and(|r| r.starts_with('-'))
    })
}

/// Whether `id` is a task id [`task_id`] mints.
pub fn is_task_id(id: &str) -> bool {
    kind_of(id).is_some()
}

/// Whether a task id from an imported run is acceptable: not reserved, or one crew mints.
pub fn task_id_allowed_in_import(id: &str) -> bool {
    !is_reserved(id) || is_task_id(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_never_meet_crews_names() {
        // Workflow task ids start with a digit.
        assert!(!is_reserved(super::super::task_id(1, "_repo").as_str()));
        for crew in [
            REPO_FILE.to_string(),
            readers_dir("ab"),
            system_prompt_file("ab"),
            BASE_REF.to_string(),
            APPLIED_REF.to_string(),
            INTEGRATION_CONFLICT_REF.to_string(),
            INTEGRATION.to_string(),
        ] {
            assert!(is_reserved(&crew), "{crew}");
            assert!(!is_task_id(&crew), "{crew}");
            assert!(!task_id_allowed_in_import(&crew), "{crew}");
        }
    }

    #[test]
    fn minted_task_ids_are_safe_distinct_and_recognised() {
        for kind in TaskKind::ALL {
            let id = task_id(kind, "03_build", 2);
            assert!(is_task_id(&id), "{id}");
            assert!(task_id_allowed_in_import(&id));
            let long = task_id(kind, &"x".repeat(300), 12345);
            assert!(long.len() <= 128 && is_task_id(&long), "{long}");
        }
        assert_eq!(task_id(TaskKind::Fix, "a/b", 1).as_str(), "_fix-a-b-1");
        assert_ne!(
            task_id(TaskKind::Fix, "a", 1),
            task_id(TaskKind::Resolve, "a", 1)
        );
        assert!(!is_task_id("_fixed"));
        assert!(task_id_allowed_in_import("01_a"));
    }
}
