//! crewd's side: find out what this machine allows, and start a program under the init.

use crate::Mode;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

/// crewd's end of an attempt's lifeline: while it is open, the attempt may live. Dropped with
/// the attempt's supervision, or closed by the kernel when crewd dies. It also carries the
/// signals crewd sends the attempt (`signal`: one byte, the signal's number), so they reach
/// the attempt's processes wherever they are, in a box whose processes crewd cannot name
/// included.
///
/// The init gets the read end by inheritance, at the number `--lifeline FD` names: a copy
/// without `CLOEXEC` (`handoff`) that lives only until the init is spawned. Handing it over
/// this way, instead of moving it to a fixed fd between fork and exec (`pre_exec`), lets std
/// start the init with `posix_spawn` (a vfork, no copy of crewd's page tables): with a
/// `pre_exec` every attempt's launch was a full `fork`, about half of crewd's CPU per
/// instant task. Another process crewd starts in that short window inherits the copy too;
/// that is harmless (only the write end's holders keep an attempt alive, and nothing is ever
/// written), and every init closes what it inherited beyond its own fds, so the copy reaches
/// no program.
#[derive(Debug)]
pub struct Lifeline {
    /// Shared with [`Signals`] handles (weakly: they never keep the attempt alive).
    write: Option<Arc<OwnedFd>>,
    read: OwnedFd,
    handoff: Option<OwnedFd>,
}

impl Lifeline {
    pub fn new() -> io::Result<Lifeline> {
        let (read, write) = pipe()?;
        // Never blocks crewd: a full pipe (an init that stopped reading) drops the signal.
        // SAFETY: fcntl on an fd we own.
        if unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let handoff = Some(inheritable(&read)?);
        Ok(Lifeline {
            write: Some(Arc::new(write)),
            read,
            handoff,
        })
    }

    /// Send `sig` to the attempt: the init passes it to every process it holds. Whether it
    /// was sent (not once the lifeline is cut).
    pub fn signal(&self, sig: i32) -> bool {
        self.write.as_deref().is_some_and(|w| send(w, sig))
    }

    /// A handle that sends signals on this lifeline while it is not cut, for whoever signals
    /// the attempt by its pid and holds no `Lifeline` (crewd's shutdown).
    pub fn signals(&self) -> Signals {
        Signals(self.write.as_ref().map(Arc::downgrade).unwrap_or_default())
    }

    /// End the attempt now: the init reads EOF, kills everything it holds (SIGKILL), reaps
    /// it and exits. How crewd kills a contained attempt: a SIGKILL of the init itself would
    /// orphan its children (PID 1 of the namespace, the reaper's adoptees) to whatever reaps
    /// orphans here, and in a container that may be nobody.
    pub fn cut(&mut self) {
        self.write = None;
    }

    /// The number the init finds the read end at (for [`argv`]); `None` once spawned.
    pub fn handoff_fd(&self) -> Option<RawFd> {
        self.handoff.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The init has been spawned (or could not be): close the inheritable copy, so no later
    /// child of crewd's inherits it.
    pub fn spawned(&mut self) {
        self.handoff = None;
    }

    /// crewd's own read end (kept for the attempt's life; nothing reads it).
    pub fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }
}

/// See [`Lifeline::signals`].
#[derive(Debug, Clone)]
pub struct Signals(Weak<OwnedFd>);

impl Signals {
    /// As [`Lifeline::signal`]; `false` once the lifeline is cut.
    pub fn send(&self, sig: i32) -> bool {
        self.0.upgrade().is_some_and(|w| send(&w, sig))
    }
}

/// One signal on a lifeline's write end: one byte, its number.
fn send(write: &OwnedFd, sig: i32) -> bool {
    let Ok(b) = u8::try_from(sig) else {
        return false;
    };
    // SAFETY: writing one byte from a local to an fd we own.
    unsafe { libc::write(write.as_raw_fd(), (&b as *const u8).cast(), 1) == 1 }
}

/// A pipe, both ends close-on-exec: (read, write). No child of crewd's may hold an end past
/// its exec unless it is handed over on purpose (`inheritable`).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned here only.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A copy of `fd` a child inherits (not close-on-exec), at the lowest free number from 3.
fn inheritable(fd: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD on an fd we own returns a new fd (not close-on-exec) or -1.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD, 3) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `copy` was just created and is owned here only.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// The program's stdout when bubblewrap stands between crewd and the program: crewd reads
/// `read`; the init inside the box inherits `handoff` (the write end) by number (`--stdout-fd
/// FD`) and makes it the program's stdout, while bubblewrap's own stdout is `/dev/null`.
/// bubblewrap's processes keep their stdio open for the box's whole life, so a program that
/// closes its stdout would otherwise not be seen to. Drop `handoff` once the box is spawned,
/// as for the lifeline: another child spawned meanwhile that holds a copy delays the end of
/// the stream only until it exits (every init closes what is not its own; crewd's
/// `on_run_end` callback gets only stdio; its git and Slurm commands are short), and after
/// the program exits the supervision waits for the end of its output only briefly.
pub struct StdoutPipe {
    pub read: OwnedFd,
    pub handoff: OwnedFd,
}

impl StdoutPipe {
    pub fn new() -> io::Result<StdoutPipe> {
        let (read, write) = pipe()?;
        Ok(StdoutPipe {
            read,
            handoff: inheritable(&write)?,
        })
    }
}

/// The init's argv around `program args…` (the init itself first); `lifeline`: the fd number
/// the init inherits the lifeline's read end at ([`Lifeline::handoff_fd`]); `stdout`: the fd
/// number it inherits the program's stdout at ([`StdoutPipe::handoff`]), if not its own.
pub fn argv(
    init: &Path,
    mode: Mode,
    lifeline: Option<RawFd>,
    stdout: Option<RawFd>,
    program: &OsStr,
    args: &[OsString],
) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![init.as_os_str().to_owned(), mode.flag().into()];
    for (flag, fd) in [("--lifeline", lifeline), ("--stdout-fd", stdout)] {
        if let Some(fd) = fd {
            v.push(flag.into());
            v.push(fd.to_string().into());
        }
    }
    v.push("--".into());
    v.push(program.to_owned());
    v.extend(args.iter().cloned());
    v
}

/// What the init can do here: `Ok(PidNs)`, or `Err(why not)` (then `Mode::Reaper` is the way).
pub fn probe(init: &Path) -> Result<Mode, String> {
    let out = std::process::Command::new(init)
        .args(["--pidns", "--probe"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", init.display()))?;
    if out.status.success() {
        return Ok(Mode::PidNs);
    }
    let why = String::from_utf8_lossy(&out.stderr);
    let why = why.trim().trim_start_matches("crew-box: ");
    Err(if why.is_empty() {
        format!("{} --pidns --probe failed ({})", init.display(), out.status)
    } else {
        why.chars().take(300).collect()
    })
}

/// The program as exec would find it with `path` (the child's `PATH`): a name with a slash
/// as given, else the first executable file of that name in `path`'s directories. Looked up
/// before the init starts, so a missing program is still a spawn error ("not found"), not an
/// init that exits 127.
pub fn resolve(program: &str, path: Option<&OsStr>, cwd: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_empty() {
        return Err(io::ErrorKind::NotFound.into());
    }
    if program.contains('/') {
        // Relative to the directory the program starts in, as exec sees it there.
        let m = std::fs::metadata(cwd.join(program))?;
        if !m.is_file() || m.permissions().mode() & 0o111 == 0 {
            return Err(io::ErrorKind::PermissionDenied.into());
        }
        return Ok(PathBuf::from(program));
    }
    let default = OsString::from("/usr/local/bin:/usr/bin:/bin");
    let path = path.unwrap_or(&default);
    std::env::split_paths(path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

/// `name` in `dir` (where the program looking is installed: crew's programs sit side by
/// side), else in the first absolute directory of `path` that has it, runnable.
pub fn beside_or_on_path(name: &str, dir: Option<&Path>, path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    dir.map(|d| d.join(name))
        .into_iter()
        .chain(
            path.into_iter()
                .flat_map(std::env::split_paths)
                .filter(|d| d.is_absolute())
                .map(|d| d.join(name)),
        )
        .find(|p| runnable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_init_goes_first() {
        let v = argv(
            Path::new("/x/crew-box"),
            Mode::PidNs,
            Some(7),
            None,
            OsStr::new("sh"),
            &["-c".into(), "true".into()],
        );
        assert_eq!(
            v,
            [
                "/x/crew-box",
                "--pidns",
                "--lifeline",
                "7",
                "--",
                "sh",
                "-c",
                "true"
            ]
            .map(OsString::from)
        );
    }

    #[test]
    fn programs_resolve_as_exec_would() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(["/nonexistent", dir.path().to_str().unwrap()]).unwrap();
        let cwd = dir.path();
        assert_eq!(resolve("tool", Some(&path), cwd).unwrap(), exe);
        assert_eq!(
            resolve("plain", Some(&path), cwd).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            resolve("./tool", Some(&path), cwd).unwrap(),
            Path::new("./tool")
        );
        assert_eq!(
            resolve("./plain", Some(&path), cwd).unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        assert_eq!(
            resolve("./rel/x", Some(&path), cwd).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(resolve(exe.to_str().unwrap(), None, Path::new("/")).is_ok());
        assert!(resolve("", Some(&path), cwd).is_err());
    }
}
