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
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.cost += other.cost;
        self.turns += other.turns;
    }

    /// In a sum, replace the part `old` by `new` (one task's usage changed).
    pub fn replace_part(&mut self, old: &Usage, new: &Usage) {
        let swap = |sum: u64, o: u64, n: u64| sum.saturating_sub(o).saturating_add(n);
        self.input = swap(self.input, old.input, new.input);
        self.output = swap(self.output, old.output, new.output);
        self.cache_read = swap(self.cache_read, old.cache_read, new.cache_read);
        self.cache_write = swap(self.cache_write, old.cache_write, new.cache_write);
        self.turns = swap(self.turns, old.turns, new.turns);
        self.cost += new.cost - old.cost;
    }

    /// Tokens that count against a budget: input + output + cacheWrite (SPEC §4).
    pub fn budget_tokens(&self) -> u64 {
        self.input + self.output + self.cache_write
    }
}
