//! Talking to a run's tasks: steer a worker, answer its question, wait for the run.

use super::{change_run, check_id, in_range, on_run, Access, Out, P};
use crate::rpc::{views, Ctx};
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::ApiError;
use std::sync::Arc;
use std::time::Duration;

pub(super) async fn steer(ctx: Arc<Ctx>, p: P<TeamSteer>) -> Out<TeamSteer> {
    check_id("taskId", &p.task_id)?;
    // A queued message becomes part of the next attempt's prompt, which may be an argument.
    crate::rpc::checks::no_nul("message", &p.message)?;
    on_run(&ctx, &p.run_id.clone(), Access::Change, move |core| {
        let key = (p.run_id.clone(), p.task_id.clone());
        let live = core.workers.get(&key).is_some_and(|h| h.live);
        let answered = core.workers.get(&key).is_some_and(|h| h.answered);
        let (event, delivered) = core
            .state
            .steer(&p.run_id, &p.task_id, &p.message, live)
            .map_err(views::core_error)?;
        core.emit(event);
        if delivered == crew_core::run::Delivery::Live {
            // The worker hears it only once `task.steered` is durable.
            if let Some(ctl) = core.workers.get(&key).map(|h| h.ctl.clone()) {
                let message = p.message.clone();
                core.after_commit(move |res| {
                    if res.is_ok() {
                        let _ = ctl.send(crate::attempt::WorkerCtl::Steer(message));
                    }
                });
            }
        }
        let running = core
            .state
            .run(&p.run_id)
            .and_then(|r| Some((r.task(&p.task_id)?.status, r.spec.runtime.clone())));
        let note = steer_note(delivered, running, answered);
        Ok(SteerResult {
            note,
            delivered: match delivered {
                crew_core::run::Delivery::Live => Delivered::Live,
                crew_core::run::Delivery::Queued => Delivered::Queued,
            },
        })
    })
    .await
}

/// Pure: what the caller of `team.steer` is told about a message queued while its task runs
/// (`running`: the task's status and runtime): why it was not delivered live.
fn steer_note(
    delivered: crew_core::run::Delivery,
    running: Option<(crew_core::run::TaskStatus, String)>,
    answered: bool,
) -> Option<String> {
    match (delivered, running) {
        (
            crew_core::run::Delivery::Queued,
            Some((crew_core::run::TaskStatus::Running, _)),
        ) if answered => Some(
            "the task's worker has already given its final answer and takes no more messages: \
             the message is queued for the task's next attempt, which a task that succeeds never has"
                .to_string(),
        ),
        (
            crew_core::run::Delivery::Queued,
            Some((crew_core::run::TaskStatus::Running, runtime)),
        ) => Some(format!(
            "runtime `{runtime}` cannot take a message while its worker runs (only the adapters with a \
             live mode, {}, in live mode can: the default for pi, claude and codex; `rpc = true` in the \
             runtime makes gemini and opencode live, where Gemini CLI's usage does not count cached tokens apart \
             and opencode's counts only each turn's last model call): the message is queued for the \
             task's next attempt, which a task that succeeds never has",
            crew_core::stream::live_adapter_names()
        )),
        _ => None,
    }
}

pub(super) async fn respond(ctx: Arc<Ctx>, p: P<TeamRespond>) -> Out<TeamRespond> {
    check_id("taskId", &p.task_id)?;
    crate::rpc::checks::no_nul("message", &p.message)?;
    let (task, message) = (p.task_id.clone(), p.message.clone());
    change_run(
        &ctx,
        &p.run_id,
        move |st, id| Ok((st.respond(id, &task, &message)?, ())),
        move |core, id, ()| RespondResult {
            status: core
                .state
                .run(id)
                .and_then(|r| r.task(&p.task_id))
                .map(|t| views::task_status(t.status))
                .unwrap_or(TaskStatus::Queued),
        },
    )
    .await
}

pub(super) async fn wait(ctx: Arc<Ctx>, p: P<TeamWait>) -> Out<TeamWait> {
    check_id("runId", &p.run_id)?;
    let timeout = match p.timeout_ms {
        None => Duration::from_secs(3600),
        Some(t) => Duration::from_millis(in_range("timeoutMs", t, 0..=3_600_000)? as u64),
    };
    let mut rx = ctx.shared.bus.subscribe();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let id = p.run_id.clone();
        let status = ctx
            .actor
            .call(move |core| {
                core.state
                    .summaries
                    .get(&id)
                    .map(|s| s.status)
                    .ok_or_else(|| ApiError::not_found("run", &id))
            })
            .await?;
        if status.is_finished() || status == crew_core::run::RunStatus::Blocked {
            return Ok(WaitResult {
                status: views::run_status(status),
                finished: true,
            });
        }
        // Wake on any event of this run (or lag), else at the deadline.
        let woke = tokio::time::timeout_at(deadline, async {
            loop {
                match rx.recv().await {
                    Ok(ev) if ev.run_id.as_deref() == Some(p.run_id.as_str()) => return,
                    Ok(_) => continue,
                    Err(_) => return,
                }
            }
        })
        .await;
        if woke.is_err() {
            return Ok(WaitResult {
                status: views::run_status(status),
                finished: false,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::steer_note;
    use crew_core::run::{Delivery, TaskStatus as Status};

    #[test]
    fn a_steer_note_says_why_a_message_waits() {
        let running = || Some((Status::Running, "claude".to_string()));
        let queued_while = |running, answered| steer_note(Delivery::Queued, running, answered);
        // Delivered live, or the task is not running: nothing to explain.
        assert_eq!(steer_note(Delivery::Live, running(), false), None);
        assert_eq!(
            queued_while(Some((Status::Queued, "claude".into())), false),
            None
        );
        assert_eq!(queued_while(None, true), None);
        // The worker answered already: that, whatever the runtime.
        let answered = queued_while(running(), true).unwrap();
        assert!(answered.starts_with("the task's worker has already given its final answer"));
        // A runtime without a live mode: named.
        let not_live = queued_while(running(), false).unwrap();
        assert!(
            not_live.starts_with("runtime `claude` cannot take a message while its worker runs")
        );
    }
}
