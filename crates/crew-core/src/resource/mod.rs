//! Resources: agents, teams, workflows and skills in pi-crew's file formats.
//!
//! Parsing is per file (`parse_file`) so the daemon can cache parsed files by path; a
//! [`Catalog`] is then assembled from parsed files with the precedence and trust rules.

mod agent;
pub mod builtin;
mod catalog;
mod diag;
mod frontmatter;
mod skill;
mod team;
pub(crate) mod validate;
mod workflow;

pub use catalog::Catalog;

/// Bytes of one resource file, at most: the daemon reads no more than this (plus one byte to
/// tell), and a bigger file is a "file too large" diagnostic. pi-crew's largest builtin is a
/// few KiB.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Steps of one workflow, at most (each becomes a task of every run of it).
pub const MAX_STEPS: usize = 5_000;
pub use validate::validate_catalog;

use serde::{Deserialize, Serialize};

/// Where a resource came from. Order matters for precedence (see `Catalog`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    Builtin,
    /// `$XDG_CONFIG_HOME/crew/...`
    User,
    /// pi-crew's `~/.pi/agent/...` (compatibility).
    PiUser,
    /// `<project root>/.crew/...`
    Project,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Agent,
    Team,
    Workflow,
    Skill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem with a resource, pointing at the file, line and field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub path: String,
    pub line: Option<u32>,
    pub field: Option<String>,
    pub severity: Severity,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SystemPromptMode {
    #[default]
    Replace,
    Append,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    pub name: String,
    pub description: String,
    pub model: Option<String>,
    pub fallback_models: Vec<String>,
    pub thinking: Option<String>,
    /// `None`: not given (role default applies). `Some(vec![])`: no tools.
    pub tools: Option<Vec<String>>,
    pub skills: Vec<String>,
    pub system_prompt_mode: SystemPromptMode,
    pub max_turns: Option<u32>,
    pub max_tokens: Option<u32>,
    pub effort: Option<String>,
    pub disabled: bool,
    /// The markdown body: the agent's system prompt.
    pub system_prompt: String,
    pub source: Source,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeamRole {
    pub name: String,
    pub agent: String,
    pub model: Option<String>,
    /// `None`: role defaults; `Some(vec![])`: `skills=false`.
    pub skills: Option<Vec<String>>,
    /// `candidates=N` (issue 36): the role's writing steps try N solutions at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u32>,
    /// `cpusPerTask=`, `memoryMb=`, `timeLimitMinutes=` (issue 35): the job its tasks ask of a
    /// cluster node, over the runtime's defaults.
    #[serde(default, skip_serializing_if = "crate::job_shape::JobShape::is_empty")]
    pub resources: crate::job_shape::JobShape,
    /// `network=false` (issue 34): the role's boxed attempts get no network at all, loopback
    /// included, whatever its runtime allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    pub description: String,
    pub line: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Team {
    pub name: String,
    pub description: String,
    pub default_workflow: Option<String>,
    pub max_concurrency: Option<u32>,
    /// `maxFixRounds:` fix rounds a judge's failing verdicts may start (issue 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fix_rounds: Option<u32>,
    /// pi-crew's `workspaceMode`: `worktree` gives each task its own git worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_mode: Option<crate::run::WorkspaceMode>,
    /// `conflicts: agent | manual`: what a conflicting merge of results does (issue 31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<crate::run::ConflictMode>,
    pub roles: Vec<TeamRole>,
    pub source: Source,
    pub path: String,
    /// 1-based line of frontmatter fields that later checks point at (`defaultWorkflow`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub field_lines: std::collections::BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub id: String,
    pub role: String,
    /// Task template; `{goal}` is replaced by the run's goal.
    pub task: String,
    pub depends_on: Vec<String>,
    /// Shared artifact name; `None` = default (`<taskId>.md`), `Some("")` never happens: `output: false`
    /// is `output_disabled`.
    pub output: Option<String>,
    pub output_disabled: bool,
    pub reads: Vec<String>,
    pub model: Option<String>,
    /// Untracked files (e.g. `.env`) copied from the user's tree into the task's worktree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seed_paths: Vec<String>,
    /// `scope:` the paths or globs the step's task may change (normalized); empty = any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
    /// `scopePolicy:` `needs_attention` or `warn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_policy: Option<crate::checks::ScopePolicy>,
    /// `allowNoChange:` a writing task may complete without changing anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_no_change: Option<bool>,
    /// `verify:` as written (`true` runs the step's or the project's verification commands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<bool>,
    /// `verifyCommands:` one command, or a JSON array of commands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify_commands: Vec<String>,
    /// `preStepScript:` (with `preStepArgs`, `preStepTimeout`, `preStepOptional`): run before
    /// the worker, its output joining the prompt; refused for an untrusted project's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_step: Option<crate::checks::PreStep>,
    /// `verifyRetries:` verification failures retried with the failure fed back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_retries: Option<u32>,
    /// `expands: tasks`: the step's answer holds a fan-out block whose tasks are added to the
    /// run (`crate::fanout`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expands: bool,
    /// `skills:` of the step: `None` not given, `Some(vec![])` `skills: false` (no role
    /// defaults), else names added to the task's skills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    /// `verdict:` the step's task judges (`true`) or does not (`false`) whatever its agent
    /// (`crate::verdict::judges`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<bool>,
    /// `fixer:` the team role whose task fixes what this judge's failing verdict found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixer: Option<String>,
    /// `maxFixRounds:` fix rounds this judge's failing verdicts may start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fix_rounds: Option<u32>,
    /// `candidates:` N, or a list of `runtime/model` (issue 36).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<crate::run::candidates::Ask>,
    /// `select:` how the best candidate is chosen (`smallest`, `first`, `judge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<crate::run::candidates::Select>,
    /// `judge:` the team role that chooses among candidates when `select` is `judge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    /// `cpusPerTask:`, `memoryMb:`, `timeLimitMinutes:` (issue 35): the job the step's task
    /// asks of a cluster node, over its role's and the runtime's.
    #[serde(default, skip_serializing_if = "crate::job_shape::JobShape::is_empty")]
    pub resources: crate::job_shape::JobShape,
    /// 1-based line of the `## id` heading.
    pub line: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    pub name: String,
    pub description: String,
    pub max_concurrency: Option<u32>,
    pub steps: Vec<Step>,
    pub source: Source,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub body: String,
    pub source: Source,
    pub path: String,
}

/// A successfully parsed resource file (it may still carry warnings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Parsed {
    Agent(Agent),
    Team(Team),
    Workflow(Workflow),
    Skill(Skill),
}

/// What kind of resource a file in a resource directory holds, from its path, if any.
/// `agents/x.md` (not `*.team.md`/`*.workflow.md`), `teams/x.team.md`, `workflows/x.workflow.md`,
/// `skills/<dir>/SKILL.md`.
pub fn kind_of_path(dir_kind: Kind, file_name: &str) -> Option<Kind> {
    match dir_kind {
        Kind::Agent => (file_name.ends_with(".md")
            && !file_name.ends_with(".team.md")
            && !file_name.ends_with(".workflow.md"))
        .then_some(Kind::Agent),
        Kind::Team => file_name.ends_with(".team.md").then_some(Kind::Team),
        Kind::Workflow => file_name
            .ends_with(".workflow.md")
            .then_some(Kind::Workflow),
        Kind::Skill => (file_name == "SKILL.md").then_some(Kind::Skill),
    }
}

/// The diagnostic of a file bigger than [`MAX_FILE_BYTES`].
pub fn too_large(path: &str) -> Diagnostic {
    Diagnostic::error(
        path,
        None,
        None,
        format!(
            "file too large: a resource file may hold at most {MAX_FILE_BYTES} bytes; not read"
        ),
    )
}

/// Parse one resource file. Never panics, whatever the bytes: binary garbage gives an error
/// diagnostic and `None`.
pub fn parse_file(
    kind: Kind,
    source: Source,
    path: &str,
    bytes: &[u8],
) -> (Option<Parsed>, Vec<Diagnostic>) {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return (None, vec![too_large(path)]);
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) if !t.contains('\0') => t,
        _ => {
            return (
                None,
                vec![Diagnostic {
                    path: path.to_string(),
                    line: None,
                    field: None,
                    severity: Severity::Error,
                    message: "file is not UTF-8 text".into(),
                }],
            )
        }
    };
    match kind {
        Kind::Agent => agent::parse(source, path, text),
        Kind::Team => team::parse(source, path, text),
        Kind::Workflow => workflow::parse(source, path, text),
        Kind::Skill => skill::parse(source, path, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KINDS: [Kind; 4] = [Kind::Agent, Kind::Team, Kind::Workflow, Kind::Skill];

    fn path(kind: Kind) -> &'static str {
        match kind {
            Kind::Agent => "/x/agents/a.md",
            Kind::Team => "/x/teams/t.team.md",
            Kind::Workflow => "/x/workflows/w.workflow.md",
            Kind::Skill => "/x/skills/s/SKILL.md",
        }
    }

    #[test]
    fn binary_garbage_is_an_error() {
        let cases: &[&[u8]] = &[
            &[0xff, 0xfe, 0x00, 0x01],
            b"---\nname: x\0\n---\n",
            &[0xc3, 0x28],
            b"\x00",
        ];
        for bytes in cases {
            for kind in KINDS {
                let (parsed, diags) = parse_file(kind, Source::User, path(kind), bytes);
                assert!(parsed.is_none(), "{kind:?} {bytes:?}");
                assert_eq!(diags.len(), 1);
                assert_eq!(
                    (diags[0].severity, diags[0].path.as_str()),
                    (Severity::Error, path(kind))
                );
            }
        }
    }

    #[test]
    fn text_garbage_never_panics() {
        let cases = [
            "",
            "---",
            "---\n---",
            "---\n:\n::\n---\n- :\n- \n## \n##\t\n",
            "\u{feff}---\r\nname: ü\r\n---\r\n## ✓\r\nrole: ✓\r\n",
            "## a\ndependsOn: a,a,\"\n",
            "-\n--\n- a: skills=,,, agent= model=\n",
        ];
        for text in cases {
            for kind in KINDS {
                let _ = parse_file(kind, Source::Project, path(kind), text.as_bytes());
            }
        }
    }

    #[test]
    fn too_large_and_too_many_steps_are_diagnostics() {
        let big = vec![b'a'; (MAX_FILE_BYTES + 1) as usize];
        let (p, d) = parse_file(Kind::Agent, Source::Project, "/p/a.md", &big);
        assert!(p.is_none());
        assert!(d[0].message.contains("file too large"), "{d:?}");
        let wf: String = (0..MAX_STEPS + 10)
            .map(|i| format!("## s{i}\nrole: r\n\n"))
            .collect();
        let (p, d) = parse_file(
            Kind::Workflow,
            Source::Project,
            "/p/w.workflow.md",
            wf.as_bytes(),
        );
        let Some(Parsed::Workflow(w)) = p else {
            panic!("{d:?}")
        };
        assert_eq!(w.steps.len(), MAX_STEPS);
        assert!(d
            .iter()
            .any(|d| d.severity == Severity::Error && d.message.contains("at most 5000")));
        // Deep YAML nesting is refused before the YAML parser sees it.
        let deep = format!(
            "---\nname: s\ndescription: d\nmetadata: {}{}\n---\n",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let (p, d) = parse_file(
            Kind::Skill,
            Source::Project,
            "/p/skills/s/SKILL.md",
            deep.as_bytes(),
        );
        assert!(p.is_none());
        assert!(
            d.iter().any(|d| d.message.contains("nests deeper")),
            "{d:?}"
        );
    }

    proptest! {
        #[test]
        fn any_input_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512), k in 0usize..4) {
            let kind = KINDS[k];
            let _ = parse_file(kind, Source::User, path(kind), &bytes);
        }

        #[test]
        fn any_markdownish_text_never_panics(text in "(---\n|## [a-z]{0,3}\n|- [a-z:= ]{0,12}\n|[a-zA-Z]{0,6}: [a-z,\" ]{0,8}\n|\n|#.{0,5}\n){0,30}", k in 0usize..4) {
            let kind = KINDS[k];
            let (parsed, diags) = parse_file(kind, Source::User, path(kind), text.as_bytes());
            // Every diagnostic points into this file.
            prop_assert!(diags.iter().all(|d| d.path == path(kind)));
            if kind != Kind::Skill && !text.contains('\0') {
                prop_assert!(parsed.is_some());
            }
        }
    }
}
