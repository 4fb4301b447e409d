//! The builtin agents, teams, workflows and skills, compiled into the binary. The files live in
//! `crates/crew-core/builtin/` in the same formats as user files.

use super::{parse_file, Diagnostic, Kind, Parsed, Source};

macro_rules! file {
    ($kind:expr, $dir:literal, $name:literal) => {
        (
            $kind,
            concat!("builtin:", $dir, "/", $name),
            include_str!(concat!("../../builtin/", $dir, "/", $name)),
        )
    };
}

static FILES: &[(Kind, &str, &str)] = &[
    file!(Kind::Agent, "agents", "analyst.md"),
    file!(Kind::Agent, "agents", "critic.md"),
    file!(Kind::Agent, "agents", "executor.md"),
    file!(Kind::Agent, "agents", "explorer.md"),
    file!(Kind::Agent, "agents", "planner.md"),
    file!(Kind::Agent, "agents", "resolver.md"),
    file!(Kind::Agent, "agents", "reviewer.md"),
    file!(Kind::Agent, "agents", "security-reviewer.md"),
    file!(Kind::Agent, "agents", "test-engineer.md"),
    file!(Kind::Agent, "agents", "verifier.md"),
    file!(Kind::Agent, "agents", "writer.md"),
    file!(Kind::Team, "teams", "default.team.md"),
    file!(Kind::Team, "teams", "fast-fix.team.md"),
    file!(Kind::Team, "teams", "implement.team.md"),
    file!(Kind::Team, "teams", "parallel-research.team.md"),
    file!(Kind::Team, "teams", "research.team.md"),
    file!(Kind::Team, "teams", "review.team.md"),
    file!(Kind::Workflow, "workflows", "default.workflow.md"),
    file!(Kind::Workflow, "workflows", "fast-fix.workflow.md"),
    file!(Kind::Workflow, "workflows", "implement.workflow.md"),
    file!(Kind::Workflow, "workflows", "parallel-research.workflow.md"),
    file!(Kind::Workflow, "workflows", "pipeline.workflow.md"),
    file!(Kind::Workflow, "workflows", "research.workflow.md"),
    file!(Kind::Workflow, "workflows", "review.workflow.md"),
    file!(Kind::Skill, "skills", "context-artifact-hygiene/SKILL.md"),
    file!(Kind::Skill, "skills", "delegation-patterns/SKILL.md"),
    file!(Kind::Skill, "skills", "multi-perspective-review/SKILL.md"),
    file!(Kind::Skill, "skills", "read-only-explorer/SKILL.md"),
    file!(
        Kind::Skill,
        "skills",
        "requirements-to-task-packet/SKILL.md"
    ),
    file!(Kind::Skill, "skills", "safe-bash/SKILL.md"),
    file!(Kind::Skill, "skills", "security-review/SKILL.md"),
    file!(Kind::Skill, "skills", "verification-before-done/SKILL.md"),
];

/// Every builtin file as (kind, path, content); paths look like `builtin:agents/explorer.md`.
pub fn files() -> &'static [(Kind, &'static str, &'static str)] {
    FILES
}

/// Every builtin file parsed, ready to be assembled together with user and project files.
pub fn parsed() -> Vec<(Option<Parsed>, Vec<Diagnostic>)> {
    FILES
        .iter()
        .map(|&(kind, path, content)| parse_file(kind, Source::Builtin, path, content.as_bytes()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::build_plan;
    use crate::resource::{validate_catalog, Catalog};

    #[test]
    fn builtins_parse_cleanly() {
        for (p, d) in parsed() {
            assert!(p.is_some());
            assert!(d.is_empty(), "{d:?}");
        }
        let cat = Catalog::builtin();
        assert!(cat.diagnostics.is_empty(), "{:?}", cat.diagnostics);
        assert!(
            validate_catalog(&cat).is_empty(),
            "{:?}",
            validate_catalog(&cat)
        );
        let names = |keys: Vec<&String>| {
            keys.into_iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(
            names(cat.agents.keys().collect()),
            "analyst,critic,executor,explorer,planner,resolver,reviewer,security-reviewer,test-engineer,verifier,writer"
        );
        assert_eq!(
            names(cat.teams.keys().collect()),
            "default,fast-fix,implement,parallel-research,research,review"
        );
        assert_eq!(
            names(cat.workflows.keys().collect()),
            "default,fast-fix,implement,parallel-research,pipeline,research,review"
        );
        for (path, a) in cat.agents.values().map(|a| (&a.path, a)) {
            assert!(path.starts_with("builtin:agents/"), "{path}");
            assert!(a.tools.is_some() && !a.system_prompt.is_empty(), "{path}");
            assert_eq!(a.source, Source::Builtin);
        }
    }

    #[test]
    fn builtin_agent_tools() {
        let cat = Catalog::builtin();
        let cases: &[(&str, &str)] = &[
            ("analyst", "read,grep,find,ls"),
            ("critic", "read,grep,find,ls"),
            ("executor", "read,grep,find,ls,bash,edit,write"),
            ("explorer", "read,grep,find,ls"),
            ("planner", "read,grep,find,ls"),
            ("reviewer", "read,grep,find,ls,bash"),
            ("security-reviewer", "read,grep,find,ls,bash"),
            ("test-engineer", "read,grep,find,ls,bash,edit,write"),
            ("verifier", "read,grep,find,ls,bash"),
            ("writer", "read,grep,find,ls,edit,write"),
        ];
        for (name, tools) in cases {
            let agent = cat.agent(name).expect(name);
            assert_eq!(
                agent.tools.as_ref().map(|t| t.join(",")).as_deref(),
                Some(*tools),
                "{name}"
            );
        }
        assert_eq!(cat.agent("verifier").and_then(|a| a.max_turns), Some(15));
    }

    #[test]
    fn every_builtin_team_plans() {
        let cat = Catalog::builtin();
        for team in cat.teams.keys() {
            let plan = build_plan(&cat, Some(team), None);
            assert!(plan.is_ok(), "{team}: {plan:?}");
        }
        // pipeline has no team of its own; the research teams have its roles.
        for team in ["research", "parallel-research"] {
            assert!(
                build_plan(&cat, Some(team), Some("pipeline")).is_ok(),
                "{team}"
            );
        }
    }

    #[test]
    fn parallel_research_explores_after_discover() {
        let cat = Catalog::builtin();
        let wf = cat.workflow("parallel-research").expect("builtin");
        let explores: Vec<_> = wf
            .steps
            .iter()
            .filter(|s| s.id.starts_with("explore-"))
            .collect();
        assert_eq!(explores.len(), 4);
        for s in explores {
            assert_eq!(s.depends_on, ["discover"], "{}", s.id);
        }
        let pipeline = cat.workflow("pipeline").expect("builtin");
        let shape: Vec<_> = pipeline
            .steps
            .iter()
            .map(|s| (s.id.as_str(), s.role.as_str()))
            .collect();
        assert_eq!(
            shape,
            [
                ("research", "explorer"),
                ("analyze", "analyst"),
                ("synthesize", "analyst"),
                ("document", "writer")
            ]
        );
    }

    #[test]
    fn builtin_plans_snapshot() {
        let cat = Catalog::builtin();
        let mut plans = Vec::new();
        for team in cat.teams.keys() {
            let plan = build_plan(&cat, Some(team), None).expect("plans");
            let tasks: Vec<String> = plan
                .tasks
                .iter()
                .map(|t| {
                    let judging = match (&t.judging.judge, &t.judging.fix) {
                        (true, Some(f)) => {
                            format!(" judge(fixer={}, rounds={})", f.fixer.role, f.max_rounds)
                        }
                        (true, None) => " judge(no loop)".to_string(),
                        (false, _) => String::new(),
                    };
                    format!(
                        "{} [{}/{}] after [{}] out={} writes={} tools={}{}{judging}",
                        t.id,
                        t.role,
                        t.agent,
                        t.depends_on.join(","),
                        t.output.as_deref().unwrap_or("-"),
                        t.writes,
                        t.tools.join(","),
                        t.expands.as_ref().map_or_else(String::new, |e| format!(
                            " expands(max={}, roles={})",
                            e.max_tasks,
                            e.roles
                                .iter()
                                .map(|r| format!("{}/{}", r.role, r.agent))
                                .collect::<Vec<_>>()
                                .join(",")
                        ))
                    )
                })
                .collect();
            plans.push(serde_json::json!({
                "team": plan.team,
                "workflow": plan.workflow,
                "maxConcurrency": plan.max_concurrency,
                "tasks": tasks,
            }));
        }
        insta::assert_json_snapshot!("builtin_plans", plans);
    }
}
