//! What a shard is: the protocol the worker speaks to it (with its op table), the engine that
//! runs ops against the shard's tables, and the tables themselves, each behind a store trait
//! that the worker implements over SQLite and [`memory_store`] implements in memory.

pub mod alarm_schedule;
pub mod answer_budget;
pub mod cache_table;
pub mod content_type;
pub mod counter;
pub mod counter_table;
pub mod engine;
pub mod group_commit;
pub mod idempotency;
pub mod memory_store;
pub mod migration;
pub mod owner;
pub mod placement;
pub mod protocol;
pub mod receipt;
pub mod settings;
pub mod transfer;
pub mod watchers;

/// A write of many rows that failed part-way. Stores write rows in order, each statement whole
/// or not at all, so the first `stored` rows are stored and the rest are not: what a caller
/// needs to answer each write truthfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialWrite {
    pub stored: usize,
    pub detail: String,
}
