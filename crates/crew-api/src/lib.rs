//! crew's JSON-RPC API, shared by the daemon and every Rust client.
//!
//! SPEC §10: method names use `.`, params are ONE named object, results are objects, fields are
//! camelCase. jsonrpsee's `#[rpc]` macro maps a struct argument to `{"params": {...}}` (or to a
//! positional array), which is not the wire shape crew promises. So each method is a typed
//! descriptor ([`Method`]): its name, its params and result types, and its documentation. The
//! daemon registers handlers through these descriptors, clients call through them, and the
//! OpenRPC document (`rpc.discover`, `proto-docs/`) is generated from the same list, so the three
//! cannot drift apart.

pub mod client;
pub mod error;
pub mod methods;
pub mod openrpc;
pub mod paths;
pub mod types;

pub use error::{codes, ApiError};
pub use methods::{Method, MethodDoc};

/// Version of the API. Bumped on incompatible changes.
pub const API_VERSION: &str = "1.0.0";

/// Notification method name of `team.subscribe`.
pub const EVENT_NOTIFICATION: &str = "team.event";
