//! crewd: the crew daemon's command line. The daemon itself is the library (`lib.rs`).

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// crewd runs teams of AI coding agents: a per-user daemon serving JSON-RPC on a Unix socket.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Socket path [default: $XDG_RUNTIME_DIR/crew/crewd.sock, else /tmp/crew-$UID/crewd.sock]
    #[arg(long, env = "CREW_SOCKET")]
    socket: Option<PathBuf>,
    /// State directory (journal, artifacts) [default: $XDG_STATE_HOME/crew]
    #[arg(long, env = "CREW_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Config file [default: $XDG_CONFIG_HOME/crew/config.toml; optional]
    #[arg(long, env = "CREW_CONFIG")]
    config: Option<PathBuf>,
}

fn main() -> ExitCode {
    crewd::tune_malloc();
    let cli = Cli::parse();
    crewd::init_logging();
    match crewd::run(cli.into()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crewd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

impl From<Cli> for crewd::Options {
    fn from(cli: Cli) -> Self {
        crewd::Options {
            socket: cli.socket,
            state_dir: cli.state_dir,
            config: cli.config,
        }
    }
}
