//! Slurm placement: an attempt is a Slurm job running `crew-worker` on a node.
//!
//! crewd still makes the task's worktree (its start commit, merged from the dependencies'
//! results as for a local attempt) and still finishes the attempt (verification, the result
//! commit, diffstat, patch, integration): only the agent runs on the node. Between the two
//! sides is a staging directory (`crew_staging`) on a shared filesystem: the start commit as a
//! bundle, the launch and the filtered environment in, the agent's stdout, a result bundle and
//! a final record out. The job's script and environment carry no secret: slurmctld stores both
//! and shows them to admins.
//!
//! Durable submission: before submitting, the attempt's intent (token, job name, staging
//! directory) is journaled (`worker.submitting`, durable before the submit); after, the job id
//! (`worker.submitted`). A crewd killed anywhere in between finds, on recovery, either the job
//! id or the intent in its state, and with the intent alone either a job of that name in Slurm
//! or none, so a job is neither lost nor submitted twice
//! (`supervise::submit::submit_or_attach`).

mod attempt_job;
pub mod board;
pub mod cli;
pub mod client;
pub mod config;
pub mod state;
mod supervise;
pub mod token;

pub use config::{SlurmConfig, SlurmResources};
pub use supervise::attempt;

use client::{JobRequest, SlurmError};
use state::JobInfo;
use std::sync::{Arc, OnceLock};

/// The way to the cluster: slurmrestd, or the client commands where it does not run.
pub enum Backend {
    Rest(Box<client::Client>),
    Cli(cli::Cli),
}

impl Backend {
    pub fn new(cfg: &SlurmConfig) -> Backend {
        match cfg.interface {
            config::Interface::Rest => Backend::Rest(Box::new(client::Client::new(cfg))),
            config::Interface::Cli => Backend::Cli(cli::Cli::new(cfg.conf.clone())),
        }
    }

    pub async fn submit(&self, job: &JobRequest) -> Result<u64, SlurmError> {
        match self {
            Backend::Rest(c) => c.submit(job).await,
            Backend::Cli(c) => c.submit(job).await,
        }
    }

    /// One job; `None` when Slurm does not know it (any more).
    pub async fn job(&self, id: u64) -> Result<Option<JobInfo>, SlurmError> {
        match self {
            Backend::Rest(c) => c.job(id).await,
            Backend::Cli(c) => c.job(id).await,
        }
    }

    /// Every job the controller still knows.
    pub async fn jobs(&self) -> Result<Vec<JobInfo>, SlurmError> {
        match self {
            Backend::Rest(c) => c.jobs().await,
            Backend::Cli(c) => c.jobs().await,
        }
    }

    /// `jobs`, or `None` when none changed since `since` (Unix seconds; slurmrestd only: the
    /// commands always list).
    pub async fn jobs_since(&self, since: Option<u64>) -> Result<Option<Vec<JobInfo>>, SlurmError> {
        match self {
            Backend::Rest(c) => c.jobs_since(since).await,
            Backend::Cli(c) => c.jobs().await.map(Some),
        }
    }

    /// The jobs of `name` that this daemon submitted (`own_jobs`): of its Slurm user, and
    /// carrying `tag` in their comment.
    pub async fn jobs_named(&self, name: &str, tag: &str) -> Result<Vec<JobInfo>, SlurmError> {
        Ok(own_jobs(self.jobs().await?, name, &self.submitter(), tag))
    }

    /// Who this daemon's jobs belong to in Slurm: slurmrestd submits as the configured user
    /// (`X-SLURM-USER-NAME`), sbatch as the daemon's own.
    pub fn submitter(&self) -> Submitter {
        match self {
            Backend::Rest(c) => Submitter {
                name: Some(c.user().to_string()),
                uid: None,
            },
            Backend::Cli(_) => Submitter {
                name: None,
                uid: Some(u64::from(nix::unistd::getuid().as_raw())),
            },
        }
    }

    /// Cancel (SIGTERM, then SIGKILL after `KillWait`); an unknown job is cancelled already.
    pub async fn cancel(&self, id: u64) -> Result<(), SlurmError> {
        match self {
            Backend::Rest(c) => c.cancel(id).await,
            Backend::Cli(c) => c.cancel(id).await,
        }
    }
}

/// The Slurm user a daemon submits as: by name (slurmrestd's user header) or by uid (the
/// client commands run as the daemon).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitter {
    pub name: Option<String>,
    pub uid: Option<u64>,
}

impl Submitter {
    /// Whether Slurm says this user submitted `job`; a job whose user Slurm does not report
    /// is not taken for ours.
    fn submitted(&self, job: &JobInfo) -> bool {
        let o = &job.owner;
        match (self.uid, o.user_id, &self.name) {
            (Some(mine), Some(theirs), _) => mine == theirs,
            (_, _, Some(name)) => !o.user_name.is_empty() && o.user_name == *name,
            _ => false,
        }
    }
}

/// The comment crew gives an attempt's job: who it is for, and a tag only this daemon can
/// make (`token::job_tag`, from its key: never journaled, never shown before the job exists).
pub fn job_comment(run_id: &str, task_id: &str, attempt: u32, tag: &str) -> String {
    format!("crew run {run_id} task {task_id} attempt {attempt} tag {tag}")
}

/// The jobs of `name` among `jobs` that this daemon submitted: a job name is chosen by crew,
/// but anyone on the cluster can submit a job under it (and `squeue` shows every job's name
/// and comment). Slurm's record of the submitting user (authenticated by munge or the JWT)
/// rules out other users' jobs; the tag in the comment rules out jobs of the same user that
/// this daemon did not submit for this attempt (another crewd under a shared account, a
/// script copying the name).
pub fn own_jobs(jobs: Vec<JobInfo>, name: &str, by: &Submitter, tag: &str) -> Vec<JobInfo> {
    jobs.into_iter()
        .filter(|j| j.name == name && by.submitted(j) && tagged(j, tag))
        .collect()
}

/// The comment ends in `tag` (never an empty one: a tag never made matches nothing).
fn tagged(job: &JobInfo, tag: &str) -> bool {
    job.owner
        .comment
        .rsplit_once(" tag ")
        .is_some_and(|(_, t)| !tag.is_empty() && t == tag)
}

/// Whether `job`, read under an id the journal recorded, is still the attempt's job `name`
/// (`attempt_job`): a stranger holding a reused id has another name, and where Slurm reports
/// them, another user or a comment without this attempt's tag. What an API leaves out (an
/// accounting record from `sacct` has neither user nor comment) does not count against it:
/// re-attaching must not lose the attempt's own job to a trimmed answer.
pub fn is_attempts_job(job: &JobInfo, name: &str, by: &Submitter, tag: &str) -> bool {
    let o = &job.owner;
    let user_reported = !o.user_name.is_empty() || o.user_id.is_some();
    job.name == name
        && (!user_reported || by.submitted(job))
        && (o.comment.is_empty() || tagged(job, tag))
}

/// The daemon's one way to the cluster (its config does not change while it runs).
pub fn backend(cfg: &SlurmConfig) -> Arc<Backend> {
    static BACKEND: OnceLock<Arc<Backend>> = OnceLock::new();
    BACKEND.get_or_init(|| Arc::new(Backend::new(cfg))).clone()
}

/// The daemon's one poller of the cluster's jobs (started on first use, in the daemon's
/// runtime).
pub fn board(cfg: &SlurmConfig) -> &'static board::Board {
    static BOARD: OnceLock<board::Board> = OnceLock::new();
    BOARD.get_or_init(|| {
        board::Board::start(backend(cfg), std::time::Duration::from_millis(cfg.poll_ms))
    })
}

/// The CPUs, memory and time limit a task's jobs ask for on `runtime` (issue 35): its step's
/// and role's (frozen in its plan) over the runtime's, as frozen in the run when it was
/// created; a run from before that froze none takes the runtime's from the config now.
/// Empty for a runtime that is not on Slurm.
pub fn task_shape(
    cfg: &crate::config::Config,
    run: &crew_core::run::RunSpec,
    task: &crew_core::plan::PlannedTask,
    runtime: &str,
) -> crew_core::job_shape::JobShape {
    let base = match run.job_shapes.get(runtime) {
        Some(s) => *s,
        None => match runtime_shape(cfg, runtime) {
            Some(s) => s,
            None => return Default::default(),
        },
    };
    task.resources.over(&base)
}

/// `runtime`'s shape over `[slurm]`'s, `None` when it is not placed on Slurm: what a run
/// freezes (`RunSpec::job_shapes`).
pub fn runtime_shape(
    cfg: &crate::config::Config,
    runtime: &str,
) -> Option<crew_core::job_shape::JobShape> {
    let rt = cfg.runtimes.get(runtime)?;
    let slurm = cfg.slurm.as_ref()?;
    (rt.placement == crate::placement::Placement::Slurm)
        .then(|| slurm.runtime_shape(rt.slurm.as_ref()))
}

/// The job name crew gives an attempt: how recovery finds a job whose id was not recorded.
pub fn job_name(run_id: &str, task_id: &str, attempt: u32) -> String {
    format!("crew-{run_id}-{task_id}-{attempt}")
}

/// `team.plan`: the box a Slurm runtime's node will try, as crewd stages it with each job
/// (`Launch::sandbox`, made in `supervise::stage::launch` from the same settings); the node
/// decides the paths, and whether it can box at all.
pub fn node_box(
    config: &crate::config::Config,
    runtime: &crate::config::RuntimeConfig,
    task: &crew_core::plan::PlannedTask,
) -> crew_api::types::NodeBox {
    use crate::config::SandboxMode;
    let paths = |v: &[std::path::PathBuf]| v.iter().map(|p| p.display().to_string()).collect();
    crew_api::types::NodeBox {
        mode: match crate::executor::sandbox::mode(config, runtime) {
            SandboxMode::Auto => "auto",
            SandboxMode::Required => "required",
            SandboxMode::Off => "off",
        }
        .into(),
        network: crate::executor::sandbox::network(runtime, task),
        verify_network: config.verify_network,
        read: paths(&runtime.sandbox_read),
        write: paths(&runtime.sandbox_write),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Jobs of one name as the test cluster listed them (`GET /slurm/v0.0.38/jobs`, fields
    /// crew reads; `squeue --json` gives the same): crewd's own (root, its tag), one of
    /// `nobody` with the same name and comment, one of root without the tag, one of root
    /// with another attempt's tag.
    fn listed(tag: &str) -> Vec<JobInfo> {
        let comment = |t: &str| format!("crew run r task t attempt 1 tag {t}");
        [
            json!({"job_id": 11, "name": "crew-r-t-1", "job_state": "RUNNING",
                   "user_name": "root", "user_id": 0, "comment": comment(tag)}),
            json!({"job_id": 12, "name": "crew-r-t-1", "job_state": "RUNNING",
                   "user_name": "nobody", "user_id": 65534, "comment": comment(tag)}),
            json!({"job_id": 13, "name": "crew-r-t-1", "job_state": "RUNNING",
                   "user_name": "root", "user_id": 0, "comment": "crew run r task t attempt 1"}),
            json!({"job_id": 14, "name": "crew-r-t-1", "job_state": "RUNNING",
                   "user_name": "root", "user_id": 0, "comment": comment("0f0f")}),
            json!({"job_id": 15, "name": "crew-r-t-2", "job_state": "RUNNING",
                   "user_name": "root", "user_id": 0, "comment": comment(tag)}),
            // An answer without the user (an older or trimmed API): not taken for ours.
            json!({"job_id": 16, "name": "crew-r-t-1", "job_state": "RUNNING",
                   "comment": comment(tag)}),
        ]
        .iter()
        .filter_map(state::parse_job)
        .collect()
    }

    #[test]
    fn only_this_daemons_job_of_the_name_is_found() {
        let tag = "6a1c0e3d9b7f4c2e8a5d1f0b3c7e9a24";
        let ids = |by: &Submitter, tag: &str| -> Vec<u64> {
            own_jobs(listed(tag), "crew-r-t-1", by, tag)
                .iter()
                .map(|j| j.job_id)
                .collect()
        };
        let rest = Submitter {
            name: Some("root".into()),
            uid: None,
        };
        let cli = Submitter {
            name: None,
            uid: Some(0),
        };
        assert_eq!(ids(&rest, tag), [11]);
        assert_eq!(ids(&cli, tag), [11]);
        // As `nobody`, the daemon's job is its own and root's are not.
        let nobody = Submitter {
            name: Some("nobody".into()),
            uid: Some(65534),
        };
        assert_eq!(ids(&nobody, tag), [12]);
        // No tag to match (never made): nothing is ours.
        assert_eq!(ids(&rest, ""), Vec::<u64>::new());
        assert_eq!(
            job_comment("r", "t", 1, tag),
            format!("crew run r task t attempt 1 tag {tag}")
        );
    }

    #[test]
    fn a_recorded_id_is_followed_only_while_it_names_the_attempts_job() {
        let tag = "6a1c0e3d9b7f4c2e8a5d1f0b3c7e9a24";
        let root = Submitter {
            name: Some("root".into()),
            uid: Some(0),
        };
        let by_id = |id: u64| listed(tag).into_iter().find(|j| j.job_id == id);
        let ours = |j: &JobInfo| is_attempts_job(j, "crew-r-t-1", &root, tag);
        // (job, followed): crewd's own; `nobody`'s under the name; root's untagged; another
        // attempt's tag; another name; an answer without the user (its name and tag are the
        // attempt's).
        let table = [
            (11, true),
            (12, false),
            (13, false),
            (14, false),
            (15, false),
            (16, true),
        ];
        for (id, want) in table {
            let j = by_id(id).unwrap();
            assert_eq!(ours(&j), want, "job {id}");
        }
        // Accounting reports neither user nor comment: its name decides.
        let sacct = cli::parse_sacct("11|crew-r-t-1|COMPLETED|0:0|n1").unwrap();
        assert!(ours(&sacct));
        let sacct = cli::parse_sacct("11|sweep|RUNNING|0:0|n1").unwrap();
        assert!(!ours(&sacct));

        // Once a stranger was seen under the id, nothing Slurm says of it is the attempt's.
        let mut job =
            attempt_job::AttemptJob::new(11, "crew-r-t-1".into(), root.clone(), tag.into());
        assert_eq!(job.see(by_id(11)).map(|j| j.job_id), Some(11));
        assert!(job.see(by_id(13)).is_none());
        assert!(job.see(by_id(11)).is_none());
    }
}
