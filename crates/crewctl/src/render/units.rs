//! Token counts, costs, byte sizes and text cutting.

use crew_api::types::Usage;

/// `950`, `1.2k`, `12.3k`, `123k`, `1.2M`, `12.3M`.
/// `1 task`, `3 tasks`: a count and its noun (a plain `s` plural).
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

pub fn tokens(n: u64) -> String {
    fn scaled(v: f64, suffix: &str) -> String {
        if v < 100.0 {
            let s = format!("{v:.1}");
            format!("{}{suffix}", s.strip_suffix(".0").unwrap_or(&s))
        } else {
            format!("{v:.0}{suffix}")
        }
    }
    if n < 1_000 {
        return n.to_string();
    }
    let k = n as f64 / 1_000.0;
    // Rounding 999.95k up would print "1000k"; switch unit before that happens.
    if k < 999.5 {
        return scaled(k, "k");
    }
    let m = n as f64 / 1_000_000.0;
    if m < 999.5 {
        return scaled(m, "M");
    }
    scaled(n as f64 / 1_000_000_000.0, "B")
}

/// Tokens that count for crew (and its budgets): input + output + cacheWrite (SPEC §4).
pub fn usage_tokens(u: &Usage) -> u64 {
    u.input
        .saturating_add(u.output)
        .saturating_add(u.cache_write)
}

/// `$0`, `<$0.0001`, `$0.0123`, `$1.23`, `$1234.50`.
pub fn cost(usd: f64) -> String {
    if !usd.is_finite() || usd <= 0.0 {
        return "$0".into();
    }
    if usd < 0.0001 {
        return "<$0.0001".into();
    }
    if usd < 1.0 {
        return format!("${usd:.4}");
    }
    format!("${usd:.2}")
}

/// `512 B`, `1.5 KiB`, `12.0 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in UNITS.iter().skip(1) {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// `42%` from a 0..1 fraction.
pub fn percent(fraction: f64) -> String {
    if !fraction.is_finite() {
        return "-".into();
    }
    format!("{:.0}%", fraction * 100.0)
}

/// Cuts `s` to at most `max` characters, ending with `…` when cut. Newlines become spaces so a
/// table cell stays on one line.
pub fn cut(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| {
            if c == '\n' || c == '\r' || c == '\t' {
                ' '
            } else {
                c
            }
        })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        return flat.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out: String = flat.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_counts() {
        let cases = [
            (0, "0"),
            (950, "950"),
            (1_000, "1k"),
            (1_234, "1.2k"),
            (12_345, "12.3k"),
            (99_949, "99.9k"),
            (123_456, "123k"),
            (999_400, "999k"),
            (999_600, "1M"),
            (1_250_000, "1.2M"),
            (12_300_000, "12.3M"),
            (5_000_000_000, "5B"),
        ];
        for (n, want) in cases {
            assert_eq!(tokens(n), want, "{n}");
        }
    }

    #[test]
    fn costs() {
        let cases = [
            (0.0, "$0"),
            (-1.0, "$0"),
            (f64::NAN, "$0"),
            (0.00001, "<$0.0001"),
            (0.0123, "$0.0123"),
            (0.99994, "$0.9999"),
            (1.234, "$1.23"),
            (1234.5, "$1234.50"),
        ];
        for (usd, want) in cases {
            assert_eq!(cost(usd), want, "{usd}");
        }
    }

    #[test]
    fn byte_sizes() {
        let cases = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1536, "1.5 KiB"),
            (12 * 1024 * 1024, "12.0 MiB"),
            (3 << 30, "3.0 GiB"),
        ];
        for (n, want) in cases {
            assert_eq!(bytes(n), want, "{n}");
        }
    }

    #[test]
    fn cutting() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("exactly10!", 10), "exactly10!");
        assert_eq!(cut("this is far too long", 10), "this is f…");
        assert_eq!(cut("line one\nline two", 40), "line one line two");
        assert_eq!(cut("ééééé", 3), "éé…");
        assert_eq!(cut("x", 0), "");
    }

    #[test]
    fn usage_token_sum_ignores_cache_reads() {
        let u = Usage {
            input: 100,
            output: 20,
            cache_read: 5000,
            cache_write: 3,
            cost: 0.0,
            turns: 1,
        };
        assert_eq!(usage_tokens(&u), 123);
    }
}
