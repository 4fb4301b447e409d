//! Containment for the processes crew starts on this machine (agent CLIs, verify commands,
//! pre-step scripts): each attempt runs under a small init, `crew-box`, that crewd starts in
//! place of the program.
//!
//! - **PID namespace** (`Mode::PidNs`): the init enters a new user + PID namespace
//!   (unprivileged) and forks the namespace's PID 1, which starts the program and reaps what
//!   it leaves. When PID 1 ends (the program ended, the attempt was stopped, crewd died), the
//!   kernel kills everything in the namespace, `setsid`'d daemons included.
//! - **Reaper** (`Mode::Reaper`), where namespaces are unavailable: the init is a child
//!   subreaper; orphans of the attempt become its children and it kills its whole subtree when
//!   the program ends. Only a `SIGKILL` of the init itself loses them (crewd's recovery then
//!   finds them by the attempt's identity in their environment).
//!
//! Either way the init watches a *lifeline*: a pipe whose only write end crewd holds for the
//! attempt. When crewd dies (even by `kill -9`) the kernel closes it, the init reads EOF and
//! kills the attempt; crewd's signals to the attempt (SIGTERM to stop it) travel on it too. Why not `PR_SET_PDEATHSIG` on the init: it fires when the parent
//! *thread* ends, and tokio's threads come and go (a `block_in_place` worker retires into the
//! blocking pool and exits when idle), which would kill live attempts. Inside the init, whose
//! one thread lives as long as it does, PID 1 does use `PR_SET_PDEATHSIG`.
//!
//! In a box (`bwrap`, issue 34) crewd starts bubblewrap itself and the init is the box's PID 1
//! (`--reaper` there: bubblewrap made the PID namespace), holding the lifeline and the
//! program's stdout, both inherited through bubblewrap by number. `spawn` is what crewd needs
//! to start a program under the init.

pub mod bwrap;
pub mod init;
pub mod spawn;
pub mod tree;

/// How the init holds an attempt's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    PidNs,
    Reaper,
}

impl Mode {
    pub fn flag(self) -> &'static str {
        match self {
            Mode::PidNs => "--pidns",
            Mode::Reaper => "--reaper",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Mode::PidNs => "pid-namespace",
            Mode::Reaper => "process-group+subreaper",
        }
    }
}
