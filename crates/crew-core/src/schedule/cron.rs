//! Cron expressions: parsing and matching on local wall-clock times.
//!
//! Why our own matcher and not croner: see the module doc of [`crate::schedule`].

use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Timelike, Utc};
use chrono_tz::Tz;

use super::error::{excerpt, ScheduleError};
use super::zone::resolve_local;

/// Longer expressions are refused outright: no valid one comes close, and it bounds the work
/// and the size of error messages.
const MAX_EXPR_LEN: usize = 256;

/// How far ahead a match is searched for. Every expression the parser accepts matches within
/// about 40 years (a Feb 29 that must also be a given weekday); the rest is headroom.
const HORIZON_YEARS: i32 = 400;

/// A parsed cron expression: one bitset per field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CronExpr {
    seconds: u64,
    minutes: u64,
    hours: u64,
    /// Bits 1..=31.
    days: u64,
    /// Bits 1..=12.
    months: u64,
    /// Bits 0..=6, Sunday = 0.
    weekdays: u64,
    /// Vixie cron's rule: a day field whose text starts with `*` is unrestricted.
    dom_restricted: bool,
    dow_restricted: bool,
}

struct Field {
    name: &'static str,
    min: u32,
    /// Largest value accepted (7 for day-of-week).
    max: u32,
    /// Largest value `*` stands for (6 for day-of-week, so Sunday is not set twice).
    star_max: u32,
    /// Three-letter names for `min`, `min + 1`, ...
    names: &'static [&'static str],
}

const SECOND: Field = Field {
    name: "second",
    min: 0,
    max: 59,
    star_max: 59,
    names: &[],
};
const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    star_max: 59,
    names: &[],
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    star_max: 23,
    names: &[],
};
const DAY_OF_MONTH: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    star_max: 31,
    names: &[],
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    star_max: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
};
const DAY_OF_WEEK: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 7,
    star_max: 6,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
};

impl CronExpr {
    /// Parses the grammar described in the [`crate::schedule`] module doc.
    pub fn parse(expr: &str) -> Result<CronExpr, ScheduleError> {
        if expr.len() > MAX_EXPR_LEN {
            return Err(ScheduleError::cron(format!(
                "expression is longer than {MAX_EXPR_LEN} characters"
            )));
        }
        let trimmed = expr.trim();
        if trimmed.starts_with('@') {
            return Self::parse(expand_macro(trimmed)?);
        }
        let parts: Vec<&str> = trimmed.split_whitespace().collect();
        let (second, rest) = match parts.as_slice() {
            [] => return Err(ScheduleError::cron("expression is empty")),
            [min, hour, dom, mon, dow] => ("0", [*min, *hour, *dom, *mon, *dow]),
            [sec, min, hour, dom, mon, dow] => (*sec, [*min, *hour, *dom, *mon, *dow]),
            _ => {
                return Err(ScheduleError::cron(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with \
                     leading seconds, got {}",
                    parts.len()
                )))
            }
        };
        let [minute, hour, dom, month, dow] = rest;
        let mut weekdays = parse_field(dow, &DAY_OF_WEEK)?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays & !(1 << 7)) | 1;
        }
        let cron = CronExpr {
            seconds: parse_field(second, &SECOND)?,
            minutes: parse_field(minute, &MINUTE)?,
            hours: parse_field(hour, &HOUR)?,
            days: parse_field(dom, &DAY_OF_MONTH)?,
            months: parse_field(month, &MONTH)?,
            weekdays,
            dom_restricted: !dom.starts_with('*'),
            dow_restricted: !dow.starts_with('*'),
        };
        if !cron.days_or_weekdays() && !cron.some_day_exists() {
            return Err(ScheduleError::cron(format!(
                "day-of-month {dom:?} never occurs in month {month:?}"
            )));
        }
        Ok(cron)
    }

    /// The first instant strictly after `after` at which this expression fires in `tz`,
    /// under the DST rules of [`resolve_local`].
    pub fn next_after(&self, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Candidates below the local time of `after` resolve to instants <= `after` (resolution
        // is monotonic), so the search starts just past it. Candidates above it can still
        // resolve to <= `after` when `after` lies in the second pass of a repeated hour; those
        // are skipped by the loop.
        let local = after.with_timezone(&tz).naive_local();
        let mut from = local
            .with_nanosecond(0)?
            .checked_add_signed(TimeDelta::seconds(1))?;
        loop {
            let candidate = self.next_local_at_or_after(from)?;
            let instant = resolve_local(tz, candidate)?;
            if instant > after {
                return Some(instant);
            }
            from = candidate.checked_add_signed(TimeDelta::seconds(1))?;
        }
    }

    /// The first local wall-clock time at or after `from` (whole seconds) that matches.
    pub fn next_local_at_or_after(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let last_year = from.year().saturating_add(HORIZON_YEARS);
        let mut date = from.date();
        let mut time = (from.hour(), from.minute(), from.second());
        while date.year() <= last_year {
            if !has_bit(self.months, date.month()) {
                date = first_of_next_month(date)?;
                time = (0, 0, 0);
                continue;
            }
            if self.day_matches(date) {
                if let Some(t) = self.first_time_from(time) {
                    return Some(date.and_time(t));
                }
            }
            date = date.succ_opt()?;
            time = (0, 0, 0);
        }
        None
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        let dom = has_bit(self.days, date.day());
        let dow = has_bit(self.weekdays, date.weekday().num_days_from_sunday());
        if self.days_or_weekdays() {
            dom || dow
        } else {
            dom && dow
        }
    }

    fn days_or_weekdays(&self) -> bool {
        self.dom_restricted && self.dow_restricted
    }

    /// Under AND, a day-of-month absent from every chosen month (`30 2`) never matches;
    /// refusing it beats searching 400 years. Weekdays cycle through every date, so any
    /// existing (month, day) pair eventually falls on any chosen weekday.
    fn some_day_exists(&self) -> bool {
        (1..=12u32).any(|month| {
            has_bit(self.months, month) && {
                let longest = if month == 2 {
                    29
                } else {
                    days_in_month_max(month)
                };
                (1..=longest).any(|day| has_bit(self.days, day))
            }
        })
    }

    fn first_time_from(&self, (h, m, s): (u32, u32, u32)) -> Option<NaiveTime> {
        for hour in set_bits_from(self.hours, h) {
            let minute_from = if hour == h { m } else { 0 };
            for minute in set_bits_from(self.minutes, minute_from) {
                let second_from = if hour == h && minute == m { s } else { 0 };
                if let Some(second) = next_set_bit(self.seconds, second_from) {
                    return NaiveTime::from_hms_opt(hour, minute, second);
                }
            }
        }
        None
    }
}

impl FromStr for CronExpr {
    type Err = ScheduleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CronExpr::parse(s)
    }
}

fn expand_macro(token: &str) -> Result<&'static str, ScheduleError> {
    match token.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => Ok("0 0 1 1 *"),
        "@monthly" => Ok("0 0 1 * *"),
        "@weekly" => Ok("0 0 * * 0"),
        "@daily" | "@midnight" => Ok("0 0 * * *"),
        "@hourly" => Ok("0 * * * *"),
        "@reboot" => Err(ScheduleError::cron(
            "@reboot is not supported: a schedule needs fire times",
        )),
        _ => Err(ScheduleError::cron(format!(
            "unknown macro {:?}; use @hourly, @daily, @midnight, @weekly, @monthly, @yearly or \
             @annually",
            excerpt(token)
        ))),
    }
}

fn parse_field(text: &str, field: &Field) -> Result<u64, ScheduleError> {
    let fail = |why: String| {
        ScheduleError::cron(format!("{} field {:?}: {why}", field.name, excerpt(text)))
    };
    let mut mask = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(fail("empty list item".into()));
        }
        let (base, step) = match item.split_once('/') {
            Some((base, step)) => (base, Some(parse_step(step, field).map_err(&fail)?)),
            None => (item, None),
        };
        let (lo, hi) = if base == "*" {
            (field.min, field.star_max)
        } else if let Some((a, b)) = base.split_once('-') {
            let lo = parse_value(a, field).map_err(&fail)?;
            let hi = parse_value(b, field).map_err(&fail)?;
            if lo > hi {
                return Err(fail(format!("range {a}-{b} runs backwards")));
            }
            (lo, hi)
        } else {
            let value = parse_value(base, field).map_err(&fail)?;
            if step.is_some() {
                return Err(fail(format!(
                    "a step needs * or a range before it, as in */n or {value}-{}/n",
                    field.star_max
                )));
            }
            (value, value)
        };
        let step = step.unwrap_or(1);
        let mut value = lo;
        while value <= hi {
            mask |= 1 << value;
            value += step;
        }
    }
    Ok(mask)
}

fn parse_step(text: &str, field: &Field) -> Result<u32, String> {
    let span = field.star_max - field.min + 1;
    match parse_number(text) {
        Some(step) if (1..=span).contains(&step) => Ok(step),
        _ => Err(format!(
            "step {:?} must be a number from 1 to {span}",
            excerpt(text)
        )),
    }
}

fn parse_value(text: &str, field: &Field) -> Result<u32, String> {
    if let Some(value) = parse_number(text) {
        return if (field.min..=field.max).contains(&value) {
            Ok(value)
        } else {
            Err(format!(
                "{value} is out of range {}-{}",
                field.min, field.max
            ))
        };
    }
    if text.bytes().all(|b| b.is_ascii_digit()) && !text.is_empty() {
        return Err(format!(
            "{} is out of range {}-{}",
            excerpt(text),
            field.min,
            field.max
        ));
    }
    if let Some(index) = field
        .names
        .iter()
        .position(|name| name.eq_ignore_ascii_case(text))
    {
        let offset = u32::try_from(index).map_err(|_| "name table too long".to_string())?;
        return Ok(field.min + offset);
    }
    if field.names.is_empty() {
        Err(format!(
            "{:?} is not a number from {} to {}",
            excerpt(text),
            field.min,
            field.max
        ))
    } else {
        Err(format!(
            "{:?} is neither a number from {} to {} nor one of {}",
            excerpt(text),
            field.min,
            field.max,
            field.names.join(",")
        ))
    }
}

/// Plain decimal digits only: no sign, no whitespace. `None` also when it overflows.
fn parse_number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn has_bit(mask: u64, bit: u32) -> bool {
    bit < 64 && mask & (1 << bit) != 0
}

fn next_set_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = mask >> from;
    (rest != 0).then(|| from + rest.trailing_zeros())
}

fn set_bits_from(mask: u64, from: u32) -> impl Iterator<Item = u32> {
    std::iter::successors(next_set_bit(mask, from), move |&bit| {
        next_set_bit(mask, bit + 1)
    })
}

fn first_of_next_month(date: NaiveDate) -> Option<NaiveDate> {
    if date.month() == 12 {
        NaiveDate::from_ymd_opt(date.year().checked_add(1)?, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(date.year(), date.month() + 1, 1)
    }
}

fn days_in_month_max(month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 => 29,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn equivalent_spellings_parse_to_the_same_sets() {
        let cases: &[(&str, &str)] = &[
            ("0 9 * JAN,JUL MON-FRI", "0 9 * 1,7 1-5"),
            ("0 9 * jan,Jul mon-fri", "0 9 * 1,7 1-5"),
            ("0 0 * * 7", "0 0 * * 0"),
            ("0 0 * * SUN", "0 0 * * 0"),
            ("0 0 * * 5-7", "0 0 * * 0,5,6"),
            ("*/15 * * * *", "0,15,30,45 * * * *"),
            ("10-30/10 * * * *", "10,20,30 * * * *"),
            ("0 */6 * * *", "0 0,6,12,18 * * *"),
            ("0 * * * * *", "* * * * *"),
            ("0 0 1-31/10 * *", "0 0 1,11,21,31 * *"),
            ("0 0 * */5 *", "0 0 * 1,6,11 *"),
            ("0 0 * * 0-6/2", "0 0 * * 0,2,4,6"),
            ("  0   9 * * 1  ", "0 9 * * 1"),
            ("0\t9 * * 1", "0 9 * * 1"),
            ("@hourly", "0 * * * *"),
            ("@daily", "0 0 * * *"),
            ("@midnight", "0 0 * * *"),
            ("@weekly", "0 0 * * 0"),
            ("@monthly", "0 0 1 * *"),
            ("@yearly", "0 0 1 1 *"),
            ("@annually", "0 0 1 1 *"),
            ("@DAILY", "0 0 * * *"),
            (" @daily ", "0 0 * * *"),
        ];
        for (a, b) in cases {
            assert_eq!(
                CronExpr::parse(a).unwrap(),
                CronExpr::parse(b).unwrap(),
                "{a:?} vs {b:?}"
            );
        }
    }

    #[test]
    fn a_leading_star_marks_a_day_field_unrestricted() {
        // Same day sets, different Vixie flags: that is what decides OR versus AND.
        let cases: &[(&str, &str)] = &[
            ("0 0 */10 * MON", "0 0 1-31/10 * MON"),
            ("0 0 13 * */2", "0 0 13 * 0-6/2"),
        ];
        for (star, range) in cases {
            let star = CronExpr::parse(star).unwrap();
            let range = CronExpr::parse(range).unwrap();
            assert_eq!((star.days, star.weekdays), (range.days, range.weekdays));
            assert!(!star.days_or_weekdays());
            assert!(range.days_or_weekdays());
        }
    }

    #[test]
    fn refused_expressions_say_why() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("   ", "empty"),
            ("* * * *", "got 4"),
            ("* * * * * * *", "got 7"),
            ("61 * * * *", "minute field \"61\": 61 is out of range 0-59"),
            ("* 24 * * *", "hour field \"24\": 24 is out of range 0-23"),
            (
                "* * 0 * *",
                "day-of-month field \"0\": 0 is out of range 1-31",
            ),
            ("* * 32 * *", "out of range 1-31"),
            ("* * * 13 *", "month field \"13\": 13 is out of range 1-12"),
            (
                "* * * * 8",
                "day-of-week field \"8\": 8 is out of range 0-7",
            ),
            ("60 * * * * *", "second field \"60\""),
            (
                "* * * * MOO",
                "day-of-week field \"MOO\": \"MOO\" is neither",
            ),
            ("* * * FOO *", "month field \"FOO\""),
            (
                "MON * * * *",
                "minute field \"MON\": \"MON\" is not a number",
            ),
            ("* * * JAN MON,", "empty list item"),
            ("1,,2 * * * *", "empty list item"),
            ("*/0 * * * *", "step \"0\" must be a number from 1 to 60"),
            ("*/61 * * * *", "from 1 to 60"),
            ("*/x * * * *", "step \"x\""),
            ("5/15 * * * *", "a step needs * or a range before it"),
            ("30-10 * * * *", "range 30-10 runs backwards"),
            ("-5 * * * *", "minute field \"-5\""),
            ("5- * * * *", "minute field \"5-\""),
            ("1-2-3 * * * *", "minute field \"1-2-3\""),
            ("+5 * * * *", "minute field \"+5\""),
            ("99999999999999999999 * * * *", "is out of range 0-59"),
            ("L * * * *", "minute field \"L\""),
            ("0 0 L * *", "day-of-month field \"L\""),
            ("0 0 ? * MON", "day-of-month field \"?\""),
            ("0 0 * * MON#2", "day-of-week field \"MON#2\""),
            ("0 0 15W * *", "day-of-month field \"15W\""),
            ("0 0 * * MONDAY", "day-of-week field \"MONDAY\""),
            ("0 0 30 2 *", "never occurs"),
            ("0 0 31 4,6,9,11 *", "never occurs"),
            ("@reboot", "@reboot is not supported"),
            ("@every 5m", "unknown macro"),
            ("@daily 0", "unknown macro"),
            ("@", "unknown macro"),
            ("garbage", "got 1"),
        ];
        for (expr, want) in cases {
            let err = CronExpr::parse(expr).expect_err(expr);
            let msg = err.to_string();
            assert!(msg.starts_with("cron: "), "{expr:?}: {msg}");
            assert!(msg.contains(want), "{expr:?}: {msg:?} lacks {want:?}");
            assert_eq!(err.fields(), vec!["cron"]);
        }
        let long = "0 ".repeat(200);
        let msg = CronExpr::parse(&long).unwrap_err().to_string();
        assert!(msg.contains("longer than 256"), "{msg}");
    }

    #[test]
    fn feb_30_with_weekday_is_an_or_and_so_valid() {
        // Both day fields restricted: Mondays in February fire even though Feb 30 never exists.
        let cron = CronExpr::parse("0 0 30 2 MON").unwrap();
        assert_eq!(
            cron.next_local_at_or_after(naive("2025-01-01 00:00:00")),
            Some(naive("2025-02-03 00:00:00"))
        );
    }

    #[test]
    fn local_matching_table() {
        let cases: &[(&str, &str, &str)] = &[
            ("* * * * *", "2025-01-01 00:00:00", "2025-01-01 00:00:00"),
            ("* * * * *", "2025-01-01 00:00:01", "2025-01-01 00:01:00"),
            (
                "59 23 31 12 *",
                "2025-01-01 00:00:00",
                "2025-12-31 23:59:00",
            ),
            ("0 0 1 1 *", "2025-12-31 23:59:59", "2026-01-01 00:00:00"),
            ("0 0 29 2 *", "2025-01-01 00:00:00", "2028-02-29 00:00:00"),
            ("0 0 29 2 *", "2096-03-01 00:00:00", "2104-02-29 00:00:00"),
            ("0 0 31 * *", "2025-04-01 00:00:00", "2025-05-31 00:00:00"),
            // Vixie: `*/2` in day-of-month counts as unrestricted, so it ANDs with Monday.
            (
                "0 0 */2 * MON",
                "2025-01-01 00:00:00",
                "2025-01-13 00:00:00",
            ),
            // ...while an explicit range ORs.
            (
                "0 0 1-31/2 * MON",
                "2025-01-01 00:00:00",
                "2025-01-01 00:00:00",
            ),
            ("0 0 13 * FRI", "2025-06-14 00:00:00", "2025-06-20 00:00:00"),
            ("0 0 13 * FRI", "2025-07-12 00:00:00", "2025-07-13 00:00:00"),
            (
                "30 15 10 * * *",
                "2025-01-01 10:15:30",
                "2025-01-01 10:15:30",
            ),
            (
                "30 15 10 * * *",
                "2025-01-01 10:15:31",
                "2025-01-02 10:15:30",
            ),
        ];
        for (expr, from, want) in cases {
            let cron = CronExpr::parse(expr).unwrap();
            assert_eq!(
                cron.next_local_at_or_after(naive(from)),
                Some(naive(want)),
                "{expr:?} from {from}"
            );
        }
    }

    #[test]
    fn search_stops_at_the_end_of_the_calendar() {
        let cron = CronExpr::parse("0 0 1 1 *").unwrap();
        assert_eq!(cron.next_local_at_or_after(NaiveDateTime::MAX), None);
    }
}
