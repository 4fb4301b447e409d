//! What every part of the daemon can see without going through the actor: configuration,
//! paths, the journal for reads, the event bus, flags.

use crate::config::Config;
use crate::journal_slot::JournalSlot;
use crate::resources::ResourceCache;
use crate::results::ResultCache;
use crew_journal::Journal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::broadcast;

/// An event as sent to subscribers: already serialized once by the writer.
#[derive(Debug, Clone)]
pub struct Published {
    pub seq: u64,
    pub run_id: Option<Arc<str>>,
    pub json: Arc<str>,
}

pub struct Shared {
    pub config: Config,
    pub state_dir: PathBuf,
    pub socket: PathBuf,
    /// Every read goes through this (the writer replaces the handle behind it after a write
    /// failure: `journal_slot.rs`); keep no clone of what it points to.
    pub journal: Arc<dyn Journal>,
    pub journal_slot: Arc<JournalSlot>,
    pub bus: broadcast::Sender<Published>,
    pub started: Instant,
    pub resources: ResourceCache,
    pub results: ResultCache,
    durable_seq: AtomicU64,
    shutting_down: AtomicBool,
    storage_error: Mutex<Option<Arc<str>>>,
    pub shutdown: tokio::sync::Notify,
    pub run_cache: crate::run_cache::RunCacheStats,
    /// Leases of the checkouts read-only tasks share (worktree mode).
    pub checkouts: crate::workspace::Checkouts,
}

impl Shared {
    pub fn new(
        config: Config,
        state_dir: PathBuf,
        socket: PathBuf,
        journal: Arc<dyn Journal>,
        durable: u64,
    ) -> Self {
        let (bus, _) = broadcast::channel(config.subscriber_buffer.max(16));
        let resources = ResourceCache::new(config.resource_cache_entries);
        let results = ResultCache::new(config.result_cache_entries);
        let journal_slot = Arc::new(JournalSlot::new(journal));
        Shared {
            config,
            state_dir,
            socket,
            journal: journal_slot.clone(),
            journal_slot,
            bus,
            started: Instant::now(),
            resources,
            results,
            durable_seq: AtomicU64::new(durable),
            shutting_down: AtomicBool::new(false),
            storage_error: Mutex::new(None),
            shutdown: tokio::sync::Notify::new(),
            run_cache: Default::default(),
            checkouts: Default::default(),
        }
    }

    pub fn durable_seq(&self) -> u64 {
        self.durable_seq.load(Ordering::Acquire)
    }
    pub fn set_durable(&self, seq: u64) {
        self.durable_seq.store(seq, Ordering::Release);
    }
    pub fn publish(&self, p: Published) {
        // No subscribers is fine.
        let _ = self.bus.send(p);
    }
    pub fn storage_error(&self) -> Option<Arc<str>> {
        self.storage_error.lock().ok().and_then(|g| g.clone())
    }
    pub fn set_storage_error(&self, e: Option<Arc<str>>) {
        if let Ok(mut g) = self.storage_error.lock() {
            *g = e;
        }
    }
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        self.shutdown.notify_waiters();
    }
    pub fn runs_dir(&self) -> PathBuf {
        self.state_dir.join("runs")
    }
    pub fn journal_dir(&self) -> PathBuf {
        self.state_dir.join("journal")
    }
    /// Only a checked id makes a path (`SafeId` cannot be built from an unchecked string).
    pub fn run_dir(&self, run_id: &crew_core::ids::SafeId) -> PathBuf {
        self.runs_dir().join(run_id)
    }
}
