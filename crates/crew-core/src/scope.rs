//! File scopes: the paths a task may change, as relative paths or globs (`src/auth/**`,
//! `docs/*.md`, `Cargo.toml`).
//!
//! A pattern *covers* a path when it matches the path or one of its ancestor directories, so
//! `src/auth` covers everything below it and `src/*` covers `src/a/b.rs` (through `src/a`).
//! Globs are globset's with `literal_separator`: `*`, `?` and `[…]` stay inside one path
//! component, `**` crosses them. Two scopes *overlap* when some path may be covered by both;
//! the answer is conservative: where it cannot tell (two globs in the same component, any
//! `**`), it says they overlap, so shared-mode tasks are serialized rather than raced.

use globset::{GlobBuilder, GlobMatcher};

/// Characters that make a path component a glob rather than a literal name.
const META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

fn is_literal(component: &str) -> bool {
    !component.contains(META)
}

fn matcher(glob: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| e.to_string())
}

/// A pattern as written in a workflow or a fan-out block, normalized: `./` and a trailing `/`
/// are dropped. Refused: an empty pattern, an absolute path, `.`/`..` or empty components,
/// and a glob globset cannot read.
pub fn normalize(pattern: &str) -> Result<String, String> {
    let mut p = pattern.trim();
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    let p = p.trim_end_matches('/');
    if p.is_empty() {
        return Err(format!("`{pattern}` is empty"));
    }
    if p.starts_with('/') {
        return Err(format!(
            "`{pattern}` is absolute; a scope is relative to the run's directory"
        ));
    }
    for c in p.split('/') {
        if c.is_empty() || c == "." || c == ".." {
            return Err(format!(
                "`{pattern}` has an empty, `.` or `..` component; name paths inside the repository"
            ));
        }
    }
    matcher(p).map_err(|e| format!("`{pattern}` is not a valid glob: {e}"))?;
    Ok(p.to_string())
}

/// A task's scope, compiled once for checking many paths.
pub struct Scope {
    patterns: Vec<(String, Option<GlobMatcher>)>,
}

impl Scope {
    /// An empty list is "no scope": it covers everything (nothing to enforce).
    pub fn new(patterns: &[String]) -> Scope {
        Scope {
            patterns: patterns
                .iter()
                .map(|p| (p.clone(), matcher(p).ok()))
                .collect(),
        }
    }

    pub fn is_unrestricted(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether some pattern matches `path` or one of its ancestors. A pattern that does not
    /// compile (never accepted by `normalize`) covers nothing.
    pub fn covers(&self, path: &str) -> bool {
        if self.is_unrestricted() {
            return true;
        }
        let path = path.trim_start_matches("./");
        let mut prefixes = Vec::new();
        for (i, c) in path.char_indices() {
            if c == '/' {
                prefixes.push(&path[..i]);
            }
        }
        prefixes.push(path);
        self.patterns.iter().any(|(_, m)| {
            m.as_ref()
                .is_some_and(|m| prefixes.iter().any(|p| m.is_match(p)))
        })
    }

    /// The paths of `changed` the scope does not cover, in their order.
    pub fn outside<'a>(&self, changed: &'a [String]) -> Vec<&'a str> {
        changed
            .iter()
            .filter(|p| !self.covers(p))
            .map(String::as_str)
            .collect()
    }
}

/// Whether one component of each pattern can name the same file name. Two globs: unknown,
/// so yes.
fn components_meet(a: &str, b: &str) -> bool {
    match (is_literal(a), is_literal(b)) {
        (true, true) => a == b,
        (true, false) => matcher(b).map_or(true, |m| m.is_match(a)),
        (false, true) => matcher(a).map_or(true, |m| m.is_match(b)),
        (false, false) => true,
    }
}

/// Whether some path may be covered by both patterns. Compared component by component from
/// the top: a `**` anywhere before a difference, or one pattern ending first (it covers all
/// below), is an overlap.
pub fn patterns_overlap(a: &str, b: &str) -> bool {
    let (mut x, mut y) = (a.split('/'), b.split('/'));
    loop {
        match (x.next(), y.next()) {
            (Some(ca), Some(cb)) => {
                if ca == "**" || cb == "**" {
                    return true;
                }
                if !components_meet(ca, cb) {
                    return false;
                }
            }
            // One is a prefix of the other: the shorter covers the longer's paths.
            _ => return true,
        }
    }
}

/// Whether two tasks' scopes overlap. A task without a scope declared nothing to serialize on:
/// it overlaps nothing here (its changes are unrestricted, as before scopes existed).
pub fn overlap(a: &[String], b: &[String]) -> bool {
    a.iter()
        .any(|pa| b.iter().any(|pb| patterns_overlap(pa, pb)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizing_patterns() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("src/a.rs", Ok("src/a.rs")),
            ("./src/", Ok("src")),
            ("  docs/*.md ", Ok("docs/*.md")),
            ("src/**", Ok("src/**")),
            ("src/{a,b}.rs", Ok("src/{a,b}.rs")),
            ("", Err("empty")),
            ("./", Err("empty")),
            ("/etc/passwd", Err("absolute")),
            ("../x", Err("`..`")),
            ("a//b", Err("empty, `.`")),
            ("a/./b", Err("empty, `.`")),
            ("src/[a", Err("not a valid glob")),
        ];
        for (input, want) in cases {
            let got = normalize(input);
            match (want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(g, w, "{input:?}"),
                (Err(w), Err(g)) => assert!(g.contains(w), "{input:?}: {g}"),
                _ => panic!("{input:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn what_a_scope_covers() {
        let cases: &[(&[&str], &str, bool)] = &[
            (&["src/auth"], "src/auth/login.rs", true),
            (&["src/auth"], "src/auth", true),
            (&["src/auth"], "src/authz/x.rs", false),
            (&["src/*.rs"], "src/main.rs", true),
            (&["src/*.rs"], "src/a/main.rs", false),
            (&["src/*"], "src/a/main.rs", true),
            (&["src/**/*.rs"], "src/a/b/c.rs", true),
            (&["src/**/*.rs"], "src/c.rs", true),
            (&["src/**/*.rs"], "src/a/c.txt", false),
            (&["**/Cargo.toml"], "crates/x/Cargo.toml", true),
            (&["**/Cargo.toml"], "Cargo.toml", true),
            (&["README.md", "docs"], "docs/x/y.md", true),
            (&["README.md", "docs"], "src/lib.rs", false),
            (&["a?c"], "abc", true),
            (&["a?c"], "a/c", false),
            (&["src/{a,b}.rs"], "src/b.rs", true),
            (&["src/{a,b}.rs"], "src/c.rs", false),
            // No scope: nothing is outside.
            (&[], "anything/at/all", true),
        ];
        for (patterns, path, want) in cases {
            let patterns: Vec<String> = patterns.iter().map(|p| p.to_string()).collect();
            assert_eq!(
                Scope::new(&patterns).covers(path),
                *want,
                "{patterns:?} covers {path}"
            );
        }
    }

    #[test]
    fn paths_outside_a_scope_are_named_in_order() {
        let scope = Scope::new(&["src/a".to_string(), "*.md".to_string()]);
        let changed: Vec<String> = ["src/a/x.rs", "src/b/y.rs", "README.md", "docs/z.md"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(scope.outside(&changed), ["src/b/y.rs", "docs/z.md"]);
    }

    #[test]
    fn overlapping_patterns() {
        let cases: &[(&str, &str, bool)] = &[
            ("src/a.rs", "src/a.rs", true),
            ("src/a.rs", "src/b.rs", false),
            ("src", "src/a.rs", true),
            ("src/a.rs", "src", true),
            ("src/auth", "src/authz", false),
            ("src/*.rs", "src/main.rs", true),
            ("src/*.rs", "src/main.txt", false),
            ("src/*.rs", "docs/*.md", false),
            ("src/*.rs", "src/a/b.rs", false), // `a` is not `*.rs`
            ("src/*.rs", "src/a.rs/b", true),  // `src/a.rs` may be a directory
            ("src/*.rs", "src/*.txt", true),   // two globs: cannot tell, so they overlap
            ("src/**", "docs/a.md", false),
            ("src/**", "src/deep/x", true),
            ("**/x.rs", "docs/a.md", true), // `**` first: conservative
            ("a/b/c", "a/b/d", false),
            ("a/?/c", "a/b/d", false),
            ("a/?/c", "a/b/c", true),
            ("a/[bc]/x", "a/d/x", false),
            ("{a,b}/x", "c/x", false),
            ("{a,b}/x", "b/x", true),
        ];
        for (a, b, want) in cases {
            assert_eq!(patterns_overlap(a, b), *want, "{a} ~ {b}");
            assert_eq!(patterns_overlap(b, a), *want, "{b} ~ {a} (symmetric)");
        }
    }

    #[test]
    fn overlapping_scopes() {
        let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        let cases: &[(&[&str], &[&str], bool)] = &[
            (&["src/a"], &["src/b"], false),
            (&["src/a", "docs"], &["src/b", "docs/x.md"], true),
            (&[], &["src/a"], false),
            (&[], &[], false),
        ];
        for (a, b, want) in cases {
            assert_eq!(overlap(&s(a), &s(b)), *want, "{a:?} ~ {b:?}");
        }
    }
}
