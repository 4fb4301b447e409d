//! The confirmation an imported run needs: `team.resume` and `team.retry` of it fail with 1002
//! and show what would run (error `data`) unless called with `confirmImported: true`. Its
//! system prompts, tools, runtime name and cwd are someone else's.

use crate::artifacts::sha256_hex;
use crate::rpc::Ctx;
use crew_api::ApiError;
use crew_core::run::{RunState, TaskState};
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// What resuming or retrying an imported run would execute, for the user to confirm: every
/// task that can run once the run runs again — the tasks a retry names (and their dependents,
/// which a retry may bring back, completed ones too `withDependents`), and every task not
/// completed (a queued one starts as soon as the run runs, a waiting one once answered, a
/// skipped one comes back with what it waited for) — and every command.
pub(super) fn imported_preview(run: &RunState, only: Option<&[String]>) -> Value {
    let named = with_dependents(run, only);
    let tasks: Vec<Value> = run
        .tasks
        .iter()
        .filter(|t| {
            named.contains(t.plan.id.as_str()) || t.status != crew_core::run::TaskStatus::Completed
        })
        .map(|t| preview_task(run, t))
        .collect();
    let commands = preview_commands(run, &tasks);
    let added = added_roles(run);
    json!({
        "imported": true,
        "commands": commands,
        "addedRoles": added,
        "runtime": run.spec.runtime,
        "cwd": run.spec.cwd,
        // Worktree mode: the repository git runs in, whose checkout the agents see.
        "repo": run.spec.workspace.as_ref().map(|w| &w.repo),
        "model": run.spec.model,
        "taskVerifyCommands": run.spec.task_verify_commands,
        "goal": run.spec.goal.chars().take(400).collect::<String>(),
        "tasks": tasks,
    })
}

/// The tasks `only` names, and their dependents, transitively.
fn with_dependents<'a>(run: &'a RunState, only: Option<&'a [String]>) -> BTreeSet<&'a str> {
    let mut named: BTreeSet<&str> = only
        .unwrap_or_default()
        .iter()
        .map(String::as_str)
        .collect();
    // A plan is ordered: dependencies come first.
    for t in &run.tasks {
        if t.plan.depends_on.iter().any(|d| named.contains(d.as_str())) {
            named.insert(&t.plan.id);
        }
    }
    named
}

/// One task as the confirmation shows it: who runs it, how, and the start of what it is told.
fn preview_task(run: &RunState, t: &TaskState) -> Value {
    let prompt: &str = &t.plan.system_prompt;
    let head: String = prompt.chars().take(400).collect();
    json!({
        "id": t.plan.id,
        "agent": t.plan.agent,
        // A candidate may run on another runtime than the run's (issue 36).
        "runtime": crew_core::run::candidates::runtime_of(&t.plan)
            .unwrap_or(&run.spec.runtime),
        "model": t.plan.model,
        "tools": t.plan.tools.as_ref(),
        "thinking": t.plan.thinking,
        "systemPromptBytes": prompt.len(),
        "systemPromptSha256": sha256_hex(prompt.as_bytes()),
        "systemPrompt": head,
        "task": t.plan.task_template.chars().take(400).collect::<String>(),
        // Commands the bundle would have this daemon run besides the agent (issues
        // 17, 29): the pre-step script with its arguments, and verification commands.
        "preStep": t.plan.checks.pre_step.as_ref().map(|p| p.display()),
        "verifyCommands": t.plan.checks.verify.as_ref().map(|v| &v.commands),
        // Files of the user's own tree a worktree task is handed (issue 28): a bundle naming
        // `.env` would have its agent read it.
        "seedPaths": t.plan.seed_paths,
    })
}

/// Every command line the shown `tasks` (their previews) would run besides their agents, and
/// the project's per-task checks.
fn preview_commands(run: &RunState, tasks: &[Value]) -> Vec<String> {
    let mut commands: Vec<String> = run
        .tasks
        .iter()
        .filter(|t| tasks.iter().any(|v| v["id"].as_str() == Some(&*t.plan.id)))
        .flat_map(|t| task_commands(&t.plan))
        .collect();
    // The project's per-task checks, frozen in the run (`executor::checks::verify_commands`):
    // after every editing task without checks of its own, the tasks crew adds (fix, fan-out,
    // resolve) included.
    commands.extend(
        run.spec
            .task_verify_commands
            .iter()
            .map(|c| format!("every editing task without checks of its own verify: {c}")),
    );
    commands
}

/// Roles crew may add tasks of once the run runs (a judge's fixer, a fan-out's roles, a
/// candidates' judge, the conflict resolver): their agents, tools and prompts are the
/// bundle's too, and an editing one writes the workspace.
fn added_roles(run: &RunState) -> Vec<Value> {
    let mut templates: Vec<&crew_core::fanout::RoleTemplate> = Vec::new();
    templates.extend(
        run.spec
            .workspace
            .as_ref()
            .and_then(|w| w.resolver.as_deref()),
    );
    for t in &run.tasks {
        templates.extend(t.plan.judging.fix.as_ref().map(|f| &f.fixer));
        if let Some(e) = &t.plan.expands {
            templates.extend(e.roles.iter());
            templates.extend(e.candidates.as_ref().and_then(|c| c.judge.as_deref()));
        }
        if let Some(crew_core::run::candidates::Candidacy::Asked { judge, .. }) =
            t.plan.candidates.as_deref()
        {
            templates.extend(judge.as_deref());
        }
    }
    templates
        .into_iter()
        .map(|r| {
            let prompt: &str = &r.system_prompt;
            json!({
                "role": r.role,
                "agent": r.agent,
                "model": r.model,
                "tools": r.tools.as_ref(),
                "systemPromptBytes": prompt.len(),
                "systemPromptSha256": sha256_hex(prompt.as_bytes()),
                "systemPrompt": prompt.chars().take(400).collect::<String>(),
            })
        })
        .collect()
}

/// Every command line a task runs besides its agent: `pre-step: …` and `verify: …`, in the
/// order they run, after the files of the user's checkout it is handed (`seedPaths`).
fn task_commands(plan: &crew_core::plan::PlannedTask) -> Vec<String> {
    let id = &plan.id;
    let pre = plan
        .checks
        .pre_step
        .iter()
        .map(|p| format!("{id} pre-step: {}", p.display()));
    let verify = plan
        .checks
        .verify
        .iter()
        .flat_map(|v| v.commands.iter())
        .map(|c| format!("{id} verify: {c}"));
    let seeds = plan
        .seed_paths
        .iter()
        .map(|p| format!("{id} copies from your checkout into its worktree: {p}"));
    seeds.chain(pre).chain(verify).collect()
}

/// `team.resume`/`team.retry` of an imported run: refused (1002, `data` = what would run)
/// unless `confirmed`. The run's prompts, tools, runtime and cwd came from a bundle.
pub async fn confirm_imported(
    ctx: &Ctx,
    run_id: &str,
    confirmed: Option<bool>,
    only: Option<Vec<String>>,
) -> Result<(), ApiError> {
    if confirmed == Some(true) {
        return Ok(());
    }
    let preview = crate::rpc::team::with_run(ctx, run_id, move |run| {
        run.spec
            .imported
            .then(|| imported_preview(run, only.as_deref()))
    })
    .await?;
    let Some(preview) = preview else {
        return Ok(());
    };
    let agents: BTreeSet<&str> = preview["tasks"]
        .as_array()
        .into_iter()
        .chain(preview["addedRoles"].as_array())
        .flatten()
        .filter_map(|t| t["agent"].as_str())
        .collect();
    let mut runtimes: BTreeSet<&str> = preview["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["runtime"].as_str())
        .collect();
    runtimes.insert(preview["runtime"].as_str().unwrap_or(""));
    // Every command is named in the message itself, not only in `data`: a client that shows
    // the message shows what would run.
    let commands: Vec<&str> = preview["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let commands = if commands.is_empty() {
        "no command besides the agents".to_string()
    } else {
        // Bounded like any message; `data.commands` has each whole.
        crew_core::text::bound(
            format!("these commands: {}", commands.join("; ")),
            crew_core::text::MAX_REASON_CHARS,
        )
    };
    let repo = preview["repo"]
        .as_str()
        .map(|r| format!(" (worktrees of the repository {r})"))
        .unwrap_or_default();
    Err(ApiError::invalid_state(format!(
        "run {run_id} was imported from a bundle: it would run that bundle's system prompts \
         and tools (agents: {}) with runtime `{}` in {}{repo}, and {commands}; see this \
         error's data for exactly what, and call again with confirmImported: true to run it",
        agents.into_iter().collect::<Vec<_>>().join(", "),
        runtimes.into_iter().collect::<Vec<_>>().join("`, `"),
        preview["cwd"].as_str().unwrap_or("")
    ))
    .with_data(preview))
}
