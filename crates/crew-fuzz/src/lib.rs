//! Fuzz targets for everything crew parses from outside: resource files, whole project
//! directories (file kinds and sizes, links, FIFOs), run bundles, cron expressions, JSON-RPC
//! requests, agent output streams and the environment workers inherit.
//!
//! Each target is a plain `fn(&[u8])` that panics when an invariant breaks. libFuzzer drives them
//! through the `fuzz_*` binaries (`fuzz/run.sh`); `tests/regressions.rs` replays the committed
//! seeds and every input that once crashed, in plain `cargo test`.

mod bundle;
mod cron;
mod project;
mod resource;
mod rpc;
mod stream;
mod worker_env;

pub use bundle::bundle;
pub use cron::cron;
pub use project::project;
pub use resource::resource;
pub use rpc::{rpc_params, rpc_request};
pub use stream::{
    stream_claude, stream_claude_live, stream_codex, stream_codex_live, stream_command,
    stream_gemini, stream_gemini_live, stream_opencode, stream_opencode_live, stream_pi,
};
pub use worker_env::worker_env;

/// A fuzz target: panics when an invariant breaks.
pub type Target = fn(&[u8]);

/// Every target by the name of its directory under `fuzz/seeds/` and `fuzz/regressions/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("resource", resource),
    ("project", project),
    ("bundle", bundle),
    ("cron", cron),
    ("rpc_request", rpc_request),
    ("rpc_params", rpc_params),
    ("stream_pi", stream_pi),
    ("stream_claude", stream_claude),
    ("stream_codex", stream_codex),
    ("stream_gemini", stream_gemini),
    ("stream_opencode", stream_opencode),
    ("stream_command", stream_command),
    ("stream_claude_live", stream_claude_live),
    ("stream_codex_live", stream_codex_live),
    ("stream_gemini_live", stream_gemini_live),
    ("stream_opencode_live", stream_opencode_live),
    ("worker_env", worker_env),
];
