//! Staging an attempt: its directory on the shared filesystem, written before the job is
//! submitted. In it: the input bundle(s) of its start commit, its prompt, its `WorkerSpec`,
//! the launch record and its environment; the launch last, so a launch means the directory is
//! complete. On re-attach only what is missing is written (the worker may be reading it).

use super::blocking;
use super::take::keep_prompt;
use crate::attempt::AttemptSpec;
use crate::placement::slurm::{self, SlurmConfig};
use crate::shared::Shared;
use crew_core::run::{ArtifactRef, AttemptResult};
use crew_staging::{Launch, PreStepAt, Staging};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What `stage` made.
pub(super) struct Staged {
    pub(super) staging: Staging,
    pub(super) token: String,
    /// The job's tag (`token::job_tag`), in its comment.
    pub(super) tag: String,
}

/// The staging directory: input bundle, prompt, the attempt's `WorkerSpec`, launch and
/// environment. Written again on re-attach only where missing (the worker may be reading it).
pub(super) async fn stage(
    shared: &Arc<Shared>,
    cfg: &SlurmConfig,
    spec: &AttemptSpec,
    start: &str,
    artifacts: &mut Vec<ArtifactRef>,
) -> Result<Staged, String> {
    let staging = staging_of(cfg, spec);
    let key = {
        let state = shared.state_dir.clone();
        blocking(move || slurm::token::key(&state)).map_err(|e| e.to_string())?
    };
    let (prompt, pre_step) = prompt(cfg, spec, &key)?;
    // The prompt is final here unless the node adds a pre-step script's block to it: then the
    // run keeps the node's, once, when it comes back (`take_prompt`), as a local attempt keeps
    // its prompt after its script ran.
    if spec.plan.checks.pre_step.is_none() {
        let kept = blocking(|| {
            keep_prompt(
                &spec.run_dir,
                &spec.task_id,
                spec.attempt,
                prompt.as_bytes(),
            )
        })
        .map_err(|e| format!("cannot write the prompt: {e}"))?;
        artifacts.extend(kept);
    }
    // The attempt as a local one would run it; the node puts its own paths in.
    let worker = crate::executor::worker_spec(&shared.config, spec, &prompt, false);
    // Derived, never journaled: the same again for the attempt a restarted daemon re-attaches.
    let at = staging.dir.display().to_string();
    let token = slurm::token::derive(&key, &spec.run_id, &spec.task_id, spec.attempt, &at);
    let tag = slurm::token::job_tag(&key, &spec.run_id, &spec.task_id, spec.attempt, &at);
    let contents = Contents {
        prompt_name: format!("prompts/{}.md", spec.task_id),
        prompt,
        worker,
        launch: launch(shared, spec, start, &token, pre_step),
        env: worker_env(shared, spec),
        cwd: spec.cwd.clone(),
        start: start.to_string(),
        run_base: spec
            .workspace
            .as_ref()
            .map(|w| (spec.run_id.clone(), w.base.clone())),
    };
    let fresh = spec.job.is_none();
    blocking(|| write_staging(&staging, fresh, contents))?;
    Ok(Staged {
        staging,
        token,
        tag,
    })
}

/// The attempt's staging directory: where the journal says, on re-attach (the config's
/// directory may have changed since), else a new one under the config's.
fn staging_of(cfg: &SlurmConfig, spec: &AttemptSpec) -> Staging {
    Staging::new(match spec.job.as_ref() {
        Some(j) => PathBuf::from(&j.staging),
        None => cfg
            .staging_dir
            .join(&spec.run_id)
            .join(format!("{}.attempt-{}", spec.task_id, spec.attempt)),
    })
}

/// The attempt's prompt, and where in it the node puts a pre-step script's block.
fn prompt(
    cfg: &SlurmConfig,
    spec: &AttemptSpec,
    key: &[u8; 32],
) -> Result<(String, Option<PreStepAt>), String> {
    // The pre-step script runs on the node (in its checkout, in its box): its block goes
    // between the two parts there, where a local attempt's goes.
    let (mut head, rest) = blocking(|| crate::executor::render_parts(spec))
        .map_err(|e| format!("cannot render the prompt: {e}"))?;
    // The session that asked stayed on its node: an answered task starts afresh, and its
    // prompt quotes the question beside the answer (after the `Answer:` lines that end the
    // first part).
    if !spec.answers.is_empty() {
        let asked = blocking(|| {
            earlier_questions(
                key,
                &cfg.staging_dir,
                (&spec.run_id, &spec.task_id, spec.attempt),
                spec.answers.len(),
            )
        });
        head.push_str(&crew_core::prompt::asked_section(&asked));
    }
    let pre_step = spec.plan.checks.pre_step.clone().map(|script| PreStepAt {
        script,
        at: head.len(),
    });
    Ok((head + &rest, pre_step))
}

/// The launch record of the attempt at `start`: what the worker does around the agent (its
/// commit, its checks) and in what box. Its `base` is set with the input bundle.
fn launch(
    shared: &Shared,
    spec: &AttemptSpec,
    start: &str,
    token: &str,
    pre_step: Option<PreStepAt>,
) -> Launch {
    Launch {
        version: crew_staging::VERSION,
        token: token.to_string(),
        run_id: spec.run_id.clone(),
        task_id: spec.task_id.clone(),
        attempt: spec.attempt,
        start: start.to_string(),
        // Set with the input bundle.
        base: None,
        commit: spec.plan.writes,
        message: format!("crew: {} ({})", spec.task_id, spec.plan.role),
        checks: {
            let verify = crate::executor::checks::verify_commands(shared, spec);
            crew_staging::Checks {
                failure_completes: verify
                    .as_ref()
                    .is_some_and(|v| crate::executor::checks::failure_completes(spec, v)),
                commands: verify.map(|v| v.commands).unwrap_or_default(),
                timeout_ms: shared.config.verify_timeout_ms,
                grace_ms: shared.config.kill_grace_ms,
                output_bytes: shared.config.verify_output_bytes,
            }
        },
        sandbox: crew_staging::BoxRules {
            mode: crate::executor::sandbox::mode(&shared.config, &spec.runtime),
            network: crate::executor::sandbox::network(&spec.runtime, &spec.plan),
            verify_network: shared.config.verify_network,
            runtime_env: spec.runtime.env.clone(),
            read: spec.runtime.sandbox_read.clone(),
            write: spec.runtime.sandbox_write.clone(),
        },
        pre_step,
    }
}

/// The worker's environment: the daemon's through the allowlist and the runtime's own
/// variables (the node's attempt crate adds the adapter's). Without crew's process tags: a
/// remote worker is not this daemon's process, and recovery must not take it for one.
fn worker_env(shared: &Shared, spec: &AttemptSpec) -> crew_staging::Env {
    let mut extra = shared.config.env_passthrough.clone();
    extra.extend(spec.runtime.env.iter().cloned());
    crew_core::worker_env::filter(std::env::vars_os(), &extra, &[])
        .into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// What a staging directory is written from.
struct Contents {
    /// The prompt's name in the directory (`prompts/<task>.md`), and the prompt.
    prompt_name: String,
    prompt: String,
    worker: crew_attempt::WorkerSpec,
    launch: Launch,
    env: crew_staging::Env,
    /// The task's worktree, the start commit the input bundle carries, and the run's id and
    /// base commit (worktree mode) for a thin bundle on it.
    cwd: String,
    start: String,
    run_base: Option<(String, String)>,
}

/// Write the staging directory `dir` (from scratch when `fresh`), unless its launch record
/// says it is complete already.
fn write_staging(dir: &Staging, fresh: bool, mut c: Contents) -> Result<(), String> {
    let e = |what: &str, err: &dyn std::fmt::Display| format!("{what}: {err}");
    if fresh {
        // A directory of an attempt whose job was never journaled, so never submitted
        // (the intent comes first): start it over.
        let _ = std::fs::remove_dir_all(&dir.dir);
    }
    dir.create()
        .map_err(|x| e("cannot create the staging directory", &x))?;
    if !dir.launch().exists() {
        c.launch.base = shared_bundle(
            &c.cwd,
            &c.start,
            c.run_base.as_ref().map(|(r, b)| (r.as_str(), b.as_str())),
            dir,
        )
        .map_err(|x| e("cannot bundle the start commit", &x))?;
        let prompts = dir.dir.join("prompts");
        std::fs::create_dir_all(&prompts).map_err(|x| e("prompts", &x))?;
        crew_staging::write_atomic(&dir.dir.join(&c.prompt_name), c.prompt.as_bytes(), 0o600)
            .map_err(|x| e("prompt", &x))?;
        crew_staging::write_json(&dir.worker(), &c.worker, 0o600)
            .map_err(|x| e("worker spec", &x))?;
        crew_staging::write_json(&dir.env(), &c.env, 0o600).map_err(|x| e("environment", &x))?;
        // Last: a launch means the directory is complete.
        crew_staging::write_json(&dir.launch(), &c.launch, 0o600).map_err(|x| e("launch", &x))?;
    }
    Ok(())
}

/// Earlier attempts looked at for the questions a fresh attempt quotes.
const QUESTIONS_LOOKBACK: u32 = 32;

/// The questions the task's earlier attempts asked before `attempt` (the last `wanted` of
/// them, oldest first), each from the final record of its attempt's staging directory under
/// `staging_dir`, taken only with that attempt's token (what crewd took as the question when
/// the attempt ended). A directory gone or moved (`staging_dir` changed) leaves its question
/// out: the answer is in the prompt anyway.
fn earlier_questions(
    key: &[u8; 32],
    staging_dir: &Path,
    (run_id, task_id, attempt): (&str, &str, u32),
    wanted: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let first = attempt.saturating_sub(QUESTIONS_LOOKBACK).max(1);
    for n in (first..attempt).rev() {
        if out.len() >= wanted {
            break;
        }
        let staging = Staging::new(
            staging_dir
                .join(run_id)
                .join(format!("{task_id}.attempt-{n}")),
        );
        let token =
            slurm::token::derive(key, run_id, task_id, n, &staging.dir.display().to_string());
        if let Ok(Some(crew_staging::Final {
            result: Some(AttemptResult::Asked { question, .. }),
            ..
        })) = crew_staging::read_final(&staging, &token)
        {
            out.push(question);
        }
    }
    out.reverse();
    out
}

/// The attempt's input bundle(s), from a cache per run (`<staging>/<run>/bundles/`, 0700,
/// each file made once and hard-linked into each attempt's directory: a fan-out's 200 tasks
/// all start at the planner's result and share one file):
/// - `<commit>.bundle`: the commit and its whole history;
/// - `<commit>.thin.bundle`: only what the commit has past the run's base (`HEAD ^base`).
///
/// A start commit past the run's base gets its thin bundle as `input.bundle` and the base's
/// whole one as `base.bundle` (`Some(base)`: the worker takes the base first): the history is
/// written once per run, not again for each new start commit (a fix task, each step after
/// one that changed something, an integration). The base itself, a start it is not an
/// ancestor of, or a base without its ref (`refs/crew/<run>/_base`) gets the whole bundle.
fn shared_bundle(
    worktree: &str,
    start: &str,
    run_base: Option<(&str, &str)>,
    staging: &Staging,
) -> std::io::Result<Option<String>> {
    let valid = |c: &str| c.len() >= 40 && c.bytes().all(|b| b.is_ascii_hexdigit());
    let Some(run_dir) = staging.dir.parent().filter(|_| valid(start)) else {
        // `bundle` keeps a file already in place: one of a staging cut short goes first.
        let _ = std::fs::remove_file(staging.input_bundle());
        bundle(worktree, &staging.input_bundle(), &["HEAD"])?;
        return Ok(None);
    };
    let cache = run_dir.join("bundles");
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&cache)?;
    }
    let whole = |commit: &str| cache.join(format!("{commit}.bundle"));
    let thin = cache.join(format!("{start}.thin.bundle"));
    let base = run_base
        .filter(|(_, b)| valid(b) && *b != start)
        .filter(|(run_id, base)| {
            thin.exists() || thin_ok(worktree, run_id, base, start, &whole(base))
        });
    let (input, base) = match base {
        Some((_, base)) => {
            if !thin.exists() {
                bundle(worktree, &thin, &["HEAD", &format!("^{base}")])?;
            }
            link(&whole(base), &staging.base_bundle())?;
            (thin, Some(base.to_string()))
        }
        None => {
            let cached = whole(start);
            if !cached.exists() {
                bundle(worktree, &cached, &["HEAD"])?;
            }
            (cached, None)
        }
    };
    link(&input, &staging.input_bundle())?;
    Ok(base)
}

/// Whether a thin bundle on `base` will do for `start`: the base is an ancestor of it, and the
/// base's whole bundle is in the cache or made now from the run's base ref. `false` sends the
/// attempt the whole history (as before bundles were thin), never a bundle the node cannot use.
fn thin_ok(worktree: &str, run_id: &str, base: &str, start: &str, base_bundle: &Path) -> bool {
    let git_ok = |args: &[&str]| {
        std::process::Command::new("git")
            .args(crew_git::GUARDS)
            .args(args)
            .envs([crate::git_orphans::tag()])
            .current_dir(worktree)
            .stdin(std::process::Stdio::null())
            .output()
    };
    match git_ok(&["merge-base", "--is-ancestor", base, start]) {
        Ok(o) if o.status.success() => {}
        _ => return false,
    }
    if base_bundle.exists() {
        return true;
    }
    // A bundle needs a ref to carry the commit: the run's, kept from `team.run` on.
    let name = crew_core::run::workspace::base_ref(run_id);
    let held = git_ok(&["rev-parse", "--verify", "-q", &format!("{name}^{{commit}}")])
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == base);
    if !held {
        tracing::info!(
            run = run_id,
            "the run's base has no ref: the input bundle holds the whole history"
        );
        return false;
    }
    match bundle(worktree, base_bundle, &[&name]) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "cannot bundle the run's base: the input bundle holds the whole history");
            false
        }
    }
}

/// `to` as a hard link of `from` (a copy on a filesystem without them).
fn link(from: &Path, to: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_file(to);
    match std::fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(_) => std::fs::copy(from, to).map(|_| ()),
    }
}

/// `git bundle create OUT REVS…` in the task's worktree. Two attempts may make the same
/// cached bundle at once: each writes its own temporary file and the first in place stays
/// (a link that fails on an existing name), so every attempt links the one file.
fn bundle(worktree: &str, out: &Path, revs: &[&str]) -> std::io::Result<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = out.with_extension(format!(
        "bundle.tmp-{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let o = std::process::Command::new("git")
        .args(crew_git::GUARDS)
        .envs([crate::git_orphans::tag()])
        .args(["bundle", "create", "-q"])
        .arg(&tmp)
        .args(revs)
        .current_dir(worktree)
        .stdin(std::process::Stdio::null())
        .output()?;
    if !o.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(std::io::Error::other(
            String::from_utf8_lossy(&o.stderr).trim().to_string(),
        ));
    }
    let placed = match std::fs::hard_link(&tmp, out) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            // A filesystem without hard links: the rename (atomic, last one stays).
            return std::fs::rename(&tmp, out);
        }
        _ => Ok(()),
    };
    let _ = std::fs::remove_file(&tmp);
    placed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crew_core::usage::Usage;

    /// The question a fresh attempt quotes is its earlier attempts' own: a final record without
    /// that attempt's token (a stale or foreign worker) is not taken, nor one that did not ask.
    #[test]
    fn earlier_questions_are_taken_only_with_their_attempts_token() {
        let dir = tempfile::tempdir().unwrap();
        let key = [7u8; 32];
        let write = |n: u32, token: Option<&str>, question: Option<&str>| {
            let s = Staging::new(dir.path().join("r1").join(format!("01_a.attempt-{n}")));
            s.create().unwrap();
            let own = slurm::token::derive(&key, "r1", "01_a", n, &s.dir.display().to_string());
            let result = match question {
                Some(q) => AttemptResult::Asked {
                    usage: Usage::default(),
                    model: None,
                    artifacts: vec![],
                    question: q.into(),
                    session: None,
                },
                None => AttemptResult::NoFinalText {
                    usage: Usage::default(),
                    model: None,
                    artifacts: vec![],
                },
            };
            let fin = crew_staging::Final {
                version: crew_staging::VERSION,
                token: token.map_or(own, str::to_string),
                result: Some(result),
                terminated: false,
                commit: None,
                host: "n1".into(),
                error: None,
                unboxed: None,
            };
            crew_staging::write_json(&s.final_record(), &fin, 0o600).unwrap();
        };
        write(1, None, Some("first?"));
        write(2, None, None);
        write(3, Some("stale"), Some("injected?"));
        write(4, None, Some("second?"));
        let got =
            |attempt, wanted| earlier_questions(&key, dir.path(), ("r1", "01_a", attempt), wanted);
        assert_eq!(got(5, 2), ["first?", "second?"]);
        assert_eq!(got(5, 1), ["second?"]);
        assert_eq!(got(4, 5), ["first?"]);
        assert!(got(1, 1).is_empty());
        // Another key (another daemon's state) takes nothing.
        assert!(earlier_questions(&[8u8; 32], dir.path(), ("r1", "01_a", 5), 2).is_empty());
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let o = std::process::Command::new("git")
            .args(["-c", "user.name=u", "-c", "user.email=u@x"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// A start past the run's base gets a thin bundle and the base's, each made once per run;
    /// a start the base is not an ancestor of, or a base whose ref is gone, the whole history.
    #[test]
    fn a_start_past_the_base_gets_a_thin_bundle_else_the_whole_history() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        let commit = |name: &str| {
            std::fs::write(repo.join(format!("{name}.txt")), name).unwrap();
            git(&repo, &["add", "-A"]);
            git(&repo, &["commit", "-qm", name]);
            git(&repo, &["rev-parse", "HEAD"])
        };
        commit("one");
        let base = commit("two");
        git(&repo, &["update-ref", "refs/crew/r1/_base", &base]);
        let past = commit("three");
        git(&repo, &["checkout", "-q", "--orphan", "other"]);
        let elsewhere = commit("four");
        let w = repo.display().to_string();
        let run = t.path().join("staging/r1");
        let attempt = |name: &str, at: &str| {
            git(&repo, &["checkout", "-q", "--detach", at]);
            let s = Staging::new(run.join(name));
            s.create().unwrap();
            let b = shared_bundle(&w, at, Some(("r1", &base)), &s).unwrap();
            (s, b)
        };
        let requires = |s: &Staging| {
            git(
                &repo,
                &["bundle", "verify", &s.input_bundle().display().to_string()],
            )
        };

        let (s, b) = attempt("a.attempt-1", &past);
        assert_eq!(b.as_deref(), Some(base.as_str()));
        assert!(requires(&s).contains(&base));
        assert!(s.base_bundle().exists());
        assert!(run.join(format!("bundles/{past}.thin.bundle")).exists());
        assert!(run.join(format!("bundles/{base}.bundle")).exists());

        let (s, b) = attempt("b.attempt-1", &elsewhere);
        assert_eq!(b, None);
        assert!(
            !requires(&s).contains("requires this ref"),
            "{}",
            requires(&s)
        );
        assert!(!s.base_bundle().exists());

        let (s, b) = attempt("c.attempt-1", &base);
        assert_eq!(b, None);
        assert!(!s.base_bundle().exists());

        // Another run whose base ref is gone: whole.
        git(&repo, &["update-ref", "-d", "refs/crew/r1/_base"]);
        let s = Staging::new(t.path().join("staging/r2/a.attempt-1"));
        s.create().unwrap();
        git(&repo, &["checkout", "-q", "--detach", &past]);
        assert_eq!(
            shared_bundle(&w, &past, Some(("r2", &base)), &s).unwrap(),
            None
        );
        assert!(!requires(&s).contains("requires this ref"));
    }
}
