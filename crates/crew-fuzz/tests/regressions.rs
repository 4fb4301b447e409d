//! Replays every committed seed and every input that once broke a target (`fuzz/seeds/<target>/`
//! and `fuzz/regressions/<target>/`) through the same functions libFuzzer calls. No fuzzer needed.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn seeds_and_past_crashes_pass() {
    let root = fuzz_dir();
    let mut failures = Vec::new();
    let mut counts = Vec::new();
    for &(name, target) in crew_fuzz::TARGETS {
        let seeds = files(&root.join("seeds").join(name));
        assert!(!seeds.is_empty(), "no seeds for target {name}");
        let regressions = files(&root.join("regressions").join(name));
        counts.push(format!(
            "{name}: {} seeds, {} regressions",
            seeds.len(),
            regressions.len()
        ));
        for file in seeds.iter().chain(&regressions) {
            let data = std::fs::read(file).unwrap();
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                failures.push(file.display().to_string());
            }
        }
    }
    eprintln!("{}", counts.join("\n"));
    assert!(
        failures.is_empty(),
        "inputs that break a target:\n{}",
        failures.join("\n")
    );
}
