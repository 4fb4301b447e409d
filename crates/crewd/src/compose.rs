//! What a `team.run`/`team.plan` asks to run: one team's workflow, one agent (`agent`), or a
//! chain of teams (`chain`), and the run's `skills`. Checked here; planned by crew-core
//! (`crew_core::plan`, `crew_core::compose`).

use crate::rpc::checks;
use crew_api::types::{RunParams, RunSkillsParam};
use crew_api::ApiError;
use crew_core::plan::{build_plan_with, Plan};
use crew_core::resource::{Catalog, Diagnostic};
use crew_core::skills::{RunSkills, MAX_SKILLS};

pub enum Shape {
    Team {
        team: Option<String>,
        workflow: Option<String>,
        skills: RunSkills,
    },
    Agent {
        agent: String,
        role: Option<String>,
        skills: RunSkills,
    },
    Chain {
        teams: Vec<String>,
        skills: RunSkills,
    },
}

/// The shape of the params, refusing combinations that mean nothing.
pub fn shape(p: &RunParams) -> Result<Shape, ApiError> {
    let skills = run_skills(p.skills.as_ref())?;
    if p.role.is_some() && p.agent.is_none() {
        return Err(ApiError::invalid_params("role", "is only for `agent` runs"));
    }
    match (&p.agent, &p.chain) {
        (Some(_), Some(_)) => Err(ApiError::invalid_params(
            "chain",
            "a run has either `agent` or `chain`, not both",
        )),
        (Some(agent), None) => {
            if p.team.is_some() || p.workflow.is_some() {
                return Err(ApiError::invalid_params(
                    "agent",
                    "an `agent` run has no `team` or `workflow`",
                ));
            }
            if agent.trim().is_empty() {
                return Err(ApiError::invalid_params("agent", "must not be empty"));
            }
            Ok(Shape::Agent {
                agent: agent.clone(),
                role: p.role.clone().filter(|r| !r.trim().is_empty()),
                skills,
            })
        }
        (None, Some(teams)) => {
            if p.team.is_some() || p.workflow.is_some() {
                return Err(ApiError::invalid_params(
                    "chain",
                    "a chain runs each team's default workflow: no `team` or `workflow` with it",
                ));
            }
            if teams.is_empty() || teams.len() > crew_core::compose::MAX_CHAIN {
                return Err(ApiError::invalid_params(
                    "chain",
                    format!("names 1 to {} teams", crew_core::compose::MAX_CHAIN),
                ));
            }
            for t in teams {
                checks::no_nul("chain", t)?;
                if t.trim().is_empty() {
                    return Err(ApiError::invalid_params("chain", "a team name is empty"));
                }
            }
            Ok(Shape::Chain {
                teams: teams.clone(),
                skills,
            })
        }
        (None, None) => Ok(Shape::Team {
            team: p.team.clone(),
            workflow: p.workflow.clone(),
            skills,
        }),
    }
}

fn run_skills(p: Option<&RunSkillsParam>) -> Result<RunSkills, ApiError> {
    match p {
        None | Some(RunSkillsParam::Bool(true)) => Ok(RunSkills::Selected),
        Some(RunSkillsParam::Bool(false)) => Ok(RunSkills::Off),
        Some(RunSkillsParam::Names(names)) if names.is_empty() => Ok(RunSkills::Selected),
        Some(RunSkillsParam::Names(names)) => {
            if names.len() > MAX_SKILLS {
                return Err(ApiError::invalid_params(
                    "skills",
                    format!("names at most {MAX_SKILLS} skills"),
                ));
            }
            for n in names {
                if !crew_core::ids::is_safe_id(n) {
                    return Err(ApiError::invalid_params(
                        "skills",
                        format!(
                            "`{}` is not a skill name (letters, digits, `_`, `-`)",
                            crew_api::error::capped(n, 64)
                        ),
                    ));
                }
            }
            Ok(RunSkills::Add(names.clone()))
        }
    }
}

impl Shape {
    pub fn plan(&self, catalog: &Catalog) -> Result<Plan, Vec<Diagnostic>> {
        match self {
            Shape::Team {
                team,
                workflow,
                skills,
            } => build_plan_with(catalog, team.as_deref(), workflow.as_deref(), skills),
            Shape::Agent {
                agent,
                role,
                skills,
            } => crew_core::compose::agent_plan(catalog, agent, role.as_deref(), skills),
            Shape::Chain { teams, skills } => {
                crew_core::compose::chain_plan(catalog, teams, skills)
            }
        }
    }

    /// The workflows whose step templates the plan's tasks come from.
    pub fn workflows(&self, plan: &Plan, catalog: &Catalog) -> Vec<String> {
        match self {
            Shape::Team { .. } => vec![plan.workflow.clone()],
            Shape::Agent { .. } => Vec::new(),
            Shape::Chain { teams, .. } => teams
                .iter()
                .filter_map(|t| catalog.team(t))
                .map(|t| {
                    t.default_workflow
                        .clone()
                        .unwrap_or_else(|| "default".to_string())
                })
                .collect(),
        }
    }

    /// The run's `skills` param: tasks crew adds at run time (fan-out, fix, resolve, a judging
    /// selector's role) get their role's skills under it, as planned tasks do.
    pub fn skills(&self) -> &RunSkills {
        match self {
            Shape::Team { skills, .. }
            | Shape::Agent { skills, .. }
            | Shape::Chain { skills, .. } => skills,
        }
    }

    /// The team whose `workspaceMode` the run takes when the params name none.
    pub fn first_team<'a>(&'a self, plan: &'a Plan) -> Option<&'a str> {
        match self {
            Shape::Team { .. } => Some(plan.team.as_str()),
            Shape::Agent { .. } => None,
            Shape::Chain { teams, .. } => teams.first().map(String::as_str),
        }
    }
}
