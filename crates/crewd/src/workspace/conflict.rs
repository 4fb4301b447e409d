//! A merge of results that conflicts, handed to the user (the manual way), and the user's
//! resolution taken back on `crewctl resume`.
//!
//! When the merge of a task's inputs (or of the run's leaves) stops at a conflict, crew points
//! the branch (`crew/tasks/<runId>/<taskId>`, or `crew/<runId>`) at what merged so far and
//! records that commit under a conflict ref. The message names every input and how far the
//! merge got, and gives commands that work in a worktree of the user's own (never the user's
//! checkout). On resume, the branch's tip is:
//! - the user's resolution when it holds every input: taken as it is (never moved);
//! - the user's (it is not where crew left it) but lacking inputs: refused, naming them, and
//!   left as the user made it;
//! - where crew left it (the user did nothing): merged again.
//!
//! Without the conflict ref crew could not tell a user's commit from its own earlier merge, and
//! merging again reset the branch, dropping the user's work (issue 31).

use super::short;
use crew_git::{GitError, Repo};

/// One input of a merge: the task whose result it is, and the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub task: String,
    pub commit: String,
}

/// Inputs from parallel lists (task ids beside commits); a commit without a task id is named
/// by its short id.
pub fn inputs(commits: &[String], tasks: &[String]) -> Vec<Input> {
    commits
        .iter()
        .enumerate()
        .map(|(i, c)| Input {
            task: tasks
                .get(i)
                .cloned()
                .unwrap_or_else(|| short(c).to_string()),
            commit: c.clone(),
        })
        .collect()
}

/// Where a merge stopped: at `with`, conflicting in `paths`, which the tasks `touched_by`
/// changed (where known).
pub struct Stopped<'a> {
    pub with: &'a str,
    pub paths: &'a [String],
    pub touched_by: &'a [String],
}

/// What to do with a branch on resume.
#[derive(Debug, PartialEq, Eq)]
pub enum Tip {
    /// The user's resolution (or an earlier result) holding every input: the start.
    Take(String),
    /// The user moved the branch, but it lacks these inputs: refused, the branch untouched.
    Lacks { tip: String, missing: Vec<Input> },
    /// The user's resolution still has conflict markers (`path:line`): refused, untouched.
    Markers { tip: String, found: Vec<String> },
    /// Nothing of the user's there: merge (again).
    Merge,
}

/// Read the branch `bref` against `inputs` and the conflict ref `cref`. `take_any`: any tip
/// holding every input is taken (the run's branch); else only when there is more than one
/// input or the user resolved there (a task's branch, which holds its own earlier result).
pub async fn read_tip(
    repo: &Repo,
    bref: &str,
    cref: &str,
    inputs: &[Input],
    take_any: bool,
) -> Result<Tip, GitError> {
    let Some(tip) = repo.resolve(bref).await? else {
        return Ok(Tip::Merge);
    };
    let left = repo.resolve(cref).await?;
    let users = left.as_deref().is_some_and(|l| l != tip);
    let mut missing = Vec::new();
    for i in inputs {
        if !repo.is_ancestor(&i.commit, &tip).await? {
            missing.push(i.clone());
        }
    }
    if missing.is_empty() && users {
        // The files the resolution changed from where crew left the merge hold the conflicts.
        let left = left.unwrap_or_default();
        let paths = repo.changed_paths(&left, &tip).await?;
        let found = repo.conflict_markers(&tip, &paths).await?;
        if !found.is_empty() {
            return Ok(Tip::Markers { tip, found });
        }
    }
    if missing.is_empty() && (take_any || inputs.len() > 1 || users) {
        return Ok(Tip::Take(tip));
    }
    if users && !missing.is_empty() {
        return Ok(Tip::Lacks { tip, missing });
    }
    Ok(Tip::Merge)
}

/// The conflict is over: `start` (a task's start ref, or the run's branch) moves to `commit`
/// and the conflict ref goes, in one transaction (a crash between the two would leave a stale
/// mark, and a later tip of crew's own taken for the user's).
pub async fn settled(repo: &Repo, start: &str, commit: &str, cref: &str) -> Result<(), GitError> {
    repo.update_refs(&[
        (start.to_string(), Some(commit.to_string())),
        (cref.to_string(), None),
    ])
    .await
}

/// The merge stopped: the branch and the conflict ref both hold what merged so far, set in one
/// transaction (a mark without its branch, or the reverse, would make crew's own commit look
/// like the user's).
pub async fn leave_for_user(
    repo: &Repo,
    bref: &str,
    cref: &str,
    merged_so_far: &str,
) -> Result<(), GitError> {
    repo.update_refs(&[
        (bref.to_string(), Some(merged_so_far.to_string())),
        (cref.to_string(), Some(merged_so_far.to_string())),
    ])
    .await
}

/// The inputs that changed a conflicting path since they parted from the one the merge stopped
/// at (`with` is one of them by definition): the sides of the conflict, for its headline.
pub async fn sides(
    repo: &Repo,
    inputs: &[Input],
    with: &str,
    merged_so_far: &str,
    paths: &[String],
) -> Vec<String> {
    let Ok(Some(base)) = repo.merge_base(merged_so_far, with).await else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for i in inputs {
        if i.commit == with {
            out.push(i.task.clone());
            break;
        }
        let touched = repo
            .changed_paths(&base, &i.commit)
            .await
            .unwrap_or_default();
        if touched.iter().any(|p| paths.contains(p)) {
            out.push(i.task.clone());
        }
    }
    out
}

pub use crew_core::run::resolve::worktree_path;

/// `a, b and c`
fn names(inputs: &[&Input]) -> String {
    inputs
        .iter()
        .map(|i| i.task.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where a conflict is resolved by hand: the repository, the run, the branch, and the task
/// whose worktree path the commands use (`None`: the run's integration).
pub struct Place<'a> {
    pub repo: &'a str,
    pub run_id: &'a str,
    pub branch: &'a str,
    pub task: Option<&'a str>,
}

impl Place<'_> {
    /// `body`'s commands in a worktree of the user's own, never their checkout: added (or
    /// found from before), entered, left and removed, then the resume.
    fn steps(&self, body: &[String]) -> String {
        let (repo, branch) = (self.repo, self.branch);
        let wt = worktree_path(repo, self.run_id, self.task);
        let mut m = format!(
            "In a worktree of your own (your checkout is not touched):\n  \
             git -C {repo} worktree add {wt} {branch}   # skip this line if that worktree is there from before\n  \
             cd {wt}\n"
        );
        for line in body {
            m.push_str(&format!("  {line}\n"));
        }
        // Out of the worktree before it goes, so the shell is not left in a removed directory.
        m.push_str(&format!(
            "  cd {repo}\n  git worktree remove {wt}\nthen: crewctl resume {}",
            self.run_id
        ));
        m
    }
}

/// The manual way, followed literally: what merged, where it stopped, what is not merged yet,
/// and the commands (a worktree of the user's own, one `git merge` per input left, then
/// `crewctl resume`). `what` names the merge ("its dependencies", "the run's results").
pub fn manual_message(
    place: &Place<'_>,
    what: &str,
    inputs: &[Input],
    stopped: &Stopped<'_>,
) -> String {
    let at = inputs
        .iter()
        .position(|i| i.commit == stopped.with)
        .unwrap_or(inputs.len());
    let merged: Vec<&Input> = inputs.iter().take(at).collect();
    let rest: Vec<&Input> = inputs.iter().skip(at).collect();
    let conflicting = rest
        .first()
        .map_or_else(|| short(stopped.with).to_string(), |i| i.task.clone());
    let by = if stopped.touched_by.len() > 1 {
        format!(" ({})", stopped.touched_by.join(" × "))
    } else {
        String::new()
    };
    let mut m = format!(
        "conflict in {}{by} between the results of {what}: merged {}; merging {conflicting} \
         into that conflicts",
        stopped.paths.join(", "),
        if merged.is_empty() {
            "nothing yet".to_string()
        } else {
            names(&merged)
        },
    );
    if rest.len() > 1 {
        m.push_str(&format!("; not merged yet: {}", names(&rest[1..])));
    }
    m.push_str(".\nResolve it. ");
    let merges: Vec<String> = rest
        .iter()
        .enumerate()
        .map(|(n, i)| {
            let note = if n == 0 {
                "conflicts: fix the files, git add them, git commit"
            } else {
                "if it conflicts: fix, git add, git commit"
            };
            format!("git merge --no-edit {}   # {}: {note}", i.commit, i.task)
        })
        .collect();
    m.push_str(&place.steps(&merges));
    m
}

/// A resolution that lacks inputs, refused: which ones, how to add them (in the user's own
/// worktree, as the first message said), and that the branch stays as the user made it.
pub fn lacks_message(place: &Place<'_>, tip: &str, missing: &[Input]) -> String {
    let mut m = format!(
        "the resolution on {} ({}) lacks the result of {}; it was not taken and the branch is \
         left as you made it. Merge what it lacks on it. ",
        place.branch,
        short(tip),
        missing
            .iter()
            .map(|i| format!("{} ({})", i.task, short(&i.commit)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let merges: Vec<String> = missing
        .iter()
        .map(|i| format!("git merge --no-edit {}   # {}", i.commit, i.task))
        .collect();
    m.push_str(&place.steps(&merges));
    m
}

/// A resolution that still has conflict markers, refused.
pub fn markers_message(place: &Place<'_>, tip: &str, found: &[String]) -> String {
    let mut m = format!(
        "the resolution on {} ({}) still has conflict markers at {}; it was not taken and the \
         branch is left as you made it. Fix those lines on it. ",
        place.branch,
        short(tip),
        found.join(", ")
    );
    m.push_str(&place.steps(&["# remove the markers, then: git add -A && git commit".to_string()]));
    m
}

/// The branch is checked out in a worktree (the user's, left after resolving): crew's task
/// worktree cannot check it out too.
pub fn checked_out_message(run_id: &str, branch: &str) -> String {
    format!(
        "{branch} is checked out in a worktree of yours (`git worktree list`); remove that \
         worktree (git worktree remove <path>; your commit stays on the branch), then: crewctl \
         resume {run_id}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Vec<Input> {
        ["dot-case", "path-case", "changelog"]
            .iter()
            .enumerate()
            .map(|(n, t)| Input {
                task: t.to_string(),
                commit: format!("{n}").repeat(40),
            })
            .collect()
    }

    #[test]
    fn the_message_names_every_input_and_how_far_the_merge_got() {
        let inputs = three();
        let paths = vec!["src/lib.rs".to_string()];
        let m = manual_message(
            &Place {
                repo: "/src/proj",
                run_id: "r-1",
                branch: "crew/tasks/r-1/03_integrate",
                task: Some("03_integrate"),
            },
            "its dependencies",
            &inputs,
            &Stopped {
                with: &inputs[1].commit,
                paths: &paths,
                touched_by: &["dot-case".into(), "path-case".into()],
            },
        );
        assert!(
            m.starts_with("conflict in src/lib.rs (dot-case × path-case) between"),
            "{m}"
        );
        assert!(m.contains(": merged dot-case; merging path-case"), "{m}");
        assert!(m.contains("not merged yet: changelog"), "{m}");
        assert!(
            m.contains(
                "git -C /src/proj worktree add /src/proj-resolve-r-1.03_integrate \
                 crew/tasks/r-1/03_integrate"
            ),
            "{m}"
        );
        // One merge per input left, in order; none of what merged already.
        let merges: Vec<&str> = m.lines().filter(|l| l.contains("git merge")).collect();
        assert_eq!(merges.len(), 2, "{m}");
        assert!(merges[0].contains(&inputs[1].commit) && merges[1].contains(&inputs[2].commit));
        assert!(m.ends_with("then: crewctl resume r-1"), "{m}");
        assert!(!m.contains("git switch") && !m.contains("retry"), "{m}");
    }

    /// A refusal's commands, followed literally where the last message left the shell (the
    /// repository), work on the branch in the user's own worktree, never in their checkout.
    #[test]
    fn a_refusal_names_what_the_resolution_lacks_and_where_to_merge_it() {
        let inputs = three();
        let place = Place {
            repo: "/src/proj",
            run_id: "r-1",
            branch: "crew/r-1",
            task: None,
        };
        let tip = "a".repeat(40);
        let lacks = lacks_message(&place, &tip, &inputs[2..]);
        assert!(
            lacks.contains("lacks the result of changelog (222222222222)"),
            "{lacks}"
        );
        assert!(lacks.contains("left as you made it"), "{lacks}");
        let markers = markers_message(&place, &tip, &["a.txt:3".to_string()]);
        assert!(
            markers.contains("still has conflict markers at a.txt:3"),
            "{markers}"
        );
        for (m, step) in [
            (&lacks, format!("git merge --no-edit {}", inputs[2].commit)),
            (&markers, "git add -A && git commit".to_string()),
        ] {
            let lines: Vec<&str> = m.lines().map(str::trim).collect();
            let at = |needle: &str| lines.iter().position(|l| l.contains(needle));
            let add =
                at("git -C /src/proj worktree add /src/proj-resolve-r-1._integration crew/r-1");
            let cd = at("cd /src/proj-resolve-r-1._integration");
            let work = at(&step);
            assert!(
                add.is_some() && add < cd && cd < work,
                "{step} is not after entering the worktree: {m}"
            );
            assert!(m.ends_with("then: crewctl resume r-1"), "{m}");
        }
    }
}
