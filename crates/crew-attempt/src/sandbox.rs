//! The box around an attempt (issue 34): what a boxed agent, verify command or pre-step script
//! sees, as a `crew_box::bwrap::BoxSpec` built from the attempt. The one place these rules
//! live: crewd uses them for a local attempt, `crew-worker` for the same attempt on a cluster
//! node. Whether bubblewrap works here is found once (`boxing`).

use crew_box::bwrap::BoxSpec;
use crew_core::sandbox::SandboxMode;
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

/// A writing task's worktree: its root and its metadata directory in the repository
/// (`.git/worktrees/<x>`), read from the worktree's `.git` file before the attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Worktree {
    pub root: PathBuf,
    pub admin: PathBuf,
}

/// What of the attempt's run directory the box sees, read-only.
#[derive(Debug, Clone, Copy)]
pub enum RunDir<'a> {
    None,
    /// Only the agent's inputs in it (`ATTEMPT_INPUTS`), never the rest: crewd's run
    /// directory holds the run's other tasks' transcripts, results and in-progress object
    /// directories; a node's staging directory the attempt's token, its environment and the
    /// worker's records.
    Inputs(&'a Path),
}

impl<'a> RunDir<'a> {
    fn path(self) -> Option<&'a Path> {
        match self {
            RunDir::None => None,
            RunDir::Inputs(p) => Some(p),
        }
    }
}

/// The folders of a run directory an agent reads: its prompt and system prompt (`prompts/`),
/// pi's skills (`skills/`), as `command::worker_command` writes them, and crew's pi extension
/// (`extensions/`, its `ask_user` tool; crew-worker's `ask.rs` writes it on a node).
pub const ATTEMPT_INPUTS: &[&str] = &["prompts", "skills", "extensions"];

/// What an attempt's box holds.
pub struct Inputs<'a> {
    pub adapter: Option<AdapterKind>,
    pub home: Option<&'a Path>,
    /// The workspace: the worktree, or the run's cwd in shared mode.
    pub cwd: &'a Path,
    /// The role may change files (an edit or write tool; a shell alone does not count, as
    /// for Codex's sandbox): else its workspace (and the repository's `.git`) is read-only in
    /// the box, so no tool of its CLI (Bash included) can change them.
    pub writes: bool,
    /// Worktree mode: the repository (its checkout and `.git` are seen read-only).
    pub repo: Option<&'a Path>,
    /// A writing task's own worktree.
    pub worktree: Option<&'a Worktree>,
    /// The attempt's own object directory (`make_own_objects`), seen in place of the
    /// repository's objects; without one they are read-only.
    pub own_objects: Option<&'a Path>,
    /// The run's directory (prompt, system prompt, skills): read-only.
    pub run_dir: RunDir<'a>,
    /// The agent's session file (pi's), writable.
    pub session_file: Option<&'a Path>,
    /// crew's Gemini home (settings naming crew's ask server, symlinks to the user's
    /// `.gemini`), read-only.
    pub gemini_home: Option<&'a Path>,
    /// The resolved program (its install is seen read-only).
    pub program: Option<&'a Path>,
    /// The runtime's own variables passed through (`env`): a CLI home one of them moves is
    /// bound as its home would be.
    pub runtime_env: &'a [String],
    /// The runtime's `sandbox_read` and `sandbox_write`.
    pub sandbox_read: &'a [PathBuf],
    pub sandbox_write: &'a [PathBuf],
    pub network: bool,
}

/// The box of an attempt's verify commands and pre-step script: its workspace writable (the
/// checkout read-only in worktree mode), toolchains and caches, no agent's files, the network
/// as `verify_network` says.
pub fn command_spec(
    home: Option<&Path>,
    cwd: &Path,
    repo: Option<&Path>,
    worktree: Option<&Worktree>,
    sandbox_read: &[PathBuf],
    sandbox_write: &[PathBuf],
    network: bool,
) -> BoxSpec {
    spec(&Inputs {
        adapter: None,
        home,
        cwd,
        writes: true,
        repo,
        worktree,
        own_objects: None,
        run_dir: RunDir::None,
        session_file: None,
        gemini_home: None,
        program: None,
        runtime_env: &[],
        sandbox_read,
        sandbox_write,
        network,
    })
}

/// Where, in an attempt's own object directory, the repository's objects are seen in the box
/// (its `objects/info/alternates` names it).
const SHARED_OBJECTS: &str = "shared";

/// Make `dir` an attempt's own object directory, empty: `objects/` (the box's `.git/objects`)
/// and `shared/` (where the repository's are seen), the first's alternates naming the second.
/// After the attempt its objects are brought into the repository (`crew_git`'s
/// `take_objects`, each read back) and `dir` removed.
pub fn make_own_objects(dir: &Path) -> std::io::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir.join("objects/info"))?;
    std::fs::create_dir_all(dir.join("objects/pack"))?;
    std::fs::create_dir_all(dir.join(SHARED_OBJECTS))?;
    let alternates = format!("{}\n", dir.join(SHARED_OBJECTS).display());
    std::fs::write(dir.join("objects/info/alternates"), alternates)
}

/// A CLI's own sandbox inside crew's box (issue 34, item 8): turned off in favour of crew's
/// box, which holds everything the CLI starts and keeps a read-only role's workspace
/// read-only. Nested, neither works: a second `/proc` mount is refused in crew's box ("Can't
/// mount proc on /newroot/proc: Operation not permitted").
/// - Codex (bubblewrap through its `codex-linux-sandbox` alias, on whenever bubblewrap is
///   installed): `-c sandbox_mode="danger-full-access"`.
/// - Claude Code (bubblewrap and socat around Bash when its settings say
///   `sandbox.enabled`; with `failIfUnavailable` it refuses to start without them):
///   `--settings` with `sandbox.enabled = false`, which outranks the user's and the project's
///   settings (not an administrator's managed settings).
///
///   `CLAUDE_CODE_SUBPROCESS_ENV_SCRUB` (which `GITHUB_ACTIONS` turns on by default) forces
///   that sandbox whatever the settings say, so neither is passed to a boxed Claude Code.
///
/// A sandbox the user's own command sets is left as it is. Gemini CLI's and opencode's are
/// not used.
pub fn inside_box(adapter: AdapterKind, command: &mut Vec<String>, env: &mut Vec<String>) {
    let sets = |own: &[&str], value: &str| {
        command.iter().skip(1).any(|a| {
            own.iter()
                .any(|f| a == f || a.starts_with(&format!("{f}=")))
                || (!value.is_empty() && a.starts_with(value))
        })
    };
    match adapter {
        AdapterKind::Codex => {
            const OWN: &[&str] = &[
                "-s",
                "--sandbox",
                "--full-auto",
                "--dangerously-bypass-approvals-and-sandbox",
            ];
            if !sets(OWN, "sandbox_mode=") {
                command.push("-c".into());
                command.push("sandbox_mode=\"danger-full-access\"".into());
            }
        }
        AdapterKind::Claude => {
            if !sets(&["--settings"], "") {
                command.push(format!("--settings={CLAUDE_NO_SANDBOX}"));
            }
            env.retain(|n| n != "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB" && n != "GITHUB_ACTIONS");
        }
        _ => {}
    }
}

/// Claude Code's settings (`--settings`) that turn its own sandbox off.
const CLAUDE_NO_SANDBOX: &str = r#"{"sandbox":{"enabled":false}}"#;

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
        // opencode writes its config folder (a `.gitignore`, its plugin SDK's packages), so
        // that is writable but for the files and folders that configure it.
        AdapterKind::Opencode => &[
            (".config/opencode", true),
            (".config/opencode/opencode.json", false),
            (".config/opencode/opencode.jsonc", false),
            (".config/opencode/config.json", false),
            (".config/opencode/agent", false),
            (".config/opencode/agents", false),
            (".config/opencode/command", false),
            (".config/opencode/commands", false),
            (".config/opencode/plugin", false),
            (".config/opencode/plugins", false),
            (".config/opencode/mode", false),
            (".config/opencode/tool", false),
            (".config/opencode/tools", false),
            (".local/share/opencode", true),
            (".local/state/opencode", true),
        ],
        AdapterKind::Command => &[],
    }
}

/// The agent CLI's state directories under `$HOME`, made before the box when missing: a
/// path that is not there is not bound, and the CLI could not keep its sessions (the box's
/// `$HOME` is read-only) for the attempt that continues one.
fn agent_dirs(adapter: AdapterKind) -> &'static [&'static str] {
    match adapter {
        AdapterKind::Claude => &[".claude"],
        AdapterKind::Codex => &[".codex"],
        AdapterKind::Pi => &[".pi"],
        AdapterKind::Gemini => &[".gemini"],
        AdapterKind::Opencode => &[
            ".config/opencode",
            ".local/share/opencode",
            ".local/state/opencode",
        ],
        AdapterKind::Command => &[],
    }
}

/// Make the agent's state directories and `~/.cache` (see `agent_dirs`).
pub fn make_agent_dirs(home: &Path, adapter: AdapterKind) -> std::io::Result<()> {
    for rel in agent_dirs(adapter).iter().chain(&[".cache"]) {
        std::fs::create_dir_all(home.join(rel))?;
    }
    Ok(())
}

/// Variables naming a CLI's configuration file or folder outside its home.
fn env_config(adapter: AdapterKind) -> &'static [&'static str] {
    match adapter {
        AdapterKind::Opencode => &["OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR"],
        _ => &[],
    }
}

/// The variable that moves a CLI's home elsewhere, and the files in it that stay read-only
/// (its configuration), as in `agent_home`.
fn env_home(adapter: AdapterKind) -> Option<(&'static str, &'static [&'static str])> {
    match adapter {
        AdapterKind::Claude => Some((
            "CLAUDE_CONFIG_DIR",
            &[
                "settings.json",
                "settings.local.json",
                "hooks",
                "commands",
                "agents",
            ],
        )),
        AdapterKind::Codex => Some(("CODEX_HOME", &["config.toml"])),
        AdapterKind::Pi => Some((
            "PI_CODING_AGENT_DIR",
            &["settings.json", "extensions", "models.json"],
        )),
        _ => None,
    }
}

/// Toolchains and caches every boxed attempt sees under `$HOME`: (path, writable).
const TOOLCHAINS: &[(&str, bool)] = &[
    // Not all of `~/.cargo`: `credentials.toml` (a registry token) sits there too.
    (".cargo/bin", false),
    (".cargo/config.toml", false),
    (".cargo/config", false),
    (".cargo/env", false),
    (".cargo/registry", true),
    (".cargo/git", true),
    (".rustup", false),
    (".npm", true),
    (".cache", true),
    (".local/bin", false),
    (".nvm", false),
];

/// What of a program's install the box shows: the folder holding its outermost
/// `node_modules` (an npm CLI reads its whole package tree), else the program's own folder —
/// unless that folder holds `home` (a script in `~`, an `npm install` without `-g` in `~`,
/// anything in `/`): then only the `node_modules` folder, or only the program, or all of
/// `$HOME` (`~/.ssh` with it) would be in the box.
fn install_dir(program: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let real = std::fs::canonicalize(program).ok()?;
    let nm = real
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last();
    let dir = nm.and_then(Path::parent).or_else(|| real.parent())?;
    if !holds_home(dir, home) {
        return Some(dir.to_path_buf());
    }
    Some(nm.unwrap_or(&real).to_path_buf())
}

/// Whether binding `dir` would bring into the box what must never be in it: all of `home`,
/// of `/`, the host's `/tmp` (over the box's own; a socket under it, crewd's among them when
/// there is no `XDG_RUNTIME_DIR`, can be connected to through a read-only bind), the
/// runtime directory, or what the daemon named at start-up (`keep_out`: its state directory
/// and socket).
fn holds_home(dir: &Path, home: Option<&Path>) -> bool {
    held_by(dir, home).is_some()
}

/// What of `holds_home`'s paths `dir` holds (the first), if any.
fn held_by(dir: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if dir.parent().is_none() {
        return Some(dir.to_path_buf());
    }
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let private = KEEP_OUT.get().map(Vec::as_slice).unwrap_or_default();
    home.map(Path::to_path_buf)
        .into_iter()
        .chain([PathBuf::from("/tmp"), std::env::temp_dir()])
        .chain(runtime_dir)
        .chain(private.iter().cloned())
        .find(|p| real(p).starts_with(dir) || p.starts_with(dir))
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Why `cwd` cannot be the working directory of a box that binds it as it is (a run in shared
/// mode): it is `/` or holds what no box may bring in (`holds_home`: the home directory, `/tmp`,
/// the runtime directory, crewd's state, socket and config), or it is inside one of `own`
/// (the daemon's own folders). Either way the agent would be given them, writable when it
/// edits files.
pub fn workdir_problem(cwd: &Path, home: Option<&Path>, own: &[&Path]) -> Option<String> {
    let given = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let resolved = real(&given);
    if let Some(held) = held_by(&resolved, home).or_else(|| held_by(&given, home)) {
        let is_it = real(&held) == resolved || held == given;
        return Some(if is_it {
            format!(
                "{} is a folder a boxed agent must not be given (`/`, the home directory, \
                 `/tmp`, the runtime directory, crewd's own)",
                cwd.display()
            )
        } else {
            format!(
                "{} holds {}, which a boxed agent must not be given",
                cwd.display(),
                held.display()
            )
        });
    }
    own.iter()
        .find(|p| resolved.starts_with(real(p)) || given.starts_with(p))
        .map(|p| {
            format!(
                "{} is inside {}, which crew keeps out of every box",
                cwd.display(),
                p.display()
            )
        })
}

/// Paths no install folder may bring into a box (`holds_home`), named once by the daemon.
static KEEP_OUT: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();

/// Name the paths no agent's install folder may bring into its box: the daemon's state
/// directory and its socket's folder. Once, at start-up; later calls change nothing.
pub fn keep_out(paths: Vec<PathBuf>) {
    let _ = KEEP_OUT.set(paths);
}

/// crew's own programs, which sit beside crewd (on a node, beside crew-worker): the fake
/// agent, crewctl for the ask server. Their folder, unless it holds `home`: then the programs
/// alone.
fn crews_programs(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    if !holds_home(&dir, home) {
        return vec![dir];
    }
    CREW_PROGRAMS.iter().map(|p| dir.join(p)).collect()
}

/// The programs crew installs side by side (Makefile's `BINS`).
const CREW_PROGRAMS: &[&str] = &[
    "crewd",
    "crewctl",
    "crew-fake-agent",
    "crew-box",
    "crew-worker",
];

/// In shared mode the workspace is the user's checkout itself, `.git` included. What in it
/// makes git run a program stays read-only — the config (`core.fsmonitor`, `core.hooksPath`,
/// aliases, filters), the per-worktree config, the hooks, submodules' own configs, a
/// `commondir` that names where the rest is — or a boxed agent plants a program the user's
/// next `git status` runs. Objects, the index and refs stay writable, so the agent's own `git
/// add`/`git commit` work. A path that is not there cannot be bound, so what git reads when
/// present is made as git itself would make it: `hooks/` and `modules/` empty folders (as
/// `git init` and `git submodule` do), `config.worktree` an empty file (nothing set); where
/// that fails, or one of them is not what it should be (a link), all of `.git` is read-only
/// instead. A `.git` file (the checkout is a linked worktree or a submodule) is read-only:
/// the git directory it names is outside the checkout, so out of the box.
///
/// Not covered: a `commondir` the agent creates where there was none (an empty one breaks
/// git, so no placeholder can stand in for it).
fn shared_git_controls(cwd: &Path) -> Vec<PathBuf> {
    let git = cwd.join(".git");
    match std::fs::symlink_metadata(&git) {
        Ok(m) if m.is_file() => return vec![git],
        Ok(m) if m.is_dir() => {}
        _ => return Vec::new(),
    }
    let is = |p: &Path, dir: bool| {
        std::fs::symlink_metadata(p).is_ok_and(|m| if dir { m.is_dir() } else { m.is_file() })
    };
    let made = |p: &Path, dir: bool| {
        let created = if dir {
            std::fs::create_dir(p)
        } else {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map(drop)
        };
        match created {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => is(p, dir),
            Err(_) => false,
        }
    };
    let controls = [
        (git.join("hooks"), true),
        (git.join("modules"), true),
        (git.join("config.worktree"), false),
    ];
    if !is(&git.join("config"), false) || !controls.iter().all(|(p, dir)| made(p, *dir)) {
        return vec![git];
    }
    let mut v: Vec<PathBuf> = controls.into_iter().map(|(p, _)| p).collect();
    v.push(git.join("config"));
    v.extend(Some(git.join("commondir")).filter(|p| p.exists()));
    v
}

/// The task's per-worktree config (`<metadata>/config.worktree`), made empty where it is not
/// there so it can be bound read-only. crew's own git reads it after the attempt, outside the
/// box (`git add -A` of the task's result): in a repository with per-worktree config on
/// (`extensions.worktreeConfig`, which `git sparse-checkout` sets), an agent that wrote a
/// filter or `core.worktree` into it would have crew run its program, or commit files from
/// anywhere. `None` when it cannot be made: then the metadata is read-only as a whole (the
/// agent's own `git commit` fails, nothing runs).
fn worktree_config(admin: &Path) -> Option<PathBuf> {
    let config = admin.join("config.worktree");
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&config);
    match made {
        Ok(_) => Some(config),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // Only a plain file can be bound over; a link could point the bind anywhere.
            std::fs::symlink_metadata(&config)
                .is_ok_and(|m| m.is_file())
                .then_some(config)
        }
        Err(_) => None,
    }
}

/// The box `i` describes.
pub fn spec(i: &Inputs) -> BoxSpec {
    let mut ro: Vec<PathBuf> = Vec::new();
    let mut rw: Vec<PathBuf> = Vec::new();
    if i.writes {
        rw.push(i.cwd.to_path_buf());
        if i.repo.is_none() {
            ro.extend(shared_git_controls(i.cwd));
        }
    } else {
        ro.push(i.cwd.to_path_buf());
    }
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
        // The user's checkout read-only, and with it the repository's `.git`: its config,
        // hooks, refs and `packed-refs` (other tasks' branches, the run's) and objects. New
        // objects go to the attempt's own directory, whose alternates are the repository's
        // objects, seen read-only (crew brings the new ones in after).
        ro.push(repo.to_path_buf());
        if let Some(own) = i.own_objects {
            let objects = repo.join(".git/objects");
            elsewhere.push((own.join("objects"), objects.clone(), true));
            elsewhere.push((objects, own.join(SHARED_OBJECTS), false));
        }
    }
    if let (true, Some(wt)) = (i.writes, i.worktree) {
        // The task's own worktree and its metadata (`.git/worktrees/<x>`: HEAD, index, logs)
        // writable: the agent's `git add`/`git commit` there work, on a HEAD crew detached
        // for the attempt (`detach`) and puts back on the task's branch after it (`attach`).
        // Not writable: the files that say where the repository is (the worktree's `.git`
        // file, the metadata's `commondir` and `gitdir`), which crew's own git reads after.
        rw.push(wt.root.to_path_buf());
        ro.push(wt.root.join(".git"));
        match worktree_config(&wt.admin) {
            Some(config) => {
                rw.push(wt.admin.to_path_buf());
                ro.extend([wt.admin.join("commondir"), wt.admin.join("gitdir"), config]);
            }
            None => ro.push(wt.admin.to_path_buf()),
        }
    }
    match i.run_dir {
        RunDir::None => {}
        RunDir::Inputs(dir) => ro.extend(ATTEMPT_INPUTS.iter().map(|d| dir.join(d))),
    }
    // pi's session file: its folder, the task's own (`sessions/<task>/`), as a file that is
    // not there yet cannot be bound (pi makes it). A file in the run's `sessions/` itself (a
    // session continued from before that layout) is bound alone: that folder holds the run's
    // other tasks' sessions. Compared by real path: a continued session is named by its real
    // path, the run directory may not be (a state directory reached through a link).
    if let Some(file) = i.session_file {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let all = i.run_dir.path().map(|r| real(&r.join("sessions")));
        match file.parent() {
            Some(dir) if Some(real(dir)) != all => rw.push(dir.to_path_buf()),
            _ => rw.push(file.to_path_buf()),
        }
    }
    // No crewd socket: `ask_user` needs none (`crewctl mcp --ask` answers by itself; the
    // question is the tool call crewd reads from the worker's own stream).
    // crew's Gemini home: writable (Gemini CLI keeps its project registry there), but not the
    // settings crew wrote into it (they name the MCP servers the next worker starts).
    if let Some(g) = i.gemini_home {
        rw.push(g.to_path_buf());
        ro.push(g.join(".gemini/settings.json"));
    }
    // A CLI home the runtime moved with its variable (passed through from crewd's
    // environment), as its home under `$HOME` would be.
    if let Some(a) = i.adapter {
        if let Some((var, config)) =
            env_home(a).filter(|(v, _)| i.runtime_env.iter().any(|n| n == v))
        {
            if let Some(dir) = std::env::var_os(var).filter(|d| !d.is_empty()) {
                let dir = PathBuf::from(dir);
                ro.extend(config.iter().map(|c| dir.join(c)));
                rw.push(dir);
            }
        }
    }
    // Configuration a runtime names by a variable it passes through (opencode's
    // `OPENCODE_CONFIG` file, `OPENCODE_CONFIG_DIR`): read-only. Not there, opencode has
    // no provider for the model and every attempt ends "Unexpected server error".
    if let Some(a) = i.adapter {
        for var in env_config(a)
            .iter()
            .filter(|v| i.runtime_env.iter().any(|n| n == *v))
        {
            if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
                ro.push(PathBuf::from(p));
            }
        }
    }
    ro.extend(i.program.and_then(|p| install_dir(p, i.home)));
    ro.extend(crews_programs(i.home));
    ro.extend(i.sandbox_read.iter().cloned());
    rw.extend(i.sandbox_write.iter().cloned());
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

    /// A writing command in `cwd`, shared mode, no home, run directory, program or extra
    /// paths: what each test starts from.
    fn bare(cwd: &Path) -> Inputs<'_> {
        Inputs {
            adapter: None,
            home: None,
            cwd,
            writes: true,
            repo: None,
            worktree: None,
            own_objects: None,
            run_dir: RunDir::None,
            session_file: None,
            gemini_home: None,
            program: None,
            runtime_env: &[],
            sandbox_read: &[],
            sandbox_write: &[],
            network: true,
        }
    }

    #[test]
    fn in_shared_mode_what_makes_git_run_a_program_is_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        std::fs::create_dir_all(cwd.join(".git/objects")).unwrap();
        std::fs::write(cwd.join(".git/config"), "[core]\n").unwrap();
        let inputs = |writes| Inputs {
            writes,
            ..bare(cwd)
        };
        let b = spec(&inputs(true));
        assert!(b.writable.contains(&cwd.to_path_buf()));
        for p in [
            ".git/config",
            ".git/hooks",
            ".git/modules",
            ".git/config.worktree",
        ] {
            assert!(b.read_only.contains(&cwd.join(p)), "{p}: {:?}", b.read_only);
        }
        // Made, so that they can be bound: an agent cannot plant a hook, a submodule's config
        // or a per-worktree config where there was none.
        assert!(cwd.join(".git/hooks").is_dir() && cwd.join(".git/modules").is_dir());
        assert_eq!(
            std::fs::read(cwd.join(".git/config.worktree")).unwrap(),
            b""
        );
        assert!(!b.read_only.contains(&cwd.join(".git/objects")));
        // One of them a link (it would bind what it points at): all of `.git` read-only.
        std::fs::remove_file(cwd.join(".git/config.worktree")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", cwd.join(".git/config.worktree")).unwrap();
        assert!(spec(&inputs(true)).read_only.contains(&cwd.join(".git")));
        // Without a config file to protect, all of `.git` is read-only.
        std::fs::remove_file(cwd.join(".git/config")).unwrap();
        assert!(spec(&inputs(true)).read_only.contains(&cwd.join(".git")));
        // A linked worktree's `.git` is a file: it stays (it names the repository); the
        // repository itself is not in the box at all.
        std::fs::remove_dir_all(cwd.join(".git")).unwrap();
        std::fs::write(cwd.join(".git"), "gitdir: /elsewhere\n").unwrap();
        let under: Vec<PathBuf> = spec(&inputs(true))
            .read_only
            .into_iter()
            .filter(|p| p.starts_with(cwd))
            .collect();
        assert_eq!(under, [cwd.join(".git")]);
    }

    #[test]
    fn an_install_that_would_hold_the_home_is_narrowed() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("h");
        let touch = |rel: &str| {
            let p = home.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "x").unwrap();
            p
        };
        // program -> what the box shows of its install
        let table: &[(&str, &str)] = &[
            ("agent.sh", "agent.sh"),
            ("node_modules/cli/bin.js", "node_modules"),
            (
                ".npm-global/lib/node_modules/@a/cli/bin.js",
                ".npm-global/lib",
            ),
            ("tools/agent/run.sh", "tools/agent"),
            ("proj/node_modules/cli/bin.js", "proj"),
        ];
        for (program, shown) in table {
            let p = touch(program);
            assert_eq!(
                install_dir(&p, Some(&home)),
                Some(std::fs::canonicalize(home.join(shown)).unwrap()),
                "{program}"
            );
        }
        // No home known: only `/` itself is narrowed.
        assert_eq!(
            install_dir(&touch("agent.sh"), None),
            Some(std::fs::canonicalize(&home).unwrap())
        );
        assert!(holds_home(Path::new("/"), None));
        assert!(holds_home(d.path(), Some(&home)));
        assert!(!holds_home(&home.join("tools"), Some(&home)));
        // The host's /tmp (a program right in it) is narrowed too, wherever home is.
        assert!(holds_home(
            Path::new("/tmp"),
            Some(Path::new("/nonexistent/h"))
        ));
        assert!(!holds_home(
            Path::new("/usr/lib/node_modules"),
            Some(Path::new("/nonexistent/h"))
        ));
    }

    #[test]
    fn an_agents_box() {
        // The task's metadata is real: its `config.worktree` is made to be bound.
        let meta = tempfile::tempdir().unwrap();
        let admin = meta.path().join("t");
        std::fs::create_dir(&admin).unwrap();
        let wt = Worktree {
            root: "/s/worktrees/r/t".into(),
            admin: admin.clone(),
        };
        let inputs = Inputs {
            adapter: Some(AdapterKind::Claude),
            home: Some(Path::new("/h")),
            repo: Some(Path::new("/repo")),
            worktree: Some(&wt),
            own_objects: Some(Path::new("/s/runs/r/objects/t.attempt-1")),
            run_dir: RunDir::Inputs(Path::new("/s/runs/r")),
            ..bare(Path::new("/s/worktrees/r/t"))
        };
        let b = spec(&inputs);
        let has = |v: &[PathBuf], p: &str| v.iter().any(|x| x == Path::new(p));
        for p in ["/s/worktrees/r/t", "/h/.claude", "/h/.cache"] {
            assert!(has(&b.writable, p), "{p} writable");
        }
        assert!(b.writable.contains(&admin), "the task's metadata writable");
        for f in ["commondir", "gitdir", "config.worktree"] {
            assert!(b.read_only.contains(&admin.join(f)), "{f} read-only");
        }
        assert!(admin.join("config.worktree").is_file());
        for p in [
            "/repo",
            "/s/worktrees/r/t/.git",
            "/h/.claude/settings.json",
            "/s/runs/r/prompts",
            "/s/runs/r/skills",
            "/s/runs/r/extensions",
            "/h/.cargo/bin",
        ] {
            assert!(has(&b.read_only, p), "{p} read-only");
        }
        // The repository's `.git` (config, hooks, refs, packed-refs, other worktrees' metadata)
        // is read-only with the checkout: nothing under it is writable but the task's own
        // metadata (and its objects, seen elsewhere below).
        for p in &b.writable {
            assert!(!p.starts_with("/repo"), "{} writable", p.display());
        }
        for p in [
            "/h",
            "/h/.ssh",
            "/h/.cargo",
            "/h/.cargo/credentials.toml",
            "/s",
            "/s/worktrees/r",
            "/s/runs/r",
            "/s/runs/r/transcripts",
            "/s/runs/r/objects",
            "/run/crew/crewd.sock",
        ] {
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
        assert!(b.elsewhere.is_empty() && has(&b.read_only, "/repo"));
        // A read-only role: its workspace and `.git` read-only, no objects of its own.
        let b = spec(&Inputs {
            writes: false,
            own_objects: None,
            ..inputs
        });
        assert!(has(&b.read_only, "/s/worktrees/r/t") && !has(&b.writable, "/s/worktrees/r/t"));
        assert!(!b.writable.iter().any(|p| p.starts_with("/repo")));
        // Metadata where `config.worktree` cannot be made: read-only as a whole.
        let gone = Worktree {
            root: wt.root.clone(),
            admin: meta.path().join("gone"),
        };
        let b = spec(&Inputs {
            worktree: Some(&gone),
            ..inputs
        });
        assert!(b.read_only.contains(&gone.admin) && !b.writable.contains(&gone.admin));
    }

    /// On a node the run directory is the staging directory, which holds the attempt's token
    /// (`launch.json`), its environment and the worker's records: the box sees only the
    /// agent's inputs in it.
    #[test]
    fn a_nodes_box_sees_only_the_agents_inputs_of_its_staging_directory() {
        let wt = Worktree {
            root: "/scratch/work".into(),
            admin: "/scratch/repo/.git/worktrees/work".into(),
        };
        let staging = Path::new("/st/r/t.attempt-1");
        let b = spec(&Inputs {
            adapter: Some(AdapterKind::Pi),
            home: Some(Path::new("/h")),
            repo: Some(Path::new("/scratch/repo")),
            worktree: Some(&wt),
            own_objects: Some(Path::new("/scratch/objects")),
            run_dir: RunDir::Inputs(staging),
            network: false,
            ..bare(Path::new("/scratch/work"))
        });
        let seen: Vec<&PathBuf> = b.read_only.iter().chain(&b.writable).collect();
        let under: Vec<&&PathBuf> = seen.iter().filter(|p| p.starts_with("/st")).collect();
        assert_eq!(
            under,
            [
                &&staging.join("prompts"),
                &&staging.join("skills"),
                &&staging.join("extensions")
            ],
            "{seen:?}"
        );
        assert!(b.read_only.contains(&staging.join("prompts")));
        assert!(b.writable.contains(&PathBuf::from("/scratch/work")));
        assert!(!b.network);
    }

    /// A writing pi worker's box in shared mode, with `session` its session file.
    fn pi_box(run: &Path, session: &Path) -> BoxSpec {
        spec(&Inputs {
            adapter: Some(AdapterKind::Pi),
            run_dir: RunDir::Inputs(run),
            session_file: Some(session),
            ..bare(Path::new("/w"))
        })
    }

    #[test]
    fn a_pi_box_writes_its_own_sessions_only() {
        let run = Path::new("/s/runs/r");
        // (session file, what is writable for it)
        let table = [
            (
                "/s/runs/r/sessions/t/attempt-1.jsonl",
                "/s/runs/r/sessions/t",
            ),
            // A session continued from the run's shared folder: the file alone.
            (
                "/s/runs/r/sessions/t.attempt-1.jsonl",
                "/s/runs/r/sessions/t.attempt-1.jsonl",
            ),
        ];
        for (file, want) in table {
            let b = pi_box(run, Path::new(file));
            assert!(b.writable.iter().any(|p| p == Path::new(want)), "{file}");
            assert!(
                !b.writable
                    .iter()
                    .any(|p| p == Path::new("/s/runs/r/sessions")),
                "{file}: the run's sessions folder is writable"
            );
        }
    }

    #[test]
    fn a_session_named_by_its_real_path_in_a_run_reached_through_a_link_is_bound_alone() {
        let dir = tempfile::tempdir().unwrap();
        let real_run = dir.path().join("state/runs/r");
        std::fs::create_dir_all(real_run.join("sessions")).unwrap();
        let file = real_run.join("sessions/t.attempt-1.jsonl");
        std::fs::write(&file, "{}\n").unwrap();
        std::os::unix::fs::symlink(dir.path().join("state"), dir.path().join("link")).unwrap();
        let run = dir.path().join("link/runs/r");
        let file = std::fs::canonicalize(&file).unwrap();
        let b = pi_box(&run, &file);
        assert!(b.writable.contains(&file), "{:?}", b.writable);
        assert!(
            !b.writable.iter().any(|p| p.ends_with("runs/r/sessions")),
            "the run's sessions folder is writable: {:?}",
            b.writable
        );
    }
    #[test]
    fn a_clis_own_sandbox_is_off_inside_the_box_unless_the_user_set_one() {
        let off = [
            "-c".to_string(),
            "sandbox_mode=\"danger-full-access\"".to_string(),
        ];
        // (adapter, command, what is appended)
        let table: Vec<(AdapterKind, Vec<&str>, Vec<String>)> = vec![
            (AdapterKind::Codex, vec!["codex"], off.to_vec()),
            (AdapterKind::Codex, vec!["codex", "exec"], off.to_vec()),
            (
                AdapterKind::Codex,
                vec!["codex", "--sandbox", "read-only"],
                vec![],
            ),
            (
                AdapterKind::Codex,
                vec!["codex", "-c", "sandbox_mode=\"x\""],
                vec![],
            ),
            (
                AdapterKind::Claude,
                vec!["claude"],
                vec![format!("--settings={CLAUDE_NO_SANDBOX}")],
            ),
            (
                AdapterKind::Claude,
                vec!["claude", "--settings", "/etc/mine.json"],
                vec![],
            ),
            (AdapterKind::Pi, vec!["pi"], vec![]),
        ];
        for (adapter, cmd, added) in table {
            let mut command: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
            let mut env = vec![
                "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB".to_string(),
                "PATH".into(),
            ];
            inside_box(adapter, &mut command, &mut env);
            let scrub_passed = env.len() == 2;
            assert_eq!(scrub_passed, adapter != AdapterKind::Claude, "{cmd:?}");
            assert_eq!(
                command.get(cmd.len()..).unwrap(),
                added.as_slice(),
                "{cmd:?}"
            );
        }
    }
}
