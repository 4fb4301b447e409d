//! Artifact references, kept compact: a finished task holds a few of them for as long as its
//! run is resident, so the kind and digest are stored without a heap string each.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A file under the run's artifact directory, named by its relative path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRef {
    pub name: String,
    pub kind: ArtifactKind,
    pub bytes: u64,
    pub sha256: Sha256,
}

/// What an artifact is. Serialized as its name; the daemon's own kinds take no allocation,
/// any other name (an imported bundle may carry one) is kept as it was read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ArtifactKind {
    Prompt,
    Result,
    Transcript,
    Shared,
    Other(Box<str>),
}

impl ArtifactKind {
    pub fn new(s: &str) -> Self {
        Self::known(s).unwrap_or_else(|| ArtifactKind::Other(s.into()))
    }

    fn known(s: &str) -> Option<Self> {
        Some(match s {
            "prompt" => ArtifactKind::Prompt,
            "result" => ArtifactKind::Result,
            "transcript" => ArtifactKind::Transcript,
            "shared" => ArtifactKind::Shared,
            _ => return None,
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            ArtifactKind::Prompt => "prompt",
            ArtifactKind::Result => "result",
            ArtifactKind::Transcript => "transcript",
            ArtifactKind::Shared => "shared",
            ArtifactKind::Other(s) => s,
        }
    }
}

impl From<&str> for ArtifactKind {
    fn from(s: &str) -> Self {
        ArtifactKind::new(s)
    }
}

impl PartialEq<str> for ArtifactKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ArtifactKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ArtifactKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ArtifactKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ArtifactKind;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an artifact kind (string)")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ArtifactKind, E> {
                Ok(ArtifactKind::new(s))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<ArtifactKind, E> {
                Ok(ArtifactKind::known(&s).unwrap_or_else(|| ArtifactKind::Other(s.into())))
            }
        }
        d.deserialize_str(V)
    }
}

/// A SHA-256 digest, serialized as the string it was given. The daemon writes lowercase hex
/// (64 characters), kept as 32 bytes; any other text (a hand-made bundle) is kept verbatim so
/// that reading and writing it back never changes it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Sha256(Digest);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Digest {
    Bytes([u8; 32]),
    Text(Box<str>),
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl Sha256 {
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Sha256(Digest::Bytes(bytes))
    }

    /// The 32 bytes, when the digest was lowercase hex (the daemon's own).
    pub fn as_bytes(&self) -> Option<&[u8; 32]> {
        match &self.0 {
            Digest::Bytes(b) => Some(b),
            Digest::Text(_) => None,
        }
    }

    /// Lowercase hex of 32 bytes becomes bytes; anything else is kept as text.
    pub fn parse(s: &str) -> Self {
        Self::bytes_of(s)
            .map(Self::from_bytes)
            .unwrap_or_else(|| Sha256(Digest::Text(s.into())))
    }

    fn bytes_of(s: &str) -> Option<[u8; 32]> {
        fn nibble(c: u8) -> Option<u8> {
            match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            }
        }
        let s = s.as_bytes();
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
            if let [hi, lo] = pair {
                *o = nibble(*hi)? << 4 | nibble(*lo)?;
            }
        }
        Some(out)
    }

    /// The text form into `buf` (64 bytes for a digest held as bytes).
    fn write_str<'a>(&'a self, buf: &'a mut [u8; 64]) -> &'a str {
        match &self.0 {
            Digest::Text(s) => s,
            Digest::Bytes(b) => {
                for (pair, byte) in buf.chunks_exact_mut(2).zip(b) {
                    if let [hi, lo] = pair {
                        *hi = HEX[usize::from(byte >> 4)];
                        *lo = HEX[usize::from(byte & 0xf)];
                    }
                }
                // Only ASCII hex digits were written.
                std::str::from_utf8(buf).unwrap_or_default()
            }
        }
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.write_str(&mut [0; 64]))
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.write_str(&mut [0; 64]), f)
    }
}

impl PartialEq<str> for Sha256 {
    fn eq(&self, other: &str) -> bool {
        self.write_str(&mut [0; 64]) == other
    }
}

impl PartialEq<String> for Sha256 {
    fn eq(&self, other: &String) -> bool {
        *self == **other
    }
}

impl From<&str> for Sha256 {
    fn from(s: &str) -> Self {
        Sha256::parse(s)
    }
}

impl Serialize for Sha256 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.write_str(&mut [0; 64]))
    }
}

impl<'de> Deserialize<'de> for Sha256 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Sha256;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sha256 digest (string)")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Sha256, E> {
                Ok(Sha256::parse(s))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX_DIGEST: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    #[test]
    fn artifact_json_is_unchanged_by_the_compact_form() {
        let cases = [
            // The daemon's own: kind and digest held without strings.
            format!(
                r#"{{"name":"results/01_a.txt","kind":"result","bytes":5,"sha256":"{HEX_DIGEST}"}}"#
            ),
            r#"{"name":"p.md","kind":"prompt","bytes":0,"sha256":""}"#.to_string(),
            r#"{"name":"t.jsonl","kind":"transcript","bytes":1,"sha256":"x"}"#.to_string(),
            r#"{"name":"shared/o.md","kind":"shared","bytes":2,"sha256":"ABC"}"#.to_string(),
            // Not what the daemon writes: kept as read.
            format!(
                r#"{{"name":"f","kind":"file","bytes":3,"sha256":"{}"}}"#,
                HEX_DIGEST.to_uppercase()
            ),
            format!(r#"{{"name":"f","kind":"","bytes":3,"sha256":"{HEX_DIGEST}0"}}"#),
            format!(
                r#"{{"name":"f","kind":"Result","bytes":3,"sha256":"{}"}}"#,
                &HEX_DIGEST[1..]
            ),
            r#"{"name":"f","kind":"a\"b","bytes":3,"sha256":"gé"}"#.to_string(),
        ];
        for json in cases {
            // The cases are written in field order and escaped as serde_json escapes.
            let a: ArtifactRef = serde_json::from_str(&json).unwrap();
            assert_eq!(serde_json::to_string(&a).unwrap(), json);
            // Through a Value too (the owned-string path of the visitors).
            let value: serde_json::Value = serde_json::from_str(&json).unwrap();
            let b: ArtifactRef = serde_json::from_value(value).unwrap();
            assert_eq!(a, b, "{json}");
        }
    }

    #[test]
    fn a_lowercase_hex_digest_is_held_as_bytes() {
        let cases = [
            (HEX_DIGEST.to_string(), true),
            ("0".repeat(64), true),
            ("f".repeat(64), true),
            (HEX_DIGEST.to_uppercase(), false),
            ("0".repeat(63), false),
            ("0".repeat(65), false),
            (format!("{}g", "0".repeat(63)), false),
            (String::new(), false),
        ];
        for (s, bytes) in cases {
            let d = Sha256::parse(&s);
            assert_eq!(matches!(d.0, Digest::Bytes(_)), bytes, "{s}");
            assert_eq!(d.to_string(), s);
            assert!(d == *s.as_str());
            assert_eq!(format!("{d:?}"), format!("{s:?}"));
        }
        let mut b = [0u8; 32];
        b[0] = 0xab;
        b[31] = 0x01;
        let d = Sha256::from_bytes(b);
        assert_eq!(d.to_string(), format!("ab{}01", "0".repeat(60)));
        assert_eq!(Sha256::parse(&d.to_string()), d);
    }

    #[test]
    fn kinds_the_daemon_writes_take_no_string() {
        for (s, known) in [
            ("prompt", true),
            ("result", true),
            ("transcript", true),
            ("shared", true),
            ("file", false),
            ("", false),
        ] {
            let k = ArtifactKind::new(s);
            assert_eq!(!matches!(k, ArtifactKind::Other(_)), known, "{s}");
            assert_eq!(k.as_str(), s);
            assert_eq!(k.to_string(), s);
            assert!(k == s);
        }
    }
}
