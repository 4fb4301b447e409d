//! Result reuse (SPEC §9): completed results keyed by a fingerprint of everything that decides
//! an agent's answer. Opt-in per run; read-only roles only unless the run asks for all.

use crate::executor::{sha256_hex, AttemptSpec};
use crew_core::run::Reuse;
use crew_core::usage::Usage;
use lru::LruCache;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Mutex;

#[derive(Debug, Clone)]
pub struct CachedResult {
    pub run_id: String,
    pub task_id: String,
    pub result_path: PathBuf,
    pub usage: Usage,
    pub model: Option<String>,
}

#[derive(Default)]
struct Counters {
    hits: u64,
    misses: u64,
    evictions: u64,
    tokens_saved: u64,
    cost_saved: f64,
}

pub struct ResultCache {
    inner: Mutex<(LruCache<String, CachedResult>, Counters)>,
    capacity: usize,
}

impl ResultCache {
    pub fn new(capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        ResultCache {
            inner: Mutex::new((LruCache::new(cap), Counters::default())),
            capacity: capacity.max(1),
        }
    }

    pub fn lookup(&self, fp: &str) -> Option<CachedResult> {
        let mut g = self.inner.lock().ok()?;
        let hit = g.0.get(fp).cloned();
        if hit.is_some() {
            g.1.hits += 1;
        } else {
            g.1.misses += 1;
        }
        hit
    }

    pub fn record_saving(&self, usage: &Usage) {
        if let Ok(mut g) = self.inner.lock() {
            g.1.tokens_saved += usage.input + usage.output + usage.cache_read + usage.cache_write;
            g.1.cost_saved += usage.cost;
        }
    }

    pub fn insert(&self, fp: String, r: CachedResult) {
        if let Ok(mut g) = self.inner.lock() {
            if g.0
                .push(fp, r)
                .is_some_and(|(_, old)| old.result_path.exists())
            {
                g.1.evictions += 1;
            }
        }
    }

    pub fn clear(&self) {
        if let Ok(mut g) = self.inner.lock() {
            let n = g.0.len() as u64;
            g.0.clear();
            g.1.evictions += n;
        }
    }

    /// Drop every entry produced by `run_id`.
    pub fn invalidate_run(&self, run_id: &str) -> u64 {
        let Ok(mut g) = self.inner.lock() else {
            return 0;
        };
        let keys: Vec<String> =
            g.0.iter()
                .filter(|(_, v)| v.run_id == run_id)
                .map(|(k, _)| k.clone())
                .collect();
        for k in &keys {
            g.0.pop(k);
        }
        keys.len() as u64
    }

    pub fn stats(&self) -> crew_api::types::ResultCacheStat {
        let Ok(g) = self.inner.lock() else {
            return Default::default();
        };
        let c = &g.1;
        crew_api::types::ResultCacheStat {
            stat: crate::resources::stat(
                c.hits,
                c.misses,
                c.evictions,
                g.0.len() as u64,
                self.capacity as u64,
            ),
            tokens_saved: c.tokens_saved,
            cost_saved: c.cost_saved,
        }
    }
}

/// Whether this attempt may take a cached result, and its fingerprint if so: runtime, model,
/// system prompt, full prompt, and the cwd's git HEAD plus a hash of its uncommitted changes.
pub async fn fingerprint_for(spec: &AttemptSpec, prompt: &str) -> Option<String> {
    let allowed = match spec.reuse {
        Reuse::Off => false,
        Reuse::ReadOnly => !spec.plan.writes,
        Reuse::All => true,
    };
    if !allowed {
        return None;
    }
    let tree = git_state(&spec.cwd).await?;
    let mut material = String::new();
    for part in [
        spec.runtime_name.as_str(),
        spec.model.as_deref().unwrap_or(""),
        spec.plan.system_prompt.as_str(),
        prompt,
        tree.as_str(),
    ] {
        material.push_str(&part.len().to_string());
        material.push(':');
        material.push_str(part);
    }
    Some(sha256_hex(material.as_bytes()))
}

/// `HEAD <sha> diff <hash>` of the work tree at `cwd`, or None outside a git work tree.
pub async fn git_state(cwd: &str) -> Option<String> {
    let git = |args: &'static [&'static str]| {
        let cwd = cwd.to_string();
        async move {
            let out = tokio::process::Command::new("git")
                .args(args)
                .current_dir(&cwd)
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .ok()?;
            out.status.success().then_some(out.stdout)
        }
    };
    let head = git(&["rev-parse", "HEAD"]).await?;
    let diff = git(&["diff", "HEAD", "--binary"]).await.unwrap_or_default();
    // Untracked files count as changes too: their names and contents.
    let untracked = git(&["ls-files", "--others", "--exclude-standard", "-z"])
        .await
        .unwrap_or_default();
    let mut h = diff;
    for name in untracked.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        h.extend_from_slice(name);
        let path = std::path::Path::new(cwd).join(String::from_utf8_lossy(name).as_ref());
        if let Ok(bytes) = std::fs::read(&path) {
            h.extend_from_slice(&bytes[..bytes.len().min(1 << 20)]);
        }
    }
    Some(format!(
        "HEAD {} diff {}",
        String::from_utf8_lossy(&head).trim(),
        sha256_hex(&h)
    ))
}
