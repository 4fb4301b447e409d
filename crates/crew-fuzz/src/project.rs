//! Whole project directories: the input describes a `.crew/` tree (which kind directory, what
//! kind of file: regular, a link inside, a link outside, a FIFO, a directory, a big sparse file,
//! and its bytes), built in a temp dir and scanned by crewd's own discovery. Nothing outside the
//! resource directory may be read, no special file may be opened (a FIFO would hang the target),
//! and every diagnostic names a path under it.

use crew_core::resource::{Catalog, Parsed, Source};
use std::path::Path;

const DIRS: [&str; 6] = ["agents", "teams", "workflows", "skills", "library", "."];
const NAMES: [&str; 8] = [
    "a.md",
    "b.team.md",
    "c.workflow.md",
    "SKILL.md",
    "d",
    "e.md",
    "f.workflow.md",
    "g.team.md",
];
/// What the files outside the resource directory hold: must never show up in a resource.
const OUTSIDE: &str = "OUTSIDE-SECRET";

pub fn project(data: &[u8]) {
    let Ok(tmp) = tempfile::tempdir() else { return };
    let outside = tmp.path().join("outside");
    let base = tmp.path().join("project/.crew");
    if std::fs::create_dir_all(&outside).is_err() || std::fs::create_dir_all(&base).is_err() {
        return;
    }
    let _ = std::fs::write(
        outside.join("secret.md"),
        format!("---\nname: {OUTSIDE}\n---\n{OUTSIDE}"),
    );
    let _ = std::fs::create_dir_all(outside.join("skill"));
    let _ = std::fs::write(
        outside.join("skill/SKILL.md"),
        format!("---\nname: skill\ndescription: {OUTSIDE}\n---\n"),
    );
    let mut rest = data;
    let mut made = Vec::new();
    while let [dir, what, name, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (content, next) = tail.split_at(len);
        rest = next;
        let dir = base.join(DIRS[usize::from(*dir) % DIRS.len()]);
        let name = NAMES[usize::from(*name) % NAMES.len()];
        // Skills live one directory deeper.
        let dir = if dir.ends_with("skills") {
            dir.join(format!("s{}", made.len() % 3))
        } else {
            dir
        };
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(name);
        // One entry per path: writing to an earlier entry that is a FIFO would block the
        // target itself (libFuzzer found that as a timeout of the harness, not of crewd).
        if std::fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        make(&path, *what, content, &outside, &made);
        made.push(path);
        if made.len() >= 32 {
            break;
        }
    }
    let cache = crewd::resources::ResourceCache::new(64);
    let Ok(root) = base.canonicalize() else {
        return;
    };
    // Twice: the second pass goes through the cache.
    for _ in 0..2 {
        let parsed = crewd::resources::scan(&cache, Source::Project, &base);
        for (p, diags) in &parsed {
            for d in diags {
                assert!(
                    Path::new(&d.path).starts_with(&base) || Path::new(&d.path).starts_with(&root),
                    "a diagnostic names a path outside the resource directory: {d:?}"
                );
            }
            if let Some(p) = p {
                let json = serde_json::to_string(p).unwrap_or_default();
                assert!(
                    !json.contains(OUTSIDE),
                    "a file outside the project was read: {json}"
                );
                let path = match p {
                    Parsed::Agent(a) => &a.path,
                    Parsed::Team(t) => &t.path,
                    Parsed::Workflow(w) => &w.path,
                    Parsed::Skill(s) => &s.path,
                };
                assert!(
                    Path::new(path).starts_with(&root),
                    "read {path} outside {}",
                    root.display()
                );
            }
        }
        let catalog = Catalog::assemble(parsed, true);
        let _ = crew_core::resource::validate_catalog(&catalog);
    }
}

fn make(path: &Path, what: u8, content: &[u8], outside: &Path, made: &[std::path::PathBuf]) {
    let _ = match what % 8 {
        0 | 1 => std::fs::write(path, content),
        2 => match made.last() {
            // A link to an earlier entry: inside the resource directory.
            Some(prev) => std::os::unix::fs::symlink(prev, path),
            None => std::fs::write(path, content),
        },
        3 => std::os::unix::fs::symlink(outside.join("secret.md"), path),
        4 => nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).map_err(std::io::Error::from),
        5 => std::fs::create_dir_all(path),
        6 => std::fs::File::create(path).and_then(|f| {
            // Sparse: sizes around the limit, up to 16 MiB, cost no disk.
            let size = (u64::from(content.first().copied().unwrap_or(0)) << 16)
                + crew_core::resource::MAX_FILE_BYTES
                - 0x8000;
            f.set_len(size)
        }),
        _ => match path.parent() {
            // A whole directory linked out.
            Some(parent)
                if parent.ends_with("skills")
                    || parent.parent().is_some_and(|p| p.ends_with("skills")) =>
            {
                std::os::unix::fs::symlink(outside.join("skill"), parent.join("linked"))
            }
            _ => std::os::unix::fs::symlink(outside, path),
        },
    };
}
