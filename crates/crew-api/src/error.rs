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

/// Every code crewd answers with, and what it means: the one table the daemon, the generated
/// reference (`proto-docs/methods.md`, the OpenRPC document) and README show. jsonrpsee's own
/// limit codes (-32006 subscriptions, -32007 request size, -32008 response size, -32010 batch
/// size) are answered as `LIMIT_EXCEEDED` instead (crewd's `server/` layer).
pub const TABLE: &[(i32, &str)] = &[
    (codes::PARSE_ERROR, "parse error: the body is not JSON"),
    (
        codes::INVALID_REQUEST,
        "invalid request: JSON, but not a JSON-RPC 2.0 request object (id null when its id cannot be read)",
    ),
    (codes::METHOD_NOT_FOUND, "unknown method"),
    (codes::INVALID_PARAMS, "bad params (data.field, data.reason)"),
    (codes::INTERNAL_ERROR, "internal error"),
    (codes::NOT_FOUND, "not found"),
    (codes::INVALID_STATE, "invalid state"),
    (codes::VALIDATION_FAILED, "validation failed (data.diagnostics)"),
    (codes::PERMISSION_DENIED, "permission denied"),
    (
        codes::LIMIT_EXCEEDED,
        "limit exceeded: request or response size, batch size, subscriptions per connection, jobs (data.limit names it)",
    ),
    (codes::SHUTTING_DOWN, "shutting down"),
    (
        codes::STORAGE_FAILED,
        "storage failed (data.applied: false = nothing was changed; true = made in memory just as the disk failed, journaled when it works again)",
    ),
];

/// What the table says about `code`.
pub fn meaning(code: i32) -> &'static str {
    TABLE
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, m)| *m)
        .unwrap_or("error")
}

/// At most this many characters of a field path, a reason and a message are echoed: a client's
/// own input (a deep path, a long bogus value) must not come back multiplied.
pub const FIELD_MAX_CHARS: usize = 200;
pub const MESSAGE_MAX_CHARS: usize = 1000;

/// `text` cut to `max` characters, with an ellipsis when cut.
pub fn capped(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
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
        let field = capped(field, FIELD_MAX_CHARS);
        let why = capped(&why.into(), MESSAGE_MAX_CHARS);
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
    /// 1005 naming the limit (`data.limit`, e.g. `max_batch`) and its value.
    pub fn limit_named(limit: &str, value: u64, message: impl Into<String>) -> Self {
        Self::new(codes::LIMIT_EXCEEDED, message)
            .with_data(serde_json::json!({ "limit": limit, "max": value }))
    }
    /// -32600 with why the request object is not one.
    pub fn invalid_request(why: impl Into<String>) -> Self {
        Self::new(
            codes::INVALID_REQUEST,
            format!(
                "invalid request: {}",
                capped(&why.into(), MESSAGE_MAX_CHARS)
            ),
        )
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
        ErrorObjectOwned::owned(e.code, capped(&e.message, MESSAGE_MAX_CHARS), e.data)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_are_capped() {
        let deep = "bundle.a".to_string() + &"[0]".repeat(5000);
        let e = ApiError::invalid_params(&deep, "x".repeat(100_000));
        assert!(e.message.chars().count() < 1300, "{}", e.message.len());
        let data = e.data.unwrap();
        assert!(data["field"].as_str().unwrap().chars().count() <= FIELD_MAX_CHARS + 1);
        assert_eq!(capped("ééé", 2), "éé…");
        assert_eq!(capped("ab", 2), "ab");
    }

    #[test]
    fn every_code_is_in_the_table() {
        for c in [
            codes::PARSE_ERROR,
            codes::INVALID_REQUEST,
            codes::METHOD_NOT_FOUND,
            codes::INVALID_PARAMS,
            codes::INTERNAL_ERROR,
            codes::NOT_FOUND,
            codes::INVALID_STATE,
            codes::VALIDATION_FAILED,
            codes::PERMISSION_DENIED,
            codes::LIMIT_EXCEEDED,
            codes::SHUTTING_DOWN,
            codes::STORAGE_FAILED,
        ] {
            assert_ne!(meaning(c), "error", "{c}");
        }
    }
}
