//! `daemon.*`

use super::{register, Ctx};
use crew_api::methods::{DaemonPing, DaemonShutdown, DaemonStatus_};
use crew_api::types::*;
use jsonrpsee::RpcModule;

pub fn register_all(m: &mut RpcModule<Ctx>) {
    register::<DaemonPing, _, _>(m, |ctx, _| async move {
        Ok(PingResult {
            version: env!("CARGO_PKG_VERSION").into(),
            pid: std::process::id(),
            uptime_ms: ctx.shared.started.elapsed().as_millis() as u64,
        })
    });
    register::<DaemonStatus_, _, _>(m, |ctx, _| async move {
        let shared = ctx.shared.clone();
        let (runs, schedules, workers) = ctx
            .actor
            .call(|core| {
                let st = &core.state;
                let enabled = st.schedules.values().filter(|j| j.enabled).count() as u64;
                Ok((
                    RunCounts {
                        active: st.active.len() as u64,
                        total: st.summaries.len() as u64,
                        resident: st.runs.len() as u64,
                    },
                    ScheduleCounts {
                        total: st.schedules.len() as u64,
                        enabled,
                    },
                    WorkerCounts {
                        running: st.workers_running() as u64,
                        max: core.shared.config.max_workers as u64,
                    },
                ))
            })
            .await?;
        Ok(DaemonStatus {
            version: env!("CARGO_PKG_VERSION").into(),
            api_version: crew_api::API_VERSION.into(),
            pid: std::process::id(),
            uptime_ms: shared.started.elapsed().as_millis() as u64,
            socket: shared.socket.display().to_string(),
            state_dir: shared.state_dir.display().to_string(),
            runs,
            schedules,
            journal: JournalStatus {
                last_seq: shared.durable_seq(),
                bytes: shared.journal.size_on_disk(),
            },
            workers,
            containment: crate::executor::contain::containment().describe().into(),
            sandbox: crate::executor::sandbox::status(&shared.config),
        })
    });
    register::<DaemonShutdown, _, _>(m, |ctx, _| async move {
        tracing::info!("shutdown requested over RPC");
        let shared = ctx.shared.clone();
        // Answer first, then stop: the caller gets its `{}`.
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            shared.begin_shutdown();
        });
        Ok(Empty {})
    });
}
