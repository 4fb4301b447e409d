//! The run cache's bookkeeping (SPEC §9): which finished runs were used when, and its hit,
//! miss and eviction counters. Held in `Shared` so the API reads the counters; the actor's
//! residency decides evictions with it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

/// Use order of resident runs: O(log n) touch, oldest first out.
#[derive(Default)]
struct Recency {
    next: u64,
    by_id: HashMap<String, u64>,
    order: BTreeMap<u64, String>,
}

impl Recency {
    fn touch(&mut self, id: &str) {
        let stamp = self.next;
        self.next += 1;
        if let Some(old) = self.by_id.insert(id.to_string(), stamp) {
            self.order.remove(&old);
        }
        self.order.insert(stamp, id.to_string());
    }

    fn add_if_absent(&mut self, id: &str) {
        if !self.by_id.contains_key(id) {
            self.touch(id);
        }
    }

    fn remove(&mut self, id: &str) {
        if let Some(stamp) = self.by_id.remove(id) {
            self.order.remove(&stamp);
        }
    }

    fn clear(&mut self) {
        self.by_id.clear();
        self.order.clear();
    }

    /// Ids from least to most recently used.
    fn oldest_first(&self) -> impl Iterator<Item = &String> {
        self.order.values()
    }
}

#[derive(Default)]
pub struct RunCacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub evictions: AtomicU64,
    recency: Mutex<Recency>,
}

impl RunCacheStats {
    /// The run was just used.
    pub fn touch(&self, id: &str) {
        if let Ok(mut r) = self.recency.lock() {
            r.touch(id);
        }
    }

    /// The run left memory by other means (invalidated, forgotten).
    pub fn remove(&self, id: &str) {
        if let Ok(mut r) = self.recency.lock() {
            r.remove(id);
        }
    }

    pub fn clear(&self) {
        if let Ok(mut r) = self.recency.lock() {
            r.clear();
        }
    }

    /// Which of `finished` to evict so at most `bound` stay (`victims`); none when the lock
    /// is poisoned.
    pub fn victims(
        &self,
        finished: &mut Vec<&str>,
        bound: usize,
        just_used: Option<&str>,
    ) -> Vec<String> {
        match self.recency.lock() {
            Ok(mut r) => victims(&mut r, finished, bound, just_used),
            Err(_) => Vec::new(),
        }
    }
}

/// Which finished runs to evict so at most `bound` stay: ids of `finished` (resident, finished
/// runs) not yet in `recency` join it oldest-created first (ids sort by creation time), then
/// `just_used` becomes the most recent, ids that are no longer resident and finished leave
/// it, then the least recently used go. `just_used` is touched after the others joined: after
/// a restart every resident run joins at once, and a run loaded to be read must not be the
/// oldest of them (it would be evicted before the read).
fn victims(
    recency: &mut Recency,
    finished: &mut Vec<&str>,
    bound: usize,
    just_used: Option<&str>,
) -> Vec<String> {
    finished.sort_unstable();
    for id in finished.iter() {
        recency.add_if_absent(id);
    }
    if let Some(id) = just_used {
        recency.touch(id);
    }
    if recency.by_id.len() > finished.len() {
        let keep: std::collections::HashSet<&str> = finished.iter().copied().collect();
        let stale: Vec<String> = recency
            .oldest_first()
            .filter(|id| !keep.contains(id.as_str()))
            .cloned()
            .collect();
        for id in stale {
            recency.remove(&id);
        }
    }
    let excess = recency.by_id.len().saturating_sub(bound);
    let out: Vec<String> = recency.oldest_first().take(excess).cloned().collect();
    for id in &out {
        recency.remove(id);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    #[test]
    fn victims_by_bound_and_use() {
        // (touched before, resident finished, bound, evicted)
        type Case<'a> = (&'a [&'a str], &'a [&'a str], usize, &'a [&'a str]);
        let cases: [Case; 7] = [
            (&[], &["a", "b"], 2, &[]),
            (&[], &["c", "a", "b"], 2, &["a"]),
            // A run that joins (just finished, or just loaded) counts as just used.
            (&["a"], &["a", "b", "c"], 2, &["a"]),
            (&["c", "a"], &["a", "b", "c", "d"], 2, &["c", "a"]),
            (&["b", "a", "b"], &["a", "b", "c"], 2, &["a"]),
            // Touched runs that left memory (or are active) do not hold a place.
            (&["x", "y", "z"], &["a", "b"], 2, &[]),
            (&[], &["a", "b", "c", "d"], 1, &["a", "b", "c"]),
        ];
        for (touched, finished, bound, want) in cases {
            let mut r = Recency::default();
            for t in touched {
                r.touch(t);
            }
            let mut f: Vec<&str> = finished.to_vec();
            let got = victims(&mut r, &mut f, bound, None);
            assert_eq!(ids(&got), want, "{touched:?} {finished:?} {bound}");
            assert!(r.by_id.len() <= bound);
            assert_eq!(r.by_id.len(), r.order.len());
        }
    }

    #[test]
    fn a_run_just_loaded_after_a_restart_outlives_those_resident_all_along() {
        // Nothing touched yet (a fresh daemon); "a", the oldest, was just loaded to be read.
        let mut r = Recency::default();
        let mut f = vec!["a", "b", "c", "d"];
        let got = victims(&mut r, &mut f, 2, Some("a"));
        assert_eq!(ids(&got), ["b", "c"]);
    }

    #[test]
    fn touch_moves_to_the_back() {
        let mut r = Recency::default();
        for id in ["a", "b", "c", "a"] {
            r.touch(id);
        }
        let order: Vec<&str> = r.oldest_first().map(String::as_str).collect();
        assert_eq!(order, ["b", "c", "a"]);
        r.remove("c");
        let order: Vec<&str> = r.oldest_first().map(String::as_str).collect();
        assert_eq!(order, ["b", "a"]);
    }
}
