//! The pure core of crew.
//!
//! Everything here is deterministic: no I/O, no clocks, no randomness, no tokio. Time and random
//! bytes are passed in by the caller. The daemon (`crewd`) owns all effects; this crate owns the
//! rules. That split is what makes the state machine replayable from the journal and testable
//! with plain tables.

pub mod checks;
pub mod compose;
pub mod dag;
pub mod fanout;
pub mod fixplan;
pub mod ids;
pub mod job_shape;
pub mod patch;
pub mod plan;
pub mod prompt;
pub mod redact;
pub mod resource;
pub mod run;
pub mod sandbox;
pub mod schedule;
pub mod scope;
pub mod skills;
pub mod stream;
pub mod text;
pub mod usage;
pub mod verdict;
pub mod worker_env;
