//! `schedule.*`

use super::{register, Ctx};
use crew_api::methods::SchedulePreview;
use crew_api::types::*;
use crew_api::ApiError;
use jsonrpsee::RpcModule;

pub fn register_all(m: &mut RpcModule<Ctx>) {
    register::<SchedulePreview, _, _>(m, |_ctx, p| async move {
        let tz_name = p
            .timezone
            .clone()
            .unwrap_or_else(crate::scheduler::local_zone);
        let tz = crew_core::schedule::parse_timezone(&tz_name)
            .map_err(|e| ApiError::invalid_params("timezone", e.to_string()))?;
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
        let times = crew_core::schedule::preview(&p.cron, tz, from, count as usize)
            .map_err(|e| ApiError::invalid_params("cron", e.to_string()))?;
        Ok(PreviewResult {
            fire_times: times
                .into_iter()
                .map(|t| t.with_timezone(&tz).to_rfc3339())
                .collect(),
            timezone: tz_name,
        })
    });
}
