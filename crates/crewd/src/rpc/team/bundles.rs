//! Runs as bundles: export one, import one.

use super::{ensure_resident, Out, P};
use crate::rpc::{off_actor, Ctx};
use crew_api::methods::*;
use crew_api::types::*;
use std::sync::Arc;

pub(super) async fn export(ctx: Arc<Ctx>, p: P<TeamExport>) -> Out<TeamExport> {
    ensure_resident(&ctx, &p.run_id).await?;
    let shared = ctx.shared.clone();
    let id = p.run_id.clone();
    off_actor(move || crate::bundle::export(&shared, &id))
        .await?
        .map(|bundle| ExportResult { bundle })
}

pub(super) async fn import(ctx: Arc<Ctx>, p: P<TeamImport>) -> Out<TeamImport> {
    crate::bundle::import(&ctx, p).await
}
