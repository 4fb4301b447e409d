//! Line output: every line is written whole and flushed at once, so a reader sees events live
//! and lines from the rpc reader thread never interleave with the agent's.

use serde_json::Value;
use std::io::Write;

/// Exit status when stdout is gone (the reader closed the pipe).
const EXIT_STDOUT_CLOSED: i32 = 1;

pub fn raw(line: &str) {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    let mut out = std::io::stdout().lock();
    if out.write_all(&buf).and_then(|()| out.flush()).is_err() {
        std::process::exit(EXIT_STDOUT_CLOSED);
    }
}

pub fn json(v: &Value) {
    raw(&v.to_string());
}

/// Writes events, optionally interleaving garbage (`[fake:invalid-json]`).
#[derive(Default)]
pub struct Emitter {
    pub garbage: bool,
    count: usize,
}

const GARBAGE: &[&str] = &[
    "fake-agent: this line is not JSON",
    "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\"",
    "\u{1b}[33mwarning\u{1b}[0m: stray extension output",
    "]}",
    "",
];

impl Emitter {
    pub fn new(garbage: bool) -> Self {
        Emitter { garbage, count: 0 }
    }

    pub fn emit(&mut self, v: &Value) {
        json(v);
        if self.garbage {
            raw(GARBAGE
                .get(self.count % GARBAGE.len())
                .copied()
                .unwrap_or_default());
            self.count += 1;
        }
    }
}
