//! The tools: one `Name` per tool; its description, its input schema (from the params type it
//! parses) and its call. A new tool is one variant: the compiler then asks for the rest.
//!
//! The workspace tools (`team_diff`, `team_apply`) forward to `team.diff`/`team.apply`; the
//! patch is cut for a model's context (`crate::workspace::DIFF_CHARS`).

use crate::daemon::Daemon;
use crate::error::ToolError;
use crate::params::{parse, schema, ResultTool, RunTool};
use crate::render::{self, cut};
use crate::wait::{wait, Progress};
use crew_api::methods::*;
use crew_api::types::*;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Bytes of an artifact read before cutting it to a character bound; of a larger one, its
/// first `READ_BYTES` and its last `READ_BYTES / 2`.
const READ_BYTES: i64 = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name {
    Run,
    Plan,
    Wait,
    Status,
    Result,
    List,
    Resources,
    Cancel,
    Resume,
    Steer,
    Respond,
    Approve,
    Reject,
    Diff,
    Apply,
}

pub const ALL: &[Name] = &[
    Name::Run,
    Name::Wait,
    Name::Status,
    Name::Result,
    Name::List,
    Name::Resources,
    Name::Plan,
    Name::Cancel,
    Name::Resume,
    Name::Steer,
    Name::Respond,
    Name::Approve,
    Name::Reject,
    Name::Diff,
    Name::Apply,
];

impl Name {
    pub fn as_str(self) -> &'static str {
        match self {
            Name::Run => "team_run",
            Name::Plan => "team_plan",
            Name::Wait => "team_wait",
            Name::Status => "team_status",
            Name::Result => "team_result",
            Name::List => "team_list",
            Name::Resources => "resource_list",
            Name::Cancel => "team_cancel",
            Name::Resume => "team_resume",
            Name::Steer => "team_steer",
            Name::Respond => "team_respond",
            Name::Approve => "team_approve",
            Name::Reject => "team_reject",
            Name::Diff => "team_diff",
            Name::Apply => "team_apply",
        }
    }

    pub fn find(name: &str) -> Option<Name> {
        ALL.iter().copied().find(|n| n.as_str() == name)
    }

    fn description(self) -> &'static str {
        match self {
            Name::Run => "Hand a goal to a crew team: crewd plans the team's workflow into tasks and runs each with a real coding agent. By default waits until the run stops and returns its summary and final results (progress is reported while it runs); with wait=false returns the run id at once. `cwd` is the project directory (a relative path is taken from this server's directory). Teams and workflows: resource_list.",
            Name::Plan => "Show the tasks a run of this goal would execute (team, workflow, roles, dependencies), without running anything.",
            Name::Wait => "Wait until a run stops (finished, or blocked on a question or an approval) and return its result; reports progress while waiting. With timeoutMs, returns the run's status when the time is up (the run goes on).",
            Name::Status => "A run's status and its tasks: who is doing what, what failed and why, what waits for an answer.",
            Name::Result => "A finished run's result: the summary report plus the final tasks' results, bounded in size. With taskId, that task's result at more length.",
            Name::List => "Recent runs, newest first (filter by status; page with `before`).",
            Name::Resources => "The teams, workflows, agents and skills crew can use from `cwd` (default: this server's directory), with any problems in their files.",
            Name::Cancel => "Cancel a run: its running agents are stopped.",
            Name::Resume => "Continue a run: failed, cancelled, skipped and needs-attention tasks are queued again.",
            Name::Steer => "Send a message to a task's agent: live if it is running on a runtime that allows it, else at its next attempt.",
            Name::Respond => "Answer a task that is waiting for input (its question is in team_status); the run continues.",
            Name::Approve => "Approve the plan of a run waiting for plan approval; it continues at once.",
            Name::Reject => "Reject the plan of a run waiting for plan approval; the run is cancelled.",
            Name::Diff => "A worktree run's change (workspace: worktree): diffstat and patch of its integrated branch, or of one task's commit with taskId; stat=true for the diffstat only. The patch is cut to fit a model's context.",
            Name::Apply => "Bring a finished worktree run's change into the user's current branch (a merge, or one commit with squash=true). Refused when the user's tree has uncommitted changes or their branch conflicts with the run's; the error says why.",
        }
    }

    fn schema(self) -> Arc<JsonObject> {
        match self {
            Name::Run => schema::<RunTool>(),
            Name::Plan => schema::<RunParams>(),
            Name::Wait => schema::<WaitParams>(),
            Name::Status => schema::<RunIdParams>(),
            Name::Resume => schema::<ResumeParams>(),
            Name::Result => schema::<ResultTool>(),
            Name::List => schema::<ListParams>(),
            Name::Resources => schema::<ResourceListParams>(),
            Name::Cancel => schema::<CancelParams>(),
            Name::Steer | Name::Respond => schema::<TaskMessageParams>(),
            Name::Approve | Name::Reject => schema::<ApproveParams>(),
            Name::Diff => schema::<DiffParams>(),
            Name::Apply => schema::<ApplyParams>(),
        }
    }

    fn annotations(self) -> ToolAnnotations {
        let a = ToolAnnotations::new();
        match self {
            Name::Plan
            | Name::Wait
            | Name::Status
            | Name::Result
            | Name::List
            | Name::Resources
            | Name::Diff => a.read_only(true),
            // Apply changes the user's branch and tree: the one tool outside crew's state.
            Name::Cancel | Name::Reject | Name::Apply => a.read_only(false).destructive(true),
            Name::Run | Name::Resume | Name::Steer | Name::Respond | Name::Approve => {
                a.read_only(false).destructive(false)
            }
        }
    }

    pub fn tool(self) -> Tool {
        Tool::new(self.as_str(), self.description(), self.schema())
            .with_annotations(self.annotations())
    }
}

/// The longest wait crewd takes in one `team.wait` (an hour).
const MAX_WAIT_MS: i64 = 3_600_000;

/// What a call needs besides its arguments.
pub struct Call<'a> {
    pub daemon: &'a Daemon,
    pub cwd: &'a Path,
    pub progress: Option<Progress>,
    pub ct: CancellationToken,
}

pub async fn call(name: Name, args: Option<JsonObject>, c: Call<'_>) -> Result<String, ToolError> {
    let d = c.daemon;
    match name {
        Name::Run => {
            let mut p: RunTool = parse(args)?;
            p.run.cwd = absolute(c.cwd, &p.run.cwd);
            // Checked before the run starts: refused after it, the agent would not know the
            // run exists and would start it again.
            if let Some(t) = p.timeout_ms.filter(|t| !(0..=MAX_WAIT_MS).contains(t)) {
                return Err(ToolError::Params(format!(
                    "timeoutMs {t}: must be between 0 and {MAX_WAIT_MS}; nothing was started"
                )));
            }
            let started = d.call::<TeamRun>(&p.run).await?;
            if p.wait == Some(false) {
                return Ok(render::started(&started));
            }
            waited(&c, &started.run_id, p.timeout_ms)
                .await
                .map_err(|e| ToolError::AfterStart {
                    run_id: started.run_id.clone(),
                    source: Box::new(e),
                })
        }
        Name::Plan => {
            let mut p: RunParams = parse(args)?;
            p.cwd = absolute(c.cwd, &p.cwd);
            Ok(plan_text(&d.call::<TeamPlan>(&p).await?))
        }
        Name::Wait => {
            let p: WaitParams = parse(args)?;
            waited(&c, &p.run_id, p.timeout_ms).await
        }
        Name::Status => {
            let p: RunIdParams = parse(args)?;
            Ok(render::status(&d.call::<TeamStatus>(&p).await?))
        }
        Name::Result => {
            let p: ResultTool = parse(args)?;
            match p.task_id {
                Some(task) => task_result(d, &p.run.run_id, &task).await,
                None => run_result(d, &p.run.run_id).await,
            }
        }
        Name::List => {
            let p: ListParams = parse(args)?;
            Ok(list_text(&d.call::<TeamList>(&p).await?))
        }
        Name::Resources => {
            let mut p: ResourceListParams = parse(args)?;
            let cwd = p.cwd.take().unwrap_or_else(|| ".".into());
            p.cwd = Some(absolute(c.cwd, &cwd));
            Ok(resources_text(&d.call::<ResourceList>(&p).await?))
        }
        Name::Cancel => {
            let p: CancelParams = parse(args)?;
            let r = d.call::<TeamCancel>(&p).await?;
            Ok(format!(
                "Run {}: {}; {} task(s) cancelled.",
                p.run_id,
                r.status.as_str(),
                r.cancelled_task_ids.len()
            ))
        }
        Name::Resume => {
            let p: ResumeParams = parse(args)?;
            let r = d.call::<TeamResume>(&p).await?;
            Ok(format!(
                "Run {}: {}; queued again: {}. Wait for it with team_wait.",
                p.run_id,
                r.status.as_str(),
                list_or_none(&r.requeued_task_ids)
            ))
        }
        Name::Steer => {
            let p: TaskMessageParams = parse(args)?;
            let r = d.call::<TeamSteer>(&p).await?;
            Ok(match (r.delivered, &r.note) {
                (Delivered::Live, _) => format!("Delivered live to task {}.", p.task_id),
                // The note says the running worker will not hear it (its runtime cannot).
                (Delivered::Queued, Some(note)) => {
                    format!("Queued for task {}'s next attempt: {note}.", p.task_id)
                }
                (Delivered::Queued, None) => {
                    format!("Queued for task {}: it gets it when it starts.", p.task_id)
                }
            })
        }
        Name::Respond => {
            let p: TaskMessageParams = parse(args)?;
            let r = d.call::<TeamRespond>(&p).await?;
            Ok(format!(
                "Answered task {}: it is {} again. Wait for the run with team_wait.",
                p.task_id,
                r.status.as_str()
            ))
        }
        Name::Approve | Name::Reject => {
            let p: ApproveParams = parse(args)?;
            let r = if name == Name::Approve {
                d.call::<TeamApprove>(&p).await?
            } else {
                d.call::<TeamReject>(&p).await?
            };
            Ok(format!("Run {}: {}.", p.run_id, r.status.as_str()))
        }
        Name::Diff => {
            let mut p: DiffParams = parse(args)?;
            // More than a model can read is never fetched: the cut below keeps the head.
            let most =
                i64::try_from(crate::workspace::DIFF_CHARS.saturating_mul(4)).unwrap_or(i64::MAX);
            p.limit = Some(p.limit.map_or(most, |l| l.min(most)));
            let r = d.call::<TeamDiff>(&p).await?;
            Ok(crate::workspace::diff(&p.run_id, p.task_id.as_deref(), &r))
        }
        Name::Apply => {
            let p: ApplyParams = parse(args)?;
            let r = d.call::<TeamApply>(&p).await?;
            Ok(crate::workspace::applied(&p.run_id, &r))
        }
    }
}

/// A relative `cwd` is taken from the server's directory, which MCP clients set to the
/// project; crewd itself wants an absolute one.
fn absolute(base: &Path, cwd: &str) -> String {
    let p = Path::new(cwd);
    if p.is_absolute() {
        return cwd.to_string();
    }
    let joined = base.join(p);
    // `.` and `..` are resolved when the directory exists, so crewd sees the plain path.
    joined
        .canonicalize()
        .unwrap_or(joined)
        .to_string_lossy()
        .into_owned()
}

/// Waits (with progress), then the result if the run stopped, else its status.
async fn waited(c: &Call<'_>, run_id: &str, timeout_ms: Option<i64>) -> Result<String, ToolError> {
    let progress = c.progress.as_ref().map(|p| Progress {
        peer: p.peer.clone(),
        token: p.token.clone(),
    });
    let w = wait(c.daemon, run_id, timeout_ms, progress, c.ct.clone()).await?;
    if w.finished {
        run_result(c.daemon, run_id).await
    } else {
        let s = c
            .daemon
            .call::<TeamStatus>(&RunIdParams {
                run_id: run_id.to_string(),
            })
            .await?;
        Ok(format!(
            "Stopped waiting (timeout); the run goes on.\n{}",
            render::status(&s)
        ))
    }
}

/// A result as a model gets it: the whole text, or of a larger one its head and its tail
/// (never the head of a page passed off as the end).
struct Excerpt {
    head: String,
    tail: Option<String>,
    bytes: u64,
}

impl Excerpt {
    /// At most about `max` characters of it.
    fn text(&self, max: usize) -> String {
        match &self.tail {
            None => cut(self.head.trim(), max),
            Some(tail) => {
                render::cut_ends(self.head.trim_start(), tail.trim_end(), self.bytes, max)
            }
        }
    }
}

async fn read_result(d: &Daemon, run_id: &str, name: &str) -> Result<Excerpt, ToolError> {
    let page = |offset: Option<i64>, limit: i64| ArtifactParams {
        run_id: run_id.to_string(),
        name: name.to_string(),
        offset,
        limit: Some(limit),
    };
    let a = d.call::<TeamArtifact>(&page(None, READ_BYTES)).await?;
    if !a.truncated {
        return Ok(Excerpt {
            head: a.content,
            tail: None,
            bytes: a.bytes,
        });
    }
    let half = READ_BYTES / 2;
    let from = i64::try_from(a.bytes)
        .unwrap_or(i64::MAX)
        .saturating_sub(half);
    let t = d.call::<TeamArtifact>(&page(Some(from), half)).await?;
    // A page that starts inside a character begins with its replacement.
    let tail = t.content.trim_start_matches('\u{FFFD}').to_string();
    Ok(Excerpt {
        head: a.content,
        tail: Some(tail),
        bytes: a.bytes,
    })
}

/// The summary report, then the final tasks' results within `FINAL_TOTAL_CHARS`.
async fn run_result(d: &Daemon, run_id: &str) -> Result<String, ToolError> {
    let id = RunIdParams {
        run_id: run_id.to_string(),
    };
    let status = d.call::<TeamStatus>(&id).await?;
    let summary = d.call::<TeamSummary>(&id).await?;
    let mut out = cut(&summary.markdown, render::SUMMARY_CHARS);
    let mut budget = render::FINAL_TOTAL_CHARS;
    let mut section = String::new();
    let mut left_out = Vec::new();
    for t in render::final_tasks(&status) {
        let Some(name) = render::result_name(t) else {
            continue;
        };
        if budget < 500 {
            left_out.push(t.id.as_str());
            continue;
        }
        let a = read_result(d, run_id, name).await?;
        let max = budget.min(render::FINAL_RESULT_CHARS);
        let text = a.text(max);
        budget = budget.saturating_sub(text.chars().count());
        let _ = writeln!(section, "\n### {} ({})\n\n{}", t.id, t.role, text);
    }
    if !section.is_empty() {
        out.push_str("\n## Final results\n");
        out.push_str(&section);
    }
    if !left_out.is_empty() {
        let _ = write!(
            out,
            "\nNot shown for size: {} (team_result with taskId).",
            left_out.join(", ")
        );
    }
    let next = render::next_step(&status);
    if !next.is_empty() {
        let _ = write!(out, "\n{next}");
    }
    Ok(out)
}

async fn task_result(d: &Daemon, run_id: &str, task_id: &str) -> Result<String, ToolError> {
    let status = d
        .call::<TeamStatus>(&RunIdParams {
            run_id: run_id.to_string(),
        })
        .await?;
    let Some(t) = status.tasks.iter().find(|t| t.id == task_id) else {
        let ids: Vec<&str> = status
            .tasks
            .iter()
            .take(render::MAX_TASK_LINES)
            .map(|t| t.id.as_str())
            .collect();
        let more = status.tasks.len().saturating_sub(ids.len());
        return Err(ToolError::Params(format!(
            "run {run_id} has no task `{}`; its tasks: {}{}",
            cut(task_id, 200),
            ids.join(", "),
            if more > 0 {
                format!(" … and {more} more")
            } else {
                String::new()
            }
        )));
    };
    let Some(name) = render::result_name(t) else {
        return Ok(format!(
            "Task {task_id} [{}] is {} and has no result yet.",
            t.role,
            t.status.as_str()
        ));
    };
    let a = read_result(d, run_id, name).await?;
    let mut out = format!(
        "Task {task_id} [{}] {} ({} bytes):\n\n",
        t.role,
        t.status.as_str(),
        a.bytes
    );
    out.push_str(&a.text(render::TASK_RESULT_CHARS));
    Ok(out)
}

fn list_or_none(ids: &[String]) -> String {
    if ids.is_empty() {
        "none".into()
    } else {
        ids.join(", ")
    }
}

fn plan_text(p: &PlanResult) -> String {
    let mut out = format!(
        "Team {} / workflow {} on runtime {}, concurrency {}; {} task(s):\n",
        p.team,
        p.workflow,
        p.runtime,
        p.concurrency,
        p.tasks.len()
    );
    for t in p.tasks.iter().take(render::MAX_TASK_LINES) {
        let _ = write!(out, "- {} [{} = {}]", t.id, t.role, t.agent);
        if !t.depends_on.is_empty() {
            let _ = write!(out, " after {}", t.depends_on.join(", "));
        }
        // What the role is for (issue 32 item 6): a verifier or reviewer that runs commands
        // is not a writer.
        if t.edits {
            out.push_str(" (edits files)");
        }
        if let Some(n) = t.adds_tasks {
            let _ = write!(out, " (fan-out: adds up to {n} tasks)");
        }
        if !t.skills.is_empty() {
            let _ = write!(out, " skills: {}", t.skills.join(", "));
        }
        out.push('\n');
    }
    if p.tasks.len() > render::MAX_TASK_LINES {
        let _ = writeln!(out, "- … {} more", p.tasks.len() - render::MAX_TASK_LINES);
    }
    diagnostics(&mut out, &p.diagnostics);
    out
}

fn list_text(l: &ListResult) -> String {
    if l.runs.is_empty() {
        return "No runs.".into();
    }
    let mut out = String::new();
    for r in &l.runs {
        let _ = writeln!(
            out,
            "- {} [{}] {}/{} ({}/{} tasks done) {}: {}",
            r.id,
            r.status.as_str(),
            r.team,
            r.workflow,
            r.tasks.completed,
            r.tasks.total,
            r.created_at,
            cut(r.goal.lines().next().unwrap_or_default(), 120)
        );
    }
    if let Some(next) = &l.next {
        let _ = write!(out, "More: team_list with before={next:?}.");
    }
    out
}

fn resources_text(r: &ResourceListResult) -> String {
    let mut out = String::new();
    for (title, entries) in [
        ("Teams", &r.teams),
        ("Workflows", &r.workflows),
        ("Agents", &r.agents),
        ("Skills", &r.skills),
    ] {
        if entries.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{title}:");
        for e in entries {
            let _ = writeln!(
                out,
                "- {} ({}): {}",
                e.name,
                e.source,
                cut(e.description.lines().next().unwrap_or_default(), 160)
            );
        }
    }
    diagnostics(&mut out, &r.diagnostics);
    out
}

fn diagnostics(out: &mut String, ds: &[Diagnostic]) {
    if ds.is_empty() {
        return;
    }
    let _ = writeln!(out, "Problems:");
    for d in ds.iter().take(20) {
        let line = d.line.map(|l| format!(":{l}")).unwrap_or_default();
        let _ = writeln!(out, "- {}{line}: {}", d.path, d.message);
    }
    if ds.len() > 20 {
        let _ = writeln!(out, "- … {} more", ds.len() - 20);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_listed_once_with_an_object_schema() {
        let mut names: Vec<&str> = ALL.iter().map(|n| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        for n in ALL {
            assert_eq!(Name::find(n.as_str()), Some(*n));
            let t = n.tool();
            assert_eq!(t.input_schema["type"], "object", "{}", n.as_str());
        }
    }

    /// A result larger than what is read shows its real end, and the marker counts what was
    /// left out of the whole, not of the page read.
    #[test]
    fn a_large_result_shows_its_head_and_its_real_tail() {
        let whole = Excerpt {
            head: format!("  {}  ", "a".repeat(300)),
            tail: None,
            bytes: 304,
        };
        assert_eq!(whole.text(1000), "a".repeat(300));
        let big = Excerpt {
            head: format!("START{}", "h".repeat(5000)),
            tail: Some(format!("{}END\n", "t".repeat(5000))),
            bytes: 1_000_000,
        };
        let text = big.text(200);
        assert!(text.chars().count() <= 200, "{}", text.chars().count());
        assert!(text.starts_with("START") && text.ends_with("END"), "{text}");
        let shown = text.len() - text.lines().nth(1).map_or(0, str::len) - 2;
        assert!(
            text.contains(&format!("[… {} bytes cut …]", 1_000_000 - shown)),
            "{text}"
        );
    }

    #[test]
    fn relative_cwd_is_taken_from_the_servers_directory() {
        let base = Path::new("/nonexistent/base");
        assert_eq!(absolute(base, "/abs"), "/abs");
        assert_eq!(absolute(base, "sub"), "/nonexistent/base/sub");
    }
}
