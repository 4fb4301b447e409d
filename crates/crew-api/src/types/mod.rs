//! Wire types: params and results of every method. camelCase on the wire.

pub mod cache;
pub mod daemon;
pub mod event;
pub mod resource;
pub mod schedule;
pub mod team;
pub mod workspace;

pub use cache::*;
pub use daemon::*;
pub use event::*;
pub use resource::*;
pub use schedule::*;
pub use team::*;
pub use workspace::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Params of methods that take none. Accepts `{}`, `[]` or no params at all.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// An empty result object.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Empty {}

/// Token usage and cost.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// USD.
    pub cost: f64,
    pub turns: u64,
}
