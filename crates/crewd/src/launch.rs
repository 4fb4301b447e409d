//! Turning `team.run` params into a durable run: the one path for clients and for scheduled
//! fires alike.

use crate::actor::Actor;
use crate::rpc::{checks, views};
use crate::shared::Shared;
use crew_api::types::{ReuseResults, RunParams, RunStarted};
use crew_api::ApiError;
use crew_core::fanout::Expansion;
use crew_core::plan::Plan;
use crew_core::run::{Budget, FailurePolicy, Reuse, RunSpec};
use std::path::Path;
use std::sync::Arc;

/// Goals beyond this are refused (the request limit bounds it anyway).
const GOAL_MAX: usize = 512 * 1024;

pub struct Prepared {
    pub spec: RunSpec,
    pub plan: Plan,
    pub notes: Vec<String>,
    /// What the runtime cannot enforce of the roles' tool lists, one per gap with every agent
    /// it concerns, and what its workers cannot do at all (also in `notes`, once per run).
    pub policy_gaps: Vec<PolicyGap>,
}

pub struct PolicyGap {
    /// The agents whose tool lists it concerns; empty: the whole runtime (e.g. no ask tool).
    pub agents: Vec<String>,
    pub runtime: String,
    pub message: String,
}

impl PolicyGap {
    /// Who it concerns: `agent verifier`, `agents reviewer, verifier`, or nothing.
    pub fn field(&self) -> Option<String> {
        match self.agents.as_slice() {
            [] => None,
            [one] => Some(format!("agent {one}")),
            many => Some(format!("agents {}", many.join(", "))),
        }
    }

    /// The gap as one note of `team.run` (issue 32 item 6: said once per run, not once per
    /// agent or task).
    fn note(&self) -> String {
        match self.field() {
            Some(who) => format!("runtime `{}`, {who}: {}", self.runtime, self.message),
            None => format!("runtime `{}`: {}", self.runtime, self.message),
        }
    }
}

/// What `adapter` cannot enforce of the plan's tool lists: each gap once, naming the agents
/// (in plan order) it concerns.
fn policy_gaps(
    runtime: &str,
    adapter: crew_core::stream::AdapterKind,
    plan: &Plan,
) -> Vec<PolicyGap> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out: Vec<PolicyGap> = Vec::new();
    for t in &plan.tasks {
        if !seen.insert(t.agent.as_str()) {
            continue;
        }
        for message in crew_core::stream::policy_gaps(adapter, &t.tools) {
            match out.iter_mut().find(|g| g.message == message) {
                Some(g) => g.agents.push(t.agent.clone()),
                None => out.push(PolicyGap {
                    agents: vec![t.agent.clone()],
                    runtime: runtime.to_string(),
                    message,
                }),
            }
        }
    }
    out
}

/// Validate params, resolve team/workflow/runtime, build the plan. Reads resource files, so it
/// runs on the caller's task, not on the actor.
pub async fn prepare(shared: &Arc<Shared>, p: &RunParams) -> Result<Prepared, ApiError> {
    prepare_as(shared, p, false).await
}

/// [`prepare`] for a preview (`team.plan`, `schedule.add`'s check): nothing is written to the
/// repository (a dirty tree is described, not snapshotted).
pub async fn preview(shared: &Arc<Shared>, p: &RunParams) -> Result<Prepared, ApiError> {
    prepare_as(shared, p, true).await
}

async fn prepare_as(
    shared: &Arc<Shared>,
    p: &RunParams,
    preview: bool,
) -> Result<Prepared, ApiError> {
    if p.goal.trim().is_empty() {
        return Err(ApiError::invalid_params("goal", "must not be empty"));
    }
    if p.goal.len() > GOAL_MAX {
        return Err(ApiError::invalid_params(
            "goal",
            format!("is longer than {GOAL_MAX} bytes"),
        ));
    }
    // The goal reaches the worker's argv (prompt_via = "arg"), and so do the names below.
    checks::no_nul("goal", &p.goal)?;
    for (field, text) in [
        ("team", &p.team),
        ("workflow", &p.workflow),
        ("runtime", &p.runtime),
        ("model", &p.model),
        ("agent", &p.agent),
        ("role", &p.role),
    ] {
        if let Some(text) = text {
            checks::no_nul(field, text)?;
        }
    }
    let shape = crate::compose::shape(p)?;
    checks::enterable_dir("cwd", &p.cwd)?;
    let cwd = Path::new(&p.cwd);
    let cfg = &shared.config;
    let runtime = p
        .runtime
        .clone()
        .unwrap_or_else(|| cfg.default_runtime.clone());
    let Some(rt) = cfg.runtime(&runtime) else {
        return Err(ApiError::invalid_params(
            "runtime",
            format!(
                "unknown runtime `{runtime}` (known: {})",
                cfg.runtime_names().join(", ")
            ),
        ));
    };
    // A run whose workers cannot start would only fail its attempts one after another; a
    // schedule would fail every fire. Say so now, naming the command and the way out.
    let path = std::env::var_os("PATH");
    if let Err(why) = command_installed(&rt.command.argv(), cwd, path.as_deref()) {
        let how = if p.runtime.is_some() {
            "choose another runtime (e.g. --runtime fake)".to_string()
        } else {
            "it is the default runtime: choose another with --runtime (e.g. --runtime fake), or set `default_runtime` in crewd's config.toml".to_string()
        };
        return Err(ApiError::invalid_params(
            "runtime",
            format!("runtime `{runtime}` cannot start: {why}; install it, or {how}"),
        ));
    }
    let cap = cfg.max_concurrency_cap;
    if let Some(c) = p.concurrency {
        if c < 1 || c > i64::from(cap) {
            return Err(ApiError::invalid_params(
                "concurrency",
                format!("must be between 1 and {cap}"),
            ));
        }
    }
    let budget = match &p.budget {
        None => None,
        Some(b) => {
            if b.tokens <= 0 {
                return Err(ApiError::invalid_params(
                    "budget.tokens",
                    "must be a positive number of tokens",
                ));
            }
            let warn_at = b.warn_at.unwrap_or(0.8);
            let abort_at = b.abort_at.unwrap_or(1.0);
            if !(warn_at > 0.0 && warn_at <= 1.0) {
                return Err(ApiError::invalid_params(
                    "budget.warnAt",
                    "must be in (0, 1]",
                ));
            }
            if !(abort_at > 0.0 && abort_at.is_finite()) || abort_at < warn_at {
                return Err(ApiError::invalid_params(
                    "budget.abortAt",
                    "must be positive and at least warnAt",
                ));
            }
            Some(Budget {
                tokens: b.tokens as u64,
                warn_at,
                abort_at,
            })
        }
    };
    let mut notes = Vec::new();
    let mut reuse = match &p.reuse_results {
        None | Some(ReuseResults::Bool(false)) => Reuse::Off,
        Some(ReuseResults::Bool(true)) => Reuse::ReadOnly,
        Some(ReuseResults::Mode(m)) if m == "all" => Reuse::All,
        Some(ReuseResults::Mode(m)) if m == "read-only" => Reuse::ReadOnly,
        Some(ReuseResults::Mode(m)) => {
            return Err(ApiError::invalid_params(
                "reuseResults",
                format!("`{m}`: use true, false, \"read-only\" or \"all\""),
            ))
        }
    };
    if reuse != Reuse::Off && crate::results::git_state(&p.cwd).await.is_none() {
        reuse = Reuse::Off;
        notes.push(format!("result reuse is off: {} is not inside a git work tree, so results cannot be tied to a code state", p.cwd));
    }

    let catalog = {
        let shared = shared.clone();
        let cwd = cwd.to_path_buf();
        crate::rpc::off_actor(move || crate::resources::catalog(&shared, Some(&cwd))).await?
    };
    let mut plan = shape.plan(&catalog).map_err(|diags| {
        let first = diags.first().map(|d| d.message.clone()).unwrap_or_default();
        let diags: Vec<_> = diags.iter().map(views::diagnostic).collect();
        ApiError::validation(format!("the team cannot run: {first}"), diags)
    })?;
    // The prompt's size is known now, from the goal and the templates: computed, not
    // rendered, so a template multiplying the goal is refused before it can take memory.
    let too_big: Vec<_> = shape
        .workflows(&plan, &catalog)
        .iter()
        .filter_map(|name| catalog.workflow(name))
        .flat_map(|wf| wf.steps.iter().map(move |s| (wf, s)))
        .filter_map(|(wf, s)| {
            crew_core::prompt::goal_problem(&s.task, &p.goal).map(|m| {
                crew_core::resource::Diagnostic::error(&wf.path, Some(s.line), Some("task"), m)
            })
        })
        .collect();
    if let Some(first) = too_big.first() {
        return Err(ApiError::validation(
            format!("the team cannot run: {}", first.message),
            too_big.iter().map(views::diagnostic).collect::<Vec<_>>(),
        ));
    }
    crate::candidates::expand(
        &catalog,
        shape.first_team(&plan).map(str::to_string).as_deref(),
        shape.skills(),
        p,
        &mut plan,
    )?;
    crate::plan_checks::apply(shared, &catalog, cwd, &mut plan)?;
    crate::plan_checks::describe(&plan, &mut notes);
    let team_mode = shape
        .first_team(&plan)
        .and_then(|t| catalog.team(t))
        .and_then(|t| t.workspace_mode);
    let mut workspace =
        crate::workspace::plan_run(shared, p, team_mode, preview, &mut notes).await?;
    if let Some(ws) = workspace.as_mut() {
        let team = shape.first_team(&plan).and_then(|t| catalog.team(t));
        ws.conflicts = match p.conflicts {
            Some(crew_api::types::ConflictMode::Agent) => crew_core::run::ConflictMode::Agent,
            Some(crew_api::types::ConflictMode::Manual) => crew_core::run::ConflictMode::Manual,
            None => team.and_then(|t| t.conflicts).unwrap_or(cfg.conflicts),
        };
        // Frozen now, so adding a resolve task to the running run reads no resource file.
        if !ws.conflicts.is_manual() {
            ws.resolver =
                crew_core::plan::resolver_template(&catalog, team, shape.skills()).map(Arc::new);
        }
    }
    crate::placement::check_workspace(&runtime, rt.placement, workspace.is_some())?;
    // Each Slurm runtime's job resources, frozen now (issue 35): every attempt of the run,
    // after a restart too, asks for the same job whatever config.toml says by then.
    let job_shapes = std::iter::once(runtime.as_str())
        .chain(
            plan.tasks
                .iter()
                .filter_map(crew_core::run::candidates::runtime_of),
        )
        .filter_map(|name| {
            crate::placement::slurm::runtime_shape(cfg, name).map(|s| (name.to_string(), s))
        })
        .collect();
    crate::candidates::check(shared, &plan, workspace.is_some(), cwd)?;
    let adapter = cfg.runtime(&runtime).map(|rt| rt.adapter);
    // In crew's box a read-only role's workspace is read-only, whatever its CLI's tools can
    // do: no gap left to name.
    let boxed = cfg
        .runtime(&runtime)
        .is_some_and(|rt| crate::executor::sandbox::boxes(cfg, &rt));
    let mut gaps = adapter
        .filter(|_| !boxed)
        .map(|a| policy_gaps(&runtime, a, &plan))
        .unwrap_or_default();
    // Every CLI but pi (crew's extension) asks through `crewctl mcp --ask`.
    let asks_through_crewctl = matches!(
        adapter,
        Some(
            crew_core::stream::AdapterKind::Claude
                | crew_core::stream::AdapterKind::Codex
                | crew_core::stream::AdapterKind::Gemini
                | crew_core::stream::AdapterKind::Opencode
        )
    );
    if asks_through_crewctl && crate::config::crewctl().is_none() {
        gaps.push(PolicyGap {
            agents: Vec::new(),
            runtime: runtime.clone(),
            message: "crew's ask server (`crewctl mcp --ask`) is neither next to crewd nor on \
                      its PATH, so these workers cannot ask the user (`ask_user`); install \
                      crewctl beside crewd"
                .into(),
        });
    }
    notes.extend(gaps.iter().map(PolicyGap::note));
    let max_fan_out = match p.max_fan_out_tasks {
        None => crate::plan_checks::project(shared, cwd)
            .and_then(|(root, _)| {
                crate::plan_checks::project_config(shared, &root)?.max_fan_out_tasks
            })
            .unwrap_or(cfg.max_fan_out_tasks),
        Some(n) if (1..=i64::from(crew_core::fanout::MAX_TASKS_CEILING)).contains(&n) => n as u32,
        Some(_) => {
            return Err(ApiError::invalid_params(
                "maxFanOutTasks",
                format!(
                    "must be between 1 and {}",
                    crew_core::fanout::MAX_TASKS_CEILING
                ),
            ))
        }
    };
    // The caps are frozen into each fan-out step. Steps that shared an expansion still share
    // one `Arc`; each team of a chain keeps its own (its roles are what its answer may name).
    let mut capped: Vec<(Arc<Expansion>, Arc<Expansion>)> = Vec::new();
    for t in plan.tasks.iter_mut() {
        if let Some(exp) = &t.expands {
            let c = match capped.iter().find(|(from, _)| Arc::ptr_eq(from, exp)) {
                Some((_, c)) => c.clone(),
                None => {
                    let mut e = Expansion::clone(exp);
                    e.max_tasks = max_fan_out;
                    e.max_answer_bytes = cfg.max_fan_out_answer_bytes;
                    let c = Arc::new(e);
                    capped.push((exp.clone(), c.clone()));
                    c
                }
            };
            t.expands = Some(c);
        }
    }
    // A task a fan-out step adds that alone would start more agents than the step's cap (which
    // counts candidates) can never be added: said now, not once the planner has answered.
    for (_, exp) in &capped {
        for r in &exp.roles {
            let n = crew_core::run::candidates::runs_of_added(r, exp);
            if n > exp.max_tasks {
                notes.push(format!(
                    "a fan-out step may start at most {} agents (maxFanOutTasks), candidates \
                     included, and each `{}` task it adds would run {n} candidates: it can add \
                     no `{}` task; raise maxFanOutTasks or ask for fewer candidates",
                    exp.max_tasks, r.role, r.role
                ));
            }
        }
    }
    let rounds = match p.max_fix_rounds {
        None => None,
        Some(n) if (0..=i64::from(crew_core::verdict::MAX_FIX_ROUNDS_CEILING)).contains(&n) => {
            Some(n as u32)
        }
        Some(_) => {
            return Err(ApiError::invalid_params(
                "maxFixRounds",
                format!(
                    "must be between 0 and {}",
                    crew_core::verdict::MAX_FIX_ROUNDS_CEILING
                ),
            ))
        }
    };
    crate::verdicts::set_fix_rounds(&mut plan.tasks, rounds, cfg.max_fix_rounds);
    let concurrency = p
        .concurrency
        .map(|c| c as u32)
        .or(plan.max_concurrency)
        .unwrap_or(4)
        .clamp(1, cap);
    let spec = RunSpec {
        goal: p.goal.clone(),
        cwd: p.cwd.clone(),
        team: plan.team.clone(),
        workflow: plan.workflow.clone(),
        runtime,
        model: p.model.clone(),
        concurrency,
        failure_policy: match p.failure_policy.unwrap_or_default() {
            crew_api::types::FailurePolicy::FailFast => FailurePolicy::FailFast,
            crew_api::types::FailurePolicy::Continue => FailurePolicy::Continue,
        },
        budget,
        require_plan_approval: p.require_plan_approval.unwrap_or(false),
        reuse,
        max_attempts: cfg.max_attempts,
        schedule_id: None,
        imported: false,
        task_verify_commands: crate::plan_checks::project(shared, cwd)
            .and_then(|(root, _)| {
                Some(
                    crate::plan_checks::project_config(shared, &root)?
                        .task_verify_commands
                        .clone(),
                )
            })
            .unwrap_or_default(),
        workspace,
        job_shapes,
        tasks: crate::plan_checks::tasks(&plan),
    };
    Ok(Prepared {
        spec,
        plan,
        notes,
        policy_gaps: gaps,
    })
}

/// Whether the program of `argv` can be started: a path (relative ones against the workers'
/// `cwd`) to an executable file, or a name found on `path`.
pub fn command_installed(
    argv: &[String],
    cwd: &Path,
    path: Option<&std::ffi::OsStr>,
) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let Some(program) = argv.first() else {
        return Err("its command is empty".into());
    };
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = cwd.join(program);
        return if executable(&p) {
            Ok(())
        } else if p.exists() {
            Err(format!("`{program}` is not an executable file"))
        } else {
            Err(format!("`{program}` does not exist"))
        };
    }
    let found = path
        .map(|p| std::env::split_paths(p).any(|dir| executable(&dir.join(program))))
        .unwrap_or(false);
    if found {
        Ok(())
    } else {
        Err(format!("`{program}` is not installed (not found on PATH)"))
    }
}

/// Create the run; answers once `run.created` is durable.
pub async fn start(actor: &Actor, prepared: Prepared) -> Result<RunStarted, ApiError> {
    let Prepared {
        spec, plan, notes, ..
    } = prepared;
    let model = spec.model.clone();
    actor
        .mutate(move |core| {
            let id = create_in_core(core, spec)?;
            let status = core
                .state
                .run(&id)
                .map(|r| views::run_status(r.status))
                .unwrap_or(crew_api::types::RunStatus::Queued);
            Ok(RunStarted {
                run_id: id,
                status,
                tasks: plan
                    .tasks
                    .iter()
                    .map(|t| views::planned(t, model.as_deref()))
                    .collect(),
                notes,
            })
        })
        .await
}

/// Create a run inside an actor job (`start`, and a scheduled fire, which journals
/// `schedule.fired` naming the run in the same job).
pub fn create_in_core(core: &mut crate::actor::Core, spec: RunSpec) -> Result<String, ApiError> {
    let last = core.state.summaries.keys().next_back().map(String::as_str);
    let id = crew_core::ids::next_run_id(core.now(), rand::random(), last);
    let base = spec.workspace.clone();
    let events = core
        .state
        .create_run(&id, spec)
        .map_err(views::core_error)?;
    core.emit_all(events);
    if let Some(ws) = base {
        // The base stays reachable from now on, even before a task starts (gc while the run
        // waits for plan approval); git runs off the actor, once `run.created` is durable.
        let (shared, rt, run) = (
            core.shared.clone(),
            tokio::runtime::Handle::current(),
            id.clone(),
        );
        core.after_commit(move |res| {
            if res.is_ok() {
                rt.spawn(async move { crate::workspace::hold_base(&shared, &run, &ws).await });
            }
        });
    }
    core.touch(&id);
    tracing::info!(run = %id, "run created");
    Ok(id)
}
