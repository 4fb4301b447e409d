//! `resource.*`

use super::{register, views, Ctx};
use crate::resources;
use crew_api::methods::{ResourceGet, ResourceList, ResourceValidate};
use crew_api::types::*;
use crew_api::ApiError;
use crew_core::resource::{Catalog, Kind};
use jsonrpsee::RpcModule;
use std::path::Path;

fn cwd_param(cwd: &Option<String>) -> Result<Option<&Path>, ApiError> {
    match cwd {
        None => Ok(None),
        Some(c) => {
            super::checks::absolute_path("cwd", c)?;
            Ok(Some(Path::new(c)))
        }
    }
}

pub(super) async fn catalog(ctx: &Ctx, cwd: Option<&Path>) -> Catalog {
    let shared = ctx.shared.clone();
    let cwd = cwd.map(Path::to_path_buf);
    tokio::task::spawn_blocking(move || resources::catalog(&shared, cwd.as_deref()))
        .await
        .unwrap_or_else(|_| Catalog::builtin())
}

fn kind(k: ResourceKind) -> Kind {
    match k {
        ResourceKind::Agent => Kind::Agent,
        ResourceKind::Team => Kind::Team,
        ResourceKind::Workflow => Kind::Workflow,
        ResourceKind::Skill => Kind::Skill,
    }
}

fn source_name(s: crew_core::resource::Source) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

pub(super) fn all_diagnostics(c: &Catalog) -> Vec<Diagnostic> {
    let mut d: Vec<Diagnostic> = c.diagnostics.iter().map(views::diagnostic).collect();
    d.extend(
        crew_core::resource::validate_catalog(c)
            .iter()
            .map(views::diagnostic),
    );
    d.dedup();
    d
}

fn entry(
    name: &str,
    source: crew_core::resource::Source,
    description: &str,
    path: &str,
) -> ResourceEntry {
    ResourceEntry {
        name: name.to_string(),
        source: source_name(source),
        description: description.to_string(),
        path: path.to_string(),
    }
}

pub fn register_all(m: &mut RpcModule<Ctx>) {
    register::<ResourceList, _, _>(m, |ctx, p| async move {
        let c = catalog(&ctx, cwd_param(&p.cwd)?).await;
        let want = |k: ResourceKind| p.kind.is_none_or(|x| x == k);
        let mut r = ResourceListResult::default();
        if want(ResourceKind::Agent) {
            r.agents = c
                .agents
                .values()
                .map(|a| entry(&a.name, a.source, &a.description, &a.path))
                .collect();
        }
        if want(ResourceKind::Team) {
            r.teams = c
                .teams
                .values()
                .map(|a| entry(&a.name, a.source, &a.description, &a.path))
                .collect();
        }
        if want(ResourceKind::Workflow) {
            r.workflows = c
                .workflows
                .values()
                .map(|a| entry(&a.name, a.source, &a.description, &a.path))
                .collect();
        }
        if want(ResourceKind::Skill) {
            r.skills = c
                .skills
                .values()
                .map(|a| entry(&a.name, a.source, &a.description, &a.path))
                .collect();
        }
        r.diagnostics = all_diagnostics(&c);
        Ok(r)
    });
    register::<ResourceGet, _, _>(m, |ctx, p| async move {
        let c = catalog(&ctx, cwd_param(&p.cwd)?).await;
        let found = c
            .get(kind(p.kind), &p.name)
            .ok_or_else(|| ApiError::not_found("resource", &p.name))?;
        let resource =
            serde_json::to_value(&found).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(ResourceGetResult {
            kind: p.kind,
            resource,
        })
    });
    register::<ResourceValidate, _, _>(m, |ctx, p| async move {
        let c = catalog(&ctx, cwd_param(&p.cwd)?).await;
        let diagnostics = all_diagnostics(&c);
        let ok = !diagnostics.iter().any(|d| d.severity == Severity::Error);
        Ok(ValidateResult { ok, diagnostics })
    });
}
