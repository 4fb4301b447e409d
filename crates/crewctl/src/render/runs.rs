//! Runs: `status`, `ls`, `plan`, `artifacts`.

use super::table::{self, Cell, Col, Table};
use super::time::{absolute, human_duration_ms, parse_time, relative};
use super::units::{bytes, cost, count, cut, percent, tokens, usage_tokens};
use super::{diag, ids, marks, View};
use crate::style::Tone;
use crew_api::types::{
    ArtifactInfo, CancelResult, ListResult, PlanResult, RunSummaryView, RunView, StatusResult,
    TaskStatus, TaskView,
};
use std::fmt::Write as _;

/// `status <runId>`: a run header and one row per task.
pub fn status(view: &View, s: &StatusResult) -> String {
    let mut out = run_header(view, &s.run, plan_to_read(&s.tasks));
    out.push('\n');
    let tasks = where_they_run(&s.tasks, &s.added_tasks);
    out.push_str(&task_table(
        view,
        &s.run.id,
        &tasks,
        s.run.approval == "pending",
    ));
    out.push_str(&added_tasks(view, &s.added_tasks));
    // The other tasks' checks (added tasks showed theirs above): with an approval pending,
    // which commands will check the work.
    out.push_str(&checks(
        view,
        s.tasks
            .iter()
            .filter(|t| !s.added_tasks.iter().any(|a| a.id == t.id))
            .map(|t| Checks {
                id: &t.id,
                scope: &t.scope,
                verify: &t.verify_commands,
                pre_step: None,
            }),
    ));
    let attention: Vec<&TaskView> = s
        .tasks
        .iter()
        .filter(|t| {
            matches!(t.status, TaskStatus::Waiting | TaskStatus::NeedsAttention)
                || t.question.is_some()
        })
        .collect();
    for t in attention {
        if let Some(q) = &t.question {
            let _ = writeln!(out, "\n{} {} asks: {q}", view.p(Tone::Warn, "?"), t.id);
            let _ = writeln!(
                out,
                "  answer with: crewctl respond {} {} '<message>'",
                ids::hint(&s.run.id),
                t.id
            );
        }
    }
    out
}

fn run_header(view: &View, r: &RunView, plan: Option<&str>) -> String {
    let (mark, tone) = marks::run(r.status);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}  {}",
        view.p(Tone::Bold, "Run"),
        view.p(Tone::Bold, &r.id),
        view.p(tone, format!("{mark} {}", r.status.as_str()))
    );
    let mut fields: Vec<(&str, String)> = vec![
        ("goal", view.cut(&r.goal, 200)),
        ("setup", setup(r)),
        ("cwd", r.cwd.clone()),
    ];
    if let Some(created) = parse_time(&r.created_at) {
        fields.push((
            "created",
            format!(
                "{} {} ({})",
                absolute(created, view.clock.zone),
                view.clock.zone.label(created),
                relative(created, view.clock.now)
            ),
        ));
    }
    fields.extend(time(view, r).map(|t| ("time", t)));
    fields.push(("usage", usage(r)));
    fields.extend(budget(view, r).map(|b| ("budget", b)));
    fields.extend(approval(view, r, plan));
    if !matches!(r.reuse_results.as_str(), "" | "off" | "none" | "false") {
        fields.push(("reuse", r.reuse_results.clone()));
    }
    if let Some(s) = &r.schedule_id {
        fields.push(("schedule", s.clone()));
    }
    if let Some(v) = &r.verdict {
        let tone = if v == "pass" { Tone::Ok } else { Tone::Warn };
        fields.push(("verdict", view.p(tone, v)));
    }
    fields.extend(reason(view, r));
    for (name, value) in fields {
        let _ = writeln!(out, "  {} {value}", view.p(Tone::Dim, format!("{name:<9}")));
    }
    out
}

/// `team default · workflow default · runtime fake · model m · concurrency 4`.
fn setup(r: &RunView) -> String {
    let mut setup = format!(
        "team {} · workflow {} · runtime {}",
        r.team, r.workflow, r.runtime
    );
    if let Some(m) = &r.model {
        let _ = write!(setup, " · model {m}");
    }
    let _ = write!(setup, " · concurrency {}", r.concurrency);
    setup
}

/// How long the run took, or has been running.
fn time(view: &View, r: &RunView) -> Option<String> {
    let ms = r.duration_ms.or_else(|| {
        let start = parse_time(r.started_at.as_deref()?)?;
        u64::try_from((view.clock.now - start).num_milliseconds()).ok()
    })?;
    let what = if r.status.is_finished() {
        "took"
    } else {
        "running for"
    };
    Some(format!("{what} {}", human_duration_ms(ms)))
}

fn usage(r: &RunView) -> String {
    let mut totals = format!(
        "{} tokens · {}",
        tokens(usage_tokens(&r.usage)),
        cost(r.usage.cost)
    );
    if r.usage.cache_read > 0 {
        let _ = write!(totals, " · {} cache reads", tokens(r.usage.cache_read));
    }
    totals
}

/// The budget used, coloured by how near its thresholds it is.
fn budget(view: &View, r: &RunView) -> Option<String> {
    let b = r.budget.as_ref()?;
    let used = if b.tokens > 0 {
        b.used as f64 / b.tokens as f64
    } else {
        0.0
    };
    let tone = if used >= b.abort_at {
        Tone::Bad
    } else if used >= b.warn_at {
        Tone::Warn
    } else {
        Tone::Ok
    };
    Some(view.p(
        tone,
        format!(
            "{} of {} tokens ({})",
            tokens(b.used),
            tokens(b.tokens),
            percent(used)
        ),
    ))
}

/// What a pending plan approval approves, to read before giving it: the plan a task wrote
/// (`shared/plan.md`), else the result of the last task that completed before the gate.
pub fn plan_to_read(tasks: &[TaskView]) -> Option<&str> {
    let written = tasks
        .iter()
        .flat_map(|t| &t.artifacts)
        .find(|a| a.name == "shared/plan.md");
    let result = || {
        tasks
            .iter()
            .rev()
            .filter(|t| t.status == TaskStatus::Completed)
            .find_map(|t| t.artifacts.iter().find(|a| a.kind == "result"))
    };
    written.or_else(result).map(|a| a.name.as_str())
}

/// The plan's approval when the run needs one; a pending one says how to give it and where
/// the plan is (`plan`: `plan_to_read`).
fn approval(view: &View, r: &RunView, plan: Option<&str>) -> Vec<(&'static str, String)> {
    if r.approval == "not_required" {
        return vec![];
    }
    let pending = r.approval == "pending";
    let mut a = view.p(if pending { Tone::Warn } else { Tone::Dim }, &r.approval);
    if !pending {
        return vec![("approval", a)];
    }
    let _ = write!(a, ": crewctl approve|reject {}", ids::hint(&r.id));
    let mut rows = vec![("approval", a)];
    rows.extend(plan.map(|p| ("plan", format!("crewctl cat {} {p}", ids::hint(&r.id)))));
    rows
}

/// Why the run stopped: a reason's summary (a failed check's command and failing lines), not
/// the raw tail after it: `crewctl status`'s task table and `logs` carry the rest.
fn reason(view: &View, r: &RunView) -> Vec<(&'static str, String)> {
    let Some(reason) = &r.reason else {
        return vec![];
    };
    let tone = if r.status == crew_api::types::RunStatus::Failed {
        Tone::Bad
    } else {
        Tone::Warn
    };
    let summary = super::follow::reason_summary(reason, &r.id);
    let mut lines = summary.iter();
    let mut out = vec![(
        "reason",
        view.p(tone, lines.next().map(String::as_str).unwrap_or_default()),
    )];
    out.extend(lines.map(|l| ("", view.p(tone, l))));
    out
}

/// Columns of `status`'s task table; the note (errors, questions) is what a narrow terminal
/// keeps longest after the id and status.
fn task_columns() -> Vec<Col> {
    vec![
        Col::new("task"),
        Col::new("role").drop(1),
        Col::new("status"),
        Col::new("att").right().drop(3),
        Col::new("time").right().drop(4),
        Col::new("tokens").right().drop(5),
        Col::new("cost").right().drop(2),
        Col::new("note").cut(24),
    ]
}
const NOTE_COL: usize = 7;

/// What one task's checks are, for [`checks`].
struct Checks<'a> {
    id: &'a str,
    scope: &'a [String],
    verify: &'a [String],
    pre_step: Option<&'a str>,
}

/// One line per task that has a scope, verification commands or a pre-step script: what a
/// reader approving the plan needs to know runs besides the agents. Nothing when none has.
fn checks<'a>(view: &View, tasks: impl Iterator<Item = Checks<'a>>) -> String {
    let mut out = String::new();
    for t in tasks {
        if t.scope.is_empty() && t.verify.is_empty() && t.pre_step.is_none() {
            continue;
        }
        if out.is_empty() {
            let _ = writeln!(out, "\n{}", view.p(Tone::Bold, "checks:"));
        }
        let mut line = format!("  {}", t.id);
        if let Some(p) = t.pre_step {
            let _ = write!(line, "  pre-step: {p}");
        }
        if !t.scope.is_empty() {
            let _ = write!(line, "  scope: {}", t.scope.join(", "));
        }
        if !t.verify.is_empty() {
            let _ = write!(line, "  verify: {}", t.verify.join("; "));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The tasks in the order they run: the run keeps tasks a fan-out added at the end of its
/// list, but they run after the task that added them and before its dependents, so they are
/// shown right after it (issue 32).
fn where_they_run(tasks: &[TaskView], added: &[crew_api::types::AddedTaskView]) -> Vec<TaskView> {
    let by = |id: &str| {
        added
            .iter()
            .find(|a| a.id == id)
            .map(|a| a.added_by.as_str())
    };
    let mut out: Vec<TaskView> = Vec::with_capacity(tasks.len());
    // The tasks no fan-out added, each followed by what it added (and what those added, in
    // turn: a bounded loop, as each task is placed once).
    let mut queue: Vec<&TaskView> = tasks.iter().filter(|t| by(&t.id).is_none()).rev().collect();
    let mut placed = std::collections::HashSet::new();
    while let Some(t) = queue.pop() {
        if !placed.insert(t.id.as_str()) {
            continue;
        }
        out.push(t.clone());
        let children: Vec<&TaskView> = tasks
            .iter()
            .filter(|c| by(&c.id) == Some(t.id.as_str()))
            .collect();
        queue.extend(children.into_iter().rev());
    }
    // Anything not reached (added by a task the status does not list) keeps its place at the end.
    out.extend(
        tasks
            .iter()
            .filter(|t| !placed.contains(t.id.as_str()))
            .cloned(),
    );
    out
}

/// The tasks fan-out steps added, grouped by the task that added them, each group a table
/// whose columns line up (issue 32 item 4): with a plan approval pending, these are what
/// `approve` lets start.
fn added_tasks(view: &View, added: &[crew_api::types::AddedTaskView]) -> String {
    let mut out = String::new();
    let mut groups: Vec<(&str, Vec<&crew_api::types::AddedTaskView>)> = Vec::new();
    for t in added {
        match groups.iter_mut().find(|(by, _)| *by == t.added_by) {
            Some((_, g)) => g.push(t),
            None => groups.push((t.added_by.as_str(), vec![t])),
        }
    }
    for (by, tasks) in groups {
        let _ = writeln!(out, "\nadded by {by}:");
        let mut table = Table::new(vec![
            Col::new("task"),
            Col::new("role").drop(3),
            Col::new("title").cut(12),
            Col::new("scope").cut(10).drop(2),
            Col::new("after").cut(8).drop(1),
            Col::new("verify").cut(10).drop(4),
            Col::new(""),
        ]);
        for t in tasks {
            let deps: Vec<&str> = t
                .depends_on
                .iter()
                .map(String::as_str)
                .filter(|d| *d != t.added_by)
                .collect();
            let or_dash = |v: String| if v.is_empty() { "-".to_string() } else { v };
            table.row(vec![
                Cell::new(&t.id),
                Cell::new(&t.role),
                Cell::new(or_dash(t.title.clone().unwrap_or_default())),
                Cell::new(or_dash(t.scope.join(", "))),
                Cell::new(or_dash(deps.join(", "))),
                Cell::new(or_dash(t.verify_commands.join("; "))),
                if t.awaiting_approval {
                    table::toned(view, Tone::Warn, "awaiting approval")
                } else {
                    Cell::new("")
                },
            ]);
        }
        // Indented under its heading: two columns less to fit in.
        let layout = table.layout(view.width.map(|w| usize::from(w).saturating_sub(2)));
        for line in table.render_with(view, &layout).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    out
}

fn task_table(view: &View, run_id: &str, tasks: &[TaskView], approval_pending: bool) -> String {
    let mut t = Table::new(task_columns());
    for task in tasks {
        let (mark, tone) = marks::task_judged(task.status, judged_against(task));
        let role = if task.agent == task.role {
            task.role.clone()
        } else {
            format!("{} ({})", task.role, task.agent)
        };
        let elapsed = task.duration_ms.or_else(|| {
            if task.status != TaskStatus::Running {
                return None;
            }
            let start = parse_time(task.started_at.as_deref()?)?;
            u64::try_from((view.clock.now - start).num_milliseconds()).ok()
        });
        let (tok, usd) = if task.status == TaskStatus::Running && usage_tokens(&task.usage) == 0 {
            (task.progress.tokens, None)
        } else {
            (usage_tokens(&task.usage), Some(task.usage.cost))
        };
        t.row(vec![
            Cell::new(&task.id),
            Cell::new(role),
            table::toned(
                view,
                tone,
                format!("{mark} {}", marks::task_word(task.status)),
            ),
            Cell::new(if task.attempts == 0 {
                "-".to_string()
            } else {
                task.attempts.to_string()
            }),
            Cell::new(elapsed.map(human_duration_ms).unwrap_or_else(|| "-".into())),
            Cell::new(if tok == 0 { "-".into() } else { tokens(tok) }),
            Cell::new(
                usd.filter(|c| *c > 0.0)
                    .map(cost)
                    .unwrap_or_else(|| "-".into()),
            ),
            note_cell(view, task, tasks, approval_pending && ready(tasks, task)),
        ]);
    }
    let layout = t.layout(view.width.map(usize::from));
    let mut out = t.render_with(view, &layout);
    // An error cut to fit the table is given whole below it: it is what the user needs most.
    // (Piped, the table cuts nothing: the error is in its row already.)
    let room = layout.widths.get(NOTE_COL).copied().flatten().unwrap_or(0);
    for task in tasks.iter().filter(|_| view.width.is_some()) {
        let Some(e) = &task.error else { continue };
        if table::width_of(&cut(&summary_text(e), 120)) <= room {
            continue;
        }
        let (mark, tone) = marks::task(task.status);
        let mut lines = super::follow::reason_summary(e, run_id).into_iter();
        let first = lines.next().unwrap_or_default();
        let _ = writeln!(
            out,
            "{} {}: {}",
            view.p(tone, mark),
            task.id,
            cut(&first, 1000)
        );
        for l in lines {
            let _ = writeln!(out, "  {}", cut(&l, 1000));
        }
    }
    out
}

/// An error as one cell: its summary (a failed check's headline and failing lines), never the
/// raw output tail kept after it for the agent.
fn summary_text(e: &str) -> String {
    // The whole output's artifact is given as a command under the table, not in a cell.
    super::follow::reason_lines(e)
        .into_iter()
        .filter(|l| !l.trim_start().starts_with("its whole output: "))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A queued task whose dependencies all completed: with a plan approval pending, it is the one
/// waiting for the approval (any other would have started).
fn ready(tasks: &[TaskView], task: &TaskView) -> bool {
    task.status == TaskStatus::Queued
        && task.depends_on.iter().all(|d| {
            tasks
                .iter()
                .any(|t| &t.id == d && t.status == TaskStatus::Completed)
        })
}

/// A completed task whose own judgement went against the work: a judge's verdict other than
/// `pass`, a candidate whose checks failed (ruled out).
fn judged_against(t: &TaskView) -> bool {
    t.verdict.as_ref().is_some_and(|v| v.verdict != "pass")
        || t.candidates
            .as_ref()
            .is_some_and(|c| c.of.is_some() && !c.failed_checks.is_empty())
}

/// A judge's verdict as a note: `fail, 1 finding`.
fn verdict_words(v: &crew_api::types::VerdictView) -> String {
    match v.findings.len() {
        0 => v.verdict.clone(),
        1 => format!("{}, 1 finding", v.verdict),
        n => format!("{}, {n} findings", v.verdict),
    }
}

/// What a candidate's row, or its step's, says of the choice: ruled out by which check,
/// chosen, or (the step) which was chosen and why.
fn candidate_note(view: &View, task: &TaskView, tasks: &[TaskView]) -> Option<Cell> {
    let c = task.candidates.as_ref()?;
    if let Some(ch) = &c.choice {
        return Some(table::toned(
            view,
            Tone::Dim,
            view.cut(
                &format!(
                    "chose {} ({}): {}",
                    ch.index,
                    ch.by,
                    summary_text(&ch.reason)
                ),
                120,
            ),
        ));
    }
    let of = c.of.as_deref()?;
    if let Some(first) = c.failed_checks.first() {
        return Some(table::toned(
            view,
            Tone::Warn,
            view.cut(&format!("out: {}", summary_text(first)), 120),
        ));
    }
    let chosen = tasks
        .iter()
        .find(|t| t.id == of)
        .and_then(|s| s.candidates.as_ref()?.choice.as_ref())
        .is_some_and(|ch| ch.candidate == task.id);
    chosen.then(|| table::toned(view, Tone::Ok, "chosen"))
}

fn note_cell(view: &View, task: &TaskView, tasks: &[TaskView], awaiting_approval: bool) -> Cell {
    if awaiting_approval {
        return table::toned(view, Tone::Warn, "awaiting approval");
    }
    if let Some(e) = &task.error {
        let tone = if task.status == TaskStatus::Failed {
            Tone::Bad
        } else {
            Tone::Warn
        };
        return table::toned(view, tone, view.cut(&summary_text(e), 120));
    }
    if let Some(q) = &task.question {
        return table::toned(view, Tone::Warn, format!("asks: {}", view.cut(q, 100)));
    }
    if let Some(r) = &task.reused_from {
        return table::toned(
            view,
            Tone::Dim,
            format!("reused {}/{}", r.run_id, r.task_id),
        );
    }
    if task.status == TaskStatus::Completed {
        if let Some(v) = &task.verdict {
            let tone = if v.verdict == "pass" {
                Tone::Ok
            } else {
                Tone::Warn
            };
            return table::toned(view, tone, verdict_words(v));
        }
        if let Some(cell) = candidate_note(view, task, tasks) {
            return cell;
        }
    }
    if task.status == TaskStatus::Running {
        if let Some(tool) = &task.progress.current_tool {
            return table::toned(view, Tone::Active, format!("▸ {tool}"));
        }
    }
    if task.status == TaskStatus::Queued && !task.depends_on.is_empty() {
        return table::toned(
            view,
            Tone::Dim,
            format!("after {}", task.depends_on.join(", ")),
        );
    }
    Cell::new("")
}

/// `ls`: one row per run, newest first, ids in their short form.
pub fn list(view: &View, l: &ListResult) -> String {
    if l.runs.is_empty() {
        return "No runs.\n".into();
    }
    let mut t = Table::new(vec![
        Col::new("id"),
        Col::new("status"),
        Col::new("team").cut(7).drop(2),
        Col::new("goal").cut(20),
        Col::new("age").drop(3),
        Col::new("tasks").right().drop(4),
        Col::new("cost").right().drop(1),
    ]);
    let full: Vec<&str> = l.runs.iter().map(|r| r.id.as_str()).collect();
    let short = ids::short_ids(&full);
    for (r, id) in l.runs.iter().zip(short) {
        let (mark, tone) = marks::run(r.status);
        t.row(vec![
            Cell::new(id),
            table::toned(view, tone, format!("{mark} {}", r.status.as_str())),
            Cell::new(&r.team),
            Cell::new(view.cut(&r.goal, 60)),
            Cell::new(
                parse_time(&r.created_at)
                    .map(|c| relative(c, view.clock.now))
                    .unwrap_or_else(|| "-".into()),
            ),
            Cell::new(task_counts(r)),
            Cell::new(cost(r.usage.cost)),
        ]);
    }
    let mut out = t.render(view);
    if let Some(next) = &l.next {
        let _ = writeln!(
            out,
            "{}",
            view.p(
                Tone::Dim,
                format!("(more: crewctl ls --all, or --before {})", ids::short(next))
            )
        );
    }
    out
}

fn task_counts(r: &RunSummaryView) -> String {
    let c = &r.tasks;
    let mut s = format!("{}/{}", c.completed, c.total);
    if c.failed > 0 {
        let _ = write!(s, " {}✗", c.failed);
    }
    if c.needs_attention + c.waiting > 0 {
        let _ = write!(s, " {}!", c.needs_attention + c.waiting);
    }
    s
}

/// A Slurm job's CPUs, memory and time limit, e.g. `2 cpu 300 MB 7 min` (`defaults`: Slurm's).
fn slurm_job(j: &crew_api::types::SlurmJob) -> String {
    let parts: Vec<String> = [
        j.cpus_per_task.map(|c| format!("{c} cpu")),
        j.memory_mb.map(|m| format!("{m} MB")),
        j.time_limit_minutes.map(|t| format!("{t} min")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        "defaults".into()
    } else {
        parts.join(" ")
    }
}

/// `plan`: the tasks a run would execute.
pub fn plan(view: &View, p: &PlanResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} team {} · workflow {} · runtime {} · concurrency {} · {}",
        view.p(Tone::Bold, "Plan:"),
        p.team,
        p.workflow,
        p.runtime,
        p.concurrency,
        count(p.tasks.len(), "task")
    );
    let with_model = p.tasks.iter().any(|t| t.model.is_some());
    let mut cols = vec![
        Col::new("id"),
        Col::new("step").drop(2),
        Col::new("role"),
        Col::new("agent").drop(1),
        Col::new("depends on").cut(10),
        // Roles meant to change files; a verifier or reviewer that runs commands is not one
        // (issue 32 item 6).
        Col::new("edits"),
    ];
    // Candidates racing runtimes: each one's own (issue 36).
    let with_runtime = p.tasks.iter().any(|t| t.runtime.is_some());
    if with_runtime {
        cols.push(Col::new("runtime").cut(10).drop(3));
    }
    if with_model {
        cols.push(Col::new("model").cut(10).drop(3));
    }
    let with_skills = p.tasks.iter().any(|t| !t.skills.is_empty());
    if with_skills {
        cols.push(Col::new("skills").cut(12).drop(4));
    }
    // Tasks placed on a Slurm cluster: the job each asks for (issue 35).
    let with_job = p.tasks.iter().any(|t| t.slurm.is_some());
    if with_job {
        cols.push(Col::new("slurm job").cut(12).drop(3));
    }
    let mut t = Table::new(cols);
    for task in &p.tasks {
        let mut row = vec![
            // A fan-out step is marked where it is; the line under the table says what it does.
            if task.adds_tasks.is_some() {
                table::toned(view, Tone::Accent, format!("{} +", task.id))
            } else {
                Cell::new(&task.id)
            },
            Cell::new(&task.step_id),
            Cell::new(&task.role),
            Cell::new(&task.agent),
            Cell::new(if task.depends_on.is_empty() {
                "-".to_string()
            } else {
                task.depends_on.join(", ")
            }),
            if task.edits {
                table::toned(view, Tone::Warn, "yes")
            } else {
                Cell::new("")
            },
        ];
        if with_runtime {
            row.push(Cell::new(task.runtime.as_deref().unwrap_or(&p.runtime)));
        }
        if with_model {
            row.push(Cell::new(task.model.as_deref().unwrap_or("-")));
        }
        if with_skills {
            // A skill that was not installed is marked, as team.plan's diagnostics say why.
            let names: Vec<String> = task
                .skills
                .iter()
                .map(|s| {
                    if task.missing_skills.contains(s) {
                        format!("{s}?")
                    } else {
                        s.clone()
                    }
                })
                .collect();
            row.push(Cell::new(if names.is_empty() {
                "-".to_string()
            } else {
                names.join(", ")
            }));
        }
        if with_job {
            row.push(Cell::new(
                task.slurm
                    .as_ref()
                    .map_or_else(|| "-".to_string(), slurm_job),
            ));
        }
        t.row(row);
    }
    out.push_str(&t.render(view));
    out.push_str(&node_boxes(view, &p.tasks));
    out.push_str(&fan_out_steps(view, &p.tasks));
    out.push_str(&candidate_steps(view, &p.tasks));
    out.push_str(&checks(
        view,
        p.tasks.iter().map(|t| Checks {
            id: &t.id,
            scope: &t.scope,
            verify: &t.verify_commands,
            pre_step: t.pre_step.as_deref(),
        }),
    ));
    if !p.diagnostics.is_empty() {
        out.push('\n');
        out.push_str(&diag::lines(view, &p.diagnostics));
    }
    out
}

/// Under the plan's table, the box Slurm tasks' nodes will try (one line per distinct one):
/// crewd knows the runtime's settings, the node the paths and whether it can box.
fn node_boxes(view: &View, tasks: &[crew_api::types::PlannedTaskView]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for b in tasks
        .iter()
        .filter_map(|t| t.slurm.as_ref()?.sandbox.as_ref())
    {
        let on = |yes: bool| if yes { "on" } else { "off" };
        let mut line = format!(
            "sandbox = \"{}\" (agent network {}, checks' network {}",
            b.mode,
            on(b.network),
            on(b.verify_network)
        );
        if !b.read.is_empty() {
            let _ = write!(line, ", also read {}", b.read.join(", "));
        }
        if !b.write.is_empty() {
            let _ = write!(line, ", also write {}", b.write.join(", "));
        }
        line.push(')');
        if !seen.contains(&line) {
            seen.push(line);
        }
    }
    seen.iter()
        .map(|l| {
            format!(
                "{} {l}; the node lays the box out on its own paths\n",
                view.p(Tone::Dim, "box on the Slurm node:")
            )
        })
        .collect()
}

/// A line under the plan's table: `mark` (the one its step has in the table) and `text`,
/// fitted to the terminal.
fn plan_note(view: &View, mark: &str, text: &str) -> String {
    let room = view
        .width
        .map_or(usize::MAX, |w| usize::from(w).saturating_sub(2));
    format!("{} {}\n", view.p(Tone::Accent, mark), view.cut(text, room))
}

/// Under the plan's table, one line per step with candidates: how many, and how it chooses.
fn candidate_steps(view: &View, tasks: &[crew_api::types::PlannedTaskView]) -> String {
    let mut out = String::new();
    for t in tasks {
        let Some(select) = &t.select else { continue };
        let how = match select.as_str() {
            "smallest" => "the smallest change that passes its checks",
            "first" => "the first to pass its checks",
            "judge" => "by a judge, among those that pass their checks",
            other => other,
        };
        let n = t
            .depends_on
            .iter()
            .filter(|d| d.starts_with("_cand-"))
            .count();
        let text = format!(
            "{} tries {} at once and keeps {how} (select: {select})",
            t.id,
            count(n, "candidate")
        );
        out.push_str(&plan_note(view, "×", &text));
    }
    out
}

/// Under the plan's table, one line per fan-out step (marked `+` in it): how many tasks its
/// answer may add and which tasks wait for them (issue 32 item 4).
fn fan_out_steps(view: &View, tasks: &[crew_api::types::PlannedTaskView]) -> String {
    let mut out = String::new();
    for t in tasks {
        let Some(max) = t.adds_tasks else { continue };
        let after: Vec<&str> = tasks
            .iter()
            .filter(|d| d.depends_on.contains(&t.id))
            .map(|d| d.id.as_str())
            .collect();
        let wait = if after.is_empty() {
            String::new()
        } else {
            format!(
                "; {} wait{} for them",
                after.join(", "),
                if after.len() == 1 { "s" } else { "" }
            )
        };
        let text = format!(
            "{} is a fan-out step: its answer adds up to {max} tasks to the run{wait}",
            t.id
        );
        out.push_str(&plan_note(view, "+", &text));
    }
    out
}

/// `artifacts`: a run's files.
/// What a cancel ended, counted as it really was: workers the daemon is stopping, tasks that
/// were waiting for an answer, and tasks that had not started. `before` is each task's id and
/// status as last seen (status before the cancel).
pub fn cancelled<'a>(
    r: &CancelResult,
    before: impl IntoIterator<Item = (&'a str, TaskStatus)>,
) -> String {
    let before: Vec<(&str, TaskStatus)> = before.into_iter().collect();
    let was = |id: &str| before.iter().find(|(t, _)| *t == id).map(|(_, s)| *s);
    let stopped = &r.stopped_task_ids;
    let rest: Vec<&String> = r
        .cancelled_task_ids
        .iter()
        .filter(|id| !stopped.contains(id))
        .collect();
    let waiting = rest
        .iter()
        .filter(|id| was(id) == Some(TaskStatus::Waiting))
        .count();
    let not_started = rest.len().saturating_sub(waiting);
    let n = |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
    let mut parts = vec![match stopped.as_slice() {
        [] => "no worker was running".to_string(),
        ids => format!(
            "{} stopped ({})",
            n(ids.len(), "worker", "workers"),
            ids.join(", ")
        ),
    }];
    if waiting > 0 {
        parts.push(format!(
            "{} waiting for an answer",
            n(waiting, "task", "tasks")
        ));
    }
    if not_started > 0 {
        parts.push(format!("{} not started", n(not_started, "task", "tasks")));
    }
    parts.join(", ")
}

pub fn artifacts(view: &View, list: &[ArtifactInfo]) -> String {
    if list.is_empty() {
        return "No artifacts.\n".into();
    }
    let mut t = Table::new(vec![
        Col::new("name").cut(16),
        Col::new("kind"),
        Col::new("task").drop(2),
        Col::new("size").right(),
        Col::new("sha256").drop(1),
    ]);
    for a in list {
        t.row(vec![
            Cell::new(&a.name),
            Cell::new(&a.kind),
            Cell::new(a.task_id.as_deref().unwrap_or("-")),
            Cell::new(bytes(a.bytes)),
            Cell::new(a.sha256.get(..12).unwrap_or(&a.sha256)),
        ]);
    }
    t.render(view)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::render::fixtures::{assert_fits, at_80_and_160, view};
    use crew_api::types::*;

    fn usage(input: u64, output: u64, cost: f64) -> Usage {
        Usage {
            input,
            output,
            cache_read: input * 3,
            cache_write: 0,
            cost,
            turns: 2,
        }
    }

    fn task(id: &str, role: &str, status: TaskStatus, deps: &[&str]) -> TaskView {
        TaskView {
            candidates: None,
            id: id.into(),
            step_id: id.split_once('_').map(|(_, s)| s).unwrap_or(id).into(),
            role: role.into(),
            agent: role.into(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            status,
            attempts: 0,
            started_at: None,
            finished_at: None,
            duration_ms: None,
            usage: Usage::default(),
            model: None,
            error: None,
            question: None,
            reused_from: None,
            progress: TaskProgressView::default(),
            artifacts: vec![],
            scope: vec![],
            verify_commands: vec![],
            verdict: None,
            fixes: None,
        }
    }

    pub(crate) fn status_fixture() -> StatusResult {
        let mut explore = task("01_explore", "explorer", TaskStatus::Completed, &[]);
        explore.attempts = 1;
        explore.duration_ms = Some(65_000);
        explore.usage = usage(12_000, 345, 0.0123);
        explore.reused_from = Some(ReusedFromView {
            run_id: "r-0001".into(),
            task_id: "01_explore".into(),
        });
        let mut plan = task("02_plan", "planner", TaskStatus::Failed, &["01_explore"]);
        plan.attempts = 3;
        plan.duration_ms = Some(4_200);
        plan.usage = usage(800, 20, 0.0009);
        plan.error =
            Some("model error: 429 rate_limit_error: overloaded (after 3 attempts)".into());
        let mut exec = task("03_execute", "executor", TaskStatus::Running, &["02_plan"]);
        exec.agent = "executor-strict".into();
        exec.attempts = 1;
        exec.started_at = Some("2026-03-10T11:58:30Z".into());
        exec.progress = TaskProgressView {
            current_tool: Some("bash".into()),
            turns: 3,
            tokens: 4_567,
        };
        let mut ask = task(
            "04_review",
            "reviewer",
            TaskStatus::Waiting,
            &["03_execute"],
        );
        ask.attempts = 1;
        ask.question = Some("Should I also update the changelog?".into());
        let verify = task(
            "05_verify",
            "verifier",
            TaskStatus::Queued,
            &["03_execute", "04_review"],
        );
        let skipped = task("06_write", "writer", TaskStatus::Skipped, &["05_verify"]);
        StatusResult {
            run: RunView {
                id: "team_20260310115500_3f9a1c2e00001111".into(),
                status: RunStatus::Running,
                goal: "fix the flaky login test".into(),
                cwd: "/home/u/proj".into(),
                team: "default".into(),
                workflow: "default".into(),
                runtime: "fake".into(),
                model: None,
                concurrency: 4,
                failure_policy: FailurePolicy::Continue,
                budget: Some(BudgetView {
                    tokens: 100_000,
                    warn_at: 0.8,
                    abort_at: 1.0,
                    used: 17_732,
                }),
                approval: "approved".into(),
                reuse_results: "read-only".into(),
                schedule_id: None,
                created_at: "2026-03-10T11:55:00Z".into(),
                started_at: Some("2026-03-10T11:55:01Z".into()),
                finished_at: None,
                updated_at: "2026-03-10T11:59:00Z".into(),
                duration_ms: None,
                usage: usage(12_800, 365, 0.0132),
                reason: None,
                verdict: None,
                run_seq: 0,
            },
            tasks: vec![explore, plan, exec, ask, verify, skipped],
            workspace: None,
            added_tasks: Vec::new(),
        }
    }

    #[test]
    fn status_snapshot() {
        insta::assert_snapshot!(at_80_and_160(|v| status(v, &status_fixture())));
        let tables = |v: &View| task_table(v, "r-1", &status_fixture().tasks, false);
        assert_fits(&tables(&view(80)), 80);
    }

    #[test]
    fn waiting_for_approval_says_so() {
        let mut s = status_fixture();
        s.run.status = RunStatus::Blocked;
        s.run.approval = "pending".into();
        s.tasks.truncate(1);
        s.tasks.push(task(
            "02_execute",
            "executor",
            TaskStatus::Queued,
            &["01_explore"],
        ));
        s.tasks.push(task(
            "03_verify",
            "verifier",
            TaskStatus::Queued,
            &["02_execute"],
        ));
        // Where the plan is: nowhere yet, the last completed task's result, a written plan.
        let plan_row = |s: &StatusResult| {
            let out = status(&view(80), s);
            out.lines()
                .find(|l| l.trim_start().starts_with("plan "))
                .map(|l| l.split_whitespace().last().unwrap_or_default().to_string())
        };
        s.tasks[0].status = TaskStatus::Completed;
        assert_eq!(plan_row(&s), None);
        let artifact = |name: &str, kind: &str| crew_api::types::ArtifactInfo {
            name: name.into(),
            kind: kind.into(),
            task_id: Some("01_explore".into()),
            bytes: 1,
            sha256: String::new(),
        };
        s.tasks[0].artifacts = vec![artifact("results/01_explore.txt", "result")];
        assert_eq!(plan_row(&s).as_deref(), Some("results/01_explore.txt"));
        s.tasks[0]
            .artifacts
            .push(artifact("shared/plan.md", "shared"));
        assert_eq!(plan_row(&s).as_deref(), Some("shared/plan.md"));
        let out = status(&view(80), &s);
        let line = |id: &str| out.lines().find(|l| l.starts_with(id)).unwrap_or_default();
        assert!(line("02_execute").contains("awaiting approval"), "{out}");
        assert!(line("03_verify").contains("after 02_execute"), "{out}");
    }

    #[test]
    fn added_tasks_are_listed_with_scope_and_approval() {
        let mut s = status_fixture();
        s.run.approval = "pending".into();
        let added = |id: &str, deps: &[&str]| crew_api::types::AddedTaskView {
            id: id.into(),
            added_by: "02_plan".into(),
            role: "executor".into(),
            agent: "executor".into(),
            title: Some(format!("do {id}")),
            depends_on: std::iter::once("02_plan")
                .chain(deps.iter().copied())
                .map(String::from)
                .collect(),
            scope: vec![format!("src/{id}/**")],
            writes: true,
            awaiting_approval: true,
            verify_commands: vec![],
        };
        s.added_tasks = vec![added("a", &[]), added("b-longer", &["a"])];
        let out = status(&view(120), &s);
        assert!(out.contains("added by 02_plan:"), "{out}");
        let line = |id: &str| {
            out.lines()
                .find(|l| l.starts_with(&format!("  {id}  ")))
                .unwrap_or_default()
        };
        assert!(line("a").contains("src/a/**"), "{out}");
        assert!(line("a").contains("awaiting approval"), "{out}");
        // One table: every column starts where its header does, in every row (ids and
        // titles of different lengths).
        let header = out
            .lines()
            .find(|l| l.starts_with("  task "))
            .unwrap_or_default();
        let at = header.find("scope").unwrap();
        assert_eq!(line("a").get(at..at + 8), Some("src/a/**"), "{out}");
        assert_eq!(line("b-longer").get(at..at + 8), Some("src/b-lo"), "{out}");
        let at = header.find("after").unwrap();
        assert_eq!(line("a").get(at..at + 2), Some("- "), "{out}");
        assert_eq!(line("b-longer").get(at..at + 2), Some("a "), "{out}");
    }

    #[test]
    fn status_narrow_snapshot() {
        insta::assert_snapshot!(status(&view(60), &status_fixture()));
    }

    #[test]
    fn status_header_aligns_with_colour() {
        let mut v = view(80);
        v.paint = crate::style::Paint::new(true);
        let coloured = status(&v, &status_fixture());
        let plain = status(&view(80), &status_fixture());
        let strip = |s: &str| {
            let mut out = String::new();
            let mut esc = false;
            for c in s.chars() {
                match (esc, c) {
                    (false, '\u{1b}') => esc = true,
                    (true, 'm') => esc = false,
                    (true, _) => {}
                    (false, c) => out.push(c),
                }
            }
            out
        };
        assert!(coloured.contains('\u{1b}'));
        assert_eq!(strip(&coloured), plain);
    }

    fn summary(
        id: &str,
        status: RunStatus,
        goal: &str,
        created: &str,
        [done, total, failed]: [u32; 3],
        usd: f64,
    ) -> RunSummaryView {
        RunSummaryView {
            id: id.into(),
            status,
            team: "default".into(),
            workflow: "default".into(),
            goal: goal.into(),
            cwd: "/home/u/proj".into(),
            created_at: created.into(),
            finished_at: None,
            usage: Usage {
                cost: usd,
                ..Usage::default()
            },
            tasks: TaskCountsView {
                total,
                queued: 0,
                running: 0,
                waiting: 0,
                completed: done,
                failed,
                cancelled: 0,
                skipped: 0,
                needs_attention: 0,
            },
            schedule_id: None,
            reason: None,
        }
    }

    #[test]
    fn list_snapshot() {
        let l = ListResult {
            runs: vec![
                summary(
                    "team_20260310115500_3f9a1c2e00001111",
                    RunStatus::Running,
                    "fix the flaky login test",
                    "2026-03-10T11:55:00Z",
                    [1, 6, 1],
                    0.0132,
                ),
                summary(
                    "team_20260310090000_3f9a1c2e00004444",
                    RunStatus::Completed,
                    "write a migration guide for the new configuration format and review it twice",
                    "2026-03-10T09:00:00Z",
                    [4, 4, 0],
                    1.2345,
                ),
                summary(
                    "team_20260309080000_a0b1c2d3e4f50617",
                    RunStatus::Blocked,
                    "refactor the parser",
                    "2026-03-09T08:00:00Z",
                    [0, 5, 0],
                    0.0,
                ),
                summary(
                    "team_20260301080000_77aa00bb11cc22dd",
                    RunStatus::Cancelled,
                    "explore",
                    "2026-03-01T08:00:00Z",
                    [2, 3, 0],
                    0.00004,
                ),
            ],
            next: Some("team_20260301080000_77aa00bb11cc22dd".into()),
        };
        insta::assert_snapshot!(at_80_and_160(|v| list(v, &l)));
        assert_fits(&list(&view(80), &l), 80);
        assert_fits(&list(&view(50), &l), 50);
        assert_eq!(
            list(
                &view(100),
                &ListResult {
                    runs: vec![],
                    next: None
                }
            ),
            "No runs.\n"
        );
    }

    #[test]
    fn plan_snapshot() {
        let p = PlanResult {
            team: "default".into(),
            workflow: "default".into(),
            concurrency: 4,
            runtime: "fake".into(),
            tasks: vec![
                PlannedTaskView {
                    id: "01_explore".into(),
                    step_id: "explore".into(),
                    role: "explorer".into(),
                    agent: "explorer".into(),
                    depends_on: vec![],
                    model: None,
                    runtime: None,
                    writes: false,
                    edits: false,
                    adds_tasks: None,
                    select: None,
                    skills: vec![],
                    missing_skills: vec![],
                    pre_step: None,
                    scope: vec![],
                    verify_commands: vec![],
                    sandbox: None,
                    slurm: None,
                },
                PlannedTaskView {
                    id: "02_plan".into(),
                    step_id: "plan".into(),
                    role: "planner".into(),
                    agent: "planner".into(),
                    depends_on: vec!["01_explore".into()],
                    model: Some("anthropic/claude-sonnet-4-5".into()),
                    runtime: None,
                    writes: false,
                    edits: false,
                    adds_tasks: Some(16),
                    select: None,
                    skills: vec!["delegation-patterns".into(), "house-style".into()],
                    missing_skills: vec!["house-style".into()],
                    pre_step: None,
                    scope: vec![],
                    verify_commands: vec![],
                    sandbox: None,
                    slurm: None,
                },
                PlannedTaskView {
                    id: "03_execute".into(),
                    step_id: "execute".into(),
                    role: "executor".into(),
                    agent: "executor".into(),
                    depends_on: vec!["02_plan".into()],
                    model: None,
                    runtime: None,
                    writes: true,
                    edits: true,
                    adds_tasks: None,
                    select: None,
                    skills: vec![],
                    missing_skills: vec![],
                    pre_step: None,
                    scope: vec![],
                    verify_commands: vec![],
                    sandbox: None,
                    slurm: None,
                },
                PlannedTaskView {
                    id: "04_verify".into(),
                    step_id: "verify".into(),
                    role: "verifier".into(),
                    agent: "verifier".into(),
                    depends_on: vec!["02_plan".into(), "03_execute".into()],
                    model: None,
                    runtime: None,
                    writes: false,
                    edits: false,
                    adds_tasks: None,
                    select: None,
                    skills: vec![],
                    missing_skills: vec![],
                    pre_step: None,
                    scope: vec![],
                    verify_commands: vec![],
                    sandbox: None,
                    slurm: None,
                },
            ],
            diagnostics: vec![Diagnostic {
                path: "/home/u/proj/.crew/agents/explorer.md".into(),
                line: Some(3),
                field: Some("model".into()),
                severity: Severity::Warning,
                message: "unknown model, using the default".into(),
            }],
        };
        insta::assert_snapshot!(at_80_and_160(|v| plan(v, &p)));
    }

    /// A task placed on Slurm shows the job it would ask for (issue 35).
    #[test]
    fn a_plan_shows_slurm_jobs() {
        let task = |id: &str, slurm: Option<SlurmJob>| PlannedTaskView {
            id: id.into(),
            step_id: id.into(),
            role: "executor".into(),
            agent: "executor".into(),
            depends_on: vec![],
            model: None,
            runtime: None,
            writes: true,
            edits: true,
            adds_tasks: None,
            select: None,
            skills: vec![],
            missing_skills: vec![],
            pre_step: None,
            scope: vec![],
            verify_commands: vec![],
            sandbox: None,
            slurm,
        };
        let p = PlanResult {
            team: "t".into(),
            workflow: "w".into(),
            concurrency: 4,
            runtime: "cluster".into(),
            tasks: vec![
                task(
                    "01_build",
                    Some(SlurmJob {
                        cpus_per_task: Some(2),
                        memory_mb: Some(300),
                        time_limit_minutes: Some(7),
                        ..Default::default()
                    }),
                ),
                task(
                    "02_check",
                    Some(SlurmJob {
                        sandbox: Some(crew_api::types::NodeBox {
                            mode: "required".into(),
                            network: false,
                            verify_network: true,
                            read: vec!["/opt/tools".into()],
                            write: vec![],
                        }),
                        ..Default::default()
                    }),
                ),
            ],
            diagnostics: vec![],
        };
        let out = plan(&view(160), &p);
        assert!(
            out.contains("slurm job") && out.contains("2 cpu 300 MB 7 min"),
            "{out}"
        );
        assert!(
            out.contains(
                "box on the Slurm node: sandbox = \"required\" (agent network off, checks' \
                 network on, also read /opt/tools); the node lays the box out on its own paths"
            ),
            "{out}"
        );
        assert!(out.contains("defaults"), "{out}");
        let local = PlanResult {
            tasks: vec![task("01_build", None)],
            ..p
        };
        assert!(!plan(&view(160), &local).contains("slurm job"));
        assert!(!plan(&view(160), &local).contains("runtime  "));
        // Candidates racing runtimes: a runtime column, each one's own or the run's.
        let mut other = task("_cand-01_build-2", None);
        other.runtime = Some("codex".into());
        let raced = PlanResult {
            tasks: vec![task("_cand-01_build-1", None), other],
            ..local
        };
        let out = plan(&view(160), &raced);
        let row = |id: &str| out.lines().find(|l| l.contains(id)).unwrap_or_default();
        assert!(
            out.lines()
                .any(|l| l.contains("runtime") && l.contains("id")),
            "{out}"
        );
        assert!(row("_cand-01_build-1").contains("cluster"), "{out}");
        assert!(row("_cand-01_build-2").contains("codex"), "{out}");
    }

    #[test]
    fn artifacts_table() {
        let list = vec![ArtifactInfo {
            name: "results/01_explore.txt".into(),
            kind: "result".into(),
            task_id: Some("01_explore".into()),
            bytes: 2048,
            sha256: "0123456789abcdef0123".into(),
        }];
        let out = artifacts(&view(100), &list);
        assert!(
            out.contains("results/01_explore.txt")
                && out.contains("2.0 KiB")
                && out.contains("0123456789ab"),
            "{out}"
        );
        assert!(!out.contains("0123456789abc"), "sha is shortened: {out}");
    }

    #[test]
    fn the_cancel_message_counts_what_was_stopped() {
        let r = |cancelled: &[&str], stopped: &[&str]| CancelResult {
            status: crew_api::types::RunStatus::Cancelled,
            cancelled_task_ids: cancelled.iter().map(|s| s.to_string()).collect(),
            stopped_task_ids: stopped.iter().map(|s| s.to_string()).collect(),
        };
        let before = [
            ("a", TaskStatus::Running),
            ("b", TaskStatus::Waiting),
            ("c", TaskStatus::Queued),
            ("d", TaskStatus::Queued),
        ];
        let cases: &[(&[&str], &[&str], &str)] = &[
            (
                &["a", "b", "c", "d"],
                &["a"],
                "1 worker stopped (a), 1 task waiting for an answer, 2 tasks not started",
            ),
            // A worker that ended just before the cancel is not counted as stopped.
            (
                &["a", "c"],
                &[],
                "no worker was running, 2 tasks not started",
            ),
            (
                &["b"],
                &[],
                "no worker was running, 1 task waiting for an answer",
            ),
            (&["a", "c"], &["a", "c"], "2 workers stopped (a, c)"),
        ];
        for (cancelled, stopped, want) in cases {
            assert_eq!(cancelled_text(&r(cancelled, stopped), &before), *want);
        }
    }

    fn cancelled_text(r: &CancelResult, before: &[(&str, TaskStatus)]) -> String {
        cancelled(r, before.iter().copied())
    }

    /// Issues 30 and 36: a judge's verdict and a step's candidates are in the table (a failing
    /// verdict or a ruled-out candidate not marked as a success), the run's verdict in its
    /// header.
    #[test]
    fn verdicts_and_candidates_show_in_the_status() {
        let mut s = status_fixture();
        s.run.status = RunStatus::Completed;
        s.run.verdict = Some("fail".into());
        let mut verify = task("04_verify", "verifier", TaskStatus::Completed, &[]);
        verify.verdict = Some(VerdictView {
            verdict: "fail".into(),
            findings: vec![FindingView {
                title: "the test is wrong".into(),
                detail: String::new(),
                paths: vec![],
                severity: None,
            }],
        });
        let mut sel = task("01_build", "executor", TaskStatus::Completed, &[]);
        sel.candidates = Some(CandidatesView {
            select: Some("smallest".into()),
            members: vec!["_cand-01_build-1".into(), "_cand-01_build-2".into()],
            choice: Some(ChoiceView {
                index: 2,
                candidate: "_cand-01_build-2".into(),
                by: "smallest".into(),
                reason: "smallest of 1 that passed".into(),
            }),
            ..Default::default()
        });
        let cand = |k: u32, failed: &[&str]| {
            let mut c = task(
                &format!("_cand-01_build-{k}"),
                "executor",
                TaskStatus::Completed,
                &[],
            );
            c.candidates = Some(CandidatesView {
                of: Some("01_build".into()),
                index: Some(k),
                failed_checks: failed.iter().map(|f| f.to_string()).collect(),
                ..Default::default()
            });
            c
        };
        s.tasks = vec![
            cand(1, &["`test -f ok.txt` exited with 1"]),
            cand(2, &[]),
            sel,
            verify,
        ];
        let text = status(&view(160), &s);
        let row = |id: &str| {
            text.lines()
                .find(|l| l.starts_with(id))
                .unwrap_or_else(|| panic!("no row {id}: {text}"))
                .to_string()
        };
        assert!(text.contains("verdict   fail"), "{text}");
        let v = row("04_verify");
        assert!(
            v.contains("✗ completed") && v.contains("fail, 1 finding"),
            "{v}"
        );
        let out = row("_cand-01_build-1");
        assert!(
            out.contains("✗ completed") && out.contains("out: `test -f ok.txt` exited with 1"),
            "{out}"
        );
        let chosen = row("_cand-01_build-2");
        assert!(
            chosen.contains("✓ completed") && chosen.contains("chosen"),
            "{chosen}"
        );
        let step = row("01_build");
        assert!(
            step.contains("chose 2 (smallest): smallest of 1 that passed"),
            "{step}"
        );
    }

    /// Issue 32 (4): tasks a fan-out added show where they run, after the task that added
    /// them, not after the last step.
    #[test]
    fn added_tasks_are_listed_where_they_run() {
        let mut s = status_fixture();
        let mut t = s.tasks[0].clone();
        let ids: Vec<String> = s.tasks.iter().map(|t| t.id.clone()).collect();
        let plan = ids[1].clone();
        let mut added = vec![];
        for id in ["dot-case", "path-case"] {
            t.id = id.into();
            s.tasks.push(t.clone());
            added.push(crew_api::types::AddedTaskView {
                id: id.into(),
                added_by: plan.clone(),
                role: "executor".into(),
                agent: "executor".into(),
                title: None,
                depends_on: vec![plan.clone()],
                scope: vec![],
                writes: true,
                awaiting_approval: false,
                verify_commands: vec![],
            });
        }
        let order: Vec<String> = where_they_run(&s.tasks, &added)
            .into_iter()
            .map(|t| t.id)
            .collect();
        let mut want = vec![
            ids[0].clone(),
            plan.clone(),
            "dot-case".into(),
            "path-case".into(),
        ];
        want.extend(ids[2..].iter().cloned());
        assert_eq!(order, want);
    }
}
