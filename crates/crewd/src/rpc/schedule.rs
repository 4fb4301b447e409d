//! `schedule.*`: jobs are state, changed only through journaled `schedule.*` events; the timer
//! loop (`crate::scheduler`) follows those events.

use super::{register, views, Ctx};
use crate::scheduler;
use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::{codes, ApiError};
use crew_core::run::{EventBody, JobLookup, Pending, ScheduleJob};
use crew_core::schedule::{self as sched, ScheduleError, ScheduleSpec};
use jsonrpsee::RpcModule;
use std::sync::Arc;

/// A bound on jobs, so no client can grow the state without limit.
const JOBS_MAX: usize = 100_000;
const NAME_MAX_CHARS: usize = 200;
/// Default names quote this much of the goal.
const NAME_GOAL_CHARS: usize = 60;

/// -32602 naming the field(s) the schedule error is about.
fn schedule_error(e: ScheduleError) -> ApiError {
    let fields = e.fields().join(", ");
    let msg = e.to_string();
    let why = msg
        .strip_prefix(&format!("{fields}: "))
        .unwrap_or(&msg)
        .to_string();
    ApiError::invalid_params(&fields, why)
}

fn zone(name: &str) -> Result<Tz, ApiError> {
    sched::parse_timezone(name).map_err(schedule_error)
}

/// A job key: a job's id, or its name (which `check_name` bounds the same way).
fn check_job_key(key: &str) -> Result<(), ApiError> {
    if crew_core::ids::is_safe_id(key) || check_name(key).is_ok_and(|n| n == key) {
        Ok(())
    } else {
        Err(ApiError::invalid_params(
            "id",
            "must be a job's id or its name (1-200 characters, no control characters)",
        ))
    }
}

/// The job a key names, as the actor holds it.
fn lookup<'a>(core: &'a crate::actor::Core, key: &str) -> Result<&'a ScheduleJob, ApiError> {
    crew_core::run::find_job(&core.state.schedules, key).map_err(|e| match e {
        JobLookup::NotFound => ApiError::not_found("schedule", key),
        JobLookup::Ambiguous(ids) => ApiError::invalid_params(
            "id",
            format!(
                "{} jobs are named {key:?}: name one by its id ({})",
                ids.len(),
                ids.join(", ")
            ),
        ),
    })
}

/// Refuses `name` when another job has it (as its name or its id).
fn check_unique(
    core: &crate::actor::Core,
    name: &str,
    except: Option<&str>,
) -> Result<(), ApiError> {
    match crew_core::run::name_owner(&core.state.schedules, name, except) {
        Some(owner) => Err(ApiError::invalid_params(
            "name",
            format!("{name:?} is already the name of job {owner}; job names are unique"),
        )),
        None => Ok(()),
    }
}

fn check_name(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::invalid_params("name", "must not be empty"));
    }
    if name.chars().count() > NAME_MAX_CHARS {
        return Err(ApiError::invalid_params(
            "name",
            format!("is longer than {NAME_MAX_CHARS} characters"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::invalid_params(
            "name",
            "must not contain control characters",
        ));
    }
    // Ids are what names are looked up after: a name shaped like one would be shadowed.
    if name.starts_with("sched_") {
        return Err(ApiError::invalid_params(
            "name",
            "must not start with sched_ (job ids do)",
        ));
    }
    Ok(name.to_string())
}

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

/// The `run` params validated and planned exactly as `team.run` would (nothing is started);
/// errors name `run.<field>`.
async fn validated_run(ctx: &Ctx, run: &RunParams) -> Result<serde_json::Value, ApiError> {
    crate::launch::preview(&ctx.shared, run)
        .await
        .map_err(|e| {
            let field = e
                .data
                .as_ref()
                .and_then(|d| d.get("field"))
                .and_then(|f| f.as_str());
            let reason = e
                .data
                .as_ref()
                .and_then(|d| d.get("reason"))
                .and_then(|r| r.as_str());
            match (e.code, field, reason) {
                (codes::INVALID_PARAMS, Some(field), Some(reason)) => {
                    ApiError::invalid_params(&format!("run.{field}"), reason)
                }
                _ => e,
            }
        })?;
    serde_json::to_value(run).map_err(|e| ApiError::internal(e.to_string()))
}

fn core_overlap(o: Overlap) -> sched::Overlap {
    match o {
        Overlap::Skip => sched::Overlap::Skip,
        Overlap::Allow => sched::Overlap::Allow,
        Overlap::CancelPrevious => sched::Overlap::CancelPrevious,
    }
}

fn api_overlap(o: sched::Overlap) -> Overlap {
    match o {
        sched::Overlap::Skip => Overlap::Skip,
        sched::Overlap::Allow => Overlap::Allow,
        sched::Overlap::CancelPrevious => Overlap::CancelPrevious,
    }
}

fn core_catch_up(c: CatchUp) -> sched::CatchUp {
    match c {
        CatchUp::Latest => sched::CatchUp::Latest,
        CatchUp::None => sched::CatchUp::None,
        CatchUp::All => sched::CatchUp::All,
    }
}

fn api_catch_up(c: sched::CatchUp) -> CatchUp {
    match c {
        sched::CatchUp::Latest => CatchUp::Latest,
        sched::CatchUp::None => CatchUp::None,
        sched::CatchUp::All => CatchUp::All,
    }
}

/// A job as clients see it; instants in the job's zone, with its offset.
pub fn job_view(job: &ScheduleJob, now: DateTime<Utc>) -> Job {
    let tz: Tz = sched::parse_timezone(&job.timezone).unwrap_or(Tz::UTC);
    let zoned = |t: DateTime<Utc>| {
        t.with_timezone(&tz)
            .to_rfc3339_opts(SecondsFormat::AutoSi, false)
    };
    Job {
        id: job.id.clone(),
        name: job.name.clone(),
        kind: job.spec.kind().to_string(),
        spec: match &job.spec {
            ScheduleSpec::Cron { expr } => expr.clone(),
            ScheduleSpec::Interval { ms } => ms.to_string(),
            ScheduleSpec::At { at } => zoned(*at),
        },
        timezone: job.timezone.clone(),
        enabled: job.enabled,
        next_fire_at: scheduler::next_fire_at(job, now).map(zoned),
        last_fire_at: job.last_fire().map(|(t, _)| zoned(t)),
        last_fire_manual: job.last_fire().is_some_and(|(_, manual)| manual),
        last_run_id: job.last_run_id.clone(),
        run_ids: job.run_ids.clone(),
        fire_count: job.fire_count,
        overlap: api_overlap(job.overlap),
        catch_up: api_catch_up(job.catch_up),
        run: serde_json::from_value(job.run.clone()).unwrap_or_default(),
        created_at: views::time(job.created_at),
    }
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
            if &job != lookup(core, &key)? {
                core.emit(Pending::global(EventBody::ScheduleUpdated(Box::new(
                    job.clone(),
                ))));
            }
            Ok(job_view(&job, core.now()))
        })
        .await
}

async fn get_job(ctx: &Ctx, key: &str) -> Result<ScheduleJob, ApiError> {
    check_job_key(key)?;
    let key = key.to_string();
    ctx.actor
        .call(move |core| lookup(core, &key).cloned())
        .await
}

pub fn register_all(m: &mut RpcModule<Ctx>) {
    register::<ScheduleAdd, _, _>(m, |ctx, p| async move {
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
                    NameChoice::FromGoal(base) => crew_core::run::unique_name(&core.state.schedules, &base),
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
                };
                let view = job_view(&job, created_at);
                core.emit(Pending::global(EventBody::ScheduleAdded(Box::new(job))));
                tracing::info!(job = %view.id, kind = %view.kind, spec = %view.spec, "schedule added");
                Ok(view)
            })
            .await
    });
    register::<ScheduleList, _, _>(m, |ctx, _p| async move {
        ctx.actor
            .call(|core| {
                let now = core.now();
                let mut jobs: Vec<&ScheduleJob> = core.state.schedules.values().collect();
                jobs.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
                Ok(ScheduleListResult {
                    jobs: jobs.into_iter().map(|j| job_view(j, now)).collect(),
                })
            })
            .await
    });
    register::<ScheduleGet, _, _>(m, |ctx, p| async move {
        let job = get_job(&ctx, &p.id).await?;
        Ok(job_view(&job, Utc::now()))
    });
    register::<ScheduleUpdate, _, _>(m, |ctx, p| async move {
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
    });
    register::<ScheduleEnable, _, _>(m, |ctx, p| async move {
        check_job_key(&p.id)?;
        let changes = Changes {
            enabled: Some(true),
            ..Changes::default()
        };
        change(&ctx, p.id, changes).await
    });
    register::<ScheduleDisable, _, _>(m, |ctx, p| async move {
        check_job_key(&p.id)?;
        let changes = Changes {
            enabled: Some(false),
            ..Changes::default()
        };
        change(&ctx, p.id, changes).await
    });
    register::<ScheduleRemove, _, _>(m, |ctx, p| async move {
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
    });
    register::<ScheduleTrigger, _, _>(m, |ctx, p| async move {
        let job = get_job(&ctx, &p.id).await?;
        let spec = scheduler::prepare_run(&ctx.shared, &job.run)
            .await
            .map_err(|e| {
                let diagnostics = e
                    .data
                    .as_ref()
                    .and_then(|d| d.get("diagnostics"))
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!([]));
                ApiError::validation(
                    format!("the job's run cannot start: {}", e.message),
                    diagnostics,
                )
            })?;
        let id = Arc::<str>::from(job.id.as_str());
        let run_id = ctx
            .actor
            .mutate(move |core| scheduler::fire_manual(core, &id, spec))
            .await?;
        Ok(TriggerResult { run_id })
    });
    register::<SchedulePreview, _, _>(m, |_ctx, p| async move {
        let tz_name = p
            .timezone
            .clone()
            .unwrap_or_else(crate::scheduler::local_zone);
        let tz = zone(&tz_name)?;
        let count = p.count.unwrap_or(5);
        if !(1..=1000).contains(&count) {
            return Err(ApiError::invalid_params(
                "count",
                "must be between 1 and 1000",
            ));
        }
        let from = match &p.from {
            None => chrono::Utc::now(),
            Some(s) => chrono::DateTime::parse_from_rfc3339(s)
                .map_err(|e| ApiError::invalid_params("from", format!("not RFC 3339: {e}")))?
                .with_timezone(&chrono::Utc),
        };
        let times = sched::preview(&p.cron, tz, from, count as usize).map_err(schedule_error)?;
        Ok(PreviewResult {
            fire_times: times
                .into_iter()
                .map(|t| t.with_timezone(&tz).to_rfc3339())
                .collect(),
            timezone: tz_name,
        })
    });
}
