//! The live view's model: events in, changes out. Terminal progress bars and plain piped lines
//! are two renderings of the same changes, so the logic is tested once, without a daemon.

use super::events::usage_of;
use super::marks;
use super::table::width_of;
use super::time::{clock_time, human_duration_ms, parse_time};
use super::units::{cost, count, cut, tokens, usage_tokens};
use super::View;
use crate::style::Tone;
use chrono::{DateTime, Utc};
use crew_api::types::{
    Event, PlannedTaskView, RunStatus, StatusResult, TaskStatus, TaskView, Usage,
};
use serde_json::Value;
use std::fmt::Write as _;

/// How crew's candidate task ids begin (`crew_core::ids::reserved`, `TaskKind::Candidate`).
const CANDIDATE_ID_PREFIX: &str = "_cand-";

#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    pub id: String,
    pub role: String,
    pub status: TaskStatus,
    pub attempt: u32,
    pub started: Option<DateTime<Utc>>,
    pub finished: Option<DateTime<Utc>>,
    pub tool: Option<String>,
    /// Usage of attempts that ended.
    pub prior: Usage,
    /// Usage of the running attempt so far.
    pub current: Usage,
    pub note: Option<String>,
    /// Name of the result artifact, when the completion event named one.
    pub result: Option<String>,
    /// In worktree mode, what the completed attempt committed.
    pub commit: Option<TaskChange>,
    /// A step with candidates (issue 36): the candidates it chooses among. Its row shows the
    /// step's usage, theirs and its own, as `crewctl status` does.
    pub members: Vec<String>,
    /// Completed, but its own judgement went against the work: a judge's failing verdict, a
    /// candidate ruled out by its checks. Not marked as a success.
    pub against: bool,
}

/// A worktree task's result commit, as `task.completed` carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskChange {
    pub branch: String,
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
    /// The result commit is the start commit: nothing changed.
    pub unchanged: bool,
}

impl TaskChange {
    fn of(d: &Value) -> Option<TaskChange> {
        let c = d.get("commit")?;
        let n = |k: &str| c.get(k).and_then(Value::as_u64).unwrap_or(0);
        let s = |k: &str| c.get(k).and_then(Value::as_str);
        Some(TaskChange {
            branch: s("branch")?.to_string(),
            files: n("files"),
            insertions: n("insertions"),
            deletions: n("deletions"),
            unchanged: s("commit").is_some() && s("commit") == s("start"),
        })
    }

    /// `2 files +10 -2`, or `no change`.
    pub fn stat(&self) -> String {
        if self.unchanged {
            "no change".to_string()
        } else {
            format!(
                "{} file{} +{} -{}",
                self.files,
                if self.files == 1 { "" } else { "s" },
                self.insertions,
                self.deletions
            )
        }
    }
}

impl TaskState {
    fn new(id: &str, role: &str, status: TaskStatus) -> Self {
        TaskState {
            id: id.to_string(),
            role: role.to_string(),
            status,
            attempt: 0,
            started: None,
            finished: None,
            tool: None,
            prior: Usage::default(),
            current: Usage::default(),
            note: None,
            result: None,
            commit: None,
            members: Vec::new(),
            against: false,
        }
    }

    pub fn usage(&self) -> Usage {
        let mut u = self.prior;
        add(&mut u, &self.current);
        u
    }

    pub fn elapsed_ms(&self, now: DateTime<Utc>) -> Option<u64> {
        let start = self.started?;
        let end = self.finished.unwrap_or(now);
        u64::try_from((end - start).num_milliseconds()).ok()
    }

    fn end_attempt(&mut self, data: &Value) {
        if let Some(u) = usage_of(data) {
            add(&mut self.prior, &u);
        } else {
            add(&mut self.prior, &self.current.clone());
        }
        self.current = Usage::default();
        self.tool = None;
    }

    /// The role an added task's event gives it, when it gives one.
    fn take_role(&mut self, added: &Value) {
        if let Some(role) = added.get("role").and_then(Value::as_str) {
            self.role = role.to_string();
        }
    }

    /// `task.started`: a new attempt runs (numbered by the event, else the next one).
    fn start(&mut self, d: &Value, time: Option<DateTime<Utc>>) {
        self.status = TaskStatus::Running;
        self.attempt = d
            .get("attempt")
            .and_then(Value::as_u64)
            .and_then(|a| u32::try_from(a).ok())
            .unwrap_or(self.attempt.saturating_add(1));
        self.started = time;
        self.finished = None;
        self.tool = None;
        self.note = None;
        self.current = Usage::default();
    }

    /// The task ended (completed, failed, needs attention, cancelled or skipped): its note is
    /// what it reused or its verdict when it completed, else why it ended.
    fn finish(&mut self, e: &Event, time: Option<DateTime<Utc>>) {
        let d = &e.data;
        self.status = match e.kind.as_str() {
            "task.completed" => TaskStatus::Completed,
            "task.failed" => TaskStatus::Failed,
            "task.needs_attention" => TaskStatus::NeedsAttention,
            "task.cancelled" => TaskStatus::Cancelled,
            _ => TaskStatus::Skipped,
        };
        self.finished = time.or(self.started);
        self.end_attempt(d);
        let out = ruled_out(d);
        self.against = e.kind == "task.completed"
            && (out.is_some() || verdict_of(d).is_some_and(|v| v != "pass"));
        self.note = if e.kind == "task.completed" {
            reused_note(d).or_else(|| verdict_note(d)).or(out)
        } else {
            reason(e)
        };
        self.result = result_artifact(d);
        self.commit = TaskChange::of(d);
    }

    /// A step chose among its candidates (issue 36): its row ends with the choice; returns the
    /// line that says which and why.
    fn choose(&mut self, task_id: &str, e: &Event, time: Option<DateTime<Utc>>) -> String {
        let d = &e.data;
        self.status = TaskStatus::Completed;
        self.finished = time.or(self.started);
        if let Some(end) = d.get("end") {
            self.end_attempt(end);
        }
        let choice = d.get("choice");
        let field = |k: &str| {
            choice
                .and_then(|c| c.get(k))
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .unwrap_or_default()
        };
        self.note = Some(format!("chose {} ({})", field("index"), field("by")));
        self.commit = TaskChange::of(d);
        let text = e.message.clone().unwrap_or_else(|| {
            format!("{task_id}: chose {} ({})", field("candidate"), field("by"))
        });
        format!("{task_id}: {}", cut(&text, 200))
    }
}

/// A string field of an event's data.
fn str_of(d: &Value, k: &str) -> Option<String> {
    d.get(k).and_then(Value::as_str).map(String::from)
}

/// Why a task ended or retries: the event's reason, else its error, else its message.
fn reason(e: &Event) -> Option<String> {
    str_of(&e.data, "reason")
        .or_else(|| str_of(&e.data, "error"))
        .or_else(|| e.message.clone())
}

/// `reused run-…/04_verify`: a completion that reused an earlier run's result.
fn reused_note(d: &Value) -> Option<String> {
    let r = d.get("reusedFrom")?;
    let part = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    Some(format!("reused {}/{}", part("runId"), part("taskId")))
}

/// The candidates a task added by a fan-out chooses among, when it is their selector.
fn selector_members(added: &Value) -> Option<Vec<String>> {
    let cand = added.get("candidates")?;
    if cand.get("kind").and_then(Value::as_str) != Some("selector") {
        return None;
    }
    Some(
        cand.get("candidates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
    )
}

/// `budget warning: 80k of 100k tokens`.
fn budget_note(what: &str, d: &Value) -> String {
    let n = |k: &str| d.get(k).and_then(Value::as_u64).unwrap_or(0);
    format!(
        "{what}: {} of {} tokens",
        tokens(n("used")),
        tokens(n("total"))
    )
}

/// Saturating: the counts are the daemon's sums of what workers reported.
fn add(a: &mut Usage, b: &Usage) {
    a.input = a.input.saturating_add(b.input);
    a.output = a.output.saturating_add(b.output);
    a.cache_read = a.cache_read.saturating_add(b.cache_read);
    a.cache_write = a.cache_write.saturating_add(b.cache_write);
    a.cost += b.cost;
    a.turns = a.turns.saturating_add(b.turns);
}

#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Started(usize),
    Progress(usize),
    /// Completed, failed, cancelled, skipped or needs attention.
    Finished(usize),
    Retrying {
        task: usize,
        reason: String,
        delay_ms: Option<u64>,
    },
    Waiting {
        task: usize,
        question: String,
    },
    Requeued(usize),
    Note {
        tone: Tone,
        text: String,
    },
    /// A run event that may end following: completed, failed, cancelled or blocked. The caller
    /// confirms with `team.status`, since replayed history can hold a later `run.resumed`.
    RunStopped(RunStatus),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Follow {
    pub run_id: String,
    pub tasks: Vec<TaskState>,
    /// Highest seq applied; resubscribe after it.
    pub last_seq: u64,
    pub started: Option<DateTime<Utc>>,
}

impl Follow {
    pub fn new(run_id: &str) -> Self {
        Follow {
            run_id: run_id.to_string(),
            tasks: vec![],
            last_seq: 0,
            started: None,
        }
    }

    /// Seeds the task list (in plan order) from `team.run`'s answer. A planned step with
    /// candidates depends on them, and only it does (crew's candidate ids, `_cand-…`, are no
    /// ids of a user's; a fix task depending on one comes later, by an event).
    pub fn with_plan(mut self, plan: &[PlannedTaskView]) -> Self {
        for t in plan {
            let mut row = TaskState::new(&t.id, &t.role, TaskStatus::Queued);
            row.members = t
                .depends_on
                .iter()
                .filter(|d| d.starts_with(CANDIDATE_ID_PREFIX))
                .cloned()
                .collect();
            self.tasks.push(row);
        }
        self
    }

    /// Seeds the task list from `team.status`, keeping statuses as they are now; replayed
    /// events then bring the details.
    pub fn with_status(mut self, s: &StatusResult) -> Self {
        for t in &s.tasks {
            let mut row = TaskState::new(&t.id, &t.role, TaskStatus::Queued);
            if let Some(c) = &t.candidates {
                row.members = c.members.clone();
            }
            self.tasks.push(row);
        }
        self
    }

    /// What a row shows as its usage: a step with candidates counts theirs with its own (what
    /// `team.status` gives as the task's usage); any other task its own. The run's total
    /// ([`Follow::usage`]) still counts each task once.
    pub fn task_usage(&self, t: &TaskState) -> Usage {
        let mut u = t.usage();
        for m in &t.members {
            if let Some(c) = self.tasks.iter().find(|x| &x.id == m) {
                add(&mut u, &c.usage());
            }
        }
        u
    }

    fn index(&mut self, id: &str) -> usize {
        if let Some(i) = self.tasks.iter().position(|t| t.id == id) {
            return i;
        }
        self.tasks.push(TaskState::new(id, "", TaskStatus::Queued));
        self.tasks.len() - 1
    }

    pub fn counts(&self) -> (usize, usize, usize) {
        let done = self
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Completed)
            .count();
        let running = self
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Running)
            .count();
        (done, running, self.tasks.len())
    }

    pub fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for t in &self.tasks {
            add(&mut u, &t.usage());
        }
        u
    }

    /// Folds one event into the view and says what changed for the screen.
    pub fn apply(&mut self, e: &Event) -> Vec<Change> {
        // Replays after a resubscribe may repeat events already seen.
        if e.seq <= self.last_seq {
            return vec![];
        }
        self.last_seq = e.seq;
        if e.run_id.as_deref() != Some(self.run_id.as_str()) {
            return vec![];
        }
        match (e.kind.as_str(), e.task_id.as_deref()) {
            ("task.expanded", _) => self.on_expanded(e),
            ("task.fix_added" | "task.resolve_added", _) => self.on_added(e),
            (_, Some(task_id)) => self.on_task_event(task_id, e),
            (_, None) => self.on_run_event(e),
        }
    }

    /// A fan-out step added tasks: they join the list in the order given, with their roles,
    /// and a line says so where it happens.
    fn on_expanded(&mut self, e: &Event) -> Vec<Change> {
        let mut ids = Vec::new();
        for added in e
            .data
            .get("tasks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(id) = added.get("id").and_then(Value::as_str) else {
                continue;
            };
            let i = self.index(id);
            if let Some(row) = self.tasks.get_mut(i) {
                row.take_role(added);
                // A task added with candidates is their selector (`kind: selector`).
                if let Some(members) = selector_members(added) {
                    row.members = members;
                }
            }
            ids.push(id.to_string());
        }
        vec![expanded_note(e.task_id.as_deref(), &ids)]
    }

    /// A judge's failing verdict added a fix task, or a conflicting merge a resolve task: it
    /// joins the list, the task it was added for waits for it, and a line says why
    /// ("04_verify: fail, 1 finding → _fix-04_verify-1", "03_integrate: conflict in
    /// src/lib.rs (dot-case × path-case) → _resolve-03_integrate-1").
    fn on_added(&mut self, e: &Event) -> Vec<Change> {
        if let Some(added) = e.data.get("task") {
            if let Some(id) = added.get("id").and_then(Value::as_str) {
                let i = self.index(id);
                if let Some(row) = self.tasks.get_mut(i) {
                    row.take_role(added);
                }
            }
        }
        if let Some(judge) = e.task_id.as_deref() {
            let i = self.index(judge);
            if let Some(t) = self.tasks.get_mut(i) {
                t.status = TaskStatus::Queued;
            }
        }
        vec![Change::Note {
            tone: Tone::Warn,
            text: e.message.clone().unwrap_or_else(|| {
                format!("a {} task was added", e.kind.trim_start_matches("task."))
            }),
        }]
    }

    /// An event of one task: its row changes.
    fn on_task_event(&mut self, task_id: &str, e: &Event) -> Vec<Change> {
        let i = self.index(task_id);
        let Some(t) = self.tasks.get_mut(i) else {
            return vec![];
        };
        let time = parse_time(&e.time);
        let d = &e.data;
        match e.kind.as_str() {
            "task.started" => {
                t.start(d, time);
                vec![Change::Started(i)]
            }
            "task.progress" => {
                if let Some(u) = usage_of(d) {
                    t.current = u;
                }
                t.tool = str_of(d, "currentTool");
                vec![Change::Progress(i)]
            }
            "task.completed"
            | "task.failed"
            | "task.needs_attention"
            | "task.cancelled"
            | "task.skipped" => {
                t.finish(e, time);
                vec![Change::Finished(i)]
            }
            "task.retrying" => {
                t.status = TaskStatus::Queued;
                t.end_attempt(d);
                vec![Change::Retrying {
                    task: i,
                    reason: reason(e).unwrap_or_default(),
                    delay_ms: d.get("delayMs").and_then(Value::as_u64),
                }]
            }
            "task.waiting" => {
                t.status = TaskStatus::Waiting;
                t.end_attempt(d);
                let question = str_of(d, "question").unwrap_or_default();
                t.note = Some(question.clone());
                vec![Change::Waiting { task: i, question }]
            }
            "task.queued" => {
                t.status = TaskStatus::Queued;
                t.note = None;
                vec![Change::Requeued(i)]
            }
            "task.candidate_chosen" => {
                let text = t.choose(task_id, e, time);
                vec![
                    Change::Finished(i),
                    Change::Note {
                        tone: Tone::Accent,
                        text,
                    },
                ]
            }
            "task.steered" => {
                let msg = str_of(d, "message").unwrap_or_default();
                let how = str_of(d, "delivered").unwrap_or_else(|| "?".into());
                vec![Change::Note {
                    tone: Tone::Accent,
                    text: format!("{task_id} steered ({how}): {}", cut(&msg, 120)),
                }]
            }
            _ => vec![],
        }
    }

    /// An event of the run as a whole: a line, or the end of following.
    fn on_run_event(&mut self, e: &Event) -> Vec<Change> {
        let note = |tone, text: &str| {
            vec![Change::Note {
                tone,
                text: text.to_string(),
            }]
        };
        match e.kind.as_str() {
            "run.started" => {
                self.started = parse_time(&e.time);
                vec![]
            }
            "run.completed" => vec![Change::RunStopped(RunStatus::Completed)],
            "run.failed" => vec![Change::RunStopped(RunStatus::Failed)],
            "run.cancelled" => vec![Change::RunStopped(RunStatus::Cancelled)],
            "run.blocked" => vec![Change::RunStopped(RunStatus::Blocked)],
            "run.resumed" => note(Tone::Active, "run resumed"),
            "run.budget_warning" => note(Tone::Warn, &budget_note("budget warning", &e.data)),
            "run.budget_exceeded" => note(Tone::Bad, &budget_note("budget exceeded", &e.data)),
            "plan.approval_required" => {
                let before = str_of(&e.data, "taskId")
                    .map(|t| format!(" before {t}"))
                    .unwrap_or_default();
                note(Tone::Warn, &format!("plan approval required{before}"))
            }
            "plan.approved" => note(Tone::Ok, "plan approved"),
            "plan.rejected" => note(Tone::Warn, "plan rejected"),
            _ => vec![],
        }
    }
}

/// A judge's verdict word, from its completion.
fn verdict_of(d: &Value) -> Option<&str> {
    d.get("verdict")?.get("verdict")?.as_str()
}

/// A candidate whose checks failed (it completes, ruled out): `out: \`cmd\` exited with 1`.
fn ruled_out(d: &Value) -> Option<String> {
    let failed = d.get("verification")?.as_array()?.iter().find(|v| {
        v.get("exitCode").and_then(Value::as_i64) != Some(0)
            || v.get("timedOut").and_then(Value::as_bool) == Some(true)
    })?;
    let command = failed.get("command").and_then(Value::as_str).unwrap_or("?");
    let how = match failed.get("exitCode").and_then(Value::as_i64) {
        _ if failed.get("timedOut").and_then(Value::as_bool) == Some(true) => "timed out".into(),
        Some(c) => format!("exited with {c}"),
        None => "was killed".into(),
    };
    Some(format!("out: `{}` {how}", cut(command, 80)))
}

/// A judge's verdict as its row's note: `fail, 1 finding`.
fn verdict_note(d: &Value) -> Option<String> {
    let v = d.get("verdict")?;
    let word = verdict_of(d)?;
    let n = v
        .get("findings")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    Some(match n {
        0 => word.to_string(),
        1 => format!("{word}, 1 finding"),
        n => format!("{word}, {n} findings"),
    })
}

fn result_artifact(d: &Value) -> Option<String> {
    d.get("artifacts")?.as_array()?.iter().find_map(|a| {
        if a.get("kind").and_then(Value::as_str) == Some("result") {
            a.get("name").and_then(Value::as_str).map(String::from)
        } else {
            None
        }
    })
}

/// The result artifact of a task: the one its completion named, else the conventional name.
pub fn result_name(t: &TaskState) -> String {
    t.result
        .clone()
        .unwrap_or_else(|| format!("results/{}.txt", t.id))
}

/// `✓ 01_explore  explorer · 1m 05s · 12.3k tok · $0.0123 · note` (no time prefix). A step
/// with candidates shows the step's usage (`Follow::task_usage`).
pub fn task_done(view: &View, f: &Follow, t: &TaskState, id_width: usize) -> String {
    let (mark, tone) = marks::task_judged(t.status, t.against);
    let mut s = format!("{} {:<id_width$}", view.p(tone, mark), t.id);
    let mut parts: Vec<String> = vec![];
    if !t.role.is_empty() {
        parts.push(t.role.clone());
    }
    if t.status != TaskStatus::Completed {
        parts.push(view.p(tone, marks::task_word(t.status)));
    }
    if let Some(ms) = t.elapsed_ms(view.clock.now).filter(|_| t.started.is_some()) {
        parts.push(human_duration_ms(ms));
    }
    let u = f.task_usage(t);
    if usage_tokens(&u) > 0 {
        parts.push(format!("{} tok", tokens(usage_tokens(&u))));
    }
    if u.cost > 0.0 {
        parts.push(cost(u.cost));
    }
    if t.attempt > 1 {
        parts.push(format!("attempt {}", t.attempt));
    }
    if let Some(c) = t
        .commit
        .as_ref()
        .filter(|_| t.status == TaskStatus::Completed)
    {
        parts.push(c.stat());
        // The branch is long (it holds the run id): it goes where the line has room for it.
        let with = width_of(&format!("{s}  {} · {}", parts.join(" · "), c.branch));
        if view.width.is_none_or(|w| with <= usize::from(w)) {
            parts.push(view.p(Tone::Dim, &c.branch));
        }
    }
    if let Some(n) = &t.note {
        let tone = if t.status == TaskStatus::Completed {
            Tone::Dim
        } else {
            tone
        };
        // One line: a failed check's headline, not the failing lines under it.
        let head = n.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
        parts.push(view.p(tone, cut(head, 200)));
    }
    let _ = write!(s, "  {}", parts.join(" · "));
    s
}

/// The changing part of a running task's progress line: `explorer · ▸ bash · 4.6k tok`.
pub fn task_running(view: &View, f: &Follow, t: &TaskState) -> String {
    let mut parts: Vec<String> = vec![];
    if !t.role.is_empty() {
        parts.push(t.role.clone());
    }
    if t.attempt > 1 {
        parts.push(format!("attempt {}", t.attempt));
    }
    if let Some(tool) = &t.tool {
        parts.push(view.p(Tone::Active, format!("▸ {tool}")));
    }
    let tok = usage_tokens(&f.task_usage(t));
    if tok > 0 {
        parts.push(format!("{} tok", tokens(tok)));
    }
    parts.join(" · ")
}

/// One line per change for piped output (no progress bars), `None` for changes not worth a
/// line there (progress ticks).
pub fn plain_line(
    view: &View,
    f: &Follow,
    c: &Change,
    at: Option<DateTime<Utc>>,
) -> Option<String> {
    let time = at
        .map(|t| clock_time(t, view.clock.zone))
        .unwrap_or_default();
    let width = f.tasks.iter().map(|t| t.id.len()).max().unwrap_or(0);
    let body = match c {
        Change::Started(i) => {
            let t = f.tasks.get(*i)?;
            let attempt = if t.attempt > 1 {
                format!(", attempt {}", t.attempt)
            } else {
                String::new()
            };
            let role = if t.role.is_empty() {
                String::new()
            } else {
                format!(" ({}{attempt})", t.role)
            };
            format!(
                "{} {:<width$}  started{role}",
                view.p(Tone::Active, "▶"),
                t.id
            )
        }
        Change::Progress(_) => return None,
        Change::Finished(i) => {
            // The time prefix takes its share of the width the line may fill.
            let taken = if time.is_empty() {
                0
            } else {
                width_of(&time) + 1
            };
            let narrower = View {
                width: view
                    .width
                    .map(|w| w.saturating_sub(u16::try_from(taken).unwrap_or(u16::MAX))),
                ..*view
            };
            task_done(&narrower, f, f.tasks.get(*i)?, width)
        }
        Change::Retrying {
            task,
            reason,
            delay_ms,
        } => {
            let t = f.tasks.get(*task)?;
            let when = delay_ms
                .map(|ms| format!(" in {}", human_duration_ms(ms)))
                .unwrap_or_default();
            format!(
                "{} {:<width$}  retrying{when}: {}",
                view.p(Tone::Warn, "↻"),
                t.id,
                cut(reason, 200)
            )
        }
        Change::Waiting { task, question } => {
            let t = f.tasks.get(*task)?;
            format!(
                "{} {:<width$}  asks: {}\n  answer with: crewctl respond {} {} '<message>'",
                view.p(Tone::Warn, "?"),
                t.id,
                question,
                super::ids::hint(&f.run_id),
                t.id
            )
        }
        Change::Requeued(i) => format!(
            "{} {:<width$}  queued again",
            view.p(Tone::Dim, "○"),
            f.tasks.get(*i)?.id
        ),
        Change::Note { tone, text } => format!("{} {}", view.p(*tone, "•"), text),
        Change::RunStopped(_) => return None,
    };
    Some(if time.is_empty() {
        body
    } else {
        format!("{} {body}", view.p(Tone::Dim, time))
    })
}

/// A task's result, cut to `max_lines` lines, each prefixed with a gutter.
pub fn excerpt(view: &View, text: &str, max_lines: usize) -> String {
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let width = view
        .width
        .map(|w| usize::from(w).saturating_sub(4).max(20))
        .unwrap_or(200);
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for l in lines.iter().take(max_lines) {
        let _ = writeln!(out, "  {} {}", view.p(Tone::Dim, "│"), cut(l, width));
    }
    if lines.len() > max_lines {
        let _ = writeln!(
            out,
            "  {} {}",
            view.p(Tone::Dim, "│"),
            view.p(
                Tone::Dim,
                format!("… {}", count(lines.len() - max_lines, "more line"))
            )
        );
    }
    out
}

/// The closing lines after a followed run stops.
pub fn final_summary(view: &View, s: &StatusResult) -> String {
    let r = &s.run;
    let (mark, tone) = marks::run(r.status);
    let done = s
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Completed)
        .count();
    let mut line = format!(
        "{} {}",
        view.p(tone, mark),
        view.p(Tone::Bold, format!("Run {} {}", r.id, r.status.as_str()))
    );
    if let Some(ms) = r.duration_ms {
        let _ = write!(line, " in {}", human_duration_ms(ms));
    }
    let mut stats = format!(
        "{done}/{} tasks · {} tokens · {}",
        s.tasks.len(),
        tokens(usage_tokens(&r.usage)),
        cost(r.usage.cost)
    );
    // Measured without colours (their escape sequences take no columns).
    let mut plain = format!("{mark} Run {} {}", r.id, r.status.as_str());
    if let Some(ms) = r.duration_ms {
        let _ = write!(plain, " in {}", human_duration_ms(ms));
    }
    let _ = write!(plain, " · {stats}");
    if let Some(v) = &r.verdict {
        let tone = if v == "pass" { Tone::Ok } else { Tone::Warn };
        let _ = write!(stats, " · verdict: {}", view.p(tone, v));
        let _ = write!(plain, " · verdict: {v}");
    }
    // One line where it fits; on a narrower terminal the figures go on a line of their own
    // rather than wrap in the middle of a word.
    let one = format!("{line} · {stats}");
    let fits = view
        .width
        .is_none_or(|w| super::table::width_of(&plain) <= usize::from(w));
    let mut out = if fits {
        format!("{one}\n")
    } else {
        format!("{line}\n  {stats}\n")
    };
    if let Some(reason) = &r.reason {
        let mut lines = reason_summary(reason, &r.id).into_iter();
        let first = lines.next().unwrap_or_default();
        let _ = writeln!(out, "  {} {first}", view.p(Tone::Dim, "reason:"));
        for l in lines {
            let _ = writeln!(out, "  {l}");
        }
    }
    for hint in hints(s) {
        let _ = writeln!(out, "  {}", view.p(Tone::Dim, hint));
    }
    out
}

/// Lines of a reason shown under a stopped run: up to its first blank line, at most
/// [`REASON_LINES`]. A failed verification's reason leads with the command, its last
/// meaningful line and the lines that say what failed; the raw tail after the blank line is
/// for the agent's next attempt, and the whole output is one command away: its artifact line
/// (`its whole output: verify/…`) is given as the command that reads it, for run `run`.
pub fn reason_summary(reason: &str, run: &str) -> Vec<String> {
    reason_lines(reason)
        .into_iter()
        .map(|l| match l.trim_start().strip_prefix(WHOLE_OUTPUT) {
            Some(name) => format!(
                "whole output: crewctl cat {} {}",
                super::ids::hint(run),
                name.trim()
            ),
            None => l.to_string(),
        })
        .collect()
}

/// The lines of a reason a view shows, as they are.
pub fn reason_lines(reason: &str) -> Vec<&str> {
    reason
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .take(REASON_LINES)
        .collect()
}

/// How a failed check's reason names the artifact with its whole output
/// (`crew_core::checks::failure`).
const WHOLE_OUTPUT: &str = "its whole output: ";

/// Lines of a run's reason shown, at most.
const REASON_LINES: usize = 10;

/// What the user can do next with a stopped run. Runs are named by the random part of their
/// id, tasks by their own id wherever one is known.
pub fn hints(s: &StatusResult) -> Vec<String> {
    let id = super::ids::hint(&s.run.id);
    let mut v = vec![];
    let waiting: Vec<&TaskView> = s
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Waiting)
        .collect();
    for t in &waiting {
        v.push(format!(
            "answer {}: crewctl respond {id} {} '<message>'",
            t.id, t.id
        ));
    }
    let first = |st: TaskStatus| s.tasks.iter().find(|t| t.status == st);
    match s.run.status {
        RunStatus::Blocked if s.run.approval == "pending" => {
            if let Some(plan) = super::runs::plan_to_read(&s.tasks) {
                v.push(format!("read the plan: crewctl cat {id} {plan}"));
            }
            v.push(format!(
                "then: crewctl approve {id}   or: crewctl reject {id}"
            ));
        }
        RunStatus::Failed | RunStatus::Cancelled => {
            let task = first(TaskStatus::Failed)
                .or_else(|| first(TaskStatus::NeedsAttention))
                .or_else(|| first(TaskStatus::Cancelled));
            match task {
                Some(t) => {
                    v.push(format!(
                        "details: crewctl status {id} · logs: crewctl logs {id} {}",
                        t.id
                    ));
                    // Unless the lines of the reason shown above already give it.
                    let shown = s
                        .run
                        .reason
                        .as_deref()
                        .map(reason_lines)
                        .unwrap_or_default();
                    let said = |a: &&str| {
                        shown.iter().any(|l| {
                            l.trim_start().strip_prefix(WHOLE_OUTPUT).map(str::trim) == Some(*a)
                        })
                    };
                    if let Some(a) = failed_check_output(t).filter(|a| !said(a)) {
                        v.push(format!("whole output: crewctl cat {id} {a}"));
                    }
                }
                None => v.push(format!("details: crewctl status {id}")),
            }
            // A run its budget stopped goes on only with a larger one (`team.resume` refuses
            // otherwise).
            if s.run.reason.as_deref() == Some("budget_exceeded") {
                v.push(format!(
                    "continue with a larger budget: crewctl resume {id} --budget-tokens N"
                ));
            } else {
                v.push(format!("continue: crewctl resume {id}"));
            }
        }
        RunStatus::Completed => v.push(format!("report: crewctl summary {id}")),
        _ if waiting.is_empty() => v.push(format!("details: crewctl status {id}")),
        _ => {}
    }
    let judged = s
        .tasks
        .iter()
        .find(|t| t.status == TaskStatus::NeedsAttention && t.verdict.is_some());
    if let Some(t) = judged {
        v.push(format!(
            "{}'s fix rounds are spent: read the findings (crewctl status {id}); one more round: crewctl resume {id}",
            t.id
        ));
    } else if let Some(t) = first(TaskStatus::NeedsAttention) {
        v.push(format!(
            "{} needs attention: crewctl status {id} · crewctl logs {id} {}; then crewctl resume {id}",
            t.id, t.id
        ));
    }
    v
}

/// The kept output of the verification command a task's last attempt failed on.
fn failed_check_output(t: &TaskView) -> Option<&str> {
    if !t
        .error
        .as_deref()
        .is_some_and(|e| e.starts_with("verification failed"))
    {
        return None;
    }
    let attempt = format!(".attempt-{}.", t.attempts);
    t.artifacts
        .iter()
        .rev()
        .map(|a| a.name.as_str())
        .find(|n| n.starts_with("verify/") && n.contains(&attempt))
}

/// `02_plan added 3 tasks: dot-case, path-case, changelog` (issue 32: a fan-out was never
/// announced, the header's count just grew).
fn expanded_note(by: Option<&str>, ids: &[String]) -> Change {
    let n = ids.len();
    let shown: Vec<&str> = ids.iter().take(12).map(String::as_str).collect();
    let more = if n > shown.len() {
        format!(", … ({} more)", n - shown.len())
    } else {
        String::new()
    };
    Change::Note {
        tone: Tone::Active,
        text: format!(
            "{} added {n} task{}: {}{more}",
            by.unwrap_or("a fan-out step"),
            if n == 1 { "" } else { "s" },
            shown.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::view;
    use serde_json::json;

    fn ev(seq: u64, secs: u32, kind: &str, task: Option<&str>, data: Value) -> Event {
        Event {
            seq,
            run_seq: seq,
            time: format!("2026-03-10T11:55:{secs:02}Z"),
            kind: kind.into(),
            run_id: Some("r-1".into()),
            task_id: task.map(String::from),
            message: None,
            data,
        }
    }

    fn plan() -> Vec<PlannedTaskView> {
        ["01_explore:explorer", "02_execute:executor"]
            .iter()
            .map(|s| {
                let (id, role) = s.split_once(':').unwrap();
                PlannedTaskView {
                    id: id.into(),
                    step_id: id.into(),
                    role: role.into(),
                    agent: role.into(),
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
                }
            })
            .collect()
    }

    fn usage(input: u64, cost: f64) -> Value {
        json!({"input": input, "output": 100, "cacheRead": 0, "cacheWrite": 0, "cost": cost, "turns": 1})
    }

    fn script() -> Vec<Event> {
        vec![
            ev(10, 0, "run.started", None, json!({})),
            ev(
                11,
                1,
                "task.started",
                Some("01_explore"),
                json!({"attempt": 1, "runtime": "fake"}),
            ),
            ev(
                12,
                2,
                "task.progress",
                Some("01_explore"),
                json!({"attempt": 1, "usage": usage(900, 0.001), "currentTool": "read"}),
            ),
            ev(
                13,
                5,
                "task.completed",
                Some("01_explore"),
                json!({"attempt": 1, "usage": usage(1900, 0.002), "artifacts": [{"name": "results/01_explore.txt", "kind": "result", "bytes": 10, "sha256": "x"}]}),
            ),
            ev(
                14,
                6,
                "task.started",
                Some("02_execute"),
                json!({"attempt": 1}),
            ),
            ev(
                15,
                8,
                "task.retrying",
                Some("02_execute"),
                json!({"attempt": 1, "usage": usage(500, 0.0005), "reason": "model overloaded", "delayMs": 1500}),
            ),
            ev(
                16,
                10,
                "task.started",
                Some("02_execute"),
                json!({"attempt": 2}),
            ),
            ev(
                17,
                11,
                "run.budget_warning",
                None,
                json!({"used": 80000, "total": 100000}),
            ),
            ev(
                18,
                20,
                "task.failed",
                Some("02_execute"),
                json!({"attempt": 2, "usage": usage(700, 0.0007), "error": "worker crashed with no output"}),
            ),
            ev(
                19,
                21,
                "run.failed",
                None,
                json!({"reason": "task 02_execute failed"}),
            ),
        ]
    }

    #[test]
    fn applies_a_run_and_renders_plain_lines() {
        let v = view(100);
        let mut f = Follow::new("r-1").with_plan(&plan());
        let mut lines = vec![];
        let mut stops = vec![];
        for e in script() {
            for c in f.apply(&e) {
                if let Change::RunStopped(s) = &c {
                    stops.push(*s);
                }
                if let Some(l) = plain_line(&v, &f, &c, parse_time(&e.time)) {
                    lines.push(l);
                }
            }
        }
        assert_eq!(stops, vec![RunStatus::Failed]);
        assert_eq!(f.tasks[0].status, TaskStatus::Completed);
        assert_eq!(f.tasks[0].result.as_deref(), Some("results/01_explore.txt"));
        assert_eq!(f.tasks[1].status, TaskStatus::Failed);
        assert_eq!(f.tasks[1].attempt, 2);
        // Both attempts of 02_execute count: 600 + 800 tokens.
        assert_eq!(usage_tokens(&f.tasks[1].usage()), 1400);
        assert_eq!(f.counts(), (1, 0, 2));
        assert_eq!(f.last_seq, 19);
        insta::assert_snapshot!(lines.join("\n"));
    }

    #[test]
    fn worktree_tasks_show_branch_and_diffstat_as_they_finish() {
        let run = "team_20260310115500_3f9a1c2e00001111";
        let mut f = Follow::new(run).with_plan(&plan());
        let commit = |task: &str, start: &str, commit: &str, files: u64| {
            json!({"branch": format!("crew/tasks/{run}/{task}"), "start": start,
                   "commit": commit, "files": files, "insertions": 12, "deletions": 3})
        };
        let mut events = vec![
            ev(
                1,
                0,
                "task.started",
                Some("01_explore"),
                json!({"attempt": 1}),
            ),
            ev(
                2,
                4,
                "task.completed",
                Some("01_explore"),
                json!({"attempt": 1, "usage": usage(1900, 0.002),
                      "commit": commit("01_explore", "aaa", "aaa", 0)}),
            ),
            ev(
                3,
                5,
                "task.started",
                Some("02_execute"),
                json!({"attempt": 1}),
            ),
            ev(
                4,
                35,
                "task.completed",
                Some("02_execute"),
                json!({"attempt": 1, "usage": usage(5200, 0.011),
                      "commit": commit("02_execute", "aaa", "bbb", 2)}),
            ),
        ];
        for e in &mut events {
            e.run_id = Some(run.into());
        }
        let out = crate::render::fixtures::at_80_and_160(|v| {
            let mut f = f.clone();
            let mut lines = vec![];
            for e in &events {
                for c in f.apply(e) {
                    if let Some(l) = plain_line(v, &f, &c, parse_time(&e.time)) {
                        lines.push(l);
                    }
                }
            }
            lines.join("\n")
        });
        for (w, part) in [(80, 0), (160, 1)] {
            let section = out.split("── ").nth(part + 1).unwrap();
            crate::render::fixtures::assert_fits(section, w);
        }
        insta::assert_snapshot!(out);
        for e in &events {
            f.apply(e);
        }
        assert_eq!(f.tasks[1].commit.as_ref().unwrap().files, 2);
        assert!(f.tasks[0].commit.as_ref().unwrap().unchanged);
    }

    #[test]
    fn ignores_repeats_and_other_runs() {
        let mut f = Follow::new("r-1").with_plan(&plan());
        let e = ev(
            11,
            1,
            "task.started",
            Some("01_explore"),
            json!({"attempt": 1}),
        );
        assert_eq!(f.apply(&e), vec![Change::Started(0)]);
        assert_eq!(f.apply(&e), vec![], "a replayed seq is applied once");
        let mut other = ev(
            12,
            2,
            "task.started",
            Some("01_explore"),
            json!({"attempt": 1}),
        );
        other.run_id = Some("r-2".into());
        assert_eq!(f.apply(&other), vec![]);
        assert_eq!(f.last_seq, 12, "seen seqs advance even for other runs");
        let unknown = ev(13, 3, "task.started", Some("09_new"), json!({}));
        assert_eq!(
            f.apply(&unknown),
            vec![Change::Started(2)],
            "unknown tasks are added"
        );
    }

    #[test]
    fn a_fix_round_has_its_line_and_the_verdict_shows_on_the_judge() {
        let mut f = Follow::new("r-1").with_plan(&plan());
        let done = ev(
            11,
            1,
            "task.completed",
            Some("02_execute"),
            json!({"attempt": 1, "usage": usage(1, 0.0),
                   "verdict": {"verdict": "fail", "findings": [{"title": "t"}]}}),
        );
        assert_eq!(f.apply(&done), vec![Change::Finished(1)]);
        assert_eq!(f.tasks[1].note.as_deref(), Some("fail, 1 finding"));
        // Its line is not marked as a success (issue 30: `✓ 04_verify │ FAIL`).
        let line = task_done(&crate::render::fixtures::view(120), &f, &f.tasks[1], 10);
        assert!(line.starts_with("✗ 02_execute"), "{line}");
        let mut added = ev(
            12,
            2,
            "task.fix_added",
            Some("02_execute"),
            json!({"task": {"id": "_fix-02_execute-1", "role": "executor"}, "round": 1}),
        );
        added.message = Some("02_execute: fail, 1 finding → _fix-02_execute-1".into());
        assert_eq!(
            f.apply(&added),
            vec![Change::Note {
                tone: Tone::Warn,
                text: "02_execute: fail, 1 finding → _fix-02_execute-1".into()
            }]
        );
        assert_eq!(f.tasks[2].id, "_fix-02_execute-1");
        assert_eq!(f.tasks[2].role, "executor");
        assert_eq!(
            f.tasks[1].status,
            TaskStatus::Queued,
            "the judge waits again"
        );
    }

    /// A candidate whose checks failed completes ruled out: its line says so, marked as no
    /// success; one that passed is a plain completion.
    #[test]
    fn a_candidate_ruled_out_by_its_checks_is_marked_and_says_which() {
        let mut f = Follow::new("r-1").with_plan(&plan());
        let check = |code: i64| {
            json!({"attempt": 1, "usage": usage(1, 0.0), "verification": [
                {"command": "cargo test", "exitCode": 0, "durationMs": 5, "tail": "", "outputBytes": 0, "artifact": "a"},
                {"command": "test -f ok.txt", "exitCode": code, "durationMs": 5, "tail": "", "outputBytes": 0, "artifact": "b"}]})
        };
        f.apply(&ev(11, 1, "task.completed", Some("02_execute"), check(1)));
        assert_eq!(
            f.tasks[1].note.as_deref(),
            Some("out: `test -f ok.txt` exited with 1")
        );
        let line = task_done(&crate::render::fixtures::view(120), &f, &f.tasks[1], 10);
        assert!(line.starts_with("✗ 02_execute"), "{line}");
        f.apply(&ev(12, 2, "task.completed", Some("01_explore"), check(0)));
        let line = task_done(&crate::render::fixtures::view(120), &f, &f.tasks[0], 10);
        assert!(line.starts_with("✓ 01_explore"), "{line}");
    }

    #[test]
    fn a_resolve_task_joins_the_list_and_the_task_that_needed_it_waits() {
        let mut f = Follow::new("r-1").with_plan(&plan());
        let mut added = ev(
            11,
            1,
            "task.resolve_added",
            Some("02_execute"),
            json!({"task": {"id": "_resolve-02_execute-1", "role": "resolver"},
                   "conflict": {"paths": ["src/lib.rs"], "sides": ["a", "b"]}}),
        );
        added.message =
            Some("02_execute: conflict in src/lib.rs (a × b) → _resolve-02_execute-1".into());
        assert_eq!(
            f.apply(&added),
            vec![Change::Note {
                tone: Tone::Warn,
                text: "02_execute: conflict in src/lib.rs (a × b) → _resolve-02_execute-1".into()
            }]
        );
        assert_eq!(f.tasks[2].id, "_resolve-02_execute-1");
        assert_eq!(f.tasks[2].role, "resolver");
        assert_eq!(f.tasks[1].status, TaskStatus::Queued);
    }

    /// Issue 36: a step with candidates shows the step's usage, its candidates' with its own
    /// (what `crewctl status` shows), whether it was planned or added by a fan-out; the run's
    /// total counts each task once.
    #[test]
    fn a_step_with_candidates_shows_its_candidates_usage() {
        let v = view(120);
        let mut p = plan();
        let cand = |k: u32| {
            let mut t = p[1].clone();
            t.id = format!("_cand-02_execute-{k}");
            t
        };
        let (c1, c2) = (cand(1), cand(2));
        p[1].depends_on = vec!["01_explore".into(), c1.id.clone(), c2.id.clone()];
        p.insert(1, c2);
        p.insert(1, c1);
        let mut f = Follow::new("r-1").with_plan(&p);
        for (seq, id) in [(11, "_cand-02_execute-1"), (13, "_cand-02_execute-2")] {
            f.apply(&ev(seq, 1, "task.started", Some(id), json!({"attempt": 1})));
            f.apply(&ev(
                seq + 1,
                2,
                "task.completed",
                Some(id),
                json!({"attempt": 1, "usage": usage(1000, 0.01)}),
            ));
        }
        f.apply(&ev(
            30,
            3,
            "task.candidate_chosen",
            Some("02_execute"),
            json!({"choice": {"index": 1, "candidate": "_cand-02_execute-1", "by": "smallest",
                              "reason": "smallest"}}),
        ));
        let sel = &f.tasks[3];
        assert_eq!(sel.id, "02_execute");
        assert_eq!(usage_tokens(&f.task_usage(sel)), 2200);
        let line = task_done(&v, &f, sel, 20);
        assert!(
            line.contains("2.2k tok") && line.contains("$0.0200"),
            "{line}"
        );
        assert_eq!(
            usage_tokens(&f.usage()),
            2200,
            "each task once in the total"
        );

        // Added by a fan-out step: the selector names its candidates in the event.
        let mut f = Follow::new("r-1").with_plan(&plan());
        f.apply(&ev(
            40,
            1,
            "task.expanded",
            Some("01_explore"),
            json!({"tasks": [
                {"id": "_cand-x-1", "role": "executor"},
                {"id": "x", "role": "executor", "candidates":
                    {"kind": "selector", "select": "smallest", "candidates": ["_cand-x-1"], "inputs": []}}
            ]}),
        ));
        f.apply(&ev(
            41,
            2,
            "task.completed",
            Some("_cand-x-1"),
            json!({"attempt": 1, "usage": usage(1000, 0.01)}),
        ));
        let x = f.tasks.iter().find(|t| t.id == "x").unwrap();
        assert_eq!(x.members, ["_cand-x-1"]);
        assert_eq!(usage_tokens(&f.task_usage(x)), 1100);
    }

    #[test]
    fn a_candidate_choice_ends_the_step_s_row_with_a_line() {
        let mut f = Follow::new("r-1").with_plan(&plan());
        let mut chosen = ev(
            11,
            1,
            "task.candidate_chosen",
            Some("02_execute"),
            json!({"choice": {"index": 2, "candidate": "_cand-02_execute-2", "by": "smallest",
                              "reason": "candidate 2 is the smallest"}}),
        );
        chosen.message =
            Some("chose _cand-02_execute-2 (smallest): candidate 2 is the smallest".into());
        let changes = f.apply(&chosen);
        assert_eq!(changes[0], Change::Finished(1));
        assert_eq!(
            changes[1],
            Change::Note {
                tone: Tone::Accent,
                text:
                    "02_execute: chose _cand-02_execute-2 (smallest): candidate 2 is the smallest"
                        .into()
            }
        );
        assert_eq!(f.tasks[1].status, TaskStatus::Completed);
        assert_eq!(f.tasks[1].note.as_deref(), Some("chose 2 (smallest)"));
    }

    #[test]
    fn running_line_and_waiting() {
        let v = view(100);
        let mut f = Follow::new("r-1").with_plan(&plan());
        for e in &script()[..3] {
            f.apply(e);
        }
        assert_eq!(
            task_running(&v, &f, &f.tasks[0]),
            "explorer · ▸ read · 1k tok"
        );
        let w = ev(
            30,
            40,
            "task.waiting",
            Some("02_execute"),
            json!({"question": "Which branch?"}),
        );
        let changes = f.apply(&w);
        assert_eq!(
            changes,
            vec![Change::Waiting {
                task: 1,
                question: "Which branch?".into()
            }]
        );
        let line = plain_line(&v, &f, &changes[0], None).unwrap();
        assert_eq!(line, "? 02_execute  asks: Which branch?\n  answer with: crewctl respond r-1 02_execute '<message>'");
    }

    #[test]
    fn excerpts_are_cut() {
        let v = view(30);
        let text = (1..=12)
            .map(|i| format!("line {i} with a fairly long tail of words"))
            .collect::<Vec<_>>()
            .join("\n");
        insta::assert_snapshot!(excerpt(&v, &text, 3), @r"
          │ line 1 with a fairly long…
          │ line 2 with a fairly long…
          │ line 3 with a fairly long…
          │ … 9 more lines
        ");
        assert_eq!(excerpt(&v, "  \n ", 3), "");
    }

    /// The closing headline never wraps in the middle of a word: where it does not fit, its
    /// figures go on a line of their own.
    #[test]
    fn the_closing_headline_fits_its_terminal() {
        let mut s = crate::render::runs::tests::status_fixture();
        s.run.status = RunStatus::Blocked;
        s.run.verdict = Some("pass".into());
        s.run.reason = None;
        for w in [60u16, 100, 200] {
            let out = final_summary(&view(w), &s);
            crate::render::fixtures::assert_fits(
                &out.lines().take(2).collect::<Vec<_>>().join("\n"),
                w,
            );
            assert!(out.contains("verdict: pass"), "{out}");
        }
        let wide = final_summary(&view(200), &s);
        assert!(
            wide.lines().next().unwrap().ends_with("verdict: pass"),
            "{wide}"
        );
    }

    #[test]
    fn summaries_and_hints() {
        let v = view(100);
        let mut s = crate::render::runs::tests::status_fixture();
        s.run.status = RunStatus::Failed;
        s.run.duration_ms = Some(125_000);
        s.run.reason = Some("task 02_plan failed".into());
        insta::assert_snapshot!(final_summary(&v, &s));
        s.run.status = RunStatus::Blocked;
        s.run.approval = "pending".into();
        s.tasks.retain(|t| t.status != TaskStatus::Waiting);
        let h = hints(&s);
        assert!(
            h.iter()
                .any(|l| l.contains("crewctl approve 3f9a1c2e00001111")),
            "{h:?}"
        );
    }

    /// Issue 32 (5): a failed check's reason shows its summary (the command, its last
    /// meaningful line, the failing lines), not the raw tail after the blank line, and the
    /// whole output is one command away.
    #[test]
    fn a_failed_checks_reason_is_its_summary() {
        let v = view(100);
        let mut s = crate::render::runs::tests::status_fixture();
        s.run.status = RunStatus::Failed;
        let passing: String = (1..=80)
            .map(|i| format!("test case_{i} ... ok\n"))
            .collect();
        let error = format!(
            "verification failed: `cargo test` exited with 101: error: test failed\n  \
             test case_81 ... FAILED\n  error: test failed\n\
             its whole output: verify/02_plan.attempt-1.1.txt\n\n\
             the end of its output:\n{passing}test case_81 ... FAILED\nerror: test failed\n"
        );
        s.run.reason = Some(format!("task 02_plan failed: {error}"));
        let t = s.tasks.iter_mut().find(|t| t.id == "02_plan").unwrap();
        t.status = TaskStatus::Failed;
        t.attempts = 1;
        t.error = Some(error.clone());
        t.artifacts.push(crew_api::types::ArtifactInfo {
            name: "verify/02_plan.attempt-1.1.txt".into(),
            kind: "verify".into(),
            task_id: Some("02_plan".into()),
            bytes: 2000,
            sha256: String::new(),
        });
        let out = final_summary(&v, &s);
        assert!(!out.contains("... ok"), "{out}");
        assert!(
            out.contains(
                "  reason: task 02_plan failed: verification failed: `cargo test` exited with 101: error: test failed\n    test case_81 ... FAILED\n"
            ),
            "{out}"
        );
        let cat = "whole output: crewctl cat 3f9a1c2e00001111 verify/02_plan.attempt-1.1.txt";
        // Once: the reason's artifact line is the command (not the name, then the command).
        assert_eq!(out.matches(cat).count(), 1, "{out}");
        assert!(!out.contains("its whole output"), "{out}");
        // A reason that does not show it (another task's, or cut before it): the hint does.
        s.run.reason = Some("task 02_plan failed; see its check".into());
        let out = final_summary(&v, &s);
        assert_eq!(out.matches(cat).count(), 1, "{out}");
        s.run.reason = Some(format!("task 02_plan failed: {error}"));
        // `crewctl status` gives the same command (README: one command away).
        let status = crate::render::runs::status(&v, &s);
        assert!(status.contains(cat), "{status}");
        assert!(!status.contains("its whole output"), "{status}");
    }

    /// Issue 31: one verb continues a run whose task needs attention (a conflict to resolve,
    /// say): the hint says `crewctl resume`, as crew's messages and the follow view's key do.
    #[test]
    fn a_task_needing_attention_is_continued_with_resume() {
        let mut s = crate::render::runs::tests::status_fixture();
        s.run.status = RunStatus::Blocked;
        s.tasks.retain(|t| t.status != TaskStatus::Waiting);
        if let Some(t) = s.tasks.first_mut() {
            t.status = TaskStatus::NeedsAttention;
        }
        let h = hints(&s);
        assert!(
            h.iter()
                .any(|l| l.contains("needs attention")
                    && l.contains("crewctl resume 3f9a1c2e00001111")),
            "{h:?}"
        );
        assert!(!h.iter().any(|l| l.contains("retry")), "{h:?}");
    }

    /// Issue 32 (4): a fan-out is announced where it happens, naming the tasks it added, which
    /// join the list with their roles.
    #[test]
    fn a_fan_out_is_announced_live() {
        let mut f = Follow::new("r-1").with_plan(&plan());
        let added = json!({"tasks": [
            {"id": "dot-case", "role": "executor"},
            {"id": "path-case", "role": "executor"},
            {"id": "changelog", "role": "writer"},
        ], "dependents": ["02_execute"]});
        let changes = f.apply(&ev(20, 3, "task.expanded", Some("01_explore"), added));
        assert_eq!(
            changes,
            [Change::Note {
                tone: Tone::Active,
                text: "01_explore added 3 tasks: dot-case, path-case, changelog".into(),
            }]
        );
        let v = view(80);
        assert_eq!(
            plain_line(&v, &f, &changes[0], None).as_deref(),
            Some("• 01_explore added 3 tasks: dot-case, path-case, changelog")
        );
        assert_eq!(f.counts().2, 5);
        assert_eq!(
            f.tasks
                .iter()
                .find(|t| t.id == "changelog")
                .map(|t| t.role.as_str()),
            Some("writer")
        );
    }
}
