//! Issue 16 item 8: a real agent CLI asks the user, and the answer continues the agent's own
//! session. The stub model's first answer is a call of the ask tool; the task goes `waiting`
//! with the question; `team.respond` answers; the stub's next request must carry the earlier
//! conversation (the task prompt and the tool call) and the answer; the task completes with
//! the stub's final text.
//!
//! pi comes from `tests/pi/setup.sh` (`<repo>/.cache/pi` or `$CREW_PI_DIR`). Without it the
//! tests are left out by `make test` and counted as skipped.

mod common;
#[path = "support/model_stub.rs"]
mod model_stub;
#[path = "support/real_cli.rs"]
mod real_cli;
#[path = "support/real_pi.rs"]
mod real_pi;

use common::*;
use model_stub::{Exchange, Reply, Stub, Wire};
use real_cli::*;
use real_pi::{pi_bin, pi_daemon};
use serde_json::json;

const QUESTION: &str = "Which database should the service use?";
const ANSWER: &str = "Postgres, version 16";
const FINAL: &str = "Done: the service uses Postgres 16.";
/// In the task's text, so the resumed request can be told to carry the first prompt.
const TASK_MARK: &str = "Pick the storage for the service (mark-7f3a).";

/// First request: call the ask tool. Later ones: the final text.
fn ask_then_answer(tool: &'static str) -> impl Fn(&Exchange) -> Reply + Send + Sync {
    move |e| {
        if e.n == 1 {
            Reply::Tool {
                name: tool.into(),
                input: json!({"question": QUESTION}),
            }
        } else {
            Reply::Text(FINAL.into())
        }
    }
}

/// The answering request carries the first prompt, the tool call and the answer.
fn check_resumed(exchanges: &[Exchange]) {
    assert_eq!(exchanges.len(), 2, "requests: {exchanges:#?}");
    let (first, second) = (&exchanges[0], &exchanges[1]);
    assert!(first.texts().contains(TASK_MARK), "{:#}", first.body);
    let texts = second.texts();
    assert!(
        texts.contains(ANSWER),
        "the answer is missing: {:#}",
        second.body
    );
    assert!(
        texts.contains(TASK_MARK),
        "the resumed request lost the first prompt: {:#}",
        second.body
    );
    assert!(
        texts.contains(QUESTION),
        "the resumed request lost the tool call: {:#}",
        second.body
    );
    // The same conversation: the task prompt is there once, not rendered again with the answer.
    assert_eq!(
        texts.matches(TASK_MARK).count(),
        1,
        "a fresh prompt, not the session: {texts}"
    );
}

#[test]
fn pi_asks_and_the_answer_continues_its_session() {
    let Some(pi) = pi_bin() else {
        real_pi::not_installed("pi_asks_and_the_answer_continues_its_session");
    };
    let stub = Stub::start(Wire::Chat, ask_then_answer("ask_user"));
    let d = pi_daemon(&pi, &stub.base_url(), "stub-model", (0.0, 0.0));

    let (run, st) = ask_and_answer(
        &d,
        &stub,
        json!({"runtime": "pi", "model": "stub/stub-model"}),
        TASK_MARK,
        QUESTION,
        ANSWER,
    );
    let exchanges = stub.exchanges();
    assert!(stub.errors().is_empty(), "stub errors: {:?}", stub.errors());
    // The model was offered crew's ask tool.
    assert!(
        exchanges[0].body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["function"]["name"] == "ask_user"),
        "no ask_user tool offered: {:#}",
        exchanges[0].body
    );
    check_resumed(&exchanges);
    let t = Daemon::task(&st, "01_only");
    assert_eq!(t["attempts"], 2, "{st:#}");
    assert_eq!(result_text(&d, &run, t), FINAL);
}
