//! Human times: durations ("1m05s"), relative ("3h ago", "in 3h") and absolute times in a zone.

use chrono::{DateTime, Utc};
use std::time::Duration;

/// Where absolute times are shown: the user's local zone, or a fixed one (tests, job zones).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Zone {
    Local,
    Tz(chrono_tz::Tz),
}

impl Zone {
    /// A job's IANA zone; unknown names fall back to local time rather than failing a listing.
    pub fn named(name: &str) -> Zone {
        name.parse::<chrono_tz::Tz>()
            .map(Zone::Tz)
            .unwrap_or(Zone::Local)
    }
}

impl Zone {
    /// The zone's name for a header: the IANA name, or `local +01:00` (the offset at `at`).
    pub fn label(self, at: DateTime<Utc>) -> String {
        match self {
            Zone::Tz(tz) => tz.name().to_string(),
            Zone::Local => format!("local {}", at.with_timezone(&chrono::Local).format("%:z")),
        }
    }
}

/// The clock and zone a rendering is done against, passed in so output is reproducible.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clock {
    pub now: DateTime<Utc>,
    pub zone: Zone,
}

impl Clock {
    pub fn system() -> Clock {
        Clock {
            now: Utc::now(),
            zone: Zone::Local,
        }
    }
}

pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// As people write durations: `450ms`, `1.2s`, `12s`, `3m05s`, `2h03m`, `3d04h`. Two units at
/// most, the second zero-padded; a tenth of a second only below ten seconds, where it matters.
pub fn human_duration_ms(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms < 10_000 {
        // Rounded to tenths: 1175 → 1.2s, 2000 → 2s, 9960 → 10s.
        let tenths = (ms + 50) / 100;
        return match tenths % 10 {
            0 => format!("{}s", tenths / 10),
            t => format!("{}.{t}s", tenths / 10),
        };
    }
    let s = ms / 1000;
    if s < 60 {
        return format!("{s}s");
    }
    let (m, s) = (s / 60, s % 60);
    if m < 60 {
        return format!("{m}m{s:02}s");
    }
    let (h, m) = (m / 60, m % 60);
    if h < 24 {
        return format!("{h}h{m:02}m");
    }
    let (d, h) = (h / 24, h % 24);
    format!("{d}d{h:02}h")
}

/// Exact and compact, for intervals: `90s` → `1m30s`, `300000` ms → `5m`, `1500` ms → `1.5s`
/// (milliseconds as a decimal fraction of the seconds, as `--every 1.5s` is written).
pub fn compact_duration_ms(ms: u64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let mut out: String = [
        (ms / 86_400_000, "d"),
        (ms / 3_600_000 % 24, "h"),
        (ms / 60_000 % 60, "m"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, u)| format!("{n}{u}"))
    .collect();
    let (secs, milli) = (ms / 1000 % 60, ms % 1000);
    if milli > 0 {
        let frac = format!("{milli:03}");
        out.push_str(&format!("{secs}.{}s", frac.trim_end_matches('0')));
    } else if secs > 0 {
        out.push_str(&format!("{secs}s"));
    }
    out
}

pub fn human_duration(d: Duration) -> String {
    human_duration_ms(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One coarse unit, floored: `just now`, `42s ago`, `3h ago`, `in 3h`, `in 2d`.
pub fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (t - now).num_seconds();
    let future = secs > 0;
    let a = secs.unsigned_abs();
    if a < 1 {
        return "just now".into();
    }
    let unit = if a < 60 {
        format!("{a}s")
    } else if a < 3600 {
        format!("{}m", a / 60)
    } else if a < 86_400 {
        format!("{}h", a / 3600)
    } else {
        format!("{}d", a / 86_400)
    };
    if future {
        format!("in {unit}")
    } else {
        format!("{unit} ago")
    }
}

/// `2026-01-02 09:00` in the zone.
pub fn absolute(t: DateTime<Utc>, zone: Zone) -> String {
    const FMT: &str = "%Y-%m-%d %H:%M";
    match zone {
        Zone::Local => t.with_timezone(&chrono::Local).format(FMT).to_string(),
        Zone::Tz(tz) => t.with_timezone(&tz).format(FMT).to_string(),
    }
}

/// `09:00:05` in the zone, for event lines.
pub fn clock_time(t: DateTime<Utc>, zone: Zone) -> String {
    const FMT: &str = "%H:%M:%S";
    match zone {
        Zone::Local => t.with_timezone(&chrono::Local).format(FMT).to_string(),
        Zone::Tz(tz) => t.with_timezone(&tz).format(FMT).to_string(),
    }
}

/// `2026-01-02 09:00 (in 3h)`, or `-` when absent or unparsable.
pub fn abs_and_rel(t: Option<&str>, clock: &Clock, zone: Zone) -> String {
    match t.and_then(parse_time) {
        Some(t) => format!("{} ({})", absolute(t, zone), relative(t, clock.now)),
        None => "-".into(),
    }
}

/// Parses `500ms`, `30s`, `5m`, `2h`, `7d`, `1w`, `1h30m`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "bad duration {s:?}: expected a number before {rest:?}"
            ));
        }
        let (num, tail) = rest.split_at(digits);
        let n: u128 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
        // A decimal fraction (`1.5s`, as durations are printed): up to 9 digits.
        let (fraction, tail) = match tail.strip_prefix('.') {
            Some(t) => {
                let len = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
                if len == 0 || len > 9 {
                    return Err(format!("bad duration {s:?}: bad decimal fraction"));
                }
                let (f, t) = t.split_at(len);
                let value: u128 = f.parse().map_err(|_| format!("bad duration {s:?}"))?;
                (Some((value, 10u128.pow(len as u32))), t)
            }
            None => (None, tail),
        };
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let ms_per: u128 = match unit.trim() {
            "ms" => 1,
            "s" | "sec" | "secs" => 1000,
            "m" | "min" | "mins" => 60_000,
            "h" | "hr" | "hrs" => 3_600_000,
            "d" | "day" | "days" => 86_400_000,
            "w" | "week" | "weeks" => 604_800_000,
            other => {
                return Err(format!(
                    "bad duration {s:?}: unknown unit {other:?} (use ms, s, m, h, d, w)"
                ))
            }
        };
        total = total.saturating_add(n.saturating_mul(ms_per));
        if let Some((value, scale)) = fraction {
            total = total.saturating_add(value.saturating_mul(ms_per) / scale);
        }
        rest = tail;
    }
    let ms = u64::try_from(total).map_err(|_| format!("duration {s:?} is too long"))?;
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        parse_time(s).unwrap()
    }

    #[test]
    fn durations() {
        let cases = [
            (0, "0ms"),
            (450, "450ms"),
            (999, "999ms"),
            (1_000, "1s"),
            (1_175, "1.2s"),
            (1_949, "1.9s"),
            (2_000, "2s"),
            (9_949, "9.9s"),
            (9_960, "10s"),
            (10_400, "10s"),
            (59_999, "59s"),
            (60_000, "1m00s"),
            (185_000, "3m05s"),
            (3_599_000, "59m59s"),
            (3_600_000, "1h00m"),
            (7_380_000, "2h03m"),
            (86_400_000, "1d00h"),
            (273_600_000, "3d04h"),
        ];
        for (ms, want) in cases {
            assert_eq!(human_duration_ms(ms), want, "{ms}ms");
        }
    }

    #[test]
    fn compact_durations() {
        let cases = [
            (0, "0s"),
            (250, "250ms"),
            (1_500, "1.5s"),
            (1_175, "1.175s"),
            (61_050, "1m1.05s"),
            (90_000, "1m30s"),
            (300_000, "5m"),
            (90_000_000, "1d1h"),
        ];
        for (ms, want) in cases {
            assert_eq!(compact_duration_ms(ms), want, "{ms}");
            // What is printed reads back as the same interval.
            assert_eq!(
                parse_duration(want).map(|d| d.as_millis() as u64),
                Ok(ms),
                "{want}"
            );
        }
    }

    #[test]
    fn relative_times() {
        let now = t("2026-01-01T12:00:00Z");
        let cases = [
            ("2026-01-01T12:00:00Z", "just now"),
            ("2026-01-01T11:59:18Z", "42s ago"),
            ("2026-01-01T11:55:00Z", "5m ago"),
            ("2026-01-01T09:00:00Z", "3h ago"),
            ("2025-12-29T12:00:00Z", "3d ago"),
            ("2026-01-01T15:00:00Z", "in 3h"),
            ("2026-01-01T15:59:59Z", "in 3h"),
            ("2026-01-01T12:00:30Z", "in 30s"),
            ("2026-01-03T12:00:00Z", "in 2d"),
        ];
        for (at, want) in cases {
            assert_eq!(relative(t(at), now), want, "{at}");
        }
    }

    #[test]
    fn absolute_in_zone() {
        let at = t("2026-07-01T07:00:00Z");
        assert_eq!(
            absolute(at, Zone::Tz(chrono_tz::Europe::Berlin)),
            "2026-07-01 09:00"
        );
        assert_eq!(
            absolute(at, Zone::Tz(chrono_tz::America::New_York)),
            "2026-07-01 03:00"
        );
        assert_eq!(
            Zone::named("Europe/Berlin"),
            Zone::Tz(chrono_tz::Europe::Berlin)
        );
        assert_eq!(Zone::named("Mars/Olympus"), Zone::Local);
    }

    #[test]
    fn abs_and_rel_handles_missing() {
        let clock = Clock {
            now: t("2026-01-01T12:00:00Z"),
            zone: Zone::Tz(chrono_tz::UTC),
        };
        assert_eq!(abs_and_rel(None, &clock, clock.zone), "-");
        assert_eq!(abs_and_rel(Some("garbage"), &clock, clock.zone), "-");
        assert_eq!(
            abs_and_rel(Some("2026-01-01T15:00:00Z"), &clock, clock.zone),
            "2026-01-01 15:00 (in 3h)"
        );
    }

    #[test]
    fn durations_parse() {
        let ok = [
            ("90", 90_000),
            ("500ms", 500),
            ("30s", 30_000),
            ("5m", 300_000),
            ("2h", 7_200_000),
            ("7d", 604_800_000),
            ("1w", 604_800_000),
            ("1h30m", 5_400_000),
            ("1m30s", 90_000),
            ("1.5s", 1_500),
            ("1.5h", 5_400_000),
            ("1m1.05s", 61_050),
        ];
        for (s, ms) in ok {
            assert_eq!(parse_duration(s), Ok(Duration::from_millis(ms)), "{s}");
        }
        for bad in [
            "",
            "abc",
            "5x",
            "h5",
            "1.h",
            "1.5.5s",
            ".5s",
            "1.0000000001s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad} should not parse");
        }
    }
}
