//! The timer loop on tokio's paused clock: a fake backend records every fire with the wall
//! time it happened and journals it back on a bus, as the actor would.

use super::engine::{Backend, Clock, Engine, FireRequest};
use super::timing::JobTiming;
use crate::shared::Published;
use chrono::{DateTime, TimeDelta, Utc};
use crew_core::run::{Event, EventBody, ScheduleJob};
use crew_core::schedule::{CatchUp, Overlap, ScheduleSpec};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};

const T0: &str = "2025-03-01T12:00:00Z";

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn t(secs: i64) -> DateTime<Utc> {
    utc(T0) + TimeDelta::seconds(secs)
}

/// Wall time = T0 + tokio time elapsed + `jump` (a clock step or a suspend).
#[derive(Clone)]
struct TestClock {
    base: tokio::time::Instant,
    jump: Arc<Mutex<TimeDelta>>,
}

impl TestClock {
    fn jump(&self) -> TimeDelta {
        *self.jump.lock().unwrap()
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        let elapsed = TimeDelta::from_std(self.base.elapsed()).unwrap();
        utc(T0) + elapsed + self.jump()
    }
    fn instant_at(&self, at: DateTime<Utc>) -> tokio::time::Instant {
        let offset = (at - utc(T0) - self.jump()).to_std().unwrap_or_default();
        self.base + offset
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Fired {
    id: String,
    at: DateTime<Utc>,
    when: DateTime<Utc>,
}

/// (due instant handed to the fire path, the previous fire it saw)
type Handed = (DateTime<Utc>, Option<DateTime<Utc>>);

struct Fake {
    bus: broadcast::Sender<Published>,
    clock: TestClock,
    seq: AtomicU64,
    fires: Mutex<Vec<Fired>>,
    /// Batches to refuse (as while the journal cannot write).
    refuse: AtomicUsize,
    /// The jobs as the actor would see them, to refuse stale fires as it does.
    jobs: Mutex<HashMap<String, ScheduleJob>>,
    /// When each batch was handed over (to prepare), and the wall time it was to fire at.
    handed: Mutex<Vec<Handed>>,
}

impl Fake {
    fn publish(&self, body: EventBody) {
        match &body {
            EventBody::ScheduleAdded(job) | EventBody::ScheduleUpdated(job) => {
                self.jobs
                    .lock()
                    .unwrap()
                    .insert(job.id.clone(), (**job).clone());
            }
            EventBody::ScheduleRemoved { id, .. } => {
                self.jobs.lock().unwrap().remove(id);
            }
            _ => {}
        }
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let ev = Event {
            seq,
            run_seq: 0,
            time: self.clock.now(),
            run_id: None,
            task_id: None,
            message: None,
            body,
        };
        let _ = self.bus.send(Published {
            seq,
            run_id: None,
            json: Arc::from(serde_json::to_string(&ev).unwrap()),
        });
    }

    /// The actor's checks: enabled, not handled yet, an instant of the current spec.
    fn current(&self, id: &str, at: DateTime<Utc>) -> bool {
        let mut jobs = self.jobs.lock().unwrap();
        let Some(job) = jobs.get_mut(id) else {
            return false;
        };
        let timing = JobTiming::from_job(job).unwrap();
        let ok = job.enabled
            && job.last_fire_at.is_none_or(|l| at > l)
            && timing.next_after(at - TimeDelta::nanoseconds(1)) == Some(at);
        if ok {
            job.last_fire_at = Some(at);
        }
        ok
    }

    fn fire_now(&self, batch: Vec<FireRequest>) -> bool {
        let refuse = self
            .refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if refuse {
            return false;
        }
        for req in batch {
            for at in req.instants {
                if !self.current(&req.id, at) {
                    continue;
                }
                self.fires.lock().unwrap().push(Fired {
                    id: req.id.clone(),
                    at,
                    when: self.clock.now(),
                });
                self.publish(EventBody::ScheduleFired {
                    id: req.id.clone(),
                    at,
                    run_id: format!("run-{at}"),
                    manual: false,
                });
            }
        }
        true
    }
}

struct FakeBackend(Arc<Fake>);

impl Backend for FakeBackend {
    fn load_jobs(&self) -> BoxFuture<'static, Option<Vec<ScheduleJob>>> {
        let jobs = self.0.jobs.lock().unwrap().values().cloned().collect();
        Box::pin(async move { Some(jobs) })
    }

    fn fire(
        &self,
        batch: Vec<FireRequest>,
        at: Option<tokio::time::Instant>,
    ) -> BoxFuture<'static, bool> {
        let fake = self.0.clone();
        let due = at.map(|at| {
            let ahead = TimeDelta::from_std(at - tokio::time::Instant::now()).unwrap();
            fake.clock.now() + ahead
        });
        fake.handed.lock().unwrap().push((fake.clock.now(), due));
        Box::pin(async move {
            if let Some(at) = at {
                tokio::time::sleep_until(at).await;
            }
            fake.fire_now(batch)
        })
    }
}

struct Harness {
    fake: Arc<Fake>,
    clock: TestClock,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Harness {
    async fn start(jobs: Vec<ScheduleJob>) -> Harness {
        let clock = TestClock {
            base: tokio::time::Instant::now(),
            jump: Arc::new(Mutex::new(TimeDelta::zero())),
        };
        let (bus, events) = broadcast::channel(1024);
        let fake = Arc::new(Fake {
            bus,
            clock: clock.clone(),
            seq: AtomicU64::new(0),
            fires: Mutex::new(Vec::new()),
            refuse: AtomicUsize::new(0),
            jobs: Mutex::new(jobs.iter().map(|j| (j.id.clone(), j.clone())).collect()),
            handed: Mutex::new(Vec::new()),
        });
        let (_wake_tx, wake_rx) = mpsc::unbounded_channel();
        let backend = Arc::new(FakeBackend(fake.clone()));
        let mut engine = Engine::new(backend, clock.clone(), events, None, wake_rx, true);
        engine.load(jobs).await;
        let (stop, stop_rx) = oneshot::channel();
        let task = tokio::spawn(engine.run(stop_rx));
        Harness {
            fake,
            clock,
            stop: Some(stop),
            task,
        }
    }

    /// Let `secs` of (virtual) time pass.
    async fn advance(&self, secs: f64) {
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    }

    fn fires(&self) -> Vec<(String, DateTime<Utc>, DateTime<Utc>)> {
        self.fake
            .fires
            .lock()
            .unwrap()
            .iter()
            .map(|f| (f.id.clone(), f.at, f.when))
            .collect()
    }

    async fn finish(mut self) -> Vec<(String, DateTime<Utc>, DateTime<Utc>)> {
        let _ = self.stop.take().unwrap().send(());
        let fires = self.fires();
        self.task.await.unwrap();
        fires
    }
}

fn job(id: &str, spec: ScheduleSpec, created: DateTime<Utc>) -> ScheduleJob {
    ScheduleJob {
        id: id.into(),
        name: id.into(),
        spec,
        timezone: "UTC".into(),
        enabled: true,
        overlap: Overlap::Skip,
        catch_up: CatchUp::Latest,
        run: serde_json::json!({}),
        created_at: created,
        last_fire_at: None,
        last_manual_fire_at: None,
        last_run_id: None,
        fire_count: 0,
        run_ids: vec![],
        owed_from: None,
        last_skip: None,
    }
}

fn cron(expr: &str) -> ScheduleSpec {
    ScheduleSpec::Cron { expr: expr.into() }
}

/// (job, scheduled instant, wall time it fired) for on-time fires.
fn on_time(id: &str, secs: &[i64]) -> Vec<(String, DateTime<Utc>, DateTime<Utc>)> {
    secs.iter()
        .map(|s| (id.to_string(), t(*s), t(*s)))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn every_second_fires_each_instant_on_time() {
    let h = Harness::start(vec![
        job("sec", cron("* * * * * *"), t(0)),
        job("iv", ScheduleSpec::Interval { ms: 2500 }, t(0)),
    ])
    .await;
    h.advance(5.5).await;
    let mut fires = h.finish().await;
    fires.sort_by_key(|f| (f.0.clone(), f.1));
    let ms = |ms: i64| utc(T0) + TimeDelta::milliseconds(ms);
    let mut want = vec![
        ("iv".to_string(), ms(2500), ms(2500)),
        ("iv".to_string(), ms(5000), ms(5000)),
    ];
    want.extend(on_time("sec", &[1, 2, 3, 4, 5]));
    assert_eq!(fires, want);
}

#[tokio::test(start_paused = true)]
async fn one_shot_fires_once() {
    let h = Harness::start(vec![job("once", ScheduleSpec::At { at: t(2) }, t(0))]).await;
    h.advance(30.0).await;
    assert_eq!(h.finish().await, on_time("once", &[2]));
}

#[tokio::test(start_paused = true)]
async fn start_up_catch_up_per_policy() {
    // Created 35 minutes ago, every 10 minutes, never fired: 3 fires missed.
    let cases = [
        (CatchUp::None, vec![]),
        (CatchUp::Latest, vec![-300]),
        (CatchUp::All, vec![-1500, -900, -300]),
    ];
    for (policy, missed) in cases {
        let mut j = job("j", ScheduleSpec::Interval { ms: 600_000 }, t(-2100));
        j.catch_up = policy;
        let h = Harness::start(vec![j]).await;
        h.advance(301.0).await;
        let mut want: Vec<_> = missed
            .iter()
            .map(|s| ("j".to_string(), t(*s), t(0)))
            .collect();
        // Then on schedule again.
        want.extend(on_time("j", &[300]));
        assert_eq!(h.finish().await, want, "{policy:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn start_up_continues_after_the_last_fire() {
    let mut j = job("j", cron("* * * * * *"), t(-100));
    j.last_fire_at = Some(t(0));
    let h = Harness::start(vec![j]).await;
    h.advance(2.5).await;
    assert_eq!(h.finish().await, on_time("j", &[1, 2]));
}

#[tokio::test(start_paused = true)]
async fn disabled_jobs_do_not_fire_and_enabling_does_not_owe_the_past() {
    let mut j = job("j", cron("* * * * * *"), t(0));
    j.enabled = false;
    let h = Harness::start(vec![j.clone()]).await;
    h.advance(5.0).await;
    assert!(h.fires().is_empty());
    j.enabled = true;
    h.fake
        .publish(EventBody::ScheduleUpdated(Box::new(j.clone())));
    h.advance(2.5).await;
    j.enabled = false;
    j.last_fire_at = Some(t(7));
    h.fake.publish(EventBody::ScheduleUpdated(Box::new(j)));
    h.advance(5.0).await;
    assert_eq!(h.finish().await, on_time("j", &[6, 7]));
}

/// A restart after a job was enabled: the span it was disabled for is not downtime. Enabled
/// 2 s before the restart (`owed_from`), every second, `catchUp: all`: the two fires since
/// then are caught up and no more — it used to replay the 100 before them.
#[tokio::test(start_paused = true)]
async fn a_restart_after_enabling_owes_only_what_came_since() {
    let mut j = job("j", cron("* * * * * *"), t(-300));
    j.catch_up = CatchUp::All;
    j.owed_from = Some(t(-2));
    let h = Harness::start(vec![j]).await;
    h.advance(1.5).await;
    let mut want: Vec<_> = [-1, 0]
        .iter()
        .map(|s| ("j".to_string(), t(*s), t(0)))
        .collect();
    want.extend(on_time("j", &[1]));
    assert_eq!(h.finish().await, want);
}

#[tokio::test(start_paused = true)]
async fn updates_rearm_and_removal_stops() {
    let h = Harness::start(vec![job("j", cron("* * * * * *"), t(0))]).await;
    h.advance(2.5).await;
    let mut j = job("j", cron("*/5 * * * * *"), t(0));
    j.last_fire_at = Some(t(2));
    h.fake.publish(EventBody::ScheduleUpdated(Box::new(j)));
    h.advance(8.0).await; // to t=10.5
    h.fake.publish(EventBody::ScheduleRemoved {
        id: "j".into(),
        cancelled_run_ids: vec![],
    });
    h.advance(20.0).await;
    assert_eq!(h.finish().await, on_time("j", &[1, 2, 5, 10]));
}

#[tokio::test(start_paused = true)]
async fn added_jobs_are_armed_from_the_bus() {
    let h = Harness::start(vec![]).await;
    h.advance(1.25).await;
    h.fake.publish(EventBody::ScheduleAdded(Box::new(job(
        "new",
        ScheduleSpec::Interval { ms: 1000 },
        t(1) + TimeDelta::milliseconds(250),
    ))));
    h.advance(2.5).await;
    let ms = |ms: i64| utc(T0) + TimeDelta::milliseconds(ms);
    assert_eq!(
        h.finish().await,
        vec![
            ("new".to_string(), ms(2250), ms(2250)),
            ("new".to_string(), ms(3250), ms(3250)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_batch_is_retried_and_no_instant_is_lost() {
    let h = Harness::start(vec![job("j", cron("* * * * * *"), t(0))]).await;
    h.fake.refuse.store(1, Ordering::SeqCst);
    h.advance(3.5).await;
    assert_eq!(
        h.finish().await,
        vec![
            ("j".to_string(), t(1), t(2)),
            ("j".to_string(), t(2), t(2)),
            ("j".to_string(), t(3), t(3)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_clock_jump_past_the_grace_is_caught_up_per_policy() {
    // Every minute; the wall clock jumps 10 minutes ahead 30 s in (a suspend, a clock step).
    let h = Harness::start(vec![job("j", cron("* * * * *"), t(0))]).await;
    h.advance(30.0).await;
    *h.clock.jump.lock().unwrap() = TimeDelta::minutes(10);
    h.advance(31.0).await;
    // The loop's periodic look (every 20 s) finds the 12:01 fire 9m40s late: `latest` fires
    // the last missed instant (12:10) at once, then the schedule goes on (12:11).
    assert_eq!(
        h.finish().await,
        vec![
            ("j".to_string(), t(600), t(640)),
            ("j".to_string(), t(660), t(660)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn runs_are_prepared_a_second_ahead_and_fired_at_the_instant() {
    let h = Harness::start(vec![
        job("a", cron("*/5 * * * * *"), t(0)),
        job("b", cron("*/5 * * * * *"), t(0)),
    ])
    .await;
    h.advance(10.5).await;
    // One batch per instant for both jobs, handed over a second early, due at the instant.
    let handed = h.fake.handed.lock().unwrap().clone();
    assert_eq!(handed, vec![(t(4), Some(t(5))), (t(9), Some(t(10)))]);
    let mut fires = h.finish().await;
    fires.sort_by_key(|f| (f.1, f.0.clone()));
    let mut want = on_time("a", &[5]);
    want.extend(on_time("b", &[5]));
    want.extend(on_time("a", &[10]));
    want.extend(on_time("b", &[10]));
    assert_eq!(fires, want);
}

#[tokio::test(start_paused = true)]
async fn a_wall_clock_stepped_back_keeps_intervals_on_the_monotonic_clock() {
    let h = Harness::start(vec![
        job("iv", ScheduleSpec::Interval { ms: 2000 }, t(0)),
        job("cron", cron("* * * * * *"), t(0)),
    ])
    .await;
    h.advance(2.5).await;
    // The wall clock is set back an hour; the monotonic clock goes on.
    *h.clock.jump.lock().unwrap() = TimeDelta::hours(-1);
    h.advance(5.0).await;
    let fires = h.finish().await;
    let back = TimeDelta::hours(-1);
    // The interval keeps firing every 2 s of elapsed time; its instants go on from its last
    // fire (a cursor never moves back), so they read an hour ahead of the wall clock.
    let iv: Vec<_> = fires.iter().filter(|f| f.0 == "iv").cloned().collect();
    assert_eq!(
        iv,
        vec![
            ("iv".to_string(), t(2), t(2)),
            ("iv".to_string(), t(4), t(4) + back),
            ("iv".to_string(), t(6), t(6) + back),
        ]
    );
    // Cron follows the wall clock: nothing after 12:00:03 until the clock reads it again (the
    // 12:00:03 fire was prepared before the step).
    assert!(
        fires.iter().all(|f| f.0 != "cron" || f.1 <= t(3)),
        "{fires:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wall_clock_stepped_forward_catches_intervals_up() {
    let mut j = job("iv", ScheduleSpec::Interval { ms: 2000 }, t(0));
    j.catch_up = CatchUp::Latest;
    let h = Harness::start(vec![j]).await;
    h.advance(2.5).await;
    *h.clock.jump.lock().unwrap() = TimeDelta::minutes(10);
    h.advance(4.0).await;
    let fires = h.finish().await;
    // 12:00:02 on time; then the 12:00:04 instant is ten minutes late: `latest` fires the last
    // missed one once, and the interval goes on from the wall clock.
    assert_eq!(fires[0], ("iv".to_string(), t(2), t(2)));
    let jump = TimeDelta::minutes(10);
    assert!(fires.len() >= 2, "{fires:?}");
    for f in &fires[1..] {
        assert!(f.1 > t(600) && f.1 <= f.2, "{fires:?}");
        assert!(f.2 >= t(3) + jump, "{fires:?}");
    }
}
