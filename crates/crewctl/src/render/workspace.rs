//! The workspace part of `crewctl status` for a worktree run: base, the run's branch, what was
//! integrated, and per task its branch and diffstat (a table, so it fits the terminal: the
//! long branch names are left out first when it is narrow; their pattern is always shown).

use super::table::{Col, Table};
use super::View;
use crate::style::Tone;
use crew_api::types::{RunWorkspaceView, TaskCommitView};

pub fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// `3 files changed, +10 -2`.
pub fn diffstat(files: u64, ins: u64, del: u64) -> String {
    format!(
        "{files} file{} changed, +{ins} -{del}",
        if files == 1 { "" } else { "s" }
    )
}

fn change(c: &TaskCommitView) -> String {
    if c.commit == c.start {
        "no change".to_string()
    } else {
        diffstat(c.files, c.insertions, c.deletions)
    }
}

pub fn lines(view: &View, ws: &RunWorkspaceView) -> String {
    let mut out = format!(
        "Workspace: worktree · base {}{}\n  run branch {}\n  task branches {}/<task>\n",
        short(&ws.base),
        if ws.dirty_base {
            " (your uncommitted changes)"
        } else {
            ""
        },
        ws.branch,
        ws.branch.replacen("crew/", "crew/tasks/", 1)
    );
    match &ws.integrated {
        Some(i) => out.push_str(&format!(
            "  integrated {}: {}\n",
            short(&i.commit),
            diffstat(i.files, i.insertions, i.deletions)
        )),
        None => out.push_str("  not integrated yet\n"),
    }
    if ws.tasks.is_empty() {
        return out;
    }
    let mut t = Table::new(vec![
        Col::new("TASK"),
        Col::new("CHANGE"),
        Col::new("COMMIT").drop(2),
        Col::new("BRANCH").drop(1),
    ]);
    for (task, c) in &ws.tasks {
        t.row(vec![
            task.as_str().into(),
            change(c).into(),
            short(&c.commit).into(),
            super::table::toned(view, Tone::Dim, &c.branch),
        ]);
    }
    out.push('\n');
    out.push_str(&t.render(view));
    out
}

/// What `crewctl diff <run> <task> --candidate k` says before the patch: the candidate's
/// checks and the step's choice (issue 36). Plain lines: `outln` escapes them for a terminal.
pub fn candidate_lines(tasks: &[crew_api::types::TaskView], task: &str, k: u32) -> Vec<String> {
    let mut out = Vec::new();
    let cand = tasks.iter().find(|t| {
        t.candidates
            .as_ref()
            .is_some_and(|c| c.of.as_deref() == Some(task) && c.index == Some(k))
    });
    if let Some(t) = cand {
        let c = t.candidates.as_ref();
        let runtime = c
            .and_then(|c| c.runtime.as_deref())
            .map(|r| format!(", {r}"))
            .unwrap_or_default();
        let model = t
            .model
            .as_deref()
            .map(|m| format!(" {m}"))
            .unwrap_or_default();
        out.push(format!(
            "candidate {k} of {task} ({}{runtime}{model}): {}",
            t.id,
            t.status.as_str()
        ));
        let failed = c.map(|c| c.failed_checks.as_slice()).unwrap_or_default();
        if failed.is_empty() && t.status.as_str() == "completed" {
            out.push("  checks: passed".into());
        }
        for f in failed {
            out.push(format!("  failed: {}", f.lines().next().unwrap_or("")));
        }
    }
    let choice = tasks
        .iter()
        .find(|t| t.id == task)
        .and_then(|t| t.candidates.as_ref()?.choice.as_ref());
    match choice {
        Some(ch) if ch.index == k => out.push(format!("  chosen ({}): {}", ch.by, ch.reason)),
        Some(ch) => out.push(format!(
            "  not chosen: candidate {} was ({}): {}",
            ch.index, ch.by, ch.reason
        )),
        None => out.push("  no choice made yet".into()),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::{assert_fits, at_80_and_160, view};
    use crew_api::types::WorkspaceMode;

    #[test]
    fn status_workspace_at_80_and_160_columns() {
        let run = "team_20260310115500_3f9a1c2e00001111";
        let c = |task: &str, start: &str, commit: &str, files, ins, del| TaskCommitView {
            branch: format!("crew/tasks/{run}/{task}"),
            start: start.repeat(40),
            commit: commit.repeat(40),
            files,
            insertions: ins,
            deletions: del,
        };
        let ws = RunWorkspaceView {
            mode: WorkspaceMode::Worktree,
            repo: "/home/me/project".into(),
            base: "a".repeat(40),
            dirty_base: true,
            branch: format!("crew/{run}"),
            integrated: Some(c("-", "a", "d", 3, 14, 2)),
            tasks: [
                ("01_explore".to_string(), c("01_explore", "a", "a", 0, 0, 0)),
                (
                    "02_execute".to_string(),
                    c("02_execute", "a", "b", 2, 12, 2),
                ),
                ("03_test".to_string(), c("03_test", "b", "c", 1, 2, 0)),
            ]
            .into_iter()
            .collect(),
        };
        for w in [80, 160] {
            assert_fits(&lines(&view(w), &ws), w);
        }
        insta::assert_snapshot!(at_80_and_160(|v| lines(v, &ws)));
    }

    #[test]
    fn a_candidate_s_lines_say_its_checks_and_the_choice() {
        use crew_api::types::{CandidatesView, ChoiceView, TaskView};
        let task = |id: &str, c: CandidatesView| -> TaskView {
            serde_json::from_value::<TaskView>(serde_json::json!({
                "id": id, "stepId": "s", "role": "r", "agent": "a", "dependsOn": [],
                "status": "completed", "attempts": 1,
                "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1},
                "progress": {"turns": 1, "tokens": 0}, "artifacts": []
            }))
            .map(|mut t| {
                t.candidates = Some(c);
                t
            })
            .unwrap()
        };
        let tasks = vec![
            task(
                "_cand-01_b-1",
                CandidatesView {
                    of: Some("01_b".into()),
                    index: Some(1),
                    failed_checks: vec!["`test -f ok.txt` exited with 1: \nmore".into()],
                    ..Default::default()
                },
            ),
            task(
                "01_b",
                CandidatesView {
                    select: Some("smallest".into()),
                    choice: Some(ChoiceView {
                        index: 2,
                        candidate: "_cand-01_b-2".into(),
                        by: "smallest".into(),
                        reason: "the smallest".into(),
                    }),
                    ..Default::default()
                },
            ),
        ];
        assert_eq!(
            candidate_lines(&tasks, "01_b", 1),
            [
                "candidate 1 of 01_b (_cand-01_b-1): completed",
                "  failed: `test -f ok.txt` exited with 1: ",
                "  not chosen: candidate 2 was (smallest): the smallest",
            ]
        );
    }
}
