use crate::keys::MAX_SEQ;
use crate::{Entry, JournalError};

/// Checks that `entries` continue a log whose last seq is `last_seq` without gap or overlap and
/// that every run id is indexable. Returns the new last seq.
pub(crate) fn check_append(last_seq: u64, entries: &[Entry]) -> Result<u64, JournalError> {
    let mut expected = last_seq;
    for entry in entries {
        // Past MAX_SEQ a seq no longer fits every key layout of the log (keys.rs): it is full.
        expected = expected
            .checked_add(1)
            .filter(|next| *next <= MAX_SEQ)
            .ok_or(JournalError::OutOfOrder {
                expected: u64::MAX,
                got: entry.seq,
            })?;
        if entry.seq != expected {
            return Err(JournalError::OutOfOrder {
                expected,
                got: entry.seq,
            });
        }
        if u32::try_from(entry.bytes.len()).is_err() {
            return Err(JournalError::TooLarge {
                seq: entry.seq,
                bytes: entry.bytes.len(),
            });
        }
        if let Some(run) = &entry.run {
            check_run(run)?;
        }
    }
    Ok(expected)
}

pub(crate) fn check_run(run: &str) -> Result<(), JournalError> {
    if run.as_bytes().contains(&0) {
        return Err(JournalError::InvalidRun {
            run: run.to_owned(),
        });
    }
    Ok(())
}

pub(crate) fn check_snapshot(seq: u64, last_seq: u64) -> Result<(), JournalError> {
    if seq > last_seq {
        return Err(JournalError::SnapshotAhead { seq, last_seq });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, run: Option<&str>) -> Entry {
        Entry {
            seq,
            run: run.map(str::to_owned),
            bytes: Vec::new(),
        }
    }

    #[test]
    fn check_append_table() {
        type Case = (&'static str, u64, Vec<Entry>, Result<u64, (u64, u64)>);
        let cases: Vec<Case> = vec![
            ("empty keeps last", 5, vec![], Ok(5)),
            ("first from zero", 0, vec![entry(1, None)], Ok(1)),
            ("zero seq", 0, vec![entry(0, None)], Err((1, 0))),
            (
                "contiguous",
                3,
                vec![entry(4, None), entry(5, Some("r"))],
                Ok(5),
            ),
            ("gap at start", 3, vec![entry(5, None)], Err((4, 5))),
            ("overlap", 3, vec![entry(3, None)], Err((4, 3))),
            (
                "gap inside",
                0,
                vec![entry(1, None), entry(3, None)],
                Err((2, 3)),
            ),
            (
                "repeat inside",
                0,
                vec![entry(1, None), entry(1, None)],
                Err((2, 1)),
            ),
            (
                "decreasing",
                0,
                vec![entry(1, None), entry(2, None), entry(1, None)],
                Err((3, 1)),
            ),
            (
                "overflow",
                u64::MAX,
                vec![entry(0, None)],
                Err((u64::MAX, 0)),
            ),
            (
                "last seq",
                MAX_SEQ - 1,
                vec![entry(MAX_SEQ, None)],
                Ok(MAX_SEQ),
            ),
            (
                "past the last seq",
                MAX_SEQ,
                vec![entry(MAX_SEQ + 1, None)],
                Err((u64::MAX, MAX_SEQ + 1)),
            ),
        ];
        for (name, last, entries, want) in cases {
            let got = check_append(last, &entries).map_err(|e| match e {
                JournalError::OutOfOrder { expected, got } => (expected, got),
                other => panic!("{name}: unexpected error {other}"),
            });
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn run_with_nul_is_rejected() {
        let err = check_append(0, &[entry(1, Some("a\0b"))]).unwrap_err();
        assert!(matches!(err, JournalError::InvalidRun { .. }), "{err}");
        assert!(check_run("").is_ok());
        assert!(check_run("run-1").is_ok());
    }

    #[test]
    fn snapshot_bounds() {
        assert!(check_snapshot(0, 0).is_ok());
        assert!(check_snapshot(7, 7).is_ok());
        assert!(matches!(
            check_snapshot(8, 7),
            Err(JournalError::SnapshotAhead {
                seq: 8,
                last_seq: 7
            })
        ));
    }
}
