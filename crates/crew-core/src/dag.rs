//! Dependency graphs: cycle detection that names the cycle, topological order.

/// Find a dependency cycle among `nodes` (id, deps). Returns the cycle as a path that starts and
/// ends with the same id, e.g. `["a", "b", "a"]`. Unknown deps are ignored here (they are
/// reported separately).
pub fn find_cycle(nodes: &[(String, Vec<String>)]) -> Option<Vec<String>> {
    use std::collections::HashMap;
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (id.as_str(), i))
        .collect();
    // 0 = unvisited, 1 = on stack, 2 = done
    let mut mark = vec![0u8; nodes.len()];
    let mut stack: Vec<usize> = Vec::new();
    fn visit(
        i: usize,
        nodes: &[(String, Vec<String>)],
        index: &HashMap<&str, usize>,
        mark: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<String>> {
        mark[i] = 1;
        stack.push(i);
        for dep in &nodes[i].1 {
            let Some(&j) = index.get(dep.as_str()) else {
                continue;
            };
            if mark[j] == 1 {
                let start = stack.iter().position(|&k| k == j).unwrap_or(0);
                let mut cycle: Vec<String> =
                    stack[start..].iter().map(|&k| nodes[k].0.clone()).collect();
                cycle.push(nodes[j].0.clone());
                return Some(cycle);
            }
            if mark[j] == 0 {
                if let Some(c) = visit(j, nodes, index, mark, stack) {
                    return Some(c);
                }
            }
        }
        stack.pop();
        mark[i] = 2;
        None
    }
    for i in 0..nodes.len() {
        if mark[i] == 0 {
            if let Some(c) = visit(i, nodes, &index, &mut mark, &mut stack) {
                return Some(c);
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
        ];
        for (nodes, want) in cases {
            let got = find_cycle(nodes);
            let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{nodes:?}");
        }
    }
}
