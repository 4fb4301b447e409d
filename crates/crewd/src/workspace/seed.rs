//! A step's `seedPaths`: files copied from the user's tree into a task's worktree (a `.env`
//! the repository does not commit). Both ends are opened one component at a time from the
//! tree's top with `O_NOFOLLOW`, so a symbolic link anywhere on either path — a directory link
//! the repository commits (`cfg -> ~/.ssh`), or one in the user's tree — is refused instead of
//! followed: nothing is read from outside the user's tree and nothing is written outside the
//! worktree. Which steps may name seeds at all is `plan_checks.rs`'s rule (trusted files only).

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, mkdirat, Mode, SFlag};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;

/// Copy each of `paths` (relative to the tree's top) from `from` to `to`. A path missing in
/// the user's tree, or not a regular file there, is skipped (as before); one that would go
/// through a link is an error naming it.
pub fn copy(from: &Path, to: &Path, paths: &[String]) -> Result<(), String> {
    for p in paths {
        let Some(parts) = parts(p) else {
            continue;
        };
        copy_one(from, to, &parts).map_err(|why| format!("seedPaths `{p}`: {why}"))?;
    }
    Ok(())
}

fn parts(p: &str) -> Option<Vec<&str>> {
    let parts: Vec<&str> = p.split('/').collect();
    let ok = !p.is_empty()
        && !p.starts_with('/')
        && parts
            .iter()
            .all(|part| !part.is_empty() && *part != "." && *part != "..");
    ok.then_some(parts)
}

fn root(dir: &Path) -> Result<OwnedFd, String> {
    File::open(dir)
        .map(OwnedFd::from)
        .map_err(|e| format!("cannot open {}: {e}", dir.display()))
}

/// Open directory `name` in `dir` without following a link; `Ok(None)` when it does not exist.
fn subdir(dir: &OwnedFd, name: &str, side: &str) -> Result<Option<OwnedFd>, String> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT) => Ok(None),
        Err(Errno::ELOOP | Errno::ENOTDIR) => Err(format!(
            "`{name}` in {side} is a symbolic link or not a directory; seeds are copied only \
             through real directories"
        )),
        Err(e) => Err(format!("cannot open `{name}` in {side}: {e}")),
    }
}

fn copy_one(from: &Path, to: &Path, parts: &[&str]) -> Result<(), String> {
    let Some((last, dirs)) = parts.split_last() else {
        return Ok(());
    };
    // The source: every directory a real one, the file a regular file.
    let mut src_dir = root(from)?;
    for d in dirs {
        match subdir(&src_dir, d, "your tree")? {
            Some(fd) => src_dir = fd,
            None => return Ok(()),
        }
    }
    let read = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let src = match openat(&src_dir, *last, read, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(()),
        Err(Errno::ELOOP) => {
            return Err(
                "it is a symbolic link in your tree; seeds are copied only as regular \
                        files"
                    .into(),
            )
        }
        Err(e) => return Err(format!("cannot open it in your tree: {e}")),
    };
    let st = fstat(&src).map_err(|e| format!("cannot read it: {e}"))?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Ok(());
    }
    // The destination: directories made or entered without following links, the file opened
    // without following one and without truncating until it is known to be the worktree's own.
    let mut dst_dir = root(to)?;
    for d in dirs {
        match mkdirat(&dst_dir, *d, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(format!("cannot make `{d}` in the worktree: {e}")),
        }
        match subdir(&dst_dir, d, "the worktree")? {
            Some(fd) => dst_dir = fd,
            None => return Err(format!("`{d}` vanished from the worktree")),
        }
    }
    let write = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(st.st_mode & 0o777);
    let dst = match openat(&dst_dir, *last, write, mode) {
        Ok(fd) => fd,
        Err(Errno::ELOOP) => {
            return Err(
                "it is a symbolic link in the worktree (the repository commits it); \
                        seeds are never written through a link"
                    .into(),
            )
        }
        Err(e) => return Err(format!("cannot create it in the worktree: {e}")),
    };
    let dst_st = fstat(&dst).map_err(|e| format!("cannot read it in the worktree: {e}"))?;
    if SFlag::from_bits_truncate(dst_st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG
        || dst_st.st_nlink > 1
    {
        return Err("it is not a plain file of the worktree's own".into());
    }
    let mut src = File::from(src);
    let mut dst = File::from(dst);
    dst.set_len(0)
        .and_then(|()| std::io::copy(&mut src, &mut dst))
        .map(|_| ())
        .map_err(|e| format!("cannot copy it: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_on_either_side_are_refused_and_nothing_outside_is_written() {
        let t = tempfile::tempdir().unwrap();
        let (from, to, outside) = (
            t.path().join("from"),
            t.path().join("to"),
            t.path().join("out"),
        );
        for d in [&from, &to, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("key"), "secret").unwrap();
        std::fs::write(from.join(".env"), "A=1").unwrap();
        std::os::unix::fs::symlink(&outside, from.join("cfg")).unwrap();
        std::os::unix::fs::symlink(&outside, to.join("cfg")).unwrap();
        std::os::unix::fs::symlink(outside.join("key"), to.join("k")).unwrap();
        std::fs::write(from.join("k"), "mine").unwrap();

        assert!(copy(&from, &to, &["cfg/key".into()]).is_err());
        assert!(copy(&from, &to, &["k".into()]).is_err());
        assert_eq!(
            std::fs::read_to_string(outside.join("key")).unwrap(),
            "secret"
        );
        copy(
            &from,
            &to,
            &[".env".into(), "missing".into(), "../x".into()],
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(to.join(".env")).unwrap(), "A=1");
    }
}
