//! Reading runs: status, the list, events, artifacts, the summary. Files are read off the
//! actor (`off_actor`).

use super::{check_id, in_range, with_run, Out, P};
use crate::rpc::{off_actor, views, Ctx};
use crew_api::methods::*;
use crew_api::types::*;
use crew_api::ApiError;
use std::ops::Bound;
use std::sync::Arc;

pub(super) async fn status(ctx: Arc<Ctx>, p: P<TeamStatus>) -> Out<TeamStatus> {
    with_run(&ctx, &p.run_id, views::status).await
}

pub(super) async fn list(ctx: Arc<Ctx>, p: P<TeamList>) -> Out<TeamList> {
    let limit = in_range("limit", p.limit.unwrap_or(50), 1..=1000)?;
    if let Some(b) = &p.before {
        check_id("before", b)?;
    }
    let want = p.status.map(views::run_status_from_api);
    ctx.actor
        .call(move |core| {
            // Newest first, starting below `before` without walking the newer ones.
            let below = p.before.clone().map_or(Bound::Unbounded, Bound::Excluded);
            let iter = core.state.summaries.range((Bound::Unbounded, below)).rev();
            let mut runs = Vec::new();
            let mut next = None;
            for (_, s) in iter {
                if want.is_some_and(|w| w != s.status)
                    || p.team.as_ref().is_some_and(|t| *t != s.team)
                {
                    continue;
                }
                if runs.len() == limit as usize {
                    next = runs.last().map(|r: &RunSummaryView| r.id.clone());
                    break;
                }
                runs.push(views::summary(s));
            }
            Ok(ListResult { runs, next })
        })
        .await
}

pub(super) async fn events(ctx: Arc<Ctx>, p: P<TeamEvents>) -> Out<TeamEvents> {
    let after = p.after_seq.unwrap_or(0);
    if after < 0 {
        return Err(ApiError::invalid_params("afterSeq", "must not be negative"));
    }
    let limit = in_range("limit", p.limit.unwrap_or(500), 1..=5000)?;
    if let Some(r) = &p.run_id {
        check_id("runId", r)?;
        let r2 = r.clone();
        if !ctx
            .actor
            .call(move |core| Ok(core.state.summaries.contains_key(&r2)))
            .await?
        {
            return Err(ApiError::not_found("run", r));
        }
    }
    let shared = ctx.shared.clone();
    let run = p.run_id.clone();
    off_actor(move || {
        crate::rpc::subscribe::read_events(&shared, run.as_deref(), after as u64, limit as usize)
    })
    .await?
    .map(|(events, next_seq)| EventsResult { events, next_seq })
}

pub(super) async fn artifacts(ctx: Arc<Ctx>, p: P<TeamArtifacts>) -> Out<TeamArtifacts> {
    let (mut artifacts, prompts) = with_run(&ctx, &p.run_id, |r| {
        let listed: Vec<ArtifactInfo> = r
            .tasks
            .iter()
            .flat_map(|t| {
                t.artifacts
                    .iter()
                    .map(|a| views::artifact(&a, Some(&t.plan.id)))
            })
            .collect();
        (listed, crate::system_prompts::of_run(r))
    })
    .await?;
    // No event names the system prompt files (they are the workers' input, see
    // `crew_attempt::command::system_prompt_file`): listed when on disk, read off the actor.
    let dir = ctx.shared.run_dir(&check_id("runId", &p.run_id)?);
    let found = off_actor(move || crate::system_prompts::on_disk(&dir, prompts)).await?;
    artifacts.extend(found);
    Ok(ArtifactsResult { artifacts })
}

pub(super) async fn artifact(ctx: Arc<Ctx>, p: P<TeamArtifact>) -> Out<TeamArtifact> {
    let run_id = check_id("runId", &p.run_id)?;
    if !crew_core::ids::is_safe_artifact_name(&p.name) {
        return Err(ApiError::invalid_params(
            "name",
            "must be a relative artifact name like results/01_explore.txt",
        ));
    }
    let offset = p.offset.unwrap_or(0);
    let limit = p.limit.unwrap_or(1 << 20);
    if offset < 0 {
        return Err(ApiError::invalid_params("offset", "must not be negative"));
    }
    in_range("limit", limit, 1..=(8 << 20))?;
    // A step with candidates: its artifact is the chosen candidate's (issue 36).
    let mut file = p.name.clone();
    if let Some(name) = p.name.strip_prefix("shared/").map(str::to_string) {
        let from = with_run(&ctx, &p.run_id, move |r| {
            crew_core::run::candidates::output_source(r, &name)
        })
        .await
        .ok()
        .flatten();
        if let Some(from) = from {
            file = format!("shared/{from}");
        }
    }
    let path = ctx.shared.run_dir(&run_id).join(&file);
    let name = p.name.clone();
    off_actor(move || {
        use std::io::{Read, Seek, SeekFrom};
        let mut f =
            std::fs::File::open(&path).map_err(|_| ApiError::not_found("artifact", &name))?;
        let bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
        let mut buf = Vec::new();
        // Past the end is an empty read, not a seek the kernel refuses (offsets > i64::MAX
        // of a file position) and answers with an internal error.
        if (offset as u64) < bytes {
            f.seek(SeekFrom::Start(offset as u64))
                .map_err(|e| ApiError::internal(e.to_string()))?;
            f.take(limit as u64)
                .read_to_end(&mut buf)
                .map_err(|e| ApiError::internal(e.to_string()))?;
        }
        if (offset as u64) + (buf.len() as u64) < bytes {
            buf.truncate(whole_chars(&buf));
        }
        let read = buf.len() as u64;
        let truncated = (offset as u64) + read < bytes;
        Ok(ArtifactResult {
            content: String::from_utf8_lossy(&buf).into_owned(),
            bytes,
            truncated,
            read: Some(read),
        })
    })
    .await?
}

/// How much of `buf` to send when the file goes on after it: up to its last whole UTF-8
/// character, so a character the page's end cuts is sent whole with the next page instead of
/// as U+FFFD here and its rest there. Never nothing when there is something (a page smaller
/// than one character): a pager must move on.
fn whole_chars(buf: &[u8]) -> usize {
    match cut_before_partial(buf) {
        0 => buf.len(),
        n => n,
    }
}

fn cut_before_partial(buf: &[u8]) -> usize {
    let n = buf.len();
    for back in 1..=n.min(4) {
        let Some(&b) = buf.get(n - back) else { break };
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: its lead is further back
        }
        let need = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if back < need { n - back } else { n };
    }
    n
}

pub(super) async fn summary(ctx: Arc<Ctx>, p: P<TeamSummary>) -> Out<TeamSummary> {
    let run_id = check_id("runId", &p.run_id)?;
    let status = with_run(&ctx, &p.run_id, views::status).await?;
    let dir = ctx.shared.run_dir(&run_id);
    // Reads the result files: off the async workers.
    let markdown = off_actor(move || crate::summary::markdown(&status, &dir)).await?;
    Ok(SummaryResult { markdown })
}

#[cfg(test)]
mod tests {
    use super::whole_chars;

    #[test]
    fn a_page_ends_after_its_last_whole_character() {
        let e = "é".as_bytes(); // 2 bytes
        let euro = "€".as_bytes(); // 3 bytes
        let table: &[(&[u8], usize)] = &[
            (b"abc", 3),
            (&[b'a', e[0]], 1),
            (&[b'a', e[0], e[1]], 3),
            (&[b'a', euro[0], euro[1]], 1),
            (&[euro[0]], 1), // a page smaller than the character: sent, so paging moves on
            (&[b'a', 0xFF], 2), // not UTF-8 at all: sent (as U+FFFD)
            (&[], 0),
        ];
        for (buf, want) in table {
            assert_eq!(whole_chars(buf), *want, "{buf:?}");
        }
    }
}
