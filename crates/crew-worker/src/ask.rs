//! The ask tool on a node (issue 35). The agent asks as a local one does, through crew's own
//! tool (pi: crew's extension; Claude Code, Codex, opencode: crew's ask server, `crewctl mcp
//! --ask`, which needs no daemon): the question is the tool call in the agent's stream, which
//! `crew_attempt` classifies here as it does on crewd's machine (`AttemptResult::Asked`). It
//! reaches crewd in the final record, under the attempt's token, so a stale worker's question
//! is refused with the rest of its record. The staging directory is the only channel.
//!
//! The CLI's session does not move: it stays on this node (pi runs with `--no-session`), and
//! crewd answers with a fresh attempt whose prompt holds the question and the answer. So the
//! result names no session.

use crew_attempt::WorkerSpec;
use crew_core::run::AttemptResult;
use crew_core::stream::{AdapterKind, SessionSpec};
use std::path::{Path, PathBuf};

/// How the agent gets crew's ask tool on this node. `Err`: pi's extension could not be
/// written (the attempt fails, as a local one would). The extension goes in the attempt's run
/// directory, the staging directory, as a local one's goes in the run's.
pub fn session(spec: &WorkerSpec) -> Result<SessionSpec, String> {
    match spec.adapter {
        AdapterKind::Pi => {
            let ext = spec.run_dir.join("extensions").join("crew-ask.ts");
            write_extension(&ext).map_err(|e| format!("cannot write crew's pi extension: {e}"))?;
            Ok(SessionSpec {
                ask_extension: Some(ext.display().to_string()),
                ..Default::default()
            })
        }
        AdapterKind::Claude | AdapterKind::Codex | AdapterKind::Opencode => {
            let server = crewctl(
                std::env::current_exe()
                    .ok()
                    .as_deref()
                    .and_then(Path::parent),
                std::env::var_os("PATH").as_deref(),
            );
            if server.is_none() {
                tracing::warn!(
                    "no crewctl next to crew-worker or on PATH: the agent runs without crew's ask tool"
                );
            }
            Ok(SessionSpec {
                ask_server: server
                    .map(|p| vec![p.display().to_string(), "mcp".into(), "--ask".into()]),
                ..Default::default()
            })
        }
        // Gemini CLI takes its ask server only from a settings home crew mirrors from the
        // user's own on crewd's machine; a node has none of it.
        AdapterKind::Gemini | AdapterKind::Command => Ok(SessionSpec::default()),
    }
}

/// The question without the node's session: crewd's next attempt starts afresh.
pub fn without_session(mut r: AttemptResult) -> AttemptResult {
    if let AttemptResult::Asked { session, .. } = &mut r {
        *session = None;
    }
    r
}

fn write_extension(path: &Path) -> std::io::Result<()> {
    let text = crew_core::stream::PI_ASK_EXTENSION.as_bytes();
    if std::fs::read(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crew_staging::write_atomic(path, text, 0o600).map_err(std::io::Error::other)
}

/// `crewctl` next to this crew-worker (how the workspace installs them), else on `PATH`.
fn crewctl(worker_dir: Option<&Path>, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    crew_box::spawn::beside_or_on_path("crewctl", worker_dir, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crewctl_is_found_next_to_the_worker_else_on_path() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let (here, on_path) = (t.path().join("bin"), t.path().join("path"));
        for d in [&here, &on_path] {
            std::fs::create_dir_all(d).unwrap();
        }
        let make = |d: &Path| {
            let p = d.join("crewctl");
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let path = std::env::join_paths([&on_path]).unwrap();
        assert_eq!(crewctl(Some(&here), Some(&path)), None);
        let theirs = make(&on_path);
        assert_eq!(crewctl(Some(&here), Some(&path)), Some(theirs));
        let ours = make(&here);
        assert_eq!(crewctl(Some(&here), Some(&path)), Some(ours));
    }

    #[test]
    fn an_asked_result_names_no_session() {
        let asked = AttemptResult::Asked {
            usage: Default::default(),
            model: None,
            artifacts: vec![],
            question: "Which DB?".into(),
            session: Some("node-session".into()),
        };
        match without_session(asked) {
            AttemptResult::Asked {
                question, session, ..
            } => assert_eq!((question.as_str(), session), ("Which DB?", None)),
            other => panic!("{other:?}"),
        }
    }
}
