//! The system prompt files of a run, for `team.artifacts`. Workers read their agent's system
//! prompt from `prompts/system-<digest>.md` (`crew_attempt::command::system_prompt_file`),
//! written when an attempt starts and shared by the tasks of one agent; no event names them, so
//! they are found from the run's plan and listed when they are on disk.

use crew_api::types::ArtifactInfo;
use crew_core::run::RunState;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

/// One distinct system prompt of a run, and the first task (in plan order) that uses it.
pub struct Prompt {
    text: Arc<str>,
    task_id: String,
}

/// The run's distinct system prompts (on the actor: clones `Arc`s, hashes nothing).
pub fn of_run(run: &RunState) -> Vec<Prompt> {
    // Tasks of one agent share one `Arc` (`plan::share_prompts`): the pointer is checked first,
    // so the text of each distinct prompt is hashed once, not once per task.
    let mut seen_ptr: HashSet<*const u8> = HashSet::new();
    let mut seen_text: HashSet<Arc<str>> = HashSet::new();
    let mut out: Vec<Prompt> = Vec::new();
    for t in &run.tasks {
        let text = &t.plan.system_prompt;
        if !seen_ptr.insert(Arc::as_ptr(text).cast::<u8>()) || !seen_text.insert(text.clone()) {
            continue;
        }
        out.push(Prompt {
            text: text.clone(),
            task_id: t.plan.id.to_string(),
        });
    }
    out
}

/// The ones whose file exists under `run_dir`, as artifacts of kind `system-prompt` (off the
/// actor: reads the files).
pub fn on_disk(run_dir: &Path, prompts: Vec<Prompt>) -> Vec<ArtifactInfo> {
    prompts
        .into_iter()
        .filter_map(|p| {
            let name = crate::artifacts::system_prompt_name(&p.text);
            // Read, not just stat'ed: the size and digest are of what the file holds now.
            let bytes = std::fs::read(run_dir.join(&name)).ok()?;
            Some(ArtifactInfo {
                name,
                kind: "system-prompt".into(),
                task_id: Some(p.task_id),
                bytes: bytes.len() as u64,
                sha256: crate::artifacts::sha256_hex(&bytes),
            })
        })
        .collect()
}
