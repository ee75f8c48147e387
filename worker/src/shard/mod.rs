//! The `Shard` Durable Object, a short shell over `edgecount_core::shard::engine`, and the
//! SQLite store it runs the engine on.

pub mod durable_object;
pub mod group;
pub mod namespace_store;
pub mod object;
pub mod resharding;
pub mod sql_store;
pub mod transaction;
pub mod transfer_store;
pub mod visit_store;
pub mod visit_unions;
pub mod watch_stream;
