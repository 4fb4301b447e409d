//! Workflows: `workflows/<name>.workflow.md`, pi-crew frontmatter plus one `## step-id` section
//! per step: leading `key: value` config lines, then the task template.

use super::agent::NO_DESCRIPTION;
use super::diag::{artifact_name_ok, basename, ident_ok, Diags};
use super::frontmatter::{self, line_no, parse_csv, Entry};
use super::{Diagnostic, Parsed, Source, Step, Workflow};
use crate::checks::{PreStep, PRE_STEP_TIMEOUT_MAX_MS, PRE_STEP_TIMEOUT_MS};

const KNOWN: &[&str] = &[
    "name",
    "description",
    "maxConcurrency",
    "topology",
    "coalesceMicroTasks",
    "specStrict",
];

/// A `##` section whose first line is one of these keys is an "explicit" step (pi-crew's
/// STEP_CONFIG_KEYS); once any section is explicit, prose headings stop being steps.
const STEP_KEYS: &[&str] = &[
    "role",
    "dependsOn",
    "parallelGroup",
    "output",
    "reads",
    "model",
    "skills",
    "progress",
    "worktree",
    "verify",
    "task",
    "seedPaths",
    "preStepScript",
    "preStepArgs",
    "preStepTimeout",
    "preStepOptional",
    "expands",
];

/// Later pi-crew step keys: accepted, but they do not make a heading explicit.
/// crew's own step keys (issue 17) are here too: a pi-crew file never has them.
const LATER_STEP_KEYS: &[&str] = &[
    "specRefs",
    "specStrict",
    "scope",
    "scopePolicy",
    "allowNoChange",
    "verifyCommands",
    "verifyRetries",
    "verdict",
    "fixer",
    "maxFixRounds",
    "candidates",
    "select",
    "judge",
    "cpusPerTask",
    "memoryMb",
    "timeLimitMinutes",
];

/// A step's `candidates:` (N from 1 to 8, or a list of `runtime/model`), `select:` and
/// `judge:` (issue 36); a bad value is a warning and ignored, as other step keys are.
fn candidate_keys<'a>(
    get: &dyn Fn(&str) -> Option<&'a Entry>,
    d: &mut Diags,
) -> (
    Option<crate::run::candidates::Ask>,
    Option<crate::run::candidates::Select>,
    Option<String>,
) {
    use crate::run::candidates::{Ask, Select};
    let candidates = get("candidates")
        .filter(|e| !e.value.is_empty())
        .and_then(|e| {
            let v = e.value.trim();
            let ask = match v.parse::<u32>() {
                Ok(n) => Ask::Count(n),
                Err(_) => Ask::List(
                    parse_csv(v.trim_start_matches('[').trim_end_matches(']')).unwrap_or_default(),
                ),
            };
            match ask.contenders() {
                Ok(_) => Some(ask),
                Err(why) => {
                    d.warn_at(e, format!("`candidates`: {why}; ignored"));
                    None
                }
            }
        });
    let select = get("select").filter(|e| !e.value.is_empty()).and_then(|e| {
        let s = Select::parse(&e.value);
        if s.is_none() {
            d.warn_at(
                e,
                format!(
                    "`select` is `smallest`, `first` or `judge`, got `{}`; ignored",
                    e.value
                ),
            );
        }
        s
    });
    let judge = get("judge")
        .map(|e| e.value.trim().to_string())
        .filter(|v| !v.is_empty());
    (candidates, select, judge)
}

/// A seed path names a file below the work tree's top: relative, no `..`, no empty parts.
fn seed_path_ok(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// The text after `##` + whitespace: `###` and `##x` are not step headings.
fn heading(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("##")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    Some(rest.trim()).filter(|id| !id.is_empty())
}

/// A `key: value` config line (`^([\w-]+):\s*(.*)$`), as (key, value).
fn config_line(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    let key_ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    key_ok.then(|| (key, value.trim()))
}

fn is_simple_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

pub(super) fn parse(source: Source, path: &str, text: &str) -> (Option<Parsed>, Vec<Diagnostic>) {
    let fm = frontmatter::split(text);
    let mut d = Diags::new(path);
    d.frontmatter_shape(&fm, KNOWN, "workflow");
    d.one_of(
        fm.get("topology"),
        &[
            "single",
            "sequential",
            "concurrent",
            "complex-dag",
            "dynamic",
        ],
    );
    d.one_of(
        fm.get("coalesceMicroTasks"),
        &["true", "yes", "1", "false", "no", "0"],
    );
    d.boolean(fm.get("specStrict"));

    let lines: Vec<&str> = fm.body.split('\n').collect();
    // Line number in the file of body line index `i`.
    let file_line = |i: usize| fm.body_line.saturating_add(line_no(i)).saturating_sub(1);
    let headings: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| heading(l).map(|id| (i, id)))
        .collect();
    let explicit: Vec<bool> = headings
        .iter()
        .enumerate()
        .map(|(k, &(i, _))| {
            let end = headings.get(k + 1).map_or(lines.len(), |h| h.0);
            let first = lines
                .get(i + 1..end)
                .unwrap_or_default()
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.is_empty());
            first
                .and_then(config_line)
                .is_some_and(|(key, _)| STEP_KEYS.contains(&key))
        })
        .collect();
    let any_explicit = explicit.iter().any(|&e| e);
    // Lines before this index are all blank: computed once, where a scan per heading was
    // quadratic in a file of many blank lines.
    let first_text = lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .unwrap_or(lines.len());
    let selected: Vec<(usize, &str)> = headings
        .iter()
        .zip(&explicit)
        .filter(|(&(i, id), &is_explicit)| {
            let at_boundary =
                i == 0 || i <= first_text || lines.get(i - 1).is_some_and(|l| l.trim().is_empty());
            !any_explicit || is_explicit || (at_boundary && is_simple_id(id))
        })
        .map(|(&h, _)| h)
        .collect();

    if selected.len() > super::MAX_STEPS {
        d.error(
            selected.get(super::MAX_STEPS).map(|&(i, _)| file_line(i)),
            None,
            format!(
                "workflow has {} steps; at most {} are allowed (the rest are not read)",
                selected.len(),
                super::MAX_STEPS
            ),
        );
    }
    let mut steps = Vec::new();
    for (k, &(i, id)) in selected.iter().enumerate().take(super::MAX_STEPS) {
        let end = selected.get(k + 1).map_or(lines.len(), |h| h.0);
        let section = lines.get(i + 1..end).unwrap_or_default();
        let entries_from = |j: usize| file_line(i + 1 + j);
        steps.push(parse_step(id, file_line(i), section, entries_from, &mut d));
    }

    let workflow = Workflow {
        name: fm
            .text("name")
            .map_or_else(|| basename(path, ".workflow.md"), str::to_string),
        description: fm.text("description").unwrap_or(NO_DESCRIPTION).to_string(),
        max_concurrency: d.positive_int(fm.get("maxConcurrency")),
        steps,
        source,
        path: path.to_string(),
    };
    (Some(Parsed::Workflow(workflow)), d.into_vec())
}

/// A step's config lines; the last line of a key wins.
struct StepConfig(Vec<Entry>);

impl StepConfig {
    fn get(&self, key: &str) -> Option<&Entry> {
        self.0.iter().rev().find(|e| e.key == key)
    }

    /// The entry of `key` when it has a value.
    fn given(&self, key: &str) -> Option<&Entry> {
        self.get(key).filter(|e| !e.value.is_empty())
    }
}

/// One step section: `section` are the lines after the heading, `line_of(j)` is the file line
/// of `section[j]`. Fields are read in a fixed order, so diagnostics come in that order.
fn parse_step(
    id: &str,
    heading_line: u32,
    section: &[&str],
    line_of: impl Fn(usize) -> u32,
    d: &mut Diags,
) -> Step {
    let (config, task_lines) = split_section(section, line_of);
    warn_unknown_keys(&config, d);
    let get = |key: &str| config.get(key);
    for key in ["progress", "worktree", "specStrict"] {
        d.boolean(get(key));
    }
    let verify = d.boolean(get("verify"));
    let allow_no_change = d.boolean(get("allowNoChange"));
    let scope_policy = get("scopePolicy")
        .and_then(|e| d.one_of(Some(e), &["needs_attention", "warn"]))
        .and_then(|v| crate::checks::ScopePolicy::parse(&v));
    let verify_retries = bounded_count(config.given("verifyRetries"), 10, d);
    let verdict = d.boolean(get("verdict"));
    let fixer = get("fixer")
        .map(|e| e.value.clone())
        .filter(|v| !v.is_empty());
    let max_fix_rounds = bounded_count(
        config.given("maxFixRounds"),
        crate::verdict::MAX_FIX_ROUNDS_CEILING,
        d,
    );
    let (candidates, select, judge) = candidate_keys(&get, d);
    let resources = job_resources(&config, d);
    let scope = scope(&config, d);
    let verify_commands = config
        .given("verifyCommands")
        .map(|e| verify_commands(e, d))
        .unwrap_or_default();
    let pre_step = pre_step(&get, d);
    let task = task_text(&task_lines, &config);
    let (output, output_disabled) = output(&config, d);
    let reads = plain_list(get("reads"), "reads", d, artifact_name_ok, |name| {
        format!("`{name}` is not a plain artifact file name (letters, digits, `._-`, no path)")
    });
    let skills = skills(&config, d);
    let seed_paths = plain_list(get("seedPaths"), "seedPaths", d, seed_path_ok, |p| {
        format!("`{p}` is not a relative path inside the repository")
    });
    let expands = expands(&config, d);
    Step {
        candidates,
        resources,
        select,
        judge,
        verdict,
        fixer,
        max_fix_rounds,
        pre_step,
        expands,
        seed_paths,
        scope,
        scope_policy,
        allow_no_change,
        verify,
        verify_commands,
        verify_retries,
        skills,
        id: id.to_string(),
        role: get("role")
            .map(|e| e.value.clone())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| id.to_string()),
        task,
        depends_on: get("dependsOn")
            .and_then(|e| parse_csv(&e.value))
            .unwrap_or_default(),
        output,
        output_disabled,
        reads,
        model: d.model(get("model")),
        line: heading_line,
    }
}

/// A section's leading `key: value` lines and the task text after them. Blank lines before
/// any config are skipped; the first one after config ends it, as does the first line that is
/// not a config line.
fn split_section<'s>(
    section: &[&'s str],
    line_of: impl Fn(usize) -> u32,
) -> (StepConfig, Vec<&'s str>) {
    let mut config: Vec<Entry> = Vec::new();
    let mut task_lines: Vec<&str> = Vec::new();
    let mut in_task = false;
    for (j, &line) in section.iter().enumerate() {
        if !in_task {
            if line.trim().is_empty() {
                in_task = !config.is_empty();
                continue;
            }
            if let Some((key, value)) = config_line(line) {
                config.push(Entry {
                    key: key.to_string(),
                    value: value.to_string(),
                    line: line_of(j),
                });
                continue;
            }
            in_task = true;
        }
        task_lines.push(line);
    }
    (StepConfig(config), task_lines)
}

fn warn_unknown_keys(config: &StepConfig, d: &mut Diags) {
    for e in &config.0 {
        let key = e.key.as_str();
        if !STEP_KEYS.contains(&key) && !LATER_STEP_KEYS.contains(&key) {
            d.warn_at(
                e,
                format!(
                    "unknown step field `{key}`; ignored (a blank line must separate the step's \
                     config lines from its task text)"
                ),
            );
        }
    }
}

/// A whole number from 0 to `max` (`verifyRetries`, `maxFixRounds`); anything else is a
/// warning and ignored.
fn bounded_count(e: Option<&Entry>, max: u32, d: &mut Diags) -> Option<u32> {
    let e = e?;
    match e.value.parse::<u32>() {
        Ok(n) if n <= max => Some(n),
        _ => {
            d.warn_at(
                e,
                format!(
                    "`{}` must be a whole number from 0 to {max}, got `{}`; ignored",
                    e.key, e.value
                ),
            );
            None
        }
    }
}

/// The job resources on a cluster (issue 35): a bad value is an error, as on a role line.
fn job_resources(config: &StepConfig, d: &mut Diags) -> crate::job_shape::JobShape {
    let mut resources = crate::job_shape::JobShape::default();
    for field in crate::job_shape::FIELDS {
        if let Some(e) = config.given(field) {
            if let Err(why) = resources.set(field, &e.value) {
                d.error(Some(e.line), Some(field), why);
            }
        }
    }
    resources
}

/// The paths a step may change, normalized; a path that cannot be one is an error.
fn scope(config: &StepConfig, d: &mut Diags) -> Vec<String> {
    let mut scope = Vec::new();
    if let Some(e) = config.given("scope") {
        for p in parse_csv(&e.value).unwrap_or_default() {
            match crate::scope::normalize(&p) {
                Ok(p) => scope.push(p),
                Err(why) => d.error(Some(e.line), Some("scope"), why),
            }
        }
    }
    scope
}

/// The section's text after its config, else its `task:` line, else the goal itself.
fn task_text(task_lines: &[&str], config: &StepConfig) -> String {
    let task = task_lines.join("\n").trim().to_string();
    if !task.is_empty() {
        return task;
    }
    config
        .given("task")
        .map(|e| e.value.clone())
        .unwrap_or_else(|| "{goal}".to_string())
}

/// `output:` as (the artifact's name, whether the step writes none at all: `output: false`).
fn output(config: &StepConfig, d: &mut Diags) -> (Option<String>, bool) {
    match config.get("output") {
        Some(e) if e.value == "false" => (None, true),
        Some(e) if e.value.is_empty() => (None, false),
        Some(e) if !artifact_name_ok(&e.value) => {
            d.error(
                Some(e.line),
                Some("output"),
                format!(
                    "`output: {}` is not a plain artifact file name (letters, digits, `._-`, no path)",
                    e.value
                ),
            );
            (None, false)
        }
        Some(e) => (Some(e.value.clone()), false),
        None => (None, false),
    }
}

/// A comma-separated list (`reads`, `seedPaths`; `false` is none) whose every item must pass
/// `ok`: an item that does not is an error, and left out.
fn plain_list(
    e: Option<&Entry>,
    field: &str,
    d: &mut Diags,
    ok: impl Fn(&str) -> bool,
    why: impl Fn(&str) -> String,
) -> Vec<String> {
    let mut items = Vec::new();
    if let Some(e) = e.filter(|e| e.value != "false") {
        for item in parse_csv(&e.value).unwrap_or_default() {
            if ok(&item) {
                items.push(item);
            } else {
                d.error(Some(e.line), Some(field), why(&item));
            }
        }
    }
    items
}

/// `skills: false` drops the role's default skills; a list adds to them.
fn skills(config: &StepConfig, d: &mut Diags) -> Option<Vec<String>> {
    let e = config.get("skills")?;
    let mut names = Vec::new();
    if e.value != "false" {
        for s in parse_csv(&e.value).unwrap_or_default() {
            if ident_ok(&s) {
                names.push(s);
            } else {
                d.warn_at(e, format!("invalid skill name `{s}`; ignored"));
            }
        }
    }
    Some(names)
}

/// `expands: tasks`: the step's answer adds tasks to the run.
fn expands(config: &StepConfig, d: &mut Diags) -> bool {
    match config.get("expands") {
        None => false,
        Some(e) if e.value == "tasks" => true,
        Some(e) if e.value == "false" || e.value.is_empty() => false,
        Some(e) => {
            d.error(
                Some(e.line),
                Some("expands"),
                format!(
                    "`expands: {}`: the only value is `tasks` (the step's answer adds tasks to the run)",
                    e.value
                ),
            );
            false
        }
    }
}

/// `preStepScript` and its companions, as pi-crew read them: args a CSV, the timeout in ms
/// (default 30 s), optional `true`/`1`. The companions without a script are warned about.
fn pre_step<'a>(get: &impl Fn(&str) -> Option<&'a Entry>, d: &mut Diags) -> Option<PreStep> {
    let script = get("preStepScript").filter(|e| !e.value.is_empty() && e.value != "false");
    let Some(script) = script else {
        for key in ["preStepArgs", "preStepTimeout", "preStepOptional"] {
            if let Some(e) = get(key) {
                d.warn_at(e, format!("`{key}` without a `preStepScript`; ignored"));
            }
        }
        return None;
    };
    // Split on commas and trimmed, not de-duplicated (`-v, -v` is two arguments).
    let args = get("preStepArgs")
        .map(|e| {
            e.value
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let timeout_ms = match get("preStepTimeout").filter(|e| !e.value.is_empty()) {
        None => PRE_STEP_TIMEOUT_MS,
        Some(e) => match e.value.parse::<u64>() {
            Ok(ms) if (1..=PRE_STEP_TIMEOUT_MAX_MS).contains(&ms) => ms,
            _ => {
                d.error(
                    Some(e.line),
                    Some("preStepTimeout"),
                    format!(
                        "`preStepTimeout` must be milliseconds from 1 to {PRE_STEP_TIMEOUT_MAX_MS}, got `{}`",
                        e.value
                    ),
                );
                PRE_STEP_TIMEOUT_MS
            }
        },
    };
    let optional = match get("preStepOptional") {
        Some(e) if e.value == "1" => true,
        other => d.boolean(other).unwrap_or(false),
    };
    Some(PreStep {
        script: script.value.clone(),
        args,
        timeout_ms,
        optional,
    })
}

/// Commands a workflow declares: one command as the whole value, or a JSON array of them
/// (`["cargo test", "npm test"]`), so a command keeps its commas and quotes.
fn verify_commands(e: &Entry, d: &mut Diags) -> Vec<String> {
    let commands: Vec<String> = if e.value.starts_with('[') {
        match serde_json::from_str::<Vec<String>>(&e.value) {
            Ok(v) => v,
            Err(err) => {
                d.error(
                    Some(e.line),
                    Some("verifyCommands"),
                    format!("`verifyCommands` is not a JSON array of strings: {err}"),
                );
                return Vec::new();
            }
        }
    } else {
        vec![e.value.clone()]
    };
    let commands: Vec<String> = commands
        .into_iter()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect();
    if commands.is_empty() {
        d.error(
            Some(e.line),
            Some("verifyCommands"),
            "`verifyCommands` names no command".to_string(),
        );
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{parse_file, Kind, Severity};

    fn workflow(text: &str) -> (Workflow, Vec<Diagnostic>) {
        match parse_file(
            Kind::Workflow,
            Source::User,
            "/u/workflows/probe.workflow.md",
            text.as_bytes(),
        ) {
            (Some(Parsed::Workflow(w)), d) => (w, d),
            other => panic!("not a workflow: {other:?}"),
        }
    }

    /// (id, role, deps, task, line)
    fn shape(w: &Workflow) -> Vec<(&str, &str, Vec<&str>, &str, u32)> {
        w.steps
            .iter()
            .map(|s| {
                (
                    s.id.as_str(),
                    s.role.as_str(),
                    s.depends_on.iter().map(String::as_str).collect(),
                    s.task.as_str(),
                    s.line,
                )
            })
            .collect()
    }

    type Shape = &'static [(
        &'static str,
        &'static str,
        &'static [&'static str],
        &'static str,
        u32,
    )];

    #[test]
    fn pre_step_scripts_parse_as_pi_crew_wrote_them() {
        let (w, d) = workflow(
            "## a\npreStepScript: scripts/ctx.sh\npreStepArgs: one, two\npreStepTimeout: 1500\n\
             preStepOptional: 1\n\nDo a.\n\n## b\npreStepScript: ./b.sh\n\nDo b.\n\n## c\n\nDo c.\n",
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            w.steps[0].pre_step,
            Some(PreStep {
                script: "scripts/ctx.sh".into(),
                args: vec!["one".into(), "two".into()],
                timeout_ms: 1500,
                optional: true,
            })
        );
        assert_eq!(w.steps[0].task, "Do a.");
        let b = w.steps[1].pre_step.as_ref().unwrap();
        assert_eq!(
            (b.script.as_str(), b.args.len(), b.timeout_ms, b.optional),
            ("./b.sh", 0, PRE_STEP_TIMEOUT_MS, false)
        );
        assert_eq!(w.steps[2].pre_step, None);
    }

    #[test]
    fn expands_field() {
        // (value line, expands, diagnostics as (severity, line, field))
        type Case = (&'static str, bool, &'static [(Severity, u32, &'static str)]);
        let cases: &[Case] = &[
            ("expands: tasks\n", true, &[]),
            ("expands: false\n", false, &[]),
            ("", false, &[]),
            (
                "expands: steps\n",
                false,
                &[(Severity::Error, 2, "expands")],
            ),
        ];
        for (line, want, diags) in cases {
            let (w, d) = workflow(&format!(
                "## plan\n{line}role: planner\n\nSplit {{goal}}.\n"
            ));
            assert_eq!(w.steps.len(), 1, "{line}");
            assert_eq!(w.steps[0].expands, *want, "{line}");
            let got: Vec<_> = d
                .iter()
                .map(|d| {
                    (
                        d.severity,
                        d.line.unwrap_or(0),
                        d.field.as_deref().unwrap_or(""),
                    )
                })
                .collect();
            assert_eq!(&got, diags, "{line}: {d:?}");
        }
        // `expands` alone makes a heading a step, like any step key.
        let (w, _) = workflow("## plan\nexpands: tasks\n\nSplit.\n\n## Notes\n\nprose\n");
        assert_eq!(w.steps.len(), 1);
    }

    #[test]
    fn step_sections() {
        let cases: &[(&str, &str, Shape)] = &[
            (
                "config and task",
                "---\nname: x\n---\n\n## explore\nrole: explorer\n\nFind it: {goal}\n\n## fix\nrole: executor\ndependsOn: explore\n\nFix.\nMore.\n",
                &[
                    ("explore", "explorer", &[], "Find it: {goal}", 5),
                    ("fix", "executor", &["explore"], "Fix.\nMore.", 10),
                ],
            ),
            (
                "no frontmatter, role defaults to id, goal default",
                "## a\n## b\ndependsOn: a\n",
                &[("a", "a", &[], "{goal}", 1), ("b", "b", &["a"], "{goal}", 2)],
            ),
            (
                "task: fallback",
                "## a\nrole: r\ntask: do {goal}\n",
                &[("a", "r", &[], "do {goal}", 1)],
            ),
            (
                "body beats task:",
                "## a\ntask: ignored\n\nreal\n",
                &[("a", "a", &[], "real", 1)],
            ),
            (
                "explicit rule: prose headings are not steps",
                "# Title\n\n## Overview\nSome prose.\n\n## step-one\nrole: r\n\nDo it.\n### Detail\nmore\n## Notes\nstill step-one\n\n## tail\nno config\n",
                &[
                    ("step-one", "r", &[], "Do it.\n### Detail\nmore\n## Notes\nstill step-one", 6),
                    ("tail", "tail", &[], "no config", 15),
                ],
            ),
            (
                "no explicit heading: every heading is a step",
                "## Overview\nprose\n## Usage\nmore prose\n",
                &[("Overview", "Overview", &[], "prose", 1), ("Usage", "Usage", &[], "more prose", 3)],
            ),
            (
                "key: value right after config is config; after a blank line it is text",
                "## a\nrole: r\n\nNote: keep this\n",
                &[("a", "r", &[], "Note: keep this", 1)],
            ),
            (
                "not headings",
                "###x\n##x\n##   \n",
                &[],
            ),
            (
                "empty role falls back to id, heading text trimmed",
                "##   spaced-id   \nrole:\n",
                &[("spaced-id", "spaced-id", &[], "{goal}", 1)],
            ),
        ];
        for (name, text, want) in cases {
            let (w, _) = workflow(text);
            let want: Vec<_> = want
                .iter()
                .map(|(a, b, c, d, e)| (*a, *b, c.to_vec(), *d, *e))
                .collect();
            assert_eq!(shape(&w), want, "{name}");
        }
    }

    #[test]
    fn step_fields() {
        let (w, d) = workflow(
            "---\nname: wf\ndescription: dd\nmaxConcurrency: 3\ntopology: sequential\n---\n\
             ## a\noutput: false\nreads: x.md, y.md\nmodel: p/m\nverify: true\nparallelGroup: g\nskills: s1\n\n\
             ## b\noutput: plan.md\nreads: false\n\n## c\noutput:\n",
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            (w.name.as_str(), w.description.as_str(), w.max_concurrency),
            ("wf", "dd", Some(3))
        );
        let a = &w.steps[0];
        assert_eq!((a.output.as_deref(), a.output_disabled), (None, true));
        assert_eq!(a.reads, ["x.md", "y.md"]);
        assert_eq!(a.model.as_deref(), Some("p/m"));
        let b = &w.steps[1];
        assert_eq!(
            (b.output.as_deref(), b.output_disabled),
            (Some("plan.md"), false)
        );
        assert!(b.reads.is_empty());
        let c = &w.steps[2];
        assert_eq!((c.output.as_deref(), c.output_disabled), (None, false));
    }

    /// A step's job resources on a cluster (issue 35).
    #[test]
    fn job_resources() {
        let (w, d) = workflow(
            "## a\nrole: r\ncpusPerTask: 2\nmemoryMb: 300\ntimeLimitMinutes: 7\n\nWork.\n\n## b\nrole: r\n\nMore.\n",
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(
            w.steps[0].resources,
            crate::job_shape::JobShape {
                cpus_per_task: Some(2),
                memory_mb: Some(300),
                time_limit_minutes: Some(7),
            }
        );
        assert!(w.steps[1].resources.is_empty());
    }

    #[test]
    fn check_fields() {
        let (w, d) = workflow(
            "## a\nrole: r\nscope: ./src/auth/, \"docs/{a,b}.md\"\nscopePolicy: warn\nallowNoChange: true\n\
             verify: true\nverifyCommands: [\"cargo test -p x,y\", \"sh -c 'echo \\\"hi\\\"'\"]\nverifyRetries: 2\n\n\
             ## b\nverifyCommands: make check\n\n## c\nverify: false\nverifyCommands: make\n",
        );
        assert!(d.is_empty(), "{d:?}");
        let a = &w.steps[0];
        assert_eq!(a.scope, ["src/auth", "docs/{a,b}.md"]);
        assert_eq!(a.scope_policy, Some(crate::checks::ScopePolicy::Warn));
        assert_eq!(a.allow_no_change, Some(true));
        assert_eq!(a.verify, Some(true));
        assert_eq!(
            a.verify_commands,
            ["cargo test -p x,y", "sh -c 'echo \"hi\"'"]
        );
        assert_eq!(a.verify_retries, Some(2));
        assert_eq!(w.steps[1].verify_commands, ["make check"]);
        assert_eq!(w.steps[2].verify, Some(false));
    }

    #[test]
    fn problems_are_reported() {
        type Want = &'static [(Severity, Option<u32>, Option<&'static str>)];
        let cases: &[(&str, Want)] = &[
            (
                "---\nmaxConcurrency: 1.5\n---\n## a\n",
                &[(Severity::Warning, Some(2), Some("maxConcurrency"))],
            ),
            (
                "---\ntopology: mesh\n---\n## a\n",
                &[(Severity::Warning, Some(2), Some("topology"))],
            ),
            (
                "---\nrunner: x\n---\n## a\n",
                &[(Severity::Warning, Some(2), Some("runner"))],
            ),
            (
                "## a\nrole: r\nNote: x\n",
                &[(Severity::Warning, Some(3), Some("Note"))],
            ),
            (
                "## a\nverify: maybe\n",
                &[(Severity::Warning, Some(2), Some("verify"))],
            ),
            (
                "## a\npreStepArgs: x\n",
                &[(Severity::Warning, Some(2), Some("preStepArgs"))],
            ),
            (
                "## a\npreStepScript: ctx.sh\npreStepTimeout: soon\n",
                &[(Severity::Error, Some(3), Some("preStepTimeout"))],
            ),
            (
                "## a\npreStepScript: ctx.sh\npreStepTimeout: 0\n",
                &[(Severity::Error, Some(3), Some("preStepTimeout"))],
            ),
            (
                "## a\npreStepScript: ctx.sh\npreStepOptional: maybe\n",
                &[(Severity::Warning, Some(3), Some("preStepOptional"))],
            ),
            (
                "## a\noutput: ../../etc/passwd\n",
                &[(Severity::Error, Some(2), Some("output"))],
            ),
            (
                "## a\nreads: ok.md, /abs\n",
                &[(Severity::Error, Some(2), Some("reads"))],
            ),
            (
                "## a\nskills: ok, b@d\n",
                &[(Severity::Warning, Some(2), Some("skills"))],
            ),
            (
                "## a\nmodel: a b\n",
                &[(Severity::Warning, Some(2), Some("model"))],
            ),
            (
                "## a\nscope: src, ../up, /abs\n",
                &[
                    (Severity::Error, Some(2), Some("scope")),
                    (Severity::Error, Some(2), Some("scope")),
                ],
            ),
            (
                "## a\nscopePolicy: ignore\n",
                &[(Severity::Warning, Some(2), Some("scopePolicy"))],
            ),
            (
                "## a\nverifyCommands: [\"ok\", 3]\n",
                &[(Severity::Error, Some(2), Some("verifyCommands"))],
            ),
            (
                "## a\nverifyRetries: many\n",
                &[(Severity::Warning, Some(2), Some("verifyRetries"))],
            ),
            (
                "## a\nrole: r\ncpusPerTask: 0\nmemoryMb: 1e3\ntimeLimitMinutes: 600000\n",
                &[
                    (Severity::Error, Some(3), Some("cpusPerTask")),
                    (Severity::Error, Some(4), Some("memoryMb")),
                    (Severity::Error, Some(5), Some("timeLimitMinutes")),
                ],
            ),
        ];
        for (text, want) in cases {
            let (_, d) = workflow(text);
            let got: Vec<_> = d
                .iter()
                .map(|d| (d.severity, d.line, d.field.as_deref()))
                .collect();
            assert_eq!(got, *want, "{text:?}: {d:?}");
        }
    }
}
