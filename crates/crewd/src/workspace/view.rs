//! The status view of a worktree run: its base, its branch and every commit it made.

use crew_api::types as api;
use crew_core::run::workspace::run_branch;
use crew_core::run::TaskCommit;

/// The status view of a worktree run.
pub fn view(run: &crew_core::run::RunState) -> Option<api::RunWorkspaceView> {
    let ws = run.spec.workspace.as_ref()?;
    let commit_view = |c: &TaskCommit| api::TaskCommitView {
        branch: c.branch.clone(),
        start: c.start.clone(),
        commit: c.commit.clone(),
        files: c.files,
        insertions: c.insertions,
        deletions: c.deletions,
    };
    Some(api::RunWorkspaceView {
        mode: api::WorkspaceMode::Worktree,
        repo: ws.repo.clone(),
        base: ws.base.clone(),
        dirty_base: ws.dirty,
        branch: run_branch(&run.id),
        integrated: run.integration.as_ref().map(|i| api::TaskCommitView {
            branch: i.branch.clone(),
            start: ws.base.clone(),
            commit: i.commit.clone(),
            files: i.files,
            insertions: i.insertions,
            deletions: i.deletions,
        }),
        tasks: run
            .tasks
            .iter()
            .filter_map(|t| Some((t.plan.id.to_string(), commit_view(t.commit()?))))
            .collect(),
    })
}
