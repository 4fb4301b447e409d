//! crewd as a library: the daemon's modules, for its binary (`main.rs`, the command line)
//! and for benches that drive a part of it in process. See ARCHITECTURE.md for the map.

mod actor;
mod artifacts;
mod attempt;
pub mod bundle;
mod callback;
mod candidates;
mod compose;
pub mod config;
mod dashboard;
mod diagnostic;
mod executor;
mod forget;
mod git_orphans;
mod journal_slot;
mod launch;
mod listen;
mod lock;
mod placement;
mod plan_checks;
mod recovery;
pub mod resources;
mod results;
mod rpc;
mod run_cache;
mod scheduler;
mod server;
pub mod shared;
mod summary;
mod system_prompts;
#[cfg(test)]
mod test_support;
mod trim;
mod verdicts;
mod workspace;
pub mod writer;

use anyhow::Context;
use crew_core::run::{EventBody, Pending};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn default_state_dir() -> PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("state")))
        .unwrap_or_else(|| PathBuf::from("/tmp"))
        .join("crew")
}

/// Logs to stderr, filtered by `CREW_LOG`; without timestamps under systemd (journald adds them).
pub fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("CREW_LOG").unwrap_or_else(|_| {
        EnvFilter::new("info,jsonrpsee=warn,tokio_cron_scheduler=warn,sled=warn")
    });
    // Under systemd, journald stamps lines itself.
    let under_systemd =
        std::env::var_os("JOURNAL_STREAM").is_some() || std::env::var_os("INVOCATION_ID").is_some();
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(crew_attempt::log::fields())
        .with_writer(std::io::stderr);
    use std::io::IsTerminal;
    if under_systemd {
        b.without_time().with_ansi(false).init();
    } else {
        b.with_ansi(std::io::stderr().is_terminal()).init();
    }
}

/// Two glibc settings, each left alone when the environment sets it (its `MALLOC_*` variable or
/// `GLIBC_TUNABLES`). Call it first in `main`, so that every allocation sees them:
///
/// - Arenas: glibc gives threads that allocate their own arenas (up to 8 per core), and memory
///   freed in one stays there: with tokio's workers, the blocking pool and the journal thread, a
///   daemon that made 100,000 runs held 261 MB. Two arenas held 163 MB for the same work, and
///   made runs faster, not slower (`cargo bench -p crewd --bench caches`, issue 6's target is
///   < 200 MB).
/// - mmap threshold: by default glibc raises it to the size of the largest buffer freed so far
///   (a serialized snapshot is megabytes), and then keeps up to twice that in the heap, free
///   but resident, for good. A fixed threshold turns that off: 10,000 finished tasks grew RSS
///   by 30.6 MiB before and 20–22 MiB after (`target/release/bench-memory`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn tune_malloc() {
    const ARENAS: libc::c_int = 2;
    const MMAP_THRESHOLD: libc::c_int = 128 << 10;
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    let unset =
        |var: &str, tunable: &str| std::env::var_os(var).is_none() && !tunables.contains(tunable);
    // SAFETY: mallopt only sets allocator parameters, and glibc takes its arena lock to do so,
    // so it is sound whenever it is called; nothing here touches memory.
    unsafe {
        if unset("MALLOC_ARENA_MAX", "glibc.malloc.arena_max") {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS);
        }
        if unset("MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold") {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn tune_malloc() {}

/// The daemon's command-line options.
#[derive(Debug, Default)]
pub struct Options {
    pub socket: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub config: Option<PathBuf>,
}

/// Runs the daemon until SIGTERM, SIGINT or `daemon.shutdown`.
pub fn run(cli: Options) -> anyhow::Result<()> {
    let (config_path, required) = match cli.config {
        Some(p) => (p, true),
        None => (
            crate::resources::config_home()
                .unwrap_or_else(|| PathBuf::from("/nonexistent"))
                .join("crew/config.toml"),
            false,
        ),
    };
    let config = config::Config::load(&config_path, required)?;
    let state_dir = cli.state_dir.unwrap_or_else(default_state_dir);
    std::fs::create_dir_all(&state_dir)
        .with_context(|| format!("creating {}", state_dir.display()))?;
    let _ = std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o700));
    let _lock = lock::acquire(&state_dir)?;

    // Socket handling happens before the runtime exists (systemd's fds, blocking binds).
    let listener = match listen::from_systemd()? {
        Some(l) => {
            tracing::info!("using the socket passed by systemd");
            l
        }
        None => listen::bind(
            &cli.socket
                .clone()
                .unwrap_or_else(crew_api::paths::default_socket),
        )?,
    };
    let socket_path = listener
        .std
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(|p| p.to_path_buf()))
        .unwrap_or_else(|| {
            cli.socket
                .clone()
                .unwrap_or_else(crew_api::paths::default_socket)
        });

    keep_out_of_boxes(&config, &config_path, &state_dir, &socket_path);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("crewd")
        .build()?;
    rt.block_on(serve(config, state_dir, socket_path, listener))
}

/// What no box may bring in, neither as an agent's install folder nor as a run's working
/// directory: the state and the socket; the config (an agent that rewrote it would turn the
/// box off at the next start) and crew's folder in the user's config, with their teams and
/// workflows; the Slurm staging folders, which hold every remote attempt's keys and tokens.
/// A bare socket name is in crewd's own folder (as `listen::bind` takes it).
fn keep_out_of_boxes(config: &config::Config, config_path: &Path, state_dir: &Path, socket: &Path) {
    let parent_of = |p: &Path| match p.parent() {
        Some(d) if d.as_os_str().is_empty() => PathBuf::from("."),
        other => other.map(Path::to_path_buf).unwrap_or_default(),
    };
    let slurm = config.slurm.as_ref();
    crew_attempt::sandbox::keep_out(
        [
            Some(state_dir.to_path_buf()),
            Some(parent_of(socket)),
            Some(config_path.to_path_buf()),
            crate::resources::config_home().map(|d| d.join("crew")),
        ]
        .into_iter()
        .chain([
            slurm.map(|s| s.staging_dir.clone()),
            slurm.and_then(|s| s.token_file.clone()),
        ])
        .flatten()
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| std::path::absolute(&p).unwrap_or(p))
        .collect(),
    );
}

async fn serve(
    config: config::Config,
    state_dir: PathBuf,
    socket: PathBuf,
    listener: listen::Listener,
) -> anyhow::Result<()> {
    // Before anything can answer: a SIGTERM right after the first answer must be handled.
    use tokio::signal::unix::{signal, SignalKind};
    let signals = (
        signal(SignalKind::terminate())?,
        signal(SignalKind::interrupt())?,
    );
    let (journal, state) = open_state(&config, &state_dir).await?;
    let shared = Arc::new(shared::Shared::new(
        config,
        state_dir,
        socket.clone(),
        // Moved, not cloned: after a write failure the writer must be able to drop every
        // handle and reopen the journal (journal_slot.rs).
        journal,
        state.last_seq,
    ));
    before_first_attempt(&shared, &state).await?;
    let (writer, writer_join) = writer::spawn(shared.clone());
    let (actor, actor_task) = start_actor(state, &shared, writer).await?;
    let front = Front::start(&shared, &actor, listener, &socket).await?;
    tracing::info!(socket = %socket.display(), pid = std::process::id(), "crewd is ready");
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);

    wait_for_shutdown(&shared, signals).await;
    tracing::info!("shutting down");
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    shared.begin_shutdown();
    let (callback, owned_socket) = front.stop().await;
    stop_workers(&actor).await;
    if let Some(c) = callback {
        c.abort();
    }
    drop(actor);
    actor_task.abort();
    let _ = actor_task.await;
    let _ = tokio::task::spawn_blocking(move || writer_join.join()).await;
    {
        let shared = shared.clone();
        let _ = tokio::task::spawn_blocking(move || writer::close_journal(&shared)).await;
    }
    listen::remove_owned(&socket, owned_socket);
    tracing::info!("bye");
    Ok(())
}

/// The journal opened and the state replayed from it.
async fn open_state(
    config: &config::Config,
    state_dir: &std::path::Path,
) -> anyhow::Result<(Arc<dyn crew_journal::Journal>, crew_core::run::State)> {
    let journal_dir = state_dir.join("journal");
    let cache = config.journal_cache_mb << 20;
    let journal: Arc<dyn crew_journal::Journal> = {
        let dir = journal_dir.clone();
        Arc::new(
            tokio::task::spawn_blocking(move || crew_journal::SledJournal::open(&dir, cache))
                .await?
                .with_context(|| format!("cannot open the journal at {}", journal_dir.display()))?,
        )
    };
    let state = {
        let j = journal.clone();
        let resident = config.resident_runs;
        tokio::task::spawn_blocking(move || recovery::load_state(j.as_ref(), resident)).await??
    };
    tracing::info!(
        runs = state.summaries.len(),
        active = state.active.len(),
        last_seq = state.last_seq,
        "state loaded"
    );
    Ok((journal, state))
}

/// What must hold before recovery re-queues any task: how attempts are contained and boxed
/// (said once), saved results attached, and the user's repositories whole again after a crash.
async fn before_first_attempt(
    shared: &Arc<shared::Shared>,
    state: &crew_core::run::State,
) -> anyhow::Result<()> {
    // How this machine holds local attempts (a probe of crew's init), said once.
    tokio::task::spawn_blocking(executor::contain::announce).await?;
    {
        let config = shared.config.clone();
        tokio::task::spawn_blocking(move || executor::sandbox::announce(&config)).await?;
    }
    // A re-queued task may reuse a saved result (SPEC §9).
    {
        let shared = shared.clone();
        tokio::task::spawn_blocking(move || shared.results.attach(&shared.state_dir)).await?;
    }
    // git processes a killed daemon left running end before recovery touches the checkouts
    // they may still be writing (git_orphans.rs).
    {
        let state_dir = shared.state_dir.clone();
        let ended = tokio::task::spawn_blocking(move || {
            let before = git_orphans::record(&state_dir);
            let ended = git_orphans::end_left(&before);
            git_orphans::forget_others(&state_dir);
            ended
        })
        .await?;
        if !ended.is_empty() {
            tracing::warn!(pids = ?ended, "killed git processes the previous daemon left running");
        }
    }
    // An apply a killed daemon left half done is finished or undone before anyone can ask
    // for another (workspace/apply.rs): the user's checkout is at the old commit or the new.
    workspace::apply::recover(shared).await;
    // Worktrees and branches of a run forgotten just before a crash (its data went in
    // `recovery::recover`, which cannot reach the repository).
    workspace::cleanup::sweep_unknown(shared.clone(), &|id| state.summaries.contains_key(id)).await;
    // The git objects a boxed attempt cut short by the crash made come into their repository
    // before any attempt starts (executor/sandbox.rs).
    let runs: Vec<(PathBuf, String)> = state
        .active
        .iter()
        .filter_map(|id| {
            let run = state.run(id)?;
            let ws = run.spec.workspace.as_ref()?;
            let id = crew_core::ids::SafeId::new(id.as_str()).ok()?;
            Some((shared.run_dir(&id), ws.repo.clone()))
        })
        .collect();
    executor::sandbox::recover_objects(shared, runs).await;
    Ok(())
}

/// The state's one owner started, once recovery's events are durable: ready means recovered,
/// so what recovery emitted (re-queued tasks, killed workers) is in the journal before the
/// first client can read it or act on the runs.
async fn start_actor(
    state: crew_core::run::State,
    shared: &Arc<shared::Shared>,
    writer: writer::WriterHandle,
) -> anyhow::Result<(actor::Actor, tokio::task::JoinHandle<()>)> {
    let (actor, rx) = actor::Actor::channel();
    let mut core = actor::Core::new(state, shared.clone(), writer, actor.clone());
    core.emit(Pending::global(EventBody::DaemonStarted {
        version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
    }));
    recovery::recover(&mut core);
    let (recovered_tx, recovered_rx) = tokio::sync::oneshot::channel();
    core.after_commit(move |r| {
        let _ = recovered_tx.send(r);
    });
    let actor_task = tokio::spawn(actor::run(core, rx));
    match recovered_rx.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::error!(error = %e, "recovery could not be journaled; serving reads only")
        }
        Err(_) => anyhow::bail!("the state actor stopped during start-up"),
    }
    Ok((actor, actor_task))
}

/// What the daemon answers and fires: schedules, the Slurm callback, the socket's JSON-RPC
/// server and the dashboard.
struct Front {
    scheduler: scheduler::Scheduler,
    callback: Option<tokio::task::JoinHandle<()>>,
    server: jsonrpsee::server::ServerHandle,
    accept: tokio::task::JoinHandle<()>,
    dashboard: Option<tokio::task::JoinHandle<()>>,
    /// The socket file we bound, removed at the very end (`listen::remove_owned`).
    owned_socket: Option<(u64, u64)>,
}

impl Front {
    async fn start(
        shared: &Arc<shared::Shared>,
        actor: &actor::Actor,
        listener: listen::Listener,
        socket: &std::path::Path,
    ) -> anyhow::Result<Front> {
        let scheduler = scheduler::start(shared.clone(), actor.clone()).await?;
        let callback = callback::start(shared);
        let module = rpc::module(shared.clone(), actor.clone());
        let (stop, server) = jsonrpsee::server::stop_channel();
        let std_listener = listener.std;
        std_listener.set_nonblocking(true)?;
        let tokio_listener = tokio::net::UnixListener::from_std(std_listener)?;
        let accept = server::spawn(tokio_listener, module, stop, &shared.config);
        let dashboard = match shared.config.ui_listen {
            Some(addr) => {
                Some(dashboard::start(addr, &shared.config, &shared.state_dir, socket).await?)
            }
            None => None,
        };
        Ok(Front {
            scheduler,
            callback,
            server,
            accept,
            dashboard,
            owned_socket: listener.owned,
        })
    }

    /// No more schedules fire and no more requests are taken. Handed back: the callback
    /// server, which stays up until the workers are stopped, and the socket file to remove.
    async fn stop(self) -> (Option<tokio::task::JoinHandle<()>>, Option<(u64, u64)>) {
        self.scheduler.shutdown().await;
        let _ = self.server.stop();
        let _ =
            tokio::time::timeout(std::time::Duration::from_secs(10), self.server.stopped()).await;
        self.accept.abort();
        if let Some(d) = self.dashboard {
            d.abort();
        }
        (self.callback, self.owned_socket)
    }
}

/// Workers are stopped (their tasks are re-queued when the daemon starts again) and the
/// state snapshotted.
async fn stop_workers(actor: &actor::Actor) {
    let _ = actor
        .call(|core| {
            for ((run, task), _) in core.workers.iter() {
                if let Some(pid) = core
                    .state
                    .run(run)
                    .and_then(|r| r.task(task))
                    .and_then(|t| t.pid())
                {
                    executor::process::signal_group(pid, nix::sys::signal::Signal::SIGTERM);
                }
            }
            core.snapshot_now();
            Ok(())
        })
        .await;
}

async fn wait_for_shutdown(
    shared: &shared::Shared,
    signals: (tokio::signal::unix::Signal, tokio::signal::unix::Signal),
) {
    let (mut term, mut int) = signals;
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
        _ = shared.shutdown.notified() => {},
    }
}
