//! `team.export` / `team.import`: a finished run as one self-checking JSON document.
//!
//! Bundle, version 1:
//!
//! ```text
//! { format: "crew-run-bundle", version: 1, exportedAt,
//!   run: <team.status result>, events: [<every event of the run, SPEC §6 shape>],
//!   artifacts: [{name, kind, taskId, bytes, sha256, content}],
//!   checksum: sha256 of the canonical JSON of everything else }
//! ```
//!
//! Secrets are redacted and the exporting daemon's `$HOME` is written `~`, in the events and in
//! every artifact; `bytes`/`sha256` (and the artifact references inside the events) describe the
//! content as it is in the bundle, so a bundle is consistent with itself. Canonical JSON = object
//! keys sorted, no whitespace, floats as 15 significant digits (so a parser that is one ulp off
//! cannot break the checksum).
//!
//! Import rebuilds the run from its events, and only then changes anything:
//! - the events are replayed through the actor with their original `time` (`Core::emit_at`), so
//!   ids, statuses, timestamps, usage and artifact lists come out as they were exported;
//! - fields that are not the run's own map like this: `seq` is the exporting daemon's journal
//!   position and is given anew by this journal (`runSeq` is the run's own and is kept);
//!   `scheduleId` is kept as a historical reference (the schedule need not exist here and gains
//!   no run); a `cwd` of `~` or `~/…` is expanded with this daemon's `$HOME`;
//! - only a finished run (completed, failed, cancelled) is exported or imported: an unfinished
//!   one would have tasks "running" with no worker behind them;
//! - the artifact files are written (synced) before the events naming them are journaled;
//! - what crew later hands to git or to an agent's command line, or joins to a path, must be
//!   what crew makes: full commit ids, a worktree run's `subdir` inside its repository, no
//!   model, level or tool name starting with `-`, no pi session of an attempt yet to come.
//!
//! Export answers the bundle (up to ~31 MiB). Import takes it inline (`bundle`, bounded by
//! `max_request_bytes`, 1 MiB by default) or as a file the daemon reads (`path`, bounded by
//! [`IMPORT_FILE_MAX_BYTES`], above anything export makes): the client and the daemon are the
//! same user on the same machine (the socket's peer check), so reading the file the client
//! names reads nothing the client could not read itself, and every bundle export makes imports
//! under the same config. `crewctl import FILE` sends the path.
//!
//! An imported run is marked (`RunSpec::imported`): its system prompts, tools, runtime name
//! and cwd are someone else's. `team.resume` and `team.retry` of it fail with 1002 and show
//! what would run (error `data`) unless called with `confirmImported: true`.
//!
//! The module follows a bundle's way through the daemon, one file a step:
//! - `canonical`: canonical JSON and the checksum;
//! - `redact`: secrets redacted and `$HOME` written `~`, and `~` expanded again;
//! - `export`: a finished run's journal and files into a bundle;
//! - `validate`: a bundle checked in stages, refused with diagnostics naming its fields;
//! - `import`: a checked bundle's files placed and its events replayed;
//! - `confirm`: what resuming or retrying an imported run would execute, shown before it does.

mod canonical;
mod confirm;
mod export;
mod import;
mod redact;
#[cfg(test)]
mod tests;
mod validate;

pub use canonical::{canonical, checksum};
pub use confirm::confirm_imported;
pub use export::export;
pub use import::import;
pub use validate::{validate, Validated};

pub const FORMAT: &str = "crew-run-bundle";
pub const VERSION: u64 = 1;
/// Artifact bytes one export may carry; the bundle lives in memory a few times over.
const EXPORT_MAX_BYTES: u64 = 24 << 20;
/// The serialized bundle must fit in one answer (the server's response limit is 32 MiB).
const BUNDLE_MAX_BYTES: usize = 31 << 20;
/// A bundle file `team.import` reads (`path`): above [`BUNDLE_MAX_BYTES`], so anything export
/// makes fits.
pub const IMPORT_FILE_MAX_BYTES: u64 = 40 << 20;
