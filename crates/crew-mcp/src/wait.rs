//! Waiting for a run, with MCP progress notifications while it goes.
//!
//! `team.wait` decides when the wait is over; a `team.subscribe` on the same connection only
//! feeds the notifications, so a dropped or lagging subscription can cost a progress message
//! but never end a wait early or late.

use crate::daemon::Daemon;
use crate::error::ToolError;
use crew_api::methods::{TeamStatus, TeamWait};
use crew_api::types::{Event, RunIdParams, SubscriptionItem, WaitParams, WaitResult};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use std::collections::HashMap;
use tokio_util::sync::CancellationToken;

/// Where progress goes: the caller's peer and the token it sent in `_meta.progressToken`.
pub struct Progress {
    pub peer: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// Counts of a run's tasks by how far they got, kept from the events.
struct Tally {
    status: HashMap<String, &'static str>,
    total: usize,
    sent: u32,
}

impl Tally {
    fn done(&self) -> usize {
        self.status
            .values()
            .filter(|s| matches!(**s, "completed" | "failed" | "cancelled" | "skipped"))
            .count()
    }

    /// The message for one event, or None for the chatter (progress ticks, spawns).
    fn message(&mut self, e: &Event) -> Option<String> {
        let task = e.task_id.as_deref().unwrap_or_default();
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
    let mut tally = Tally {
        status: HashMap::new(),
        total: status.tasks.len(),
        sent: 0,
    };
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
                if let Some(message) = tally.message(&e) {
                    tally.sent = tally.sent.saturating_add(1);
                    let note = ProgressNotificationParam::new(progress.token.clone(), f64::from(tally.sent))
                        .with_message(message);
                    // A client that went away will also drop the call; nothing to do here.
                    let _ = progress.peer.notify_progress(note).await;
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
