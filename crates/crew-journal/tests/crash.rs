//! Crash consistency: a child appends in a loop, printing each acknowledged seq, and is
//! SIGKILLed at an arbitrary moment; after reopening, every acknowledged seq must be there and
//! the log must be contiguous, with the run index agreeing with the log.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use crew_journal::{Entry, Journal, SledJournal, DEFAULT_CACHE_BYTES};
use support::{self_test_command, ChildLines};

const CHILD_DIR: &str = "CREW_JOURNAL_CRASH_CHILD_DIR";
const RUNS: u64 = 5;

fn run_of(seq: u64) -> String {
    format!("run-{}", seq % RUNS)
}

fn bytes_of(seq: u64) -> Vec<u8> {
    let mut bytes = format!("{seq}:{}:", run_of(seq)).into_bytes();
    bytes.resize(300, b'.');
    bytes
}

/// The child: runs only when re-executed by the test below with CHILD_DIR set.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let journal = SledJournal::open(Path::new(&dir), DEFAULT_CACHE_BYTES).unwrap();
    let mut seq = journal.last_seq();
    let mut out = std::io::stdout().lock();
    for round in 0u64.. {
        // Varying batch sizes; every 7th entry has no run.
        let size = 1 + (round * 37) % 120;
        let entries: Vec<Entry> = (seq + 1..=seq + size)
            .map(|s| Entry {
                seq: s,
                run: (s % 7 != 0).then(|| run_of(s)),
                bytes: bytes_of(s),
            })
            .collect();
        journal.append(&entries).unwrap();
        seq += size;
        writeln!(out, "ACK {seq}").unwrap();
        if round % 10 == 9 {
            journal
                .write_snapshot(seq, format!("state at {seq}").as_bytes())
                .unwrap();
            writeln!(out, "SNAP {seq}").unwrap();
        }
        out.flush().unwrap();
    }
}

fn check_recovered(dir: &Path, acked: u64, snapshot_acked: u64) -> u64 {
    let journal = SledJournal::open(dir, DEFAULT_CACHE_BYTES).unwrap();
    let last = journal.last_seq();
    assert!(last >= acked, "last_seq {last} < acknowledged {acked}");
    let all = journal.read_after(0, usize::MAX).unwrap();
    let seqs: Vec<u64> = all.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(
        seqs,
        (1..=last).collect::<Vec<_>>(),
        "log is not contiguous"
    );
    let mut by_run: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (seq, bytes) in &all {
        assert_eq!(bytes, &bytes_of(*seq), "bytes of seq {seq}");
        if seq % 7 != 0 {
            by_run.entry(run_of(*seq)).or_default().push(*seq);
        }
    }
    for (run, want) in by_run {
        let got: Vec<u64> = journal
            .read_run_after(&run, 0, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|(seq, _)| seq)
            .collect();
        assert_eq!(got, want, "index of {run}");
    }
    let snapshot = journal.read_snapshot().unwrap();
    let snapshot_seq = snapshot.as_ref().map_or(0, |(seq, _)| *seq);
    assert!(
        snapshot_seq >= snapshot_acked,
        "snapshot {snapshot_seq} < acknowledged {snapshot_acked}"
    );
    if let Some((seq, bytes)) = snapshot {
        assert_eq!(bytes, format!("state at {seq}").into_bytes());
    }
    last
}

/// Notes an acknowledgement printed by the child; true for an append's.
fn record(line: &str, acked: &mut u64, snapshot_acked: &mut u64) -> bool {
    if let Some(seq) = line.strip_prefix("ACK ") {
        *acked = seq.parse().unwrap();
        return true;
    }
    if let Some(seq) = line.strip_prefix("SNAP ") {
        *snapshot_acked = seq.parse().unwrap();
    }
    false
}

#[test]
fn acknowledged_entries_survive_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("journal");
    let mut acked = 0;
    let mut snapshot_acked = 0;
    for round in 0..8u64 {
        let mut command = self_test_command("crash_child");
        command.env(CHILD_DIR, &dir);
        let mut child = ChildLines::spawn(command);
        let kill_after = 3 + round * 17;
        let mut acks_this_round = 0;
        while acks_this_round < kill_after {
            let line = child.next_line().expect("child exited before being killed");
            if record(&line, &mut acked, &mut snapshot_acked) {
                acks_this_round += 1;
            }
        }
        child.kill();
        // Lines already in the pipe were printed after their append returned: acknowledged too.
        let (rest, status) = child.finish();
        for line in rest {
            record(&line, &mut acked, &mut snapshot_acked);
        }
        assert!(!status.success(), "the child was killed, not finished");
        let last = check_recovered(&dir, acked, snapshot_acked);
        eprintln!("round {round}: acknowledged {acked}, recovered {last}");
    }
}
