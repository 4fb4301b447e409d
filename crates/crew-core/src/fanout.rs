//! Fan-out steps (`expands: tasks`): a step whose final answer defines tasks that are added to
//! the running run. This module holds the block's schema, finding it in an answer, validating
//! it against what the step may add, and the prompt text that tells the agent how to write it.
//! Pure: the daemon reads the answer from disk and hands the text here.

use crate::ids::SafeId;
use crate::plan::PlannedTask;
use crate::resource::SystemPromptMode;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Tasks one fan-out step may add unless config (`max_fan_out_tasks`) or the run param
/// (`maxFanOutTasks`) says otherwise.
pub const DEFAULT_MAX_TASKS: u32 = 16;
/// The most a config or param may allow.
pub const MAX_TASKS_CEILING: u32 = 256;
/// An added task's id: `[a-z0-9][a-z0-9_-]*`, at most this long.
pub const MAX_ID_LEN: usize = 48;
pub const MAX_TITLE_CHARS: usize = 200;
/// An added task's text, at most (bytes): it becomes part of a prompt.
pub const MAX_TASK_BYTES: usize = 32 * 1024;
/// Scope entries per task, and characters per entry.
pub const MAX_SCOPE_ENTRIES: usize = 64;
pub const MAX_SCOPE_CHARS: usize = 256;
/// Problems of one refused block that are named; the rest are counted ("and N more"), so a
/// block with a huge list cannot make a huge error, event or repair prompt.
pub const MAX_PROBLEMS: usize = 20;
/// The `reason` of the `task.retrying` that asks a fan-out step for a repaired block.
pub const REPAIR_REASON: &str = "fan_out_invalid";
/// Bytes of a fan-out step's final answer that are read and parsed, unless config
/// (`max_fan_out_answer_bytes`) says otherwise: a block of the most tasks at their longest
/// (256 × 32 KiB) is more, but an answer that size is a runaway agent, not a plan.
pub const DEFAULT_MAX_ANSWER_BYTES: u64 = 1 << 20;
/// The range config may set it to.
pub const MAX_ANSWER_BYTES_FLOOR: u64 = 1 << 10;
pub const MAX_ANSWER_BYTES_CEILING: u64 = 64 << 20;

/// A fan-out step's final answer as the daemon read it: never more than the step's
/// `max_answer_bytes`, so an oversized answer is judged by its size without being held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Text(String),
    /// The answer holds `bytes` bytes, more than the limit; none of it was parsed.
    TooLarge {
        bytes: u64,
    },
    /// The answer could not be read (the reason).
    Unreadable(String),
}

/// What a fan-out step may add, frozen into its planned task at plan time (so the run never
/// reads resource files again): the team's roles as they were bound then, and the cap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Expansion {
    pub max_tasks: u32,
    pub roles: Vec<RoleTemplate>,
    /// The longest final answer read for its block (bytes). Left out at the default, so runs
    /// journaled before it existed read as they were written.
    #[serde(
        default = "default_max_answer_bytes",
        skip_serializing_if = "is_default_max_answer_bytes"
    )]
    pub max_answer_bytes: u64,
    /// The run's own `candidates` ask (issue 36), frozen with the plan: the writing tasks the
    /// step adds get candidates as the planned ones did. Left out when the run asked none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<crate::run::candidates::RunAskFrozen>,
}

fn default_max_answer_bytes() -> u64 {
    DEFAULT_MAX_ANSWER_BYTES
}

fn is_default_max_answer_bytes(n: &u64) -> bool {
    *n == DEFAULT_MAX_ANSWER_BYTES
}

/// The problem of an answer over the limit, for the repair prompt and the task's error.
pub fn too_large(bytes: u64, limit: u64) -> String {
    format!(
        "the final answer is {bytes} bytes; a fan-out step's answer may be at most {limit} bytes \
         (max_fan_out_answer_bytes): nothing of it was read. Answer with a short plan and the \
         ```json tasks block, not the work itself"
    )
}

/// A team role bound to its agent: everything an added task of that role needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleTemplate {
    pub role: String,
    pub agent: String,
    pub model: Option<String>,
    pub system_prompt: Arc<str>,
    pub system_prompt_mode: SystemPromptMode,
    pub tools: Arc<[String]>,
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback_models: Vec<String>,
    pub writes: bool,
    /// The role's `candidates=N` (issue 36): its writing tasks, added ones included, try N
    /// solutions at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u32>,
    /// The skills a task of this role gets (its role's defaults, the agent's, the team role's
    /// and the run's; `crate::skills`), frozen with the plan like the prompt. Left out when
    /// empty, so runs journaled before it existed read as they were written.
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    pub skills: Arc<[crate::skills::PlannedSkill]>,
    /// The role's job resources (`cpusPerTask=` ..., issue 35): an added task's own.
    #[serde(default, skip_serializing_if = "crate::job_shape::JobShape::is_empty")]
    pub resources: crate::job_shape::JobShape,
    /// The run's `allowNoChange`, frozen with the plan: a task of this role added at run time
    /// may complete without changing files, as the planned ones may.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_no_change: bool,
    /// The role's `network=` (issue 34), for the tasks of it added at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
}

impl RoleTemplate {
    /// A task of this role added to a running run (a fan-out task, a fix task, a resolve
    /// task): the role's agent, model, prompt, tools and skills, as a planned task of the role
    /// has them; everything else empty, for the caller to set what its kind of task needs.
    pub fn task(
        &self,
        id: SafeId,
        step_id: String,
        depends_on: Vec<SafeId>,
        task_template: String,
    ) -> PlannedTask {
        PlannedTask::from(crate::plan::FlatTask {
            id,
            step_id,
            role: self.role.clone(),
            agent: self.agent.clone(),
            depends_on,
            task_template,
            output: None,
            reads: Vec::new(),
            model: self.model.clone(),
            system_prompt: self.system_prompt.clone(),
            system_prompt_mode: self.system_prompt_mode,
            tools: self.tools.clone(),
            thinking: self.thinking.clone(),
            effort: self.effort.clone(),
            fallback_models: self.fallback_models.clone(),
            writes: self.writes,
            seed_paths: Vec::new(),
            scope: Vec::new(),
            checks: crate::checks::Checks {
                allow_no_change: self.allow_no_change.then_some(true),
                ..Default::default()
            },
            expands: None,
            added_by: None,
            candidates: None,
            judging: Default::default(),
            title: None,
            skills: self.skills.clone(),
            resources: self.resources,
            network: self.network,
            resolves: None,
        })
    }
}

/// The block an agent writes (README "Fan-out steps"): `{"tasks": [...]}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    pub tasks: Vec<BlockTask>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockTask {
    pub id: String,
    pub role: String,
    pub title: String,
    pub task: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Paths or globs (relative to the repository's top) the task may change.
    #[serde(default)]
    pub scope: Vec<String>,
}

/// The fan-out block of an answer: the last fenced block tagged `json`, else the whole answer
/// when it is a JSON object. Errors are messages for the agent.
pub fn extract(answer: &str) -> Result<Block, Vec<String>> {
    let text = last_json_fence(answer).or_else(|| {
        let t = answer.trim();
        t.starts_with('{').then_some(t)
    });
    let Some(text) = text else {
        return Err(vec![
            "no fan-out block found: the answer must end with a ```json fenced block holding {\"tasks\": [...]}".into(),
        ]);
    };
    serde_json::from_str::<Block>(text).map_err(|e| {
        // serde's message may quote a field name of the model's: escaped and cut.
        let e = crate::text::clean(&e.to_string(), 400);
        vec![format!("the fan-out block is not valid: {e}")]
    })
}

/// The content of the last ```` ```json ```` fence (a fence opened with `json` and closed by a
/// line of three backticks).
pub fn last_json_fence(answer: &str) -> Option<&str> {
    let mut found = None;
    let mut open: Option<usize> = None;
    let mut offset = 0usize;
    for line in answer.split_inclusive('\n') {
        let trimmed = line.trim();
        match open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    if info.trim().eq_ignore_ascii_case("json") {
                        open = Some(offset + line.len());
                    }
                }
            }
            Some(start) => {
                if trimmed == "```" {
                    found = answer.get(start..offset);
                    open = None;
                }
            }
        }
        offset += line.len();
    }
    // An unterminated fence runs to the end.
    if let Some(start) = open {
        found = answer.get(start..);
    }
    found
}

fn id_ok(id: &str) -> bool {
    let mut chars = id.chars();
    id.len() <= MAX_ID_LEN
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// What is wrong with one scope entry: it must name paths inside the repository, relative to
/// its top: no absolute path, no `..`, no `.` or empty parts (one trailing `/` is allowed and
/// means the directory), no backslash or control characters, balanced `[...]` classes.
pub fn scope_problem(entry: &str) -> Option<String> {
    if entry.is_empty() {
        return Some("an empty scope entry".into());
    }
    if entry.chars().count() > MAX_SCOPE_CHARS {
        return Some(format!(
            "scope entry is longer than {MAX_SCOPE_CHARS} characters"
        ));
    }
    // Echoed escaped and cut: the entry is the model's.
    let shown = crate::text::echo(entry);
    if entry.starts_with('/') || entry.starts_with('~') {
        return Some(format!(
            "scope `{shown}` is absolute; use a path relative to the repository's top"
        ));
    }
    if entry.contains('\\') || entry.chars().any(crate::text::is_unsafe_char) {
        return Some(format!(
            "scope `{shown}` holds a backslash or a control character"
        ));
    }
    let body = entry.strip_suffix('/').unwrap_or(entry);
    for part in body.split('/') {
        match part {
            ".." => return Some(format!("scope `{shown}` leaves the repository (`..`)")),
            "." | "" => return Some(format!("scope `{shown}` has an empty or `.` part")),
            _ => {}
        }
        let mut in_class = false;
        for c in part.chars() {
            match c {
                '[' if !in_class => in_class = true,
                ']' if in_class => in_class = false,
                _ => {}
            }
        }
        if in_class {
            return Some(format!("scope `{shown}` has an unclosed `[`"));
        }
    }
    None
}

/// The planned tasks a valid block adds after `from` (the fan-out task), or every problem
/// found. `exists` says whether a task id is already taken in the run.
pub fn validate(
    block: &Block,
    exp: &Expansion,
    from: &PlannedTask,
    exists: impl Fn(&str) -> bool,
) -> Result<Vec<PlannedTask>, Vec<String>> {
    let roles: HashMap<&str, &RoleTemplate> =
        exp.roles.iter().map(|r| (r.role.as_str(), r)).collect();
    let mut problems = Problems::default();
    let checked = check_size(block, exp, &roles, &mut problems)
        .and_then(|()| check_tasks(block, exp, &roles, &exists, &mut problems));
    if checked.is_err() {
        return Err(problems.into_vec());
    }
    check_dependencies(block, &mut problems);
    if !problems.is_empty() {
        return Err(problems.into_vec());
    }
    Ok(block
        .tasks
        .iter()
        .filter_map(|t| added_task(t, &roles, from))
        .collect())
}

/// A limit was passed: the problems so far are the answer, and nothing after it is looked at,
/// so validation stays bounded by the limits.
struct Stop;

/// How many tasks the block adds, and how many agents they start.
fn check_size(
    block: &Block,
    exp: &Expansion,
    roles: &HashMap<&str, &RoleTemplate>,
    problems: &mut Problems,
) -> Result<(), Stop> {
    let n = block.tasks.len();
    if n == 0 {
        problems.push("the block adds no tasks: list at least one".to_string());
    }
    if n > exp.max_tasks as usize {
        problems.push(format!(
            "the block adds {n} tasks; at most {} may be added (maxFanOutTasks): merge some",
            exp.max_tasks
        ));
        // Everything else about an oversized block is noise.
        return Err(Stop);
    }
    // The cap is on agents, not rows: a task with candidates starts one agent per candidate
    // (issue 36), so `--candidates 3` must not turn a cap of 16 into 48 agents.
    let agents: u64 = block
        .tasks
        .iter()
        .map(|t| {
            roles
                .get(t.role.as_str())
                .map_or(1, |r| crate::run::candidates::runs_of_added(r, exp))
        })
        .map(u64::from)
        .sum();
    if agents > u64::from(exp.max_tasks) {
        problems.push(format!(
            "the block adds {n} tasks that would start {agents} agents ({}); at most {} agents \
             may be started by one block (maxFanOutTasks), candidates included: merge some tasks",
            candidate_roles(exp).join(", "),
            exp.max_tasks
        ));
        return Err(Stop);
    }
    Ok(())
}

/// Each task's own fields: its lists' lengths (a list over its limit stops validation), id,
/// role, title, task text and scope.
fn check_tasks(
    block: &Block,
    exp: &Expansion,
    roles: &HashMap<&str, &RoleTemplate>,
    exists: &impl Fn(&str) -> bool,
    problems: &mut Problems,
) -> Result<(), Stop> {
    // A task names at most every task of the block (repeats are harmless but not unbounded).
    let max_deps = exp.max_tasks as usize;
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, t) in block.tasks.iter().enumerate() {
        let at = format!("tasks[{i}] (`{}`)", crate::text::echo(&t.id));
        // A list over its limit is one problem, and the last one counted.
        if t.scope.len() > MAX_SCOPE_ENTRIES {
            problems.push(format!(
                "{at}: scope has {} entries; at most {MAX_SCOPE_ENTRIES}",
                t.scope.len()
            ));
            return Err(Stop);
        }
        if t.depends_on.len() > max_deps {
            problems.push(format!(
                "{at}: dependsOn has {} entries; at most {max_deps} (the tasks of the block)",
                t.depends_on.len()
            ));
            return Err(Stop);
        }
        if !id_ok(&t.id) {
            problems.push(format!(
                "{at}: id must be 1-{MAX_ID_LEN} characters of a-z, 0-9, `-`, `_`, starting with a letter or digit"
            ));
        } else if !seen.insert(t.id.as_str()) {
            problems.push(format!("{at}: id is used twice in the block"));
        } else if exists(&t.id) {
            problems.push(format!(
                "{at}: id is already a task of this run; choose another"
            ));
        }
        if !roles.contains_key(t.role.as_str()) {
            let mut names: Vec<&str> = exp.roles.iter().map(|r| r.role.as_str()).collect();
            names.sort_unstable();
            problems.push(format!(
                "{at}: unknown role `{}` (the team's roles: {})",
                crate::text::echo(&t.role),
                names.join(", ")
            ));
        }
        if let Some(p) = title_problem(&t.title) {
            problems.push(format!("{at}: {p}"));
        }
        if t.task.trim().is_empty() {
            problems.push(format!("{at}: task is empty"));
        } else if t.task.len() > MAX_TASK_BYTES {
            problems.push(format!("{at}: task is longer than {MAX_TASK_BYTES} bytes"));
        }
        for s in &t.scope {
            if let Some(p) = scope_problem(s) {
                problems.push(format!("{at}: {p}"));
            }
        }
    }
    Ok(())
}

fn title_problem(title: &str) -> Option<String> {
    if title.trim().is_empty() {
        Some("title is empty".to_string())
    } else if title.chars().count() > MAX_TITLE_CHARS {
        Some(format!("title is longer than {MAX_TITLE_CHARS} characters"))
    } else if title.chars().any(crate::text::is_unsafe_char) {
        // A title is shown in the plan the user approves: a control sequence in it could
        // hide another row, a bidi override could make it read as something else.
        Some("title holds a control character or a bidi override; write one plain line".to_string())
    } else {
        None
    }
}

/// Dependencies name tasks of the block, never the task itself, and make no cycle.
fn check_dependencies(block: &Block, problems: &mut Problems) {
    let ids: HashSet<&str> = block.tasks.iter().map(|t| t.id.as_str()).collect();
    for (i, t) in block.tasks.iter().enumerate() {
        for d in &t.depends_on {
            if d == &t.id {
                problems.push(format!(
                    "tasks[{i}] (`{}`): depends on itself",
                    crate::text::echo(&t.id)
                ));
            } else if !ids.contains(d.as_str()) {
                problems.push(format!(
                    "tasks[{i}] (`{}`): dependsOn `{}` is not a task of this block (dependencies may only name tasks of the block)",
                    crate::text::echo(&t.id),
                    crate::text::echo(d)
                ));
            }
        }
    }
    let graph: Vec<(String, Vec<String>)> = block
        .tasks
        .iter()
        .map(|t| (t.id.clone(), t.depends_on.clone()))
        .collect();
    if let Some(cycle) = crate::dag::find_cycle(&graph) {
        let cycle: Vec<String> = cycle.iter().map(|c| crate::text::echo(c)).collect();
        problems.push(format!("dependency cycle: {}", cycle.join(" -> ")));
    }
}

/// The planned task a checked block entry becomes: its role's task, after the fan-out task.
fn added_task(
    t: &BlockTask,
    roles: &HashMap<&str, &RoleTemplate>,
    from: &PlannedTask,
) -> Option<PlannedTask> {
    // Both checked before: `None` never happens for a block that passed.
    let role = roles.get(t.role.as_str())?;
    let id = SafeId::new(t.id.as_str()).ok()?;
    let mut depends_on = vec![from.id.clone()];
    let mut dep_seen = HashSet::new();
    for d in &t.depends_on {
        if dep_seen.insert(d.as_str()) {
            if let Ok(d) = SafeId::new(d.as_str()) {
                depends_on.push(d);
            }
        }
    }
    let title = t.title.trim().to_string();
    Some(PlannedTask::from(crate::plan::FlatTask {
        // Not a shared artifact: `<id>.md` could be another step's output name. Dependents
        // read it as a dependency output.
        output: None,
        seed_paths: from.seed_paths.clone(),
        // The default checks (the no-change guard, scope enforcement of its `scope`);
        // verification commands stay with the workflow's own steps. Its skills are its
        // role's (`RoleTemplate::task`).
        added_by: Some(from.id.clone()),
        title: Some(title.clone()),
        scope: t.scope.iter().map(|s| s.trim().to_string()).collect(),
        ..role
            .task(
                id,
                t.id.clone(),
                depends_on,
                format!("# {title}\n\n{}", t.task.trim()),
            )
            .into_flat()
    }))
}

/// "each `executor` task runs 3 candidates", for each role whose added tasks start more than
/// one agent (for the cap's problem message and the prompt).
fn candidate_roles(exp: &Expansion) -> Vec<String> {
    exp.roles
        .iter()
        .filter_map(|r| {
            let n = crate::run::candidates::runs_of_added(r, exp);
            (n > 1).then(|| format!("each `{}` task runs {n} candidates", r.role))
        })
        .collect()
}

/// The problems of one block: the first [`MAX_PROBLEMS`] named, the rest counted.
#[derive(Default)]
struct Problems {
    named: Vec<String>,
    more: usize,
}

impl Problems {
    fn push(&mut self, p: String) {
        if self.named.len() < MAX_PROBLEMS {
            self.named.push(p);
        } else {
            self.more = self.more.saturating_add(1);
        }
    }

    fn is_empty(&self) -> bool {
        self.named.is_empty()
    }

    fn into_vec(mut self) -> Vec<String> {
        if self.more > 0 {
            self.named.push(format!("and {} more problems", self.more));
        }
        self.named
    }
}

/// Extract and validate in one go. An answer over the step's `max_answer_bytes` is refused
/// by its size before any parsing.
pub fn parse_and_validate(
    answer: &str,
    exp: &Expansion,
    from: &PlannedTask,
    exists: impl Fn(&str) -> bool,
) -> Result<Vec<PlannedTask>, Vec<String>> {
    let bytes = answer.len() as u64;
    if bytes > exp.max_answer_bytes {
        return Err(vec![too_large(bytes, exp.max_answer_bytes)]);
    }
    validate(&extract(answer)?, exp, from, exists)
}

/// [`parse_and_validate`] of an answer as the daemon read it.
pub fn check_answer(
    answer: &Answer,
    exp: &Expansion,
    from: &PlannedTask,
    exists: impl Fn(&str) -> bool,
) -> Result<Vec<PlannedTask>, Vec<String>> {
    match answer {
        Answer::Text(t) => parse_and_validate(t, exp, from, exists),
        Answer::TooLarge { bytes } => Err(vec![too_large(*bytes, exp.max_answer_bytes)]),
        Answer::Unreadable(why) => Err(vec![format!(
            "the final answer could not be read ({why}): answer again with the ```json tasks block"
        )]),
    }
}

/// Heading of the repair section: the fake agent (and a reader of the prompt) recognise it.
pub const REPAIR_HEADING: &str = "## Your previous fan-out block was refused";

/// What a role is for, as its tools say (issue 32 item 6: a reviewer or verifier that runs
/// commands is not a role that "may change files").
fn role_purpose(tools: &[String]) -> &'static str {
    if crate::stream::edits_files(tools) {
        "edits files"
    } else if tools.iter().any(|t| t == "bash") {
        "reads and runs commands, edits nothing"
    } else {
        "reads only"
    }
}

/// What a fan-out step's prompt adds after its task text: the schema, the roles it may use, the
/// cap, and (on the repair attempt) what was wrong with the last block.
pub fn prompt_section(exp: &Expansion, repair: Option<&str>) -> String {
    let mut out = String::new();
    out.push_str("\n## Output: tasks for the team (fan-out)\n\n");
    out.push_str(
        "Your answer defines the tasks that run next. End your final answer with one fenced \
         ```json block of this shape:\n\n```json\n{\n  \"tasks\": [\n    {\n      \"id\": \"parser\",\n      \
         \"role\": \"executor\",\n      \"title\": \"Parse the new flag\",\n      \"task\": \"What to do, precisely, with the files involved.\",\n      \
         \"dependsOn\": [],\n      \"scope\": [\"src/cli/**\", \"tests/cli.rs\"]\n    }\n  ]\n}\n```\n\n",
    );
    out.push_str(&format!(
        "Rules: `id` is unique, 1-{MAX_ID_LEN} characters of a-z, 0-9, `-`, `_`; `role` is one of: {}; \
         `title` is one line; `task` says what to do (the worker sees the goal, its task and the \
         outputs of the tasks it depends on); `dependsOn` names only ids of this block (no cycles); \
         tasks without a dependency between them run in parallel, each in its own workspace; \
         `scope` lists the paths or globs (relative to the repository's top, no `..`) the task may \
         change. At most {} tasks. Every step that comes after this one waits for all of them.\n",
        exp.roles
            .iter()
            .map(|r| format!("`{}` ({})", r.role, role_purpose(&r.tools)))
            .collect::<Vec<_>>()
            .join(", "),
        exp.max_tasks
    ));
    let with_candidates = candidate_roles(exp);
    if !with_candidates.is_empty() {
        out.push_str(&format!(
            "Candidates: {}, each one an agent of its own; the limit counts agents, so at most \
             {} agents in all.\n",
            with_candidates.join(", "),
            exp.max_tasks
        ));
    }
    if let Some(msgs) = repair {
        out.push('\n');
        out.push_str(REPAIR_HEADING);
        out.push_str("\n\nNothing was added. Fix these problems and answer again with the whole corrected block:\n\n");
        for m in msgs.lines().filter(|l| !l.trim().is_empty()) {
            out.push_str("- ");
            out.push_str(m);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests;
