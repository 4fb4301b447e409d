//! What the examples share (a directory without `main.rs`, so cargo does not take it for an
//! example of its own).

/// This process's resident set size in KiB (`VmRSS`), 0 if it cannot be read.
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
