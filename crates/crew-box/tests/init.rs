//! The init as a process: a setsid'd grandchild ends with the program, the lifeline's end ends
//! everything, signals reach the whole namespace, the exit status is the program's — as root
//! and as `nobody` (unprivileged user namespaces), in both modes.

use crew_box::spawn::{self, Lifeline, StdoutPipe};
use crew_box::Mode;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const INIT: &str = env!("CARGO_BIN_EXE_crew-box");

fn live_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|i| stat.get(i + 1..))
                .and_then(|r| r.split_whitespace().next());
            state != Some("Z") && String::from_utf8_lossy(&cmd).contains(marker)
        })
        .collect()
}

fn until_gone(marker: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !live_with(marker).is_empty() {
        assert!(Instant::now() < deadline, "{what}: {:?}", live_with(marker));
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `setpriv` to run as nobody, when this test runs as root and has it.
fn as_nobody() -> Option<Vec<&'static str>> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    (root && Path::new("/usr/bin/setpriv").exists()).then(|| {
        vec![
            "/usr/bin/setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]
    })
}

/// The users to run as: this one, and nobody where possible (said when not).
fn users() -> Vec<Vec<&'static str>> {
    let mut v = vec![vec![]];
    match as_nobody() {
        Some(n) => v.push(n),
        None => eprintln!("SKIPPED the run as `nobody`: not root, or no setpriv"),
    }
    v
}

fn command(prefix: &[&str], mode: Mode, script: &str, lifeline: Option<&Lifeline>) -> Command {
    let argv = spawn::argv(
        Path::new(INIT),
        mode,
        lifeline.and_then(Lifeline::handoff_fd),
        None,
        "/bin/sh".as_ref(),
        &[OsString::from("-c"), OsString::from(script)],
    );
    let mut all: Vec<OsString> = prefix.iter().map(OsString::from).collect();
    all.extend(argv);
    let mut c = Command::new(&all[0]);
    c.args(&all[1..])
        .stdin(Stdio::null())
        .current_dir("/")
        .process_group(0);
    c
}

fn modes() -> Vec<Mode> {
    match spawn::probe(Path::new(INIT)) {
        Ok(m) => vec![m, Mode::Reaper],
        Err(why) => {
            eprintln!("SKIPPED the PID namespace mode: {why}");
            vec![Mode::Reaper]
        }
    }
}

#[test]
fn a_setsid_grandchild_ends_with_the_program_and_the_status_is_the_programs() {
    for prefix in users() {
        for mode in modes() {
            let marker = format!("initmark{}{mode:?}{}", std::process::id(), prefix.len());
            let lifeline = Lifeline::new().unwrap();
            let script =
                format!("setsid sh -c 'while :; do sleep 0.1; done' {marker} & sleep 0.3; exit 7");
            let status = command(&prefix, mode, &script, Some(&lifeline))
                .status()
                .unwrap();
            assert_eq!(status.code(), Some(7), "{mode:?} {prefix:?}");
            until_gone(
                &marker,
                &format!("{mode:?} as {prefix:?}: the setsid'd process"),
            );
            // A signal ends it as the signal.
            let status = command(&prefix, mode, "kill -TERM $$", Some(&lifeline))
                .status()
                .unwrap();
            assert_eq!(status.signal(), Some(libc::SIGTERM), "{mode:?} {prefix:?}");
        }
    }
}

#[test]
fn cutting_the_lifeline_ends_everything() {
    for prefix in users() {
        for mode in modes() {
            let marker = format!("lifemark{}{mode:?}{}", std::process::id(), prefix.len());
            let mut lifeline = Lifeline::new().unwrap();
            let script = format!(
                "setsid sh -c 'while :; do sleep 0.1; done' {marker}-s & \
                 sh -c 'while :; do sleep 0.1; done' {marker}-g & sleep 1000"
            );
            let mut child = command(&prefix, mode, &script, Some(&lifeline))
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while live_with(&format!("{marker}-s")).is_empty() {
                assert!(Instant::now() < deadline, "never started");
                std::thread::sleep(Duration::from_millis(10));
            }
            // What crewd's death does (the kernel closes its end).
            lifeline.cut();
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(137), "{mode:?} {prefix:?}");
            until_gone(
                &marker,
                &format!("{mode:?} as {prefix:?}: after the lifeline"),
            );
        }
    }
}

/// crewd's SIGTERM travels on the lifeline (`Lifeline::signal`); the init passes it on.
#[test]
fn sigterm_reaches_a_setsid_process() {
    for mode in modes() {
        let marker = format!("termmark{}{mode:?}", std::process::id());
        let lifeline = Lifeline::new().unwrap();
        // The program waits; its setsid'd child ends on SIGTERM and leaves a file behind.
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("termed");
        let ready = dir.path().join("ready");
        let script = format!(
            "trap 'wait; exit 0' TERM; \
             setsid sh -c 'trap \"echo > {}; exit 0\" TERM; echo > {}; while :; do sleep 0.1; done' {marker} & \
             while :; do sleep 0.1; done",
            flag.display(),
            ready.display()
        );
        let mut child = command(&[], mode, &script, Some(&lifeline))
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready.exists() {
            assert!(Instant::now() < deadline, "never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(lifeline.signal(libc::SIGTERM));
        child.wait().unwrap();
        assert!(flag.exists(), "{mode:?}: the setsid'd process got SIGTERM");
        until_gone(&marker, "after SIGTERM");
    }
}

/// The program gets stdio and nothing else crewd's process had open without close-on-exec:
/// not the lifeline's read end the init inherited by number, not another attempt's lifeline
/// being handed over at the same time, not a stray fd a library left inheritable.
#[test]
fn the_program_inherits_only_stdio() {
    for mode in modes() {
        let lifeline = Lifeline::new().unwrap();
        let other = Lifeline::new().unwrap();
        // SAFETY: F_DUPFD of stdin returns a new inheritable fd, owned here.
        let stray = unsafe { OwnedFd::from_raw_fd(libc::fcntl(0, libc::F_DUPFD, 3)) };
        let fds = [
            lifeline.handoff_fd().unwrap(),
            other.handoff_fd().unwrap(),
            stray.as_raw_fd(),
        ];
        let script = fds
            .iter()
            .map(|n| format!("[ -e /proc/$$/fd/{n} ] && echo leaked {n}; "))
            .collect::<String>();
        let out = command(&[], mode, &format!("{script}true"), Some(&lifeline))
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        assert!(out.status.success(), "{mode:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "", "{mode:?}");
    }
}

/// bubblewrap, where it can make a box here. Where it cannot, a box test fails saying so,
/// never passes: `make test` (tests/run.sh) leaves these tests (`in_the_box` in their names)
/// out where bubblewrap is missing and counts them skipped.
fn bwrap() -> &'static Path {
    let bwrap = Path::new("/usr/bin/bwrap");
    if let Err(why) = bwrap
        .exists()
        .then_some(())
        .ok_or_else(|| "no /usr/bin/bwrap".to_string())
        .and_then(|()| crew_box::bwrap::probe(bwrap))
    {
        panic!("bubblewrap cannot make a box here: {why} (install Debian's `bubblewrap`)");
    }
    bwrap
}

/// `sh -c script` in a box as crewd starts it: bubblewrap itself, crew's init as the box's
/// PID 1 holding the lifeline and the program's stdout (read from the returned file).
fn in_box(bwrap: &Path, script: &str, lifeline: &Lifeline) -> (std::process::Child, std::fs::File) {
    let spec = crew_box::bwrap::BoxSpec {
        cwd: "/".into(),
        ..Default::default()
    };
    let stdout = StdoutPipe::new().unwrap();
    let argv = crew_box::bwrap::argv_with_init(
        bwrap,
        Path::new(INIT),
        &spec,
        lifeline.handoff_fd().unwrap(),
        stdout.handoff.as_raw_fd(),
        "/bin/sh".as_ref(),
        &[OsString::from("-c"), OsString::from(script)],
    );
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    (child, std::fs::File::from(stdout.read))
}

/// The box as crewd starts it: crew's init is the box's PID 1 (bubblewrap adds no init of its
/// own), the program's stdout and status come through, and a setsid'd process the program
/// left ends with it.
#[test]
fn in_the_box_crews_init_is_pid_1_and_nothing_outlives_the_program() {
    let bwrap = bwrap();
    let marker = format!("boxmark{}", std::process::id());
    let script = format!(
        "cat /proc/1/comm; ls /proc | grep -c '^[0-9]'; \
         setsid sh -c 'while :; do sleep 0.1; done' {marker} & sleep 0.2; exit 5"
    );
    let lifeline = Lifeline::new().unwrap();
    let (mut child, mut out) = in_box(bwrap, &script, &lifeline);
    let mut stdout = String::new();
    out.read_to_string(&mut stdout).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(5), "{stdout}");
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("crew-box"), "the box's PID 1: {stdout}");
    // The init, sh, the setsid'd sh and its sleep, ls and grep at most: no bwrap init.
    let n: usize = lines.next().and_then(|l| l.trim().parse().ok()).unwrap();
    assert!(n <= 6, "processes in the box: {n}");
    until_gone(&marker, "the setsid'd process in the box");
}

/// crewd's SIGTERM reaches the program in the box (its grace: it answers and exits as it
/// chooses), though crewd can name no process there.
#[test]
fn sigterm_on_the_lifeline_reaches_the_program_in_the_box() {
    let bwrap = bwrap();
    let lifeline = Lifeline::new().unwrap();
    let script = "trap 'echo termed; exit 3' TERM; echo ready; while :; do sleep 0.05; done";
    let (mut child, out) = in_box(bwrap, script, &lifeline);
    let mut lines = BufReader::new(out).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    assert!(lifeline.signal(libc::SIGTERM));
    assert_eq!(lines.next().unwrap().unwrap(), "termed");
    assert_eq!(child.wait().unwrap().code(), Some(3));
}

/// bubblewrap's processes hold their stdio for the box's whole life; the program's stdout is
/// not theirs, so a program that closes it is seen to at once, while it still runs.
#[test]
fn a_program_in_the_box_that_closes_its_stdout_is_seen_to() {
    let bwrap = bwrap();
    let mut lifeline = Lifeline::new().unwrap();
    let (mut child, mut out) = in_box(bwrap, "echo answer; exec >&-; sleep 1000", &lifeline);
    let mut stdout = String::new();
    out.read_to_string(&mut stdout).unwrap();
    assert_eq!(stdout, "answer\n");
    assert!(child.try_wait().unwrap().is_none(), "still running");
    lifeline.cut();
    assert_eq!(child.wait().unwrap().code(), Some(137));
}

/// An fd handed to another attempt's init (a lifeline, a box's stdout) may be inherited by
/// this one in the same instant: the init closes it, or that attempt's stdout would not end
/// while this attempt runs.
#[test]
fn the_init_keeps_no_other_fd_it_inherited() {
    for mode in modes() {
        let lifeline = Lifeline::new().unwrap();
        let other = StdoutPipe::new().unwrap();
        let mut child = command(&[], mode, "sleep 1000", Some(&lifeline))
            .spawn()
            .unwrap();
        let StdoutPipe { read, handoff } = other;
        drop(handoff);
        let mut poll = libc::pollfd {
            fd: read.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one local pollfd.
        let n = unsafe { libc::poll(&mut poll, 1, 10_000) };
        assert_eq!(n, 1, "{mode:?}: the other stream never ended");
        assert!(
            child.try_wait().unwrap().is_none(),
            "{mode:?}: still running"
        );
        drop(lifeline);
        child.wait().unwrap();
    }
}

/// The program gets SIGPIPE's default back whatever the init does with it: `yes | head` ends
/// quietly, as in a shell (ignored, `yes` would print "Broken pipe").
#[test]
fn the_program_dies_of_sigpipe_as_in_a_shell() {
    for mode in modes() {
        let lifeline = Lifeline::new().unwrap();
        let out = command(&[], mode, "yes | head -1 >/dev/null", Some(&lifeline))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(out.status.success(), "{mode:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{mode:?}");
    }
}
