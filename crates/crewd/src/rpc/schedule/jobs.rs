//! Changing jobs: add, update, enable, disable, remove. Each change is one journaled
//! `schedule.*` event, made on the actor after the params are checked off it.

use super::{
    check_job_key, check_name, check_unique, core_catch_up, core_overlap, get_job, job_view,
    lookup, schedule_error, validated_run, zone, Out, P,
};
use crate::rpc::Ctx;
use crate::scheduler;
use chrono::Utc;
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::ApiError;
use crew_core::run::{EventBody, Pending, ScheduleJob};
use crew_core::schedule::{self as sched, ScheduleSpec};
use std::sync::Arc;

/// A bound on jobs, so no client can grow the state without limit.
const JOBS_MAX: usize = 100_000;
/// Default names quote this much of the goal.
const NAME_GOAL_CHARS: usize = 60;

/// A job's name as asked for: given by the client, or made up from the goal.
enum NameChoice {
    Given(String),
    FromGoal(String),
}

fn default_name(run: &RunParams) -> String {
    let goal: String = run
        .goal
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(NAME_GOAL_CHARS)
        .collect();
    format!("{}: {goal}", run.team.as_deref().unwrap_or("default"))
}

pub(super) async fn add(ctx: Arc<Ctx>, p: P<ScheduleAdd>) -> Out<ScheduleAdd> {
    let now = Utc::now();
    let name = p.name.as_deref().map(check_name).transpose()?;
    let timezone = p.timezone.clone().unwrap_or_else(scheduler::local_zone);
    zone(&timezone)?;
    let spec = sched::validate_spec(p.cron.as_deref(), p.interval_ms, p.at.as_deref(), now)
        .map_err(schedule_error)?;
    let run = validated_run(&ctx, &p.run).await?;
    let name = match name {
        Some(n) => NameChoice::Given(n),
        None => NameChoice::FromGoal(default_name(&p.run)),
    };
    ctx.actor
        .mutate(move |core| {
            if core.state.schedules.len() >= JOBS_MAX {
                return Err(ApiError::limit(format!(
                    "there are already {JOBS_MAX} scheduled jobs"
                )));
            }
            let id = loop {
                let id = format!("sched_{:016x}", rand::random::<u64>());
                if !core.state.schedules.contains_key(&id) {
                    break id;
                }
            };
            // A name given is refused when taken; one made up from the goal is made unique.
            let name = match name {
                NameChoice::Given(n) => {
                    check_unique(core, &n, None)?;
                    n
                }
                NameChoice::FromGoal(base) => {
                    crew_core::run::unique_name(&core.state.schedules, &base)
                }
            };
            let created_at = core.now();
            let job = ScheduleJob {
                id,
                name,
                spec,
                timezone,
                enabled: p.enabled.unwrap_or(true),
                overlap: core_overlap(p.overlap.unwrap_or_default()),
                catch_up: core_catch_up(p.catch_up.unwrap_or_default()),
                run,
                created_at,
                last_fire_at: None,
                last_manual_fire_at: None,
                last_run_id: None,
                fire_count: 0,
                run_ids: Vec::new(),
                owed_from: None,
                last_skip: None,
            };
            let view = job_view(&job, created_at);
            core.emit(Pending::global(EventBody::ScheduleAdded(Box::new(job))));
            tracing::info!(job = %view.id, kind = %view.kind, spec = %view.spec, "schedule added");
            Ok(view)
        })
        .await
}

pub(super) async fn update(ctx: Arc<Ctx>, p: P<ScheduleUpdate>) -> Out<ScheduleUpdate> {
    // Unknown ids are answered before any validation work.
    get_job(&ctx, &p.id).await?;
    let now = Utc::now();
    let mut changes = Changes {
        name: p.name.as_deref().map(check_name).transpose()?,
        overlap: p.overlap.map(core_overlap),
        catch_up: p.catch_up.map(core_catch_up),
        enabled: p.enabled,
        ..Changes::default()
    };
    if let Some(tz) = &p.timezone {
        zone(tz)?;
        changes.timezone = Some(tz.clone());
    }
    if p.cron.is_some() || p.interval_ms.is_some() || p.at.is_some() {
        changes.spec = Some(
            sched::validate_spec(p.cron.as_deref(), p.interval_ms, p.at.as_deref(), now)
                .map_err(schedule_error)?,
        );
    }
    if let Some(run) = &p.run {
        changes.run = Some(validated_run(&ctx, run).await?);
    }
    change(&ctx, p.id, changes).await
}

pub(super) async fn enable(ctx: Arc<Ctx>, p: P<ScheduleEnable>) -> Out<ScheduleEnable> {
    set_enabled(&ctx, p.id, true).await
}

pub(super) async fn disable(ctx: Arc<Ctx>, p: P<ScheduleDisable>) -> Out<ScheduleDisable> {
    set_enabled(&ctx, p.id, false).await
}

/// `schedule.enable` and `schedule.disable`: a change of `enabled` alone.
async fn set_enabled(ctx: &Ctx, key: String, enabled: bool) -> Result<Job, ApiError> {
    check_job_key(&key)?;
    let changes = Changes {
        enabled: Some(enabled),
        ..Changes::default()
    };
    change(ctx, key, changes).await
}

pub(super) async fn remove(ctx: Arc<Ctx>, p: P<ScheduleRemove>) -> Out<ScheduleRemove> {
    check_job_key(&p.id)?;
    let cancel = p.cancel_runs.unwrap_or(true);
    ctx.actor
        .mutate(move |core| {
            let id = lookup(core, &p.id)?.id.clone();
            let cancelled = if cancel {
                scheduler::cancel_runs(core, &id, &format!("schedule {id} was removed"))
            } else {
                Vec::new()
            };
            core.emit(Pending::global(EventBody::ScheduleRemoved {
                id: id.clone(),
                cancelled_run_ids: cancelled.clone(),
            }));
            tracing::info!(job = %id, cancelled = cancelled.len(), "schedule removed");
            Ok(ScheduleRemoveResult {
                cancelled_run_ids: cancelled,
            })
        })
        .await
}

/// What `schedule.update` changes, validated before it reaches the actor.
#[derive(Default)]
struct Changes {
    name: Option<String>,
    spec: Option<ScheduleSpec>,
    timezone: Option<String>,
    run: Option<serde_json::Value>,
    overlap: Option<sched::Overlap>,
    catch_up: Option<sched::CatchUp>,
    enabled: Option<bool>,
}

impl Changes {
    fn apply(self, job: &mut ScheduleJob) {
        if let Some(v) = self.name {
            job.name = v;
        }
        if let Some(v) = self.spec {
            job.spec = v;
        }
        if let Some(v) = self.timezone {
            job.timezone = v;
        }
        if let Some(v) = self.run {
            job.run = v;
        }
        if let Some(v) = self.overlap {
            job.overlap = v;
        }
        if let Some(v) = self.catch_up {
            job.catch_up = v;
        }
        if let Some(v) = self.enabled {
            job.enabled = v;
        }
    }
}

/// Apply `changes` to a stored job, journaling `schedule.updated` only if anything changed.
async fn change(ctx: &Ctx, key: String, changes: Changes) -> Result<Job, ApiError> {
    ctx.actor
        .mutate(move |core| {
            let stored = lookup(core, &key)?;
            if let Some(name) = &changes.name {
                check_unique(core, name, Some(&stored.id))?;
            }
            let mut job = stored.clone();
            changes.apply(&mut job);
            job.changed_from(stored, core.now());
            if &job != lookup(core, &key)? {
                core.emit(Pending::global(EventBody::ScheduleUpdated(Box::new(
                    job.clone(),
                ))));
            }
            Ok(job_view(&job, core.now()))
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_name_quotes_the_start_of_the_goal() {
        let run = |team: Option<&str>, goal: &str| RunParams {
            goal: goal.into(),
            team: team.map(str::to_string),
            ..RunParams::default()
        };
        let table = [
            (
                run(None, "fix  the\n tests"),
                "default: fix the tests".to_string(),
            ),
            (run(Some("review"), "look"), "review: look".to_string()),
            (
                run(None, &"é".repeat(NAME_GOAL_CHARS + 5)),
                format!("default: {}", "é".repeat(NAME_GOAL_CHARS)),
            ),
        ];
        for (p, want) in table {
            assert_eq!(default_name(&p), want, "{:?}", p.goal);
        }
    }
}
