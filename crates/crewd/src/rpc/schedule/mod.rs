//! `schedule.*`: jobs are state, changed only through journaled `schedule.*` events; the timer
//! loop (`crate::scheduler`) follows those events.
//!
//! A table of named handlers, one file per family: changing jobs (add, update, enable,
//! disable, remove), reading them (list, get, preview) and firing one now (trigger). This module
//! keeps what they share: the checks of names and keys, the lookup of a job on the actor, the
//! check of a job's run, and the job as clients see it.

mod jobs;
mod read;
mod trigger;

use super::{register, views, Ctx};
use super::{Out, P};
use crate::scheduler;
use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::{codes, ApiError};
use crew_core::run::{JobLookup, ScheduleJob};
use crew_core::schedule::{self as sched, ScheduleError, ScheduleSpec};
use jsonrpsee::RpcModule;

const NAME_MAX_CHARS: usize = 200;

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

/// The job a key names, copied off the actor.
async fn get_job(ctx: &Ctx, key: &str) -> Result<ScheduleJob, ApiError> {
    check_job_key(key)?;
    let key = key.to_string();
    ctx.actor
        .call(move |core| lookup(core, &key).cloned())
        .await
}

/// The `run` params validated and planned exactly as `team.run` would (nothing is started);
/// errors name `run.<field>`.
async fn validated_run(ctx: &Ctx, run: &RunParams) -> Result<serde_json::Value, ApiError> {
    crate::launch::preview(&ctx.shared, run)
        .await
        .map_err(under_run)?;
    serde_json::to_value(run).map_err(|e| ApiError::internal(e.to_string()))
}

/// An invalid-params error of a job's run params, its field moved under `run.`; any other
/// error as it is.
fn under_run(e: ApiError) -> ApiError {
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
        last_skip: job.last_skip.as_ref().map(|s| crew_api::types::JobSkip {
            at: zoned(s.at),
            reason: s.reason.clone(),
        }),
    }
}

pub fn register_all(m: &mut RpcModule<Ctx>) {
    register::<ScheduleAdd, _, _>(m, jobs::add);
    register::<ScheduleList, _, _>(m, read::list);
    register::<ScheduleGet, _, _>(m, read::get);
    register::<ScheduleUpdate, _, _>(m, jobs::update);
    register::<ScheduleEnable, _, _>(m, jobs::enable);
    register::<ScheduleDisable, _, _>(m, jobs::disable);
    register::<ScheduleRemove, _, _>(m, jobs::remove);
    register::<ScheduleTrigger, _, _>(m, trigger::trigger);
    register::<SchedulePreview, _, _>(m, read::preview);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of the error, or "ok".
    fn said<T>(r: Result<T, ApiError>) -> String {
        match r {
            Ok(_) => "ok".into(),
            Err(e) => e.message,
        }
    }

    #[test]
    fn a_name_is_short_printable_and_not_an_id() {
        let table = [
            ("nightly", "ok".to_string()),
            ("  nightly  ", "ok".to_string()),
            (&"n".repeat(NAME_MAX_CHARS), "ok".to_string()),
            ("", "invalid params: name: must not be empty".to_string()),
            (" \t", "invalid params: name: must not be empty".to_string()),
            (
                &"n".repeat(NAME_MAX_CHARS + 1),
                format!("invalid params: name: is longer than {NAME_MAX_CHARS} characters"),
            ),
            (
                "a\u{7}b",
                "invalid params: name: must not contain control characters".to_string(),
            ),
            (
                "sched_0123",
                "invalid params: name: must not start with sched_ (job ids do)".to_string(),
            ),
        ];
        for (name, want) in table {
            assert_eq!(said(check_name(name)), want, "{name:?}");
        }
        assert_eq!(check_name("  nightly ").unwrap(), "nightly");
    }

    #[test]
    fn a_key_is_an_id_or_a_name_as_stored() {
        let refused = "invalid params: id: must be a job's id or its name (1-200 characters, \
                       no control characters)";
        let table = [
            ("sched_00ff", "ok"),
            ("nightly build", "ok"),
            // A name is stored trimmed, so a key with spaces around it names no job.
            (" nightly", refused),
            ("", refused),
            ("a\nb", refused),
        ];
        for (key, want) in table {
            assert_eq!(said(check_job_key(key)), want, "{key:?}");
        }
    }

    #[test]
    fn a_runs_refusal_names_its_field_under_run() {
        let e = under_run(ApiError::invalid_params(
            "budget.tokens",
            "must be positive",
        ));
        assert_eq!(e.code, codes::INVALID_PARAMS);
        assert_eq!(
            e.message,
            "invalid params: run.budget.tokens: must be positive"
        );
        assert_eq!(e.data.unwrap()["field"], "run.budget.tokens");
        // Any other error is passed on as it is.
        let e = under_run(ApiError::validation("the team cannot run: x", ["d"]));
        assert_eq!(e.code, codes::VALIDATION_FAILED);
        assert_eq!(e.message, "the team cannot run: x");
    }
}
