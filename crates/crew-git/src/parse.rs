//! Reading git's machine output (`-z`, `--porcelain`, `--numstat`).

use crate::GitError;
use std::path::PathBuf;

/// What a change touched: files, lines inserted, lines deleted (binary files count as files).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Diffstat {
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    Clean(String),
    /// Merging `with` into `merged_so_far` conflicts in `paths`.
    Conflict {
        paths: Vec<String>,
        with: String,
        merged_so_far: String,
    },
}

/// A full object id as git prints one (SHA-1 or SHA-256, hex): never an option, a range or a
/// revision expression.
pub fn is_oid(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

pub(crate) fn oid(args: &[&str], out: &[u8]) -> Result<String, GitError> {
    let s = String::from_utf8_lossy(out).trim().to_string();
    if is_oid(&s) {
        Ok(s)
    } else {
        Err(GitError::Parse {
            args: args.join(" "),
            what: format!("expected an object id, got `{}`", cut(&s, 200)),
        })
    }
}

/// The first NUL- or newline-terminated field, an object id (`merge-tree -z`).
pub(crate) fn first_z_oid(args: &[&str], out: &[u8]) -> Result<String, GitError> {
    let first = out
        .split(|b| *b == 0 || *b == b'\n')
        .next()
        .unwrap_or_default();
    oid(args, first)
}

/// `merge-tree --write-tree --name-only -z`: the tree id, then conflicted paths, then an empty
/// field before the (suppressed) messages.
pub(crate) fn conflict_paths(out: &[u8]) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for field in out.split(|b| *b == 0).skip(1) {
        if field.is_empty() {
            break;
        }
        let p = String::from_utf8_lossy(field).into_owned();
        if !paths.contains(&p) {
            paths.push(p);
        }
    }
    paths
}

/// The NUL-separated names git printed (`-z`), empty fields left out.
pub(crate) fn nul_list(out: &[u8]) -> Vec<String> {
    out.split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

/// `status --porcelain=v1 -z --no-renames`: `XY path\0` entries.
pub(crate) fn status_paths(out: &[u8]) -> Vec<String> {
    out.split(|b| *b == 0)
        .filter(|f| f.len() > 3)
        .filter_map(|f| f.get(3..))
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// `status --porcelain=v1 -z`: the untracked paths (`??`).
pub(crate) fn untracked_paths(out: &[u8]) -> Vec<String> {
    out.split(|b| *b == 0)
        .filter_map(|f| f.strip_prefix(b"?? "))
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// `diff --numstat -z --no-renames`: `ins\tdel\tpath\0` (`-\t-\t` for binary files).
pub(crate) fn numstat(out: &[u8]) -> Diffstat {
    let mut d = Diffstat::default();
    for entry in out.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let text = String::from_utf8_lossy(entry);
        let mut parts = text.splitn(3, '\t');
        let ins = parts.next().unwrap_or("");
        let del = parts.next().unwrap_or("");
        d.files = d.files.saturating_add(1);
        d.insertions = d.insertions.saturating_add(ins.parse().unwrap_or(0));
        d.deletions = d.deletions.saturating_add(del.parse().unwrap_or(0));
    }
    d
}

/// `worktree list --porcelain -z`: records of `key value\0` lines, the path under `worktree`.
pub(crate) fn worktree_paths(out: &[u8]) -> Vec<PathBuf> {
    out.split(|b| *b == 0)
        .filter_map(|l| l.strip_prefix(b"worktree "))
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .collect()
}

/// `worktree list --porcelain -z`: each worktree's path with the branch it has checked out
/// (full name), for those on a branch.
pub(crate) fn worktree_branches(out: &[u8]) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let mut path: Option<PathBuf> = None;
    for l in out.split(|b| *b == 0) {
        if let Some(p) = l.strip_prefix(b"worktree ") {
            path = Some(PathBuf::from(String::from_utf8_lossy(p).into_owned()));
        } else if let (Some(b), Some(p)) = (l.strip_prefix(b"branch "), &path) {
            found.push((p.clone(), String::from_utf8_lossy(b).into_owned()));
        }
    }
    found
}

/// At most `max` bytes of `s`, cut at a char boundary.
pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {

    #[test]
    fn worktree_branches_pair_each_path_with_its_branch() {
        let out = b"worktree /r\0HEAD a\0branch refs/heads/main\0\0worktree /w\0HEAD b\0detached\0\0worktree /x\0HEAD c\0branch refs/heads/crew/t\0\0";
        assert_eq!(
            worktree_branches(out),
            [
                (PathBuf::from("/r"), "refs/heads/main".to_string()),
                (PathBuf::from("/x"), "refs/heads/crew/t".to_string()),
            ]
        );
    }

    /// Only `??` entries are untracked; a rename's second path (after `R`) is not one
    /// (crew asks `--no-renames` anyway).
    #[test]
    fn untracked_status_entries() {
        let out = b"D  B.txt\0?? b.txt\0 M w.txt\0R  new\0old\0?? dir/x\0";
        assert_eq!(untracked_paths(out), ["b.txt", "dir/x"]);
        assert!(untracked_paths(b"D  B.txt\0A  b.txt\0").is_empty());
    }

    use super::*;

    #[test]
    fn numstat_counts_text_and_binary() {
        let d = numstat(b"3\t1\ta.txt\0-\t-\tb.bin\0");
        assert_eq!(
            d,
            Diffstat {
                files: 2,
                insertions: 3,
                deletions: 1
            }
        );
    }

    #[test]
    fn conflict_paths_stop_at_the_message_separator() {
        let tree = "a".repeat(40);
        let out = format!("{tree}\0x.txt\0y.txt\0x.txt\0\0Auto-merging x.txt\0");
        assert_eq!(conflict_paths(out.as_bytes()), ["x.txt", "y.txt"]);
    }

    #[test]
    fn status_and_worktrees_parse() {
        assert_eq!(status_paths(b" M a\0?? b c\0"), ["a", "b c"]);
        assert_eq!(
            worktree_paths(b"worktree /r\0HEAD abc\0branch refs/heads/m\0\0worktree /w\0"),
            [PathBuf::from("/r"), PathBuf::from("/w")]
        );
    }

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("héllo", 2), "h…");
        assert!(oid(&[], b"zz").is_err());
    }
}
