//! Result reuse (SPEC §9): completed results keyed by a fingerprint of everything that decides
//! an agent's answer. Opt-in per run; read-only roles only unless the run asks for all.
//!
//! Entries outlive the daemon: every change is appended as one JSON line to
//! `<state>/result-cache.jsonl`, replayed on start (entries whose result file is gone are
//! dropped) and compacted by an atomic rewrite. A result is paid for once, not once per daemon.

use crate::artifacts::sha256_hex;
use crew_core::usage::Usage;
use lru::LruCache;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The index file under the state directory.
pub const INDEX_FILE: &str = "result-cache.jsonl";

/// Compact once the file holds this many lines per live entry (and at least `COMPACT_MIN`).
const COMPACT_FACTOR: u64 = 2;
const COMPACT_MIN: u64 = 1024;

#[derive(Debug, Clone)]
pub struct CachedResult {
    pub run_id: String,
    pub task_id: String,
    pub result_path: PathBuf,
    pub usage: Usage,
    pub model: Option<String>,
    /// A writing task's result commit in worktree mode: reusing the result is taking this
    /// commit (its parent is the start commit the fingerprint holds).
    pub commit: Option<String>,
}

/// One line of the index file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
enum Line {
    #[serde(rename_all = "camelCase")]
    Put {
        fp: String,
        run_id: String,
        task_id: String,
        /// Relative to the state directory when the result lives under it.
        path: PathBuf,
        usage: Usage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
    },
    /// A reuse: replaying it keeps the least recently used order of the daemon that wrote it.
    Hit { fp: String },
    #[serde(rename_all = "camelCase")]
    DropRun { run_id: String },
}

#[derive(Default)]
struct Counters {
    hits: u64,
    misses: u64,
    evictions: u64,
    tokens_saved: u64,
    cost_saved: f64,
}

/// The open index file.
struct Store {
    state_dir: PathBuf,
    file: Option<File>,
    lines: u64,
}

impl Store {
    fn index(&self) -> PathBuf {
        self.state_dir.join(INDEX_FILE)
    }

    fn to_line(&self, fp: &str, r: &CachedResult) -> Line {
        let path = r
            .result_path
            .strip_prefix(&self.state_dir)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| r.result_path.clone());
        Line::Put {
            fp: fp.to_string(),
            run_id: r.run_id.clone(),
            task_id: r.task_id.clone(),
            path,
            usage: r.usage,
            model: r.model.clone(),
            commit: r.commit.clone(),
        }
    }

    /// Append one line in a single write (O_APPEND), so a crash leaves at most a torn last
    /// line, which the next start skips and the compaction removes.
    fn append(&mut self, line: &Line) {
        let Some(f) = self.file.as_mut() else {
            return;
        };
        let Ok(mut bytes) = serde_json::to_vec(line) else {
            return;
        };
        bytes.push(b'\n');
        match f.write_all(&bytes) {
            Ok(()) => self.lines += 1,
            Err(e) => {
                tracing::warn!(error = %e, "cannot append to the result cache index; reuse continues in memory only");
                self.file = None;
            }
        }
    }

    /// Rewrite the file with exactly `entries` (oldest first): temp file, fsync, rename.
    fn rewrite(&mut self, entries: &[(String, CachedResult)]) {
        let index = self.index();
        let tmp = self.state_dir.join(format!("{INDEX_FILE}.tmp"));
        let mut body = Vec::new();
        for (fp, r) in entries {
            if let Ok(b) = serde_json::to_vec(&self.to_line(fp, r)) {
                body.extend_from_slice(&b);
                body.push(b'\n');
            }
        }
        let written = (|| -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &index)?;
            File::open(&self.state_dir)?.sync_all()
        })();
        if let Err(e) = written {
            tracing::warn!(error = %e, path = %index.display(), "cannot rewrite the result cache index");
            let _ = std::fs::remove_file(&tmp);
        }
        self.lines = entries.len() as u64;
        self.file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&index)
            .map_err(|e| {
                tracing::warn!(error = %e, path = %index.display(), "cannot open the result cache index; reuse continues in memory only");
            })
            .ok();
    }
}

struct Inner {
    lru: LruCache<String, CachedResult>,
    counters: Counters,
    store: Option<Store>,
}

impl Inner {
    /// Entries oldest first (the order the file is rewritten in, so recency survives).
    fn entries(&self) -> Vec<(String, CachedResult)> {
        self.lru
            .iter()
            .rev()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn maybe_compact(&mut self) {
        let live = self.lru.len() as u64;
        let needs = self
            .store
            .as_ref()
            .is_some_and(|s| s.lines >= COMPACT_MIN && s.lines > live * COMPACT_FACTOR);
        if needs {
            let entries = self.entries();
            if let Some(s) = self.store.as_mut() {
                s.rewrite(&entries);
            }
        }
    }
}

pub struct ResultCache {
    inner: Mutex<Inner>,
    capacity: usize,
}

impl ResultCache {
    pub fn new(capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        ResultCache {
            inner: Mutex::new(Inner {
                lru: LruCache::new(cap),
                counters: Counters::default(),
                store: None,
            }),
            capacity: capacity.max(1),
        }
    }

    /// Tie the cache to its file under `state_dir`: load what an earlier daemon saved (once;
    /// later calls return at once). Reads a file, so call it off the actor.
    pub fn attach(&self, state_dir: &Path) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        if g.store.is_some() {
            return;
        }
        let mut store = Store {
            state_dir: state_dir.to_path_buf(),
            file: None,
            lines: 0,
        };
        let saved = load_index(&store.index(), state_dir, self.capacity);
        // Entries made before attaching are newer than anything saved.
        let mut merged = saved;
        merged.extend(g.entries());
        g.lru.clear();
        for (fp, r) in merged {
            g.lru.push(fp, r);
        }
        let entries = g.entries();
        store.rewrite(&entries);
        tracing::info!(entries = entries.len(), "result cache loaded");
        g.store = Some(store);
    }

    pub fn lookup(&self, fp: &str) -> Option<CachedResult> {
        let mut g = self.inner.lock().ok()?;
        let hit = g.lru.get(fp).cloned();
        // A result whose file went away (forgotten or pruned run) cannot be reused.
        let hit = match hit {
            Some(r) if !r.result_path.is_file() => {
                g.lru.pop(fp);
                None
            }
            other => other,
        };
        if hit.is_some() {
            g.counters.hits += 1;
            if let Some(s) = g.store.as_mut() {
                s.append(&Line::Hit { fp: fp.to_string() });
            }
            g.maybe_compact();
        } else {
            g.counters.misses += 1;
        }
        hit
    }

    pub fn record_saving(&self, usage: &Usage) {
        if let Ok(mut g) = self.inner.lock() {
            // Saturating: the counts come from a worker's report.
            let tokens = usage.budget_tokens().saturating_add(usage.cache_read);
            g.counters.tokens_saved = g.counters.tokens_saved.saturating_add(tokens);
            g.counters.cost_saved += usage.cost;
        }
    }

    pub fn insert(&self, fp: String, r: CachedResult) {
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        let line = g.store.as_ref().map(|s| s.to_line(&fp, &r));
        if g.lru
            .push(fp.clone(), r)
            .is_some_and(|(old_fp, _)| old_fp != fp)
        {
            g.counters.evictions += 1;
        }
        if let (Some(line), Some(s)) = (line, g.store.as_mut()) {
            s.append(&line);
        }
        g.maybe_compact();
    }

    pub fn clear(&self) {
        if let Ok(mut g) = self.inner.lock() {
            let n = g.lru.len() as u64;
            g.lru.clear();
            g.counters.evictions += n;
            if let Some(s) = g.store.as_mut() {
                s.rewrite(&[]);
            }
        }
    }

    /// Drop every entry produced by `run_id`.
    pub fn invalidate_run(&self, run_id: &str) -> u64 {
        let Ok(mut g) = self.inner.lock() else {
            return 0;
        };
        let keys: Vec<String> = g
            .lru
            .iter()
            .filter(|(_, v)| v.run_id == run_id)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &keys {
            g.lru.pop(k);
        }
        if !keys.is_empty() {
            if let Some(s) = g.store.as_mut() {
                s.append(&Line::DropRun {
                    run_id: run_id.to_string(),
                });
            }
            g.maybe_compact();
        }
        keys.len() as u64
    }

    pub fn stats(&self) -> crew_api::types::ResultCacheStat {
        let Ok(g) = self.inner.lock() else {
            return Default::default();
        };
        let c = &g.counters;
        crew_api::types::ResultCacheStat {
            stat: crate::resources::stat(
                c.hits,
                c.misses,
                c.evictions,
                g.lru.len() as u64,
                self.capacity as u64,
            ),
            tokens_saved: c.tokens_saved,
            cost_saved: c.cost_saved,
        }
    }
}

/// Replay the index: the live entries, oldest first, at most `capacity`, each with its result
/// file present. Unreadable lines (a torn tail) are skipped.
fn load_index(index: &Path, state_dir: &Path, capacity: usize) -> Vec<(String, CachedResult)> {
    let file = match File::open(index) {
        Ok(f) => f,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(error = %e, path = %index.display(), "cannot read the result cache index");
            }
            return Vec::new();
        }
    };
    let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
    let mut lru: LruCache<String, CachedResult> = LruCache::new(cap);
    let mut skipped = 0u64;
    for line in BufReader::new(file).split(b'\n') {
        let Ok(line) = line else {
            break;
        };
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Line>(&line) {
            Ok(Line::Put {
                fp,
                run_id,
                task_id,
                path,
                usage,
                model,
                commit,
            }) => {
                lru.push(
                    fp,
                    CachedResult {
                        run_id,
                        task_id,
                        result_path: state_dir.join(path),
                        usage,
                        model,
                        commit,
                    },
                );
            }
            Ok(Line::Hit { fp }) => {
                lru.get(&fp);
            }
            Ok(Line::DropRun { run_id }) => {
                let keys: Vec<String> = lru
                    .iter()
                    .filter(|(_, v)| v.run_id == run_id)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in keys {
                    lru.pop(&k);
                }
            }
            Err(_) => skipped += 1,
        }
    }
    if skipped > 0 {
        tracing::warn!(
            skipped,
            "skipped unreadable lines of the result cache index"
        );
    }
    lru.iter()
        .rev()
        .filter(|(_, r)| r.result_path.is_file())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Length-prefixed fields, so ("ab","c") and ("a","bc") differ.
pub fn fingerprint(parts: &[&str]) -> String {
    let mut material = String::new();
    for part in parts {
        material.push_str(&part.len().to_string());
        material.push(':');
        material.push_str(part);
    }
    sha256_hex(material.as_bytes())
}

/// Of an untracked file, its length and at most this many first bytes are hashed: a stray
/// multi-gigabyte file must not stall every run.
const UNTRACKED_HASH_MAX: u64 = 1 << 20;

/// `HEAD <sha> diff <hash>` of the work tree at `cwd`, or None outside a git work tree.
pub async fn git_state(cwd: &str) -> Option<String> {
    let git = |args: &'static [&'static str]| {
        let cwd = cwd.to_string();
        async move {
            // As every git crew runs (crew_git): no fsmonitor program of the repository's,
            // no lock taken in the user's checkout (an index refresh is optional), and
            // crewd's mark (git_orphans.rs).
            let out = tokio::process::Command::new("git")
                .args(["-c", "core.fsmonitor=false"])
                .args(args)
                .env("GIT_OPTIONAL_LOCKS", "0")
                .envs([crate::git_orphans::tag()])
                .kill_on_drop(true)
                .current_dir(&cwd)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .await
                .ok()?;
            out.status.success().then_some(out.stdout)
        }
    };
    let head = git(&["rev-parse", "HEAD"]).await?;
    let diff = git(&["diff", "--no-ext-diff", "--no-textconv", "HEAD", "--binary"])
        .await
        .unwrap_or_default();
    // Untracked files count as changes too: their names and contents.
    let untracked = git(&["ls-files", "--others", "--exclude-standard", "-z"])
        .await
        .unwrap_or_default();
    let mut h = diff;
    for name in untracked.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        h.extend_from_slice(name);
        h.push(0);
        let path = Path::new(cwd).join(String::from_utf8_lossy(name).as_ref());
        if let Some((len, head)) = read_head(&path).await {
            h.extend_from_slice(&len.to_le_bytes());
            h.extend_from_slice(&head);
        }
    }
    Some(format!(
        "HEAD {} diff {}",
        String::from_utf8_lossy(&head).trim(),
        sha256_hex(&h)
    ))
}

async fn read_head(path: &Path) -> Option<(u64, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let f = tokio::fs::File::open(path).await.ok()?;
    let len = f.metadata().await.ok()?.len();
    let mut head = Vec::new();
    f.take(UNTRACKED_HASH_MAX)
        .read_to_end(&mut head)
        .await
        .ok()?;
    Some((len, head))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(dir: &Path, run: &str, task: &str, tokens: u64) -> CachedResult {
        let p = dir.join("runs").join(run).join("results");
        std::fs::create_dir_all(&p).unwrap();
        let file = p.join(format!("{task}.txt"));
        std::fs::write(&file, format!("{run}/{task}")).unwrap();
        CachedResult {
            run_id: run.into(),
            task_id: task.into(),
            result_path: file,
            usage: Usage {
                input: tokens,
                ..Usage::default()
            },
            model: Some("m".into()),
            commit: None,
        }
    }

    #[test]
    fn fingerprint_fields_are_length_prefixed() {
        let cases = [
            (["ab", "c"], ["a", "bc"]),
            (["", "x"], ["x", ""]),
            (["1:a", ""], ["1", ":a"]),
        ];
        for (a, b) in cases {
            assert_ne!(fingerprint(&a), fingerprint(&b), "{a:?} vs {b:?}");
        }
        assert_eq!(fingerprint(&["a", "b"]), fingerprint(&["a", "b"]));
    }

    #[test]
    fn entries_survive_a_new_cache_on_the_same_dir() {
        let dir = tempfile::tempdir().unwrap();
        let c = ResultCache::new(10);
        c.attach(dir.path());
        c.insert("f1".into(), result(dir.path(), "r1", "t1", 10));
        c.insert("f2".into(), result(dir.path(), "r1", "t2", 20));
        c.insert("f3".into(), result(dir.path(), "r2", "t1", 30));
        drop(c);

        let c = ResultCache::new(10);
        c.attach(dir.path());
        assert_eq!(c.stats().stat.entries, 3);
        let hit = c.lookup("f2").unwrap();
        assert_eq!(
            (hit.run_id.as_str(), hit.task_id.as_str(), hit.usage.input),
            ("r1", "t2", 20)
        );
        assert_eq!(hit.model.as_deref(), Some("m"));
    }

    /// (what happens between the two daemons, fingerprints left)
    #[test]
    fn reload_drops_what_is_gone() {
        type Change = fn(&Path, &ResultCache);
        let cases: [(&str, Change, &[&str]); 5] = [
            ("nothing", |_, _| {}, &["f1", "f2", "f3"]),
            (
                "a result file removed",
                |d, _| std::fs::remove_file(d.join("runs/r1/results/t1.txt")).unwrap(),
                &["f2", "f3"],
            ),
            (
                "a run's directory removed",
                |d, _| std::fs::remove_dir_all(d.join("runs/r1")).unwrap(),
                &["f3"],
            ),
            (
                "a run invalidated",
                |_, c| assert_eq!(c.invalidate_run("r2"), 1),
                &["f1", "f2"],
            ),
            ("cleared", |_, c| c.clear(), &[]),
        ];
        for (name, change, left) in cases {
            let dir = tempfile::tempdir().unwrap();
            let c = ResultCache::new(10);
            c.attach(dir.path());
            c.insert("f1".into(), result(dir.path(), "r1", "t1", 1));
            c.insert("f2".into(), result(dir.path(), "r1", "t2", 1));
            c.insert("f3".into(), result(dir.path(), "r2", "t1", 1));
            change(dir.path(), &c);
            drop(c);
            let c = ResultCache::new(10);
            c.attach(dir.path());
            let mut found: Vec<&str> = ["f1", "f2", "f3"]
                .into_iter()
                .filter(|f| c.lookup(f).is_some())
                .collect();
            found.sort();
            assert_eq!(found, left, "{name}");
        }
    }

    #[test]
    fn torn_tail_and_garbage_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let c = ResultCache::new(10);
        c.attach(dir.path());
        c.insert("f1".into(), result(dir.path(), "r1", "t1", 1));
        drop(c);
        let index = dir.path().join(INDEX_FILE);
        let mut f = OpenOptions::new().append(true).open(&index).unwrap();
        f.write_all(b"not json\n{\"op\":\"put\",\"fp\":\"f9\",\"ru")
            .unwrap();
        drop(f);
        let c = ResultCache::new(10);
        c.attach(dir.path());
        assert!(c.lookup("f1").is_some());
        assert_eq!(c.stats().stat.entries, 1);
        // The rewrite on attach removed the torn line, so new appends parse.
        c.insert("f2".into(), result(dir.path(), "r1", "t2", 1));
        drop(c);
        let c = ResultCache::new(10);
        c.attach(dir.path());
        assert_eq!(c.stats().stat.entries, 2);
    }

    #[test]
    fn capacity_bounds_entries_and_counts_evictions_and_recency_survives() {
        let dir = tempfile::tempdir().unwrap();
        let c = ResultCache::new(2);
        c.attach(dir.path());
        c.insert("f1".into(), result(dir.path(), "r1", "t1", 1));
        c.insert("f2".into(), result(dir.path(), "r1", "t2", 1));
        assert!(c.lookup("f1").is_some()); // f2 is now the least recently used
        c.insert("f3".into(), result(dir.path(), "r1", "t3", 1));
        let s = c.stats().stat;
        assert_eq!((s.entries, s.capacity, s.evictions), (2, 2, 1));
        assert!(c.lookup("f2").is_none());
        drop(c);
        let c = ResultCache::new(2);
        c.attach(dir.path());
        assert!(c.lookup("f1").is_some() && c.lookup("f3").is_some());
    }

    #[test]
    fn lookup_of_a_vanished_result_is_a_miss_and_drops_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        let c = ResultCache::new(10);
        c.insert("f1".into(), result(dir.path(), "r1", "t1", 1));
        std::fs::remove_file(dir.path().join("runs/r1/results/t1.txt")).unwrap();
        assert!(c.lookup("f1").is_none());
        let s = c.stats().stat;
        assert_eq!((s.hits, s.misses, s.entries), (0, 1, 0));
    }

    #[test]
    fn entries_made_before_attach_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let c = ResultCache::new(10);
        c.attach(dir.path());
        c.insert("old".into(), result(dir.path(), "r0", "t1", 1));
        drop(c);
        let c = ResultCache::new(10);
        c.insert("new".into(), result(dir.path(), "r1", "t1", 1));
        c.attach(dir.path());
        assert_eq!(c.stats().stat.entries, 2);
        drop(c);
        let c = ResultCache::new(10);
        c.attach(dir.path());
        assert!(c.lookup("old").is_some() && c.lookup("new").is_some());
    }

    #[test]
    fn the_file_is_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let c = ResultCache::new(4);
        c.attach(dir.path());
        for i in 0..3000 {
            c.insert(format!("f{i}"), result(dir.path(), "r1", "t1", 1));
        }
        let lines = std::fs::read_to_string(dir.path().join(INDEX_FILE))
            .unwrap()
            .lines()
            .count();
        assert!(lines <= COMPACT_MIN as usize + 1, "{lines} lines");
    }
}
