//! Reading jobs: list, get, and the fire times a cron expression would have (preview).

use super::{get_job, job_view, schedule_error, zone, Out, P};
use crate::rpc::in_range;
use crate::rpc::Ctx;
use chrono::Utc;
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::ApiError;
use crew_core::run::ScheduleJob;
use crew_core::schedule as sched;
use std::sync::Arc;

pub(super) async fn list(ctx: Arc<Ctx>, _p: P<ScheduleList>) -> Out<ScheduleList> {
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
}

pub(super) async fn get(ctx: Arc<Ctx>, p: P<ScheduleGet>) -> Out<ScheduleGet> {
    let job = get_job(&ctx, &p.id).await?;
    Ok(job_view(&job, Utc::now()))
}

pub(super) async fn preview(_ctx: Arc<Ctx>, p: P<SchedulePreview>) -> Out<SchedulePreview> {
    let tz_name = p
        .timezone
        .clone()
        .unwrap_or_else(crate::scheduler::local_zone);
    let tz = zone(&tz_name)?;
    let count = in_range("count", p.count.unwrap_or(5), 1..=1000)?;
    let from = match &p.from {
        None => Utc::now(),
        Some(s) => chrono::DateTime::parse_from_rfc3339(s)
            .map_err(|e| ApiError::invalid_params("from", format!("not RFC 3339: {e}")))?
            .with_timezone(&Utc),
    };
    let times = sched::preview(&p.cron, tz, from, count as usize).map_err(schedule_error)?;
    Ok(PreviewResult {
        fire_times: times
            .into_iter()
            .map(|t| t.with_timezone(&tz).to_rfc3339())
            .collect(),
        timezone: tz_name,
    })
}
