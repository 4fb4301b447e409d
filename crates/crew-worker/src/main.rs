//! `crew-worker STAGING_DIR`: one attempt of a crew task on a cluster node.
//!
//! crewd prepared the staging directory (`crew_staging`): the start commit as a bundle, the
//! launch (argv, stdin), the filtered environment. The worker checks the start commit out in
//! the node's scratch directory, runs the agent there exactly as crewd built its argv, streams
//! its stdout to the staging directory a line at a time and feeds it the stdin batches crewd
//! writes (live mode: the first turn, steer messages, protocol replies), then commits what the
//! agent changed, bundles the commit and writes the final record with the attempt's token.
//! SIGTERM (a cancel, a time limit) is passed to the agent's process group; what it printed is
//! already in the staging directory, and the final record says it was terminated.
//!
//! It never depends on crewd: the staging format is the whole contract.

use anyhow::{bail, Context, Result};
use crew_staging::{Final, Launch, Staging, Stdin};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc_int) {
    TERMINATED.store(true, Ordering::SeqCst);
}
#[allow(non_camel_case_types)]
type libc_int = std::ffi::c_int;

/// How often the stdin directory is looked at.
const STDIN_POLL: Duration = Duration::from_millis(100);
/// A stdout line longer than this is cut (crewd bounds lines again where they enter).
const LINE_MAX: usize = 1 << 20;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: crew-worker STAGING_DIR");
        std::process::exit(2);
    };
    let staging = Staging::new(PathBuf::from(dir));
    let launch = match crew_staging::read_launch(&staging) {
        Ok(Some(l)) => l,
        Ok(None) => {
            eprintln!("crew-worker: {} has no launch.json", staging.dir.display());
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("crew-worker: {e}");
            std::process::exit(2);
        }
    };
    install_term_handler();
    let host = hostname();
    let record = match run(&staging, &launch) {
        Ok(mut f) => {
            f.host = host;
            f
        }
        Err(e) => Final {
            version: crew_staging::VERSION,
            token: launch.token.clone(),
            exit_code: None,
            signal: None,
            terminated: TERMINATED.load(Ordering::SeqCst),
            result: None,
            host,
            error: Some(format!("{e:#}")),
        },
    };
    if let Err(e) = crew_staging::write_json(&staging.final_record(), &record, 0o600) {
        eprintln!("crew-worker: cannot write the final record: {e}");
        std::process::exit(1);
    }
}

fn install_term_handler() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(on_term),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let _ = sigaction(Signal::SIGTERM, &action);
        let _ = sigaction(Signal::SIGINT, &action);
    }
}

fn hostname() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_default()
}

/// The node's scratch directory for this attempt: `$TMPDIR` (Slurm sets it per job on many
/// clusters), else `/tmp`.
fn scratch(launch: &Launch) -> PathBuf {
    let base = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join(format!(
        "crew-worker-{}-{}-{}-{}",
        launch.run_id,
        launch.task_id,
        launch.attempt,
        std::process::id()
    ))
}

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .arg("-c")
        .arg("core.hooksPath=/dev/null")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "crew")
        .env("GIT_AUTHOR_EMAIL", "crew@localhost")
        .env("GIT_COMMITTER_NAME", "crew")
        .env("GIT_COMMITTER_EMAIL", "crew@localhost")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("git {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The start commit, checked out detached in a fresh repository.
fn checkout(staging: &Staging, launch: &Launch, work: &Path) -> Result<()> {
    std::fs::create_dir_all(work).with_context(|| format!("create {}", work.display()))?;
    git(work, &["init", "-q"])?;
    let bundle = staging.input_bundle().display().to_string();
    git(work, &["fetch", "-q", &bundle, crew_staging::START_REF])?;
    git(work, &["checkout", "-q", "--detach", &launch.start])?;
    Ok(())
}

fn run(staging: &Staging, launch: &Launch) -> Result<Final> {
    let env: crew_staging::Env = crew_staging::read_json(&staging.env())?.unwrap_or_default();
    let root = scratch(launch);
    let work = root.join("work");
    let result = (|| {
        checkout(staging, launch, &work)?;
        let (exit_code, signal) = run_agent(staging, launch, &env, &work)?;
        let result = if launch.commit {
            commit(staging, launch, &work)?
        } else {
            None
        };
        Ok(Final {
            version: crew_staging::VERSION,
            token: launch.token.clone(),
            exit_code,
            signal,
            terminated: TERMINATED.load(Ordering::SeqCst),
            result,
            host: String::new(),
            error: None,
        })
    })();
    let _ = std::fs::remove_dir_all(&root);
    result
}

/// Run the agent to its end. (exit code, signal).
fn run_agent(
    staging: &Staging,
    launch: &Launch,
    env: &crew_staging::Env,
    work: &Path,
) -> Result<(Option<i32>, Option<i32>)> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let argv: Vec<String> = launch
        .argv
        .iter()
        .map(|a| crew_staging::expand(a, &staging.dir, work))
        .collect();
    let Some((program, args)) = argv.split_first() else {
        bail!("the launch has an empty argv");
    };
    let stdin = match &launch.stdin {
        Stdin::Null => Stdio::null(),
        Stdin::Pipe => Stdio::piped(),
        Stdin::File(name) => {
            let path = staging.dir.join(name);
            Stdio::from(
                std::fs::File::open(&path).with_context(|| format!("open {}", path.display()))?,
            )
        }
    };
    let stderr = std::fs::File::create(staging.stderr()).context("create stderr.log")?;
    let mut child = Command::new(program)
        .args(args)
        .current_dir(work)
        .env_clear()
        .envs(env)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .process_group(0)
        .spawn()
        .with_context(|| format!("start `{program}`"))?;
    let pid = child.id();
    let stdout = child.stdout.take().context("the agent's stdout")?;
    let out_path = staging.stdout();
    let pump_out = std::thread::spawn(move || copy_lines(stdout, &out_path));
    let done = Arc::new(AtomicBool::new(false));
    let pump_in = child.stdin.take().map(|w| {
        let dir = staging.stdin_dir();
        let done = done.clone();
        std::thread::spawn(move || feed_stdin(w, &dir, &done))
    });
    let mut termed = false;
    let status = loop {
        if let Some(s) = child.try_wait().context("wait for the agent")? {
            break s;
        }
        if TERMINATED.load(Ordering::SeqCst) && !termed {
            termed = true;
            signal_group(pid, nix::sys::signal::Signal::SIGTERM);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    done.store(true, Ordering::SeqCst);
    // Whatever the agent left in its group goes with it.
    signal_group(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = pump_out.join();
    if let Some(p) = pump_in {
        let _ = p.join();
    }
    Ok((status.code(), status.signal()))
}

fn signal_group(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(p), sig);
    }
}

/// The agent's stdout to `path`, a line at a time, each flushed as it comes so crewd reads
/// it live.
fn copy_lines(from: impl Read, path: &Path) -> std::io::Result<()> {
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut r = BufReader::with_capacity(64 << 10, from);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = r
            .by_ref()
            .take(LINE_MAX as u64)
            .read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        out.write_all(&line)?;
        out.flush()?;
    }
}

/// Feed the stdin batches crewd writes, in order, until `close` or the agent's end.
fn feed_stdin(mut w: std::process::ChildStdin, dir: &Path, done: &AtomicBool) {
    let mut after = 0u64;
    while !done.load(Ordering::SeqCst) {
        let names: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        for n in crew_staging::stdin_batches_after(&names, after) {
            let Ok(bytes) = std::fs::read(dir.join(crew_staging::stdin_name(n))) else {
                break;
            };
            if w.write_all(&bytes).and_then(|()| w.flush()).is_err() {
                return;
            }
            after = n;
        }
        // Closed only once every batch before it was written.
        if names.iter().any(|n| n == "close")
            && crew_staging::stdin_batches_after(&names, after).is_empty()
        {
            return;
        }
        std::thread::sleep(STDIN_POLL);
    }
}

/// Commit what the agent changed and bundle it: `None` when it changed nothing.
fn commit(staging: &Staging, launch: &Launch, work: &Path) -> Result<Option<String>> {
    git(work, &["add", "-A"])?;
    if git(work, &["status", "--porcelain"])?.is_empty() {
        return Ok(None);
    }
    git(
        work,
        &["commit", "-q", "--no-verify", "-m", &launch.message],
    )?;
    let head = git(work, &["rev-parse", "HEAD"])?;
    git(work, &["update-ref", crew_staging::RESULT_REF, &head])?;
    let tmp = staging.dir.join("result.bundle.tmp");
    let tmp_s = tmp.display().to_string();
    let not_start = format!("^{}", launch.start);
    git(
        work,
        &[
            "bundle",
            "create",
            "-q",
            &tmp_s,
            crew_staging::RESULT_REF,
            &not_start,
        ],
    )?;
    std::fs::rename(&tmp, staging.result_bundle()).context("rename the result bundle")?;
    Ok(Some(head))
}
