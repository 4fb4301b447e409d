//! `crewctl diff <run> [task]`: a worktree run's change (or one task's) as a diffstat and patch.

use crate::ctx::{outln, Ctx};
use crate::exit;
use crate::resolve::RunRef;
use crew_api::methods::TeamDiff;
use crew_api::types::{DiffParams, RunIdParams};

pub async fn diff(
    ctx: &Ctx,
    run: &RunRef,
    task_id: Option<String>,
    stat: bool,
    candidate: Option<u32>,
) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let r = conn
        .call::<TeamDiff>(&DiffParams {
            run_id: run_id.to_string(),
            task_id: task_id.clone(),
            stat: stat.then_some(true),
            limit: None,
            candidate: candidate.map(i64::from),
        })
        .await?;
    if ctx.json {
        ctx.json(&r)?;
        return Ok(exit::SUCCESS);
    }
    if let (Some(k), Some(task)) = (candidate, &task_id) {
        let s = conn
            .call::<crew_api::methods::TeamStatus>(&RunIdParams {
                run_id: run_id.to_string(),
            })
            .await?;
        for line in crate::render::workspace::candidate_lines(&s.tasks, task, k) {
            outln(&line)?;
        }
    }
    outln(&format!(
        "{}: {} ({}..{})",
        r.branch,
        diffstat(r.files, r.insertions, r.deletions),
        short(&r.from),
        short(&r.to)
    ))?;
    if !r.patch.is_empty() {
        crate::ctx::out_raw(&r.patch)?;
        if r.truncated {
            outln("… (patch cut; see `git diff` of the branch for all of it)")?;
        }
    }
    Ok(exit::SUCCESS)
}

pub use crate::render::workspace::{diffstat, short};

/// `crewctl pick <run> <task> <k>`: `team.pick`.
pub async fn pick(ctx: &Ctx, run: &RunRef, task_id: String, candidate: u32) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = run.resolve(&conn).await?;
    let r = conn
        .call::<crew_api::methods::TeamPick>(&crew_api::types::PickParams {
            run_id: run_id.to_string(),
            task_id: task_id.clone(),
            candidate: i64::from(candidate),
        })
        .await?;
    if ctx.json {
        ctx.json(&r)?;
        return Ok(exit::SUCCESS);
    }
    outln(&format!(
        "{task_id}: now {} (candidate {candidate})",
        r.chosen
    ))?;
    // A candidate its checks ruled out can be picked: say so, once, where the person sees it.
    if let Some(failed) = failed_checks_of(&conn, &run_id, &r.chosen).await {
        let v = ctx.view();
        outln(&format!(
            "{} its checks failed: {}",
            v.p(crate::style::Tone::Warn, "note:"),
            failed
        ))?;
    }
    if !r.requeued_task_ids.is_empty() {
        outln(&format!(
            "running again from it: {}",
            r.requeued_task_ids.join(", ")
        ))?;
    }
    Ok(exit::SUCCESS)
}

/// The first failing check of candidate `task`, if its checks failed.
async fn failed_checks_of(conn: &crate::conn::Conn, run_id: &str, task: &str) -> Option<String> {
    let s = conn
        .call::<crew_api::methods::TeamStatus>(&RunIdParams {
            run_id: run_id.to_string(),
        })
        .await
        .ok()?;
    let t = s.tasks.iter().find(|t| t.id == task)?;
    t.candidates.as_ref()?.failed_checks.first().cloned()
}

/// After `run` followed a worktree run to its end: where its result is and what to do next.
pub async fn print_integration(ctx: &Ctx, run_id: &str) {
    let Ok(conn) = ctx.connect().await else {
        return;
    };
    let Ok(s) = conn
        .call::<crew_api::methods::TeamStatus>(&RunIdParams {
            run_id: run_id.to_string(),
        })
        .await
    else {
        return;
    };
    if let Some(line) = integration_line(&s, crate::render::ids::hint(run_id)) {
        let _ = outln(&line);
    }
}

/// Where a worktree run's result is and what to do with it (`short`: the run as hints name
/// it, which `diff` and `apply` resolve as every verb does). `None`: not a worktree run.
fn integration_line(s: &crew_api::types::StatusResult, short: &str) -> Option<String> {
    let ws = s.workspace.as_ref()?;
    let failing = s.run.verdict.as_deref().filter(|v| *v != "pass");
    Some(match &ws.integrated {
        Some(i) if failing.is_some() => format!(
            "Result on {}: {}, but the judges did not pass it (verdict: {}). See it: crewctl diff {short} · take it anyway: crewctl apply --force {short}",
            i.branch,
            diffstat(i.files, i.insertions, i.deletions),
            failing.unwrap_or_default()
        ),
        // Nothing changed (the team found nothing to do): nothing to take.
        Some(i) if i.files == 0 => format!("Result on {}: no changes.", i.branch),
        Some(i) => format!(
            "Result on {}: {}. See it: crewctl diff {short} · take it: crewctl apply {short}",
            i.branch,
            diffstat(i.files, i.insertions, i.deletions)
        ),
        None => format!("Nothing integrated on {} yet.", ws.branch),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crew_api::types::{RunWorkspaceView, TaskCommitView, WorkspaceMode};

    #[test]
    fn the_result_line_says_what_there_is_to_take() {
        let mut s = crate::render::runs::tests::status_fixture();
        assert_eq!(integration_line(&s, "abc"), None, "not a worktree run");
        let commit = |files| TaskCommitView {
            branch: "crew/r".into(),
            start: "s".into(),
            commit: "c".into(),
            files,
            insertions: 2,
            deletions: 1,
        };
        let mut ws = RunWorkspaceView {
            mode: WorkspaceMode::Worktree,
            repo: "/repo".into(),
            base: "b".into(),
            dirty_base: false,
            branch: "crew/r".into(),
            integrated: None,
            tasks: Default::default(),
        };
        s.workspace = Some(ws.clone());
        assert_eq!(
            integration_line(&s, "abc").unwrap(),
            "Nothing integrated on crew/r yet."
        );
        ws.integrated = Some(commit(0));
        s.workspace = Some(ws.clone());
        assert_eq!(
            integration_line(&s, "abc").unwrap(),
            "Result on crew/r: no changes."
        );
        ws.integrated = Some(commit(3));
        s.workspace = Some(ws);
        let line = integration_line(&s, "abc").unwrap();
        assert!(
            line.starts_with("Result on crew/r: 3 files changed, +2 -1.")
                && line.ends_with("take it: crewctl apply abc"),
            "{line}"
        );
        s.run.verdict = Some("fail".into());
        let line = integration_line(&s, "abc").unwrap();
        assert!(line.contains("apply --force abc"), "{line}");
    }
}
