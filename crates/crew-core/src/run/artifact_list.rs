//! A task's artifact references, packed into one allocation.
//!
//! A finished task keeps its list (prompt, the attempt's prompt, result, transcript, …) for as
//! long as its run is resident, and a daemon keeps tens of thousands of finished tasks: as a
//! `Vec<ArtifactRef>` each reference cost its 88 bytes plus a heap string for its name (about
//! 560 bytes per task, the largest part of a finished task's memory). Packed, a list of four is
//! one exact allocation of about 260 bytes. Lists are written once per attempt and read only by
//! views, bundles and snapshots, which get owned `ArtifactRef`s back.
//!
//! One entry, in order: a tag byte (the kind in the low bits, whether the digest is text in
//! bit 3, whether size and digest are the previous entry's in bit 4), the size as a LEB128
//! varint, the name (varint length, bytes), the kind's text when it is not one of the daemon's
//! own (varint length, bytes), and the digest (32 bytes, or varint length and text). Size and
//! digest are left out when they repeat the previous entry's: a task's latest prompt is a
//! second name of its attempt's prompt file. Only `push` writes it, so reading never meets another shape; a list that
//! somehow did would end at the first entry it cannot read, never panic.

use super::artifact::{ArtifactKind, ArtifactRef, Sha256};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashSet;
use std::fmt;

/// A task's artifact references, newest of each name last. Empty takes no allocation.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ArtifactList(Box<[u8]>);

const KIND_MASK: u8 = 0b111;
const OTHER_KIND: u8 = 0b111;
const TEXT_DIGEST: u8 = 0b1000;
const SAME_CONTENT: u8 = 0b1_0000;

impl ArtifactList {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// The references, decoded (each an owned `ArtifactRef`).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            rest: &self.0,
            previous: None,
        }
    }

    /// Add `new`, each replacing the reference of the same name it already holds (a retry's
    /// result replaces the earlier attempt's), as if pushed one by one after removing its name:
    /// the references `new` does not name keep their order, then the last of each name in
    /// `new`, in the order of those last ones. Linear in both lists (a bundle may bring a long
    /// one). One exact allocation for the whole list.
    pub fn upsert<'a>(&mut self, new: impl IntoIterator<Item = &'a ArtifactRef>) {
        let new: Vec<&ArtifactRef> = new.into_iter().collect();
        if new.is_empty() {
            return;
        }
        let named: HashSet<&str> = new.iter().map(|a| a.name.as_str()).collect();
        let kept: Vec<ArtifactRef> = self
            .iter()
            .filter(|a| !named.contains(a.name.as_str()))
            .collect();
        let mut seen: HashSet<&str> = HashSet::with_capacity(named.len());
        let mut last: Vec<&ArtifactRef> = new
            .iter()
            .rev()
            .filter(|a| seen.insert(a.name.as_str()))
            .copied()
            .collect();
        last.reverse();
        *self = Self::encoded(kept.iter().chain(last));
    }

    /// `refs` as they are, in order.
    fn encoded<'a>(refs: impl IntoIterator<Item = &'a ArtifactRef>) -> Self {
        let mut buf = Vec::new();
        let mut previous = None;
        for a in refs {
            encode(a, previous, &mut buf);
            previous = Some(a);
        }
        ArtifactList(buf.into_boxed_slice())
    }
}

/// The references as they are, in order (a list read back is the list written).
impl FromIterator<ArtifactRef> for ArtifactList {
    fn from_iter<I: IntoIterator<Item = ArtifactRef>>(iter: I) -> Self {
        let all: Vec<ArtifactRef> = iter.into_iter().collect();
        Self::encoded(&all)
    }
}

impl From<Vec<ArtifactRef>> for ArtifactList {
    fn from(all: Vec<ArtifactRef>) -> Self {
        all.into_iter().collect()
    }
}

pub struct Iter<'a> {
    rest: &'a [u8],
    /// The size and digest of the entry before (what a `SAME_CONTENT` entry repeats).
    previous: Option<(u64, Sha256)>,
}

impl Iterator for Iter<'_> {
    type Item = ArtifactRef;

    fn next(&mut self) -> Option<ArtifactRef> {
        let (a, rest) = decode(self.rest, self.previous.as_ref())?;
        self.rest = rest;
        self.previous = Some((a.bytes, a.sha256.clone()));
        Some(a)
    }
}

impl<'a> IntoIterator for &'a ArtifactList {
    type Item = ArtifactRef;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl fmt::Debug for ArtifactList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// As the list of references it holds (the JSON a `Vec<ArtifactRef>` gave).
impl Serialize for ArtifactList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for ArtifactList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<ArtifactRef>::deserialize(d).map(ArtifactList::from)
    }
}

fn kind_tag(kind: &ArtifactKind) -> u8 {
    match kind {
        ArtifactKind::Prompt => 0,
        ArtifactKind::Result => 1,
        ArtifactKind::Transcript => 2,
        ArtifactKind::Shared => 3,
        ArtifactKind::Other(_) => OTHER_KIND,
    }
}

fn encode(a: &ArtifactRef, previous: Option<&ArtifactRef>, out: &mut Vec<u8>) {
    let same = previous.is_some_and(|p| p.bytes == a.bytes && p.sha256 == a.sha256);
    let digest = a.sha256.as_bytes();
    let tag = kind_tag(&a.kind)
        | if digest.is_some() { 0 } else { TEXT_DIGEST }
        | if same { SAME_CONTENT } else { 0 };
    out.push(tag);
    if !same {
        put_varint(a.bytes, out);
    }
    put_text(&a.name, out);
    if let ArtifactKind::Other(k) = &a.kind {
        put_text(k, out);
    }
    match digest {
        _ if same => {}
        Some(d) => out.extend_from_slice(d),
        None => put_text(&a.sha256.to_string(), out),
    }
}

fn decode<'b>(b: &'b [u8], previous: Option<&(u64, Sha256)>) -> Option<(ArtifactRef, &'b [u8])> {
    let (&tag, b) = b.split_first()?;
    let same = match previous {
        Some(p) if tag & SAME_CONTENT != 0 => Some(p),
        None if tag & SAME_CONTENT != 0 => return None,
        _ => None,
    };
    let (bytes, b) = match same {
        Some((n, _)) => (*n, b),
        None => take_varint(b)?,
    };
    let (name, b) = take_text(b)?;
    let (kind, b) = match tag & KIND_MASK {
        0 => (ArtifactKind::Prompt, b),
        1 => (ArtifactKind::Result, b),
        2 => (ArtifactKind::Transcript, b),
        3 => (ArtifactKind::Shared, b),
        OTHER_KIND => {
            let (k, b) = take_text(b)?;
            (ArtifactKind::Other(k.into()), b)
        }
        _ => return None,
    };
    let (sha256, b) = if let Some((_, d)) = same {
        (d.clone(), b)
    } else if tag & TEXT_DIGEST == 0 {
        let (d, b) = b.split_first_chunk::<32>()?;
        (Sha256::from_bytes(*d), b)
    } else {
        let (t, b) = take_text(b)?;
        (Sha256::parse(t), b)
    };
    let a = ArtifactRef {
        name: name.to_owned(),
        kind,
        bytes,
        sha256,
    };
    Some((a, b))
}

fn put_varint(mut n: u64, out: &mut Vec<u8>) {
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

fn take_varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let mut n: u64 = 0;
    for (i, &byte) in b.iter().enumerate().take(10) {
        let shift = u32::try_from(i).ok()?.checked_mul(7)?;
        n |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some((n, b.get(i.checked_add(1)?..)?));
        }
    }
    None
}

fn put_text(s: &str, out: &mut Vec<u8>) {
    put_varint(s.len() as u64, out);
    out.extend_from_slice(s.as_bytes());
}

fn take_text(b: &[u8]) -> Option<(&str, &[u8])> {
    let (len, b) = take_varint(b)?;
    let len = usize::try_from(len).ok()?;
    let (text, rest) = b.split_at_checked(len)?;
    Some((std::str::from_utf8(text).ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn art(name: &str, kind: &str, bytes: u64, sha: &str) -> ArtifactRef {
        ArtifactRef {
            name: name.into(),
            kind: ArtifactKind::new(kind),
            bytes,
            sha256: Sha256::parse(sha),
        }
    }

    const HEX: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    #[test]
    fn a_long_list_is_upserted_in_linear_time() {
        // 300,000 distinct names in one event (an imported bundle's): one pass, not one per
        // name. Quadratic, as it was, this takes most of an hour in a debug build, and nextest
        // ends a test after 5 minutes (`.config/nextest.toml`).
        let many: Vec<ArtifactRef> = (0..300_000)
            .map(|i| art(&format!("f{i}"), "result", i, HEX))
            .collect();
        let mut list = ArtifactList::new();
        list.upsert(&many);
        list.upsert(&many[..10]);
        assert_eq!(list.len(), 300_000);
        assert_eq!(list.iter().last().unwrap().name, "f9");
    }

    #[test]
    fn a_newer_reference_replaces_the_one_of_its_name_and_goes_last() {
        let mut list = ArtifactList::new();
        assert!(list.is_empty());
        list.upsert(&[
            art("prompts/a.md", "prompt", 3, HEX),
            art("results/a.txt", "result", 5, HEX),
        ]);
        list.upsert(&[art("prompts/a.md", "prompt", 7, "x")]);
        let names: Vec<(String, u64)> = list.iter().map(|a| (a.name, a.bytes)).collect();
        assert_eq!(
            names,
            [("results/a.txt".into(), 5), ("prompts/a.md".into(), 7)]
        );
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn four_daemon_references_take_under_60_percent_of_what_a_vec_took() {
        let other = HEX.replace('2', "3");
        let refs = vec![
            art("prompts/03_exec-0123.attempt-1.md", "prompt", 1234, HEX),
            art("prompts/03_exec-0123.md", "prompt", 1234, HEX),
            art("results/03_exec-0123.txt", "result", 5, &other),
            art(
                "transcripts/03_exec-0123.attempt-1.jsonl",
                "transcript",
                90_000,
                HEX,
            ),
        ];
        // Each reference: a tag, the name's length and bytes, then size (a varint) and digest
        // unless they are the entry before's (the latest prompt is a second name of the
        // attempt's).
        let names: usize = refs.iter().map(|a| 1 + 1 + a.name.len()).sum();
        let want = names + (2 + 32) + (1 + 32) + (3 + 32);
        let list = ArtifactList::from(refs);
        assert_eq!(list.0.len(), want);
        // A Vec held the references and a string for each name (without the allocator's
        // rounding: at least this much).
        let vec_form: usize = list
            .iter()
            .map(|a| std::mem::size_of::<ArtifactRef>() + a.name.len())
            .sum();
        assert!(list.0.len() * 10 < vec_form * 6, "{want} of {vec_form}");
    }

    #[test]
    fn the_json_is_the_list_of_references() {
        let json = format!(
            r#"[{{"name":"results/01_a.txt","kind":"result","bytes":5,"sha256":"{HEX}"}},{{"name":"f","kind":"file","bytes":300,"sha256":"ABC"}}]"#
        );
        let list: ArtifactList = serde_json::from_str(&json).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(serde_json::to_string(&list).unwrap(), json);
        assert_eq!(serde_json::to_string(&ArtifactList::new()).unwrap(), "[]");
        // Read back as written, a repeated name included (a hand-made snapshot).
        let twice = r#"[{"name":"a","kind":"result","bytes":1,"sha256":"x"},{"name":"b","kind":"result","bytes":1,"sha256":"x"},{"name":"a","kind":"result","bytes":2,"sha256":"x"}]"#;
        let list: ArtifactList = serde_json::from_str(twice).unwrap();
        assert_eq!(serde_json::to_string(&list).unwrap(), twice);
    }

    #[test]
    fn a_cut_list_ends_early_and_never_panics() {
        let list: ArtifactList = vec![
            art("n", "file", u64::MAX, "é"),
            art("m", "prompt", u64::MAX, "é"),
        ]
        .into();
        for end in 0..list.0.len() {
            let cut = ArtifactList(list.0[..end].into());
            assert!(cut.iter().count() < 2, "cut at {end}");
        }
        assert_eq!(list.len(), 2);
        assert_eq!(list.iter().next().unwrap().bytes, u64::MAX);
    }

    fn any_ref() -> impl Strategy<Value = ArtifactRef> {
        let kind = prop_oneof![
            Just("prompt".to_string()),
            Just("result".to_string()),
            Just("transcript".to_string()),
            Just("shared".to_string()),
            ".{0,12}",
        ];
        let sha = prop_oneof![Just(HEX.to_string()), "[0-9a-fA-F]{0,70}", ".{0,8}"];
        // Names, sizes and digests that repeat often (the same content under two names).
        let name = prop_oneof![Just("a".to_string()), Just("b".to_string()), ".{0,300}"];
        let bytes = prop_oneof![Just(5u64), any::<u64>()];
        (name, kind, bytes, sha).prop_map(|(n, k, b, s)| art(&n, &k, b, &s))
    }

    proptest! {
        #[test]
        fn what_goes_in_comes_out(refs in proptest::collection::vec(any_ref(), 0..8)) {
            // The last of each name, in the order of their last appearance.
            let mut want: Vec<ArtifactRef> = Vec::new();
            for a in &refs {
                want.retain(|w| w.name != a.name);
                want.push(a.clone());
            }
            let mut list = ArtifactList::new();
            for a in &refs {
                list.upsert([a]);
            }
            let got: Vec<ArtifactRef> = list.iter().collect();
            prop_assert_eq!(&got, &want);
            // In two batches, as two attempts' lists: the same as one by one.
            let (first, second) = refs.split_at(refs.len() / 2);
            let mut batched = ArtifactList::new();
            batched.upsert(first);
            batched.upsert(second);
            prop_assert_eq!(&batched, &list);
            // And as JSON, the same as the Vec's.
            prop_assert_eq!(
                serde_json::to_string(&list).unwrap(),
                serde_json::to_string(&want).unwrap()
            );
        }
    }
}
