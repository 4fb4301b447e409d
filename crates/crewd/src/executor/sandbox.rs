//! The box around a local attempt (issue 34): the attempt's paths put into the box's rules
//! (`crew_attempt::sandbox`, which `crew-worker` uses for the same attempt on a node), run by
//! bubblewrap (`crew_box::bwrap`) under crew's init. Whether bubblewrap works here is found
//! once (`boxing`) and said at start-up.

use crate::config::{Config, RuntimeConfig, SandboxMode};
use crew_box::bwrap::BoxSpec;
use std::path::{Path, PathBuf};

pub use crew_attempt::sandbox::{
    boxing, bwrap_for, inside_box, make_agent_dirs, spec, Inputs, RunDir, Worktree,
};

/// The daemon's mode and what it means here, said once at start-up.
pub fn announce(config: &Config) {
    let on = |m: &Option<SandboxMode>| m.is_some_and(|m| m != SandboxMode::Off);
    let any_on = config.sandbox != SandboxMode::Off
        || config.runtimes.values().any(|r| on(&r.sandbox))
        || config.projects.values().any(|p| on(&p.sandbox));
    if !any_on {
        tracing::info!("sandbox = \"off\": local attempts are not boxed");
        return;
    }
    match boxing() {
        Ok(b) => tracing::info!(bwrap = %b.display(), "local attempts are boxed (bubblewrap)"),
        Err(why) => tracing::warn!(
            "{why}: with sandbox = \"auto\" local attempts run unboxed; with \"required\" they do not start"
        ),
    }
}

/// What `daemon.status` says about the box: the daemon's mode here, then the runtimes and
/// projects that set their own.
pub fn status(config: &Config) -> String {
    let base = match (config.sandbox, boxing()) {
        (SandboxMode::Off, _) => "off".to_string(),
        (_, Ok(_)) => "bubblewrap".into(),
        (SandboxMode::Auto, Err(why)) => format!("unavailable, attempts run unboxed: {why}"),
        (SandboxMode::Required, Err(why)) => format!("unavailable, attempts do not start: {why}"),
    };
    let word = |m: SandboxMode| match m {
        SandboxMode::Auto => "auto",
        SandboxMode::Required => "required",
        SandboxMode::Off => "off",
    };
    let own: Vec<String> = config
        .runtimes
        .iter()
        .filter_map(|(n, r)| Some(format!("runtime {n} {}", word(r.sandbox?))))
        .chain(
            config
                .projects
                .iter()
                .filter_map(|(p, c)| Some(format!("project {} {}", p.display(), word(c.sandbox?)))),
        )
        .collect();
    if own.is_empty() {
        return base;
    }
    // Where a mode needs the box and it is not there, say it whatever the daemon's says.
    let missing = match (config.sandbox, boxing()) {
        (SandboxMode::Off, Err(why)) => format!(" (bubblewrap unavailable: {why})"),
        _ => String::new(),
    };
    format!("{base}; set apart: {}{missing}", own.join(", "))
}

/// The attempt's mode: the runtime's (with its project's over it: `in_project`), else the
/// daemon's.
pub fn mode(config: &Config, runtime: &RuntimeConfig) -> SandboxMode {
    runtime.sandbox.unwrap_or(config.sandbox)
}

/// Whether `task`'s boxed attempts on `runtime` get a network: unless the runtime or the
/// task's role (`network=false`) says not.
pub fn network(runtime: &RuntimeConfig, task: &crew_core::plan::PlannedTask) -> bool {
    runtime.network.unwrap_or(true) && task.network != Some(false)
}

/// `runtime` as it runs a task of a run in `cwd`: the `sandbox` of the configured project
/// holding `cwd` (the deepest `[projects."<root>"]` at or above it) over the runtime's.
///
/// Decided by the config's paths alone, never by what is in the tree (a `.git` or `.crew`
/// marks a project root elsewhere): in shared mode a boxed agent writes the run's cwd, and a
/// `.crew` it made there must not move its later attempts out of their project's box.
pub fn in_project(config: &Config, runtime: &RuntimeConfig, cwd: &Path) -> RuntimeConfig {
    let mut rt = runtime.clone();
    if let Some(m) = project_sandbox(config, cwd) {
        rt.sandbox = Some(m);
    }
    rt
}

/// The `sandbox` of the configured project holding `cwd`, if it sets one (`in_project`).
/// Nothing is read when no project sets one: the usual case, on every attempt's start.
pub fn project_sandbox(config: &Config, cwd: &Path) -> Option<SandboxMode> {
    if config.project_sandboxes.is_empty() {
        return None;
    }
    // The roots as they were when the config was read (`Config::project_sandboxes`); the
    // run's cwd as it is (its folder is not the agent's to replace).
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    config
        .project_sandboxes
        .iter()
        .filter(|(root, _)| cwd.starts_with(root))
        .max_by_key(|(root, _)| root.components().count())
        .map(|(_, m)| *m)
}

/// The box of an attempt's verify commands and pre-step script: its workspace writable (the
/// checkout read-only in worktree mode), toolchains and caches, no agent's files, the network
/// as `verify_network` says. `Ok(None)`: unboxed.
pub fn command_box(
    shared: &crate::shared::Shared,
    spec: &crate::attempt::AttemptSpec,
) -> Result<Option<(&'static Path, BoxSpec)>, String> {
    let Some(bwrap) = bwrap_for(mode(&shared.config, &spec.runtime))? else {
        return Ok(None);
    };
    check_workdir(shared, spec)?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let worktree = own_worktree(shared, spec);
    let b = crew_attempt::sandbox::command_spec(
        home.as_deref(),
        Path::new(&spec.cwd),
        spec.workspace.as_ref().map(|w| Path::new(&w.repo)),
        worktree.as_ref(),
        &spec.runtime.sandbox_read,
        &spec.runtime.sandbox_write,
        shared.config.verify_network,
    );
    Ok(Some((bwrap, b)))
}

/// The attempt's own object directory, made empty: `<run>/objects/<task>.attempt-<n>/`
/// (`crew_attempt::sandbox::make_own_objects`). `None`: not in worktree mode, or the
/// repository's objects are not at `.git/objects` (a checkout that is itself a linked
/// worktree): the box then has them read-only.
pub fn own_objects(spec: &crate::attempt::AttemptSpec) -> std::io::Result<Option<PathBuf>> {
    let Some(ws) = &spec.workspace else {
        return Ok(None);
    };
    if !Path::new(&ws.repo).join(".git/objects").is_dir() {
        return Ok(None);
    }
    let dir = spec
        .run_dir
        .join("objects")
        .join(format!("{}.attempt-{}", spec.task_id, spec.attempt));
    crew_attempt::sandbox::make_own_objects(&dir)?;
    Ok(Some(dir))
}

/// After the attempt: the objects it made come into the repository (`Repo::take_objects`,
/// each checked), then its directory goes.
pub async fn take_objects(
    shared: &crate::shared::Shared,
    spec: &crate::attempt::AttemptSpec,
    dir: &Path,
) -> Result<(), String> {
    let Some(ws) = &spec.workspace else {
        return Ok(());
    };
    let git = crate::workspace::git(shared);
    git.repo(&ws.repo)
        .take_objects(&dir.join("objects"))
        .await
        .map_err(|e| format!("cannot bring the attempt's git objects into the repository: {e}"))?;
    let dir = dir.to_path_buf();
    let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
    Ok(())
}

/// At start-up, before any attempt: the object directories (`own_objects`) of attempts a
/// killed daemon left in `runs` (active runs: run directory, repository). Their objects come
/// into the repository — the agent's commits, which its worktree's detached HEAD names, so
/// the next attempt's `workspace::prepare` keeps that tree — then they go.
pub async fn recover_objects(shared: &crate::shared::Shared, runs: Vec<(PathBuf, String)>) {
    let git = crate::workspace::git(shared);
    for (run_dir, repo) in runs {
        let dir = run_dir.join("objects");
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in rd.flatten() {
            let left = entry.path();
            match git.repo(&repo).take_objects(&left.join("objects")).await {
                Ok(n) => {
                    tracing::info!(dir = %left.display(), objects = n, "took in the git objects of an attempt a killed daemon left")
                }
                Err(e) => {
                    tracing::warn!(dir = %left.display(), error = %e, "cannot take in the git objects of an attempt a killed daemon left; removed")
                }
            }
            if let Err(e) = std::fs::remove_dir_all(&left) {
                tracing::warn!(dir = %left.display(), error = %e, "cannot remove an attempt's object directory");
            }
        }
    }
}

/// Whether `runtime`'s attempts run in a box here (local, mode not `off`, bubblewrap works).
/// A Slurm runtime's are boxed, or not, by its node (`crew-worker`), which crewd cannot tell
/// beforehand.
pub fn boxes(config: &Config, runtime: &RuntimeConfig) -> bool {
    runtime.placement == crate::placement::Placement::Local
        && matches!(bwrap_for(mode(config, runtime)), Ok(Some(_)))
}

/// A shared-mode attempt's box binds the run's working directory as it is: refused where that
/// would give the agent the home directory or crewd's own folders
/// (`crew_attempt::sandbox::workdir_problem`). In worktree mode the box binds the task's own
/// worktree instead.
pub fn check_workdir(
    shared: &crate::shared::Shared,
    spec: &crate::attempt::AttemptSpec,
) -> Result<(), String> {
    if spec.workspace.is_some() {
        return Ok(());
    }
    match workdir_problem(&shared.state_dir, Path::new(&spec.cwd)) {
        Some(why) => Err(workdir_refusal(&why)),
        None => Ok(()),
    }
}

/// `crew_attempt::sandbox::workdir_problem` with the daemon's own folders: its state and crew's
/// folder in the user's config.
fn workdir_problem(state_dir: &Path, cwd: &Path) -> Option<String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let config = crate::resources::config_home().map(|d| d.join("crew"));
    let own: Vec<&Path> = std::iter::once(state_dir)
        .chain(config.as_deref())
        .collect();
    crew_attempt::sandbox::workdir_problem(cwd, home.as_deref(), &own)
}

fn workdir_refusal(why: &str) -> String {
    format!(
        "cannot box an agent in this working directory: {why}; run in a project folder, or in \
         worktree mode (--workspace worktree)"
    )
}

/// `team.run`/`team.plan` of a run in shared mode on a runtime that boxes: refused (1003)
/// when its working directory cannot be a box's (`check_workdir`), before anything runs.
pub fn check_run_workdir(
    shared: &crate::shared::Shared,
    runtime: &RuntimeConfig,
    cwd: &Path,
    worktree: bool,
) -> Result<(), crew_api::ApiError> {
    let config = &shared.config;
    if worktree || !boxes(config, &in_project(config, runtime, cwd)) {
        return Ok(());
    }
    let Some(why) = workdir_problem(&shared.state_dir, cwd) else {
        return Ok(());
    };
    Err(crate::diagnostic::request_refused(
        "cwd",
        workdir_refusal(&why),
    ))
}

/// `team.plan`: the box `t` would run in, or `None` (unboxed: `sandbox = "off"`, or
/// bubblewrap unavailable under `auto`, which start-up and `daemon.status` say; a Slurm
/// runtime: its node decides).
/// A run's id is not known yet: `{run}` stands for it in the paths.
pub fn plan_box(
    shared: &crate::shared::Shared,
    spec: &crew_core::run::RunSpec,
    t: &crew_core::plan::PlannedTask,
) -> Option<crew_api::types::TaskBox> {
    // A candidate runs on its own runtime, maybe another than the run's.
    let name = crew_core::run::candidates::runtime_of(t).unwrap_or(&spec.runtime);
    let runtime = in_project(
        &shared.config,
        &shared.config.runtime(name)?,
        Path::new(&spec.cwd),
    );
    if !boxes(&shared.config, &runtime) {
        return None;
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let run_dir = shared.state_dir.join("runs").join("{run}");
    let repo = spec.workspace.as_ref().map(|w| PathBuf::from(&w.repo));
    let cwd = match &repo {
        Some(_) => crate::workspace::worktrees_dir(shared, "{run}").join(&t.id),
        None => PathBuf::from(&spec.cwd),
    };
    let own = run_dir.join("objects").join(format!("{}.attempt-N", t.id));
    let worktree = repo.as_ref().map(|r| Worktree {
        root: cwd.clone(),
        admin: r.join(".git/worktrees").join(&t.id),
    });
    let path = std::env::var_os("PATH");
    let program = runtime
        .command
        .argv()
        .first()
        .and_then(|p| crew_box::spawn::resolve(p, path.as_deref(), Path::new(&spec.cwd)).ok());
    let b = self::spec(&Inputs {
        adapter: Some(runtime.adapter),
        home: home.as_deref(),
        cwd: &cwd,
        writes: crew_core::stream::edits_files(&t.tools),
        repo: repo.as_deref(),
        worktree: worktree.as_ref(),
        own_objects: repo
            .as_ref()
            .filter(|_| crew_core::stream::edits_files(&t.tools))
            .map(|_| own.as_path()),
        run_dir: RunDir::Inputs(&run_dir),
        session_file: None,
        gemini_home: None,
        program: program.as_deref(),
        runtime_env: &runtime.env,
        sandbox_read: &runtime.sandbox_read,
        sandbox_write: &runtime.sandbox_write,
        network: network(&runtime, t),
    });
    let show = |p: &Path| p.display().to_string();
    let mut writable: Vec<String> = b.writable.iter().map(|p| show(p)).collect();
    let mut read_only: Vec<String> = b.read_only.iter().map(|p| show(p)).collect();
    for (src, at, rw) in &b.elsewhere {
        let line = format!("{} (from {})", at.display(), src.display());
        if *rw {
            writable.push(line)
        } else {
            read_only.push(line)
        }
    }
    read_only.extend(crew_box::bwrap::SYSTEM.iter().map(|s| s.to_string()));
    writable.push("/tmp (the box's own)".into());
    let mut hidden: Vec<String> = Vec::new();
    hidden.extend(
        home.as_deref()
            .map(|h| format!("{} (but the paths above)", h.display())),
    );
    hidden.push(show(&shared.state_dir));
    hidden.push(show(&shared.socket));
    hidden.extend(
        std::env::var_os("XDG_RUNTIME_DIR").map(|d| PathBuf::from(d).display().to_string()),
    );
    Some(crew_api::types::TaskBox {
        writable,
        read_only,
        hidden,
        network: b.network,
    })
}

/// The worktree of `spec`'s writing task (`workspace::prepare` made it), `None` when it has
/// none (shared mode, a read-only role's checkout) or it is not a linked worktree.
pub fn own_worktree(
    shared: &crate::shared::Shared,
    spec: &crate::attempt::AttemptSpec,
) -> Option<Worktree> {
    let ws = spec.workspace.as_ref().filter(|w| w.writes)?;
    let root = crate::workspace::worktrees_dir(shared, &ws.run_id).join(&ws.task_id);
    let admin = super::blocking(|| crew_git::admin_dir(&root))?;
    Some(Worktree { root, admin })
}

/// Before a writing worker's box: its worktree's HEAD detached at the same commit (every ref
/// is read-only in the box; the agent's commits then move only that HEAD).
pub async fn detach(shared: &crate::shared::Shared, wt: &Worktree) -> Result<(), String> {
    crate::workspace::git(shared)
        .repo(&wt.root)
        .detach_head()
        .await
        .map_err(|e| format!("cannot detach the worktree's HEAD for the box: {e}"))
}

/// Why the attempt's commits could not go on the task's branch.
pub enum NotAttached {
    /// The user checked the branch out in a worktree of theirs while crew's was detached:
    /// moving it would change their checkout under them. What to do, for the user.
    CheckedOut(String),
    Failed(String),
}

/// After the box (and `take_objects`): the task's branch moved to the commit the agent left
/// HEAD at, and HEAD back on the branch — unless a worktree of the user's has the branch
/// checked out by now (git let them: crew's own worktree was detached), which is theirs to
/// let go of first.
pub async fn attach(
    shared: &crate::shared::Shared,
    spec: &crate::attempt::AttemptSpec,
    wt: &Worktree,
) -> Result<(), NotAttached> {
    let Some(ws) = &spec.workspace else {
        return Ok(());
    };
    let short = crew_core::run::workspace::task_branch(&ws.run_id, &ws.task_id);
    let branch = format!("refs/heads/{short}");
    let git = crate::workspace::git(shared);
    // Listed from the repository (the worktree's own `.git` file is the agent's to change),
    // crew's own worktree left out (an agent may have checked the branch out in its box).
    let repo = git.repo(&ws.repo);
    let worktrees = repo
        .worktree_branches()
        .await
        .map_err(|e| NotAttached::Failed(format!("cannot list the repository's worktrees: {e}")))?;
    let own = std::fs::canonicalize(&wt.root).unwrap_or_else(|_| wt.root.clone());
    let elsewhere = worktrees.iter().any(|(path, b)| {
        *b == branch && std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()) != own
    });
    if elsewhere {
        // The agent's commits kept under the attempt's ref: HEAD may hold all of its work
        // (a snapshot of the tree when the worktree goes adds only what is uncommitted).
        let keep = crew_core::run::workspace::attempt_ref(&ws.run_id, &ws.task_id, ws.attempt);
        if let Ok(head) = git.repo(&wt.root).head_at(&wt.admin).await {
            if let Err(e) = repo.update_ref(&keep, &head).await {
                tracing::warn!(error = %e, "cannot keep the attempt's commits under its ref");
            }
        }
        return Err(NotAttached::CheckedOut(format!(
            "the attempt's work was not put on {short} (it is under {keep}): {}",
            crate::workspace::checked_out_message(&ws.run_id, &short)
        )));
    }
    git.repo(&wt.root)
        .attach_head(&wt.admin, &branch)
        .await
        .map(|_| ())
        .map_err(|e| {
            NotAttached::Failed(format!(
                "cannot put the attempt's commits on the task's branch: {e}"
            ))
        })
}
