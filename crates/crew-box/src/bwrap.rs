//! The box around an attempt: bubblewrap's argv for what the attempt may see (issue 34).
//!
//! An allowlist: the box's root is an empty tmpfs; the system directories are bound
//! read-only, then the paths a `BoxSpec` names (read-only or writable), shallowest first so a
//! writable worktree inside a read-only checkout, or a read-only settings file inside a
//! writable agent home, comes out right. `/tmp` is private, `/proc` and `/dev` are the box's
//! own, and the root itself read-only; everything else — the rest of `$HOME`, crewd's state directory and socket,
//! `XDG_RUNTIME_DIR` (session bus, agent and tmux sockets) — is not there at all. All
//! namespaces are new (user where needed, PID, IPC, UTS, cgroup, and network unless the box
//! shares it); `--new-session` keeps the box off crewd's terminal; crew's init, the box's
//! PID 1, ties it to crewd by the lifeline.

use std::ffi::{OsStr, OsString};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

/// System directories bound read-only when they exist.
pub const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// The system directories that are symlinks into `/usr` here (merged `/usr`: `/bin ->
/// usr/bin`), with their targets: the box makes the same symlink instead of a bind. Each bind
/// costs bubblewrap mounts and a read of its mount table (about a millisecond apiece on a
/// loaded machine), and the box is made at every task start. Found once.
pub fn system_symlinks() -> &'static [(PathBuf, PathBuf)] {
    static FOUND: std::sync::OnceLock<Vec<(PathBuf, PathBuf)>> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        SYSTEM
            .iter()
            .filter_map(|p| {
                let target = std::fs::read_link(p).ok()?;
                Path::new("/")
                    .join(&target)
                    .starts_with("/usr")
                    .then(|| (PathBuf::from(p), target))
            })
            .collect()
    })
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BoxSpec {
    /// Bound read-only (skipped when missing).
    pub read_only: Vec<PathBuf>,
    /// Bound writable (skipped when missing).
    pub writable: Vec<PathBuf>,
    /// Bound at another path in the box: (source, where, writable). An attempt's own object
    /// directory in place of the repository's, whose objects are then seen elsewhere.
    pub elsewhere: Vec<(PathBuf, PathBuf, bool)>,
    /// Share the host's network (else a network namespace of its own: no network at all,
    /// loopback included, and no abstract Unix sockets of the host).
    pub network: bool,
    /// Where the program starts.
    pub cwd: PathBuf,
}

impl BoxSpec {
    /// What the box shows, in the order bound: (where in the box, source, writable).
    pub fn mounts(&self) -> Vec<(PathBuf, PathBuf, bool)> {
        let same = |p: &PathBuf, rw: bool| (p.clone(), p.clone(), rw);
        let mut all: Vec<(PathBuf, PathBuf, bool)> = SYSTEM
            .iter()
            .map(|p| same(&PathBuf::from(p), false))
            .chain(self.read_only.iter().map(|p| same(p, false)))
            .chain(self.writable.iter().map(|p| same(p, true)))
            .chain(
                self.elsewhere
                    .iter()
                    .map(|(src, at, rw)| (at.clone(), src.clone(), *rw)),
            )
            .collect();
        // Shallowest first; at one depth read-only before writable, then a path bound from
        // elsewhere last (stable for the rest).
        all.sort_by_key(|(at, src, rw)| (at.components().count(), *rw, at != src));
        all.dedup();
        let mut kept: Vec<(PathBuf, PathBuf, bool)> = Vec::with_capacity(all.len());
        for m in all {
            if !already_seen(&kept, &m) {
                kept.push(m);
            }
        }
        kept
    }
}

/// Is `m` what the box already shows at its path? So when the mount in effect there (the
/// deepest one kept above it) binds the same host tree the same way and the path is real on
/// the host (no symlink on the way, where the bound tree would show the link instead): crew's
/// programs under `~/.cargo/bin` or `/usr/local/bin`, a `sandbox_read` path inside a
/// toolchain. Each bind costs bubblewrap a mount and a read of its mount table per start.
fn already_seen(kept: &[(PathBuf, PathBuf, bool)], m: &(PathBuf, PathBuf, bool)) -> bool {
    let (at, src, rw) = m;
    if at != src {
        return false;
    }
    let Some((above, above_src, above_rw)) = kept.iter().rev().find(|(p, _, _)| at.starts_with(p))
    else {
        return false;
    };
    above == above_src
        && above_rw == rw
        && above != at
        && std::fs::canonicalize(at).is_ok_and(|real| real == *at)
}

/// `bwrap … -- program args…` for `spec` (the bwrap binary first).
pub fn argv(bwrap: &Path, spec: &BoxSpec, program: &OsStr, args: &[OsString]) -> Vec<OsString> {
    argv_as(bwrap, spec, program, args, Started::Plain)
}

/// How the box's program is started.
#[derive(PartialEq)]
enum Started {
    /// As bubblewrap's child, tied to bubblewrap's parent (`--die-with-parent`).
    Plain,
    /// Crew's init as the box's PID 1 (`--as-pid-1`): bubblewrap starts no init of its own
    /// (one fork and one process fewer per box; crew's init is a reaper and ends the namespace
    /// when the program ends), and the lifeline the init holds ties the box to crewd.
    ByInit,
}

fn argv_as(
    bwrap: &Path,
    spec: &BoxSpec,
    program: &OsStr,
    args: &[OsString],
    started: Started,
) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![bwrap.as_os_str().to_owned()];
    let mut push = |items: &[&OsStr]| v.extend(items.iter().map(|s| s.to_os_string()));
    if started == Started::Plain {
        push(&["--die-with-parent".as_ref()]);
    }
    push(&["--unshare-all".as_ref(), "--new-session".as_ref()]);
    if spec.network {
        push(&["--share-net".as_ref()]);
    }
    push(&[
        "--proc".as_ref(),
        "/proc".as_ref(),
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--tmpfs".as_ref(),
        "/tmp".as_ref(),
    ]);
    let links = system_symlinks();
    for (at, target) in links {
        push(&["--symlink".as_ref(), target.as_os_str(), at.as_os_str()]);
    }
    for (at, src, rw) in spec.mounts() {
        if links.iter().any(|(l, _)| *l == at && at == src) {
            continue;
        }
        let flag: &OsStr = if rw {
            "--bind-try".as_ref()
        } else {
            "--ro-bind-try".as_ref()
        };
        push(&[flag, src.as_os_str(), at.as_os_str()]);
    }
    // The box's root (an empty tmpfs holding the mount points) read-only: the directories
    // bwrap made on the way to a bound path are not a place to write either.
    push(&[
        "--remount-ro".as_ref(),
        "/".as_ref(),
        "--chdir".as_ref(),
        spec.cwd.as_os_str(),
    ]);
    if started == Started::ByInit {
        push(&["--as-pid-1".as_ref()]);
    }
    push(&["--".as_ref(), program]);
    v.extend(args.iter().cloned());
    v
}

/// bubblewrap's argv for `program args…` in `spec`'s box, started in the box by crew's init
/// as its PID 1 (`init --reaper --lifeline L --stdout-fd S -- program args…`): crewd starts
/// bubblewrap itself, and the init inherits the lifeline's read end at `lifeline` and the
/// program's stdout at `stdout` through it (`spawn::Lifeline`, `spawn::StdoutPipe`). A
/// program that cannot be started is then told as without the box (exit 127 and the OS
/// error), not as bubblewrap's own failure. Without `--die-with-parent`: bubblewrap's parent
/// is then crewd, whose threads come and go (see the crate's docs); the lifeline ties the box
/// to crewd instead. The init's folder is seen read-only.
pub fn argv_with_init(
    bwrap: &Path,
    init: &Path,
    spec: &BoxSpec,
    lifeline: RawFd,
    stdout: RawFd,
    program: &OsStr,
    args: &[OsString],
) -> Vec<OsString> {
    let mut spec = spec.clone();
    spec.read_only.extend(init.parent().map(Path::to_path_buf));
    let inner = crate::spawn::argv(
        init,
        crate::Mode::Reaper,
        Some(lifeline),
        Some(stdout),
        program,
        args,
    );
    let Some((init, inner)) = inner.split_first() else {
        return vec![];
    };
    argv_as(bwrap, &spec, init, inner, Started::ByInit)
}

/// Can bubblewrap make a box here (user namespaces allowed, the binary works)? `Err(why)`.
pub fn probe(bwrap: &Path) -> Result<(), String> {
    let spec = BoxSpec {
        cwd: PathBuf::from("/"),
        ..Default::default()
    };
    let argv = argv(bwrap, &spec, OsStr::new("/bin/true"), &[]);
    let out = std::process::Command::new(bwrap)
        .args(argv.get(1..).unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr);
    Err(why.trim().chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[OsString]) -> String {
        v.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn argv_table() {
        // This machine's merged `/usr` symlinks, then the other system directories.
        let links = system_symlinks();
        let sys: String = SYSTEM
            .iter()
            .filter(|p| !links.iter().any(|(l, _)| l == Path::new(p)))
            .map(|p| format!("--ro-bind-try {p} {p} "))
            .collect();
        let head = "/usr/bin/bwrap --die-with-parent --unshare-all --new-session";
        let symlinks: String = links
            .iter()
            .map(|(l, t)| format!(" --symlink {} {}", t.display(), l.display()))
            .collect();
        let fs = format!("--proc /proc --dev /dev --tmpfs /tmp{symlinks}");
        // (spec, program args, want)
        let table: Vec<(BoxSpec, Vec<&str>, String)> = vec![
            (
                BoxSpec {
                    cwd: "/w".into(),
                    ..Default::default()
                },
                vec!["sh", "-c", "x"],
                format!("{head} {fs} {sys}--remount-ro / --chdir /w -- sh -c x"),
            ),
            (
                // Network shared; a worktree (writable) inside a checkout (read-only) comes
                // after it; a settings file (read-only) inside a writable agent home after it.
                BoxSpec {
                    read_only: vec!["/h/.claude/settings.json".into(), "/repo".into()],
                    writable: vec!["/repo/.crew/wt/a".into(), "/h/.claude".into()],
                    network: true,
                    cwd: "/repo/.crew/wt/a".into(),
                    ..Default::default()
                },
                vec!["agent"],
                format!(
                    "{head} --share-net {fs} {sys}--ro-bind-try /repo /repo \
                     --bind-try /h/.claude /h/.claude \
                     --ro-bind-try /h/.claude/settings.json /h/.claude/settings.json \
                     --bind-try /repo/.crew/wt/a /repo/.crew/wt/a \
                     --remount-ro / --chdir /repo/.crew/wt/a -- agent"
                ),
            ),
            (
                // The attempt's own objects in place of the repository's, which are seen
                // read-only elsewhere (bubblewrap reads every source from the host's tree).
                BoxSpec {
                    writable: vec!["/repo/.git".into()],
                    elsewhere: vec![
                        ("/s/own".into(), "/repo/.git/objects".into(), true),
                        ("/repo/.git/objects".into(), "/s/shared".into(), false),
                    ],
                    cwd: "/w".into(),
                    ..Default::default()
                },
                vec!["git"],
                format!(
                    "{head} {fs} {sys}--ro-bind-try /repo/.git/objects /s/shared \
                     --bind-try /repo/.git /repo/.git \
                     --bind-try /s/own /repo/.git/objects \
                     --remount-ro / --chdir /w -- git"
                ),
            ),
        ];
        for (spec, args, want) in table {
            let (program, rest) = args.split_first().unwrap();
            let rest: Vec<OsString> = rest.iter().map(OsString::from).collect();
            let got = argv(Path::new("/usr/bin/bwrap"), &spec, program.as_ref(), &rest);
            assert_eq!(s(&got), want);
        }
    }

    #[test]
    fn a_bind_the_box_already_shows_the_same_way_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (a, b, c) = (root.join("a"), root.join("a/b"), root.join("a/b/c"));
        std::fs::create_dir_all(&c).unwrap();
        std::os::unix::fs::symlink(&c, root.join("a/link")).unwrap();
        let ours = |spec: BoxSpec| -> Vec<(PathBuf, bool)> {
            spec.mounts()
                .into_iter()
                .filter(|(p, _, _)| p.starts_with(&root))
                .map(|(p, _, rw)| (p, rw))
                .collect()
        };
        // Read-only inside read-only: shown already.
        let spec = BoxSpec {
            read_only: vec![a.clone(), b.clone()],
            ..Default::default()
        };
        assert_eq!(ours(spec), [(a.clone(), false)]);
        // Writable inside read-only, and read-only again inside that: each changes the view.
        let spec = BoxSpec {
            read_only: vec![a.clone(), c.clone()],
            writable: vec![b.clone()],
            ..Default::default()
        };
        assert_eq!(
            ours(spec),
            [(a.clone(), false), (b.clone(), true), (c.clone(), false)]
        );
        // Through a symlink, or a path that is not there: kept (bubblewrap decides).
        let spec = BoxSpec {
            read_only: vec![a.clone(), a.join("link"), a.join("missing")],
            ..Default::default()
        };
        assert_eq!(
            ours(spec),
            [
                (a.clone(), false),
                (a.join("link"), false),
                (a.join("missing"), false)
            ]
        );
    }

    #[test]
    fn mounts_go_shallowest_first_read_only_before_writable() {
        let spec = BoxSpec {
            read_only: vec!["/a/b/c".into(), "/a".into()],
            writable: vec!["/a/b".into(), "/a".into()],
            ..Default::default()
        };
        let ours: Vec<(String, bool)> = spec
            .mounts()
            .into_iter()
            .filter(|(p, _, _)| p.starts_with("/a"))
            .map(|(p, _, rw)| (p.display().to_string(), rw))
            .collect();
        assert_eq!(
            ours,
            [
                ("/a".to_string(), false),
                ("/a".to_string(), true),
                ("/a/b".to_string(), true),
                ("/a/b/c".to_string(), false)
            ]
        );
    }
}
