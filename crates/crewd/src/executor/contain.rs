//! Every local process crew starts for an attempt (the agent CLI, verify commands, pre-step
//! scripts) runs under crew's init, `crew-box` (crate crew-box): in a PID namespace of its own
//! where this machine allows one, else as the child of a subreaper, and tied to crewd's life
//! by a lifeline pipe. What this machine allows is found once (`containment`), said at
//! start-up (`announce`) and in `daemon.status`.
//!
//! `CREW_CONTAINMENT=pidns|reaper|none` in crewd's environment overrides the probe (to test
//! the fallbacks, or to rule the init out while diagnosing).

use crew_box::Mode;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[derive(Debug)]
pub struct Containment {
    /// The init, and how it holds an attempt; `None`: plain process groups.
    pub init: Option<(PathBuf, Mode)>,
    /// Why attempts are held less tightly than in a PID namespace, if they are.
    pub notice: Option<String>,
}

impl Containment {
    /// `pid-namespace`, `process-group+subreaper` or `process-group`.
    pub fn describe(&self) -> &'static str {
        self.init
            .as_ref()
            .map_or("process-group", |(_, m)| m.describe())
    }
}

pub fn containment() -> &'static Containment {
    static FOUND: OnceLock<Containment> = OnceLock::new();
    FOUND.get_or_init(detect)
}

/// Say once, at start-up, how attempts are held.
pub fn announce() {
    let c = containment();
    match &c.notice {
        None => tracing::info!(
            containment = c.describe(),
            "local attempts run in a PID namespace each"
        ),
        Some(n) => tracing::warn!(containment = c.describe(), "{n}"),
    }
}

/// `crew-box` next to the running crewd (how the workspace builds and installs them), else on
/// PATH.
fn find_init() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("crew-box")))
        .filter(|p| p.is_file());
    beside.or_else(|| {
        crew_box::spawn::resolve(
            "crew-box",
            std::env::var_os("PATH").as_deref(),
            Path::new("/"),
        )
        .ok()
    })
}

fn detect() -> Containment {
    let forced = std::env::var("CREW_CONTAINMENT").ok();
    let Some(init) = find_init().filter(|_| forced.as_deref() != Some("none")) else {
        return Containment {
            init: None,
            notice: Some(match forced.as_deref() {
                Some("none") => "CREW_CONTAINMENT=none: local attempts run as plain process groups; a descendant that starts its own session outlives its attempt".into(),
                _ => "crew-box (crew's init) is neither next to crewd nor on PATH: local attempts run as plain process groups; a descendant that starts its own session outlives its attempt, and workers outlive a kill -9 of crewd until it restarts".into(),
            }),
        };
    };
    if forced.as_deref() == Some("reaper") {
        return Containment {
            init: Some((init, Mode::Reaper)),
            notice: Some("CREW_CONTAINMENT=reaper: local attempts run as process groups under a subreaper, not in PID namespaces".into()),
        };
    }
    match crew_box::spawn::probe(&init) {
        Ok(mode) => Containment {
            init: Some((init, mode)),
            notice: None,
        },
        Err(why) => Containment {
            init: Some((init, Mode::Reaper)),
            notice: Some(format!(
                "PID namespaces are unavailable here ({why}): local attempts run as process groups under a subreaper (crew-box), which ends them with crewd but not if it is itself killed"
            )),
        },
    }
}

/// How `program args` starts, held as `containment` says. The program is looked up in `path`
/// (the child's PATH) first, so a missing one is a spawn error as without the init.
///
/// `boxed`: bubblewrap and the box (`sandbox`) to run it in. bubblewrap makes the PID
/// namespace then, and crewd starts bubblewrap itself with crew's init as the box's PID 1
/// (`crew_attempt::spawn::in_box`); without an init, bubblewrap alone.
fn wrap<'a>(
    program: &str,
    args: &[String],
    path: Option<&OsStr>,
    cwd: &Path,
    boxed: Option<(&'a Path, &'a crew_box::bwrap::BoxSpec)>,
    reaper: bool,
) -> std::io::Result<Wrapped<'a>> {
    let init = containment().init.as_ref();
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    if init.is_none() && boxed.is_none() {
        return Ok(Wrapped::Plain(program.into(), args));
    }
    let program = crew_box::spawn::resolve(program, path, cwd)?.into_os_string();
    Ok(match (boxed, init) {
        (Some((bwrap, spec)), Some((init, _))) => Wrapped::InBox {
            bwrap,
            init: init.as_path(),
            spec,
            program,
            args,
        },
        (Some((bwrap, spec)), None) => {
            let argv = crew_box::bwrap::argv(bwrap, spec, &program, &args);
            Wrapped::Plain(
                bwrap.as_os_str().to_owned(),
                argv.get(1..).unwrap_or_default().to_vec(),
            )
        }
        (None, Some((init, mode))) => Wrapped::UnderInit {
            init: init.as_path(),
            mode: if reaper { Mode::Reaper } else { *mode },
            program,
            args,
        },
        (None, None) => Wrapped::Plain(program, args),
    })
}

/// What `wrap` starts.
enum Wrapped<'a> {
    /// `program args` as they are.
    Plain(OsString, Vec<OsString>),
    /// Under crew's init in `mode`.
    UnderInit {
        init: &'static Path,
        mode: Mode,
        program: OsString,
        args: Vec<OsString>,
    },
    /// In `spec`'s box, crew's init its PID 1.
    InBox {
        bwrap: &'a Path,
        init: &'static Path,
        spec: &'a crew_box::bwrap::BoxSpec,
        program: OsString,
        args: Vec<OsString>,
    },
}

/// The `PATH` among a worker's environment variables.
pub fn path_of(env: &[(OsString, OsString)]) -> Option<&OsStr> {
    env.iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_os_str())
}

/// The launcher of every local attempt process (`crew_attempt::spawn::Launcher`): under
/// crew's init, in `boxed`'s box when there is one. The child leads its own process group,
/// stdout and stderr piped, as the supervision expects.
pub struct Contained {
    pub boxed: Option<(&'static Path, crew_box::bwrap::BoxSpec)>,
    /// Under the init as a subreaper, not in a PID namespace: Codex's own sandbox (bubblewrap)
    /// fails inside crew's PID namespace here (every command it runs for the model fails);
    /// why is not found yet.
    pub reaper: bool,
}

impl crew_attempt::spawn::Launcher for Contained {
    fn launch(
        &self,
        p: crew_attempt::command::Program,
    ) -> std::io::Result<crew_attempt::spawn::Launched> {
        let w = wrap(
            &p.program,
            &p.args,
            path_of(&p.env),
            Path::new(&p.cwd),
            self.boxed.as_ref().map(|(b, s)| (*b, s)),
            self.reaper,
        )?;
        use crew_attempt::spawn;
        match w {
            Wrapped::Plain(program, args) => spawn::plain(&program, &args, p),
            Wrapped::UnderInit {
                init,
                mode,
                program,
                args,
            } => spawn::under_init(init, mode, &program, &args, p),
            Wrapped::InBox {
                bwrap,
                init,
                spec,
                program,
                args,
            } => spawn::in_box(bwrap, init, spec, &program, &args, p),
        }
    }
}
