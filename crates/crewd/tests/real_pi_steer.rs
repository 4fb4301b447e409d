//! Issue 16 item 7: `team.steer` reaches a task running on the real `pi` CLI, whose builtin
//! runtime runs `pi --mode rpc`. The stub model's first answer is a tool call, held until the
//! test has steered; pi's next model request must carry the steer message.
//!
//! pi is installed by `tests/pi/setup.sh` into `<repo>/.cache/pi` (or `$CREW_PI_DIR`). Without
//! that install the test passes after printing why it did nothing.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_pi.rs"]
mod real_pi;

use common::*;
use model_stub::{Reply, Stub, Wire};
use real_pi::*;
use serde_json::json;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

const MODEL: &str = "stub-model";
const STEER: &str = "STEER-7: also list the file's headings";

#[test]
fn steer_reaches_the_real_pi_between_turns() {
    let Some(pi) = pi_bin() else {
        not_installed("steer_reaches_the_real_pi_between_turns");
    };
    // The first request is answered only once the test says so: then the task is surely
    // running, mid-turn, when it is steered.
    let (seen_tx, seen_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (seen_tx, go_rx) = (Mutex::new(seen_tx), Mutex::new(go_rx));
    let stub = Stub::start(Wire::Chat, move |e| {
        if e.n == 1 {
            let _ = seen_tx.lock().unwrap().send(());
            // Bounded, so a test that fails elsewhere still ends.
            let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(90));
            Reply::Tool {
                name: "read".into(),
                input: json!({"path": "README.md"}),
            }
        } else {
            Reply::Text(format!("FINAL-{}: the README greets, as steered.", e.n))
        }
    });
    // No `rpc` key: the pi adapter's default is rpc mode.
    let d = pi_daemon(&pi, &stub.base_url(), MODEL, (1.0, 2.0));
    std::fs::write(d.work.join("README.md"), "# Hello\n\nA greeting.\n").unwrap();
    one_step_team(
        &d,
        "look",
        "Read README.md and say what it holds.",
        "explorer",
    );
    let run_id = d.ok(
        "team.run",
        json!({
            "goal": "Describe the README", "cwd": path_str(&d.work), "team": "look",
            "runtime": "pi", "model": format!("stub/{MODEL}"),
        }),
    )["runId"]
        .as_str()
        .unwrap()
        .to_string();

    seen_rx
        .recv_timeout(Duration::from_secs(90))
        .unwrap_or_else(|_| {
            panic!(
                "pi made no model request: {:#}\n{}",
                d.status(&run_id),
                d.log_text()
            )
        });
    let r = d.ok(
        "team.steer",
        json!({"runId": run_id, "taskId": "01_only", "message": STEER}),
    );
    assert_eq!(r["delivered"], "live", "{r}");
    assert_eq!(r.get("note"), None, "{r}");
    // On pi's stdin before the model's answer is let go: pi takes the steer after the tool
    // call that answer holds, before its next request.
    d.wait_log("steer written to the worker");
    go_tx.send(()).unwrap();

    let status = d.wait(&run_id);
    let st = d.status(&run_id);
    assert_eq!(
        status,
        "completed",
        "{st:#}\nstub errors: {:?}\n{}",
        stub.errors(),
        d.log_text()
    );
    assert!(stub.errors().is_empty(), "{:?}", stub.errors());
    let ex = stub.exchanges();
    assert_eq!(ex.len(), 2, "requests: {ex:#?}");
    assert!(!ex[0].texts().contains(STEER), "{}", ex[0].texts());
    assert!(
        ex[1].texts().contains(STEER) && ex[1].has_tool_result(),
        "the request after the tool call lacks the steer: {:#}",
        ex[1].body
    );

    let t = Daemon::task(&st, "01_only");
    assert_eq!(
        (&t["status"], &t["attempts"]),
        (&json!("completed"), &json!(1))
    );
    let result = d.ok(
        "team.artifact",
        json!({"runId": run_id, "name": "results/01_only.txt"}),
    )["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(result.contains("FINAL-2: the README greets"), "{result}");
    // pi's usage: `input` excludes the cached part, which the stub counts in prompt_tokens.
    let u = &t["usage"];
    let sum = |f: fn(&model_stub::Sent) -> u64| ex.iter().map(|e| f(&e.sent)).sum::<u64>();
    assert_eq!(
        (
            u["input"].as_u64(),
            u["output"].as_u64(),
            u["cacheRead"].as_u64(),
            u["turns"].as_u64()
        ),
        (
            Some(sum(|s| s.input)),
            Some(sum(|s| s.output)),
            Some(sum(|s| s.cache_read)),
            Some(2)
        ),
        "{u}"
    );

    // The worker ended by itself once crew closed its stdin after `agent_end`.
    d.live_worker_ended_by_itself(&run_id, "01_only");
}
