//! Resource discovery and the resource cache (SPEC §3, §9): parsed files keyed by path, fresh
//! while mtime and size are unchanged, LRU-bounded. An edited file is re-parsed on its next use.

use crate::shared::Shared;
use crew_core::resource::{self, Catalog, Diagnostic, Kind, Parsed, Source};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

type ParseResult = (Option<Parsed>, Vec<Diagnostic>);

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
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) => {
                return (
                    None,
                    vec![Diagnostic::error(
                        &shown,
                        None,
                        None,
                        format!("cannot read: {e}"),
                    )],
                )
            }
        };
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
        let parsed = match std::fs::read(path) {
            Ok(bytes) => resource::parse_file(kind, source, &shown, &bytes),
            Err(e) => (
                None,
                vec![Diagnostic::error(
                    &shown,
                    None,
                    None,
                    format!("cannot read: {e}"),
                )],
            ),
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

const KIND_DIRS: [(Kind, &str); 4] = [
    (Kind::Agent, "agents"),
    (Kind::Team, "teams"),
    (Kind::Workflow, "workflows"),
    (Kind::Skill, "skills"),
];

fn files_in(base: &Path, kind: Kind, dir: &str) -> Vec<(Kind, PathBuf)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(base.join(dir)) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        if kind == Kind::Skill {
            let skill = p.join("SKILL.md");
            // Symlinked skill directories are skipped (pi-crew did too): a link could pull in
            // anything.
            if e.file_type().is_ok_and(|t| t.is_dir()) && skill.is_file() {
                out.push((Kind::Skill, skill));
            }
        } else if let Some(k) = resource::kind_of_path(kind, &name) {
            if p.is_file() {
                out.push((k, p));
            }
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

/// Every resource visible from `cwd`, parsed through the cache.
pub fn catalog(shared: &Shared, cwd: Option<&Path>) -> Catalog {
    // Every run is planned through here, off the actor, before any of its tasks can look for a
    // reusable result: the place to load the saved result cache (once).
    shared.results.attach(&shared.state_dir);
    // Builtins are compiled in: parse them once per daemon, not once per run.
    static BUILTIN: std::sync::OnceLock<Vec<ParseResult>> = std::sync::OnceLock::new();
    let mut parsed = BUILTIN.get_or_init(resource::builtin::parsed).clone();
    let mut bases: Vec<(Source, PathBuf)> = Vec::new();
    if let Some(c) = config_home() {
        bases.push((Source::User, c.join("crew")));
    }
    if shared.config.pi_compat {
        if let Some(h) = home() {
            bases.push((Source::PiUser, h.join(".pi").join("agent")));
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
        bases.push((Source::Project, root.join(".crew")));
    }
    for (source, base) in bases {
        for (kind, dir) in KIND_DIRS {
            // pi-crew's user directory has no skills in this layout.
            if source == Source::PiUser && kind == Kind::Skill {
                continue;
            }
            for (k, path) in files_in(&base, kind, dir) {
                parsed.push(shared.resources.load(k, source, &path));
            }
        }
    }
    Catalog::assemble(parsed, trusted)
}
