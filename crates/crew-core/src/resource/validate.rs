//! Checks across resources: team roles against agents, workflows against themselves and against
//! the teams that use them. Per-file problems are found by the parsers.

use super::{Catalog, Diagnostic, Severity, Team, TeamRole, Workflow};
use std::collections::HashSet;

/// Every cross-resource problem of the catalog (`resource.validate`).
pub fn validate_catalog(c: &Catalog) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // Skills that are not installed only weaken a prompt, so they are warnings.
    for agent in c.agents.values() {
        for skill in agent.skills.iter().filter(|s| c.skill(s).is_none()) {
            out.push(Diagnostic::warning(
                &agent.path,
                None,
                Some("skills"),
                format!(
                    "agent `{}` selects skill `{skill}`, which is not installed",
                    agent.name
                ),
            ));
        }
    }
    for team in c.teams.values() {
        for role in &team.roles {
            if c.agent(&role.agent).is_none() {
                out.push(unknown_agent(team, role));
            }
            let skills = role.skills.iter().flatten();
            for skill in skills.filter(|s| c.skill(s).is_none()) {
                out.push(Diagnostic::warning(
                    &team.path,
                    Some(role.line),
                    Some("skills"),
                    format!(
                        "role `{}` selects skill `{skill}`, which is not installed",
                        role.name
                    ),
                ));
            }
        }
        if let Some(wf) = &team.default_workflow {
            if c.workflow(wf).is_none() {
                out.push(Diagnostic::error(
                    &team.path,
                    team.field_lines.get("defaultWorkflow").copied(),
                    Some("defaultWorkflow"),
                    format!(
                        "team `{}` names default workflow `{wf}`, which does not exist",
                        team.name
                    ),
                ));
            }
        }
    }
    for wf in c.workflows.values() {
        out.extend(workflow_structure(wf, Severity::Warning));
    }
    for team in c.teams.values() {
        if let Some(wf) = team.default_workflow.as_deref().and_then(|w| c.workflow(w)) {
            out.extend(step_roles(wf, team));
        }
    }
    out
}

pub(crate) fn unknown_agent(team: &Team, role: &TeamRole) -> Diagnostic {
    Diagnostic::error(
        &team.path,
        Some(role.line),
        Some("agent"),
        format!(
            "role `{}` of team `{}` uses agent `{}`, which does not exist or is disabled",
            role.name, team.name, role.agent
        ),
    )
}

/// Problems of a workflow on its own: duplicate step ids, unknown or cyclic `dependsOn`, no
/// steps (with `empty` severity: a warning in a catalog listing, an error when planning).
pub(crate) fn workflow_structure(wf: &Workflow, empty: Severity) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if wf.steps.is_empty() {
        let message = format!(
            "workflow `{}` has no steps (`## step-id` sections)",
            wf.name
        );
        out.push(match empty {
            Severity::Error => Diagnostic::error(&wf.path, None, None, message),
            Severity::Warning => Diagnostic::warning(&wf.path, None, None, message),
        });
        return out;
    }
    let mut seen = HashSet::new();
    for step in &wf.steps {
        if let Some(problem) = crate::prompt::template_problem(&step.task) {
            out.push(Diagnostic::error(
                &wf.path,
                Some(step.line),
                Some("task"),
                problem,
            ));
        }
        if !seen.insert(step.id.as_str()) {
            out.push(Diagnostic::error(
                &wf.path,
                Some(step.line),
                Some("id"),
                format!("duplicate step `{}` in workflow `{}`", step.id, wf.name),
            ));
        }
    }
    for step in &wf.steps {
        for dep in step
            .depends_on
            .iter()
            .filter(|d| !seen.contains(d.as_str()))
        {
            out.push(Diagnostic::error(
                &wf.path,
                Some(step.line),
                Some("dependsOn"),
                format!(
                    "step `{}` depends on `{dep}`, which is not a step of workflow `{}`",
                    step.id, wf.name
                ),
            ));
        }
    }
    let nodes: Vec<(String, Vec<String>)> = wf
        .steps
        .iter()
        .map(|s| (s.id.clone(), s.depends_on.clone()))
        .collect();
    if let Some(cycle) = crate::dag::find_cycle(&nodes) {
        let line = cycle
            .first()
            .and_then(|id| wf.steps.iter().find(|s| &s.id == id))
            .map(|s| s.line);
        out.push(Diagnostic::error(
            &wf.path,
            line,
            Some("dependsOn"),
            format!(
                "workflow `{}` has a dependency cycle: {}",
                wf.name,
                cycle.join(" -> ")
            ),
        ));
    }
    out
}

/// Steps whose role the team does not have.
pub(crate) fn step_roles(wf: &Workflow, team: &Team) -> Vec<Diagnostic> {
    let known: HashSet<&str> = team.roles.iter().map(|r| r.name.as_str()).collect();
    let mut roles: Option<String> = None;
    let mut out = Vec::new();
    for s in wf.steps.iter().filter(|s| !known.contains(s.role.as_str())) {
        // Joined once: a file controls how many steps and roles there are.
        let roles = roles.get_or_insert_with(|| {
            if team.roles.is_empty() {
                "none".to_string()
            } else {
                team.roles
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        });
        out.push(Diagnostic::error(
            &wf.path,
            Some(s.line),
            Some("role"),
            format!(
                "step `{}` has role `{}`, which team `{}` does not have (roles: {roles})",
                s.id, s.role, team.name
            ),
        ));
    }
    out
}

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

    type Want = &'static [(
        &'static str,
        Severity,
        Option<u32>,
        Option<&'static str>,
        &'static str,
    )];

    #[test]
    fn cross_resource_problems() {
        type Files = &'static [(Kind, &'static str, &'static str)];
        let cases: &[(&str, Files, Want)] = &[
            (
                "team naming an unknown agent",
                &[(
                    Kind::Team,
                    "/u/t.team.md",
                    "---\nname: t\n---\n- explorer\n- fixer: agent=ghost does things\n",
                )],
                &[(
                    "/u/t.team.md",
                    Severity::Error,
                    Some(5),
                    Some("agent"),
                    "uses agent `ghost`",
                )],
            ),
            (
                "missing skills warn",
                &[
                    (Kind::Agent, "/u/a.md", "---\nname: a\nskills: nope\n---\nx"),
                    (Kind::Team, "/u/t.team.md", "- a: skills=s1,here\n"),
                    (
                        Kind::Skill,
                        "/u/skills/here/SKILL.md",
                        "---\ndescription: d\n---\n",
                    ),
                ],
                &[
                    (
                        "/u/a.md",
                        Severity::Warning,
                        None,
                        Some("skills"),
                        "skill `nope`",
                    ),
                    (
                        "/u/t.team.md",
                        Severity::Warning,
                        Some(1),
                        Some("skills"),
                        "skill `s1`",
                    ),
                ],
            ),
            (
                "unknown default workflow",
                &[(
                    Kind::Team,
                    "/u/t.team.md",
                    "---\nname: t\ndefaultWorkflow: nope\n---\n- explorer\n",
                )],
                &[(
                    "/u/t.team.md",
                    Severity::Error,
                    Some(3),
                    Some("defaultWorkflow"),
                    "`nope`",
                )],
            ),
            (
                "cycle named",
                &[(
                    Kind::Workflow,
                    "/u/c.workflow.md",
                    "## a\ndependsOn: c\n\n## b\ndependsOn: a\n\n## c\ndependsOn: b\n",
                )],
                &[(
                    "/u/c.workflow.md",
                    Severity::Error,
                    Some(1),
                    Some("dependsOn"),
                    "cycle: a -> c -> b -> a",
                )],
            ),
            (
                "self dependency",
                &[(Kind::Workflow, "/u/s.workflow.md", "## a\ndependsOn: a\n")],
                &[(
                    "/u/s.workflow.md",
                    Severity::Error,
                    Some(1),
                    Some("dependsOn"),
                    "cycle: a -> a",
                )],
            ),
            (
                "unknown dependsOn",
                &[(
                    Kind::Workflow,
                    "/u/u.workflow.md",
                    "## a\nrole: x\n\n## b\ndependsOn: a, zz\n",
                )],
                &[(
                    "/u/u.workflow.md",
                    Severity::Error,
                    Some(4),
                    Some("dependsOn"),
                    "depends on `zz`",
                )],
            ),
            (
                "duplicate step",
                &[(
                    Kind::Workflow,
                    "/u/d.workflow.md",
                    "## a\nrole: x\n\n## a\nrole: y\n",
                )],
                &[(
                    "/u/d.workflow.md",
                    Severity::Error,
                    Some(4),
                    Some("id"),
                    "duplicate step `a`",
                )],
            ),
            (
                "empty workflow warns",
                &[(
                    Kind::Workflow,
                    "/u/e.workflow.md",
                    "---\nname: e\n---\njust prose\n",
                )],
                &[(
                    "/u/e.workflow.md",
                    Severity::Warning,
                    None,
                    None,
                    "no steps",
                )],
            ),
            (
                "step role missing from the team that defaults to the workflow",
                &[
                    (
                        Kind::Team,
                        "/u/t.team.md",
                        "---\nname: t\ndefaultWorkflow: w\n---\n- explorer\n",
                    ),
                    (
                        Kind::Workflow,
                        "/u/w.workflow.md",
                        "## look\nrole: explorer\n\n## fix\nrole: executor\n",
                    ),
                ],
                &[(
                    "/u/w.workflow.md",
                    Severity::Error,
                    Some(4),
                    Some("role"),
                    "role `executor`, which team `t`",
                )],
            ),
        ];
        for (name, files, want) in cases {
            let got = validate_catalog(&catalog(files));
            assert_eq!(got.len(), want.len(), "{name}: {got:?}");
            for (g, (path, sev, line, field, msg)) in got.iter().zip(want.iter()) {
                assert_eq!(
                    (g.path.as_str(), g.severity, g.line, g.field.as_deref()),
                    (*path, *sev, *line, *field),
                    "{name}: {g:?}"
                );
                assert!(
                    g.message.contains(msg),
                    "{name}: {:?} lacks {msg:?}",
                    g.message
                );
            }
        }
    }
}
