//! `preview` against expected fire times: the acceptance table of issue 5.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::{parse_timezone, preview, ScheduleError};

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

struct Row {
    what: &'static str,
    expr: &'static str,
    zone: &'static str,
    from: &'static str,
    want: &'static [&'static str],
}

const NY: &str = "America/New_York";
const BERLIN: &str = "Europe/Berlin";

const ROWS: &[Row] = &[
    // --- America/New_York, spring forward 2025-03-09: 02:00 EST -> 03:00 EDT (07:00Z).
    Row {
        what: "NY: skipped 02:30 fires once at 03:00 EDT",
        expr: "30 2 * * *",
        zone: NY,
        from: "2025-03-08T00:00:00Z",
        want: &[
            "2025-03-08T07:30:00Z",
            "2025-03-09T07:00:00Z",
            "2025-03-10T06:30:00Z",
        ],
    },
    Row {
        what: "NY: 02:00 itself is skipped too",
        expr: "0 2 * * *",
        zone: NY,
        from: "2025-03-08T12:00:00Z",
        want: &["2025-03-09T07:00:00Z", "2025-03-10T06:00:00Z"],
    },
    Row {
        what: "NY: hourly across the gap, 03:00 not doubled",
        expr: "0 * * * *",
        zone: NY,
        from: "2025-03-09T05:30:00Z",
        want: &[
            "2025-03-09T06:00:00Z",
            "2025-03-09T07:00:00Z",
            "2025-03-09T08:00:00Z",
        ],
    },
    Row {
        what: "NY: half-hourly across the gap collapses into one 03:00 fire",
        expr: "*/30 * * * *",
        zone: NY,
        from: "2025-03-09T05:50:00Z",
        want: &[
            "2025-03-09T06:00:00Z",
            "2025-03-09T06:30:00Z",
            "2025-03-09T07:00:00Z",
            "2025-03-09T07:30:00Z",
        ],
    },
    Row {
        what: "NY: every minute runs straight through the gap",
        expr: "* * * * *",
        zone: NY,
        from: "2025-03-09T06:58:00Z",
        want: &[
            "2025-03-09T06:59:00Z",
            "2025-03-09T07:00:00Z",
            "2025-03-09T07:01:00Z",
        ],
    },
    // --- America/New_York, fall back 2025-11-02: 02:00 EDT -> 01:00 EST (06:00Z).
    Row {
        what: "NY: repeated 01:30 fires once, at the EDT occurrence",
        expr: "30 1 * * *",
        zone: NY,
        from: "2025-11-01T00:00:00Z",
        want: &[
            "2025-11-01T05:30:00Z",
            "2025-11-02T05:30:00Z",
            "2025-11-03T06:30:00Z",
        ],
    },
    Row {
        what: "NY: from inside the second 01:xx, the repeated 01:30 is not fired again",
        expr: "30 1 * * *",
        zone: NY,
        from: "2025-11-02T06:15:00Z",
        want: &["2025-11-03T06:30:00Z"],
    },
    Row {
        what: "NY: hourly across the repeat fires 01:00 once",
        expr: "0 * * * *",
        zone: NY,
        from: "2025-11-02T03:30:00Z",
        want: &[
            "2025-11-02T04:00:00Z",
            "2025-11-02T05:00:00Z",
            "2025-11-02T07:00:00Z",
            "2025-11-02T08:00:00Z",
        ],
    },
    Row {
        what: "NY: hourly from inside the second 01:xx",
        expr: "0 * * * *",
        zone: NY,
        from: "2025-11-02T06:30:00Z",
        want: &["2025-11-02T07:00:00Z"],
    },
    Row {
        what: "NY: half-hourly pauses for the repeated hour",
        expr: "*/30 * * * *",
        zone: NY,
        from: "2025-11-02T04:45:00Z",
        want: &[
            "2025-11-02T05:00:00Z",
            "2025-11-02T05:30:00Z",
            "2025-11-02T07:00:00Z",
        ],
    },
    // --- Europe/Berlin, spring forward 2025-03-30: 02:00 CET -> 03:00 CEST (01:00Z).
    Row {
        what: "Berlin: skipped 02:30 fires once at 03:00 CEST",
        expr: "30 2 * * *",
        zone: BERLIN,
        from: "2025-03-29T00:00:00Z",
        want: &[
            "2025-03-29T01:30:00Z",
            "2025-03-30T01:00:00Z",
            "2025-03-31T00:30:00Z",
        ],
    },
    Row {
        what: "Berlin: hourly across the gap",
        expr: "0 * * * *",
        zone: BERLIN,
        from: "2025-03-29T23:30:00Z",
        want: &[
            "2025-03-30T00:00:00Z",
            "2025-03-30T01:00:00Z",
            "2025-03-30T02:00:00Z",
        ],
    },
    // --- Europe/Berlin, fall back 2025-10-26: 03:00 CEST -> 02:00 CET (01:00Z).
    Row {
        what: "Berlin: repeated 02:30 fires once, at the CEST occurrence",
        expr: "30 2 * * *",
        zone: BERLIN,
        from: "2025-10-25T00:00:00Z",
        want: &[
            "2025-10-25T00:30:00Z",
            "2025-10-26T00:30:00Z",
            "2025-10-27T01:30:00Z",
        ],
    },
    Row {
        what: "Berlin: hourly across the repeat fires 02:00 once",
        expr: "0 * * * *",
        zone: BERLIN,
        from: "2025-10-25T22:30:00Z",
        want: &[
            "2025-10-25T23:00:00Z",
            "2025-10-26T00:00:00Z",
            "2025-10-26T02:00:00Z",
            "2025-10-26T03:00:00Z",
        ],
    },
    // --- A 30-minute DST shift: Lord Howe Island, 2025-10-05 02:00 +10:30 -> 02:30 +11:00.
    Row {
        what: "Lord Howe: skipped 02:15 fires at 02:30 +11",
        expr: "15 2 * * *",
        zone: "Australia/Lord_Howe",
        from: "2025-10-03T00:00:00Z",
        want: &[
            "2025-10-03T15:45:00Z",
            "2025-10-04T15:30:00Z",
            "2025-10-05T15:15:00Z",
        ],
    },
    // --- The zone is evaluated at each fire, not fixed at creation.
    Row {
        what: "Berlin: 09:00 keeps local time across the spring change",
        expr: "0 9 * * *",
        zone: BERLIN,
        from: "2025-03-28T12:00:00Z",
        want: &[
            "2025-03-29T08:00:00Z",
            "2025-03-30T07:00:00Z",
            "2025-03-31T07:00:00Z",
        ],
    },
    Row {
        what: "NY: daily macro is local midnight",
        expr: "@daily",
        zone: NY,
        from: "2025-11-01T12:00:00Z",
        want: &["2025-11-02T04:00:00Z", "2025-11-03T05:00:00Z"],
    },
    // --- Feb 29.
    Row {
        what: "Feb 29 only in leap years",
        expr: "0 0 29 2 *",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &[
            "2028-02-29T00:00:00Z",
            "2032-02-29T00:00:00Z",
            "2036-02-29T00:00:00Z",
        ],
    },
    Row {
        what: "Feb 29, 2100 is not a leap year",
        expr: "0 12 29 2 *",
        zone: "UTC",
        from: "2096-03-01T00:00:00Z",
        want: &["2104-02-29T12:00:00Z"],
    },
    // --- Day-of-month OR day-of-week (Vixie).
    Row {
        what: "every Friday and every 13th",
        expr: "0 0 13 * FRI",
        zone: "UTC",
        from: "2025-06-01T00:00:00Z",
        want: &[
            "2025-06-06T00:00:00Z",
            "2025-06-13T00:00:00Z", // Friday the 13th: once
            "2025-06-20T00:00:00Z",
            "2025-06-27T00:00:00Z",
            "2025-07-04T00:00:00Z",
            "2025-07-11T00:00:00Z",
            "2025-07-13T00:00:00Z", // a Sunday
            "2025-07-18T00:00:00Z",
        ],
    },
    Row {
        what: "numeric dow: 1st and 15th plus every Monday",
        expr: "0 8 1,15 * 1",
        zone: "UTC",
        from: "2025-09-01T09:00:00Z",
        want: &[
            "2025-09-08T08:00:00Z",
            "2025-09-15T08:00:00Z", // a Monday and the 15th: once
            "2025-09-22T08:00:00Z",
            "2025-09-29T08:00:00Z",
            "2025-10-01T08:00:00Z",
            "2025-10-06T08:00:00Z",
        ],
    },
    Row {
        what: "restricted dom with unrestricted dow is just the dom",
        expr: "0 0 13 * *",
        zone: "UTC",
        from: "2025-06-01T00:00:00Z",
        want: &["2025-06-13T00:00:00Z", "2025-07-13T00:00:00Z"],
    },
    Row {
        what: "restricted dow with unrestricted dom is just the dow",
        expr: "0 0 * * FRI",
        zone: "UTC",
        from: "2025-06-01T00:00:00Z",
        want: &["2025-06-06T00:00:00Z", "2025-06-13T00:00:00Z"],
    },
    // --- Steps, ranges, lists, names, 7 = Sunday.
    Row {
        what: "minute step",
        expr: "*/15 * * * *",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &[
            "2025-01-01T00:15:00Z",
            "2025-01-01T00:30:00Z",
            "2025-01-01T00:45:00Z",
            "2025-01-01T01:00:00Z",
        ],
    },
    Row {
        what: "hour step",
        expr: "0 */8 * * *",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &[
            "2025-01-01T08:00:00Z",
            "2025-01-01T16:00:00Z",
            "2025-01-02T00:00:00Z",
        ],
    },
    Row {
        what: "range step",
        expr: "10-30/10 * * * *",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &[
            "2025-01-01T00:10:00Z",
            "2025-01-01T00:20:00Z",
            "2025-01-01T00:30:00Z",
            "2025-01-01T01:10:00Z",
        ],
    },
    Row {
        what: "hour range",
        expr: "0 9-11 * * *",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &[
            "2025-01-01T09:00:00Z",
            "2025-01-01T10:00:00Z",
            "2025-01-01T11:00:00Z",
            "2025-01-02T09:00:00Z",
        ],
    },
    Row {
        what: "list of days of month",
        expr: "0 0 1,15 * *",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &[
            "2025-01-15T00:00:00Z",
            "2025-02-01T00:00:00Z",
            "2025-02-15T00:00:00Z",
        ],
    },
    Row {
        what: "month and weekday names: weekdays of January and July",
        expr: "0 9 * JAN,JUL MON-FRI",
        zone: "UTC",
        from: "2025-01-30T10:00:00Z",
        want: &[
            "2025-01-31T09:00:00Z",
            "2025-07-01T09:00:00Z",
            "2025-07-02T09:00:00Z",
            "2025-07-03T09:00:00Z",
            "2025-07-04T09:00:00Z",
            "2025-07-07T09:00:00Z",
        ],
    },
    Row {
        what: "names are case-insensitive",
        expr: "0 9 * jan,Jul mon-FRI",
        zone: "UTC",
        from: "2025-01-30T10:00:00Z",
        want: &["2025-01-31T09:00:00Z", "2025-07-01T09:00:00Z"],
    },
    Row {
        what: "7 is Sunday",
        expr: "0 0 * * 7",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &["2025-01-05T00:00:00Z", "2025-01-12T00:00:00Z"],
    },
    Row {
        what: "weekday range ending in 7",
        expr: "0 0 * * 5-7",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &[
            "2025-01-03T00:00:00Z",
            "2025-01-04T00:00:00Z",
            "2025-01-05T00:00:00Z",
            "2025-01-10T00:00:00Z",
        ],
    },
    // --- Six fields: leading seconds.
    Row {
        what: "seconds step",
        expr: "*/20 * * * * *",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &[
            "2025-01-01T00:00:20Z",
            "2025-01-01T00:00:40Z",
            "2025-01-01T00:01:00Z",
        ],
    },
    Row {
        what: "fixed second",
        expr: "30 0 9 * * *",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &["2025-01-01T09:00:30Z", "2025-01-02T09:00:30Z"],
    },
    Row {
        what: "sub-second start goes to the next whole second",
        expr: "* * * * * *",
        zone: "UTC",
        from: "2025-01-01T00:00:00.400Z",
        want: &["2025-01-01T00:00:01Z", "2025-01-01T00:00:02Z"],
    },
    Row {
        what: "every second through NY's fall-back pauses for the repeated hour",
        expr: "* * * * * *",
        zone: NY,
        from: "2025-11-02T05:59:58Z",
        want: &["2025-11-02T05:59:59Z", "2025-11-02T07:00:00Z"],
    },
    // --- Macros.
    Row {
        what: "@hourly",
        expr: "@hourly",
        zone: "UTC",
        from: "2025-01-01T00:30:00Z",
        want: &["2025-01-01T01:00:00Z", "2025-01-01T02:00:00Z"],
    },
    Row {
        what: "@daily",
        expr: "@daily",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &["2025-01-02T00:00:00Z", "2025-01-03T00:00:00Z"],
    },
    Row {
        what: "@midnight",
        expr: "@midnight",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &["2025-01-02T00:00:00Z", "2025-01-03T00:00:00Z"],
    },
    Row {
        what: "@weekly is Sunday midnight",
        expr: "@weekly",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &["2025-01-05T00:00:00Z", "2025-01-12T00:00:00Z"],
    },
    Row {
        what: "@monthly",
        expr: "@monthly",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &["2025-02-01T00:00:00Z", "2025-03-01T00:00:00Z"],
    },
    Row {
        what: "@yearly",
        expr: "@yearly",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &["2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"],
    },
    Row {
        what: "@annually",
        expr: "@annually",
        zone: "UTC",
        from: "2025-01-01T00:00:00Z",
        want: &["2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"],
    },
    Row {
        what: "@monthly in Berlin",
        expr: "@monthly",
        zone: BERLIN,
        from: "2025-03-15T00:00:00Z",
        want: &["2025-03-31T22:00:00Z", "2025-04-30T22:00:00Z"],
    },
];

#[test]
fn preview_table() {
    for row in ROWS {
        let tz = parse_timezone(row.zone).unwrap();
        let got = preview(row.expr, tz, utc(row.from), row.want.len()).unwrap();
        let got: Vec<String> = got
            .iter()
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
            .collect();
        assert_eq!(
            got, row.want,
            "{}: {:?} in {}",
            row.what, row.expr, row.zone
        );
    }
}

/// No duplicates and no going backwards, over a year of every transition these zones have,
/// for the pattern shapes that meet gaps and repeats.
#[test]
fn fire_times_strictly_increase_across_a_year_of_transitions() {
    let zones = [NY, BERLIN, "Australia/Lord_Howe", "Pacific/Chatham", "UTC"];
    let exprs = ["*/7 * * * *", "30 * * * *", "0 0-3 * * *", "0 30 2 * * *"];
    for zone in zones {
        let tz = parse_timezone(zone).unwrap();
        for expr in exprs {
            let mut after = utc("2025-01-01T00:00:00Z");
            let end = utc("2026-01-01T00:00:00Z");
            while after < end {
                let batch = preview(expr, tz, after, 1000).unwrap();
                let mut prev = after;
                for t in &batch {
                    assert!(*t > prev, "{expr:?} in {zone}: {t} after {prev}");
                    prev = *t;
                }
                after = prev;
            }
        }
    }
}

#[test]
fn preview_refuses_bad_input() {
    let from = utc("2025-01-01T00:00:00Z");
    let bad = [
        "* * * *",
        "* * * * * * *",
        "61 * * * *",
        "* * * * MOO",
        "",
        "@reboot",
    ];
    for expr in bad {
        let err = preview(expr, Tz::UTC, from, 5).unwrap_err();
        assert!(matches!(err, ScheduleError::Cron { .. }), "{expr:?}: {err}");
    }
    assert!(matches!(
        parse_timezone("Not/AZone"),
        Err(ScheduleError::Timezone { .. })
    ));
}
