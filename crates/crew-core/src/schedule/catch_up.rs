//! Fires missed while the daemon was down, and which of them a `catchUp` policy keeps.

use std::collections::VecDeque;

use chrono::{DateTime, TimeDelta, Utc};
use chrono_tz::Tz;

use super::fire::Schedule;
use super::spec::{CatchUp, ScheduleSpec};

/// The scheduled instants in `(last_fire or created_at, now]` that `policy` keeps, oldest
/// first: `none` → nothing; `latest` → the last one, if any was missed; `all` → the most
/// recent `bound` of them. An invalid spec has no fires.
#[allow(clippy::too_many_arguments)] // The brief's signature: every input is a separate fact.
pub fn missed_fires(
    spec: &ScheduleSpec,
    tz: Tz,
    anchor: DateTime<Utc>,
    last_fire: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    now: DateTime<Utc>,
    policy: CatchUp,
    bound: usize,
) -> Vec<DateTime<Utc>> {
    let keep = match policy {
        CatchUp::None => return Vec::new(),
        CatchUp::Latest => 1,
        CatchUp::All => bound,
    };
    let since = last_fire.unwrap_or(created_at);
    if keep == 0 || now <= since {
        return Vec::new();
    }
    match Schedule::compile(spec) {
        Ok(schedule) => last_fires(&schedule, tz, anchor, since, now, keep),
        Err(_) => Vec::new(),
    }
}

/// The last `keep` fires in `(since, now]`. Walking forward from `since` costs one step per
/// fire, which for an every-second job after a month down is millions; so the walk starts in a
/// window ending at `now` that doubles until it holds `keep` fires or reaches `since`. The
/// work is then proportional to the fires in at most twice the span actually needed.
fn last_fires(
    schedule: &Schedule,
    tz: Tz,
    anchor: DateTime<Utc>,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    keep: usize,
) -> Vec<DateTime<Utc>> {
    let mut window = TimeDelta::seconds(1);
    loop {
        let start = now
            .checked_sub_signed(window)
            .map_or(since, |start| start.max(since));
        let mut kept = VecDeque::with_capacity(keep.min(1024));
        let mut found = 0usize;
        let mut after = start;
        while let Some(fire) = schedule.next_after(tz, anchor, after) {
            if fire > now {
                break;
            }
            if kept.len() == keep {
                kept.pop_front();
            }
            kept.push_back(fire);
            found += 1;
            after = fire;
        }
        if found >= keep || start == since {
            return kept.into();
        }
        window = match window.checked_mul(2) {
            Some(doubled) => doubled,
            None => TimeDelta::MAX,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    struct Case {
        name: &'static str,
        spec: ScheduleSpec,
        zone: &'static str,
        last_fire: Option<&'static str>,
        now: &'static str,
        policy: CatchUp,
        bound: usize,
        want: &'static [&'static str],
    }

    fn cron(expr: &str) -> ScheduleSpec {
        ScheduleSpec::Cron { expr: expr.into() }
    }

    const CREATED: &str = "2025-01-01T00:00:00Z";

    #[test]
    fn catch_up_table() {
        use CatchUp::{All, Latest};
        let hourly = || cron("0 * * * *");
        let cases = vec![
            // Nothing missed.
            Case {
                name: "latest, nothing missed",
                spec: hourly(),
                zone: "UTC",
                last_fire: Some("2025-01-01T05:00:00Z"),
                now: "2025-01-01T05:59:59Z",
                policy: Latest,
                bound: 10,
                want: &[],
            },
            Case {
                name: "all, nothing missed",
                spec: hourly(),
                zone: "UTC",
                last_fire: Some("2025-01-01T05:00:00Z"),
                now: "2025-01-01T05:59:59Z",
                policy: All,
                bound: 10,
                want: &[],
            },
            // Three hours down.
            Case {
                name: "none drops everything",
                spec: hourly(),
                zone: "UTC",
                last_fire: Some("2025-01-01T05:00:00Z"),
                now: "2025-01-01T08:30:00Z",
                policy: CatchUp::None,
                bound: 10,
                want: &[],
            },
            Case {
                name: "latest keeps the last",
                spec: hourly(),
                zone: "UTC",
                last_fire: Some("2025-01-01T05:00:00Z"),
                now: "2025-01-01T08:30:00Z",
                policy: Latest,
                bound: 10,
                want: &["2025-01-01T08:00:00Z"],
            },
            Case {
                name: "all keeps every one",
                spec: hourly(),
                zone: "UTC",
                last_fire: Some("2025-01-01T05:00:00Z"),
                now: "2025-01-01T08:30:00Z",
                policy: All,
                bound: 10,
                want: &[
                    "2025-01-01T06:00:00Z",
                    "2025-01-01T07:00:00Z",
                    "2025-01-01T08:00:00Z",
                ],
            },
            Case {
                name: "all is bounded to the most recent",
                spec: hourly(),
                zone: "UTC",
                last_fire: Some("2025-01-01T05:00:00Z"),
                now: "2025-01-01T08:30:00Z",
                policy: All,
                bound: 2,
                want: &["2025-01-01T07:00:00Z", "2025-01-01T08:00:00Z"],
            },
            Case {
                name: "all with bound 0",
                spec: hourly(),
                zone: "UTC",
                last_fire: Some("2025-01-01T05:00:00Z"),
                now: "2025-01-01T08:30:00Z",
                policy: All,
                bound: 0,
                want: &[],
            },
            Case {
                name: "now itself is included, last fire is not",
                spec: hourly(),
                zone: "UTC",
                last_fire: Some("2025-01-01T05:00:00Z"),
                now: "2025-01-01T07:00:00Z",
                policy: All,
                bound: 10,
                want: &["2025-01-01T06:00:00Z", "2025-01-01T07:00:00Z"],
            },
            Case {
                name: "never fired: counted from creation",
                spec: hourly(),
                zone: "UTC",
                last_fire: None,
                now: "2025-01-01T02:10:00Z",
                policy: All,
                bound: 10,
                want: &["2025-01-01T01:00:00Z", "2025-01-01T02:00:00Z"],
            },
            Case {
                name: "clock behind the last fire",
                spec: hourly(),
                zone: "UTC",
                last_fire: Some("2025-01-01T05:00:00Z"),
                now: "2025-01-01T04:00:00Z",
                policy: All,
                bound: 10,
                want: &[],
            },
            // Long downtime with a dense schedule: the most recent, found without walking a year.
            Case {
                name: "latest after a year of an every-second job",
                spec: cron("* * * * * *"),
                zone: "UTC",
                last_fire: Some("2025-01-01T00:00:00Z"),
                now: "2026-01-01T00:00:00.500Z",
                policy: Latest,
                bound: 10,
                want: &["2026-01-01T00:00:00Z"],
            },
            Case {
                name: "all after a year of an every-second job",
                spec: cron("* * * * * *"),
                zone: "UTC",
                last_fire: Some("2025-01-01T00:00:00Z"),
                now: "2026-01-01T00:00:00Z",
                policy: All,
                bound: 3,
                want: &[
                    "2025-12-31T23:59:58Z",
                    "2025-12-31T23:59:59Z",
                    "2026-01-01T00:00:00Z",
                ],
            },
            Case {
                name: "sparse fires far back",
                spec: cron("0 0 1 1 *"),
                zone: "UTC",
                last_fire: Some("2025-01-01T00:00:00Z"),
                now: "2028-06-01T00:00:00Z",
                policy: All,
                bound: 10,
                want: &[
                    "2026-01-01T00:00:00Z",
                    "2027-01-01T00:00:00Z",
                    "2028-01-01T00:00:00Z",
                ],
            },
            // Missed fires keep the DST rules: the repeated 01:30 counts once.
            Case {
                name: "all across a fall-back",
                spec: cron("30 1 * * *"),
                zone: "America/New_York",
                last_fire: Some("2025-11-01T05:30:00Z"),
                now: "2025-11-03T12:00:00Z",
                policy: All,
                bound: 10,
                want: &["2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z"],
            },
            // Intervals.
            Case {
                name: "interval latest",
                spec: ScheduleSpec::Interval { ms: 600_000 },
                zone: "UTC",
                last_fire: Some("2025-01-01T00:10:00Z"),
                now: "2025-01-01T00:45:00Z",
                policy: Latest,
                bound: 10,
                want: &["2025-01-01T00:40:00Z"],
            },
            Case {
                name: "interval all",
                spec: ScheduleSpec::Interval { ms: 600_000 },
                zone: "UTC",
                last_fire: Some("2025-01-01T00:10:00Z"),
                now: "2025-01-01T00:45:00Z",
                policy: All,
                bound: 10,
                want: &[
                    "2025-01-01T00:20:00Z",
                    "2025-01-01T00:30:00Z",
                    "2025-01-01T00:40:00Z",
                ],
            },
            Case {
                // An old journal's 1 ms job: once a second.
                name: "interval all, bounded, 1 ms (a second) over a day",
                spec: ScheduleSpec::Interval { ms: 1 },
                zone: "UTC",
                last_fire: None,
                now: "2025-01-02T00:00:00Z",
                policy: All,
                bound: 2,
                want: &["2025-01-01T23:59:59Z", "2025-01-02T00:00:00Z"],
            },
            // One-shots.
            Case {
                name: "at missed, latest",
                spec: ScheduleSpec::At {
                    at: utc("2025-01-01T03:00:00Z"),
                },
                zone: "UTC",
                last_fire: None,
                now: "2025-01-01T04:00:00Z",
                policy: Latest,
                bound: 10,
                want: &["2025-01-01T03:00:00Z"],
            },
            Case {
                name: "at missed, none",
                spec: ScheduleSpec::At {
                    at: utc("2025-01-01T03:00:00Z"),
                },
                zone: "UTC",
                last_fire: None,
                now: "2025-01-01T04:00:00Z",
                policy: CatchUp::None,
                bound: 10,
                want: &[],
            },
            Case {
                name: "at already fired",
                spec: ScheduleSpec::At {
                    at: utc("2025-01-01T03:00:00Z"),
                },
                zone: "UTC",
                last_fire: Some("2025-01-01T03:00:00Z"),
                now: "2025-01-01T04:00:00Z",
                policy: All,
                bound: 10,
                want: &[],
            },
            Case {
                name: "at still ahead",
                spec: ScheduleSpec::At {
                    at: utc("2025-01-01T05:00:00Z"),
                },
                zone: "UTC",
                last_fire: None,
                now: "2025-01-01T04:00:00Z",
                policy: All,
                bound: 10,
                want: &[],
            },
            Case {
                name: "invalid spec has no fires",
                spec: cron("bad"),
                zone: "UTC",
                last_fire: None,
                now: "2025-01-02T00:00:00Z",
                policy: All,
                bound: 10,
                want: &[],
            },
        ];
        for case in cases {
            let tz: Tz = case.zone.parse().unwrap();
            let got = missed_fires(
                &case.spec,
                tz,
                utc(CREATED),
                case.last_fire.map(utc),
                utc(CREATED),
                utc(case.now),
                case.policy,
                case.bound,
            );
            let want: Vec<_> = case.want.iter().map(|s| utc(s)).collect();
            assert_eq!(got, want, "{}", case.name);
        }
    }
}
