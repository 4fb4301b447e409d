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

/// By file, then line (a file's own diagnostics, without a line, first), as a compiler lists
/// them; the daemon's order (per resource kind, then per check) is kept within a line.
pub fn sorted(ds: &[Diagnostic]) -> Vec<&Diagnostic> {
    let mut v: Vec<&Diagnostic> = ds.iter().collect();
    v.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    v
}

pub fn lines(view: &View, ds: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in sorted(ds) {
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
    fn lines_are_sorted_by_file_and_line() {
        let at = |path: &str, line: Option<u32>, message: &str| Diagnostic {
            path: path.into(),
            line,
            field: None,
            severity: Severity::Error,
            message: message.into(),
        };
        let ds = [
            at("b.md", Some(10), "b10"),
            at("a.md", Some(9), "a9"),
            at("b.md", Some(2), "b2"),
            at("a.md", None, "a"),
            at("a.md", Some(10), "a10"),
            at("b.md", Some(2), "b2 again"),
        ];
        assert_eq!(
            lines(&view(80), &ds),
            "a.md: a\na.md:9: a9\na.md:10: a10\nb.md:2: b2\nb.md:2: b2 again\nb.md:10: b10\n"
        );
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
