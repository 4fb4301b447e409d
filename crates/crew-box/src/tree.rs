//! A process's descendants, from `/proc`: the reaper's view of what an attempt left.

use std::collections::{BTreeMap, BTreeSet};

/// The descendants of `root` in a `(pid, parent pid)` table, nearest first. Iterative, so a
/// deep (or, in a racy read, cyclic) table cannot overflow the stack or loop.
pub fn descendants(table: &[(i32, i32)], root: i32) -> Vec<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for &(pid, ppid) in table {
        children.entry(ppid).or_default().push(pid);
    }
    let mut seen = BTreeSet::from([root]);
    let mut out = Vec::new();
    let mut next = vec![root];
    while let Some(p) = next.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
            if seen.insert(c) {
                out.push(c);
                next.push(c);
            }
        }
    }
    out
}

/// The parent pid in a `/proc/<pid>/stat` line (the command name may hold spaces and ')').
pub fn parent_of(stat: &str) -> Option<i32> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Every readable process's `(pid, parent pid)`.
pub fn process_table() -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parent_of(&stat)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_of_a_root() {
        // (table, root, want sorted)
        type Case = (Vec<(i32, i32)>, i32, Vec<i32>);
        let table: Vec<Case> = vec![
            (vec![], 10, vec![]),
            (vec![(11, 10), (12, 11), (13, 1)], 10, vec![11, 12]),
            // A setsid'd grandchild reparented to the subreaper is its child.
            (vec![(11, 10), (14, 10), (15, 14)], 10, vec![11, 14, 15]),
            // A cycle (a racy read of /proc) ends.
            (vec![(11, 12), (12, 11), (12, 10)], 10, vec![11, 12]),
            (vec![(10, 10)], 10, vec![]),
        ];
        for (t, root, want) in table {
            let mut got = descendants(&t, root);
            got.sort();
            assert_eq!(got, want, "{t:?}");
        }
    }

    #[test]
    fn parent_from_stat() {
        for (stat, want) in [
            ("42 (sh) S 7 42 42 0", Some(7)),
            ("42 (a) b) (c) R 9 1 1", Some(9)),
            ("42 (sh", None),
            ("", None),
        ] {
            assert_eq!(parent_of(stat), want, "{stat}");
        }
    }
}
