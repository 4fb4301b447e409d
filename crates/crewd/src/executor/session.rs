//! A worker's conversation across attempts: how each agent CLI is given crew's `ask_user` tool,
//! and which attempt continues the session that asked.

use super::blocking;
use crate::artifacts;
use crate::attempt::{AttemptSpec, Resume};
use crew_core::stream::{self, AdapterKind, SessionSpec};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most of the user's Gemini CLI settings read to carry them over.
const MAX_GEMINI_SETTINGS_BYTES: u64 = 1 << 20;

/// The session this attempt continues, when its runtime can: pi when the session file is
/// there (a worker that died before writing it, or the fake agent, leaves none), named by its
/// real path; the other CLIs when their stream named a session id (`claude -p --resume`,
/// `codex exec resume`, `gemini --resume`, `opencode run --session`). `None`: the attempt
/// starts fresh, with the answer in its prompt.
pub(super) fn usable_resume(spec: &AttemptSpec) -> Option<Resume> {
    let r = spec.resume.as_ref()?;
    match spec.runtime.adapter {
        AdapterKind::Pi => {
            let file = blocking(|| pi_session_of_task(&spec.run_dir, &spec.task_id, &r.session))?;
            Some(Resume {
                session: file.display().to_string(),
                answer: r.answer.clone(),
            })
        }
        AdapterKind::Claude | AdapterKind::Codex | AdapterKind::Gemini | AdapterKind::Opencode => {
            stream::is_resumable_session_id(&r.session).then(|| r.clone())
        }
        AdapterKind::Command => None,
    }
}

/// `session`'s real path when it is a pi session file of task `task_id` of the run in
/// `run_dir`: a file in the task's own `sessions/<task>/` (or, from before that layout,
/// `sessions/<task>.attempt-<n>.jsonl`). pi appends to the file it is given and the box binds
/// that file's folder writable, and the path comes from the run's events, which an imported
/// bundle writes: `~/.bashrc` named there was appended to, and the home bound writable; another
/// task's folder would be its conversation to rewrite. The real path is what pi and the box get
/// (no link or `..` between the check and the bind), and only the task itself writes its folder,
/// while it does not run.
fn pi_session_of_task(run_dir: &Path, task_id: &str, session: &str) -> Option<PathBuf> {
    let given = Path::new(session);
    if !given.is_absolute() {
        return None;
    }
    let sessions = std::fs::canonicalize(run_dir.join("sessions")).ok()?;
    let file = std::fs::canonicalize(given).ok()?;
    let parent = file.parent()?;
    let name = file.file_name()?.to_str()?;
    let own = parent == sessions.join(task_id)
        || (parent == sessions && name.starts_with(&format!("{task_id}.attempt-")));
    (own && file.is_file()).then_some(file)
}

/// The prompt of an attempt that continues the session that asked: the answer, said to be one.
pub(super) fn resume_prompt(answer: &str) -> String {
    format!("The user answered your question:\n\n{answer}\n\nContinue the task with this answer.")
}

/// The attempt's session: where pi keeps it, which recorded session a CLI continues, and how the
/// agent gets crew's `ask_user` tool. `Err`: a file the worker needs could not be written.
pub(super) fn session_spec(
    spec: &AttemptSpec,
    resume: Option<&Resume>,
    state_dir: &Path,
) -> Result<SessionSpec, String> {
    let run_dir = &spec.run_dir;
    match spec.runtime.adapter {
        // pi keeps its conversation in a session file crew names (one per attempt, or the one
        // being continued) and asks through crew's extension.
        AdapterKind::Pi => {
            let file = match resume {
                Some(r) => r.session.clone(),
                None => attempt_file(spec, "jsonl").display().to_string(),
            };
            let ext = blocking(|| {
                // The task's own folder: the only one of the run's sessions its box may write.
                std::fs::create_dir_all(run_dir.join("sessions").join(&spec.task_id))?;
                ask_extension_file(run_dir)
            })
            .map_err(|e| format!("cannot write crew's pi extension: {e}"))?;
            Ok(SessionSpec {
                file: Some(file),
                ask_extension: Some(ext.display().to_string()),
                ..Default::default()
            })
        }
        // Claude Code, Codex and opencode keep their sessions themselves (under the user's
        // home) and ask through crew's MCP server.
        AdapterKind::Claude | AdapterKind::Codex | AdapterKind::Opencode => Ok(SessionSpec {
            resume: resume.map(|r| r.session.clone()),
            ask_server: Some(ask_server()),
            ..Default::default()
        }),
        // Gemini CLI too, in a Gemini home of crew's whose settings name crew's server.
        AdapterKind::Gemini => Ok(SessionSpec {
            resume: resume.map(|r| r.session.clone()),
            ask_config: gemini_home(spec, state_dir),
            ..Default::default()
        }),
        AdapterKind::Command => Ok(SessionSpec::default()),
    }
}

/// crew's ask server: `crewctl mcp --ask`.
fn ask_server() -> Vec<String> {
    vec![crate::config::crewctl_path(), "mcp".into(), "--ask".into()]
}

/// `sessions/<task>/attempt-<n>.<ext>` in the run directory.
fn attempt_file(spec: &AttemptSpec, ext: &str) -> PathBuf {
    spec.run_dir.join(format!(
        "sessions/{}/attempt-{}.{ext}",
        spec.task_id, spec.attempt
    ))
}

/// crew's pi extension (the `ask_user` tool) in the run directory, rewritten when it differs
/// (like the system prompt file: the worker's input, never synced).
fn ask_extension_file(run_dir: &Path) -> std::io::Result<PathBuf> {
    let path = run_dir.join("extensions/crew-ask.ts");
    let text = stream::PI_ASK_EXTENSION.as_bytes();
    if std::fs::read(&path).ok().as_deref() != Some(text) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        artifacts::write_replace(&path, text)?;
    }
    Ok(path)
}

/// The Gemini home of crew's workers (`GEMINI_CLI_HOME`), made or brought up to date for this
/// attempt. Gemini CLI takes MCP servers only from settings files, and none of them is crew's
/// to write: the system's must belong to root, a workspace's lives in the user's repository, the
/// user's own in their `~/.gemini`. So crew's Gemini home has a `.gemini/settings.json` that is
/// the user's settings with crew's ask server added, and every other entry of the user's
/// `.gemini` (credentials, sessions, extensions, memory) and their `~/.agents` is a symlink to
/// theirs, so a session and its resume are kept where the user's own sessions are.
/// `None` (logged): the worker runs in the user's own home, without the ask tool.
fn gemini_home(spec: &AttemptSpec, state_dir: &Path) -> Option<String> {
    let passed = spec
        .runtime
        .env
        .iter()
        .any(|n| n == stream::GEMINI_ENV_HOME)
        .then(|| std::env::var_os(stream::GEMINI_ENV_HOME))
        .flatten();
    let user_home = passed
        .or_else(|| std::env::var_os("HOME"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)?;
    let home = state_dir.join("gemini-home");
    match blocking(|| mirror_gemini_home(&user_home, &home)) {
        Ok(()) => Some(home.display().to_string()),
        Err(e) => {
            tracing::warn!(error = %e, task = %spec.task_id, "gemini worker runs without crew's ask tool");
            None
        }
    }
}

/// Most entries of the user's `.gemini` mirrored; a folder holding more is not a Gemini home.
const MAX_GEMINI_ENTRIES: usize = 4096;

fn mirror_gemini_home(user_home: &Path, home: &Path) -> std::io::Result<()> {
    let theirs = user_home.join(".gemini");
    let ours = home.join(".gemini");
    std::fs::create_dir_all(&ours)?;
    // Where Gemini CLI keeps its sessions: made in their home (as Gemini CLI would on its first
    // run) so that it is a link here, not a folder of ours.
    std::fs::create_dir_all(theirs.join("tmp"))?;
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&theirs)?.take(MAX_GEMINI_ENTRIES) {
        let name = entry?.file_name();
        if name != "settings.json" {
            names.push(name);
        }
    }
    for name in names {
        link(&theirs.join(&name), &ours.join(&name))?;
    }
    let agents = user_home.join(".agents");
    if std::fs::symlink_metadata(&agents).is_ok() {
        link(&agents, &home.join(".agents"))?;
    }
    let base = read_bounded(&theirs.join("settings.json"))?;
    let settings = stream::gemini_ask_settings(base.as_deref(), &ask_server())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    artifacts::write_replace(&ours.join("settings.json"), settings.as_bytes())
}

/// `at` becomes a symlink to `target`, unless something is there already: a link (another
/// attempt's, or to where the entry was) or a file Gemini CLI made in crew's home itself.
fn link(target: &Path, at: &Path) -> std::io::Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(at) {
        if !meta.file_type().is_symlink() || std::fs::read_link(at)? == target {
            return Ok(());
        }
        std::fs::remove_file(at)?;
    }
    match std::os::unix::fs::symlink(target, at) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// The file's text, `None` when there is none; one larger than the bound, or not a regular
/// file, is an error (never read whole, never a FIFO that blocks).
fn read_bounded(path: &Path) -> std::io::Result<Option<String>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !meta.is_file() || meta.len() > MAX_GEMINI_SETTINGS_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} is not a regular file of at most {MAX_GEMINI_SETTINGS_BYTES} bytes",
                path.display()
            ),
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_GEMINI_SETTINGS_BYTES)
        .read_to_string(&mut text)?;
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_session_file_of_the_tasks_own_is_continued() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("runs/r");
        let own = run.join("sessions/01_a");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::create_dir_all(run.join("sessions/02_b")).unwrap();
        std::fs::write(own.join("attempt-1.jsonl"), "{}\n").unwrap();
        std::fs::write(run.join("sessions/02_b/attempt-1.jsonl"), "{}\n").unwrap();
        std::fs::write(run.join("sessions/01_a.attempt-1.jsonl"), "{}\n").unwrap();
        std::fs::write(run.join("sessions/02_b.attempt-1.jsonl"), "{}\n").unwrap();
        let outside = dir.path().join("bashrc");
        std::fs::write(&outside, "export A=1\n").unwrap();
        std::os::unix::fs::symlink(&outside, own.join("attempt-2.jsonl")).unwrap();
        // A link elsewhere pointing in: the folder given is not the task's.
        let elsewhere = dir.path().join("w");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(own.join("attempt-1.jsonl"), elsewhere.join("s.jsonl")).unwrap();
        let s = |p: &Path| p.display().to_string();
        let real = |p: &Path| Some(std::fs::canonicalize(p).unwrap());
        let cases = [
            (
                s(&own.join("attempt-1.jsonl")),
                real(&own.join("attempt-1.jsonl")),
            ),
            // The layout before a folder per task.
            (
                s(&run.join("sessions/01_a.attempt-1.jsonl")),
                real(&run.join("sessions/01_a.attempt-1.jsonl")),
            ),
            // Given through a link or `..`: continued by its real path.
            (
                s(&elsewhere.join("s.jsonl")),
                real(&own.join("attempt-1.jsonl")),
            ),
            (
                s(&run.join("sessions/02_b/../01_a/attempt-1.jsonl")),
                real(&own.join("attempt-1.jsonl")),
            ),
            (s(&outside), None),
            (s(&own.join("attempt-2.jsonl")), None),
            (s(&own.join("../../../../bashrc")), None),
            // Another task's conversation, either layout, or the sessions folder's own.
            (s(&run.join("sessions/02_b/attempt-1.jsonl")), None),
            (s(&run.join("sessions/02_b.attempt-1.jsonl")), None),
            (s(&own.join("../02_b.attempt-1.jsonl")), None),
            (s(&own), None),
            (s(&own.join("attempt-9.jsonl")), None),
            ("runs/r/sessions/01_a/attempt-1.jsonl".into(), None),
            (String::new(), None),
        ];
        for (session, want) in cases {
            assert_eq!(
                pi_session_of_task(&run, "01_a", &session),
                want,
                "{session}"
            );
        }
    }

    #[test]
    fn the_gemini_home_is_the_users_with_crews_settings() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        let theirs = user.join(".gemini");
        std::fs::create_dir_all(theirs.join("extensions")).unwrap();
        std::fs::write(theirs.join("oauth_creds.json"), "{}").unwrap();
        std::fs::write(
            theirs.join("settings.json"),
            r#"{"mcpServers": {"theirs": {"command": "x"}}, "ui": {"theme": "dark"}}"#,
        )
        .unwrap();
        std::fs::create_dir_all(user.join(".agents")).unwrap();
        let home = dir.path().join("state/gemini-home");
        for _ in 0..2 {
            mirror_gemini_home(&user, &home).unwrap();
        }
        let ours = home.join(".gemini");
        for name in ["extensions", "oauth_creds.json", "tmp"] {
            assert_eq!(
                std::fs::read_link(ours.join(name)).unwrap(),
                theirs.join(name),
                "{name}"
            );
        }
        assert_eq!(
            std::fs::read_link(home.join(".agents")).unwrap(),
            user.join(".agents")
        );
        let settings: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ours.join("settings.json")).unwrap()).unwrap();
        assert_eq!(settings["ui"]["theme"], "dark");
        assert_eq!(settings["mcpServers"]["theirs"]["command"], "x");
        assert_eq!(
            settings["mcpServers"]["crew_ask"]["args"],
            serde_json::json!(["mcp", "--ask", "--tool", "ask_question"])
        );
        // Their settings are left as they were.
        assert!(!std::fs::read_to_string(theirs.join("settings.json"))
            .unwrap()
            .contains("crew_ask"));
        // A file Gemini CLI made in crew's home stays; a link to a moved entry is renewed.
        std::fs::write(ours.join("installation_id"), "abc").unwrap();
        std::fs::remove_file(ours.join("oauth_creds.json")).unwrap();
        std::os::unix::fs::symlink("/nonexistent", ours.join("oauth_creds.json")).unwrap();
        std::fs::write(theirs.join("installation_id"), "theirs").unwrap();
        mirror_gemini_home(&user, &home).unwrap();
        assert_eq!(
            std::fs::read_to_string(ours.join("installation_id")).unwrap(),
            "abc"
        );
        assert_eq!(
            std::fs::read_link(ours.join("oauth_creds.json")).unwrap(),
            theirs.join("oauth_creds.json")
        );
    }

    #[test]
    fn settings_gemini_could_not_read_are_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        std::fs::create_dir_all(user.join(".gemini")).unwrap();
        std::fs::write(user.join(".gemini/settings.json"), "[1, 2]").unwrap();
        assert!(mirror_gemini_home(&user, &dir.path().join("home")).is_err());
    }

    #[test]
    fn a_fifo_or_a_huge_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read_bounded(&fifo).is_err());
        let big = dir.path().join("big.json");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_GEMINI_SETTINGS_BYTES + 1).unwrap();
        assert!(read_bounded(&big).is_err());
        assert_eq!(read_bounded(&dir.path().join("none")).unwrap(), None);
    }
}
