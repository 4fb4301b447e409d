//! `cache stats|clear|invalidate`.

use crate::cli::{CacheArg, CacheCmd};
use crate::ctx::{abs_dir, out, outln, Ctx};
use crate::exit;
use crate::render::cache as view_cache;
use crew_api::methods::{CacheClear, CacheInvalidate, CacheStats};
use crew_api::types::{CacheClearParams, CacheInvalidateParams, CacheName, NoParams};

pub async fn dispatch(ctx: &Ctx, cmd: CacheCmd) -> anyhow::Result<u8> {
    let conn = ctx.connect().await?;
    match cmd {
        CacheCmd::Stats => {
            let s = conn.call::<CacheStats>(&NoParams {}).await?;
            if ctx.json {
                ctx.json(&s)?;
            } else {
                out(&view_cache::stats(&ctx.view(), &s))?;
            }
        }
        CacheCmd::Clear { cache } => {
            let name = cache.map(|c| match c {
                CacheArg::Resources => CacheName::Resources,
                CacheArg::Results => CacheName::Results,
                CacheArg::Runs => CacheName::Runs,
                CacheArg::All => CacheName::All,
            });
            let r = conn
                .call::<CacheClear>(&CacheClearParams { cache: name })
                .await?;
            if ctx.json {
                ctx.json(&r)?;
            } else {
                let which = match cache {
                    None | Some(CacheArg::All) => "all caches".to_string(),
                    Some(c) => format!(
                        "the {} cache",
                        clap::ValueEnum::to_possible_value(&c)
                            .map(|v| v.get_name().to_string())
                            .unwrap_or_default()
                    ),
                };
                outln(&format!("Cleared {which}."))?;
            }
        }
        CacheCmd::Invalidate { path, run } => {
            let path = match path {
                Some(p) => Some(abs_dir(Some(&p))?),
                None => None,
            };
            let run = match run {
                Some(r) => Some(r.resolve(&conn).await?),
                None => None,
            };
            let r = conn
                .call::<CacheInvalidate>(&CacheInvalidateParams { path, run_id: run })
                .await?;
            if ctx.json {
                ctx.json(&r)?;
            } else {
                let n = r.invalidated;
                outln(&format!(
                    "Invalidated {n} entr{}.",
                    if n == 1 { "y" } else { "ies" }
                ))?;
            }
        }
    }
    Ok(exit::SUCCESS)
}
