//! Error codes (SPEC §10) and the error value handlers return.

use jsonrpsee::types::ErrorObjectOwned;
use serde::Serialize;

pub mod codes {
    pub const PARSE_ERROR: i32 = -32700;
    pub const INVALID_REQUEST: i32 = -32600;
    pub const METHOD_NOT_FOUND: i32 = -32601;
    pub const INVALID_PARAMS: i32 = -32602;
    pub const INTERNAL_ERROR: i32 = -32603;
    pub const NOT_FOUND: i32 = 1001;
    pub const INVALID_STATE: i32 = 1002;
    pub const VALIDATION_FAILED: i32 = 1003;
    pub const PERMISSION_DENIED: i32 = 1004;
    pub const LIMIT_EXCEEDED: i32 = 1005;
    pub const SHUTTING_DOWN: i32 = 1006;
    /// The journal could not make a change durable (e.g. disk full): nothing was changed.
    pub const STORAGE_FAILED: i32 = 1007;
}

/// An application error with a code, a message and optional structured `data`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} (code {code})")]
pub struct ApiError {
    pub code: i32,
    pub message: String,
    pub data: Option<serde_json::Value>,
}

impl ApiError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            data: None,
        }
    }
    pub fn with_data(mut self, data: impl Serialize) -> Self {
        self.data = serde_json::to_value(data).ok();
        self
    }
    pub fn not_found(what: &str, id: &str) -> Self {
        Self::new(codes::NOT_FOUND, format!("{what} not found: {id}"))
            .with_data(serde_json::json!({ "what": what, "id": id }))
    }
    pub fn invalid_state(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_STATE, message)
    }
    /// -32602 naming the field and why.
    pub fn invalid_params(field: &str, why: impl Into<String>) -> Self {
        let why = why.into();
        Self::new(
            codes::INVALID_PARAMS,
            format!("invalid params: {field}: {why}"),
        )
        .with_data(serde_json::json!({ "field": field, "reason": why }))
    }
    pub fn validation(message: impl Into<String>, diagnostics: impl Serialize) -> Self {
        Self::new(codes::VALIDATION_FAILED, message)
            .with_data(serde_json::json!({ "diagnostics": diagnostics }))
    }
    pub fn limit(message: impl Into<String>) -> Self {
        Self::new(codes::LIMIT_EXCEEDED, message)
    }
    pub fn shutting_down() -> Self {
        Self::new(codes::SHUTTING_DOWN, "the daemon is shutting down")
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(codes::INTERNAL_ERROR, message)
    }
    /// The journal cannot write. `applied`: the change was made in memory before the write
    /// failed and is journaled once the disk works again (lost if the daemon stops first);
    /// otherwise nothing was changed.
    pub fn storage(message: impl Into<String>, applied: bool) -> Self {
        Self::new(codes::STORAGE_FAILED, message)
            .with_data(serde_json::json!({ "applied": applied }))
    }
}

impl From<ApiError> for ErrorObjectOwned {
    fn from(e: ApiError) -> Self {
        ErrorObjectOwned::owned(e.code, e.message, e.data)
    }
}

impl From<ErrorObjectOwned> for ApiError {
    fn from(e: ErrorObjectOwned) -> Self {
        ApiError {
            code: e.code(),
            message: e.message().to_string(),
            data: e.data().and_then(|d| serde_json::from_str(d.get()).ok()),
        }
    }
}
