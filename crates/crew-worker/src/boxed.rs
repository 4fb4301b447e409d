//! The box on the node: the rules of a local attempt's box (`crew_attempt::sandbox`, the one
//! place they live) put on the node's paths, decided by the same `sandbox` mode crewd staged
//! (`crew_staging::BoxRules`), and the launcher that starts a program in it under crew's
//! init (`crew-box`, installed beside crew-worker) as crewd does on its own machine.
//!
//! What the agent sees on the node: the node's checkout (`git::Checkout`: a linked worktree,
//! so its `.git` is treated as a local task worktree's), toolchains and the agent CLI's own
//! state under `$HOME` and nothing else of it, the prompt and skills of the staging directory
//! (not its token, environment or the worker's records), the network as the runtime says.

use crate::git::Checkout;
use crew_attempt::command::Program;
use crew_attempt::sandbox::{self, Inputs, RunDir};
use crew_attempt::spawn::Launched;
use crew_attempt::WorkerSpec;
use crew_box::bwrap::BoxSpec;
use crew_core::sandbox::SandboxMode;
use crew_staging::BoxRules;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What this node can box with: bubblewrap and crew's init.
#[derive(Debug, Clone)]
pub struct Boxer {
    pub bwrap: &'static Path,
    pub init: PathBuf,
}

/// How the attempt runs here.
#[derive(Debug, Clone)]
pub enum Decision {
    Boxed(Boxer),
    /// Unboxed: `off`, or (`Some(why)`) `auto` where this node cannot box.
    Unboxed(Option<String>),
}

/// The staged mode on this node: `Err` is `required` where it cannot box.
pub fn decide(rules: &BoxRules) -> Result<Decision, String> {
    if rules.mode == SandboxMode::Off {
        return Ok(Decision::Unboxed(None));
    }
    let found = sandbox::boxing()
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|bwrap| init().map(|init| (bwrap.as_path(), init)));
    match (found, rules.mode) {
        (Ok((bwrap, init)), _) => Ok(Decision::Boxed(Boxer { bwrap, init })),
        (Err(why), SandboxMode::Auto) => Ok(Decision::Unboxed(Some(why))),
        (Err(why), _) => Err(format!(
            "sandbox = \"required\" and this attempt cannot be boxed on this node: {why}"
        )),
    }
}

/// `crew-box` beside crew-worker (how the workspace builds and installs them), else on PATH.
fn init() -> Result<PathBuf, String> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("crew-box")))
        .filter(|p| p.is_file());
    beside
        .or_else(|| {
            crew_box::spawn::resolve(
                "crew-box",
                std::env::var_os("PATH").as_deref(),
                Path::new("/"),
            )
            .ok()
        })
        .ok_or_else(|| "crew's init (`crew-box`) is neither beside crew-worker nor on PATH".into())
}

/// The agent's box: `spec`'s adapter, tools and program on the node's checkout.
pub fn agent(
    spec: &WorkerSpec,
    rules: &BoxRules,
    co: &Checkout,
    own_objects: Option<&Path>,
    staging: &Path,
) -> BoxSpec {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = std::env::var_os("PATH");
    let program = spec
        .command
        .first()
        .and_then(|p| crew_box::spawn::resolve(p, path.as_deref(), &co.work).ok());
    let writes = crew_core::stream::edits_files(&spec.tools);
    sandbox::spec(&Inputs {
        adapter: Some(spec.adapter),
        home: home.as_deref(),
        cwd: &co.work,
        writes,
        repo: Some(&co.repo),
        worktree: writes.then_some(&co.worktree),
        own_objects,
        run_dir: RunDir::Inputs(staging),
        session_file: None,
        gemini_home: None,
        program: program.as_deref(),
        runtime_env: &rules.runtime_env,
        sandbox_read: &rules.read,
        sandbox_write: &rules.write,
        network: rules.network,
    })
}

/// The box of the task's pre-step script and verify commands; `writes`: the task's own
/// worktree metadata is writable (a writing task's), as locally.
pub fn commands(rules: &BoxRules, co: &Checkout, writes: bool) -> BoxSpec {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    sandbox::command_spec(
        home.as_deref(),
        &co.work,
        Some(&co.repo),
        writes.then_some(&co.worktree),
        &rules.read,
        &rules.write,
        rules.verify_network,
    )
}

/// Starts every process of the attempt on the node: in `boxed`'s box under crew's init when
/// there is one, else as a plain child. Either way without crew's process tags: a node may
/// also be crewd's own machine, whose recovery takes tagged processes for its own orphans.
pub struct Launcher {
    pub boxed: Option<(Boxer, BoxSpec)>,
}

impl crew_attempt::spawn::Launcher for Launcher {
    fn launch(&self, mut p: Program) -> std::io::Result<Launched> {
        use crew_attempt::process::{ENV_ATTEMPT, ENV_DAEMON_PID, ENV_RUN_ID, ENV_TASK_ID};
        p.env.retain(|(k, _)| {
            ![ENV_RUN_ID, ENV_TASK_ID, ENV_ATTEMPT, ENV_DAEMON_PID]
                .contains(&k.to_str().unwrap_or(""))
        });
        let Some((b, spec)) = &self.boxed else {
            return crew_attempt::spawn::Local.launch(p);
        };
        // Looked up before the init starts, so a missing program is a spawn error as
        // unboxed ("not found"), not an init that exits 127.
        let path = p
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone());
        let program = crew_box::spawn::resolve(&p.program, path.as_deref(), Path::new(&p.cwd))?;
        let args: Vec<OsString> = p.args.iter().map(OsString::from).collect();
        crew_attempt::spawn::in_box(b.bwrap, &b.init, spec, program.as_os_str(), &args, p)
    }
}
