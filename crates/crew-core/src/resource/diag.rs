//! Diagnostics of one file, and the value checks the frontmatter parsers share.
//!
//! pi-crew silently dropped bad values; crew drops them too (so a pi-crew file still loads) but
//! says so, pointing at the file, line and field.

use super::frontmatter::{Entry, Frontmatter};
use super::{Diagnostic, Severity};

impl Diagnostic {
    pub fn error(
        path: &str,
        line: Option<u32>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(Severity::Error, path, line, field, message)
    }

    pub fn warning(
        path: &str,
        line: Option<u32>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Self::new(Severity::Warning, path, line, field, message)
    }

    fn new(
        severity: Severity,
        path: &str,
        line: Option<u32>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            path: path.to_string(),
            line,
            field: field.map(str::to_string),
            severity,
            message: message.into(),
        }
    }
}

/// The diagnostics of one file being parsed.
pub(crate) struct Diags {
    path: String,
    pub list: Vec<Diagnostic>,
}

impl Diags {
    pub fn new(path: &str) -> Self {
        Diags {
            path: path.to_string(),
            list: Vec::new(),
        }
    }

    pub fn warn(&mut self, line: Option<u32>, field: Option<&str>, message: impl Into<String>) {
        self.list
            .push(Diagnostic::warning(&self.path, line, field, message));
    }

    pub fn error(&mut self, line: Option<u32>, field: Option<&str>, message: impl Into<String>) {
        self.list
            .push(Diagnostic::error(&self.path, line, field, message));
    }

    pub fn warn_at(&mut self, e: &Entry, message: impl Into<String>) {
        self.warn(Some(e.line), Some(&e.key), message);
    }

    /// Warn about block lines that are not `key: value`, and about keys not in `known`.
    pub fn frontmatter_shape(&mut self, fm: &Frontmatter, known: &[&str], what: &str) {
        for &line in &fm.malformed {
            self.warn(
                Some(line),
                None,
                "frontmatter line is not `key: value`; ignored",
            );
        }
        for e in &fm.entries {
            if !known.contains(&e.key.as_str()) {
                self.warn_at(e, format!("unknown {what} field `{}`; ignored", e.key));
            }
        }
    }

    /// A positive integer (pi-crew's `maxConcurrency`, `maxTurns`, ...); anything else is ignored
    /// with a warning.
    pub fn positive_int(&mut self, e: Option<&Entry>) -> Option<u32> {
        let e = e.filter(|e| !e.value.is_empty())?;
        match e.value.parse::<u32>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                self.warn_at(
                    e,
                    format!(
                        "`{}` must be a positive integer, got `{}`; ignored",
                        e.key, e.value
                    ),
                );
                None
            }
        }
    }

    /// One of `allowed`; anything else is ignored with a warning.
    pub fn one_of(&mut self, e: Option<&Entry>, allowed: &[&str]) -> Option<String> {
        let e = e.filter(|e| !e.value.is_empty())?;
        if allowed.contains(&e.value.as_str()) {
            return Some(e.value.clone());
        }
        self.warn_at(
            e,
            format!(
                "`{}` must be one of {}, got `{}`; ignored",
                e.key,
                allowed.join(", "),
                e.value
            ),
        );
        None
    }

    /// `true` or `false`; anything else is ignored with a warning.
    pub fn boolean(&mut self, e: Option<&Entry>) -> Option<bool> {
        self.one_of(e, &["true", "false"]).map(|v| v == "true")
    }

    /// A model reference: empty or `false` means unset. Whitespace or an empty provider/model
    /// segment is kept but warned about (pi-crew's `validate` did the same).
    pub fn model(&mut self, e: Option<&Entry>) -> Option<String> {
        let e = e.filter(|e| !e.value.is_empty() && e.value != "false")?;
        self.check_model_ref(e.line, &e.key, &e.value);
        Some(e.value.clone())
    }

    pub fn check_model_ref(&mut self, line: u32, field: &str, model: &str) {
        if !model_ref_ok(model) {
            self.warn(
                Some(line),
                Some(field),
                format!("model reference `{model}` looks malformed (whitespace or an empty provider/model part)"),
            );
        }
    }

    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.list
    }
}

fn model_ref_ok(model: &str) -> bool {
    !model.chars().any(char::is_whitespace) && model.split('/').all(|part| !part.is_empty())
}

/// A resource name from its file path: the last path component without `suffix`.
pub(crate) fn basename(path: &str, suffix: &str) -> String {
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let file = file.rsplit(':').next().unwrap_or(file);
    file.strip_suffix(suffix).unwrap_or(file).to_string()
}

/// Names of shared artifacts (`output:`, `reads:`) end up as file names under the run's
/// artifact directory, so they must be one plain path component.
pub(crate) fn artifact_name_ok(name: &str) -> bool {
    name.len() <= 128
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.contains("..")
}

/// Skill names and similar identifiers: `^[A-Za-z0-9_-]+$`.
pub(crate) fn ident_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_refs() {
        let bases = [
            ("builtin:agents/explorer.md", ".md", "explorer"),
            ("/home/u/.config/crew/teams/x.team.md", ".team.md", "x"),
            ("plain.workflow.md", ".workflow.md", "plain"),
            ("dir/noext", ".md", "noext"),
        ];
        for (path, suffix, want) in bases {
            assert_eq!(basename(path, suffix), want, "{path}");
        }
        let artifacts = [
            ("plan.md", true),
            ("research-summary.md", true),
            ("_x", true),
            ("../etc/passwd", false),
            ("a/b.md", false),
            (".hidden", false),
            ("a..b", false),
            ("", false),
            ("with space.md", false),
        ];
        for (name, ok) in artifacts {
            assert_eq!(artifact_name_ok(name), ok, "{name}");
        }
        let models = [
            ("anthropic/claude-sonnet-4", true),
            ("gpt-5", true),
            ("openai/", false),
            ("/m", false),
            ("a b", false),
        ];
        for (m, ok) in models {
            assert_eq!(model_ref_ok(m), ok, "{m}");
        }
    }
}
