//! `team.export` / `team.import`.

use crate::rpc::Ctx;
use crate::shared::Shared;
use crew_api::types::ImportResult;
use crew_api::ApiError;

pub fn export(_shared: &Shared, run_id: &str) -> Result<serde_json::Value, ApiError> {
    Err(ApiError::invalid_state(format!(
        "export of {run_id} is not available yet"
    )))
}

pub async fn import(_ctx: &Ctx, _bundle: serde_json::Value) -> Result<ImportResult, ApiError> {
    Err(ApiError::invalid_state("import is not available yet"))
}
