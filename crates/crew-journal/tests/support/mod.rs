//! Helpers of the integration tests: running one test of this test binary as a child process
//! and reading its stdout lines; reopening journals (`journal.rs`).

// Each test binary that includes this module uses a different part of it.
#![allow(dead_code)]

pub mod journal;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// How long a child may stay silent before the test gives up on it.
pub const SILENCE_LIMIT: Duration = Duration::from_secs(60);

pub struct ChildLines {
    child: Child,
    lines: Receiver<String>,
}

/// The command that runs exactly `test` of the current test binary, with its output uncaptured.
pub fn self_test_command(test: &str) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut command = Command::new(exe);
    command.args(["--exact", test, "--nocapture", "--test-threads=1"]);
    command
}

impl ChildLines {
    pub fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The next stdout line; `None` at end of output. Panics if the child stays silent too long.
    pub fn next_line(&mut self) -> Option<String> {
        match self.lines.recv_timeout(SILENCE_LIMIT) {
            Ok(line) => Some(line),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                panic!("child silent for {SILENCE_LIMIT:?}");
            }
        }
    }

    /// SIGKILLs the child (no chance to flush or clean up).
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
    }

    /// Every remaining line, then the exit status.
    pub fn finish(mut self) -> (Vec<String>, std::process::ExitStatus) {
        let mut rest = Vec::new();
        while let Some(line) = self.next_line() {
            rest.push(line);
        }
        (rest, self.child.wait().unwrap())
    }
}
