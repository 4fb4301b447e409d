//! `--mode rpc`: JSON commands on stdin, one per line; responses and events on stdout.
//!
//! A reader thread answers each command at once and hands prompts, steers and aborts to the
//! agent through a channel, so steering lands between turns of a running prompt. Like pi, the
//! process does not exit after `agent_end`, and exits (0) when its stdin closes (pi 0.73 does so
//! at once; this one finishes a running prompt first).

use crate::out;
use crate::script::{self, Command, Control, End, Mode};
use serde_json::{json, Map, Value};
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;

pub fn serve() -> ! {
    let (tx, rx) = mpsc::channel();
    let busy = Arc::new(AtomicBool::new(false));
    let reader_busy = Arc::clone(&busy);
    std::thread::spawn(move || read_commands(&tx, &reader_busy));
    let mut ctl = Control::new(Some(rx), Some(Arc::clone(&busy)));
    loop {
        let cmd = match ctl.queued.pop_front() {
            Some(prompt) => Command::Prompt(prompt),
            None => match ctl.recv() {
                Some(cmd) => cmd,
                // The reader thread ended: stdin closed (crew does so after `agent_end`).
                None => std::process::exit(0),
            },
        };
        match cmd {
            Command::Prompt(prompt) => {
                match script::run(&prompt, Mode::Rpc, &mut ctl) {
                    End::Done => {}
                    End::Exit(code) => std::process::exit(code),
                    End::Hang => crate::hang(),
                }
                busy.store(false, Ordering::SeqCst);
            }
            Command::Steer(message) => ctl.steers.push(message),
            Command::Abort => {}
        }
    }
}

fn read_commands(tx: &Sender<Command>, busy: &AtomicBool) {
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        handle(line, tx, busy);
    }
}

fn respond(id: Option<&Value>, command: &str, result: Result<(), String>) {
    let mut r = Map::new();
    if let Some(id) = id {
        r.insert("id".into(), id.clone());
    }
    r.insert("type".into(), json!("response"));
    r.insert("command".into(), json!(command));
    r.insert("success".into(), json!(result.is_ok()));
    if let Err(e) = result {
        r.insert("error".into(), json!(e));
    }
    out::json(&Value::Object(r));
}

fn handle(line: &str, tx: &Sender<Command>, busy: &AtomicBool) {
    let cmd: Map<String, Value> = match serde_json::from_str(line) {
        Ok(Value::Object(cmd)) => cmd,
        Ok(_) => {
            return respond(
                None,
                "parse",
                Err("Failed to parse command: not an object".into()),
            )
        }
        Err(e) => return respond(None, "parse", Err(format!("Failed to parse command: {e}"))),
    };
    let id = cmd.get("id");
    let kind = cmd.get("type").and_then(Value::as_str).unwrap_or_default();
    let message = cmd
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let send = |c: Command| tx.send(c).map_err(|_| "agent is gone".to_owned());
    let result = match (kind, message) {
        ("prompt", Some(m)) => {
            if !busy.swap(true, Ordering::SeqCst) {
                send(Command::Prompt(m))
            } else if cmd
                .get("streamingBehavior")
                .and_then(Value::as_str)
                .is_some()
            {
                send(Command::Steer(m))
            } else {
                Err("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.".into())
            }
        }
        ("steer", Some(m)) => send(Command::Steer(m)),
        ("prompt" | "steer", None) => Err("missing message".into()),
        ("abort", _) => send(Command::Abort),
        _ => Err(format!("unsupported command (fake): {kind}")),
    };
    respond(id, kind, result);
}
