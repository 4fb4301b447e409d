//! The second phase: start the worker. A [`Launcher`] turns a [`Program`] into a running child
//! in its own process group; the local launcher starts it as it is, and a launcher that boxes
//! the worker (a namespace, a sandbox) can take its place here without the other phases
//! knowing. Whatever launched it, the group is killed when supervision ends (`GroupGuard`).

use crate::command::{Program, Stdin};
use crate::fault;
use crate::outcome::Failure;
use crate::process::{self, GroupGuard};
use crew_core::run::FailReason;
use crew_core::stream;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;

/// Starts a worker's process. The child must lead its own process group (its pid is the
/// group's id: stopping the worker signals the group), with stdout and stderr piped and stdin
/// as the program says.
/// A launcher that holds the worker under crew's init returns the lifeline too: held for the
/// attempt, cut to kill it (`GroupGuard`).
pub trait Launcher: Send + Sync {
    fn launch(&self, program: Program) -> std::io::Result<Launched>;
}

pub type Launched = (tokio::process::Child, Option<crew_box::spawn::Lifeline>);

/// The worker as a plain child process of this one.
pub struct Local;

impl Launcher for Local {
    fn launch(&self, p: Program) -> std::io::Result<Launched> {
        let cmd = command(OsStr::new(&p.program), &p.args);
        start(cmd, p, Stdio::piped()).map(|c| (c, None))
    }
}

/// Starts `program args` in place of `p`'s own, as a plain child, with `p`'s directory,
/// environment and stdin (a box's argv without crew's init).
pub fn plain(program: &OsStr, args: &[OsString], p: Program) -> std::io::Result<Launched> {
    start(command(program, args), p, Stdio::piped()).map(|c| (c, None))
}

/// Starts `program args` (a resolved path, already wrapped in a box where there is one) under
/// crew's init `init` in `mode`, with `p`'s directory, environment and stdin. The init
/// inherits a fresh lifeline by number (`Lifeline::handoff_fd`): no `pre_exec`, so the child
/// is started with `posix_spawn`, not a fork of this process.
pub fn under_init(
    init: &Path,
    mode: crew_box::Mode,
    program: &OsStr,
    args: &[OsString],
    p: Program,
) -> std::io::Result<Launched> {
    let mut lifeline = crew_box::spawn::Lifeline::new()?;
    let argv = crew_box::spawn::argv(init, mode, lifeline.handoff_fd(), None, program, args);
    let cmd = command(init.as_os_str(), argv.get(1..).unwrap_or_default());
    let child = start(cmd, p, Stdio::piped());
    // Whether or not it started: no later child may inherit the copy.
    lifeline.spawned();
    Ok((child?, Some(lifeline)))
}

/// Starts `program args` (a resolved path) in `spec`'s box: bubblewrap `bwrap` started here,
/// crew's init `init` as the box's PID 1, with `p`'s directory, environment and stdin. The
/// init inherits the lifeline and the program's stdout by number (`bwrap::argv_with_init`);
/// bubblewrap's own stdout is `/dev/null`, so the stream ends when the program's does.
pub fn in_box(
    bwrap: &Path,
    init: &Path,
    spec: &crew_box::bwrap::BoxSpec,
    program: &OsStr,
    args: &[OsString],
    p: Program,
) -> std::io::Result<Launched> {
    use std::os::fd::AsRawFd;
    let mut lifeline = crew_box::spawn::Lifeline::new()?;
    let stdout = crew_box::spawn::StdoutPipe::new()?;
    let handoff = lifeline
        .handoff_fd()
        .ok_or_else(|| std::io::Error::other("the lifeline was handed over already"))?;
    let argv = crew_box::bwrap::argv_with_init(
        bwrap,
        init,
        spec,
        handoff,
        stdout.handoff.as_raw_fd(),
        program,
        args,
    );
    let cmd = command(bwrap.as_os_str(), argv.get(1..).unwrap_or_default());
    let child = start(cmd, p, Stdio::null());
    // Whether or not it started: no later child may inherit the copies.
    lifeline.spawned();
    let crew_box::spawn::StdoutPipe { read, handoff } = stdout;
    drop(handoff);
    let mut child = child?;
    child.stdout = Some(tokio::process::ChildStdout::from_std(
        std::process::ChildStdout::from(read),
    )?);
    Ok((child, Some(lifeline)))
}

fn command<A: AsRef<OsStr>>(program: &OsStr, args: &[A]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    cmd
}

/// Every worker starts the same way: `p`'s directory, only its environment, its stdin,
/// stdout as given (piped, unless it reaches the program another way) and stderr piped,
/// leading a process group of its own (stopping the worker signals the group), not killed
/// when the handle is dropped (the `GroupGuard` decides).
fn start(
    mut cmd: tokio::process::Command,
    p: Program,
    stdout: Stdio,
) -> std::io::Result<tokio::process::Child> {
    let stdin = match p.stdin {
        Stdin::Null => Stdio::null(),
        Stdin::Pipe => Stdio::piped(),
        Stdin::File(f) => Stdio::from(f),
    };
    cmd.current_dir(&p.cwd)
        .env_clear()
        .envs(p.env)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
}

/// A started worker.
pub struct Spawned {
    pub child: tokio::process::Child,
    /// Kills the group when dropped.
    pub group: GroupGuard,
    pub pid: u32,
    /// With the pid, identifies the process (`process::start_time`).
    pub pid_start: u64,
}

pub fn spawn(launcher: &dyn Launcher, program: Program) -> Result<Spawned, Failure> {
    let name = program.program.clone();
    let (child, lifeline) = match fault::hit("spawn").and_then(|()| launcher.launch(program)) {
        Ok(c) => c,
        Err(e) => {
            // Too long for argv stays too long, and a missing program stays missing: no
            // attempt can do better.
            let retryable = e.kind() != std::io::ErrorKind::ArgumentListTooLong
                && stream::is_retryable_spawn_error(e.kind());
            return Err(Failure::new(
                format!("failed to start `{name}`: {e}"),
                retryable,
                FailReason::Spawn,
            ));
        }
    };
    let pid = child.id().unwrap_or(0);
    let group = GroupGuard::new(pid, lifeline);
    let pid_start = process::start_time(pid).unwrap_or(0);
    Ok(Spawned {
        child,
        group,
        pid,
        pid_start,
    })
}
