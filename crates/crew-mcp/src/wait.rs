//! Waiting for a run, with MCP progress notifications while it goes.
//!
//! `team.wait` decides when the wait is over; a `team.subscribe` on the same connection only
//! feeds the notifications, so a dropped or lagging subscription can cost a progress message
//! but never end a wait early or late. The counts start from `team.status`; the subscription
//! replays the run from its first event, and what the status already holds (up to its
//! `runSeq`) is not told again: one line says where the run stands, then only what is new.

use crate::daemon::Daemon;
use crate::error::ToolError;
use crew_api::methods::{TeamStatus, TeamWait};
use crew_api::types::{
    Event, RunIdParams, StatusResult, SubscriptionItem, TaskStatus, WaitParams, WaitResult,
};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use std::collections::HashMap;
use tokio_util::sync::CancellationToken;

/// Where progress goes: the caller's peer and the token it sent in `_meta.progressToken`.
pub struct Progress {
    pub peer: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// Counts of a run's tasks by how far they got: from a status, then kept from the events.
struct Tally {
    status: HashMap<String, &'static str>,
    total: usize,
    sent: u32,
    /// The status's `runSeq`: events up to it are in the counts already.
    seen: u64,
}

impl Tally {
    fn from_status(s: &StatusResult) -> Tally {
        let status = s
            .tasks
            .iter()
            .map(|t| {
                let state = match t.status {
                    TaskStatus::Completed => "completed",
                    TaskStatus::Failed => "failed",
                    TaskStatus::Cancelled => "cancelled",
                    TaskStatus::Skipped => "skipped",
                    _ => "active",
                };
                (t.id.clone(), state)
            })
            .collect();
        Tally {
            status,
            total: s.tasks.len(),
            sent: 0,
            seen: s.run.run_seq,
        }
    }

    /// Where the run stands, before anything new.
    fn opening(&self, s: &StatusResult) -> String {
        format!(
            "[{}/{} tasks done] run is {}",
            self.done(),
            self.total,
            s.run.status.as_str()
        )
    }

    /// The message for an event of the subscription: `None` for one the status held already
    /// (the replay) and for the chatter.
    fn news(&mut self, e: &Event) -> Option<String> {
        if e.run_seq <= self.seen {
            return None;
        }
        self.message(e)
    }

    fn done(&self) -> usize {
        self.status
            .values()
            .filter(|s| matches!(**s, "completed" | "failed" | "cancelled" | "skipped"))
            .count()
    }

    /// The message for one event, or None for the chatter (progress ticks, spawns).
    fn message(&mut self, e: &Event) -> Option<String> {
        let task = e.task_id.as_deref().unwrap_or_default();
        // Tasks added while the run goes count in the total from then on.
        let added = match e.kind.as_str() {
            "task.expanded" => e
                .data
                .get("tasks")
                .and_then(|t| t.as_array())
                .map_or(0, Vec::len),
            "task.fix_added" | "task.resolve_added" => 1,
            _ => 0,
        };
        if added > 0 {
            self.total = self.total.saturating_add(added);
            let what = match e.kind.as_str() {
                "task.fix_added" => "added a fix task".to_string(),
                "task.resolve_added" => "added a task to resolve a conflict".to_string(),
                _ => format!("added {added} task{}", if added == 1 { "" } else { "s" }),
            };
            let by = if task.is_empty() { "the run" } else { task };
            return Some(format!(
                "[{}/{} tasks done] {by} {what}",
                self.done(),
                self.total
            ));
        }
        let what = match e.kind.as_str() {
            "task.started" => "started",
            "task.completed" => "completed",
            "task.failed" => "failed",
            "task.cancelled" => "cancelled",
            "task.skipped" => "skipped",
            "task.retrying" => "will be retried",
            "task.waiting" => "is waiting for an answer",
            "task.needs_attention" => "needs attention",
            "run.blocked"
            | "run.completed"
            | "run.failed"
            | "run.cancelled"
            | "run.resumed"
            | "run.budget_warning"
            | "run.budget_exceeded"
            | "plan.approval_required" => {
                return Some(format!(
                    "[{}/{} tasks done] {}{}",
                    self.done(),
                    self.total,
                    e.kind,
                    e.message
                        .as_deref()
                        .map(|m| format!(": {}", crate::render::cut(m, 200)))
                        .unwrap_or_default()
                ));
            }
            _ => return None,
        };
        let state = match e.kind.as_str() {
            "task.completed" => "completed",
            "task.failed" => "failed",
            "task.cancelled" => "cancelled",
            "task.skipped" => "skipped",
            _ => "active",
        };
        self.status.insert(task.to_string(), state);
        Some(format!(
            "[{}/{} tasks done] {task} {what}",
            self.done(),
            self.total
        ))
    }
}

/// Waits until `run_id` stops or `timeout_ms` passes; sends a progress notification per task
/// step when `progress` is given. A cancelled call stops waiting, not the run.
pub async fn wait(
    daemon: &Daemon,
    run_id: &str,
    timeout_ms: Option<i64>,
    progress: Option<Progress>,
    ct: CancellationToken,
) -> Result<WaitResult, ToolError> {
    let params = WaitParams {
        run_id: run_id.to_string(),
        timeout_ms,
    };
    let waiting = daemon.call::<TeamWait>(&params);
    tokio::pin!(waiting);
    let Some(progress) = progress else {
        return tokio::select! {
            r = &mut waiting => r,
            _ = ct.cancelled() => Err(ToolError::Cancelled),
        };
    };
    // The task list and the events so far set the counts; the subscription replays from the
    // run's first event, so nothing between the two calls is missed.
    let status = daemon
        .call::<TeamStatus>(&RunIdParams {
            run_id: run_id.to_string(),
        })
        .await?;
    let mut tally = Tally::from_status(&status);
    let send = |tally: &mut Tally, message: String| {
        tally.sent = tally.sent.saturating_add(1);
        ProgressNotificationParam::new(progress.token.clone(), f64::from(tally.sent))
            .with_message(message)
    };
    let opening = tally.opening(&status);
    // A client that went away will also drop the call; nothing to do here.
    let _ = progress
        .peer
        .notify_progress(send(&mut tally, opening))
        .await;
    let mut sub = daemon.subscribe(run_id, 0).await.ok();
    loop {
        tokio::select! {
            r = &mut waiting => return r,
            _ = ct.cancelled() => return Err(ToolError::Cancelled),
            item = next(&mut sub) => {
                let Some(item) = item else {
                    sub = None;
                    continue;
                };
                let Ok(SubscriptionItem::Event(e)) = serde_json::from_value::<SubscriptionItem>(item) else {
                    continue;
                };
                if let Some(message) = tally.news(&e) {
                    let _ = progress.peer.notify_progress(send(&mut tally, message)).await;
                }
            }
        }
    }
}

/// The next item of the subscription; pending forever once there is none, so `select!` keeps
/// waiting on `team.wait` alone.
async fn next(
    sub: &mut Option<jsonrpsee::core::client::Subscription<serde_json::Value>>,
) -> Option<serde_json::Value> {
    match sub {
        Some(s) => s.next().await.and_then(Result::ok),
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(run_seq: u64, kind: &str, task: Option<&str>, data: serde_json::Value) -> Event {
        Event {
            seq: run_seq + 100,
            run_seq,
            time: "2026-12-07T00:00:00.000Z".into(),
            kind: kind.into(),
            run_id: Some("r".into()),
            task_id: task.map(str::to_string),
            message: None,
            data,
        }
    }

    /// The replay of what the status holds says nothing; added tasks grow the total.
    #[test]
    fn only_news_is_told_and_added_tasks_count() {
        let mut t = Tally {
            status: [
                ("01_plan".to_string(), "completed"),
                ("02_integrate".into(), "active"),
            ]
            .into_iter()
            .collect(),
            total: 2,
            sent: 0,
            seen: 5,
        };
        let none = serde_json::Value::Null;
        let table = [
            (ev(1, "task.started", Some("01_plan"), none.clone()), None),
            (ev(5, "task.completed", Some("01_plan"), none.clone()), None),
            (
                ev(
                    6,
                    "task.expanded",
                    Some("01_plan"),
                    serde_json::json!({"tasks": [{}, {}, {}]}),
                ),
                Some("[1/5 tasks done] 01_plan added 3 tasks"),
            ),
            (
                ev(7, "task.started", Some("a"), none.clone()),
                Some("[1/5 tasks done] a started"),
            ),
            (
                ev(8, "task.completed", Some("a"), none.clone()),
                Some("[2/5 tasks done] a completed"),
            ),
            (
                ev(9, "task.fix_added", Some("02_integrate"), none.clone()),
                Some("[2/6 tasks done] 02_integrate added a fix task"),
            ),
            (
                ev(10, "task.resolve_added", None, none.clone()),
                Some("[2/7 tasks done] the run added a task to resolve a conflict"),
            ),
            (ev(11, "task.progress", Some("a"), none.clone()), None),
        ];
        for (e, want) in table {
            assert_eq!(t.news(&e).as_deref(), want, "{} {}", e.run_seq, e.kind);
        }
    }
}
