//! Firing a job now (`schedule.trigger`): its run prepared as a timer fire prepares it, then
//! started as a manual fire.

use super::{get_job, Out, P};
use crate::rpc::Ctx;
use crate::scheduler;
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::ApiError;
use std::sync::Arc;

pub(super) async fn trigger(ctx: Arc<Ctx>, p: P<ScheduleTrigger>) -> Out<ScheduleTrigger> {
    let job = get_job(&ctx, &p.id).await?;
    let spec = scheduler::prepare_run(&ctx.shared, &job.run)
        .await
        .map_err(cannot_start)?;
    let id = Arc::<str>::from(job.id.as_str());
    let run_id = ctx
        .actor
        .mutate(move |core| scheduler::fire_manual(core, &id, spec))
        .await?;
    Ok(TriggerResult { run_id })
}

/// Why the job's run cannot start, as a validation error keeping the diagnostics, if any.
fn cannot_start(e: ApiError) -> ApiError {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_run_that_cannot_start_keeps_its_diagnostics() {
        let e = cannot_start(ApiError::validation(
            "the team cannot run: x",
            json!([{"message": "x"}]),
        ));
        assert_eq!(e.code, crew_api::codes::VALIDATION_FAILED);
        assert_eq!(
            e.message,
            "the job's run cannot start: the team cannot run: x"
        );
        assert_eq!(e.data.unwrap()["diagnostics"], json!([{"message": "x"}]));
        let e = cannot_start(ApiError::invalid_params("goal", "must not be empty"));
        assert_eq!(
            e.message,
            "the job's run cannot start: invalid params: goal: must not be empty"
        );
        assert_eq!(e.data.unwrap()["diagnostics"], json!([]));
    }
}
