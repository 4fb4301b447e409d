//! The timer loop. It mirrors each job's timing from the journaled `schedule.*` events (the bus),
//! keeps one armed instant per enabled job, and when instants come hands them to the backend,
//! which fires them through the actor. Two wake-up sources look at the same queue: the
//! tokio-cron-scheduler one-shots (see `tcs.rs`) and, unless turned off, a `sleep_until` on the
//! earliest armed wake-up, because the crate alone is up to ~1.5 s late (see `scheduler.rs`).
//!
//! With the precise wake-up a job wakes `LEAD` before its instant: its run is prepared
//! (resources read, plan built: tens of milliseconds for a burst of fires) and the fire itself
//! waits for the instant, so the instant is not late by the preparation.
//!
//! Ordering: the writer publishes a batch's events on the bus before it answers the batch's
//! callers, and the loop polls the bus before completion messages (`biased`), so when a fire's
//! completion is handled the mirror already holds the cursor that fire moved.

use super::tcs::TcsTimers;
use super::timing::{plan_fire, Armed, JobTiming, Queue};
use crate::shared::Published;
use chrono::{DateTime, TimeDelta, Utc};
use crew_core::run::{Event, EventBody, ScheduleJob};
use futures::future::BoxFuture;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};
use uuid::Uuid;

/// How late an armed instant may be handled and still count as on time. Later than this (the
/// machine slept, the clock jumped, the journal could not write for a while) the fires are
/// "missed" and the job's `catchUp` decides, as after downtime.
pub const GRACE: TimeDelta = TimeDelta::seconds(30);
/// How long before its instant a fire is prepared (with the precise wake-up).
pub const LEAD: TimeDelta = TimeDelta::seconds(1);
/// A batch the actor refused (storage failing) is tried again this much later.
const RETRY: TimeDelta = TimeDelta::seconds(1);
/// The loop looks at the queue at least this often, whatever the timers say: a lost wake-up
/// or a wall-clock jump delays a fire by at most this.
const SWEEP: Duration = Duration::from_secs(20);
/// Only wake-ups this close get a tokio-cron-scheduler one-shot (each costs ~0.8 KB in the
/// crate, and its poll copies all of them twice a second); the sweep registers the rest as
/// they come near.
const TCS_HORIZON: TimeDelta = TimeDelta::minutes(10);
/// The wall clock moved this much against the monotonic one between two looks: it was
/// stepped (or the machine slept), and the wall-clock wake-ups of interval jobs are rebased.
const JUMP: TimeDelta = TimeDelta::seconds(1);

/// Wall-clock time, and where on tokio's clock a wall-clock instant falls.
pub trait Clock: Send + 'static {
    fn now(&self) -> DateTime<Utc>;
    fn instant_at(&self, t: DateTime<Utc>) -> tokio::time::Instant;
}

pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
    fn instant_at(&self, t: DateTime<Utc>) -> tokio::time::Instant {
        let wait = (t - Utc::now()).to_std().unwrap_or_default();
        let now = tokio::time::Instant::now();
        now.checked_add(wait).unwrap_or(now + SWEEP)
    }
}

/// One job's instants to fire, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct FireRequest {
    pub id: String,
    pub instants: Vec<DateTime<Utc>>,
}

/// What the loop needs from the daemon.
pub trait Backend: Send + Sync + 'static {
    /// Every job as the state has it now (`None`: the daemon is going away).
    fn load_jobs(&self) -> BoxFuture<'static, Option<Vec<ScheduleJob>>>;
    /// Prepare the runs, wait until `at` if given, then fire (or skip, by overlap) each
    /// instant and journal the outcome. `false` when nothing could be journaled (the journal
    /// is failing, or the daemon is shutting down).
    fn fire(
        &self,
        batch: Vec<FireRequest>,
        at: Option<tokio::time::Instant>,
    ) -> BoxFuture<'static, bool>;
}

struct Done {
    /// Job, and the instant its next fire must come after.
    items: Vec<(String, DateTime<Utc>)>,
    ok: bool,
}

/// Requests of one batch and what to re-arm them from.
#[derive(Default)]
struct Batch {
    requests: Vec<FireRequest>,
    items: Vec<(String, DateTime<Utc>)>,
}

pub struct Engine<B: Backend, C: Clock> {
    backend: Arc<B>,
    clock: C,
    jobs: HashMap<String, JobTiming>,
    queue: Queue,
    in_flight: HashSet<String>,
    tcs: Option<TcsTimers>,
    precise: bool,
    lead: TimeDelta,
    events: broadcast::Receiver<Published>,
    done_tx: mpsc::UnboundedSender<Done>,
    done_rx: mpsc::UnboundedReceiver<Done>,
    wake_rx: mpsc::UnboundedReceiver<(Arc<str>, Uuid)>,
    next_sweep: tokio::time::Instant,
    closed: bool,
    /// Interval jobs: the last instant handed to fire and when, on the monotonic clock. The
    /// next instant fires the interval after it, so a wall clock set back does not hold an
    /// interval job until the wall clock catches up (its labels then run ahead of the wall
    /// clock: the cursor never moves back).
    anchors: HashMap<String, (DateTime<Utc>, tokio::time::Instant)>,
    /// Wall and monotonic time at the loop's last look, to notice a step of the wall clock.
    last_look: (DateTime<Utc>, tokio::time::Instant),
}

impl<B: Backend, C: Clock> Engine<B, C> {
    /// `tcs`: the crate's timers (woken through `wake_rx`); `precise`: also wake at the
    /// earliest armed instant ourselves (and prepare fires ahead).
    pub fn new(
        backend: Arc<B>,
        clock: C,
        events: broadcast::Receiver<Published>,
        tcs: Option<TcsTimers>,
        wake_rx: mpsc::UnboundedReceiver<(Arc<str>, Uuid)>,
        precise: bool,
    ) -> Self {
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        Engine {
            backend,
            jobs: HashMap::new(),
            queue: Queue::default(),
            in_flight: HashSet::new(),
            tcs,
            precise,
            lead: if precise { LEAD } else { TimeDelta::zero() },
            events,
            done_tx,
            done_rx,
            wake_rx,
            next_sweep: tokio::time::Instant::now() + SWEEP,
            closed: false,
            anchors: HashMap::new(),
            last_look: (clock.now(), tokio::time::Instant::now()),
            clock,
        }
    }

    fn is_interval(&self, id: &str) -> bool {
        self.jobs
            .get(id)
            .is_some_and(|j| matches!(j.spec, crew_core::schedule::ScheduleSpec::Interval { .. }))
    }

    /// Where `at` of an interval job falls on the monotonic clock: the earlier of the wall
    /// clock's say and the interval after the job's anchor (its last fire, or now counted from
    /// the later of its cursor and the wall clock). The two agree unless the wall clock was
    /// stepped: back, the anchor wins; forward (or after a suspend), the wall clock does, and
    /// the fires in between are missed and caught up per `catchUp`.
    fn interval_fire(&self, id: &str, at: DateTime<Utc>) -> tokio::time::Instant {
        let mono_now = tokio::time::Instant::now();
        let by_wall = self.clock.instant_at(at);
        let (label, base) = match self.anchors.get(id) {
            Some((label, base)) if at > *label => (*label, *base),
            _ => {
                let cursor = self.jobs.get(id).map(|j| j.cursor());
                let now = self.clock.now();
                (cursor.map_or(now, |c| c.max(now)), mono_now)
            }
        };
        let ahead = (at - label).to_std().unwrap_or_default();
        let by_anchor = base.checked_add(ahead).unwrap_or(by_wall);
        by_wall.min(by_anchor)
    }

    /// The wall-clock time (as the clock reads now) of a monotonic instant.
    fn wall_of(&self, i: tokio::time::Instant) -> DateTime<Utc> {
        let mono_now = tokio::time::Instant::now();
        let now = self.clock.now();
        let d = |x: Duration| TimeDelta::from_std(x).unwrap_or(TimeDelta::MAX);
        if i >= mono_now {
            now.checked_add_signed(d(i - mono_now)).unwrap_or(now)
        } else {
            now.checked_sub_signed(d(mono_now - i)).unwrap_or(now)
        }
    }

    /// `at` armed to wake `lead` before it (interval jobs: before their monotonic instant).
    fn armed(&self, id: &str, at: DateTime<Utc>, grace: TimeDelta) -> Armed {
        if self.is_interval(id) {
            let fire = self.interval_fire(id, at);
            Armed {
                at,
                wake: self.wall_of(fire) - self.lead,
                grace,
                fire: Some(fire),
            }
        } else {
            Armed {
                at,
                wake: at - self.lead,
                grace,
                fire: None,
            }
        }
    }

    /// After a step of the wall clock, interval jobs' wall-clock wake-ups are wrong by the step:
    /// take them again from their monotonic instants. Cron and one-shot jobs keep theirs (they
    /// fire when the wall clock reads their instant, looked at again at least every `SWEEP`).
    async fn rebase_after_jump(&mut self) {
        let now = (self.clock.now(), tokio::time::Instant::now());
        let (wall0, mono0) = self.last_look;
        self.last_look = now;
        let elapsed = TimeDelta::from_std(now.1 - mono0).unwrap_or(TimeDelta::MAX);
        let step = now.0 - wall0 - elapsed;
        if step.abs() <= JUMP {
            return;
        }
        tracing::info!(
            step_ms = step.num_milliseconds(),
            "the wall clock was stepped; interval schedules keep the monotonic clock"
        );
        let ids: Vec<(String, Armed)> = self
            .queue
            .waking_by(DateTime::<Utc>::MAX_UTC)
            .filter(|(_, a)| a.fire.is_some())
            .map(|(id, a)| (id.to_string(), *a))
            .collect();
        for (id, a) in ids {
            if let Some(fire) = a.fire {
                let wake = self.wall_of(fire) - self.lead;
                self.arm(&id, Armed { wake, ..a }).await;
            }
        }
    }

    /// Arm every enabled job from the journaled state at start. A job whose next fire after
    /// its cursor is already past missed fires while the daemon was down: it is due now with
    /// no grace, so its `catchUp` decides.
    pub async fn load(&mut self, jobs: Vec<ScheduleJob>) {
        let now = self.clock.now();
        for job in jobs {
            let Some(timing) = JobTiming::from_job(&job) else {
                tracing::warn!(job = %job.id, "a scheduled job's spec or zone does not compile; it will not fire");
                continue;
            };
            let next = timing
                .enabled
                .then(|| timing.next_after(timing.cursor()))
                .flatten();
            self.jobs.insert(job.id.clone(), timing);
            if let Some(at) = next {
                let grace = if at <= now { TimeDelta::zero() } else { GRACE };
                let armed = self.armed(&job.id, at, grace);
                self.arm(&job.id, armed).await;
            }
        }
        tracing::info!(
            jobs = self.jobs.len(),
            armed = self.queue.len(),
            "scheduled jobs registered"
        );
    }

    pub async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        while !self.closed {
            let wake = match self.queue.earliest_wake() {
                Some(t) if self.precise => self.clock.instant_at(t).min(self.next_sweep),
                _ => self.next_sweep,
            };
            tokio::select! {
                biased;
                _ = &mut stop => break,
                ev = self.events.recv() => self.on_event(ev).await,
                Some(done) = self.done_rx.recv() => self.on_done(done).await,
                Some((id, uuid)) = self.wake_rx.recv() => self.on_tcs_wake(&id, uuid).await,
                _ = tokio::time::sleep_until(wake) => {}
            }
            self.rebase_after_jump().await;
            self.fire_due().await;
            if tokio::time::Instant::now() >= self.next_sweep {
                self.next_sweep = tokio::time::Instant::now() + SWEEP;
                self.extend_tcs_horizon().await;
            }
        }
        if let Some(tcs) = self.tcs.take() {
            tcs.shutdown().await;
        }
    }

    async fn on_event(&mut self, ev: Result<Published, broadcast::error::RecvError>) {
        let p = match ev {
            Ok(p) => p,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "the scheduler fell behind the event bus; reloading jobs"
                );
                self.resync().await;
                return;
            }
            Err(broadcast::error::RecvError::Closed) => {
                self.closed = true;
                return;
            }
        };
        // Cheap filter first: most events are about runs.
        if p.run_id.is_some() || !p.json.contains("\"type\":\"schedule.") {
            return;
        }
        let Ok(ev) = serde_json::from_str::<Event>(&p.json) else {
            return;
        };
        match ev.body {
            EventBody::ScheduleAdded(job) | EventBody::ScheduleUpdated(job) => {
                self.upsert(&job).await
            }
            EventBody::ScheduleRemoved { id, .. } => self.remove(&id).await,
            EventBody::ScheduleFired {
                id,
                at,
                manual: false,
                ..
            }
            | EventBody::ScheduleSkipped { id, at, .. } => self.handled(&id, at).await,
            _ => {}
        }
    }

    async fn resync(&mut self) {
        let Some(jobs) = self.backend.load_jobs().await else {
            return;
        };
        let keep: HashSet<String> = jobs.iter().map(|j| j.id.clone()).collect();
        let gone: Vec<String> = self
            .jobs
            .keys()
            .filter(|id| !keep.contains(*id))
            .cloned()
            .collect();
        for id in gone {
            self.remove(&id).await;
        }
        for job in jobs {
            self.upsert(&job).await;
        }
    }

    /// A job added or changed. Its fire times restart from now unless they did not change.
    async fn upsert(&mut self, job: &ScheduleJob) {
        let Some(timing) = JobTiming::from_job(job) else {
            tracing::warn!(job = %job.id, "a scheduled job's spec or zone does not compile; it will not fire");
            self.remove(&job.id).await;
            return;
        };
        let unchanged = self
            .jobs
            .get(&job.id)
            .is_some_and(|old| old.same_times(&timing));
        let enabled = timing.enabled;
        let next = timing.next_from(self.clock.now());
        self.jobs.insert(job.id.clone(), timing);
        if !unchanged {
            self.anchors.remove(&job.id);
        }
        if self.in_flight.contains(&job.id) {
            return; // re-armed when its fire completes
        }
        if !enabled {
            self.disarm(&job.id).await;
            return;
        }
        if unchanged && self.queue.get(&job.id).is_some() {
            return;
        }
        self.arm_at(&job.id, next).await;
    }

    async fn remove(&mut self, id: &str) {
        self.jobs.remove(id);
        self.anchors.remove(id);
        self.disarm(id).await;
    }

    /// A fire or skip was journaled for `at`.
    async fn handled(&mut self, id: &str, at: DateTime<Utc>) {
        let Some(job) = self.jobs.get_mut(id) else {
            return;
        };
        job.handled(at);
        // Normally the fire's completion re-arms; this covers an armed instant the journal
        // already passed (after a reload).
        let stale = !self.in_flight.contains(id) && self.queue.get(id).is_some_and(|a| a.at <= at);
        if stale {
            self.rearm_after(id, at).await;
        }
    }

    async fn on_done(&mut self, done: Done) {
        let now = self.clock.now();
        for (id, from) in done.items {
            self.in_flight.remove(&id);
            if done.ok {
                self.rearm_after(&id, from).await;
            } else {
                self.retry(&id, now).await;
            }
        }
    }

    /// Arm the first fire after both the cursor and `from`.
    async fn rearm_after(&mut self, id: &str, from: DateTime<Utc>) {
        let next = self
            .jobs
            .get(id)
            .filter(|j| j.enabled)
            .and_then(|j| j.next_after(j.cursor().max(from)));
        self.arm_at(id, next).await;
    }

    /// Nothing was journaled: the owed instant is still owed; look again a little later.
    async fn retry(&mut self, id: &str, now: DateTime<Utc>) {
        let owed = self
            .jobs
            .get(id)
            .filter(|j| j.enabled)
            .and_then(|j| j.next_after(j.cursor()));
        match owed {
            Some(at) => {
                let armed = Armed {
                    wake: now + RETRY,
                    ..self.armed(id, at, GRACE)
                };
                self.arm(id, armed).await
            }
            None => self.disarm(id).await,
        }
    }

    async fn on_tcs_wake(&mut self, id: &str, uuid: Uuid) {
        if let Some(tcs) = self.tcs.as_mut() {
            tcs.spent(id, uuid);
        }
        // The crate rounds to whole seconds and may wake early: wait again for the rest.
        let early = self
            .queue
            .get(id)
            .map(|a| a.wake)
            .filter(|wake| *wake > self.clock.now());
        if let (Some(wake), Some(tcs)) = (early, self.tcs.as_mut()) {
            tcs.arm(id, wake).await;
        }
    }

    async fn fire_due(&mut self) {
        let now = self.clock.now();
        if self.queue.earliest_wake().is_none_or(|t| t > now) {
            return;
        }
        // On-time fires, by instant (each batch waits for its instant); overdue ones at once.
        let mut on_time: BTreeMap<(DateTime<Utc>, tokio::time::Instant), Batch> = BTreeMap::new();
        let mut overdue = Batch::default();
        let mut idle = Vec::new();
        let mut dropped = Vec::new();
        for (id, armed) in self.queue.take_due(now) {
            let Some(job) = self.jobs.get(&id).filter(|j| j.enabled) else {
                dropped.push(id);
                continue;
            };
            let plan = plan_fire(job, &armed, now);
            let batch = match plan.instants.as_slice() {
                [] => {
                    idle.push((id, plan.resume_from));
                    continue;
                }
                [at] if *at > now => {
                    let fire = armed.fire.unwrap_or_else(|| self.clock.instant_at(*at));
                    if armed.fire.is_some() {
                        self.anchors.insert(id.clone(), (*at, fire));
                    }
                    on_time.entry((*at, fire)).or_default()
                }
                // Fired at once; an interval job's next instant counts from the wall clock.
                _ => {
                    self.anchors.remove(&id);
                    &mut overdue
                }
            };
            self.in_flight.insert(id.clone());
            batch.items.push((id.clone(), plan.resume_from));
            batch.requests.push(FireRequest {
                id,
                instants: plan.instants,
            });
        }
        if !overdue.requests.is_empty() {
            self.spawn_fire(overdue, None);
        }
        for ((_, fire), batch) in on_time {
            self.spawn_fire(batch, Some(fire));
        }
        for (id, from) in idle {
            self.rearm_after(&id, from).await;
        }
        for id in dropped {
            self.disarm(&id).await;
        }
    }

    fn spawn_fire(&self, batch: Batch, at: Option<tokio::time::Instant>) {
        let backend = self.backend.clone();
        let tx = self.done_tx.clone();
        tokio::spawn(async move {
            let ok = backend.fire(batch.requests, at).await;
            let _ = tx.send(Done {
                items: batch.items,
                ok,
            });
        });
    }

    async fn arm_at(&mut self, id: &str, at: Option<DateTime<Utc>>) {
        match at {
            Some(at) => {
                let armed = self.armed(id, at, GRACE);
                self.arm(id, armed).await
            }
            None => self.disarm(id).await,
        }
    }

    async fn arm(&mut self, id: &str, armed: Armed) {
        self.queue.arm(id, armed);
        let near = armed.wake <= self.clock.now() + TCS_HORIZON;
        if let Some(tcs) = self.tcs.as_mut() {
            if near {
                tcs.arm(id, armed.wake).await;
            } else {
                tcs.disarm(id).await;
            }
        }
    }

    async fn disarm(&mut self, id: &str) {
        self.queue.disarm(id);
        if let Some(tcs) = self.tcs.as_mut() {
            tcs.disarm(id).await;
        }
    }

    /// Give a tokio-cron-scheduler one-shot to every wake-up that came within the horizon.
    async fn extend_tcs_horizon(&mut self) {
        let Some(tcs) = self.tcs.as_mut() else {
            return;
        };
        let until = self.clock.now() + TCS_HORIZON;
        let missing: Vec<(String, DateTime<Utc>)> = self
            .queue
            .waking_by(until)
            .filter(|(id, _)| !tcs.is_armed(id))
            .map(|(id, a)| (id.to_string(), a.wake))
            .collect();
        for (id, wake) in missing {
            tcs.arm(&id, wake).await;
        }
    }
}
