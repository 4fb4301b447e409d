//! A stand-in daemon for crewctl's tests: jsonrpsee over a Unix socket in a temporary
//! directory, answering every method from a script and recording what it was asked.

use jsonrpsee::server::{
    serve_with_graceful_shutdown, stop_channel, RpcModule, Server, ServerHandle,
};
use jsonrpsee::types::ErrorObjectOwned;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

#[derive(Clone, Default)]
pub struct Script {
    /// Result per method name.
    pub results: HashMap<&'static str, Value>,
    /// Results given one per call, before falling back to `results`.
    pub sequence: HashMap<&'static str, std::collections::VecDeque<Value>>,
    /// Error `(code, message, data)` per method name, instead of a result.
    pub errors: HashMap<&'static str, (i32, String, Option<Value>)>,
    /// Artifact contents by name.
    pub artifacts: HashMap<String, String>,
    /// Events the subscription replays (those after `afterSeq`).
    pub events: Vec<Value>,
    /// On the first subscription only: send this many events, then a `dropped` notice.
    pub drop_first_after: Option<usize>,
    /// Events sent live to the subscribers when a method is called (after its answer).
    pub after_call: HashMap<&'static str, Vec<Value>>,
}

#[derive(Default)]
pub struct State {
    pub script: Script,
    pub calls: Vec<(String, Value)>,
    pub subscriptions: Vec<Value>,
}

pub struct Mock {
    _dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub state: Arc<Mutex<State>>,
    pub subscribed: Arc<Notify>,
    // Read by `emit`, which only tty.rs uses.
    #[allow(dead_code)]
    live: tokio::sync::broadcast::Sender<Value>,
    handle: ServerHandle,
}

impl Mock {
    pub async fn start(script: Script) -> Mock {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("crewd.sock");
        let state = Arc::new(Mutex::new(State {
            script,
            ..State::default()
        }));
        let subscribed = Arc::new(Notify::new());
        let (live, _) = tokio::sync::broadcast::channel(1024);
        let module = module(state.clone(), subscribed.clone(), live.clone());
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let (stop, handle) = stop_channel();
        let builder = Server::builder().to_service_builder();
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    r = listener.accept() => match r { Ok((s, _)) => s, Err(_) => break },
                    _ = stop.clone().shutdown() => break,
                };
                let svc = builder.clone().build(module.clone(), stop.clone());
                tokio::spawn(serve_with_graceful_shutdown(
                    stream,
                    svc,
                    stop.clone().shutdown(),
                ));
            }
        });
        Mock {
            _dir: dir,
            socket,
            state,
            subscribed,
            live,
            handle,
        }
    }

    /// Sends `event` live to every open subscription.
    #[allow(dead_code)]
    pub fn emit(&self, event: Value) {
        let _ = self.live.send(event);
    }

    pub fn calls(&self, method: &str) -> Vec<Value> {
        let st = self.state.lock().unwrap();
        st.calls
            .iter()
            .filter(|(m, _)| m == method)
            .map(|(_, p)| p.clone())
            .collect()
    }

    pub fn subscriptions(&self) -> Vec<Value> {
        self.state.lock().unwrap().subscriptions.clone()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.handle.stop();
    }
}

fn module(
    state: Arc<Mutex<State>>,
    subscribed: Arc<Notify>,
    live: tokio::sync::broadcast::Sender<Value>,
) -> RpcModule<Arc<Mutex<State>>> {
    let mut m = RpcModule::new(state);
    let live_calls = live.clone();
    for name in crew_api::methods::all_names() {
        if name == "team.subscribe" || name == "team.unsubscribe" {
            continue;
        }
        let live = live_calls.clone();
        m.register_method(
            name,
            move |params, st, _| -> Result<Value, ErrorObjectOwned> {
                let p: Value = params.parse().unwrap_or(Value::Null);
                let mut st = st.lock().unwrap();
                st.calls.push((name.to_string(), p.clone()));
                for e in st.script.after_call.get(name).cloned().unwrap_or_default() {
                    let _ = live.send(e);
                }
                if let Some((code, msg, data)) = st.script.errors.get(name) {
                    return Err(ErrorObjectOwned::owned(*code, msg.clone(), data.clone()));
                }
                if name == "team.artifact" {
                    let n = p.get("name").and_then(Value::as_str).unwrap_or_default();
                    return match st.script.artifacts.get(n) {
                        Some(c) => Ok(json!({"content": c, "bytes": c.len(), "truncated": false})),
                        None => Err(ErrorObjectOwned::owned(
                            1001,
                            format!("artifact not found: {n}"),
                            None::<()>,
                        )),
                    };
                }
                if let Some(next) = st.script.sequence.get_mut(name).and_then(|q| q.pop_front()) {
                    return Ok(next);
                }
                st.script.results.get(name).cloned().ok_or_else(|| {
                    ErrorObjectOwned::owned(
                        -32601,
                        format!("mock has no answer for {name}"),
                        None::<()>,
                    )
                })
            },
        )
        .unwrap();
    }
    m.register_subscription(
        "team.subscribe",
        "team.event",
        "team.unsubscribe",
        move |params, pending, st, _| {
            let subscribed = subscribed.clone();
            let mut rx = live.subscribe();
            async move {
                let p: Value = params.parse().unwrap_or(Value::Null);
                let after = p.get("afterSeq").and_then(Value::as_u64).unwrap_or(0);
                let (events, drop_after) = {
                    let mut st = st.lock().unwrap();
                    let first = st.subscriptions.is_empty();
                    st.subscriptions.push(p);
                    let events: Vec<Value> = st
                        .script
                        .events
                        .iter()
                        .filter(|e| e.get("seq").and_then(Value::as_u64).unwrap_or(0) > after)
                        .cloned()
                        .collect();
                    (
                        events,
                        if first {
                            st.script.drop_first_after
                        } else {
                            None
                        },
                    )
                };
                let sink = pending.accept().await?;
                subscribed.notify_one();
                for (i, e) in events.iter().enumerate() {
                    if drop_after == Some(i) {
                        let last = e.get("seq").and_then(Value::as_u64).unwrap_or(1) - 1;
                        let notice =
                            json!({"notice": "dropped", "lastSeq": last, "message": "too slow"});
                        sink.send(serde_json::value::to_raw_value(&notice)?).await?;
                        return Ok(());
                    }
                    sink.send(serde_json::value::to_raw_value(e)?).await?;
                }
                loop {
                    tokio::select! {
                        e = rx.recv() => match e {
                            Ok(e) if e.get("seq").and_then(Value::as_u64).unwrap_or(0) > after => {
                                sink.send(serde_json::value::to_raw_value(&e)?).await?;
                            }
                            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                            Err(_) => break,
                        },
                        _ = sink.closed() => break,
                    }
                }
                Ok(())
            }
        },
    )
    .unwrap();
    m
}

pub fn event(seq: u64, kind: &str, task: Option<&str>, data: Value) -> Value {
    let mut e = json!({
        "seq": seq, "runSeq": seq, "time": format!("2026-03-10T11:55:{:02}Z", seq % 60),
        "type": kind, "runId": "r-1", "data": data,
    });
    if let Some(t) = task {
        e["taskId"] = json!(t);
    }
    e
}

pub fn usage(input: u64, cost: f64) -> Value {
    json!({"input": input, "output": 100, "cacheRead": 0, "cacheWrite": 0, "cost": cost, "turns": 1})
}

pub fn task(id: &str, status: &str) -> Value {
    json!({
        "id": id, "stepId": id, "role": "explorer", "agent": "explorer", "dependsOn": [],
        "status": status, "attempts": 1, "startedAt": "2026-03-10T11:55:01Z",
        "finishedAt": "2026-03-10T11:55:05Z", "durationMs": 4000, "usage": usage(1000, 0.001),
        "model": null, "error": null, "question": null, "reusedFrom": null,
        "progress": {"currentTool": null, "turns": 1, "tokens": 1100}, "artifacts": [],
    })
}

pub fn status(run_status: &str, tasks: Vec<Value>) -> Value {
    json!({
        "run": {
            "id": "r-1", "status": run_status, "goal": "fix the flaky test", "cwd": "/w",
            "team": "default", "workflow": "default", "runtime": "fake", "model": null,
            "concurrency": 4, "failurePolicy": "fail-fast", "budget": null,
            "approval": if run_status == "blocked" { "pending" } else { "not_required" },
            "reuseResults": "off", "scheduleId": null, "createdAt": "2026-03-10T11:55:00Z",
            "startedAt": "2026-03-10T11:55:00Z", "finishedAt": null,
            "updatedAt": "2026-03-10T11:55:09Z", "durationMs": 9000,
            "usage": usage(2000, 0.002), "reason": null,
        },
        "tasks": tasks,
    })
}

pub fn run_started() -> Value {
    json!({
        "runId": "r-1", "status": "queued", "notes": [],
        "tasks": [
            {"id": "01_explore", "stepId": "explore", "role": "explorer", "agent": "explorer", "dependsOn": [], "model": null, "writes": false},
            {"id": "02_fix", "stepId": "fix", "role": "executor", "agent": "executor", "dependsOn": ["01_explore"], "model": null, "writes": true},
        ],
    })
}
