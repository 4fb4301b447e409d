//! `schedule add|ls|get|update|enable|disable|rm|trigger|preview`.

use crate::cli::{
    CatchUpArg, JobPolicyArgs, OverlapArg, ScheduleAddArgs, ScheduleCmd, ScheduleUpdateArgs,
};
use crate::ctx::{abs_dir, out, outln, Ctx};
use crate::exit;
use crate::render::schedule as view_schedule;
use crate::run::run_params;
use crate::style::Tone;
use crew_api::methods::*;
use crew_api::types::*;

pub async fn dispatch(ctx: &Ctx, cmd: ScheduleCmd) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    match cmd {
        ScheduleCmd::Add(a) => {
            let params = add_params(&a, abs_dir(a.run.cwd.as_deref())?);
            let job = conn.call::<ScheduleAdd>(&params).await?;
            show_job(ctx, &job, "Added")?;
        }
        ScheduleCmd::Ls => {
            let r = conn.call::<ScheduleList>(&NoParams {}).await?;
            if ctx.json {
                ctx.json(&r)?;
            } else {
                out(&view_schedule::list(&ctx.view(), &r.jobs))?;
            }
        }
        ScheduleCmd::Get { id } => {
            let job = conn.call::<ScheduleGet>(&ScheduleIdParams { id }).await?;
            show_job(ctx, &job, "")?;
        }
        ScheduleCmd::Update(a) => {
            // Run fields are replaced as a whole on the wire, so merge them into the current ones.
            let run = if a.goal.is_some()
                || a.team.is_some()
                || a.workflow.is_some()
                || a.runtime.is_some()
                || a.model.is_some()
                || a.cwd.is_some()
            {
                let job = conn
                    .call::<ScheduleGet>(&ScheduleIdParams { id: a.id.clone() })
                    .await?;
                Some(merge_run(job.run, &a)?)
            } else {
                None
            };
            let job = conn.call::<ScheduleUpdate>(&update_params(&a, run)).await?;
            show_job(ctx, &job, "Updated")?;
        }
        ScheduleCmd::Enable { id } => {
            let job = conn
                .call::<ScheduleEnable>(&ScheduleIdParams { id })
                .await?;
            show_job(ctx, &job, "Enabled")?;
        }
        ScheduleCmd::Disable { id } => {
            let job = conn
                .call::<ScheduleDisable>(&ScheduleIdParams { id })
                .await?;
            show_job(ctx, &job, "Disabled")?;
        }
        ScheduleCmd::Rm { id, keep_runs } => {
            let r = conn
                .call::<ScheduleRemove>(&ScheduleRemoveParams {
                    id: id.clone(),
                    cancel_runs: keep_runs.then_some(false),
                })
                .await?;
            if ctx.json {
                ctx.json(&r)?;
            } else if r.cancelled_run_ids.is_empty() {
                outln(&format!("Removed job {id}."))?;
            } else {
                outln(&format!(
                    "Removed job {id}; cancelled its runs {}.",
                    r.cancelled_run_ids.join(", ")
                ))?;
            }
        }
        ScheduleCmd::Trigger { id } => {
            let r = conn
                .call::<ScheduleTrigger>(&ScheduleIdParams { id: id.clone() })
                .await?;
            if ctx.json {
                ctx.json(&r)?;
            } else {
                let v = ctx.view();
                outln(&format!(
                    "Fired job {id}: run {}.\n  {}",
                    v.p(Tone::Bold, &r.run_id),
                    v.p(Tone::Dim, format!("follow: crewctl logs -f {}", r.run_id))
                ))?;
            }
        }
        ScheduleCmd::Preview {
            cron,
            tz,
            count,
            from,
        } => {
            let r = conn
                .call::<SchedulePreview>(&PreviewParams {
                    cron,
                    timezone: tz,
                    count: Some(i64::from(count)),
                    from,
                })
                .await?;
            if ctx.json {
                ctx.json(&r)?;
            } else {
                out(&view_schedule::preview(&ctx.view(), &r))?;
            }
        }
    }
    Ok(exit::SUCCESS)
}

fn show_job(ctx: &Ctx, job: &Job, verb: &str) -> anyhow::Result<()> {
    if ctx.json {
        return ctx.json(job);
    }
    let v = ctx.view();
    if !verb.is_empty() {
        outln(&format!("{verb} job {}.", v.p(Tone::Bold, &job.id)))?;
    }
    out(&view_schedule::detail(&v, job))
}

fn overlap(o: OverlapArg) -> Overlap {
    match o {
        OverlapArg::Skip => Overlap::Skip,
        OverlapArg::Allow => Overlap::Allow,
        OverlapArg::CancelPrevious => Overlap::CancelPrevious,
    }
}

fn catch_up(c: CatchUpArg) -> CatchUp {
    match c {
        CatchUpArg::Latest => CatchUp::Latest,
        CatchUpArg::None => CatchUp::None,
        CatchUpArg::All => CatchUp::All,
    }
}

fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn policy(p: &JobPolicyArgs) -> (Option<String>, Option<Overlap>, Option<CatchUp>) {
    (
        p.tz.clone(),
        p.overlap.map(overlap),
        p.catch_up.map(catch_up),
    )
}

pub fn add_params(a: &ScheduleAddArgs, cwd: String) -> ScheduleAddParams {
    let (timezone, overlap, catch_up) = policy(&a.policy);
    ScheduleAddParams {
        name: a.name.clone(),
        cron: a.when.cron.clone(),
        interval_ms: a.when.every.map(millis),
        at: a.when.at.clone(),
        timezone,
        run: run_params(&a.run, cwd),
        overlap,
        catch_up,
        enabled: a.disabled.then_some(false),
    }
}

fn merge_run(mut run: RunParams, a: &ScheduleUpdateArgs) -> anyhow::Result<RunParams> {
    if let Some(g) = &a.goal {
        run.goal = g.clone();
    }
    if let Some(d) = &a.cwd {
        run.cwd = abs_dir(Some(d))?;
    }
    for (field, value) in [
        (&mut run.team, &a.team),
        (&mut run.workflow, &a.workflow),
        (&mut run.runtime, &a.runtime),
        (&mut run.model, &a.model),
    ] {
        if value.is_some() {
            field.clone_from(value);
        }
    }
    Ok(run)
}

fn update_params(a: &ScheduleUpdateArgs, run: Option<RunParams>) -> ScheduleUpdateParams {
    let (timezone, overlap, catch_up) = policy(&a.policy);
    ScheduleUpdateParams {
        id: a.id.clone(),
        name: a.name.clone(),
        cron: a.cron.clone(),
        interval_ms: a.every.map(millis),
        at: a.at.clone(),
        timezone,
        run,
        overlap,
        catch_up,
        enabled: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn add_params_from_flags() {
        let cli = Cli::try_parse_from([
            "crewctl",
            "schedule",
            "add",
            "nightly review",
            "--every",
            "15m",
            "--tz",
            "Europe/Berlin",
            "--overlap",
            "cancel-previous",
            "--disabled",
            "--team",
            "review",
            "--name",
            "n",
        ])
        .unwrap();
        let Command::Schedule(ScheduleCmd::Add(a)) = cli.command else {
            panic!()
        };
        let p = add_params(&a, "/w".into());
        assert_eq!(p.interval_ms, Some(900_000));
        assert_eq!(p.cron, None);
        assert_eq!(p.timezone.as_deref(), Some("Europe/Berlin"));
        assert_eq!(p.overlap, Some(Overlap::CancelPrevious));
        assert_eq!(p.enabled, Some(false));
        assert_eq!(p.run.goal, "nightly review");
        assert_eq!(p.run.team.as_deref(), Some("review"));
        assert_eq!(p.name.as_deref(), Some("n"));
    }

    #[test]
    fn update_merges_run_fields() {
        let cli = Cli::try_parse_from([
            "crewctl",
            "schedule",
            "update",
            "s-1",
            "--team",
            "fast-fix",
            "--cron",
            "0 4 * * *",
        ])
        .unwrap();
        let Command::Schedule(ScheduleCmd::Update(a)) = cli.command else {
            panic!()
        };
        let old = RunParams {
            goal: "g".into(),
            cwd: "/w".into(),
            team: Some("review".into()),
            model: Some("m".into()),
            ..RunParams::default()
        };
        let run = merge_run(old, &a).unwrap();
        assert_eq!(run.team.as_deref(), Some("fast-fix"));
        assert_eq!(run.model.as_deref(), Some("m"), "untouched fields stay");
        let p = update_params(&a, Some(run));
        assert_eq!(p.cron.as_deref(), Some("0 4 * * *"));
        assert_eq!(p.interval_ms, None);
    }
}
