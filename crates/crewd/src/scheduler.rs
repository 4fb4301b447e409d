//! Scheduled jobs: timers and firing.

/// The daemon's local IANA zone: `$TZ`, else `/etc/timezone`, else the `/etc/localtime` link,
/// else UTC.
pub fn local_zone() -> String {
    if let Ok(tz) = std::env::var("TZ") {
        let tz = tz.trim_start_matches(':').to_string();
        if tz.parse::<chrono_tz::Tz>().is_ok() {
            return tz;
        }
    }
    if let Ok(s) = std::fs::read_to_string("/etc/timezone") {
        let s = s.trim().to_string();
        if s.parse::<chrono_tz::Tz>().is_ok() {
            return s;
        }
    }
    if let Ok(p) = std::fs::read_link("/etc/localtime") {
        let s = p.display().to_string();
        if let Some(i) = s.find("zoneinfo/") {
            let name = s[i + 9..].to_string();
            if name.parse::<chrono_tz::Tz>().is_ok() {
                return name;
            }
        }
    }
    "UTC".into()
}

use crate::actor::Actor;
use crate::shared::Shared;
use std::sync::Arc;

/// Drives scheduled jobs. (Timers are registered here; firing goes through the actor.)
pub struct Scheduler {}

pub async fn start(_shared: Arc<Shared>, _actor: Actor) -> anyhow::Result<Scheduler> {
    Ok(Scheduler {})
}

impl Scheduler {
    pub async fn shutdown(self) {}
}
