//! What crewd takes from a worker once its job ended: the files its result names (only its own,
//! only regular files), the prompt the node gave the agent, the result commit into the task's
//! worktree, and the result itself without what only crewd decides.

use super::bound;
use crate::shared::Shared;
use crew_core::run::{ArtifactRef, AttemptResult};
use std::path::Path;
use std::time::Duration;

/// Longest model name kept from a worker's record.
pub(super) const MAX_MODEL_CHARS: usize = 200;

/// The worker's classified result as crewd takes it: naming `named` (the files as they are in
/// this run's directory), and without what only crewd decides. A reuse and its commit are the
/// result cache's (`workspace::finish_attempt` adopts the commit a reused result names, with no
/// ancestry check and no no-change guard): from a worker's record they would let it name any
/// revision of the user's repository as the task's result. The commit is the one the bundle
/// brought (`take_result`); a session stays on its node (an answered task starts afresh).
pub(super) fn as_taken(mut r: AttemptResult, named: Vec<ArtifactRef>) -> AttemptResult {
    match &mut r {
        AttemptResult::Completed {
            artifacts,
            reused_from,
            commit,
            ..
        } => {
            *artifacts = named;
            *reused_from = None;
            *commit = None;
        }
        AttemptResult::Asked {
            artifacts, session, ..
        } => {
            *artifacts = named;
            *session = None;
        }
        AttemptResult::NoFinalText { artifacts, .. }
        | AttemptResult::NeedsAttention { artifacts, .. }
        | AttemptResult::Failed { artifacts, .. } => *artifacts = named,
    }
    match &mut r {
        AttemptResult::Completed { model, .. }
        | AttemptResult::NoFinalText { model, .. }
        | AttemptResult::NeedsAttention { model, .. }
        | AttemptResult::Failed { model, .. }
        | AttemptResult::Asked { model, .. } => {
            if let Some(m) = model {
                *m = crew_core::text::bound(std::mem::take(m), MAX_MODEL_CHARS);
            }
        }
    }
    r
}

/// The directories of a run a worker's files may land in.
const IMPORTED: &[&str] = &["transcripts", "logs", "results", "shared", "verify"];
/// Largest file taken from a worker (a transcript is capped well below it on the node).
const IMPORT_MAX: u64 = 64 << 20;

/// The attempt a worker ran, for the names of its files: crew_attempt's layout
/// (`transcripts/T.attempt-N.jsonl`, `logs/T.attempt-N.stderr.txt`, `verify/T.attempt-N.K.txt`,
/// `results/T.txt`, `shared/OUTPUT`).
pub(super) struct Own<'a> {
    pub(super) task_id: &'a str,
    pub(super) attempt: u32,
    pub(super) output: Option<&'a str>,
}

impl Own<'_> {
    /// Whether `name` is one of this attempt's files: a worker names its own only (another
    /// task's result or shared output, which its dependents read, is not its to write).
    fn names(&self, name: &str) -> bool {
        let (t, n) = (self.task_id, self.attempt);
        let verify = name
            .strip_prefix(&format!("verify/{t}.attempt-{n}."))
            .and_then(|r| r.strip_suffix(".txt"))
            .is_some_and(|k| {
                !k.is_empty() && k.len() <= 6 && k.bytes().all(|b| b.is_ascii_digit())
            });
        verify
            || name == format!("results/{t}.txt")
            || name == format!("transcripts/{t}.attempt-{n}.jsonl")
            || name == format!("logs/{t}.attempt-{n}.stderr.txt")
            || self.output.is_some_and(|o| name == format!("shared/{o}"))
    }
}

/// Copy the files a worker's result names from its staging directory into the run's
/// directory, each written whole and described afresh. A name outside the run's layout or
/// not of this attempt (`own`), a file too large, missing, or not a regular file is left out
/// (the worker's directory is not trusted with paths).
pub(super) fn import(
    staging: &Path,
    run_dir: &Path,
    named: &[ArtifactRef],
    own: &Own,
) -> Vec<ArtifactRef> {
    let mut out = Vec::new();
    for a in named {
        let p = Path::new(&a.name);
        let mut parts = p.components();
        let inside = matches!(parts.next(), Some(std::path::Component::Normal(d)) if IMPORTED.iter().any(|x| d == *x))
            && parts.clone().count() >= 1
            && parts.all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside || !own.names(&a.name) {
            tracing::warn!(name = %bound(&a.name), "a worker's file outside its attempt's layout is not taken");
            continue;
        }
        // A regular file through real directories only: a link would be resolved on this
        // machine (a file of the user's taken into the run), a FIFO would hold the attempt.
        match crew_staging::read_beneath(staging, p, IMPORT_MAX) {
            Ok(bytes) => match crate::artifacts::put(run_dir, &a.name, a.kind.as_str(), &bytes) {
                Ok(r) => out.push(r),
                Err(e) => {
                    tracing::warn!(error = %e, name = %a.name, "cannot keep a worker's file")
                }
            },
            Err(e) => {
                tracing::warn!(error = %bound(&e.to_string()), "a worker's file is not taken")
            }
        }
    }
    out
}

/// What an attempt was told, kept as a local attempt keeps it: `prompts/<task>.attempt-N.md`
/// (each attempt's, a retry with feedback or an answer: what each was told) and
/// `prompts/<task>.md` a second name of the same file (the latest), not a second copy.
pub(super) fn keep_prompt(
    run_dir: &Path,
    task: &str,
    attempt: u32,
    bytes: &[u8],
) -> std::io::Result<[ArtifactRef; 2]> {
    let this = format!("prompts/{task}.attempt-{attempt}.md");
    let kept = crate::artifacts::put(run_dir, &this, "prompt", bytes)?;
    let latest = crate::artifacts::put_same(run_dir, &kept, &format!("prompts/{task}.md"), bytes)?;
    Ok([kept, latest])
}

/// The prompt the node gave the agent, its pre-step script's block in it (the worker wrote it
/// over the staged one), kept in the run's directory (`keep_prompt`).
pub(super) fn take_prompt(
    staging: &Path,
    run_dir: &Path,
    task: &str,
    attempt: u32,
) -> Vec<ArtifactRef> {
    let name = format!("prompts/{task}.md");
    // A regular file through real directories only, as the worker's other files.
    match crew_staging::read_beneath(staging, Path::new(&name), IMPORT_MAX) {
        Ok(bytes) => match keep_prompt(run_dir, task, attempt, &bytes) {
            Ok(kept) => kept.into(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot keep the node's prompt");
                Vec::new()
            }
        },
        Err(e) => {
            tracing::warn!(error = %bound(&e.to_string()), "the node's prompt is not taken");
            Vec::new()
        }
    }
}

/// The worker's commit, into the task's worktree as uncommitted changes on its start commit:
/// from here the attempt finishes as a local one (verification, commit, diffstat, patch).
pub(super) async fn take_result(
    shared: &Shared,
    worktree: &str,
    bundle: &Path,
    commit: &str,
) -> Result<(), String> {
    let timeout = Duration::from_millis(shared.config.git_timeout_ms.max(1000));
    let b = bundle.display().to_string();
    // git checks that the bundle's prerequisite (the start commit, which is here) is reachable
    // from a ref; while other tasks of the run create and move refs in the same repository,
    // that walk can miss it ("some prerequisite commits exist in the object store, but are
    // not connected to the repository's history": 2 of 200 fan-out tasks in the benchmark).
    // The commit is there: the fetch is tried again.
    let mut tries = 0;
    loop {
        match git(
            worktree,
            &["fetch", "-q", &b, crew_staging::RESULT_REF],
            timeout,
        )
        .await
        {
            Ok(_) => break,
            Err(e) if e.contains("not connected to the repository's history") && tries < 5 => {
                tries += 1;
                tracing::info!(error = %e, tries, "fetching the result bundle again");
                tokio::time::sleep(Duration::from_millis(100 * tries)).await;
            }
            Err(e) => return Err(e),
        }
    }
    let fetched = git(worktree, &["rev-parse", "FETCH_HEAD"], timeout).await?;
    if fetched.trim() != commit {
        return Err(format!(
            "the bundle holds {}, the final record names {commit}",
            fetched.trim()
        ));
    }
    git(worktree, &["read-tree", "-u", "--reset", commit], timeout).await?;
    Ok(())
}

async fn git(dir: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    let run = tokio::process::Command::new("git")
        .args(crew_git::GUARDS)
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .envs([crate::git_orphans::tag()])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let o = tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| format!("git {} timed out", args.join(" ")))?
        .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
    if !o.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::super::mkfifo;
    use super::*;

    /// The repository's fsmonitor program is a program of its choice: taking a worker's result
    /// into crew's worktree (fetch, read-tree) never starts it.
    #[tokio::test]
    async fn taking_a_result_never_starts_the_repositorys_fsmonitor() {
        let d = tempfile::tempdir().unwrap();
        let (w, marker) = (d.path().join("w"), d.path().join("ran"));
        std::fs::create_dir(&w).unwrap();
        let sh = |cmd: &str| {
            let ok = std::process::Command::new("sh")
                .args(["-c", cmd])
                .current_dir(&w)
                .status()
                .unwrap()
                .success();
            assert!(ok, "{cmd}");
        };
        let monitor = d.path().join("monitor.sh");
        std::fs::write(&monitor, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        sh(&format!(
            "chmod +x {m} && git init -q && git -c user.name=u -c user.email=u@x commit -q \
             --allow-empty -m one && git config core.fsmonitor {m} && touch f && git add f && \
             git -c user.name=u -c user.email=u@x commit -q -m two",
            m = monitor.display()
        ));
        let _ = std::fs::remove_file(&marker);
        let w = w.to_str().unwrap();
        let t = Duration::from_secs(30);
        git(w, &["fetch", "-q", ".", "HEAD"], t).await.unwrap();
        git(w, &["read-tree", "-u", "--reset", "HEAD~1"], t)
            .await
            .unwrap();
        assert!(!marker.exists(), "the fsmonitor program ran");
    }

    #[test]
    fn a_workers_files_are_taken_only_inside_the_runs_layout() {
        let staging = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("transcripts/a.attempt-1.jsonl", "{}\n"),
            ("results/a.txt", "done"),
            ("secret.txt", "no"),
        ] {
            let p = staging.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let named = |name: &str, kind: &str| ArtifactRef {
            name: name.into(),
            kind: crew_core::run::ArtifactKind::new(kind),
            bytes: 0,
            sha256: crew_core::run::Sha256::from_bytes([0; 32]),
        };
        let own = Own {
            task_id: "a",
            attempt: 1,
            output: None,
        };
        let got = import(
            staging.path(),
            run.path(),
            &[
                named("transcripts/a.attempt-1.jsonl", "transcript"),
                named("results/a.txt", "result"),
                named("secret.txt", "result"),
                named("results/../secret.txt", "result"),
                named("/etc/passwd", "result"),
                named("results", "result"),
                named("results/missing.txt", "result"),
            ],
            &own,
        );
        let names: Vec<&str> = got.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["transcripts/a.attempt-1.jsonl", "results/a.txt"]);
        assert_eq!(got[1].bytes, 4);
        assert_eq!(
            std::fs::read_to_string(run.path().join("results/a.txt")).unwrap(),
            "done"
        );
        assert!(!run.path().join("secret.txt").exists());
    }
    /// A worker (or an agent unboxed on its node, the same user) plants links and FIFOs in its
    /// staging directory under the names its result gives: crewd, which reads them on its own
    /// machine, neither follows a link (a file of crewd's machine taken into the run's
    /// artifacts, and from there into a later task's prompt) nor waits on a FIFO (the attempt
    /// never ends, a runtime thread held).
    #[test]
    fn a_workers_links_and_fifos_are_not_taken() {
        let staging = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let mine = tempfile::tempdir().unwrap();
        let secret = mine.path().join("id_ed25519");
        std::fs::write(&secret, "PRIVATE KEY").unwrap();
        // The attempt's own names, each something else than a regular file.
        for d in ["results", "shared", "transcripts", "prompts"] {
            std::fs::create_dir_all(staging.path().join(d)).unwrap();
        }
        std::fs::write(staging.path().join("results/t.txt"), "done").unwrap();
        std::os::unix::fs::symlink(&secret, staging.path().join("shared/out.md")).unwrap();
        std::fs::write(mine.path().join("t.attempt-1.stderr.txt"), "PRIVATE").unwrap();
        std::os::unix::fs::symlink(mine.path(), staging.path().join("logs")).unwrap();
        mkfifo(&staging.path().join("transcripts/t.attempt-1.jsonl"));
        std::os::unix::fs::symlink(&secret, staging.path().join("prompts/t.md")).unwrap();
        let named = |name: &str| ArtifactRef {
            name: name.into(),
            kind: crew_core::run::ArtifactKind::new("result"),
            bytes: 0,
            sha256: crew_core::run::Sha256::from_bytes([0; 32]),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (s, r) = (staging.path().to_path_buf(), run.path().to_path_buf());
        std::thread::spawn(move || {
            let own = Own {
                task_id: "t",
                attempt: 1,
                output: Some("out.md"),
            };
            let got = import(
                &s,
                &r,
                &[
                    named("results/t.txt"),
                    named("shared/out.md"),
                    named("logs/t.attempt-1.stderr.txt"),
                    named("transcripts/t.attempt-1.jsonl"),
                ],
                &own,
            );
            let prompts = take_prompt(&s, &r, "t", 1);
            let _ = tx.send((got, prompts));
        });
        let (got, prompts) = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("crewd blocked on a worker's FIFO");
        let names: Vec<&str> = got.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["results/t.txt"]);
        assert!(!run.path().join("shared/out.md").exists());
        assert!(!run.path().join("logs/t.attempt-1.stderr.txt").exists());
        assert!(!run.path().join("prompts/t.md").exists());
        assert!(
            prompts.is_empty(),
            "the linked prompt was taken: {prompts:?}"
        );
    }

    /// A worker names the files of its own attempt only: one naming another task's result,
    /// shared output or transcript (names under the run's layout all the same) overwrote that
    /// task's file in the run's directory, which its dependents read.
    #[test]
    fn a_worker_cannot_name_another_tasks_files() {
        let staging = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        for name in [
            "results/01_a.txt",
            "results/02_b.txt",
            "shared/b.md",
            "shared/a.md",
            "transcripts/01_a.attempt-2.jsonl",
            "transcripts/02_b.attempt-1.jsonl",
            "transcripts/01_a.attempt-1.jsonl",
            "logs/01_a.attempt-2.stderr.txt",
            "verify/01_a.attempt-2.1.txt",
            "verify/02_b.attempt-1.1.txt",
        ] {
            let p = staging.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "forged").unwrap();
        }
        std::fs::create_dir_all(run.path().join("results")).unwrap();
        std::fs::write(run.path().join("results/02_b.txt"), "b's answer").unwrap();
        let named: Vec<ArtifactRef> = std::fs::read_dir(staging.path())
            .unwrap()
            .flat_map(|d| {
                let d = d.unwrap().path();
                std::fs::read_dir(&d).unwrap().map(move |f| {
                    let f = f.unwrap().path();
                    format!(
                        "{}/{}",
                        d.file_name().unwrap().to_str().unwrap(),
                        f.file_name().unwrap().to_str().unwrap()
                    )
                })
            })
            .map(|name| ArtifactRef {
                name,
                kind: crew_core::run::ArtifactKind::new("result"),
                bytes: 0,
                sha256: crew_core::run::Sha256::from_bytes([0; 32]),
            })
            .collect();
        let own = Own {
            task_id: "01_a",
            attempt: 2,
            output: Some("a.md"),
        };
        let mut got: Vec<String> = import(staging.path(), run.path(), &named, &own)
            .into_iter()
            .map(|a| a.name)
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "logs/01_a.attempt-2.stderr.txt",
                "results/01_a.txt",
                "shared/a.md",
                "transcripts/01_a.attempt-2.jsonl",
                "verify/01_a.attempt-2.1.txt",
            ]
        );
        assert_eq!(
            std::fs::read_to_string(run.path().join("results/02_b.txt")).unwrap(),
            "b's answer"
        );
    }
}
