//! What a shard is: the protocol the worker speaks to it (with its op table), the engine that
//! runs ops against the shard's tables, and the tables themselves, each behind a store trait
//! that the worker implements over SQLite and [`memory_store`] implements in memory.

pub mod alarm_schedule;
pub mod answer_budget;
pub mod cache_table;
pub mod content_type;
pub mod counter;
pub mod counter_table;
pub mod days_read;
pub mod engine;
pub mod group_commit;
pub mod idempotency;
pub mod memory_store;
pub mod migration;
pub mod owner;
pub mod placement;
pub mod protocol;
pub mod receipt;
pub mod refusal;
pub mod settings;
pub mod transfer;
pub mod visit_table;
pub mod visit_union;
pub mod watchers;

use crate::StoreResult;

/// A store that can run a group of writes as one transaction: a shard call's writes apply
/// wholly or not at all, so no answer ever has to say which of them were kept.
pub trait Atomic {
    /// Runs `writes`; when it answers an error, or the transaction cannot be committed, every
    /// write it made is undone and the error is answered.
    ///
    /// # Errors
    /// The error of `writes`, or a description of the failure to commit.
    fn atomically<T>(&self, writes: impl FnOnce() -> StoreResult<T>) -> StoreResult<T>;
}
