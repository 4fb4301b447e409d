//! The journal writer: a plain thread that makes batches durable (group commit), then runs their
//! commit callbacks and publishes their events, in order.
//!
//! It is a thread, not a task, because sled's `flush` blocks (and `flush_async` can deadlock:
//! sled#1308). While the writer flushes, the actor keeps deciding; whatever piles up meanwhile
//! goes into the next flush, so many changes share one fsync.

use crate::shared::{Published, Shared};
use crew_core::run::Event;
use crew_journal::{Entry, Journal};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

pub type CommitFn = Box<dyn FnOnce(Result<(), Arc<str>>) + Send>;

pub struct Batch {
    pub events: Vec<Event>,
    pub callbacks: Vec<CommitFn>,
    pub snapshot: Option<(u64, Vec<u8>)>,
}

#[derive(Clone)]
pub struct WriterHandle {
    tx: mpsc::Sender<Batch>,
}

impl WriterHandle {
    pub fn send(&self, b: Batch) {
        if let Err(mpsc::SendError(b)) = self.tx.send(b) {
            for cb in b.callbacks {
                cb(Err(Arc::from("the journal writer has stopped")));
            }
        }
    }
}

pub fn spawn(
    journal: Arc<dyn Journal>,
    shared: Arc<Shared>,
) -> (WriterHandle, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel::<Batch>();
    let join = std::thread::Builder::new()
        .name("crewd-journal".into())
        .spawn(move || writer_loop(journal, shared, rx))
        .unwrap_or_else(|e| panic!("cannot start the journal writer thread: {e}"));
    (WriterHandle { tx }, join)
}

fn encode(ev: &Event) -> Entry {
    Entry {
        seq: ev.seq,
        run: ev.run_id.clone(),
        bytes: serde_json::to_vec(ev).unwrap_or_default(),
    }
}

fn writer_loop(journal: Arc<dyn Journal>, shared: Arc<Shared>, rx: mpsc::Receiver<Batch>) {
    // Events that could not be written yet (disk full): retried, in order, before anything new.
    let mut stuck: Vec<Event> = Vec::new();
    let mut stuck_callbacks: Vec<CommitFn> = Vec::new();
    loop {
        let first = if stuck.is_empty() {
            match rx.recv() {
                Ok(b) => Some(b),
                Err(_) => return,
            }
        } else {
            match rx.recv_timeout(Duration::from_millis(500)) {
                Ok(b) => Some(b),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) if stuck.is_empty() => return,
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            }
        };
        let mut batches: Vec<Batch> = first.into_iter().collect();
        while let Ok(b) = rx.try_recv() {
            batches.push(b);
        }
        let mut events = std::mem::take(&mut stuck);
        let mut callbacks = std::mem::take(&mut stuck_callbacks);
        let mut snapshot = None;
        for b in batches {
            events.extend(b.events);
            callbacks.extend(b.callbacks);
            if b.snapshot.is_some() {
                snapshot = b.snapshot;
            }
        }
        let entries: Vec<Entry> = events.iter().map(encode).collect();
        let res = if entries.is_empty() {
            Ok(())
        } else {
            journal.append(&entries)
        };
        match res {
            Ok(()) => {
                shared.set_storage_error(None);
                if let Some(last) = events.last() {
                    shared.set_durable(last.seq);
                }
                for (ev, entry) in events.iter().zip(entries) {
                    shared.publish(Published {
                        seq: ev.seq,
                        run_id: ev.run_id.as_deref().map(Arc::from),
                        json: Arc::from(String::from_utf8(entry.bytes).unwrap_or_default()),
                    });
                }
                for cb in callbacks {
                    run_callback(cb, Ok(()));
                }
                if let Some((seq, bytes)) = snapshot {
                    if let Err(e) = journal.write_snapshot(seq, &bytes) {
                        tracing::warn!(error = %e, "snapshot failed; start-up will replay more");
                    }
                }
            }
            Err(e) => {
                let msg: Arc<str> = Arc::from(e.to_string());
                tracing::error!(error = %msg, pending = events.len(), "journal write failed; changes are held and retried");
                shared.set_storage_error(Some(msg.clone()));
                // Callers are told now; the events stay queued (they are already in memory) and
                // are written when space returns.
                for cb in callbacks {
                    run_callback(cb, Err(msg.clone()));
                }
                stuck = events;
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// A callback that panics must not take the writer (and with it every later commit) down.
fn run_callback(cb: CommitFn, res: Result<(), Arc<str>>) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || cb(res))).is_err() {
        tracing::error!("a commit callback panicked");
    }
}
