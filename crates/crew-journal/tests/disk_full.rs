//! ENOSPC: the journal is put on a tiny tmpfs (in a private user+mount namespace, so no root and
//! no trace outside the test) and appended to until the disk is full.

mod support;

use std::io::{ErrorKind, Write};
use std::path::Path;
use std::process::Command;

use crew_journal::{Entry, Journal, JournalError, SledJournal, DEFAULT_CACHE_BYTES};
use support::journal::reopen_journal;
use support::{self_test_command, ChildLines};

const CHILD_DIR: &str = "CREW_JOURNAL_ENOSPC_CHILD_DIR";
/// Exit code of the wrapper when the tmpfs cannot be mounted on this machine.
const NO_TMPFS: i32 = 77;

fn batch(from: u64, len: u64) -> Vec<Entry> {
    (from..from + len)
        .map(|seq| Entry {
            seq,
            run: Some(format!("run-{}", seq % 3)),
            bytes: vec![b'x'; 1000],
        })
        .collect()
}

/// The child: runs only when re-executed by the test below, inside the namespace.
#[test]
fn enospc_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let mut out = std::io::stdout().lock();
    // the harness has printed "test enospc_child ... " without a newline
    writeln!(out).unwrap();
    // Space to give back once the disk is full.
    let filler = Path::new(&dir).with_file_name("filler");
    std::fs::write(&filler, vec![0u8; 1 << 20]).unwrap();
    let journal = SledJournal::open(Path::new(&dir), DEFAULT_CACHE_BYTES).unwrap();
    let mut acked = 0;
    let error = loop {
        match journal.append(&batch(acked + 1, 64)) {
            Ok(()) => acked += 64,
            Err(err) => break err,
        }
        assert!(acked < 1_000_000, "the disk never filled up");
    };
    writeln!(out, "ACKED {acked}").unwrap();
    writeln!(out, "ERROR {error}").unwrap();
    match &error {
        JournalError::Io { source, .. } => writeln!(
            out,
            "STORAGE FULL {}",
            source.kind() == ErrorKind::StorageFull
        )
        .unwrap(),
        other => writeln!(out, "NOT IO {other:?}").unwrap(),
    }
    // Poisoned from now on, but the acknowledged entries are still readable.
    let after = [
        journal.append(&batch(acked + 1, 1)).err(),
        journal.write_snapshot(acked, b"state").err(),
        journal.forget_run("run-1").err(),
    ];
    let poisoned = after
        .iter()
        .all(|e| matches!(e, Some(JournalError::Poisoned { .. })));
    writeln!(out, "POISONED {poisoned}").unwrap();
    writeln!(out, "LAST {}", journal.last_seq()).unwrap();
    // sled fails every later operation of this handle with the same error, reads included;
    // whatever a read returns must be either right or that error.
    let read = match journal.read_after(0, usize::MAX) {
        Ok(items) => {
            let seqs: Vec<u64> = items.into_iter().map(|(seq, _)| seq).collect();
            (seqs == (1..=acked).collect::<Vec<_>>()).to_string()
        }
        Err(JournalError::Io { source, .. }) if source.kind() == ErrorKind::StorageFull => {
            "io error".to_owned()
        }
        Err(other) => format!("unexpected {other:?}"),
    };
    writeln!(out, "READ {read}").unwrap();
    drop(journal);
    writeln!(out, "DROPPED").unwrap();
    // Reopening on the still-full disk: either refused with an error or complete, never less.
    // sled's background threads release the lock of the dropped handle a moment after the drop.
    // Reopened as crewd does after a failed write: in place, as there is no room to judge a
    // copy of the files first (they are the ones this process was writing).
    let reopened = reopen_journal(Path::new(&dir));
    match reopened {
        Ok(journal) => {
            let seqs: Vec<u64> = journal
                .read_after(0, usize::MAX)
                .unwrap()
                .into_iter()
                .map(|(seq, _)| seq)
                .collect();
            let last = journal.last_seq();
            let complete = last >= acked && seqs == (1..=last).collect::<Vec<_>>();
            writeln!(out, "REOPEN complete={complete} last={last}").unwrap();
        }
        Err(err) => writeln!(out, "REOPEN FAILED {err}").unwrap(),
    }
    // With space again, everything acknowledged is there and appending goes on.
    std::fs::remove_file(&filler).unwrap();
    // sled's background threads release the lock of a dropped handle shortly after the drop.
    let journal = match reopen_journal(Path::new(&dir)) {
        Ok(journal) => journal,
        Err(err) => panic!("opening with space again: {err}"),
    };
    let last = journal.last_seq();
    let seqs: Vec<u64> = journal
        .read_after(0, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(seq, _)| seq)
        .collect();
    let complete = last >= acked && seqs == (1..=last).collect::<Vec<_>>();
    let resumed = journal.append(&batch(last + 1, 1)).is_ok();
    writeln!(out, "FREED complete={complete} resumed={resumed}").unwrap();
    out.flush().unwrap();
}

#[test]
fn disk_full_surfaces_as_io_error_and_poisons() {
    let mount = tempfile::tempdir().unwrap();
    let exe = self_test_command("enospc_child");
    let mut command = Command::new("unshare");
    command
        .args(["--user", "--map-root-user", "--mount", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs -o size=2m tmpfs \"$0\" || exit {NO_TMPFS}; exec \"$@\""
        ))
        .arg(mount.path())
        .arg(exe.get_program())
        .args(exe.get_args())
        .env(CHILD_DIR, mount.path().join("journal"));
    let child = ChildLines::spawn(command);
    let (lines, status) = child.finish();
    if status.code() == Some(NO_TMPFS) || (lines.is_empty() && !status.success()) {
        panic!("cannot mount a tmpfs in a user namespace here ({status}); `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped");
    }
    let output = lines.join("\n");
    assert!(status.success(), "child failed ({status}):\n{output}");
    let value = |key: &str| -> &str {
        lines
            .iter()
            .find_map(|line| line.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key:?} in:\n{output}"))
            .trim()
    };
    let acked: u64 = value("ACKED ").parse().unwrap();
    assert!(acked > 0, "{output}");
    assert!(
        value("ERROR ").ends_with("No space left on device (os error 28)"),
        "{output}"
    );
    assert_eq!(value("STORAGE FULL "), "true", "{output}");
    assert_eq!(value("POISONED "), "true", "{output}");
    assert_eq!(value("LAST "), acked.to_string(), "{output}");
    assert!(["true", "io error"].contains(&value("READ ")), "{output}");
    value("DROPPED");
    let reopen = value("REOPEN ");
    assert!(
        reopen.starts_with("complete=true") || reopen.starts_with("FAILED journal I/O error"),
        "{output}"
    );
    assert_eq!(value("FREED "), "complete=true resumed=true", "{output}");
    eprintln!("{output}");
}
