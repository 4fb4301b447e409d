//! Teams: `teams/<name>.team.md`, pi-crew frontmatter plus one `- role: agent=x ...` line per role.

use super::agent::NO_DESCRIPTION;
use super::diag::{basename, ident_ok, Diags};
use super::frontmatter::{self, line_no, Entry};
use super::{Diagnostic, Parsed, Source, Team, TeamRole};
use regex::Regex;
use std::collections::BTreeMap;
use std::sync::LazyLock;

const KNOWN: &[&str] = &[
    "name",
    "description",
    "defaultWorkflow",
    "workflow",
    "workspaceMode",
    "conflicts",
    "maxConcurrency",
    "maxFixRounds",
    "triggers",
    "trigger",
    "useWhen",
    "avoidWhen",
    "cost",
    "category",
    "source",
];

// pi-crew takes `skills=` out first because its list may contain spaces around commas, then the
// single-token keys; whatever text is left is the role's description.
static SKILLS_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bskills\s*=\s*([A-Za-z0-9_-]+(?:\s*,\s*[A-Za-z0-9_-]+)*)")
        .expect("constant regex")
});
static KEY_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(agent|model|maxConcurrency|candidates|cpusPerTask|memoryMb|timeLimitMinutes|network)\s*=\s*(\S+)",
    )
    .expect("constant regex")
});

pub(super) fn parse(source: Source, path: &str, text: &str) -> (Option<Parsed>, Vec<Diagnostic>) {
    let fm = frontmatter::split(text);
    let mut d = Diags::new(path);
    d.frontmatter_shape(&fm, KNOWN, "team");
    let workspace_mode = match d
        .one_of(fm.get("workspaceMode"), &["single", "shared", "worktree"])
        .as_deref()
    {
        Some("worktree") => Some(crate::run::WorkspaceMode::Worktree),
        Some("single" | "shared") => Some(crate::run::WorkspaceMode::Shared),
        _ => None,
    };
    let conflicts = match d
        .one_of(fm.get("conflicts"), &["agent", "manual"])
        .as_deref()
    {
        Some("agent") => Some(crate::run::ConflictMode::Agent),
        Some("manual") => Some(crate::run::ConflictMode::Manual),
        _ => None,
    };
    d.one_of(fm.get("cost"), &["free", "cheap", "expensive"]);

    let default_workflow = fm
        .get_any(&["defaultWorkflow", "workflow"])
        .filter(|e| !e.value.is_empty());
    let mut field_lines = BTreeMap::new();
    if let Some(e) = default_workflow {
        field_lines.insert("defaultWorkflow".to_string(), e.line);
    }
    let mut roles: Vec<TeamRole> = Vec::new();
    // Names seen, by hash: a scan of `roles` per line made a long role list quadratic.
    let mut names: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (i, line) in fm.body.split('\n').enumerate() {
        let line_no = fm.body_line.saturating_add(line_no(i)).saturating_sub(1);
        let Some(role) = parse_role(line, line_no, &mut d) else {
            continue;
        };
        if !names.insert(role.name.clone()) {
            d.warn(
                Some(line_no),
                Some("role"),
                format!("duplicate role `{}`; the first one is used", role.name),
            );
            continue;
        }
        roles.push(role);
    }
    if roles.is_empty() {
        d.warn(None, None, "team has no roles (`- role: agent=name` lines)");
    }
    let team = Team {
        name: fm
            .text("name")
            .map_or_else(|| basename(path, ".team.md"), str::to_string),
        description: fm.text("description").unwrap_or(NO_DESCRIPTION).to_string(),
        default_workflow: default_workflow.map(|e| e.value.clone()),
        max_concurrency: d.positive_int(fm.get("maxConcurrency")),
        max_fix_rounds: fm
            .get("maxFixRounds")
            .and_then(|e| e.value.parse::<u32>().ok())
            .map(|n| n.min(crate::verdict::MAX_FIX_ROUNDS_CEILING)),
        workspace_mode,
        conflicts,
        roles,
        source,
        path: path.to_string(),
        field_lines,
    };
    (Some(Parsed::Team(team)), d.into_vec())
}

fn parse_role(line: &str, line_no: u32, d: &mut Diags) -> Option<TeamRole> {
    let value = line.trim().strip_prefix('-')?.trim();
    // A markdown rule (`---`) or a bare dash is not a role.
    if value.chars().all(|c| c == '-') {
        return None;
    }
    let (name, rest) = value.split_once(':').unwrap_or((value, ""));
    let name = name.trim();
    if name.is_empty() {
        d.warn(
            Some(line_no),
            Some("role"),
            "role line without a role name; ignored",
        );
        return None;
    }
    let mut skills_raw: Option<String> = None;
    let rest = SKILLS_RE.replace_all(rest, |c: &regex::Captures| {
        skills_raw = c.get(1).map(|m| m.as_str().to_string());
        ""
    });
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    let rest = KEY_RE.replace_all(&rest, |c: &regex::Captures| {
        if let (Some(k), Some(v)) = (c.get(1), c.get(2)) {
            keys.insert(k.as_str().to_string(), v.as_str().to_string());
        }
        ""
    });
    let description = rest.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = |key: &str, value: &str| Entry {
        key: key.to_string(),
        value: value.to_string(),
        line: line_no,
    };
    if let Some(n) = keys.get("maxConcurrency") {
        // Parsed for the warning only: pi-crew's scheduler never used a role-level limit either.
        d.positive_int(Some(&at("maxConcurrency", n)));
    }
    let model = keys
        .get("model")
        .map(String::as_str)
        .filter(|m| *m != "false");
    if let Some(m) = model {
        d.check_model_ref(line_no, "model", m);
    }
    let skills = skills_raw
        .as_deref()
        .and_then(|raw| role_skills(raw, line_no, d));
    let candidates = keys.get("candidates").and_then(|n| match n.parse::<u32>() {
        Ok(n) if n <= crate::run::candidates::MAX_CANDIDATES => Some(n),
        _ => {
            d.warn(
                Some(line_no),
                Some("candidates"),
                format!(
                    "`candidates={n}` must be a whole number up to {}; ignored",
                    crate::run::candidates::MAX_CANDIDATES
                ),
            );
            None
        }
    });
    // The role's job resources on a cluster (issue 35): a bad value is an error, not a
    // warning, since a job of the wrong shape is refused or killed by the scheduler.
    let mut resources = crate::job_shape::JobShape::default();
    for field in crate::job_shape::FIELDS {
        if let Some(v) = keys.get(field) {
            if let Err(why) = resources.set(field, v) {
                d.error(Some(line_no), Some(field), why);
            }
        }
    }
    let network = keys.get("network").and_then(|v| match v.as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => {
            d.warn(
                Some(line_no),
                Some("network"),
                format!("`network={v}` must be true or false; ignored"),
            );
            None
        }
    });
    Some(TeamRole {
        candidates,
        resources,
        network,
        name: name.to_string(),
        agent: keys
            .get("agent")
            .cloned()
            .unwrap_or_else(|| name.to_string()),
        model: model.map(str::to_string),
        skills,
        description,
        line: line_no,
    })
}

fn role_skills(raw: &str, line_no: u32, d: &mut Diags) -> Option<Vec<String>> {
    if raw == "false" {
        return Some(Vec::new());
    }
    let mut skills: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for s in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !ident_ok(s) {
            d.warn(
                Some(line_no),
                Some("skills"),
                format!("invalid skill name `{s}`; ignored"),
            );
        } else if seen.insert(s) {
            skills.push(s.to_string());
        }
    }
    (!skills.is_empty()).then_some(skills)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{parse_file, Kind, Severity};

    fn team(text: &str) -> (Team, Vec<Diagnostic>) {
        match parse_file(
            Kind::Team,
            Source::Project,
            "/p/.crew/teams/probe.team.md",
            text.as_bytes(),
        ) {
            (Some(Parsed::Team(t)), d) => (t, d),
            other => panic!("not a team: {other:?}"),
        }
    }

    fn role(
        name: &str,
        agent: &str,
        model: Option<&str>,
        skills: Option<&[&str]>,
        desc: &str,
        line: u32,
    ) -> TeamRole {
        TeamRole {
            candidates: None,
            resources: Default::default(),
            network: None,
            name: name.into(),
            agent: agent.into(),
            model: model.map(Into::into),
            skills: skills.map(|s| s.iter().map(|x| x.to_string()).collect()),
            description: desc.into(),
            line,
        }
    }

    #[test]
    fn role_lines() {
        let cases: &[(&str, Option<TeamRole>)] = &[
            ("- explorer: agent=explorer fast discovery", Some(role("explorer", "explorer", None, None, "fast discovery", 7))),
            ("- planner", Some(role("planner", "planner", None, None, "", 7))),
            (
                "  - exec: model=openai/gpt-5 agent=executor  does   the work skills=a, b,a maxConcurrency=2",
                Some(role("exec", "executor", Some("openai/gpt-5"), Some(&["a", "b"]), "does the work", 7)),
            ),
            ("- quiet: agent=writer skills=false", Some(role("quiet", "writer", None, Some(&[]), "", 7))),
            ("- m: model=false", Some(role("m", "m", None, None, "", 7))),
            ("---", None),
            ("-", None),
            ("plain prose line", None),
            ("## heading", None),
        ];
        for (line, want) in cases {
            let (t, _) = team(&format!("---\nname: probe\n---\n\nSome prose.\n\n{line}\n"));
            assert_eq!(t.roles.first(), want.as_ref(), "{line:?}");
        }
    }

    /// `cpusPerTask=`, `memoryMb=` and `timeLimitMinutes=` on a role line are its job
    /// resources on a cluster (issue 35), not words of its description.
    #[test]
    fn a_roles_job_resources() {
        let (t, d) = team(
            "- exec: agent=executor cpusPerTask=4 builds things memoryMb=8000 timeLimitMinutes=90\n",
        );
        assert!(d.is_empty(), "{d:?}");
        let r = &t.roles[0];
        assert_eq!(r.description, "builds things");
        assert_eq!(
            r.resources,
            crate::job_shape::JobShape {
                cpus_per_task: Some(4),
                memory_mb: Some(8000),
                time_limit_minutes: Some(90),
            }
        );
    }

    /// `network=false` on a role line (issue 34): its boxed attempts get no network.
    #[test]
    fn a_roles_network() {
        let (t, d) = team(
            "- tests: agent=verifier network=false runs offline
- b: network=true
",
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(t.roles[0].network, Some(false));
        assert_eq!(t.roles[0].description, "runs offline");
        assert_eq!(t.roles[1].network, Some(true));
        let (t, d) = team(
            "- c: network=maybe
",
        );
        assert_eq!(t.roles[0].network, None);
        assert_eq!(d.len(), 1, "{d:?}");
    }

    #[test]
    fn frontmatter_fields() {
        let (t, d) = team(
            "---\ndescription: d\nworkflow: wf\nmaxConcurrency: 3\nworkspaceMode: single\n---\n- a: agent=x\n- b\n",
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(t.name, "probe");
        assert_eq!(t.description, "d");
        assert_eq!(t.default_workflow.as_deref(), Some("wf"));
        assert_eq!(t.field_lines.get("defaultWorkflow"), Some(&3));
        assert_eq!(t.max_concurrency, Some(3));
        assert_eq!(
            t.roles
                .iter()
                .map(|r| (r.name.as_str(), r.line))
                .collect::<Vec<_>>(),
            [("a", 7), ("b", 8)]
        );
        let (t, _) = team("---\ndefaultWorkflow: first\nworkflow: second\n---\n");
        assert_eq!(t.default_workflow.as_deref(), Some("first"));
    }

    #[test]
    fn problems_are_reported() {
        type Want = &'static [(Severity, Option<u32>, Option<&'static str>)];
        let cases: &[(&str, Want)] = &[
            (
                "---\nmaxConcurrency: two\n---\n- a\n",
                &[(Severity::Warning, Some(2), Some("maxConcurrency"))],
            ),
            (
                "---\nmaxConcurrency: 0\n---\n- a\n",
                &[(Severity::Warning, Some(2), Some("maxConcurrency"))],
            ),
            (
                "---\nworkspaceMode: cloud\n---\n- a\n",
                &[(Severity::Warning, Some(2), Some("workspaceMode"))],
            ),
            (
                "---\nflavour: x\n---\n- a\n",
                &[(Severity::Warning, Some(2), Some("flavour"))],
            ),
            (
                "- a: maxConcurrency=lots\n",
                &[(Severity::Warning, Some(1), Some("maxConcurrency"))],
            ),
            (
                "- a\n- a: agent=b\n",
                &[(Severity::Warning, Some(2), Some("role"))],
            ),
            (
                "- : agent=b\n- a\n",
                &[(Severity::Warning, Some(1), Some("role"))],
            ),
            (
                "- a: model=bad/\n",
                &[(Severity::Warning, Some(1), Some("model"))],
            ),
            (
                "- a: cpusPerTask=0 memoryMb=lots timeLimitMinutes=9999999\n",
                &[
                    (Severity::Error, Some(1), Some("cpusPerTask")),
                    (Severity::Error, Some(1), Some("memoryMb")),
                    (Severity::Error, Some(1), Some("timeLimitMinutes")),
                ],
            ),
            ("no roles here\n", &[(Severity::Warning, None, None)]),
        ];
        for (text, want) in cases {
            let (_, d) = team(text);
            let got: Vec<_> = d
                .iter()
                .map(|d| (d.severity, d.line, d.field.as_deref()))
                .collect();
            assert_eq!(got, *want, "{text:?}: {d:?}");
        }
    }
}
