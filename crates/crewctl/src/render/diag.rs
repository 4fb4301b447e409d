//! Resource diagnostics as `path:line: field: message` lines, like a compiler.

use super::View;
use crate::style::Tone;
use crew_api::types::{Diagnostic, Severity};
use std::fmt::Write as _;

pub fn line(view: &View, d: &Diagnostic) -> String {
    let mut s = d.path.clone();
    if let Some(l) = d.line {
        let _ = write!(s, ":{l}");
    }
    s.push_str(": ");
    if let Some(f) = &d.field {
        let _ = write!(s, "{f}: ");
    }
    s.push_str(&d.message);
    match d.severity {
        Severity::Error => view.p(Tone::Bad, s),
        Severity::Warning => format!(
            "{} {}",
            view.p(Tone::Warn, s),
            view.p(Tone::Dim, "(warning)")
        ),
    }
}

pub fn lines(view: &View, ds: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in ds {
        out.push_str(&line(view, d));
        out.push('\n');
    }
    out
}

pub fn has_error(ds: &[Diagnostic]) -> bool {
    ds.iter().any(|d| d.severity == Severity::Error)
}

/// Diagnostics carried in a 1003 error's `data.diagnostics`, if they parse.
pub fn from_error_data(data: Option<&serde_json::Value>) -> Vec<Diagnostic> {
    data.and_then(|d| d.get("diagnostics"))
        .and_then(|d| serde_json::from_value(d.clone()).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::view;

    fn d(line: Option<u32>, field: Option<&str>, severity: Severity) -> Diagnostic {
        Diagnostic {
            path: ".crew/workflows/broken.md".into(),
            line,
            field: field.map(String::from),
            severity,
            message: "dependsOn cycle: a → b → a".into(),
        }
    }

    #[test]
    fn diagnostic_lines() {
        let v = view(80);
        let cases = [
            (
                d(Some(7), Some("dependsOn"), Severity::Error),
                ".crew/workflows/broken.md:7: dependsOn: dependsOn cycle: a → b → a",
            ),
            (
                d(None, Some("role"), Severity::Error),
                ".crew/workflows/broken.md: role: dependsOn cycle: a → b → a",
            ),
            (
                d(Some(2), None, Severity::Error),
                ".crew/workflows/broken.md:2: dependsOn cycle: a → b → a",
            ),
            (
                d(Some(2), None, Severity::Warning),
                ".crew/workflows/broken.md:2: dependsOn cycle: a → b → a (warning)",
            ),
        ];
        for (diag, want) in cases {
            assert_eq!(line(&v, &diag), want);
        }
        assert!(has_error(&[
            d(None, None, Severity::Warning),
            d(None, None, Severity::Error)
        ]));
        assert!(!has_error(&[d(None, None, Severity::Warning)]));
    }

    #[test]
    fn diagnostics_from_error_data() {
        let data = serde_json::json!({"diagnostics": [{"path": "a.md", "line": 3, "field": "role", "severity": "error", "message": "unknown role"}]});
        let ds = from_error_data(Some(&data));
        assert_eq!(ds.len(), 1);
        assert_eq!(ds[0].line, Some(3));
        assert!(from_error_data(Some(&serde_json::json!({"x": 1}))).is_empty());
        assert!(from_error_data(None).is_empty());
    }
}
