//! Pure rendering: wire types in, text out. Nothing here does I/O or reads the clock, so every
//! view is snapshot-tested with fixed data, a fixed "now", a fixed width and colours off.

pub mod cache;
pub mod diag;
pub mod events;
pub mod follow;
pub mod ids;
pub mod marks;
pub mod resources;
pub mod runs;
pub mod schedule;
pub mod table;
pub mod time;
pub mod transcript;
pub mod units;
pub mod workspace;

use crate::style::{Paint, Tone};
use time::Clock;

/// How to render: colours, terminal width (None = unbounded, e.g. piped) and clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View {
    pub paint: Paint,
    pub width: Option<u16>,
    pub clock: Clock,
}

impl View {
    pub fn p(&self, tone: Tone, text: impl std::fmt::Display) -> String {
        self.paint.paint(tone, text)
    }

    /// Free text on one line, cut to `max` characters on a terminal; piped output (no width)
    /// is never cut (README: piped output stays whole, for grep and scripts).
    pub fn cut(&self, s: &str, max: usize) -> String {
        match self.width {
            Some(_) => units::cut(s, max),
            None => units::cut(s, usize::MAX),
        }
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::time::{parse_time, Clock, Zone};
    use super::View;
    use crate::style::Paint;

    pub const NOW: &str = "2026-03-10T12:00:00Z";

    /// The output at 80 and at 160 columns, one after the other, for one snapshot.
    pub fn at_80_and_160(render: impl Fn(&View) -> String) -> String {
        let mut out = String::new();
        for w in [80u16, 160] {
            let text = render(&view(w));
            out.push_str(&format!("── {w} columns ──\n{text}"));
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }

    /// Fails when a line of `text` is wider than `w` columns.
    pub fn assert_fits(text: &str, w: u16) {
        for line in text.lines() {
            let n = super::table::width_of(line);
            assert!(n <= usize::from(w), "{n} > {w} columns: {line:?}\n{text}");
        }
    }

    pub fn view(width: u16) -> View {
        View {
            paint: Paint::PLAIN,
            width: Some(width),
            clock: Clock {
                now: parse_time(NOW).unwrap(),
                zone: Zone::Tz(chrono_tz::UTC),
            },
        }
    }
}
