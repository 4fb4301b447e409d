//! Dependency graphs: cycle detection that names the cycle, topological order.

/// Find a dependency cycle among `nodes` (id, deps). Returns the cycle as a path that starts and
/// ends with the same id, e.g. `["a", "b", "a"]`. Unknown deps are ignored here (they are
/// reported separately).
///
/// Iterative (an explicit stack of `(node, next dep)` frames): the graph comes from a file, and a
/// recursion per step let a 10,000-step `dependsOn` chain overflow the thread's stack.
pub fn find_cycle(nodes: &[(String, Vec<String>)]) -> Option<Vec<String>> {
    use std::collections::HashMap;
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(nodes.len());
    for (i, (id, _)) in nodes.iter().enumerate() {
        // The first of duplicate ids is the one edges point at (duplicates are reported apart).
        index.entry(id.as_str()).or_insert(i);
    }
    // 0 = unvisited, 1 = on the path, 2 = done
    let mut mark = vec![0u8; nodes.len()];
    // Position of each on-path node in `path`, so a cycle is cut out without a scan.
    let mut pos = vec![0usize; nodes.len()];
    let mut path: Vec<(usize, usize)> = Vec::new();
    for root in 0..nodes.len() {
        if mark.get(root) != Some(&0) {
            continue;
        }
        path.push((root, 0));
        mark[root] = 1;
        pos[root] = 0;
        while let Some(&mut (i, ref mut next)) = path.last_mut() {
            let deps = nodes.get(i).map(|n| n.1.as_slice()).unwrap_or_default();
            let Some(dep) = deps.get(*next) else {
                mark[i] = 2;
                path.pop();
                continue;
            };
            *next += 1;
            let Some(&j) = index.get(dep.as_str()) else {
                continue;
            };
            match mark.get(j) {
                Some(1) => {
                    let start = pos.get(j).copied().unwrap_or(0);
                    let mut cycle: Vec<String> = path
                        .get(start..)
                        .unwrap_or_default()
                        .iter()
                        .map(|&(k, _)| nodes[k].0.clone())
                        .collect();
                    cycle.push(nodes[j].0.clone());
                    return Some(cycle);
                }
                Some(0) => {
                    mark[j] = 1;
                    pos[j] = path.len();
                    path.push((j, 0));
                }
                _ => {}
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(id: &str, deps: &[&str]) -> (String, Vec<String>) {
        (id.to_string(), deps.iter().map(|d| d.to_string()).collect())
    }

    type Case<'a> = (&'a [(String, Vec<String>)], Option<&'a [&'a str]>);

    #[test]
    fn cycles() {
        let cases: &[Case] = &[
            (&[n("a", &[]), n("b", &["a"])], None),
            (&[n("a", &["b"]), n("b", &["a"])], Some(&["a", "b", "a"])),
            (&[n("a", &["a"])], Some(&["a", "a"])),
            (
                &[n("a", &[]), n("b", &["c"]), n("c", &["d"]), n("d", &["b"])],
                Some(&["b", "c", "d", "b"]),
            ),
            (&[n("a", &["zzz"])], None),
            (&[n("a", &["b", "c"]), n("b", &["c"]), n("c", &[])], None),
            (
                &[n("a", &["b"]), n("b", &["c"]), n("c", &["b"])],
                Some(&["b", "c", "b"]),
            ),
        ];
        for (nodes, want) in cases {
            let got = find_cycle(nodes);
            let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{nodes:?}");
        }
    }

    /// A chain far deeper than any stack: the check is iterative.
    #[test]
    fn deep_chains_do_not_recurse() {
        let depth = 200_000;
        let mut nodes: Vec<(String, Vec<String>)> = (0..depth)
            .map(|i| {
                (
                    format!("s{i}"),
                    if i == 0 {
                        vec![]
                    } else {
                        vec![format!("s{}", i - 1)]
                    },
                )
            })
            .collect();
        // Visit from the far end first.
        nodes.reverse();
        assert_eq!(find_cycle(&nodes), None);
        nodes.last_mut().unwrap().1.push(format!("s{}", depth - 1));
        let cycle = find_cycle(&nodes).expect("closing the chain makes a cycle");
        assert_eq!(cycle.len(), depth + 1);
        assert_eq!(cycle.first(), cycle.last());
    }
}
