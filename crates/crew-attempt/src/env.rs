//! The environment a worker sees: the daemon's, as bytes, through the allowlist in
//! `crew_core::worker_env`, plus crew's own variables.

use std::ffi::OsString;

pub fn worker_env(extra: &[String], own: &[(&str, String)]) -> Vec<(OsString, OsString)> {
    crew_core::worker_env::filter(std::env::vars_os(), extra, own)
}
