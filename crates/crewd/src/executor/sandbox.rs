//! The box around a local attempt (issue 34): what a boxed worker, verify command or pre-step
//! script sees, built here from the attempt and run by bubblewrap (`crew_box::bwrap`) under
//! crew's init. Whether bubblewrap works here is found once (`boxing`) and said at start-up.

use crate::config::{Config, RuntimeConfig, SandboxMode};
use crew_box::bwrap::BoxSpec;
use crew_core::stream::AdapterKind;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// bubblewrap, if it can make a box here; else why not.
pub fn boxing() -> &'static Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let bwrap =
            crew_box::spawn::resolve("bwrap", std::env::var_os("PATH").as_deref(), Path::new("/"))
                .map_err(|_| "bubblewrap (`bwrap`) is not installed".to_string())?;
        crew_box::bwrap::probe(&bwrap)
            .map_err(|why| format!("bubblewrap cannot make a box here: {why}"))?;
        Ok(bwrap)
    })
}

/// The daemon's mode and what it means here, said once at start-up.
pub fn announce(config: &Config) {
    let any_on = config.sandbox != SandboxMode::Off
        || config
            .runtimes
            .values()
            .any(|r| r.sandbox.is_some_and(|m| m != SandboxMode::Off));
    if !any_on {
        tracing::info!("sandbox = \"off\": local attempts are not boxed");
        return;
    }
    match boxing() {
        Ok(b) => tracing::info!(bwrap = %b.display(), "local attempts are boxed (bubblewrap)"),
        Err(why) => tracing::warn!(
            "{why}: with sandbox = \"auto\" local attempts run unboxed; with \"required\" they do not start"
        ),
    }
}

/// What `daemon.status` says about the box.
pub fn status(config: &Config) -> String {
    match (config.sandbox, boxing()) {
        (SandboxMode::Off, _) => "off".into(),
        (_, Ok(_)) => "bubblewrap".into(),
        (SandboxMode::Auto, Err(why)) => format!("unavailable, attempts run unboxed: {why}"),
        (SandboxMode::Required, Err(why)) => format!("unavailable, attempts do not start: {why}"),
    }
}

/// The attempt's mode: the runtime's, else the daemon's.
pub fn mode(config: &Config, runtime: &RuntimeConfig) -> SandboxMode {
    runtime.sandbox.unwrap_or(config.sandbox)
}

/// bubblewrap for an attempt in `mode`: `Ok(None)` unboxed, `Err` when it must be boxed and
/// cannot be.
pub fn bwrap_for(mode: SandboxMode) -> Result<Option<&'static Path>, String> {
    match (mode, boxing()) {
        (SandboxMode::Off, _) => Ok(None),
        (_, Ok(b)) => Ok(Some(b.as_path())),
        (SandboxMode::Auto, Err(_)) => Ok(None),
        (SandboxMode::Required, Err(why)) => Err(format!(
            "sandbox = \"required\" and this attempt cannot be boxed: {why}"
        )),
    }
}

/// The box of an attempt's verify commands and pre-step script: its workspace writable (the
/// checkout read-only in worktree mode), toolchains and caches, no agent's files, the network
/// as `verify_network` says. `Ok(None)`: unboxed.
pub fn command_box(
    shared: &crate::shared::Shared,
    spec: &crate::attempt::AttemptSpec,
) -> Result<Option<(&'static Path, BoxSpec)>, String> {
    let Some(bwrap) = bwrap_for(mode(&shared.config, &spec.runtime))? else {
        return Ok(None);
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let b = self::spec(&Inputs {
        adapter: None,
        home: home.as_deref(),
        cwd: Path::new(&spec.cwd),
        repo: spec.workspace.as_ref().map(|w| Path::new(&w.repo)),
        own_objects: None,
        run_dir: None,
        session_file: None,
        gemini_home: None,
        program: None,
        runtime: Some(&spec.runtime),
        network: shared.config.verify_network,
    });
    Ok(Some((bwrap, b)))
}

/// Where, in an attempt's own object directory, the repository's objects are seen in the box
/// (its `objects/info/alternates` names it).
const SHARED_OBJECTS: &str = "shared";

/// The attempt's own object directory, made empty: `<run>/objects/<task>.attempt-<n>/`,
/// holding `objects/` (the box's `.git/objects`) and `shared/` (where the repository's are
/// seen). `None`: not in worktree mode, or the repository's objects are not at `.git/objects`
/// (a checkout that is itself a linked worktree): the box then has them read-only.
pub fn own_objects(spec: &crate::attempt::AttemptSpec) -> std::io::Result<Option<PathBuf>> {
    let Some(ws) = &spec.workspace else {
        return Ok(None);
    };
    if !Path::new(&ws.repo).join(".git/objects").is_dir() {
        return Ok(None);
    }
    let dir = spec
        .run_dir
        .join("objects")
        .join(format!("{}.attempt-{}", spec.task_id, spec.attempt));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(dir.join("objects/info"))?;
    std::fs::create_dir_all(dir.join("objects/pack"))?;
    std::fs::create_dir_all(dir.join(SHARED_OBJECTS))?;
    let alternates = format!("{}\n", dir.join(SHARED_OBJECTS).display());
    std::fs::write(dir.join("objects/info/alternates"), alternates)?;
    Ok(Some(dir))
}

/// After the attempt: the objects it made come into the repository (`Repo::take_objects`,
/// each checked), then its directory goes.
pub async fn take_objects(
    shared: &crate::shared::Shared,
    spec: &crate::attempt::AttemptSpec,
    dir: &Path,
) -> Result<(), String> {
    let Some(ws) = &spec.workspace else {
        return Ok(());
    };
    let git = crate::workspace::git(shared);
    git.repo(&ws.repo)
        .take_objects(&dir.join("objects"))
        .await
        .map_err(|e| format!("cannot bring the attempt's git objects into the repository: {e}"))?;
    let dir = dir.to_path_buf();
    let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
    Ok(())
}

/// What an attempt's box holds.
pub struct Inputs<'a> {
    pub adapter: Option<AdapterKind>,
    pub home: Option<&'a Path>,
    /// The workspace: the worktree, or the run's cwd in shared mode.
    pub cwd: &'a Path,
    /// Worktree mode: the repository (its checkout is seen read-only).
    pub repo: Option<&'a Path>,
    /// The attempt's own object directory (`own_objects`), seen in place of the repository's
    /// objects; without one they are read-only.
    pub own_objects: Option<&'a Path>,
    /// The run's directory (prompt, system prompt, skills): read-only.
    pub run_dir: Option<&'a Path>,
    /// The agent's session file (pi's), writable.
    pub session_file: Option<&'a Path>,
    /// crew's Gemini home (`session::gemini_home`: settings naming crew's ask server,
    /// symlinks to the user's `.gemini`), read-only.
    pub gemini_home: Option<&'a Path>,
    /// The resolved program (its install is seen read-only).
    pub program: Option<&'a Path>,
    pub runtime: Option<&'a RuntimeConfig>,
    pub network: bool,
}

/// The agent CLIs' own files under `$HOME`: (path, writable). State and sessions writable;
/// their configuration (settings, hooks, MCP server lists) read-only inside them, so a boxed
/// agent cannot plant a program the user's next unboxed session runs.
fn agent_home(adapter: AdapterKind) -> &'static [(&'static str, bool)] {
    match adapter {
        AdapterKind::Claude => &[
            (".claude", true),
            (".claude.json", true),
            (".claude/settings.json", false),
            (".claude/settings.local.json", false),
            (".claude/hooks", false),
            (".claude/commands", false),
            (".claude/agents", false),
        ],
        AdapterKind::Codex => &[(".codex", true), (".codex/config.toml", false)],
        AdapterKind::Pi => &[
            (".pi", true),
            (".pi/agent/settings.json", false),
            (".pi/agent/extensions", false),
            (".pi/agent/models.json", false),
        ],
        AdapterKind::Gemini => &[(".gemini", true), (".gemini/settings.json", false)],
        AdapterKind::Opencode => &[
            (".config/opencode", false),
            (".local/share/opencode", true),
            (".local/state/opencode", true),
        ],
        AdapterKind::Command => &[],
    }
}

/// Toolchains and caches every boxed attempt sees under `$HOME`: (path, writable).
const TOOLCHAINS: &[(&str, bool)] = &[
    (".cargo", false),
    (".cargo/registry", true),
    (".cargo/git", true),
    (".rustup", false),
    (".npm", true),
    (".cache", true),
    (".local/bin", false),
    (".nvm", false),
];

/// The directory a program's install lives in: the folder holding its outermost
/// `node_modules` (an npm CLI reads its whole package tree), else the program's own folder.
fn install_dir(program: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(program).ok()?;
    let nm = real
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .and_then(Path::parent);
    nm.or_else(|| real.parent()).map(Path::to_path_buf)
}

pub fn spec(i: &Inputs) -> BoxSpec {
    let mut ro: Vec<PathBuf> = Vec::new();
    let mut rw: Vec<PathBuf> = vec![i.cwd.to_path_buf()];
    if let Some(h) = i.home {
        let mut put = |rel: &str, w: bool| {
            let p = h.join(rel);
            if w {
                rw.push(p)
            } else {
                ro.push(p)
            }
        };
        for (rel, w) in TOOLCHAINS {
            put(rel, *w);
        }
        if let Some(a) = i.adapter {
            for (rel, w) in agent_home(a) {
                put(rel, *w);
            }
        }
    }
    let mut elsewhere = Vec::new();
    if let Some(repo) = i.repo {
        // The user's checkout read-only; git's shared metadata writable for the agent's own
        // `git add`/`git commit` in its worktree, but not the shared config and hooks, and
        // not the objects: new ones go to the attempt's own directory, whose alternates are
        // the repository's objects, seen read-only (crew brings the new ones in after).
        ro.push(repo.to_path_buf());
        let git = repo.join(".git");
        rw.push(git.clone());
        ro.push(git.join("config"));
        ro.push(git.join("hooks"));
        ro.push(git.join("info"));
        match i.own_objects {
            Some(own) => {
                elsewhere.push((own.join("objects"), git.join("objects"), true));
                elsewhere.push((git.join("objects"), own.join(SHARED_OBJECTS), false));
            }
            None => ro.push(git.join("objects")),
        }
    }
    ro.extend(i.run_dir.map(Path::to_path_buf));
    rw.extend(i.session_file.map(Path::to_path_buf));
    // No crewd socket: `ask_user` needs none (`crewctl mcp --ask` answers by itself; the
    // question is the tool call crewd reads from the worker's own stream).
    ro.extend(i.gemini_home.map(Path::to_path_buf));
    ro.extend(i.program.and_then(install_dir));
    // crew's own programs (the fake agent, crewctl for the ask server) sit beside crewd.
    ro.extend(
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf)),
    );
    if let Some(r) = i.runtime {
        ro.extend(r.sandbox_read.iter().cloned());
        rw.extend(r.sandbox_write.iter().cloned());
    }
    BoxSpec {
        read_only: ro,
        writable: rw,
        elsewhere,
        network: i.network,
        cwd: i.cwd.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_box() {
        let inputs = Inputs {
            adapter: Some(AdapterKind::Claude),
            home: Some(Path::new("/h")),
            cwd: Path::new("/s/worktrees/r/t"),
            repo: Some(Path::new("/repo")),
            own_objects: Some(Path::new("/s/runs/r/objects/t.attempt-1")),
            run_dir: Some(Path::new("/s/runs/r")),
            session_file: None,
            gemini_home: None,
            program: None,
            runtime: None,
            network: true,
        };
        let b = spec(&inputs);
        let has = |v: &[PathBuf], p: &str| v.iter().any(|x| x == Path::new(p));
        for p in ["/s/worktrees/r/t", "/h/.claude", "/repo/.git", "/h/.cache"] {
            assert!(has(&b.writable, p), "{p} writable");
        }
        for p in [
            "/repo",
            "/repo/.git/config",
            "/repo/.git/hooks",
            "/h/.claude/settings.json",
            "/s/runs/r",
            "/h/.cargo",
        ] {
            assert!(has(&b.read_only, p), "{p} read-only");
        }
        for p in ["/h", "/h/.ssh", "/s", "/s/worktrees/r", "/run/crew/crewd.sock"] {
            assert!(!has(&b.writable, p) && !has(&b.read_only, p), "{p} hidden");
        }
        assert!(b.network);
        // The attempt's own objects where git looks; the repository's read-only beside them.
        let own = Path::new("/s/runs/r/objects/t.attempt-1");
        assert!(b
            .elsewhere
            .contains(&(own.join("objects"), "/repo/.git/objects".into(), true)));
        assert!(b
            .elsewhere
            .contains(&("/repo/.git/objects".into(), own.join("shared"), false)));
        // Without one (verify commands, pre-step scripts), the objects are read-only.
        let b = spec(&Inputs {
            own_objects: None,
            ..inputs
        });
        assert!(has(&b.read_only, "/repo/.git/objects"));
    }
}
