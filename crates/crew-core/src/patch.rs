//! The parts of a `git diff` patch that touch given paths: what a resolver's prompt quotes of
//! each side of a conflict (the sections of the conflicting files), so the cap on what it quotes
//! is spent where the conflict is, not on the files that merged cleanly.

/// The sections of `patch` (each from a `diff --git ` line to the next) whose file is one of
/// `paths`, in the patch's order; empty when none is.
///
/// A section's file is read as git writes it (`--src-prefix=a/ --dst-prefix=b/`, quoting on,
/// as crew asks for its patches): the header `diff --git a/<path> b/<path>`, each side in C
/// quotes (`"a/caf\303\251.rs"`) when the path has odd bytes; a rename or copy by its
/// `rename from <path>` / `rename to <path>` lines, quoted alike. Only whole lines are compared:
/// a path that merely ends like another (`my b/lib.rs` for `lib.rs`) is not taken for it. The
/// header is the only place every kind of section names its file (binary and mode-only
/// sections have no `---`/`+++`).
pub fn sections_touching(patch: &str, paths: &[String]) -> String {
    use std::collections::HashSet;
    let headers: HashSet<String> = paths
        .iter()
        .map(|p| format!("diff --git {} {}", written("a/", p), written("b/", p)))
        .collect();
    let moves: HashSet<String> = paths
        .iter()
        .flat_map(|p| {
            let name = written("", p);
            ["rename from ", "rename to ", "copy from ", "copy to "].map(|kw| format!("{kw}{name}"))
        })
        .collect();
    let mut out = String::new();
    let mut section = String::new();
    let mut keep = false;
    let mut flush = |section: &mut String, keep: bool| {
        if keep {
            out.push_str(section);
        }
        section.clear();
    };
    for line in patch.split_inclusive('\n') {
        let bare = line.strip_suffix('\n').unwrap_or(line);
        if bare.starts_with("diff --git ") {
            flush(&mut section, keep);
            keep = headers.contains(bare);
        } else if !section.is_empty() && moves.contains(bare) {
            keep = true;
        }
        // Text before the first header is no file's.
        if bare.starts_with("diff --git ") || !section.is_empty() {
            section.push_str(line);
        }
    }
    flush(&mut section, keep);
    out
}

/// `path` after `prefix` as git writes it in a patch: in C quotes when it must be quoted.
fn written(prefix: &str, path: &str) -> String {
    let q = c_quoted(path);
    if q == path {
        format!("{prefix}{path}")
    } else {
        format!("\"{prefix}{q}\"")
    }
}

/// `path` as git quotes it in a patch's header when it must (`quote_c_style`): `"`, `\`,
/// control characters and every byte above 0x7f escaped; `path` itself (no quotes added here)
/// when nothing needs it.
fn c_quoted(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for &b in path.as_bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            0x0b => out.push_str("\\v"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            0x00..=0x1f | 0x7f..=0xff => out.push_str(&format!("\\{b:03o}")),
            _ => out.push(char::from(b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "diff --git a/src/lib.rs b/src/lib.rs\n\
index 1..2 100644\n\
--- a/src/lib.rs\n\
+++ b/src/lib.rs\n\
@@ -1 +1 @@\n\
-a\n\
+b\n\
diff --git a/README.md b/README.md\n\
--- a/README.md\n\
+++ b/README.md\n\
@@ -1 +1 @@\n\
-x\n\
+y\n\
diff --git \"a/caf\\303\\251 \\\"q\\\".rs\" \"b/caf\\303\\251 \\\"q\\\".rs\"\n\
new file mode 100644\n\
--- /dev/null\n\
+++ \"b/caf\\303\\251 \\\"q\\\".rs\"\n\
@@ -0,0 +1 @@\n\
+z\n\
diff --git a/old name.rs b/new name.rs\n\
similarity index 90%\n\
rename from old name.rs\n\
rename to new name.rs\n\
diff --git a/img.png b/img.png\n\
Binary files a/img.png and b/img.png differ\n\
diff --git a/my b/lib.rs b/my b/lib.rs\n\
--- a/my b/lib.rs\n\
+++ b/my b/lib.rs\n\
@@ -1 +1 @@\n\
-m\n\
+n\n";

    fn sections(paths: &[&str]) -> String {
        let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        sections_touching(PATCH, &paths)
    }

    /// Table: which sections each set of paths keeps.
    #[test]
    fn keeps_the_sections_of_the_paths() {
        let cases: &[(&[&str], &[&str])] = &[
            (&["src/lib.rs"], &["a/src/lib.rs b/src/lib.rs"]),
            (&["README.md"], &["a/README.md b/README.md"]),
            // git quotes the odd name; the conflict names it as the bytes it is.
            (&["café \"q\".rs"], &["\"a/caf\\303\\251"]),
            // A rename, by either name.
            (&["new name.rs"], &["a/old name.rs b/new name.rs"]),
            (&["old name.rs"], &["a/old name.rs b/new name.rs"]),
            (&["img.png"], &["a/img.png b/img.png"]),
            (
                &["img.png", "src/lib.rs"],
                &["a/src/lib.rs b/src/lib.rs", "a/img.png b/img.png"],
            ),
            // Not a prefix or a suffix of another path's name.
            (&["lib.rs"], &[]),
            (&["src/lib"], &[]),
            (&["old"], &[]),
            (&["name.rs"], &[]),
            // A path with ` b/` in it is matched whole, and only whole.
            (&["my"], &[]),
            (&["my b/lib.rs"], &["a/my b/lib.rs b/my b/lib.rs"]),
            (&[], &[]),
        ];
        for (paths, headers) in cases {
            let got = sections(paths);
            let got_headers: Vec<&str> = got
                .lines()
                .filter_map(|l| l.strip_prefix("diff --git "))
                .collect();
            assert_eq!(got_headers.len(), headers.len(), "{paths:?}: {got}");
            for (g, h) in got_headers.iter().zip(headers.iter()) {
                assert!(g.starts_with(h), "{paths:?}: {g} is not {h}");
            }
        }
    }

    /// A kept section is whole: every line up to the next header.
    #[test]
    fn a_section_is_kept_whole() {
        assert_eq!(
            sections(&["README.md"]),
            "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n\
             @@ -1 +1 @@\n-x\n+y\n"
        );
    }

    #[test]
    fn quotes_as_git_does() {
        assert_eq!(c_quoted("plain/name.rs"), "plain/name.rs");
        assert_eq!(c_quoted("é"), "\\303\\251");
        assert_eq!(c_quoted("a\tb\\c\"d\x01"), "a\\tb\\\\c\\\"d\\001");
    }
}
