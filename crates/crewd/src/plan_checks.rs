//! A plan's checks at `team.plan`/`team.run` (issue 17): verification commands, pre-step
//! scripts (issue 19) and seedPaths (issue 28) come only from files the user trusts, a `verify: true` step without commands of its own takes the project's
//! configured ones, and unset retries take the config's.
//!
//! Commands run as `sh -c <command>` in the task's workspace with the workers' environment, so
//! a command is exactly as powerful as the user's shell: that is why a repository the user did
//! not list in `trusted_projects` may not declare any (its `.crew/` workflow is refused here,
//! with a diagnostic naming file, line and field), while the user's own files, the builtins
//! and the config may.

use crate::config::ProjectConfig;
use crate::rpc::views;
use crate::shared::Shared;
use crew_api::ApiError;
use crew_core::plan::Plan;
use crew_core::resource::{Catalog, Diagnostic, Source};
use std::path::Path;
use std::sync::Arc;

/// The project's root and whether the config trusts it, as resource loading decides it.
pub fn project(shared: &Shared, cwd: &Path) -> Option<(std::path::PathBuf, bool)> {
    let root = crate::resources::project_root(cwd)?;
    let canon = root.canonicalize().unwrap_or_else(|_| root.clone());
    let same = |t: &Path| t.canonicalize().map(|t| t == canon).unwrap_or(false) || t == root;
    let trusted = shared.config.trusted_projects.iter().any(|t| same(t));
    Some((root, trusted))
}

/// The `[projects."…"]` section of the project whose root is `root`, if the config has one.
pub fn project_config<'a>(shared: &'a Shared, root: &Path) -> Option<&'a ProjectConfig> {
    let canon = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    shared
        .config
        .projects
        .iter()
        .find(|(r, _)| r.canonicalize().map(|r| r == canon).unwrap_or(false) || *r == root)
        .map(|(_, p)| p)
}

/// The configured `verify_commands` of the project whose root is `root`, if any.
fn project_commands(shared: &Shared, root: &Path) -> Vec<String> {
    project_config(shared, root)
        .map(|p| p.verify_commands.clone())
        .unwrap_or_default()
}

/// Refuse commands an untrusted project declares; resolve the rest into the plan's tasks.
pub fn apply(
    shared: &Shared,
    catalog: &Catalog,
    cwd: &Path,
    plan: &mut Plan,
) -> Result<(), ApiError> {
    let project = project(shared, cwd);
    let trusted = project.as_ref().is_some_and(|(_, t)| *t);
    // A chain's plan names its workflows joined with `+` (ids never hold one): each is judged,
    // or a chain with an untrusted project's team would run what that team alone may not.
    for wf in plan.workflow.split('+').filter_map(|w| catalog.workflow(w)) {
        if wf.source == Source::Project && !trusted {
            let mut diags: Vec<Diagnostic> = wf
                .steps
                .iter()
                .filter(|s| !s.verify_commands.is_empty())
                .map(|s| {
                    Diagnostic::error(
                        &wf.path,
                        Some(s.line),
                        Some("verifyCommands"),
                        format!(
                            "step `{}` declares verification commands, but this project is not \
                             trusted: a repository's own workflow may not run commands (add its \
                             root to `trusted_projects` in crewd's config, or configure \
                             `[projects.\"<root>\"] verify_commands` there)",
                            s.id
                        ),
                    )
                })
                .collect();
            // A pre-step script runs before the agent with the same power: the same rule.
            diags.extend(wf.steps.iter().filter(|s| s.pre_step.is_some()).map(|s| {
                Diagnostic::error(
                    &wf.path,
                    Some(s.line),
                    Some("preStepScript"),
                    format!(
                        "step `{}` declares a pre-step script, but this project is not trusted: \
                         a repository's own workflow may not run a script (add its root to \
                         `trusted_projects` in crewd's config, or put the workflow in your user \
                         workflows)",
                        s.id
                    ),
                )
            }));
            // Seeds copy files of the user's tree into a task's worktree (where the agent reads
            // them and may commit them): which files is the user's call, not a repository's.
            diags.extend(
                wf.steps
                    .iter()
                    .filter(|s| !s.seed_paths.is_empty())
                    .map(|s| {
                        Diagnostic::error(
                            &wf.path,
                            Some(s.line),
                            Some("seedPaths"),
                            format!(
                                "step `{}` declares seedPaths, but this project is not trusted: a \
                         repository's own workflow may not choose files of your tree to copy \
                         (add its root to `trusted_projects` in crewd's config, or put the \
                         workflow in your user workflows)",
                                s.id
                            ),
                        )
                    }),
            );
            if let Some(first) = diags.first() {
                return Err(ApiError::validation(
                    format!("the team cannot run: {}", first.message),
                    diags.iter().map(views::diagnostic).collect::<Vec<_>>(),
                ));
            }
        }
    }
    let configured = project
        .as_ref()
        .map(|(root, _)| project_commands(shared, root))
        .unwrap_or_default();
    for t in plan.tasks.iter_mut() {
        let Some(v) = &t.checks.verify else { continue };
        let mut task = t.clone();
        let mut verify = v.clone();
        if verify.commands.is_empty() {
            verify.commands = configured.clone();
        }
        verify.retries = verify.retries.or(Some(shared.config.verify_retries));
        if verify.commands.is_empty() {
            // pi-crew's `verify: true` (the builtins' verify steps have it) without commands
            // anywhere: the step's agent verifies, nothing else runs.
            task.checks.verify = None;
        } else {
            task.checks.verify = Some(verify);
        }
        *t = task;
    }
    Ok(())
}

/// What a note says about the checks a run will make, for `team.plan`'s reader.
pub fn describe(plan: &Plan, notes: &mut Vec<String>) {
    for t in &plan.tasks {
        if let Some(p) = &t.checks.pre_step {
            notes.push(format!(
                "task {} runs a pre-step script before its agent (its output joins the prompt): {}",
                t.id,
                p.display()
            ));
        }
        if let Some(v) = &t.checks.verify {
            notes.push(format!(
                "task {} runs {} verification command(s) after its agent: {}",
                t.id,
                v.commands.len(),
                v.commands.join("; ")
            ));
        }
    }
}

/// `Arc` form for the spec.
pub fn tasks(plan: &Plan) -> Vec<Arc<crew_core::plan::PlannedTask>> {
    plan.tasks.iter().cloned().map(Arc::new).collect()
}
