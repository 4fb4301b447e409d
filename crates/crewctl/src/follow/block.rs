//! Acting on a blocked run from the follow view, in a terminal: approve or reject a plan, answer
//! a question, retry a task that needs attention. Each prompt says what it reads (one key, or a
//! line) and Ctrl-C at any prompt detaches.

use super::Follower;
use crate::style::Tone;
use crew_api::methods::{TeamApprove, TeamReject, TeamRespond, TeamRetry};
use crew_api::types::{ApproveParams, RetryParams, StatusResult, TaskMessageParams, TaskStatus};

pub enum Outcome {
    /// The user answered: the block should lift.
    Acted,
    /// The user chose to wait (someone else may act).
    KeepWaiting,
    Detach,
}

pub async fn ask(f: &mut Follower<'_>, s: &StatusResult) -> anyhow::Result<Outcome> {
    f.ui.pause();
    let r = ask_paused(f, s).await;
    f.ui.resume();
    r
}

async fn ask_paused(f: &mut Follower<'_>, s: &StatusResult) -> anyhow::Result<Outcome> {
    let run_id = s.run.id.clone();
    if s.run.approval == "pending" {
        eprint!("Plan: a approves · r rejects · d or Ctrl-C detaches · other keys wait (one key)");
        let key = f.key().await;
        eprintln!();
        let params = ApproveParams {
            run_id,
            reason: Some("from crewctl's follow view".into()),
        };
        let (what, r) = match key {
            Some(b'a' | b'A') => ("plan approved", f.conn.call::<TeamApprove>(&params).await),
            Some(b'r' | b'R') => ("plan rejected", f.conn.call::<TeamReject>(&params).await),
            Some(b'd' | b'D') | None => return Ok(Outcome::Detach),
            Some(_) => return Ok(Outcome::KeepWaiting),
        };
        return Ok(settled(f, what, r.map(|_| ())));
    }
    if let Some(t) = s.tasks.iter().find(|t| t.status == TaskStatus::Waiting) {
        let task_id = t.id.clone();
        eprint!("Answer {task_id} (Enter sends; an empty line waits; Ctrl-C detaches):\n> ");
        let line = f.line().await;
        let Some(message) = line else {
            eprintln!();
            return Ok(Outcome::Detach);
        };
        if message.trim().is_empty() {
            return Ok(Outcome::KeepWaiting);
        }
        let r = f
            .conn
            .call::<TeamRespond>(&TaskMessageParams {
                run_id,
                task_id: task_id.clone(),
                message,
            })
            .await;
        return Ok(settled(f, &format!("answered {task_id}"), r.map(|_| ())));
    }
    if let Some(t) = s
        .tasks
        .iter()
        .find(|t| t.status == TaskStatus::NeedsAttention)
    {
        let task_id = t.id.clone();
        eprint!("{task_id}: r retries it · d or Ctrl-C detaches · other keys wait (one key)");
        let key = f.key().await;
        eprintln!();
        return match key {
            Some(b'r' | b'R') => {
                let r = f
                    .conn
                    .call::<TeamRetry>(&RetryParams {
                        run_id,
                        task_ids: vec![task_id.clone()],
                        with_dependents: None,
                        confirm_imported: None,
                    })
                    .await;
                Ok(settled(f, &format!("retrying {task_id}"), r.map(|_| ())))
            }
            Some(b'd' | b'D') | None => Ok(Outcome::Detach),
            Some(_) => Ok(Outcome::KeepWaiting),
        };
    }
    Ok(Outcome::KeepWaiting)
}

/// A refused action (someone else acted first, say) is shown and following goes on.
fn settled(f: &mut Follower<'_>, what: &str, r: anyhow::Result<()>) -> Outcome {
    match r {
        Ok(()) => {
            f.note(Tone::Ok, what);
            Outcome::Acted
        }
        Err(e) => {
            f.note(Tone::Bad, &format!("{e:#}"));
            Outcome::KeepWaiting
        }
    }
}
