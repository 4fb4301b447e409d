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

    /// Tokens that count against a budget: input + output + cacheWrite (SPEC §4).
    pub fn budget_tokens(&self) -> u64 {
        self.input + self.output + self.cache_write
    }
}
