//! Why a schedule was refused.

use chrono::{DateTime, Utc};

/// A refused schedule. Each variant names the request field at fault (`cron`, `timezone`,
/// `intervalMs`, `at`) in its message and in [`ScheduleError::fields`], so the daemon can answer
/// -32602 with the field and the reason without re-deriving either.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("cron: {reason}")]
    Cron { reason: String },
    #[error("timezone: {name:?} is not a known IANA time zone (e.g. Europe/Berlin, UTC)")]
    Timezone { name: String },
    #[error("intervalMs: must be at least 1000, got {value} (one second is a cron's finest step)")]
    IntervalNotPositive { value: i64 },
    #[error("intervalMs: {value} is too large: the first fire would be past the last representable date")]
    IntervalTooLarge { value: i64 },
    #[error(
        "at: {value:?} is not an RFC 3339 timestamp ({reason}); e.g. 2025-06-01T09:00:00+02:00"
    )]
    AtFormat { value: String, reason: String },
    #[error("at: {at} is not in the future (now is {now})")]
    AtNotFuture {
        at: DateTime<Utc>,
        now: DateTime<Utc>,
    },
    #[error("{}: give only one of cron, intervalMs and at", .fields.join(", "))]
    Conflicting { fields: Vec<&'static str> },
    #[error("cron, intervalMs, at: one of them is required")]
    Missing,
}

impl ScheduleError {
    /// The request fields this error is about, in wire spelling.
    pub fn fields(&self) -> Vec<&'static str> {
        match self {
            ScheduleError::Cron { .. } => vec!["cron"],
            ScheduleError::Timezone { .. } => vec!["timezone"],
            ScheduleError::IntervalNotPositive { .. } | ScheduleError::IntervalTooLarge { .. } => {
                vec!["intervalMs"]
            }
            ScheduleError::AtFormat { .. } | ScheduleError::AtNotFuture { .. } => vec!["at"],
            ScheduleError::Conflicting { fields } => fields.clone(),
            ScheduleError::Missing => vec!["cron", "intervalMs", "at"],
        }
    }

    pub(crate) fn cron(reason: impl Into<String>) -> Self {
        ScheduleError::Cron {
            reason: reason.into(),
        }
    }
}

/// Inputs are echoed in messages so users see what was refused; a bounded excerpt keeps a
/// megabyte of garbage from becoming a megabyte of error.
pub(crate) fn excerpt(s: &str) -> String {
    const MAX_CHARS: usize = 40;
    match s.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_bounds_long_and_multibyte_input() {
        let cases: &[(&str, &str)] = &[
            ("short", "short"),
            (
                "0123456789012345678901234567890123456789",
                "0123456789012345678901234567890123456789",
            ),
            (
                "01234567890123456789012345678901234567890",
                "0123456789012345678901234567890123456789…",
            ),
            (
                "ééééééééééééééééééééééééééééééééééééééééé",
                "éééééééééééééééééééééééééééééééééééééééé…",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(excerpt(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn every_error_names_its_fields_in_the_message() {
        let now = DateTime::<Utc>::UNIX_EPOCH;
        let cases = vec![
            ScheduleError::cron("bad"),
            ScheduleError::Timezone { name: "X".into() },
            ScheduleError::IntervalNotPositive { value: 0 },
            ScheduleError::IntervalTooLarge { value: i64::MAX },
            ScheduleError::AtFormat {
                value: "x".into(),
                reason: "r".into(),
            },
            ScheduleError::AtNotFuture { at: now, now },
            ScheduleError::Conflicting {
                fields: vec!["cron", "at"],
            },
            ScheduleError::Missing,
        ];
        for err in cases {
            let msg = err.to_string();
            for field in err.fields() {
                assert!(msg.contains(field), "{msg}");
            }
            assert!(msg.starts_with(err.fields()[0]), "{msg}");
        }
    }
}
