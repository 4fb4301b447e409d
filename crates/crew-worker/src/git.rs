//! The node's side of the commits: the start commit checked out from the input bundle, and the
//! agent's changes committed and bundled as the result.

use anyhow::{bail, Context, Result};
use crew_staging::{Launch, Staging};
use std::path::Path;
use std::process::{Command, Stdio};

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .arg("-c")
        .arg("core.hooksPath=/dev/null")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "crew")
        .env("GIT_AUTHOR_EMAIL", "crew@localhost")
        .env("GIT_COMMITTER_NAME", "crew")
        .env("GIT_COMMITTER_EMAIL", "crew@localhost")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("git {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The start commit, checked out detached in a fresh repository.
pub fn checkout(staging: &Staging, launch: &Launch, work: &Path) -> Result<()> {
    std::fs::create_dir_all(work).with_context(|| format!("create {}", work.display()))?;
    git(work, &["init", "-q"])?;
    let bundle = staging.input_bundle().display().to_string();
    git(work, &["fetch", "-q", &bundle, crew_staging::START_REF])?;
    git(work, &["checkout", "-q", "--detach", &launch.start])?;
    Ok(())
}

/// Commit what the agent changed and bundle it: `None` when it changed nothing.
pub fn commit(staging: &Staging, launch: &Launch, work: &Path) -> Result<Option<String>> {
    git(work, &["add", "-A"])?;
    if git(work, &["status", "--porcelain"])?.is_empty() {
        return Ok(None);
    }
    git(
        work,
        &["commit", "-q", "--no-verify", "-m", &launch.message],
    )?;
    let head = git(work, &["rev-parse", "HEAD"])?;
    git(work, &["update-ref", crew_staging::RESULT_REF, &head])?;
    let tmp = staging.dir.join("result.bundle.tmp");
    let tmp_s = tmp.display().to_string();
    let not_start = format!("^{}", launch.start);
    git(
        work,
        &[
            "bundle",
            "create",
            "-q",
            &tmp_s,
            crew_staging::RESULT_REF,
            &not_start,
        ],
    )?;
    std::fs::rename(&tmp, staging.result_bundle()).context("rename the result bundle")?;
    Ok(Some(head))
}
