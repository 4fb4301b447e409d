//! Cron expressions: the first line is the expression, the bytes after it choose a time zone
//! and a start instant. Fire times must be strictly increasing and match what was asked.

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use crew_core::schedule::{parse_timezone, preview, CronExpr};

/// Zones with DST gaps and repeats, half-hour offsets, southern hemisphere, and UTC.
const ZONES: [&str; 8] = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/Santiago",
    "Pacific/Chatham",
    "Europe/London",
];

/// Fires followed per input: enough to cross a DST change from most starts, few enough to keep
/// the fuzzer fast.
const FIRES: usize = 8;

pub fn cron(data: &[u8]) {
    let (expr, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let expr = String::from_utf8_lossy(expr);
    let zone_text = rest
        .split(|&b| b == b'\n')
        .nth(1)
        .map(String::from_utf8_lossy);
    if let Some(z) = &zone_text {
        let _ = parse_timezone(z);
    }
    let zone_byte = rest.first().copied().unwrap_or(0);
    let tz: Tz = ZONES[usize::from(zone_byte) % ZONES.len()]
        .parse()
        .unwrap_or(Tz::UTC);
    // Anywhere from 1970 to ~2106, to the second.
    let mut secs = [0u8; 4];
    for (d, s) in secs.iter_mut().zip(rest.iter().skip(1)) {
        *d = *s;
    }
    let start = i64::from(u32::from_le_bytes(secs));
    let Some(from) = Utc.timestamp_opt(start, 0).single() else {
        return;
    };
    let Ok(cron) = CronExpr::parse(&expr) else {
        return;
    };
    let mut after = from;
    let mut fires: Vec<DateTime<Utc>> = Vec::new();
    for _ in 0..FIRES {
        let Some(next) = cron.next_after(tz, after) else {
            break;
        };
        assert!(
            next > after,
            "{expr:?} in {tz}: {next} is not after {after}"
        );
        fires.push(next);
        after = next;
    }
    // preview is the same walk through another door.
    let previewed = preview(&expr, tz, from, FIRES);
    assert_eq!(
        previewed.as_deref().ok(),
        Some(fires.as_slice()),
        "{expr:?} in {tz} from {from}: preview disagrees with next_after"
    );
}
