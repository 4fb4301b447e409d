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
    /// Not this job's fire any more (removed, disabled, rescheduled, or already handled):
    /// nothing journaled.
    Stale,
    /// Still due, but the job's run params changed since the run was prepared: nothing
    /// journaled; prepare again.
    ParamsChanged,
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
    // Not an instant already handled, nor one from before the job was enabled or given new
    // times (a fire prepared then is not owed).
    let current = job.enabled
        && job.last_fire_at.is_none_or(|last| at > last)
        && job.owed_from.is_none_or(|from| at > from)
        && is_fire_instant(job, at);
    if !current {
        return Outcome::Stale;
    }
    if &job.run != run {
        return Outcome::ParamsChanged;
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

/// The timer loop's way into the daemon.
pub struct DaemonBackend {
    pub shared: Arc<Shared>,
    pub actor: Actor,
}

/// One job's fire, prepared from the params it had when read.
struct Ready {
    req: FireRequest,
    run: serde_json::Value,
    spec: Result<RunSpec, String>,
}

impl DaemonBackend {
    /// Read the jobs' current params and prepare their runs side by side (resource reads must
    /// not add up across a burst of fires).
    async fn prepare(&self, batch: Vec<FireRequest>) -> Option<Vec<Ready>> {
        let ids: Vec<String> = batch.iter().map(|r| r.id.clone()).collect();
        let runs = read(&self.actor, move |core| {
            ids.iter()
                .map(|id| core.state.schedules.get(id).map(|j| j.run.clone()))
                .collect::<Vec<_>>()
        })
        .await?;
        let jobs = batch.into_iter().zip(runs).filter_map(|(req, run)| {
            let shared = self.shared.clone();
            run.map(|run| async move {
                let spec = prepare_run(&shared, &run).await.map_err(|e| e.message);
                Ready { req, run, spec }
            })
        });
        Some(futures::future::join_all(jobs).await)
    }

    /// Fire prepared jobs in one actor job. `None`: nothing could be journaled. Otherwise the
    /// requests whose params changed since they were read.
    async fn fire_ready(&self, ready: Vec<Ready>) -> Option<Vec<FireRequest>> {
        if ready.is_empty() {
            return Some(Vec::new());
        }
        self.actor
            .mutate(move |core| {
                let mut changed = Vec::new();
                for r in ready {
                    let mut again = Vec::new();
                    for at in &r.req.instants {
                        if fire_scheduled(core, &r.req.id, *at, &r.run, &r.spec)
                            == Outcome::ParamsChanged
                        {
                            again.push(*at);
                        }
                    }
                    if !again.is_empty() {
                        changed.push(FireRequest {
                            id: r.req.id,
                            instants: again,
                        });
                    }
                }
                Ok(changed)
            })
            .await
            .ok()
    }
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

    fn fire(
        &self,
        batch: Vec<FireRequest>,
        at: Option<tokio::time::Instant>,
    ) -> BoxFuture<'static, bool> {
        let this = DaemonBackend {
            shared: self.shared.clone(),
            actor: self.actor.clone(),
        };
        Box::pin(async move {
            let Some(ready) = this.prepare(batch).await else {
                return false;
            };
            if let Some(at) = at {
                tokio::time::sleep_until(at).await;
            }
            let Some(changed) = this.fire_ready(ready).await else {
                return false;
            };
            if changed.is_empty() {
                return true;
            }
            // Params changed while the runs were prepared ahead: once more, with the new ones.
            let Some(ready) = this.prepare(changed).await else {
                return false;
            };
            this.fire_ready(ready).await.is_some()
        })
    }
}
