//! Plans that are not one team's workflow: a one-agent run (`team.run` with `agent`) and a
//! chain of teams (`chain`).
//!
//! A chain is planned as *one* run whose tasks are the teams' plans one after another: each
//! team's tasks are renumbered after the previous team's, and each team's first tasks (those
//! without dependencies) depend on the previous team's last tasks (those nothing depends on)
//! and read its shared outputs. That is the handoff: the previous team's final results reach
//! the next team's prompts as dependency outputs, its shared outputs as reads. Because it is
//! one run, cancel, resume, retry, budgets, the journal and recovery after a crash act on the
//! whole chain with no machinery of their own.

use crate::ids::{task_id, ArtifactName, SafeId};
use crate::plan::{build_plan_with, tools_write, Plan, PlannedTask, REQUEST};
use crate::resource::{Catalog, Diagnostic};
use crate::skills::{RunSkills, Selection};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Teams of one chain, at most.
pub const MAX_CHAIN: usize = 16;

/// The team name of a one-agent run of `agent`.
pub fn direct_team(agent: &str) -> String {
    format!("direct-{agent}")
}

/// The workflow name of every one-agent run.
pub const DIRECT_WORKFLOW: &str = "direct-agent";

/// A one-step plan: `agent` does the goal as role `role` (default: the agent's name).
pub fn agent_plan(
    catalog: &Catalog,
    agent_name: &str,
    role: Option<&str>,
    run_skills: &RunSkills,
) -> Result<Plan, Vec<Diagnostic>> {
    let Some(agent) = catalog.agent(agent_name) else {
        return Err(vec![Diagnostic::error(
            REQUEST,
            None,
            Some("agent"),
            format!("unknown agent `{agent_name}`"),
        )]);
    };
    // An agent file with an error may be listed but must not run (as in `build_plan`).
    let errors: Vec<Diagnostic> = catalog
        .diagnostics
        .iter()
        .filter(|d| d.path == agent.path && d.severity == crate::resource::Severity::Error)
        .cloned()
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    let role = role.unwrap_or(&agent.name).to_string();
    let id = task_id(1, "agent");
    let output = ArtifactName::new(format!("{id}.md")).map_err(|e| {
        vec![Diagnostic::error(
            REQUEST,
            None,
            Some("agent"),
            e.to_string(),
        )]
    })?;
    let tools: Arc<[String]> = agent
        .tools
        .clone()
        .unwrap_or_else(|| crate::plan::default_tools(&agent.name))
        .into();
    let mut sets = crate::plan::SkillSets::default();
    let skills = sets.get(
        catalog,
        &Selection {
            role: &role,
            agent: &agent.skills,
            team_role: None,
            step: None,
            run: run_skills,
        },
    );
    Ok(Plan {
        team: direct_team(&agent.name),
        workflow: DIRECT_WORKFLOW.to_string(),
        max_concurrency: Some(1),
        tasks: vec![PlannedTask::from(crate::plan::FlatTask {
            candidates: None,
            resources: Default::default(),
            network: None,
            resolves: None,
            id,
            step_id: "agent".into(),
            role,
            agent: agent.name.clone(),
            depends_on: Vec::new(),
            task_template: "{goal}".into(),
            output: Some(output),
            reads: Vec::new(),
            model: agent.model.clone(),
            system_prompt: Arc::from(agent.system_prompt.as_str()),
            system_prompt_mode: agent.system_prompt_mode,
            writes: tools_write(&tools),
            tools,
            thinking: agent.thinking.clone(),
            effort: agent.effort.clone(),
            fallback_models: agent.fallback_models.clone(),
            seed_paths: Vec::new(),
            scope: Vec::new(),
            checks: Default::default(),
            expands: None,
            added_by: None,
            judging: Default::default(),
            title: None,
            skills,
        })],
    })
}

/// The teams' plans, each with its default workflow, as one plan (see the module doc). The
/// plan's team and workflow are the names joined with `+`; its concurrency is the largest of
/// the teams'.
pub fn chain_plan(
    catalog: &Catalog,
    teams: &[String],
    run_skills: &RunSkills,
) -> Result<Plan, Vec<Diagnostic>> {
    if teams.is_empty() || teams.len() > MAX_CHAIN {
        return Err(vec![Diagnostic::error(
            REQUEST,
            None,
            Some("chain"),
            format!("a chain names 1 to {MAX_CHAIN} teams"),
        )]);
    }
    let mut plans = Vec::with_capacity(teams.len());
    let mut diags = Vec::new();
    for team in teams {
        match build_plan_with(catalog, Some(team), None, run_skills) {
            Ok(p) => plans.push(p),
            Err(d) => diags.extend(d),
        }
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    let total: usize = plans.iter().map(|p| p.tasks.len()).sum();
    if total > crate::resource::MAX_STEPS {
        return Err(vec![Diagnostic::error(
            REQUEST,
            None,
            Some("chain"),
            format!(
                "the chain has {total} tasks; at most {} fit in one run",
                crate::resource::MAX_STEPS
            ),
        )]);
    }
    let mut tasks: Vec<PlannedTask> = Vec::with_capacity(total);
    let mut previous_leaves: Vec<SafeId> = Vec::new();
    let mut previous_outputs: Vec<ArtifactName> = Vec::new();
    for plan in &plans {
        let first = tasks.len();
        let ids: HashMap<&str, SafeId> = plan
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.as_str(), task_id(first + i + 1, &t.step_id)))
            .collect();
        let mut depended_on: HashSet<&str> = HashSet::new();
        for t in &plan.tasks {
            depended_on.extend(t.depends_on.iter().map(SafeId::as_str));
        }
        let mut outputs = Vec::new();
        let mut leaves = Vec::new();
        for t in &plan.tasks {
            let Some(id) = ids.get(t.id.as_str()).cloned() else {
                continue;
            };
            let mut task = t.clone();
            // A default output is named after the task id, which changed.
            let default_output = format!("{}.md", t.id);
            if let Some(out) = &t.output {
                if out.as_str() == default_output {
                    task.output = ArtifactName::new(format!("{id}.md")).ok();
                }
            }
            task.depends_on = t
                .depends_on
                .iter()
                .filter_map(|d| ids.get(d.as_str()).cloned())
                .collect();
            if t.depends_on.is_empty() {
                task.depends_on = previous_leaves.clone();
                for r in &previous_outputs {
                    if !task.reads.contains(r) {
                        task.reads.push(r.clone());
                    }
                }
            }
            if !depended_on.contains(t.id.as_str()) {
                leaves.push(id.clone());
            }
            if let Some(out) = &task.output {
                // The leaves' outputs reach the next team as dependency outputs already.
                if depended_on.contains(t.id.as_str()) {
                    outputs.push(out.clone());
                }
            }
            task.id = id;
            tasks.push(task);
        }
        previous_leaves = leaves;
        previous_outputs = outputs;
    }
    let join = |f: fn(&Plan) -> &str| plans.iter().map(f).collect::<Vec<_>>().join("+");
    Ok(Plan {
        team: join(|p| p.team.as_str()),
        workflow: join(|p| p.workflow.as_str()),
        max_concurrency: plans.iter().filter_map(|p| p.max_concurrency).max(),
        tasks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_agent_plan() {
        let cat = Catalog::builtin();
        let plan = agent_plan(&cat, "executor", None, &RunSkills::Selected).expect("plans");
        assert_eq!(
            (
                plan.team.as_str(),
                plan.workflow.as_str(),
                plan.max_concurrency
            ),
            ("direct-executor", DIRECT_WORKFLOW, Some(1))
        );
        let t = &plan.tasks[0];
        assert_eq!(
            (
                t.id.as_str(),
                t.role.as_str(),
                t.task_template.as_str(),
                t.writes
            ),
            ("01_agent", "executor", "{goal}", true)
        );
        let skills: Vec<&str> = t.skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(skills, ["safe-bash", "verification-before-done"]);
        let plan = agent_plan(&cat, "executor", Some("reviewer"), &RunSkills::Off).expect("plans");
        assert_eq!(plan.tasks[0].role, "reviewer");
        assert!(plan.tasks[0].skills.is_empty());
        let err = agent_plan(&cat, "ghost", None, &RunSkills::Selected).expect_err("unknown");
        assert_eq!(err[0].field.as_deref(), Some("agent"));
    }

    #[test]
    fn chain_concatenates_with_handoff_edges() {
        let cat = Catalog::builtin();
        let teams = vec!["research".to_string(), "default".to_string()];
        let plan = chain_plan(&cat, &teams, &RunSkills::Selected).expect("plans");
        let research = crate::plan::build_plan(&cat, Some("research"), None).expect("plans");
        assert_eq!(plan.team, "research+default");
        assert_eq!(plan.workflow, format!("{}+default", research.workflow));
        let n = research.tasks.len();
        let shape: Vec<String> = plan
            .tasks
            .iter()
            .map(|t| {
                format!(
                    "{} after [{}] out={} reads=[{}]",
                    t.id,
                    t.depends_on.join(","),
                    t.output.as_deref().unwrap_or("-"),
                    t.reads.join(",")
                )
            })
            .collect();
        // Ids are unique and renumbered; the second team's first task hangs off the first
        // team's last one.
        let ids: HashSet<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids.len(), plan.tasks.len(), "{shape:#?}");
        let last_of_first = &plan.tasks[n - 1];
        let first_of_second = &plan.tasks[n];
        assert_eq!(first_of_second.step_id, "explore");
        assert_eq!(
            first_of_second.depends_on,
            std::slice::from_ref(&last_of_first.id),
            "{shape:#?}"
        );
        assert_eq!(
            first_of_second.output.as_deref(),
            Some(format!("{}.md", first_of_second.id).as_str())
        );
        // Reads of the first team's inner outputs, never of its leaf (that is a dependency).
        let inner: Vec<&str> = plan.tasks[..n - 1]
            .iter()
            .filter_map(|t| t.output.as_deref())
            .collect();
        let reads: Vec<&str> = first_of_second.reads.iter().map(|r| r.as_str()).collect();
        assert_eq!(reads, inner, "{shape:#?}");
        assert!(chain_plan(&cat, &[], &RunSkills::Selected).is_err());
        let err = chain_plan(&cat, &["ghost".to_string()], &RunSkills::Selected)
            .expect_err("unknown team");
        assert_eq!(err[0].field.as_deref(), Some("team"));
    }
}
