//! Next fire times.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::cron::CronExpr;
use super::error::ScheduleError;
use super::spec::ScheduleSpec;

/// Most fire times `preview` returns, whatever the caller asks for.
pub const PREVIEW_MAX: usize = 1000;

/// A [`ScheduleSpec`] with its cron expression parsed once, for callers that compute many
/// fire times (the daemon's timer loop, catch-up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    Cron(CronExpr),
    Interval { ms: u64 },
    At(DateTime<Utc>),
}

impl Schedule {
    pub fn compile(spec: &ScheduleSpec) -> Result<Schedule, ScheduleError> {
        Ok(match spec {
            ScheduleSpec::Cron { expr } => Schedule::Cron(CronExpr::parse(expr)?),
            // A job journaled before intervals had a floor fires at most once a second too
            // (`validate::MIN_INTERVAL_MS`): one of a few milliseconds flooded the journal.
            ScheduleSpec::Interval { ms } => Schedule::Interval {
                ms: match *ms {
                    0 => 0,
                    ms => ms.max(super::validate::MIN_INTERVAL_MS),
                },
            },
            ScheduleSpec::At { at } => Schedule::At(*at),
        })
    }

    /// The first fire strictly after `after`. `tz` matters only for cron; `anchor` (the job's
    /// creation) only for intervals, which fire at `anchor + k * ms`, k >= 0.
    pub fn next_after(
        &self,
        tz: Tz,
        anchor: DateTime<Utc>,
        after: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron(cron) => cron.next_after(tz, after),
            Schedule::Interval { ms } => next_interval(anchor, *ms, after),
            Schedule::At(at) => (*at > after).then_some(*at),
        }
    }
}

/// The first fire of `spec` strictly after `after`, or `None` when there is none (a one-shot
/// already past, an invalid spec, or beyond the representable dates).
pub fn next_fire(
    spec: &ScheduleSpec,
    tz: Tz,
    anchor: DateTime<Utc>,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    Schedule::compile(spec).ok()?.next_after(tz, anchor, after)
}

/// The next `count` (at most [`PREVIEW_MAX`]) fire times of a cron expression in `tz`,
/// strictly after `from`. Fewer only if the calendar runs out.
pub fn preview(
    expr: &str,
    tz: Tz,
    from: DateTime<Utc>,
    count: usize,
) -> Result<Vec<DateTime<Utc>>, ScheduleError> {
    let cron = CronExpr::parse(expr)?;
    let count = count.min(PREVIEW_MAX);
    let mut fires = Vec::with_capacity(count);
    let mut after = from;
    while fires.len() < count {
        let Some(next) = cron.next_after(tz, after) else {
            break;
        };
        fires.push(next);
        after = next;
    }
    Ok(fires)
}

const NANOS_PER_MS: i128 = 1_000_000;
const NANOS_PER_SEC: i128 = 1_000_000_000;

fn next_interval(anchor: DateTime<Utc>, ms: u64, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    if ms == 0 {
        return None;
    }
    if after < anchor {
        return Some(anchor);
    }
    // i128 nanoseconds: exact for any u64 interval and any chrono instant, so no overflow
    // or rounding can shift the phase.
    let step = i128::from(ms) * NANOS_PER_MS;
    let origin = nanos(anchor);
    let k = (nanos(after) - origin) / step + 1;
    from_nanos(origin.checked_add(k.checked_mul(step)?)?)
}

fn nanos(t: DateTime<Utc>) -> i128 {
    i128::from(t.timestamp()) * NANOS_PER_SEC + i128::from(t.timestamp_subsec_nanos())
}

fn from_nanos(n: i128) -> Option<DateTime<Utc>> {
    let secs = i64::try_from(n.div_euclid(NANOS_PER_SEC)).ok()?;
    let sub = u32::try_from(n.rem_euclid(NANOS_PER_SEC)).ok()?;
    DateTime::from_timestamp(secs, sub)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn next_fire_table() {
        let anchor = utc("2025-01-01T00:00:00Z");
        let at = ScheduleSpec::At {
            at: utc("2025-01-02T00:00:00Z"),
        };
        let hourly = ScheduleSpec::Interval { ms: 3_600_000 };
        let odd = ScheduleSpec::Interval { ms: 1_500 };
        let cron = ScheduleSpec::Cron {
            expr: "0 9 * * *".into(),
        };
        let bad_cron = ScheduleSpec::Cron {
            expr: "nope".into(),
        };
        let zero = ScheduleSpec::Interval { ms: 0 };
        let tiny = ScheduleSpec::Interval { ms: 5 };
        let huge = ScheduleSpec::Interval { ms: u64::MAX };
        let cases: Vec<(&ScheduleSpec, &str, &str, Option<&str>)> = vec![
            (
                &at,
                "UTC",
                "2025-01-01T12:00:00Z",
                Some("2025-01-02T00:00:00Z"),
            ),
            (&at, "UTC", "2025-01-02T00:00:00Z", None),
            (&at, "UTC", "2025-01-03T00:00:00Z", None),
            (
                &hourly,
                "UTC",
                "2024-12-31T00:00:00Z",
                Some("2025-01-01T00:00:00Z"),
            ),
            (
                &hourly,
                "UTC",
                "2025-01-01T00:00:00Z",
                Some("2025-01-01T01:00:00Z"),
            ),
            (
                &hourly,
                "UTC",
                "2025-01-01T00:59:59.999Z",
                Some("2025-01-01T01:00:00Z"),
            ),
            (
                &hourly,
                "UTC",
                "2025-01-01T01:00:00Z",
                Some("2025-01-01T02:00:00Z"),
            ),
            (
                &hourly,
                "UTC",
                "2025-03-01T10:30:00Z",
                Some("2025-03-01T11:00:00Z"),
            ),
            // Intervals count elapsed time: the zone and DST do not shift them.
            (
                &hourly,
                "America/New_York",
                "2025-03-09T06:30:00Z",
                Some("2025-03-09T07:00:00Z"),
            ),
            (
                &odd,
                "UTC",
                "2025-01-01T00:00:02Z",
                Some("2025-01-01T00:00:03Z"),
            ),
            (
                &odd,
                "UTC",
                "2025-01-01T00:00:03Z",
                Some("2025-01-01T00:00:04.500Z"),
            ),
            (
                &cron,
                "UTC",
                "2025-01-01T09:00:00Z",
                Some("2025-01-02T09:00:00Z"),
            ),
            (
                &cron,
                "Europe/Berlin",
                "2025-01-01T09:00:00Z",
                Some("2025-01-02T08:00:00Z"),
            ),
            (
                &cron,
                "Europe/Berlin",
                "2025-07-01T09:00:00Z",
                Some("2025-07-02T07:00:00Z"),
            ),
            (&bad_cron, "UTC", "2025-01-01T00:00:00Z", None),
            (&zero, "UTC", "2025-01-01T00:00:00Z", None),
            // An old journal's 5 ms job: once a second.
            (
                &tiny,
                "UTC",
                "2025-01-01T00:00:00Z",
                Some("2025-01-01T00:00:01Z"),
            ),
            (&huge, "UTC", "2025-01-01T00:00:00Z", None),
        ];
        for (spec, zone, after, want) in cases {
            let tz: Tz = zone.parse().unwrap();
            assert_eq!(
                next_fire(spec, tz, anchor, utc(after)),
                want.map(utc),
                "{spec:?} in {zone} after {after}"
            );
        }
    }

    #[test]
    fn interval_anchor_keeps_sub_second_phase() {
        let anchor = utc("2025-01-01T00:00:00.250Z");
        let spec = ScheduleSpec::Interval { ms: 1000 };
        assert_eq!(
            next_fire(&spec, Tz::UTC, anchor, utc("2025-01-01T00:00:05Z")),
            Some(utc("2025-01-01T00:00:05.250Z"))
        );
    }

    #[test]
    fn preview_count_is_capped_and_zero_is_empty() {
        let from = utc("2025-01-01T00:00:00Z");
        assert_eq!(
            preview("* * * * * *", Tz::UTC, from, 5000).unwrap().len(),
            PREVIEW_MAX
        );
        assert!(preview("* * * * *", Tz::UTC, from, 0).unwrap().is_empty());
        assert!(preview("bad", Tz::UTC, from, 3).is_err());
    }
}
