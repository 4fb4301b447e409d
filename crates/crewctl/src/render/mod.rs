//! Pure rendering: wire types in, text out. Nothing here does I/O or reads the clock, so every
//! view is snapshot-tested with fixed data, a fixed "now", a fixed width and colours off.

pub mod cache;
pub mod diag;
pub mod events;
pub mod follow;
pub mod marks;
pub mod resources;
pub mod runs;
pub mod schedule;
pub mod table;
pub mod time;
pub mod transcript;
pub mod units;

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
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::time::{parse_time, Clock, Zone};
    use super::View;
    use crate::style::Paint;

    pub const NOW: &str = "2026-03-10T12:00:00Z";

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
