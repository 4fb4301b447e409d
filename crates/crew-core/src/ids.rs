//! Identifiers: run ids, and the checked types every id or name that reaches a path is made
//! through ([`SafeId`], [`ArtifactName`]). Their fields are private and their `Deserialize`
//! checks, so an id read from params, a bundle, the journal or a resource file cannot reach a
//! path without passing the rule.

pub mod reserved;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

/// Why a string is not a safe id or artifact name (the offending text is cut: it may be huge).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not {what}")]
pub struct UnsafeName {
    shown: String,
    what: &'static str,
}

impl UnsafeName {
    fn new(s: &str, what: &'static str) -> Self {
        let mut shown: String = s.chars().take(64).collect();
        if shown.len() < s.len() {
            shown.push('…');
        }
        UnsafeName { shown, what }
    }
}

macro_rules! checked_name {
    ($(#[$doc:meta])* $name:ident, $check:path, $what:literal) => {
        $(#[$doc])*
        // A boxed str, not a String: no spare capacity and 8 bytes less, in every task of
        // every resident run (ids, dependencies, outputs).
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Box<str>);

        impl $name {
            pub const WHAT: &'static str = $what;

            /// The one way to make one: checks the rule.
            pub fn new(s: impl Into<String>) -> Result<Self, UnsafeName> {
                let s = s.into();
                if $check(&s) {
                    Ok($name(s.into_boxed_str()))
                } else {
                    Err(UnsafeName::new(&s, $what))
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0.into_string()
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<std::path::Path> for $name {
            fn as_ref(&self) -> &std::path::Path {
                std::path::Path::new(&*self.0)
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                *self.0 == **other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                **self == *other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == &*other.0
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0.into_string()
            }
        }

        impl TryFrom<String> for $name {
            type Error = UnsafeName;
            fn try_from(s: String) -> Result<Self, UnsafeName> {
                $name::new(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = UnsafeName;
            fn try_from(s: &str) -> Result<Self, UnsafeName> {
                $name::new(s)
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnsafeName;
            fn from_str(s: &str) -> Result<Self, UnsafeName> {
                $name::new(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

checked_name!(
    /// A run, task or schedule id that may become a file name: passes [`is_safe_id`].
    SafeId,
    is_safe_id,
    "a valid id ([A-Za-z0-9_-], 1 to 128 characters)"
);

checked_name!(
    /// A relative artifact path of safe segments: passes [`is_safe_artifact_name`].
    ArtifactName,
    is_safe_artifact_name,
    "a valid artifact name (relative path of [A-Za-z0-9._-] segments, no `.` or `..`)"
);

/// `team_<YYYYMMDDHHMMSS>_<16 hex>` (pi-crew's format): sorts by creation time, and the random
/// suffix keeps ids unique within a second. `random` comes from the caller (the core has no RNG).
pub fn run_id(now: DateTime<Utc>, random: u64) -> String {
    format!("team_{}_{random:016x}", now.format("%Y%m%d%H%M%S"))
}

/// A run id that sorts after `last` (the newest existing id): ids created within the same
/// second keep their creation order, so "newest first" listings and pruning are exact.
pub fn next_run_id(now: DateTime<Utc>, random: u64, last: Option<&str>) -> String {
    let id = run_id(now, random);
    match last {
        Some(last) if id.as_str() <= last => {
            let (prefix, suffix) = last.rsplit_once('_').unwrap_or((last, "0"));
            let step = 1 + (random & 0xffff);
            let next = u64::from_str_radix(suffix, 16)
                .unwrap_or(0)
                .saturating_add(step);
            format!("{prefix}_{next:016x}")
        }
        _ => id,
    }
}

/// Longest slug of a step id kept in its task id: `NN_<slug>` stays a safe id.
const TASK_SLUG_MAX: usize = 100;

/// The task id of the step at 1-based `index`: `NN_<slug>`, the slug being the step id
/// lowercased with runs of other characters turned into one `-`, cut to [`TASK_SLUG_MAX`].
pub fn task_id(index: usize, step_id: &str) -> SafeId {
    let mut slug = String::new();
    for c in step_id.to_lowercase().chars() {
        if slug.len() >= TASK_SLUG_MAX {
            break;
        }
        if c.is_ascii_alphanumeric() || c == '-' {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_matches('-');
    let slug = if slug.is_empty() { "task" } else { slug };
    // Made of the safe alphabet and at most ~122 bytes (an index has at most 20 digits).
    SafeId(format!("{index:02}_{slug}").into_boxed_str())
}

/// Ids and names that end up in file paths: `[A-Za-z0-9_-]`, 1..=128 chars. This is what keeps
/// `../` and friends out of the state directory.
pub fn is_safe_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Artifact names are relative paths of safe segments (`results/01_explore.txt`). Dots are
/// allowed inside a segment but a segment may not be `.` or `..`.
pub fn is_safe_artifact_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 512
        && s.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_checked_name_is_two_words() {
        // Boxed, not a String: every task of every resident run holds a few.
        assert_eq!(std::mem::size_of::<SafeId>(), 16);
        assert_eq!(std::mem::size_of::<ArtifactName>(), 16);
        let id = SafeId::new(String::with_capacity(64) + "01_a").unwrap();
        assert_eq!(
            (id.as_str(), id == "01_a", String::from(id.clone())),
            ("01_a", true, "01_a".to_string())
        );
    }

    use super::*;

    #[test]
    fn safe_ids() {
        for (s, ok) in [
            ("team_1_ab", true),
            ("01_explore", true),
            ("", false),
            ("../x", false),
            ("a/b", false),
            ("a b", false),
        ] {
            assert_eq!(is_safe_id(s), ok, "{s}");
        }
        for (s, ok) in [
            ("results/01_x.txt", true),
            ("shared/plan.md", true),
            ("../etc/passwd", false),
            ("results/../../x", false),
            ("/abs", false),
            ("a//b", false),
        ] {
            assert_eq!(is_safe_artifact_name(s), ok, "{s}");
        }
    }

    #[test]
    fn checked_names_refuse_what_the_rules_refuse() {
        for (s, ok) in [("01_a", true), ("../../x/PWNED", false), ("", false)] {
            assert_eq!(SafeId::new(s).is_ok(), ok, "{s}");
            let de = serde_json::from_value::<SafeId>(serde_json::json!(s));
            assert_eq!(de.is_ok(), ok, "{s}");
        }
        let long = "a".repeat(129);
        assert!(SafeId::new(long.as_str()).is_err());
        let e = SafeId::new(long).unwrap_err().to_string();
        assert!(e.len() < 200, "{e}");
        assert!(ArtifactName::new("shared/plan.md").is_ok());
        assert!(serde_json::from_str::<ArtifactName>("\"../x\"").is_err());
        let id = SafeId::new("t1").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"t1\"");
        assert_eq!(id, "t1");
    }

    #[test]
    fn next_run_id_keeps_creation_order_within_a_second() {
        let t = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let mut last: Option<String> = None;
        for r in [u64::MAX / 2, 3, 0, u64::MAX / 4, 1] {
            let id = next_run_id(t, r, last.as_deref());
            if let Some(l) = &last {
                assert!(id.as_str() > l.as_str(), "{id} <= {l}");
            }
            assert!(is_safe_id(&id));
            last = Some(id);
        }
        let later = next_run_id(
            DateTime::from_timestamp(1_700_000_001, 0).unwrap(),
            0,
            last.as_deref(),
        );
        assert!(later.as_str() > last.unwrap().as_str());
    }

    #[test]
    fn run_ids_sort_by_time() {
        let a = run_id(
            DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            u64::MAX,
        );
        let b = run_id(DateTime::from_timestamp(1_700_000_001, 0).unwrap(), 0);
        assert!(a < b);
        assert!(is_safe_id(&a));
        assert_eq!(a, "team_20231114221320_ffffffffffffffff");
    }
}
