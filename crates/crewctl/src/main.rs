//! crewctl: the command-line client of crewd. Verbs live in one module per family; rendering is
//! pure and lives in `render`.

mod apply;
mod cache;
mod cli;
mod conn;
mod ctx;
mod daemon;
mod diff;
mod exit;
mod follow;
mod mcp;
mod render;
mod resolve;
mod resources;
mod run;
mod runs;
mod safe;
mod schedule;
mod style;
mod term;
mod ui;

use clap::Parser as _;
use cli::{Cli, Command};
use ctx::Ctx;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // `--json` may be what failed to parse around; look for it in the raw arguments.
            let json = std::env::args_os().any(|a| a == "--json");
            return ExitCode::from(exit::usage(&e, json));
        }
    };
    let socket = cli
        .socket
        .clone()
        .unwrap_or_else(crew_api::paths::default_socket);
    let ctx = Ctx::new(socket, cli.json, cli.color);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let code = match runtime.block_on(dispatch(&ctx, cli.command)) {
        Ok(code) => code,
        Err(e) => exit::report(&e, &ctx.err_view(), ctx.json),
    };
    ExitCode::from(code)
}

async fn dispatch(ctx: &Ctx, command: Command) -> anyhow::Result<u8> {
    match command {
        Command::Run(c) => run::run(ctx, c).await,
        Command::Plan(a) => run::plan(ctx, a).await,
        Command::Wait {
            run_id,
            timeout,
            until_blocked,
        } => run::wait(ctx, &run_id, timeout, until_blocked).await,
        Command::Status { run_id, watch } => runs::status(ctx, &run_id, watch).await,
        Command::Ls(a) => runs::ls(ctx, a).await,
        Command::Logs(a) => runs::logs(ctx, a).await,
        Command::Cancel { run_id, reason } => runs::cancel(ctx, &run_id, reason).await,
        Command::Resume {
            run_id,
            confirm_imported,
            budget_tokens,
        } => runs::resume(ctx, &run_id, confirm_imported, budget_tokens).await,
        Command::Retry {
            run_id,
            task_ids,
            with_dependents,
            confirm_imported,
        } => runs::retry(ctx, &run_id, task_ids, with_dependents, confirm_imported).await,
        Command::Approve { run_id, reason } => runs::approve(ctx, &run_id, reason, true).await,
        Command::Reject { run_id, reason } => runs::approve(ctx, &run_id, reason, false).await,
        Command::Steer {
            run_id,
            task_id,
            message,
        } => runs::steer(ctx, &run_id, &task_id, message).await,
        Command::Respond {
            run_id,
            task_id,
            message,
        } => runs::respond(ctx, &run_id, &task_id, message).await,
        Command::Artifacts { run_id } => runs::artifacts(ctx, &run_id).await,
        Command::Cat { run_id, name } => runs::cat(ctx, &run_id, &name).await,
        Command::Summary { run_id } => runs::summary(ctx, &run_id).await,
        Command::Forget { run_id, force } => runs::forget(ctx, &run_id, force).await,
        Command::Diff {
            run_id,
            task_id,
            stat,
            candidate,
        } => diff::diff(ctx, &run_id, task_id, stat, candidate).await,
        Command::Pick {
            run_id,
            task_id,
            candidate,
        } => diff::pick(ctx, &run_id, task_id, candidate).await,
        Command::Apply {
            run_id,
            squash,
            force,
        } => apply::apply(ctx, &run_id, squash, force).await,
        Command::Prune(a) => runs::prune(ctx, a).await,
        Command::Export { run_id, output } => runs::export(ctx, &run_id, output).await,
        Command::Import { file } => runs::import(ctx, &file).await,
        Command::Schedule(c) => schedule::dispatch(ctx, c).await,
        Command::Cache(c) => cache::dispatch(ctx, c).await,
        Command::Resources(a) => resources::list(ctx, a).await,
        Command::Validate { cwd } => resources::validate(ctx, cwd).await,
        Command::Daemon(c) => daemon::dispatch(ctx, c).await,
        Command::Ui {
            listen,
            no_open,
            allow_remote_without_tls,
        } => {
            let args = ui::UiArgs {
                listen,
                no_open,
                allow_remote_without_tls,
            };
            ui::ui(ctx, args).await
        }
        Command::Mcp { ask: false, .. } => mcp::serve(ctx).await,
        Command::Mcp { ask: true, tool } => mcp::serve_ask(&tool).await,
        Command::Completions { shell } => daemon::completions(shell),
        Command::Man { dir } => daemon::man(&dir),
    }
}
