//! `team.*` (except the subscription, in `subscribe.rs`).

use super::{register, views, Ctx};
use crate::actor::residency;
use crate::launch;
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::ApiError;
use crew_core::run::{CoreError, Pending, RunState};
use jsonrpsee::RpcModule;
use std::ops::Bound;
use std::time::Duration;

fn check_id(field: &str, id: &str) -> Result<crew_core::ids::SafeId, ApiError> {
    crew_core::ids::SafeId::new(id)
        .map_err(|_| ApiError::invalid_params(field, "must be 1-128 characters of A-Z a-z 0-9 _ -"))
}

/// An evicted run's details, loaded from the journal off the actor, not yet adopted.
async fn load_evicted(ctx: &Ctx, run_id: &str) -> Result<RunState, ApiError> {
    let shared = ctx.shared.clone();
    let id = run_id.to_string();
    tokio::task::spawn_blocking(move || residency::load_run(&shared, &id))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))??
        .ok_or_else(|| ApiError::not_found("run", run_id))
}

/// Make sure the run exists and its details are in memory (load an evicted run).
pub(crate) async fn ensure_resident(ctx: &Ctx, run_id: &str) -> Result<(), ApiError> {
    on_run(ctx, run_id, Access::Read, |_| Ok(())).await
}

pub(crate) async fn with_run<R: Send + 'static>(
    ctx: &Ctx,
    run_id: &str,
    f: impl Fn(&RunState) -> R + Clone + Send + 'static,
) -> Result<R, ApiError> {
    let id = run_id.to_string();
    on_run(ctx, run_id, Access::Read, move |core| {
        core.state
            .run(&id)
            .map(&f)
            .ok_or_else(|| ApiError::not_found("run", &id))
    })
    .await
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Access {
    Read,
    Change,
}

/// What one actor turn of `on_run` found.
enum Turn<R> {
    Done(R),
    /// Known but evicted: load it and come back.
    Evicted,
}

/// Run `f` on the actor with the run's details resident, in one actor turn when the run is
/// resident (the common case). An evicted run is loaded off the actor and adopted in the same
/// turn that runs `f`: otherwise another request's load could evict it again in between (the
/// LRU bound) and a known run would be reported unknown. `f` runs at most once.
pub(crate) async fn on_run<R: Send + 'static>(
    ctx: &Ctx,
    run_id: &str,
    access: Access,
    f: impl Fn(&mut crate::actor::Core) -> Result<R, ApiError> + Clone + Send + 'static,
) -> Result<R, ApiError> {
    use std::sync::atomic::Ordering::Relaxed;
    check_id("runId", run_id)?;
    const ATTEMPTS: usize = 4;
    let mut loaded: Option<RunState> = None;
    for _ in 0..ATTEMPTS {
        let id = run_id.to_string();
        let f = f.clone();
        let first = loaded.is_none();
        let mut carry = loaded.take();
        let job = move |core: &mut crate::actor::Core| {
            if !core.state.summaries.contains_key(&id) {
                // Unknown, or forgotten while it was loading (not to be brought back).
                return Err(ApiError::not_found("run", &id));
            }
            if !core.state.runs.contains_key(&id) {
                match carry.take() {
                    Some(run) => residency::adopt(core, run),
                    None => return Ok(Turn::Evicted),
                }
            } else if first {
                core.shared.run_cache.hits.fetch_add(1, Relaxed);
                core.shared.run_cache.touch(&id);
            }
            f(core).map(Turn::Done)
        };
        let turn = match access {
            Access::Read => ctx.actor.call(job).await?,
            Access::Change => ctx.actor.mutate(job).await?,
        };
        match turn {
            Turn::Done(r) => return Ok(r),
            Turn::Evicted => {
                ctx.shared.run_cache.misses.fetch_add(1, Relaxed);
                loaded = Some(load_evicted(ctx, run_id).await?);
            }
        }
    }
    Err(ApiError::limit(format!(
        "run {run_id} was evicted {ATTEMPTS} times while loading; raise resident_runs"
    )))
}

/// A change to one run: the core decides the events (`decide`), the daemon emits them and
/// settles the run, and `answer` reads the reply from the state after the change.
async fn change_run<T, R: Send + 'static>(
    ctx: &Ctx,
    run_id: &str,
    decide: impl Fn(&crew_core::run::State, &str) -> Result<(Vec<Pending>, T), CoreError>
        + Clone
        + Send
        + 'static,
    answer: impl Fn(&crate::actor::Core, &str, T) -> R + Clone + Send + 'static,
) -> Result<R, ApiError> {
    let id = run_id.to_string();
    on_run(ctx, run_id, Access::Change, move |core| {
        let (events, out) = decide(&core.state, &id).map_err(views::core_error)?;
        core.emit_all(events);
        core.touch(&id);
        Ok(answer(core, &id, out))
    })
    .await
}

fn run_status_now(core: &crate::actor::Core, id: &str) -> RunStatus {
    core.state
        .summaries
        .get(id)
        .map(|s| views::run_status(s.status))
        .unwrap_or(RunStatus::Cancelled)
}

pub fn register_all(m: &mut RpcModule<Ctx>) {
    register::<TeamPlan, _, _>(m, |ctx, p| async move {
        let prepared = launch::prepare(&ctx.shared, &p).await?;
        let model = prepared.spec.model.clone();
        Ok(PlanResult {
            team: prepared.plan.team.clone(),
            workflow: prepared.plan.workflow.clone(),
            concurrency: prepared.spec.concurrency,
            runtime: prepared.spec.runtime.clone(),
            tasks: prepared
                .plan
                .tasks
                .iter()
                .map(|t| views::planned(t, model.as_deref()))
                .collect(),
            diagnostics: prepared
                .policy_gaps
                .iter()
                .map(|g| crew_api::types::Diagnostic {
                    path: format!("runtimes.{}", g.runtime),
                    line: None,
                    field: g.agent.as_ref().map(|a| format!("agent {a}")),
                    severity: crew_api::types::Severity::Warning,
                    message: g.message.clone(),
                })
                .collect(),
        })
    });
    register::<TeamRun, _, _>(m, |ctx, p| async move {
        let prepared = launch::prepare(&ctx.shared, &p).await?;
        launch::start(&ctx.actor, prepared).await
    });
    register::<TeamStatus, _, _>(m, |ctx, p| async move {
        with_run(&ctx, &p.run_id, views::status).await
    });
    register::<TeamList, _, _>(m, |ctx, p| async move {
        let limit = p.limit.unwrap_or(50);
        if !(1..=1000).contains(&limit) {
            return Err(ApiError::invalid_params(
                "limit",
                "must be between 1 and 1000",
            ));
        }
        if let Some(b) = &p.before {
            check_id("before", b)?;
        }
        let want = p.status.map(views::run_status_from_api);
        ctx.actor
            .call(move |core| {
                // Newest first, starting below `before` without walking the newer ones.
                let below = p.before.clone().map_or(Bound::Unbounded, Bound::Excluded);
                let iter = core.state.summaries.range((Bound::Unbounded, below)).rev();
                let mut runs = Vec::new();
                let mut next = None;
                for (_, s) in iter {
                    if want.is_some_and(|w| w != s.status)
                        || p.team.as_ref().is_some_and(|t| *t != s.team)
                    {
                        continue;
                    }
                    if runs.len() == limit as usize {
                        next = runs.last().map(|r: &RunSummaryView| r.id.clone());
                        break;
                    }
                    runs.push(views::summary(s));
                }
                Ok(ListResult { runs, next })
            })
            .await
    });
    register::<TeamCancel, _, _>(m, |ctx, p| async move {
        let reason = p.reason.clone();
        change_run(
            &ctx,
            &p.run_id,
            move |st, id| st.cancel_run(id, reason.clone()),
            |core, id, ids| {
                // Workers are stopped after this turn (`reconcile_workers`): the ones still
                // registered now are exactly those that get SIGTERM.
                let stopped = ids
                    .iter()
                    .filter(|t| core.workers.contains_key(&(id.to_string(), t.to_string())))
                    .cloned()
                    .collect();
                CancelResult {
                    status: run_status_now(core, id),
                    cancelled_task_ids: ids,
                    stopped_task_ids: stopped,
                }
            },
        )
        .await
    });
    register::<TeamResume, _, _>(m, |ctx, p| async move {
        crate::bundle::confirm_imported(&ctx, &p.run_id, p.confirm_imported, None).await?;
        change_run(
            &ctx,
            &p.run_id,
            |st, id| st.resume_run(id),
            |core, id, ids| ResumeResult {
                status: run_status_now(core, id),
                requeued_task_ids: ids,
            },
        )
        .await
    });
    register::<TeamRetry, _, _>(m, |ctx, p| async move {
        for t in &p.task_ids {
            check_id("taskIds", t)?;
        }
        let tasks = p.task_ids.clone();
        crate::bundle::confirm_imported(&ctx, &p.run_id, p.confirm_imported, Some(tasks.clone()))
            .await?;
        let with_dependents = p.with_dependents.unwrap_or(false);
        change_run(
            &ctx,
            &p.run_id,
            move |st, id| {
                if with_dependents {
                    st.retry_tasks_with_dependents(id, &tasks)
                } else {
                    st.retry_tasks(id, &tasks)
                }
            },
            |_, _, ids| RetryResult {
                requeued_task_ids: ids,
            },
        )
        .await
    });
    register::<TeamApprove, _, _>(m, |ctx, p| async move {
        let reason = p.reason.clone();
        change_run(
            &ctx,
            &p.run_id,
            move |st, id| Ok((st.approve(id, reason.clone())?, ())),
            |core, id, ()| RunStatusResult {
                status: run_status_now(core, id),
            },
        )
        .await
    });
    register::<TeamReject, _, _>(m, |ctx, p| async move {
        let reason = p.reason.clone();
        change_run(
            &ctx,
            &p.run_id,
            move |st, id| Ok((st.reject(id, reason.clone())?, ())),
            |core, id, ()| RunStatusResult {
                status: run_status_now(core, id),
            },
        )
        .await
    });
    register::<TeamSteer, _, _>(m, |ctx, p| async move {
        check_id("taskId", &p.task_id)?;
        // A queued message becomes part of the next attempt's prompt, which may be an argument.
        super::checks::no_nul("message", &p.message)?;
        on_run(&ctx, &p.run_id.clone(), Access::Change, move |core| {
            let key = (p.run_id.clone(), p.task_id.clone());
            let live = core.workers.get(&key).is_some_and(|h| h.live);
            let answered = core.workers.get(&key).is_some_and(|h| h.answered);
            let (event, delivered) = core
                .state
                .steer(&p.run_id, &p.task_id, &p.message, live)
                .map_err(views::core_error)?;
            core.emit(event);
            if delivered == crew_core::run::Delivery::Live {
                // The worker hears it only once `task.steered` is durable.
                if let Some(ctl) = core.workers.get(&key).map(|h| h.ctl.clone()) {
                    let message = p.message.clone();
                    core.after_commit(move |res| {
                        if res.is_ok() {
                            let _ = ctl.send(crate::attempt::WorkerCtl::Steer(message));
                        }
                    });
                }
            }
            let running = core
                .state
                .run(&p.run_id)
                .and_then(|r| Some((r.task(&p.task_id)?.status, r.spec.runtime.clone())));
            let note = match (delivered, running) {
                (
                    crew_core::run::Delivery::Queued,
                    Some((crew_core::run::TaskStatus::Running, _)),
                ) if answered => Some(
                    "the task's worker has already given its final answer and takes no more messages: \
                     the message is queued for the task's next attempt, which a task that succeeds never has"
                        .to_string(),
                ),
                (
                    crew_core::run::Delivery::Queued,
                    Some((crew_core::run::TaskStatus::Running, runtime)),
                ) => Some(format!(
                    "runtime `{runtime}` cannot take a message while its worker runs (only the adapters with a \
                     live mode, {}, in live mode can: the default for pi, claude and codex; `rpc = true` in the \
                     runtime makes gemini and opencode live, where Gemini CLI's usage does not count cached tokens apart \
                     and opencode's counts only each turn's last model call): the message is queued for the \
                     task's next attempt, which a task that succeeds never has",
                    crew_core::stream::live_adapter_names()
                )),
                _ => None,
            };
            Ok(SteerResult {
                note,
                delivered: match delivered {
                    crew_core::run::Delivery::Live => Delivered::Live,
                    crew_core::run::Delivery::Queued => Delivered::Queued,
                },
            })
        })
        .await
    });
    register::<TeamRespond, _, _>(m, |ctx, p| async move {
        check_id("taskId", &p.task_id)?;
        super::checks::no_nul("message", &p.message)?;
        let (task, message) = (p.task_id.clone(), p.message.clone());
        change_run(
            &ctx,
            &p.run_id,
            move |st, id| Ok((st.respond(id, &task, &message)?, ())),
            move |core, id, ()| RespondResult {
                status: core
                    .state
                    .run(id)
                    .and_then(|r| r.task(&p.task_id))
                    .map(|t| views::task_status(t.status))
                    .unwrap_or(TaskStatus::Queued),
            },
        )
        .await
    });
    register::<TeamWait, _, _>(m, |ctx, p| async move {
        check_id("runId", &p.run_id)?;
        let timeout = match p.timeout_ms {
            None => Duration::from_secs(3600),
            Some(t) if (0..=3_600_000).contains(&t) => Duration::from_millis(t as u64),
            Some(_) => {
                return Err(ApiError::invalid_params(
                    "timeoutMs",
                    "must be between 0 and 3600000",
                ))
            }
        };
        let mut rx = ctx.shared.bus.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let id = p.run_id.clone();
            let status = ctx
                .actor
                .call(move |core| {
                    core.state
                        .summaries
                        .get(&id)
                        .map(|s| s.status)
                        .ok_or_else(|| ApiError::not_found("run", &id))
                })
                .await?;
            if status.is_finished() || status == crew_core::run::RunStatus::Blocked {
                return Ok(WaitResult {
                    status: views::run_status(status),
                    finished: true,
                });
            }
            // Wake on any event of this run (or lag), else at the deadline.
            let woke = tokio::time::timeout_at(deadline, async {
                loop {
                    match rx.recv().await {
                        Ok(ev) if ev.run_id.as_deref() == Some(p.run_id.as_str()) => return,
                        Ok(_) => continue,
                        Err(_) => return,
                    }
                }
            })
            .await;
            if woke.is_err() {
                return Ok(WaitResult {
                    status: views::run_status(status),
                    finished: false,
                });
            }
        }
    });
    register::<TeamEvents, _, _>(m, |ctx, p| async move {
        let after = p.after_seq.unwrap_or(0);
        if after < 0 {
            return Err(ApiError::invalid_params("afterSeq", "must not be negative"));
        }
        let limit = p.limit.unwrap_or(500);
        if !(1..=5000).contains(&limit) {
            return Err(ApiError::invalid_params(
                "limit",
                "must be between 1 and 5000",
            ));
        }
        if let Some(r) = &p.run_id {
            check_id("runId", r)?;
            let r2 = r.clone();
            if !ctx
                .actor
                .call(move |core| Ok(core.state.summaries.contains_key(&r2)))
                .await?
            {
                return Err(ApiError::not_found("run", r));
            }
        }
        let shared = ctx.shared.clone();
        let run = p.run_id.clone();
        tokio::task::spawn_blocking(move || {
            crate::rpc::subscribe::read_events(
                &shared,
                run.as_deref(),
                after as u64,
                limit as usize,
            )
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map(|(events, next_seq)| EventsResult { events, next_seq })
    });
    register::<TeamArtifacts, _, _>(m, |ctx, p| async move {
        let (mut artifacts, prompts) = with_run(&ctx, &p.run_id, |r| {
            let listed: Vec<ArtifactInfo> = r
                .tasks
                .iter()
                .flat_map(|t| {
                    t.artifacts
                        .iter()
                        .map(|a| views::artifact(a, Some(&t.plan.id)))
                })
                .collect();
            (listed, crate::system_prompts::of_run(r))
        })
        .await?;
        // No event names the system prompt files (they are the workers' input, see
        // `executor::system_prompt_file`): listed when on disk, read off the actor.
        let dir = ctx.shared.run_dir(&check_id("runId", &p.run_id)?);
        let found =
            tokio::task::spawn_blocking(move || crate::system_prompts::on_disk(&dir, prompts))
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?;
        artifacts.extend(found);
        Ok(ArtifactsResult { artifacts })
    });
    register::<TeamArtifact, _, _>(m, |ctx, p| async move {
        let run_id = check_id("runId", &p.run_id)?;
        if !crew_core::ids::is_safe_artifact_name(&p.name) {
            return Err(ApiError::invalid_params(
                "name",
                "must be a relative artifact name like results/01_explore.txt",
            ));
        }
        let offset = p.offset.unwrap_or(0);
        let limit = p.limit.unwrap_or(1 << 20);
        if offset < 0 {
            return Err(ApiError::invalid_params("offset", "must not be negative"));
        }
        if !(1..=(8 << 20)).contains(&limit) {
            return Err(ApiError::invalid_params(
                "limit",
                "must be between 1 and 8388608",
            ));
        }
        let path = ctx.shared.run_dir(&run_id).join(&p.name);
        let name = p.name.clone();
        tokio::task::spawn_blocking(move || {
            use std::io::{Read, Seek, SeekFrom};
            let mut f =
                std::fs::File::open(&path).map_err(|_| ApiError::not_found("artifact", &name))?;
            let bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
            let mut buf = Vec::new();
            // Past the end is an empty read, not a seek the kernel refuses (offsets > i64::MAX
            // of a file position) and answers with an internal error.
            if (offset as u64) < bytes {
                f.seek(SeekFrom::Start(offset as u64))
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                f.take(limit as u64)
                    .read_to_end(&mut buf)
                    .map_err(|e| ApiError::internal(e.to_string()))?;
            }
            let truncated = (offset as u64) + (buf.len() as u64) < bytes;
            Ok(ArtifactResult {
                content: String::from_utf8_lossy(&buf).into_owned(),
                bytes,
                truncated,
            })
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
    });
    register::<TeamSummary, _, _>(m, |ctx, p| async move {
        let run_id = check_id("runId", &p.run_id)?;
        let status = with_run(&ctx, &p.run_id, views::status).await?;
        let dir = ctx.shared.run_dir(&run_id);
        // Reads the result files: off the async workers.
        let markdown = tokio::task::spawn_blocking(move || crate::summary::markdown(&status, &dir))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(SummaryResult { markdown })
    });
    register::<TeamForget, _, _>(m, |ctx, p| async move {
        check_id("runId", &p.run_id)?;
        let force = p.force.unwrap_or(false);
        if !force {
            let dirty = crate::workspace::uncommitted(&ctx.shared, &p.run_id).await;
            if !dirty.is_empty() {
                return Err(ApiError::invalid_state(format!(
                    "run {} has worktrees with uncommitted work: {}; forget with force to \
                     delete them",
                    p.run_id,
                    dirty.join(", ")
                )));
            }
        }
        let rt = tokio::runtime::Handle::current();
        let shared = ctx.shared.clone();
        ctx.actor
            .mutate(move |core| {
                let events = core.state.forget(&p.run_id).map_err(views::core_error)?;
                core.emit_all(events);
                let id = p.run_id.clone();
                core.after_commit(move |res| {
                    if res.is_ok() {
                        crate::forget::remove_run_data(&shared, &id);
                        rt.spawn(crate::workspace::remove_run(shared, id, force));
                    }
                });
                Ok(Empty {})
            })
            .await
    });
    register::<TeamPrune, _, _>(m, |ctx, p| async move {
        let keep = p.keep.unwrap_or(20);
        if keep < 0 {
            return Err(ApiError::invalid_params("keep", "must not be negative"));
        }
        let older = match p.older_than_ms {
            None => None,
            Some(ms) if ms < 0 => {
                return Err(ApiError::invalid_params(
                    "olderThanMs",
                    "must not be negative",
                ))
            }
            // Checked: a cutoff before the earliest instant chrono can hold is refused, not a
            // panic in the handler.
            Some(ms) => Some(
                chrono::TimeDelta::try_milliseconds(ms)
                    .and_then(|age| chrono::Utc::now().checked_sub_signed(age))
                    .ok_or_else(|| ApiError::invalid_params("olderThanMs", "is too large"))?,
            ),
        };
        let force = p.force.unwrap_or(false);
        let rt = tokio::runtime::Handle::current();
        let shared = ctx.shared.clone();
        ctx.actor
            .mutate(move |core| {
                let victims = core
                    .state
                    .prune(keep as usize, older)
                    .map_err(views::core_error)?;
                for id in &victims {
                    if let Ok(evs) = core.state.forget(id) {
                        core.emit_all(evs);
                    }
                }
                let kept = core.state.summaries.len() as u64;
                let ids = victims.clone();
                core.after_commit(move |res| {
                    if res.is_ok() {
                        for id in &ids {
                            crate::forget::remove_run_data(&shared, id);
                            rt.spawn(crate::workspace::remove_run(
                                shared.clone(),
                                id.clone(),
                                force,
                            ));
                        }
                    }
                });
                Ok(PruneResult {
                    removed: victims,
                    kept,
                })
            })
            .await
    });
    register::<TeamDiff, _, _>(m, |ctx, p| async move {
        check_id("runId", &p.run_id)?;
        let limit = match p.limit {
            None => 4 << 20,
            Some(l) if l > 0 => l.min(64 << 20) as usize,
            Some(_) => return Err(ApiError::invalid_params("limit", "must be positive")),
        };
        let task = p.task_id.clone();
        let input = with_run(&ctx, &p.run_id, move |r| diff_input(r, task.as_deref())).await??;
        crate::workspace::diff(&ctx.shared, input, p.stat.unwrap_or(false), limit).await
    });
    register::<TeamApply, _, _>(m, |ctx, p| async move {
        check_id("runId", &p.run_id)?;
        let force = p.force.unwrap_or(false);
        let (ws, integration) = with_run(&ctx, &p.run_id, move |r| {
            crate::verdicts::apply_allowed(r, force)?;
            let ws = r.spec.workspace.clone().ok_or_else(|| {
                ApiError::invalid_state(format!("run {} is not a worktree run", r.id))
            })?;
            let i = r.integration.clone().ok_or_else(|| {
                ApiError::invalid_state(format!(
                    "run {} is {} and has no integrated result yet",
                    r.id,
                    r.status.as_str()
                ))
            })?;
            Ok::<_, ApiError>((ws, i))
        })
        .await??;
        crate::workspace::apply(
            &ctx.shared,
            &p.run_id,
            &ws,
            &integration,
            p.squash.unwrap_or(false),
        )
        .await
    });
    register::<TeamExport, _, _>(m, |ctx, p| async move {
        ensure_resident(&ctx, &p.run_id).await?;
        let shared = ctx.shared.clone();
        let id = p.run_id.clone();
        tokio::task::spawn_blocking(move || crate::bundle::export(&shared, &id))
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
            .map(|bundle| ExportResult { bundle })
    });
    register::<TeamImport, _, _>(
        m,
        |ctx, p| async move { crate::bundle::import(&ctx, p).await },
    );
}

/// What `team.diff` compares: a task's start and result, or the run's base and integration.
fn diff_input(r: &RunState, task: Option<&str>) -> Result<crate::workspace::DiffInput, ApiError> {
    let ws =
        r.spec.workspace.clone().ok_or_else(|| {
            ApiError::invalid_state(format!("run {} is not a worktree run", r.id))
        })?;
    match task {
        Some(t) => {
            let ts = r.task(t).ok_or_else(|| ApiError::not_found("task", t))?;
            let c = ts.commit().ok_or_else(|| {
                ApiError::invalid_state(format!(
                    "task {t} is {} and has no result commit",
                    ts.status.as_str()
                ))
            })?;
            Ok(crate::workspace::DiffInput {
                branch: c.branch.clone(),
                from: c.start.clone(),
                to: c.commit.clone(),
                ws,
            })
        }
        None => {
            let i = r.integration.clone().ok_or_else(|| {
                ApiError::invalid_state(format!(
                    "run {} is {} and has no integrated result yet (name a task to see its change)",
                    r.id,
                    r.status.as_str()
                ))
            })?;
            Ok(crate::workspace::DiffInput {
                branch: i.branch,
                from: ws.base.clone(),
                to: i.commit,
                ws,
            })
        }
    }
}
