//! The set of resources a run can use, assembled from parsed files with the precedence and
//! trust rules of SPEC §3.

use super::{builtin, Agent, Diagnostic, Kind, Parsed, Skill, Source, Team, Workflow};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Resources by name. Agents are keyed by their lowercased name (pi-crew looked them up
/// case-insensitively); teams, workflows and skills by their exact name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub agents: BTreeMap<String, Agent>,
    pub teams: BTreeMap<String, Team>,
    pub workflows: BTreeMap<String, Workflow>,
    pub skills: BTreeMap<String, Skill>,
    /// Diagnostics of every input file plus the ones assembly adds (ignored shadows,
    /// duplicate names). Cross-resource checks are [`super::validate_catalog`]'s job.
    pub diagnostics: Vec<Diagnostic>,
}

/// What assembly needs to know about each kind of resource.
trait Entry {
    const WHAT: &'static str;
    fn key(&self) -> String;
    fn name(&self) -> &str;
    fn source(&self) -> Source;
    fn path(&self) -> &str;
}

macro_rules! entry {
    ($ty:ty, $what:literal, |$s:ident| $key:expr) => {
        impl Entry for $ty {
            const WHAT: &'static str = $what;
            fn key(&self) -> String {
                let $s = self;
                $key
            }
            fn name(&self) -> &str {
                &self.name
            }
            fn source(&self) -> Source {
                self.source
            }
            fn path(&self) -> &str {
                &self.path
            }
        }
    };
}

entry!(Agent, "agent", |s| s.name.to_lowercase());
entry!(Team, "team", |s| s.name.clone());
entry!(Workflow, "workflow", |s| s.name.clone());
entry!(Skill, "skill", |s| s.name.clone());

/// User over pi-crew's user directory over builtin; project comes last and only wins when it
/// is trusted or adds a new name.
fn rank(source: Source) -> u8 {
    match source {
        Source::Builtin => 0,
        Source::PiUser => 1,
        Source::User => 2,
        Source::Project => 3,
    }
}

fn source_label(source: Source) -> &'static str {
    match source {
        Source::Builtin => "builtin",
        Source::PiUser => "pi-crew user",
        Source::User => "user",
        Source::Project => "project",
    }
}

fn merge<T: Entry>(
    mut items: Vec<T>,
    project_trusted: bool,
    diags: &mut Vec<Diagnostic>,
) -> BTreeMap<String, T> {
    items.sort_by(|a, b| (rank(a.source()), a.path()).cmp(&(rank(b.source()), b.path())));
    let mut map: BTreeMap<String, T> = BTreeMap::new();
    for item in items {
        let key = item.key();
        let Some(current) = map.get(&key) else {
            map.insert(key, item);
            continue;
        };
        if current.source() == item.source() {
            // Same layer, same name: the first path wins so the result never depends on the
            // order files were read in.
            diags.push(Diagnostic::warning(
                item.path(),
                None,
                Some("name"),
                format!(
                    "{} `{}` is also defined in {}; this file is ignored",
                    T::WHAT,
                    item.name(),
                    current.path()
                ),
            ));
            continue;
        }
        if item.source() == Source::Project && !project_trusted {
            diags.push(Diagnostic::warning(
                item.path(),
                None,
                Some("name"),
                format!(
                    "project {} `{}` would replace the {} one ({}); ignored because this project is not \
                     trusted (add it to `trusted_projects` in the config to allow it)",
                    T::WHAT,
                    item.name(),
                    source_label(current.source()),
                    current.path()
                ),
            ));
            continue;
        }
        map.insert(key, item);
    }
    map
}

impl Catalog {
    /// Assemble a catalog from parsed files (`parse_file` results), in any order.
    pub fn assemble(
        parsed: impl IntoIterator<Item = (Option<Parsed>, Vec<Diagnostic>)>,
        project_trusted: bool,
    ) -> Catalog {
        let mut diagnostics = Vec::new();
        let (mut agents, mut teams, mut workflows, mut skills) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (resource, diags) in parsed {
            diagnostics.extend(diags);
            match resource {
                Some(Parsed::Agent(a)) => agents.push(a),
                Some(Parsed::Team(t)) => teams.push(t),
                Some(Parsed::Workflow(w)) => workflows.push(w),
                Some(Parsed::Skill(s)) => skills.push(s),
                None => {}
            }
        }
        let mut agents = merge(agents, project_trusted, &mut diagnostics);
        // Disabling happens after precedence, so a user file with `disabled: true` switches a
        // builtin agent off instead of falling back to it.
        agents.retain(|_, a| !a.disabled);
        Catalog {
            agents,
            teams: merge(teams, project_trusted, &mut diagnostics),
            workflows: merge(workflows, project_trusted, &mut diagnostics),
            skills: merge(skills, project_trusted, &mut diagnostics),
            diagnostics,
        }
    }

    /// The builtin resources alone.
    pub fn builtin() -> Catalog {
        static BUILTIN: OnceLock<Catalog> = OnceLock::new();
        BUILTIN
            .get_or_init(|| Catalog::assemble(builtin::parsed(), false))
            .clone()
    }

    /// Case-insensitive, like pi-crew.
    pub fn agent(&self, name: &str) -> Option<&Agent> {
        self.agents.get(&name.to_lowercase())
    }

    pub fn team(&self, name: &str) -> Option<&Team> {
        self.teams.get(name)
    }

    pub fn workflow(&self, name: &str) -> Option<&Workflow> {
        self.workflows.get(name)
    }

    pub fn skill(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// A resource of any kind by name (for `resource.get`).
    pub fn get(&self, kind: Kind, name: &str) -> Option<Parsed> {
        match kind {
            Kind::Agent => self.agent(name).cloned().map(Parsed::Agent),
            Kind::Team => self.team(name).cloned().map(Parsed::Team),
            Kind::Workflow => self.workflow(name).cloned().map(Parsed::Workflow),
            Kind::Skill => self.skill(name).cloned().map(Parsed::Skill),
        }
    }

    /// Error diagnostics recorded for the file at `path`.
    pub fn errors_in<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a Diagnostic> + 'a {
        self.diagnostics
            .iter()
            .filter(move |d| d.path == path && d.severity == super::Severity::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{parse_file, Severity};

    fn agent_file(source: Source, path: &str, text: &str) -> (Option<Parsed>, Vec<Diagnostic>) {
        parse_file(Kind::Agent, source, path, text.as_bytes())
    }

    fn executor_prompt(c: &Catalog) -> Option<&str> {
        c.agent("executor").map(|a| a.system_prompt.as_str())
    }

    #[test]
    fn precedence_and_trust() {
        let project_executor = || {
            agent_file(
                Source::Project,
                "/p/.crew/agents/executor.md",
                "---\nname: executor\n---\nproject",
            )
        };
        let user_executor = || agent_file(Source::User, "/u/crew/agents/executor.md", "user");
        let pi_executor = || agent_file(Source::PiUser, "/h/.pi/agent/agents/executor.md", "pi");
        let project_new = || agent_file(Source::Project, "/p/.crew/agents/helper.md", "helper");
        struct Case {
            name: &'static str,
            files: Vec<(Option<Parsed>, Vec<Diagnostic>)>,
            trusted: bool,
            want_executor: Option<&'static str>,
            want_source: Option<Source>,
            /// Paths of warnings added by assembly.
            want_warnings: &'static [&'static str],
        }
        let cases = vec![
            Case {
                name: "untrusted project cannot shadow the builtin executor",
                files: vec![project_executor(), project_new()],
                trusted: false,
                want_executor: None,
                want_source: Some(Source::Builtin),
                want_warnings: &["/p/.crew/agents/executor.md"],
            },
            Case {
                name: "trusted project shadows the builtin executor",
                files: vec![project_executor()],
                trusted: true,
                want_executor: Some("project"),
                want_source: Some(Source::Project),
                want_warnings: &[],
            },
            Case {
                name: "user over builtin, untrusted project ignored",
                files: vec![project_executor(), user_executor()],
                trusted: false,
                want_executor: Some("user"),
                want_source: Some(Source::User),
                want_warnings: &["/p/.crew/agents/executor.md"],
            },
            Case {
                name: "user over pi-crew user, whatever the order",
                files: vec![user_executor(), pi_executor()],
                trusted: false,
                want_executor: Some("user"),
                want_source: Some(Source::User),
                want_warnings: &[],
            },
            Case {
                name: "pi-crew user over builtin",
                files: vec![pi_executor()],
                trusted: false,
                want_executor: Some("pi"),
                want_source: Some(Source::PiUser),
                want_warnings: &[],
            },
            Case {
                name: "a disabled user agent switches the builtin off",
                files: vec![agent_file(
                    Source::User,
                    "/u/crew/agents/executor.md",
                    "---\ndisabled: true\n---\nx",
                )],
                trusted: false,
                want_executor: None,
                want_source: None,
                want_warnings: &[],
            },
        ];
        for c in cases {
            let files = builtin::parsed().into_iter().chain(c.files);
            let cat = Catalog::assemble(files, c.trusted);
            let got = cat.agent("executor");
            assert_eq!(got.map(|a| a.source), c.want_source, "{}", c.name);
            if let Some(want) = c.want_executor {
                assert_eq!(executor_prompt(&cat), Some(want), "{}", c.name);
            }
            let warnings: Vec<&str> = cat
                .diagnostics
                .iter()
                .filter(|d| d.severity == Severity::Warning)
                .map(|d| d.path.as_str())
                .collect();
            assert_eq!(
                warnings, c.want_warnings,
                "{}: {:?}",
                c.name, cat.diagnostics
            );
            assert!(
                cat.agent("explorer").is_some(),
                "{}: other resources survive",
                c.name
            );
            if c.name.starts_with("untrusted") {
                assert_eq!(
                    cat.agent("helper").map(|a| a.source),
                    Some(Source::Project),
                    "project may add names"
                );
                let msg = &cat.diagnostics[0].message;
                assert!(
                    msg.contains("executor") && msg.contains("not trusted"),
                    "{msg}"
                );
            }
        }
    }

    #[test]
    fn names_and_duplicates() {
        let files = vec![
            agent_file(Source::User, "/u/agents/b.md", "---\nname: Scout\n---\nB"),
            agent_file(Source::User, "/u/agents/a.md", "---\nname: scout\n---\nA"),
            parse_file(Kind::Team, Source::User, "/u/teams/t.team.md", b"- a\n"),
            parse_file(Kind::Team, Source::User, "/u/teams/T.team.md", b"- a\n"),
        ];
        let cat = Catalog::assemble(files, false);
        assert_eq!(
            cat.agent("SCOUT").map(|a| a.system_prompt.as_str()),
            Some("A"),
            "first path wins"
        );
        assert_eq!(cat.agents.keys().collect::<Vec<_>>(), ["scout"]);
        assert_eq!(
            cat.teams.keys().collect::<Vec<_>>(),
            ["T", "t"],
            "teams are case-sensitive"
        );
        let dup: Vec<_> = cat
            .diagnostics
            .iter()
            .map(|d| (d.path.as_str(), d.severity))
            .collect();
        assert_eq!(dup, [("/u/agents/b.md", Severity::Warning)]);
    }

    #[test]
    fn invalid_file_keeps_the_rest() {
        let files = builtin::parsed().into_iter().chain([
            parse_file(
                Kind::Agent,
                Source::User,
                "/u/agents/junk.md",
                &[0xff, 0x00, 0xfe, 0x80],
            ),
            parse_file(
                Kind::Workflow,
                Source::User,
                "/u/workflows/nul.workflow.md",
                b"## a\0\n",
            ),
            parse_file(
                Kind::Skill,
                Source::User,
                "/u/skills/x/SKILL.md",
                b"---\nname: [\n---\n",
            ),
        ]);
        let builtin = Catalog::builtin();
        let cat = Catalog::assemble(files, false);
        assert_eq!(cat.agents, builtin.agents);
        assert_eq!(cat.teams, builtin.teams);
        assert_eq!(cat.workflows, builtin.workflows);
        let errors: Vec<_> = cat
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.path.as_str())
            .collect();
        assert_eq!(
            errors,
            [
                "/u/agents/junk.md",
                "/u/workflows/nul.workflow.md",
                "/u/skills/x/SKILL.md"
            ]
        );
        assert_eq!(cat.errors_in("/u/agents/junk.md").count(), 1);
    }

    #[test]
    fn get_by_kind() {
        let cat = Catalog::builtin();
        assert!(
            matches!(cat.get(Kind::Agent, "Explorer"), Some(Parsed::Agent(a)) if a.name == "explorer")
        );
        assert!(matches!(
            cat.get(Kind::Team, "default"),
            Some(Parsed::Team(_))
        ));
        assert!(matches!(
            cat.get(Kind::Workflow, "pipeline"),
            Some(Parsed::Workflow(_))
        ));
        assert_eq!(cat.get(Kind::Team, "Default"), None);
        assert_eq!(cat.get(Kind::Skill, "nope"), None);
    }
}
