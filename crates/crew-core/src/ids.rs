//! Identifiers: run ids and the rule every id used in a path must follow.

use chrono::{DateTime, Utc};

/// `team_<YYYYMMDDHHMMSS>_<16 hex>` (pi-crew's format): sorts by creation time, and the random
/// suffix keeps ids unique within a second. `random` comes from the caller (the core has no RNG).
pub fn run_id(now: DateTime<Utc>, random: u64) -> String {
    format!("team_{}_{random:016x}", now.format("%Y%m%d%H%M%S"))
}

/// A run id that sorts after `last` (the newest existing id): ids created within the same
/// second keep their creation order, so "newest first" listings and pruning are exact.
pub fn next_run_id(now: DateTime<Utc>, random: u64, last: Option<&str>) -> String {
    let id = run_id(now, random);
    match last {
        Some(last) if id.as_str() <= last => {
            let (prefix, suffix) = last.rsplit_once('_').unwrap_or((last, "0"));
            let step = 1 + (random & 0xffff);
            let next = u64::from_str_radix(suffix, 16)
                .unwrap_or(0)
                .saturating_add(step);
            format!("{prefix}_{next:016x}")
        }
        _ => id,
    }
}

/// Ids and names that end up in file paths: `[A-Za-z0-9_-]`, 1..=128 chars. This is what keeps
/// `../` and friends out of the state directory.
pub fn is_safe_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Artifact names are relative paths of safe segments (`results/01_explore.txt`). Dots are
/// allowed inside a segment but a segment may not be `.` or `..`.
pub fn is_safe_artifact_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 512
        && s.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_ids() {
        for (s, ok) in [
            ("team_1_ab", true),
            ("01_explore", true),
            ("", false),
            ("../x", false),
            ("a/b", false),
            ("a b", false),
        ] {
            assert_eq!(is_safe_id(s), ok, "{s}");
        }
        for (s, ok) in [
            ("results/01_x.txt", true),
            ("shared/plan.md", true),
            ("../etc/passwd", false),
            ("results/../../x", false),
            ("/abs", false),
            ("a//b", false),
        ] {
            assert_eq!(is_safe_artifact_name(s), ok, "{s}");
        }
    }

    #[test]
    fn next_run_id_keeps_creation_order_within_a_second() {
        let t = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let mut last: Option<String> = None;
        for r in [u64::MAX / 2, 3, 0, u64::MAX / 4, 1] {
            let id = next_run_id(t, r, last.as_deref());
            if let Some(l) = &last {
                assert!(id.as_str() > l.as_str(), "{id} <= {l}");
            }
            assert!(is_safe_id(&id));
            last = Some(id);
        }
        let later = next_run_id(
            DateTime::from_timestamp(1_700_000_001, 0).unwrap(),
            0,
            last.as_deref(),
        );
        assert!(later.as_str() > last.unwrap().as_str());
    }

    #[test]
    fn run_ids_sort_by_time() {
        let a = run_id(
            DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            u64::MAX,
        );
        let b = run_id(DateTime::from_timestamp(1_700_000_001, 0).unwrap(), 0);
        assert!(a < b);
        assert!(is_safe_id(&a));
        assert_eq!(a, "team_20231114221320_ffffffffffffffff");
    }
}
