//! The staging directory: how crewd hands one attempt to a `crew-worker` on another machine
//! and reads it back, through a directory both see (the shared filesystem of a cluster).
//!
//! One directory per attempt, mode 0700, created by crewd:
//!
//! | file | written by | what |
//! |---|---|---|
//! | `launch.json` | crewd | [`Launch`]: the attempt's token, the start commit, whether to commit, the task's verification commands, the box's rules, the pre-step script |
//! | `worker.json` | crewd | the attempt as `crew_attempt::WorkerSpec` (adapter, prompt, limits, ...): the node builds the agent's argv from it exactly as crewd does for a local attempt |
//! | `env.json` | crewd (0600) | the worker's filtered environment, API keys included: never in the job's script or environment, which the scheduler stores and shows |
//! | `input.bundle` | crewd | the start commit as a git bundle: its whole history, or only what `base.bundle` lacks (then its prerequisite is the base) |
//! | `base.bundle` | crewd | with a thin `input.bundle` only: the run's base commit and its history, written once per run and linked into each attempt's directory |
//! | `prompts/<task>.md` | crewd | the rendered prompt (the run directory's layout: the worker's run directory is this one) |
//! | `ctl/NNNNNNNN.json` | crewd | [`Ctl`] messages for the running attempt (steer), taken in name order |
//! | `notes.jsonl` | worker | [`Note`]s as they happen: progress, refused tool calls, a live agent's answer |
//! | `transcripts/`, `logs/`, `results/`, `shared/` | worker | the attempt's files, as a local attempt leaves them in its run directory |
//! | `result.bundle` | worker | the attempt's commit on top of the start commit (`refs/crew/result`) |
//! | `final.json` | worker | [`Final`], written last (temp file, rename): the attempt is over |
//!
//! Every record the worker writes carries the attempt's token; crewd refuses a record whose
//! token is not the one it minted for the attempt (a late worker of a lost node, a duplicate).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Layout version: a worker refuses a launch of another version instead of guessing. 2: the
/// node runs the attempt through `crew_attempt` (`worker.json`, `notes.jsonl`, `ctl/`). 3: the
/// launch carries the box's rules and the pre-step script. 4: the input bundle may be thin
/// (`Launch::base`, `base.bundle`), and the worker takes commits from bundles by id, not by
/// ref name.
pub const VERSION: u32 = 5;
/// The ref the result bundle carries.
pub const RESULT_REF: &str = "refs/crew/result";
/// Largest record (launch, env, final) either side reads.
pub const MAX_RECORD_BYTES: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StagingError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a valid record: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: larger than {MAX_RECORD_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("{path}: layout version {found}, this side speaks {VERSION}")]
    Version { path: PathBuf, found: u32 },
    /// A worker's file that is not a plain file reached through plain directories: a link
    /// (which crewd would resolve on its own machine), a FIFO (whose open waits for a writer),
    /// a device, a socket, a directory, or a name with `..` in it.
    #[error(
        "{path}: {what}; a worker's files are read only as regular files, never through a link"
    )]
    NotAFile { path: PathBuf, what: &'static str },
}

/// The attempt as crewd described it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    pub version: u32,
    /// Minted by crewd for this attempt; echoed in [`Final`].
    pub token: String,
    pub run_id: String,
    pub task_id: String,
    pub attempt: u32,
    /// The commit the input bundle holds (a ref tip of it, taken by id).
    pub start: String,
    /// The run's base commit when `input.bundle` is thin: its prerequisite, which `base.bundle`
    /// holds with its history. `None`: `input.bundle` holds the whole history.
    #[serde(default)]
    pub base: Option<String>,
    /// Commit the agent's changes (a writing task); a read-only task's tree is left.
    pub commit: bool,
    /// The commit message of the result.
    pub message: String,
    /// The task's verification commands, run in the checkout after a completed attempt and
    /// before its commit, as a local attempt's are.
    #[serde(default)]
    pub checks: Checks,
    /// The box the node runs the agent, its checks and its pre-step script in.
    pub sandbox: BoxRules,
    /// The step's pre-step script, run on the node before the agent.
    #[serde(default)]
    pub pre_step: Option<PreStepAt>,
}

/// The runtime's box settings as crewd's config has them: the node applies the same rules
/// (`crew_attempt::sandbox`) to its own paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoxRules {
    /// The runtime's `sandbox`, else the daemon's.
    pub mode: crew_core::sandbox::SandboxMode,
    /// The agent's network (the runtime's `network`).
    pub network: bool,
    /// Verify commands' and the pre-step script's network (`verify_network`).
    pub verify_network: bool,
    /// The runtime's own passed-through variables (`env`).
    pub runtime_env: Vec<String>,
    /// `sandbox_read`, `sandbox_write`: paths as the nodes see them.
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
}

/// The pre-step script and where its output block goes in the staged prompt (a byte offset:
/// before the fan-out and judge sections, as crewd places it for a local attempt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreStepAt {
    pub script: crew_core::checks::PreStep,
    pub at: usize,
}

/// The task's verification as the node runs it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    pub commands: Vec<String>,
    pub timeout_ms: u64,
    pub grace_ms: u64,
    /// Output kept per command (its end).
    pub output_bytes: u64,
    /// A failing command completes the attempt with the failure recorded instead of failing
    /// it: a candidate whose verification retries are spent (issue 36).
    #[serde(default)]
    pub failure_completes: bool,
}

/// A message from crewd to the running attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Ctl {
    /// A steer message for a live agent (`team.steer`).
    Steer { text: String },
}

/// What the running attempt tells crewd as it goes (`crew_attempt::port::Port`'s notes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Note {
    /// The agent's process started on the node (its pid there: for the log only).
    Spawned { pid: u32, live: bool },
    Progress {
        usage: crew_core::usage::Usage,
        tool: Option<String>,
    },
    /// The agent's CLI refused a tool call.
    Warning { tool: String, message: String },
    /// A live agent gave its final answer.
    Answered,
}

/// How the attempt ended on the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Final {
    pub version: u32,
    pub token: String,
    /// The attempt's result as `crew_attempt` classified it; its artifacts name files of this
    /// directory. `None` when the worker could not run the attempt (`error`).
    pub result: Option<crew_core::run::AttemptResult>,
    /// The worker was told to stop (SIGTERM from the scheduler: a cancel or a time limit).
    pub terminated: bool,
    /// The result commit, when the agent changed something and it was committed.
    pub commit: Option<String>,
    /// The node the worker ran on.
    pub host: String,
    /// Why the worker could not run the attempt or keep its work (checkout, commit).
    pub error: Option<String>,
    /// Why the attempt ran unboxed on the node under `sandbox = "auto"` (no bubblewrap, no
    /// user namespaces, no crew-box beside crew-worker); `None` when boxed or `off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unboxed: Option<String>,
}

/// The files of one staging directory.
#[derive(Debug, Clone)]
pub struct Staging {
    pub dir: PathBuf,
}

impl Staging {
    pub fn new(dir: impl Into<PathBuf>) -> Staging {
        Staging { dir: dir.into() }
    }
    pub fn launch(&self) -> PathBuf {
        self.dir.join("launch.json")
    }
    pub fn env(&self) -> PathBuf {
        self.dir.join("env.json")
    }
    pub fn worker(&self) -> PathBuf {
        self.dir.join("worker.json")
    }
    pub fn input_bundle(&self) -> PathBuf {
        self.dir.join("input.bundle")
    }
    pub fn base_bundle(&self) -> PathBuf {
        self.dir.join("base.bundle")
    }
    pub fn ctl_dir(&self) -> PathBuf {
        self.dir.join("ctl")
    }
    pub fn notes(&self) -> PathBuf {
        self.dir.join("notes.jsonl")
    }
    pub fn result_bundle(&self) -> PathBuf {
        self.dir.join("result.bundle")
    }
    pub fn final_record(&self) -> PathBuf {
        self.dir.join("final.json")
    }

    /// The directory itself, private to the user (0700), and its `ctl/`.
    pub fn create(&self) -> Result<(), StagingError> {
        use std::os::unix::fs::DirBuilderExt;
        for d in [&self.dir, &self.ctl_dir()] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)
                .map_err(io(d))?;
            // An existing directory (an attempt re-attached after a restart) keeps its mode:
            // make it private anyway, but only a real one: the worker may have put a link in
            // its place, whose target the chmod would change.
            real_dir(d)?;
            set_mode(d, 0o700)?;
        }
        Ok(())
    }

    /// Write the `n`th control message, into `ctl/` only while it is a real directory (a
    /// link the worker put in its place would take the message elsewhere).
    pub fn put_ctl(&self, n: u64, msg: &Ctl) -> Result<(), StagingError> {
        real_dir(&self.dir)?;
        real_dir(&self.ctl_dir())?;
        write_json(&self.ctl_dir().join(ctl_name(n)), msg, 0o600)
    }
}

/// `00000001.json`: names that sort in order.
pub fn ctl_name(n: u64) -> String {
    format!("{n:08}.json")
}

/// Which of `names` (a directory listing of `ctl/`) are messages after `after`, in order.
pub fn ctl_after(names: &[String], after: u64) -> Vec<u64> {
    let mut v: Vec<u64> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".json"))
        .filter(|s| s.len() == 8)
        .filter_map(|s| s.parse().ok())
        .filter(|n| *n > after)
        .collect();
    v.sort_unstable();
    v
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StagingError + '_ {
    move |source| StagingError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `path` is a directory itself, not a link to one (nor anything else).
fn real_dir(path: &Path) -> Result<(), StagingError> {
    let m = std::fs::symlink_metadata(path).map_err(io(path))?;
    if m.file_type().is_symlink() {
        return Err(StagingError::NotAFile {
            path: path.to_path_buf(),
            what: "a symbolic link in place of a staging directory",
        });
    }
    if !m.is_dir() {
        return Err(StagingError::NotAFile {
            path: path.to_path_buf(),
            what: "not a directory",
        });
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<(), StagingError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io(path))
}

/// Write `bytes` whole (temp file in the same directory, fsync, rename) with `mode`: a reader
/// never sees half a file. The temp file is made new (`O_EXCL`, after removing whatever has
/// its name): the other side may have put a link there, which `O_CREAT` alone would follow
/// and write through (a file of the user's, truncated).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), StagingError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&tmp)(e)),
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// Write a record as JSON (atomic, `mode`).
pub fn write_json<T: Serialize>(path: &Path, value: &T, mode: u32) -> Result<(), StagingError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|source| StagingError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    write_atomic(path, &bytes, mode)
}

/// Open `rel` under `dir` for reading as the other side left it: each directory of `rel`
/// entered and the file opened without following a symbolic link (`O_NOFOLLOW`, one
/// component at a time), without waiting on a FIFO (`O_NONBLOCK`, which a regular file's
/// reads ignore), and only when it is a regular file. `dir` itself is the staging directory
/// (or one of its own), which crewd made. A missing file is an `Io` error of kind `NotFound`.
pub fn open_beneath(dir: &Path, rel: &Path) -> Result<std::fs::File, StagingError> {
    use nix::errno::Errno;
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::{fstat, Mode, SFlag};
    use std::os::fd::OwnedFd;
    let path = dir.join(rel);
    let refused = |what| StagingError::NotAFile {
        path: path.clone(),
        what,
    };
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            std::path::Component::Normal(n) => names.push(n),
            _ => return Err(refused("a name outside its directory")),
        }
    }
    let Some((last, dirs)) = names.split_last() else {
        return Err(refused("a name outside its directory"));
    };
    let mut at: OwnedFd = std::fs::File::open(dir).map_err(io(dir))?.into();
    let errno = |e: Errno| -> StagingError {
        match e {
            Errno::ELOOP => refused("a symbolic link (or a path through one)"),
            Errno::ENOTDIR => refused("a path through something that is not a directory"),
            Errno::ENXIO => refused("not a regular file (a socket)"),
            e => io(&path)(std::io::Error::from(e)),
        }
    };
    for d in dirs {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        at = openat(&at, *d, flags, Mode::empty()).map_err(errno)?;
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = openat(&at, *last, flags, Mode::empty()).map_err(errno)?;
    let st = fstat(&fd).map_err(errno)?;
    match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => Ok(fd.into()),
        SFlag::S_IFDIR => Err(refused("a directory, not a regular file")),
        SFlag::S_IFIFO => Err(refused("a FIFO, not a regular file")),
        _ => Err(refused("not a regular file (a device or a socket)")),
    }
}

/// `rel` under `dir` (as `open_beneath` opens it) whole, at most `max` bytes (`TooLarge`
/// beyond: never more is read or kept).
pub fn read_beneath(dir: &Path, rel: &Path, max: u64) -> Result<Vec<u8>, StagingError> {
    use std::io::Read;
    let f = open_beneath(dir, rel)?;
    let mut bytes = Vec::new();
    f.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io(&dir.join(rel)))?;
    if bytes.len() as u64 > max {
        return Err(StagingError::TooLarge {
            path: dir.join(rel),
        });
    }
    Ok(bytes)
}

/// Read a record, at most `MAX_RECORD_BYTES`, only a regular file (`open_beneath`: the other
/// side wrote it; a link or a FIFO in its place is refused). `Ok(None)`: there is none (yet).
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, StagingError> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(StagingError::NotAFile {
            path: path.to_path_buf(),
            what: "a name outside its directory",
        });
    };
    let bytes = match read_beneath(dir, Path::new(name), MAX_RECORD_BYTES) {
        Ok(b) => b,
        Err(StagingError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|source| StagingError::Parse {
            path: path.to_path_buf(),
            source,
        })
}

/// Read a launch and check its version.
pub fn read_launch(staging: &Staging) -> Result<Option<Launch>, StagingError> {
    let path = staging.launch();
    let launch: Option<Launch> = read_json(&path)?;
    match launch {
        Some(l) if l.version != VERSION => Err(StagingError::Version {
            path,
            found: l.version,
        }),
        other => Ok(other),
    }
}

/// The worker's environment (`env.json`): names to values, written 0600.
pub type Env = BTreeMap<String, String>;

/// The final record, only when it carries `token`: anything else is a stale or foreign
/// worker's and is refused (`Err` names why).
pub fn read_final(staging: &Staging, token: &str) -> Result<Option<Final>, String> {
    match read_json::<Final>(&staging.final_record()) {
        Ok(None) => Ok(None),
        Ok(Some(f)) if f.token != token => Err(format!(
            "{}: written by a worker without this attempt's token (a stale or duplicate worker)",
            staging.final_record().display()
        )),
        Ok(Some(f)) => Ok(Some(f)),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_refuse_stale_tokens() {
        let t = tempfile::tempdir().unwrap();
        let s = Staging::new(t.path().join("a"));
        s.create().unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&s.dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let launch = Launch {
            version: VERSION,
            token: "tok".into(),
            run_id: "r".into(),
            task_id: "t".into(),
            attempt: 1,
            start: "abc".into(),
            base: None,
            commit: true,
            message: "m".into(),
            checks: Checks::default(),
            sandbox: BoxRules {
                mode: crew_core::sandbox::SandboxMode::Auto,
                network: true,
                verify_network: true,
                runtime_env: vec![],
                read: vec![],
                write: vec![],
            },
            pre_step: None,
        };
        write_json(&s.launch(), &launch, 0o600).unwrap();
        assert_eq!(read_launch(&s).unwrap(), Some(launch.clone()));
        assert_eq!(read_final(&s, "tok").unwrap(), None);
        let fin = Final {
            version: VERSION,
            token: "old".into(),
            result: Some(crew_core::run::AttemptResult::NoFinalText {
                usage: Default::default(),
                model: None,
                artifacts: vec![],
            }),
            terminated: false,
            commit: None,
            host: "n1".into(),
            error: None,
            unboxed: None,
        };
        write_json(&s.final_record(), &fin, 0o600).unwrap();
        assert!(read_final(&s, "tok").unwrap_err().contains("stale"));
        write_json(
            &s.final_record(),
            &Final {
                token: "tok".into(),
                ..fin
            },
            0o600,
        )
        .unwrap();
        assert_eq!(read_final(&s, "tok").unwrap().unwrap().host, "n1");
        let mut other = launch;
        other.version = 99;
        write_json(&s.launch(), &other, 0o600).unwrap();
        assert!(matches!(
            read_launch(&s),
            Err(StagingError::Version { found: 99, .. })
        ));
    }

    #[test]
    fn ctl_messages_are_taken_in_order_once() {
        let names: Vec<String> = [
            "00000002.json",
            "00000010.json",
            "x.json",
            "00000001.json",
            "00000003.json.tmp",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(ctl_after(&names, 0), vec![1, 2, 10]);
        assert_eq!(ctl_after(&names, 2), vec![10]);
        assert_eq!(ctl_name(7), "00000007.json");
        let t = tempfile::tempdir().unwrap();
        let s = Staging::new(t.path().join("a"));
        s.create().unwrap();
        s.put_ctl(
            1,
            &Ctl::Steer {
                text: "left".into(),
            },
        )
        .unwrap();
        let back: Option<Ctl> = read_json(&s.ctl_dir().join(ctl_name(1))).unwrap();
        assert_eq!(
            back,
            Some(Ctl::Steer {
                text: "left".into()
            })
        );
    }
}

/// What a worker (or an unboxed agent, as the same user) can plant in its staging directory:
/// crewd reads and writes there, and must neither block, follow a link, nor write through one.
#[cfg(test)]
mod hostile {
    use super::*;
    use std::time::Duration;

    fn mkfifo(path: &Path) {
        let ok = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mkfifo {}", path.display());
    }

    /// `f` on another thread, its answer within 5 s or a failure (not a hung test).
    fn promptly<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the read blocked (a FIFO opened for reading waits for a writer)")
    }

    fn fin(token: &str) -> Final {
        Final {
            version: VERSION,
            token: token.into(),
            result: None,
            terminated: false,
            commit: None,
            host: "n1".into(),
            error: None,
            unboxed: None,
        }
    }

    /// A re-attached attempt's directory, or its `ctl/`, swapped for a link to a directory of
    /// the user's: neither chmod'ed nor written through.
    #[test]
    fn a_staging_directory_swapped_for_a_link_is_not_chmoded_or_written_through() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mode = || std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777;
        let msg = Ctl::Steer { text: "hi".into() };
        // The attempt's directory itself.
        let s = Staging::new(t.path().join("a"));
        std::os::unix::fs::symlink(&victim, &s.dir).unwrap();
        assert!(s.create().is_err());
        assert_eq!(mode(), 0o755, "chmod'ed through the link");
        // Its `ctl/`, swapped after the attempt was staged.
        let s = Staging::new(t.path().join("b"));
        s.create().unwrap();
        std::fs::remove_dir(s.ctl_dir()).unwrap();
        std::os::unix::fs::symlink(&victim, s.ctl_dir()).unwrap();
        assert!(s.create().is_err());
        assert!(s.put_ctl(1, &msg).is_err());
        assert_eq!(mode(), 0o755, "chmod'ed through the link");
        assert_eq!(
            std::fs::read_dir(&victim).unwrap().count(),
            0,
            "written through"
        );
    }

    #[test]
    fn a_fifo_in_place_of_the_final_record_is_refused_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        let s = Staging::new(t.path().join("a"));
        s.create().unwrap();
        mkfifo(&s.final_record());
        let got = promptly(move || read_final(&s, "tok"));
        let e = got.unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_link_in_place_of_the_final_record_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let s = Staging::new(t.path().join("a"));
        s.create().unwrap();
        // A record with the right token elsewhere (another attempt's directory, any file of
        // crewd's machine): the link is refused, not read.
        let elsewhere = t.path().join("elsewhere.json");
        write_json(&elsewhere, &fin("tok"), 0o600).unwrap();
        std::os::unix::fs::symlink(&elsewhere, s.final_record()).unwrap();
        let e = read_final(&s, "tok").unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn a_link_planted_at_a_temp_name_is_not_written_through() {
        let t = tempfile::tempdir().unwrap();
        let s = Staging::new(t.path().join("a"));
        s.create().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, "the user's file\n").unwrap();
        std::os::unix::fs::symlink(&victim, s.ctl_dir().join("00000001.json.tmp")).unwrap();
        s.put_ctl(
            1,
            &Ctl::Steer {
                text: "left".into(),
            },
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "the user's file\n"
        );
        let back: Option<Ctl> = read_json(&s.ctl_dir().join(ctl_name(1))).unwrap();
        assert_eq!(
            back,
            Some(Ctl::Steer {
                text: "left".into()
            })
        );
    }

    #[test]
    fn files_beneath_are_opened_only_through_real_directories() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("a");
        std::fs::create_dir_all(dir.join("results")).unwrap();
        std::fs::write(dir.join("results/a.txt"), "done").unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "key").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("logs")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), dir.join("results/b.txt")).unwrap();
        mkfifo(&dir.join("results/c.txt"));
        let read = |rel: &str| -> Result<Vec<u8>, StagingError> {
            let dir = dir.clone();
            let rel = rel.to_string();
            promptly(move || read_beneath(&dir, Path::new(&rel), 1 << 20))
        };
        assert_eq!(read("results/a.txt").unwrap(), b"done");
        for bad in [
            "logs/secret",
            "results/b.txt",
            "results/c.txt",
            "results/../results/a.txt",
            "/etc/passwd",
        ] {
            assert!(read(bad).is_err(), "{bad} was read");
        }
        assert!(matches!(
            read_beneath(&dir, Path::new("results/a.txt"), 3),
            Err(StagingError::TooLarge { .. })
        ));
    }
}
