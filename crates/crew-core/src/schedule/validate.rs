//! Validation of `schedule.add` / `schedule.update` schedule fields.

use chrono::{DateTime, TimeDelta, Utc};

use super::cron::CronExpr;
use super::error::{excerpt, ScheduleError};
use super::spec::ScheduleSpec;

/// The shortest interval a job may have: one second, as a cron's finest step.
pub const MIN_INTERVAL_MS: u64 = 1000;

/// Builds the spec from the request's `cron`, `intervalMs` and `at`: exactly one must be
/// given; a cron must parse; an interval must be at least `MIN_INTERVAL_MS` with a representable first fire; `at`
/// must be RFC 3339 and strictly after `now`.
pub fn validate_spec(
    cron: Option<&str>,
    interval_ms: Option<i64>,
    at: Option<&str>,
    now: DateTime<Utc>,
) -> Result<ScheduleSpec, ScheduleError> {
    let given: Vec<&'static str> = [
        ("cron", cron.is_some()),
        ("intervalMs", interval_ms.is_some()),
        ("at", at.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, present)| present.then_some(name))
    .collect();
    if given.len() > 1 {
        return Err(ScheduleError::Conflicting { fields: given });
    }
    if let Some(expr) = cron {
        CronExpr::parse(expr)?;
        return Ok(ScheduleSpec::Cron {
            expr: expr.trim().to_string(),
        });
    }
    if let Some(value) = interval_ms {
        let ms = u64::try_from(value)
            .ok()
            // A job of every millisecond wrote a skipped fire per millisecond its run took
            // (~1 MB/s of journal) and fired runs faster than they could start.
            .filter(|ms| *ms >= MIN_INTERVAL_MS)
            .ok_or(ScheduleError::IntervalNotPositive { value })?;
        let fits = TimeDelta::try_milliseconds(value)
            .and_then(|step| now.checked_add_signed(step))
            .is_some();
        if !fits {
            return Err(ScheduleError::IntervalTooLarge { value });
        }
        return Ok(ScheduleSpec::Interval { ms });
    }
    if let Some(text) = at {
        let at = DateTime::parse_from_rfc3339(text)
            .map_err(|e| ScheduleError::AtFormat {
                value: excerpt(text),
                reason: e.to_string(),
            })?
            .with_timezone(&Utc);
        if at <= now {
            return Err(ScheduleError::AtNotFuture { at, now });
        }
        return Ok(ScheduleSpec::At { at });
    }
    Err(ScheduleError::Missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    const NOW: &str = "2025-06-01T12:00:00Z";

    /// The request's `cron`, `intervalMs` and `at`.
    type Fields = (Option<&'static str>, Option<i64>, Option<&'static str>);

    fn cron(expr: &'static str) -> Fields {
        (Some(expr), None, None)
    }
    fn interval(ms: i64) -> Fields {
        (None, Some(ms), None)
    }
    fn at(text: &'static str) -> Fields {
        (None, None, Some(text))
    }

    #[test]
    fn accepted() {
        let cases: Vec<(Fields, ScheduleSpec)> = vec![
            (
                cron(" 0 9 * * MON "),
                ScheduleSpec::Cron {
                    expr: "0 9 * * MON".into(),
                },
            ),
            (
                cron("@daily"),
                ScheduleSpec::Cron {
                    expr: "@daily".into(),
                },
            ),
            (interval(1000), ScheduleSpec::Interval { ms: 1000 }),
            (interval(60_000), ScheduleSpec::Interval { ms: 60_000 }),
            (
                at("2025-06-01T14:00:01+02:00"),
                ScheduleSpec::At {
                    at: utc("2025-06-01T12:00:01Z"),
                },
            ),
            (
                at("2030-01-01T00:00:00Z"),
                ScheduleSpec::At {
                    at: utc("2030-01-01T00:00:00Z"),
                },
            ),
        ];
        for ((cron, interval, at), want) in cases {
            assert_eq!(
                validate_spec(cron, interval, at, utc(NOW)).unwrap(),
                want,
                "{cron:?} {interval:?} {at:?}"
            );
        }
    }

    #[test]
    fn refused_naming_the_field() {
        const FUTURE: &str = "2030-01-01T00:00:00Z";
        let all: &[&str] = &["cron", "intervalMs", "at"];
        let cases: Vec<(Fields, &[&str], &str)> = vec![
            ((None, None, None), all, "one of them is required"),
            (
                (Some("* * * * *"), Some(1000), None),
                &["cron", "intervalMs"],
                "only one",
            ),
            (
                (Some("* * * * *"), None, Some(FUTURE)),
                &["cron", "at"],
                "only one",
            ),
            (
                (None, Some(1000), Some(FUTURE)),
                &["intervalMs", "at"],
                "only one",
            ),
            ((Some("x"), Some(0), Some("y")), all, "only one"),
            (cron("* * * *"), &["cron"], "got 4"),
            (cron("* * * * * * *"), &["cron"], "got 7"),
            (cron("61 * * * *"), &["cron"], "61 is out of range"),
            (cron("* * * * MOO"), &["cron"], "MOO"),
            (interval(0), &["intervalMs"], "at least 1000, got 0"),
            (interval(-5), &["intervalMs"], "at least 1000, got -5"),
            (interval(999), &["intervalMs"], "at least 1000, got 999"),
            (interval(i64::MIN), &["intervalMs"], "at least 1000"),
            (interval(i64::MAX), &["intervalMs"], "too large"),
            (at("2025-06-01T12:00:00Z"), &["at"], "not in the future"),
            (at("2020-01-01T00:00:00Z"), &["at"], "not in the future"),
            (at("2030-01-01 00:00:00"), &["at"], "not an RFC 3339"),
            (at("2030-01-01T00:00:00"), &["at"], "not an RFC 3339"),
            (at("2030-01-01"), &["at"], "not an RFC 3339"),
            (at("+10m"), &["at"], "not an RFC 3339"),
            (at("1767225600000"), &["at"], "not an RFC 3339"),
            (at(""), &["at"], "not an RFC 3339"),
        ];
        for ((cron, interval, at), fields, want) in cases {
            let err = validate_spec(cron, interval, at, utc(NOW)).unwrap_err();
            let msg = err.to_string();
            assert_eq!(err.fields(), fields.to_vec(), "{msg}");
            assert!(msg.starts_with(fields[0]), "{msg}");
            assert!(msg.contains(want), "{msg:?} lacks {want:?}");
        }
    }
}
