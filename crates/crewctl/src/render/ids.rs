//! Short run ids for tables. A run id is `team_<YYYYMMDDHHMMSS>_<16 hex>`; people type a prefix
//! of the random part (`crewctl status 3f9a1c2e`), so tables show that part, as long as it needs
//! to be to tell the listed runs apart.

/// Shortest prefix shown, as git does: short enough to type, long enough to stay unique.
pub const MIN_SHORT: usize = 8;

/// The random part of a run id in crew's format, else `None` (imported ids of another shape).
pub fn random_part(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("team_")?;
    let (stamp, random) = rest.split_once('_')?;
    let ok = stamp.len() == 14
        && stamp.bytes().all(|b| b.is_ascii_digit())
        && !random.is_empty()
        && random.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then_some(random)
}

/// Whether `s` is typed as a prefix of a random part (hex only, at most the whole part).
pub fn is_prefix_form(s: &str) -> bool {
    !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The short form of each id, unique among `ids`: at least `MIN_SHORT` characters of the
/// random part, more where two listed ids share a longer prefix (runs created in the same
/// second). Ids of another shape are shown whole.
pub fn short_ids(ids: &[&str]) -> Vec<String> {
    let randoms: Vec<Option<&str>> = ids.iter().map(|id| random_part(id)).collect();
    randoms
        .iter()
        .zip(ids)
        .map(|(r, id)| {
            let Some(r) = r else {
                return id.to_string();
            };
            let shared = randoms
                .iter()
                .flatten()
                .filter(|o| *o != r)
                .map(|o| common_prefix(r, o))
                .max()
                .unwrap_or(0);
            let n = (shared + 1).max(MIN_SHORT).min(r.len());
            r.get(..n).unwrap_or(r).to_string()
        })
        .collect()
}

/// The short form of one id on its own.
pub fn short(id: &str) -> String {
    match random_part(id) {
        Some(r) => r.get(..MIN_SHORT).unwrap_or(r).to_string(),
        None => id.to_string(),
    }
}

/// The form hints use: the whole random part (16 characters, unique in practice, where a short
/// form may need more characters once another run is created in the same second).
pub fn hint(id: &str) -> &str {
    random_part(id).unwrap_or(id)
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms() {
        let ids = [
            "team_20260310115500_3f9a1c2e00001111",
            "team_20260310115500_3f9a1c2e00002222",
            "team_20260309080000_a0b1c2d3e4f50617",
            "r-imported-1",
        ];
        assert_eq!(
            short_ids(&ids),
            vec!["3f9a1c2e00001", "3f9a1c2e00002", "a0b1c2d3", "r-imported-1"]
        );
        assert_eq!(short(ids[2]), "a0b1c2d3");
        assert_eq!(hint(ids[2]), "a0b1c2d3e4f50617");
        assert_eq!(hint("r-1"), "r-1");
        assert_eq!(random_part("team_2026_abc"), None);
        assert_eq!(random_part("team_20260310115500_xyz"), None);
        assert!(is_prefix_form("3f9a") && !is_prefix_form("last") && !is_prefix_form(""));
        assert!(!is_prefix_form("r-1"));
    }
}
