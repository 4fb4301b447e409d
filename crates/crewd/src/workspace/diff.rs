//! `team.diff`: a task's or the run's change, as a diffstat and a patch read from git up to a
//! limit.

use super::git;
use crate::shared::Shared;
use crew_api::types as api;
use crew_api::ApiError;
use crew_core::run::WorkspaceSpec;
use crew_git::GitError;

pub struct DiffInput {
    pub ws: WorkspaceSpec,
    pub branch: String,
    pub from: String,
    pub to: String,
}

pub async fn diff(
    shared: &Shared,
    input: DiffInput,
    stat_only: bool,
    limit: usize,
) -> Result<api::DiffResult, ApiError> {
    super::repository_there(&input.ws.repo)?;
    let git = git(shared);
    let repo = git.repo(&input.ws.repo);
    super::commits_there(
        &repo,
        &[
            ("start", input.from.as_str()),
            ("result", input.to.as_str()),
        ],
    )
    .await?;
    let internal = |e: GitError| ApiError::internal(format!("git: {e}"));
    let stat = repo
        .diffstat(&input.from, &input.to)
        .await
        .map_err(internal)?;
    let (patch, truncated) = if stat_only {
        (String::new(), false)
    } else {
        // At most `limit` bytes are read from git: a huge file is never held whole.
        let (bytes, truncated) = repo
            .diff(&input.from, &input.to, limit)
            .await
            .map_err(internal)?;
        (String::from_utf8_lossy(&bytes).into_owned(), truncated)
    };
    Ok(api::DiffResult {
        branch: input.branch,
        from: input.from,
        to: input.to,
        files: stat.files,
        insertions: stat.insertions,
        deletions: stat.deletions,
        patch,
        truncated,
    })
}
