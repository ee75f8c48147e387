//! The `Shard` Durable Object, a short shell over `edgecount_core::shard::engine`, and the
//! SQLite store it runs the engine on.

pub mod durable_object;
pub mod hand_over;
pub mod hand_over_state;
pub mod migration_store;
pub mod object;
pub mod sql_store;
pub mod transaction;
pub mod transfer_store;
pub mod visit_store;
pub mod visit_unions;
pub mod watch_stream;
