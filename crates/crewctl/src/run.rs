//! `run`, `plan`, `wait`.

use crate::cli::{FailurePolicyArg, ReuseArg, RunArgs, RunCmd};
use crate::ctx::{abs_dir, outln, Ctx};
use crate::exit;
use crate::follow::{self, Seed};
use crate::render::runs as view_runs;
use crate::style::Tone;
use crew_api::methods::{TeamPlan, TeamRun, TeamStatus, TeamWait};
use crew_api::types::{
    BudgetParams, DirtyPolicy, FailurePolicy, ReuseResults, RunIdParams, RunParams, RunSkillsParam,
    RunStatus, WaitParams, WaitResult, WorkspaceMode,
};

/// The `team.run`/`team.plan` params for the command line; `cwd` is already absolute.
pub fn run_params(a: &RunArgs, cwd: String) -> RunParams {
    RunParams {
        goal: a.goal.clone(),
        cwd,
        team: a.team.clone(),
        workflow: a.workflow.clone(),
        runtime: a.runtime.clone(),
        model: a.model.clone(),
        concurrency: a.concurrency.map(i64::from),
        failure_policy: a.failure_policy.map(|p| match p {
            FailurePolicyArg::FailFast => FailurePolicy::FailFast,
            FailurePolicyArg::Continue => FailurePolicy::Continue,
        }),
        budget: a.budget_tokens.map(|tokens| BudgetParams {
            tokens: i64::try_from(tokens).unwrap_or(i64::MAX),
            warn_at: a.budget_warn,
            abort_at: a.budget_abort,
        }),
        require_plan_approval: a.approve_plan.then_some(true),
        reuse_results: a.reuse_results.map(|r| match r {
            ReuseArg::ReadOnly => ReuseResults::Bool(true),
            ReuseArg::All => ReuseResults::Mode("all".into()),
        }),
        workspace: a.workspace.map(|w| match w {
            crate::cli::WorkspaceArg::Shared => WorkspaceMode::Shared,
            crate::cli::WorkspaceArg::Worktree => WorkspaceMode::Worktree,
        }),
        dirty: a.refuse_dirty.then_some(DirtyPolicy::Refuse),
        conflicts: a.conflicts.map(|c| match c {
            crate::cli::ConflictsArg::Agent => crew_api::types::ConflictMode::Agent,
            crate::cli::ConflictsArg::Manual => crew_api::types::ConflictMode::Manual,
        }),
        max_fan_out_tasks: a.max_fan_out_tasks.map(i64::from),
        max_fix_rounds: a.max_fix_rounds.map(i64::from),
        allow_no_change: a.allow_no_change.then_some(true),
        candidates: a.candidates.map(i64::from),
        select: a.select.clone(),
        skills: if a.no_skills {
            Some(RunSkillsParam::Bool(false))
        } else {
            a.skills.clone().map(RunSkillsParam::Names)
        },
        agent: a.agent.clone(),
        role: a.role.clone(),
        chain: a.chain.clone(),
    }
}

pub async fn plan(ctx: &Ctx, a: RunArgs) -> anyhow::Result<u8> {
    let params = run_params(&a, abs_dir(a.cwd.as_deref())?);
    let conn = ctx.connect().await?;
    let p = conn.call::<TeamPlan>(&params).await?;
    if ctx.json {
        ctx.json(&p)?;
    } else {
        outln(&view_runs::plan(&ctx.view(), &p))?;
    }
    Ok(exit::SUCCESS)
}

pub async fn run(ctx: &Ctx, c: RunCmd) -> anyhow::Result<u8> {
    let params = run_params(&c.args, abs_dir(c.args.cwd.as_deref())?);
    let conn = ctx.connect().await?;
    let started = conn.call::<TeamRun>(&params).await?;
    let ev = ctx.err_view();
    for note in &started.notes {
        eprintln!("{} {}", ev.p(Tone::Warn, "note:"), crate::safe::term(note));
    }
    if c.detach {
        if ctx.json {
            ctx.json(&started)?;
        } else {
            let v = ctx.view();
            outln(&format!(
                "Started run {} ({}).\n  {}",
                v.p(Tone::Bold, &started.run_id),
                crate::render::units::count(started.tasks.len(), "task"),
                v.p(
                    Tone::Dim,
                    format!(
                        "follow: crewctl logs -f {}   status: crewctl status {}",
                        started.run_id, started.run_id
                    )
                )
            ))?;
        }
        return Ok(exit::SUCCESS);
    }
    if !ctx.json {
        let v = ctx.view();
        outln(&format!(
            "{} {} · {} · {}",
            v.p(Tone::Bold, "Run"),
            v.p(Tone::Bold, &started.run_id),
            crate::render::units::count(started.tasks.len(), "task"),
            v.p(
                Tone::Dim,
                if ctx.stdin_tty {
                    "Ctrl-C to cancel or detach"
                } else {
                    "Ctrl-C to detach"
                }
            )
        ))?;
    }
    let through = c
        .blocks
        .through(ctx.stdin_tty && ctx.stdout_tty && !ctx.json);
    let code = follow::follow(
        ctx,
        conn,
        &started.run_id,
        Seed::Plan(started.tasks.clone()),
        None,
        through,
    )
    .await?;
    if !ctx.json {
        crate::diff::print_integration(ctx, &started.run_id).await;
    }
    Ok(code)
}

/// `team.wait` returns when a run stops or blocks. Unless `until_blocked`, a block is waited
/// through: subscribe from the daemon's last event, look at the run once more (it may have
/// moved on in between), and wait again after its next event.
/// The longest one `team.wait` may ask for (crewd refuses more).
const ONE_WAIT_MS: i64 = 3_600_000;

pub async fn wait(
    ctx: &Ctx,
    run: &crate::resolve::RunRef,
    timeout: Option<std::time::Duration>,
    until_blocked: bool,
) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    let run_id = &run.resolve(&conn).await?;
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let left_ms = || {
        deadline.map(|d| {
            let left = d.saturating_duration_since(tokio::time::Instant::now());
            i64::try_from(left.as_millis())
                .unwrap_or(i64::MAX)
                .min(ONE_WAIT_MS)
        })
    };
    // The first wait asks for the whole timeout (up to the daemon's hour), the later ones for
    // what is left of it.
    let mut timeout_ms = timeout.map(|t| {
        i64::try_from(t.as_millis())
            .unwrap_or(i64::MAX)
            .min(ONE_WAIT_MS)
    });
    let w = loop {
        let w = conn
            .call::<TeamWait>(&WaitParams {
                run_id: run_id.to_string(),
                timeout_ms,
            })
            .await?;
        timeout_ms = left_ms();
        if !w.finished {
            // The daemon bounds one wait to an hour: wait again until our own deadline, if any.
            if deadline.is_none_or(|d| tokio::time::Instant::now() < d) {
                continue;
            }
            break w;
        }
        if w.status != RunStatus::Blocked || until_blocked {
            break w;
        }
        if !wait_out_block(&conn, run_id, deadline).await? {
            break WaitResult {
                status: RunStatus::Blocked,
                finished: false,
            };
        }
    };
    // The exit status also depends on the tasks (one may need attention).
    let s = conn
        .call::<TeamStatus>(&RunIdParams {
            run_id: run_id.to_string(),
        })
        .await?;
    let code = if w.finished {
        exit::for_run(s.run.status, &s.tasks)
    } else {
        exit::TIMED_OUT
    };
    if ctx.json {
        ctx.json(&w)?;
    } else if w.finished {
        outln(&crate::render::follow::final_summary(&ctx.view(), &s))?;
    } else {
        let v = ctx.view();
        outln(&format!(
            "{} run {} is still {}",
            v.p(Tone::Warn, "timed out:"),
            crate::render::ids::hint(run_id),
            s.run.status.as_str()
        ))?;
    }
    Ok(code)
}

/// Waits for the blocked run's next event; `false` when the deadline came first.
async fn wait_out_block(
    conn: &crate::conn::Conn,
    run_id: &str,
    deadline: Option<tokio::time::Instant>,
) -> anyhow::Result<bool> {
    use jsonrpsee::core::client::SubscriptionClientT;
    let last = conn
        .call::<crew_api::methods::DaemonStatus_>(&crew_api::types::NoParams {})
        .await?
        .journal
        .last_seq;
    let params = serde_json::json!({ "runId": run_id, "afterSeq": last });
    let mut sub = conn
        .client
        .subscribe::<serde_json::Value, _>(
            crew_api::methods::TeamSubscribe::NAME,
            crew_api::client::ObjectParams(params),
            crew_api::methods::TeamSubscribe::UNSUBSCRIBE,
        )
        .await
        .map_err(|e| anyhow::anyhow!("cannot subscribe to run {run_id}: {e}"))?;
    let now = conn
        .call::<TeamStatus>(&RunIdParams {
            run_id: run_id.to_string(),
        })
        .await?;
    if now.run.status != RunStatus::Blocked {
        return Ok(true);
    }
    let next = sub.next();
    match deadline {
        Some(d) => Ok(tokio::time::timeout_at(d, next).await.is_ok()),
        None => {
            next.await;
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn params_from_flags() {
        let cli = Cli::try_parse_from([
            "crewctl",
            "run",
            "fix it",
            "-t",
            "fast-fix",
            "--budget-tokens",
            "5000",
            "--budget-abort",
            "0.9",
            "--approve-plan",
            "--reuse-results=all",
            "--failure-policy",
            "fail-fast",
        ])
        .unwrap();
        let Command::Run(c) = cli.command else {
            panic!()
        };
        let p = run_params(&c.args, "/w".into());
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "goal": "fix it", "cwd": "/w", "team": "fast-fix", "workflow": null, "runtime": null, "model": null,
                "concurrency": null, "failurePolicy": "fail-fast",
                "budget": {"tokens": 5000, "warnAt": null, "abortAt": 0.9},
                "requirePlanApproval": true, "reuseResults": "all",
                "workspace": null, "dirty": null, "maxFanOutTasks": null
            })
        );
        let cli = Cli::try_parse_from(["crewctl", "run", "x", "--reuse-results"]).unwrap();
        let Command::Run(c) = cli.command else {
            panic!()
        };
        let p = run_params(&c.args, "/w".into());
        assert_eq!(p.reuse_results, Some(ReuseResults::Bool(true)));
        assert_eq!(p.require_plan_approval, None);
        assert_eq!(p.budget, None);
    }
}
