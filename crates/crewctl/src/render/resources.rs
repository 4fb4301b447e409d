//! `resources` and `daemon status`.

use super::table::{self, Cell, Col, Table};
use super::time::human_duration_ms;
use super::units::bytes;
use super::{diag, View};
use crate::style::Tone;
use crew_api::types::{DaemonStatus, Diagnostic, ResourceEntry, ResourceListResult, Severity};
use std::fmt::Write as _;

pub fn list(view: &View, r: &ResourceListResult) -> String {
    let groups: [(&str, &[ResourceEntry]); 4] = [
        ("agent", &r.agents),
        ("team", &r.teams),
        ("workflow", &r.workflows),
        ("skill", &r.skills),
    ];
    let mut out = String::new();
    if groups.iter().all(|(_, g)| g.is_empty()) {
        out.push_str("No resources.\n");
    } else {
        let mut t = Table::new(vec![
            Col::new("kind"),
            Col::new("name"),
            Col::new("source").drop(1),
            Col::new("problems"),
            Col::new("description").cut(12),
        ]);
        for (kind, entries) in groups {
            for e in entries {
                let source_tone = match e.source.as_str() {
                    "builtin" => Tone::Dim,
                    "project" => Tone::Accent,
                    _ => Tone::Active,
                };
                t.row(vec![
                    Cell::new(kind),
                    Cell::new(&e.name),
                    table::toned(view, source_tone, &e.source),
                    problems(view, e, &r.diagnostics),
                    Cell::new(view.cut(&e.description, 90)),
                ]);
            }
        }
        out.push_str(&t.render(view));
    }
    if !r.diagnostics.is_empty() {
        out.push('\n');
        out.push_str(&diag::lines(view, &r.diagnostics));
    }
    out
}

/// `✗ invalid` when a diagnostic of the resource's file is an error (the resource cannot be
/// used as it is), `! 2 warnings` when there are only warnings, else nothing.
fn problems(view: &View, e: &ResourceEntry, ds: &[Diagnostic]) -> Cell {
    let mine = ds.iter().filter(|d| d.path == e.path);
    let (errors, warnings) = mine.fold((0usize, 0usize), |(er, w), d| match d.severity {
        Severity::Error => (er + 1, w),
        Severity::Warning => (er, w + 1),
    });
    if errors > 0 {
        table::toned(view, Tone::Bad, "✗ invalid")
    } else if warnings > 0 {
        let s = if warnings == 1 { "" } else { "s" };
        table::toned(view, Tone::Warn, format!("! {warnings} warning{s}"))
    } else {
        Cell::new("")
    }
}

pub fn daemon_status(view: &View, s: &DaemonStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {} (pid {}, up {})",
        view.p(Tone::Ok, "● crewd"),
        s.version,
        s.pid,
        human_duration_ms(s.uptime_ms)
    );
    let mut field = |name: &str, value: String| {
        let _ = writeln!(out, "  {} {value}", view.p(Tone::Dim, format!("{name:<9}")));
    };
    field("api", s.api_version.clone());
    field("socket", s.socket.clone());
    field("state", s.state_dir.clone());
    field(
        "runs",
        format!(
            "{} active · {} total · {} resident",
            s.runs.active, s.runs.total, s.runs.resident
        ),
    );
    field(
        "workers",
        format!("{} running of {}", s.workers.running, s.workers.max),
    );
    field(
        "schedules",
        format!("{} enabled of {}", s.schedules.enabled, s.schedules.total),
    );
    field(
        "journal",
        format!("seq {} · {}", s.journal.last_seq, bytes(s.journal.bytes)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crew_api::types::*;

    #[test]
    fn resources_and_daemon_snapshot() {
        let e = |name: &str, source: &str, d: &str| ResourceEntry {
            name: name.into(),
            source: source.into(),
            description: d.into(),
            path: format!("/x/{name}.md"),
        };
        let r = ResourceListResult {
            agents: vec![
                e("explorer", "builtin", "Maps the code base"),
                e("executor", "project", "Project executor"),
            ],
            teams: vec![e("default", "builtin", "Explore, plan, execute, verify")],
            workflows: vec![e("broken", "project", "A cycle")],
            skills: vec![],
            diagnostics: vec![
                Diagnostic {
                    path: "/x/executor.md".into(),
                    line: Some(4),
                    field: Some("tools".into()),
                    severity: Severity::Warning,
                    message: "unknown tool `bogus`; ignored".into(),
                },
                Diagnostic {
                    path: "/x/broken.md".into(),
                    line: Some(9),
                    field: Some("dependsOn".into()),
                    severity: Severity::Error,
                    message: "dependency cycle: a -> b -> a".into(),
                },
                Diagnostic {
                    path: "/x/broken.md".into(),
                    line: Some(6),
                    field: Some("role".into()),
                    severity: Severity::Error,
                    message: "unknown role `nobody`".into(),
                },
            ],
        };
        let d = DaemonStatus {
            version: "0.1.0".into(),
            api_version: "1.0.0".into(),
            pid: 4242,
            uptime_ms: 3_725_000,
            socket: "/run/user/1000/crew/crewd.sock".into(),
            state_dir: "/home/u/.local/state/crew".into(),
            runs: RunCounts {
                active: 2,
                total: 40,
                resident: 12,
            },
            schedules: ScheduleCounts {
                total: 3,
                enabled: 2,
            },
            journal: JournalStatus {
                last_seq: 123_456,
                bytes: 5 * 1024 * 1024,
            },
            workers: WorkerCounts { running: 3, max: 8 },
            containment: "pid-namespace".into(),
            sandbox: "off".into(),
        };
        insta::assert_snapshot!(crate::render::fixtures::at_80_and_160(|v| format!(
            "{}\n{}",
            list(v, &r),
            daemon_status(v, &d)
        )));
    }
}
