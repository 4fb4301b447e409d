//! What every verb gets: output settings, the socket, and a way to connect and print.

use crate::conn::{connect, Conn};
use crate::render::time::Clock;
use crate::render::View;
use crate::style::Paint;
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

pub struct Ctx {
    pub socket: PathBuf,
    pub json: bool,
    pub color_out: bool,
    pub color_err: bool,
    pub stdout_tty: bool,
    pub stdin_tty: bool,
}

impl Ctx {
    pub fn new(socket: PathBuf, json: bool, color: crate::style::ColorChoice) -> Self {
        Ctx {
            socket,
            json,
            color_out: color.for_stdout(),
            color_err: color.for_stderr(),
            stdout_tty: std::io::stdout().is_terminal(),
            stdin_tty: std::io::stdin().is_terminal(),
        }
    }

    /// The stdout view as of now: width only when stdout is a terminal (piped output is not
    /// wrapped, so it stays greppable).
    pub fn view(&self) -> View {
        let width = if self.stdout_tty {
            terminal_size::terminal_size()
                .map(|(w, _)| w.0)
                .filter(|w| *w >= 20)
        } else {
            None
        };
        View {
            paint: Paint::new(self.color_out),
            width,
            clock: Clock::system(),
        }
    }

    pub fn err_view(&self) -> View {
        View {
            paint: Paint::new(self.color_err),
            width: None,
            clock: Clock::system(),
        }
    }

    pub async fn connect(&self) -> anyhow::Result<Conn> {
        connect(&self.socket).await
    }

    pub fn json<T: Serialize>(&self, v: &T) -> anyhow::Result<()> {
        let mut s = serde_json::to_string_pretty(v)?;
        s.push('\n');
        out(&s)
    }
}

/// Writes to stdout; a closed pipe (`crewctl ls | head`) ends the program quietly. Always
/// through `safe::term` (what a model wrote must not move the cursor, on a terminal or on one
/// reached through `| cat` or `| less -R`). `--json` is escaped by JSON itself.
pub fn out(s: &str) -> anyhow::Result<()> {
    write("", s, true)
}

/// What the daemon holds, as it is when piped (`crewctl cat … > file`, `crewctl diff | git
/// apply`), escaped on a terminal.
pub fn out_raw(s: &str) -> anyhow::Result<()> {
    write("", s, false)
}

/// [`out`] of `s` after `control`, crewctl's own terminal control sequence (written as it is).
pub fn out_after(control: &str, s: &str) -> anyhow::Result<()> {
    write(control, s, true)
}

fn write(control: &str, s: &str, always_escaped: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    let s = if always_escaped || stdout.is_terminal() {
        crate::safe::term(s)
    } else {
        std::borrow::Cow::Borrowed(s)
    };
    match stdout
        .write_all(control.as_bytes())
        .and_then(|_| stdout.write_all(s.as_bytes()))
        .and_then(|_| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(e.into()),
    }
}

pub fn outln(s: &str) -> anyhow::Result<()> {
    if s.ends_with('\n') {
        out(s)
    } else {
        out(&format!("{s}\n"))
    }
}

/// `dir` made absolute against the current directory; the current directory when absent.
pub fn abs_dir(dir: Option<&Path>) -> anyhow::Result<String> {
    let cwd = std::env::current_dir()?;
    let p = match dir {
        Some(d) if d.is_absolute() => d.to_path_buf(),
        Some(d) => cwd.join(d),
        None => cwd,
    };
    // Normalise `.` and `..` without touching the file system: the daemon checks existence.
    let p = std::path::absolute(&p).unwrap_or(p);
    let mut clean = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                clean.pop();
            }
            std::path::Component::CurDir => {}
            other => clean.push(other),
        }
    }
    Ok(clean.to_string_lossy().into_owned())
}
