//! Scheduling math: when a job fires. Pure: every function takes the instant it computes from.
//!
//! # Why our own cron matcher instead of croner
//!
//! croner 3 (what tokio-cron-scheduler is built on) was read and rejected for three reasons:
//!
//! * **Grammar.** SPEC §8 names an exact grammar and everything else must be refused. croner
//!   also accepts `L`, `W`, `#`, `?` and a 7th (year) field, and resolves names by substring
//!   replacement over the whole pattern, so we would need a second parser in front of it anyway.
//! * **DST.** SPEC §8 says a repeated local time fires once and a skipped one fires once at the
//!   next valid instant. croner's `find_next_occurrence` splits patterns into "fixed-time" and
//!   "interval" jobs: interval-like patterns (`0 */2 * * *`, `*/15 * * * *`) fire at *both*
//!   occurrences of a repeated hour and *never* for a time inside a skipped hour, and only
//!   fixed-time patterns get the once/next-valid-instant treatment.
//! * **Day matching.** croner's OR mode looks at the parsed bitsets; Vixie cron decides OR vs AND
//!   by whether the field text starts with `*`. We want Vixie exactly (see below).
//!
//! A cron matcher over bitsets is small, so it lives here, fully under our tests
//! ([`cron::CronExpr`]). The rules it implements:
//!
//! * 5 fields `min hour dom mon dow`, or 6 with leading seconds; `@hourly @daily @midnight
//!   @weekly @monthly @yearly @annually`; `*`, values, `a-b`, lists, `*/n`, `a-b/n`; three-letter
//!   month and weekday names in any case; `7` is Sunday.
//! * Day-of-month and day-of-week: when both fields are restricted, a day matches if EITHER
//!   matches. As in Vixie cron (and cronie), a field counts as unrestricted when its text starts
//!   with `*`, so `*/2` in day-of-month combines with a weekday by AND.
//! * Local times are evaluated in the job's IANA zone at each fire ([`zone::resolve_local`]):
//!   a local time inside a spring-forward gap fires once at the first instant after the gap; a
//!   local time repeated by a fall-back fires once, at its first occurrence. This applies to
//!   every pattern alike, so an every-minute pattern pauses for the repeated hour (use
//!   `intervalMs` for a cadence in elapsed time). Fire instants are strictly increasing.

pub mod catch_up;
pub mod cron;
pub mod error;
pub mod fire;
pub mod spec;
pub mod validate;
pub mod zone;

#[cfg(test)]
mod preview_tests;

pub use catch_up::missed_fires;
pub use cron::CronExpr;
pub use error::ScheduleError;
pub use fire::{next_fire, preview, Schedule, PREVIEW_MAX};
pub use spec::{CatchUp, Overlap, ScheduleSpec};
pub use validate::validate_spec;
pub use zone::parse_timezone;
