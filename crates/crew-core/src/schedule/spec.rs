//! What a job is scheduled by, and its policies.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// When a job fires. Serialized with a `kind` tag:
/// `{"kind":"cron","expr":"0 9 * * MON"}`, `{"kind":"interval","ms":60000}`,
/// `{"kind":"at","at":"2025-06-01T07:00:00Z"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ScheduleSpec {
    /// A cron expression, evaluated in the job's time zone.
    Cron { expr: String },
    /// Every `ms` milliseconds from the job's anchor (its creation).
    Interval { ms: u64 },
    /// Once, at this instant.
    At { at: DateTime<Utc> },
}

impl ScheduleSpec {
    /// The `kind` tag, as reported by `schedule.list`.
    pub fn kind(&self) -> &'static str {
        match self {
            ScheduleSpec::Cron { .. } => "cron",
            ScheduleSpec::Interval { .. } => "interval",
            ScheduleSpec::At { .. } => "at",
        }
    }
}

/// What a fire does while the job's previous run is still active.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overlap {
    /// Do not start; journal `schedule.skipped`.
    #[default]
    Skip,
    /// Start another run alongside.
    Allow,
    /// Cancel the previous run, then start.
    CancelPrevious,
}

impl Overlap {
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Allow => "allow",
            Overlap::CancelPrevious => "cancel-previous",
        }
    }
}

/// What to do with fires missed while the daemon was down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CatchUp {
    /// Fire once if any fire was missed.
    #[default]
    Latest,
    /// Drop missed fires.
    None,
    /// Fire each missed fire, up to a bound (the most recent ones).
    All,
}

impl CatchUp {
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Latest => "latest",
            CatchUp::None => "none",
            CatchUp::All => "all",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_wire_format() {
        let at = DateTime::parse_from_rfc3339("2025-06-01T07:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let cases = vec![
            (
                ScheduleSpec::Cron {
                    expr: "0 9 * * MON".into(),
                },
                json!({"kind": "cron", "expr": "0 9 * * MON"}),
            ),
            (
                ScheduleSpec::Interval { ms: 60_000 },
                json!({"kind": "interval", "ms": 60000}),
            ),
            (
                ScheduleSpec::At { at },
                json!({"kind": "at", "at": "2025-06-01T07:00:00Z"}),
            ),
        ];
        for (spec, wire) in cases {
            assert_eq!(serde_json::to_value(&spec).unwrap(), wire);
            assert_eq!(serde_json::from_value::<ScheduleSpec>(wire).unwrap(), spec);
            assert_eq!(
                serde_json::to_value(&spec).unwrap()["kind"],
                json!(spec.kind())
            );
        }
    }

    #[test]
    fn policy_wire_names_and_defaults() {
        let overlaps = [
            (Overlap::Skip, "skip"),
            (Overlap::Allow, "allow"),
            (Overlap::CancelPrevious, "cancel-previous"),
        ];
        for (value, name) in overlaps {
            assert_eq!(serde_json::to_value(value).unwrap(), json!(name));
            assert_eq!(
                serde_json::from_value::<Overlap>(json!(name)).unwrap(),
                value
            );
            assert_eq!(value.as_str(), name);
        }
        let catch_ups = [
            (CatchUp::Latest, "latest"),
            (CatchUp::None, "none"),
            (CatchUp::All, "all"),
        ];
        for (value, name) in catch_ups {
            assert_eq!(serde_json::to_value(value).unwrap(), json!(name));
            assert_eq!(
                serde_json::from_value::<CatchUp>(json!(name)).unwrap(),
                value
            );
            assert_eq!(value.as_str(), name);
        }
        assert_eq!(Overlap::default(), Overlap::Skip);
        assert_eq!(CatchUp::default(), CatchUp::Latest);
        assert!(serde_json::from_value::<Overlap>(json!("cancelPrevious")).is_err());
    }
}
