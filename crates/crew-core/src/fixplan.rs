//! Who fixes what a judge found (issue 30), decided at plan time and frozen into the judge's
//! planned task (`Judging::fix`), as a fan-out step's roles are: adding a fix task to a running
//! run never reads resource files.
//!
//! The fixer is the step's `fixer:` role, else the role that produced what was judged (the
//! nearest dependency that is not itself a judge: the integrator for a verifier, the planner
//! for a critic of a plan), else the team's executor role. A team with no role that can edit
//! has no loop: its judges' verdicts are its product.

use crate::fanout::RoleTemplate;
use crate::plan::PlannedTask;
use crate::verdict::{can_edit, FixPlan, DEFAULT_MAX_FIX_ROUNDS};
use std::collections::HashSet;
use std::sync::Arc;

/// Give every task that judges (or cannot edit and runs integration checks) its fix plan.
/// `asks[i]` is task `i`'s step `fixer:` and `maxFixRounds:`.
pub fn attach(
    tasks: &mut [PlannedTask],
    asks: &[(Option<String>, Option<u32>)],
    roles: &[RoleTemplate],
    team_max_rounds: Option<u32>,
) {
    if !roles.iter().any(|r| can_edit(&r.tools)) {
        return;
    }
    for i in 0..tasks.len() {
        let Some(t) = tasks.get(i) else { continue };
        let checks_here = t.checks.verify.is_some() && !can_edit(&t.tools);
        if !(t.judging.judge || checks_here) {
            continue;
        }
        let (asked, max) = asks.get(i).cloned().unwrap_or_default();
        let producer = producer(tasks, i);
        let name = asked
            .or_else(|| producer.map(|p| p.role.clone()))
            .or_else(|| executor_role(roles));
        let Some(fixer) = name.and_then(|n| roles.iter().find(|r| r.role == n)) else {
            continue;
        };
        // A fixer that cannot edit fixes its product, the artifact it wrote.
        let output = producer
            .filter(|p| p.role == fixer.role && !can_edit(&fixer.tools))
            .and_then(|p| p.output.clone());
        let plan = FixPlan {
            fixer: fixer.clone(),
            output,
            max_rounds: max.or(team_max_rounds).unwrap_or(DEFAULT_MAX_FIX_ROUNDS),
            rounds_given: max.or(team_max_rounds).is_some(),
        };
        if let Some(t) = tasks.get_mut(i) {
            t.judging.fix = Some(Arc::new(plan));
        }
    }
}

/// The nearest task before `i` that is not a judge nor a fan-out step (whose product is tasks).
fn producer(tasks: &[PlannedTask], i: usize) -> Option<&PlannedTask> {
    let by_id = |id: &str| tasks.iter().find(|t| t.id.as_str() == id);
    let mut seen = HashSet::new();
    let mut frontier: Vec<&str> = tasks
        .get(i)?
        .depends_on
        .iter()
        .map(|d| d.as_str())
        .collect();
    // Breadth first, bounded by the plan's size (`seen`).
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for id in frontier {
            if !seen.insert(id) {
                continue;
            }
            let Some(t) = by_id(id) else { continue };
            if !t.judging.judge && t.expands.is_none() {
                return Some(t);
            }
            next.extend(t.depends_on.iter().map(|d| d.as_str()));
        }
        frontier = next;
    }
    None
}

/// The team's executor role: named `executor`, else played by the `executor` agent, else the
/// first role that can edit.
fn executor_role(roles: &[RoleTemplate]) -> Option<String> {
    roles
        .iter()
        .find(|r| r.role == "executor")
        .or_else(|| roles.iter().find(|r| r.agent == "executor"))
        .or_else(|| roles.iter().find(|r| can_edit(&r.tools)))
        .map(|r| r.role.clone())
}

#[cfg(test)]
mod tests {
    use crate::plan::build_plan;
    use crate::resource::Catalog;

    fn fixer_of(team: &str, task: &str) -> Option<String> {
        let catalog = Catalog::builtin();
        let plan = build_plan(&catalog, Some(team), None).unwrap();
        let t = plan.tasks.iter().find(|t| t.step_id == task).unwrap();
        assert!(t.judging.judge, "{team}/{task} judges");
        t.judging.fix.as_ref().map(|f| f.fixer.role.clone())
    }

    #[test]
    fn a_critic_s_findings_go_back_to_the_planner_and_its_plan() {
        use crate::resource::{builtin, parse_file, Kind, Source};
        let files = builtin::parsed().into_iter().chain([
            parse_file(
                Kind::Team,
                Source::User,
                "/u/teams/crit.team.md",
                b"---\nname: crit\ndefaultWorkflow: crit\n---\n- planner: agent=planner\n- critic: agent=critic\n- executor: agent=executor\n",
            ),
            parse_file(
                Kind::Workflow,
                Source::User,
                "/u/workflows/crit.workflow.md",
                b"---\nname: crit\n---\n## plan\nrole: planner\noutput: plan.md\n\nPlan {goal}\n\n## critique\nrole: critic\ndependsOn: plan\nmaxFixRounds: 1\n\nCriticise the plan\n\n## execute\nrole: executor\ndependsOn: critique\nverdict: true\nfixer: planner\n\nDo it\n",
            ),
        ]);
        let catalog = Catalog::assemble(files, false);
        let plan = build_plan(&catalog, Some("crit"), None).unwrap();
        let critique = &plan.tasks[1];
        let fix = critique.judging.fix.as_ref().unwrap();
        assert_eq!(fix.fixer.role, "planner");
        assert_eq!(fix.output.as_ref().map(|o| o.as_str()), Some("plan.md"));
        assert_eq!(fix.max_rounds, 1);
        // `verdict: true` makes any step judge; `fixer:` names who fixes.
        let execute = &plan.tasks[2];
        assert!(execute.judging.judge);
        assert_eq!(execute.judging.fix.as_ref().unwrap().fixer.role, "planner");
        assert!(!plan.tasks[0].judging.judge);
    }

    /// Issue 30: the fixer carries the skills a task of its role gets under the run's
    /// `skills`, so the fix task it becomes has them (`RoleTemplate::task`).
    #[test]
    fn a_fixer_has_the_skills_of_its_role() {
        use crate::skills::RunSkills;
        let catalog = Catalog::builtin();
        let defaults = ["safe-bash", "verification-before-done"];
        let cases: [(RunSkills, &[&str]); 3] = [
            (RunSkills::Selected, &defaults),
            (RunSkills::Off, &[]),
            (
                RunSkills::Add(vec!["security-review".into()]),
                &["safe-bash", "verification-before-done", "security-review"],
            ),
        ];
        for (run, want) in cases {
            let plan = crate::plan::build_plan_with(&catalog, Some("default"), None, &run).unwrap();
            let by_step = |s: &str| plan.tasks.iter().find(|t| t.step_id == s).unwrap();
            let fixer = &by_step("verify").judging.fix.as_ref().unwrap().fixer;
            let names: Vec<&str> = fixer.skills.iter().map(|k| k.name.as_str()).collect();
            assert_eq!(names, want, "{run:?}");
            assert_eq!(fixer.skills, by_step("execute").skills, "{run:?}");
        }
    }

    #[test]
    fn builtin_fixers() {
        assert_eq!(fixer_of("default", "verify").as_deref(), Some("executor"));
        assert_eq!(
            fixer_of("implement", "verify").as_deref(),
            Some("integrator")
        );
        assert_eq!(
            fixer_of("implement", "review").as_deref(),
            Some("integrator")
        );
        // No role of the review team can edit: its verdicts are its product.
        assert_eq!(fixer_of("review", "verify"), None);
        assert_eq!(fixer_of("review", "code-review"), None);
    }
}
