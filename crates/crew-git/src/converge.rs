//! Bringing the files of a checkout that a commit change touches from one side to the other,
//! where they are still crew's to bring: the way back from a checkout that failed part way, and
//! the way forward after a crash cut one short. `read-tree --reset -u` would do the second
//! too, but it rewrites every tracked file that differs from the index, so it would throw away
//! an edit the user made meanwhile to a file the change does not touch.
//!
//! Each path the change touches is looked at alone: it holds the target's version (done), the
//! other side's or nothing (git removes a file before it writes the new one: crew's to write),
//! or neither — an edit of someone's, or a write cut short — which is left as it is and
//! reported. A file's executable bit is part of its version (where `core.fileMode` says the
//! checkout keeps it, as git's does by default). Submodules are left alone (a checkout does not
//! change their contents either).

use crate::{check, GitError, Repo};
use std::ffi::OsString;
use std::path::{Component, Path};

/// One path of the change: its blob on each side (`None`: not there).
#[derive(Debug, PartialEq)]
struct Changed {
    path: String,
    from: Option<Blob>,
    to: Option<Blob>,
}

#[derive(Debug, PartialEq)]
struct Blob {
    mode: String,
    oid: String,
}

impl Blob {
    fn is_submodule(&self) -> bool {
        self.mode == "160000"
    }
    fn kind(&self) -> Kind {
        match self.mode.as_str() {
            "120000" => Kind::Link,
            "100755" => Kind::File { exec: true },
            _ => Kind::File { exec: false },
        }
    }
}

/// What a path holds beside its object id.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Link,
    File { exec: bool },
}

impl Kind {
    /// Whether `self` (held) is `want` (a side's), the executable bit counted only when the
    /// checkout keeps it (`file_mode`).
    fn is(self, want: Kind, file_mode: bool) -> bool {
        match (self, want) {
            (Kind::File { exec: a }, Kind::File { exec: b }) => !file_mode || a == b,
            (a, b) => a == b,
        }
    }
}

/// What the work tree holds at a path.
#[derive(Debug, PartialEq)]
enum Held {
    Nothing,
    /// A file's object id or a link's, in the repository's format.
    Object(String, Kind),
    /// A folder, or something else git does not store.
    Other,
}

impl Repo {
    /// Bring the work tree's files that differ between commits `from` and `to` to `to`'s
    /// version wherever they hold `from`'s or nothing, from the index file `index` (which holds
    /// `to`'s entries for them). The paths left as they were (holding neither version, or
    /// whose write failed, e.g. a required smudge filter that failed) are returned.
    /// `leave`: paths that are not crew's to touch (files that were there before the
    /// checkout began, where the change adds one).
    pub async fn converge(
        &self,
        index: &Path,
        from: &str,
        to: &str,
        leave: &[String],
    ) -> Result<Vec<String>, GitError> {
        let changes = self.changes(from, to).await?;
        let mut left = Vec::new();
        let mut looked = Vec::new();
        for c in changes.into_iter().filter(|c| !leave.contains(&c.path)) {
            if c.from.as_ref().is_some_and(Blob::is_submodule)
                || c.to.as_ref().is_some_and(Blob::is_submodule)
            {
                continue;
            }
            // Never through a link or a file in the way: a folder of the path that is a link
            // (to outside the checkout, say) would have crew hash and remove what it points at.
            if !plain_relative(&c.path) || !plain_folders(self.dir(), &c.path) {
                left.push(c.path);
                continue;
            }
            looked.push(c);
        }
        let held = self.held_all(&looked).await?;
        let file_mode = self.keeps_file_mode().await?;
        let mut write = Vec::new();
        for (c, held) in looked.into_iter().zip(held) {
            let is = |b: &Option<Blob>| match (&held, b) {
                (Held::Nothing, None) => true,
                (Held::Object(h, kind), Some(b)) => *h == b.oid && kind.is(b.kind(), file_mode),
                _ => false,
            };
            if is(&c.to) {
                continue;
            }
            if !(is(&c.from) || held == Held::Nothing) {
                left.push(c.path);
                continue;
            }
            match c.to {
                Some(_) => write.push(c.path),
                None => {
                    if remove_with_empty_parents(self.dir(), &c.path).is_err() {
                        left.push(c.path);
                    }
                }
            }
        }
        left.extend(self.check_out_paths(index, write).await);
        Ok(left)
    }

    /// The paths the change from `from` to `to` adds that the work tree holds already (an
    /// untracked file where the change puts one): before a checkout, what is not crew's.
    pub async fn added_present(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        let changes = self.changes(from, to).await?;
        Ok(changes
            .into_iter()
            .filter(|c| c.from.is_none() && plain_relative(&c.path))
            .filter(|c| std::fs::symlink_metadata(self.dir().join(&c.path)).is_ok())
            .map(|c| c.path)
            .collect())
    }

    /// Whether the checkout keeps files' executable bit (`core.fileMode`, true unless set).
    async fn keeps_file_mode(&self) -> Result<bool, GitError> {
        let args = ["config", "--type=bool", "--get", "core.fileMode"];
        let out = self.raw(&args, &[]).await?;
        Ok(out.code != Some(0) || String::from_utf8_lossy(&out.stdout).trim() != "false")
    }

    /// What of the user's a checkout from `from` to `to` would overwrite or delete though it
    /// is not in the status that refuses a dirty tree: ignored files where the change adds a
    /// path (`out.log` written over, or `cfg/local.conf` when a folder `cfg` becomes a file or
    /// a link), and submodules with work of their own (changed or untracked files) that the
    /// change removes or replaces. Plain `git merge` loses both; an apply must not.
    pub async fn in_the_way(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        let changes = self.changes(from, to).await?;
        // Added paths, and the folders on their way, that the work tree holds as something
        // else (a file or a link where the change makes a folder: `dbg.log` for `dbg.log/x`).
        let mut added: Vec<String> = Vec::new();
        // Each folder once, however many added paths lie under it.
        let mut looked: std::collections::HashSet<&Path> = std::collections::HashSet::new();
        for c in changes
            .iter()
            .filter(|c| c.from.is_none() && plain_relative(&c.path))
        {
            if std::fs::symlink_metadata(self.dir().join(&c.path)).is_ok() {
                added.push(c.path.clone());
            }
            for a in Path::new(&c.path).ancestors().skip(1) {
                if a.as_os_str().is_empty() || !looked.insert(a) {
                    break;
                }
                let held = std::fs::symlink_metadata(self.dir().join(a));
                if held.is_ok_and(|m| !m.is_dir()) {
                    added.push(a.to_string_lossy().into_owned());
                }
            }
        }
        added.sort();
        added.dedup();
        // Submodules the change turns into a file or a link: git deletes their folder, with
        // whatever is in it (one the change only removes is left in place by git).
        let replaced_modules: Vec<&str> = changes
            .iter()
            .filter(|c| c.from.as_ref().is_some_and(Blob::is_submodule))
            .filter(|c| c.to.as_ref().is_some_and(|b| !b.is_submodule()))
            .map(|c| c.path.as_str())
            .collect();
        let mut found = Vec::new();
        // Only paths present in the work tree, so few; in bounded batches on the command line
        // (ls-files takes no pathspec file).
        for batch in added.chunks(256) {
            let mut args = vec![
                "--literal-pathspecs",
                "ls-files",
                "-z",
                "--others",
                "--ignored",
                "--exclude-standard",
                "--",
            ];
            args.extend(batch.iter().map(String::as_str));
            let out = self.run(&args, &[]).await?;
            found.extend(crate::parse::nul_list(&out));
        }
        for m in replaced_modules {
            let dir = self.dir().join(m);
            if !dir.join(".git").exists() {
                continue;
            }
            // Inside the submodule: its changed, untracked and ignored files alike.
            let args = [
                "status",
                "--porcelain=v1",
                "-z",
                "--ignored",
                "--untracked-files=all",
            ];
            let out = self.git.repo(&dir).run(&args, &[]).await?;
            if !out.is_empty() {
                found.push(format!("{m} (a submodule with files of its own)"));
            }
        }
        Ok(found)
    }

    /// Files of the change from `from` to `to` that the user edited where git does not look:
    /// entries marked assume-unchanged (`git update-index --assume-unchanged`) or
    /// skip-worktree whose file is in the work tree and holds something other than `from`'s
    /// version. `git status` shows none of them, so the dirty-tree refusal cannot; the
    /// checkout then stops at the first ("not uptodate"), after crew moved the branch.
    pub async fn hidden_edits(&self, from: &str, to: &str) -> Result<Vec<String>, GitError> {
        let out = self.run(&["ls-files", "-v", "-z"], &[]).await?;
        let hidden: std::collections::HashSet<&[u8]> = out
            .split(|b| *b == 0)
            .filter_map(|e| {
                let (tag, path) = (e.first()?, e.get(2..)?);
                // Lower case: assume-unchanged; `S`: skip-worktree.
                (tag.is_ascii_lowercase() || *tag == b'S').then_some(path)
            })
            .collect();
        if hidden.is_empty() {
            return Ok(Vec::new());
        }
        let changes: Vec<Changed> = self
            .changes(from, to)
            .await?
            .into_iter()
            .filter(|c| c.from.is_some() && hidden.contains(c.path.as_bytes()))
            .filter(|c| plain_relative(&c.path))
            .collect();
        let held = self.held_all(&changes).await?;
        Ok(changes
            .into_iter()
            .zip(held)
            .filter(|(c, h)| match (h, &c.from) {
                (Held::Nothing, _) => false,
                (Held::Object(oid, _), Some(b)) => *oid != b.oid,
                _ => true,
            })
            .map(|(c, _)| c.path)
            .collect())
    }

    /// The paths that differ between two commits, with their blobs (no renames).
    async fn changes(&self, from: &str, to: &str) -> Result<Vec<Changed>, GitError> {
        let args = ["diff-tree", "-r", "-z", "--no-renames", from, to, "--"];
        let out = self.run(&args, &[]).await?;
        if let Some(name) = out
            .split(|b| *b == 0)
            .find(|f| std::str::from_utf8(f).is_err())
        {
            return Err(GitError::NotUtf8(
                String::from_utf8_lossy(name).escape_debug().to_string(),
            ));
        }
        parse_diff_tree(&out).ok_or_else(|| GitError::Parse {
            args: args.join(" "),
            what: "a record that is not `:mode mode oid oid status NUL path NUL`".into(),
        })
    }

    /// What the work tree holds at each path of `changes`, in order: the plain files hashed by
    /// one git (`--stdin-paths`, each through its clean filter), the rest one by one.
    async fn held_all(&self, changes: &[Changed]) -> Result<Vec<Held>, GitError> {
        let mut held = Vec::with_capacity(changes.len());
        let mut batch = Vec::new();
        for (i, c) in changes.iter().enumerate() {
            let meta = std::fs::symlink_metadata(self.dir().join(&c.path));
            let plain = meta.as_ref().is_ok_and(|m| m.is_file());
            // A name with a line break cannot go on `--stdin-paths`' lines, and one that starts
            // with `"` is read there as C-quoted (`"a.txt"` would hash `a.txt`).
            if plain && !c.path.contains('\n') && !c.path.starts_with('"') {
                held.push(Held::Other);
                batch.push((i, meta.is_ok_and(|m| is_exec(&m))));
            } else {
                held.push(self.held(&c.path).await?);
            }
        }
        if batch.is_empty() {
            return Ok(held);
        }
        let args = ["hash-object", "--stdin-paths"];
        let input: Vec<u8> = batch
            .iter()
            .filter_map(|&(i, _)| changes.get(i))
            .flat_map(|c| c.path.bytes().chain([b'\n']))
            .collect();
        let out = check(&args, self.raw_in(&args, &[], Some(input)).await?)?;
        let oids: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .map(str::to_string)
            .collect();
        if oids.len() != batch.len() {
            return Err(GitError::Parse {
                args: args.join(" "),
                what: format!("{} object ids for {} files", oids.len(), batch.len()),
            });
        }
        for ((i, exec), oid) in batch.into_iter().zip(oids) {
            if let Some(h) = held.get_mut(i) {
                *h = Held::Object(oid, Kind::File { exec });
            }
        }
        Ok(held)
    }

    /// What the work tree holds at `path`: a file as `git add` would store it (through its
    /// clean filter), a link by its target.
    async fn held(&self, path: &str) -> Result<Held, GitError> {
        let full = self.dir().join(path);
        let meta = match std::fs::symlink_metadata(&full) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Held::Nothing),
            Err(e) => return Err(e.into()),
            Ok(m) => m,
        };
        let (out, kind) = if meta.file_type().is_symlink() {
            use std::os::unix::ffi::OsStrExt;
            let target = std::fs::read_link(&full)?.as_os_str().as_bytes().to_vec();
            let args = ["hash-object", "--stdin"];
            (
                check(&args, self.raw_in(&args, &[], Some(target)).await?)?,
                Kind::Link,
            )
        } else if meta.is_file() {
            let args = ["hash-object", "--", path];
            let exec = is_exec(&meta);
            (
                check(&args, self.raw(&args, &[]).await?)?,
                Kind::File { exec },
            )
        } else {
            return Ok(Held::Other);
        };
        let oid = String::from_utf8_lossy(&out).trim().to_string();
        Ok(Held::Object(oid, kind))
    }

    /// Write `paths` from the index file `index`; those whose write failed. One git for all,
    /// then one per path when that fails, to tell which.
    async fn check_out_paths(&self, index: &Path, paths: Vec<String>) -> Vec<String> {
        if paths.is_empty() {
            return paths;
        }
        let idx = OsString::from(index);
        let env = [("GIT_INDEX_FILE", &idx)];
        let args = ["checkout-index", "-f", "-z", "--stdin"];
        let list = |p: &[String]| {
            p.iter()
                .flat_map(|s| s.bytes().chain([0]))
                .collect::<Vec<u8>>()
        };
        if let Ok(out) = self.raw_in(&args, &env, Some(list(&paths))).await {
            if out.code == Some(0) {
                return Vec::new();
            }
        }
        let mut failed = Vec::new();
        for p in paths {
            let one = ["checkout-index", "-f", "--", p.as_str()];
            let ok = self
                .raw_in(&one, &env, None)
                .await
                .is_ok_and(|o| o.code == Some(0));
            if !ok {
                failed.push(p);
            }
        }
        failed
    }
}

/// Whether git would store the file as executable (its owner may run it, as git looks).
fn is_exec(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o100 != 0
}

/// A path inside the checkout: relative, no `..`, no `.git`, nothing empty.
fn plain_relative(path: &str) -> bool {
    !path.is_empty()
        && Path::new(path).components().all(|c| match c {
            Component::Normal(n) => !n.eq_ignore_ascii_case(".git"),
            _ => false,
        })
}

/// Whether each folder on the way to `path` under `root` that exists is a real folder (not a
/// link, not a file); one that does not exist is fine (nothing is there to read or remove).
fn plain_folders(root: &Path, path: &str) -> bool {
    let mut at = root.to_path_buf();
    let folders = Path::new(path)
        .parent()
        .into_iter()
        .flat_map(Path::components);
    for c in folders {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return false,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(_) => return false,
        }
    }
    true
}

/// Remove `path` under `root`, then each folder above it that is left empty (as git does).
fn remove_with_empty_parents(root: &Path, path: &str) -> std::io::Result<()> {
    let full = root.join(path);
    match std::fs::remove_file(&full) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut dir = full.parent();
    while let Some(d) = dir.filter(|d| *d != root && d.starts_with(root)) {
        if std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// `diff-tree -r -z` records: `:<mode> <mode> <oid> <oid> <status>` NUL `<path>` NUL.
fn parse_diff_tree(out: &[u8]) -> Option<Vec<Changed>> {
    let mut fields = out.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut v = Vec::new();
    while let Some(head) = fields.next() {
        let head = std::str::from_utf8(head).ok()?.strip_prefix(':')?;
        let path = String::from_utf8(fields.next()?.to_vec()).ok()?;
        let mut w = head.split(' ');
        let (m1, m2, o1, o2) = (w.next()?, w.next()?, w.next()?, w.next()?);
        let blob = |mode: &str, oid: &str| {
            (!oid.bytes().all(|b| b == b'0')).then(|| Blob {
                mode: mode.to_string(),
                oid: oid.to_string(),
            })
        };
        v.push(Changed {
            path,
            from: blob(m1, o1),
            to: blob(m2, o2),
        });
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_tree_records() {
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let out = format!(
            ":100644 100644 {a} {b} M\0x y.txt\0:000000 100644 {z} {b} A\0new\0:100644 000000 {a} {z} D\0gone\0"
        );
        let v = parse_diff_tree(out.as_bytes()).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].path, "x y.txt");
        assert_eq!(v[0].from.as_ref().unwrap().oid, a);
        assert!(v[1].from.is_none() && v[1].to.is_some());
        assert!(v[2].to.is_none());
        assert!(parse_diff_tree(b":100644 100644 x").is_none());
        assert_eq!(parse_diff_tree(b"").unwrap(), vec![]);
    }

    #[test]
    fn never_through_a_link_or_a_file() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("real/sub")).unwrap();
        std::fs::write(r.join("file"), "").unwrap();
        std::os::unix::fs::symlink("/etc", r.join("link")).unwrap();
        for (p, ok) in [
            ("top.txt", true),
            ("real/sub/x", true),
            ("real/gone/x", true),
            ("link/passwd", false),
            ("file/x", false),
        ] {
            assert_eq!(plain_folders(r, p), ok, "{p}");
        }
    }

    #[test]
    fn only_plain_relative_paths() {
        for (p, ok) in [
            ("a/b.txt", true),
            ("", false),
            ("/etc/passwd", false),
            ("a/../../x", false),
            (".git/config", false),
            ("sub/.GIT/hooks/x", false),
            ("./a", false),
        ] {
            assert_eq!(plain_relative(p), ok, "{p}");
        }
    }
}
