//! A core diagnostic as the API carries it: one conversion, used by the RPC handlers and by the
//! modules below them (workspaces, plan checks) that refuse requests.

pub fn to_api(d: &crew_core::resource::Diagnostic) -> crew_api::types::Diagnostic {
    crew_api::types::Diagnostic {
        path: d.path.clone(),
        line: d.line,
        field: d.field.clone(),
        severity: match d.severity {
            crew_core::resource::Severity::Error => crew_api::types::Severity::Error,
            crew_core::resource::Severity::Warning => crew_api::types::Severity::Warning,
        },
        message: d.message.clone(),
    }
}

/// A request refused for one of its fields (1003), with that field as its one diagnostic.
pub fn request_refused(field: &str, message: String) -> crew_api::ApiError {
    let d = crew_core::resource::Diagnostic::error(
        crew_core::plan::REQUEST,
        None,
        Some(field),
        message.clone(),
    );
    crew_api::ApiError::validation(message, vec![to_api(&d)])
}
