//! Tool errors. Each becomes an MCP tool result with `isError: true` whose text is what went
//! wrong, in the API's words, so the model can correct itself; protocol errors are kept for
//! the protocol (an unknown tool).

use crew_api::ApiError;
use std::fmt::Write;

/// Diagnostics listed in an error text at most; the rest are counted.
const MAX_DIAGNOSTICS: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// crewd answered with an error object.
    #[error("{}", api_text(.0))]
    Api(ApiError),
    /// The connection broke during the call.
    #[error("connection to crewd failed: {0}")]
    Transport(String),
    /// No connection could be made (crewd is not running, most likely).
    #[error("{0}")]
    Connect(String),
    /// The tool's arguments do not fit its input schema.
    #[error("invalid arguments: {0}")]
    Params(String),
    /// The client cancelled the call (the run itself goes on).
    #[error("cancelled by the client; the run goes on")]
    Cancelled,
    /// `team_run` started the run, then waiting for it failed: the id is named, so the agent
    /// follows that run instead of starting another.
    #[error("run {run_id} was started and goes on (follow it with team_wait or team_status); waiting for it failed: {source}")]
    AfterStart {
        run_id: String,
        source: Box<ToolError>,
    },
}

/// `message (crewd error code)`, then the field or the diagnostics the error carries.
fn api_text(e: &ApiError) -> String {
    let mut out = format!("{} (crewd error {})", e.message, e.code);
    let Some(data) = &e.data else { return out };
    if let Some(diags) = data.get("diagnostics").and_then(|d| d.as_array()) {
        for d in diags.iter().take(MAX_DIAGNOSTICS) {
            let field = |k: &str| d.get(k).and_then(|v| v.as_str()).unwrap_or_default();
            let line = d.get("line").and_then(|v| v.as_u64());
            let _ = write!(out, "\n- {}", field("path"));
            if let Some(l) = line {
                let _ = write!(out, ":{l}");
            }
            if !field("field").is_empty() {
                let _ = write!(out, ": {}", field("field"));
            }
            let _ = write!(out, ": {} ({})", field("message"), field("severity"));
        }
        if diags.len() > MAX_DIAGNOSTICS {
            let _ = write!(out, "\n- … {} more", diags.len() - MAX_DIAGNOSTICS);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn api_errors_keep_the_message_and_list_diagnostics() {
        let e = ApiError::validation(
            "team `nope` is invalid",
            json!([{"path": "/p/nope.team.md", "line": 3, "field": "roles", "severity": "error", "message": "no roles"}]),
        );
        assert_eq!(
            ToolError::Api(e).to_string(),
            "team `nope` is invalid (crewd error 1003)\n- /p/nope.team.md:3: roles: no roles (error)"
        );
        let e = ApiError::not_found("run", "r-1");
        assert_eq!(
            ToolError::Api(e).to_string(),
            "run not found: r-1 (crewd error 1001)"
        );
    }
}
