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
use std::process::Stdio;

/// Starts a worker's process. The child must lead its own process group (its pid is the
/// group's id: stopping the worker signals the group), with stdout and stderr piped and stdin
/// as the program says.
pub trait Launcher: Send + Sync {
    fn launch(&self, program: Program) -> std::io::Result<tokio::process::Child>;
}

/// The worker as a plain child process of this one.
pub struct Local;

impl Launcher for Local {
    fn launch(&self, p: Program) -> std::io::Result<tokio::process::Child> {
        let stdin = match p.stdin {
            Stdin::Null => Stdio::null(),
            Stdin::Pipe => Stdio::piped(),
            Stdin::File(f) => Stdio::from(f),
        };
        tokio::process::Command::new(&p.program)
            .args(&p.args)
            .current_dir(&p.cwd)
            .env_clear()
            .envs(p.env)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false)
            .spawn()
    }
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
    let child = match fault::hit("spawn").and_then(|()| launcher.launch(program)) {
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
    let group = GroupGuard(pid);
    let pid_start = process::start_time(pid).unwrap_or(0);
    Ok(Spawned {
        child,
        group,
        pid,
        pid_start,
    })
}
