//! `resources` and `validate`.

use crate::cli::{KindArg, ResourcesArgs};
use crate::ctx::{abs_dir, out, outln, Ctx};
use crate::exit;
use crate::render::{diag, resources as view_resources};
use crate::style::Tone;
use crew_api::methods::{ResourceList, ResourceValidate};
use crew_api::types::{ResourceKind, ResourceListParams, ValidateParams};
use std::path::PathBuf;

pub async fn list(ctx: &Ctx, a: ResourcesArgs) -> anyhow::Result<u8> {
    let params = ResourceListParams {
        cwd: Some(abs_dir(a.cwd.as_deref())?),
        kind: a.kind.map(|k| match k {
            KindArg::Agent => ResourceKind::Agent,
            KindArg::Team => ResourceKind::Team,
            KindArg::Workflow => ResourceKind::Workflow,
            KindArg::Skill => ResourceKind::Skill,
        }),
    };
    let conn = ctx.connect().await?;
    let r = conn.call::<ResourceList>(&params).await?;
    if ctx.json {
        ctx.json(&r)?;
    } else {
        out(&view_resources::list(&ctx.view(), &r))?;
    }
    Ok(exit::SUCCESS)
}

/// Exit status 1 when any diagnostic is an error, so CI can run `crewctl validate`.
pub async fn validate(ctx: &Ctx, cwd: Option<PathBuf>) -> anyhow::Result<u8> {
    let params = ValidateParams {
        cwd: Some(abs_dir(cwd.as_deref())?),
    };
    let conn = ctx.connect().await?;
    let r = conn.call::<ResourceValidate>(&params).await?;
    let failed = !r.ok || diag::has_error(&r.diagnostics);
    if ctx.json {
        ctx.json(&r)?;
    } else {
        let v = ctx.view();
        out(&diag::lines(&v, &r.diagnostics))?;
        let errors = r
            .diagnostics
            .iter()
            .filter(|d| d.severity == crew_api::types::Severity::Error)
            .count();
        let warnings = r.diagnostics.len() - errors;
        if failed {
            outln(&v.p(
                Tone::Bad,
                format!("{errors} error(s), {warnings} warning(s)."),
            ))?;
        } else if warnings > 0 {
            outln(&v.p(Tone::Warn, format!("Valid, with {warnings} warning(s).")))?;
        } else {
            outln(&v.p(Tone::Ok, "All resources are valid."))?;
        }
    }
    Ok(if failed { exit::FAILED } else { exit::SUCCESS })
}
