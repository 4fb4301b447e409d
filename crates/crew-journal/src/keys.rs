//! On-disk key and value layouts of the sled trees.
//!
//! - `log`: the events and their per-run index, in one tree so that one append is one sled
//!   batch, which sled applies atomically (a transaction over two trees cost ~14% of crewd's
//!   CPU in bench-journal).
//!   - event: key = seq as big-endian u64 (byte order == numeric order), value = the entry's
//!     bytes. Seqs stay below [`INDEX_TAG`] `<< 56`, so an event key never starts with the tag.
//!   - index group: key = [`INDEX_TAG`] + run bytes + 0x00 + first seq (BE u64) of one append's
//!     entries of that run, value = those entries' seqs as concatenated BE u64s. One key per run
//!     per append, not per entry: a group commit of N events over R runs costs R index writes
//!     instead of N. Run ids never contain NUL, so `tag + run + 0x00` is a prefix owned by
//!     exactly one run. Index keys sort after every event key, so ranges of seq keys never see
//!     them.
//! - `by_run`: where journals written before the index moved into `log` kept it (same keys
//!   without the tag). `open` moves what it finds there into `log` and empties it.
//! - `meta`: [`META_LAST_SEQ`] (BE u64, written when entries are removed so `last_seq` cannot go
//!   down), [`META_SNAPSHOT`] (BE u64 seq followed by the snapshot bytes) and [`META_EPOCH`] (BE
//!   u64 count of snapshot and forget writes, checked against the marker file at open).

pub(crate) const LOG_TREE: &str = "log";
pub(crate) const BY_RUN_TREE: &str = "by_run";
pub(crate) const META_TREE: &str = "meta";

pub(crate) const META_LAST_SEQ: &[u8] = b"last_seq";
pub(crate) const META_SNAPSHOT: &[u8] = b"snapshot";
pub(crate) const META_EPOCH: &[u8] = b"epoch";

/// First byte of every index key in `log`.
pub(crate) const INDEX_TAG: u8 = 0xFF;

/// The highest seq an event may have: its key must not start with [`INDEX_TAG`].
pub(crate) const MAX_SEQ: u64 = ((INDEX_TAG as u64) << 56) - 1;

/// Upper bound (exclusive) of the event keys in `log`.
pub(crate) const EVENTS_END: [u8; 1] = [INDEX_TAG];

pub(crate) fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

pub(crate) fn decode_seq(bytes: &[u8]) -> Option<u64> {
    let array: [u8; 8] = bytes.try_into().ok()?;
    Some(u64::from_be_bytes(array))
}

/// The key prefix of one run's index groups in `log`.
pub(crate) fn run_prefix(run: &str) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(run.len() + 10);
    prefix.push(INDEX_TAG);
    prefix.extend_from_slice(run.as_bytes());
    prefix.push(0);
    prefix
}

pub(crate) fn group_key(prefix: &[u8], first_seq: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + 8);
    key.extend_from_slice(prefix);
    key.extend_from_slice(&seq_key(first_seq));
    key
}

/// The first seq named by an index key, if the key belongs to `prefix`'s run and is well formed.
pub(crate) fn group_key_seq(key: &[u8], prefix: &[u8]) -> Option<u64> {
    decode_seq(key.strip_prefix(prefix)?)
}

pub(crate) fn encode_group(seqs: &[u64]) -> Vec<u8> {
    seqs.iter().flat_map(|seq| seq.to_be_bytes()).collect()
}

/// The seqs of one index group; `None` unless they are non-empty, strictly increasing and start
/// at `first_seq` (the key's seq).
pub(crate) fn decode_group(value: &[u8], first_seq: u64) -> Option<Vec<u64>> {
    if value.is_empty() || !value.len().is_multiple_of(8) {
        return None;
    }
    let seqs: Vec<u64> = value.chunks_exact(8).filter_map(decode_seq).collect();
    let increasing = seqs.windows(2).all(|pair| matches!(pair, [a, b] if a < b));
    (seqs.first() == Some(&first_seq) && increasing).then_some(seqs)
}

pub(crate) fn encode_snapshot(seq: u64, bytes: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(8 + bytes.len());
    value.extend_from_slice(&seq_key(seq));
    value.extend_from_slice(bytes);
    value
}

pub(crate) fn decode_snapshot(value: &[u8]) -> Option<(u64, &[u8])> {
    let (seq, bytes) = value.split_at_checked(8)?;
    Some((decode_seq(seq)?, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_keys_sort_numerically() {
        let seqs = [0u64, 1, 255, 256, 65_535, 1 << 40, u64::MAX];
        for pair in seqs.windows(2) {
            if let [a, b] = pair {
                assert!(seq_key(*a) < seq_key(*b), "{a} < {b}");
                assert_eq!(decode_seq(&seq_key(*a)), Some(*a));
            }
        }
        assert_eq!(decode_seq(&[1, 2, 3]), None);
    }

    #[test]
    fn group_round_trip_and_validation() {
        type Case = (&'static str, Vec<u8>, u64, Option<Vec<u64>>);
        let cases: Vec<Case> = vec![
            ("one", encode_group(&[7]), 7, Some(vec![7])),
            ("many", encode_group(&[7, 9, 30]), 7, Some(vec![7, 9, 30])),
            ("empty", Vec::new(), 7, None),
            ("ragged", vec![0; 9], 0, None),
            ("wrong first", encode_group(&[8, 9]), 7, None),
            ("not increasing", encode_group(&[7, 7]), 7, None),
            ("decreasing", encode_group(&[7, 9, 8]), 7, None),
        ];
        for (name, value, first, want) in cases {
            assert_eq!(decode_group(&value, first), want, "{name}");
        }
    }

    #[test]
    fn index_keys_sort_after_every_event_key() {
        let index = group_key(&run_prefix(""), 0);
        for seq in [0, 1, 1 << 40, MAX_SEQ] {
            assert!(seq_key(seq).as_slice() < index.as_slice(), "{seq}");
            assert!(seq_key(seq).as_slice() < EVENTS_END.as_slice(), "{seq}");
        }
        assert!(seq_key(MAX_SEQ + 1).as_slice() >= EVENTS_END.as_slice());
    }

    #[test]
    fn group_keys_belong_to_one_run() {
        let prefix = run_prefix("a");
        let key = group_key(&prefix, 42);
        assert_eq!(group_key_seq(&key, &prefix), Some(42));
        assert_eq!(group_key_seq(&key, &run_prefix("b")), None);
        // a longer run sharing the bytes "a" never parses as run "a"
        let other = group_key(&run_prefix("ab"), 42);
        assert_eq!(group_key_seq(&other, &prefix), None);
    }

    #[test]
    fn snapshot_round_trip() {
        let value = encode_snapshot(9, b"state");
        assert_eq!(decode_snapshot(&value), Some((9, &b"state"[..])));
        assert_eq!(
            decode_snapshot(&encode_snapshot(0, b"")),
            Some((0, &b""[..]))
        );
        assert_eq!(decode_snapshot(b"short"), None);
    }
}
