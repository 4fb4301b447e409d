//! Typed calls over any jsonrpsee client: `call::<TeamRun>(&client, params)`.

use crate::{ApiError, Method};
use jsonrpsee::core::client::ClientT;
use jsonrpsee::core::traits::ToRpcParams;

/// Params sent as one JSON object (SPEC §10).
pub struct ObjectParams(pub serde_json::Value);

impl ToRpcParams for ObjectParams {
    fn to_rpc_params(self) -> Result<Option<Box<serde_json::value::RawValue>>, serde_json::Error> {
        serde_json::value::to_raw_value(&self.0).map(Some)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The daemon answered with an error object.
    #[error("{0}")]
    Api(ApiError),
    /// The connection or the client failed.
    #[error("{0}")]
    Transport(String),
}

impl CallError {
    pub fn code(&self) -> Option<i32> {
        match self {
            CallError::Api(e) => Some(e.code),
            CallError::Transport(_) => None,
        }
    }
}

pub async fn call<M: Method>(
    client: &impl ClientT,
    params: &M::Params,
) -> Result<M::Result, CallError> {
    let value = serde_json::to_value(params).map_err(|e| CallError::Transport(e.to_string()))?;
    client
        .request::<M::Result, _>(M::NAME, ObjectParams(value))
        .await
        .map_err(|e| match e {
            jsonrpsee::core::client::Error::Call(obj) => CallError::Api(obj.into()),
            other => CallError::Transport(other.to_string()),
        })
}
