//! Verbs on existing runs: status, ls, logs, control (cancel, resume, retry, approve, reject,
//! steer, respond), artifacts, cat, summary, forget, prune, export, import.

use crate::cli::{LogsArgs, LsArgs, PruneArgs, RunStatusArg};
use crate::conn::Conn;
use crate::ctx::{out, outln, Ctx};
use crate::exit;
use crate::follow;
use crate::render::{events, runs as view_runs, transcript};
use crate::resolve::RunRef;
use crate::style::Tone;
use anyhow::Context as _;
use crew_api::methods::*;
use crew_api::types::*;
use std::path::{Path, PathBuf};

fn rid(run_id: &str) -> RunIdParams {
    RunIdParams {
        run_id: run_id.to_string(),
    }
}

pub async fn status(ctx: &Ctx, run: &RunRef, watch: bool) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    if watch {
        return watch_status(ctx, &conn, run_id).await;
    }
    let s = conn.call::<TeamStatus>(&rid(run_id)).await?;
    if ctx.json {
        ctx.json(&s)?;
    } else {
        outln(&view_runs::status(&ctx.view(), &s))?;
        if let Some(ws) = &s.workspace {
            outln(&crate::render::workspace::lines(&ctx.view(), ws))?;
        }
    }
    Ok(exit::SUCCESS)
}

/// `status --watch`: the status again after each of the run's events (and every second, for
/// the clocks), until it finishes. A terminal is redrawn in place; piped output gets each view
/// in turn (JSON: one status per line).
async fn watch_status(ctx: &Ctx, conn: &Conn, run_id: &str) -> anyhow::Result<u8> {
    use jsonrpsee::core::client::SubscriptionClientT;
    let last = conn
        .call::<DaemonStatus_>(&NoParams {})
        .await?
        .journal
        .last_seq;
    let params = serde_json::json!({ "runId": run_id, "afterSeq": last });
    let mut sub = conn
        .client
        .subscribe::<serde_json::Value, _>(
            TeamSubscribe::NAME,
            crew_api::client::ObjectParams(params),
            TeamSubscribe::UNSUBSCRIBE,
        )
        .await
        .map_err(|e| anyhow::anyhow!("cannot subscribe to run {run_id}: {e}"))?;
    let mut previous = String::new();
    loop {
        let s = conn.call::<TeamStatus>(&rid(run_id)).await?;
        if ctx.json {
            outln(&serde_json::to_string(&s)?)?;
        } else {
            let text = view_runs::status(&ctx.view(), &s);
            if ctx.stdout_tty {
                // Home and clear, then the view: one screen, redrawn.
                crate::ctx::out_after("\x1b[H\x1b[2J", &text)?;
            } else if text != previous {
                outln(&text)?;
            }
            previous = text;
        }
        if s.run.status.is_finished() {
            return Ok(exit::for_run(s.run.status, &s.tasks));
        }
        let tick = std::time::Duration::from_secs(1);
        if let Ok(None) = tokio::time::timeout(tick, sub.next()).await {
            // The subscription ended (the daemon dropped us): keep watching by the clock.
            tokio::time::sleep(tick).await;
        }
    }
}

fn status_filter(s: RunStatusArg) -> RunStatus {
    match s {
        RunStatusArg::Queued => RunStatus::Queued,
        RunStatusArg::Running => RunStatus::Running,
        RunStatusArg::Blocked => RunStatus::Blocked,
        RunStatusArg::Completed => RunStatus::Completed,
        RunStatusArg::Failed => RunStatus::Failed,
        RunStatusArg::Cancelled => RunStatus::Cancelled,
    }
}

pub async fn ls(ctx: &Ctx, a: LsArgs) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let before = match &a.before {
        Some(b) => Some(b.resolve(&conn).await?),
        None => None,
    };
    let mut params = ListParams {
        status: a.status.map(status_filter),
        limit: if a.all {
            Some(1000)
        } else {
            a.limit.map(i64::from)
        },
        before,
        team: None,
    };
    let mut result = conn.call::<TeamList>(&params).await?;
    if a.all {
        while let Some(next) = result.next.take() {
            params.before = Some(next);
            let page = conn.call::<TeamList>(&params).await?;
            result.runs.extend(page.runs);
            result.next = page.next;
        }
    }
    if ctx.json {
        ctx.json(&result)?;
    } else {
        out(&view_runs::list(&ctx.view(), &result))?;
    }
    Ok(exit::SUCCESS)
}

pub async fn logs(ctx: &Ctx, a: LogsArgs) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = a.run_id.resolve(&conn).await?;
    let through = a
        .blocks
        .through(ctx.stdin_tty && ctx.stdout_tty && !ctx.json);
    match a.task_id.as_deref() {
        None if a.follow => follow::follow_existing(ctx, conn, &run_id, None, through).await,
        None => run_events(ctx, &conn, &run_id, a.verbose).await,
        Some(task_id) => {
            let s = conn.call::<TeamStatus>(&rid(&run_id)).await?;
            let task = find_task(&s, task_id)?;
            if a.follow && matches!(task.status, TaskStatus::Queued | TaskStatus::Running) {
                let conn2 = ctx.connect().await?;
                let followed = follow::follow(
                    ctx,
                    conn2,
                    &run_id,
                    follow::Seed::Status(Box::new(s)),
                    Some(task_id),
                    through,
                )
                .await?;
                let s = conn.call::<TeamStatus>(&rid(&run_id)).await?;
                let shown = task_transcript(ctx, &conn, &s, task_id, a.attempt, a.verbose).await;
                // How the follow ended (a block, a failure) is the exit status, as for a run;
                // a task stopped before it started has no transcript to show.
                return match followed {
                    exit::SUCCESS => shown,
                    stopped => Ok(stopped),
                };
            }
            task_transcript(ctx, &conn, &s, task_id, a.attempt, a.verbose).await
        }
    }
}

fn find_task<'a>(s: &'a StatusResult, task_id: &str) -> anyhow::Result<&'a TaskView> {
    s.tasks.iter().find(|t| t.id == task_id).ok_or_else(|| {
        let ids: Vec<&str> = s.tasks.iter().map(|t| t.id.as_str()).collect();
        anyhow::Error::new(crate::exit::NotFound(format!(
            "run {} has no task {task_id} (tasks: {})",
            s.run.id,
            ids.join(", ")
        )))
    })
}

async fn run_events(ctx: &Ctx, conn: &Conn, run_id: &str, verbose: bool) -> anyhow::Result<u8> {
    let mut after: u64 = 0;
    let mut all = Vec::new();
    let view = ctx.view();
    if !ctx.json {
        outln(&events::header(&view))?;
    }
    loop {
        let page = conn
            .call::<TeamEvents>(&EventsParams {
                run_id: Some(run_id.to_string()),
                after_seq: Some(i64::try_from(after).unwrap_or(i64::MAX)),
                limit: Some(5000),
            })
            .await?;
        if page.events.is_empty() || page.next_seq <= after {
            break;
        }
        after = page.next_seq;
        if ctx.json {
            all.extend(page.events);
            continue;
        }
        let mut text = String::new();
        for e in &page.events {
            if !verbose && matches!(e.kind.as_str(), "task.progress" | "worker.spawned") {
                continue;
            }
            text.push_str(&events::line(&view, e));
            text.push('\n');
        }
        out(&text)?;
    }
    if ctx.json {
        ctx.json(&EventsResult {
            events: all,
            next_seq: after,
        })?;
    }
    Ok(exit::SUCCESS)
}

/// The transcript artifact of a task attempt: the named attempt, else the latest one listed.
fn transcript_name(task: &TaskView, attempt: Option<u32>) -> String {
    let conventional = |n: u32| format!("transcripts/{}.attempt-{n}.jsonl", task.id);
    if let Some(n) = attempt {
        return conventional(n);
    }
    let listed = task
        .artifacts
        .iter()
        .filter(|a| a.kind == "transcript")
        .max_by_key(|a| attempt_of(&a.name).unwrap_or(0));
    match listed {
        Some(a) => a.name.clone(),
        None => conventional(task.attempts.max(1)),
    }
}

fn attempt_of(name: &str) -> Option<u32> {
    name.rsplit_once(".attempt-")?
        .1
        .split('.')
        .next()?
        .parse()
        .ok()
}

async fn task_transcript(
    ctx: &Ctx,
    conn: &Conn,
    s: &StatusResult,
    task_id: &str,
    attempt: Option<u32>,
    verbose: bool,
) -> anyhow::Result<u8> {
    let task = find_task(s, task_id)?;
    let name = transcript_name(task, attempt);
    let text = match read_artifact(conn, &s.run.id, &name).await {
        Ok(t) => t,
        Err(e) if task.attempts == 0 || task.status == TaskStatus::Running => {
            let v = ctx.err_view();
            eprintln!(
                "No transcript yet for {task_id} ({}). {}",
                crate::render::marks::task_word(task.status),
                v.p(
                    Tone::Dim,
                    format!("Follow it: crewctl logs -f {} {task_id}", s.run.id)
                )
            );
            let _ = e;
            return Ok(exit::SUCCESS);
        }
        Err(e) => return Err(e),
    };
    if ctx.json {
        ctx.json(&whole(text))?;
    } else {
        let v = ctx.view();
        outln(&v.p(Tone::Dim, format!("── {name}")))?;
        out(&transcript::render(&v, &text, verbose))?;
        // What the worker wrote to stderr: often the only word from one that crashed.
        if let Some(log) = stderr_name(task, attempt_of(&name)) {
            let text = read_artifact(conn, &s.run.id, &log).await?;
            outln(&v.p(Tone::Dim, format!("── {log} (stderr)")))?;
            if !text.is_empty() {
                outln(text.trim_end())?;
            }
        }
    }
    Ok(exit::SUCCESS)
}

/// The stderr artifact of the attempt, when the task lists one.
fn stderr_name(task: &TaskView, attempt: Option<u32>) -> Option<String> {
    let want = format!("logs/{}.attempt-{}.stderr.txt", task.id, attempt?);
    task.artifacts
        .iter()
        .any(|a| a.name == want)
        .then_some(want)
}

/// A whole artifact's text as one result (`--json`).
fn whole(text: String) -> ArtifactResult {
    ArtifactResult {
        bytes: text.len() as u64,
        content: text,
        truncated: false,
        read: None,
    }
}

/// A whole artifact, read in pages.
async fn read_artifact(conn: &Conn, run_id: &str, name: &str) -> anyhow::Result<String> {
    const PAGE: i64 = 4 * 1024 * 1024;
    let mut text = String::new();
    let mut offset: i64 = 0;
    loop {
        let a = conn
            .call::<TeamArtifact>(&ArtifactParams {
                run_id: run_id.to_string(),
                name: name.to_string(),
                offset: Some(offset),
                limit: Some(PAGE),
            })
            .await?;
        // The file's bytes the page held (a daemon before `read`: the text's length).
        let got = a.read.unwrap_or(a.content.len() as u64);
        text.push_str(&a.content);
        offset = offset.saturating_add(i64::try_from(got).unwrap_or(i64::MAX));
        if !a.truncated || got == 0 || offset as u64 >= a.bytes {
            break;
        }
    }
    Ok(text)
}

pub async fn cancel(ctx: &Ctx, run: &RunRef, reason: Option<String>) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    // Which tasks had a worker: the message says what was stopped, not just what was marked.
    let before = conn.call::<TeamStatus>(&rid(run_id)).await?;
    let r = conn
        .call::<TeamCancel>(&CancelParams {
            run_id: run_id.to_string(),
            reason,
        })
        .await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        outln(&format!(
            "Run {} is {}: {}.",
            crate::render::ids::hint(run_id),
            r.status.as_str(),
            view_runs::cancelled(&r, before.tasks.iter().map(|t| (t.id.as_str(), t.status)))
        ))?;
    }
    Ok(exit::SUCCESS)
}

pub async fn resume(
    ctx: &Ctx,
    run: &RunRef,
    confirm_imported: bool,
    budget_tokens: Option<i64>,
) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    // What blocked it and how many attempts ran, to tell "blocked again by the same, nothing
    // ran" from a new block, or the same one after agents ran (a resolver that gave up again).
    let before = conn
        .call::<TeamStatus>(&RunIdParams {
            run_id: run_id.to_string(),
        })
        .await
        .ok()
        .map(|s| Before {
            attempts: attempts(&s),
            reason: s.run.reason,
        });
    let r = conn
        .call::<TeamResume>(&ResumeParams {
            run_id: run_id.to_string(),
            confirm_imported: confirm_imported.then_some(true),
            budget_tokens,
        })
        .await?;
    if ctx.json {
        ctx.json(&r)?;
        return Ok(exit::SUCCESS);
    }
    let v = ctx.view();
    // What runs now may be what blocked the run (a task waiting on a conflict nobody resolved
    // yet, a resolution refused again), which blocks it again at once, requeued or not: no
    // agent runs for it. Look briefly, and say so.
    if r.status == RunStatus::Running {
        if let Some(code) = blocked_again(&conn, run_id, before.as_ref()).await? {
            return Ok(code);
        }
    }
    outln(&format!(
        "Run {run_id} is {}; requeued {}.\n  {}",
        r.status.as_str(),
        list_or_none(&r.requeued_task_ids),
        v.p(Tone::Dim, format!("follow: crewctl logs -f {run_id}"))
    ))?;
    Ok(exit::SUCCESS)
}

/// How long a resume looks whether the run blocks again at once.
const BLOCKED_AGAIN_MS: i64 = 1_500;

/// A run as it was before its resume.
struct Before {
    reason: Option<String>,
    attempts: u64,
}

/// Every attempt the run's tasks have made.
fn attempts(s: &StatusResult) -> u64 {
    s.tasks.iter().map(|t| u64::from(t.attempts)).sum()
}

/// The exit status of a resumed run that blocked again within `BLOCKED_AGAIN_MS`, having said
/// why — by what blocked it before with no attempt made since (`before`: nothing changed), or
/// by something new or after agents ran (a task that asks at once, a resolver that gave up
/// again); `None` while it goes on.
async fn blocked_again(
    conn: &Conn,
    run_id: &str,
    before: Option<&Before>,
) -> anyhow::Result<Option<u8>> {
    let w = conn
        .call::<TeamWait>(&WaitParams {
            run_id: run_id.to_string(),
            timeout_ms: Some(BLOCKED_AGAIN_MS),
        })
        .await?;
    if !(w.finished && w.status == RunStatus::Blocked) {
        return Ok(None);
    }
    let s = conn
        .call::<TeamStatus>(&RunIdParams {
            run_id: run_id.to_string(),
        })
        .await?;
    let reason = s.run.reason.as_deref().unwrap_or("no reason given");
    let summary = crate::render::follow::reason_summary(reason, run_id).join("\n  ");
    let unchanged = before.is_some_and(|b| {
        b.reason.as_deref() == s.run.reason.as_deref() && b.attempts == attempts(&s)
    });
    let what = if unchanged {
        "was resumed and blocked again at once: nothing it waits on has changed"
    } else {
        "was resumed and is blocked again"
    };
    outln(&format!("Run {run_id} {what}.\n  {summary}"))?;
    Ok(Some(exit::BLOCKED))
}

pub async fn retry(
    ctx: &Ctx,
    run: &RunRef,
    task_ids: Vec<String>,
    with_dependents: bool,
    confirm_imported: bool,
) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let r = conn
        .call::<TeamRetry>(&RetryParams {
            run_id: run_id.to_string(),
            task_ids,
            with_dependents: with_dependents.then_some(true),
            confirm_imported: confirm_imported.then_some(true),
        })
        .await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        outln(&format!(
            "Requeued {} in run {run_id}.",
            list_or_none(&r.requeued_task_ids)
        ))?;
    }
    Ok(exit::SUCCESS)
}

pub async fn approve(
    ctx: &Ctx,
    run: &RunRef,
    reason: Option<String>,
    approve: bool,
) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let params = ApproveParams {
        run_id: run_id.to_string(),
        reason,
    };
    let r = if approve {
        conn.call::<TeamApprove>(&params).await?
    } else {
        conn.call::<TeamReject>(&params).await?
    };
    if ctx.json {
        ctx.json(&r)?;
    } else {
        let what = if approve { "approved" } else { "rejected" };
        outln(&format!(
            "Plan {what}; run {run_id} is {}.",
            r.status.as_str()
        ))?;
    }
    Ok(exit::SUCCESS)
}

pub async fn steer(ctx: &Ctx, run: &RunRef, task_id: &str, message: String) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let params = TaskMessageParams {
        run_id: run_id.to_string(),
        task_id: task_id.to_string(),
        message,
    };
    let r = conn.call::<TeamSteer>(&params).await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        match (r.delivered, &r.note) {
            (Delivered::Live, _) => outln(&format!("Delivered to {task_id} live."))?,
            // The daemon's note says why, naming the runtime (a running task that may never
            // have another attempt).
            (Delivered::Queued, Some(note)) => {
                outln(&format!("Queued for {task_id}'s next attempt: {note}."))?
            }
            (Delivered::Queued, None) => {
                outln(&format!("Queued for {task_id}: it gets it when it starts."))?
            }
        }
    }
    Ok(exit::SUCCESS)
}

pub async fn respond(
    ctx: &Ctx,
    run: &RunRef,
    task_id: &str,
    message: String,
) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let params = TaskMessageParams {
        run_id: run_id.to_string(),
        task_id: task_id.to_string(),
        message,
    };
    let r = conn.call::<TeamRespond>(&params).await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        outln(&format!(
            "Answered {task_id}; it is {}.",
            crate::render::marks::task_word(r.status)
        ))?;
    }
    Ok(exit::SUCCESS)
}

pub async fn artifacts(ctx: &Ctx, run: &RunRef) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let r = conn.call::<TeamArtifacts>(&rid(run_id)).await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        out(&view_runs::artifacts(&ctx.view(), &r.artifacts))?;
    }
    Ok(exit::SUCCESS)
}

pub async fn cat(ctx: &Ctx, run: &RunRef, name: &str) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let text = read_artifact(&conn, run_id, name).await?;
    if ctx.json {
        ctx.json(&whole(text))?;
    } else {
        // Raw bytes as stored; only a terminal gets the missing final newline back.
        if ctx.stdout_tty && !text.is_empty() && !text.ends_with('\n') {
            crate::ctx::out_raw(&format!("{text}\n"))?;
        } else {
            crate::ctx::out_raw(&text)?;
        }
    }
    Ok(exit::SUCCESS)
}

pub async fn summary(ctx: &Ctx, run: &RunRef) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let r = conn.call::<TeamSummary>(&rid(run_id)).await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        outln(&r.markdown)?;
    }
    Ok(exit::SUCCESS)
}

pub async fn forget(ctx: &Ctx, run: &RunRef, force: bool) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let r = conn
        .call::<TeamForget>(&ForgetParams {
            run_id: run_id.to_string(),
            force: force.then_some(true),
        })
        .await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        outln(&format!("Forgot run {run_id}."))?;
        for n in &r.notes {
            outln(&format!("note: {n}"))?;
        }
    }
    Ok(exit::SUCCESS)
}

pub async fn prune(ctx: &Ctx, a: PruneArgs) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let params = PruneParams {
        keep: a.keep.map(i64::from),
        older_than_ms: a
            .older_than
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        force: a.force.then_some(true),
    };
    let r = conn.call::<TeamPrune>(&params).await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        let n = r.removed.len();
        outln(&format!(
            "Removed {}; kept {}.",
            crate::render::units::count(n, "run"),
            r.kept
        ))?;
        for note in &r.notes {
            outln(&format!("note: {note}"))?;
        }
    }
    Ok(exit::SUCCESS)
}

pub async fn export(ctx: &Ctx, run: &RunRef, output: Option<PathBuf>) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let r = conn.call::<TeamExport>(&rid(run_id)).await?;
    let mut text = serde_json::to_string_pretty(&r.bundle)?;
    text.push('\n');
    match output {
        Some(path) if path.as_os_str() != "-" => {
            std::fs::write(&path, &text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "Wrote run {run_id} to {} ({}).",
                path.display(),
                crate::render::units::bytes(text.len() as u64)
            );
        }
        _ => out(&text)?,
    }
    Ok(exit::SUCCESS)
}

pub async fn import(ctx: &Ctx, file: &Path) -> anyhow::Result<u8> {
    // A file is read by the daemon (same user, same machine): a bundle bigger than
    // `max_request_bytes` imports too. Only stdin travels in the request.
    let params = if file.as_os_str() == "-" {
        let text = std::io::read_to_string(std::io::stdin())
            .context("cannot read the bundle from stdin")?;
        let bundle: serde_json::Value =
            serde_json::from_str(&text).context("stdin is not a JSON bundle")?;
        ImportParams {
            bundle: Some(bundle),
            path: None,
        }
    } else {
        let path = std::fs::canonicalize(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        ImportParams {
            bundle: None,
            path: Some(path.to_string_lossy().into_owned()),
        }
    };
    let conn = ctx.connect().await?;
    let r = conn.call::<TeamImport>(&params).await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        outln(&format!("Imported run {}.", r.run_id))?;
    }
    Ok(exit::SUCCESS)
}

fn list_or_none(ids: &[String]) -> String {
    if ids.is_empty() {
        "no tasks".into()
    } else {
        ids.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_with(artifacts: &[&str], attempts: u32) -> TaskView {
        TaskView {
            candidates: None,
            id: "02_plan".into(),
            step_id: "plan".into(),
            role: "planner".into(),
            agent: "planner".into(),
            depends_on: vec![],
            status: TaskStatus::Failed,
            attempts,
            started_at: None,
            finished_at: None,
            duration_ms: None,
            usage: Usage::default(),
            model: None,
            error: None,
            question: None,
            reused_from: None,
            progress: TaskProgressView::default(),
            artifacts: artifacts
                .iter()
                .map(|n| ArtifactInfo {
                    name: n.to_string(),
                    kind: if n.starts_with("transcripts/") {
                        "transcript".into()
                    } else {
                        "result".into()
                    },
                    task_id: Some("02_plan".into()),
                    bytes: 1,
                    sha256: String::new(),
                })
                .collect(),
            scope: vec![],
            verify_commands: vec![],
            verdict: None,
            fixes: None,
        }
    }

    #[test]
    fn picks_the_transcript() {
        let t = task_with(
            &[
                "transcripts/02_plan.attempt-2.jsonl",
                "transcripts/02_plan.attempt-10.jsonl",
                "results/02_plan.txt",
            ],
            10,
        );
        assert_eq!(
            transcript_name(&t, None),
            "transcripts/02_plan.attempt-10.jsonl"
        );
        assert_eq!(
            transcript_name(&t, Some(2)),
            "transcripts/02_plan.attempt-2.jsonl"
        );
        assert_eq!(
            transcript_name(&task_with(&[], 3), None),
            "transcripts/02_plan.attempt-3.jsonl"
        );
        assert_eq!(
            transcript_name(&task_with(&[], 0), None),
            "transcripts/02_plan.attempt-1.jsonl"
        );
        assert_eq!(attempt_of("transcripts/x.attempt-7.jsonl"), Some(7));
        let t = task_with(&["logs/02_plan.attempt-2.stderr.txt"], 2);
        assert_eq!(
            stderr_name(&t, Some(2)).as_deref(),
            Some("logs/02_plan.attempt-2.stderr.txt")
        );
        assert_eq!(stderr_name(&t, Some(1)), None);
        assert_eq!(attempt_of("results/x.txt"), None);
    }
}
