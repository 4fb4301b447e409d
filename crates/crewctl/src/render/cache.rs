//! `cache stats`: one row per cache.

use super::table::{Cell, Col, Table};
use super::units::{cost, percent, tokens};
use super::View;
use crew_api::types::{CacheStat, CacheStatsResult};

pub fn stats(view: &View, s: &CacheStatsResult) -> String {
    let mut t = Table::new(vec![
        Col::new("cache"),
        Col::new("entries").right(),
        Col::new("capacity").right().drop(2),
        Col::new("hits").right(),
        Col::new("misses").right(),
        Col::new("evictions").right().drop(1),
        Col::new("hit rate").right(),
        Col::new("saved").right().drop(3),
    ]);
    let mut row = |name: &str, c: &CacheStat, saved: String| {
        let lookups = c.hits + c.misses;
        t.row(vec![
            Cell::new(name),
            Cell::new(c.entries),
            Cell::new(c.capacity),
            Cell::new(c.hits),
            Cell::new(c.misses),
            Cell::new(c.evictions),
            Cell::new(if lookups == 0 {
                "-".to_string()
            } else {
                percent(c.hit_rate)
            }),
            Cell::new(saved),
        ]);
    };
    row("resources", &s.resources, "-".into());
    row(
        "results",
        &s.results.stat,
        if s.results.tokens_saved == 0 && s.results.cost_saved <= 0.0 {
            "-".into()
        } else {
            format!(
                "{} tok · {}",
                tokens(s.results.tokens_saved),
                cost(s.results.cost_saved)
            )
        },
    );
    row("runs", &s.runs, "-".into());
    t.render(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crew_api::types::ResultCacheStat;

    #[test]
    fn cache_stats_snapshot() {
        let s = CacheStatsResult {
            resources: CacheStat {
                hits: 120,
                misses: 40,
                evictions: 0,
                entries: 38,
                capacity: 512,
                hit_rate: 0.75,
            },
            results: ResultCacheStat {
                stat: CacheStat {
                    hits: 7,
                    misses: 13,
                    evictions: 2,
                    entries: 18,
                    capacity: 10_000,
                    hit_rate: 0.35,
                },
                tokens_saved: 123_456,
                cost_saved: 0.4321,
            },
            runs: CacheStat {
                hits: 0,
                misses: 0,
                evictions: 0,
                entries: 0,
                capacity: 100,
                hit_rate: 0.0,
            },
        };
        insta::assert_snapshot!(crate::render::fixtures::at_80_and_160(|v| stats(v, &s)));
    }
}
