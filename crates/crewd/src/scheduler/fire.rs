//! Firing a job. The actor side decides overlap and journals the run creation together with
//! `schedule.fired` (or `schedule.skipped` with the reason) in one actor job; the backend of
//! the timer loop prepares runs exactly like `team.run` does (`launch::prepare`) first.

use super::engine::{Backend, FireRequest};
use crate::actor::{Actor, Core};
use crate::launch;
use crate::shared::Shared;
use chrono::{DateTime, TimeDelta, Utc};
use crew_api::types::RunParams;
use crew_api::ApiError;
use crew_core::run::{EventBody, Pending, RunSpec, ScheduleJob};
use crew_core::schedule::{Overlap, Schedule};
use futures::future::BoxFuture;
use std::sync::Arc;
use tokio::sync::oneshot;

/// Read from the state without waiting for a commit (nothing is changed).
pub async fn read<R: Send + 'static>(
    actor: &Actor,
    f: impl FnOnce(&Core) -> R + Send + 'static,
) -> Option<R> {
    let (tx, rx) = oneshot::channel();
    actor.tell(move |core| {
        let _ = tx.send(f(core));
    });
    rx.await.ok()
}

/// A job's stored `team.run` params, validated and planned now (resources may have changed
/// since the job was added).
pub async fn prepare_run(
    shared: &Arc<Shared>,
    run: &serde_json::Value,
) -> Result<RunSpec, ApiError> {
    let params: RunParams = serde_json::from_value(run.clone())
        .map_err(|e| ApiError::invalid_params("run", e.to_string()))?;
    Ok(launch::prepare(shared, &params).await?.spec)
}

/// The job's runs that are not finished, oldest first.
pub fn active_runs(core: &Core, job_id: &str) -> Vec<String> {
    core.state
        .active
        .iter()
        .filter(|r| {
            core.state
                .run(r)
                .is_some_and(|run| run.spec.schedule_id.as_deref() == Some(job_id))
        })
        .cloned()
        .collect()
}

/// Cancel the job's still-active runs; their ids.
pub fn cancel_runs(core: &mut Core, job_id: &str, reason: &str) -> Vec<String> {
    let mut cancelled = Vec::new();
    for run in active_runs(core, job_id) {
        match core.state.cancel_run(&run, Some(reason.to_string())) {
            Ok((events, _)) => {
                core.emit_all(events);
                core.touch(&run);
                cancelled.push(run);
            }
            Err(e) => tracing::warn!(run = %run, error = %e, "cannot cancel a scheduled run"),
        }
    }
    cancelled
}

/// Whether `at` is one of the job's fire instants under its current spec (a fire armed before
/// an update must not fire under the new one).
fn is_fire_instant(job: &ScheduleJob, at: DateTime<Utc>) -> bool {
    let Ok(schedule) = Schedule::compile(&job.spec) else {
        return false;
    };
    let Ok(tz) = crew_core::schedule::parse_timezone(&job.timezone) else {
        return false;
    };
    at.checked_sub_signed(TimeDelta::nanoseconds(1))
        .and_then(|before| schedule.next_after(tz, job.created_at, before))
        == Some(at)
}

/// What happened to one scheduled instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Fired(String),
    Skipped(String),
    /// Not this job's fire any more (removed, disabled, changed, or already handled): nothing
    /// journaled.
    Stale,
}

/// Fire `job_id` for the scheduled instant `at`, with the run prepared from `run` (the params
/// it was prepared from, which must still be the job's).
pub fn fire_scheduled(
    core: &mut Core,
    job_id: &str,
    at: DateTime<Utc>,
    run: &serde_json::Value,
    spec: &Result<RunSpec, String>,
) -> Outcome {
    let Some(job) = core.state.schedules.get(job_id) else {
        return Outcome::Stale;
    };
    let current = job.enabled
        && job.last_fire_at.is_none_or(|last| at > last)
        && &job.run == run
        && is_fire_instant(job, at);
    if !current {
        return Outcome::Stale;
    }
    let overlap = job.overlap;
    let spec = match spec {
        Ok(spec) => spec.clone(),
        Err(reason) => return skip(core, job_id, at, format!("the run cannot start: {reason}")),
    };
    let active = active_runs(core, job_id);
    match overlap {
        Overlap::Skip => {
            if let Some(previous) = active.first() {
                let status = core
                    .state
                    .summaries
                    .get(previous)
                    .map(|s| s.status.as_str())
                    .unwrap_or("active");
                return skip(
                    core,
                    job_id,
                    at,
                    format!("overlap: the previous run {previous} is still {status}"),
                );
            }
        }
        Overlap::Allow => {}
        Overlap::CancelPrevious => {
            cancel_runs(
                core,
                job_id,
                &format!("superseded by the next fire of schedule {job_id}"),
            );
        }
    }
    match start_run(core, job_id, spec) {
        Ok(run_id) => {
            core.emit(Pending::global(EventBody::ScheduleFired {
                id: job_id.to_string(),
                at,
                run_id: run_id.clone(),
                manual: false,
            }));
            tracing::info!(job = job_id, run = %run_id, at = %at, "scheduled run started");
            Outcome::Fired(run_id)
        }
        Err(e) => skip(
            core,
            job_id,
            at,
            format!("the run cannot start: {}", e.message),
        ),
    }
}

/// `schedule.trigger`: a run now, whatever the schedule, enabled or not; journaled as a manual
/// fire (it does not move the schedule's cursor).
pub fn fire_manual(core: &mut Core, job_id: &str, spec: RunSpec) -> Result<String, ApiError> {
    if !core.state.schedules.contains_key(job_id) {
        return Err(ApiError::not_found("schedule", job_id));
    }
    let run_id = start_run(core, job_id, spec)?;
    let at = core.now();
    core.emit(Pending::global(EventBody::ScheduleFired {
        id: job_id.to_string(),
        at,
        run_id: run_id.clone(),
        manual: true,
    }));
    Ok(run_id)
}

fn start_run(core: &mut Core, job_id: &str, mut spec: RunSpec) -> Result<String, ApiError> {
    spec.schedule_id = Some(job_id.to_string());
    launch::create_in_core(core, spec)
}

fn skip(core: &mut Core, job_id: &str, at: DateTime<Utc>, reason: String) -> Outcome {
    tracing::info!(job = job_id, at = %at, reason = %reason, "scheduled fire skipped");
    core.emit(Pending::global(EventBody::ScheduleSkipped {
        id: job_id.to_string(),
        at,
        reason: reason.clone(),
    }));
    Outcome::Skipped(reason)
}

struct Sg(std::time::Instant);
impl Drop for Sg {
    fn drop(&mut self) {
        tracing::warn!(
            ms = self.0.elapsed().as_secs_f64() * 1000.0,
            "TIMING in actor"
        );
    }
}
fn scopeguard(t: std::time::Instant) -> Sg {
    Sg(t)
}

/// The timer loop's way into the daemon.
pub struct DaemonBackend {
    pub shared: Arc<Shared>,
    pub actor: Actor,
}

impl Backend for DaemonBackend {
    fn load_jobs(&self) -> BoxFuture<'static, Option<Vec<ScheduleJob>>> {
        let actor = self.actor.clone();
        Box::pin(async move {
            read(&actor, |core| {
                core.state.schedules.values().cloned().collect()
            })
            .await
        })
    }

    fn fire(&self, batch: Vec<FireRequest>) -> BoxFuture<'static, bool> {
        let actor = self.actor.clone();
        let shared = self.shared.clone();
        Box::pin(async move {
            let t0 = std::time::Instant::now();
            let n = batch.len();
            let ids: Vec<String> = batch.iter().map(|r| r.id.clone()).collect();
            let Some(runs) = read(&actor, move |core| {
                ids.iter()
                    .map(|id| core.state.schedules.get(id).map(|j| j.run.clone()))
                    .collect::<Vec<_>>()
            })
            .await
            else {
                return false;
            };
            // Prepared side by side: resource reads must not add up across a burst of fires.
            let prepared =
                futures::future::join_all(batch.into_iter().zip(runs).filter_map(|(req, run)| {
                    let shared = shared.clone();
                    run.map(|run| async move {
                        let spec = prepare_run(&shared, &run).await.map_err(|e| e.message);
                        (req, run, spec)
                    })
                }))
                .await;
            if prepared.is_empty() {
                return true;
            }
            let t_prep = t0.elapsed();
            let t_call = std::time::Instant::now();
            let r = actor
                .mutate(move |core| {
                    let t_in = std::time::Instant::now();
                    tracing::warn!(
                        wait_ms = t_call.elapsed().as_secs_f64() * 1000.0,
                        "TIMING actor picked up"
                    );
                    let _guard = scopeguard(t_in);
                    for (req, run, spec) in &prepared {
                        for at in &req.instants {
                            fire_scheduled(core, &req.id, *at, run, spec);
                        }
                    }
                    Ok(())
                })
                .await
                .is_ok();
            tracing::warn!(
                n,
                prep_ms = t_prep.as_secs_f64() * 1000.0,
                total_ms = t0.elapsed().as_secs_f64() * 1000.0,
                "TIMING fire batch"
            );
            r
        })
    }
}
