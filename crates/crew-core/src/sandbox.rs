//! The box's mode (issue 34): read from crewd's config, and handed to a remote node in its
//! staging directory, so both sides decide by the same three words.

use serde::{Deserialize, Serialize};

/// `sandbox`: box every attempt where bubblewrap can (`auto`), refuse to start one that cannot
/// be boxed (`required`), or run attempts unboxed (`off`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    #[default]
    Auto,
    Required,
    Off,
}
