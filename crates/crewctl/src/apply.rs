//! `crewctl apply <run> [--squash]`: bring a worktree run's integrated branch into the current
//! branch of the user's checkout (the daemon refuses on a dirty tree or a conflicting branch).

use crate::ctx::{outln, Ctx};
use crate::diff::{diffstat, short};
use crate::exit;
use crate::resolve::RunRef;
use crew_api::methods::TeamApply;
use crew_api::types::ApplyParams;

pub async fn apply(ctx: &Ctx, run: &RunRef, squash: bool, force: bool) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let r = conn
        .call::<TeamApply>(&ApplyParams {
            run_id: run_id.to_string(),
            squash: squash.then_some(true),
            force: force.then_some(true),
            // So a directory the change empties and fills again stays the one this shell is in.
            from_dir: std::env::current_dir()
                .ok()
                .map(|d| d.display().to_string()),
        })
        .await?;
    if ctx.json {
        ctx.json(&r)?;
        return Ok(exit::SUCCESS);
    }
    let onto = r.branch.as_deref().unwrap_or("detached HEAD");
    let how = match r.how.as_str() {
        "up_to_date" => format!("{onto} already has run {run_id}'s change"),
        "fast_forward" => format!("fast-forwarded {onto} to run {run_id}'s change"),
        "squash" => format!("committed run {run_id}'s change on {onto} as one commit"),
        _ => format!("merged run {run_id}'s change into {onto}"),
    };
    outln(&format!(
        "{how} ({}); HEAD is {}",
        diffstat(r.files, r.insertions, r.deletions),
        short(&r.head)
    ))?;
    if !r.checkout.is_empty() {
        // The run's own checkout, wherever crewctl was called from.
        outln(&format!("checkout: {}", r.checkout))?;
    }
    for n in &r.notes {
        outln(&format!("note: {n}"))?;
    }
    Ok(exit::SUCCESS)
}
