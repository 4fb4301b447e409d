//! `team.apply`: bring exactly a run's reviewed change (`base..result`, what `team.diff` shows)
//! into the user's checked-out branch, all or nothing.
//!
//! 1. One apply per repository at a time (`repo_lock`, keyed by the common git dir), and the
//!    checkout's `index.lock` taken as git takes it, so the user's own git commands wait or
//!    fail cleanly instead of racing.
//! 2. Refused while a merge, rebase, cherry-pick, revert or bisect is in progress, or with
//!    uncommitted changes.
//! 3. The commit is built without the work tree: a three-way merge of the result onto HEAD
//!    with the run's base as the merge base (`merge-tree --merge-base`: a snapshot of a dirty
//!    tree or a commit the user dropped since never comes along), then `commit-tree` as the
//!    user (their identity and signing; a signing failure is a refusal with nothing changed).
//!    A fast-forward only when HEAD is still the run's clean base; a merge commit only when the
//!    base is on the user's branch and is not a snapshot; otherwise one commit.
//! 4. The intent is journaled (a file under `<state>/applies/`, fsynced), then the branch is
//!    moved by compare-and-swap (`update-ref NEW OLD`: a commit the user made meanwhile is
//!    never overwritten), then the checkout is brought along in a copy of the index that is
//!    renamed into place. A failure moves the branch back. After a `kill -9`, `recover` (at
//!    start-up, before the socket accepts) finishes the checkout when the branch had moved,
//!    else leaves it: old or new, never mixed.

use super::{git, short};
use crate::shared::Shared;
use crew_api::types as api;
use crew_api::ApiError;
use crew_core::run::{Integration, WorkspaceSpec};
use crew_git::{GitError, Identity, Repo};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct ApplyInput {
    pub run_id: String,
    pub goal: String,
    pub ws: WorkspaceSpec,
    pub integration: Integration,
    pub squash: bool,
    /// The caller's directory (`ApplyParams::from_dir`).
    pub from_dir: Option<PathBuf>,
}

/// One apply (or recovery) per repository at a time, in this daemon.
fn repo_lock(common: &Path) -> Arc<tokio::sync::Mutex<()>> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let key = common
        .canonicalize()
        .unwrap_or_else(|_| common.to_path_buf());
    let mut map = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    map.entry(key).or_default().clone()
}

/// What an apply is about to do, on disk before the branch moves.
#[derive(Debug, Serialize, Deserialize)]
struct Intent {
    repo: String,
    /// The branch moved (`None`: a detached HEAD).
    head_ref: Option<String>,
    old: String,
    new: String,
    index: PathBuf,
    tmp_index: PathBuf,
    marker: String,
}

fn intents_dir(shared: &Shared) -> PathBuf {
    shared.state_dir.join("applies")
}

/// The checkout's `index.lock`, taken as git takes it (`O_EXCL`) and holding a marker, so that
/// after a crash crew removes only a lock of its own. A record of it (`<id>.lock.json` beside
/// the intents, written before the lock is taken) lets the next start find it when a crash
/// comes before the intent (a slow signing of the commit, say): without it the lock stayed and
/// every git command of the user's failed.
struct IndexLock {
    path: PathBuf,
    record: PathBuf,
}

/// What the record of an index lock holds.
#[derive(Debug, Serialize, Deserialize)]
struct LockRecord {
    lock: PathBuf,
    marker: String,
}

const LOCK_RECORD: &str = ".lock.json";

/// Why the index lock was not taken: its record could not be written (crew's state
/// directory), or the lock itself (someone else's git holds it).
enum LockFailed {
    Record(std::io::Error),
    Lock(std::io::Error),
}

impl IndexLock {
    fn take(path: &Path, marker: &str, record: PathBuf) -> Result<IndexLock, LockFailed> {
        use std::io::Write;
        let bytes = serde_json::to_vec(&LockRecord {
            lock: path.to_path_buf(),
            marker: marker.to_string(),
        })
        .map_err(|e| LockFailed::Record(e.into()))?;
        write_intent(&record, &bytes).map_err(LockFailed::Record)?;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path);
        let mut f = match f {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&record);
                return Err(LockFailed::Lock(e));
            }
        };
        let lock = IndexLock {
            path: path.to_path_buf(),
            record,
        };
        f.write_all(marker.as_bytes()).map_err(LockFailed::Lock)?;
        Ok(lock)
    }
}

impl Drop for IndexLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(&self.record);
    }
}

fn remove_own_lock(path: &Path, marker: &str) {
    if std::fs::read_to_string(path).is_ok_and(|s| s == marker) {
        let _ = std::fs::remove_file(path);
    }
}

fn write_intent(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

fn internal(e: GitError) -> ApiError {
    ApiError::internal(format!("git: {e}"))
}

/// A git failure of the checks before anything changes: a file name crew cannot handle is the
/// run's to merge by hand, said as such; anything else is crew's own failure.
fn checking(input: &ApplyInput) -> impl Fn(GitError) -> ApiError + '_ {
    move |e| match e {
        GitError::NotUtf8(_) => ApiError::invalid_state(format!(
            "cannot apply run {}: its change has {e}; merge {} by hand (nothing was changed)",
            input.run_id, input.integration.branch
        )),
        e => internal(e),
    }
}

/// The commit message on the user's branch: the goal (its first line the subject) and the run.
fn message(input: &ApplyInput) -> String {
    let goal = input.goal.trim();
    let mut lines = goal.lines();
    let first = lines.next().unwrap_or("crew run").trim();
    let subject: String = if first.chars().count() > 72 {
        let mut s: String = first.chars().take(71).collect();
        s.push('…');
        s
    } else {
        first.to_string()
    };
    let rest: String = lines.collect::<Vec<_>>().join("\n");
    let rest = rest.trim();
    let mut body: String = rest.chars().take(4000).collect();
    if body.len() < rest.len() {
        body.push('…');
    }
    let mut m = subject;
    m.push_str("\n\n");
    if !body.is_empty() {
        m.push_str(&body);
        m.push_str("\n\n");
    }
    m.push_str(&format!(
        "Applied from crew run {} ({}).\n",
        input.run_id, input.integration.branch
    ));
    m
}

pub async fn apply(shared: &Shared, input: ApplyInput) -> Result<api::ApplyResult, ApiError> {
    let ws = &input.ws;
    super::repository_there(&ws.repo)?;
    let git = git(shared);
    let repo = git.repo(&ws.repo);
    super::commits_there(
        &repo,
        &[
            ("base", ws.base.as_str()),
            ("result", input.integration.commit.as_str()),
        ],
    )
    .await?;
    let common = repo.common_dir().await.map_err(internal)?;
    let lock = repo_lock(&common);
    let _one_at_a_time = lock.lock().await;
    let checkout = ws.repo.clone();
    refuse_in_progress(&repo, &checkout).await?;
    let index = repo.git_path("index").await.map_err(internal)?;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let marker = format!("crew apply {id}\n");
    let record = intents_dir(shared).join(format!("{id}{LOCK_RECORD}"));
    let _index_lock = lock_index(&index, &marker, &checkout, record)?;
    refuse_dirty(&repo, &input).await?;
    let branch = repo.current_branch().await.map_err(internal)?;
    let head_ref = repo.head_ref().await.map_err(internal)?;
    let Some(head) = repo.head().await.map_err(internal)? else {
        return Err(ApiError::invalid_state(format!(
            "{checkout} has no commit checked out"
        )));
    };
    let stat = repo
        .diffstat(&ws.base, &input.integration.commit)
        .await
        .map_err(internal)?;
    let mut notes = Vec::new();
    let done = |head: String, how: &str, notes: Vec<String>| api::ApplyResult {
        branch: branch.clone(),
        head,
        how: how.to_string(),
        files: stat.files,
        insertions: stat.insertions,
        deletions: stat.deletions,
        checkout: checkout.clone(),
        notes,
    };
    let tree = merged_tree(&repo, &input, &head).await?;
    if tree == repo.tree_of(&head).await.map_err(internal)? {
        return Ok(done(head, "up_to_date", notes));
    }
    refuse_in_the_way(&repo, &input, &head, &tree).await?;
    let (new, how) = new_commit(&repo, &input, &head, &tree, &mut notes).await?;
    let intent = Intent {
        repo: ws.repo.clone(),
        head_ref,
        old: head,
        new: new.clone(),
        tmp_index: index.with_file_name(format!("index.crew-{id}")),
        index,
        marker,
    };
    let intent_file = record_intent(shared, &id, &intent).await?;
    let files = checkout_from(&git, &ws.repo, input.from_dir.as_deref()).await;
    switch(&repo, &files, &intent, &intent_file, &input.run_id).await?;
    Ok(done(new, how, notes))
}

/// Step 2: no apply into a merge, rebase, cherry-pick, revert or bisect in progress.
async fn refuse_in_progress(repo: &Repo, checkout: &str) -> Result<(), ApiError> {
    match repo.in_progress().await.map_err(internal)? {
        Some(op) => Err(ApiError::invalid_state(format!(
            "{checkout} is in the middle of {}: finish it first ({}), then apply again; \
             nothing was changed",
            op.as_str(),
            op.way_out()
        ))),
        None => Ok(()),
    }
}

/// Step 1: the checkout's `index.lock`, so the user's own git commands wait or fail cleanly.
fn lock_index(
    index: &Path,
    marker: &str,
    checkout: &str,
    record: PathBuf,
) -> Result<IndexLock, ApiError> {
    let lock_path = index.with_file_name("index.lock");
    IndexLock::take(&lock_path, marker, record).map_err(|e| match e {
        LockFailed::Record(e) => ApiError::internal(format!(
            "cannot record the apply's lock in crewd's state directory ({e}); nothing was \
             changed"
        )),
        LockFailed::Lock(e) => ApiError::invalid_state(format!(
            "cannot lock {} ({e}): another git command is running in {checkout}; apply again \
             when it is done (remove the file if no git command is running)",
            lock_path.display()
        )),
    })
}

/// Step 2: no apply over uncommitted changes.
async fn refuse_dirty(repo: &Repo, input: &ApplyInput) -> Result<(), ApiError> {
    let dirty = repo.dirty_paths().await.map_err(internal)?;
    if dirty.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = dirty.iter().take(10).map(String::as_str).collect();
    Err(ApiError::invalid_state(format!(
        "your work tree {} has uncommitted changes ({}): commit or stash them, then \
         apply again (or merge {} by hand)",
        input.ws.repo,
        shown.join(", "),
        input.integration.branch
    )))
}

/// Step 2: nothing the status does not show is lost either: edits to files git is told not
/// to look at, ignored files where the change puts a path, a submodule's own changes where the
/// change removes it.
async fn refuse_in_the_way(
    repo: &Repo,
    input: &ApplyInput,
    head: &str,
    tree: &str,
) -> Result<(), ApiError> {
    let hidden = repo
        .hidden_edits(head, tree)
        .await
        .map_err(checking(input))?;
    if !hidden.is_empty() {
        return Err(ApiError::invalid_state(format!(
            "applying run {} would overwrite your edits to files git is told not to look at \
             (assume-unchanged or skip-worktree, so `git status` does not show them): {}. \
             Commit or restore them (`git update-index --no-assume-unchanged --no-skip-worktree \
             <file>` shows them to git again), then apply again (or merge {} by hand); nothing \
             was changed",
            input.run_id,
            shown_paths(&hidden),
            input.integration.branch
        )));
    }
    let found = repo.in_the_way(head, tree).await.map_err(checking(input))?;
    if found.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_state(format!(
        "applying run {} would overwrite or delete what is yours in {} and not in `git \
         status`: {}. Move it aside, then apply again (or merge {} by hand); nothing was \
         changed",
        input.run_id,
        input.ws.repo,
        shown_paths(&found),
        input.integration.branch
    )))
}

/// Step 3: the result merged onto HEAD with the run's base as the merge base, as a tree; a
/// conflict is a refusal naming the paths.
async fn merged_tree(repo: &Repo, input: &ApplyInput, head: &str) -> Result<String, ApiError> {
    let ws = &input.ws;
    match repo
        .merge_onto(&ws.base, head, &input.integration.commit)
        .await
        .map_err(internal)?
    {
        Ok(tree) => Ok(tree),
        Err(paths) => Err(ApiError::invalid_state(format!(
            "your branch moved since run {} started ({} → {}) and its changes conflict \
             with the run's in: {}. Merge {} by hand; nothing was changed",
            input.run_id,
            short(ws.head.as_deref().unwrap_or(&ws.base)),
            short(head),
            paths.join(", "),
            input.integration.branch
        ))),
    }
}

/// Step 3: the commit the branch moves to, and how: a fast-forward only when HEAD is still
/// the run's clean base; a merge commit only when the base is on the user's branch and is not
/// a snapshot; otherwise one commit (made as the user when git knows who they are).
async fn new_commit(
    repo: &Repo,
    input: &ApplyInput,
    head: &str,
    tree: &str,
    notes: &mut Vec<String>,
) -> Result<(String, &'static str), ApiError> {
    let ws = &input.ws;
    let target = input.integration.commit.as_str();
    if !input.squash && head == ws.base && !ws.dirty {
        // Nothing but the run's own commits lie between HEAD and the result.
        return Ok((target.to_string(), "fast_forward"));
    }
    let merge =
        !input.squash && !ws.dirty && repo.is_ancestor(&ws.base, head).await.map_err(internal)?;
    if !input.squash && !merge {
        notes.push(format!(
            "the change went in as one commit: a merge commit would bring the run's base \
             into your history ({})",
            if ws.dirty {
                "a snapshot of the uncommitted changes the run started from"
            } else {
                "a commit no longer on your branch"
            }
        ));
    }
    let who = if repo.user_identity_configured().await.map_err(internal)? {
        Identity::User
    } else {
        notes.push(
            "no git identity is configured for this repository (user.name, user.email): \
             the commit is crew's (crew <crew@localhost>); set yours and `git commit \
             --amend --reset-author` if you like"
                .into(),
        );
        Identity::Crew
    };
    let parents: Vec<&str> = if merge {
        vec![head, target]
    } else {
        vec![head]
    };
    let commit = repo
        .commit_tree(tree, &parents, &message(input), who)
        .await
        .map_err(|e| refused_commit(input, e))?;
    Ok((commit, if merge { "merge" } else { "squash" }))
}

/// Step 4: the intent on disk, fsynced, before the branch moves; returns its file.
async fn record_intent(shared: &Shared, id: &str, intent: &Intent) -> Result<PathBuf, ApiError> {
    let intent_file = intents_dir(shared).join(format!("{id}.json"));
    let bytes = serde_json::to_vec(intent).map_err(|e| ApiError::internal(e.to_string()))?;
    let p = intent_file.clone();
    tokio::task::spawn_blocking(move || write_intent(&p, &bytes))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(|e| {
            ApiError::internal(format!(
                "cannot record the apply's intent: {e}; nothing was changed"
            ))
        })?;
    Ok(intent_file)
}

/// Step 4: the branch moved by compare-and-swap, then the checkout brought along; a failure
/// of the checkout moves the branch back. The intent goes once nothing is left to finish.
async fn switch(
    repo: &Repo,
    files: &Repo,
    intent: &Intent,
    intent_file: &Path,
    run_id: &str,
) -> Result<(), ApiError> {
    let reason = format!("crew: apply run {run_id}");
    let head_ref = intent.head_ref.as_deref();
    if let Err(e) = repo
        .move_ref(head_ref, &intent.new, &intent.old, &reason)
        .await
    {
        let _ = std::fs::remove_file(intent_file);
        return Err(ApiError::invalid_state(format!(
            "your branch moved while the run's change was being applied ({e}); nothing was \
             changed: apply again"
        )));
    }
    // Files already where the change adds one (untracked, in the way): never crew's to put
    // back, whatever the checkout did.
    let present = repo
        .added_present(&intent.old, &intent.new)
        .await
        .unwrap_or_default();
    if let Err(e) = bring_checkout(files, intent).await {
        let back = repo
            .move_ref(head_ref, &intent.old, &intent.new, &reason)
            .await;
        let _ = std::fs::remove_file(&intent.tmp_index);
        let why = format!(
            "cannot update your checkout {} to the applied commit: {e}",
            intent.repo
        );
        if let Err(b) = back {
            // The intent stays: the next start finds the branch at the new commit and brings
            // the checkout along.
            return Err(ApiError::invalid_state(format!(
                "{why}; and your branch could not be moved back ({b}): crewd finishes the \
                 checkout at the applied commit when it next starts"
            )));
        }
        let _ = std::fs::remove_file(intent_file);
        // git may have written some files before it failed (a smudge filter that failed on a
        // later one, a full disk, the time limit): they go back to the old commit's version.
        return Err(ApiError::invalid_state(
            match put_back(repo, intent, &present).await {
                Ok(left) if left.is_empty() => {
                    format!("{why}; your branch and checkout are as they were")
                }
                Ok(left) => format!(
                    "{why}; your branch is as it was, and so is your checkout but for {} file(s) \
                 git had begun to write that could not be put back (they hold neither version): {}",
                    left.len(),
                    shown_paths(&left)
                ),
                Err(p) => format!(
                    "{why}; your branch is as it was, but the files git had begun to write could \
                 not be put back ({p}): `git status` shows them"
                ),
            },
        ));
    }
    let _ = std::fs::remove_file(intent_file);
    Ok(())
}

/// The files of the change the failed checkout had written, back to the old commit's version
/// (from a copy of the index, which git had left at the old commit); those left as they are.
async fn put_back(repo: &Repo, intent: &Intent, leave: &[String]) -> Result<Vec<String>, GitError> {
    tokio::fs::copy(&intent.index, &intent.tmp_index).await?;
    let left = repo
        .converge(&intent.tmp_index, &intent.new, &intent.old, leave)
        .await;
    let _ = tokio::fs::remove_file(&intent.tmp_index).await;
    left
}

/// At most a few paths, for a message.
fn shown_paths(paths: &[String]) -> String {
    let mut shown: Vec<String> = paths
        .iter()
        .take(10)
        .map(|p| crew_core::text::escape(p).to_string())
        .collect();
    if paths.len() > 10 {
        shown.push(format!("and {} more", paths.len() - 10));
    }
    shown.join(", ")
}

fn refused_commit(input: &ApplyInput, e: GitError) -> ApiError {
    let text = e.to_string();
    let hint = if text.contains("gpg") || text.contains("sign") {
        " Signing the commit failed (your config sets commit.gpgSign): make your signing key's \
         agent reachable from crewd (it runs without your terminal, e.g. under systemd), or \
         merge the branch yourself."
    } else {
        ""
    };
    ApiError::invalid_state(format!(
        "cannot make the commit on your branch: {text}.{hint} Nothing was changed (the run's \
         result stays on {}).",
        input.integration.branch
    ))
}

/// Where git brings the checkout's files along from: the caller's directory when it is in the
/// checkout's own work tree (not a nested repository's, not elsewhere), so git keeps it
/// (a directory the change empties and fills again is not removed under the caller's shell);
/// else the checkout's top.
async fn checkout_from(git: &crew_git::Git, checkout: &str, from: Option<&Path>) -> Repo {
    let top = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    if let Some(dir) = from.filter(|d| d.is_absolute()) {
        if let (Ok(Some(there)), Ok(Some(ours))) = (
            git.toplevel(dir).await,
            git.toplevel(Path::new(checkout)).await,
        ) {
            if top(there) == top(ours) {
                return git.repo(dir);
            }
        }
    }
    git.repo(checkout)
}

/// Bring the work tree and index from `old` to `new` in a copy of the index, then rename it
/// into place.
async fn bring_checkout(repo: &Repo, intent: &Intent) -> Result<(), GitError> {
    copy_index(intent).await?;
    repo.check_out(&intent.tmp_index, &intent.old, &intent.new)
        .await?;
    tokio::fs::rename(&intent.tmp_index, &intent.index).await?;
    Ok(())
}

/// Finish a checkout a crash cut short: the index moved to `new` in a copy, the files of the
/// change that still hold the old version (or nothing) written, the copy put in place. Files
/// the change does not touch are not looked at, so an edit made while crewd was down stays;
/// so does one to a file of the change (returned).
async fn finish_checkout(repo: &Repo, intent: &Intent) -> Result<Vec<String>, GitError> {
    copy_index(intent).await?;
    repo.merge_index(&intent.tmp_index, &intent.old, &intent.new)
        .await?;
    let left = repo
        .converge(&intent.tmp_index, &intent.old, &intent.new, &[])
        .await?;
    tokio::fs::rename(&intent.tmp_index, &intent.index).await?;
    Ok(left)
}

/// The checkout's index copied to the intent's temporary index (none yet: none copied).
async fn copy_index(intent: &Intent) -> Result<(), GitError> {
    match tokio::fs::copy(&intent.index, &intent.tmp_index).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn read_intent(path: &Path) -> Option<Intent> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// At start-up, before the socket accepts: finish or drop the applies a killed daemon left.
pub async fn recover(shared: &Shared) {
    let dir = intents_dir(shared);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return;
    };
    let git = git(shared);
    let mut lock_records = Vec::new();
    for entry in rd.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "tmp") {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        if path.to_string_lossy().ends_with(LOCK_RECORD) {
            // After the intents: an intent's recovery holds its lock while it works.
            lock_records.push(path);
            continue;
        }
        let Some(intent) = read_intent(&path) else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        if !Path::new(&intent.repo).is_dir() {
            tracing::warn!(repo = %intent.repo, "an apply cut short by a crash, in a repository that is gone: dropped");
            let _ = std::fs::remove_file(&path);
            continue;
        }
        let repo = git.repo(&intent.repo);
        // What the killed git left of the index copy (and its lock) goes first.
        let mut tmp_lock = intent.tmp_index.clone().into_os_string();
        tmp_lock.push(".lock");
        let _ = std::fs::remove_file(&tmp_lock);
        let _ = std::fs::remove_file(&intent.tmp_index);
        let at = match &intent.head_ref {
            Some(r) => repo.resolve(r).await,
            None => repo.head().await,
        };
        let outcome = match at {
            Ok(Some(c)) if c == intent.new => match repo.index_is(None, &intent.new).await {
                Ok(true) => Ok("the apply had finished"),
                _ => finish_checkout(&repo, &intent).await.map(|left| {
                    if !left.is_empty() {
                        tracing::warn!(repo = %intent.repo, files = %shown_paths(&left), "an apply cut short by a crash: files of the change that hold neither version were left as they are");
                    }
                    "finished bringing the checkout to the applied commit"
                }),
            },
            Ok(Some(c)) if c == intent.old => Ok("the branch had not moved: left as it was"),
            Ok(_) => Ok("the branch moved since: left as it is"),
            Err(e) => Err(e),
        };
        let _ = std::fs::remove_file(&intent.tmp_index);
        let _ = std::fs::remove_file(&tmp_lock);
        remove_own_lock(&intent.index.with_file_name("index.lock"), &intent.marker);
        match outcome {
            Ok(what) => {
                tracing::info!(repo = %intent.repo, old = %short(&intent.old), new = %short(&intent.new), "an apply cut short by a crash: {what}");
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => {
                tracing::warn!(repo = %intent.repo, error = %e, "cannot finish an apply cut short by a crash; its intent is kept for the next start")
            }
        }
    }
    // Index locks of applies killed before their intent was written: gone if still ours.
    for path in lock_records {
        let rec: Option<LockRecord> = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(rec) = rec {
            if std::fs::read_to_string(&rec.lock).is_ok_and(|s| s == rec.marker) {
                tracing::info!(lock = %rec.lock.display(), "removing the index lock of an apply a crash cut short before it changed anything");
            }
            remove_own_lock(&rec.lock, &rec.marker);
        }
        let _ = std::fs::remove_file(&path);
    }
}
