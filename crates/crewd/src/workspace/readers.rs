//! Read-only tasks (roles that may not edit: explorer, reviewer, …, the same notion result
//! reuse uses, `PlannedTask::writes`) share one checkout per distinct start commit of their run
//! instead of one each: `<state>/worktrees/<runId>/_readers-<commit>`, a detached worktree.
//! Five reviewers of the same change cost one checkout of the repository, not five.
//!
//! A checkout is leased: the first reader makes it, the last one to leave removes it (what it
//! holds, if a reader changed anything after all, is kept as a ref first, like an earlier
//! attempt's tree). Leases live in this process only; a checkout found on disk with no lease
//! (crewd was killed) is stale and is replaced by a clean one. A reader's result is its text:
//! its result commit is its start commit, on its own branch like every task's.

use super::short;
use super::worktree::{add_worktree, retire};
use crew_git::{Git, GitError, Repo};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One lock per checkout path, holding how many readers use it. Creation and removal happen
/// under it, so a reader never joins a checkout that is half made or being removed.
type Slot = Arc<tokio::sync::Mutex<usize>>;

#[derive(Default)]
pub struct Checkouts {
    slots: Mutex<HashMap<PathBuf, Slot>>,
}

/// Where the readers of `run_id` starting at `start` work (a name in crew's reserved scheme,
/// so no task's worktree can be it).
pub fn checkout_path(worktrees: &Path, start: &str) -> PathBuf {
    worktrees.join(crew_core::ids::reserved::readers_dir(start))
}

/// The ref that keeps what a shared checkout held when it was removed, if anything changed.
fn leftover_ref(run_id: &str, start: &str) -> String {
    format!(
        "refs/crew/{run_id}/{}/leftover",
        crew_core::ids::reserved::readers_dir(short(start))
    )
}

/// A writing attempt's hold on its worktree's path (`Checkouts::hold`), from before the
/// worktree is made until it is gone: released when dropped.
pub struct Held(#[allow(dead_code)] tokio::sync::OwnedMutexGuard<usize>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held")
    }
}

impl Checkouts {
    fn slot(&self, path: &Path) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        // A writer's slot is left here when its hold ends: gone at the next look once nobody
        // holds it (a readers' slot with readers in it stays: its count is theirs).
        slots.retain(|_, s| {
            Arc::strong_count(s) > 1 || s.try_lock().map_or(true, |readers| *readers > 0)
        });
        slots.entry(path.to_path_buf()).or_default().clone()
    }

    /// Hold `path` for one writing attempt (its worktree is made, used and removed under the
    /// hold), waiting while the integration's sweep of leftovers retires what is there.
    pub async fn hold(&self, path: &Path) -> Held {
        Held(self.slot(path).lock_owned().await)
    }

    /// Run `retire` on `path` unless a writing attempt holds it or readers are in it: the
    /// integration's sweep of leftover worktrees. `false`: in use, left alone.
    pub async fn if_unused<F, Fut>(&self, path: &Path, retire: F) -> bool
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let slot = self.slot(path);
        let Ok(readers) = slot.try_lock() else {
            return false;
        };
        if *readers > 0 {
            return false;
        }
        retire().await;
        true
    }

    /// Forget the slot of `path` if nobody but the map and `mine` holds it: every clone is
    /// taken under the map's lock, so nobody can pick it up while this looks.
    fn drop_slot(&self, path: &Path, mine: Slot) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if Arc::strong_count(&mine) == 2 {
            slots.remove(path);
        }
    }

    /// Join the checkout at `path`: made clean at `start` when no reader holds it (a stale one
    /// from a killed daemon is kept as a ref and replaced), then `seed` runs once on it.
    pub async fn join<F, Fut>(
        &self,
        git: &Git,
        repo: &Repo,
        run_id: &str,
        path: &Path,
        start: &str,
        seed: F,
    ) -> Result<(), GitError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = std::io::Result<()>>,
    {
        let slot = self.slot(path);
        let mut readers = slot.lock().await;
        if *readers == 0 {
            if tokio::fs::try_exists(path).await.unwrap_or(true) {
                retire(git, repo, path, &leftover_ref(run_id, start)).await;
            }
            add_worktree(repo, path, |p| repo.worktree_add_detached(p, start)).await?;
            seed().await?;
        }
        *readers = readers.saturating_add(1);
        Ok(())
    }

    /// Leave the checkout at `path`; the last reader removes it.
    pub async fn leave(&self, git: &Git, repo: &Repo, run_id: &str, path: &Path, start: &str) {
        let slot = self.slot(path);
        {
            let mut readers = slot.lock().await;
            *readers = readers.saturating_sub(1);
            if *readers == 0 {
                retire(git, repo, path, &leftover_ref(run_id, start)).await;
            }
        }
        self.drop_slot(path, slot);
    }
}
