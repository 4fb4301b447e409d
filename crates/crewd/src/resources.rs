//! Resource discovery and the resource cache (SPEC §3, §9): parsed files keyed by path, fresh
//! while mtime and size are unchanged, LRU-bounded. An edited file is re-parsed on its next use.

use crate::shared::Shared;
use crew_core::resource::{self, Catalog, Diagnostic, Kind, Parsed, Source};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

pub type ParseResult = (Option<Parsed>, Vec<Diagnostic>);

struct Entry {
    mtime: Option<SystemTime>,
    size: u64,
    parsed: ParseResult,
}

#[derive(Default)]
struct Counters {
    hits: u64,
    misses: u64,
    evictions: u64,
}

pub struct ResourceCache {
    inner: Mutex<(LruCache<PathBuf, Entry>, Counters)>,
    capacity: usize,
}

pub fn stat(
    hits: u64,
    misses: u64,
    evictions: u64,
    entries: u64,
    capacity: u64,
) -> crew_api::types::CacheStat {
    let total = hits + misses;
    crew_api::types::CacheStat {
        hits,
        misses,
        evictions,
        entries,
        capacity,
        hit_rate: if total == 0 {
            0.0
        } else {
            hits as f64 / total as f64
        },
    }
}

impl ResourceCache {
    pub fn new(capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        ResourceCache {
            inner: Mutex::new((LruCache::new(cap), Counters::default())),
            capacity: capacity.max(1),
        }
    }

    fn load(&self, kind: Kind, source: Source, path: &Path) -> ParseResult {
        let shown = path.display().to_string();
        let fail = |message: String| (None, vec![Diagnostic::error(&shown, None, None, message)]);
        // Opened before anything is judged, and judged by the opened file's own metadata: a
        // FIFO would block an open without O_NONBLOCK, and a name checked before the open may
        // be another file by the time it is opened.
        // The type is checked before the open too: opening a socket fails with a confusing
        // ENXIO, a device may act on open.
        match std::fs::symlink_metadata(path) {
            Ok(m) if !m.is_file() => return fail(not_a_file(&m.file_type())),
            Ok(_) => {}
            Err(e) => return fail(format!("cannot read: {e}")),
        }
        let mut file = match open_resource(path) {
            Ok(f) => f,
            Err(e) => return fail(format!("cannot read: {e}")),
        };
        let meta = match file.metadata() {
            Ok(m) => m,
            Err(e) => return fail(format!("cannot read: {e}")),
        };
        if !meta.is_file() {
            return fail(not_a_file(&meta.file_type()));
        }
        let (mtime, size) = (meta.modified().ok(), meta.len());
        if let Ok(mut g) = self.inner.lock() {
            if let Some(e) = g.0.get(path) {
                if e.mtime == mtime && e.size == size {
                    let parsed = e.parsed.clone();
                    g.1.hits += 1;
                    return parsed;
                }
            }
            g.1.misses += 1;
        }
        let parsed = if size > resource::MAX_FILE_BYTES {
            (None, vec![resource::too_large(&shown)])
        } else {
            // One byte more than the limit tells a file that grew since the fstat.
            let mut bytes = Vec::new();
            use std::io::Read;
            match (&mut file)
                .take(resource::MAX_FILE_BYTES + 1)
                .read_to_end(&mut bytes)
            {
                Ok(_) => resource::parse_file(kind, source, &shown, &bytes),
                Err(e) => fail(format!("cannot read: {e}")),
            }
        };
        if let Ok(mut g) = self.inner.lock() {
            if g.0
                .push(
                    path.to_path_buf(),
                    Entry {
                        mtime,
                        size,
                        parsed: parsed.clone(),
                    },
                )
                .is_some_and(|(k, _)| k != path)
            {
                g.1.evictions += 1;
            }
        }
        parsed
    }

    /// Drop the entry of `path`, or of every file under it when it is a directory. Paths are
    /// compared as given and canonicalized, so a symlinked spelling matches too.
    pub fn invalidate(&self, path: &Path) -> u64 {
        let canon = path.canonicalize().ok();
        let Ok(mut g) = self.inner.lock() else {
            return 0;
        };
        let keys: Vec<PathBuf> =
            g.0.iter()
                .map(|(k, _)| k)
                .filter(|k| {
                    k.starts_with(path)
                        || canon.as_ref().is_some_and(|c| {
                            k.starts_with(c) || k.canonicalize().is_ok_and(|kc| kc.starts_with(c))
                        })
                })
                .cloned()
                .collect();
        for k in &keys {
            g.0.pop(k);
        }
        keys.len() as u64
    }

    pub fn clear(&self) {
        if let Ok(mut g) = self.inner.lock() {
            let n = g.0.len() as u64;
            g.0.clear();
            g.1.evictions += n;
        }
    }

    pub fn stats(&self) -> crew_api::types::CacheStat {
        let Ok(g) = self.inner.lock() else {
            return Default::default();
        };
        stat(
            g.1.hits,
            g.1.misses,
            g.1.evictions,
            g.0.len() as u64,
            self.capacity as u64,
        )
    }
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

pub fn config_home() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".config")))
}

/// The nearest ancestor of `cwd` holding `.git` or `.crew`.
pub fn project_root(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|d| d.join(".git").exists() || d.join(".crew").exists())
        .map(Path::to_path_buf)
}

/// Kind directories of a resource directory: which kind lives in which subdirectory.
type KindDirs = [(Kind, &'static str)];

const KIND_DIRS: [(Kind, &str); 4] = [
    (Kind::Agent, "agents"),
    (Kind::Team, "teams"),
    (Kind::Workflow, "workflows"),
    (Kind::Skill, "skills"),
];

/// Open a resource file for reading: never blocks on a FIFO (`O_NONBLOCK`; reads of a regular
/// file ignore it) and never follows a link in the last component (links were resolved and
/// checked by `files_in`, which hands over the target).
fn open_resource(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn not_a_file(t: &std::fs::FileType) -> String {
    use std::os::unix::fs::FileTypeExt;
    let what = if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    };
    format!("{what}, not a regular file; not read as a resource")
}

/// What discovery found in a resource directory: a file to parse, or why an entry is not read.
enum Found {
    File(Kind, PathBuf),
    Skipped(Diagnostic),
}

fn skipped(path: &Path, message: impl Into<String>) -> Found {
    Found::Skipped(Diagnostic::error(
        &path.display().to_string(),
        None,
        None,
        message,
    ))
}

/// How far a link in a resource directory may point.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Links {
    /// A project's `.crew/`: only inside the directory. Links that leave it are how a cloned
    /// repository's `.crew/agents/spy.md -> ~/.ssh/id_ed25519` would become a system prompt.
    Inside,
    /// The user's own directories: anywhere. The user put the links there (dotfile managers
    /// such as GNU stow link files one by one into `~/.config/crew/agents/`); the trust
    /// boundary is what a repository brings, not what the user's home holds.
    Anywhere,
}

impl Links {
    fn of(source: Source) -> Links {
        match source {
            Source::Project => Links::Inside,
            Source::Builtin | Source::User | Source::PiUser => Links::Anywhere,
        }
    }
}

/// `path` itself when it is no link; a link's target when `links` allows where it points
/// (`root`: the canonical resource directory); else why not.
fn resolve_inside(root: &Path, path: &Path, links: Links) -> Result<PathBuf, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.file_type().is_symlink() {
        return Ok(path.to_path_buf());
    }
    let target = path
        .canonicalize()
        .map_err(|e| format!("a symlink whose target cannot be read ({e}); not followed"))?;
    if links == Links::Anywhere || target.starts_with(root) {
        Ok(target)
    } else {
        Err(format!(
            "a symlink to {}, outside the resource directory {}; not followed",
            target.display(),
            root.display()
        ))
    }
}

fn files_in(base: &Path, kind: Kind, dir: &str, links: Links) -> Vec<Found> {
    let mut out = Vec::new();
    let Ok(root) = base.canonicalize() else {
        return out;
    };
    let kind_dir = base.join(dir);
    let kind_dir = match resolve_inside(&root, &kind_dir, links) {
        Ok(d) => d,
        Err(_) if !kind_dir.exists() && std::fs::symlink_metadata(&kind_dir).is_err() => {
            return out
        }
        Err(why) => {
            out.push(skipped(&kind_dir, why));
            return out;
        }
    };
    let Ok(rd) = std::fs::read_dir(&kind_dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        let Ok(ft) = e.file_type() else { continue };
        if kind == Kind::Skill {
            if ft.is_symlink() && links == Links::Inside {
                // pi-crew skipped symlinked skill directories too: a link could pull in anything.
                out.push(skipped(
                    &p,
                    "a symlinked skill directory; not followed (a skill lives in a real directory)",
                ));
                continue;
            }
            if !(ft.is_dir() || ft.is_symlink() && p.is_dir()) {
                continue;
            }
            let skill = p.join("SKILL.md");
            match resolve_inside(&root, &skill, links) {
                Ok(target) => out.push(Found::File(Kind::Skill, target)),
                Err(_) if std::fs::symlink_metadata(&skill).is_err() => {}
                Err(why) => out.push(skipped(&skill, why)),
            }
        } else if let Some(k) = resource::kind_of_path(kind, &name) {
            if ft.is_dir() {
                continue;
            }
            match resolve_inside(&root, &p, links) {
                Ok(target) => out.push(Found::File(k, target)),
                Err(why) => out.push(skipped(&p, why)),
            }
        }
    }
    out.sort_by(|a, b| found_key(a).cmp(found_key(b)));
    out
}

fn found_key(f: &Found) -> &str {
    match f {
        Found::File(_, p) => p.to_str().unwrap_or(""),
        Found::Skipped(d) => &d.path,
    }
}

/// Every resource visible from `cwd`, parsed through the cache.
pub fn catalog(shared: &Shared, cwd: Option<&Path>) -> Catalog {
    // Every run is planned through here, off the actor, before any of its tasks can look for a
    // reusable result: the place to load the saved result cache (once).
    shared.results.attach(&shared.state_dir);
    // Builtins are compiled in: parse them once per daemon, not once per run.
    static BUILTIN: std::sync::OnceLock<Vec<ParseResult>> = std::sync::OnceLock::new();
    let mut parsed = BUILTIN.get_or_init(resource::builtin::parsed).clone();
    let mut bases: Vec<(Source, PathBuf, &KindDirs)> = Vec::new();
    if let Some(c) = config_home() {
        bases.push((Source::User, c.join("crew"), &KIND_DIRS));
    }
    if shared.config.pi_compat {
        if let Some(h) = home() {
            // pi-crew's user directory has no skills in this layout.
            const PI_USER: [(Kind, &str); 3] = [
                (Kind::Agent, "agents"),
                (Kind::Team, "teams"),
                (Kind::Workflow, "workflows"),
            ];
            bases.push((Source::PiUser, h.join(".pi").join("agent"), &PI_USER));
        }
    }
    let mut trusted = false;
    if let Some(root) = cwd.and_then(project_root) {
        let canon = root.canonicalize().unwrap_or_else(|_| root.clone());
        trusted = shared
            .config
            .trusted_projects
            .iter()
            .any(|t| t.canonicalize().map(|t| t == canon).unwrap_or(false) || *t == root);
        let has_dot_crew = std::fs::symlink_metadata(root.join(".crew")).is_ok();
        let mut project: Vec<(PathBuf, &KindDirs)> = vec![(root.join(".crew"), &KIND_DIRS)];
        if shared.config.pi_compat {
            project.extend(pi_project_dirs(&root, has_dot_crew));
        }
        for (dir, kinds) in project {
            match resolve_inside(&canon, &dir, Links::Inside) {
                Ok(_) => bases.push((Source::Project, dir, kinds)),
                Err(_) if std::fs::symlink_metadata(&dir).is_err() => {}
                Err(why) => parsed.push((
                    None,
                    vec![Diagnostic::error(
                        &dir.display().to_string(),
                        None,
                        None,
                        why.replace("resource directory", "project"),
                    )],
                )),
            }
        }
    }
    for (source, base, kinds) in bases {
        parsed.extend(scan_kinds(&shared.resources, source, &base, kinds));
    }
    Catalog::assemble(parsed, trusted)
}

/// Where pi-crew looked in a project, besides `.crew/` (issue 19): its agents in `.pi/agents`,
/// its team root `.pi/teams/{agents,teams,workflows,skills}` when the project has no `.crew`, and
/// pi's skill folders `.pi/skills` and `.agents/skills`. They are project resources: the same
/// trust rule, the same link rule. Unlike pi-crew, `.crew/` wins a name clash with them (the
/// first path wins within a layer), with a warning.
fn pi_project_dirs(
    root: &Path,
    has_dot_crew: bool,
) -> Vec<(PathBuf, &'static [(Kind, &'static str)])> {
    const AGENTS_AND_SKILLS: [(Kind, &str); 2] = [(Kind::Agent, "agents"), (Kind::Skill, "skills")];
    const SKILLS: [(Kind, &str); 1] = [(Kind::Skill, "skills")];
    let pi = root.join(".pi");
    let mut dirs: Vec<(PathBuf, &'static KindDirs)> = vec![
        (pi.clone(), &AGENTS_AND_SKILLS),
        (root.join(".agents"), &SKILLS),
    ];
    if !has_dot_crew {
        dirs.push((pi.join("teams"), &KIND_DIRS));
    }
    dirs
}

/// Every resource file of one resource directory (`base`: a project's `.crew`, the user's
/// `crew` config directory), parsed through `cache`, with a diagnostic for each entry that is
/// not read. Public for the fuzz target that builds whole directories.
pub fn scan(cache: &ResourceCache, source: Source, base: &Path) -> Vec<ParseResult> {
    scan_kinds(cache, source, base, &KIND_DIRS)
}

/// `scan`, for the kind directories `kinds` of `base` only.
fn scan_kinds(
    cache: &ResourceCache,
    source: Source,
    base: &Path,
    kinds: &KindDirs,
) -> Vec<ParseResult> {
    let mut parsed = Vec::new();
    for &(kind, dir) in kinds {
        for found in files_in(base, kind, dir, Links::of(source)) {
            match found {
                Found::File(k, path) => parsed.push(cache.load(k, source, &path)),
                Found::Skipped(d) => parsed.push((None, vec![d])),
            }
        }
    }
    parsed
}
