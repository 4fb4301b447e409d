//! The init (`crew-box`'s binary):
//! `crew-box (--pidns|--reaper) [--lifeline FD] [--stdout-fd FD] -- PROGRAM ARGS…`.
//!
//! The outer init (the process crewd started, or the box's PID 1 when bubblewrap stands
//! between) blocks the signals it handles, reads them from a signalfd and polls the lifeline
//! (fd `FD`), so nothing is lost between a fork and its loop. A byte on the lifeline is a
//! signal crewd sends the attempt (its number), handled as if the init had received it; EOF
//! means crewd is gone or ends the attempt. In `--pidns` mode it forks the namespace's PID 1, which starts
//! the program, forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT to every process of the namespace
//! (`kill(-1)` there reaches only the namespace), reaps orphans, and when the program ends
//! hands its wait status to the outer init over a pipe and exits — the kernel then kills the
//! rest of the namespace. In `--reaper` mode the outer init is a child subreaper and kills its
//! subtree itself. Either way it exits as the program did (a signal is re-raised), so crewd
//! sees the program's status, and it holds none of the program's stdio: stdout's end is the
//! program's (and its descendants') end.
//!
//! Exit 125: the init could not set up (bad arguments, no namespace); 127: the program could
//! not be started; 137: the lifeline broke (crewd is gone) and the attempt was killed.

use crate::{tree, Mode};
use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

pub const EXIT_SETUP: i32 = 125;
pub const EXIT_NOT_STARTED: i32 = 127;
/// How the init's stderr starts when the program could not be started; the line ends with
/// the OS error, `(os error N)`.
pub const NOT_STARTED: &str = "crew-box: cannot run ";
pub const EXIT_LIFELINE: i32 = 137;

/// Signals the init handles (blocked, read from its signalfd).
const FORWARDED: [i32; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

#[derive(Debug, PartialEq)]
pub struct Args {
    pub mode: Mode,
    /// The fd the lifeline's read end was inherited at.
    pub lifeline: Option<i32>,
    /// Set up, start nothing, exit 0: can this machine give an attempt its namespace?
    pub probe: bool,
    /// The fd the program's stdout was inherited at, when it is not the init's own stdout
    /// (inside a box: `spawn::StdoutPipe`).
    pub stdout_fd: Option<i32>,
    pub argv: Vec<OsString>,
}

pub fn parse(args: &[OsString]) -> Result<Args, String> {
    let (mut mode, mut lifeline, mut probe, mut argv) = (None, None, false, None);
    let mut stdout_fd = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--pidns") => mode = Some(Mode::PidNs),
            Some("--reaper") => mode = Some(Mode::Reaper),
            Some(flag @ ("--lifeline" | "--stdout-fd")) => {
                let fd = it.next().and_then(|n| n.to_str()?.parse::<i32>().ok());
                let fd = Some(
                    fd.filter(|&n| n > 2)
                        .ok_or(format!("{flag} needs an fd above 2"))?,
                );
                match flag {
                    "--lifeline" => lifeline = fd,
                    _ => stdout_fd = fd,
                }
            }
            Some("--probe") => probe = true,
            Some("--") => {
                argv = Some(it.cloned().collect::<Vec<_>>());
                break;
            }
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    let mode = mode.ok_or("--pidns or --reaper is required")?;
    if lifeline.is_some() && lifeline == stdout_fd {
        return Err("--lifeline and --stdout-fd need two different fds".into());
    }
    let argv = argv.unwrap_or_default();
    if argv.is_empty() != probe {
        return Err("give a program after `--`, or `--probe` alone".into());
    }
    Ok(Args {
        mode,
        lifeline,
        probe,
        stdout_fd,
        argv,
    })
}

/// The OS error of a program the init could not start, from the init's stderr.
pub fn not_started(stderr: &str) -> Option<i32> {
    let line = stderr.lines().find(|l| l.starts_with(NOT_STARTED))?;
    let n = line.rsplit_once("(os error ")?.1.strip_suffix(')')?;
    n.parse().ok()
}

/// The binary's `main`.
pub fn main() -> ! {
    // What std's start-up would have done (the binary has no Rust `main`): a write to a pipe
    // whose reader is gone is an error here, not a death. The program gets the default back.
    // SAFETY: signal with a constant disposition.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let code = match parse(&args) {
        Ok(a) => run(&a),
        Err(e) => {
            eprintln!("crew-box: {e}");
            EXIT_SETUP
        }
    };
    std::process::exit(code)
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn handled_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset initializes the set it is given.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
    }
    set
}

fn run(a: &Args) -> i32 {
    if let Some(fd) = a.stdout_fd {
        // SAFETY: dup2/close on fd numbers; a bad fd only fails.
        if unsafe { libc::dup2(fd, 1) } < 0 {
            eprintln!("crew-box: --stdout-fd {fd}: not an open fd");
            return EXIT_SETUP;
        }
        unsafe { libc::close(fd) };
    }
    if let Some(fd) = a.lifeline {
        // SAFETY: fcntl on an fd number; a bad fd only fails.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            eprintln!("crew-box: --lifeline {fd}: not an open fd");
            return EXIT_SETUP;
        }
    }
    // Nothing inherited stays open but stdio and the lifeline (close-on-exec: the program has
    // no business reading it). Closed, not just kept from the program: crewd hands fds over by
    // inheritance (`spawn::Lifeline`, `spawn::StdoutPipe`), so a copy of another attempt's
    // may have come along, and an init holding another attempt's stdout would keep that
    // stream from ending for as long as this attempt runs.
    if let Err(e) = close_from(3, a.lifeline) {
        eprintln!("crew-box: cannot close inherited fds: {e}");
        return EXIT_SETUP;
    }
    let mask = handled_signals();
    // SAFETY: plain syscalls on valid pointers; this process has one thread.
    let sfd = unsafe {
        libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
        libc::signalfd(-1, &mask, libc::SFD_CLOEXEC)
    };
    if sfd < 0 {
        eprintln!("crew-box: signalfd: {}", last_error());
        return EXIT_SETUP;
    }
    match a.mode {
        Mode::Reaper => {
            // SAFETY: prctl with integer arguments.
            if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
                eprintln!("crew-box: cannot become a subreaper: {}", last_error());
                return EXIT_SETUP;
            }
            if a.probe {
                return 0;
            }
            let child = match start(&a.argv) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("{NOT_STARTED}{:?}: {e}", a.argv[0]);
                    return EXIT_NOT_STARTED;
                }
            };
            quiet_stdio();
            supervise(sfd, a.lifeline, child, None, a.mode)
        }
        Mode::PidNs => {
            if let Err(e) = enter_pid_namespace() {
                eprintln!("crew-box: cannot create a PID namespace: {e}");
                return EXIT_SETUP;
            }
            let mut fds = [0i32; 2];
            // SAFETY: pipe2 fills the array it is given.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                eprintln!("crew-box: pipe: {}", last_error());
                return EXIT_SETUP;
            }
            let [status_r, status_w] = fds;
            // SAFETY: this process has one thread; the child only makes syscalls and execs.
            match unsafe { libc::fork() } {
                -1 => {
                    eprintln!("crew-box: fork: {}", last_error());
                    EXIT_SETUP
                }
                0 => {
                    // SAFETY: closing our copy of the read end.
                    unsafe { libc::close(status_r) };
                    pid1(sfd, &a.argv, status_w)
                }
                p1 => {
                    // SAFETY: closing our copy of the write end.
                    unsafe { libc::close(status_w) };
                    quiet_stdio();
                    supervise(sfd, a.lifeline, p1, Some(status_r), Mode::PidNs)
                }
            }
        }
    }
}

/// A new PID namespace for the next child: plain for a process that may (root), else inside a
/// new user namespace that maps only our own ids (no root inside, no `setgroups`).
fn enter_pid_namespace() -> io::Result<()> {
    // SAFETY: unshare and the id getters take no pointers.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } == 0 {
        return Ok(());
    }
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) } != 0 {
        return Err(last_error());
    }
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
}

/// Fork and exec the program with the signal mask cleared.
fn start(argv: &[OsString]) -> io::Result<i32> {
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in an argument"))?;
    let Some(program) = args.first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no program"));
    };
    let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // An exec failure is told over a CLOEXEC pipe: the child writes errno, a success closes it.
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(last_error());
    }
    let [r, w] = fds;
    // SAFETY: one thread; the child only makes async-signal-safe calls before exec.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            // The init ignores SIGPIPE (`main`); the program gets the default back
            // (as std's Command does), or `yes | head` prints "Broken pipe".
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            // crewd hands a resolved path: exec it as std's Command would (no shell fallback
            // for a file that is not a program); a bare name is looked up in PATH.
            if program.as_bytes().contains(&b'/') {
                libc::execv(program.as_ptr(), ptrs.as_ptr());
            } else {
                libc::execvp(program.as_ptr(), ptrs.as_ptr());
            }
            let errno = *libc::__errno_location();
            libc::write(w, (&errno as *const i32).cast(), 4);
            libc::_exit(EXIT_NOT_STARTED);
        }
    }
    // SAFETY: closing and reading our own fds.
    unsafe { libc::close(w) };
    if pid < 0 {
        unsafe { libc::close(r) };
        return Err(last_error());
    }
    let mut errno = 0i32;
    let n = loop {
        let n = unsafe { libc::read(r, (&mut errno as *mut i32).cast(), 4) };
        if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break n;
        }
    };
    unsafe { libc::close(r) };
    if n == 4 {
        let mut st = 0;
        unsafe { libc::waitpid(pid, &mut st, 0) };
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(pid)
}

/// stdin/stdout/stderr to /dev/null: the init must not keep the program's pipes open.
fn quiet_stdio() {
    // SAFETY: open/dup2/close on fds we own.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            libc::close(null);
        }
    }
}

/// The next signal from the signalfd.
fn next_signal(sfd: i32) -> Option<i32> {
    // SAFETY: the buffer is a zeroed signalfd_siginfo of the size read asks for.
    let mut si: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    loop {
        let n = unsafe { libc::read(sfd, (&mut si as *mut libc::signalfd_siginfo).cast(), size) };
        if n == size as isize {
            return i32::try_from(si.ssi_signo).ok();
        }
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

/// PID 1 of the namespace: start the program, pass signals to the whole namespace, reap, and
/// end with the program (the kernel then kills what is left).
fn pid1(sfd: i32, argv: &[OsString], status_w: i32) -> ! {
    // The outer init has one thread for its whole life, so this fires exactly when it dies.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    let report = |status: i32| -> ! {
        // SAFETY: writing 4 bytes from a local, then leaving without running destructors.
        unsafe {
            libc::write(status_w, (&status as *const i32).cast(), 4);
            libc::_exit(0)
        }
    };
    if argv.is_empty() {
        report(0);
    }
    let main = match start(argv) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{NOT_STARTED}{:?}: {e}", argv[0]);
            report(EXIT_NOT_STARTED << 8);
        }
    };
    quiet_stdio();
    loop {
        match next_signal(sfd) {
            Some(libc::SIGCHLD) => loop {
                let mut st = 0;
                // SAFETY: waitpid with a local status.
                let p = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
                if p <= 0 {
                    break;
                }
                if p == main {
                    report(st);
                }
            },
            // SAFETY: kill(-1) from PID 1 reaches every other process of the namespace only.
            Some(s) => unsafe {
                libc::kill(-1, s);
            },
            None => report(EXIT_SETUP << 8),
        }
    }
}

/// The outer init's loop: signals and the lifeline, until the child (PID 1, or the program in
/// reaper mode) ends.
fn supervise(
    sfd: i32,
    lifeline: Option<i32>,
    child: i32,
    status_r: Option<i32>,
    mode: Mode,
) -> i32 {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: lifeline.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll on a local array of two pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if last_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            kill_all(mode, child);
            let mut st = 0;
            // SAFETY: waitpid with a local status.
            unsafe { libc::waitpid(child, &mut st, 0) };
            return EXIT_SETUP;
        }
        if fds[1].revents != 0 {
            match read_lifeline(fds[1].fd) {
                Lifeline::Broken => {
                    kill_all(mode, child);
                    // Reaped here, or it would be an orphan zombie of whoever reaps orphans
                    // (in a container, maybe nobody).
                    let mut st = 0;
                    // SAFETY: waitpid with a local status.
                    unsafe { libc::waitpid(child, &mut st, 0) };
                    return EXIT_LIFELINE;
                }
                Lifeline::Signals(sigs) => {
                    for s in sigs {
                        forward(mode, child, s);
                    }
                }
            }
        }
        if fds[0].revents & libc::POLLIN == 0 {
            continue;
        }
        match next_signal(sfd) {
            Some(libc::SIGCHLD) => loop {
                let mut st = 0;
                // SAFETY: waitpid with a local status.
                let p = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
                if p <= 0 {
                    break;
                }
                if p == child {
                    let status = match status_r {
                        Some(r) => read_status(r).unwrap_or(st),
                        None => {
                            kill_all(mode, child);
                            st
                        }
                    };
                    return exit_like(status);
                }
            },
            Some(s) => forward(mode, child, s),
            None => {}
        }
    }
}

/// What the lifeline said.
#[derive(Debug, PartialEq)]
enum Lifeline {
    /// EOF (or an error): crewd's end is closed.
    Broken,
    /// The signals crewd sent, one byte each; anything not handled here is ignored.
    Signals(Vec<i32>),
}

fn read_lifeline(fd: i32) -> Lifeline {
    let mut b = [0u8; 64];
    // SAFETY: reading into a local buffer.
    let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) };
    match usize::try_from(n) {
        Ok(0) => Lifeline::Broken,
        Ok(n) => Lifeline::Signals(signals_in(b.get(..n).unwrap_or_default())),
        Err(_) if last_error().kind() == io::ErrorKind::Interrupted => Lifeline::Signals(vec![]),
        Err(_) => Lifeline::Broken,
    }
}

/// The signals a lifeline message names, in order (only those the init forwards).
fn signals_in(bytes: &[u8]) -> Vec<i32> {
    bytes
        .iter()
        .map(|&b| i32::from(b))
        .filter(|s| FORWARDED.contains(s))
        .collect()
}

/// Close every fd from `first` up but `keep`: `close_range` (Linux 5.9) around it, else each
/// fd `/proc/self/fd` lists.
fn close_from(first: i32, keep: Option<i32>) -> io::Result<()> {
    let close_range = |lo: i32, hi: libc::c_uint| {
        // SAFETY: close_range with integer arguments; it only closes fds.
        unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0 as libc::c_uint) == 0 }
    };
    let done = match keep.filter(|&k| k >= first) {
        None => close_range(first, libc::c_uint::MAX),
        Some(k) => {
            (k == first || close_range(first, (k - 1) as libc::c_uint))
                && close_range(k.saturating_add(1), libc::c_uint::MAX)
        }
    };
    if done {
        return Ok(());
    }
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in fds
        .into_iter()
        .filter(|&fd| fd >= first && Some(fd) != keep)
    {
        // SAFETY: close on an fd number; the directory's own fd is gone by now (EBADF).
        unsafe { libc::close(fd) };
    }
    Ok(())
}

fn read_status(r: i32) -> Option<i32> {
    let mut st = 0i32;
    // SAFETY: reading 4 bytes into a local.
    let n = unsafe { libc::read(r, (&mut st as *mut i32).cast(), 4) };
    (n == 4).then_some(st)
}

fn forward(mode: Mode, child: i32, sig: i32) {
    match mode {
        // SAFETY: kill with integer arguments.
        Mode::PidNs => unsafe {
            libc::kill(child, sig);
        },
        Mode::Reaper => {
            let me = std::process::id() as i32;
            for p in tree::descendants(&tree::process_table(), me) {
                // SAFETY: as above.
                unsafe { libc::kill(p, sig) };
            }
        }
    }
}

/// End everything the attempt started.
fn kill_all(mode: Mode, child: i32) {
    match mode {
        // PID 1 gone: the kernel kills the namespace.
        // SAFETY: kill with integer arguments.
        Mode::PidNs => unsafe {
            libc::kill(child, libc::SIGKILL);
        },
        Mode::Reaper => {
            let me = std::process::id() as i32;
            // A process may fork while we look: look again until nothing is left (bounded).
            for _ in 0..500 {
                // No child left, none to reap: then nothing of the attempt is left either (a
                // subreaper is an ancestor of all it started), and the scan of every process
                // on the machine below, most of an instant attempt's end, is not needed.
                if !reap_all() {
                    return;
                }
                let left = tree::descendants(&tree::process_table(), me);
                // Zombies of ours are reaped below; only live ones count.
                let live: Vec<i32> = left.into_iter().filter(|p| !is_zombie(*p)).collect();
                for &p in &live {
                    // SAFETY: as above.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
                reap_all();
                if live.is_empty() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rfind(')')
            .and_then(|i| s.get(i + 1..))
            .and_then(|r| r.split_whitespace().next())
            == Some("Z")
    })
}

/// Reap every child that has ended; whether a child is still running (`false`: none left).
fn reap_all() -> bool {
    loop {
        let mut st = 0;
        // SAFETY: waitpid with a local status.
        match unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) } {
            0 => return true,
            p if p > 0 => {}
            _ => return last_error().raw_os_error() != Some(libc::ECHILD),
        }
    }
}

/// Exit as the program did: its code, or its signal raised again.
fn exit_like(status: i32) -> i32 {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: restore the default action, unblock and raise the signal on ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
        return 128 + sig;
    }
    libc::WEXITSTATUS(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_failure_is_read_back() {
        let line = format!("{NOT_STARTED}\"/x\": No such file or directory (os error 2)");
        assert_eq!(not_started(&line), Some(2));
        assert_eq!(not_started("crew-box: cannot run \"/x\": odd"), None);
        assert_eq!(not_started("other (os error 2)"), None);
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn arguments() {
        let ok = |v: &[&str]| parse(&os(v)).unwrap();
        let a = ok(&["--pidns", "--lifeline", "9", "--", "sh", "-c", "x"]);
        assert_eq!(
            (a.mode, a.lifeline, a.probe, a.argv),
            (Mode::PidNs, Some(9), false, os(&["sh", "-c", "x"]))
        );
        let a = ok(&["--reaper", "--", "--pidns"]);
        assert_eq!((a.mode, a.argv), (Mode::Reaper, os(&["--pidns"])));
        let a = ok(&["--reaper", "--stdout-fd", "5", "--lifeline", "4", "--", "x"]);
        assert_eq!((a.stdout_fd, a.lifeline), (Some(5), Some(4)));
        assert!(ok(&["--pidns", "--probe"]).probe);
        for bad in [
            &["--", "sh"][..],
            &["--pidns"],
            &["--pidns", "--probe", "--", "sh"],
            &["--pidns", "--what", "--", "sh"],
            &["--pidns", "--lifeline", "--", "sh"],
            &["--pidns", "--lifeline", "2", "--", "sh"],
            &["--pidns", "--lifeline", "x", "--", "sh"],
            &["--reaper", "--stdout-fd", "1", "--", "sh"],
            &["--reaper", "--stdout-fd", "--", "sh"],
            &[
                "--reaper",
                "--lifeline",
                "5",
                "--stdout-fd",
                "5",
                "--",
                "sh",
            ],
            &["--boxed", "--", "sh"],
        ] {
            assert!(parse(&os(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_lifeline_message_names_the_signals_to_pass_on() {
        let (term, int) = (libc::SIGTERM as u8, libc::SIGINT as u8);
        let table: &[(&[u8], Vec<i32>)] = &[
            (&[term], vec![libc::SIGTERM]),
            (&[int, term], vec![libc::SIGINT, libc::SIGTERM]),
            // Not forwarded: SIGKILL (the lifeline's end is the kill), SIGCHLD, junk.
            (&[libc::SIGKILL as u8, libc::SIGCHLD as u8, 0, 255], vec![]),
        ];
        for (bytes, want) in table {
            assert_eq!(&signals_in(bytes), want, "{bytes:?}");
        }
    }
}
