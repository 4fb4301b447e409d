//! Acting on a blocked run from the follow view, in a terminal: approve or reject a plan, answer
//! a question, resume a run whose task needs attention (`crewctl resume`, the one verb the
//! status line and crew's messages give too). The offer is a line under the progress bars
//! and the read runs beside the live events (`Follower::live` selects on both), so the view goes
//! on drawing while it waits for a key, and an answer being typed shows in that line. Ctrl-C at
//! an offer detaches; a block lifted elsewhere (another terminal, the dashboard) withdraws it.

use super::Follower;
use crate::style::Tone;
use crate::term;
use crew_api::methods::{TeamApprove, TeamReject, TeamRespond, TeamResume};
use crew_api::types::{ApproveParams, ResumeParams, StatusResult, TaskMessageParams, TaskStatus};
use indicatif::ProgressBar;

pub enum Outcome {
    /// The user answered: the block should lift.
    Acted,
    /// The user chose to wait (someone else may act).
    KeepWaiting,
    Detach,
}

/// What an offer is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    Plan,
    Answer(String),
    /// A task needs attention: resume the run (which re-queues it).
    Resume(String),
}

enum Pending {
    Key(term::Read<u8>),
    Line(term::Read<String>),
}

/// What the user gave: a key or a line; `None` when stdin closed.
pub enum Input {
    Key(Option<u8>),
    Line(Option<String>),
}

/// An offer on screen, its read running.
pub struct Offer {
    pub what: What,
    read: Pending,
    bar: Option<ProgressBar>,
}

impl Offer {
    /// Abandons the read (the terminal is restored) and takes the line off the screen.
    pub async fn stop(self) {
        match self.read {
            Pending::Key(r) => r.stop().await,
            Pending::Line(r) => r.stop().await,
        }
        clear(self.bar);
    }

    /// Takes the line off the screen once the read has ended.
    pub fn done(self) {
        clear(self.bar);
    }
}

fn clear(bar: Option<ProgressBar>) {
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

/// What the blocked run `s` asks of the user, if anything this view can answer.
pub fn what(s: &StatusResult) -> Option<What> {
    if s.run.approval == "pending" {
        return Some(What::Plan);
    }
    if let Some(t) = s.tasks.iter().find(|t| t.status == TaskStatus::Waiting) {
        return Some(What::Answer(t.id.clone()));
    }
    s.tasks
        .iter()
        .find(|t| t.status == TaskStatus::NeedsAttention)
        .map(|t| What::Resume(t.id.clone()))
}

/// Whether an offer still stands for the run as it is now.
pub fn still_applies(what: &What, s: &StatusResult) -> bool {
    let task_is = |id: &str, st: TaskStatus| s.tasks.iter().any(|t| t.id == id && t.status == st);
    match what {
        What::Plan => s.run.approval == "pending",
        What::Answer(id) => task_is(id, TaskStatus::Waiting),
        What::Resume(id) => task_is(id, TaskStatus::NeedsAttention),
    }
}

/// Puts the offer for `s` on screen and starts reading the answer.
pub fn offer(f: &mut Follower<'_>, s: &StatusResult) -> Option<Offer> {
    let what = what(s)?;
    let prompt = match &what {
        What::Plan => {
            "Plan: a approves · r rejects · d or Ctrl-C detaches · other keys wait (one key)"
                .to_string()
        }
        What::Answer(id) => {
            format!("Answer {id} (Enter sends; an empty line waits; Ctrl-C detaches): >")
        }
        What::Resume(id) => {
            format!(
                "{id} needs attention: r resumes the run · d or Ctrl-C detaches · other keys wait \
                 (one key)"
            )
        }
    };
    let view = f.ctx.view();
    // The whole hint prints once above the bars (it may wrap there); the line under them is
    // short, so it fits a narrow terminal and what is typed stays in sight.
    let short = match &what {
        What::Plan => "plan? a/r/d >".to_string(),
        What::Answer(id) => format!("answer {id} >"),
        What::Resume(_) => "resume? r/d >".to_string(),
    };
    let bar = f.ui.offer_line(&view.p(Tone::Warn, &short));
    if bar.is_some() {
        f.ui.print(&format!("{}\n", view.p(Tone::Warn, &prompt)));
    }
    let read = match &what {
        What::Answer(_) => {
            let shown = bar.clone();
            let p = view.p(Tone::Warn, &prompt);
            let s = view.p(Tone::Warn, &short);
            // What fits after the short prompt: the end of what is typed.
            let room = view
                .width
                .map(|w| usize::from(w).saturating_sub(crate::render::table::width_of(&short) + 2));
            Pending::Line(term::Read::start_with(move |cancel| {
                term::line_shown(cancel, |typed| match &shown {
                    Some(b) => b.set_message(format!("{s} {}", tail_fitting(typed, room))),
                    None => eprint!("\r{p} {typed}"),
                })
            }))
        }
        _ => Pending::Key(term::Read::start(term::key_blocking)),
    };
    if bar.is_none() {
        eprint!("{prompt} ");
    }
    Some(Offer { what, read, bar })
}

/// The user's input to the offer in `o` (never ready without one).
pub async fn input(o: &mut Option<Offer>) -> Input {
    match o {
        Some(Offer {
            read: Pending::Key(r),
            ..
        }) => Input::Key(r.result().await),
        Some(Offer {
            read: Pending::Line(r),
            ..
        }) => Input::Line(r.result().await),
        None => std::future::pending().await,
    }
}

/// Acts on what the user gave to the offer of `what`.
pub async fn act(f: &mut Follower<'_>, what: What, input: Input) -> anyhow::Result<Outcome> {
    let run_id = f.run_id.to_string();
    match (what, input) {
        (What::Plan, Input::Key(key)) => {
            let params = ApproveParams {
                run_id,
                reason: Some("from crewctl's follow view".into()),
            };
            let r = match key {
                Some(b'a' | b'A') => f.conn.call::<TeamApprove>(&params).await,
                Some(b'r' | b'R') => f.conn.call::<TeamReject>(&params).await,
                Some(b'd' | b'D') | None => return Ok(Outcome::Detach),
                Some(_) => return Ok(Outcome::KeepWaiting),
            };
            // Done, the run's own event says so (`plan approved`, `plan rejected`): one line.
            Ok(match r {
                Ok(_) => Outcome::Acted,
                Err(e) => settled(f, "", Err(e)),
            })
        }
        (What::Answer(task_id), Input::Line(line)) => {
            let Some(message) = line else {
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
            Ok(settled(f, &format!("answered {task_id}"), r.map(|_| ())))
        }
        (What::Resume(task_id), Input::Key(key)) => match key {
            Some(b'r' | b'R') => {
                let r = f
                    .conn
                    .call::<TeamResume>(&ResumeParams {
                        run_id,
                        confirm_imported: None,
                        budget_tokens: None,
                    })
                    .await;
                Ok(settled(f, &format!("resumed ({task_id})"), r.map(|_| ())))
            }
            Some(b'd' | b'D') | None => Ok(Outcome::Detach),
            Some(_) => Ok(Outcome::KeepWaiting),
        },
        _ => Ok(Outcome::KeepWaiting),
    }
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

/// The end of `typed` that fits in `room` columns (all of it without a width), `…` before it
/// when its start is left out: the cursor is at the end, where the user looks.
fn tail_fitting(typed: &str, room: Option<usize>) -> String {
    let Some(room) = room else {
        return typed.to_string();
    };
    if crate::render::table::width_of(typed) <= room {
        return typed.to_string();
    }
    let mut width = 1; // the `…`
    let mut start = typed.len();
    for (i, c) in typed.char_indices().rev() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if width + w > room {
            break;
        }
        width += w;
        start = i;
    }
    format!("…{}", typed.get(start..).unwrap_or_default())
}

#[cfg(test)]
mod fit_tests {
    use super::tail_fitting;

    #[test]
    fn the_end_of_what_is_typed_fits() {
        assert_eq!(tail_fitting("short", Some(10)), "short");
        assert_eq!(tail_fitting("0123456789abc", Some(5)), "…9abc");
        // Wide characters count two columns.
        assert_eq!(tail_fitting("使用数据库", Some(5)), "…据库");
        assert_eq!(tail_fitting("anything", None), "anything");
        assert_eq!(tail_fitting("abc", Some(0)), "…");
    }
}
