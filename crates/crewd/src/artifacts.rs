//! Artifact files: written by the code that runs attempts (`crew_attempt::artifacts`), read and
//! listed here too; one implementation, so the daemon and a worker binary name and hash a file
//! the same way.

pub use crew_attempt::artifacts::*;
