//! Parsing a resource file costs work linear in its size, measured as CPU instructions under
//! valgrind's callgrind (repeatable whatever else the machine does; not a timing). Counting
//! steps inside our own code could not fail on a quadratic scan the counter does not see (the
//! `dependsOn` de-duplication was one: `items.iter().any(..)` per item); instructions see all of
//! it. The test re-runs this binary under callgrind, once per input size, and compares the
//! instructions above an empty input's. Skipped with a note where valgrind is missing
//! (`.ci/run` installs it).

use crew_core::resource::{parse_file, Kind, Source};
use std::path::Path;
use std::process::Command;

/// Set in the child: which input to parse, `<case>:<n>`.
const CHILD: &str = "CREW_LINEAR_PARSING_CHILD";

struct Case {
    name: &'static str,
    kind: Kind,
    path: &'static str,
    make: fn(usize) -> String,
}

const CASES: [Case; 3] = [
    Case {
        name: "dependsOn",
        kind: Kind::Workflow,
        path: "/x/workflows/w.workflow.md",
        make: |n| {
            let deps: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
            format!("## a\nrole: r\ndependsOn: {}\n\ntext\n", deps.join(","))
        },
    },
    Case {
        name: "team roles",
        kind: Kind::Team,
        path: "/x/teams/t.team.md",
        make: |n| (0..n).map(|i| format!("- r{i}: agent=a\n")).collect(),
    },
    Case {
        name: "SKILL.md keys",
        kind: Kind::Skill,
        path: "/x/skills/s/SKILL.md",
        make: |n| {
            let keys: String = (0..n).map(|i| format!("k{i}: v\n")).collect();
            format!("---\nname: s\ndescription: d\n{keys}---\nbody")
        },
    },
];

/// The child's work: build the input and parse it once. Nothing else differs between sizes.
#[test]
fn linear_parsing_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let (name, n) = spec.rsplit_once(':').unwrap();
    let case = CASES.iter().find(|c| c.name == name).unwrap();
    let text = (case.make)(n.parse().unwrap());
    let parsed = parse_file(case.kind, Source::User, case.path, text.as_bytes());
    // Keep the result alive so the parse cannot be optimized away.
    std::hint::black_box(parsed);
}

fn have_valgrind() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Instructions the child executed for `case` at size `n`, from callgrind's totals line.
fn instructions(dir: &Path, case: &str, n: usize) -> u64 {
    let exe = std::env::current_exe().unwrap();
    let out = dir.join(format!("callgrind.{}.{n}", case.replace(' ', "_")));
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg("--quiet")
        .arg(exe)
        .args(["--exact", "linear_parsing_child", "--test-threads=1"])
        .env(CHILD, format!("{case}:{n}"))
        .status()
        .unwrap();
    assert!(status.success(), "callgrind child for {case}:{n}: {status}");
    let text = std::fs::read_to_string(&out).unwrap();
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no totals in {}", out.display()))
}

#[test]
fn four_times_the_items_cost_about_four_times_the_instructions() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    // Without valgrind nothing is measured: fail, never pass.
    assert!(
        have_valgrind(),
        "valgrind is not installed (Debian package `valgrind`); `make test` (tests/run.sh, its HOST table) leaves this test out where that is missing and counts it skipped"
    );
    let dir = tempfile::tempdir().unwrap();
    for case in &CASES {
        let base = instructions(dir.path(), case.name, 0);
        let cost = |n| instructions(dir.path(), case.name, n).saturating_sub(base);
        let (small, big) = (cost(1_000), cost(4_000));
        // Linear: 4x (a little more for longer numbers in the names); quadratic would be 16x.
        let ratio = big as f64 / small.max(1) as f64;
        eprintln!(
            "{}: {small} instructions for 1,000 items, {big} for 4,000: {ratio:.2}x",
            case.name
        );
        assert!(
            small > 10_000 && ratio < 6.0,
            "{}: {small} instructions for 1,000 items, {big} for 4,000 ({ratio:.2}x)",
            case.name
        );
    }
}
