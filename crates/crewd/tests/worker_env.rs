//! A daemon started with environment variables that are not UTF-8 (an `OLDPWD` in Latin-1, as
//! a shell in a Latin-1 locale leaves it) still starts every worker, and passes allowed
//! variables on byte for byte. Its own test binary: it sets the variables in this process, for
//! crewd to inherit, and nothing else may run beside it meanwhile.

mod common;

use common::*;
use serde_json::json;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

#[test]
fn a_non_utf8_environment_does_not_stop_workers() {
    // Only this test runs in this binary, so no other thread reads the environment now.
    std::env::set_var("OLDPWD", OsString::from_vec(b"/home/j\xe9r\xf4me".to_vec()));
    std::env::set_var("LC_CREWTEST", OsString::from_vec(b"caf\xe9".to_vec()));
    let d = Daemon::start_with(Opts {
        config: "max_attempts = 1\n".into(),
        env: vec![],
    });
    one_step_team(
        &d,
        "env",
        "Show it. [fake:echo-env=LC_CREWTEST]",
        "explorer",
    );
    let run = d.run("echo the locale", json!({"team": "env"}));
    // Before the fix the worker's environment panicked and the task stayed `running`.
    let r = d.ok("team.wait", json!({"runId": run, "timeoutMs": 60000}));
    assert_eq!(r["finished"], true, "{}", d.status(&run));
    assert_eq!(r["status"], "completed", "{}", d.status(&run));
    let result = d.ok(
        "team.artifact",
        json!({"runId": run, "name": "results/01_only.txt"}),
    )["content"]
        .as_str()
        .unwrap()
        .to_string();
    // The worker got the Latin-1 byte as it was (the fake agent prints it lossily).
    assert!(result.contains("LC_CREWTEST=caf\u{FFFD}"), "{result}");
}
