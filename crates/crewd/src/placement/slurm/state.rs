//! Slurm's job states, as slurmrestd reports them, and what each means for a crew attempt.
//! Pure: a table test covers every state crew distinguishes.

use serde_json::Value;

/// One job as crew needs it, from `GET /job/{id}` or `GET /jobs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub job_id: u64,
    pub name: String,
    /// The base state (`RUNNING`, `TIMEOUT`, ...), flags dropped.
    pub state: String,
    /// The job's exit code (not the wait status), when it has one.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub reason: String,
    /// The nodes it ran on (empty while pending).
    pub nodes: String,
    /// Times Slurm requeued it (`restart_cnt`).
    pub restarts: u64,
    /// Who submitted it and what it says about itself: how crew tells its own jobs from
    /// others' of the same name (`super::own_jobs`).
    pub owner: Owner,
}

/// A job's submitting user and comment, as Slurm reports them (empty where it does not: an
/// accounting record read by `sacct`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    /// `user_name` (v0.0.38 and v0.0.40+, and `squeue --json`).
    pub user_name: String,
    /// `user_id`.
    pub user_id: Option<u64>,
    pub comment: String,
}

/// Longest user name or comment kept (crew's own comment is a few hundred bytes at most).
const MAX_OWNER_TEXT: usize = 1024;

/// Read one job. v0.0.38 gives `job_state` as a string and `exit_code` as the raw wait status
/// (exit 3 → 768); v0.0.40 and later give `job_state` as a list (state first, then flags) and
/// `exit_code` as `{status, return_code: {number}, signal: {id}}`.
pub fn parse_job(v: &Value) -> Option<JobInfo> {
    let job_id = number(v.get("job_id")?)?;
    let state = match v.get("job_state")? {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.first()?.as_str()?.to_string(),
        _ => return None,
    };
    let (exit_code, signal) = match v.get("exit_code") {
        Some(Value::Object(o)) => (
            o.get("return_code").and_then(number).map(|n| n as i32),
            o.get("signal")
                .and_then(|s| s.get("id").or(Some(s)))
                .and_then(number)
                .map(|n| n as i32),
        ),
        Some(other) => match number(other) {
            // A wait status: exit code in the high byte, signal in the low seven bits.
            Some(w) => {
                let w = w as i64;
                let sig = (w & 0x7f) as i32;
                if sig == 0 {
                    (Some(((w >> 8) & 0xff) as i32), None)
                } else {
                    (None, Some(sig))
                }
            }
            None => (None, None),
        },
        None => (None, None),
    };
    // Every job of the cluster is listed on each poll, anyone's: a long user name or comment
    // (longer than any crew writes) is kept as empty, which is never ours.
    let text = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .filter(|s| s.len() <= MAX_OWNER_TEXT)
            .unwrap_or("")
            .to_string()
    };
    Some(JobInfo {
        job_id,
        name: v.get("name").and_then(Value::as_str).unwrap_or("").into(),
        state,
        exit_code,
        signal,
        reason: v
            .get("state_reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .into(),
        nodes: v.get("nodes").and_then(Value::as_str).unwrap_or("").into(),
        restarts: v.get("restart_cnt").and_then(number).unwrap_or(0),
        owner: Owner {
            user_name: text("user_name"),
            user_id: v.get("user_id").and_then(number),
            comment: text("comment"),
        },
    })
}

/// A number, or v0.0.40's `{set, infinite, number}`.
fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| n.as_i64().map(|i| i.max(0) as u64)),
        Value::Object(o) => match o.get("set") {
            Some(Value::Bool(false)) => None,
            _ => o.get("number").and_then(number),
        },
        _ => None,
    }
}

/// What a job's state means for the attempt it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Not started yet (pending, configuring): no output to read.
    Queued,
    /// Running or finishing: read its output.
    Running,
    /// Ended normally: the worker's final record tells how the attempt went.
    Ended,
    /// Ended by Slurm or by the node, not by the agent: a failure of the attempt.
    Failed {
        error: String,
        retryable: bool,
        reason: String,
    },
}

/// The phase of a job in `state` (a `JobInfo`), or of a job Slurm no longer knows (`None`).
pub fn phase(job: Option<&JobInfo>) -> Phase {
    let Some(job) = job else {
        return Phase::Failed {
            error: "the Slurm job vanished (the controller no longer knows it)".into(),
            retryable: true,
            reason: "slurm_vanished".into(),
        };
    };
    let on = if job.nodes.is_empty() {
        String::new()
    } else {
        format!(" on {}", job.nodes)
    };
    let retry = |what: &str| Phase::Failed {
        error: format!("Slurm job {} ended {}{on}: {what}", job.job_id, job.state),
        retryable: true,
        reason: job.state.to_ascii_lowercase(),
    };
    // Slurm requeued the job (its node failed; 22.05's REST API marks every job requeueable,
    // whatever the submission says): the attempt's worker may run twice in one staging
    // directory. The attempt fails here, the job is cancelled, and crew retries the task with a
    // fresh attempt (new directory, new token) instead.
    if job.restarts > 0
        && matches!(
            job.state.as_str(),
            "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "CONFIGURING" | "RUNNING" | "COMPLETING"
        )
    {
        let node = job.reason.contains("Node") || job.reason.contains("node");
        return Phase::Failed {
            error: format!(
                "Slurm requeued job {} ({}){on}; crew retries the task instead",
                job.job_id, job.reason
            ),
            retryable: true,
            reason: if node { "node_fail" } else { "requeued" }.into(),
        };
    }
    match job.state.as_str() {
        "PENDING" | "CONFIGURING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED"
        | "RESV_DEL_HOLD" | "SUSPENDED" | "STOPPED" => Phase::Queued,
        "RUNNING" | "COMPLETING" | "SIGNALING" | "STAGE_OUT" | "RESIZING" => Phase::Running,
        // The batch script is crew-worker, which exits 0 whenever it wrote its final record:
        // that record, not the job, says how the agent did. A non-zero exit here means the
        // worker itself failed.
        "COMPLETED" => Phase::Ended,
        "FAILED" => Phase::Failed {
            error: format!(
                "Slurm job {} FAILED{on} with {}{}",
                job.job_id,
                match (job.exit_code, job.signal) {
                    (_, Some(s)) => format!("signal {s}"),
                    (Some(c), None) => format!("exit code {c}"),
                    (None, None) => "no exit code".into(),
                },
                if job.reason.is_empty() || job.reason == "None" {
                    String::new()
                } else {
                    format!(" ({})", job.reason)
                }
            ),
            retryable: false,
            reason: "slurm_failed".into(),
        },
        "TIMEOUT" => retry("it ran past its time limit"),
        "NODE_FAIL" => retry("its node failed"),
        "PREEMPTED" => retry("it was preempted"),
        "OUT_OF_MEMORY" => retry("it ran out of memory"),
        "BOOT_FAIL" => retry("its node did not boot"),
        "DEADLINE" => retry("it missed its deadline"),
        "CANCELLED" => Phase::Failed {
            error: format!("Slurm job {} was cancelled{on}", job.job_id),
            retryable: false,
            reason: "slurm_cancelled".into(),
        },
        other => Phase::Failed {
            error: format!("Slurm job {} ended in state {other}{on}", job.job_id),
            retryable: false,
            reason: "slurm_failed".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(state: &str, exit: Value) -> JobInfo {
        parse_job(
            &json!({"job_id": 7, "name": "crew-x", "job_state": state, "exit_code": exit,
            "state_reason": "None", "nodes": "n2"}),
        )
        .unwrap()
    }

    #[test]
    fn states_map_to_outcomes() {
        // (state, exit_code as v0.0.38 reports it, phase kind, retryable, reason)
        let table: &[(&str, i64, &str, bool, &str)] = &[
            ("PENDING", 0, "queued", false, ""),
            ("CONFIGURING", 0, "queued", false, ""),
            ("RUNNING", 0, "running", false, ""),
            ("COMPLETING", 0, "running", false, ""),
            ("COMPLETED", 0, "ended", false, ""),
            ("TIMEOUT", 0, "failed", true, "timeout"),
            ("NODE_FAIL", 0, "failed", true, "node_fail"),
            ("PREEMPTED", 0, "failed", true, "preempted"),
            ("OUT_OF_MEMORY", 0, "failed", true, "out_of_memory"),
            ("BOOT_FAIL", 0, "failed", true, "boot_fail"),
            ("FAILED", 768, "failed", false, "slurm_failed"),
            ("CANCELLED", 0, "failed", false, "slurm_cancelled"),
            ("SPECIAL_EXIT", 0, "failed", false, "slurm_failed"),
        ];
        for &(state, exit, kind, retry, why) in table {
            let p = phase(Some(&job(state, json!(exit))));
            match (&p, kind) {
                (Phase::Queued, "queued")
                | (Phase::Running, "running")
                | (Phase::Ended, "ended") => {}
                (
                    Phase::Failed {
                        retryable,
                        reason,
                        error,
                    },
                    "failed",
                ) => {
                    assert_eq!((*retryable, reason.as_str()), (retry, why), "{state}");
                    assert!(
                        error.contains(state) || state == "CANCELLED",
                        "{state}: {error}"
                    );
                    assert!(error.contains("n2"), "{error}");
                }
                _ => panic!("{state}: {p:?}"),
            }
        }
        let Phase::Failed { error, .. } = phase(Some(&job("FAILED", json!(768)))) else {
            panic!()
        };
        assert!(error.contains("exit code 3"), "{error}");
        let Phase::Failed { error, .. } = phase(Some(&job("FAILED", json!(9)))) else {
            panic!()
        };
        assert!(error.contains("signal 9"), "{error}");
        assert_eq!(
            phase(None),
            Phase::Failed {
                error: "the Slurm job vanished (the controller no longer knows it)".into(),
                retryable: true,
                reason: "slurm_vanished".into()
            }
        );
    }

    #[test]
    fn both_api_shapes_parse() {
        // v0.0.38 (what slurmrestd 22.05.8 sent here).
        let j = parse_job(
            &json!({"job_id": 1, "name": "crew-t1", "job_state": "FAILED",
            "exit_code": 768, "state_reason": "NonZeroExitCode", "nodes": "n1"}),
        )
        .unwrap();
        assert_eq!(
            (j.state.as_str(), j.exit_code, j.signal),
            ("FAILED", Some(3), None)
        );
        // v0.0.40+: lists of state and flags, structured exit codes, `{set, number}` numbers.
        let j = parse_job(
            &json!({"job_id": {"set": true, "infinite": false, "number": 5},
            "name": "crew-t2", "job_state": ["TIMEOUT", "COMPLETING"],
            "exit_code": {"status": ["SIGNALED"], "return_code": {"set": true, "number": 0},
                          "signal": {"id": {"set": true, "number": 15}, "name": "TERM"}},
            "state_reason": "TimeLimit", "nodes": "n2"}),
        )
        .unwrap();
        assert_eq!(
            (j.job_id, j.state.as_str(), j.exit_code, j.signal),
            (5, "TIMEOUT", Some(0), Some(15))
        );
        assert!(parse_job(&json!({"job_state": "RUNNING"})).is_none());
        // The submitting user and comment (v0.0.38 as the test cluster sent them; v0.0.40+'s
        // `user_id` may be `{set, number}`); an overlong comment is kept as none.
        let owner = |v: Value| parse_job(&v).unwrap().owner;
        assert_eq!(
            owner(
                json!({"job_id": 1, "job_state": "RUNNING", "user_name": "nobody",
                         "user_id": 65534, "comment": "crew run r task t attempt 1 tag ab"})
            ),
            Owner {
                user_name: "nobody".into(),
                user_id: Some(65534),
                comment: "crew run r task t attempt 1 tag ab".into(),
            }
        );
        let o = owner(
            json!({"job_id": 1, "job_state": ["RUNNING"], "user_name": "root",
                             "user_id": {"set": true, "number": 0}, "comment": "x".repeat(2000)}),
        );
        assert_eq!((o.user_id, o.comment.as_str()), (Some(0), ""));
        // Requeued by Slurm after a node failure: a retryable failure of this attempt.
        let j = parse_job(
            &json!({"job_id": 9, "job_state": "PENDING", "restart_cnt": 1,
            "state_reason": "BeginTime", "exit_code": 0}),
        )
        .unwrap();
        assert!(
            matches!(phase(Some(&j)), Phase::Failed { retryable: true, ref reason, .. } if reason == "requeued")
        );
        let j = JobInfo {
            reason: "NodeDown".into(),
            state: "RUNNING".into(),
            ..j
        };
        assert!(
            matches!(phase(Some(&j)), Phase::Failed { retryable: true, ref reason, .. } if reason == "node_fail")
        );
        let j = JobInfo {
            state: "COMPLETED".into(),
            ..j
        };
        assert_eq!(phase(Some(&j)), Phase::Ended);
        assert!(parse_job(&json!({"job_id": 1, "job_state": 3})).is_none());
    }
}
