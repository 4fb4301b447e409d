//! Giving the allocator's free memory back to the system when a run ends.
//!
//! A run's attempts allocate and free a lot between the state that stays (8 attempts at a time,
//! each with its JSON, paths and buffers), and glibc keeps what they freed inside its arenas,
//! resident, as long as one live object sits on the same pages' heap top. `malloc_trim(0)`
//! returns every whole free page of every arena (`madvise(MADV_DONTNEED)`), not only the top.
//! A run's end is a quiet moment for a daemon whose runs are its work, and the trim walks all
//! arenas holding their locks (about a millisecond for tens of MB), so it runs on tokio's
//! blocking pool, never on the actor. At most one trim is queued at a time: many runs ending
//! together (a cancelled batch) ask for one trim, not one each.

use std::sync::atomic::{AtomicBool, Ordering};

/// At most one queued trim; see the module's comment.
pub struct Trimmer {
    queued: AtomicBool,
}

/// The daemon's one trimmer (a run's end anywhere asks it).
pub static AFTER_RUN: Trimmer = Trimmer::new();

impl Trimmer {
    pub const fn new() -> Self {
        Trimmer {
            queued: AtomicBool::new(false),
        }
    }

    /// Ask for a trim soon, on tokio's blocking pool (inline where no runtime runs, as in a
    /// unit test that drives the actor's core by hand).
    pub fn request(&'static self) {
        self.request_with(|job| match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(job)),
            Err(_) => job(),
        });
    }

    /// `spawn` runs the trim later; it is called only when no trim is queued already. A request
    /// that arrives while a trim runs queues one more, so memory freed during it is trimmed too.
    fn request_with(&'static self, spawn: impl FnOnce(Box<dyn FnOnce() + Send>)) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        spawn(Box::new(move || {
            self.queued.store(false, Ordering::Release);
            release_free_memory();
        }));
    }
}

impl Default for Trimmer {
    fn default() -> Self {
        Self::new()
    }
}

/// glibc only: other allocators give memory back by themselves or offer no such call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() {
    // SAFETY: malloc_trim only returns free pages of the allocator's own arenas to the system
    // (under each arena's lock); no live allocation is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn requests_while_one_is_queued_queue_nothing_more() {
        static T: Trimmer = Trimmer::new();
        let jobs: Mutex<Vec<Box<dyn FnOnce() + Send>>> = Mutex::new(Vec::new());
        let ask = || T.request_with(|job| jobs.lock().unwrap().push(job));
        ask();
        ask();
        ask();
        assert_eq!(
            jobs.lock().unwrap().len(),
            1,
            "three requests, one queued trim"
        );
        // Once it starts, the next request queues another (what it frees after the start).
        let first = jobs.lock().unwrap().pop().unwrap();
        first();
        ask();
        ask();
        assert_eq!(jobs.lock().unwrap().len(), 1);
        let second = jobs.lock().unwrap().pop().unwrap();
        second();
        assert!(!T.queued.load(Ordering::Acquire));
    }

    #[test]
    fn a_trim_leaves_live_memory_alone() {
        let kept: Vec<Vec<u8>> = (0..1000u32)
            .map(|i| vec![i as u8; 100 + i as usize])
            .collect();
        let freed: Vec<Vec<u8>> = (0..1000u32).map(|i| vec![1; 200 + i as usize]).collect();
        drop(freed);
        release_free_memory();
        for (i, v) in kept.iter().enumerate() {
            assert_eq!(v.len(), 100 + i);
            assert!(v.iter().all(|b| *b == i as u8));
        }
    }
}
