//! Run bundles (`team.import`): any JSON is refused with diagnostics or accepted; accepted ones
//! name only safe ids and artifact names, carry no attempt in flight, and hand git no option
//! and a worktree no path outside it. The input is also
//! checked resealed (checksum recomputed), so fuzzing gets past the checksum to the contents.

use serde_json::{json, Value};

pub fn bundle(data: &[u8]) {
    let Ok(mut v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    check(&v);
    if let Some(obj) = v.as_object_mut() {
        let sum = crewd::bundle::checksum(obj);
        obj.insert("checksum".into(), json!(sum));
        check(&v);
    }
}

fn check(v: &Value) {
    if let Ok(valid) = crewd::bundle::validate(v) {
        assert!(crew_core::ids::is_safe_id(&valid.run_id));
        for ev in &valid.events {
            assert!(ev.task_id.as_deref().is_none_or(crew_core::ids::is_safe_id));
            if let crew_core::run::EventBody::RunCreated(spec) = &ev.body {
                for t in &spec.tasks {
                    assert!(crew_core::ids::is_safe_id(&t.id));
                }
            }
        }
        for (name, _) in &valid.files {
            assert!(crew_core::ids::is_safe_artifact_name(name), "{name}");
        }
        // No attempt in flight for a restart's recovery to act on (a job, a pid).
        if let Some(run) = crew_core::run::replay_run(valid.events.iter()) {
            for t in &run.tasks {
                assert!(
                    t.status != crew_core::run::TaskStatus::Running,
                    "{}",
                    t.plan.id
                );
                assert!(t.rare().job.is_none(), "{}", t.plan.id);
                // What crew hands to git: object ids, never an option.
                if let Some(c) = t.commit() {
                    assert!(!c.commit.starts_with('-') && !c.start.starts_with('-'));
                }
                assert!(t.plan.model.as_deref().is_none_or(|m| !m.starts_with('-')));
            }
            if let Some(ws) = &run.spec.workspace {
                assert!(!ws.base.starts_with('-'), "{}", ws.base);
                assert!(
                    std::path::Path::new(&ws.subdir)
                        .components()
                        .all(|c| matches!(c, std::path::Component::Normal(_))),
                    "{}",
                    ws.subdir
                );
            }
        }
    }
}
