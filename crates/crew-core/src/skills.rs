//! Which skills a task gets, and their text, frozen into its plan (pi-crew's skill
//! instructions): the role's defaults (unless the team role or the step says `skills=false`),
//! then the agent's `skills:`, the team role's `skills=`, the step's `skills:` and the run's
//! `skills` param; a run `skills: false` gives none. De-duplicated, at most [`MAX_SKILLS`],
//! each text cut to [`SKILL_TEXT_MAX`] and the rendered block to [`BLOCK_MAX`] characters.

use crate::resource::{Catalog, Source};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Skills of one task, at most (pi-crew's bound).
pub const MAX_SKILLS: usize = 32;
/// Characters of one skill's text in the prompt, at most.
pub const SKILL_TEXT_MAX: usize = 1_500;
/// Characters of the whole skills block of a prompt, at most.
pub const BLOCK_MAX: usize = 6_000;

/// Default skills by role name (pi-crew's table, on the skills crew ships as builtins).
const ROLE_DEFAULTS: &[(&str, &[&str])] = &[
    (
        "explorer",
        &["read-only-explorer", "context-artifact-hygiene"],
    ),
    (
        "analyst",
        &["read-only-explorer", "requirements-to-task-packet"],
    ),
    (
        "planner",
        &["delegation-patterns", "requirements-to-task-packet"],
    ),
    (
        "critic",
        &["read-only-explorer", "multi-perspective-review"],
    ),
    ("executor", &["safe-bash", "verification-before-done"]),
    (
        "reviewer",
        &["read-only-explorer", "multi-perspective-review"],
    ),
    (
        "security-reviewer",
        &["read-only-explorer", "security-review"],
    ),
    ("test-engineer", &["verification-before-done", "safe-bash"]),
    ("verifier", &["verification-before-done", "safe-bash"]),
    (
        "writer",
        &["context-artifact-hygiene", "verification-before-done"],
    ),
];

/// The role's default skills (case-insensitive on the role name).
pub fn role_defaults(role: &str) -> &'static [&'static str] {
    ROLE_DEFAULTS
        .iter()
        .find(|(r, _)| r.eq_ignore_ascii_case(role))
        .map_or(&[], |(_, s)| s)
}

/// What a run says about skills (`team.run`'s `skills` param).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RunSkills {
    /// Not given: every task gets what its role, agent, team and step select.
    #[default]
    Selected,
    /// `false`: no task gets any skill.
    Off,
    /// Names added to every task's selection.
    Add(Vec<String>),
}

/// One skill as a task got it at planning time.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlannedSkill {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The skill's body, cut to [`SKILL_TEXT_MAX`]; empty when no such skill is installed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// No SKILL.md of this name was found when the run was planned.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

/// The inputs of one task's selection, in order.
pub struct Selection<'a> {
    pub role: &'a str,
    pub agent: &'a [String],
    /// The team role's `skills=`: `None` not given, `Some([])` `skills=false`.
    pub team_role: Option<&'a [String]>,
    /// The step's `skills:`: `None` not given, `Some([])` `skills: false`.
    pub step: Option<&'a [String]>,
    pub run: &'a RunSkills,
}

/// The skill names a task gets, de-duplicated in first-seen order, at most [`MAX_SKILLS`].
pub fn select(s: &Selection<'_>) -> Vec<String> {
    if s.run == &RunSkills::Off {
        return Vec::new();
    }
    let no_defaults =
        s.team_role.is_some_and(<[String]>::is_empty) || s.step.is_some_and(<[String]>::is_empty);
    let defaults = if no_defaults {
        &[][..]
    } else {
        role_defaults(s.role)
    };
    let run: &[String] = match s.run {
        RunSkills::Add(names) => names,
        _ => &[],
    };
    let mut seen = HashSet::new();
    defaults
        .iter()
        .copied()
        .chain(s.agent.iter().map(String::as_str))
        .chain(s.team_role.unwrap_or_default().iter().map(String::as_str))
        .chain(s.step.unwrap_or_default().iter().map(String::as_str))
        .chain(run.iter().map(String::as_str))
        .filter(|n| seen.insert(*n))
        .take(MAX_SKILLS)
        .map(str::to_string)
        .collect()
}

/// The skills named, with their text from the catalog, frozen for the plan.
pub fn freeze(catalog: &Catalog, names: &[String]) -> Vec<PlannedSkill> {
    names
        .iter()
        .map(|name| match catalog.skill(name) {
            Some(skill) => PlannedSkill {
                name: name.clone(),
                description: skill.description.clone(),
                text: cut(&skill.body, SKILL_TEXT_MAX),
                missing: false,
            },
            None => PlannedSkill {
                name: name.clone(),
                description: String::new(),
                text: String::new(),
                missing: true,
            },
        })
        .collect()
}

/// Whether a catalog's skill of this name comes from the builtin set (for listing).
pub fn is_builtin(catalog: &Catalog, name: &str) -> bool {
    catalog
        .skill(name)
        .is_some_and(|s| s.source == Source::Builtin)
}

/// `s` cut to `max` characters on a char boundary, saying so.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((end, _)) => {
            let mut out = s.get(..end).unwrap_or_default().to_string();
            out.push_str("\n[... skill text cut ...]");
            out
        }
    }
}

/// The prompt's skills block: `None` for a task without skills. At most [`BLOCK_MAX`]
/// characters of skill text; the skills that no longer fit are named, not lost silently.
pub fn render_block(skills: &[PlannedSkill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut out = String::from(
        "## Skills\n\nGuidance selected for this task. Follow it where it applies to the task.\n\n",
    );
    let mut used = 0usize;
    let mut left_out = Vec::new();
    for s in skills {
        let section = if s.missing {
            format!(
                "### {}\n\n(The skill `{}` was selected but no SKILL.md of that name is installed.)\n\n",
                s.name, s.name
            )
        } else if s.description.is_empty() {
            format!("### {}\n\n{}\n\n", s.name, s.text)
        } else {
            format!("### {}\n\n{}\n\n{}\n\n", s.name, s.description, s.text)
        };
        let n = section.chars().count();
        if used.saturating_add(n) > BLOCK_MAX {
            left_out.push(s.name.as_str());
            continue;
        }
        used += n;
        out.push_str(&section);
    }
    if !left_out.is_empty() {
        out.push_str(&format!(
            "(Left out, the skills block is full: {}.)\n\n",
            left_out.join(", ")
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn selection_order_overrides_and_off() {
        let agent = names(&["a1", "safe-bash"]);
        let role = names(&["r1"]);
        let step = names(&["s1", "a1"]);
        let none: Vec<String> = Vec::new();
        let add = RunSkills::Add(names(&["run1"]));
        type Case<'a> = (
            &'a str,
            Option<&'a [String]>,
            Option<&'a [String]>,
            &'a RunSkills,
            &'a [&'a str],
        );
        let cases: &[Case] = &[
            (
                "all sources, de-duplicated",
                Some(&role),
                Some(&step),
                &add,
                &[
                    "safe-bash",
                    "verification-before-done",
                    "a1",
                    "r1",
                    "s1",
                    "run1",
                ],
            ),
            (
                "role skills=false drops the defaults only",
                Some(&none),
                None,
                &RunSkills::Selected,
                &["a1", "safe-bash"],
            ),
            (
                "step skills: false drops the defaults only",
                None,
                Some(&none),
                &add,
                &["a1", "safe-bash", "run1"],
            ),
            (
                "run skills: false drops everything",
                Some(&role),
                Some(&step),
                &RunSkills::Off,
                &[],
            ),
        ];
        for (name, team_role, step, run, want) in cases {
            let got = select(&Selection {
                role: "Executor",
                agent: &agent,
                team_role: *team_role,
                step: *step,
                run,
            });
            assert_eq!(got, names(want), "{name}");
        }
    }

    #[test]
    fn selection_is_bounded() {
        let many: Vec<String> = (0..100).map(|i| format!("s{i}")).collect();
        let got = select(&Selection {
            role: "nobody",
            agent: &many,
            team_role: None,
            step: None,
            run: &RunSkills::Selected,
        });
        assert_eq!(got.len(), MAX_SKILLS);
        assert_eq!(got.first().map(String::as_str), Some("s0"));
    }

    #[test]
    fn frozen_text_and_block_are_bounded() {
        let cat = Catalog::builtin();
        let mut wanted = names(&["safe-bash", "ghost"]);
        let frozen = freeze(&cat, &wanted);
        assert!(!frozen[0].missing && frozen[0].text.contains("bash"));
        assert!(frozen[1].missing);
        let block = render_block(&frozen).expect("a block");
        assert!(block.contains("### safe-bash") && block.contains("`ghost` was selected"));

        let long = "x".repeat(10 * SKILL_TEXT_MAX);
        assert!(cut(&long, SKILL_TEXT_MAX).chars().count() < SKILL_TEXT_MAX + 40);
        let big: Vec<PlannedSkill> = (0..MAX_SKILLS)
            .map(|i| PlannedSkill {
                name: format!("s{i}"),
                description: "d".into(),
                text: cut(&long, SKILL_TEXT_MAX),
                missing: false,
            })
            .collect();
        let block = render_block(&big).expect("a block");
        assert!(block.chars().count() < BLOCK_MAX + 600, "{}", block.len());
        assert!(block.contains("Left out") && block.contains("s31"));
        wanted.clear();
        assert_eq!(render_block(&freeze(&cat, &wanted)), None);
    }

    #[test]
    fn every_role_default_is_a_builtin_skill() {
        let cat = Catalog::builtin();
        for (role, skills) in ROLE_DEFAULTS {
            for s in *skills {
                assert!(is_builtin(&cat, s), "{role}: {s}");
            }
        }
    }
}
