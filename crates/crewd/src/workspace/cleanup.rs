//! forget/prune in the repository: a run's worktrees, branches and refs removed once its
//! `run.forgotten` is durable — and the answer given when that is done, naming what was kept.
//!
//! What is never removed: a worktree with uncommitted work (without `force`) and its branch; a
//! crew branch checked out in any worktree (crew's conflict messages send the user there); a
//! crew branch whose tip is not what crew put there — neither the commit the run recorded nor
//! the newest entry of its reflog written by crew (the user committed on it). Worktree metadata
//! is dropped only for crew's own worktrees (`prune_worktrees_under` the state directory),
//! never by a repository-wide `git worktree prune`.

use super::{all_worktrees, git, short, worktrees_dir, LEGACY_REPO_FILE, REPO_FILE};
use crate::shared::Shared;
use crew_core::run::workspace::run_branch;
use std::sync::Arc;

/// A run to clean up and the branch tips it recorded (full ref name, commit), where known; its
/// repository as the run knew it (worktree mode), for when the file beside its worktrees is
/// gone (the user deleted crew's worktrees folder).
pub struct Forgotten {
    pub run_id: String,
    pub recorded: Vec<(String, String)>,
    pub repo: Option<String>,
}

/// The repository a worktree-mode run works in.
pub fn repo_of_run(run: &crew_core::run::RunState) -> Option<String> {
    run.spec.workspace.as_ref().map(|w| w.repo.clone())
}

/// The branch tips a run recorded: its tasks' result commits and its integration.
pub fn recorded_tips(run: &crew_core::run::RunState) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = run
        .tasks
        .iter()
        .filter_map(|t| t.commit())
        .filter(|c| !c.branch.is_empty())
        .map(|c| (format!("refs/heads/{}", c.branch), c.commit.clone()))
        .collect();
    if let Some(i) = &run.integration {
        out.push((format!("refs/heads/{}", i.branch), i.commit.clone()));
    }
    out
}

/// Worktrees of the run with uncommitted work (what forget refuses to delete without force).
pub async fn uncommitted(shared: &Shared, run_id: &str) -> Vec<String> {
    let git = git(shared);
    let dir = worktrees_dir(shared, run_id);
    let mut out = Vec::new();
    let Ok(mut rd) = tokio::fs::read_dir(&dir).await else {
        return out;
    };
    while let Ok(Some(entry)) = rd.next_entry().await {
        let path = entry.path();
        if !path.join(".git").exists() {
            continue;
        }
        match git.repo(&path).dirty_paths().await {
            Ok(d) if d.is_empty() => {}
            _ => out.push(path.display().to_string()),
        }
    }
    out
}

/// Clean up after `runs` were forgotten, each in a task of its own (a client that goes away
/// does not cut it short), and answer with what was kept and why.
pub async fn after_forget(shared: Arc<Shared>, runs: Vec<Forgotten>, force: bool) -> Vec<String> {
    let mut notes = Vec::new();
    for run in runs {
        let shared = shared.clone();
        match tokio::spawn(remove_run(shared, run, force)).await {
            Ok(n) => notes.extend(n),
            Err(e) => notes.push(format!("cleaning up a run's worktrees failed: {e}")),
        }
    }
    notes
}

/// At start-up: the worktrees and branches of runs the journal no longer knows (forgotten by
/// a daemon killed before it cleaned up) go as forget would have removed them, under the same
/// rules: uncommitted work, a checked-out branch and a branch someone committed on are kept.
/// Nothing names their recorded tips any more, so a branch goes only when crew's own reflog
/// entry is its newest.
pub async fn sweep_unknown(shared: Arc<Shared>, known: &dyn Fn(&str) -> bool) {
    let Ok(mut rd) = tokio::fs::read_dir(all_worktrees(&shared)).await else {
        return;
    };
    let mut runs = Vec::new();
    while let Ok(Some(entry)) = rd.next_entry().await {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().await.is_ok_and(|t| t.is_dir());
        if is_dir && crew_core::ids::is_safe_id(&name) && !known(&name) {
            runs.push(Forgotten {
                run_id: name,
                recorded: Vec::new(),
                repo: None,
            });
        }
    }
    for run in &runs {
        tracing::info!(run = %run.run_id, "removing the worktrees and branches of a run the journal does not know (forgotten before a crash)");
    }
    for note in after_forget(shared, runs, false).await {
        tracing::warn!("{note}");
    }
}

/// The repository a run's worktrees belong to, from the file beside them.
async fn repo_of(dir: &std::path::Path) -> Option<String> {
    for name in [REPO_FILE, LEGACY_REPO_FILE] {
        let p = dir.join(name);
        if tokio::fs::metadata(&p).await.is_ok_and(|m| m.is_file()) {
            if let Ok(s) = tokio::fs::read_to_string(&p).await {
                return Some(s.trim().to_string());
            }
        }
    }
    None
}

/// Remove the run's worktrees, branches and refs; the notes say what was kept.
async fn remove_run(shared: Arc<Shared>, run: Forgotten, force: bool) -> Vec<String> {
    let run_id = run.run_id.as_str();
    let dir = worktrees_dir(&shared, run_id);
    let mut notes = Vec::new();
    // Worktrees whose content could not be saved in their repository (`worktree::retire`):
    // the user's to look at, never removed by crew.
    let unsaved = shared.state_dir.join("unsaved").join(run_id);
    if tokio::fs::try_exists(&unsaved).await.unwrap_or(false) {
        notes.push(format!(
            "kept {}: files of the run's worktrees that could not be saved in its repository; \
             remove it when you are done",
            crew_core::text::escape(&unsaved.display().to_string())
        ));
    }
    let Some(repo_path) = repo_of(&dir).await.or(run.repo.clone()) else {
        return notes;
    };
    if !std::path::Path::new(&repo_path).is_dir() {
        let repo_shown = crew_core::text::escape(&repo_path);
        notes.push(format!(
            "kept run {run_id}'s branches and refs: its repository {repo_shown} is not there any \
             more (moved or deleted?). Where it is now, `git for-each-ref refs/heads/crew/{run_id} \
             refs/heads/crew/tasks/{run_id}/ refs/crew/{run_id}/` lists them"
        ));
        return notes;
    }
    let git = git(&shared);
    let repo = git.repo(&repo_path);
    let dirty = if force {
        Vec::new()
    } else {
        uncommitted(&shared, run_id).await
    };
    let mut kept_tasks = Vec::new();
    if let Ok(mut rd) = tokio::fs::read_dir(&dir).await {
        while let Ok(Some(entry)) = rd.next_entry().await {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == REPO_FILE || (name == LEGACY_REPO_FILE && !path.is_dir()) {
                continue;
            }
            if dirty.contains(&path.display().to_string()) {
                notes.push(format!(
                    "kept worktree {} (it holds uncommitted work; forget with force to remove it)",
                    path.display()
                ));
                kept_tasks.push(name);
                continue;
            }
            if let Err(e) = repo.worktree_remove(&path).await {
                tracing::warn!(error = %e, "git worktree remove failed");
                let _ = tokio::fs::remove_dir_all(&path).await;
            }
        }
    }
    let _ = repo.prune_worktrees_under(&all_worktrees(&shared)).await;
    let mut refs = Vec::new();
    for prefix in [
        format!("refs/heads/crew/tasks/{run_id}/"),
        format!("refs/crew/{run_id}/"),
    ] {
        match repo.refs_under(&prefix).await {
            Ok(r) => refs.extend(r),
            Err(e) => notes.push(format!("cannot list the run's refs under {prefix}: {e}")),
        }
    }
    let run_ref = format!("refs/heads/{}", run_branch(run_id));
    match repo.resolve(&run_ref).await {
        Ok(Some(_)) => refs.push(run_ref),
        Ok(None) => {}
        Err(e) => notes.push(format!("cannot read {run_ref}: {e}")),
    }
    refs.retain(|r| !kept_tasks.iter().any(|t| r.ends_with(&format!("/{t}"))));
    let checked_out = repo.checked_out_branches().await.unwrap_or_default();
    let mut doomed = Vec::new();
    // The command names the repository: prune cleans runs of every repository at once.
    let repo_arg = crew_core::text::escape(&crew_core::text::shell_word(&repo_path)).into_owned();
    let kept = |r: &str, why: &str| {
        let b = r.strip_prefix("refs/heads/").unwrap_or(r);
        format!(
            "kept branch {b}: {why} (delete it with `git -C {repo_arg} branch -D {b}` when you \
             are done)"
        )
    };
    for r in refs {
        match keep_reason(&repo, &r, &run.recorded, &checked_out).await {
            Keep::Yes(why) => notes.push(kept(&r, &why)),
            // Deleted only at the tip that was judged: a commit made since stays.
            Keep::No(tip) => doomed.push((r, tip)),
        }
    }
    match repo.delete_refs(&doomed).await {
        Ok(moved) => notes.extend(
            moved
                .iter()
                .map(|r| kept(r, "it moved while the run was forgotten")),
        ),
        Err(e) => {
            tracing::warn!(run = %run_id, error = %e, "cannot delete the run's branches");
            notes.push(format!("cannot delete the run's branches: {e}"));
        }
    }
    if kept_tasks.is_empty() {
        let _ = tokio::fs::remove_dir_all(&dir).await;
    }
    notes
}

/// Why `name` must stay, or `None` when it is crew's to delete. Only branches can be checked
/// out or committed on; crew's other refs (`refs/crew/…`) are its own.
/// Whether a ref of the run stays: why, or the tip it may be deleted at (`None`: any).
enum Keep {
    Yes(String),
    No(Option<String>),
}

async fn keep_reason(
    repo: &crew_git::Repo,
    name: &str,
    recorded: &[(String, String)],
    checked_out: &[String],
) -> Keep {
    if !name.starts_with("refs/heads/") {
        return Keep::No(None);
    }
    if checked_out.iter().any(|b| b == name) {
        return Keep::Yes("it is checked out in a worktree".into());
    }
    let tip = match repo.resolve(name).await {
        Ok(Some(t)) => t,
        Ok(None) => return Keep::No(None),
        Err(e) => return Keep::Yes(format!("cannot read it ({e})")),
    };
    if recorded.iter().any(|(r, c)| r == name && *c == tip) {
        return Keep::No(Some(tip));
    }
    match repo.last_move(name).await {
        Ok(Some(m)) if m.email == crew_git::AUTHOR_EMAIL && m.commit == tip => Keep::No(Some(tip)),
        _ => Keep::Yes(format!(
            "its tip {} is not a commit crew put there (someone committed on it)",
            short(&tip)
        )),
    }
}
