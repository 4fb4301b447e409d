//! Turning a team + workflow into the list of tasks a run executes (`team.plan`).

use crate::ids::{ArtifactName, SafeId};
use crate::resource::{
    validate, Agent, Catalog, Diagnostic, Severity, Step, Team, TeamRole, Workflow,
};
use crate::skills::{PlannedSkill, RunSkills};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

mod task;
pub use task::{FlatTask, PlannedTask, TaskCommon};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub team: String,
    pub workflow: String,
    /// Team `maxConcurrency`, else workflow `maxConcurrency`.
    pub max_concurrency: Option<u32>,
    pub tasks: Vec<PlannedTask>,
}

/// Build the plan for `team` (default `"default"`) and `workflow` (default: the team's
/// `defaultWorkflow`, else `"default"`). Errors are diagnostics naming file, line and field:
/// unknown team/workflow, step role not in the team, role naming an unknown agent, unknown or
/// cyclic `dependsOn` (the cycle is named), duplicate step, empty workflow.
pub fn build_plan(
    catalog: &Catalog,
    team: Option<&str>,
    workflow: Option<&str>,
) -> Result<Plan, Vec<Diagnostic>> {
    build_plan_with(catalog, team, workflow, &RunSkills::Selected)
}

/// [`build_plan`] with the run's `skills` param.
pub fn build_plan_with(
    catalog: &Catalog,
    team: Option<&str>,
    workflow: Option<&str>,
    run_skills: &RunSkills,
) -> Result<Plan, Vec<Diagnostic>> {
    let (team, wf) = team_and_workflow(catalog, team, workflow)?;
    let (bound, mut diags) = bind_steps(catalog, team, wf);
    if has_error(&diags) {
        return Err(diags);
    }
    let mut tasks = Vec::with_capacity(bound.len());
    // Per task: the step's `fixer:` and `maxFixRounds:`, for the fix plans made below.
    let mut fix_asks: Vec<(Option<String>, Option<u32>)> = Vec::with_capacity(bound.len());
    // Per task: what the step (else its role) asks of candidates (issue 36).
    let mut cand_asks: Vec<crate::run::candidates::StepAsk> = Vec::with_capacity(bound.len());
    let mut builder = TaskBuilder::new(catalog, team, wf, run_skills);
    for (step, role, agent) in bound {
        // Checked above: every bound role has an agent once no error was found.
        let Some(agent) = agent else { continue };
        let Some(id) = builder.ids.get(step.id.as_str()).cloned() else {
            continue;
        };
        fix_asks.push((step.fixer.clone(), step.max_fix_rounds));
        cand_asks.push(crate::run::candidates::StepAsk {
            ask: step
                .candidates
                .clone()
                .or_else(|| role.candidates.map(crate::run::candidates::Ask::Count)),
            select: step.select,
            judge: step.judge.clone(),
        });
        tasks.push(builder.task(step, role, agent, id, &mut diags));
    }
    if has_error(&diags) {
        return Err(diags);
    }
    let roles = role_templates(catalog, team, run_skills);
    crate::fixplan::attach(&mut tasks, &fix_asks, &roles, team.max_fix_rounds);
    crate::run::candidates::attach_asks(&mut tasks, &cand_asks, &roles);
    Ok(Plan {
        team: team.name.clone(),
        workflow: wf.name.clone(),
        max_concurrency: team.max_concurrency.or(wf.max_concurrency),
        tasks,
    })
}

fn has_error(diags: &[Diagnostic]) -> bool {
    diags.iter().any(|d| d.severity == Severity::Error)
}

/// The team the run names (default `default`) and the workflow it names, else the team's
/// default workflow, else `default`.
fn team_and_workflow<'c>(
    catalog: &'c Catalog,
    team: Option<&str>,
    workflow: Option<&str>,
) -> Result<(&'c Team, &'c Workflow), Vec<Diagnostic>> {
    let team_name = team.unwrap_or("default");
    let Some(team) = catalog.team(team_name) else {
        return Err(vec![Diagnostic::error(
            REQUEST,
            None,
            Some("team"),
            format!("unknown team `{team_name}`"),
        )]);
    };
    let (wf_name, wf_from_team) = match (workflow, &team.default_workflow) {
        (Some(w), _) => (w, false),
        (None, Some(w)) => (w.as_str(), true),
        (None, None) => ("default", false),
    };
    if let Some(wf) = catalog.workflow(wf_name) {
        return Ok((team, wf));
    }
    let d = if wf_from_team {
        Diagnostic::error(
            &team.path,
            team.field_lines.get("defaultWorkflow").copied(),
            Some("defaultWorkflow"),
            format!(
                "team `{}` names default workflow `{wf_name}`, which does not exist",
                team.name
            ),
        )
    } else {
        Diagnostic::error(
            REQUEST,
            None,
            Some("workflow"),
            format!("unknown workflow `{wf_name}`"),
        )
    };
    Err(vec![d])
}

/// A step with the team role it names and that role's agent (`None`: an unknown agent, which
/// is an error among the diagnostics).
type Bound<'c> = (&'c Step, &'c TeamRole, Option<&'c Agent>);

/// Each step bound to its role and agent, and what is wrong with the workflow, the team or an
/// agent they use: structure, roles, unknown agents, and errors in any of their files.
fn bind_steps<'c>(
    catalog: &'c Catalog,
    team: &'c Team,
    wf: &'c Workflow,
) -> (Vec<Bound<'c>>, Vec<Diagnostic>) {
    let mut diags = validate::workflow_structure(wf, Severity::Error);
    diags.extend(validate::step_roles(wf, team));
    // A file with an error (e.g. an unsafe `output:` name) may still be in the catalog for
    // listing, but must not run.
    // Errors by file, gathered once: a lookup per role, not a pass over every diagnostic.
    let mut errors: HashMap<&str, Vec<&Diagnostic>> = HashMap::new();
    for d in catalog
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
    {
        errors.entry(d.path.as_str()).or_default().push(d);
    }
    let errors_in = |path: &str| errors.get(path).into_iter().flatten().map(|d| (*d).clone());
    diags.extend(errors_in(&team.path));
    diags.extend(errors_in(&wf.path));
    let mut bound: Vec<Bound<'c>> = Vec::new();
    // Lookups by name, not scans: a file controls how many steps and roles there are.
    let roles: HashMap<&str, &TeamRole> = team
        .roles
        .iter()
        .rev()
        .map(|r| (r.name.as_str(), r))
        .collect();
    let mut agents_checked: HashSet<&str> = HashSet::new();
    let mut agent_files_checked: HashSet<&str> = HashSet::new();
    for step in &wf.steps {
        let Some(&role) = roles.get(step.role.as_str()) else {
            continue;
        };
        let agent = catalog.agent(&role.agent);
        if agents_checked.insert(role.name.as_str()) {
            match agent {
                None => diags.push(validate::unknown_agent(team, role)),
                Some(a) if agent_files_checked.insert(a.path.as_str()) => {
                    diags.extend(errors_in(&a.path))
                }
                Some(_) => {}
            }
        }
        bound.push((step, role, agent));
    }
    (bound, diags)
}

/// Makes a workflow's planned tasks, sharing what tasks of one agent have in common (its
/// system prompt, tools, skill sets) instead of copying it per task.
struct TaskBuilder<'c> {
    catalog: &'c Catalog,
    wf: &'c Workflow,
    run_skills: &'c RunSkills,
    /// Built once, and only for a workflow with a fan-out step: every role of the team bound
    /// to its agent, frozen like the rest of the plan.
    expansion: Option<Arc<crate::fanout::Expansion>>,
    /// Step id → task id.
    ids: HashMap<&'c str, SafeId>,
    prompts: HashMap<&'c str, Arc<str>>,
    agent_tools: HashMap<&'c str, Arc<[String]>>,
    skill_sets: SkillSets,
}

impl<'c> TaskBuilder<'c> {
    fn new(
        catalog: &'c Catalog,
        team: &'c Team,
        wf: &'c Workflow,
        run_skills: &'c RunSkills,
    ) -> Self {
        TaskBuilder {
            catalog,
            wf,
            run_skills,
            expansion: wf
                .steps
                .iter()
                .any(|s| s.expands)
                .then(|| Arc::new(expansion_of(catalog, team, run_skills))),
            ids: wf
                .steps
                .iter()
                .enumerate()
                .map(|(i, s)| (s.id.as_str(), task_id(i + 1, &s.id)))
                .collect(),
            prompts: HashMap::new(),
            agent_tools: HashMap::new(),
            skill_sets: SkillSets::default(),
        }
    }

    /// The task of `step`, run by `role`'s `agent`. A bad artifact name is an error in `diags`.
    fn task(
        &mut self,
        step: &'c Step,
        role: &'c TeamRole,
        agent: &'c Agent,
        id: SafeId,
        diags: &mut Vec<Diagnostic>,
    ) -> PlannedTask {
        let output = self.output(step, &id, diags);
        let reads = self.reads(step, diags);
        let tools = self.tools(agent);
        let judge = crate::verdict::judges(&agent.name, step.verdict);
        PlannedTask::from(FlatTask {
            candidates: None,
            resources: step.resources.over(&role.resources),
            network: role.network,
            resolves: None,
            output,
            id,
            step_id: step.id.clone(),
            role: role.name.clone(),
            agent: agent.name.clone(),
            depends_on: step
                .depends_on
                .iter()
                .filter_map(|d| self.ids.get(d.as_str()).cloned())
                .collect(),
            task_template: step.task.clone(),
            reads,
            model: step
                .model
                .clone()
                .or_else(|| role.model.clone())
                .or_else(|| agent.model.clone()),
            system_prompt: self
                .prompts
                .entry(agent.name.as_str())
                .or_insert_with(|| Arc::from(agent.system_prompt.as_str()))
                .clone(),
            system_prompt_mode: agent.system_prompt_mode,
            writes: tools_write(&tools),
            tools,
            thinking: agent.thinking.clone(),
            effort: agent.effort.clone(),
            fallback_models: agent.fallback_models.clone(),
            seed_paths: step.seed_paths.clone(),
            scope: step.scope.clone(),
            checks: step_checks(step),
            expands: step.expands.then(|| self.expansion.clone()).flatten(),
            added_by: None,
            judging: crate::verdict::Judging {
                judge,
                ..Default::default()
            },
            title: None,
            skills: self.skill_sets.get(
                self.catalog,
                &crate::skills::Selection {
                    role: &role.name,
                    agent: &agent.skills,
                    team_role: role.skills.as_deref(),
                    step: step.skills.as_deref(),
                    run: self.run_skills,
                },
            ),
        })
    }

    /// The step's result artifact: its `output:`, else `<task id>.md`; none with `output: false`.
    fn output(
        &self,
        step: &Step,
        id: &SafeId,
        diags: &mut Vec<Diagnostic>,
    ) -> Option<ArtifactName> {
        if step.output_disabled {
            return None;
        }
        let name = step.output.clone().unwrap_or_else(|| format!("{id}.md"));
        ArtifactName::new(name)
            .map_err(|e| self.step_error(step, "output", e.to_string(), diags))
            .ok()
    }

    fn reads(&self, step: &Step, diags: &mut Vec<Diagnostic>) -> Vec<ArtifactName> {
        let mut reads = Vec::with_capacity(step.reads.len());
        for r in &step.reads {
            match ArtifactName::new(r.as_str()) {
                Ok(n) => reads.push(n),
                Err(e) => self.step_error(step, "reads", e.to_string(), diags),
            }
        }
        reads
    }

    fn step_error(&self, step: &Step, field: &str, why: String, diags: &mut Vec<Diagnostic>) {
        diags.push(Diagnostic::error(
            &self.wf.path,
            Some(step.line),
            Some(field),
            why,
        ));
    }

    /// The agent's tools (its own list, else its name's defaults), one shared copy per agent.
    fn tools(&mut self, agent: &'c Agent) -> Arc<[String]> {
        self.agent_tools
            .entry(agent.name.as_str())
            .or_insert_with(|| {
                let tools = agent
                    .tools
                    .clone()
                    .unwrap_or_else(|| default_tools(&agent.name));
                tools.into()
            })
            .clone()
    }
}

/// A step's checks as written. Verification runs when the step says `verify: true` or names
/// commands (unless `verify: false`); the daemon fills in the project's configured commands
/// and the retry default before the run is created.
fn step_checks(step: &Step) -> crate::checks::Checks {
    let verify = match step.verify {
        Some(false) => None,
        Some(true) => Some(step.verify_commands.clone()),
        None => (!step.verify_commands.is_empty()).then(|| step.verify_commands.clone()),
    };
    crate::checks::Checks {
        scope_policy: step.scope_policy,
        allow_no_change: step.allow_no_change,
        verify: verify.map(|commands| crate::checks::Verify {
            commands,
            retries: step.verify_retries,
        }),
        pre_step: step.pre_step.clone(),
    }
}

/// The team's roles that have an agent, as a fan-out step may use them (roles without an agent
/// are left out: a task of theirs could not run).
fn expansion_of(
    catalog: &Catalog,
    team: &crate::resource::Team,
    run_skills: &RunSkills,
) -> crate::fanout::Expansion {
    crate::fanout::Expansion {
        max_tasks: crate::fanout::DEFAULT_MAX_TASKS,
        max_answer_bytes: crate::fanout::DEFAULT_MAX_ANSWER_BYTES,
        roles: role_templates(catalog, team, run_skills),
        candidates: None,
    }
}

/// The agent a resolve task runs when the team has no `resolver` role (issue 31).
pub const RESOLVER_AGENT: &str = "resolver";

/// Who resolves a conflicting merge in a run of `team`: its `resolver` role, else the
/// builtin `resolver` agent (`None`: neither exists, so conflicts go the manual way).
pub fn resolver_template(
    catalog: &Catalog,
    team: Option<&crate::resource::Team>,
    run_skills: &RunSkills,
) -> Option<crate::fanout::RoleTemplate> {
    if let Some(r) = team
        .map(|t| role_templates(catalog, t, run_skills))
        .and_then(|rs| rs.into_iter().find(|r| r.role == RESOLVER_AGENT))
    {
        return Some(r);
    }
    let agent = catalog.agent(RESOLVER_AGENT)?;
    let skills = SkillSets::default().get(
        catalog,
        &crate::skills::Selection {
            role: RESOLVER_AGENT,
            agent: &agent.skills,
            team_role: None,
            step: None,
            run: run_skills,
        },
    );
    Some(bind(
        RESOLVER_AGENT,
        agent,
        None,
        None,
        skills,
        Default::default(),
    ))
}

/// `agent` playing the role `role` (the role's own model first, then the agent's), with the
/// skills a task of that role gets.
fn bind(
    role: &str,
    agent: &crate::resource::Agent,
    model: Option<String>,
    candidates: Option<u32>,
    skills: Arc<[PlannedSkill]>,
    resources: crate::job_shape::JobShape,
) -> crate::fanout::RoleTemplate {
    let tools: Arc<[String]> = agent
        .tools
        .clone()
        .unwrap_or_else(|| default_tools(&agent.name))
        .into();
    crate::fanout::RoleTemplate {
        role: role.to_string(),
        agent: agent.name.clone(),
        model: model.or_else(|| agent.model.clone()),
        system_prompt: Arc::from(agent.system_prompt.as_str()),
        system_prompt_mode: agent.system_prompt_mode,
        writes: tools_write(&tools),
        tools,
        thinking: agent.thinking.clone(),
        effort: agent.effort.clone(),
        fallback_models: agent.fallback_models.clone(),
        candidates,
        skills,
        resources,
        allow_no_change: false,
        network: None,
    }
}

/// Every role of the team bound to its agent (roles without an agent are left out), each with
/// the skills a planned task of the role gets when its step says nothing of skills: the tasks
/// crew adds at run time (fan-out, fix and resolve tasks) have no step of their own.
pub fn role_templates(
    catalog: &Catalog,
    team: &crate::resource::Team,
    run_skills: &RunSkills,
) -> Vec<crate::fanout::RoleTemplate> {
    let mut seen = HashSet::new();
    let mut sets = SkillSets::default();
    team.roles
        .iter()
        .filter(|r| seen.insert(r.name.as_str()))
        .filter_map(|role| {
            let agent = catalog.agent(&role.agent)?;
            let skills = sets.get(
                catalog,
                &crate::skills::Selection {
                    role: &role.name,
                    agent: &agent.skills,
                    team_role: role.skills.as_deref(),
                    step: None,
                    run: run_skills,
                },
            );
            let mut t = bind(
                &role.name,
                agent,
                role.model.clone(),
                role.candidates,
                skills,
                role.resources,
            );
            t.network = role.network;
            Some(t)
        })
        .collect()
}

/// One frozen skill list per distinct selection of names: the tasks of a role mostly share one.
#[derive(Default)]
pub(crate) struct SkillSets(HashMap<Vec<String>, Arc<[PlannedSkill]>>);

impl SkillSets {
    pub(crate) fn get(
        &mut self,
        catalog: &Catalog,
        selection: &crate::skills::Selection<'_>,
    ) -> Arc<[PlannedSkill]> {
        let names = crate::skills::select(selection);
        self.0
            .entry(names)
            .or_insert_with_key(|names| crate::skills::freeze(catalog, names).into())
            .clone()
    }
}

/// The same tasks with one `Arc` per distinct common part ([`TaskCommon`]: agent, prompt,
/// tools, step options), and within the parts that differ (an added task's title, a fix
/// task's judge) one per distinct system prompt, tool list and skill list. A run's tasks
/// mostly use a few agents, and a plan read back from the journal gives every task its own
/// copy of each.
pub fn share_prompts(tasks: &[Arc<PlannedTask>]) -> Vec<Arc<PlannedTask>> {
    let mut commons: HashMap<u64, Vec<Arc<TaskCommon>>> = HashMap::new();
    let mut prompts: HashSet<Arc<str>> = HashSet::new();
    let mut tools: HashSet<Arc<[String]>> = HashSet::new();
    let mut skills: HashSet<Arc<[PlannedSkill]>> = HashSet::new();
    tasks
        .iter()
        .map(|t| {
            // Equal parts hash alike: the key reads only a few of the fields `==` compares.
            let bucket = commons.entry(common_key(t)).or_default();
            if let Some(seen) = bucket.iter().find(|c| ***c == **t.common()) {
                if Arc::ptr_eq(seen, t.common()) {
                    return t.clone();
                }
                return Arc::new(t.with_common(seen.clone()));
            }
            let prompt = shared_copy(&mut prompts, &t.system_prompt);
            let tool_list = shared_copy(&mut tools, &t.tools);
            let skill_list = if t.skills.is_empty() {
                None
            } else {
                shared_copy(&mut skills, &t.skills)
            };
            let t = if prompt.is_none() && tool_list.is_none() && skill_list.is_none() {
                t.clone()
            } else {
                let mut shared = PlannedTask::clone(t);
                if let Some(p) = prompt {
                    shared.system_prompt = p;
                }
                if let Some(l) = tool_list {
                    shared.tools = l;
                }
                if let Some(l) = skill_list {
                    shared.skills = l;
                }
                Arc::new(shared)
            };
            bucket.push(t.common().clone());
            t
        })
        .collect()
}

/// What `share_prompts` looks a common part up by.
fn common_key(t: &PlannedTask) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&t.role, &t.agent, &t.model, &t.title, &t.added_by).hash(&mut h);
    (t.system_prompt.len(), t.tools.len(), t.writes).hash(&mut h);
    h.finish()
}

/// The copy of `value` seen first, if that is another allocation (`None`: keep `value`).
/// Looked up by hash: a plan has as many distinct prompts as a file gives it agents.
fn shared_copy<T: ?Sized + Eq + std::hash::Hash>(
    seen: &mut HashSet<Arc<T>>,
    value: &Arc<T>,
) -> Option<Arc<T>> {
    match seen.get(&**value) {
        None => {
            seen.insert(value.clone());
            None
        }
        Some(p) if Arc::ptr_eq(p, value) => None,
        Some(p) => Some(p.clone()),
    }
}

/// `path` of diagnostics about the request itself (unknown team or workflow name).
pub const REQUEST: &str = "<request>";

const READ_ONLY_TOOLS: &[&str] = &["read", "grep", "find", "ls"];

/// Tools of an agent whose file does not say: what the builtin agent of that name has, else
/// read-only. A missing `tools:` line must never silently grant write access to a new agent.
pub(crate) fn default_tools(agent: &str) -> Vec<String> {
    let tools: &[&str] = match agent.to_lowercase().as_str() {
        "executor" | "test-engineer" => &["read", "grep", "find", "ls", "bash", "edit", "write"],
        "reviewer" | "security-reviewer" | "verifier" => &["read", "grep", "find", "ls", "bash"],
        "writer" => &["read", "grep", "find", "ls", "edit", "write"],
        _ => READ_ONLY_TOOLS,
    };
    tools.iter().map(|t| t.to_string()).collect()
}

/// Tools that make a role a "write" role.
pub fn tools_write(tools: &[String]) -> bool {
    tools
        .iter()
        .any(|t| matches!(t.as_str(), "edit" | "write" | "bash"))
}

/// `NN_<slug>` task id for the 1-based step index.
pub use crate::ids::task_id;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{builtin, parse_file, Kind, Source};

    fn catalog(extra: &[(Kind, &str, &str)]) -> Catalog {
        let files = builtin::parsed().into_iter().chain(
            extra
                .iter()
                .map(|(k, p, t)| parse_file(*k, Source::User, p, t.as_bytes())),
        );
        Catalog::assemble(files, false)
    }

    /// Issue 36: a step's `candidates:`, a role's `candidates=N`, `select:` and `judge:` are
    /// planned as asks, and `expand` makes the candidates and the selector.
    #[test]
    fn candidates_from_step_and_role_are_asked_and_expanded() {
        use crate::run::candidates::{self as c, Candidacy, Select};
        let team = "---\nname: t\n---\n\n- executor: agent=executor candidates=2\n- reviewer: agent=reviewer\n- writer: agent=writer\n";
        let wf = "---\nname: w\n---\n\n## a\nrole: executor\n\ndo a\n\n## b\nrole: writer\ndependsOn: a\ncandidates: [claude/sonnet, opencode/anthropic/x]\nselect: first\n\ndo b\n\n## c\nrole: executor\ndependsOn: b\ncandidates: 3\njudge: reviewer\n\ndo c\n";
        let cat = catalog(&[
            (Kind::Team, "/u/teams/t.team.md", team),
            (Kind::Workflow, "/u/workflows/w.workflow.md", wf),
        ]);
        let plan = build_plan(&cat, Some("t"), Some("w")).expect("plans");
        let asked = |i: usize| match plan.tasks[i].candidates.as_deref() {
            Some(Candidacy::Asked {
                contenders,
                select,
                judge,
                ..
            }) => (
                contenders.len(),
                *select,
                judge.as_ref().map(|j| j.role.clone()),
            ),
            other => panic!("{other:?}"),
        };
        assert_eq!(asked(0), (2, None, Some("reviewer".into())), "the role's");
        assert_eq!(asked(1).0, 2);
        assert_eq!(asked(1).1, Some(Select::First));
        assert_eq!(asked(2), (3, None, Some("reviewer".into())));
        let tasks = c::expand(plan.tasks, None);
        let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "_cand-01_a-1",
                "_cand-01_a-2",
                "01_a",
                "_cand-02_b-1",
                "_cand-02_b-2",
                "02_b",
                "_cand-03_c-1",
                "_cand-03_c-2",
                "_cand-03_c-3",
                "03_c",
            ]
        );
        // A candidate has the step's dependencies; the selector has the candidates too.
        assert_eq!(tasks[3].depends_on, vec![tasks[2].id.clone()]);
        assert_eq!(tasks[5].depends_on.len(), 3);
        assert_eq!(c::runtime_of(&tasks[4]), Some("opencode"));
        assert_eq!(tasks[4].model.as_deref(), Some("anthropic/x"));
        // A judging selector plays the judge's role and cannot edit.
        assert_eq!(tasks[9].role, "reviewer");
        assert!(!tasks[9].writes && tasks[9].judging.judge);
        assert_eq!(c::selector(&tasks[5]).map(|s| s.0), Some(Select::First));
    }

    #[test]
    fn default_team_plan() {
        let plan = build_plan(&Catalog::builtin(), None, None).expect("plans");
        assert_eq!(
            (
                plan.team.as_str(),
                plan.workflow.as_str(),
                plan.max_concurrency
            ),
            ("default", "default", Some(2))
        );
        let shape: Vec<_> = plan
            .tasks
            .iter()
            .map(|t| {
                (
                    t.id.as_str(),
                    t.step_id.as_str(),
                    t.role.as_str(),
                    t.depends_on.join(","),
                    t.output.as_deref(),
                    t.writes,
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (
                    "01_explore",
                    "explore",
                    "explorer",
                    String::new(),
                    Some("01_explore.md"),
                    false
                ),
                (
                    "02_plan",
                    "plan",
                    "planner",
                    "01_explore".into(),
                    Some("plan.md"),
                    false
                ),
                (
                    "03_execute",
                    "execute",
                    "executor",
                    "02_plan".into(),
                    Some("03_execute.md"),
                    true
                ),
                (
                    "04_verify",
                    "verify",
                    "verifier",
                    "03_execute".into(),
                    Some("04_verify.md"),
                    true
                ),
            ]
        );
        let explore = &plan.tasks[0];
        assert!(explore.task_template.contains("{goal}"));
        assert!(explore
            .system_prompt
            .starts_with("You are a codebase explorer"));
        assert_eq!(*explore.tools, ["read", "grep", "find", "ls"]);
    }

    /// Issue 35: a task's job resources are its step's over its role's, frozen in the plan
    /// (through the journal's JSON too); a task a fan-out adds takes its role's.
    #[test]
    fn job_resources_are_the_steps_over_the_roles() {
        use crate::job_shape::JobShape;
        let team = "---\nname: t\n---\n\n- executor: agent=executor cpusPerTask=4 memoryMb=8000\n- planner: agent=planner\n";
        let wf = "---\nname: w\n---\n\n## a\nrole: executor\nmemoryMb: 300\ntimeLimitMinutes: 7\nexpands: tasks\n\ndo a\n\n## b\nrole: planner\n\ndo b\n";
        let cat = catalog(&[
            (Kind::Team, "/u/teams/t.team.md", team),
            (Kind::Workflow, "/u/workflows/w.workflow.md", wf),
        ]);
        let plan = build_plan(&cat, Some("t"), Some("w")).expect("plans");
        let shape = |c, m, t| JobShape {
            cpus_per_task: c,
            memory_mb: m,
            time_limit_minutes: t,
        };
        assert_eq!(plan.tasks[0].resources, shape(Some(4), Some(300), Some(7)));
        assert!(plan.tasks[1].resources.is_empty());
        let json = serde_json::to_string(&plan.tasks).expect("serializes");
        let read: Vec<PlannedTask> = serde_json::from_str(&json).expect("parses");
        assert_eq!(read, plan.tasks);
        let exp = plan.tasks[0].expands.as_ref().expect("a fan-out step");
        let executor = exp.roles.iter().find(|r| r.role == "executor").unwrap();
        let added = executor.task(
            SafeId::new("x1").unwrap(),
            "x1".into(),
            vec![],
            "added".into(),
        );
        assert_eq!(added.resources, shape(Some(4), Some(8000), None));
    }

    /// Issue 34: a role's `network=false` reaches its planned tasks and the tasks a fan-out
    /// adds in it, through the journal's JSON too.
    #[test]
    fn a_roles_network_reaches_its_tasks() {
        let team = "---\nname: t\n---\n\n- executor: agent=executor network=false\n- planner: agent=planner\n";
        let wf = "---\nname: w\n---\n\n## a\nrole: executor\nexpands: tasks\n\ndo a\n\n## b\nrole: planner\n\ndo b\n";
        let cat = catalog(&[
            (Kind::Team, "/u/teams/t.team.md", team),
            (Kind::Workflow, "/u/workflows/w.workflow.md", wf),
        ]);
        let plan = build_plan(&cat, Some("t"), Some("w")).expect("plans");
        assert_eq!(
            plan.tasks.iter().map(|t| t.network).collect::<Vec<_>>(),
            [Some(false), None]
        );
        let json = serde_json::to_string(&plan.tasks).expect("serializes");
        let read: Vec<PlannedTask> = serde_json::from_str(&json).expect("parses");
        assert_eq!(read, plan.tasks);
        let exp = plan.tasks[0].expands.as_ref().expect("a fan-out step");
        let executor = exp.roles.iter().find(|r| r.role == "executor").unwrap();
        let added = executor.task(
            SafeId::new("x1").unwrap(),
            "x1".into(),
            vec![],
            "added".into(),
        );
        assert_eq!(added.network, Some(false));
    }

    #[test]
    fn tasks_of_one_agent_share_one_prompt() {
        let wf = "---\nname: w\n---\n## a\nrole: one\n\n## b\nrole: two\n\n## c\nrole: exec\n";
        let cat = catalog(&[
            (Kind::Agent, "/u/agents/solo.md", AGENT),
            (Kind::Team, "/u/teams/t.team.md", TEAM),
            (Kind::Workflow, "/u/workflows/w.workflow.md", wf),
        ]);
        let plan = build_plan(&cat, Some("t"), None).expect("plans");
        let built: Vec<Arc<PlannedTask>> = plan.tasks.into_iter().map(Arc::new).collect();
        // What a journal replay sees: the same JSON, every prompt its own allocation.
        let json = serde_json::to_string(&built).expect("serializes");
        let read: Vec<Arc<PlannedTask>> = serde_json::from_str(&json).expect("parses");
        for (name, tasks, shared) in [
            ("built", built.clone(), true),
            ("read back", read.clone(), false),
            ("read back, shared", share_prompts(&read), true),
        ] {
            let same =
                |i: usize, j: usize| Arc::ptr_eq(&tasks[i].system_prompt, &tasks[j].system_prompt);
            assert_eq!((same(0, 1), same(0, 2)), (shared, false), "{name}");
            let same_tools = |i: usize, j: usize| Arc::ptr_eq(&tasks[i].tools, &tasks[j].tools);
            assert_eq!(
                (same_tools(0, 1), same_tools(0, 2)),
                (shared, false),
                "{name}"
            );
            assert_eq!(tasks, built, "{name}: only sharing changes");
            assert_eq!(
                serde_json::to_string(&tasks).expect("serializes"),
                json,
                "{name}"
            );
        }
    }

    #[test]
    fn read_back_tasks_with_equal_settings_share_one_common_part() {
        // Steps a and b: the same role, so everything but id, step and text is equal; c is
        // another role (another model), d a fix task's judge reference away from b.
        let wf = "---\nname: w\n---\n## a\nrole: two\n\n## b\nrole: two\n\n## c\nrole: one\n\n## d\nrole: two\n";
        let cat = catalog(&[
            (Kind::Agent, "/u/agents/solo.md", AGENT),
            (Kind::Team, "/u/teams/t.team.md", TEAM),
            (Kind::Workflow, "/u/workflows/w.workflow.md", wf),
        ]);
        let mut plan = build_plan(&cat, Some("t"), None).expect("plans");
        plan.tasks[3].title = Some("another".into());
        let built: Vec<Arc<PlannedTask>> = plan.tasks.into_iter().map(Arc::new).collect();
        let json = serde_json::to_string(&built).expect("serializes");
        let read: Vec<Arc<PlannedTask>> = serde_json::from_str(&json).expect("parses");
        let shared = share_prompts(&read);
        let same = |i: usize, j: usize| Arc::ptr_eq(shared[i].common(), shared[j].common());
        assert_eq!((same(0, 1), same(0, 2), same(0, 3)), (true, false, false));
        // Parts that differ still share the prompt.
        assert!(Arc::ptr_eq(
            &shared[0].system_prompt,
            &shared[3].system_prompt
        ));
        assert_eq!(shared, built);
        assert_eq!(serde_json::to_string(&shared).expect("serializes"), json);
        // Sharing again changes nothing.
        let again = share_prompts(&shared);
        assert!((0..4).all(|i| Arc::ptr_eq(&again[i], &shared[i])));
    }

    const AGENT: &str = "---\nname: solo\nmodel: a/agent\nthinking: low\n---\nSolo prompt.";
    const TEAM: &str = "---\nname: t\ndefaultWorkflow: w\nmaxConcurrency: 3\n---\n- one: agent=solo model=r/role\n- two: agent=solo\n- exec: agent=executor\n";

    #[test]
    fn effective_settings() {
        let wf = "---\nname: w\nmaxConcurrency: 5\n---\n## a\nrole: one\nmodel: s/step\noutput: false\n\n## b\nrole: one\ndependsOn: a\n\n## c\nrole: two\ndependsOn: a, b\nreads: a.md\n\n## d\nrole: exec\ndependsOn: c\n";
        let cat = catalog(&[
            (Kind::Agent, "/u/agents/solo.md", AGENT),
            (Kind::Team, "/u/teams/t.team.md", TEAM),
            (Kind::Workflow, "/u/workflows/w.workflow.md", wf),
        ]);
        let plan = build_plan(&cat, Some("t"), None).expect("plans");
        assert_eq!(
            (plan.workflow.as_str(), plan.max_concurrency),
            ("w", Some(3))
        );
        let shape: Vec<_> = plan
            .tasks
            .iter()
            .map(|t| {
                (
                    t.id.as_str(),
                    t.model.as_deref(),
                    t.output.as_deref(),
                    t.depends_on.join(","),
                    t.reads.join(","),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("01_a", Some("s/step"), None, String::new(), String::new()),
                (
                    "02_b",
                    Some("r/role"),
                    Some("02_b.md"),
                    "01_a".into(),
                    String::new()
                ),
                (
                    "03_c",
                    Some("a/agent"),
                    Some("03_c.md"),
                    "01_a,02_b".into(),
                    "a.md".into()
                ),
                ("04_d", None, Some("04_d.md"), "03_c".into(), String::new()),
            ]
        );
        let solo = &plan.tasks[2];
        assert_eq!(
            (
                solo.agent.as_str(),
                &*solo.system_prompt,
                solo.thinking.as_deref()
            ),
            ("solo", "Solo prompt.", Some("low"))
        );
        assert_eq!(
            (solo.tools.join(","), solo.writes),
            ("read,grep,find,ls".to_string(), false),
            "no tools line: read-only"
        );
        assert!(plan.tasks[3].writes, "builtin executor writes");

        // Without a team maxConcurrency the workflow's applies.
        let team = TEAM.replace("maxConcurrency: 3\n", "");
        let cat = catalog(&[
            (Kind::Agent, "/u/agents/solo.md", AGENT),
            (Kind::Team, "/u/teams/t.team.md", &team),
            (Kind::Workflow, "/u/workflows/w.workflow.md", wf),
        ]);
        assert_eq!(
            build_plan(&cat, Some("t"), Some("w")).map(|p| p.max_concurrency),
            Ok(Some(5))
        );
    }

    #[test]
    fn effort_and_fallback_models_are_frozen_into_the_task() {
        let agent = "---\nname: solo\nmodel: a/one\nfallbackModels: b/two, c/three\n\
                     thinking: high\neffort: low\n---\nSolo prompt.";
        let team = "---\nname: t\ndefaultWorkflow: w\n---\n- one: agent=solo\n";
        let wf = "---\nname: w\n---\n## a\nrole: one\n";
        let cat = catalog(&[
            (Kind::Agent, "/u/agents/solo.md", agent),
            (Kind::Team, "/u/teams/t.team.md", team),
            (Kind::Workflow, "/u/workflows/w.workflow.md", wf),
        ]);
        let plan = build_plan(&cat, Some("t"), None).expect("plans");
        let t = &plan.tasks[0];
        assert_eq!(
            (
                t.model.as_deref(),
                t.thinking.as_deref(),
                t.effort.as_deref(),
                t.fallback_models.as_slice()
            ),
            (
                Some("a/one"),
                Some("high"),
                Some("low"),
                ["b/two".to_string(), "c/three".to_string()].as_slice()
            )
        );
        // What run.created journals reads back the same; a task without them writes neither.
        let json = serde_json::to_value(&plan.tasks[0]).expect("serializes");
        assert_eq!(
            json["fallbackModels"],
            serde_json::json!(["b/two", "c/three"])
        );
        assert_eq!(json["effort"], "low");
        let back: PlannedTask = serde_json::from_value(json).expect("reads back");
        assert_eq!(&back, &plan.tasks[0]);
        let plain = build_plan(&cat, Some("default"), None).expect("plans");
        let json = serde_json::to_value(&plain.tasks[0]).expect("serializes");
        assert!(json.get("fallbackModels").is_none() && json.get("effort").is_none());
    }

    #[test]
    fn default_tools_by_name() {
        let cases = [
            ("executor", true),
            ("Writer", true),
            ("verifier", true),
            ("explorer", false),
            ("my-agent", false),
        ];
        for (name, writes) in cases {
            assert_eq!(tools_write(&default_tools(name)), writes, "{name}");
        }
    }

    #[test]
    fn plan_errors() {
        type Case = (
            &'static str,
            Option<&'static str>,
            Option<&'static str>,
            &'static str,
            &'static [(
                &'static str,
                Option<u32>,
                Option<&'static str>,
                &'static str,
            )],
        );
        let cases: &[Case] = &[
            (
                "unknown team",
                Some("ghost"),
                None,
                "",
                &[(REQUEST, None, Some("team"), "unknown team `ghost`")],
            ),
            (
                "unknown workflow",
                None,
                Some("ghost"),
                "",
                &[(REQUEST, None, Some("workflow"), "unknown workflow `ghost`")],
            ),
            (
                "team default workflow missing",
                Some("t"),
                None,
                "",
                &[(
                    "/u/teams/t.team.md",
                    Some(3),
                    Some("defaultWorkflow"),
                    "`w`, which does not exist",
                )],
            ),
            (
                "step role not in team",
                Some("t"),
                None,
                "## a\nrole: one\n\n## b\nrole: nobody\n",
                &[(
                    "/u/workflows/w.workflow.md",
                    Some(4),
                    Some("role"),
                    "role `nobody`",
                )],
            ),
            (
                "cycle",
                Some("t"),
                None,
                "## a\nrole: one\ndependsOn: b\n\n## b\nrole: one\ndependsOn: a\n",
                &[(
                    "/u/workflows/w.workflow.md",
                    Some(1),
                    Some("dependsOn"),
                    "a -> b -> a",
                )],
            ),
            (
                "duplicate and unknown dep",
                Some("t"),
                None,
                "## a\nrole: one\n\n## a\nrole: two\ndependsOn: zz\n",
                &[
                    (
                        "/u/workflows/w.workflow.md",
                        Some(4),
                        Some("id"),
                        "duplicate step `a`",
                    ),
                    (
                        "/u/workflows/w.workflow.md",
                        Some(4),
                        Some("dependsOn"),
                        "`zz`",
                    ),
                ],
            ),
            (
                "empty",
                Some("t"),
                None,
                "no steps here\n",
                &[("/u/workflows/w.workflow.md", None, None, "no steps")],
            ),
            (
                "unsafe output",
                Some("t"),
                None,
                "## a\nrole: one\noutput: ../../x\n",
                &[(
                    "/u/workflows/w.workflow.md",
                    Some(3),
                    Some("output"),
                    "not a plain artifact file name",
                )],
            ),
            (
                "role naming an unknown agent",
                Some("t"),
                None,
                "## a\nrole: ghostly\n",
                &[(
                    "/u/teams/t.team.md",
                    Some(9),
                    Some("agent"),
                    "agent `nobody-home`",
                )],
            ),
        ];
        for (name, team, workflow, wf_text, want) in cases {
            let team_text = format!("{TEAM}- ghostly: agent=nobody-home\n");
            let mut files = vec![
                (Kind::Agent, "/u/agents/solo.md", AGENT),
                (Kind::Team, "/u/teams/t.team.md", team_text.as_str()),
            ];
            if !wf_text.is_empty() {
                files.push((Kind::Workflow, "/u/workflows/w.workflow.md", wf_text));
            }
            let err = build_plan(&catalog(&files), *team, *workflow).expect_err(name);
            assert_eq!(err.len(), want.len(), "{name}: {err:?}");
            for (d, (path, line, field, msg)) in err.iter().zip(want.iter()) {
                assert_eq!(
                    (d.path.as_str(), d.line, d.field.as_deref(), d.severity),
                    (*path, *line, *field, Severity::Error),
                    "{name}"
                );
                assert!(
                    d.message.contains(msg),
                    "{name}: {:?} lacks {msg:?}",
                    d.message
                );
            }
        }
    }

    #[test]
    fn tasks_get_their_skills() {
        let wf = "---\nname: w\n---\n## a\nrole: executor\nskills: extra, safe-bash\n\n## b\nrole: executor\nskills: false\n\n## c\nrole: quiet\n";
        let team = "---\nname: t\ndefaultWorkflow: w\n---\n- executor: agent=executor skills=from-role\n- quiet: agent=solo skills=false\n";
        let agent = "---\nname: solo\nskills: mine\n---\nSolo.";
        let skill = "---\nname: extra\ndescription: An extra skill.\n---\nDo extra things.";
        let cat = catalog(&[
            (Kind::Agent, "/u/agents/solo.md", agent),
            (Kind::Team, "/u/teams/t.team.md", team),
            (Kind::Workflow, "/u/workflows/w.workflow.md", wf),
            (Kind::Skill, "/u/skills/extra/SKILL.md", skill),
        ]);
        let shape = |run: &RunSkills| -> Vec<String> {
            let plan = build_plan_with(&cat, Some("t"), None, run).expect("plans");
            plan.tasks
                .iter()
                .map(|t| {
                    let names: Vec<String> = t
                        .skills
                        .iter()
                        .map(|s| format!("{}{}", s.name, if s.missing { "?" } else { "" }))
                        .collect();
                    format!("{}: {}", t.id, names.join(","))
                })
                .collect()
        };
        assert_eq!(
            shape(&RunSkills::Selected),
            [
                "01_a: safe-bash,verification-before-done,from-role?,extra",
                "02_b: from-role?",
                "03_c: mine?",
            ]
        );
        assert_eq!(
            shape(&RunSkills::Add(vec!["extra".into()])),
            [
                "01_a: safe-bash,verification-before-done,from-role?,extra",
                "02_b: from-role?,extra",
                "03_c: mine?,extra",
            ]
        );
        assert_eq!(shape(&RunSkills::Off), ["01_a: ", "02_b: ", "03_c: "]);
        let plan = build_plan(&cat, Some("t"), None).expect("plans");
        let extra = plan.tasks[0].skills.iter().find(|s| s.name == "extra");
        assert_eq!(
            extra.map(|s| (s.description.as_str(), s.text.as_str())),
            Some(("An extra skill.", "Do extra things."))
        );
        // Builtin teams: every role default is a shipped skill.
        let plan = build_plan(&Catalog::builtin(), None, None).expect("plans");
        for t in &plan.tasks {
            assert!(!t.skills.is_empty(), "{}", t.id);
            assert!(t.skills.iter().all(|s| !s.missing), "{}", t.id);
        }
    }
}
