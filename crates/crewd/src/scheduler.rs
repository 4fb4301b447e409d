//! Scheduled jobs: timers and firing (SPEC §8, issue 5).
//!
//! Fire times come only from `crew_core::schedule` (`next_fire`, `missed_fires`). The timer
//! loop (`engine`) mirrors each job's timing from the journaled `schedule.*` events and arms
//! one instant per enabled job; a due instant goes to the actor (`fire`), which applies the
//! overlap policy and journals the run with `schedule.fired` (or `schedule.skipped`) at the
//! scheduled instant, never the wake time. tokio-cron-scheduler drives the timers with one
//! one-shot job per armed wake-up within the next 10 minutes (`tcs`), re-created after every
//! fire; its cron parser, `*_tz` constructors, repeated jobs and stores are not used.
//!
//! Why there is a second wake-up: the crate polls every 500 ms and keeps times in whole
//! seconds (`new_one_shot_at_instant` turns the instant into `now_secs + as_secs()`), so a
//! one-shot wakes up to ~2 s early (the loop finds nothing due and re-arms) and up to 500 ms
//! late. With the crate alone (`CREW_SCHEDULER_WAKEUP=tcs`) `benches/schedule.rs` measured fire
//! lateness p50 60 ms / p99 512 ms (100 jobs due in the same second, 10,000 jobs), against
//! issue 5's p99 < 100 ms. So by default the loop also sleeps until the earliest wake-up
//! itself and prepares runs a second ahead (p50 5 ms / p99 43 ms in the same benchmark).

mod engine;
mod fire;
mod tcs;
mod timing;

#[cfg(test)]
mod tests;

pub use fire::{cancel_runs, fire_manual, prepare_run};

/// A job's next fire as clients see it: none while disabled; otherwise the first instant after
/// both its last handled fire and `now` (the same rule the timer loop arms by).
pub fn next_fire_at(
    job: &crew_core::run::ScheduleJob,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    timing::JobTiming::from_job(job)
        .filter(|t| t.enabled)
        .and_then(|t| t.next_from(now))
}

use crate::actor::Actor;
use crate::shared::Shared;
use std::sync::{Arc, OnceLock};
use tokio::sync::{mpsc, oneshot};

/// The daemon's local IANA zone: `$TZ`, else `/etc/timezone`, else the `/etc/localtime` link,
/// else UTC. Read once.
pub fn local_zone() -> String {
    static ZONE: OnceLock<String> = OnceLock::new();
    ZONE.get_or_init(find_local_zone).clone()
}

fn find_local_zone() -> String {
    if let Ok(tz) = std::env::var("TZ") {
        let tz = tz.trim_start_matches(':').to_string();
        if tz.parse::<chrono_tz::Tz>().is_ok() {
            return tz;
        }
    }
    if let Ok(s) = std::fs::read_to_string("/etc/timezone") {
        let s = s.trim().to_string();
        if s.parse::<chrono_tz::Tz>().is_ok() {
            return s;
        }
    }
    if let Ok(p) = std::fs::read_link("/etc/localtime") {
        let s = p.display().to_string();
        if let Some((_, name)) = s.split_once("zoneinfo/") {
            if name.parse::<chrono_tz::Tz>().is_ok() {
                return name.to_string();
            }
        }
    }
    "UTC".into()
}

/// `CREW_SCHEDULER_WAKEUP=tcs` leaves the wake-ups to tokio-cron-scheduler alone (to measure
/// it); anything else, or unset, adds the precise wake-up.
fn precise_wakeups() -> bool {
    std::env::var("CREW_SCHEDULER_WAKEUP").map_or(true, |v| v != "tcs")
}

/// Drives scheduled jobs until `shutdown`.
pub struct Scheduler {
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

/// Register every job (handling fires missed while the daemon was down per job `catchUp`) and
/// start the timer loop. Call after the actor runs.
pub async fn start(shared: Arc<Shared>, actor: Actor) -> anyhow::Result<Scheduler> {
    // Subscribe before reading the jobs: a change in between is then seen twice, not lost.
    let events = shared.bus.subscribe();
    let (wake_tx, wake_rx) = mpsc::unbounded_channel();
    let tcs = tcs::TcsTimers::start(wake_tx)
        .await
        .map_err(|e| anyhow::anyhow!("cannot start tokio-cron-scheduler: {e:?}"))?;
    let precise = precise_wakeups();
    if !precise {
        tracing::warn!("CREW_SCHEDULER_WAKEUP=tcs: scheduled fires wait for tokio-cron-scheduler's 500 ms poll");
    }
    let backend = Arc::new(fire::DaemonBackend { shared, actor });
    let mut engine = engine::Engine::new(
        backend.clone(),
        engine::WallClock,
        events,
        Some(tcs),
        wake_rx,
        precise,
    );
    let (stop_tx, stop_rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        use engine::Backend;
        if let Some(jobs) = backend.load_jobs().await {
            engine.load(jobs).await;
        }
        engine.run(stop_rx).await;
    });
    Ok(Scheduler {
        stop: Some(stop_tx),
        task: Some(task),
    })
}

impl Scheduler {
    /// Stop firing. A fire already handed to the actor is journaled or refused (the daemon
    /// is shutting down); a refused one is caught up at the next start per `catchUp`.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        }
    }
}
