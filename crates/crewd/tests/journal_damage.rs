//! Issue 14, item 1: a damaged journal is refused with a message naming it and the damage, and
//! crewd writes nothing to its files first: a flipped byte in the middle or in the newest part
//! of sled's `db`, and a cut tail, after a clean stop and after `kill -9`.

mod common;
use common::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FAST: &str = "no_output_timeout_ms = 5000\nkill_grace_ms = 500\nfinal_drain_ms = 1000\nfinal_drain_quiet_ms = 200\n";

/// Every file under `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn crc(bytes: &[u8]) -> u32 {
    // FNV-1a: enough to show which file changed in a failure message.
    bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// crewd run once on the state dir; (exit code, stderr). It must stop by itself.
fn crewd_once(d: &Daemon) -> (Option<i32>, String) {
    let mut child = Command::new(crewd_bin())
        .arg("--socket")
        .arg(&d.socket)
        .arg("--state-dir")
        .arg(&d.state_dir)
        .arg("--config")
        .arg(&d.config)
        .env("HOME", &d.home)
        .env("XDG_CONFIG_HOME", d.home.join(".config"))
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("LISTEN_FDS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "crewd kept running on a damaged journal:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Where `needle` last occurs in `hay`.
fn last_offset(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

/// sled preallocates; the length up to the last byte it wrote.
fn written_len(db: &[u8]) -> usize {
    db.iter().rposition(|b| *b != 0).map_or(0, |last| last + 1)
}

#[derive(Clone, Copy, Debug)]
enum Stop {
    Clean,
    Kill9,
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    /// One byte flipped halfway through what sled wrote.
    FlipMiddle,
    /// One byte flipped inside the newest run's last event: the part after the last snapshot.
    FlipTail,
    /// The last 4 KiB of what sled wrote cut off.
    CutTail,
}

fn damage_and_start(stop: Stop, damage: Damage) {
    let what = format!("{damage:?} after {stop:?}");
    let mut d = Daemon::start_with(Opts {
        config: FAST.into(),
        env: vec![],
    });
    let mut runs = Vec::new();
    for i in 0..4 {
        let run = d.run(&format!("acknowledged run {i}"), json!({}));
        assert_eq!(d.wait(&run), "completed", "{what}");
        runs.push(run);
    }
    match stop {
        Stop::Clean => assert!(d.stop().success(), "{what}"),
        Stop::Kill9 => d.kill9(),
    }
    let jdir = d.state_dir.join("journal");
    let db_path = jdir.join("db");
    let mut db = std::fs::read(&db_path).unwrap();
    let written = written_len(&db);
    match damage {
        Damage::FlipMiddle => db[written / 2] ^= 0x20,
        Damage::FlipTail => {
            let newest = runs.last().unwrap().as_bytes();
            let at = last_offset(&db, newest).unwrap_or_else(|| panic!("{what}: no {newest:?}"));
            db[at + 2] ^= 0x01;
        }
        Damage::CutTail => db.truncate(written.saturating_sub(4096)),
    }
    std::fs::write(&db_path, &db).unwrap();
    let before = contents(&jdir);

    let (code, stderr) = crewd_once(&d);
    assert_eq!(code, Some(1), "{what}: exit {code:?}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("crewd: ")
            && last.contains(&jdir.display().to_string())
            && last.contains("corrupt"),
        "{what}: the message does not name the journal and the damage:\n{stderr}"
    );
    let after = contents(&jdir);
    let sums = |files: &BTreeMap<PathBuf, Vec<u8>>| -> Vec<(PathBuf, usize, u32)> {
        files
            .iter()
            .map(|(p, b)| (p.clone(), b.len(), crc(b)))
            .collect()
    };
    assert_eq!(
        sums(&after),
        sums(&before),
        "{what}: the journal's files changed while it was refused:\n{stderr}"
    );
    assert!(after == before, "{what}: files changed");
    // Nothing else in the state dir was left behind by the check (the copy is removed).
    let leftovers: Vec<_> = std::fs::read_dir(&d.state_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("check"))
        .collect();
    assert!(leftovers.is_empty(), "{what}: {leftovers:?}");
    // Refused again the same way: nothing was half repaired.
    let (again, stderr2) = crewd_once(&d);
    assert_eq!(again, Some(1), "{what}: {stderr2}");
    assert!(
        contents(&jdir) == before,
        "{what}: changed by the second start"
    );
}

#[test]
fn a_flipped_byte_in_the_middle_is_refused_untouched() {
    damage_and_start(Stop::Clean, Damage::FlipMiddle);
    damage_and_start(Stop::Kill9, Damage::FlipMiddle);
}

#[test]
fn a_flipped_byte_in_the_tail_is_refused_untouched() {
    damage_and_start(Stop::Clean, Damage::FlipTail);
    damage_and_start(Stop::Kill9, Damage::FlipTail);
}

#[test]
fn a_cut_tail_is_refused_untouched() {
    damage_and_start(Stop::Clean, Damage::CutTail);
    damage_and_start(Stop::Kill9, Damage::CutTail);
}

/// The undamaged journal opens after either stop, and the second start after a clean stop is
/// the sealed one (no copy judged): both keep every run.
#[test]
fn an_intact_journal_opens_after_a_clean_stop_and_after_kill9() {
    let mut d = Daemon::start_with(Opts {
        config: FAST.into(),
        env: vec![],
    });
    let run = d.run("kept", json!({}));
    assert_eq!(d.wait(&run), "completed");
    assert!(d.stop().success());
    assert!(
        d.state_dir.join("journal/crew-journal.seal").is_file(),
        "a clean stop leaves a seal:\n{}",
        d.log_text()
    );
    d.spawn(&[]);
    assert!(
        !d.state_dir.join("journal/crew-journal.seal").exists(),
        "the seal goes once the journal is open"
    );
    assert_eq!(d.status(&run)["run"]["status"], "completed");
    d.kill9();
    d.spawn(&[]);
    assert_eq!(d.status(&run)["run"]["status"], "completed");
}
