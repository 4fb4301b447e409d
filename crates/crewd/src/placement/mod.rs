//! Where a runtime's attempts run. `local` (the default): a process of this daemon, supervised
//! by `executor`. `slurm`: a job on a Slurm cluster running `crew-worker` on a node, handed its
//! input and read back through a staging directory both sides share (`crew_staging`); crewd stays
//! the one durable authority and the job is only ever the attempt's runner.
//!
//! A placement is one module: Kubernetes would be one more next to `slurm` (ARCHITECTURE.md,
//! "Beyond one machine", says what it needs).

use serde::Deserialize;

pub mod slurm;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    #[default]
    Local,
    Slurm,
}
