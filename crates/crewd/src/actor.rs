//! The single owner of `State`.
//!
//! Everything that touches the model runs as a job on this task, one at a time. A job may emit
//! events: each is stamped with the next seq, applied to the state, and queued for the journal
//! writer. Replies and side effects (starting a worker, publishing) are attached as commit
//! callbacks and run only after the writer made the events durable. So: one writer, journal
//! order = apply order, and nothing is acknowledged or published before it is on disk.

mod integration;
pub(crate) mod residency;
pub(crate) mod workers;

use crate::attempt::WorkerCtl;
use crate::shared::Shared;
use crate::writer::{Batch, CommitFn, WriterHandle};
use crew_api::ApiError;
use crew_core::run::{Event, Pending, State, TaskStatus};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use workers::WorkerHandle;

pub type Job = Box<dyn FnOnce(&mut Core) + Send>;

/// Jobs taken per wake-up before settling and committing: bounds the latency of one batch.
const JOBS_PER_BATCH: usize = 512;
/// How often a loop whose dispatch is held (the journal cannot write) looks again.
const STORAGE_RECHECK: std::time::Duration = std::time::Duration::from_millis(250);

pub struct Core {
    pub state: State,
    pub shared: Arc<Shared>,
    pub workers: HashMap<(String, String), WorkerHandle>,
    /// Workers told to stop whose end has not been reported yet, by (run, task): their attempt.
    /// The task's next attempt waits for it (`workers::dispatch`): both would work in the
    /// task's one working tree, the old one perhaps for its whole kill grace.
    pub stopping: HashMap<(String, String), u32>,
    emitted_seq: u64,
    batch: Vec<Event>,
    callbacks: Vec<CommitFn>,
    touched: BTreeSet<String>,
    writer: WriterHandle,
    since_snapshot: u64,
    /// The `now` of the last dispatch: every task due by then was considered.
    dispatched_at: chrono::DateTime<chrono::Utc>,
    pub actor: Actor,
    /// Worktree runs whose results are being merged off the actor (`integration::integrate_ready`).
    pub integrating: std::collections::HashSet<String>,
}

/// A run's terminal event: the quiet moment after which `trim` returns free heap memory.
fn ends_run(ev: &Event) -> bool {
    use crew_core::run::EventBody;
    matches!(
        ev.body,
        EventBody::RunCompleted { .. }
            | EventBody::RunFailed { .. }
            | EventBody::RunCancelled { .. }
    )
}

impl Core {
    pub fn new(state: State, shared: Arc<Shared>, writer: WriterHandle, actor: Actor) -> Self {
        let emitted_seq = state.last_seq;
        Core {
            state,
            shared,
            workers: HashMap::new(),
            stopping: HashMap::new(),
            emitted_seq,
            batch: Vec::new(),
            callbacks: Vec::new(),
            touched: BTreeSet::new(),
            writer,
            since_snapshot: 0,
            dispatched_at: chrono::DateTime::<chrono::Utc>::MIN_UTC,
            actor,
            integrating: Default::default(),
        }
    }

    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
    }

    /// Stamp, apply and queue one event. Returns its seq.
    pub fn emit(&mut self, p: Pending) -> u64 {
        let now = self.now();
        self.emit_at(p, now)
    }

    /// Like `emit`, with a given event time (imported runs keep their history's times).
    pub fn emit_at(&mut self, p: Pending, time: chrono::DateTime<chrono::Utc>) -> u64 {
        let seq = self.emitted_seq + 1;
        let ev = self.state.stamp(p, seq, time);
        self.state.apply(&ev);
        if ends_run(&ev) {
            // What the run's attempts freed goes back to the system (off the actor).
            crate::trim::AFTER_RUN.request();
        }
        if let Some(r) = &ev.run_id {
            self.touched.insert(r.clone());
        }
        self.batch.push(ev);
        self.emitted_seq = seq;
        seq
    }

    pub fn emit_all(&mut self, ps: impl IntoIterator<Item = Pending>) {
        for p in ps {
            self.emit(p);
        }
    }

    /// Run `f` once everything emitted so far is durable (or failed to become durable).
    ///
    /// When it already is (nothing emitted since the last durable event, no earlier callback
    /// waiting), `f` runs now: a read then answers from the actor's turn instead of a round trip
    /// through the journal writer's thread, which was most of a read's tail latency at a paced
    /// load (`target/release/bench-rpc`).
    pub fn after_commit(&mut self, f: impl FnOnce(Result<(), Arc<str>>) + Send + 'static) {
        if self.batch.is_empty()
            && self.callbacks.is_empty()
            && self.emitted_seq <= self.shared.durable_seq()
        {
            f(Ok(()));
            return;
        }
        self.callbacks.push(Box::new(f));
    }

    pub fn touch(&mut self, run_id: &str) {
        self.touched.insert(run_id.to_string());
    }

    /// Derive follow-ups, stop workers whose task is no longer theirs, start what may start.
    fn settle_and_dispatch(&mut self) {
        let now = self.now();
        let touched = std::mem::take(&mut self.touched);
        for run in &touched {
            for _ in 0..10_000 {
                let ps = self.state.settle(run);
                if ps.is_empty() {
                    break;
                }
                self.emit_all(ps);
            }
        }
        self.touched.clear();
        integration::integrate_ready(self, &touched);
        self.reconcile_workers();
        // While the journal cannot write, no task starts: its `task.started` could not be made
        // durable, and the attempt would fail for storage, which counts against the task's
        // attempts (a few seconds of full disk would fail every task that became ready).
        // The loop looks again every `STORAGE_RECHECK` (`next_wake`) and starts them once it
        // writes again.
        if self.shared.storage_error().is_none() {
            workers::dispatch(self, now);
            self.dispatched_at = now;
        }
        // Events emitted by dispatch touch runs again; nothing more to settle for them now.
        self.touched.clear();
        if !touched.is_empty() {
            residency::enforce(self);
        }
    }

    /// A worker whose task is no longer running (cancelled, budget, run cancelled) is stopped.
    fn reconcile_workers(&mut self) {
        let state = &self.state;
        let stopping = &mut self.stopping;
        self.workers.retain(|(run, task), h| {
            let current = state
                .run(run)
                .and_then(|r| r.task(task))
                .is_some_and(|t| t.status == TaskStatus::Running && t.attempts == h.attempt);
            if !current {
                let reason = state
                    .run(run)
                    .and_then(|r| r.task(task))
                    .and_then(|t| t.error.clone());
                let _ = h.ctl.send(WorkerCtl::Stop {
                    reason: reason.unwrap_or_else(|| "cancelled".into()),
                });
                stopping.insert((run.clone(), task.clone()), h.attempt);
            }
            current
        });
    }

    fn commit(&mut self) {
        if self.batch.is_empty() && self.callbacks.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.batch);
        self.since_snapshot += events.len() as u64;
        let due = self.since_snapshot >= self.shared.config.snapshot_every;
        self.send(events, due);
    }

    /// Hands what is pending to the writer, with a snapshot of the state after it if asked.
    fn send(&mut self, events: Vec<Event>, with_snapshot: bool) {
        // Taking the snapshot shares the summaries (a persistent map) and copies only the
        // unfinished runs and the schedules; the writer serializes it once the events are durable.
        let snapshot = with_snapshot.then(|| {
            self.since_snapshot = 0;
            Box::new(self.state.snapshot())
        });
        let callbacks = std::mem::take(&mut self.callbacks);
        self.writer.send(Batch {
            events,
            callbacks,
            snapshot,
        });
    }

    /// Snapshot now (on shutdown) so the next start replays nothing. Sent even when nothing is
    /// pending: an idle daemon is the usual case at shutdown.
    pub fn snapshot_now(&mut self) {
        let events = std::mem::take(&mut self.batch);
        self.send(events, true);
    }
}

#[derive(Clone)]
pub struct Actor {
    tx: mpsc::UnboundedSender<Job>,
}

impl Actor {
    pub fn channel() -> (Actor, mpsc::UnboundedReceiver<Job>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Actor { tx }, rx)
    }

    /// Fire and forget (worker reports, timers).
    pub fn tell(&self, f: impl FnOnce(&mut Core) + Send + 'static) {
        let _ = self.tx.send(Box::new(f));
    }

    /// Run `f` on the state owner; the answer comes once everything it emitted is durable.
    pub async fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> Result<R, ApiError> + Send + 'static,
    ) -> Result<R, ApiError> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |core: &mut Core| {
            let before = core.emitted_seq;
            let r = f(core);
            // A call that emitted nothing (a read) answers even when the batch it waited for
            // fails: the failure is someone else's change (a worker's report in the same turn),
            // and reads keep working while the disk does not.
            let wrote = core.emitted_seq != before;
            core.after_commit(move |res| {
                let _ = tx.send(match res {
                    Ok(()) => r,
                    Err(_) if !wrote => r,
                    Err(e) => Err(ApiError::storage(
                        format!(
                            "the journal cannot write ({e}): the change is made but not durable; \
                             it is journaled when the disk works again"
                        ),
                        true,
                    )),
                });
            });
        });
        self.tx.send(job).map_err(|_| ApiError::shutting_down())?;
        rx.await.map_err(|_| ApiError::shutting_down())?
    }

    /// Like `call`, for changes: refused at once while the journal cannot write.
    pub async fn mutate<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> Result<R, ApiError> + Send + 'static,
    ) -> Result<R, ApiError> {
        self.call(move |core| {
            if let Some(e) = core.shared.storage_error() {
                return Err(ApiError::storage(
                    format!("the journal cannot write ({e}); nothing was changed"),
                    false,
                ));
            }
            if core.shared.is_shutting_down() {
                return Err(ApiError::shutting_down());
            }
            f(core)
        })
        .await
    }
}

impl Core {
    /// When a backed-off task becomes due that the last dispatch did not see yet. A task due
    /// earlier waits for a free slot, and a freed slot dispatches anyway (so no wake-up, and no
    /// busy loop, for it); one due in between must wake the loop even if that instant has
    /// already passed by the time the loop looks (a zero sleep, not none).
    fn next_wake(&self) -> Option<std::time::Duration> {
        // Held (the journal cannot write): nothing may start before the next look, whatever
        // became due meanwhile (its due time is already past: a zero sleep would spin).
        if self.shared.storage_error().is_some() {
            return Some(STORAGE_RECHECK);
        }
        self.state
            .next_wakeup(self.dispatched_at)
            .map(|t| (t - self.now()).to_std().unwrap_or_default())
    }
}

/// The actor loop. Ends when every `Actor` handle is gone.
pub async fn run(mut core: Core, mut rx: mpsc::UnboundedReceiver<Job>) {
    // What start-up emitted (daemon.started, recovery) is settled, dispatched and made durable
    // now, not when the first request happens to arrive. Every active run is looked at once: a
    // worktree run whose integration a crash interrupted starts it again.
    let active: Vec<String> = core.state.active.iter().cloned().collect();
    core.touched.extend(active);
    core.settle_and_dispatch();
    core.commit();
    loop {
        let wake = core.next_wake();
        let job = tokio::select! {
            j = rx.recv() => match j { Some(j) => Some(j), None => break },
            _ = tokio::time::sleep(wake.unwrap_or_default()), if wake.is_some() => None,
        };
        if let Some(j) = job {
            j(&mut core);
            for _ in 0..JOBS_PER_BATCH {
                match rx.try_recv() {
                    Ok(j) => j(&mut core),
                    Err(_) => break,
                }
            }
        }
        if wake.is_some() {
            // A backed-off task may be due: let dispatch look at every active run.
            let active: Vec<String> = core.state.active.iter().cloned().collect();
            core.touched.extend(active);
        }
        core.settle_and_dispatch();
        core.commit();
    }
    core.snapshot_now();
}
