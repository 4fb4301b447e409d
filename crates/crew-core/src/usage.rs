//! Token usage and cost.

use serde::{Deserialize, Serialize};

/// Usage summed over all assistant messages of a task (or all tasks of a run).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// USD.
    pub cost: f64,
    pub turns: u64,
}

impl Usage {
    /// Counts saturate (and the cost stays finite and not negative: `sane_cost`): a worker reports them, and a hostile or broken one may report
    /// `u64::MAX` (an overflow here was a panic in debug builds and a wrap-around in release).
    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.cost = sane_cost(sane_cost(self.cost) + sane_cost(other.cost));
        self.turns = self.turns.saturating_add(other.turns);
    }

    /// The tokens `self` counts beyond `before` (both running totals of one stream), saturating
    /// at zero; no cost or turns.
    pub fn tokens_since(&self, before: &Usage) -> Usage {
        Usage {
            input: self.input.saturating_sub(before.input),
            output: self.output.saturating_sub(before.output),
            cache_read: self.cache_read.saturating_sub(before.cache_read),
            cache_write: self.cache_write.saturating_sub(before.cache_write),
            cost: 0.0,
            turns: 0,
        }
    }

    /// In a sum, replace the part `old` by `new` (one task's usage changed).
    pub fn replace_part(&mut self, old: &Usage, new: &Usage) {
        let swap = |sum: u64, o: u64, n: u64| sum.saturating_sub(o).saturating_add(n);
        self.input = swap(self.input, old.input, new.input);
        self.output = swap(self.output, old.output, new.output);
        self.cache_read = swap(self.cache_read, old.cache_read, new.cache_read);
        self.cache_write = swap(self.cache_write, old.cache_write, new.cache_write);
        self.turns = swap(self.turns, old.turns, new.turns);
        self.cost = sane_cost(self.cost + sane_cost(new.cost) - sane_cost(old.cost));
    }

    /// Tokens that count against a budget: input + output + cacheWrite (SPEC §4).
    pub fn budget_tokens(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_write)
    }
}

/// A cost as a sum keeps it: a worker reports costs (a remote one in its own records), so a
/// sum saturates at the largest finite value instead of becoming infinite (which JSON writes
/// as `null`, a usage no client reads back), and a negative or NaN cost counts as none.
fn sane_cost(c: f64) -> f64 {
    if c.is_nan() || c <= 0.0 {
        0.0
    } else {
        c.min(f64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `stream_opencode` fuzz target: usage near `u64::MAX` from a worker's line.
    #[test]
    fn worker_reported_counts_saturate() {
        let huge = Usage {
            input: u64::MAX,
            output: u64::MAX - 1,
            cache_read: u64::MAX,
            cache_write: 7,
            cost: 0.5,
            turns: u64::MAX,
        };
        assert_eq!(huge.budget_tokens(), u64::MAX);
        let mut sum = huge;
        sum.add(&huge);
        assert_eq!(
            (
                sum.input,
                sum.output,
                sum.cache_read,
                sum.cache_write,
                sum.turns
            ),
            (u64::MAX, u64::MAX, u64::MAX, 14, u64::MAX)
        );
        assert_eq!(sum.cost, 1.0);
    }

    /// A cost is summed over tasks and attempts: two workers each reporting the largest finite
    /// cost (a stream's `total_cost_usd: 1e308`, a remote worker's record) made the sum
    /// infinite, which JSON writes as `null` — a run summary no client could read back. A
    /// negative cost (a remote worker's record, never a stream's) took spending away.
    #[test]
    fn a_cost_sum_stays_finite_and_never_goes_down() {
        let big = Usage {
            cost: f64::MAX,
            ..Usage::default()
        };
        let mut sum = big;
        sum.add(&big);
        assert!(sum.cost.is_finite(), "{}", sum.cost);
        let back: Usage = serde_json::from_str(&serde_json::to_string(&sum).unwrap())
            .expect("the sum reads back");
        assert_eq!(back.cost, f64::MAX);

        let mut run = big;
        run.replace_part(&Usage::default(), &big);
        assert!(run.cost.is_finite(), "{}", run.cost);

        let mut spent = Usage {
            cost: 2.0,
            ..Usage::default()
        };
        spent.add(&Usage {
            cost: -5.0,
            ..Usage::default()
        });
        assert_eq!(spent.cost, 2.0);
        let mut run = spent;
        run.replace_part(
            &Usage::default(),
            &Usage {
                cost: -1.0,
                ..Usage::default()
            },
        );
        assert_eq!(run.cost, 2.0);
    }
}
