//! Filesystem syncs shared by the attempts that ask for one at about the same time (a group
//! commit). A `syncfs` writes back every dirty file of the filesystem, other programs' too, so
//! eight slots that each end with their own sync pay for eight full writebacks where one would
//! do. Here an attempt that asks while a sync is running waits for it to end and then joins the
//! next one, which serves everyone who asked in the meantime: a caller still returns only after
//! a sync that started after it asked, which is what makes its files durable.

use std::collections::HashMap;
use std::io;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The syncs of one filesystem.
#[derive(Default)]
struct Rounds {
    /// Syncs started so far; the running one, if any, is number `started`.
    started: u64,
    /// The last sync that ended.
    finished: u64,
    running: bool,
    /// The last sync that failed, and how: its callers, and those of any earlier sync still
    /// waiting for their answer, get the error.
    failed: Option<(u64, io::ErrorKind, String)>,
    /// Callers waiting for a sync (for tests: a waiter is known to have joined).
    waiting: usize,
}

/// Group syncs, by filesystem (device number).
#[derive(Default)]
pub struct Group {
    rounds: Mutex<HashMap<u64, Rounds>>,
    ended: Condvar,
}

impl Group {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Rounds>> {
        self.rounds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Run `sync` for filesystem `dev`, or wait for a run of it by another caller that started
    /// after this call did. Its result is this call's.
    pub fn sync(&self, dev: u64, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let mut sync = Some(sync);
        let mut all = self.lock();
        // The first sync that starts from now on serves this call.
        let wanted = all.entry(dev).or_default().started.saturating_add(1);
        loop {
            let r = all.entry(dev).or_default();
            if r.finished >= wanted {
                return match &r.failed {
                    Some((n, kind, msg)) if *n >= wanted => Err(io::Error::new(*kind, msg.clone())),
                    _ => Ok(()),
                };
            }
            if !r.running {
                if let Some(run) = sync.take() {
                    r.running = true;
                    r.started = r.started.saturating_add(1);
                    let mine = r.started;
                    drop(all);
                    // Ends the round even if `run` unwinds: the waiters are not left hanging.
                    let mut end = End {
                        group: self,
                        dev,
                        round: mine,
                        failed: None,
                    };
                    let result = run();
                    end.failed = result.as_ref().err().map(|e| (e.kind(), e.to_string()));
                    drop(end);
                    return result;
                }
            }
            r.waiting += 1;
            all = self.ended.wait(all).unwrap_or_else(PoisonError::into_inner);
            if let Some(r) = all.get_mut(&dev) {
                r.waiting = r.waiting.saturating_sub(1);
            }
        }
    }

    /// Callers of `dev` waiting for a sync now.
    pub fn waiting(&self, dev: u64) -> usize {
        self.lock().get(&dev).map_or(0, |r| r.waiting)
    }
}

/// Marks a round as ended when dropped (after its sync returned, or unwound).
struct End<'a> {
    group: &'a Group,
    dev: u64,
    round: u64,
    failed: Option<(io::ErrorKind, String)>,
}

impl Drop for End<'_> {
    fn drop(&mut self) {
        let mut all = self.group.lock();
        let r = all.entry(self.dev).or_default();
        r.running = false;
        r.finished = r.finished.max(self.round);
        match self.failed.take() {
            Some((kind, msg)) => r.failed = Some((self.round, kind, msg)),
            // An unwinding sync made nothing durable: its waiters are told so.
            None if std::thread::panicking() => {
                r.failed = Some((self.round, io::ErrorKind::Other, "the sync panicked".into()))
            }
            None => {}
        }
        self.group.ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{mpsc, Arc};

    /// One caller's sync is held running while four more ask: they share one more sync, not
    /// four, and none of them returns before a sync that started after it asked has ended.
    #[test]
    fn callers_during_a_sync_share_the_next_one() {
        let group = Arc::new(Group::default());
        let calls = Arc::new(AtomicU64::new(0));
        let ended = Arc::new(AtomicU64::new(0));
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let first = {
            let (group, calls, ended) = (group.clone(), calls.clone(), ended.clone());
            std::thread::spawn(move || {
                group.sync(7, || {
                    calls.fetch_add(1, Ordering::SeqCst);
                    release_rx.recv().ok();
                    ended.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            })
        };
        // The first sync is running once it has been called.
        while calls.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let later: Vec<_> = (0..4)
            .map(|_| {
                let (group, calls, ended) = (group.clone(), calls.clone(), ended.clone());
                std::thread::spawn(move || {
                    let r = group.sync(7, || {
                        calls.fetch_add(1, Ordering::SeqCst);
                        ended.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    });
                    // A sync that started after this call asked has ended: the second.
                    (r.is_ok(), ended.load(Ordering::SeqCst))
                })
            })
            .collect();
        while group.waiting(7) < 4 {
            std::thread::yield_now();
        }
        release_tx.send(()).unwrap();
        assert!(first.join().unwrap().is_ok());
        for t in later {
            let (ok, ended_when_returned) = t.join().unwrap();
            assert!(ok);
            assert!(
                ended_when_returned >= 2,
                "returned before its own sync ended"
            );
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "four callers, one shared sync"
        );
    }

    #[test]
    fn a_failed_sync_fails_every_caller_it_served() {
        let group = Arc::new(Group::default());
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let first = {
            let group = group.clone();
            std::thread::spawn(move || {
                group.sync(1, || {
                    started_tx.send(()).ok();
                    release_rx.recv().ok();
                    Ok(())
                })
            })
        };
        started_rx.recv().unwrap();
        let second = {
            let group = group.clone();
            std::thread::spawn(move || group.sync(1, || Err(io::Error::other("disk gone"))))
        };
        let third = {
            let group = group.clone();
            std::thread::spawn(move || group.sync(1, || Err(io::Error::other("disk gone"))))
        };
        while group.waiting(1) < 2 {
            std::thread::yield_now();
        }
        release_tx.send(()).unwrap();
        assert!(first.join().unwrap().is_ok());
        let errors: Vec<String> = [second, third]
            .into_iter()
            .map(|t| t.join().unwrap().unwrap_err().to_string())
            .collect();
        assert_eq!(errors, ["disk gone", "disk gone"]);
        // Another filesystem is not held up by this one, and a new caller gets a new sync.
        assert!(group.sync(2, || Ok(())).is_ok());
        assert!(group.sync(1, || Ok(())).is_ok());
    }
}
