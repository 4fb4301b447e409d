//! What a task placed on a cluster asks of its node: CPUs, memory and a time limit (issue 35).
//!
//! Four places may say it, the first that does wins field by field: the workflow step
//! (`cpusPerTask:`, `memoryMb:`, `timeLimitMinutes:`), the team role (`cpusPerTask=` ... on its
//! line), the runtime (`[runtimes.NAME.slurm]`) and the cluster (`[slurm]`). The step's and the
//! role's are frozen into the plan (`PlannedTask::resources`, added tasks from their
//! `RoleTemplate`), the runtime's over the cluster's into the run (`RunSpec::job_shapes`) when
//! it is created: a replayed or recovered run submits the same shape whatever config.toml says
//! by then. [`JobShape::over`] is the one rule all of them go by.

use serde::{Deserialize, Serialize};

/// Most CPUs a task may ask for.
pub const MAX_CPUS: u32 = 4096;
/// Most memory a task may ask for, in MB (64 TiB).
pub const MAX_MEMORY_MB: u64 = 64 << 20;
/// Longest time limit a task may ask for, in minutes (a leap year).
pub const MAX_TIME_LIMIT_MINUTES: u32 = 366 * 24 * 60;

/// A task's job shape; a field left `None` is the next place's to say (and where nobody says,
/// the scheduler's default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobShape {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_per_task: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_minutes: Option<u32>,
}

/// The three fields by the name the workflow and team files use.
pub const FIELDS: [&str; 3] = ["cpusPerTask", "memoryMb", "timeLimitMinutes"];

impl JobShape {
    pub fn is_empty(&self) -> bool {
        *self == JobShape::default()
    }

    /// `self` where it says something, else `below`: a step over its role, a task over its
    /// runtime, a runtime over the cluster.
    pub fn over(self, below: &JobShape) -> JobShape {
        JobShape {
            cpus_per_task: self.cpus_per_task.or(below.cpus_per_task),
            memory_mb: self.memory_mb.or(below.memory_mb),
            time_limit_minutes: self.time_limit_minutes.or(below.time_limit_minutes),
        }
    }

    /// Set `field` (one of [`FIELDS`], as the files name it) from its text. `Err`: the
    /// message for the file's diagnostic.
    pub fn set(&mut self, field: &str, text: &str) -> Result<(), String> {
        match field {
            "cpusPerTask" => {
                self.cpus_per_task = Some(bounded(field, text, MAX_CPUS.into())? as u32)
            }
            "memoryMb" => self.memory_mb = Some(bounded(field, text, MAX_MEMORY_MB)?),
            "timeLimitMinutes" => {
                self.time_limit_minutes =
                    Some(bounded(field, text, MAX_TIME_LIMIT_MINUTES.into())? as u32)
            }
            _ => return Err(format!("`{field}` is not a job resource")),
        }
        Ok(())
    }

    /// What is out of bounds (config.toml's values, read as numbers already).
    pub fn problem(&self) -> Option<String> {
        let checks = [
            (
                "cpus_per_task",
                self.cpus_per_task.map(u64::from),
                u64::from(MAX_CPUS),
            ),
            ("memory_mb", self.memory_mb, MAX_MEMORY_MB),
            (
                "time_limit_minutes",
                self.time_limit_minutes.map(u64::from),
                u64::from(MAX_TIME_LIMIT_MINUTES),
            ),
        ];
        checks.into_iter().find_map(|(name, v, max)| {
            v.filter(|v| !(1..=max).contains(v))
                .map(|v| format!("{name} = {v}: must be from 1 to {max}"))
        })
    }
}

/// step > role > runtime > cluster, field by field: what a task placed on a cluster runs with.
pub fn resolve(
    step: &JobShape,
    role: &JobShape,
    runtime: &JobShape,
    cluster: &JobShape,
) -> JobShape {
    step.over(role).over(runtime).over(cluster)
}

/// A whole number from 1 to `max`.
fn bounded(field: &str, text: &str, max: u64) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{field}` must be a whole number from 1 to {max}, got `{}`",
            crate::text::echo(text)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(c: Option<u32>, m: Option<u64>, t: Option<u32>) -> JobShape {
        JobShape {
            cpus_per_task: c,
            memory_mb: m,
            time_limit_minutes: t,
        }
    }

    /// Field by field, the first place that says it wins: step, role, runtime, cluster.
    #[test]
    fn the_step_wins_then_the_role_then_the_runtime_then_the_cluster() {
        let none = JobShape::default();
        let step = shape(Some(8), None, None);
        let role = shape(Some(4), Some(16000), None);
        let runtime = shape(Some(2), Some(8000), Some(60));
        let cluster = shape(Some(1), Some(4000), Some(30));
        let table = [
            (
                "all four",
                [step, role, runtime, cluster],
                shape(Some(8), Some(16000), Some(60)),
            ),
            (
                "no step",
                [none, role, runtime, cluster],
                shape(Some(4), Some(16000), Some(60)),
            ),
            (
                "no step, no role",
                [none, none, runtime, cluster],
                shape(Some(2), Some(8000), Some(60)),
            ),
            ("the cluster only", [none, none, none, cluster], cluster),
            ("the step only", [step, none, none, none], step),
            ("nobody: the scheduler's default", [none; 4], none),
            (
                "a step's time over the cluster's",
                [shape(None, None, Some(5)), none, none, cluster],
                shape(Some(1), Some(4000), Some(5)),
            ),
        ];
        for (name, [s, r, rt, c], want) in table {
            assert_eq!(resolve(&s, &r, &rt, &c), want, "{name}");
            // Frozen in two halves (plan: step over role; run: runtime over cluster), the
            // same shape.
            assert_eq!(s.over(&r).over(&rt.over(&c)), want, "{name}, in halves");
        }
    }

    #[test]
    fn values_from_files_are_bounded_whole_numbers() {
        let mut s = JobShape::default();
        s.set("cpusPerTask", "4").unwrap();
        s.set("memoryMb", " 8000 ").unwrap();
        s.set("timeLimitMinutes", "90").unwrap();
        assert_eq!(s, shape(Some(4), Some(8000), Some(90)));
        for (field, bad) in [
            ("cpusPerTask", "0"),
            ("cpusPerTask", "4097"),
            ("cpusPerTask", "two"),
            ("cpusPerTask", "-1"),
            ("memoryMb", "1.5"),
            ("memoryMb", "99999999999999999999999"),
            ("timeLimitMinutes", "527041"),
            ("timeLimitMinutes", ""),
        ] {
            let e = s.set(field, bad).unwrap_err();
            assert!(
                e.contains(field) && e.contains("whole number from 1 to"),
                "{e}"
            );
        }
        assert!(s.set("gpus", "1").is_err());
        assert_eq!(
            s,
            shape(Some(4), Some(8000), Some(90)),
            "a refused value changes nothing"
        );
        assert_eq!(s.problem(), None);
        assert!(shape(Some(0), None, None)
            .problem()
            .unwrap()
            .contains("cpus_per_task = 0"));
        assert!(shape(None, Some(MAX_MEMORY_MB + 1), None)
            .problem()
            .is_some());
        assert!(shape(None, None, Some(0))
            .problem()
            .unwrap()
            .contains("time_limit_minutes"));
    }
}
