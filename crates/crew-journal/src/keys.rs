//! On-disk key and value layouts of the sled trees.
//!
//! - `log`: the events and their per-run index, in one tree so that one append is one sled
//!   batch, which sled applies atomically (a transaction over two trees cost ~14% of crewd's
//!   CPU in bench-journal).
//!   - event pack: key = [`PACK_TAG`] + the seq of its first entry as big-endian u64 (byte
//!     order == numeric order), value = consecutive entries of one append, each as seq (BE
//!     u64), length (BE u32) and bytes, at most [`PACK_BYTES`] of them unless one entry alone is
//!     bigger. A group commit of N events is a few sled keys instead of N: sled's cost is per
//!     key (its page table and tree), so packing made the journal several times faster and its
//!     memory per event smaller (see `examples/pack_probe.rs`). The pack holding seq `s` is the
//!     one with the greatest key `<= s`: appends are contiguous, so packs never interleave.
//!     `forget_run` rewrites a pack without the run's entries and keeps its key.
//!   - legacy event: journals written before packing kept one event per key: key = seq as BE
//!     u64, value = the entry's bytes. They are read and forgotten as they are, never written.
//!     Seqs stay below [`PACK_TAG`] `<< 56`, so a legacy key never starts with a tag, and all of
//!     them sort before every pack (they are older, too).
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

use std::ops::Range;

pub(crate) const LOG_TREE: &str = "log";
pub(crate) const BY_RUN_TREE: &str = "by_run";
pub(crate) const META_TREE: &str = "meta";

pub(crate) const META_LAST_SEQ: &[u8] = b"last_seq";
pub(crate) const META_SNAPSHOT: &[u8] = b"snapshot";
pub(crate) const META_EPOCH: &[u8] = b"epoch";

/// First byte of every index key in `log`.
pub(crate) const INDEX_TAG: u8 = 0xFF;

/// First byte of every event pack key in `log`.
pub(crate) const PACK_TAG: u8 = 0xFE;

/// The highest seq an event may have: a legacy event key must not start with a tag.
pub(crate) const MAX_SEQ: u64 = ((PACK_TAG as u64) << 56) - 1;

/// Upper bound (exclusive) of the legacy event keys, lower bound of the packs.
pub(crate) const PACKS_START: [u8; 1] = [PACK_TAG];

/// Upper bound (exclusive) of the event keys (legacy and packed) in `log`.
pub(crate) const EVENTS_END: [u8; 1] = [INDEX_TAG];

/// Payload bytes after which an append starts a new pack. Bigger packs write faster but leave
/// more recently written data in sled's memory: its cache evicts only as pages are accessed,
/// and a pack is one access for many events (bench-memory, first 10,000 tasks: 8 KiB packs
/// +32.2 MiB, 2 KiB +24.8 to +27.3, 1 KiB +22.3 to +25.7, one event per key +19.8 to +23.1;
/// the growth after that is about the same). At 1 KiB crewd's journal path still writes
/// 141k events/s, 1.8 times the one-key-per-event loop. sled stores a page bigger than a
/// quarter of its 512 KiB segment as a separate blob file; packs stay far below that.
pub(crate) const PACK_BYTES: usize = 1 << 10;

/// Bytes of an entry's header in a pack: seq and length.
const PACKED_HEADER: usize = 12;

pub(crate) fn seq_key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

pub(crate) fn decode_seq(bytes: &[u8]) -> Option<u64> {
    let array: [u8; 8] = bytes.try_into().ok()?;
    Some(u64::from_be_bytes(array))
}

pub(crate) fn pack_key(first_seq: u64) -> [u8; 9] {
    let mut key = [PACK_TAG; 9];
    key[1..].copy_from_slice(&first_seq.to_be_bytes());
    key
}

/// The first seq of a pack key; `None` for any other key.
pub(crate) fn decode_pack_key(key: &[u8]) -> Option<u64> {
    match key.split_first() {
        Some((&PACK_TAG, seq)) => decode_seq(seq),
        _ => None,
    }
}

/// First byte of a checked pack's value. An unchecked pack (written before packs carried a
/// checksum) starts with the big-endian seq of its first entry, whose first byte is below
/// [`PACK_TAG`], so it never starts with this byte.
pub(crate) const CHECKED: u8 = 0xFF;

/// A checked pack's header: [`CHECKED`], the last seq the pack covers (BE u64), CRC-32 (BE u32).
const CHECKED_HEADER: usize = 13;

/// One pack, decoded and checked.
pub(crate) struct DecodedPack {
    /// The last seq the pack covers. For a checked pack that is the last seq of the append that
    /// wrote it, whatever `forget_run` removed since: checked packs tile the seqs without gaps,
    /// so a missing pack shows. For an unchecked pack it is its last remaining entry.
    pub last: u64,
    pub checked: bool,
    /// (seq, byte range in the value), in seq order; empty only in a checked pack whose entries
    /// were all forgotten.
    pub entries: Vec<(u64, Range<usize>)>,
}

/// An append's entries as checked packs: (first seq, value), in seq order.
pub(crate) fn encode_packs(entries: &[crate::Entry]) -> Vec<(u64, Vec<u8>)> {
    let mut packs: Vec<(u64, u64, Vec<u8>)> = Vec::new();
    for entry in entries {
        let start_new = match packs.last() {
            Some((_, _, value)) => {
                value.len() - CHECKED_HEADER + PACKED_HEADER + entry.bytes.len() > PACK_BYTES
            }
            None => true,
        };
        if start_new {
            let len = CHECKED_HEADER + (PACKED_HEADER + entry.bytes.len()).min(PACK_BYTES);
            let mut value = Vec::with_capacity(len);
            value.resize(CHECKED_HEADER, 0);
            packs.push((entry.seq, entry.seq, value));
        }
        if let Some((_, last, value)) = packs.last_mut() {
            push_packed(value, entry.seq, &entry.bytes);
            *last = entry.seq;
        }
    }
    packs
        .into_iter()
        .map(|(first, last, mut value)| {
            seal_pack(&mut value, first, last);
            (first, value)
        })
        .collect()
}

/// A checked pack rebuilt from the entries that remain in it (`forget_run`); it keeps the
/// range it covers, even with no entry left.
pub(crate) fn encode_checked<'a>(
    first: u64,
    last: u64,
    entries: impl IntoIterator<Item = (u64, &'a [u8])>,
) -> Vec<u8> {
    let mut value = vec![0; CHECKED_HEADER];
    for (seq, bytes) in entries {
        push_packed(&mut value, seq, bytes);
    }
    seal_pack(&mut value, first, last);
    value
}

/// An unchecked pack rebuilt from the entries that remain in it (`forget_run` on a journal
/// written before checksums): it stays in its layout, as it covers no known range.
pub(crate) fn encode_unchecked<'a>(entries: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<u8> {
    let mut value = Vec::new();
    for (seq, bytes) in entries {
        push_packed(&mut value, seq, bytes);
    }
    value
}

/// Fills in a checked pack's header; `value` starts with [`CHECKED_HEADER`] bytes of room.
fn seal_pack(value: &mut [u8], first: u64, last: u64) {
    if let Some(header) = value.get_mut(..9) {
        header[0] = CHECKED;
        header[1..9].copy_from_slice(&last.to_be_bytes());
    }
    let crc = pack_crc(value, first).to_be_bytes();
    if let Some(slot) = value.get_mut(9..CHECKED_HEADER) {
        slot.copy_from_slice(&crc);
    }
}

/// CRC-32 of a checked pack: its key's seq, its header without the CRC, its entries. The key
/// is in it so that a pack read under another key does not pass.
fn pack_crc(value: &[u8], first: u64) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&first.to_be_bytes());
    hasher.update(value.get(..9).unwrap_or_default());
    hasher.update(value.get(CHECKED_HEADER..).unwrap_or_default());
    hasher.finalize()
}

fn push_packed(value: &mut Vec<u8>, seq: u64, bytes: &[u8]) {
    // An entry of 4 GiB or more cannot be packed; the daemon caps events far below that and
    // `check_append` refuses them.
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    value.extend_from_slice(&seq.to_be_bytes());
    value.extend_from_slice(&len.to_be_bytes());
    value.extend_from_slice(bytes);
}

/// Decodes the pack stored under the key of `first_seq`, checking its checksum (checked packs)
/// and that its entries are strictly increasing, within what it covers, and fill the value
/// exactly. The error says what is wrong.
pub(crate) fn decode_pack(value: &[u8], first_seq: u64) -> Result<DecodedPack, &'static str> {
    let (checked, start, last) = if value.first() == Some(&CHECKED) {
        let header = value
            .get(..CHECKED_HEADER)
            .ok_or("a checked pack shorter than its header")?;
        let last = decode_seq(&header[1..9]).ok_or("a malformed pack header")?;
        let crc = u32::from_be_bytes(
            header[9..CHECKED_HEADER]
                .try_into()
                .map_err(|_| "a malformed pack header")?,
        );
        if crc != pack_crc(value, first_seq) {
            return Err("its checksum does not match its contents");
        }
        if last < first_seq {
            return Err("it covers no seq");
        }
        (true, CHECKED_HEADER, Some(last))
    } else {
        (false, 0, None)
    };
    let mut entries: Vec<(u64, Range<usize>)> = Vec::new();
    let mut at = start;
    let malformed = "its entries are malformed";
    while at < value.len() {
        let end_header = at.checked_add(PACKED_HEADER).ok_or(malformed)?;
        let header = value.get(at..end_header).ok_or(malformed)?;
        let (seq, len) = header.split_at(8);
        let seq = decode_seq(seq).ok_or(malformed)?;
        let len = usize::try_from(u32::from_be_bytes(len.try_into().map_err(|_| malformed)?))
            .map_err(|_| malformed)?;
        let end = end_header
            .checked_add(len)
            .filter(|end| *end <= value.len())
            .ok_or(malformed)?;
        let in_order = match entries.last() {
            Some((previous, _)) => seq > *previous,
            None => seq >= first_seq,
        };
        if !in_order || last.is_some_and(|last| seq > last) {
            return Err("its entries are out of order");
        }
        entries.push((seq, end_header..end));
        at = end;
    }
    let last = match (last, entries.last()) {
        (Some(last), _) => last,
        (None, Some((seq, _))) => *seq,
        (None, None) => return Err("it is empty"),
    };
    Ok(DecodedPack {
        last,
        checked,
        entries,
    })
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

/// An index group: the seqs as BE u64s, then a CRC-32 of them (BE u32). Groups written before
/// checksums have no CRC; the length tells them apart (a multiple of 8, or 4 more).
pub(crate) fn encode_group(seqs: &[u64]) -> Vec<u8> {
    let mut value: Vec<u8> = seqs.iter().flat_map(|seq| seq.to_be_bytes()).collect();
    let crc = crc32fast::hash(&value);
    value.extend_from_slice(&crc.to_be_bytes());
    value
}

/// The seqs of one index group; `None` unless its checksum (if it has one) matches and they are
/// non-empty, strictly increasing and start at `first_seq` (the key's seq).
pub(crate) fn decode_group(value: &[u8], first_seq: u64) -> Option<Vec<u64>> {
    let seqs = match value.len() % 8 {
        0 => value,
        4 => {
            let (seqs, crc) = value.split_at(value.len() - 4);
            (crc32fast::hash(seqs).to_be_bytes() == crc).then_some(seqs)?
        }
        _ => return None,
    };
    if seqs.is_empty() {
        return None;
    }
    let seqs: Vec<u64> = seqs.chunks_exact(8).filter_map(decode_seq).collect();
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
    fn legacy_keys_then_packs_then_index_keys() {
        let index = group_key(&run_prefix(""), 0);
        for seq in [0, 1, 1 << 40, MAX_SEQ] {
            let legacy = seq_key(seq);
            assert!(legacy.as_slice() < PACKS_START.as_slice(), "{seq}");
            assert!(legacy.as_slice() < pack_key(0).as_slice(), "{seq}");
            assert!(pack_key(seq).as_slice() < index.as_slice(), "{seq}");
            assert!(pack_key(seq).as_slice() < EVENTS_END.as_slice(), "{seq}");
            assert!(pack_key(seq) < pack_key(seq + 1), "{seq}");
            assert_eq!(decode_pack_key(&pack_key(seq)), Some(seq));
            assert_eq!(decode_pack_key(&legacy), None, "{seq}");
        }
        assert!(seq_key(MAX_SEQ + 1).as_slice() >= PACKS_START.as_slice());
        assert_eq!(decode_pack_key(&index), None);
    }

    fn entry(seq: u64, len: usize) -> crate::Entry {
        crate::Entry {
            seq,
            run: None,
            bytes: vec![seq as u8; len],
        }
    }

    fn unpack(first: u64, value: &[u8]) -> Vec<(u64, Vec<u8>)> {
        decode_pack(value, first)
            .map(|pack| pack.entries)
            .unwrap_or_default()
            .into_iter()
            .map(|(seq, range)| (seq, value[range].to_vec()))
            .collect()
    }

    #[test]
    fn appends_split_into_packs_by_size() {
        type Case = (&'static str, Vec<crate::Entry>, Vec<Vec<u64>>);
        let big = PACK_BYTES;
        // Entries of 200 bytes that fit in one pack.
        let per = (PACK_BYTES / (PACKED_HEADER + 200)) as u64;
        assert!(per >= 2);
        let cases: Vec<Case> = vec![
            ("nothing", vec![], vec![]),
            ("one", vec![entry(5, 10)], vec![vec![5]]),
            (
                "empty bytes",
                vec![entry(5, 0), entry(6, 0)],
                vec![vec![5, 6]],
            ),
            (
                "small ones share a pack",
                (1..=per).map(|seq| entry(seq, 200)).collect(),
                vec![(1..=per).collect()],
            ),
            (
                "a full pack starts the next",
                (1..=2 * per + 3).map(|seq| entry(seq, 200)).collect(),
                vec![
                    (1..=per).collect(),
                    (per + 1..=2 * per).collect(),
                    (2 * per + 1..=2 * per + 3).collect(),
                ],
            ),
            (
                "an entry bigger than a pack is alone",
                vec![entry(1, 10), entry(2, big), entry(3, 10)],
                vec![vec![1], vec![2], vec![3]],
            ),
        ];
        for (name, entries, want) in cases {
            let packs = encode_packs(&entries);
            let got: Vec<Vec<u64>> = packs
                .iter()
                .map(|(first, value)| unpack(*first, value).iter().map(|(s, _)| *s).collect())
                .collect();
            assert_eq!(got, want, "{name}");
            for (first, value) in &packs {
                assert_eq!(
                    unpack(*first, value).first().map(|(s, _)| *s),
                    Some(*first),
                    "{name}"
                );
                for (seq, bytes) in unpack(*first, value) {
                    let original = entries
                        .iter()
                        .find(|e| e.seq == seq)
                        .map(|e| e.bytes.clone());
                    assert_eq!(Some(bytes), original, "{name} seq {seq}");
                }
            }
        }
    }

    #[test]
    fn malformed_unchecked_packs_are_refused() {
        let good = encode_unchecked([(7, &b"abc"[..]), (9, &b""[..])]);
        assert_eq!(
            unpack(7, &good),
            vec![(7, b"abc".to_vec()), (9, Vec::new())]
        );
        assert_eq!(unpack(5, &good).len(), 2, "a pack may start after its key");
        assert_eq!(
            decode_pack(&good, 7).map(|p| (p.last, p.checked)),
            Ok((9, false))
        );
        type Case = (&'static str, Vec<u8>, u64);
        let cases: Vec<Case> = vec![
            ("empty", Vec::new(), 0),
            ("entry before the key", good.clone(), 8),
            ("truncated header", good[..10].to_vec(), 7),
            ("truncated bytes", good[..good.len() - 13].to_vec(), 7),
            ("trailing byte", [good.clone(), vec![0]].concat(), 7),
            (
                "repeated seq",
                encode_unchecked([(7, &b"a"[..]), (7, &b"b"[..])]),
                7,
            ),
            (
                "decreasing",
                encode_unchecked([(8, &b"a"[..]), (7, &b"b"[..])]),
                7,
            ),
            (
                "length past the end",
                {
                    let mut v = encode_unchecked([(7, &b"abc"[..])]);
                    v[11] = 200;
                    v
                },
                7,
            ),
        ];
        for (name, value, first) in cases {
            assert!(decode_pack(&value, first).is_err(), "{name}");
        }
    }

    #[test]
    fn every_byte_of_a_checked_pack_is_checked() {
        let entries = [entry(7, 30), entry(8, 0), entry(9, 5)];
        let packs = encode_packs(&entries);
        let [(first, value)] = packs.as_slice() else {
            panic!("one pack expected: {}", packs.len());
        };
        assert_eq!(*first, 7);
        let pack = decode_pack(value, 7).unwrap();
        assert_eq!((pack.last, pack.checked, pack.entries.len()), (9, true, 3));
        for at in 0..value.len() {
            for bit in [0x01u8, 0x80] {
                let mut damaged = value.clone();
                damaged[at] ^= bit;
                assert!(decode_pack(&damaged, 7).is_err(), "byte {at} bit {bit}");
            }
        }
        for cut in 0..value.len() {
            assert!(decode_pack(&value[..cut], 7).is_err(), "cut at {cut}");
        }
        assert!(decode_pack(value, 6).is_err(), "under another key");
        // Rewritten without some entries (forget), or without any, it still covers 7..=9.
        let kept = encode_checked(7, 9, [(8, &b""[..])]);
        let pack = decode_pack(&kept, 7).unwrap();
        assert_eq!((pack.last, pack.entries.len()), (9, 1));
        let empty = encode_checked(7, 9, []);
        let pack = decode_pack(&empty, 7).unwrap();
        assert_eq!((pack.last, pack.entries.len()), (9, 0));
        assert!(decode_pack(&encode_checked(7, 8, [(9, &b""[..])]), 7).is_err());
        assert!(decode_pack(&encode_checked(7, 6, []), 7).is_err());
    }

    #[test]
    fn checked_groups_catch_flipped_bytes() {
        let value = encode_group(&[7, 9, 30]);
        assert_eq!(value.len(), 28);
        assert_eq!(decode_group(&value, 7), Some(vec![7, 9, 30]));
        for at in 0..value.len() {
            let mut damaged = value.clone();
            damaged[at] ^= 0x10;
            assert_eq!(decode_group(&damaged, 7), None, "byte {at}");
        }
        // Groups written before checksums still read.
        let old: Vec<u8> = [7u64, 9].iter().flat_map(|s| s.to_be_bytes()).collect();
        assert_eq!(decode_group(&old, 7), Some(vec![7, 9]));
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
