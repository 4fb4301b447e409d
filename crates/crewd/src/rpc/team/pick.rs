//! `team.pick` (issue 36): a person replaces a step's chosen candidate. Refused once the run
//! was applied (`crate::candidates::was_applied`), since the user's branch already holds the
//! old choice.

use super::{change_run, check_id, with_run, Out, P};
use crate::rpc::Ctx;
use crew_api::methods::TeamPick;
use crew_api::types::PickResult;
use crew_api::ApiError;
use std::sync::Arc;

pub(super) async fn pick(ctx: Arc<Ctx>, p: P<TeamPick>) -> Out<TeamPick> {
    check_id("runId", &p.run_id)?;
    check_id("taskId", &p.task_id)?;
    let index = u32::try_from(p.candidate)
        .ok()
        .filter(|k| (1..=crew_core::run::candidates::MAX_CANDIDATES).contains(k))
        .ok_or_else(|| {
            ApiError::invalid_params(
                "candidate",
                format!(
                    "must be between 1 and {}",
                    crew_core::run::candidates::MAX_CANDIDATES
                ),
            )
        })?;
    let ws = with_run(&ctx, &p.run_id, |r| r.spec.workspace.clone()).await?;
    if let Some(ws) = ws {
        if crate::candidates::was_applied(&ctx.shared, &p.run_id, &ws).await {
            return Err(ApiError::invalid_state(format!(
                "run {} was applied to your branch already: picking another candidate now would \
                 leave your branch with the old choice; start a new run instead",
                p.run_id
            )));
        }
    }
    let task = p.task_id.clone();
    change_run(
        &ctx,
        &p.run_id,
        move |st, id| st.pick_candidate(id, &task, index),
        |_, _, (chosen, requeued)| PickResult {
            chosen,
            requeued_task_ids: requeued,
        },
    )
    .await
}
