//! Exit statuses (SPEC §12) and how errors are reported.

use crate::conn::{Failed, NotASocket, NotRunning};
use crate::render::{diag, View};
use crate::resolve::{Ambiguous, NoSuchRun};
use crate::safe;
use crate::style::Tone;
use crew_api::client::CallError;
use crew_api::codes;
use crew_api::types::{RunStatus, TaskStatus, TaskView};

pub const SUCCESS: u8 = 0;
/// An error, or a run that failed.
pub const FAILED: u8 = 1;
/// A run blocked (plan approval) or with a task that needs attention.
pub const BLOCKED: u8 = 2;
pub const CANCELLED: u8 = 3;
/// No daemon answers on the socket.
pub const NOT_RUNNING: u8 = 4;
/// The run (or task, job, artifact) named does not exist.
pub const NOT_FOUND: u8 = 5;
/// The command line is wrong: unknown flag, bad value, ambiguous run id (sysexits' EX_USAGE).
pub const USAGE: u8 = 64;
/// `wait --timeout` expired with the run still active (as timeout(1) does).
pub const TIMED_OUT: u8 = 124;

/// The exit status of a stopped run. A completed run whose tasks still need a human (needs
/// attention, waiting for an answer) is reported as blocked, since someone has to act.
pub fn for_run(status: RunStatus, tasks: &[TaskView]) -> u8 {
    let needs_human = tasks
        .iter()
        .any(|t| matches!(t.status, TaskStatus::NeedsAttention | TaskStatus::Waiting));
    match status {
        RunStatus::Completed if needs_human => BLOCKED,
        RunStatus::Completed => SUCCESS,
        RunStatus::Failed => FAILED,
        RunStatus::Blocked => BLOCKED,
        RunStatus::Cancelled => CANCELLED,
        // Still active: only `wait` gets here, when its timeout expired.
        RunStatus::Queued | RunStatus::Running if needs_human => BLOCKED,
        RunStatus::Queued | RunStatus::Running => TIMED_OUT,
    }
}

/// Something named on the command line that the run does not have (a task): exit status
/// `NOT_FOUND`, as for a run.
#[derive(Debug)]
pub struct NotFound(pub String);

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFound {}

/// The exit status for an error.
pub fn code_of(err: &anyhow::Error) -> u8 {
    if err.downcast_ref::<NotRunning>().is_some() {
        return NOT_RUNNING;
    }
    if err.downcast_ref::<NoSuchRun>().is_some() || err.downcast_ref::<NotFound>().is_some() {
        return NOT_FOUND;
    }
    if err.downcast_ref::<Ambiguous>().is_some() || err.downcast_ref::<NotASocket>().is_some() {
        return USAGE;
    }
    if let Some(Failed(CallError::Api(e))) = err.downcast_ref::<Failed>() {
        return match e.code {
            codes::NOT_FOUND => NOT_FOUND,
            codes::INVALID_PARAMS => USAGE,
            _ => FAILED,
        };
    }
    FAILED
}

/// Prints an error to stderr in the user's terms (as one JSON object under `--json`) and
/// returns the exit status for it.
pub fn report(err: &anyhow::Error, view: &View, json: bool) -> u8 {
    let code = code_of(err);
    let api = match err.downcast_ref::<Failed>() {
        Some(Failed(CallError::Api(e))) => Some(e),
        _ => None,
    };
    if json {
        let message = match api {
            Some(e) => e.message.clone(),
            None => format!("{err:#}"),
        };
        let obj = serde_json::json!({
            "error": {
                "message": message,
                "code": api.map(|e| e.code),
                "data": api.and_then(|e| e.data.clone()),
                "exit": code,
            }
        });
        // serde_json escapes C0 controls but not C1 ones, DEL or bidi controls: the object
        // passes the gate too, piped as on a terminal, as stdout does (its escapes stay valid
        // JSON).
        eprintln!("{}", safe::term(&obj.to_string()));
        return code;
    }
    if let Some(nr) = err.downcast_ref::<NotRunning>() {
        eprintln!("{}", view.p(Tone::Bad, nr));
        return code;
    }
    if let Some(ns) = err.downcast_ref::<NotASocket>() {
        eprintln!("{} {ns}", view.p(Tone::Bad, "error:"));
        return code;
    }
    if let Some(e) = api {
        // The daemon's message can quote what a model or worker wrote.
        eprintln!(
            "{} {} {}",
            view.p(Tone::Bad, "error:"),
            safe::term(&e.message),
            view.p(Tone::Dim, format!("(code {})", e.code))
        );
        if e.code == codes::VALIDATION_FAILED {
            for d in diag::from_error_data(e.data.as_ref()) {
                eprintln!("  {}", safe::term(&diag::line(view, &d)));
            }
        }
        return code;
    }
    eprintln!(
        "{} {}",
        view.p(Tone::Bad, "error:"),
        safe::term(&format!("{err:#}"))
    );
    code
}

/// A command-line error from clap: its own message (help and version go to stdout and exit 0),
/// else exit status `USAGE`. Under `--json` the error is one JSON object too.
pub fn usage(e: &clap::Error, json: bool) -> u8 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return SUCCESS;
    }
    if json {
        let obj = serde_json::json!({
            "error": {"message": e.to_string().trim_end(), "code": null, "data": null, "exit": USAGE}
        });
        eprintln!("{obj}");
    } else {
        let _ = e.print();
    }
    USAGE
}

#[cfg(test)]
mod tests {
    use super::*;
    use crew_api::types::{TaskProgressView, Usage};

    fn task(status: TaskStatus) -> TaskView {
        TaskView {
            candidates: None,
            id: "t".into(),
            step_id: "t".into(),
            role: "r".into(),
            agent: "r".into(),
            depends_on: vec![],
            status,
            attempts: 1,
            started_at: None,
            finished_at: None,
            duration_ms: None,
            usage: Usage::default(),
            model: None,
            error: None,
            question: None,
            reused_from: None,
            progress: TaskProgressView::default(),
            artifacts: vec![],
            scope: vec![],
            verify_commands: vec![],
            verdict: None,
            fixes: None,
        }
    }

    #[test]
    fn run_exit_codes() {
        let done = vec![task(TaskStatus::Completed)];
        let attention = vec![
            task(TaskStatus::Completed),
            task(TaskStatus::NeedsAttention),
        ];
        let waiting = vec![task(TaskStatus::Waiting)];
        let cases = [
            (RunStatus::Completed, &done, 0),
            (RunStatus::Completed, &attention, 2),
            (RunStatus::Failed, &done, 1),
            (RunStatus::Failed, &attention, 1),
            (RunStatus::Blocked, &done, 2),
            (RunStatus::Cancelled, &done, 3),
            (RunStatus::Running, &done, 124),
            (RunStatus::Queued, &done, 124),
            (RunStatus::Running, &waiting, 2),
        ];
        for (status, tasks, want) in cases {
            assert_eq!(
                for_run(status, tasks),
                want,
                "{status:?} with {:?}",
                tasks.iter().map(|t| t.status).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn not_running_message() {
        let e = NotRunning {
            socket: "/tmp/nope/crewd.sock".into(),
            stale: false,
        };
        let text = e.to_string();
        assert!(
            text.starts_with("crewd is not running (no socket at /tmp/nope/crewd.sock)."),
            "{text}"
        );
        // A socket of one's own: the advice starts crewd on it, and systemd (the default
        // socket) is not offered.
        assert!(
            text.ends_with("\n  crewd --socket /tmp/nope/crewd.sock &")
                && !text.contains("systemctl"),
            "{text}"
        );
        let default = NotRunning {
            socket: crew_api::paths::default_socket(),
            stale: false,
        }
        .to_string();
        assert!(
            default.contains("\n  crewd &\n") && default.contains("systemctl --user start crewd"),
            "{default}"
        );
        let stale = NotRunning {
            socket: "/s".into(),
            stale: true,
        }
        .to_string();
        assert!(
            stale.starts_with("crewd is not running (nothing listens on /s)."),
            "{stale}"
        );
        let odd = NotRunning {
            socket: "/tmp/my dir/it's.sock".into(),
            stale: false,
        }
        .to_string();
        assert!(
            odd.ends_with("crewd --socket '/tmp/my dir/it'\\''s.sock' &"),
            "{odd}"
        );
    }
}
