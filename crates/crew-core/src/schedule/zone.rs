//! Time zones: naming them, and turning a local wall-clock time into the instant it fires at.

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::error::{excerpt, ScheduleError};

/// An IANA zone name (`Europe/Berlin`, `America/New_York`, `UTC`), spelled as in the tz database.
pub fn parse_timezone(s: &str) -> Result<Tz, ScheduleError> {
    s.parse::<Tz>()
        .map_err(|_| ScheduleError::Timezone { name: excerpt(s) })
}

/// The instant a local wall-clock time fires at in `tz` (SPEC §8):
/// - a time that exists once is that instant;
/// - a time repeated by a fall-back is its first occurrence (so it fires once);
/// - a time skipped by a spring-forward is the first instant after the gap.
///
/// The result is non-decreasing in `local`, which is what lets callers walk local candidates
/// in order and get strictly increasing, duplicate-free fire instants.
pub fn resolve_local(tz: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(a, b) => Some(a.min(b).with_timezone(&Utc)),
        LocalResult::None => gap_end(tz, local),
    }
}

/// The first instant whose local time is at or after `local`, for a `local` inside a gap.
/// Found by bisection over whole seconds (tz transitions fall on whole seconds), because
/// chrono-tz does not expose its transition table. No UTC offset ever exceeded ±26 h, so the
/// bracket is always valid.
fn gap_end(tz: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    const BRACKET_SECS: i64 = 26 * 3600;
    let reached = |secs: i64| -> Option<bool> {
        let instant = DateTime::from_timestamp(secs, 0)?;
        Some(instant.with_timezone(&tz).naive_local() >= local)
    };
    let center = local.and_utc().timestamp();
    let mut lo = center.checked_sub(BRACKET_SECS)?;
    let mut hi = center.checked_add(BRACKET_SECS)?;
    if reached(lo)? || !reached(hi)? {
        return None;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if reached(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    DateTime::from_timestamp(hi, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn naive(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn zone_names() {
        for ok in [
            "UTC",
            "Europe/Berlin",
            "America/New_York",
            "Australia/Lord_Howe",
        ] {
            assert_eq!(parse_timezone(ok).unwrap().name(), ok);
        }
        for bad in [
            "",
            "Mars/Olympus",
            "europe/berlin",
            "+02:00",
            " UTC",
            "Local",
        ] {
            let err = parse_timezone(bad).unwrap_err();
            assert_eq!(err.fields(), vec!["timezone"], "{bad:?}");
            assert!(err.to_string().starts_with("timezone: "), "{err}");
        }
        let long = "X".repeat(10_000);
        assert!(parse_timezone(&long).unwrap_err().to_string().len() < 200);
    }

    #[test]
    fn local_times_resolve_per_spec_rules() {
        let cases: &[(&str, &str, &str)] = &[
            // Ordinary times.
            (
                "America/New_York",
                "2025-01-15 09:00:00",
                "2025-01-15T14:00:00Z",
            ),
            (
                "America/New_York",
                "2025-07-15 09:00:00",
                "2025-07-15T13:00:00Z",
            ),
            // Spring-forward gaps: the first instant after the gap.
            (
                "America/New_York",
                "2025-03-09 02:00:00",
                "2025-03-09T07:00:00Z",
            ),
            (
                "America/New_York",
                "2025-03-09 02:30:00",
                "2025-03-09T07:00:00Z",
            ),
            (
                "America/New_York",
                "2025-03-09 02:59:59",
                "2025-03-09T07:00:00Z",
            ),
            (
                "America/New_York",
                "2025-03-09 03:00:00",
                "2025-03-09T07:00:00Z",
            ),
            (
                "America/New_York",
                "2025-03-09 01:59:59",
                "2025-03-09T06:59:59Z",
            ),
            (
                "Europe/Berlin",
                "2025-03-30 02:30:00",
                "2025-03-30T01:00:00Z",
            ),
            (
                "Australia/Lord_Howe",
                "2025-10-05 02:15:00",
                "2025-10-04T15:30:00Z",
            ),
            // Fall-back repeats: the first occurrence.
            (
                "America/New_York",
                "2025-11-02 01:30:00",
                "2025-11-02T05:30:00Z",
            ),
            (
                "America/New_York",
                "2025-11-02 02:00:00",
                "2025-11-02T07:00:00Z",
            ),
            (
                "Europe/Berlin",
                "2025-10-26 02:30:00",
                "2025-10-26T00:30:00Z",
            ),
            (
                "Europe/Berlin",
                "2025-10-26 03:00:00",
                "2025-10-26T02:00:00Z",
            ),
        ];
        for (zone, local, want) in cases {
            let tz = parse_timezone(zone).unwrap();
            assert_eq!(
                resolve_local(tz, naive(local)),
                Some(utc(want)),
                "{zone} {local}"
            );
        }
    }
}
