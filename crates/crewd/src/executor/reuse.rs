//! The executor's side of result reuse: an attempt's fingerprint (from its spec and prompt) and
//! entering a writing task's result once its commit exists. The cache itself is `results`,
//! which knows nothing of attempts.

use crate::attempt::AttemptSpec;
use crate::results;
use crate::shared::Shared;
use crew_core::run::Reuse;

/// Whether this attempt may take a cached result, and its fingerprint if so: runtime, model,
/// system prompt, full prompt, and the cwd's git HEAD plus a hash of its uncommitted changes
/// (tracked and untracked).
pub(super) async fn fingerprint_for(spec: &AttemptSpec, prompt: &str) -> Option<String> {
    let allowed = match spec.reuse {
        Reuse::Off => false,
        Reuse::ReadOnly => !spec.plan.writes,
        // In worktree mode the key holds the task's start commit (the worktree's clean HEAD),
        // and a writing task's entry holds its result commit, which a reuse takes.
        Reuse::All => true,
    };
    if !allowed {
        return None;
    }
    let tree = results::git_state(&spec.cwd).await?;
    // Besides the SPEC's list: what else changes the agent's answer for the same prompt (the
    // program behind the runtime name, how the system prompt is applied, tools, thinking).
    let program = format!(
        "{:?} {:?}",
        spec.runtime.adapter,
        spec.runtime.command.argv()
    );
    // The skills are in the prompt too, but pi also gets them as files: their names count.
    let skills: Vec<&str> = spec.plan.skills.iter().map(|s| s.name.as_str()).collect();
    let mut settings = format!(
        "{:?} {:?} {:?} {:?}",
        spec.plan.system_prompt_mode, spec.plan.tools, spec.plan.thinking, skills
    );
    // Only when set, so the keys of results cached before `effort` existed stay the same.
    if let Some(effort) = &spec.plan.effort {
        settings.push_str(&format!(" effort={effort:?}"));
    }
    // N candidates of one runtime and model are N results, not one (issue 36).
    if let Some((_, index)) = crew_core::run::candidates::candidate_of(&spec.plan) {
        settings.push_str(&format!(" candidate={index}"));
    }
    Some(results::fingerprint(&[
        spec.runtime_name.as_str(),
        program.as_str(),
        spec.model.as_deref().unwrap_or(""),
        &*spec.plan.system_prompt,
        settings.as_str(),
        prompt,
        tree.as_str(),
    ]))
}

/// After a writing task's attempt in worktree mode: its cache entry, held by the attempt, is
/// entered with the result commit now that the commit exists.
pub(super) fn insert_after_commit(
    shared: &Shared,
    spec: &AttemptSpec,
    result: &crew_core::run::AttemptResult,
) {
    let held = spec
        .cache_after_commit
        .lock()
        .ok()
        .and_then(|mut h| h.take());
    let Some((fp, mut entry)) = held else {
        return;
    };
    if let crew_core::run::AttemptResult::Completed {
        commit: Some(c),
        reused_from: None,
        ..
    } = result
    {
        entry.commit = Some(c.commit.clone());
        shared.results.insert(fp, entry);
    }
}

/// Whether `commit` is a commit of the repository `cwd` is in (a cached result commit can be
/// gone: another clone of the same history, or collected after its run was forgotten).
pub(super) async fn commit_present(shared: &Shared, cwd: &str, commit: &str) -> bool {
    crate::workspace::git(shared)
        .repo(cwd)
        .resolve(commit)
        .await
        .is_ok_and(|c| c.as_deref() == Some(commit))
}
