//! What the tests on the real `pi` CLI share (real_pi_steer.rs, real_respond.rs,
//! real_pi_worktree.rs): finding pi, a daemon whose `pi` runtime runs it, and pi's custom
//! provider pointing at the stub model.
//!
//! pi is installed by `tests/pi/setup.sh` into `<repo>/.cache/pi` (or `$CREW_PI_DIR`).
#![allow(dead_code)]

use super::common::*;
use serde_json::json;
use std::path::PathBuf;

/// `<repo>/.cache/pi/node_modules/.bin/pi` (or under `$CREW_PI_DIR`), if installed.
pub fn pi_bin() -> Option<PathBuf> {
    let dir = std::env::var_os("CREW_PI_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/pi"));
    let bin = dir.join("node_modules/.bin/pi");
    bin.exists().then(|| bin.canonicalize().unwrap_or(bin))
}

/// pi is not installed: a failure, never a pass (see `real_cli::not_installed`).
pub fn not_installed(test: &str) -> ! {
    panic!(
        "{test}: pi is not installed (run tests/pi/setup.sh, or set CREW_PI_DIR); \
         `make test` leaves this test out, counted as skipped, while pi is missing"
    )
}

/// A daemon whose `pi` runtime is the installed pi (its default mode, no retries), with pi's
/// custom provider `stub` at `base_url` serving `model` at `price` (USD per million input and
/// output tokens) in `$HOME/.pi/agent/models.json` (the harness's HOME, which workers see).
pub fn pi_daemon(pi: &std::path::Path, base_url: &str, model: &str, price: (f64, f64)) -> Daemon {
    let config = format!(
        "max_attempts = 1\nno_output_timeout_ms = 60000\ntask_timeout_ms = 120000\n\
         [runtimes.pi]\nadapter = \"pi\"\ncommand = [{pi:?}, \"--offline\"]\n",
        pi = pi.display().to_string(),
    );
    let d = Daemon::start_with(Opts {
        config,
        env: vec![],
    });
    pi_models(&d, base_url, model, price);
    d
}

/// pi's custom provider `stub` at `base_url` serving `model` at `price`, in
/// `$HOME/.pi/agent/models.json` of the daemon's HOME (which its workers see).
pub fn pi_models(d: &Daemon, base_url: &str, model: &str, price: (f64, f64)) {
    let models = json!({"providers": {"stub": {
        "baseUrl": base_url,
        "api": "openai-completions",
        "apiKey": "stub-key-not-secret",
        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
        "models": [{"id": model, "name": "Stub model", "contextWindow": 128000, "maxTokens": 4096,
                    "cost": {"input": price.0, "output": price.1, "cacheRead": 0, "cacheWrite": 0}}],
    }}});
    let dir = d.home.join(".pi/agent");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("models.json"), models.to_string()).unwrap();
}
