//! Run bundles (`team.import`): any JSON is refused with diagnostics or accepted; accepted ones
//! name only safe ids and artifact names, and carry no attempt in flight. The input is also
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
            }
        }
    }
}
