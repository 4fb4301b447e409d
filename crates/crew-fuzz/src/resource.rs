//! Resource files: one input is parsed as each kind, then assembled with the builtins into a
//! catalog that is validated and planned from, as the daemon does for a project's `.crew/`.

use crew_core::plan::build_plan;
use crew_core::resource::{builtin, parse_file, validate_catalog, Catalog, Kind, Parsed, Source};

const KINDS: [(Kind, &str); 4] = [
    (Kind::Agent, "/p/.crew/agents/fuzz.md"),
    (Kind::Team, "/p/.crew/teams/fuzz.team.md"),
    (Kind::Workflow, "/p/.crew/workflows/fuzz.workflow.md"),
    (Kind::Skill, "/p/.crew/skills/fuzz/SKILL.md"),
];

pub fn resource(data: &[u8]) {
    let mut files = builtin::parsed();
    let mut team = None;
    let mut workflow = None;
    for (kind, path) in KINDS {
        let (parsed, diagnostics) = parse_file(kind, Source::Project, path, data);
        for d in &diagnostics {
            assert_eq!(d.path, path, "a diagnostic names another file: {d:?}");
        }
        if let Some(p) = &parsed {
            // What the daemon answers for `resource.get` must serialize.
            let json = serde_json::to_string(p);
            assert!(json.is_ok(), "parsed {kind:?} does not serialize: {json:?}");
            match p {
                Parsed::Team(t) => team = Some(t.name.clone()),
                Parsed::Workflow(w) => workflow = Some(w.name.clone()),
                _ => {}
            }
        }
        files.push((parsed, diagnostics));
    }
    let catalog = Catalog::assemble(files, true);
    let _ = validate_catalog(&catalog);
    for (t, w) in [
        (None, None),
        (team.as_deref(), None),
        (team.as_deref(), workflow.as_deref()),
        (None, workflow.as_deref()),
    ] {
        if let Ok(plan) = build_plan(&catalog, t, w) {
            assert!(
                !plan.tasks.is_empty(),
                "a plan without tasks for {t:?}/{w:?}"
            );
        }
    }
}
