//! Turning `team.run` params into a durable run: the one path for clients and for scheduled
//! fires alike.
//!
//! `prepare_as` works in three stages, each a function, in the order their errors have always
//! been reported (clients and tests rely on which of two problems is named first):
//!
//! 1. `check`: synchronous checks of the params, against the config, the `cwd` and the
//!    runtime's command. Each rule is its own small function with a table test below.
//! 2. `resolve`: the async part, which reads resource files and the repository: the catalog,
//!    the plan and its checks, and the workspace.
//! 3. `assemble`: the caps frozen into fan-out steps, the policy notes, and the `RunSpec`.
//!
//! `maxFanOutTasks` and `maxFixRounds` are pure checks like those of the first stage, but
//! they are made in the third: a request wrong there and in its plan or workspace has always
//! been told about the plan or the workspace.

use crate::actor::Actor;
use crate::compose::Shape;
use crate::config::{Config, RuntimeConfig};
use crate::rpc::{checks, views};
use crate::shared::Shared;
use crew_api::types::{BudgetParams, ReuseResults, RunParams, RunStarted};
use crew_api::ApiError;
use crew_core::fanout::Expansion;
use crew_core::job_shape::JobShape;
use crew_core::plan::Plan;
use crew_core::resource::{Catalog, Team};
use crew_core::run::{Budget, FailurePolicy, Reuse, RunSpec, WorkspaceSpec};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;

/// Goals beyond this are refused (the request limit bounds it anyway).
const GOAL_MAX: usize = 512 * 1024;

/// A run ready to be created: what `team.run` starts, `team.plan` shows and a schedule fires.
/// (Not `Prepared`: that is `workspace::Prepared`, a task's workspace.)
pub struct PreparedRun {
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

/// Validate params, resolve team/workflow/runtime, build the plan. Reads resource files, so it
/// runs on the caller's task, not on the actor.
pub async fn prepare(shared: &Arc<Shared>, p: &RunParams) -> Result<PreparedRun, ApiError> {
    prepare_as(shared, p, false).await
}

/// [`prepare`] for a preview (`team.plan`, `schedule.add`'s check): nothing is written to the
/// repository (a dirty tree is described, not snapshotted).
pub async fn preview(shared: &Arc<Shared>, p: &RunParams) -> Result<PreparedRun, ApiError> {
    prepare_as(shared, p, true).await
}

async fn prepare_as(
    shared: &Arc<Shared>,
    p: &RunParams,
    preview: bool,
) -> Result<PreparedRun, ApiError> {
    let checked = check(&shared.config, p)?;
    let resolved = resolve(shared, p, &checked, preview).await?;
    assemble(shared, p, checked, resolved)
}

/// The params as the first stage leaves them: each field checked, the runtime known and its
/// command startable.
struct Checked {
    shape: Shape,
    /// The runtime's name: the params' `runtime`, or the config's default.
    runtime: String,
    rt: RuntimeConfig,
    concurrency: Option<u32>,
    budget: Option<Budget>,
    /// The reuse the params ask for; `resolve` turns it off outside a git work tree.
    reuse: Reuse,
}

/// The first stage: every check that needs neither the catalog nor the repository, in the order
/// their errors are reported.
fn check(cfg: &Config, p: &RunParams) -> Result<Checked, ApiError> {
    check_text_fields(p)?;
    let shape = crate::compose::shape(p)?;
    checks::enterable_dir("cwd", &p.cwd)?;
    let (runtime, rt) = runtime(cfg, p.runtime.as_deref())?;
    // A run whose workers cannot start would only fail its attempts one after another; a
    // schedule would fail every fire. Say so now, naming the command and the way out.
    let path = std::env::var_os("PATH");
    startable(
        &runtime,
        &rt.command.argv(),
        p.runtime.is_some(),
        Path::new(&p.cwd),
        path.as_deref(),
    )?;
    let concurrency = concurrency(p.concurrency, cfg.max_concurrency_cap)?;
    let budget = budget(p.budget.as_ref())?;
    let reuse = reuse_mode(p.reuse_results.as_ref())?;
    Ok(Checked {
        shape,
        runtime,
        rt,
        concurrency,
        budget,
        reuse,
    })
}

/// The goal and the names: a goal neither blank nor too long, and no NUL byte anywhere.
fn check_text_fields(p: &RunParams) -> Result<(), ApiError> {
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
    Ok(())
}

/// The runtime `asked` for, or the config's default, with its config; refused when the config
/// knows no such runtime.
fn runtime(cfg: &Config, asked: Option<&str>) -> Result<(String, RuntimeConfig), ApiError> {
    let runtime = asked
        .map(str::to_string)
        .unwrap_or_else(|| cfg.default_runtime.clone());
    match cfg.runtime(&runtime) {
        Some(rt) => Ok((runtime, rt)),
        None => Err(ApiError::invalid_params(
            "runtime",
            format!(
                "unknown runtime `{runtime}` (known: {})",
                cfg.runtime_names().join(", ")
            ),
        )),
    }
}

/// Refuses `runtime` when its command (`argv`) cannot start, saying how to choose another:
/// `asked` is whether the params named it (else it is the config's default).
fn startable(
    runtime: &str,
    argv: &[String],
    asked: bool,
    cwd: &Path,
    path: Option<&OsStr>,
) -> Result<(), ApiError> {
    let Err(why) = command_installed(argv, cwd, path) else {
        return Ok(());
    };
    let how = if asked {
        "choose another runtime (e.g. --runtime fake)".to_string()
    } else {
        "it is the default runtime: choose another with --runtime (e.g. --runtime fake), or set `default_runtime` in crewd's config.toml".to_string()
    };
    Err(ApiError::invalid_params(
        "runtime",
        format!("runtime `{runtime}` cannot start: {why}; install it, or {how}"),
    ))
}

/// `concurrency`, when asked for, between 1 and the config's cap.
fn concurrency(asked: Option<i64>, cap: u32) -> Result<Option<u32>, ApiError> {
    match asked {
        None => Ok(None),
        Some(c) if c < 1 || c > i64::from(cap) => Err(ApiError::invalid_params(
            "concurrency",
            format!("must be between 1 and {cap}"),
        )),
        Some(c) => Ok(Some(c as u32)),
    }
}

/// The run's token budget: a positive number of tokens, `warnAt` in (0, 1] (default 0.8) and
/// a finite `abortAt` at least `warnAt` (default 1.0).
fn budget(b: Option<&BudgetParams>) -> Result<Option<Budget>, ApiError> {
    let Some(b) = b else {
        return Ok(None);
    };
    if b.tokens <= 0 {
        return Err(ApiError::invalid_params(
            "budget.tokens",
            "must be a positive number of tokens",
        ));
    }
    let warn_at = b.warn_at.unwrap_or(Budget::DEFAULT_WARN_AT);
    let abort_at = b.abort_at.unwrap_or(1.0);
    // Written as negations so that NaN, which fails every comparison, is refused too.
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
    Ok(Some(Budget {
        tokens: b.tokens as u64,
        warn_at,
        abort_at,
    }))
}

/// `reuseResults`: a bool (`true` means read-only), or the name of a mode.
fn reuse_mode(r: Option<&ReuseResults>) -> Result<Reuse, ApiError> {
    match r {
        None | Some(ReuseResults::Bool(false)) => Ok(Reuse::Off),
        Some(ReuseResults::Bool(true)) => Ok(Reuse::ReadOnly),
        Some(ReuseResults::Mode(m)) if m == "all" => Ok(Reuse::All),
        Some(ReuseResults::Mode(m)) if m == "read-only" => Ok(Reuse::ReadOnly),
        Some(ReuseResults::Mode(m)) => Err(ApiError::invalid_params(
            "reuseResults",
            format!("`{m}`: use true, false, \"read-only\" or \"all\""),
        )),
    }
}

/// The tasks a fan-out step may add: `maxFanOutTasks` when asked for (between 1 and the
/// ceiling), else the project's setting, else the daemon's.
fn max_fan_out(asked: Option<i64>, project: Option<u32>, daemon: u32) -> Result<u32, ApiError> {
    match asked {
        None => Ok(project.unwrap_or(daemon)),
        Some(n) if (1..=i64::from(crew_core::fanout::MAX_TASKS_CEILING)).contains(&n) => {
            Ok(n as u32)
        }
        Some(_) => Err(ApiError::invalid_params(
            "maxFanOutTasks",
            format!(
                "must be between 1 and {}",
                crew_core::fanout::MAX_TASKS_CEILING
            ),
        )),
    }
}

/// `maxFixRounds`, when asked for, between 0 and the ceiling.
fn fix_rounds(asked: Option<i64>) -> Result<Option<u32>, ApiError> {
    match asked {
        None => Ok(None),
        Some(n) if (0..=i64::from(crew_core::verdict::MAX_FIX_ROUNDS_CEILING)).contains(&n) => {
            Ok(Some(n as u32))
        }
        Some(_) => Err(ApiError::invalid_params(
            "maxFixRounds",
            format!(
                "must be between 0 and {}",
                crew_core::verdict::MAX_FIX_ROUNDS_CEILING
            ),
        )),
    }
}

/// What the second stage found.
struct Resolved {
    plan: Plan,
    /// The reuse asked for, or off when results cannot be tied to a code state.
    reuse: Reuse,
    workspace: Option<WorkspaceSpec>,
    job_shapes: BTreeMap<String, JobShape>,
    notes: Vec<String>,
}

/// The second stage: the catalog, the plan and the checks of its tasks, and the workspace.
async fn resolve(
    shared: &Arc<Shared>,
    p: &RunParams,
    checked: &Checked,
    preview: bool,
) -> Result<Resolved, ApiError> {
    let cwd = Path::new(&p.cwd);
    let shape = &checked.shape;
    let mut notes = Vec::new();
    let reuse = reuse_in_work_tree(checked.reuse, &p.cwd, &mut notes).await;
    let catalog = catalog(shared, cwd).await?;
    let mut plan = build_plan(shape, &catalog)?;
    goal_problems(shape, &plan, &catalog, &p.goal)?;
    crate::candidates::expand(
        &catalog,
        shape.first_team(&plan).map(str::to_string).as_deref(),
        shape.skills(),
        p,
        &mut plan,
    )?;
    crate::plan_checks::apply(shared, &catalog, cwd, &mut plan)?;
    crate::plan_checks::describe(&plan, &mut notes);
    let team = shape.first_team(&plan).and_then(|t| catalog.team(t));
    let workspace = workspace(shared, p, shape, &catalog, team, preview, &mut notes).await?;
    crate::placement::check_workspace(&checked.runtime, checked.rt.placement, workspace.is_some())?;
    crate::executor::sandbox::check_run_workdir(shared, &checked.rt, cwd, workspace.is_some())?;
    let job_shapes = job_shapes(&shared.config, &checked.runtime, &plan);
    crate::candidates::check(shared, &plan, workspace.is_some(), cwd)?;
    Ok(Resolved {
        plan,
        reuse,
        workspace,
        job_shapes,
        notes,
    })
}

/// `reuse`, or off (with a note saying why) when `cwd` is not inside a git work tree.
async fn reuse_in_work_tree(reuse: Reuse, cwd: &str, notes: &mut Vec<String>) -> Reuse {
    if reuse != Reuse::Off && crate::results::git_state(cwd).await.is_none() {
        notes.push(format!("result reuse is off: {cwd} is not inside a git work tree, so results cannot be tied to a code state"));
        return Reuse::Off;
    }
    reuse
}

/// The resources the run sees from `cwd`, read off the actor (they are files).
async fn catalog(shared: &Arc<Shared>, cwd: &Path) -> Result<Catalog, ApiError> {
    let shared = shared.clone();
    let cwd = cwd.to_path_buf();
    crate::rpc::off_actor(move || crate::resources::catalog(&shared, Some(&cwd))).await
}

/// The plan of `shape`, or the validation error naming the first problem (with them all as
/// diagnostics).
fn build_plan(shape: &Shape, catalog: &Catalog) -> Result<Plan, ApiError> {
    shape.plan(catalog).map_err(|diags| {
        let first = diags.first().map(|d| d.message.clone()).unwrap_or_default();
        let diags: Vec<_> = diags.iter().map(views::diagnostic).collect();
        ApiError::validation(format!("the team cannot run: {first}"), diags)
    })
}

/// Refuses a goal that some step's task template would make too big a prompt.
fn goal_problems(
    shape: &Shape,
    plan: &Plan,
    catalog: &Catalog,
    goal: &str,
) -> Result<(), ApiError> {
    // The prompt's size is known now, from the goal and the templates: computed, not
    // rendered, so a template multiplying the goal is refused before it can take memory.
    let too_big: Vec<_> = shape
        .workflows(plan, catalog)
        .iter()
        .filter_map(|name| catalog.workflow(name))
        .flat_map(|wf| wf.steps.iter().map(move |s| (wf, s)))
        .filter_map(|(wf, s)| {
            crew_core::prompt::goal_problem(&s.task, goal).map(|m| {
                crew_core::resource::Diagnostic::error(&wf.path, Some(s.line), Some("task"), m)
            })
        })
        .collect();
    match too_big.first() {
        Some(first) => Err(ApiError::validation(
            format!("the team cannot run: {}", first.message),
            too_big.iter().map(views::diagnostic).collect::<Vec<_>>(),
        )),
        None => Ok(()),
    }
}

/// The run's workspace (`workspace::plan_run`), if it has one, with its conflict mode and the
/// template of a resolve task. `team`: the plan's first team.
async fn workspace(
    shared: &Arc<Shared>,
    p: &RunParams,
    shape: &Shape,
    catalog: &Catalog,
    team: Option<&Team>,
    preview: bool,
    notes: &mut Vec<String>,
) -> Result<Option<WorkspaceSpec>, ApiError> {
    let team_mode = team.and_then(|t| t.workspace_mode);
    let mut workspace = crate::workspace::plan_run(shared, p, team_mode, preview, notes).await?;
    if let Some(ws) = workspace.as_mut() {
        ws.conflicts = match p.conflicts {
            Some(crew_api::types::ConflictMode::Agent) => crew_core::run::ConflictMode::Agent,
            Some(crew_api::types::ConflictMode::Manual) => crew_core::run::ConflictMode::Manual,
            None => team
                .and_then(|t| t.conflicts)
                .unwrap_or(shared.config.conflicts),
        };
        // Frozen now, so adding a resolve task to the running run reads no resource file.
        if !ws.conflicts.is_manual() {
            ws.resolver =
                crew_core::plan::resolver_template(catalog, team, shape.skills()).map(Arc::new);
        }
    }
    Ok(workspace)
}

/// Each Slurm runtime's job resources, frozen now (issue 35): every attempt of the run,
/// after a restart too, asks for the same job whatever config.toml says by then.
fn job_shapes(cfg: &Config, runtime: &str, plan: &Plan) -> BTreeMap<String, JobShape> {
    std::iter::once(runtime)
        .chain(
            plan.tasks
                .iter()
                .filter_map(crew_core::run::candidates::runtime_of),
        )
        .filter_map(|name| {
            crate::placement::slurm::runtime_shape(cfg, name).map(|s| (name.to_string(), s))
        })
        .collect()
}

/// The third stage: the last two checks, the fan-out caps, the policy notes and the `RunSpec`.
fn assemble(
    shared: &Shared,
    p: &RunParams,
    checked: Checked,
    resolved: Resolved,
) -> Result<PreparedRun, ApiError> {
    let cfg = &shared.config;
    let cwd = Path::new(&p.cwd);
    let Resolved {
        mut plan,
        reuse,
        workspace,
        job_shapes,
        mut notes,
    } = resolved;
    let project = crate::plan_checks::project(shared, cwd)
        .and_then(|(root, _)| crate::plan_checks::project_config(shared, &root));
    // Checked here, after the plan and the workspace, not in `check`: see the module doc.
    let max_fan_out = max_fan_out(
        p.max_fan_out_tasks,
        project.and_then(|c| c.max_fan_out_tasks),
        cfg.max_fan_out_tasks,
    )?;
    let rounds = fix_rounds(p.max_fix_rounds)?;
    let rt = crate::executor::sandbox::in_project(cfg, &checked.rt, cwd);
    let gaps = run_policy_gaps(cfg, &checked.runtime, &rt, &plan);
    notes.extend(gaps.iter().map(PolicyGap::note));
    let capped = cap_expansions(&mut plan, max_fan_out, cfg.max_fan_out_answer_bytes);
    notes.extend(unaddable_roles(&capped));
    crate::verdicts::set_fix_rounds(&mut plan.tasks, rounds, cfg.max_fix_rounds);
    if p.allow_no_change == Some(true) {
        allow_no_change(&mut plan.tasks);
    }
    // A step's candidates run at once (issue 36): a default concurrency (the team's, or a
    // one-agent run's 1) is raised to the widest step's; an explicit one stays.
    let widest = plan
        .tasks
        .iter()
        .filter_map(|t| crew_core::run::candidates::selector(t))
        .map(|(_, members, _)| u32::try_from(members.len()).unwrap_or(u32::MAX))
        .max()
        .unwrap_or(1);
    let concurrency = checked
        .concurrency
        .unwrap_or_else(|| plan.max_concurrency.unwrap_or(4).max(widest))
        .clamp(1, cfg.max_concurrency_cap);
    let spec = RunSpec {
        goal: p.goal.clone(),
        cwd: p.cwd.clone(),
        team: plan.team.clone(),
        workflow: plan.workflow.clone(),
        runtime: checked.runtime,
        model: p.model.clone(),
        concurrency,
        failure_policy: match p.failure_policy.unwrap_or_default() {
            crew_api::types::FailurePolicy::FailFast => FailurePolicy::FailFast,
            crew_api::types::FailurePolicy::Continue => FailurePolicy::Continue,
        },
        budget: checked.budget,
        require_plan_approval: p.require_plan_approval.unwrap_or(false),
        reuse,
        max_attempts: cfg.max_attempts,
        schedule_id: None,
        imported: false,
        task_verify_commands: project
            .map(|c| c.task_verify_commands.clone())
            .unwrap_or_default(),
        workspace,
        job_shapes,
        tasks: crate::plan_checks::tasks(&plan),
    };
    Ok(PreparedRun {
        spec,
        plan,
        notes,
        policy_gaps: gaps,
    })
}

/// Everything the run's runtime cannot enforce or do: the gaps in the roles' tool lists, and
/// a worker that cannot ask the user.
fn run_policy_gaps(cfg: &Config, runtime: &str, rt: &RuntimeConfig, plan: &Plan) -> Vec<PolicyGap> {
    // In crew's box a read-only role's workspace is read-only, whatever its CLI's tools can
    // do: no gap left to name.
    let mut gaps = if crate::executor::sandbox::boxes(cfg, rt) {
        Vec::new()
    } else {
        policy_gaps(runtime, rt.adapter, plan)
    };
    // Every CLI but pi (crew's extension) asks through `crewctl mcp --ask`.
    let asks_through_crewctl = matches!(
        rt.adapter,
        crew_core::stream::AdapterKind::Claude
            | crew_core::stream::AdapterKind::Codex
            | crew_core::stream::AdapterKind::Gemini
            | crew_core::stream::AdapterKind::Opencode
    );
    if asks_through_crewctl && crate::config::crewctl().is_none() {
        gaps.push(PolicyGap {
            agents: Vec::new(),
            runtime: runtime.to_string(),
            message: "crew's ask server (`crewctl mcp --ask`) is neither next to crewd nor on \
                      its PATH, so these workers cannot ask the user (`ask_user`); install \
                      crewctl beside crewd"
                .into(),
        });
    }
    gaps
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

/// Freezes the caps into each fan-out step of `plan`, returning each capped expansion once.
fn cap_expansions(plan: &mut Plan, max_tasks: u32, max_answer_bytes: u64) -> Vec<Arc<Expansion>> {
    // Steps that shared an expansion still share one `Arc`; each team of a chain keeps its
    // own (its roles are what its answer may name).
    let mut capped: Vec<(Arc<Expansion>, Arc<Expansion>)> = Vec::new();
    for t in plan.tasks.iter_mut() {
        if let Some(exp) = &t.expands {
            let c = match capped.iter().find(|(from, _)| Arc::ptr_eq(from, exp)) {
                Some((_, c)) => c.clone(),
                None => {
                    let mut e = Expansion::clone(exp);
                    e.max_tasks = max_tasks;
                    e.max_answer_bytes = max_answer_bytes;
                    let c = Arc::new(e);
                    capped.push((exp.clone(), c.clone()));
                    c
                }
            };
            t.expands = Some(c);
        }
    }
    capped.into_iter().map(|(_, c)| c).collect()
}

/// A note for each role of which a capped fan-out step can add no task.
fn unaddable_roles(capped: &[Arc<Expansion>]) -> Vec<String> {
    // A task a fan-out step adds that alone would start more agents than the step's cap (which
    // counts candidates) can never be added: said now, not once the planner has answered.
    let mut notes = Vec::new();
    for exp in capped {
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
    notes
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
pub async fn start(actor: &Actor, prepared: PreparedRun) -> Result<RunStarted, ApiError> {
    let PreparedRun {
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

/// The run's `allowNoChange`: every planned task may complete without changing files, and so
/// may every task a fan-out step adds (its role templates carry it, frozen with the plan).
fn allow_no_change(tasks: &mut [crew_core::plan::PlannedTask]) {
    for t in tasks {
        t.checks.allow_no_change = Some(true);
        if let Some(exp) = t.expands.as_mut() {
            for r in &mut std::sync::Arc::make_mut(exp).roles {
                r.allow_no_change = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Params that pass every check of the first stage's text rules.
    fn params() -> RunParams {
        RunParams {
            goal: "fix the tests".into(),
            cwd: "/".into(),
            ..RunParams::default()
        }
    }

    /// The message of the error, or "ok".
    fn said<T>(r: Result<T, ApiError>) -> String {
        match r {
            Ok(_) => "ok".into(),
            Err(e) => e.message,
        }
    }

    #[test]
    fn text_fields_are_refused_in_order() {
        let nul = |s: &str| Some(format!("{s}\0"));
        let table: Vec<(&str, RunParams, String)> = vec![
            ("plain", params(), "ok".into()),
            (
                "empty goal",
                RunParams {
                    goal: String::new(),
                    ..params()
                },
                "invalid params: goal: must not be empty".into(),
            ),
            (
                "blank goal",
                RunParams {
                    goal: " \n\t".into(),
                    ..params()
                },
                "invalid params: goal: must not be empty".into(),
            ),
            (
                "goal at the limit",
                RunParams {
                    goal: "g".repeat(GOAL_MAX),
                    ..params()
                },
                "ok".into(),
            ),
            (
                "goal over the limit",
                RunParams {
                    goal: "g".repeat(GOAL_MAX + 1),
                    ..params()
                },
                format!("invalid params: goal: is longer than {GOAL_MAX} bytes"),
            ),
            (
                "NUL in the goal",
                RunParams {
                    goal: "a\0b".into(),
                    ..params()
                },
                "invalid params: goal: must not contain a NUL character".into(),
            ),
            (
                "NUL in the model",
                RunParams {
                    model: nul("m"),
                    ..params()
                },
                "invalid params: model: must not contain a NUL character".into(),
            ),
            (
                "NUL in the role",
                RunParams {
                    role: nul("r"),
                    ..params()
                },
                "invalid params: role: must not contain a NUL character".into(),
            ),
            (
                "the goal before the names",
                RunParams {
                    goal: String::new(),
                    team: nul("t"),
                    ..params()
                },
                "invalid params: goal: must not be empty".into(),
            ),
            (
                "the names in order",
                RunParams {
                    workflow: nul("w"),
                    runtime: nul("r"),
                    ..params()
                },
                "invalid params: workflow: must not contain a NUL character".into(),
            ),
        ];
        for (what, p, want) in table {
            assert_eq!(said(check_text_fields(&p)), want, "{what}");
        }
    }

    #[test]
    fn an_unknown_runtime_names_the_known_ones() {
        let cfg = Config::default();
        let (name, _) = runtime(&cfg, Some("fake")).unwrap();
        assert_eq!(name, "fake");
        let (name, _) = runtime(&cfg, None).unwrap();
        assert_eq!(name, cfg.default_runtime);
        assert_eq!(
            said(runtime(&cfg, Some("nope"))),
            format!(
                "invalid params: runtime: unknown runtime `nope` (known: {})",
                cfg.runtime_names().join(", ")
            )
        );
    }

    #[test]
    fn a_runtime_that_cannot_start_says_the_way_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = Some(dir.path().as_os_str());
        let argv = |s: &str| vec![s.to_string()];
        let asked = "choose another runtime (e.g. --runtime fake)";
        let default = "it is the default runtime: choose another with --runtime (e.g. \
                       --runtime fake), or set `default_runtime` in crewd's config.toml";
        let table = [
            (
                argv("sh"),
                true,
                Some("/bin:/usr/bin".as_ref()),
                "ok".to_string(),
            ),
            (
                argv("crew-no-such-cli"),
                true,
                path,
                format!(
                    "invalid params: runtime: runtime `x` cannot start: `crew-no-such-cli` is \
                     not installed (not found on PATH); install it, or {asked}"
                ),
            ),
            (
                argv("crew-no-such-cli"),
                false,
                path,
                format!(
                    "invalid params: runtime: runtime `x` cannot start: `crew-no-such-cli` is \
                     not installed (not found on PATH); install it, or {default}"
                ),
            ),
            (
                argv("./missing"),
                true,
                path,
                format!(
                    "invalid params: runtime: runtime `x` cannot start: `./missing` does not \
                     exist; install it, or {asked}"
                ),
            ),
            (
                Vec::new(),
                true,
                path,
                format!(
                    "invalid params: runtime: runtime `x` cannot start: its command is empty; \
                     install it, or {asked}"
                ),
            ),
        ];
        for (argv, was_asked, path, want) in table {
            let got = startable("x", &argv, was_asked, dir.path(), path);
            assert_eq!(said(got), want, "{argv:?} {was_asked}");
        }
    }

    #[test]
    fn concurrency_is_between_one_and_the_cap() {
        let refused = "invalid params: concurrency: must be between 1 and 8";
        let table = [
            (None, Ok(None)),
            (Some(1), Ok(Some(1))),
            (Some(8), Ok(Some(8))),
            (Some(0), Err(refused)),
            (Some(9), Err(refused)),
            (Some(-1), Err(refused)),
            (Some(i64::MAX), Err(refused)),
            (Some(i64::MIN), Err(refused)),
        ];
        for (asked, want) in table {
            let got = concurrency(asked, 8).map_err(|e| e.message);
            assert_eq!(got, want.map_err(str::to_string), "{asked:?}");
        }
    }

    #[test]
    fn a_budget_is_positive_and_its_fractions_ordered() {
        let tokens = "invalid params: budget.tokens: must be a positive number of tokens";
        let warn = "invalid params: budget.warnAt: must be in (0, 1]";
        let abort = "invalid params: budget.abortAt: must be positive and at least warnAt";
        /// The budget as (tokens, warnAt, abortAt), or the refusal.
        type Want = Result<(u64, f64, f64), &'static str>;
        // (tokens, warnAt, abortAt, what they give)
        let table: &[(i64, Option<f64>, Option<f64>, Want)] = &[
            (1000, None, None, Ok((1000, 0.8, 1.0))),
            (1, Some(1.0), None, Ok((1, 1.0, 1.0))),
            (1, Some(0.5), Some(2.0), Ok((1, 0.5, 2.0))),
            (1, Some(0.5), Some(0.5), Ok((1, 0.5, 0.5))),
            (0, None, None, Err(tokens)),
            (-1, None, None, Err(tokens)),
            (i64::MIN, Some(f64::NAN), None, Err(tokens)),
            (1, Some(0.0), None, Err(warn)),
            (1, Some(-0.5), None, Err(warn)),
            (1, Some(1.5), None, Err(warn)),
            (1, Some(f64::NAN), Some(f64::NAN), Err(warn)),
            (1, Some(f64::INFINITY), None, Err(warn)),
            (1, None, Some(0.5), Err(abort)),
            (1, Some(0.9), Some(0.5), Err(abort)),
            (1, None, Some(0.0), Err(abort)),
            (1, None, Some(f64::INFINITY), Err(abort)),
            (1, None, Some(f64::NAN), Err(abort)),
        ];
        for (tokens, warn_at, abort_at, want) in table {
            let b = BudgetParams {
                tokens: *tokens,
                warn_at: *warn_at,
                abort_at: *abort_at,
            };
            let got = budget(Some(&b))
                .map(|b| b.map(|b| (b.tokens, b.warn_at, b.abort_at)))
                .map_err(|e| e.message);
            let want = want.map(Some).map_err(str::to_string);
            assert_eq!(got, want, "{tokens} {warn_at:?} {abort_at:?}");
        }
        assert!(budget(None).unwrap().is_none());
    }

    #[test]
    fn reuse_is_a_bool_or_a_mode() {
        let mode = |m: &str| Some(ReuseResults::Mode(m.into()));
        let table = [
            (None, Ok(Reuse::Off)),
            (Some(ReuseResults::Bool(false)), Ok(Reuse::Off)),
            (Some(ReuseResults::Bool(true)), Ok(Reuse::ReadOnly)),
            (mode("read-only"), Ok(Reuse::ReadOnly)),
            (mode("all"), Ok(Reuse::All)),
            (
                mode("yes"),
                Err("invalid params: reuseResults: `yes`: use true, false, \"read-only\" or \"all\""),
            ),
            (
                mode("All"),
                Err("invalid params: reuseResults: `All`: use true, false, \"read-only\" or \"all\""),
            ),
        ];
        for (asked, want) in table {
            let got = reuse_mode(asked.as_ref()).map_err(|e| e.message);
            assert_eq!(got, want.map_err(str::to_string), "{asked:?}");
        }
    }

    #[test]
    fn max_fan_out_is_asked_else_the_projects_else_the_daemons() {
        let ceiling = crew_core::fanout::MAX_TASKS_CEILING;
        let refused = format!("invalid params: maxFanOutTasks: must be between 1 and {ceiling}");
        // (asked, the project's, the answer)
        let table = [
            (None, None, Ok(50)),
            (None, Some(10), Ok(10)),
            (Some(3), Some(10), Ok(3)),
            (Some(1), None, Ok(1)),
            (Some(i64::from(ceiling)), None, Ok(ceiling)),
            (Some(0), Some(10), Err(refused.clone())),
            (Some(i64::from(ceiling) + 1), None, Err(refused.clone())),
            (Some(-1), None, Err(refused.clone())),
            (Some(i64::MAX), None, Err(refused)),
        ];
        for (asked, project, want) in table {
            let got = max_fan_out(asked, project, 50).map_err(|e| e.message);
            assert_eq!(got, want, "{asked:?} {project:?}");
        }
    }

    #[test]
    fn fix_rounds_are_between_zero_and_the_ceiling() {
        let ceiling = crew_core::verdict::MAX_FIX_ROUNDS_CEILING;
        let refused = format!("invalid params: maxFixRounds: must be between 0 and {ceiling}");
        let table = [
            (None, Ok(None)),
            (Some(0), Ok(Some(0))),
            (Some(i64::from(ceiling)), Ok(Some(ceiling))),
            (Some(-1), Err(refused.clone())),
            (Some(i64::from(ceiling) + 1), Err(refused.clone())),
            (Some(i64::MIN), Err(refused)),
        ];
        for (asked, want) in table {
            let got = fix_rounds(asked).map_err(|e| e.message);
            assert_eq!(got, want, "{asked:?}");
        }
    }

    #[test]
    fn a_role_whose_added_task_exceeds_the_cap_is_named() {
        let role = |name: &str, writes: bool, candidates: Option<u32>| {
            serde_json::from_value(serde_json::json!({
                "role": name,
                "agent": name,
                "model": null,
                "systemPrompt": "",
                "systemPromptMode": "replace",
                "tools": [],
                "thinking": null,
                "writes": writes,
                "candidates": candidates,
            }))
            .unwrap()
        };
        let exp = |max_tasks: u32| {
            Arc::new(Expansion {
                max_tasks,
                roles: vec![
                    role("coder", true, Some(3)),
                    role("reviewer", false, Some(3)),
                    role("tester", true, None),
                ],
                max_answer_bytes: crew_core::fanout::DEFAULT_MAX_ANSWER_BYTES,
                candidates: None,
            })
        };
        assert_eq!(unaddable_roles(&[exp(3)]), Vec::<String>::new());
        assert_eq!(
            unaddable_roles(&[exp(2)]),
            vec![
                "a fan-out step may start at most 2 agents (maxFanOutTasks), candidates \
                 included, and each `coder` task it adds would run 3 candidates: it can add \
                 no `coder` task; raise maxFanOutTasks or ask for fewer candidates"
                    .to_string()
            ]
        );
    }

    #[test]
    fn a_policy_gap_names_who_it_concerns() {
        let gap = |agents: &[&str]| PolicyGap {
            agents: agents.iter().map(|a| a.to_string()).collect(),
            runtime: "codex".into(),
            message: "cannot deny `bash`".into(),
        };
        assert_eq!(gap(&[]).note(), "runtime `codex`: cannot deny `bash`");
        assert_eq!(
            gap(&["verifier"]).note(),
            "runtime `codex`, agent verifier: cannot deny `bash`"
        );
        assert_eq!(
            gap(&["reviewer", "verifier"]).note(),
            "runtime `codex`, agents reviewer, verifier: cannot deny `bash`"
        );
    }
}
