//! Issue 14, item 12: JSON-RPC 2.0 to the letter, over HTTP and WebSocket alike.
//!
//! The first table is every example of the specification's section 7 ("Examples"), with the
//! specification's envelope as it is and its example methods replaced by crewd's (`subtract`,
//! `sum`, `get_data`, `update`, `notify_hello` are crewd methods here; `foobar` and `foo.get`
//! stay unknown). crewd's params are one object (SPEC §10), so the examples with positional
//! params get -32602 where the specification shows a result: the envelope around them is what
//! is checked. The second table is what the issue found beyond the examples.

mod common;
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

/// What one answer must be: its id and either a result or an error code.
#[derive(Clone, Debug)]
enum Outcome {
    Result,
    Code(i64),
}

#[derive(Clone, Debug)]
enum Expect {
    /// No answer at all (notifications).
    Nothing,
    One(Value, Outcome),
    /// A batch answer: these, in any order.
    Many(Vec<(Value, Outcome)>),
}

use Expect::*;
use Outcome::*;

fn section_7() -> Vec<(&'static str, String, Expect)> {
    vec![
        (
            "positional parameters",
            r#"{"jsonrpc": "2.0", "method": "daemon.ping", "params": [42, 23], "id": 1}"#.into(),
            One(json!(1), Code(-32602)),
        ),
        (
            "positional parameters, swapped",
            r#"{"jsonrpc": "2.0", "method": "daemon.ping", "params": [23, 42], "id": 2}"#.into(),
            One(json!(2), Code(-32602)),
        ),
        (
            "named parameters",
            r#"{"jsonrpc": "2.0", "method": "schedule.preview", "params": {"cron": "0 9 * * *", "count": 2}, "id": 3}"#.into(),
            One(json!(3), Result),
        ),
        (
            "named parameters, reordered",
            r#"{"jsonrpc": "2.0", "method": "schedule.preview", "params": {"count": 2, "cron": "0 9 * * *"}, "id": 4}"#.into(),
            One(json!(4), Result),
        ),
        (
            "a notification",
            r#"{"jsonrpc": "2.0", "method": "daemon.ping", "params": [1,2,3,4,5]}"#.into(),
            Nothing,
        ),
        (
            "a notification of an unknown method",
            r#"{"jsonrpc": "2.0", "method": "foobar"}"#.into(),
            Nothing,
        ),
        (
            "non-existent method",
            r#"{"jsonrpc": "2.0", "method": "foobar", "id": "1"}"#.into(),
            One(json!("1"), Code(-32601)),
        ),
        (
            "invalid JSON",
            r#"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#.into(),
            One(Value::Null, Code(-32700)),
        ),
        (
            "invalid Request object",
            r#"{"jsonrpc": "2.0", "method": 1, "params": "bar"}"#.into(),
            One(Value::Null, Code(-32600)),
        ),
        (
            "batch, invalid JSON",
            r#"[
  {"jsonrpc": "2.0", "method": "daemon.ping", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]"#
            .into(),
            One(Value::Null, Code(-32700)),
        ),
        ("an empty Array", "[]".into(), One(Value::Null, Code(-32600))),
        (
            "an invalid Batch (but not empty)",
            "[1]".into(),
            Many(vec![(Value::Null, Code(-32600))]),
        ),
        (
            "invalid Batch",
            "[1,2,3]".into(),
            Many(vec![
                (Value::Null, Code(-32600)),
                (Value::Null, Code(-32600)),
                (Value::Null, Code(-32600)),
            ]),
        ),
        (
            "rpc call Batch",
            r#"[
        {"jsonrpc": "2.0", "method": "daemon.ping", "params": {}, "id": "1"},
        {"jsonrpc": "2.0", "method": "daemon.ping", "params": [7]},
        {"jsonrpc": "2.0", "method": "daemon.status", "params": {}, "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "daemon.ping", "id": "9"}
    ]"#
            .into(),
            Many(vec![
                (json!("1"), Result),
                (json!("2"), Result),
                (Value::Null, Code(-32600)),
                (json!("5"), Code(-32601)),
                (json!("9"), Result),
            ]),
        ),
        (
            "rpc call Batch (all notifications)",
            r#"[
        {"jsonrpc": "2.0", "method": "daemon.ping", "params": [1,2,4]},
        {"jsonrpc": "2.0", "method": "daemon.ping", "params": [7]}
    ]"#
            .into(),
            Nothing,
        ),
    ]
}

fn beyond() -> Vec<(&'static str, String, Expect)> {
    let over_batch: Vec<Value> = (0..65)
        .map(|i| json!({"jsonrpc": "2.0", "method": "daemon.ping", "id": i}))
        .collect();
    vec![
        (
            "a negative id",
            r#"{"jsonrpc":"2.0","method":"daemon.ping","id":-1}"#.into(),
            One(json!(-1), Result),
        ),
        (
            "a fractional id",
            r#"{"jsonrpc":"2.0","method":"daemon.ping","id":1.5}"#.into(),
            One(json!(1.5), Result),
        ),
        (
            "an id past u64",
            r#"{"jsonrpc":"2.0","method":"daemon.ping","id":18446744073709551616}"#.into(),
            One(json!(18446744073709551616.0), Result),
        ),
        (
            "a null id",
            r#"{"jsonrpc":"2.0","method":"daemon.ping","id":null}"#.into(),
            One(Value::Null, Result),
        ),
        (
            "an object id",
            r#"{"jsonrpc":"2.0","method":"daemon.ping","id":{"a":1}}"#.into(),
            One(Value::Null, Code(-32600)),
        ),
        (
            "an array id",
            r#"{"jsonrpc":"2.0","method":"daemon.ping","id":[1]}"#.into(),
            One(Value::Null, Code(-32600)),
        ),
        (
            "a bool id",
            r#"{"jsonrpc":"2.0","method":"daemon.ping","id":true}"#.into(),
            One(Value::Null, Code(-32600)),
        ),
        (
            "the id twice",
            r#"{"jsonrpc":"2.0","method":"daemon.ping","id":1,"id":2}"#.into(),
            One(Value::Null, Code(-32600)),
        ),
        (
            "an invalid request with a readable id",
            r#"{"jsonrpc":"2.0","method":1,"id":8}"#.into(),
            One(json!(8), Code(-32600)),
        ),
        (
            "jsonrpc 1.0",
            r#"{"jsonrpc":"1.0","method":"daemon.ping","id":8}"#.into(),
            One(json!(8), Code(-32600)),
        ),
        (
            "string params",
            r#"{"jsonrpc":"2.0","method":"daemon.ping","params":"x","id":8}"#.into(),
            One(json!(8), Code(-32600)),
        ),
        (
            "not an object",
            "42".into(),
            One(Value::Null, Code(-32600)),
        ),
        (
            "invalid requests in a batch",
            r#"[{"jsonrpc":"2.0","method":1,"params":"bar"},{"jsonrpc":"2.0","method":"daemon.ping","id":-1},{"jsonrpc":"2.0","method":"daemon.ping","id":[]}]"#.into(),
            Many(vec![
                (Value::Null, Code(-32600)),
                (json!(-1), Result),
                (Value::Null, Code(-32600)),
            ]),
        ),
        (
            "a batch over max_batch",
            Value::Array(over_batch).to_string(),
            One(Value::Null, Code(1005)),
        ),
    ]
}

fn check(name: &str, transport: &str, expect: &Expect, answer: Option<&str>) {
    let what = format!("{name} over {transport}");
    let one = |v: &Value, id: &Value, outcome: &Outcome| {
        assert_eq!(v["jsonrpc"], "2.0", "{what}: {v}");
        assert_eq!(&v["id"], id, "{what}: {v}");
        match outcome {
            Result => assert!(
                v.get("result").is_some() && v.get("error").is_none(),
                "{what}: {v}"
            ),
            Code(c) => {
                assert!(v.get("result").is_none(), "{what}: {v}");
                assert_eq!(v["error"]["code"], *c, "{what}: {v}");
            }
        }
    };
    match (expect, answer) {
        (Nothing, None) => {}
        (Nothing, Some(a)) => panic!("{what}: answered {a}"),
        (_, None) => panic!("{what}: no answer"),
        (One(id, outcome), Some(a)) => {
            let v: Value = serde_json::from_str(a).unwrap_or_else(|e| panic!("{what}: {e}: {a}"));
            assert!(v.is_object(), "{what}: {a}");
            one(&v, id, outcome);
        }
        (Many(want), Some(a)) => {
            let v: Value = serde_json::from_str(a).unwrap_or_else(|e| panic!("{what}: {e}: {a}"));
            let mut got = v
                .as_array()
                .unwrap_or_else(|| panic!("{what}: {a}"))
                .clone();
            assert_eq!(got.len(), want.len(), "{what}: {a}");
            for (id, outcome) in want {
                let matches = |g: &Value| {
                    &g["id"] == id
                        && match outcome {
                            Result => g.get("result").is_some(),
                            Code(c) => g["error"]["code"] == *c,
                        }
                };
                let i = got
                    .iter()
                    .position(matches)
                    .unwrap_or_else(|| panic!("{what}: no answer {id} {outcome:?} in {a}"));
                one(&got.remove(i), id, outcome);
            }
        }
    }
}

fn table() -> Vec<(&'static str, String, Expect)> {
    let mut t = section_7();
    t.extend(beyond());
    t
}

#[test]
fn every_case_over_http() {
    let d = Daemon::start();
    for (name, body, expect) in table() {
        let (status, text) = d.http_raw(&body).unwrap();
        if matches!(expect, Nothing) {
            // Nothing to answer: 204, no body (section 4.1, 6).
            assert_eq!((status, text.as_str()), (204, ""), "{name} over HTTP");
            check(name, "HTTP", &expect, None);
        } else {
            assert_eq!(status, 200, "{name} over HTTP: {text}");
            check(name, "HTTP", &expect, Some(&text));
        }
    }
    d.ok("daemon.ping", json!({}));
}

#[test]
fn every_case_over_websocket() {
    let d = Daemon::start();
    let mut ws = crew_testkit::WsRaw::connect(&d.socket, Duration::from_secs(60)).unwrap();
    let sync = br#"{"jsonrpc":"2.0","id":"sync","method":"daemon.ping"}"#;
    for (name, body, expect) in table() {
        ws.send_text(body.as_bytes()).unwrap();
        // After each case a ping: the next frame after the case's own answer (or, for a
        // notification, the very next frame) must be the ping's, so a stray answer shows up.
        ws.send_text(sync).unwrap();
        let first = ws
            .read_text()
            .unwrap_or_else(|| panic!("{name}: connection closed"));
        let is_sync = |t: &str| {
            serde_json::from_str::<Value>(t)
                .is_ok_and(|v| v["id"] == "sync" && v.get("result").is_some())
        };
        if matches!(expect, Nothing) {
            assert!(is_sync(&first), "{name} over WebSocket: answered {first}");
            check(name, "WebSocket", &expect, None);
            continue;
        }
        // The two answers may come in either order.
        let (answer, other) = if is_sync(&first) {
            (
                ws.read_text().unwrap_or_else(|| panic!("{name}: closed")),
                first,
            )
        } else {
            let second = ws.read_text().unwrap_or_else(|| panic!("{name}: closed"));
            (first, second)
        };
        assert!(
            is_sync(&other),
            "{name} over WebSocket: a stray frame {other}"
        );
        check(name, "WebSocket", &expect, Some(&answer));
        ws.send_text(sync).unwrap();
        let next = ws.read_text().unwrap();
        assert!(
            is_sync(&next),
            "{name} over WebSocket: a stray frame {next}"
        );
    }
}

#[test]
fn a_subscription_in_an_http_batch_says_it_needs_a_websocket() {
    let d = Daemon::start();
    let (status, text) = d
        .http_raw(r#"[{"jsonrpc":"2.0","method":"team.subscribe","params":{},"id":1},{"jsonrpc":"2.0","method":"daemon.ping","id":2}]"#)
        .unwrap();
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&text).unwrap();
    let sub = v.as_array().unwrap().iter().find(|a| a["id"] == 1).unwrap();
    assert_eq!(sub["error"]["code"], -32600, "{text}");
    assert!(
        sub["error"]["message"]
            .as_str()
            .unwrap()
            .contains("WebSocket"),
        "{text}"
    );
}

#[test]
fn echoed_paths_and_messages_are_capped() {
    let d = Daemon::start();
    let depth = 5000;
    let bundle = format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"team.import","params":{{"bundle":{bundle}}}}}"#
    );
    let (_, text) = d.http_raw(&body).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v.get("error").is_some(), "{text}");
    assert!(text.len() < 4000, "the answer echoes {} bytes", text.len());
    // A long bogus value is not echoed whole either.
    let long = "x".repeat(100_000);
    let e = d.err("team.list", json!({"status": long}));
    assert_eq!(e["code"], -32602);
    assert!(e.to_string().len() < 4000, "{}", e.to_string().len());
}

#[test]
fn limits_answer_with_the_documented_code() {
    let d = Daemon::start_with(Opts {
        config: "max_subscriptions_per_connection = 1\nmax_request_bytes = 4096\n".into(),
        env: vec![],
    });
    // Too many subscriptions on one WebSocket.
    let mut ws = crew_testkit::WsRaw::connect(&d.socket, Duration::from_secs(60)).unwrap();
    let sub = br#"{"jsonrpc":"2.0","id":1,"method":"team.subscribe","params":{"afterSeq":0}}"#;
    ws.send_text(sub).unwrap();
    let first: Value = serde_json::from_str(&ws.read_text().unwrap()).unwrap();
    assert!(first.get("result").is_some(), "{first}");
    let sub2 = br#"{"jsonrpc":"2.0","id":2,"method":"team.subscribe","params":{"afterSeq":0}}"#;
    ws.send_text(sub2).unwrap();
    loop {
        let v: Value = serde_json::from_str(&ws.read_text().unwrap()).unwrap();
        if v["id"] == 2 {
            assert_eq!(v["error"]["code"], 1005, "{v}");
            assert_eq!(
                v["error"]["data"]["limit"],
                "max_subscriptions_per_connection"
            );
            break;
        }
    }
    // A request over max_request_bytes: HTTP 413 and WebSocket alike say 1005.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{{"x":"{}"}}}}"#,
        "a".repeat(8192)
    );
    let (status, text) = d.http_raw(&big).unwrap();
    assert_eq!(status, 413);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["code"], 1005, "{text}");
    let mut ws = crew_testkit::WsRaw::connect(&d.socket, Duration::from_secs(60)).unwrap();
    ws.send_text(big.as_bytes()).unwrap();
    let v: Value = serde_json::from_str(&ws.read_text().unwrap()).unwrap();
    assert_eq!(v["error"]["code"], 1005, "{v}");
    // Every code crewd answered with here is in the one table.
    for code in [-32700, -32600, -32601, -32602, 1005] {
        assert_ne!(crew_api::error::meaning(code), "error", "{code}");
    }
}
