//! crewd's side: find out what this machine allows, and start a program under the init.

use crate::{Mode, LIFELINE_FD};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// crewd's end of an attempt's lifeline: while it is open, the attempt may live. Dropped with
/// the attempt's supervision, or closed by the kernel when crewd dies.
#[derive(Debug)]
pub struct Lifeline {
    write: Option<OwnedFd>,
    read: OwnedFd,
}

impl Lifeline {
    pub fn new() -> io::Result<Lifeline> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 fills the array it is given. Both ends CLOEXEC: no other child of
        // crewd's may hold the write end past its exec, or crewd's death would go unseen.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds were just created and are owned here only.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(Lifeline {
            write: Some(write),
            read,
        })
    }

    /// End the attempt now: the init reads EOF, kills everything it holds (SIGKILL), reaps
    /// it and exits. How crewd kills a contained attempt: a SIGKILL of the init itself would
    /// orphan its children (PID 1 of the namespace, the reaper's adoptees) to whatever reaps
    /// orphans here, and in a container that may be nobody.
    pub fn cut(&mut self) {
        self.write = None;
    }

    /// The read end's number, for [`child_setup`]. Spawning is done before the parent's copy
    /// of the read end matters: it is closed with the `Lifeline`.
    pub fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }
}

/// In the forked child, before exec: the lifeline's read end as fd 3, inheritable. Only
/// async-signal-safe calls.
pub fn child_setup(read_fd: RawFd) -> io::Result<()> {
    // SAFETY: dup2/fcntl on fd numbers.
    let r = unsafe {
        if read_fd == LIFELINE_FD {
            libc::fcntl(read_fd, libc::F_SETFD, 0)
        } else {
            libc::dup2(read_fd, LIFELINE_FD)
        }
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The init's argv around `program args…` (the init itself first).
pub fn argv(init: &Path, mode: Mode, program: &OsStr, args: &[OsString]) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![
        init.as_os_str().to_owned(),
        mode.flag().into(),
        "--lifeline".into(),
        "--".into(),
        program.to_owned(),
    ];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_init_goes_first() {
        let v = argv(
            Path::new("/x/crew-box"),
            Mode::PidNs,
            OsStr::new("sh"),
            &["-c".into(), "true".into()],
        );
        assert_eq!(
            v,
            [
                "/x/crew-box",
                "--pidns",
                "--lifeline",
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
