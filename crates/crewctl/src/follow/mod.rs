//! Following a run live: `team.subscribe` from the last seen seq, a progress line per task on a
//! terminal (plain lines when piped, JSON lines with `--json`), result excerpts as tasks finish,
//! and a summary at the end. Ctrl-C asks whether to cancel the run or detach.

mod block;

use crate::conn::{Conn, Failed};
use crate::ctx::{out, outln, Ctx};
use crate::exit;
use crate::render::follow::{
    excerpt, final_summary, plain_line, result_name, task_done, task_running, Change, Follow,
};
use crate::render::time::{human_duration, parse_time};
use crate::render::units::{cost, tokens, usage_tokens};
use crate::render::View;
use crate::safe;
use crate::style::Tone;
use crate::term;
use crew_api::client::{CallError, ObjectParams};
use crew_api::methods::{TeamArtifact, TeamCancel, TeamEvents, TeamStatus, TeamSubscribe};
use crew_api::types::{
    ArtifactParams, CancelParams, Event, EventsParams, PlannedTaskView, RunIdParams, RunStatus,
    StatusResult, SubscriptionItem, TaskStatus,
};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use jsonrpsee::core::client::{Subscription, SubscriptionClientT};
use std::collections::HashMap;
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Where the task list comes from before events fill it in.
pub enum Seed {
    Plan(Vec<PlannedTaskView>),
    Status(Box<StatusResult>),
}

const EXCERPT_LINES: usize = 6;
const PLAN_LINES: usize = 20;
const EXCERPT_BYTES: i64 = 8 * 1024;

/// Follows `run_id` until it stops (or the user detaches) and returns the exit status. With
/// `only_task`, other tasks' lines are not shown and following ends when that task stops. With
/// `through_blocks`, a blocked run (plan approval, a question, a task needing attention) is
/// shown and followed on; in a terminal the user is offered to act on it inline. Without, a
/// block ends following with exit status 2.
pub async fn follow(
    ctx: &Ctx,
    conn: Conn,
    run_id: &str,
    seed: Seed,
    only_task: Option<&str>,
    through_blocks: bool,
) -> anyhow::Result<u8> {
    let (model, run_elapsed) = match &seed {
        Seed::Plan(p) => (Follow::new(run_id).with_plan(p), Duration::ZERO),
        Seed::Status(s) => {
            let started = s.run.started_at.as_deref().and_then(parse_time);
            let ms = started
                .map(|t| (chrono::Utc::now() - t).num_milliseconds())
                .unwrap_or(0);
            (
                Follow::new(run_id).with_status(s),
                Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
            )
        }
    };
    // Installed before subscribing, so an early Ctrl-C is ours rather than a plain kill.
    let sigint = signal(SignalKind::interrupt())?;
    let mut f = Follower {
        ctx,
        conn,
        run_id,
        model,
        ui: Ui::new(ctx, run_elapsed),
        only_task,
        sigint,
        through_blocks,
        interactive: ctx.stdin_tty && ctx.stdout_tty && !ctx.json,
        shown_block: None,
        offer: None,
    };
    f.ui.footer(&ctx.view(), &f.model);
    let result = match &seed {
        Seed::Plan(_) => f.live(false).await,
        Seed::Status(s) => {
            // History first, without stopping at blocks long since answered; then live from
            // where history ended, checking the run as it is now.
            let finished = s.run.status.is_finished();
            match f.replay_stored().await {
                Err(e) => Err(e),
                Ok(()) if finished => f.stop().await,
                Ok(()) => f.live(true).await,
            }
        }
    };
    if let Some(o) = f.offer.take() {
        o.stop().await;
    }
    f.ui.finish();
    result
}

pub(crate) struct Follower<'a> {
    ctx: &'a Ctx,
    conn: Conn,
    run_id: &'a str,
    model: Follow,
    ui: Ui,
    only_task: Option<&'a str>,
    sigint: Signal,
    through_blocks: bool,
    /// stdin and stdout are a terminal: blocks and Ctrl-C can be answered inline.
    interactive: bool,
    /// The block last shown (its reason), so one block is announced once.
    shown_block: Option<String>,
    /// The inline offer to act on the block, read while live events go on drawing.
    offer: Option<block::Offer>,
}

impl Follower<'_> {
    /// The run's stored events through the same view. Blocks and stops in them are history
    /// (a later event may have resumed the run), so they end nothing.
    async fn replay_stored(&mut self) -> anyhow::Result<()> {
        let mut after = 0u64;
        loop {
            let page = self
                .conn
                .call::<TeamEvents>(&EventsParams {
                    run_id: Some(self.run_id.to_string()),
                    after_seq: Some(i64::try_from(after).unwrap_or(i64::MAX)),
                    limit: Some(5000),
                })
                .await?;
            if page.events.is_empty() || page.next_seq <= after {
                break;
            }
            after = page.next_seq;
            for e in page.events {
                self.handle(e, false).await?;
            }
        }
        Ok(())
    }

    /// Live events from the last one seen. `check_now`: the run may already be stopped or
    /// blocked (following an existing run); look once the subscription is in place, so nothing
    /// that happens in between is missed.
    async fn live(&mut self, check_now: bool) -> anyhow::Result<u8> {
        let mut sub = self.subscribe().await?;
        if check_now {
            let status = self.status().await?;
            if let Some(code) = self.on_stop(&status).await? {
                return Ok(code);
            }
        }
        loop {
            tokio::select! {
                item = sub.next() => {
                    let value = match item {
                        Some(Ok(v)) => v,
                        Some(Err(e)) => {
                            self.note(Tone::Warn, &format!("unreadable event skipped: {e}"));
                            continue;
                        }
                        None => {
                            // Lagged or disconnected: pick up after the last event seen.
                            if !self.conn.client.is_connected() {
                                self.reconnect().await?;
                            }
                            sub = self.subscribe().await?;
                            continue;
                        }
                    };
                    match serde_json::from_value::<SubscriptionItem>(value) {
                        Ok(SubscriptionItem::Event(e)) => {
                            let kind = e.kind.clone();
                            if let Some(code) = self.handle(e, true).await? {
                                return Ok(code);
                            }
                            self.withdraw_lifted_offer(&kind).await?;
                        }
                        // The daemon dropped us for falling behind.
                        Ok(SubscriptionItem::Notice(_)) => sub = self.subscribe().await?,
                        Err(e) => self.note(Tone::Warn, &format!("unexpected subscription item: {e}")),
                    }
                }
                input = block::input(&mut self.offer), if self.offer.is_some() => {
                    if let Some(code) = self.on_offer_input(input).await? {
                        return Ok(code);
                    }
                }
                _ = self.sigint.recv() => {
                    // Ctrl-C at an offer detaches, as the offer says.
                    if let Some(o) = self.offer.take() {
                        o.stop().await;
                        return Ok(self.detach(exit::BLOCKED));
                    }
                    match self.ask_cancel_or_detach().await {
                        Choice::Cancel => self.cancel().await?,
                        Choice::Detach => return Ok(self.detach(exit::SUCCESS)),
                        Choice::Continue => {}
                    }
                }
            }
        }
    }

    /// Cancels the run and says what that stopped: running workers, and queued tasks that will
    /// not start.
    async fn cancel(&mut self) -> anyhow::Result<()> {
        let r = self
            .conn
            .call::<TeamCancel>(&CancelParams {
                run_id: self.run_id.to_string(),
                reason: Some("cancelled from crewctl".into()),
            })
            .await?;
        let text = crate::render::runs::cancelled(
            &r,
            self.model.tasks.iter().map(|t| (t.id.as_str(), t.status)),
        );
        self.note(Tone::Warn, &format!("cancelling: {text}"));
        Ok(())
    }

    fn detach(&mut self, code: u8) -> u8 {
        self.ui.finish();
        let v = self.ctx.err_view();
        let id = crate::render::ids::hint(self.run_id);
        eprintln!(
            "Detached; run {id} keeps going. {}",
            v.p(Tone::Dim, format!("Follow again: crewctl logs -f {id}"))
        );
        code
    }

    /// Applies one event; `Some(exit status)` when following is over.
    async fn handle(&mut self, event: Event, live: bool) -> anyhow::Result<Option<u8>> {
        let fresh = event.seq > self.model.last_seq && event.run_id.as_deref() == Some(self.run_id);
        if self.ctx.json
            && fresh
            && self
                .only_task
                .is_none_or(|t| event.task_id.as_deref() == Some(t))
        {
            outln(&serde_json::to_string(&event)?)?;
        }
        let view = self.ctx.view();
        for change in self.model.apply(&event) {
            if let Change::RunStopped(_) = change {
                // Stored history can hold a later `run.resumed`: trust the run's state now.
                if !live {
                    continue;
                }
                let status = self.status().await?;
                if let Some(code) = self.on_stop(&status).await? {
                    return Ok(Some(code));
                }
                continue;
            }
            let index = change_task(&change);
            let task = index.and_then(|i| self.model.tasks.get(i)).cloned();
            if let Some(only) = self.only_task {
                if task.as_ref().map(|t| t.id.as_str()) != Some(only) {
                    continue;
                }
            }
            self.ui.show(&view, &self.model, &change, &event);
            if let (Change::Finished(_), Some(t)) = (&change, &task) {
                if t.status == TaskStatus::Completed && !self.ctx.json {
                    if let Some(text) = self.fetch_excerpt(&result_name(t)).await {
                        self.ui.print(&excerpt(&view, &text, EXCERPT_LINES));
                    }
                }
                // An attempt that ended long ago (replayed history) ends nothing.
                if self.only_task.is_some() && live {
                    return Ok(Some(exit::SUCCESS));
                }
            }
        }
        self.ui.footer(&view, &self.model);
        Ok(None)
    }

    /// The run as it is now: `Some(exit status)` when following ends here.
    async fn on_stop(&mut self, status: &StatusResult) -> anyhow::Result<Option<u8>> {
        if status.run.status.is_finished() {
            return self.summary(status).map(Some);
        }
        if status.run.status != RunStatus::Blocked {
            self.shown_block = None;
            return Ok(None);
        }
        if !self.through_blocks {
            return self.summary(status).map(Some);
        }
        let reason = status.run.reason.clone().unwrap_or_default();
        if self.shown_block.as_deref() == Some(reason.as_str()) {
            return Ok(None);
        }
        self.shown_block = Some(reason);
        if !self.ctx.json {
            let view = self.ctx.view();
            let mut text = final_summary(&view, status);
            if status.run.approval == "pending" {
                if let Some(plan) = self.fetch_excerpt("shared/plan.md").await {
                    text.push_str(&format!(
                        "  {}\n",
                        view.p(Tone::Dim, "plan (shared/plan.md):")
                    ));
                    text.push_str(&excerpt(&view, &plan, PLAN_LINES));
                }
            }
            self.ui.print(&text);
        }
        if self.interactive && self.offer.is_none() {
            self.offer = block::offer(self, status);
        }
        Ok(None)
    }

    /// The user answered the offer: act on it.
    async fn on_offer_input(&mut self, input: block::Input) -> anyhow::Result<Option<u8>> {
        let Some(o) = self.offer.take() else {
            return Ok(None);
        };
        let what = o.what.clone();
        o.done();
        match block::act(self, what, input).await? {
            block::Outcome::Acted => self.shown_block = None,
            block::Outcome::KeepWaiting => {}
            block::Outcome::Detach => return Ok(Some(self.detach(exit::BLOCKED))),
        }
        Ok(None)
    }

    /// After a live event that may lift the block (resumed, answered, approved, retried,
    /// elsewhere): an offer that no longer stands is taken back, and the next block, if any,
    /// is offered when it comes.
    async fn withdraw_lifted_offer(&mut self, kind: &str) -> anyhow::Result<()> {
        let lifts = matches!(
            kind,
            "run.resumed" | "run.started" | "task.queued" | "task.started" | "task.retrying"
        );
        if !lifts || self.offer.is_none() {
            return Ok(());
        }
        let status = self.status().await?;
        let stands = self
            .offer
            .as_ref()
            .is_some_and(|o| block::still_applies(&o.what, &status));
        if !stands {
            if let Some(o) = self.offer.take() {
                o.stop().await;
            }
            self.shown_block = None;
            self.note(Tone::Dim, "the block was lifted elsewhere; following on");
        }
        Ok(())
    }

    async fn status(&self) -> anyhow::Result<StatusResult> {
        self.conn
            .call::<TeamStatus>(&RunIdParams {
                run_id: self.run_id.to_string(),
            })
            .await
    }

    async fn stop(&mut self) -> anyhow::Result<u8> {
        let status = self.status().await?;
        self.summary(&status)
    }

    fn summary(&mut self, status: &StatusResult) -> anyhow::Result<u8> {
        self.ui.finish();
        if !self.ctx.json {
            outln(&final_summary(&self.ctx.view(), status))?;
        }
        Ok(exit::for_run(status.run.status, &status.tasks))
    }

    async fn subscribe(&self) -> anyhow::Result<Subscription<serde_json::Value>> {
        let params = serde_json::json!({ "runId": self.run_id, "afterSeq": self.model.last_seq });
        self.conn
            .client
            .subscribe::<serde_json::Value, _>(
                TeamSubscribe::NAME,
                ObjectParams(params),
                TeamSubscribe::UNSUBSCRIBE,
            )
            .await
            .map_err(|e| match e {
                jsonrpsee::core::client::Error::Call(obj) => {
                    Failed(CallError::Api(obj.into())).into()
                }
                other => anyhow::anyhow!("cannot subscribe to run {}: {other}", self.run_id),
            })
    }

    /// The daemon went away (restart, upgrade): try for a while to get it back.
    async fn reconnect(&mut self) -> anyhow::Result<()> {
        self.note(Tone::Warn, "lost the connection to crewd; reconnecting…");
        let mut last = None;
        for _ in 0..30 {
            match self.ctx.connect().await {
                Ok(c) => {
                    self.conn = c;
                    self.note(Tone::Ok, "reconnected");
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            // Waiting for a daemon to come back is inherently time-based.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("crewd did not come back")))
    }

    async fn fetch_excerpt(&self, name: &str) -> Option<String> {
        let params = ArtifactParams {
            run_id: self.run_id.to_string(),
            name: name.to_string(),
            offset: None,
            limit: Some(EXCERPT_BYTES),
        };
        self.conn
            .call::<TeamArtifact>(&params)
            .await
            .ok()
            .map(|a| a.content)
    }

    fn note(&mut self, tone: Tone, text: &str) {
        let view = self.ctx.view();
        self.ui.note(&view, tone, text);
    }

    /// One key, no Enter: `c` cancels, `d` or a second Ctrl-C detaches at once, any other key
    /// keeps following.
    async fn ask_cancel_or_detach(&mut self) -> Choice {
        if !self.ctx.stdin_tty {
            return Choice::Detach;
        }
        self.ui.pause();
        eprint!(
            "\nCancel? c cancels · d or Ctrl-C detaches · other keys go on (one key, no Enter)"
        );
        let key = self.key().await;
        eprintln!();
        let choice = match key {
            Some(b'c' | b'C') => Choice::Cancel,
            Some(b'd' | b'D') | None => Choice::Detach,
            Some(_) => {
                eprintln!("(still following; Ctrl-C to choose again)");
                Choice::Continue
            }
        };
        self.ui.resume();
        choice
    }

    /// One key from the terminal; `None` when Ctrl-C came first or stdin closed.
    pub(crate) async fn key(&mut self) -> Option<u8> {
        let mut read = term::Read::start(term::key_blocking);
        let got = tokio::select! {
            k = read.result() => Some(k),
            _ = self.sigint.recv() => None,
        };
        match got {
            Some(k) => k,
            None => {
                read.stop().await;
                None
            }
        }
    }
}

enum Choice {
    Cancel,
    Detach,
    Continue,
}

fn change_task(c: &Change) -> Option<usize> {
    match c {
        Change::Started(i) | Change::Progress(i) | Change::Finished(i) | Change::Requeued(i) => {
            Some(*i)
        }
        Change::Retrying { task, .. } | Change::Waiting { task, .. } => Some(*task),
        Change::Note { .. } | Change::RunStopped(_) => None,
    }
}

/// How changes reach the user.
enum Ui {
    Bars(Box<Bars>),
    Plain,
    Json,
}

struct Bars {
    mp: MultiProgress,
    bars: HashMap<usize, ProgressBar>,
    footer: ProgressBar,
    running: ProgressStyle,
}

/// Columns of a bar besides its message: the spinner and a space, a space and the duration
/// (`59m59s`, `1h02m`, `272d05h`: at most 8) and one to spare.
const BAR_FIXED: usize = 2 + 1 + 8 + 1;

/// What the terminal leaves a bar's text beside its spinner and duration (a bar that wraps is
/// redrawn over the lines below it); unbounded without a width.
fn bar_room(view: &View) -> usize {
    view.width
        .map_or(usize::MAX, |w| usize::from(w).saturating_sub(BAR_FIXED))
}

fn elapsed_style(template: &str, ticks: &[String]) -> ProgressStyle {
    let ticks: Vec<&str> = ticks.iter().map(String::as_str).collect();
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .tick_strings(&ticks)
        .with_key("dur", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&human_duration(s.elapsed()));
        })
}

impl Ui {
    fn new(ctx: &Ctx, run_elapsed: Duration) -> Ui {
        if ctx.json {
            return Ui::Json;
        }
        if !ctx.stdout_tty {
            return Ui::Plain;
        }
        let v = ctx.view();
        // The last tick string is what a finished spinner shows; bars are cleared before that.
        let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏", "●"];
        let ticks: Vec<String> = frames.iter().map(|f| v.p(Tone::Active, f)).collect();
        let running = elapsed_style("{spinner} {prefix} {wide_msg} {dur}", &ticks);
        let mp = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let footer = mp.add(ProgressBar::new_spinner().with_elapsed(run_elapsed));
        footer.set_style(elapsed_style("{spinner} {msg} {dur}", &ticks));
        footer.enable_steady_tick(Duration::from_millis(120));
        Ui::Bars(Box::new(Bars {
            mp,
            bars: HashMap::new(),
            footer,
            running,
        }))
    }

    fn print(&self, text: &str) {
        match self {
            Ui::Bars(b) => {
                let _ = b.mp.println(safe::term(text.trim_end_matches('\n')));
            }
            Ui::Plain => {
                let _ = out(text);
            }
            Ui::Json => {}
        }
    }

    fn note(&mut self, view: &View, tone: Tone, text: &str) {
        match self {
            Ui::Json => eprintln!("{}", safe::term(text)),
            _ => self.print(&format!("{} {text}\n", view.p(tone, "•"))),
        }
    }

    /// A line under the bars that stays there while lines print above it (the offer to act on a
    /// block); `None` without bars (the caller prints the prompt itself).
    fn offer_line(&mut self, text: &str) -> Option<ProgressBar> {
        let Ui::Bars(b) = self else { return None };
        let bar = b.mp.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(text.to_string());
        Some(bar)
    }

    /// Stops redrawing so a prompt can be typed into.
    fn pause(&self) {
        if let Ui::Bars(b) = self {
            // Erase the bars first: a hidden target leaves them on screen, and indicatif would
            // later move the cursor over lines it no longer owns.
            let _ = b.mp.clear();
            b.mp.set_draw_target(ProgressDrawTarget::hidden());
        }
    }

    fn resume(&self) {
        if let Ui::Bars(b) = self {
            b.mp.set_draw_target(ProgressDrawTarget::stdout());
        }
    }

    fn show(&mut self, view: &View, model: &Follow, change: &Change, event: &Event) {
        match self {
            Ui::Json => {}
            Ui::Plain => {
                if let Some(line) = plain_line(view, model, change, parse_time(&event.time)) {
                    let _ = outln(&line);
                }
            }
            Ui::Bars(b) => b.show(view, model, change),
        }
    }

    fn footer(&mut self, view: &View, model: &Follow) {
        if let Ui::Bars(b) = self {
            let (done, running, total) = model.counts();
            let u = model.usage();
            let line = format!(
                "{} · {done}/{total} done · {running} running · {} tok · {}",
                model.run_id,
                tokens(usage_tokens(&u)),
                cost(u.cost)
            );
            // Cut here: indicatif's `{wide_msg}` beside the custom `{dur}` left the line 2
            // columns too wide, and the duration wrapped onto a line of its own.
            b.footer
                .set_message(crate::render::units::cut(&line, bar_room(view)));
        }
    }

    fn finish(&mut self) {
        if let Ui::Bars(b) = self {
            for (_, bar) in b.bars.drain() {
                bar.finish_and_clear();
            }
            b.footer.finish_and_clear();
            let _ = b.mp.clear();
        }
    }
}

impl Bars {
    fn show(&mut self, view: &View, model: &Follow, change: &Change) {
        let width = model.tasks.iter().map(|t| t.id.len()).max().unwrap_or(0);
        match change {
            Change::Started(i) | Change::Progress(i) => {
                let Some(t) = model.tasks.get(*i) else { return };
                if t.status != TaskStatus::Running {
                    return;
                }
                let bar = self.bars.entry(*i).or_insert_with(|| {
                    let elapsed = t
                        .elapsed_ms(chrono::Utc::now())
                        .map(Duration::from_millis)
                        .unwrap_or_default();
                    let bar = self.mp.insert_before(
                        &self.footer,
                        ProgressBar::new_spinner().with_elapsed(elapsed),
                    );
                    bar.set_style(self.running.clone());
                    // An id longer than the room is cut.
                    let shown = width.min(bar_room(view));
                    let id = crate::render::units::cut(&t.id, shown);
                    bar.set_prefix(format!("{id:<shown$}"));
                    bar.enable_steady_tick(Duration::from_millis(120));
                    bar
                });
                bar.set_message(safe::term(&task_running(view, model, t)).into_owned());
            }
            Change::Finished(i) => {
                self.drop_bar(*i);
                if let Some(t) = model.tasks.get(*i) {
                    let _ = self
                        .mp
                        .println(safe::term(&task_done(view, model, t, width)));
                }
            }
            Change::Retrying { task, .. }
            | Change::Waiting { task, .. }
            | Change::Requeued(task) => {
                self.drop_bar(*task);
                if let Some(line) = plain_line(view, model, change, None) {
                    let _ = self.mp.println(safe::term(&line));
                }
            }
            Change::Note { .. } => {
                if let Some(line) = plain_line(view, model, change, None) {
                    let _ = self.mp.println(safe::term(&line));
                }
            }
            Change::RunStopped(_) => {}
        }
    }

    fn drop_bar(&mut self, i: usize) {
        if let Some(bar) = self.bars.remove(&i) {
            bar.finish_and_clear();
            self.mp.remove(&bar);
        }
    }
}

/// `logs -f`: seeds the task list from `team.status`.
pub async fn follow_existing(
    ctx: &Ctx,
    conn: Conn,
    run_id: &str,
    only_task: Option<&str>,
    through_blocks: bool,
) -> anyhow::Result<u8> {
    let status = conn
        .call::<TeamStatus>(&RunIdParams {
            run_id: run_id.to_string(),
        })
        .await?;
    follow(
        ctx,
        conn,
        run_id,
        Seed::Status(Box::new(status)),
        only_task,
        through_blocks,
    )
    .await
}
